"""The Helm side of the bundle (generator/render/helm.py) checked against upstream chart defaults.

For every example with a Kubernetes/k3s plane and for synthetic plans (each gang scheduler, k3s,
bare metal or not, InfiniBand/RoCE/Ethernet, hybrids): every values key exists in the chart's
upstream values.yaml, embedded config strings parse and say what the plan needs, releases.yaml is
in a valid install order with pinned (overridable) versions, and the bytes are deterministic.
Upstream defaults and CRDs come from tests._consumers.reference_dir().
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import catalog
from generator.errors import OrchgenError
from generator.spec.fabric import LABEL_PLANE
from generator.decide.plan import Plan
from generator.decide import make_plan
from generator.render import renderers
from generator.render.kubernetes import helm, kueue
from generator.render.kubernetes import ray as kuberay
from generator.render import render as render_bundle
from generator.render.report import render as render_report
from generator.spec import Fleet, load
from generator.validate.values import load_defaults, unknown_keys
from .support import plan_of
from tests._consumers import reference_dir, require
from tests.conftest import all_examples

# ---------------------------------------------------------------------------------------------
# Plans: the examples with a Kubernetes side, and synthetic fleets covering the decisions
# ---------------------------------------------------------------------------------------------

TRAIN = {"name": "train", "nodes": 2, "tightly_coupled": True, "multi_tenant": True}
RAY = {"name": "rl", "nodes": 2, "tightly_coupled": True, "python_native_pipeline": True}
SERVE = {"name": "api", "long_lived_services": True, "multi_tenant": True}
SLURM = {"name": "pretrain", "nodes": 4, "tightly_coupled": True, "bare_metal": True}


def synth(*, gang: str = "auto", bare_metal: bool = False, fabric: str = "ethernet", k3s: bool = False,
          ray: bool = False, tenants: int = 2, hybrid: str | None = None,
          versions: dict[str, str] | None = None, provider: str = "generic", distribution: str = "upstream",
          node_labels: dict[str, str] | None = None, gpu: str = "h100", gitops: str | None = None) -> Plan:
    """A small fleet; `hybrid` = slinky | soperator | partitioned adds a Slurm workload."""
    workloads = [dict(TRAIN, bare_metal=False), dict(SERVE, bare_metal=False)]
    if ray:
        workloads.append(dict(RAY, bare_metal=False))
    options: dict[str, Any] = {"gang_scheduler": gang, "versions": versions or {}}
    if gitops:
        options["gitops"] = gitops
    if hybrid:
        workloads.insert(0, dict(SLURM))
        options["slurm_on_kubernetes"] = {"partitioned": "none"}.get(hybrid, hybrid)
        options["kubernetes_min_nodes"] = 1  # the values, not the plane's size, are the subject (issue 36)
    names = [f"team{i}" for i in range(tenants)]
    for i, w in enumerate(workloads):
        if names:
            w["tenant"] = names[i % len(names)]
    fleet = Fleet.model_validate({
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "synthetic"},
        "fleet": {
            "bare_metal": bare_metal, "edge_or_dev": k3s, "provider": provider,
            "kubernetes_distribution": distribution,
            "fabric": {"kind": fabric, "nodes_per_leaf": 4, "leaves_per_spine": 2},
            "pools": [{"name": "h100", "nodes": 16, "gpu": {"type": gpu, "count": 8},
                       **({"node_labels": node_labels} if node_labels else {})}],
        },
        "tenants": [{"name": n, "share": i + 1} for i, n in enumerate(names)],
        "workloads": workloads,
        "options": options,
    })
    return make_plan(fleet, "synthetic.yaml")


SYNTHETIC: dict[str, dict[str, Any]] = {
    "kueue-ib-baremetal-ray": dict(gang="kueue", bare_metal=True, fabric="infiniband", ray=True),
    "kueue-ethernet-cloud": dict(gang="kueue", fabric="ethernet"),
    "volcano-roce-baremetal-ray": dict(gang="volcano", bare_metal=True, fabric="roce", ray=True),
    "volcano-ethernet-cloud": dict(gang="volcano", fabric="ethernet", tenants=1),
    "kai-ethernet-cloud-ray": dict(gang="kai", fabric="ethernet", ray=True),
    "kai-ib-cloud": dict(gang="kai", fabric="infiniband"),
    "kai-ib-baremetal": dict(gang="kai", bare_metal=True, fabric="infiniband", tenants=3),
    "auto-single-tenant": dict(fabric="roce", tenants=0),
    "k3s-ib-baremetal-ray": dict(k3s=True, bare_metal=True, fabric="infiniband", ray=True, tenants=0),
    "k3s-ethernet": dict(k3s=True, tenants=1),
    "slinky-hybrid-ib": dict(hybrid="slinky", fabric="infiniband"),
    "soperator-hybrid": dict(hybrid="soperator", gang="volcano", ray=True),
    "partitioned-hybrid-ib": dict(hybrid="partitioned", bare_metal=True, fabric="infiniband"),
    # provider and distribution profiles (tests/test_provider_profiles.py pins them to their docs)
    "eks-efa-p5": dict(provider="eks", gang="kueue", node_labels={
        "eks.amazonaws.com/nodegroup": "p5", "node.kubernetes.io/instance-type": "p5.48xlarge"}),
    "gke-kai": dict(provider="gke", gang="kai", ray=True),
    "aks-volcano": dict(provider="aks", gang="volcano"),
    "oke-kueue": dict(provider="oke", gang="kueue", fabric="roce"),
    "rke2-baremetal": dict(distribution="rke2", bare_metal=True, fabric="ethernet"),
    "k3s-dist-ib-baremetal": dict(distribution="k3s", bare_metal=True, fabric="infiniband"),
    "v100-peermem-ib-baremetal": dict(bare_metal=True, fabric="infiniband", gpu="v100"),
    "old-operator-ib-baremetal": dict(bare_metal=True, fabric="infiniband", versions={"gpu-operator": "v24.9.2"}),
}


@cache
def case_plan(case: str) -> Plan:
    """An example's plan ("example:<path>") or a synthetic case's."""
    if case.startswith("example:"):
        return plan_of(Path(case.removeprefix("example:")))
    return synth(**SYNTHETIC[case])


EXAMPLE_CASES = [f"example:{p}" for p in all_examples() if case_plan(f"example:{p}").kube_plane]
CASES = EXAMPLE_CASES + list(SYNTHETIC)


def _id(case: str) -> str:
    return Path(case.removeprefix("example:")).stem if case.startswith("example:") else case


@pytest.fixture(params=CASES, ids=_id)
def plan(request) -> Plan:
    return case_plan(request.param)


def helm_files(plan: Plan) -> dict[str, bytes]:
    return helm.render(plan)


def released(plan: Plan) -> list[dict[str, Any]]:
    return yaml.safe_load(helm_files(plan)["kubernetes/helm/releases.yaml"])["releases"]


def values_of(plan: Plan, release: str) -> dict[str, Any]:
    return yaml.safe_load(helm_files(plan)[f"kubernetes/helm/{release}.values.yaml"])


# Stand-ins for the Slinky/Soperator renderer's values builders, to test the seam and full ordering.
SLURM_EXTRA = {c: (lambda plan: {}) for c in
               ("slurm-operator-crds", "slurm-operator", "slurm", "soperator", "soperator-slurm-cluster")}


def test_the_cases_cover_the_decisions() -> None:
    """The synthetic fleets really produce the planes, schedulers and hybrids the tests rely on."""
    plans = [case_plan(c) for c in CASES]
    assert {p.gang_scheduler for p in plans} >= {"kueue", "volcano", "kai", None}
    assert {p.kube_plane.name for p in plans} == {"kubernetes", "k3s"}
    assert {p.hybrid for p in plans} >= {None, "partitioned", "slurm-on-kubernetes"}
    assert any(p.bare_metal and p.fabric.kind in ("infiniband", "roce") for p in plans)
    assert any(not p.bare_metal and p.fabric.kind == "infiniband" for p in plans)
    assert any(kuberay.ray_planned(p) for p in plans) and not all(kuberay.ray_planned(p) for p in plans)
    assert any(len(p.tenants) > 1 for p in plans) and any(len(p.tenants) == 1 for p in plans)
    assert case_plan("soperator-hybrid").kube_plane.name == "kubernetes"
    assert "soperator" in case_plan("soperator-hybrid").charts
    assert case_plan("k3s-ib-baremetal-ray").kube_plane.name == "k3s"
    assert case_plan("kai-ib-baremetal").gang_scheduler == "kai"


# ---------------------------------------------------------------------------------------------
# Every emitted key exists upstream
# ---------------------------------------------------------------------------------------------

@cache
def upstream_defaults(component: str) -> dict[str, Any]:
    return load_defaults(reference_dir() / catalog.CATALOG[component].values_reference / "values.yaml")


# Charts whose defaults are not in the reference data: the bundle sets no value of theirs at all.
NO_REFERENCE = {"aws-efa-k8s-device-plugin", "dra-driver-nvidia-gpu"}


def test_every_values_key_exists_in_the_upstream_chart_defaults(plan: Plan) -> None:
    rels = released(plan)
    assert rels or plan.platform.gpu_stack == "provider", "a Kubernetes plane installs at least the GPU Operator"
    absent, known = [], []
    for rel in rels:
        values = values_of(plan, rel["name"])
        assert isinstance(values, dict)
        if rel["name"] in NO_REFERENCE:
            assert not (reference_dir() / catalog.CATALOG[rel["name"]].values_reference).exists()
            # no reference copy: its keys are checked against the pinned chart itself (../shared/charts, or
            # ORCHGEN_CHARTS: tests/kubeenv/bundle.charts_dir)
            from tests.kubeenv.bundle import charts_dir

            chart = charts_dir() / rel["name"] / rel["version"] / "values.yaml"
            if not chart.is_file():  # the others are checked first; then this one is reported as skipped
                from tests.kubeenv.bundle import NO_CHART

                (known if rel["name"] in NO_CHART else absent).append(f"{rel['name']} {rel['version']}")
                continue
            assert unknown_keys(values, load_defaults(chart)) == [], rel["name"]
            continue
        # read as `orchgen validate` reads them (free-form maps a chart's renderer declares: helm_checks._adapt)
        from generator.validate.helm_checks import _adapt

        assert unknown_keys(values, _adapt(rel["name"], upstream_defaults(rel["name"]), values)) == [], rel["name"]
    require(not absent, f"pinned chart {', '.join(absent)} not in ../shared/charts: its values not checked")
    if known:  # tests/kubeenv/bundle.NO_CHART: no copy can be had here (reported, never passed)
        pytest.skip(f"chart {', '.join(known)} has no copy here (tests/kubeenv/bundle.NO_CHART): its values not checked")


def test_unknown_keys_would_be_caught() -> None:
    """The oracle bites: a misspelt or version-foreign key is reported."""
    assert unknown_keys({"driver": {"rdma": {"enable": True}}}, upstream_defaults("gpu-operator"))
    assert unknown_keys({"admission": {"gpuFractionRuntimeClass": ""}}, upstream_defaults("kai-scheduler"))


# ---------------------------------------------------------------------------------------------
# Embedded configuration strings
# ---------------------------------------------------------------------------------------------

# Top-level fields of Kueue's Configuration v1beta2 (apis/config/v1beta2/configuration_types.go,
# ControllerManager inlined) and of the two blocks we add. v1beta2 dropped `enable` from both:
# the block's presence turns the feature on, and an unknown field is an error, not a switch.
KUEUE_V1BETA2_FIELDS = {
    "apiVersion", "kind", "namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector",
    "internalCertManagement", "waitForPodsReady", "clientConnection", "integrations", "multiKueue",
    "fairSharing", "admissionFairSharing", "resources", "featureGates", "objectRetentionPolicies",
    "webhook", "leaderElection", "metrics", "health", "pprofBindAddress", "controller", "tls",
}
WAIT_FOR_PODS_READY_FIELDS = {"timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}
FAIR_SHARING_FIELDS = {"preemptionStrategies"}


def wait_for_pods_ready_on(config: dict[str, Any]) -> bool:
    """v1beta1 needs `enable: true`; in v1beta2 the block with a timeout is the switch."""
    block = config.get("waitForPodsReady")
    if not isinstance(block, dict):
        return False
    if config["apiVersion"] == "config.kueue.x-k8s.io/v1beta1":
        return block.get("enable") is True
    return "enable" not in block and bool(block.get("timeout"))


@cache
def upstream_kueue_config() -> dict[str, Any]:
    return yaml.safe_load(upstream_defaults("kueue")["managerConfig"]["controllerManagerConfigYaml"])


def kueue_plans() -> list[str]:
    return [c for c in CASES if case_plan(c).gang_scheduler == "kueue"]


@pytest.mark.parametrize("case", kueue_plans(), ids=_id)
def test_kueue_configuration_is_all_or_nothing_with_the_planned_integrations(case: str) -> None:
    plan = case_plan(case)
    text = values_of(plan, "kueue")["managerConfig"]["controllerManagerConfigYaml"]
    config = yaml.safe_load(text)
    assert config["apiVersion"] == upstream_kueue_config()["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["kind"] == "Configuration"
    assert set(config) <= KUEUE_V1BETA2_FIELDS
    assert wait_for_pods_ready_on(config)
    assert set(config["waitForPodsReady"]) <= WAIT_FOR_PODS_READY_FIELDS
    frameworks = config["integrations"]["frameworks"]
    assert "batch/job" in frameworks
    ray = {"ray.io/rayjob", "ray.io/raycluster"}
    if kuberay.ray_planned(plan):
        assert ray <= set(frameworks)
    else:
        assert not [f for f in frameworks if f.startswith("ray.io/")]
    assert ("fairSharing" in config) == (len(plan.tenants) > 1)
    if "fairSharing" in config:
        assert set(config["fairSharing"]) <= FAIR_SHARING_FIELDS


@pytest.mark.parametrize("case", kueue_plans(), ids=_id)
def test_kueue_configuration_keeps_every_upstream_default(case: str) -> None:
    config = yaml.safe_load(values_of(case_plan(case), "kueue")["managerConfig"]["controllerManagerConfigYaml"])
    upstream = upstream_kueue_config()
    for key, value in upstream.items():
        if key == "integrations":
            non_ray = [f for f in value["frameworks"] if not f.startswith("ray.io/")]
            assert [f for f in config[key]["frameworks"] if not f.startswith("ray.io/")] == non_ray
        else:
            assert config[key] == value, key


def test_embedded_kueue_default_is_the_upstream_one() -> None:
    assert yaml.safe_load(kueue.KUEUE_DEFAULT_CONFIG) == upstream_kueue_config()


def test_wait_for_pods_ready_check_knows_both_api_versions() -> None:
    assert wait_for_pods_ready_on({"apiVersion": "config.kueue.x-k8s.io/v1beta1",
                                   "waitForPodsReady": {"enable": True, "timeout": "5m"}})
    assert not wait_for_pods_ready_on({"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                       "waitForPodsReady": {"enable": True, "timeout": "5m"}})
    assert not wait_for_pods_ready_on({"apiVersion": "config.kueue.x-k8s.io/v1beta2"})


def kubernetes_objects(plan: Plan) -> list[dict[str, Any]]:
    from generator.render.kubernetes import manifests

    return [o for objs in manifests.manifests(plan).values() for o in objs]


# Scheduler plugins of Volcano 1.15 that a conf may name here (pkg/scheduler/plugins).
VOLCANO_PLUGINS = {"priority", "gang", "conformance", "overcommit", "drf", "predicates", "proportion",
                   "capacity", "nodeorder", "binpack", "network-topology-aware"}


@pytest.mark.parametrize("case", [c for c in CASES if case_plan(c).gang_scheduler == "volcano"], ids=_id)
def test_volcano_scheduler_conf_has_gang_and_topology_awareness(case: str) -> None:
    plan = case_plan(case)
    values = values_of(plan, "volcano")
    assert "scheduler_config_override" in upstream_defaults("volcano")["custom"]
    conf = yaml.safe_load(values["custom"]["scheduler_config_override"])
    # deserved, borrowing and reclaimable as the README says: the capacity plugin (never with
    # proportion) and the reclaim action (Volcano 1.15 docs/user-guide/how_to_use_capacity_plugin.md)
    assert [a.strip() for a in conf["actions"].split(",")] == ["enqueue", "allocate", "preempt", "reclaim",
                                                               "backfill"]
    plugins = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    assert set(plugins) <= VOLCANO_PLUGINS and len(plugins) == len(set(plugins))
    assert "capacity" in plugins and "proportion" not in plugins
    queues = [o for o in kubernetes_objects(plan) if o["kind"] == "Queue"]
    assert queues and all(q["spec"]["reclaimable"] and q["spec"]["deserved"] for q in queues)
    assert "gang" in [p["name"] for p in conf["tiers"][0]["plugins"]]
    # HyperNodes exist exactly when the plane has topology labels: the fabric's on bare metal, the
    # provider's on a cloud (none on a generic cloud: the plan's leaves are not the provider's)
    assert ("network-topology-aware" in plugins) == bool(plan.platform.topology)


# ---------------------------------------------------------------------------------------------
# releases.yaml: order, CRDs, dependencies, versions
# ---------------------------------------------------------------------------------------------

def _reference_crd_groups(component: str) -> set[str]:
    crd_dir = reference_dir() / catalog.CATALOG[component].values_reference.split("/")[0] / "crds"
    groups = set()
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                groups.add(doc["spec"]["group"])
    return groups


def check_release_order(plan: Plan, rels: list[dict[str, Any]]) -> None:
    names = [r["name"] for r in rels]
    assert len(names) == len(set(names))
    owners = [bool(r["crds"]) for r in rels]
    assert owners == sorted(owners, reverse=True), f"CRD owners must come first: {names}"
    for i, rel in enumerate(rels):
        assert set(rel) == {"name", "namespace", "repo", "chart", "version", "values", "crds", "dependsOn"}
        assert set(rel["dependsOn"]) <= set(names[:i]), rel["name"]
        chart = plan.charts[rel["name"]]
        assert (rel["namespace"], rel["repo"], rel["chart"]) == (chart.namespace, chart.repo, chart.chart)
        assert isinstance(rel["version"], str) and rel["version"] == chart.version
        assert rel["repo"].startswith(("https://", "oci://"))
        assert rel["values"] == f"{rel['name']}.values.yaml"
        assert bool(rel["crds"]) == chart.installs_crds


def test_releases_yaml_is_in_install_order(plan: Plan) -> None:
    rels = released(plan)
    check_release_order(plan, rels)
    files = helm_files(plan)
    assert sorted(files) == sorted(["kubernetes/helm/releases.yaml"]
                                   + [f"kubernetes/helm/{r['values']}" for r in rels])
    assert [r["name"] for r in rels] == [r["name"] for r in helm.releases(plan) if r["name"] in helm.VALUES]


def test_the_full_release_list_with_the_slurm_charts_is_in_install_order(plan: Plan) -> None:
    rels = yaml.safe_load(helm.render(plan, extra=SLURM_EXTRA)["kubernetes/helm/releases.yaml"])["releases"]
    assert [r["name"] for r in rels] == [r["name"] for r in helm.releases(plan)]
    assert sorted(r["name"] for r in rels) == sorted(plan.charts)
    check_release_order(plan, rels)


def test_kuberay_waits_for_the_gang_scheduler_it_is_wired_to() -> None:
    for case in ("volcano-roce-baremetal-ray", "kai-ethernet-cloud-ray", "kueue-ib-baremetal-ray"):
        plan = case_plan(case)
        rel = next(r for r in released(plan) if r["name"] == "kuberay-operator")
        expected = {"volcano": ["volcano"], "kai": ["kai-scheduler"]}.get(plan.gang_scheduler, [])
        assert rel["dependsOn"] == expected, case


def test_crd_groups_cover_the_reference_crds() -> None:
    for component, chart in catalog.CATALOG.items():
        assert bool(helm.CRD_GROUPS.get(component)) == chart.installs_crds, component
        if chart.installs_crds and component != "cert-manager":  # no cert-manager CRDs in reference
            assert _reference_crd_groups(component) <= set(helm.CRD_GROUPS[component]), component


def test_versions_are_pinned_from_the_catalog_and_overridable() -> None:
    pinned = released(case_plan("kai-ethernet-cloud-ray"))
    assert {r["name"]: r["version"] for r in pinned} == {
        r["name"]: catalog.CATALOG[r["name"]].version for r in pinned}
    overrides = {"kai-scheduler": "v0.13.1", "kuberay-operator": "1.10", "gpu-operator": "v26.7.2"}
    bumped = released(synth(**SYNTHETIC["kai-ethernet-cloud-ray"], versions=overrides))
    versions = {r["name"]: r["version"] for r in bumped}
    assert versions == {**{r["name"]: r["version"] for r in pinned}, **overrides}
    assert isinstance(versions["kuberay-operator"], str)  # "1.10" must not come back as 1.1


def test_the_bytes_are_deterministic(plan: Plan) -> None:
    files = helm_files(plan)
    again = helm.render(make_plan_again(plan))
    assert files == again
    for path, data in files.items():
        assert data.endswith(b"\n") and yaml.safe_load(data) is not None, path


def make_plan_again(plan: Plan) -> Plan:
    """The same plan built afresh (no shared objects), from its example or synthetic fleet."""
    case = next(c for c in CASES if case_plan(c) is plan)
    if case.startswith("example:"):
        path = Path(case.removeprefix("example:"))
        return make_plan(load(path), path)
    return synth(**SYNTHETIC[case])


def test_no_kubernetes_plane_no_helm_files() -> None:
    for path in all_examples():
        plan = make_plan(load(path), path)
        if plan.kube_plane is None:
            assert helm.render(plan) == {} and helm.releases(plan) == []
            assert not [p for p in render_bundle(plan) if p.startswith("kubernetes/")]


def test_the_seam_refuses_a_half_wired_renderer() -> None:
    plan = case_plan("slinky-hybrid-ib")
    names = [r["name"] for r in released(plan)]
    assert "slurm" in plan.charts and not [n for n in names if n.startswith("slurm")]
    with pytest.raises(OrchgenError, match="slurm-operator"):
        helm.render(plan, extra={"slurm": lambda p: {}})


def test_the_renderer_is_registered() -> None:
    from generator.render import slurm_on_kubernetes_values

    assert any(getattr(r, "func", r) is helm.render for r in renderers())
    for case in EXAMPLE_CASES:
        files = render_bundle(case_plan(case))
        assert "kubernetes/helm/releases.yaml" in files
        wired = helm.render(case_plan(case), extra=slurm_on_kubernetes_values())
        assert files["kubernetes/helm/releases.yaml"] == wired["kubernetes/helm/releases.yaml"]


# ---------------------------------------------------------------------------------------------
# The decisions in the values
# ---------------------------------------------------------------------------------------------

def test_gpu_operator_driver_rdma_and_toolkit(plan: Plan) -> None:
    """The operator owns the driver only on bare metal; GPUDirect RDMA only where Kubernetes jobs use
    an RDMA fabric, by DMA-BUF where operator version and GPUs allow; the toolkit follows the
    distribution's containerd (the per-provider settings: tests/test_provider_profiles.py)."""
    if "gpu-operator" not in plan.charts:
        assert plan.platform.provider == "oke"
        return
    values = values_of(plan, "gpu-operator")
    assert values["driver"]["enabled"] is plan.bare_metal
    net = plan.platform.network
    rdma = plan.bare_metal and net is not None and net.kind == "rdma-shared"
    legacy = plan.charts["gpu-operator"].version < "v25.3" or any(
        s.gpu_type == "v100" for s in plan.kube_plane.slices)
    expected = None if not rdma else {"enabled": True, "useHostMofed": True} if legacy else {"useHostMofed": True}
    assert values["driver"].get("rdma") == expected
    # MIG pools (issue 10): strategy mixed, and the MIG manager gets our layouts for their nodes
    migs = {s.pool: s.hardware.mig for s in plan.kube_plane.slices if s.gpu_type and s.hardware.mig}
    assert values["mig"] == {"strategy": "mixed" if migs else "single"}
    if migs:
        config = values["migManager"]["config"]
        assert config["create"] is True and config["default"] == "all-disabled"
        layouts = yaml.safe_load(config["data"]["config.yaml"])["mig-configs"]
        for mig in migs.values():
            assert layouts[mig.config_name] == [{"devices": "all", "mig-enabled": True,
                                                 "mig-devices": {mig.profile: mig.per_gpu}}]
    else:
        assert "migManager" not in values
    assert values["dcgmExporter"]["enabled"] is True
    env = {e["name"]: e["value"] for e in values.get("toolkit", {}).get("env", [])}
    dist = plan.platform.distribution
    assert ("CONTAINERD_CONFIG" in env) == (dist == "k3s")
    assert env.get("CONTAINERD_SOCKET") == ("/run/k3s/containerd/containerd.sock" if dist in ("k3s", "rke2") else None)


