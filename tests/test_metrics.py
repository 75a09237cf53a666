"""Metrics on the Kubernetes plane (issue 20): kube-prometheus-stack rendered with the real chart at its
pinned version (`helm template` of ../shared/charts), its Prometheus selecting the GPU Operator's
dcgm-exporter ServiceMonitor, the PrometheusRule and ServiceMonitors valid against the chart's own
CRDs, every alert expression parsed by a PromQL parser and naming only metrics their exporters emit,
the DCGM dashboard, GDRCopy, and options.metrics site.

Consumers: helm (scripts/install_helm.py), the pinned charts, promql-parser (PyPI: the Rust
promql-parser crate's Python binding, the parser GreptimeDB uses; promtool is not installable from
the registries here)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from generator.catalog import CATALOG
from generator.render.kubernetes import gpu_operator, helm, kueue, metrics
from generator.validate.crds import CRDRegistry
from tests._consumers import REPO, charts_dir, require, tool
from tests.support import plan_of

EXAMPLES = REPO / "examples"
KPS = CATALOG["kube-prometheus-stack"]

# The metrics the alerts read besides DCGM's, each from the exporter's source:
OTHER_METRICS = {
    # prometheus/node_exporter collector/infiniband_linux.go (port_rcv_data / port_xmit_data)
    "node_infiniband_port_data_received_bytes_total": "node-exporter",
    "node_infiniband_port_data_transmitted_bytes_total": "node-exporter",
    # aws-samples/awsome-distributed-training 4.validation_and_observability/3.efa-node-exporter: the
    # node_exporter fork's amazonefa collector (hw_counters tx_bytes / rx_bytes, counters without _total)
    "node_amazonefa_rx_bytes": "efa-node-exporter",
    "node_amazonefa_tx_bytes": "efa-node-exporter",
    # kubernetes-sigs/kueue v0.19.2 pkg/metrics/metrics.go (Subsystem kueue, Name pending_workloads)
    "kueue_pending_workloads": "kueue",
    # volcano-sh/volcano pkg/scheduler/metrics/queue.go (Subsystem volcano, queue_pod_group_pending_count)
    "volcano_queue_pod_group_pending_count": "volcano",
}


def _charts() -> Path:
    return charts_dir()


def dcgm_default_counters() -> set[str]:
    """The fields dcgm-exporter emits by default: the uncommented lines of the default counters its
    chart (4.8.2) ships, the same CSV as the image's etc/default-counters.csv."""
    text = (_charts() / "dcgm-exporter" / "4.8.2" / "templates" / "metrics-configmap.yaml").read_text()
    out = set()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("DCGM_FI_"):
            out.add(line.split(",")[0].strip())
    assert len(out) > 10, "the default counters CSV was not found where it was"
    return out


def helm_template(component: str, version: str, namespace: str, values: dict, kube: str, tmp: Path) -> list[dict]:
    chart = _charts() / component / version
    require(chart.is_dir(), f"chart {component} {version} not in {_charts()}")
    vfile = tmp / f"{component}.values.yaml"
    vfile.write_text(yaml.safe_dump(values))
    env = {**os.environ, **{k: str(tmp / k.lower()) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}}
    out = subprocess.run([tool("helm"), "template", component, str(chart), "-n", namespace, "-f", str(vfile),
                          "--kube-version", kube], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    # a `kind: List` (the chart renders additionalServiceMonitors as one) is applied as its items
    return [i for d in docs for i in (d.get("items") or [] if d.get("kind") == "List" else [d])]


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions) against `labels`; {} selects all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        has, val = e["key"] in labels, labels.get(e["key"])
        op = e["operator"]
        if (op == "In" and val not in e["values"]) or (op == "NotIn" and has and val in e["values"]) \
                or (op == "Exists" and not has) or (op == "DoesNotExist" and has):
            return False
    return True


@pytest.fixture(scope="module")
def kueue_plan():
    return plan_of(EXAMPLES / "baremetal-k8s-training.yaml")


@pytest.fixture(scope="module")
def rendered(kueue_plan, tmp_path_factory):
    """kube-prometheus-stack rendered once with the bare-metal Kueue example's values."""
    plan = kueue_plan
    values = helm.VALUES["kube-prometheus-stack"](plan)
    return helm_template("kube-prometheus-stack", KPS.version, KPS.namespace, values, plan.kubernetes_version,
                         tmp_path_factory.mktemp("kps"))


@pytest.fixture(scope="module")
def monitoring_crds():
    return CRDRegistry.from_dir(_charts() / "kube-prometheus-stack" / KPS.version / "charts" / "crds" / "crds")


def _kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o.get("kind") == kind]


