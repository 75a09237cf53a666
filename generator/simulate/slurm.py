"""Slurm's scheduling as the plan configures it (slurm.conf from generator.render.slurm.model).

* Priority: without tenants the bundle has no accounting, and jobs go in submission order (Slurm
  22.05's priority/basic; equal multifactor priorities also fall back to job id). With tenants,
  priority/multifactor with the bundle's weights (orchgen's, or options.slurm.priority's):
  Fairshare (10000) x 2^(-usage/share) (the classic formula; Fair Tree ranks tenants in the same order
  for one level of accounts), TRES GRES/gpu (2000) x the job's share of its partition's GPUs, Age
  (1000) x min(age / PriorityMaxAge, 1), recalculated every PriorityCalcPeriod; usage decays with
  PriorityDecayHalfLife. The other factors (QOS, job size, partition) are not modelled. The site's
  SchedulerParameters items among bf_interval, bf_window, bf_resolution, bf_max_job_test,
  bf_max_job_user, default_queue_depth and sched_interval are taken too.
* The main scheduler (on every submission and job end, and every sched_interval): pending jobs by
  priority, at most default_queue_depth of them; the first job of a partition that cannot start
  blocks the lower-priority jobs of that partition ("sched_config.html": the main scheduler stops
  at the first job it cannot start in a partition).
* Backfill (every bf_interval): at most bf_max_job_test jobs (bf_max_job_user per tenant); each job
  that cannot start now is given the earliest start at which its nodes are free, assuming every
  running job ends at its time limit (times rounded down to bf_resolution, as backfill.c keeps
  them), and those nodes are
  reserved from then for its time limit; a lower-priority job starts now only where it ends before
  every reservation on the nodes it takes. Plans reach bf_window ahead at most.
* --switches=1 for tightly coupled multi-node jobs that fit in one leaf: kept on one leaf for at most
  the bundle's max_switch_wait (options.slurm.max_switch_wait), then placed across leaves.
* Nodes are shared (select/cons_tres): a job takes `per_node` GPUs on each of its nodes.

Simplifications (README): no preemption (scavenger QOS), no GrpTRES caps, no reservations for a
second job of the same shape in one backfill pass (it could not start before the first anyway).
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..decide.plan import Plan
from .cluster import pick_or_most
from .engine import Replay
from .jobs import Job

AGE_MAX = 7 * 86_400  # PriorityMaxAge=7-0
HALF_LIFE = 7 * 86_400  # PriorityDecayHalfLife=7-0
PRIORITY_CALC_PERIOD = 300  # PriorityCalcPeriod: Slurm's default, 5 minutes
MAX_SWITCH_WAIT = 300  # SchedulerParameters max_switch_wait: Slurm's default; policy_of takes the bundle's


@dataclass(frozen=True)
class Policy:
    """The scheduler's timing and depth (slurm.conf(5) defaults where the bundle sets none)."""

    bf_interval: float = 30  # Slurm's default; the bundle does not set it
    bf_window: float = 86_400  # seconds (the bundle's bf_window, minutes x 60)
    bf_resolution: float = 60
    bf_max_job_test: int = 1000
    bf_max_job_user: int = 50
    sched_interval: float = 60  # Slurm's default
    default_queue_depth: int = 100  # Slurm's default
    max_switch_wait: float = MAX_SWITCH_WAIT
    multifactor: bool = False
    # priority/multifactor as the bundle sets it (orchgen's values, or options.slurm.priority's)
    weight_fairshare: int = 10_000
    weight_gpu: int = 2_000  # PriorityWeightTRES's GRES/gpu
    weight_age: int = 1_000
    age_max: float = AGE_MAX  # seconds
    half_life: float = HALF_LIFE  # seconds
    calc_period: float = PRIORITY_CALC_PERIOD  # seconds
    switches: bool = True
    epoch: float = 0.0  # the wall-clock time (s) of the replay's t=0: backfill rounds absolute times


def policy_of(plan: Plan, **override) -> Policy:
    from ..render.slurm.model import model

    m = model(plan)
    bf = m.backfill
    values = dict(bf_window=bf.window * 60, bf_resolution=bf.resolution, bf_max_job_test=bf.max_job_test,
                  bf_max_job_user=bf.max_job_user, multifactor=bool(m.accounts),
                  max_switch_wait=m.site.max_switch_wait if m.site else MAX_SWITCH_WAIT)
    if m.site:
        values.update(_priority_of(dict((k, v) for k, v, _ in m.site.priority.lines)))
        # the site's SchedulerParameters items (options.slurm.scheduler_parameters) that the model knows
        items = dict(i.split("=", 1) for i in m.scheduler_parameters.split(",") if "=" in i)
        for key, field, scale in (("bf_interval", "bf_interval", 1), ("bf_window", "bf_window", 60),
                                  ("bf_resolution", "bf_resolution", 1), ("bf_max_job_test", "bf_max_job_test", 1),
                                  ("bf_max_job_user", "bf_max_job_user", 1),
                                  ("default_queue_depth", "default_queue_depth", 1), ("sched_interval", "sched_interval", 1)):
            if key in items and items[key].isdigit():
                values[field] = int(items[key]) * scale
    values.update(override)
    return Policy(**values)


