"""Volcano: a Queue per tenant (scheduling.volcano.sh/v1beta1) and HyperNodes (topology.volcano.sh/
v1alpha1) from the fabric model.

Volcano queues are not per pool, so a tenant's quota is its nominal share summed over the plane's
pools: `deserved` (what the capacity plugin guarantees and reclaims back), `weight` = share (what
the proportion plugin divides by), and `capability` = the whole plane, so an idle tenant's share
can be borrowed (`reclaimable: true` gives it back).
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, Tenant
from ...yamlio import dump_yaml
from ...spec import fabric
from .common import GPU, meta, plane_totals, queue_of, slices, tenant_totals, topology_levels

MAX_WEIGHT = 65535  # Queue.spec.weight maximum


def _resources(gpus: int, cpus: int, memory_gib: int) -> dict[str, Any]:
    return {"cpu": str(cpus), "memory": f"{memory_gib}Gi", GPU: str(gpus)}


def weights(plan: Plan) -> dict[str, int]:
    """Shares as Volcano weights; scaled down (keeping ratios as far as integers allow) when a share
    exceeds Volcano's maximum."""
    top = max(t.share for t in plan.tenants)
    if top <= MAX_WEIGHT:
        return {t.name: t.share for t in plan.tenants}
    return {t.name: max(1, t.share * MAX_WEIGHT // top) for t in plan.tenants}


def queue(plan: Plan, tenant: Tenant, weight: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": meta(queue_of(tenant.name)),
            "spec": {"weight": weight, "reclaimable": True,
                     "deserved": _resources(*tenant_totals(tenant)),
                     "capability": _resources(*plane_totals(plan))}}


def objects(plan: Plan) -> list[dict[str, Any]]:
    w = weights(plan)
    return [queue(plan, t, w[t.name]) for t in plan.tenants]


def _hypernode(name: str, tier: int, tier_name: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": meta(name),
            "spec": {"tier": tier, "tierName": tier_name, "members": members}}


def topology(plan: Plan) -> list[dict[str, Any]]:
    """Bare metal: tier 1 a HyperNode per leaf of this plane, its nodes selected by the leaf label
    node-labels.sh sets (labelMatch: a re-imaged or replaced node rejoins by its label, no name in
    the object); tier 2 one per spine over its leaves on this plane; tier 3 the core over the
    spines, when there are several. Off bare metal none: the controller discovers HyperNodes from
    the provider's topology labels (`discovery_config`)."""
    if plan.platform.cloud:
        return []
    mine = {leaf for s in slices(plan) for leaf in s.leaves}
    leaves = [leaf for leaf in plan.fabric.leaves if leaf.name in mine]
    out = [_hypernode(leaf.name, 1, "leaf",
                      [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {fabric.LABEL_LEAF: leaf.name}}}}])
           for leaf in leaves]
    spines = []
    for spine in plan.fabric.spines:
        below = [leaf for leaf in spine.leaves if leaf in mine]
        if below:
            spines.append(spine.name)
            out.append(_hypernode(spine.name, 2, "spine",
                                  [{"type": "HyperNode", "selector": {"exactMatch": {"name": leaf}}}
                                   for leaf in below]))
    if plan.fabric.core and len(spines) > 1:
        out.append(_hypernode(plan.fabric.core, 3, "core",
                              [{"type": "HyperNode", "selector": {"exactMatch": {"name": s}}} for s in spines]))
    return out


def discovery_config(plan: Plan) -> dict[str, Any] | None:
    """Off bare metal, Volcano's HyperNode auto-discovery from node labels (volcano v1.15.1
    docs/user-guide/how_to_use_hypernode_auto_discovery.md; the chart's `custom.controller_config_override`
    carries the controller's configuration): the provider's topology labels broadest first, the
    hostname last, as that guide's `networkTopologyTypes` lists them."""
    levels = topology_levels(plan)
    if not plan.platform.cloud or not levels:
        return None
    return {"networkTopologyDiscovery": [{
        "source": "label", "enabled": True,
        "config": {"networkTopologyTypes": {
            plan.platform.provider: [{"nodeLabel": lv} for lv in [*levels, fabric.LABEL_HOSTNAME]]}},
    }]}


# --- the volcano release's values ------------------------------------------------------------

def volcano_scheduler_conf(plan: Plan) -> dict[str, Any]:
    """The chart's default scheduler conf (gang in the first tier), plus topology-aware scoring."""
    scoring: list[dict[str, Any]] = [
        {"name": "overcommit"}, {"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
        {"name": "proportion"}, {"name": "nodeorder"}, {"name": "binpack"},
    ]
    if topology_levels(plan):
        # Weight 10 (upstream's example) so HyperNode locality outweighs plain node scores.
        scoring.append({"name": "network-topology-aware", "arguments": {"weight": 10}})
    return {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False},
                         {"name": "conformance"}]},
            {"plugins": scoring},
        ],
    }


def values(plan: Plan) -> dict[str, Any]:
    custom = {"scheduler_config_override": dump_yaml(volcano_scheduler_conf(plan)).decode()}
    discovery = discovery_config(plan)
    if discovery is not None:
        # a mapping, not text: volcano 1.15.1's templates/controllers.yaml writes it with `toYaml`
        # into volcano-controller.conf, which would wrap a string in a YAML block scalar
        custom["controller_config_override"] = discovery
    return {"custom": custom}
