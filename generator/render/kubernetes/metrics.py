"""Metrics of the Kubernetes plane: the kube-prometheus-stack release's values (options.metrics
install), with the GPU dashboard and the GPU/fabric/queue alerts, and the Prometheus address either
way (`prometheus_url`: the release's service, or the site's options.prometheus_url).

What it scrapes:
- the GPU Operator's dcgm-exporter through the ServiceMonitor the operator creates
  (`nvidia-dcgm-exporter` in the operator's namespace, labelled `app: nvidia-dcgm-exporter`, no
  `release` label): the Prometheus here selects every ServiceMonitor of every namespace;
- node-exporter (in the chart), whose infiniband collector (on by default) reads the RDMA ports'
  counters from /sys/class/infiniband (InfiniBand, RoCE and EFA devices alike);
- the gang scheduler: Kueue's own ServiceMonitor (its chart's `enablePrometheus`), Volcano's scheduler
  service through one ServiceMonitor here.

Every metric an alert reads is one its exporter emits (tests/test_metrics.py holds each DCGM field to
dcgm-exporter's default counters, the CSV its chart and image ship); the sources of the others are
named at their rule.
"""
from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ... import schedulers
from ...decide.plan import Plan

RELEASE = "kube-prometheus-stack"
# The chart names its Prometheus service <fullname>-prometheus, fullname being the release name when
# it contains the chart's name (templates/_helpers.tpl "kube-prometheus-stack.fullname"), port 9090
# (values.yaml prometheus.service.port).
PROMETHEUS_SERVICE = f"{RELEASE}-prometheus"
PROMETHEUS_PORT = 9090

# The upstream DCGM dashboard: NVIDIA/dcgm-exporter grafana/dcgm-exporter-dashboard.json, byte for
# byte at tag 4.5.3-4.8.2 (691c92762eb5, the source of the dcgm-exporter chart 4.8.2 in ../shared/charts;
# also grafana.com dashboard 12239). Apache-2.0, as dcgm-exporter.
DASHBOARD_FILE = "dcgm-exporter-dashboard.json"
DASHBOARD_PROVIDER = "gpu"

# Node label the scraped series carry the Kubernetes node name in, on dcgm-exporter's and
# node-exporter's series alike, so that a rule can join GPUs and RDMA ports of one node.
NODE_LABEL = "node"
NODE_RELABELING = {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                   "targetLabel": NODE_LABEL}


def installed(plan: Plan) -> bool:
    return RELEASE in plan.charts


def prometheus_url(plan: Plan) -> str | None:
    """Where the plane's Prometheus answers: the release's service, or the site's own; None without
    a Kubernetes plane (or with options.metrics site and no URL, which the input checks refuse)."""
    if plan.kube_plane is None:
        return None
    if installed(plan):
        ns = plan.charts[RELEASE].namespace
        return f"http://{PROMETHEUS_SERVICE}.{ns}.svc:{PROMETHEUS_PORT}"
    return plan.site_prometheus_url


def dashboard_json() -> str:
    return resources.files("generator.templates").joinpath("dashboards", DASHBOARD_FILE).read_text()


def _rdma(plan: Plan) -> bool:
    net = plan.platform.network
    return net is not None and net.kind in ("rdma-shared", "efa")


def _nvlink(plan: Plan) -> bool:
    """Some Kubernetes GPU pool has more than one GPU per node: NVLink (or PCIe) between them."""
    kube = plan.kube_plane
    return kube is not None and any(s.gpu_type and (s.gpus_per_node or 0) > 1 for s in kube.slices)