def test_plan_installs_it_by_default_and_names_the_prometheus_address(kueue_plan):
    assert "kube-prometheus-stack" in kueue_plan.charts
    assert kueue_plan.charts["kube-prometheus-stack"].namespace == "monitoring"
    # the address issue 21's serving work reads
    assert metrics.prometheus_url(kueue_plan) == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    rels = {r["name"]: r for r in helm.releases(kueue_plan)}
    assert rels["kueue"]["dependsOn"] == ["kube-prometheus-stack"]  # its ServiceMonitor needs the CRD
    assert "monitoring.coreos.com" in rels["kube-prometheus-stack"]["crds"]


def test_the_rendered_prometheus_answers_at_that_address(kueue_plan, rendered):
    url = metrics.prometheus_url(kueue_plan)
    m = re.fullmatch(r"http://([^.]+)\.([^.]+)\.svc:(\d+)", url)
    name, ns, port = m.group(1), m.group(2), int(m.group(3))
    services = [s for s in _kind(rendered, "Service") if s["metadata"]["name"] == name]
    assert services and services[0]["metadata"]["namespace"] == ns
    assert port in [p["port"] for p in services[0]["spec"]["ports"]]
    prom = [p for p in _kind(rendered, "Prometheus") if p["metadata"]["name"] == name]
    assert prom, "no Prometheus resource behind the service"
    assert _selects(services[0]["spec"]["selector"], {"app.kubernetes.io/name": "prometheus",
                                                      "operator.prometheus.io/name": name})


def test_prometheus_selects_the_gpu_operators_dcgm_servicemonitor(rendered):
    """The GPU Operator creates ServiceMonitor nvidia-dcgm-exporter in its namespace with labels
    {app: nvidia-dcgm-exporter} plus dcgmExporter.serviceMonitor.additionalLabels (none here):
    NVIDIA/gpu-operator assets/state-dcgm-exporter. The rendered Prometheus must select it, and
    the chart's own default (a `release` label selector) would not."""
    prom = _kind(rendered, "Prometheus")[0]["spec"]
    dcgm = {"app": "nvidia-dcgm-exporter"}
    gpu_ns = {"kubernetes.io/metadata.name": "gpu-operator"}
    assert _selects(prom.get("serviceMonitorSelector"), dcgm)
    assert _selects(prom.get("serviceMonitorNamespaceSelector"), gpu_ns)
    assert not _selects({"matchLabels": {"release": "kube-prometheus-stack"}}, dcgm)  # the default would miss it
    # and Kueue's own ServiceMonitor (its chart's labels, no `release`)
    assert _selects(prom.get("serviceMonitorSelector"), {"app.kubernetes.io/name": "kueue"})


def test_rules_and_monitors_validate_against_the_charts_crds(rendered, monitoring_crds):
    rules = _kind(rendered, "PrometheusRule")
    ours = [r for r in rules if r["metadata"]["name"] == "kube-prometheus-stack-orchgen-gpu"]
    assert ours, [r["metadata"]["name"] for r in rules]
    monitors = _kind(rendered, "ServiceMonitor")
    assert monitors
    for obj in rules + monitors:
        assert monitoring_crds.validate(obj) == [], (obj["kind"], obj["metadata"]["name"])
    # the Prometheus picks our rule up: its ruleSelector matches the rule's labels
    prom = _kind(rendered, "Prometheus")[0]["spec"]
    assert _selects(prom.get("ruleSelector"), ours[0]["metadata"]["labels"])
    alerts = {r["alert"] for g in ours[0]["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert {"GPUXidError", "GPUUtilizationLow", "NVLinkIdleWhileGPUsBusy", "RDMAIdleWhileGPUsBusy",
            "GangJobsStuckPending"} <= alerts


def test_a_broken_rule_fails_the_crd_check(rendered, monitoring_crds):
    """The check above can fail: a rule without its expression is refused by the CRD's schema."""
    rule = json.loads(json.dumps(next(r for r in _kind(rendered, "PrometheusRule")
                                      if r["metadata"]["name"].endswith("orchgen-gpu"))))
    del rule["spec"]["groups"][0]["rules"][0]["expr"]
    assert monitoring_crds.validate(rule)


def test_node_exporter_and_dcgm_series_carry_the_node_name(kueue_plan, rendered):
    ne = [m for m in _kind(rendered, "ServiceMonitor") if "node-exporter" in m["metadata"]["name"]]
    assert ne
    relabel = ne[0]["spec"]["endpoints"][0].get("relabelings", [])
    assert metrics.NODE_RELABELING in relabel
    gpu = gpu_operator.values(kueue_plan)["dcgmExporter"]["serviceMonitor"]
    assert gpu["relabelings"] == [metrics.NODE_RELABELING]


def test_the_dcgm_dashboard_is_provisioned(rendered):
    cms = [c for c in _kind(rendered, "ConfigMap") if c["metadata"]["name"] == "kube-prometheus-stack-grafana-dashboards-gpu"]
    assert cms, "no dashboard ConfigMap"
    board = json.loads(cms[0]["data"]["dcgm-exporter.json"])
    assert board["title"] == "NVIDIA DCGM Exporter Dashboard"
    fields = set(re.findall(r"DCGM_FI_[A-Z0-9_]+", json.dumps(board)))
    assert fields and fields <= dcgm_default_counters()
    grafana = [d for d in _kind(rendered, "Deployment") if d["metadata"]["name"] == "kube-prometheus-stack-grafana"][0]
    mounts = [m["mountPath"] for c in grafana["spec"]["template"]["spec"]["containers"] for m in c.get("volumeMounts", [])]
    assert "/var/lib/grafana/dashboards/gpu/dcgm-exporter.json" in mounts


def _has_parser() -> bool:
    import importlib.util

    return importlib.util.find_spec("promql_parser") is not None


def _metric_names(expr: str) -> set[str]:
    import promql_parser

    names: set[str] = set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit, None)  # raises on a syntax error
    return names