def test_gpu_operator_runs_on_every_gpu_node_of_a_hybrid(plan: Plan) -> None:
    if "gpu-operator" not in plan.charts:
        return
    values = values_of(plan, "gpu-operator")
    upstream = upstream_defaults("gpu-operator")
    plane = {"key": LABEL_PLANE, "operator": "Exists", "effect": "NoSchedule"}
    lists = {
        "daemonsets": (values.get("daemonsets", {}).get("tolerations"),
                       upstream["daemonsets"]["tolerations"]),
        "nfd-worker": (values.get("node-feature-discovery", {}).get("worker", {}).get("tolerations"),
                       upstream["node-feature-discovery"]["worker"]["tolerations"]),
    }
    tainted = bool(plan.platform.taints)  # GPU pools' own taints (test_taints.py checks those are tolerated)
    for where, (ours, theirs) in lists.items():
        if not plan.hybrid and not tainted:
            assert ours is None, where
            continue
        if ours is None:  # the upstream list already tolerates the pools' taints
            continue
        # Helm replaces lists: ours must keep every upstream toleration and add the plane taint's.
        assert all(t in ours for t in theirs), where
        assert (plane in ours) == bool(plan.hybrid), where


def test_kuberay_scheduler_name_is_one_kuberay_accepts(plan: Plan) -> None:
    if "kuberay-operator" not in plan.charts:
        return
    values = values_of(plan, "kuberay-operator")
    text = (reference_dir() / "kuberay/kuberay-operator/values.yaml").read_text()
    line = next(li for li in text.splitlines() if "Set the customized scheduler name" in li)
    accepted = set(re.findall(r'"([a-z-]+)"', line))
    assert {"volcano", "kai-scheduler"} <= accepted
    batch = values.get("batchScheduler", {})
    assert "enabled" not in batch
    if plan.gang_scheduler in ("volcano", "kai"):
        assert batch["name"] in accepted
        assert batch["name"] == {"volcano": "volcano", "kai": "kai-scheduler"}[plan.gang_scheduler]
    else:
        assert batch == {}


