"""Scheduler semantics that match what the bundle's README says.

- Volcano: the capacity plugin (never with proportion) and the reclaim action, so that `deserved`,
  borrowing up to `capability` and `reclaimable` do what the README says (tests/test_helm_values.py
  checks the conf; here, that every Queue carries what those need).
- Kueue: waitForPodsReady applies to services too at 0.19 (no per-workload exemption), so its
  timeout is sized for the slowest start the plane runs.
- Ray gangs are placed by the bundle's topology, through what each scheduler reads on a RayCluster.
"""
from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from generator.render import report
from generator.render.kubernetes import common, helm, kueue, manifests, ray, volcano
from generator.spec.fabric import LABEL_LEAF
from tests._consumers import reference_dir
from tests.test_k8s_manifests import PLANS

Obj = dict[str, Any]


def objects(plan) -> list[Obj]:
    return [o for objs in manifests.manifests(plan).values() for o in objs]


def kinds(plan, kind: str) -> list[Obj]:
    return [o for o in objects(plan) if o["kind"] == kind]


def minutes(duration: str) -> int:
    m = re.fullmatch(r"(\d+)m", duration)
    assert m, duration
    return int(m[1])


@pytest.mark.parametrize("pid", [p for p, plan in sorted(PLANS.items()) if plan.gang_scheduler == "volcano"])
def test_volcano_queues_carry_what_capacity_and_reclaim_read(pid):
    plan = PLANS[pid]
    conf = yaml.safe_load(helm.VALUES["volcano"](plan)["custom"]["scheduler_config_override"])
    assert "reclaim" in [a.strip() for a in conf["actions"].split(",")]
    for q in kinds(plan, "Queue"):
        spec = q["spec"]
        assert spec["reclaimable"] is True
        for res in ("cpu", "memory", common.GPU):  # capacity: deserved <= capability, per dimension
            assert res in spec["deserved"] and res in spec["capability"]
        assert int(spec["deserved"][common.GPU]) <= int(spec["capability"][common.GPU])


@pytest.mark.parametrize("pid", [p for p, plan in sorted(PLANS.items()) if plan.gang_scheduler == "kueue"])
def test_kueue_wait_for_pods_ready_is_sized_for_the_slowest_start(pid):
    plan = PLANS[pid]
    config = yaml.safe_load(helm.VALUES["kueue"](plan)["managerConfig"]["controllerManagerConfigYaml"])
    timeout = config["waitForPodsReady"]["timeout"]
    services = [w for w in common.workloads(plan) if w.workload_class == "service"]
    assert timeout == (kueue.SERVICE_START if services else kueue.GANG_START)
    assert minutes(kueue.SERVICE_START) >= 30 > minutes(kueue.GANG_START)  # 30m: Kueue's own default
    assert "recoveryTimeout" not in config["waitForPodsReady"]  # defaults to the timeout
    readme = report.render(plan)["README.md"].decode()
    assert f"all ready within {timeout} is evicted" in readme


def test_kueue_has_no_per_workload_exemption_to_rely_on():
    """If a later Kueue grew one, the 0.19 reasoning above would be worth revisiting: the pinned
    chart is 0.19.2, where DisableWaitForPodsReady is the only switch, cluster-wide."""
    chart = yaml.safe_load((reference_dir() / "kueue" / "Chart.yaml").read_text())
    assert chart["appVersion"] == "v0.19.2"


def _ray_plans(gang: str) -> list[str]:
    return [p for p, plan in sorted(PLANS.items())
            if plan.gang_scheduler == gang and common.queues_enabled(plan) and ray.objects(plan)]


def _ray_pools(plan) -> dict[str, str]:
    """RayCluster name -> its workload's pool."""
    return {ray.cluster_name(w): w.pool for w in ray.ray_workloads(plan)}


def _topology(plan) -> tuple[Obj | None, list[str]]:
    """The fabric's Topology (Kueue's one-level hosts Topology of the pools without its levels aside)."""
    topo = [t for t in kinds(plan, "Topology") if t["metadata"]["name"] == common.topology_name(plan)]
    assert len(topo) <= 1
    return (topo[0], [lv["nodeLabel"] for lv in topo[0]["spec"]["levels"]]) if topo else (None, [])


