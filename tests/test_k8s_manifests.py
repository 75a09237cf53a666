"""The Kubernetes renderer's manifests, starter workloads and node-labels.sh, checked against their
real consumers: upstream CRD schemas (unknown fields rejected), kubernetes-validate strict for
built-in kinds, bash for the labelling script. Over every example with a Kubernetes plane and
synthetic plans for each gang scheduler, k3s and both hybrid modes.
"""
from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import time
from collections import defaultdict
from typing import Any

import pytest
import yaml

from generator import spec
from generator.spec.fabric import LABEL_CLIQUE, LABEL_HOSTNAME, LABEL_LEAF, LABEL_PLANE, LABEL_POOL
from generator.decide import make_plan
from generator.render.kubernetes import kueue, manifests as k8s
from generator.spec import Fleet
from tests._consumers import crd_paths, REPO, require, tool, offline_kubeconfig

EXAMPLES = REPO / "examples"
SCHEDULERS = ("kueue", "volcano", "kai")

# ---- plans under test --------------------------------------------------------------------------


def platform_fleet(gang: str = "auto", **options: Any) -> dict[str, Any]:
    """Two pools (GPU with NVLink pairs, CPU), two tenants, one workload of every class: a gang
    training job, a gang Ray job, a service, a multi-pod CPU batch job and a single-node GPU job."""
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "platform"},
        "fleet": {"bare_metal": False,
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": 4, "leaves_per_spine": 2},
                  "pools": [{"name": "h100", "nodes": 16, "gpu": {"type": "h100", "count": 8}, "cpus": 128,
                             "memory_gib": 1024, "nvlink_domain_nodes": 2},
                            {"name": "cpu", "nodes": 4, "cpus": 32, "memory_gib": 128}]},
        "tenants": [{"name": "research", "share": 3}, {"name": "prod", "share": 1}],
        "workloads": [
            {"name": "pretrain", "nodes": 4, "tightly_coupled": True, "multi_tenant": True,
             "tenant": "research", "pool": "h100"},
            {"name": "rl", "nodes": 2, "tightly_coupled": True, "python_native_pipeline": True,
             "multi_tenant": True, "tenant": "research", "pool": "h100"},
            {"name": "api", "long_lived_services": True, "multi_tenant": True, "tenant": "prod",
             "pool": "h100", "gpus": 4},
            {"name": "etl", "nodes": 2, "multi_tenant": True, "tenant": "prod", "pool": "cpu"},
            {"name": "single", "tightly_coupled": True, "multi_tenant": True, "tenant": "prod",
             "pool": "h100", "gpus": 8},
        ],
        "options": {"gang_scheduler": gang, **options},
    }


def edge_fleet(gang: str = "auto") -> dict[str, Any]:
    """k3s: two dev boxes, one implicit tenant, a tightly coupled two-node job (so a gang)."""
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "edge"},
        "fleet": {"edge_or_dev": True, "fabric": {"nodes_per_leaf": 2},
                  "pools": [{"name": "box", "nodes": 2, "hostnames": "box[1-2]",
                             "gpu": {"type": "rtx6000", "count": 2}, "cpus": 32, "memory_gib": 128}]},
        "workloads": [{"name": "smoke", "nodes": 2, "tightly_coupled": True},
                      {"name": "notebook", "gpus": 1}],
        "options": {"gang_scheduler": gang},
    }


# Node groups as each provider names and labels them (the pools' node_labels or the provider default).
PROVIDER_LABELS = {
    "eks": {"eks.amazonaws.com/nodegroup": "h100-ng", "node.kubernetes.io/instance-type": "p5.48xlarge"},
    "gke": {"cloud.google.com/gke-nodepool": "a3-mega"},
    "aks": None,  # the default kubernetes.azure.com/agentpool=h100
    "oke": None,  # the default oke.oraclecloud.com/pool.name=h100
}


def provider_fleet(provider: str, gang: str = "auto", **fleet: Any) -> dict[str, Any]:
    """The platform fleet on a managed provider (its h100 pool labelled as that provider's node group)."""
    data = platform_fleet(gang)
    data["fleet"]["provider"] = provider
    if PROVIDER_LABELS.get(provider):
        data["fleet"]["pools"][0]["node_labels"] = dict(PROVIDER_LABELS[provider])
    data["fleet"].update(fleet)
    return data


def bare_metal_fleet(gang: str = "auto", **fleet: Any) -> dict[str, Any]:
    """The platform fleet on the site's own machines, its CPU pool also carrying the site's labels."""
    data = platform_fleet(gang)
    data["fleet"]["bare_metal"] = True
    data["fleet"]["pools"][0]["hostnames"] = "gpu[01-16]"
    data["fleet"]["pools"][1]["node_labels"] = {"example.com/rack-role": "cpu"}
    for w in data["workloads"]:  # containers on the racks, so the gangs stay on Kubernetes, not Slurm
        w["bare_metal"] = False
    data["fleet"].update(fleet)
    return data


def long_names_fleet(gang: str) -> dict[str, Any]:
    """Names at the 63-character limit, starting with a digit, for every name-derived field."""
    data = platform_fleet(gang)
    long = "9" + "n" * 62
    data["tenants"] = [{"name": "0" + "t" * 62, "share": 1}]
    for w in data["workloads"]:
        w["name"] = (w["name"] + "-" + long)[:63]
        w["tenant"] = data["tenants"][0]["name"]
    data["workloads"][0]["name"] = long
    return data


def plan_from(data: dict[str, Any], source: str = "synthetic.yaml"):
    return make_plan(Fleet.model_validate(data), source)


