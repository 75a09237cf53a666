"""Where a workload runs is the input's to say: pins (`workloads[].plane`) and pools (`pool:`).

The promise, as a property over random fleets and pins: a pinned plane or a named pool is never
changed. The plan honours it (and the plane that runs the workload owns nodes of its pool), or
orchgen exits 2 naming the workload's field, with its line.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from generator.decide import make_plan
from generator.errors import OrchgenError
from generator.spec import Fleet
from generator.spec.checks import check_fleet

from .refusals import check_refusal
from .test_fleet_plan import plan_of

KUBE = ("kubernetes", "k3s")


def check_honoured(plan, data: dict[str, Any]) -> None:
    for w, d in zip(data["workloads"], plan.workloads):
        assert d.name == w["name"]
        if w.get("pool"):
            assert d.pool == w["pool"], (d.name, d.pool)
        pin = w.get("plane", "auto")
        assert d.pinned == (pin != "auto")
        if pin == "slurm":
            assert d.plane == "slurm" and d.primary == "slurm"
        elif pin == "kubernetes":
            assert d.plane in KUBE and d.primary != "slurm"
        if d.pinned:
            assert d.reasons[0].startswith(f"pinned by the input (plane: {pin})")
        # the plane that runs it owns nodes of its pool, and enough for a job that starts at once
        part = [s for s in plan.planes[d.plane].slices if s.pool == d.pool]
        assert part, (d.name, d.plane, d.pool)
        if d.plane == "slurm" or d.gang_scheduler_required:
            assert d.facts.nodes <= len(part[0].nodes)
        if d.facts.tightly_coupled and d.facts.nodes > 1 and d.plane in KUBE:
            assert d.gang_scheduler_required and plan.gang_scheduler in ("kueue", "volcano", "kai")


@st.composite
def pinned_fleets(draw) -> dict[str, Any]:
    pools = []
    for i in range(draw(st.integers(1, 3))):
        pool: dict[str, Any] = {"name": f"p{i}", "nodes": draw(st.integers(1, 48)),
                                "cpus": draw(st.sampled_from([16, 64])), "memory_gib": 256}
        if i == 0 or draw(st.booleans()):
            pool["gpu"] = {"type": "h100", "count": draw(st.sampled_from([1, 4, 8]))}
        pools.append(pool)
    sizes = {p["name"]: p["nodes"] for p in pools}
    workloads = []
    for j in range(draw(st.integers(1, 5))):
        w: dict[str, Any] = {"name": f"w{j}", "tightly_coupled": draw(st.booleans()),
                             "long_lived_services": draw(st.booleans()),
                             "python_native_pipeline": draw(st.booleans()),
                             "plane": draw(st.sampled_from(["auto", "slurm", "kubernetes"]))}
        if draw(st.booleans()):
            w["pool"] = draw(st.sampled_from(pools))["name"]
        w["nodes"] = draw(st.integers(1, min(8, sizes.get(w.get("pool"), min(sizes.values())))))
        workloads.append(w)
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "pins"},
        "fleet": {"bare_metal": draw(st.booleans()), "edge_or_dev": draw(st.booleans()),
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": draw(st.sampled_from([1, 2, 4, 8, 16, 64]))},
                  "pools": pools},
        "workloads": workloads,
        "options": {"slurm_on_kubernetes": draw(st.sampled_from(["auto", "slinky", "none"])),
                    "gang_scheduler": draw(st.sampled_from(["auto", "kueue", "volcano", "kai"]))},
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pinned_fleets())
def test_a_pinned_plane_or_named_pool_is_never_changed(data):
    fleet = Fleet.model_validate(data)
    assert not list(check_fleet(fleet))
    try:
        plan = make_plan(fleet, "pins.yaml")
    except OrchgenError as exc:
        event(f"refused: {check_refusal(exc, data)}")
        return
    event("planned")
    check_honoured(plan, data)


# ---- the cases -------------------------------------------------------------------------

UNIVERSITY = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: uni}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 16}
  pools:
    - {name: a100, nodes: 8, gpu: {type: a100, count: 8}, cpus: 128, memory_gib: 1024}
    - {name: cpu, nodes: 8, cpus: 64, memory_gib: 256}
workloads:
  - name: ddp-training
    nodes: 2
    tightly_coupled: true
    pool: a100
    gpus: 16
  - {name: notebooks, long_lived_services: true, multi_tenant: true, pool: a100, gpus: 32}
  - {name: cpu-mpi, nodes: 2, tightly_coupled: true, pool: cpu}
"""


