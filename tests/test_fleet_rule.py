"""Issue 36: the fleet-level choice. On a bare-metal fleet whose Slurm plane exists anyway, batch that the
per-workload rules send to Kubernetes stays on Slurm (rule slurm-site-batch: containers through pyxis),
instead of carving a small Kubernetes plane; services, notebooks, Ray, edge, pins and multi-node gangs keep
their plane. The per-workload rules and the seed labeller's 256 cases are test_decide.py's."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from generator.decide import decide_workload, make_plan
from generator.decide.rules import facts_of
from generator.spec.models import Fleet

from .support import plan_of

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

FLEET = {
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "site"},
    "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 4},
              "pools": [{"name": "h100", "nodes": 8, "gpu": {"type": "h100", "count": 8}, "cpus": 64,
                         "memory_gib": 512},
                        {"name": "l40s", "nodes": 4, "gpu": {"type": "l40s", "count": 4}, "cpus": 32,
                         "memory_gib": 256}]},
    "workloads": [{"name": "train", "nodes": 4, "tightly_coupled": True, "pool": "h100"}],
}


def with_workloads(*workloads: dict, fleet: dict | None = None, **options) -> dict:
    doc = copy.deepcopy(FLEET)
    doc["workloads"] += list(workloads)
    doc["fleet"].update(fleet or {})
    if options:
        doc["options"] = options
    return doc


def planes(doc: dict) -> dict[str, tuple[str, str]]:
    plan = make_plan(Fleet.model_validate(doc), "site.yaml")
    return {d.name: (d.plane, d.rule) for d in plan.workloads}


@pytest.mark.parametrize("workload", [
    {"name": "eval", "pool": "h100", "gpus": 8},
    {"name": "sweeps", "multi_tenant": True, "bare_metal": False, "pool": "l40s", "jobs_at_once": 4},
    {"name": "prep", "nodes": 2, "multi_tenant": True},  # not tightly coupled: a batch of independent jobs
    {"name": "single", "tightly_coupled": True, "bare_metal": False},  # one node: nothing to co-allocate
], ids=["eval", "containerised-multi-tenant", "independent-multi-node", "single-node-coupled"])
def test_batch_stays_on_slurm(workload):
    got = planes(with_workloads(workload))
    assert got[workload["name"]] == ("slurm", "slurm-site-batch")


@pytest.mark.parametrize("workload, plane, rule", [
    ({"name": "api", "long_lived_services": True, "pool": "l40s", "gpus": 16}, "kubernetes", "kubernetes-default"),
    ({"name": "lab", "long_lived_services": True, "interactive": True, "pool": "l40s", "gpus": 4}, "kubernetes",
     "kubernetes-default"),
    ({"name": "eval", "plane": "kubernetes", "pool": "l40s"}, "kubernetes", "pinned"),
    ({"name": "gang", "nodes": 2, "tightly_coupled": True, "bare_metal": False, "pool": "l40s"}, "kubernetes",
     "kubernetes-default"),
    ({"name": "rl", "python_native_pipeline": True, "bare_metal": False, "pool": "l40s"}, "kubernetes",
     "python-native-pipeline"),
], ids=["service", "notebooks", "pinned", "multi-node-gang", "ray"])
def test_what_keeps_its_plane(workload, plane, rule):
    assert planes(with_workloads(workload))[workload["name"]] == (plane, rule)


def test_no_slurm_plane_no_change():
    """Without a Slurm plane (nothing tightly coupled across nodes on bare metal) batch stays on Kubernetes:
    the rule saves a second plane, it never adds one."""
    doc = with_workloads({"name": "eval"})
    doc["workloads"] = doc["workloads"][1:]
    assert planes(doc) == {"eval": ("kubernetes", "kubernetes-default")}


def test_off_bare_metal_or_slurm_on_kubernetes_no_change():
    cloud = with_workloads({"name": "eval", "pool": "l40s"}, fleet={"bare_metal": False})
    cloud["workloads"][0]["bare_metal"] = True
    assert planes(cloud)["eval"] == ("kubernetes", "kubernetes-default")
    slinky = with_workloads({"name": "eval", "pool": "l40s"}, slurm_on_kubernetes="slinky")
    assert planes(slinky)["eval"] == ("kubernetes", "kubernetes-default")


def test_the_reason_names_the_rule_pyxis_and_the_way_out():
    plan = make_plan(Fleet.model_validate(with_workloads({"name": "eval", "pool": "h100"})), "site.yaml")
    (d,) = [d for d in plan.workloads if d.name == "eval"]
    assert d.reasons[0].startswith("rule slurm-site-batch: batch on a bare-metal fleet that runs Slurm already "
                                   "(train): Slurm schedules it, its containers run through pyxis/enroot")
    assert "plane: kubernetes pins it there" in d.reasons[1]
    assert "pyxis" in d.addons and not d.gang_scheduler_required
    none = make_plan(Fleet.model_validate(with_workloads({"name": "eval", "pool": "h100"},
                                                         slurm={"containers": "none"})), "site.yaml")
    (d,) = [d for d in none.workloads if d.name == "eval"]
    assert "pyxis" not in d.addons and "options.slurm.containers none" in d.reasons[0]


def test_the_per_workload_decision_is_unchanged():
    """decide_workload (the guide's rules, the seed labeller's cases) still says Kubernetes: only the fleet
    pass moves it."""
    fleet = Fleet.model_validate(with_workloads({"name": "eval", "pool": "h100"}))
    w = fleet.workloads[1]
    assert decide_workload(w.name, facts_of(w, fleet)).primary == "kubernetes"


def test_examples_superpod_and_university_lab_keep_batch_on_slurm():
    pod = plan_of(EXAMPLES / "superpod.yaml")
    assert set(pod.planes) == {"slurm"} and len(pod.slurm_plane.nodes) == 127  # no one-node Kubernetes plane
    assert {d.name: d.rule for d in pod.workloads}["eval-harness"] == "slurm-site-batch"
    lab = plan_of(EXAMPLES / "university-lab.yaml")
    assert {d.name: d.plane for d in lab.workloads} == {
        "ddp-training": "slurm", "thesis-runs": "slurm", "notebooks": "kubernetes", "model-eval": "slurm",
        "data-prep": "slurm"}
    assert sorted(lab.kube_plane.nodes) == [f"l40s-{i:02d}" for i in range(1, 5)]
    doc = yaml.safe_load((EXAMPLES / "research-lab.yaml").read_text())
    assert {w["name"]: w.get("plane") for w in doc["workloads"]}["eval-batch"] == "kubernetes"  # its opt-in


def test_a_pin_to_kubernetes_says_which_fleet_rule_it_overrides():
    plan = make_plan(Fleet.model_validate(with_workloads({"name": "eval", "plane": "kubernetes", "pool": "l40s"})),
                     "site.yaml")
    (d,) = [d for d in plan.workloads if d.name == "eval"]
    assert d.plane == "kubernetes" and d.pinned
    assert d.reasons[0].startswith("pinned by the input (plane: kubernetes), overriding rule slurm-site-batch: "
                                   "batch on a bare-metal fleet that runs Slurm already (train)")