def example_plan(name: str, **options: Any):
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    data.setdefault("options", {}).update(options)
    return plan_from(data, f"{name}.yaml")


def kube_examples() -> list[str]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if make_plan(spec.load(path), path).kube_plane:
            out.append(path.stem)
    return out


def all_plans() -> dict[str, Any]:
    """id -> Plan. Every example with a Kubernetes plane as written and under each scheduler,
    the synthetic platform and k3s fleets under each scheduler, and Soperator's hybrid."""
    plans: dict[str, Any] = {}
    for name in kube_examples():
        plans[name] = example_plan(name)
        for gang in SCHEDULERS:
            # KAI under Argo CD is refused (tests/test_gitops.py): such an example goes with Flux
            refused = gang == "kai" and plans[name].gitops == "argocd"
            plans[f"{name}+{gang}"] = example_plan(name, gang_scheduler=gang, **({"gitops": "flux"} if refused else {}))
    plans["cloud-training+soperator"] = example_plan("cloud-training", slurm_on_kubernetes="soperator")
    # Kubernetes only hosts the Slurm operator: a plane without GPU nodes of its own
    plans["fsdp-pretraining+slinky"] = example_plan("fsdp-pretraining", slurm_on_kubernetes="slinky")
    plans["fsdp-pretraining+slinky+kueue"] = example_plan("fsdp-pretraining", slurm_on_kubernetes="slinky",
                                                          gang_scheduler="kueue")
    plans["platform"] = plan_from(platform_fleet())
    plans["edge"] = plan_from(edge_fleet())
    for gang in SCHEDULERS:
        plans[f"platform+{gang}"] = plan_from(platform_fleet(gang))
        plans[f"edge+{gang}"] = plan_from(edge_fleet(gang))
        plans[f"long-names+{gang}"] = plan_from(long_names_fleet(gang))
        plans[f"bare-metal+{gang}"] = plan_from(bare_metal_fleet(gang))
    plans["bare-metal"] = plan_from(bare_metal_fleet())
    plans["bare-metal-roce-k3s"] = plan_from(bare_metal_fleet(
        kubernetes_distribution="k3s", fabric={"kind": "roce", "nodes_per_leaf": 4, "leaves_per_spine": 2,
                                               "rdma_network": {"interface": "ens1f0np0"}}))
    plans["bare-metal-rke2-ethernet"] = plan_from(bare_metal_fleet(
        kubernetes_distribution="rke2", fabric={"kind": "ethernet", "nodes_per_leaf": 4}))
    for provider, gang in (("eks", "kueue"), ("eks", "volcano"), ("gke", "kai"), ("gke", "kueue"),
                           ("aks", "volcano"), ("oke", "kueue"), ("oke", "kai")):
        plans[f"{provider}+{gang}"] = plan_from(provider_fleet(provider, gang))
    return plans


PLANS = all_plans()


@pytest.fixture(scope="module")
def registry():
    require(_importable("jsonschema"), "jsonschema not installed")
    from generator.validate.crds import CRDRegistry

    return CRDRegistry.from_paths(crd_paths())