def test_university_cluster_keeps_the_a100_pool_or_is_refused(tmp_path, orchgen):
    """The bug: ddp-training (pool a100) was planned on Slurm's CPU-only pool, without a word. Whole
    leaves cannot give both planes a part of the one a100 leaf, so this is refused, naming the pool;
    a split by node may plan it, and then ddp-training runs on the a100 pool."""
    path = tmp_path / "uni.yaml"
    path.write_text(UNIVERSITY)
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    if proc.returncode == 0:
        plan = json.loads((tmp_path / "out" / "plan.json").read_text())
        assert (plan["workloads"][0]["plane"], plan["workloads"][0]["pool"]) == ("slurm", "a100")
        assert any(p["pool"] == "a100" for p in plan["planes"]["slurm"]["pools"])
        return
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith(f"orchgen: {path}:14: workloads[0].pool: ddp-training runs on slurm"), proc.stderr
    assert "names pool a100, but the split gave all 8 nodes of a100 to kubernetes" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_university_cluster_with_the_notebooks_elsewhere_keeps_the_a100_pool(tmp_path):
    text = UNIVERSITY.replace("    - {name: cpu, nodes: 8, cpus: 64, memory_gib: 256}\n",
                              "    - {name: cpu, nodes: 8, cpus: 64, memory_gib: 256}\n"
                              "    - {name: l40s, nodes: 4, gpu: {type: l40s, count: 4}}\n")
    path = tmp_path / "uni.yaml"
    path.write_text(text.replace("pool: a100, gpus: 32", "pool: l40s, gpus: 8"))
    plan = plan_of(path)
    ddp = plan.workloads[0]
    assert (ddp.plane, ddp.pool, ddp.gpus_per_node) == ("slurm", "a100", 8)
    assert [s.pool for s in plan.slurm_plane.slices] == ["a100", "cpu"]


SUPERPOD = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: pod}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 32}
  pools:
    - {name: h100, nodes: 64, gpu: {type: h100, count: 8}, cpus: 224, memory_gib: 2048}
workloads:
  - {name: pretrain, nodes: 32, tightly_coupled: true, pool: h100}
  - name: eval
    plane: slurm
    pool: h100
    gpus: 8
