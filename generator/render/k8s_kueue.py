"""Kueue (kueue.x-k8s.io/v1beta2): ResourceFlavors per pool, one Cohort, a ClusterQueue and a
LocalQueue per tenant, and a Topology from the fabric model.

Quotas are Tenant.quotas as the planner computed them (per pool they add up to the pool's capacity,
no more). Borrowing is on: every ClusterQueue is in the one cohort with no borrowingLimit, so idle
nominal quota of one tenant can be used by another, and `reclaimWithinCohort: Any` lets the owner
take it back by preemption.
"""
from __future__ import annotations

from typing import Any

from ..errors import OrchgenError
from ..plan import Plan, Tenant
from .k8s_common import (
    GPU, has_topology, level_topology, meta, namespace_of, node_selector, queue_of, slices,
                         topology_name, unique)

API = "kueue.x-k8s.io/v1beta2"
COVERED = ("cpu", "memory", GPU)  # the order every flavor's resources must follow
MAX_FLAVORS = 64  # ClusterQueue resourceGroups[].flavors maxItems


def cohort_name(plan: Plan) -> str:
    """Named after the fleet; a ClusterQueue may not share it (the implicit tenant has that name)."""
    taken = {t.name for t in plan.tenants}
    return plan.name if plan.name not in taken else unique(f"{plan.name}-cohort", taken)


def flavors(plan: Plan) -> list[dict[str, Any]]:
    out = []
    for s in slices(plan):
        spec: dict[str, Any] = {"nodeLabels": node_selector(plan, s.pool)}
        if has_topology(plan):
            spec["topologyName"] = topology_name(plan)
        out.append({"apiVersion": API, "kind": "ResourceFlavor", "metadata": meta(s.pool), "spec": spec})
    return out


def _quota_entry(tenant: Tenant, pool: str) -> dict[str, Any]:
    q = tenant.quotas[pool]
    quantities = (q.cpus, f"{q.memory_gib}Gi", q.gpus)
    return {"name": pool,
            "resources": [{"name": r, "nominalQuota": v} for r, v in zip(COVERED, quantities)]}


def cluster_queue(plan: Plan, tenant: Tenant) -> dict[str, Any]:
    pools = [s.pool for s in slices(plan)]
    if len(pools) > MAX_FLAVORS:
        raise OrchgenError(f"the Kubernetes plane has {len(pools)} pools; a Kueue ClusterQueue takes "
                           f"at most {MAX_FLAVORS} flavors in one resource group")
    spec: dict[str, Any] = {
        "cohortName": cohort_name(plan),
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace_of(tenant.name)}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        # with fair sharing on (kueue values), quota lent through the cohort goes by share
        "fairSharing": {"weight": tenant.share},
        "resourceGroups": [],
    }
    if pools:
        spec["resourceGroups"] = [{"coveredResources": list(COVERED),
                                   "flavors": [_quota_entry(tenant, p) for p in pools]}]
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": meta(queue_of(tenant.name)), "spec": spec}


def objects(plan: Plan) -> list[dict[str, Any]]:
    """20-kueue.yaml: flavors first (ClusterQueues name them), then the cohort, then the queues."""
    out = flavors(plan)
    out.append({"apiVersion": API, "kind": "Cohort", "metadata": meta(cohort_name(plan)), "spec": {}})
    out += [cluster_queue(plan, t) for t in plan.tenants]
    out += [{"apiVersion": API, "kind": "LocalQueue",
             "metadata": meta(queue_of(t.name), namespace_of(t.name)),
             "spec": {"clusterQueue": queue_of(t.name)}}
            for t in plan.tenants]
    return out


def topology(plan: Plan) -> list[dict[str, Any]]:
    return level_topology(plan, API)
