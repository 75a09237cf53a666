"""The fleet decision on the examples, and the node split as a property over random fleets."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from generator import spec
from generator.spec import hostlist
from generator.decide import make_plan
from generator.errors import OrchgenError
from generator.spec import Fleet

from .refusals import check_refusal


from .support import plan_of  # noqa: E402


def test_fsdp_pretraining_is_slurm_only(example):
    p = plan_of(example("fsdp-pretraining"))
    assert list(p.planes) == ["slurm"] and p.hybrid is None and p.gang_scheduler is None
    assert p.slurm_plane.host == "bare-metal" and len(p.slurm_plane.nodes) == 16
    assert p.charts == {}


def test_inference_platform_is_kubernetes_with_quota(example):
    p = plan_of(example("inference-platform"))
    assert list(p.planes) == ["kubernetes"]
    assert p.gang_scheduler == "kueue"  # tenants share GPUs: quota + borrowing
    assert not any(w.gang_scheduler_required for w in p.workloads)
    assert [t.name for t in p.tenants] == ["search", "assistant", "ads"]


def test_grpo_needs_gang_and_kuberay(example):
    p = plan_of(example("grpo-rl"))
    (w,) = p.workloads
    assert (w.primary, w.ray_host, w.gang_scheduler_required, w.plane) == ("ray", "kubernetes", True, "kubernetes")
    assert p.gang_scheduler == "kueue" and "kuberay-operator" in p.charts


def test_dev_ci_is_k3s_without_gang(example):
    p = plan_of(example("dev-ci"))
    assert list(p.planes) == ["k3s"] and p.gang_scheduler is None
    assert p.tenants[0].implicit and p.tenants[0].name == "dev-ci"


def test_research_lab_is_partitioned_hybrid(example):
    p = plan_of(example("research-lab"))
    assert p.hybrid == "partitioned"
    assert p.slurm_plane.host == "bare-metal"
    assert {s.pool for s in p.slurm_plane.slices} == {"h100"}
    assert {s.pool for s in p.planes["kubernetes"].slices} == {"l40s"}


def test_cloud_training_runs_slurm_on_kubernetes_with_a_split_pool(example):
    p = plan_of(example("cloud-training"))
    assert p.hybrid == "slurm-on-kubernetes" and p.slurm_plane.operator == "slinky"
    assert p.gang_scheduler == "kueue"  # finetune-jobs is 2-node tightly coupled on Kubernetes
    assert {"cert-manager", "slurm-operator-crds", "slurm-operator", "slurm"} <= set(p.charts)
    h100 = {s.plane: s for plane in p.planes.values() for s in plane.slices if s.pool == "h100"}
    assert set(h100) == {"slurm", "kubernetes"}
    # issue 11: Kubernetes wants 2 nodes, less than a leaf of 8, and a whole leaf would idle 6 of them,
    # so the last leaf is split by node (it was 3 leaves / 1 leaf before)
    assert len(h100["slurm"].nodes) == 30 and h100["kubernetes"].nodes == ("h100-031", "h100-032")
    assert h100["kubernetes"].leaves == ("leaf004",) and [s.leaf for s in p.shared_leaves] == ["leaf004"]
    whole = make_plan(spec.load(example("cloud-training")).model_copy(
        update={"options": spec.load(example("cloud-training")).options.model_copy(update={"split": "leaf"})}),
        "cloud-training.yaml")
    h100 = {s.plane: s for plane in whole.planes.values() for s in plane.slices if s.pool == "h100"}
    assert len(h100["slurm"].leaves) == 3 and len(h100["kubernetes"].leaves) == 1 and not whole.shared_leaves


def test_plan_json_lists_plane_nodes_as_hostlists(example, tmp_path, orchgen):
    out = tmp_path / "out"
    orchgen("plan", example("research-lab"), "-o", out, check=True)
    data = json.loads((out / "plan.json").read_text())
    assert data["planes"]["slurm"]["nodes"] == ["gpu-h100-[001-064]"]
    assert data["planes"]["kubernetes"]["nodes"] == ["l40s-[001-016]"]
    assert [w["name"] for w in data["workloads"]] == ["pretrain-70b", "vision-sweeps", "model-api", "eval-batch"]


# ---- property: planes never share a node, cover the fleet, and own whole leaves --------------

@st.composite
def fleets(draw):
    n_pools = draw(st.integers(1, 4))
    pools = []
    for i in range(n_pools):
        pool = {"name": f"p{i}", "nodes": draw(st.integers(1, 300)), "cpus": 64, "memory_gib": 512}
        if draw(st.booleans()) or i == 0:
            pool["gpu"] = {"type": "h100", "count": draw(st.sampled_from([1, 4, 8]))}
        pools.append(pool)
    workloads = []
    for j in range(draw(st.integers(1, 6))):
        w = {"name": f"w{j}", "nodes": draw(st.integers(1, 8)),
             "tightly_coupled": draw(st.booleans()), "bare_metal": draw(st.booleans()),
             "long_lived_services": draw(st.booleans()), "python_native_pipeline": draw(st.booleans()),
             "edge_or_dev": draw(st.booleans())}
        if draw(st.booleans()):
            w["pool"] = draw(st.sampled_from(pools))["name"]
        workloads.append(w)
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "prop"},
        "fleet": {"bare_metal": draw(st.booleans()),
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": draw(st.integers(1, 64)),
                             "leaves_per_spine": draw(st.one_of(st.none(), st.integers(1, 8)))},
                  "pools": pools},
        "tenants": [{"name": f"t{k}", "share": draw(st.integers(1, 9))} for k in range(draw(st.integers(0, 4)))],
        "workloads": workloads,
        "options": {"slurm_on_kubernetes": draw(st.sampled_from(["auto", "slinky", "none"]))},
    }


def plan_leaves(data, pool):
    per = data["fleet"]["fabric"]["nodes_per_leaf"]
    return range(-(-pool["nodes"] // per))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_split_is_disjoint_whole_leaves_and_covers_the_fleet(data):
    # whole leaves are options.split: leaf since issue 11 (auto may split a leaf by node:
    # tests/test_split.py holds the properties of every mode)
    data["options"]["split"] = "leaf"
    # keep workloads within their pools
    sizes = {p["name"]: p["nodes"] for p in data["fleet"]["pools"]}
    for w in data["workloads"]:
        w["nodes"] = min(w["nodes"], sizes.get(w.get("pool"), min(sizes.values())))
    fleet = Fleet.model_validate(data)
    try:
        plan = make_plan(fleet, "prop.yaml")
    except OrchgenError as exc:
        # the split's refusal (a plane would get no leaf at all), or the placement's: a named pool
        # the split gave wholly to the other plane, a job longer than its plane's part of its pool
        if check_refusal(exc, data).startswith("split"):
            assert "never splits a leaf" in str(exc), exc
            assert any(len(plan_leaves(data, p)) < 2 for p in data["fleet"]["pools"])
        return
    owned = [n for plane in plan.planes.values() for n in plane.nodes]
    assert len(owned) == len(set(owned)), "a node is in two planes"
    every = {n for leaf in plan.fabric.leaves for n in leaf.nodes}
    assert set(owned) <= every
    assert set(owned) == every, "some nodes belong to no plane"
    leaf_plane = {}
    for plane in plan.planes.values():
        for s in plane.slices:
            for leaf in s.leaves:
                assert leaf not in leaf_plane, "leaf split across planes"
                leaf_plane[leaf] = plane.name
    for plane in plan.planes.values():
        for s in plane.slices:
            expected = [n for leaf in plan.fabric.leaves if leaf.name in s.leaves for n in leaf.nodes]
            assert list(s.nodes) == expected
            assert hostlist.expand(s.hostlist) == list(s.nodes)
    for t in plan.tenants:
        assert set(t.quotas) == {s.pool for s in (plan.kube_plane.slices if plan.kube_plane else ())}
    if plan.kube_plane:
        for s in plan.kube_plane.slices:
            assert sum(t.quotas[s.pool].gpus for t in plan.tenants) == s.gpus
            assert sum(t.quotas[s.pool].cpus for t in plan.tenants) == s.cpus * len(s.nodes)
            assert sum(t.quotas[s.pool].memory_gib for t in plan.tenants) == s.memory_gib * len(s.nodes)
