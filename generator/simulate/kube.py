"""Kubernetes scheduling: the plan's gang scheduler, or the default per-pod kube-scheduler.

Gang (Kueue, Volcano or KAI, as the plan installs): a job is admitted whole or not at all, within
its tenant's quota first, then by borrowing idle quota, each scheduler as the bundle configures it
(admission.py: Kueue's per-pool nominal quotas, Volcano's and KAI's per-tenant totals, Volcano's
capability, KAI's in-quota rule for non-preemptible work); an admitted job starts only where all its
pods fit on nodes at once (all-or-nothing, as Volcano's minAvailable and Kueue's waitForPodsReady
give), else it stays queued and the next job is tried (BestEffortFIFO). A job that fits neither
may preempt, as the policy allows (`GangScheduler._preempt`): lower-priority jobs of its own
queue, and jobs of tenants above their quota (reclaim); a preempted job loses its run and queues
again.

Per pod (the stock kube-scheduler, no gang): every pod is scheduled on its own, first fit, in the
order the pods were created (jobs created at the same instant interleave their pods, as the
decision guide's proof does); a bound pod holds its GPUs until its whole job runs and ends. A job
whose pods are partly bound holds GPUs doing nothing; when no job runs and no pending pod fits,
the partly placed jobs deadlock for good.

Long-lived services start at t=0 and never end.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from ..decide.plan import Plan
from . import admission
from .admission import Admission
from .cluster import pick
from .engine import Replay
from .jobs import Job


class GangScheduler:
    def __init__(self, replay: Replay, plan: Plan, policy: Admission | None = None):
        self.r = replay
        nodes = replay.nodes
        self.mask = {pool: nodes.mask(pool) for pool in nodes.pools}
        self.pool_gpus = nodes.pool_gpus()
        if policy is None:
            policy = admission.of_plan(plan) if getattr(plan, "gang_scheduler", None) else admission.plain(plan)
        self.policy = policy
        whole = sum(self.pool_gpus.values())
        # a None quota (the implicit tenant of the tests' small plans): the pool, or the plane
        self.quota = {k: (v if v is not None else (self.pool_gpus.get(k[1], 0) if k[1] else whole))
                      for k, v in policy.quota.items()}
        self.used: dict[tuple[str, str], int] = {}  # GPUs admitted, per policy.key (tenant, pool or ANY)
        self.tenant_used: dict[str, int] = {}
        self.cohort: dict[str, int] = {}  # GPUs admitted, per pool
        # GPUs running per policy key and priority, and the largest job admitted per pool: bounds that
        # rule out most preemption attempts before any running job is looked at (`_preempt`)
        self.by_priority: dict[tuple[str, str], dict[int, int]] = {}
        self.largest: dict[str, int] = {}
        self.queues: dict[tuple, deque[Job]] = {}
        # heads found not admissible since the last job ended: quotas used and GPUs free only
        # shrink until a job ends, so they stay so (not tried again: the same admissions, sooner)
        self._failed: set[int] = set()
        self.preempting = policy.within_queue or policy.reclaim
        replay.scheduler = self

    def possible(self, job: Job) -> bool:
        m = self.mask.get(job.pool)
        return m is not None and int(((self.r.nodes.cap >= job.per_node) & m).sum()) >= job.nodes

    def _queue(self, job: Job) -> deque[Job]:
        return self.queues.setdefault((job.tenant, job.pool, job.nodes, job.per_node, job.priority), deque())

    def _requeue(self, job: Job) -> None:
        """A preempted job back in its queue, in submission order (Kueue's BestEffortFIFO orders by
        the workload's creation time; its position among the jobs still queued)."""
        q = self._queue(job)
        at = next((i for i, other in enumerate(q) if other.id > job.id), len(q))
        q.insert(at, job)

    def _quota_ok(self, job: Job, key: tuple[str, str], used: int) -> tuple[bool, bool]:
        """(admissible by quota, within quota) for `job` on top of `used`."""
        within = used + job.gpus <= self.quota.get(key, 0)
        if within:
            return True, True
        p = self.policy
        if not p.borrow or p.must_fit_quota(job.priority):
            return False, False
        cap = p.limit.get(job.tenant)
        if cap is not None and self.tenant_used.get(job.tenant, 0) + job.gpus > cap:
            return False, False
        # Kueue lends a borrower only the cohort's idle quota of the pool
        if p.per_pool and self.cohort.get(job.pool, 0) + job.gpus > self.pool_gpus[job.pool]:
            return False, False
        return True, False

    def schedule(self, now: float) -> None:
        # Jobs of one shape (tenant, pool, pods, GPUs per pod, priority) queue behind each other:
        # where the first cannot be admitted, neither can the next. So each pass tries the heads of
        # these queues, higher priority first, then in submission order (BestEffortFIFO), within
        # quota first, then borrowing, and starts over after each admission: as many steps as
        # admissions, not as pending jobs. A head that fits neither may preempt (`_preempt`).
        for j in self.r.arrived:
            self._queue(j).append(j)
        free = dict(zip(self.r.nodes.pools, self.r._pool_free))
        failed = self._failed
        if self.r.freed:
            failed.clear()
        key_of = self.policy.key
        while True:
            heads = sorted((q[0] for q in self.queues.values() if q and q[0].id not in failed),
                           key=lambda j: (-j.priority, j.id))
            started = None
            for borrowing in (False, True):
                for job in heads:
                    key = key_of(job.tenant, job.pool)
                    used = self.used.get(key, 0)
                    ok, within = self._quota_ok(job, key, used)
                    if within == borrowing:
                        continue
                    got = None
                    if ok and job.gpus <= free[job.pool]:
                        fit = (self.r.nodes.free >= job.per_node) & self.mask[job.pool]
                        got = pick(fit, self.r.nodes.leaf, job.nodes, False, len(self.r.nodes.leaves))
                    if got is None and self.preempting:
                        got = self._preempt(job, key, free)
                        if got is not None:
                            failed.clear()  # victims may have freed more than it takes
                    if got is None:
                        # quotas used and GPUs free only shrink until a job ends (or is preempted)
                        failed.add(job.id)
                        continue
                    self._admit(job, key)
                    self._queue(job).popleft()
                    self.r.start(job, got)
                    free[job.pool] -= job.gpus
                    started = job
                    break
                if started:
                    break
            if started is None:
                return

    def _admit(self, job: Job, key: tuple[str, str]) -> None:
        self.used[key] = self.used.get(key, 0) + job.gpus
        self.tenant_used[job.tenant] = self.tenant_used.get(job.tenant, 0) + job.gpus
        self.cohort[job.pool] = self.cohort.get(job.pool, 0) + job.gpus
        prio = self.by_priority.setdefault(key, {})
        prio[job.priority] = prio.get(job.priority, 0) + job.gpus
        if job.gpus > self.largest.get(job.pool, 0):
            self.largest[job.pool] = job.gpus

    def _release(self, job: Job) -> None:
        key = self.policy.key(job.tenant, job.pool)
        self.used[key] -= job.gpus
        self.tenant_used[job.tenant] -= job.gpus
        self.cohort[job.pool] -= job.gpus
        self.by_priority[key][job.priority] -= job.gpus

    def _hopeless(self, job: Job, key: tuple[str, str], free: dict[str, float]) -> bool:
        """True where no set of victims the policy allows can make `job` fit: an upper bound on
        what it may take, from the counters alone (most attempts on a loaded plane end here)."""
        p = self.policy
        own = 0
        if p.within_queue:
            own = sum(g for pr, g in self.by_priority.get(key, {}).items()
                      if pr < job.priority and p.preemptible(pr))
        if self.used.get(key, 0) - own + job.gpus > self.quota.get(key, 0):
            return True  # not within its quota even once its own lower-priority jobs are gone
        need = job.gpus - free[job.pool] - own
        if need <= 0:
            return False
        if not p.reclaim:
            return True
        # reclaim takes from a tenant while it is above its quota: at most its excess plus one job
        room = 0
        for k, u in self.used.items():
            if k[0] != job.tenant and (not p.per_pool or k[1] == job.pool) and u > self.quota.get(k, 0):
                room += u - self.quota.get(k, 0) + self.largest.get(job.pool, 0)
        return room < need

    def _preempt(self, job: Job, key: tuple[str, str], free: dict[str, float]) -> np.ndarray | None:
        """Evict running jobs so that `job` runs, as the policy allows, and return its nodes; None
        (nothing evicted) where no allowed set of victims makes it fit. Every scheduler here
        preempts only for a job that is within its quota once its victims are gone (Kueue:
        withinClusterQueue and reclaimWithinCohort both need the preemptor within nominal quota;
        KAI: reclaim restores a queue's quota; Volcano: reclaim up to deserved). Victims, in this
        order: lower-priority jobs of the same tenant (withinClusterQueue / Volcano's and KAI's
        preempt action), then jobs of tenants above their quota (reclaim), each lowest priority
        first, the most recently started first (Kueue's candidate order); only from the job's pool
        (its pods need nodes there)."""
        p = self.policy
        used = self.used.get(key, 0)
        quota = self.quota.get(key, 0)
        if job.gpus > quota or self._hopeless(job, key, free):
            return None  # never within quota (borrowing only, which preempts nothing), or no victims enough
        own, others = [], []
        for v in self.r.running.values():
            if v.pool != job.pool or not p.preemptible(v.priority):
                continue
            if v.tenant == job.tenant:
                if p.within_queue and v.priority < job.priority:
                    own.append(v)
            elif p.reclaim and (p.reclaim_any_priority or v.priority < job.priority):
                vkey = p.key(v.tenant, v.pool)
                if self.used.get(vkey, 0) > self.quota.get(vkey, 0):
                    others.append(v)
        if not own and not others:
            return None
        order = sorted(own, key=lambda v: (v.priority, -v.start, -v.id)) + \
            sorted(others, key=lambda v: (v.priority, -v.start, -v.id))
        nodes = self.r.nodes
        trial = nodes.free.copy()
        gpus_free = free[job.pool]
        over = {}  # victims' tenants' usage as victims leave (reclaim stops at their quota)
        victims = []
        mine = used
        for v in order:
            vkey = p.key(v.tenant, v.pool)
            if v.tenant != job.tenant:
                left = over.get(vkey, self.used.get(vkey, 0))
                if left <= self.quota.get(vkey, 0):
                    continue  # back at its quota: nothing more to reclaim from it
                over[vkey] = left - v.gpus
            else:
                mine -= v.gpus
            victims.append(v)
            np.add.at(trial, v.nodes_held, v.per_node)
            gpus_free += v.gpus
            if mine + job.gpus > quota or job.gpus > gpus_free:
                continue
            got = pick((trial >= job.per_node) & self.mask[job.pool], nodes.leaf, job.nodes, False,
                       len(nodes.leaves))
            if got is not None:
                for v in victims:
                    self._release(v)
                    self.r.preempt(v)
                    self._requeue(v)
                    free[job.pool] += v.gpus
                return got
        return None

    def ended(self, job: Job) -> None:
        self._release(job)


class PerPodScheduler:
    """The default kube-scheduler: pods bind one at a time, no gang."""

    def __init__(self, replay: Replay, plan: Plan):
        self.r = replay
        self.mask = {pool: replay.nodes.mask(pool) for pool in replay.nodes.pools}
        self.pods: dict[tuple[str, int], deque[tuple[int, Job]]] = {}  # unbound pods (creation no., job)
        self._seq = 0
        self.bound: dict[int, list[int]] = {}
        self.deadlocked: list[Job] = []
        self._blocked: set[tuple[str, int]] = set()  # pod shapes that found no node since a job last ended
        replay.scheduler = self
        replay.distinct_nodes = False  # pods bind one by one: two of a job may share a node

    def possible(self, job: Job) -> bool:
        return job.pool in self.mask  # pods bind one at a time: even a job larger than its pool binds some

    def _enqueue(self) -> None:
        new = self.r.arrived
        if not new:
            return
        # pods of the jobs created at this instant, interleaved (A, B, A, B, ...)
        for k in range(max(j.nodes for j in new)):
            for j in new:
                if k < j.nodes:
                    self._seq += 1
                    self.pods.setdefault((j.pool, j.per_node), deque()).append((self._seq, j))

    def schedule(self, now: float) -> None:
        """Pods bind in creation order, first fit; pods asking for as many GPUs in the same pool as
        one that found no node wait behind it (kube-scheduler retries them when GPUs come free)."""
        self._enqueue()
        nodes = self.r.nodes
        if self.r.freed:
            self._blocked.clear()
        heads = [(q[0][0], key) for key, q in self.pods.items() if q and key not in self._blocked]
        heapq.heapify(heads)
        # GPUs free only shrink during a pass (and until a job ends): a node found too full stays
        # so, and each shape's candidates are scanned once per pass, in order, not once per pod
        cands: dict[tuple[str, int], list] = {}
        while heads:
            _, key = heapq.heappop(heads)
            queue = self.pods[key]
            job = queue[0][1]
            c = cands.get(key)
            if c is None:
                c = cands[key] = [np.flatnonzero((nodes.free >= job.per_node) & self.mask[job.pool]), 0]
            ok, k = c
            while k < ok.size and nodes.free[ok[k]] < job.per_node:
                k += 1
            c[1] = k
            if k == ok.size:
                self._blocked.add(key)  # blocked until GPUs come free
                continue
            queue.popleft()
            node = int(ok[k])
            held = self.bound.setdefault(job.id, [])
            held.append(node)
            if len(held) < job.nodes:
                self.r.hold(job, node, job.per_node)
            else:
                self.r.held_to_running(job, np.array(held, dtype=np.int64))
            if queue:
                heapq.heappush(heads, (queue[0][0], key))
        # (every arrival in first: only then can nothing change any more, and only then is it worth
        # looking through the running jobs)
        if self.r._arrivals_left == 0 and not self.r.ends_pending():
            self.deadlocked = [j for j in self.r.pending.values() if 0 < len(self.bound.get(j.id, ())) < j.nodes]

    def ended(self, job: Job) -> None:
        self.bound.pop(job.id, None)