@pytest.mark.parametrize("gang", ["kueue", "volcano"])
def test_every_expression_parses_and_reads_emitted_metrics(gang):
    require(_has_parser(), "promql-parser not installed (pip install -e .[test])")
    plan = plan_of(EXAMPLES / "baremetal-k8s-training.yaml", gang_scheduler=gang)
    groups = metrics.rules(plan)
    records = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    known = dcgm_default_counters() | set(OTHER_METRICS) | records
    seen: set[str] = set()
    for g in groups:
        for rule in g["rules"]:
            names = _metric_names(rule["expr"])
            assert names, rule
            assert names <= known, (rule.get("alert") or rule.get("record"), names - known)
            seen |= names
    assert "DCGM_FI_DEV_XID_ERRORS" in seen and "DCGM_FI_DEV_GPU_UTIL" in seen
    assert {"kueue": "kueue_pending_workloads", "volcano": "volcano_queue_pod_group_pending_count"}[gang] in seen


def test_efa_fabric_alert_reads_the_efa_exporters_counters():
    """On EFA, node_exporter's infiniband series carry no EFA traffic: the fabric alert reads the EFA node
    exporter's node_amazonefa_* instead, and a GPU node without them is named (EFAMetricsMissing)."""
    require(_has_parser(), "promql-parser not installed (pip install -e .[test])")
    plan = plan_of(EXAMPLES / "eks-training.yaml")
    assert plan.platform.network is not None and plan.platform.network.kind == "efa"
    rules = {r.get("alert") or r["record"]: r for g in metrics.rules(plan) for r in g["rules"]}
    idle = _metric_names(rules["RDMAIdleWhileGPUsBusy"]["expr"])
    assert {"node_amazonefa_rx_bytes", "node_amazonefa_tx_bytes"} <= idle
    assert not any(n.startswith("node_infiniband") for r in rules.values() for n in _metric_names(r["expr"]))
    assert "node_amazonefa_tx_bytes" in _metric_names(rules["EFAMetricsMissing"]["expr"])
    assert metrics.readme(plan)["efa"] is True
    # and the bare-metal InfiniBand plane keeps node_exporter's port counters
    ib = {r.get("alert"): r for g in metrics.rules(plan_of(EXAMPLES / "baremetal-k8s-training.yaml"))
          for r in g["rules"]}
    assert "node_infiniband_port_data_received_bytes_total" in _metric_names(ib["RDMAIdleWhileGPUsBusy"]["expr"])
    assert "EFAMetricsMissing" not in ib


def test_the_parser_refuses_a_broken_expression():
    require(_has_parser(), "promql-parser not installed (pip install -e .[test])")
    import promql_parser
    with pytest.raises(Exception):
        promql_parser.parse("max by (node) (rate(DCGM_FI_DEV_XID_ERRORS[5m])")


def test_kueue_chart_renders_its_servicemonitor(kueue_plan, tmp_path, monitoring_crds):
    values = kueue.values(kueue_plan)
    assert values["enablePrometheus"] is True
    k = CATALOG["kueue"]
    objs = helm_template("kueue", k.version, k.namespace, values, kueue_plan.kubernetes_version, tmp_path)
    monitors = _kind(objs, "ServiceMonitor")
    assert len(monitors) == 1 and monitoring_crds.validate(monitors[0]) == []