def _importable(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


# ---- reading a rendered bundle -----------------------------------------------------------------


def docs(files: dict[str, bytes], prefix: str) -> list[tuple[str, dict[str, Any]]]:
    return [(path, d) for path, data in sorted(files.items()) if path.startswith(prefix)
            for d in yaml.safe_load_all(data) if d is not None]


def script_labels(script: str) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """node -> labels and node -> taints, read back from node-labels.sh's label/taint lines."""
    labels: dict[str, dict[str, str]] = defaultdict(dict)
    taints: dict[str, list[str]] = defaultdict(list)
    for line in script.splitlines():
        words = line.split()
        if not words or words[0] not in ("label", "taint"):
            continue
        nodes = [w for w in words[1:] if "=" not in w]
        pairs = [w for w in words[1:] if "=" in w]
        for node in nodes:
            if words[0] == "label":
                labels[node].update(dict(p.split("=", 1) for p in pairs))
            else:
                taints[node] += pairs
    return dict(labels), dict(taints)


from generator.validate.kube_checks import CLUSTER_SCOPED_BUILTINS  # noqa: E402 (the validate table: VAPs are cluster-scoped too)


# ---- tests -------------------------------------------------------------------------------------


def test_the_examples_with_a_kubernetes_plane_are_all_covered():
    # examples are found, not listed: a new one is covered by every test here without an edit
    assert set(kube_examples()) >= {"cloud-training", "dev-ci", "grpo-rl", "inference-platform", "research-lab"}
    assert {p.hybrid for p in PLANS.values()} == {None, "partitioned", "slurm-on-kubernetes"}
    assert {p.gang_scheduler for p in PLANS.values()} == {None, *SCHEDULERS}
    assert {p.kube_plane.name for p in PLANS.values()} == {"kubernetes", "k3s"}


def test_no_kubernetes_plane_renders_nothing(example):
    plan = make_plan(spec.load(example("fsdp-pretraining")), "fsdp-pretraining.yaml")
    assert plan.kube_plane is None and k8s.render(plan) == {}


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_every_object_validates_against_its_schema(pid, registry):
    require(_importable("kubernetes_validate"), "kubernetes-validate not installed")
    from generator.validate.builtin import is_builtin, validate_builtin

    plan = PLANS[pid]
    files = k8s.render(plan)
    objs = docs(files, "kubernetes/manifests/") + docs(files, "kubernetes/workloads/")
    assert objs
    errors = []
    for path, obj in objs:
        where = f"{path}: {obj['kind']} {obj['metadata'].get('name')}"
        if is_builtin(obj["apiVersion"], obj["kind"], plan.kubernetes_version):
            errors += [f"{where}: {e}" for e in validate_builtin(obj, plan.kubernetes_version)]
            scoped = obj["kind"] not in CLUSTER_SCOPED_BUILTINS
        else:
            crd = registry.get(obj["apiVersion"], obj["kind"])
            assert crd is not None, f"{where}: no upstream CRD for {obj['apiVersion']}"
            errors += [f"{where}: {e}" for e in registry.validate(obj)]
            scoped = crd.scope == "Namespaced"
        has_ns = "namespace" in obj["metadata"]
        assert has_ns == scoped, f"{where}: namespace {'missing' if scoped else 'on a cluster-scoped object'}"
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_cel_rules_the_schema_check_cannot_evaluate(pid):
    """The CRDs' x-kubernetes-validations that apply to what we emit (CEL is not evaluated by the
    schema check): ClusterQueue flavors list every covered resource in order; a HyperNode member
    has exactly one selector; Topology levels are unique with the hostname level last."""
    files = k8s.render(PLANS[pid])
    for _, obj in docs(files, "kubernetes/manifests/"):
        if obj["kind"] == "ClusterQueue":
            for rg in obj["spec"]["resourceGroups"]:
                for fl in rg["flavors"]:
                    assert [r["name"] for r in fl["resources"]] == rg["coveredResources"]
            assert "borrowingLimit" not in str(obj) or obj["spec"].get("cohortName")
        if obj["kind"] == "HyperNode":
            for m in obj["spec"]["members"]:
                assert len(m["selector"]) == 1
        if obj["kind"] == "Topology":
            levels = [lv["nodeLabel"] for lv in obj["spec"]["levels"]]
            assert len(levels) == len(set(levels)) and levels[-1] == LABEL_HOSTNAME
            assert LABEL_HOSTNAME not in levels[:-1]
        if obj["kind"] == "ResourceFlavor" and "topologyName" in obj["spec"]:
            assert obj["spec"]["nodeLabels"]


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_references_resolve(pid):
    """Every queue a workload names exists (and is a tenant's leaf queue); every flavor, cohort,
    topology, parent queue, HyperNode member and RayCluster a manifest names exists."""
    plan = PLANS[pid]
    files = k8s.render(plan)
    man = [o for _, o in docs(files, "kubernetes/manifests/")]
    work = [o for _, o in docs(files, "kubernetes/workloads/")]
    by_kind: dict[str, set[tuple[str | None, str]]] = defaultdict(set)
    for o in man + work:
        by_kind[f"{o['apiVersion'].split('/')[0]}/{o['kind']}"].add(
            (o["metadata"].get("namespace"), o["metadata"]["name"]))
    names = lambda key: {n for _, n in by_kind[key]}  # noqa: E731
    kai_queues = {o["metadata"]["name"]: o for o in man if o["kind"] == "Queue" and "run.ai" in o["apiVersion"]}
    kai_leaves = {n for n, o in kai_queues.items() if o["spec"].get("parentQueue")}
    plane_nodes = set(plan.kube_plane.nodes)

    def queue_exists(o: dict[str, Any], ns: str | None) -> None:
        labels = o.get("metadata", {}).get("labels", {})
        ann = o.get("metadata", {}).get("annotations", {})
        if "kueue.x-k8s.io/queue-name" in labels:
            assert (ns, labels["kueue.x-k8s.io/queue-name"]) in by_kind["kueue.x-k8s.io/LocalQueue"], o
        for key in ("volcano.sh/queue-name",):
            if key in labels:
                assert labels[key] in names("scheduling.volcano.sh/Queue"), o
        if "scheduling.volcano.sh/queue-name" in ann:
            assert ann["scheduling.volcano.sh/queue-name"] in names("scheduling.volcano.sh/Queue")
        if "kai.scheduler/queue" in labels:
            assert labels["kai.scheduler/queue"] in kai_leaves, o

    for o in man + work:
        ns, sp = o["metadata"].get("namespace"), o.get("spec", {})
        queue_exists(o, ns)
        for tmpl in _pod_templates(o):
            queue_exists(tmpl, ns)
        if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano.sh"):
            assert sp["queue"] in names("scheduling.volcano.sh/Queue")
        if o["kind"] == "PodGroup":
            assert sp["queue"] in kai_leaves
            if "topologyConstraint" in sp:
                assert sp["topologyConstraint"]["topology"] in names("kai.scheduler/Topology")
        if o["kind"] == "Pod" and KAI_PG in o["metadata"].get("annotations", {}):
            assert (ns, o["metadata"]["annotations"][KAI_PG]) in by_kind["scheduling.run.ai/PodGroup"]
        if o["kind"] == "LocalQueue":
            assert sp["clusterQueue"] in names("kueue.x-k8s.io/ClusterQueue")
        if o["kind"] == "ClusterQueue":
            assert sp["cohortName"] in names("kueue.x-k8s.io/Cohort")
            assert {f["name"] for rg in sp["resourceGroups"] for f in rg["flavors"]} <= names(
                "kueue.x-k8s.io/ResourceFlavor")
        if o["kind"] == "ResourceFlavor" and "topologyName" in sp:
            assert sp["topologyName"] in names("kueue.x-k8s.io/Topology")
        if o["kind"] == "Queue" and sp.get("parentQueue"):
            assert sp["parentQueue"] in kai_queues
        if o["kind"] == "HyperNode":
            for m in sp["members"]:
                if m["type"] == "Node":  # nodes by the leaf label node-labels.sh sets, never by name
                    match = dict(m["selector"]["labelMatch"]["matchLabels"])
                    # in a hybrid also the plane label (a leaf may hold nodes of both planes)
                    assert (LABEL_PLANE in match) == bool(plan.hybrid)
                    assert match.pop(LABEL_PLANE, "kubernetes") == "kubernetes"
                    (key, leaf), = match.items()
                    assert key == LABEL_LEAF
                    assert any(plan.fabric.leaf_of(n).name == leaf for n in plane_nodes), leaf
                else:
                    assert m["selector"]["exactMatch"]["name"] in names("topology.volcano.sh/HyperNode")
        if o["kind"] == "RayJob":
            assert (ns, sp["clusterSelector"]["ray.io/cluster"]) in by_kind["ray.io/RayCluster"]
        if o["kind"] == "Service" and sp.get("clusterIP") == "None":
            assert any(_selects(sp["selector"], t) for w in work for t in _pod_templates(w)), o


KAI_PG = "pod-group-name"


def _pod_templates(o: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod (template) an object stands for, as {metadata, spec}."""
    sp = o.get("spec", {})
    if o["kind"] == "Pod":
        return [o]
    if o["kind"] in ("Job", "Deployment") and "template" in sp:
        return [sp["template"]]
    if o["kind"] == "Job":  # Volcano
        return [t["template"] for t in sp["tasks"]]
    if o["kind"] == "RayCluster":
        return [sp["headGroupSpec"]["template"], *(g["template"] for g in sp["workerGroupSpecs"])]
    return []


def _selects(selector: dict[str, str], tmpl: dict[str, Any]) -> bool:
    labels = tmpl.get("metadata", {}).get("labels", {})
    return all(labels.get(k) == v for k, v in selector.items())


# Nodes known by their real names (bare metal, or generic machines whose pools list their hostnames)
# and nodes known by their node group's labels (the plan's names only count them).
NAMED_PLANS = sorted(pid for pid, p in PLANS.items() if not p.platform.cloud)
CLOUD_PLANS = sorted(pid for pid, p in PLANS.items() if p.platform.cloud)


def test_the_plans_cover_bare_metal_and_every_provider():
    assert NAMED_PLANS and CLOUD_PLANS
    assert {PLANS[pid].platform.provider for pid in CLOUD_PLANS} == {"generic", "eks", "gke", "aks", "oke"}
    assert {PLANS[pid].platform.distribution for pid in PLANS} == {"upstream", "k3s", "rke2"}


@pytest.mark.parametrize("pid", NAMED_PLANS)
def test_selected_labels_are_labels_the_script_sets(pid):
    """Bare metal: flavors, topology levels and every pod's nodeSelector use labels node-labels.sh
    sets on the real hostnames: each flavor's / selector's labels together on at least one of this
    plane's nodes, and every topology level on every node of the plane (Kueue and KAI need each
    level on each node)."""
    plan = PLANS[pid]
    files = k8s.render(plan)
    labels, taints = script_labels(files["kubernetes/node-labels.sh"].decode())
    kube_nodes = set(plan.kube_plane.nodes)
    assert kube_nodes <= set(labels)

    def matched(sel: dict[str, str]) -> set[str]:
        return {n for n, lb in labels.items() if all(lb.get(k) == v for k, v in sel.items())}

    for _, o in docs(files, "kubernetes/manifests/") + docs(files, "kubernetes/workloads/"):
        if o["kind"] == "ResourceFlavor":
            hit = matched(o["spec"]["nodeLabels"])
            assert hit and hit <= kube_nodes, o
        if o["kind"] == "Topology":
            for lv in o["spec"]["levels"][:-1]:
                if lv["nodeLabel"] == LABEL_CLIQUE:  # GFD's label on the NVLink trays, not the script's
                    users = [f for _, f in docs(files, "kubernetes/manifests/") if f["kind"] == "ResourceFlavor"
                             and f["spec"].get("topologyName") == o["metadata"]["name"]]
                    assert users and all(u["spec"]["nodeLabels"][LABEL_POOL] in plan.platform.compute_domains
                                         for u in users), o
                    continue
                assert all(lv["nodeLabel"] in labels[n] for n in kube_nodes), lv
        for tmpl in _pod_templates(o):
            sel = tmpl["spec"].get("nodeSelector")
            assert sel and LABEL_POOL in sel, o["metadata"]["name"]
            hit = matched(sel)
            assert hit and hit <= kube_nodes, (o["metadata"]["name"], sel)
            assert not any(t.get("key") == LABEL_PLANE for t in tmpl["spec"].get("tolerations", []))
    for node, ts in taints.items():
        assert node not in kube_nodes and labels[node][LABEL_PLANE] == "slurm" and ts == [
            "orchgen.io/plane=slurm:NoSchedule"]
    if plan.hybrid:
        assert all(labels[n][LABEL_PLANE] == "kubernetes" for n in kube_nodes)
        slurm = plan.slurm_plane
        if slurm.host == "kubernetes":
            assert set(taints) == set(slurm.nodes)
        else:
            assert not taints and not set(slurm.nodes) & set(labels)
    else:
        assert not taints and all(LABEL_PLANE not in lb for lb in labels.values())
    migs = {s.pool: s.hardware.mig for s in plan.kube_plane.slices if s.gpu_type and s.hardware.mig}
    for n in labels:
        expect = {**plan.platform.script_labels.get(plan.fabric.pool_of[n], {}), **plan.fabric.node_labels(n)}
        mig = migs.get(expect[LABEL_POOL])
        if mig:  # the MIG manager's layout for the node (issue 10)
            expect["nvidia.com/mig.config"] = mig.config_name
        assert {k: v for k, v in labels[n].items() if k != LABEL_PLANE} == expect


@pytest.mark.parametrize("pid", CLOUD_PLANS)
def test_cloud_pools_are_selected_by_their_node_group_labels(pid):
    """Off bare metal every selector is the pool's node-group labels (plus the plane label in a
    hybrid), node-labels.sh names no node and checks each pool's node count by those labels."""
    plan = PLANS[pid]
    files = k8s.render(plan)
    selectors = plan.platform.selectors
    for pool, sel in selectors.items():
        assert sel and LABEL_HOSTNAME not in sel, pool
    plane = {LABEL_PLANE: "kubernetes"} if plan.hybrid else {}
    # flavors are content-named (issue 14): <pool>-<hash of the spec>
    pool_of_flavor = {kueue.flavor_name(plan, s.pool): s.pool for s in plan.kube_plane.slices}
    for _, o in docs(files, "kubernetes/manifests/") + docs(files, "kubernetes/workloads/"):
        if o["kind"] == "ResourceFlavor":
            assert o["spec"]["nodeLabels"] == {**selectors[pool_of_flavor[o["metadata"]["name"]]], **plane}
        for tmpl in _pod_templates(o):
            sel = tmpl["spec"]["nodeSelector"]
            assert any(sel == {**s, **plane} for s in selectors.values()), sel
    script = files["kubernetes/node-labels.sh"].decode()
    invented = set(plan.kube_plane.nodes) | set(plan.slurm_plane.nodes if plan.slurm_plane else ())
    assert not invented & set(re.findall(r"[A-Za-z0-9][-A-Za-z0-9.]*", script))
    expected = [f"expect_nodes {shlex.quote(','.join(f'{k}={v}' for k, v in sorted(selectors[p].items())))} "
                f"{n}" for p, n in pool_counts(plan)]
    assert [li for li in script.splitlines() if li.startswith("expect_nodes ")] == expected


