"""Tainted node pools: every pod orchgen writes or configures for a pool tolerates that pool's taints,
and a pod for another pool (a CPU pool) does not tolerate them.

The pods are read where the real consumers read them: the starters and RayClusters as written, the
Kueue flavors' tolerations, the NicClusterPolicy's, and the charts' pods from `helm template` of the
real charts in ../shared/charts at the catalog's pinned versions with the bundle's values (the GPU
Operator's ClusterPolicy `daemonsets.tolerations`, which its controller copies into every operand
daemonset, NFD's worker, the EFA device plugin). The taints expected are written here from the
providers' documentation (providers.py cites it), not read back from orchgen.
"""
from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.catalog import CATALOG
from generator.render import render
from tests._consumers import REPO, require, tool
from tests.support import plan_of

EXAMPLES = REPO / "examples"
CHARTS = Path(os.environ.get("ORCHGEN_CHARTS", REPO.parent / "shared" / "charts"))

# The providers' documented default taints of GPU node pools (EKS node-taints recipe and EKS GPU
# node pools; GKE "Run GPUs in Standard node pools"; AKS advanced scheduler best practices).
GPU = {"eks": [("nvidia.com/gpu", "true", "NoSchedule")], "gke": [("nvidia.com/gpu", "present", "NoSchedule")],
       "aks": [("sku", "gpu", "NoSchedule")], "oke": [], "generic": []}
SITE = [("example.com/dedicated", "training", "NoSchedule"), ("example.com/fabric", None, "NoExecute")]


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())


def _bare_metal(gang: str) -> dict[str, Any]:
    """The bare-metal example with site taints on its GPU pool, a CPU pool with its own taint, a Ray
    workload and a CPU job on it."""
    d = _load("baremetal-k8s-training")
    d["fleet"]["pools"][0]["taints"] = [{"key": k, **({"value": v} if v else {}), "effect": e} for k, v, e in SITE]
    d["fleet"]["pools"].append({"name": "cpu", "nodes": 4, "hostnames": "cpu-[01-04]", "cpus": 64, "memory_gib": 256,
                                "taints": [{"key": "example.com/cpu-only", "value": "yes", "effect": "NoSchedule"}]})
    d["workloads"] += [{"name": "rl", "python_native_pipeline": True, "nodes": 2, "tenant": "llm",
                        "bare_metal": False, "multi_tenant": True, "pool": "h200"},
                       {"name": "etl", "tenant": "speech", "pool": "cpu", "bare_metal": False, "multi_tenant": True}]
    d.setdefault("options", {})["gang_scheduler"] = gang
    return d


def _oke_tainted() -> dict[str, Any]:
    d = _load("oke-training")
    d["fleet"]["pools"][0]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return d


def _cases() -> dict[str, tuple[dict[str, Any], dict[str, list[tuple[str, str | None, str]]]]]:
    """id -> (workload.yaml data, pool -> the taints its nodes carry)."""
    out = {}
    for name in ("eks-training", "gke-training", "aks-inference", "oke-training"):
        d = _load(name)
        prov = d["fleet"]["provider"]
        out[name] = (d, {p["name"]: (GPU[prov] if p.get("gpu") else []) for p in d["fleet"]["pools"]})
    out["oke-tainted"] = (_oke_tainted(), {"oke-rdma": [("nvidia.com/gpu", "present", "NoSchedule")]})
    for gang in ("kueue", "volcano", "kai"):
        out[f"bare-metal-tainted+{gang}"] = (_bare_metal(gang), {
            "h200": SITE, "cpu": [("example.com/cpu-only", "yes", "NoSchedule")]})
    # an explicit `taints: []` turns the provider's default off
    d = _load("aks-inference")
    d["fleet"]["pools"][0]["taints"] = []
    out["aks-untainted"] = (d, {"nca100": [], "cpu": []})
    return out


CASES = _cases()


def tolerates(tols: list[dict[str, Any]], taint: tuple[str, str | None, str]) -> bool:
    """core/v1 Toleration.ToleratesTaint (k8s.io/api/core/v1/toleration.go), read strictly."""
    key, value, effect = taint
    for t in tols or []:
        if t.get("effect") and t["effect"] != effect:
            continue
        if t.get("key", "") == "":
            if t.get("operator") == "Exists":
                return True
            continue
        if t["key"] != key:
            continue
        op = t.get("operator", "Equal")
        if op == "Exists" or (op == "Equal" and t.get("value", "") == (value or "")):
            return True
    return False