@pytest.mark.parametrize("pid", _ray_plans("kai"))
def test_kai_ray_gangs_use_the_bundles_topology(pid):
    """On a pool whose nodes carry the Topology's levels (every pool on bare metal, where the gang
    prefers a leaf switch; the provider's labels on a cloud, issue 15), a Ray gang names the
    Topology and prefers its narrowest shared level; elsewhere it names none."""
    plan = PLANS[pid]
    topo, levels = _topology(plan)
    pools = _ray_pools(plan)
    for rc in kinds(plan, "RayCluster"):
        ann = rc["metadata"].get("annotations") or {}
        if common.pool_has_topology(plan, pools[rc["metadata"]["name"]]):
            assert ann[ray.KAI_TOPOLOGY] == topo["metadata"]["name"]
            assert ann[ray.KAI_PREFERRED_PLACEMENT] == common.preferred_level(plan) and ann[ray.KAI_PREFERRED_PLACEMENT] in levels
            if plan.bare_metal:
                assert ann[ray.KAI_PREFERRED_PLACEMENT] == LABEL_LEAF
        else:
            assert ray.KAI_TOPOLOGY not in ann and ray.KAI_PREFERRED_PLACEMENT not in ann


@pytest.mark.parametrize("pid", _ray_plans("kueue"))
def test_kueue_ray_worker_groups_prefer_a_level_of_their_flavors_topology(pid):
    plan = PLANS[pid]
    topo, levels = _topology(plan)
    flavors = kinds(plan, "ResourceFlavor")
    # every flavor names a Topology, or none does (issue 34: Kueue admits pods without a TAS annotation
    # to a topology flavor only when all the ClusterQueue's flavors are): the fabric's where the pool's
    # nodes carry its levels, else the one-level hosts Topology
    assert len({"topologyName" in f["spec"] for f in flavors}) <= 1
    for f in flavors:
        pool = f["metadata"]["name"].rsplit("-", 1)[0]
        # a pool of multi-node NVLink domains (ComputeDomains, issue 35) has the fabric's levels plus the clique
        want = (common.clique_topology_name(plan) if pool in plan.platform.compute_domains
                else topo["metadata"]["name"] if common.pool_has_topology(plan, pool)
                else kueue.hosts_topology_name(plan) if topo is not None else None)
        assert f["spec"].get("topologyName") == want, (f["metadata"]["name"], want)
    if plan.bare_metal:  # every pool's flavor has the fabric's topology there
        assert topo is not None and all("topologyName" in f["spec"] for f in flavors)
    pools = _ray_pools(plan)
    for rc in kinds(plan, "RayCluster"):
        on_topology = common.pool_has_topology(plan, pools[rc["metadata"]["name"]])
        for group in rc["spec"]["workerGroupSpecs"]:
            level = ((group["template"].get("metadata") or {}).get("annotations") or {}).get(
                common.KUEUE_PREFERRED_TOPOLOGY)
            if on_topology:
                assert level == common.preferred_level(plan) and level in levels
                if plan.bare_metal:
                    assert level == LABEL_LEAF
            else:  # Kueue cannot admit a TAS workload to a flavor without a topology
                assert level is None


@pytest.mark.parametrize("pid", _ray_plans("volcano"))
def test_volcano_ray_gangs_ask_for_network_topology(pid):
    plan = PLANS[pid]
    crd = yaml.safe_load((reference_dir() / "volcano/crds/scheduling.volcano.sh_podgroups.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    modes = schema["networkTopology"]["properties"]["mode"]["enum"]
    levels = common.topology_levels(plan)
    if plan.platform.cloud:  # HyperNodes discovered from the provider's labels (issue 15), none listed
        assert not kinds(plan, "HyperNode")
        assert (volcano.discovery_config(plan) is not None) == bool(levels)
    else:
        assert kinds(plan, "HyperNode") and plan.fabric.levels
    for rc in kinds(plan, "RayCluster"):
        mode = (rc["metadata"].get("labels") or {}).get(ray.VOLCANO_NETWORK_TOPOLOGY_MODE)
        assert mode == ("soft" if levels else None) and (mode is None or mode in modes)


def test_no_gang_scheduler_no_placement_wiring():
    plan = PLANS["dev-ci"]
    assert plan.gang_scheduler is None and ray.topology_wiring(plan) == ({}, {}, {})