def plan_pools(plan) -> list[str]:
    return [p for leaf in plan.fabric.leaves for p in leaf.pools]  # a leaf may hold several pools


def pool_counts(plan) -> list[tuple[str, int]]:
    """Nodes Kubernetes runs per pool (both planes' with Slurm on Kubernetes), in fabric order."""
    counts: dict[str, int] = {}
    planes = [plan.kube_plane] + ([plan.slurm_plane] if plan.slurm_plane and plan.slurm_plane.host == "kubernetes" else [])
    for pl in planes:
        for s in pl.slices:
            counts[s.pool] = counts.get(s.pool, 0) + len(s.nodes)
    order = plan_pools(plan)
    return sorted(counts.items(), key=lambda kv: order.index(kv[0]))


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_workloads_sit_in_their_tenant_namespace_on_their_pool(pid):
    plan = PLANS[pid]
    files = k8s.render(plan)
    kube_workloads = [w for w in plan.workloads if w.plane == plan.kube_plane.name]
    assert {p for p in files if p.startswith("kubernetes/workloads/")} == {
        f"kubernetes/workloads/{w.name}.yaml" for w in kube_workloads}
    tenants = {t.name for t in plan.tenants}
    for w in kube_workloads:
        assert w.tenant in tenants
        for o in yaml.safe_load_all(files[f"kubernetes/workloads/{w.name}.yaml"]):
            assert o["metadata"]["namespace"] == w.tenant
            for tmpl in _pod_templates(o):
                pool = plan.platform.selectors.get(w.pool) or {LABEL_POOL: w.pool}
                assert tmpl["spec"]["nodeSelector"] == {**pool, **({LABEL_PLANE: "kubernetes"} if plan.hybrid else {})}
    ns = {d["metadata"]["name"] for _, d in docs(files, "kubernetes/manifests/00-")}
    assert ns == tenants