def rules(plan: Plan) -> list[dict[str, Any]]:
    """The PrometheusRule groups: GPU health, GPU use, fabric throughput, gang jobs stuck pending."""
    gpu: list[dict[str, Any]] = [
        # DCGM_FI_DEV_XID_ERRORS is "Value of the last XID error encountered" (a gauge; default counters):
        # any XID in the window. Which XIDs need a reset or an RMA: NVIDIA's XID catalog.
        {"alert": "GPUXidError", "expr": "max by (node, gpu) (max_over_time(DCGM_FI_DEV_XID_ERRORS[5m])) > 0",
         "labels": {"severity": "critical"},
         "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }}",
                         "description": "An XID error: the device plugin withdraws the GPU on a critical one; "
                                        "cordon and drain the node if it needs a reset (bundle README, GPU health)."}},
        # Row remapping (A100 and later): a failed remap or pending uncorrectable remaps mean the GPU
        # needs a reset or a replacement (NVIDIA's "Row Remapping" guide); both are default counters.
        {"alert": "GPURowRemapFailure",
         "expr": "max by (node, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0 or max by (node, gpu) "
                 "(increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h])) > 0",
         "labels": {"severity": "critical"},
         "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} has uncorrectable memory errors"}},
        # A GPU that a pod holds (dcgm-exporter's pod mapping puts the pod in `exported_pod`, the
        # ServiceMonitor's honorLabels being false) and that idles for 30 minutes.
        {"alert": "GPUUtilizationLow",
         "expr": 'avg by (node, gpu, exported_namespace, exported_pod) '
                 '(avg_over_time(DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}[30m])) < 10',
         "for": "30m", "labels": {"severity": "warning"},
         "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} held by "
                                    "{{ $labels.exported_namespace }}/{{ $labels.exported_pod }} is under 10% busy"}},
    ]
    fabric: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = [
        {"record": "node:gpu_utilization:avg", "expr": "avg by (node) (DCGM_FI_DEV_GPU_UTIL)"},
    ]
    if _nvlink(plan):
        # DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL: "Total number of NVLink bandwidth counters for all lanes"
        # (a counter in the default counters)
        records.append({"record": "node:nvlink_bandwidth:rate5m",
                        "expr": "sum by (node) (rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL[5m]))"})
        fabric.append(
            {"alert": "NVLinkIdleWhileGPUsBusy",
             "expr": "sum by (node) (rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL[10m])) == 0 and on (node) "
                     "count by (node) (DCGM_FI_DEV_GPU_UTIL > 50) > 1",
             "for": "15m", "labels": {"severity": "warning"},
             "annotations": {"summary": "{{ $labels.node }}: several GPUs busy and no NVLink traffic (P2P off or "
                                        "NVLink down: collectives go over PCIe)"}})
    if _rdma(plan):
        efa = plan.platform.network.kind == "efa"
        if efa:
            # EFA has no ports/<port>/counters for node_exporter's infiniband collector: its byte counters are
            # in hw_counters (tx_bytes, rx_bytes), which the EFA node exporter exports as node_amazonefa_* (aws-samples/
            # awsome-distributed-training 4.validation_and_observability/3.efa-node-exporter; counters, no _total)
            rdma = ("sum by (node) (rate(node_amazonefa_rx_bytes[10m]) + rate(node_amazonefa_tx_bytes[10m]))")
            fabric.append(
                {"alert": "EFAMetricsMissing",
                 "expr": "count by (node) (DCGM_FI_DEV_GPU_UTIL) unless on (node) count by (node) "
                         "(node_amazonefa_tx_bytes)",
                 "for": "30m", "labels": {"severity": "info"},
                 "annotations": {"summary": "{{ $labels.node }}: GPUs reported but no EFA counters "
                                            "(node_amazonefa_*): RDMAIdleWhileGPUsBusy cannot see this node; run the "
                                            "EFA node exporter (aws-samples/awsome-distributed-training "
                                            "3.efa-node-exporter) on the EFA pools"}})
        else:
            # prometheus/node_exporter collector/infiniband_linux.go: port_data_{received,transmitted}_bytes_total
            # from /sys/class/infiniband/<dev>/ports/<port>/counters (port_rcv_data, port_xmit_data)
            rdma = ("sum by (node) (rate(node_infiniband_port_data_received_bytes_total[10m]) + "
                    "rate(node_infiniband_port_data_transmitted_bytes_total[10m]))")
        records.append({"record": "node:rdma_bytes:rate5m", "expr": rdma.replace("[10m]", "[5m]")})
        fabric.append(
            {"alert": "RDMAIdleWhileGPUsBusy",
             "expr": f"{rdma} < 1e6 and on (node) count by (node) (DCGM_FI_DEV_GPU_UTIL > 50) > 0",
             "for": "15m", "labels": {"severity": "warning"},
             "annotations": {"summary": "{{ $labels.node }}: GPUs busy and its " + ("EFA interfaces" if efa else "RDMA ports")
                                        + " under 1 MB/s: a "
                                        "multi-node job there runs NCCL over TCP (the MFU regression of a "
                                        "socket fallback; check NCCL_DEBUG=INFO for NET/Socket)"}})
    groups = [{"name": "orchgen-gpu", "rules": gpu}, {"name": "orchgen-gpu-records", "rules": records}]
    if fabric:
        groups.append({"name": "orchgen-fabric", "rules": fabric})
    if queue := _queue_rules(plan):
        groups.append({"name": "orchgen-queues", "rules": queue})
    return groups