"""


def test_single_node_job_pinned_to_slurm_stays_on_slurm(tmp_path, orchgen):
    path = tmp_path / "pod.yaml"
    path.write_text(SUPERPOD)
    plan = plan_of(path)
    assert list(plan.planes) == ["slurm"], "the pin keeps the eval job, and so the whole pod, on Slurm"
    ev = plan.workloads[1]
    assert (ev.plane, ev.primary, ev.pinned) == ("slurm", "slurm", True)
    assert ev.reasons[0] == ("pinned by the input (plane: slurm), overriding rule kubernetes-default: services, "
                             "multi-tenancy or containerised batch: Kubernetes")
    assert any("pinned there: eval" in r for r in plan.reasons)
    out = json.loads(orchgen("recommend", path, "--format", "json", check=True).stdout)
    assert [(w["name"], w["plane"], w["pinned"]) for w in out["workloads"]] == [
        ("pretrain", "slurm", False), ("eval", "slurm", True)]
    table = orchgen("recommend", path, check=True).stdout
    assert "slurm (pinned)" in table and "pinned by the input" in table


def test_without_the_pin_the_eval_job_stays_on_slurm_by_the_fleet_rule(tmp_path):
    """Issue 36: on a bare-metal fleet that runs Slurm, single-node batch stays there unpinned (rule
    slurm-site-batch) instead of carving a one-node Kubernetes plane; plane: kubernetes takes it there only
    with the opt-in to a plane below options.kubernetes_min_nodes (4)."""
    path = tmp_path / "pod.yaml"
    path.write_text(SUPERPOD.replace("    plane: slurm\n", ""))
    plan = plan_of(path)
    ev = plan.workloads[1]
    assert (ev.plane, ev.rule, ev.pinned) == ("slurm", "slurm-site-batch", False) and list(plan.planes) == ["slurm"]
    path.write_text(SUPERPOD.replace("    plane: slurm\n", "    plane: kubernetes\n"))
    with pytest.raises(OrchgenError) as refused:
        plan_of(path)
    assert refused.value.field == "options.kubernetes_min_nodes" and "would have 1 node (for eval)" in refused.value.message
    path.write_text(SUPERPOD.replace("    plane: slurm\n", "    plane: kubernetes\n") + "options: {kubernetes_min_nodes: 1}\n")
    plan = plan_of(path)
    assert plan.workloads[1].plane == "kubernetes" and plan.workloads[1].pinned


def test_coupled_job_pinned_to_kubernetes_gets_a_gang(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(SUPERPOD.replace("pool: h100}", "pool: h100, plane: kubernetes}")
                    .replace("    plane: slurm\n", ""))
    plan = plan_of(path)
    pre = plan.workloads[0]
    assert (pre.plane, pre.primary, pre.gang_scheduler_required) == ("kubernetes", "kubernetes", True)
    assert pre.reasons[0].startswith("pinned by the input (plane: kubernetes), overriding rule "
                                     "coupled-multinode-bare-metal: tightly coupled across 32 nodes on bare metal")
    assert plan.gang_scheduler == "kueue" and list(plan.planes) == ["kubernetes"]
    assert any("pinned there: pretrain" in r for r in plan.reasons)


@pytest.mark.parametrize("gang", ["volcano", "kai"])
def test_coupled_job_pinned_to_kubernetes_with_an_explicit_gang_scheduler(tmp_path, gang):
    path = tmp_path / "pod.yaml"
    path.write_text(SUPERPOD.replace("pool: h100}", "pool: h100, plane: kubernetes}").replace("    plane: slurm\n", "")
                    + f"options: {{gang_scheduler: {gang}}}\n")
    plan = plan_of(path)
    assert plan.gang_scheduler == gang and plan.workloads[0].gang_scheduler_required


def test_pin_that_agrees_with_the_rules_says_so(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(SUPERPOD.replace("pool: h100}", "pool: h100, plane: slurm}"))
    d = plan_of(path).workloads[0]
    assert d.reasons[0] == "pinned by the input (plane: slurm); rule coupled-multinode-bare-metal agrees"
    assert d.reasons[1].startswith("rule coupled-multinode-bare-metal:")


def test_pin_to_kubernetes_keeps_ray_and_k3s_rules(tmp_path):
    from generator.decide import decide_workload
    from generator.decide.plan import Facts

    ray = decide_workload("w", Facts(4, True, True, False, False, True, False), "kubernetes")
    assert (ray.primary, ray.ray_host, ray.gang_scheduler_required) == ("ray", "kubernetes", True)
    edge = decide_workload("w", Facts(2, True, True, False, False, False, True), "kubernetes")
    assert (edge.primary, edge.gang_scheduler_required) == ("k3s", True)
    ray_slurm = decide_workload("w", Facts(1, False, False, False, False, True, False), "slurm")
    assert ray_slurm.primary == "slurm" and "ray-on-slurm" in ray_slurm.addons
    service = decide_workload("w", Facts(1, False, False, True, False, False, False), "slurm")
    assert service.primary == "slurm" and service.hybrid  # the guide: Slurm-primary with services is a hybrid


def test_job_longer_than_its_planes_part_of_the_pool_is_refused(tmp_path, orchgen):
    """6 + 4 nodes that must each start at once on an 8-node pool: no split can hold both."""
    text = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: short}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 4}
  pools:
    - {name: h100, nodes: 8, gpu: {type: h100, count: 8}}
workloads:
  - {name: train, nodes: 6, tightly_coupled: true, pool: h100}
  - name: wide
    nodes: 4
    tightly_coupled: true
    plane: kubernetes
    pool: h100
"""
    path = tmp_path / "short.yaml"
    path.write_text(text)
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2
    first = (f"orchgen: {path}:10: workloads[0].nodes: train spans 6 nodes, which a Slurm allocation starts all "
             "at once, but the slurm plane owns ")
    second = (f"orchgen: {path}:12: workloads[1].nodes: wide spans 4 nodes, which a gang starts all at once, "
              "but the kubernetes plane owns ")
    assert proc.stderr.startswith((first, second)), proc.stderr
    assert "of pool h100 (the split gave " in proc.stderr
    assert not (tmp_path / "out").exists()


