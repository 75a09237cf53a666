"""Volcano: a Queue per tenant (scheduling.volcano.sh/v1beta1) and HyperNodes (topology.volcano.sh/
v1alpha1) from the fabric model.

Volcano queues are not per pool, so a tenant's quota is its nominal share summed over the plane's
pools: `deserved` (what the capacity plugin guarantees and reclaims back), `capability` = the whole
plane, so an idle tenant's share can be borrowed, and `reclaimable: true`, so it is given back.
`weight` = share is what the proportion plugin would divide by; the scheduler conf below runs the
capacity plugin instead, which reads `deserved` (the two cannot run together).
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, Tenant
from ...yamlio import dump_yaml
from ...spec import fabric
from .common import (VOLCANO_SCHEDULER, meta, namespace_of, plane_devices, plane_totals, queue_of, slices,
                     tenant_devices, tenant_namespaces, tenant_totals, topology_levels)

MAX_WEIGHT = 65535  # Queue.spec.weight maximum


def _resources(devices: dict[str, int], cpus: int, memory_gib: int) -> dict[str, Any]:
    """cpu, memory and the GPU resources (nvidia.com/gpu, and each MIG pool's instances)."""
    return {"cpu": str(cpus), "memory": f"{memory_gib}Gi", **{r: str(n) for r, n in devices.items()}}


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
                     "deserved": _resources(tenant_devices(plan, tenant), *tenant_totals(tenant)[1:]),
                     "capability": _resources(plane_devices(plan), *plane_totals(plan)[1:])}}


def objects(plan: Plan) -> list[dict[str, Any]]:
    w = weights(plan)
    return [queue(plan, t, w[t.name]) for t in plan.tenants]


def _hypernode(name: str, tier: int, tier_name: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": meta(name),
            "spec": {"tier": tier, "tierName": tier_name, "members": members}}


def topology(plan: Plan) -> list[dict[str, Any]]:
    """Bare metal: tier 1 a HyperNode per leaf with nodes of this plane, those nodes selected by the
    leaf label node-labels.sh sets (labelMatch: a re-imaged or replaced node rejoins by its label, no
    name in the object), in a hybrid with the plane label too (a leaf split between the planes holds
    nodes of both). Tier 2: one per spine label (fabric.spine_groups: a leaf under several spines
    joins its first) over its leaves on this plane. Tier 3: the core over them, when the fabric has
    one and there are several. Off bare metal none: the controller discovers HyperNodes from the
    provider's topology labels (`discovery_config`)."""
    if plan.platform.cloud or plan.platform.topograph:
        return []
    mine = {n for s in slices(plan) for n in s.nodes}
    plane = {fabric.LABEL_PLANE: "kubernetes"} if plan.hybrid else {}
    out, kept = [], set()
    for leaf in plan.fabric.leaves:
        if any(n in mine for n in leaf.nodes):
            kept.add(leaf.name)
            match = {fabric.LABEL_LEAF: leaf.name, **plane}
            out.append(_hypernode(leaf.name, 1, "leaf",
                                  [{"type": "Node", "selector": {"labelMatch": {"matchLabels": match}}}]))
    spines = []
    for spine, leaves in plan.fabric.spine_groups():
        below = [leaf for leaf in leaves if leaf in kept]
        if below:
            spines.append(spine)
            out.append(_hypernode(spine, 2, "spine",
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
    if not (plan.platform.cloud or plan.platform.topograph) or not levels:
        return None
    # with Topograph (fleet.fabric.topograph) the labels are its tiers, whose values orchgen does not
    # know: Volcano builds the HyperNodes from them, as off bare metal
    name = "topograph" if plan.platform.topograph else plan.platform.provider
    return {"networkTopologyDiscovery": [{
        "source": "label", "enabled": True,
        "config": {"networkTopologyTypes": {
            name: [{"nodeLabel": lv} for lv in [*levels, fabric.LABEL_HOSTNAME]]}},
    }]}


# --- the volcano release's values ------------------------------------------------------------

# What makes the Queues' `deserved`, borrowing and `reclaimable` do what the README says (Volcano
# 1.15.1, docs/user-guide/how_to_use_capacity_plugin.md): the `capacity` plugin in place of
# `proportion` ("capacity and proportion plugin are in conflict"); it alone reads Queue.spec.deserved
# (pkg/scheduler/plugins/capacity: Allocatable / JobEnqueueable up to capability, Reclaimable down
# to deserved), and the `reclaim` action, without which nothing is ever taken back from a borrowing
# queue (pkg/scheduler/actions/reclaim skips queues whose `reclaimable` is false). `preempt` lets a
# higher-priority job of the same queue evict a lower one; `backfill` stays last.
ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")


def volcano_scheduler_conf(plan: Plan) -> dict[str, Any]:
    """The chart's default scheduler conf (gang in the first tier) with capacity for proportion,
    the preempt and reclaim actions, and topology-aware scoring."""
    scoring: list[dict[str, Any]] = [
        {"name": "overcommit"}, {"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
        {"name": "capacity"}, {"name": "nodeorder"}, {"name": "binpack"},
    ]
    if topology_levels(plan):
        # Weight 10 (upstream's example) so HyperNode locality outweighs plain node scores.
        scoring.append({"name": "network-topology-aware", "arguments": {"weight": 10}})
    return {
        "actions": ", ".join(ACTIONS),
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False},
                         {"name": "conformance"}]},
            {"plugins": scoring},
        ],
    }