def test_k3s_single_tenant_without_gang_gets_no_queues():
    plan = example_plan("dev-ci")
    files = k8s.render(plan)
    assert plan.kube_plane.name == "k3s" and plan.gang_scheduler is None
    assert sorted(p for p in files if "manifests" in p) == [
        "kubernetes/manifests/00-namespaces.yaml", "kubernetes/manifests/01-priorities.yaml",
        "kubernetes/manifests/05-network-policies.yaml", "kubernetes/manifests/10-quotas.yaml",
        "kubernetes/manifests/38-gpu-health.yaml"]
    quota = yaml.safe_load(files["kubernetes/manifests/10-quotas.yaml"])
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}  # nominal: no quota manager
    job = yaml.safe_load(files["kubernetes/workloads/ci-smoke.yaml"])
    assert "labels" not in job["spec"]["template"]["metadata"] or not any(
        "queue" in k for k in job["spec"]["template"]["metadata"]["labels"])
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "1"}  # asks for 1 of the box's 2


def test_k3s_with_a_gang_gets_the_schedulers_objects():
    plan = plan_from(edge_fleet())
    files = k8s.render(plan)
    assert plan.kube_plane.name == "k3s" and plan.gang_scheduler == "kueue"
    assert "kubernetes/manifests/20-kueue.yaml" in files


