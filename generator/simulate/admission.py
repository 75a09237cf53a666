"""Each gang scheduler's admission and preemption policy, as the bundle configures it.

Read from the objects the bundle writes (render/kubernetes/kueue.py, volcano.py, kai.py), so the
model follows the bundle: where the bundle sets no borrowing or preemption, there is none.

- **Kueue** (one ClusterQueue per tenant, kueue.cluster_queue): nominalQuota per ResourceFlavor, i.e.
  per pool; all ClusterQueues in one cohort with no borrowingLimit, so a tenant borrows any idle
  quota of the pool; `preemption.withinClusterQueue: LowerPriority` and `reclaimWithinCohort: Any`.
  Kueue docs, concepts/preemption.md "Reasons for preemption": a workload preempts a lower-priority
  one of its own ClusterQueue, or one of a ClusterQueue of its cohort whose usage is above its
  nominal quota; concepts/cluster_queue.md "Preemption": both only for a workload that fits within
  its ClusterQueue's nominal quota once the preemptees are gone. reclaimWithinCohort `Any`: the
  borrower's priority does not matter.
- **Volcano** (one Queue per tenant, volcano.queue; scheduler conf volcano.ACTIONS): `deserved` =
  the tenant's quota summed over the plane's pools (Volcano queues are not per pool),
  `capability` = the whole plane (the most it may hold: borrowing up to everything idle),
  `reclaimable: true`; the capacity plugin (not proportion: the bundle swaps it in) with the
  `reclaim` action takes back what a queue holds above its deserved, for a queue below its own
  (volcano docs/user-guide/how_to_use_capacity_plugin.md: "the amount of reclaimed resources is the
  amount of queue's deserved resources"); the `preempt` action evicts lower-priority jobs of the
  same queue (the priority plugin's order).
- **KAI** (one Queue per tenant under a department, kai.objects): `quota` summed over the pools,
  `limit: -1` (no cap), `overQuotaWeight` = share (borrowing on); reclaim takes a queue's quota
  back from queues above theirs, and only up to that quota (KAI-Scheduler discussion #1763,
  GuaranteeDeservedQuota); priority below 100 is preemptible, 100 or more is not, and a
  non-preemptible workload runs only within its queue's quota, never on borrowed GPUs (KAI docs
  "Workload Priority"; Run:ai docs "Workload priority and preemption": "Non-preemptible workloads
  must run within the project's deserved quota"). The bundle's services are 1000, batch 50
  (render/kubernetes/priority.py).

What none of them models here: fair sharing's order among borrowers (Kueue's fairSharing weights,
KAI's overQuotaWeight: borrowers are served in submission order), reclaiming beyond the quota up to
a fair share, CPU and memory quotas (GPUs only), the time a preempted pod takes to terminate.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..decide.plan import Plan

ANY = ""  # Admission.quota's pool key where quotas cover the whole plane (Volcano, KAI)
KAI_PREEMPTIBLE_BELOW = 100  # KAI docs "Workload Priority": below 100 preemptible, 100 and up not


@dataclass(frozen=True)
class Admission:
    scheduler: str  # kueue | volcano | kai | "" (quotas with borrowing, no preemption)
    per_pool: bool  # quotas per (tenant, pool) (Kueue flavors), else per tenant over the plane
    quota: dict[tuple[str, str], int] = field(default_factory=dict)  # (tenant, pool or ANY) -> GPUs
    limit: dict[str, int] = field(default_factory=dict)  # tenant -> the most GPUs it may hold (absent: no cap)
    borrow: bool = True  # idle quota of others may be used
    within_queue: bool = False  # a job preempts lower-priority jobs of its own tenant's queue
    reclaim: bool = False  # a job within its quota takes it back from tenants above theirs
    reclaim_any_priority: bool = True  # reclaim evicts borrowers of any priority (Kueue Any, Volcano)
    preemptible_below: int | None = None  # only jobs below this priority are ever preempted (KAI)
    in_quota_from: int | None = None  # jobs of this priority or more run only within quota (KAI)

    def key(self, tenant: str, pool: str) -> tuple[str, str]:
        return (tenant, pool if self.per_pool else ANY)

    def preemptible(self, priority: int) -> bool:
        return self.preemptible_below is None or priority < self.preemptible_below

    def must_fit_quota(self, priority: int) -> bool:
        return self.in_quota_from is not None and priority >= self.in_quota_from


def _gpus(resources: dict, skip=("cpu", "memory")) -> int:
    """GPUs of a Volcano resource list (nvidia.com/gpu, or MIG instances counted as written)."""
    return sum(int(v) for k, v in resources.items() if k not in skip)


def of_plan(plan: Plan) -> Admission:
    """The policy of the plan's gang scheduler, from the objects its bundle writes."""
    from .. import schedulers
    from ..render.kubernetes import common

    pools = {s.pool: s.gpus for s in common.slices(plan)}
    implicit = len(plan.tenants) == 1 and plan.tenants[0].implicit
    sched = schedulers.get(plan.gang_scheduler)
    # one reader per gang scheduler, named after its render module (the registry's `module`), so no
    # scheduler name is compared here (tests/test_registries.py)
    reader = globals().get(f"_{sched.module}") if sched else None
    return reader(plan, sched.name, pools, implicit) if reader else plain(plan)


