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
        self.used: dict[tuple[str, str], int] = {}
        replay.scheduler = self

    def possible(self, job: Job) -> bool:
        m = self.mask.get(job.pool)
        return m is not None and int(((self.r.nodes.cap >= job.per_node) & m).sum()) >= job.nodes

    def schedule(self, now: float) -> None:
        # nothing came free since the last pass: only the jobs that arrived since can start now
        pending = list(self.r.pending.values()) if self.r.freed else [j for j in self.r.arrived if j.start is None]
        free = dict(zip(self.r.nodes.pools, self.r._pool_free))
        # within its tenant's nominal quota first, then borrowing (Kueue admits a borrower only when
        # the cohort has the idle quota); all-or-nothing on the nodes either way
        for borrowing in (False, True):
            blocked: set[tuple] = set()
            for job in pending:
                if job.start is not None:
                    continue
                key = (job.tenant, job.pool)
                used = self.used.get(key, 0)
                within = used + job.gpus <= self.quota.get(key, 0)
                if within == borrowing:
                    continue
                if borrowing:
                    cohort = sum(u for (t, p), u in self.used.items() if p == job.pool)
                    if cohort + job.gpus > self.pool_gpus[job.pool]:
                        continue
                shape = (job.pool, job.nodes, job.per_node)
                if shape in blocked or job.gpus > free[job.pool]:
                    continue
                ok = (self.r.nodes.free >= job.per_node) & self.mask[job.pool]
                got = pick(ok, self.r.nodes.leaf, job.nodes, False, len(self.r.nodes.leaves))
                if got is None:
                    blocked.add(shape)
                    continue
                self.used[key] = used + job.gpus
                self.r.start(job, got)
                free[job.pool] -= job.gpus

    def ended(self, job: Job) -> None:
        key = (job.tenant, job.pool)
        self.used[key] = self.used.get(key, 0) - job.gpus


class PerPodScheduler:
    """The default kube-scheduler: pods bind one at a time, no gang."""

    def __init__(self, replay: Replay, plan: Plan):
        self.r = replay
        self.mask = {pool: replay.nodes.mask(pool) for pool in replay.nodes.pools}
        self.pods: deque[Job] = deque()  # one entry per pod not yet bound, in creation order
        self.bound: dict[int, list[int]] = {}
        self._queued: set[int] = set()
        self.deadlocked: list[Job] = []
        replay.scheduler = self

    def possible(self, job: Job) -> bool:
        return job.pool in self.mask  # pods bind one at a time: even a job larger than its pool binds some

    def _enqueue(self, now: float) -> None:
        new = [j for j in self.r.arrived if j.id not in self._queued]
        if not new:
            return
        for j in new:
            self._queued.add(j.id)
        # pods of the jobs created at this instant, interleaved (A, B, A, B, ...)
        for k in range(max(j.nodes for j in new)):
            for j in new:
                if k < j.nodes:
                    self.pods.append(j)

    def schedule(self, now: float) -> None:
        self._enqueue(now)
        nodes = self.r.nodes
        blocked: set[tuple[str, int]] = set()
        left: deque[Job] = deque()
        while self.pods:
            job = self.pods.popleft()
            if (job.pool, job.per_node) in blocked:
                left.append(job)
                continue
            ok = np.flatnonzero((nodes.free >= job.per_node) & self.mask[job.pool])
            if ok.size == 0:
                blocked.add((job.pool, job.per_node))
                left.append(job)
                continue
            node = int(ok[0])
            held = self.bound.setdefault(job.id, [])
            held.append(node)
            if len(held) < job.nodes:
                self.r.hold(job, node, job.per_node)
            else:
                self.r.held_to_running(job, np.array(held, dtype=np.int64))
        self.pods = left
        running = any(j.start is not None and j.end is None and j.runtime != float("inf")
                      for j in self.r.running.values())
        partial = [j for j in self.r.pending.values() if 0 < len(self.bound.get(j.id, ())) < j.nodes]
        if partial and not running and self.r._arrivals_left == 0:
            self.deadlocked = partial

    def ended(self, job: Job) -> None:
        self.bound.pop(job.id, None)