# custom.enabled_admissions of volcano 1.15.1's values.yaml (a test compares it with the reference).
DEFAULT_ADMISSIONS = ("/jobs/mutate,/jobs/validate,/podgroups/validate,/queues/mutate,/queues/validate,"
                      "/hypernodes/validate,/cronjobs/validate")
# Off upstream, on here: /pods/mutate patches schedulerName onto the pods of a resource group
# (pkg/webhooks/admission/pods/mutate), /podgroups/mutate moves a PodGroup of queue `default` to
# its namespace's `scheduling.volcano.sh/queue-name` annotation (mutate_podgroup.go).
TENANCY_ADMISSIONS = ("/pods/mutate", "/podgroups/mutate")


def admission_config(plan: Plan) -> dict[str, Any]:
    """volcano-admission.conf: one resource group, the tenant namespaces, scheduled by Volcano
    (pkg/webhooks/config: resourceGroups[].object {key: namespace, value: [...]}, schedulerName)."""
    return {"resourceGroups": [{"resourceGroup": "tenants",
                                "object": {"key": "namespace", "value": [namespace_of(t.name) for t in plan.tenants]},
                                "schedulerName": VOLCANO_SCHEDULER}]}


def values(plan: Plan) -> dict[str, Any]:
    custom: dict[str, Any] = {"scheduler_config_override": dump_yaml(volcano_scheduler_conf(plan)).decode()}
    discovery = discovery_config(plan)
    if discovery is not None:
        # a mapping, not text: volcano 1.15.1's templates/controllers.yaml writes it with `toYaml`
        # into volcano-controller.conf, which would wrap a string in a YAML block scalar
        custom["controller_config_override"] = discovery
    if plan.tenants:
        custom["enabled_admissions"] = ",".join([DEFAULT_ADMISSIONS, *TENANCY_ADMISSIONS])
        custom["admission_config_override"] = dump_yaml(admission_config(plan)).decode()
        # Every Volcano webhook (failurePolicy Fail) on the tenant namespaces only: the pod webhook
        # must not stand between gpu-operator's or Slinky's pods and the API server. The chart
        # always excludes its own namespace and kube-system (templates/webhooks.yaml).
        custom["webhooks_namespace_selector_expressions"] = tenant_namespaces()["matchExpressions"]
    return {"custom": custom}