def test_pinned_to_slurm_where_slurm_cannot_take_the_names(tmp_path, orchgen):
    name = "a-fleet-name-longer-than-slurms-forty-characters"
    text = SUPERPOD.replace("metadata: {name: pod}", f"metadata: {{name: {name}}}").replace(
        "  - {name: pretrain, nodes: 32, tightly_coupled: true, pool: h100}\n", "")
    path = tmp_path / "pod.yaml"
    path.write_text(text)
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"orchgen: {path}:3: metadata.name: ")
    assert "ClusterName" in proc.stderr
    assert "Slurm is in the plan because workloads[0].plane pins eval to it" in proc.stderr


def test_unknown_pin_is_bad_input(tmp_path, orchgen):
    path = tmp_path / "pod.yaml"
    path.write_text(SUPERPOD.replace("plane: slurm", "plane: slrum"))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert f"{path}:12: workloads[1].plane: " in proc.stderr and "did you mean 'slurm'" in proc.stderr


def test_a_picked_pool_that_went_away_is_replaced_and_said(tmp_path):
    """A workload that names no pool may move, but the move is in its reasons, and it stays on GPUs."""
    text = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: moved}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 4}
  pools:
    - {name: a, nodes: 4, gpu: {type: h100, count: 8}}
    - {name: b, nodes: 16, gpu: {type: h100, count: 8}}
workloads:
  - {name: big, nodes: 4, tightly_coupled: true, pool: a}
  - {name: svc-train, nodes: 2, tightly_coupled: true, long_lived_services: true, pool: b}
  - {name: batch, plane: kubernetes}
options: {kubernetes_min_nodes: 1}   # a one-node Kubernetes plane beside Slurm, opted in to (issue 36)
"""
    path = tmp_path / "moved.yaml"
    path.write_text(text)
    plan = plan_of(path)
    batch = plan.workloads[2]
    if batch.pool == "a":  # a split by node may give Kubernetes a node of a: then nothing moves
        assert any(s.pool == "a" for s in plan.kube_plane.slices) and "planner's pick" not in str(batch.reasons)
        return
    assert (batch.plane, batch.pool, batch.gpus) == ("kubernetes", "b", 8)
    assert batch.reasons[-1] == "pool b: it names none, and a (the planner's pick) went wholly to slurm"


def test_a_picked_pool_without_a_gpu_pool_to_go_to_is_refused(tmp_path, orchgen):
    text = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: nogpu}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 4}
  pools:
    - {name: a, nodes: 4, gpu: {type: h100, count: 8}}
    - {name: cpu, nodes: 4}
workloads:
  - {name: big, nodes: 4, tightly_coupled: true, pool: a}
  - {name: batch, plane: kubernetes}
"""
    path = tmp_path / "nogpu.yaml"
    path.write_text(text)
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    if proc.returncode == 0:  # a split by node may give Kubernetes a node of a: then batch stays there
        plan = json.loads((tmp_path / "out" / "plan.json").read_text())
        assert plan["workloads"][1]["pool"] == "a"
        return
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"orchgen: {path}:12: workloads[1]: batch names no pool; the one picked for "
                                  "it, a, went wholly to slurm, and the kubernetes plane has no other pool with GPUs")


def test_defaults_avoid_the_pool_the_other_plane_names(tmp_path):
    """Slurm's unnamed job goes where Slurm's named jobs are, not onto Kubernetes' named pool."""
    text = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: defaults}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 4}
  pools:
    - {name: l40s, nodes: 4, gpu: {type: l40s, count: 4}}
    - {name: h100, nodes: 8, gpu: {type: h100, count: 8}}
workloads:
  - {name: api, long_lived_services: true, pool: l40s}
  - {name: train, nodes: 2, tightly_coupled: true, pool: h100}
  - {name: sweep, nodes: 2, tightly_coupled: true}
  - {name: batch, plane: kubernetes}
"""
    path = tmp_path / "defaults.yaml"
    path.write_text(text)
    plan = plan_of(path)
    assert {d.name: (d.plane, d.pool) for d in plan.workloads} == {
        "api": ("kubernetes", "l40s"), "train": ("slurm", "h100"), "sweep": ("slurm", "h100"),
        "batch": ("kubernetes", "l40s")}