def _priority_of(conf: dict[str, str]) -> dict[str, float]:
    """The Policy fields of slurm.conf's priority keys (site.Priority's lines)."""
    from ..spec import slurmtime

    tres = dict(item.split("=", 1) for item in conf.get("PriorityWeightTRES", "").split(",") if "=" in item)
    return dict(weight_fairshare=int(conf.get("PriorityWeightFairshare", 0)),
                weight_gpu=int(float(tres.get("GRES/gpu", 0))), weight_age=int(conf.get("PriorityWeightAge", 0)),
                age_max=slurmtime.minutes(conf.get("PriorityMaxAge", "7-0")) * 60,
                half_life=slurmtime.minutes(conf.get("PriorityDecayHalfLife", "7-0")) * 60,
                calc_period=int(conf.get("PriorityCalcPeriod", PRIORITY_CALC_PERIOD // 60)) * 60)


class SlurmScheduler:
    END_DEAD_MIN = 64  # ended times left in the sorted ends before they are dropped (at more than half of them)

    def __init__(self, replay: Replay, plan: Plan, policy: Policy):
        self.r = replay
        self.p = policy
        nodes = replay.nodes
        self.part_mask = {pool: nodes.mask(pool) for pool in nodes.pools}
        self.part_gpus = {pool: int(nodes.cap[m].sum()) for pool, m in self.part_mask.items()}
        self._whole = {pool for pool, m in self.part_mask.items() if m.all()}  # partitions of every node
        self.leaf_size = int(np.bincount(nodes.leaf).max()) if len(nodes.leaf) else 0
        shares = {t.name: t.share for t in plan.tenants}
        total = sum(shares.values()) or 1
        self.share = {t: s / total for t, s in shares.items()}
        self.usage: dict[str, float] = {t: 0.0 for t in shares}
        self._usage_at = 0.0
        self.shapes: dict[tuple, int] = {}  # pending jobs per (partition, nodes, GPUs per node, limit)
        self._calc_at = -1.0
        self._fs: dict[str, float] = {}
        # pending jobs by priority, as of the last recalculation: within one group of jobs (one tenant,
        # one size: the same fair-share and size terms) priority only falls with the submission time,
        # so where the jobs come in id order and submission order alike (from_trace's and from_demand's
        # do: _numbered), a group's order is its submission order and the order of the whole queue is a
        # merge of the groups, each read as far as a pass reads (a month of a large site queues hundreds
        # of thousands: they are not all given a priority and sorted at every PriorityCalcPeriod). Jobs
        # given in another order (the simulate() API's caller) are each a group of their own: the same
        # order, the heap holding every pending job.
        self._groups: dict[tuple, int] = {}  # (tenant index, size term[, id]) -> group
        # per group: its pending jobs, as submitted (some started since: a Slurm job leaves pending only as it
        # starts, and is pending while its start is None); the jobs themselves, not their ids, so that the
        # merge reads a job's start and submission time without looking it up among every pending job
        self._g_jobs: list[list[Job]] = []
        self._g_cut: list[int] = []  # per group: how many of _g_jobs were submitted by the last recalculation
        self._g_head: list[int] = []  # per group: the first position that may still be pending
        self._g_tenant: list[int] = []
        self._g_base: list[float] = []  # per group: fair-share term + size term, as of the last recalculation
        # per group: (-priority, id, group, position) of its first pending job (_top); None: not yet found
        # since the last recalculation; (): none
        self._g_top: list[tuple | None] = []
        # the groups' heads as a heap, kept from pass to pass until one of them starts (_start) or a
        # recalculation; and their ids
        self._heads: list[tuple] | None = None
        self._head_ids: set[int] = set()
        self._cut = -1  # the last job (index into replay.jobs, their submission order) submitted by the
        # last recalculation: later ones are in _new
        self._last = -1  # the last job submitted
        self._given = -1  # the last job given its own priority (in _new)
        self._new: list[tuple[int, int, int]] = []  # (-priority, id, tenant) of the jobs submitted since
        # running jobs with a time limit by (their end rounded as backfill keeps it, id): kept as
        # they start and end, so a backfill pass does not sort every running job again. Bucketed by
        # that end: the distinct ends (a few thousand: ends are kept to bf_resolution), sorted, and per
        # end its jobs, id -> (partition, GPUs per node, nodes as Python ints), what _earliest reads of
        # each (in any order: it sums the GPUs an end frees); one sorted list of every running job moved
        # tens of thousands of entries per start
        self._end_times: list[float] = []  # (and times whose jobs have all ended since: _end_dead of them)
        self._end_dead = 0
        self._end_at: dict[float, dict[int, tuple[str, int, list[int]]]] = {}
        self._end_of: dict[int, float] = {}  # job id -> its bucket
        self.pending_of: dict[str, int] = {}  # pending jobs per tenant
        # shape (partition, nodes, GPUs per node, one leaf) -> (the most nodes it could have had, and
        # _freed_nodes of its partition) when it last did not fit the GPUs free (_fit_now)
        self._no_fit: dict[tuple, tuple[int, int]] = {}
        self._freed_nodes = dict.fromkeys(self.part_mask, 0)  # per partition: the nodes of the jobs ended so far
        self._capable: dict[tuple[str, int], int] = {}  # (partition, GPUs per node) -> nodes that have them
        self._leaf_list = nodes.leaf.tolist()  # each node's leaf, as Python ints (_earliest reads them one by one)
        self._mask_lists: dict[str, list[bool]] = {}
        replay.count_free()  # (_fit_most)
        replay.scheduler = self
        # per job (by its index in the replay): what usage decay reads, as arrays
        # One pass over the jobs for all of it: a million jobs, in submission order, lie all over memory, and each
        # pass read every one of them again (six passes took a second and a half at issue 41's size)
        jobs = replay.jobs
        ix: dict[int, int] = {}
        names: list[str] = []
        gpus: list[int] = []
        # ids and submission times both ascending in the replay's order (its arrivals'): see _groups
        in_order, last_id, last_submit = True, None, None
        for i, job in enumerate(jobs):
            ix[job.id] = i
            job.partition = job.pool
            names.append(job.tenant)
            gpus.append(job.nodes * job.per_node)  # (Job.gpus)
            if in_order and last_id is not None and not (last_id < job.id and last_submit <= job.submit):
                in_order = False
            last_id, last_submit = job.id, job.submit
        self._ix = ix
        self._in_order = in_order
        tenants = sorted(set(names) | set(shares))
        self._tenant_ix = {t: i for i, t in enumerate(tenants)}
        self._tenants = tenants
        tenant_ix = self._tenant_ix
        self._a_tenant = np.array([tenant_ix[t] for t in names], dtype=np.int64)
        self._a_gpus = np.array(gpus, dtype=np.int64)
        # the running jobs' indexes, in start order (the replay's running jobs' order): kept as they start
        # and end, rather than found among every job's at each decay and sorted by start
        self._running_ix: dict[int, None] = {}

    # -- priority
    def _decay_usage(self, now: float) -> None:
        dt = now - self._usage_at
        if dt <= 0:
            return
        factor = 0.5 ** (dt / self.p.half_life)
        for t in self.usage:
            self.usage[t] *= factor
        # each running job's GPU-seconds, added one by one in start order as a loop over the running
        # jobs would (ufunc.at is unbuffered and in order: the same float sums, without the loop)
        ix = np.fromiter(self._running_ix, dtype=np.int64, count=len(self._running_ix))
        tix = self._a_tenant[ix]
        first = np.unique(tix, return_index=True)
        for k in first[0][np.argsort(first[1])]:  # a tenant first seen running joins as the loop would add it
            self.usage.setdefault(self._tenants[k], 0.0)
        u = np.array([self.usage.get(t, 0.0) for t in self._tenants])
        np.add.at(u, tix, self._a_gpus[ix] * dt)
        for k in first[0]:
            self.usage[self._tenants[k]] = float(u[k])
        self._usage_at = now

    def order(self, now: float, limit: int | None = None, skip: set[int] | None = None) -> Iterable[Job]:
        """Pending jobs by priority (then job id). Multifactor priorities are recalculated every
        PriorityCalcPeriod (5 minutes, Slurm's default) and given to a job when it is submitted.
        `skip`: tenants (indexes into _tenants; the caller may add to it as it reads) whose jobs are
        left out, for backfill's capped tenants, whose jobs it passes over anyway (order from
        submission gives them all: the caller skips them itself)."""
        pending = self.r.pending
        if not self.p.multifactor:
            return list(itertools.islice(pending.values(), limit))
        if now - self._calc_at >= self.p.calc_period or self._calc_at < 0:
            self._recalc(now)
        # submitted since the recalculation, and not given a priority by an earlier pass since (the
        # arrivals of an instant are read by each pass until the next event's): their own priority
        given = max(self._cut, self._given)
        for j in self.r.arrived:
            k = self._ix[j.id]
            if k > given:
                self._given = k
                if j.id in pending:
                    bisect.insort(self._new, (-self._priority(j, now), j.id, self._tenant_ix[j.tenant]))
        return itertools.islice(self._merged(skip), limit)

    def _recalc(self, now: float) -> None:
        """Every pending job's priority as of now: the fair-share term per tenant here; each job's
        sum is formed as _merged reads it (the same float operations, in the same order, as a sum
        over the pending jobs' arrays: fair-share + size, + age x weight, truncated)."""
        self._calc_at = now
        self._decay_usage(now)
        total = sum(self.usage.values()) or 1.0
        self._fs = {t: 2 ** (-(u / total) / max(self.share.get(t, 1e-9), 1e-9)) for t, u in self.usage.items()}
        p = self.p
        fs_term = [p.weight_fairshare * self._fs.get(t, 0.0) for t in self._tenants]
        self._g_base = [fs_term[key[0]] + key[1] for key in self._groups]  # dict order: the group's index
        self._cut = self._last
        self._g_cut = [len(ids) for ids in self._g_jobs]
        self._new = []
        self._g_top = [None] * len(self._g_jobs)  # the groups' heads, found as a pass first reads them
        self._heads = None

    def _group(self, job: Job) -> int:
        """The group of a job submitted now (possible()): its tenant's and its size's."""
        key = (self._tenant_ix[job.tenant], self.p.weight_gpu * (job.gpus / max(1, self.part_gpus.get(job.partition, 0))))
        if not self._in_order:
            key += (job.id,)
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = len(self._g_jobs)
            self._g_jobs.append([])
            self._g_head.append(0)
            self._g_cut.append(0)
            self._g_tenant.append(key[0])
            self._g_base.append(0.0)  # no job of it was pending at the last recalculation
            self._g_top.append(())  # (nor is any of it read before the next)
        return g

    def _top(self, g: int) -> tuple:
        """(-priority, id, group, position) of the first pending job of group g submitted by the last
        recalculation; () if none."""
        ids = self._g_jobs[g]
        h = self._g_head[g]
        while h < len(ids) and ids[h].start is not None:  # (started: no longer pending)
            h += 1
        if h > 4096:  # the started prefix, dropped now and then rather than stepped over
            del ids[:h]
            self._g_cut[g] -= h
            h = 0
        self._g_head[g] = h
        if h < self._g_cut[g]:
            job = ids[h]
            return (-int(self._g_base[g] + min(1.0, (self._calc_at - job.submit) / self.p.age_max)
                         * self.p.weight_age), job.id, g, h)
        return ()

    def _merged(self, skip: set[int] | None = None):
        """The recalculated order and the jobs submitted since, merged by (-priority, id), skipping
        jobs no longer pending and those of the tenants in `skip` (read as it is at each step). Each
        group is read in id order (its priority order) and the groups' heads merged by a heap."""
        pending = self.r.pending
        new = self._new
        # the jobs submitted since the recalculation that have started lead that list (they had the
        # highest priorities): dropped, as a Slurm job never returns to pending (no preemption here),
        # rather than stepped over by every pass until the next recalculation
        gone = 0
        while gone < len(new) and new[gone][1] not in pending:
            gone += 1
        if gone:
            del new[:gone]
        p = self.p
        now, age_max, w_age, g_cut = self._calc_at, p.age_max, p.weight_age, self._g_cut
        g_jobs, g_base, g_tenant, g_top = self._g_jobs, self._g_base, self._g_tenant, self._g_top
        if self._heads is None:  # a head started, or priorities were recalculated, since the last pass
            heads = []
            for g in range(len(g_jobs)):
                top = g_top[g]
                if top is None or (top and top[1] not in pending):  # its head started since: the next one
                    top = g_top[g] = self._top(g)
                if top:
                    heads.append(top)
            heapq.heapify(heads)
            self._heads = heads
            self._head_ids = {top[1] for top in heads}
        # copied (a heap still) before this pass first takes a head off: a main scheduler pass mostly
        # reads one job (its partition's first, which does not fit) and copied every head for it
        heap, copied = self._heads, False
        pop, replace = heapq.heappop, heapq.heapreplace
        k, n_new = 0, len(new)  # (nothing is submitted while a pass reads)
        while True:
            if skip:
                while heap and g_tenant[heap[0][2]] in skip:
                    if not copied:
                        heap, copied = heap.copy(), True
                    pop(heap)  # the rest of that group is the skipped tenant's too
            while k < n_new and (new[k][1] not in pending or (skip and new[k][2] in skip)):
                k += 1
            if heap:
                key, i, g, h = heap[0]
                if k < n_new:
                    first = new[k]
                    if key > first[0] or (key == first[0] and i > first[1]):  # (ids are distinct)
                        yield pending[first[1]]
                        k += 1
                        continue
                # the head, and then its group's next job in its place: found after the reader has had
                # the head, which it may have started (only that one: the next is found the same)
                ids = g_jobs[g]
                yield ids[h]  # (job i: a group's list moves only as _top drops its started prefix, before a merge)
                if not copied:
                    heap, copied = heap.copy(), True
                h += 1
                while h < len(ids) and ids[h].start is not None:
                    h += 1
                if h < g_cut[g]:
                    job = ids[h]
                    replace(heap, (-int(g_base[g] + min(1.0, (now - job.submit) / age_max) * w_age), job.id, g, h))
                else:
                    pop(heap)
            elif k < n_new:
                yield pending[new[k][1]]
                k += 1
            else:
                return

    def _priority(self, j: Job, now: float) -> int:
        p = self.p
        return int(p.weight_fairshare * self._fs.get(j.tenant, 0.0) + p.weight_gpu * j.gpus / max(1, self.part_gpus[j.partition])
                   + p.weight_age * min(1.0, (now - j.submit) / p.age_max))  # slurmctld keeps integer priorities

    # -- placement
    def _one_leaf(self, job: Job, now: float) -> bool:
        return (self.p.switches and job.coupled and job.nodes > 1 and job.nodes <= self.leaf_size
                and now - job.submit < self.p.max_switch_wait)

    def _fit(self, job: Job, avail: np.ndarray, now: float, current: bool = True) -> np.ndarray | None:
        return self._fit_most(job, avail, now, current)[0]

    def _fit_most(self, job: Job, avail: np.ndarray, now: float, current: bool = True,
                  one_leaf: bool | None = None) -> tuple[np.ndarray | None, int]:
        """_fit's nodes, and where it does not fit, the most nodes (of per_node GPUs free) it could have
        had: in all, or with --switches=1 on one leaf (cluster.pick_or_most)."""
        if current and self.r._pool_free[self.r.pool_index(job)] < job.gpus:
            # fewer GPUs free in its partition than it asks for (avail is at most free): fewer than
            # `nodes` nodes have per_node of them
            return None, job.nodes - 1
        if current:
            # the nodes of its partition (its pool) with per_node GPUs free now, counted as they change:
            # too few, and the job does not fit (avail is at most free); the most it could have had is
            # those (the count of avail's where it is free: the only `most` a caller keeps)
            have = self.r.free_at_least(self.r.pool_index(job), job.per_node)
            if have < job.nodes:
                return None, have
        ok = avail >= job.per_node
        if job.partition not in self._whole:
            ok &= self.part_mask[job.partition]
        if one_leaf is None:
            one_leaf = self._one_leaf(job, now)
        return pick_or_most(ok, self.r.nodes.leaf, job.nodes, one_leaf, len(self.r.nodes.leaves))

    def _fits_not(self, key: tuple, partition: str, need: int) -> bool:
        """Whether a shape (_no_fit's key) that did not fit the GPUs free still does not: GPUs come free
        only as jobs end, and each node of an ended job adds one at most to the nodes with per_node GPUs
        free, in all and on its leaf (GPUs are only taken otherwise); so until `need - most` nodes
        have been freed in its partition since, the most it could have is still fewer than `need`."""
        seen = self._no_fit.get(key)
        return seen is not None and seen[0] + self._freed_nodes[partition] - seen[1] < need

    def _fit_now(self, job: Job, now: float) -> np.ndarray | None:
        """_fit on the GPUs free now, remembering a shape that does not fit and the most nodes it could
        have had, until enough nodes have come free since for it to fit (_fits_not): most passes are
        for an arrival or a job's end, and a long queue's first job of a partition is tried again on
        each (a 16-node job after each single-node job's end, say)."""
        one_leaf = self._one_leaf(job, now)
        key = (job.partition, job.nodes, job.per_node, one_leaf)
        if self._fits_not(key, job.partition, job.nodes):
            return None
        got, most = self._fit_most(job, self.r.nodes.free, now, one_leaf=one_leaf)
        if got is None:
            self._no_fit[key] = (most, self._freed_nodes[job.partition])
        return got

    def possible(self, job: Job) -> bool:
        """Whether the job fits its partition when it is empty (else it never starts: the report
        counts it, as sbatch would refuse it)."""
        ok = self._nodes_for(job.partition, job.per_node) >= job.nodes
        if ok:
            key = (job.partition, job.nodes, job.per_node, job.limit)
            self.shapes[key] = self.shapes.get(key, 0) + 1
            self.pending_of[job.tenant] = self.pending_of.get(job.tenant, 0) + 1
            if self.p.multifactor:
                self._g_jobs[self._group(job)].append(job)
                self._last = self._ix[job.id]
        return ok

    def _nodes_for(self, partition: str, per_node: int) -> int:
        """Nodes of `partition` with at least `per_node` GPUs (0: no such partition), counted once
        per (partition, GPUs per node) rather than on every arrival."""
        key = (partition, per_node)
        n = self._capable.get(key)
        if n is None:
            mask = self.part_mask.get(partition)
            n = self._capable[key] = 0 if mask is None else int(((self.r.nodes.cap >= per_node) & mask).sum())
        return n

    def _start(self, job: Job, nodes: np.ndarray) -> None:
        key = (job.partition, job.nodes, job.per_node, job.limit)
        self.shapes[key] -= 1
        if not self.shapes[key]:
            del self.shapes[key]
        self.pending_of[job.tenant] -= 1
        if not self.pending_of[job.tenant]:
            del self.pending_of[job.tenant]
        if job.id in self._head_ids:
            self._heads = None
            self._head_ids = set()
        self._running_ix[self._ix[job.id]] = None
        self.r.start(job, nodes)
        if not math.isinf(job.limit):
            t = self._end_of[job.id] = self._round(job.start + job.limit)
            entry = (job.partition, job.per_node, nodes.tolist())
            bucket = self._end_at.get(t)
            if bucket is None:
                self._end_at[t] = {job.id: entry}
                times = self._end_times
                i = bisect.bisect_left(times, t)
                if i < len(times) and times[i] == t:
                    self._end_dead -= 1  # (listed still, its jobs ended: live again)
                else:
                    times.insert(i, t)
            else:
                bucket[job.id] = entry

    def ended(self, job: Job) -> None:
        del self._running_ix[self._ix[job.id]]
        self._freed_nodes[job.partition] += job.nodes
        t = self._end_of.pop(job.id, None)
        if t is not None:
            bucket = self._end_at[t]
            if len(bucket) == 1:
                # its time stays listed (_earliest steps over it) until more than half are such: each removal
                # from the middle of the sorted list moved thousands of entries
                del self._end_at[t]
                self._end_dead += 1
                if self._end_dead > self.END_DEAD_MIN and 2 * self._end_dead > len(self._end_times):
                    end_at = self._end_at
                    self._end_times = [t for t in self._end_times if t in end_at]
                    self._end_dead = 0
            else:
                del bucket[job.id]

    # -- the main scheduler
    def schedule(self, now: float) -> None:
        blocked: set[str] = set()
        for tested, job in enumerate(self.order(now, self.p.default_queue_depth)):
            if tested >= self.p.default_queue_depth or len(blocked) == len(self.part_mask):
                break
            if job.partition in blocked:
                continue
            nodes = self._fit_now(job, now)
            if nodes is None:
                blocked.add(job.partition)
                if len(blocked) == len(self.part_mask):
                    break  # (before the next job is read: every partition is blocked)
            else:
                self._start(job, nodes)

    def periodic(self):
        env = self.r.env
        next_bf, next_sched = self.p.bf_interval, self.p.sched_interval
        while True:
            at = min(next_bf, next_sched)
            yield at - env.now  # the replay's clock (engine.Clock.process) wakes it then
            self.r.account()
            if env.now >= next_sched:
                next_sched += self.p.sched_interval
                self.schedule(env.now)
            if env.now >= next_bf:
                next_bf += self.p.bf_interval
                if self.r.changed and self.r.pending:
                    self.r.changed = False
                    self.backfill(env.now)
            self.r._check_end()

    # -- backfill
    def _round(self, t: float) -> float:
        """Backfill's map keeps times at bf_resolution, rounded down (backfill.c: `end_time =
        (end_time / backfill_resolution) * backfill_resolution`, and the same for a reservation's
        start and end)."""
        res, epoch = self.p.bf_resolution, self.p.epoch
        return math.floor((t + epoch) / res) * res - epoch

    def backfill(self, now: float) -> None:
        # the GPUs free now: the replay's own array, which this pass's starts take from (_start), read
        # and never written here (no job ends during a pass), rather than a copy kept alike
        free = self.r.nodes.free
        resv: list[tuple[float, float, np.ndarray, int]] = []
        # the reservations (their index in resv) by start and by end, as _earliest walks them: kept as they
        # are made, rather than sorted again for every job it is asked about
        resv_order: tuple[list[tuple[float, int]], list[tuple[float, int]]] = ([], [])
        # _avail(free, resv, now, t1) per window end t1 (now + a job's limit; a queue has few limits),
        # kept up to date as this pass takes nodes and reserves, rather than copied and rebuilt from
        # every reservation for each job tested: `free` itself where no reservation overlaps
        windows: dict[float, np.ndarray] = {}
        per_user: dict[str, int] = {}
        blocked_shapes: set[tuple] = set()
        blocked_one_leaf: set[tuple] = set()
        tested = 0
        capped: set[str] = set()
        skip: set[int] = set()  # the capped tenants' indexes: order() leaves their jobs out
        tenants = max(1, len(self.share))
        # pending jobs per tenant not yet read in this pass, and how many of them are of tenants not
        # capped: at 0, the rest of the queue is only capped tenants' jobs, which the pass skips (a
        # long queue of one capped tenant was read to its end at every pass)
        unread = dict(self.pending_of)
        uncapped = sum(unread.values())
        queue = iter(self.order(now, skip=skip))
        max_test, max_user = self.p.bf_max_job_test, self.p.bf_max_job_user
        shapes, pending_of, tenant_ix = self.shapes, self.pending_of, self._tenant_ix
        while True:
            # read no further once only capped tenants' jobs are left (skipped below, or by order(),
            # one by one to the end of the queue)
            job = next(queue, None) if uncapped > 0 else None
            if job is None:
                break
            tenant = job.tenant
            unread[tenant] -= 1
            if tenant not in capped:
                uncapped -= 1
            if tested >= max_test or len(capped) >= tenants:
                break
            if capped and len(capped) >= len(pending_of) and capped.issuperset(pending_of):
                break  # every tenant with a job still pending is capped: the rest of the queue is skipped
            if len(blocked_shapes) >= len(shapes):
                break  # every shape in the queue is blocked: nothing more can start in this pass
            if tenant in capped:
                continue
            mine = per_user.get(tenant, 0) + 1
            if mine >= max_user:
                capped.add(tenant)
                skip.add(tenant_ix[tenant])
                uncapped -= unread[tenant]
            tested += 1
            per_user[tenant] = mine
            key = (job.partition, job.nodes, job.per_node, job.limit)
            if key in blocked_shapes:  # (most of the jobs a pass reads: tested once per pass)
                continue
            one_leaf = self._one_leaf(job, now)
            if one_leaf and key in blocked_one_leaf:
                continue
            got = None
            fit_key = (job.partition, job.nodes, job.per_node, one_leaf)
            # else _fit says no before reading avail: too few GPUs free in the partition, or a shape that
            # does not fit the GPUs free now (_fits_not; `free` is those, this pass's starts taken), which
            # avail, at most free, cannot hold either
            if (self.r._pool_free[self.r.pool_index(job)] >= job.gpus
                    and not self._fits_not(fit_key, job.partition, job.nodes)):
                t1 = now + job.limit
                avail = windows.get(t1)
                if avail is None:
                    avail = windows[t1] = self._avail(free, resv, now, t1)
                got, most = self._fit_most(job, avail, now, one_leaf=one_leaf)
                if got is None and avail is free:
                    self._no_fit[fit_key] = (most, self._freed_nodes[job.partition])
            if got is not None:
                per = job.per_node
                if len(got) > 8:
                    for avail in windows.values():
                        if avail is not free:
                            avail[got] -= per
                else:  # item by item, as Replay._take: numpy's indexed subtraction costs microseconds a call
                    got_list = got.tolist()
                    for avail in windows.values():
                        if avail is not free:
                            view = memoryview(avail)
                            for n in got_list:
                                view[n] -= per
                self._start(job, got)  # takes them from `free`; its end (in ends) frees these nodes for the
                # later jobs' plans of this pass
                continue
            # no later job of this shape can start in this pass (resources only shrink in it): its
            # reservation is the first's (Slurm would reserve for each; the rest of the pass is the same)
            (blocked_one_leaf if one_leaf else blocked_shapes).add(key)
            when = self._earliest(job, free, resv, now, resv_order)
            if when is not None:
                t, picked = when
                start, end = self._round(t), self._round(t + job.limit)
                bisect.insort(resv_order[0], (start, len(resv)))
                bisect.insort(resv_order[1], (end, len(resv)))
                resv.append((start, end, picked, job.per_node))
                for t1, avail in windows.items():
                    if start <= t1 and end > now:  # as _avail tests
                        if avail is free:
                            avail = windows[t1] = free.copy()
                        avail[picked] -= job.per_node

    @staticmethod
    def _avail(free: np.ndarray, resv: list, t0: float, t1: float) -> np.ndarray:
        out = free
        for start, end, idx, per in resv:
            if start <= t1 and end > t0:  # backfill.c: a map record beginning at the job's end counts
                if out is free:
                    out = free.copy()
                out[idx] -= per
        return out

    def _earliest(self, job: Job, free: np.ndarray, resv: list, now: float,
                  order: tuple[list[tuple[float, int]], list[tuple[float, int]]]):
        """The first end time (within bf_window) from which the job fits until its time limit, and
        the nodes it would take: walks the running jobs' ends, freeing their nodes. Only the ends of
        its own partition's jobs change what it can have (a job's nodes are all in its partition).

        What `_fit` would say at each end is known before it is called: the nodes with `per_node` GPUs
        free once the reservations overlapping [end, end + limit] are taken (`_avail`), counted in all
        and per leaf, are what `pick` reads. Those counts are kept node by node, as ends free a few
        nodes each and as reservations begin or cease to overlap; `_fit` runs once, at the end where
        the job fits, for its nodes."""
        mask = self.part_mask[job.partition]
        part, per, need, limit = job.partition, job.per_node, job.nodes, job.limit
        horizon = now + self.p.bf_window
        nodes = self.r.nodes
        one_leaf = self._one_leaf(job, now) and len(nodes.leaves) > 1  # pick's test: n on one leaf, not n in all
        leaf_of = self._leaf_list
        in_part = self._mask_list(part)
        # nodes with per_node GPUs free (`free` is the GPUs free now, backfill's): counted in all as the
        # replay keeps them (free_counts), and on each leaf where it must be one
        if one_leaf:
            ok = (free >= per) & mask
            count = int(np.count_nonzero(ok))
            per_leaf = np.bincount(nodes.leaf[ok], minlength=len(nodes.leaves)).tolist()
            most = max(per_leaf)  # the most such nodes on one leaf
        else:
            count = self.r.free_at_least(self.r.pool_index(job), per)
            per_leaf, most = [], need
        now_free = memoryview(free)  # GPUs free per node, as Python ints
        freed: dict[int, int] = {}  # node -> GPUs free there once the ends so far have come
        taken: dict[int, int] = {}  # node -> GPUs the overlapping reservations take there
        freed_get, taken_get = freed.get, taken.get  # bound once: the walk calls them per node
        n_resv = len(resv)
        state = [0] * n_resv  # per reservation: 0 not yet overlapping, 1 overlapping, 2 no longer
        by_start, by_end = order
        s_at = e_at = 0
        end_at = self._end_at
        for t in self._end_times:  # the running jobs' ends, in order (this pass's starts too)
            if t > horizon:
                return None
            bucket = end_at.get(t)
            if bucket is None:
                continue  # (its jobs have ended)
            touched = False
            for j_part, add, j_nodes in bucket.values():
                if j_part == part:
                    touched = True
                    for n in j_nodes:  # a Slurm job's nodes are distinct
                        before = freed_get(n)
                        if before is None:
                            before = now_free[n]
                        freed[n] = before + add
                        if taken:
                            before -= taken_get(n, 0)
                        if before < per <= before + add:
                            count += 1
                            if one_leaf:
                                k = leaf_of[n]
                                per_leaf[k] += 1
                                if per_leaf[k] > most:
                                    most = per_leaf[k]
            if not touched:
                continue
            # the reservations overlapping [t, t + limit], as _avail tests (start <= t + limit, end > t):
            # t only grows, so each begins to overlap once (its start reached) and ceases once (its end
            # passed); taken by two pointers over the starts and the ends rather than tested all at each t
            changes = []
            t_end = t + limit
            while s_at < n_resv and by_start[s_at][0] <= t_end:
                k = by_start[s_at][1]
                s_at += 1
                if state[k] == 0:
                    if resv[k][1] > t:
                        state[k] = 1
                        changes.append((k, 1))
                    else:
                        state[k] = 2
            while e_at < n_resv and by_end[e_at][0] <= t:
                k = by_end[e_at][1]
                e_at += 1
                if state[k] == 1:
                    changes.append((k, -1))
                state[k] = 2
            if changes:  # a reservation began or ceased to overlap: its nodes, one by one
                for k, sign in changes:
                    _, _, idx, gpus = resv[k]
                    for n in idx.tolist():
                        if not in_part[n]:
                            continue
                        has = freed.get(n)
                        if has is None:
                            has = now_free[n]
                        before = has - taken.get(n, 0)
                        taken[n] = taken.get(n, 0) + sign * gpus
                        after = before - sign * gpus
                        step = (after >= per) - (before >= per)
                        if step:
                            count += step
                            if one_leaf:
                                per_leaf[leaf_of[n]] += step
                if one_leaf:
                    most = max(per_leaf)
            if count < need or (one_leaf and most < need):
                continue
            # what _avail(free with `freed`, resv, t, t + limit) holds on the partition's nodes (the only
            # ones _fit reads): `taken` is the overlapping reservations' GPUs there, summed
            got = self._fit(job, self._freed(free, freed, taken), now, current=False)
            if got is not None:
                return t, got
        return None

    def _mask_list(self, partition: str) -> list[bool]:
        """part_mask[partition] as Python bools (_earliest reads them one by one), made once."""
        got = self._mask_lists.get(partition)
        if got is None:
            got = self._mask_lists[partition] = self.part_mask[partition].tolist()
        return got

    @staticmethod
    def _freed(free: np.ndarray, freed: dict[int, int], taken: dict[int, int]) -> np.ndarray:
        """`free` with the GPUs free per node of `freed` (node -> GPUs) in place of its own, less
        those of `taken` (node -> GPUs; its nodes are distinct: one subtraction for every reservation)."""
        avail = free.copy()
        if freed:
            avail[np.fromiter(freed, dtype=np.int64, count=len(freed))] = np.fromiter(
                freed.values(), dtype=avail.dtype, count=len(freed))
        if taken:
            avail[np.fromiter(taken, dtype=np.int64, count=len(taken))] -= np.fromiter(
                taken.values(), dtype=avail.dtype, count=len(taken))
        return avail