def test_volcano_scheduler_is_scraped(tmp_path, monitoring_crds):
    plan = plan_of(EXAMPLES / "aks-inference.yaml")
    assert plan.gang_scheduler == "volcano"
    objs = helm_template("kube-prometheus-stack", KPS.version, KPS.namespace, metrics.values(plan),
                         plan.kubernetes_version, tmp_path)
    mon = [m for m in _kind(objs, "ServiceMonitor") if m["metadata"]["name"].endswith("volcano-scheduler")]
    assert mon and monitoring_crds.validate(mon[0]) == []
    # the Service the volcano chart renders carries the selected label and port
    v = CATALOG["volcano"]
    vobjs = helm_template("volcano", v.version, v.namespace, helm.VALUES["volcano"](plan), plan.kubernetes_version,
                          tmp_path)
    svc = [s for s in _kind(vobjs, "Service") if _selects(mon[0]["spec"]["selector"], s["metadata"].get("labels", {}))]
    assert svc and "metrics" in [p.get("name") for p in svc[0]["spec"]["ports"]]


def test_gdrcopy_on_where_the_operator_runs_the_driver(kueue_plan, tmp_path):
    values = gpu_operator.values(kueue_plan)
    assert values["gdrcopy"] == {"enabled": True} and values["driver"]["enabled"] is True
    g = CATALOG["gpu-operator"]
    objs = helm_template("gpu-operator", g.version, g.namespace, values, kueue_plan.kubernetes_version, tmp_path)
    policy = _kind(objs, "ClusterPolicy")[0]["spec"]
    assert policy["gdrcopy"]["enabled"] is True
    # GPU health: the device plugin's NVML XID checks withdraw a failing GPU; nothing turns them off
    # (k8s-device-plugin internal/rm/health.go reads DP_DISABLE_HEALTHCHECKS)
    env = {e["name"] for e in policy["devicePlugin"].get("env") or []}
    assert "DP_DISABLE_HEALTHCHECKS" not in env
    assert policy["dcgmExporter"]["serviceMonitor"]["relabelings"] == [metrics.NODE_RELABELING]
    # not where the node image owns the driver (the sidecar needs the operator's driver pod)
    for example in ("eks-training.yaml", "gke-training.yaml"):
        assert "gdrcopy" not in gpu_operator.values(plan_of(EXAMPLES / example))


def test_site_metrics_install_nothing_and_name_the_sites_prometheus():
    url = "http://prometheus.observability.svc:9090"
    plan = plan_of(EXAMPLES / "baremetal-k8s-training.yaml", metrics="site", prometheus_url=url)
    assert "kube-prometheus-stack" not in plan.charts
    assert metrics.prometheus_url(plan) == url
    assert "enablePrometheus" not in kueue.values(plan)
    assert "relabelings" not in gpu_operator.values(plan)["dcgmExporter"]["serviceMonitor"]
    assert [r["name"] for r in helm.releases(plan) if r["name"] == "kueue"][0] and \
        [r for r in helm.releases(plan) if r["name"] == "kueue"][0]["dependsOn"] == []


def _fleet_text(options: str) -> str:
    text = (EXAMPLES / "baremetal-k8s-training.yaml").read_text()
    assert "\noptions:\n" in text
    return text.replace("\noptions:\n", "\noptions:\n" + options, 1)


@pytest.mark.parametrize("options,field,pattern", [
    ("  metrics: site\n", "options.metrics", "needs options.prometheus_url"),
    # a credential in any field is refused at load, before the field's own check (issue 40)
    ("  metrics: site\n  prometheus_url: https://admin:hunter2@prom.example.com\n", "options.prometheus_url",
     "looks like a credential (a user or password in a URL)"),
    ("  metrics: site\n  prometheus_url: ftp://prom\n", "options.prometheus_url", "not an http"),
    ("  metrics: site\n  prometheus_url: https://prom/api?token=hunter2\n", "options.prometheus_url",
     "looks like a credential (a token in a URL's query string)"),
    ("  prometheus_url: http://prom:9090\n", "options.prometheus_url", "options.metrics install"),
    ("  metrics: bring-your-own\n", "options.metrics", ""),
])
def test_bad_metrics_options(tmp_path, orchgen, options, field, pattern):
    path = tmp_path / "fleet.yaml"
    path.write_text(_fleet_text(options))
    out = tmp_path / "out"
    proc = orchgen("plan", path, "-o", out)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert re.search(rf"{path}:\d+:.*{re.escape(field)}", lines[0]), lines[0]
    assert pattern in lines[0]
    assert "hunter2" not in proc.stderr
    assert not out.exists()


def test_values_keys_exist_in_the_chart_and_its_subcharts(kueue_plan):
    """Helm values are checked against the chart's defaults merged with its subcharts' (grafana's
    dashboards and dashboardProviders are keys of the grafana subchart): ours pass, a typo does not."""
    from generator.validate.values import load_defaults, unknown_keys
    from tests._consumers import reference_dir

    defaults = load_defaults(reference_dir() / KPS.values_reference / "values.yaml")
    assert unknown_keys(metrics.values(kueue_plan), defaults) == []
    assert unknown_keys({"grafana": {"dashboardz": {"gpu": {}}}}, defaults) == ["grafana.dashboardz: unknown key"]
