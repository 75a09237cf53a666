"""Kubernetes scheduling: the plan's gang scheduler, or the default per-pod kube-scheduler.

Gang (Kueue, Volcano or KAI, as the plan installs): a job is admitted whole or not at all. Kueue's
ClusterQueues (one per tenant, BestEffortFIFO, one cohort without borrowingLimit: kueue.py) admit a
job within its tenant's nominal quota of the pool first, then by borrowing the cohort's idle quota;
an admitted job starts only where all its pods fit on nodes at once (all-or-nothing, as Volcano's
minAvailable and Kueue's waitForPodsReady give), else it stays queued and the next job is tried
(BestEffortFIFO). Reclaiming borrowed quota by preemption is not modelled (README).

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
from .cluster import pick
from .engine import Replay
from .jobs import Job


class GangScheduler:
    def __init__(self, replay: Replay, plan: Plan):
        self.r = replay
        nodes = replay.nodes
        self.mask = {pool: nodes.mask(pool) for pool in nodes.pools}
        self.pool_gpus = nodes.pool_gpus()
        implicit = len(plan.tenants) == 1 and plan.tenants[0].implicit
        self.quota = {(t.name, pool): (self.pool_gpus[pool] if implicit else q.gpus)
                      for t in plan.tenants for pool, q in t.quotas.items() if pool in self.pool_gpus}
        self.used: dict[tuple[str, str], int] = {}  # GPUs admitted, per (tenant, pool)
        self.cohort: dict[str, int] = {}  # GPUs admitted, per pool
        self.queues: dict[tuple, deque[Job]] = {}
        # heads found not admissible since the last job ended: quotas used and GPUs free only
        # shrink until a job ends, so they stay so (not tried again: the same admissions, sooner)
        self._failed: set[int] = set()
        replay.scheduler = self

    def possible(self, job: Job) -> bool:
        m = self.mask.get(job.pool)
        return m is not None and int(((self.r.nodes.cap >= job.per_node) & m).sum()) >= job.nodes

    def schedule(self, now: float) -> None:
        # Jobs of one shape (tenant, pool, pods, GPUs per pod) queue behind each other: where the
        # first cannot be admitted, neither can the next. So each pass tries the heads of these
        # queues in submission order (BestEffortFIFO), within quota first, then borrowing, and
        # starts over after each admission: as many steps as admissions, not as pending jobs.
        for j in self.r.arrived:
            self.queues.setdefault((j.tenant, j.pool, j.nodes, j.per_node), deque()).append(j)
        free = dict(zip(self.r.nodes.pools, self.r._pool_free))
        failed = self._failed
        if self.r.freed:
            failed.clear()
        while True:
            heads = sorted((q[0] for q in self.queues.values() if q and q[0].id not in failed), key=lambda j: j.id)
            started = None
            for borrowing in (False, True):
                for job in heads:
                    key = (job.tenant, job.pool)
                    used = self.used.get(key, 0)
                    if (used + job.gpus <= self.quota.get(key, 0)) == borrowing or job.gpus > free[job.pool]:
                        continue
                    # Kueue lends a borrower only the cohort's idle quota
                    if borrowing and self.cohort.get(job.pool, 0) + job.gpus > self.pool_gpus[job.pool]:
                        continue
                    ok = (self.r.nodes.free >= job.per_node) & self.mask[job.pool]
                    got = pick(ok, self.r.nodes.leaf, job.nodes, False, len(self.r.nodes.leaves))
                    if got is None:
                        failed.add(job.id)
                        continue
                    self.used[key] = used + job.gpus
                    self.cohort[job.pool] = self.cohort.get(job.pool, 0) + job.gpus
                    self.queues[(job.tenant, job.pool, job.nodes, job.per_node)].popleft()
                    self.r.start(job, got)
                    free[job.pool] -= job.gpus
                    started = job
                    break
                if started:
                    break
            if started is None:
                return

    def ended(self, job: Job) -> None:
        key = (job.tenant, job.pool)
        self.used[key] = self.used.get(key, 0) - job.gpus
        self.cohort[job.pool] -= job.gpus


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
        if self.r._arrivals_left == 0 and not any(j.runtime != float("inf") for j in self.r.running.values()):
            self.deadlocked = [j for j in self.r.pending.values() if 0 < len(self.bound.get(j.id, ())) < j.nodes]

    def ended(self, job: Job) -> None:
        self.bound.pop(job.id, None)