def _kueue(plan: Plan, name: str, pools: dict[str, int], implicit: bool) -> Admission:
    """Kueue: per-pool ClusterQueue quotas, borrowing in the cohort, its preemption block."""
    from ..render.kubernetes import kueue

    quota, within, reclaim, any_prio, borrow = {}, False, False, True, True
    for t in plan.tenants:
        spec = kueue.cluster_queue(plan, t)["spec"]
        pre = spec.get("preemption", {})
        within = within or pre.get("withinClusterQueue", "Never") != "Never"
        reclaim = reclaim or pre.get("reclaimWithinCohort", "Never") != "Never"
        any_prio = pre.get("reclaimWithinCohort") == "Any"
        borrow = borrow and bool(spec.get("cohortName")) and not any(
            "borrowingLimit" in r for g in spec["resourceGroups"] for f in g["flavors"] for r in f["resources"])
        for pool in pools:
            q = t.quotas.get(pool)  # what _quota_entry writes as the flavor's GPU nominalQuota
            quota[(t.name, pool)] = pools[pool] if implicit else (q.gpus if q else 0)
    return Admission(name, True, quota, {}, borrow, within, reclaim, any_prio)


def _volcano(plan: Plan, name: str, pools: dict[str, int], implicit: bool) -> Admission:
    """Volcano: plane-wide deserved/capability per queue, the capacity plugin's reclaim, preempt."""
    from ..render.kubernetes import common, volcano

    weights = volcano.weights(plan)
    quota, limit, reclaimable = {}, {}, True
    for t in plan.tenants:
        spec = volcano.queue(plan, t, weights[t.name])["spec"]
        quota[(t.name, ANY)] = sum(pools.values()) if implicit else common.tenant_totals(t)[0]
        if "capability" in spec:
            limit[t.name] = sum(pools.values()) if implicit else common.plane_totals(plan)[0]
        reclaimable = reclaimable and bool(spec.get("reclaimable"))
    actions = [a.strip() for a in volcano.volcano_scheduler_conf(plan)["actions"].split(",")]
    borrow = any(limit.get(t, sum(pools.values())) > q for (t, _), q in quota.items())
    return Admission(name, False, quota, limit, borrow, "preempt" in actions,
                     "reclaim" in actions and reclaimable, True)


def _kai(plan: Plan, name: str, pools: dict[str, int], implicit: bool) -> Admission:
    """KAI: plane-wide queue quota and limit, over-quota weight, reclaim and preempt of preemptible jobs."""
    from ..render.kubernetes import common, kai

    quota, limit, borrow = {}, {}, True
    queues = {q["metadata"]["name"]: q["spec"] for q in kai.objects(plan)}
    for t in plan.tenants:
        gpu = queues[common.queue_of(t.name)]["resources"]["gpu"]
        quota[(t.name, ANY)] = sum(pools.values()) if implicit else int(gpu["quota"])
        if gpu["limit"] != kai.UNLIMITED:
            limit[t.name] = int(gpu["limit"])
        borrow = borrow and gpu["overQuotaWeight"] > 0
    # KAI's default actions include reclaim and preempt (its scheduler config; the bundle keeps them)
    # reclaim takes any preemptible job back, whatever the priorities (preemptible_below)
    return Admission(name, False, quota, limit, borrow, True, True, True, KAI_PREEMPTIBLE_BELOW,
                     KAI_PREEMPTIBLE_BELOW)


def plain(plan) -> Admission:
    """Quotas per pool with borrowing of idle quota and no preemption: a plan object with only
    tenants (the tests' small pools), or no gang scheduler."""
    quota = {}
    implicit = len(plan.tenants) == 1 and plan.tenants[0].implicit
    for t in plan.tenants:
        for pool, q in t.quotas.items():
            quota[(t.name, pool)] = None if implicit else q.gpus
    return Admission("", True, quota)