def test_kai_images_come_from_the_published_registry() -> None:
    for case in [c for c in CASES if case_plan(c).gang_scheduler == "kai"]:
        values = values_of(case_plan(case), "kai-scheduler")
        assert values["global"]["registry"] == "ghcr.io/kai-scheduler/kai-scheduler"  # its new home
        assert upstream_defaults("kai-scheduler")["global"]["registry"] != values["global"]["registry"]
        assert values["defaultQueue"]["createDefaultQueue"] is False
        # v0.17.0: the chart's Config deployer hook (a release upgraded from v0.13.0 keeps working;
        # Argo CD renders it instead: test_cel), and no runtime-class override
        assert "kaiConfig" not in values and "kaiConfigDeployer" not in values
        assert "admission" not in values


def test_kai_before_its_move_comes_from_its_old_home_with_nvidias_runtime_class_fix() -> None:
    """An options.versions override older than v0.17.0 is fetched from ghcr.io/nvidia and gets
    NVIDIA's recipe's `admission.gpuPodRuntimeClassName: ""` (a key v0.13.0's defaults have)."""
    plan = synth(**SYNTHETIC["kai-ethernet-cloud-ray"], versions={"kai-scheduler": "v0.13.0"})
    rel = next(r for r in released(plan) if r["name"] == "kai-scheduler")
    assert rel["repo"] == "oci://ghcr.io/nvidia/kai-scheduler" and rel["version"] == "v0.13.0"
    values = values_of(plan, "kai-scheduler")
    assert values["global"]["registry"] == "ghcr.io/nvidia/kai-scheduler"
    assert values["admission"] == {"gpuPodRuntimeClassName": ""} and "kaiConfig" not in values
    old_defaults = load_defaults(reference_dir() / "kai-scheduler" / "values.yaml")
    assert old_defaults["admission"]["gpuPodRuntimeClassName"] == "nvidia"  # what it overrides
    assert unknown_keys(values, old_defaults) == []