def _schedules(tols: list[dict[str, Any]], taints: list[tuple[str, str | None, str]]) -> bool:
    """Whether a pod with `tols` may be scheduled onto (and stay on) a node with `taints`."""
    return all(tolerates(tols, t) for t in taints if t[2] in ("NoSchedule", "NoExecute"))


def _pool_of(pod: dict[str, Any], selectors: dict[str, dict[str, str]]) -> str:
    sel = pod.get("nodeSelector") or {}
    found = [p for p, labels in selectors.items() if labels.items() <= sel.items()]
    assert len(found) == 1, f"pod selects {sel}: pools {found}"
    return found[0]


def _pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every PodSpec an object holds or makes."""
    k, spec = obj["kind"], obj.get("spec", {})
    if k == "Pod":
        return [spec]
    if k in ("Job", "Deployment", "StatefulSet", "DaemonSet") and "template" in spec:
        return [spec["template"]["spec"]]
    if k == "Job" and "tasks" in spec:  # batch.volcano.sh
        return [t["template"]["spec"] for t in spec["tasks"]]
    if k == "RayCluster":
        return [spec["headGroupSpec"]["template"]["spec"], *(g["template"]["spec"] for g in spec["workerGroupSpecs"])]
    return []


def _docs(files: dict[str, bytes], prefix: str) -> list[dict[str, Any]]:
    return [d for p, b in sorted(files.items()) if p.startswith(prefix) and p.endswith(".yaml")
            for d in yaml.safe_load_all(b) if d]


@pytest.fixture(scope="module")
def bundles():
    out = {}
    for cid, (data, _) in CASES.items():
        plan = plan_of(copy.deepcopy(data), name=f"{cid}.yaml")
        out[cid] = (plan, render(plan))
    return out


def _selectors(plan) -> dict[str, dict[str, str]]:
    from generator.render.kubernetes.common import node_selector

    kube = plan.kube_plane
    return {s.pool: node_selector(plan, s.pool) for s in kube.slices}


@pytest.mark.parametrize("cid", sorted(CASES))
def test_every_starter_and_ray_pod_tolerates_its_pool_and_no_other(cid, bundles):
    plan, files = bundles[cid]
    expected = CASES[cid][1]
    selectors = _selectors(plan)
    objs = _docs(files, "kubernetes/workloads/") + _docs(files, "kubernetes/manifests/")
    pods = [(o["kind"], o["metadata"]["name"], p) for o in objs for p in _pods(o)]
    assert pods
    for kind, name, pod in pods:
        pool = _pool_of(pod, selectors)
        tols = pod.get("tolerations", [])
        assert _schedules(tols, expected[pool]), f"{kind} {name} on {pool}: {tols} vs {expected[pool]}"
        for other, taints in expected.items():
            for t in taints:
                if t not in expected[pool]:
                    assert not tolerates(tols, t), f"{kind} {name} for pool {pool} tolerates {other}'s {t}"


@pytest.mark.parametrize("cid", sorted(CASES))
def test_kueue_flavors_carry_their_pools_tolerations(cid, bundles):
    plan, files = bundles[cid]
    expected = CASES[cid][1]
    selectors = _selectors(plan)
    flavors = [o for o in _docs(files, "kubernetes/manifests/") if o["kind"] == "ResourceFlavor"]
    if plan.gang_scheduler != "kueue":
        assert not flavors
        return
    assert flavors
    for f in flavors:
        pool = next(p for p, sel in selectors.items() if sel == f["spec"]["nodeLabels"])
        tols = f["spec"].get("tolerations", [])
        assert _schedules(tols, expected[pool]), f["metadata"]["name"]
        assert all(not tolerates(tols, t) for ts in expected.values() for t in ts if t not in expected[pool])


def _gpu_taints(plan, expected) -> list[tuple[str, str | None, str]]:
    gpu_pools = [s.pool for s in plan.kube_plane.slices if s.gpu_type]
    return [t for p in gpu_pools for t in expected[p]]


@pytest.mark.parametrize("cid", sorted(CASES))
def test_nic_cluster_policy_daemonsets_tolerate_the_gpu_pools(cid, bundles):
    plan, files = bundles[cid]
    policies = [o for o in _docs(files, "kubernetes/manifests/") if o["kind"] == "NicClusterPolicy"]
    for p in policies:
        assert _schedules(p["spec"].get("tolerations", []), _gpu_taints(plan, CASES[cid][1]))


def helm_template(component: str, version: str, namespace: str, values: bytes, kube: str, tmp: Path) -> list[dict]:
    helm = tool("helm")
    chart = CHARTS / component / version
    require(chart.is_dir(), f"chart {component} {version} not in {CHARTS}")
    vfile = tmp / f"{component}.values.yaml"
    vfile.write_bytes(values)
    env = {**os.environ, **{k: str(tmp / k.lower()) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}}
    out = subprocess.run([helm, "template", component, str(chart), "-n", namespace, "-f", str(vfile),
                          "--kube-version", kube], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


# The releases whose pods run on the GPU nodes, and where the rendered chart says what they tolerate
GPU_NODE_RELEASES = ("gpu-operator", "aws-efa-k8s-device-plugin")


@pytest.mark.parametrize("cid", sorted(CASES))
def test_charts_gpu_node_pods_tolerate_the_gpu_pools(cid, bundles, tmp_path):
    plan, files = bundles[cid]
    taints = _gpu_taints(plan, CASES[cid][1])
    rels = yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"]
    checked = 0
    for rel in rels:
        if rel["name"] not in GPU_NODE_RELEASES:
            continue
        assert rel["version"] == CATALOG[rel["name"]].version
        objs = helm_template(rel["name"], rel["version"], rel["namespace"],
                             files[f"kubernetes/helm/{rel['values']}"], plan.kubernetes_version, tmp_path)
        for o in objs:
            if o["kind"] == "ClusterPolicy":  # the GPU Operator's operands: driver, toolkit, device plugin, DCGM ...
                checked += 1
                assert _schedules(o["spec"]["daemonsets"].get("tolerations", []), taints), "ClusterPolicy"
            elif o["kind"] == "DaemonSet":
                name = o["metadata"]["name"]
                if "master" in name or "gc" in name:
                    continue
                checked += 1
                assert _schedules(o["spec"]["template"]["spec"].get("tolerations", []), taints), name
    if any(r["name"] in GPU_NODE_RELEASES for r in rels):
        assert checked


def test_a_cpu_pool_pod_would_be_refused_a_gpu_node():
    """The checker itself: a pod without tolerations does not schedule onto a tainted node."""
    assert not _schedules([], GPU["gke"])
    assert _schedules([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], GPU["eks"])
    assert not _schedules([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
                          GPU["gke"])
    assert _schedules([], [("x", None, "PreferNoSchedule")])


@pytest.mark.parametrize("taint, field, words", [
    ({"key": "nvidia.com/gpu", "effect": "NoScheduleX"}, "fleet.pools[0].taints[0].effect", "NoSchedule"),
    ({"key": "bad key!", "value": "x", "effect": "NoSchedule"}, "fleet.pools[0].taints[0].key", "not a taint key"),
    ({"key": "a", "value": "-x-", "effect": "NoSchedule"}, "fleet.pools[0].taints[0].value", "not a taint value"),
    ({"key": "a", "effect": "NoSchedule", "operator": "Exists"}, "fleet.pools[0].taints[0].operator", ""),
])
def test_a_bad_taint_is_one_line_naming_file_line_and_field(tmp_path, orchgen, taint, field, words):
    d = _load("baremetal-k8s-training")
    d["fleet"]["pools"][0]["taints"] = [taint]
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"orchgen: {path}:") and f": {field}: " in line and words in line, line


def test_a_system_group_is_refused(tmp_path, orchgen):
    d = _load("baremetal-k8s-training")
    d["tenants"][0]["kubernetes_group"] = "system:masters"
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "tenants[0].kubernetes_group" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_slinky_slurmd_pods_tolerate_their_tainted_pool(tmp_path):
    """Slurm on Kubernetes: the real slurm chart renders each NodeSet's pod template from our values;
    slurmd must tolerate the plane's taint and its pool's own."""
    d = _load("fsdp-pretraining")
    taint = ("example.com/gpu", "yes", "NoSchedule")
    for p in d["fleet"]["pools"]:
        if p.get("gpu"):
            p["taints"] = [{"key": taint[0], "value": taint[1], "effect": taint[2]}]
    d.setdefault("options", {})["slurm_on_kubernetes"] = "slinky"
    plan = plan_of(d, name="fsdp-slinky.yaml")
    files = render(plan)
    [rel] = [r for r in yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"] if r["name"] == "slurm"]
    objs = helm_template("slurm", rel["version"], rel["namespace"], files[f"kubernetes/helm/{rel['values']}"],
                         plan.kubernetes_version, tmp_path)
    nodesets = [o for o in objs if o["kind"] == "NodeSet"]
    assert nodesets
    for o in nodesets:
        tols = o["spec"]["template"]["spec"].get("tolerations", [])
        assert _schedules(tols, [taint, ("orchgen.io/plane", "slurm", "NoSchedule")]), o["metadata"]["name"]