@pytest.mark.parametrize("pid", ["research-lab", "cloud-training", "platform+volcano", "grpo-rl+kai"])
def test_resource_quota_follows_the_borrowing_decision(pid):
    plan = PLANS[pid]
    files = k8s.render(plan)
    plane_gpus = sum(s.gpus for s in plan.kube_plane.slices)
    rqs = [rq for _, rq in docs(files, "kubernetes/manifests/10-")]
    if plan.gang_scheduler == "kueue":  # the ClusterQueue is the quota: none that refuses gated pods
        assert rqs == []
    assert len(rqs) == (0 if plan.gang_scheduler == "kueue" else len(plan.tenants))
    for rq in rqs:
        assert rq["spec"]["hard"] == {"requests.nvidia.com/gpu": str(plane_gpus)}


def test_node_labels_script_is_valid_bash_and_labels_every_node(tmp_path):
    """bash -n, then a run against a recording stand-in for kubectl: every node labelled (and the
    Slurm nodes of a Slinky hybrid tainted), twice with the same calls (idempotent)."""
    bash = tool("bash")
    for pid in ("fsdp-pretraining+slinky", "research-lab", "dev-ci", "bare-metal"):
        plan = PLANS[pid]
        script = tmp_path / f"{pid}.sh"
        script.write_bytes(k8s.render(plan)["kubernetes/node-labels.sh"])
        subprocess.run([bash, "-n", str(script)], check=True)
        log = tmp_path / f"{pid}.log"
        fake = tmp_path / "kubectl"
        fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\n')  # dash's echo would expand "\\n"
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        env = {**os.environ, "KUBECTL": str(fake)}
        for _ in range(2):
            subprocess.run([bash, str(script)], check=True, env=env)
        calls = log.read_text().splitlines()
        first, second = calls[: len(calls) // 2], calls[len(calls) // 2:]
        assert first == second
        labelled = {w for c in first if c.startswith("label node --overwrite") for w in c.split()[3:] if "=" not in w}
        expected = set(plan.kube_plane.nodes)
        if plan.hybrid and plan.slurm_plane.host == "kubernetes":
            expected |= set(plan.slurm_plane.nodes)
        assert labelled == expected
        slinky = plan.hybrid and plan.slurm_plane.host == "kubernetes"
        reads = ("get nodes -l orchgen.io/plane=kubernetes", "annotate node --overwrite -l") if slinky else ()
        assert all(c.startswith(("label node --overwrite", "taint node --overwrite", *reads)) for c in first)


def test_node_labels_script_annotates_slinky_nodes_as_the_slinky_renderer_says():
    from generator.render.kubernetes import slinky

    plan = PLANS["fsdp-pretraining+slinky"]
    script = k8s.render(plan)["kubernetes/node-labels.sh"].decode()
    annotated = ["kubectl " + " ".join(["annotate", "node", "--overwrite", *line.split()[1:]])
                 for line in script.splitlines() if line.startswith("annotate ")]
    assert annotated == slinky.annotate_commands(plan) and annotated
    partitioned = k8s.render(PLANS["research-lab"])["kubernetes/node-labels.sh"].decode()
    assert not [line for line in partitioned.splitlines() if line.startswith("annotate ")]
    cloud = k8s.render(PLANS["cloud-training"])["kubernetes/node-labels.sh"].decode()
    assert not [line for line in cloud.splitlines() if line.startswith("annotate ")]
    assert slinky.annotate_commands(PLANS["cloud-training"]) == []  # no per-leaf group of invented names


def test_node_labels_script_untaints_only_moved_kubernetes_nodes(tmp_path):
    """A leaf moved from Slurm to Kubernetes (Slinky hybrid) loses the Slurm taint; others are left alone."""
    script = tmp_path / "s.sh"
    script.write_bytes(k8s.render(PLANS["fsdp-pretraining+slinky"])["kubernetes/node-labels.sh"])
    log = tmp_path / "log"
    fake = tmp_path / "kubectl"
    fake.write_text(f"""#!/bin/sh
printf "%s\\n" "$*" >> {log}
case "$1 $2" in
  "get nodes") printf 'gpu-001 nvidia.com/gpu orchgen.io/plane\\nl4-001 nvidia.com/gpu\\ngpu-002 orchgen.io/plane\\n' ;;
esac
""")
    fake.chmod(0o755)
    subprocess.run([tool("bash"), str(script)], check=True, env={**os.environ, "KUBECTL": str(fake)})
    untaints = [c for c in log.read_text().splitlines() if c.startswith("taint node") and c.endswith("-")]
    assert untaints == ["taint node gpu-001 gpu-002 orchgen.io/plane:NoSchedule-"]


def test_cloud_script_assigns_planes_by_selector_and_keeps_slurm_nodes_there(tmp_path):
    """Off bare metal (a Slinky hybrid whose h100 pool both planes share): the script asks kubectl
    for the pool's nodes by label, keeps the nodes already on Slurm there, fills Slurm up to the
    plan's count, gives the rest to Kubernetes, and names no node it was not given."""
    plan = PLANS["cloud-training"]
    script = tmp_path / "s.sh"
    script.write_bytes(k8s.render(plan)["kubernetes/node-labels.sh"])
    subprocess.run([tool("bash"), "-n", str(script)], check=True)
    log = tmp_path / "log"
    fake = tmp_path / "kubectl"
    # the provider's node names: 32 h100 VMs, two of them (vm-30, vm-31) already on Slurm
    fake.write_text(f"""#!/bin/bash
printf "%s\\n" "$*" >> {log}
if [[ "$1 $2" == "get nodes" ]]; then
  case "$4" in
    *pool=h100,orchgen.io/plane=slurm) printf 'vm-30\\nvm-31\\n' ;;
    *pool=h100,orchgen.io/plane!=slurm) for i in $(seq -w 0 29); do echo vm-$i; done ;;
    *pool=h100) for i in $(seq -w 0 31); do echo vm-$i; done ;;
    *pool=l4) for i in 0 1 2 3 4 5 6 7; do echo l4vm-$i; done ;;
  esac
fi
""")
    fake.chmod(0o755)
    proc = subprocess.run([tool("bash"), str(script)], env={**os.environ, "KUBECTL": str(fake)},
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "node-labels.sh:" not in proc.stderr, proc.stderr
    calls = log.read_text().splitlines()
    slurm = [c.split()[3] for c in calls if c.startswith("label node") and c.endswith("orchgen.io/plane=slurm")]
    kube = [c.split()[3] for c in calls if c.startswith("label node") and c.endswith("orchgen.io/plane=kubernetes")
            and " -l " not in c]
    tainted = [c.split()[3] for c in calls if c.startswith("taint node") and c.endswith(":NoSchedule")]
    on_slurm = sum(len(s.nodes) for s in plan.slurm_plane.slices if s.pool == "h100")
    assert slurm[:2] == ["vm-30", "vm-31"] and len(slurm) == on_slurm == len(set(slurm))
    assert tainted == slurm and not set(kube) & set(slurm) and len(kube) == 32 - on_slurm
    assert "label node --overwrite -l orchgen.io/pool=l4 orchgen.io/plane=kubernetes" in calls
    assert not re.search(r"h100-0\d\d", "\n".join(calls))  # the plan's invented names never reach kubectl


def test_node_labels_script_reports_failures(tmp_path):
    bash = tool("bash")
    script = tmp_path / "s.sh"
    script.write_bytes(k8s.render(PLANS["bare-metal"])["kubernetes/node-labels.sh"])
    fake = tmp_path / "kubectl"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    proc = subprocess.run([bash, str(script)], env={**os.environ, "KUBECTL": str(fake)},
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "could not be labelled" in proc.stderr


def test_16384_nodes_render_fast_and_compactly(tmp_path):
    data = platform_fleet()
    data["fleet"]["bare_metal"] = True  # node-labels.sh names nodes only where their names are real
    for w in data["workloads"]:
        w["bare_metal"] = False  # containers on the racks: every node stays on Kubernetes
    data["fleet"]["fabric"] = {"kind": "infiniband", "nodes_per_leaf": 32, "leaves_per_spine": 16}
    data["fleet"]["pools"] = [{"name": "gb200", "nodes": 16384, "gpu": {"type": "gb200", "count": 4},
                               "cpus": 144, "memory_gib": 1800, "nvlink_domain_nodes": 18}]
    for w in data["workloads"]:
        w["pool"] = "gb200"
        w.pop("gpus", None)
    plan = plan_from(data)
    start = time.perf_counter()
    files = k8s.render(plan)
    elapsed = time.perf_counter() - start
    script = files["kubernetes/node-labels.sh"]
    assert elapsed < 10, elapsed
    assert len(script) < 1_000_000
    labels, _ = script_labels(script.decode())
    assert len(labels) == 16384
    path = tmp_path / "big.sh"
    path.write_bytes(script)
    subprocess.run([tool("bash"), "-n", str(path)], check=True)


@pytest.mark.parametrize("pid", ["platform", "cloud-training+volcano", "research-lab+kai", "dev-ci"])
def test_rendering_is_deterministic(pid):
    plan = PLANS[pid]
    first = k8s.render(plan)
    assert first == k8s.render(plan)
    again = example_plan(pid.split("+")[0]) if pid != "platform" else plan_from(platform_fleet())
    if "+" not in pid:
        assert k8s.render(again) == first


def test_bundle_includes_the_kubernetes_files(example, tmp_path, orchgen):
    out = tmp_path / "out"
    orchgen("plan", example("grpo-rl"), "-o", out, check=True)
    for rel in ("kubernetes/manifests/00-namespaces.yaml", "kubernetes/manifests/20-kueue.yaml",
                "kubernetes/manifests/35-network.yaml", "kubernetes/manifests/40-ray.yaml",
                "kubernetes/workloads/grpo-policy.yaml", "kubernetes/node-labels.sh"):
        assert (out / rel).is_file(), rel
    readme = (out / "README.md").read_text()
    assert "bash kubernetes/node-labels.sh" in readme and "kubernetes/workloads/grpo-policy.yaml" in readme


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_readme_section_agrees_with_the_files(pid):
    """The README's submission table names each starter file with the kind it holds and the queue
    it joins; its quota column is the ResourceQuota the manifests set."""
    from generator.render import report

    plan = PLANS[pid]
    readme = report.render(plan)["README.md"].decode()
    readme = readme[readme.index("## Kubernetes: node labels"):]
    files = k8s.render(plan)
    kinds = {"Deployment": "Deployment", "RayJob": "RayJob", "PodGroup": "KAI PodGroup + Pods",
             # a serving platform (serving.py): its server is the file's first object
             "InferenceService": "KServe InferenceService", "LeaderWorkerSet": "LeaderWorkerSet",
             "RayService": "RayService"}
    for w in plan.workloads:
        if w.plane != plan.kube_plane.name:
            continue
        objs = list(yaml.safe_load_all(files[f"kubernetes/workloads/{w.name}.yaml"]))
        main = next(o for o in objs if o["kind"] not in ("Service", "ComputeDomain"))
        kind = kinds.get(main["kind"]) or ("Volcano Job" if "volcano" in main["apiVersion"] else "Indexed Job")
        row = next(line for line in readme.splitlines() if line.startswith(f"| {w.name} | {w.tenant} | `kubernetes/workloads/"))
        assert f"| {kind}" in row, (row, kind)
        if plan.gang_scheduler:
            assert f"| `{w.tenant}` |" in row
    for _, rq in docs(files, "kubernetes/manifests/10-"):
        row = next(line for line in readme.splitlines() if line.startswith(f"| {rq['metadata']['namespace']} |"))
        hard = rq["spec"]["hard"]
        cell = hard["requests.nvidia.com/gpu"] if list(hard) == ["requests.nvidia.com/gpu"] else \
            ", ".join(f"{n} {r.removeprefix('requests.nvidia.com/')}" for r, n in hard.items())  # MIG (issue 10)
        assert row.rstrip(" |").endswith(cell)


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_names_and_label_values_are_what_the_api_server_accepts(pid):
    """The API server's name and label checks (not in the schemas): label values at most 63
    characters, object names DNS subdomains, namespaces and pod hostnames DNS labels, Service names
    DNS-1035 labels."""
    files = k8s.render(PLANS[pid])
    for path, o in docs(files, "kubernetes/manifests/") + docs(files, "kubernetes/workloads/"):
        md = o["metadata"]
        assert _DNS_SUBDOMAIN.match(md["name"]) and len(md["name"]) <= 253, (path, md["name"])
        if "namespace" in md or o["kind"] == "Namespace":
            ns = md.get("namespace", md["name"])
            assert _DNS_LABEL.match(ns) and len(ns) <= 63
        if o["kind"] == "Service":
            assert _DNS_1035.match(md["name"]) and len(md["name"]) <= 63
        for meta_ in [md, *(t.get("metadata", {}) for t in _pod_templates(o))]:
            for k, v in meta_.get("labels", {}).items():
                assert len(v) <= 63 and _LABEL_VALUE.match(v), (path, k, v)
        for t in _pod_templates(o):
            for key in ("hostname", "subdomain"):
                if key in t["spec"]:
                    assert _DNS_LABEL.match(t["spec"][key]) and len(t["spec"][key]) <= 63, t["spec"][key]
        if o["kind"] in ("RayJob", "RayCluster"):  # KubeRay's own name checks (ValidateRay*Metadata)
            assert _DNS_1035.match(md["name"]) and len(md["name"]) <= {"RayJob": 47, "RayCluster": 53}[o["kind"]]
        # hostnames the controllers derive: <job>-<index> (Indexed Job), <job>-<task>-<index> and a
        # Service named <job> (Volcano's svc plugin)
        if o["kind"] == "Job" and o["apiVersion"] == "batch/v1":
            assert _DNS_LABEL.match(f"{md['name']}-{o['spec']['completions'] - 1}")
            assert len(f"{md['name']}-{o['spec']['completions'] - 1}") <= 63
        if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano.sh"):
            assert _DNS_1035.match(md["name"]) and len(md["name"]) <= 63
            for t in o["spec"]["tasks"]:
                assert len(f"{md['name']}-{t['name']}-{t['replicas'] - 1}") <= 63


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_every_custom_resource_group_is_installed_by_a_release(pid):
    """Pulumi orders each custom resource after the release whose `crds` lists its API group: so
    every group our manifests use must be one (when the Helm renderer is in the bundle)."""
    from generator import render

    files = render.render(PLANS[pid])
    if "kubernetes/helm/releases.yaml" not in files:
        pytest.skip("no Helm renderer registered")
    groups = {g for r in yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"] for g in r["crds"]}
    used = {o["apiVersion"].split("/")[0] for _, o in docs(files, "kubernetes/manifests/") if "/" in o["apiVersion"]}
    builtin_groups = {"apps", "batch", "admissionregistration.k8s.io", "scheduling.k8s.io", "rbac.authorization.k8s.io",
                      "networking.k8s.io"}
    assert used - builtin_groups <= groups


def test_real_kubectl_parses_the_scripts_commands(tmp_path):
    """kubectl (no API server here) gets past argument parsing for every kind of line the script
    runs: it fails only on connecting, where a malformed label or taint fails before that."""
    kubectl = tool("kubectl")
    config = offline_kubeconfig(tmp_path)
    script = k8s.render(PLANS["fsdp-pretraining+slinky"])["kubernetes/node-labels.sh"].decode()
    script += k8s.render(PLANS["cloud-training"])["kubernetes/node-labels.sh"].decode()  # label -l SELECTOR
    lines = {" ".join(w.split()[:2]) if w.split()[1] == "-l" else w.split()[0]: w.split()
             for w in script.splitlines() if w.startswith(("label ", "taint ", "annotate "))}
    assert set(lines) == {"label", "taint", "annotate -l", "label -l"}  # Slurm nodes annotated; cloud selectors
    for verb, words in ((k.split()[0], v) for k, v in lines.items()):
        proc = subprocess.run([kubectl, verb, "node", "--overwrite", *words[1:]], capture_output=True, text=True,
                              env={**os.environ, "KUBECONFIG": str(config)}, timeout=60)
        assert proc.returncode != 0 and "refused" in proc.stderr, proc.stderr
    bad = subprocess.run([kubectl, "taint", "node", "--overwrite", "n1", "orchgen.io/plane=slurm:Bogus"],
                         capture_output=True, text=True, env={**os.environ, "KUBECONFIG": str(config)}, timeout=60)
    assert "refused" not in bad.stderr  # the check has teeth: a bad taint fails before connecting