def test_cert_manager_installs_its_crds_and_keeps_them() -> None:
    plans = [case_plan(c) for c in CASES if "cert-manager" in case_plan(c).charts]
    assert plans
    for plan in plans:
        values = values_of(plan, "cert-manager")
        assert values == {"crds": {"enabled": True, "keep": True}}  # keep: helm.sh/resource-policy
        assert "installCRDs" not in values
        # where cert-manager's install docs publish the chart (Flux: OCIRepository, Argo CD: OCI source)
        rel = next(r for r in helm.releases(plan) if r["name"] == "cert-manager")
        assert (rel["repo"], rel["chart"]) == ("oci://quay.io/jetstack/charts", "cert-manager")


def test_charts_said_to_keep_crds_in_templates_are_those_without_a_keep_value() -> None:
    """The README's uninstall warning names exactly the CRD-owning charts whose upstream values
    have no CRD keep switch (cert-manager has crds.keep; the others keep CRDs in crds/)."""
    assert set(helm.CRDS_IN_TEMPLATES) <= set(helm.CRD_GROUPS)
    for component in helm.CRDS_IN_TEMPLATES:
        path = reference_dir() / catalog.CATALOG[component].values_reference / "values.yaml"
        if not path.exists():  # slurm-operator-crds: a chart without values
            assert (path.parent / "Chart.yaml").is_file() or path.parent.is_dir(), path
            continue
        defaults = upstream_defaults(component)
        crds = defaults.get("crds") if isinstance(defaults.get("crds"), dict) else {}
        # a keep switch sits under `crds` (cert-manager's crds.keep); KEDA's keepAlive is an HTTP setting
        assert "resource-policy" not in yaml.safe_dump(defaults) and "keep" not in crds, component
    assert upstream_defaults("cert-manager")["crds"]["keep"] is True