def _queue_rules(plan: Plan) -> list[dict[str, Any]]:
    s = schedulers.get(plan.gang_scheduler)
    if s is None or not s.stuck_pending:
        return []
    queue = "{{ $labels.%s }}" % s.stuck_pending_queue
    return [{"alert": "GangJobsStuckPending", "expr": f"{s.stuck_pending} > 0", "for": "30m",
             "labels": {"severity": "warning"},
             "annotations": {"summary": f"{{{{ $value }}}} gang workloads of {s.title} queue {queue} pending for "
                                        "30 minutes (quota, flavor or topology never fits)"}}]


def _service_monitors(plan: Plan) -> list[dict[str, Any]]:
    s = schedulers.get(plan.gang_scheduler)
    if s is None or not s.metrics_service or s.chart not in plan.charts:
        return []
    return [{"name": f"{s.chart}-scheduler", "namespaceSelector": {"matchNames": [plan.charts[s.chart].namespace]},
             "selector": {"matchLabels": dict(s.metrics_service)},
             "endpoints": [{"port": s.metrics_port, "path": "/metrics"}]}]


def values(plan: Plan) -> dict[str, Any]:
    prometheus: dict[str, Any] = {"prometheusSpec": {
        # Select every ServiceMonitor and PodMonitor of every namespace, not only this release's: the GPU
        # Operator's nvidia-dcgm-exporter and Kueue's carry no `release` label (values.yaml: "If true, a nil
        # or {} value ... will cause the prometheus resource to be created with selectors based on values
        # in the helm deployment")
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
    }}
    if monitors := _service_monitors(plan):
        prometheus["additionalServiceMonitors"] = monitors
    out: dict[str, Any] = {
        "prometheus": prometheus,
        # The GPU, fabric and queue alerts (one PrometheusRule, rendered with the release's labels,
        # which the chart's own ruleSelector matches)
        "additionalPrometheusRulesMap": {"orchgen-gpu": {"groups": rules(plan)}},
        # node-exporter's series carry the node's name as `node`, as dcgm-exporter's do (GPU Operator
        # values dcgmExporter.serviceMonitor.relabelings), for the GPU-and-RDMA rule's join
        "prometheus-node-exporter": {"prometheus": {"monitor": {"relabelings": [dict(NODE_RELABELING)]}}},
        # The upstream DCGM dashboard, provisioned from a file provider: the chart's sidecar route would
        # pass the JSON through `tpl`, which reads its {{gpu}} legends as templates
        "grafana": {
            "dashboardProviders": {"dashboardproviders.yaml": {"apiVersion": 1, "providers": [
                {"name": DASHBOARD_PROVIDER, "orgId": 1, "folder": "GPU", "type": "file", "disableDeletion": True,
                 "editable": False, "options": {"path": f"/var/lib/grafana/dashboards/{DASHBOARD_PROVIDER}"}}]}},
            "dashboards": {DASHBOARD_PROVIDER: {"dcgm-exporter": {"json": dashboard_json()}}},
        },
    }
    return out


def dashboard_title() -> str:
    return str(json.loads(dashboard_json())["title"])


def readme(plan: Plan) -> dict[str, Any]:
    """What the bundle README's metrics part says: where to look, and what alerts."""
    if plan.kube_plane is None:
        return {}
    alerts = [r["alert"] for g in rules(plan) for r in g["rules"] if "alert" in r]
    return {"installed": installed(plan), "url": prometheus_url(plan),
            "namespace": plan.charts[RELEASE].namespace if installed(plan) else None,
            "release": RELEASE, "alerts": alerts, "dashboard": dashboard_title(),
            "dcgm": "gpu-operator" in plan.charts,
            "efa": plan.platform.network is not None and plan.platform.network.kind == "efa"}