# ---------------------------------------------------------------------------------------------
# The README says what the values do
# ---------------------------------------------------------------------------------------------

def test_readme_section_agrees_with_the_values(plan: Plan) -> None:
    readme = render_report(plan)["README.md"].decode()
    section = readme.split("## Kubernetes: Helm releases", 1)[1].split("\n## ", 1)[0]
    for rel in released(plan):
        assert f"| {rel['name']} |" in section
    if "kuberay-operator" in plan.charts and plan.gang_scheduler in ("volcano", "kai"):
        name = values_of(plan, "kuberay-operator")["batchScheduler"]["name"]
        assert f"`batchScheduler.name: {name}`" in section
    if "gpu-operator" not in plan.charts:
        assert "no GPU Operator release" in section
        return
    values = values_of(plan, "gpu-operator")
    assert ("`driver.enabled: true`" in section) == values["driver"]["enabled"]
    assert ("`driver.enabled: false`" in section) == (not values["driver"]["enabled"])
    rdma = values["driver"].get("rdma", {})
    assert ("`driver.rdma.enabled: true`" in section) == bool(rdma.get("enabled"))
    assert ("`driver.rdma.useHostMofed: true`" in section) == (rdma == {"useHostMofed": True})
    assert ("/run/k3s/containerd/containerd.sock" in section) == any(
        e["value"] == "/run/k3s/containerd/containerd.sock" for e in values.get("toolkit", {}).get("env", []))
    assert ("`toolkit.enabled: false`" in section) == (values.get("toolkit", {}).get("enabled") is False)


def test_argocd_installs_kai_from_v0_17_with_the_config_rendered_and_refuses_older() -> None:
    """Argo CD runs KAI's pre-install hooks as PreSync, before the chart's CRDs: v0.13.0's Config hook
    failed there; v0.17.0 renders the Config as a plain resource (kaiConfig.render), as KAI's
    values.yaml asks for Argo CD."""
    plan = synth(**SYNTHETIC["kai-ethernet-cloud-ray"], gitops="argocd")
    values = values_of(plan, "kai-scheduler")
    assert values["kaiConfig"] == {"render": True} and values["kaiConfigDeployer"] == {"enabled": False}
    assert unknown_keys(values, upstream_defaults("kai-scheduler")) == []
    assert "gitops/apps/kai-scheduler.yaml" in render_bundle(plan)
    old = synth(**SYNTHETIC["kai-ethernet-cloud-ray"], gitops="argocd", versions={"kai-scheduler": "v0.13.0"})
    with pytest.raises(OrchgenError, match="gitops argocd cannot install kai-scheduler v0.13.0"):
        render_bundle(old)
