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
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..decide.plan import Plan
from .cluster import pick
from .engine import Replay
from .jobs import Job

AGE_MAX = 7 * 86_400  # PriorityMaxAge=7-0
HALF_LIFE = 7 * 86_400  # PriorityDecayHalfLife=7-0
PRIORITY_CALC_PERIOD = 300  # PriorityCalcPeriod: Slurm's default, 5 minutes
SORT_CHUNK = 1024  # pending jobs sorted by priority at a time (order()): the main scheduler reads 100
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
        # pending job ids by priority, as of the last recalculation: sorted a chunk at a time, as far as
        # a pass reads (the main scheduler reads default_queue_depth, backfill until it stops), not the
        # whole queue every PriorityCalcPeriod (a month of a large site queues hundreds of thousands)
        self._ids: list[int] = []
        self._keys: list[int] = []  # their -priority
        self._at: dict[int, list[int]] = {}  # tenant (index into _tenants) -> its positions in _ids, ascending
        self._rest = np.zeros(0, dtype=np.int64)  # the others' (-priority, id) as -priority * 2**32 + id
        self._chunk = SORT_CHUNK
        self._head = 0
        self._new: list[tuple[int, int, int]] = []  # (-priority, id, tenant) of the jobs submitted since
        # running jobs with a time limit by (their end rounded as backfill keeps it, id): kept as
        # they start and end, so a backfill pass does not sort every running job again
        # (end, id, partition, GPUs per node, nodes as Python ints): what _earliest reads of each, kept
        # with the end rather than read from the Job and converted from numpy at every walk
        self._ends: list[tuple[float, int, str, int, list[int]]] = []
        self.pending_of: dict[str, int] = {}  # pending jobs per tenant
        self._no_fit: dict[tuple, int] = {}  # shape -> replay.frees when it last did not fit (_fit_now)
        self._capable: dict[tuple[str, int], int] = {}  # (partition, GPUs per node) -> nodes that have them
        self._leaf_list = nodes.leaf.tolist()  # each node's leaf, as Python ints (_earliest reads them one by one)
        self._mask_lists: dict[str, list[bool]] = {}
        replay.scheduler = self
        # per job (by its index in the replay): what a priority recalculation reads, as arrays
        jobs = replay.jobs
        self._ix = {j.id: i for i, j in enumerate(jobs)}
        tenants = sorted({j.tenant for j in jobs} | set(shares))
        self._tenant_ix = {t: i for i, t in enumerate(tenants)}
        self._tenants = tenants
        for job in jobs:
            job.partition = job.pool
        self._a_id = np.array([j.id for j in jobs], dtype=np.int64)
        self._a_submit = np.array([j.submit for j in jobs], dtype=float)
        self._a_tenant = np.array([self._tenant_ix[j.tenant] for j in jobs], dtype=np.int64)
        # each job's tenant by its id (_extend reads the tenants of the ids it sorts)
        self._tenant_of_id = np.zeros(int(self._a_id.max()) + 1 if len(jobs) else 0, dtype=np.int64)
        self._tenant_of_id[self._a_id] = self._a_tenant
        self._a_size = np.array([j.gpus / max(1, self.part_gpus.get(j.partition, 0)) for j in jobs], dtype=float)
        self._a_size_term = policy.weight_gpu * self._a_size  # the job-size factor, weighted (_recalc)
        self._a_pending = np.zeros(len(jobs), dtype=bool)
        self._a_gpus = np.array([j.gpus for j in jobs], dtype=np.int64)
        self._a_running = np.zeros(len(jobs), dtype=bool)
        self._a_seq = np.zeros(len(jobs), dtype=np.int64)  # start order (the replay's running jobs' order)
        self._a_given = np.zeros(len(jobs), dtype=bool)  # has a priority (the last recalculation's or its own)
        self._seq = 0

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
        ix = np.flatnonzero(self._a_running)
        ix = ix[np.argsort(self._a_seq[ix], kind="stable")]
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
        for j in self.r.arrived:
            k = self._ix[j.id]
            if j.id in pending and not self._a_given[k]:
                self._a_given[k] = True
                bisect.insort(self._new, (-self._priority(j, now), j.id, int(self._a_tenant[k])))
        return itertools.islice(self._merged(skip), limit)

    def _recalc(self, now: float) -> None:
        """Every pending job's priority, in one vectorised step (numpy over the pending jobs)."""
        self._calc_at = now
        self._decay_usage(now)
        total = sum(self.usage.values()) or 1.0
        self._fs = {t: 2 ** (-(u / total) / max(self.share.get(t, 1e-9), 1e-9)) for t, u in self.usage.items()}
        ix = np.flatnonzero(self._a_pending)  # the pending jobs (submission order)
        p = self.p
        # the fair-share term per tenant and the size term per job are the products the per-job sum took
        # (the same float multiplications, made once per tenant and once per job, not once per recalc)
        fs_term = p.weight_fairshare * np.array([self._fs.get(t, 0.0) for t in self._tenants])
        tix = self._a_tenant[ix]
        age = np.minimum(1.0, (now - self._a_submit[ix]) / p.age_max)
        age *= p.weight_age
        prio = fs_term[tix]
        prio += self._a_size_term[ix]
        prio += age
        prio = prio.astype(np.int64)  # integers
        # one int64 per job orders as (-priority, id) does (ids < 2**32; priorities >= 0)
        prio *= -(1 << 32)
        prio += self._a_id[ix]
        self._rest = prio
        self._ids, self._keys, self._at = [], [], {}
        self._chunk = SORT_CHUNK
        self._head = 0
        self._new = []
        np.copyto(self._a_given, self._a_pending)  # the pending jobs have a priority now

    def _extend(self) -> bool:
        """The next chunk of the recalculated order (twice the last one's size), onto _ids and _keys:
        the smallest keys of the rest (a partition of the keys themselves), sorted; False when none
        are left. The keys are distinct, so the chunk and its order are the only ones there are."""
        rest = self._rest
        if not rest.size:
            return False
        k = self._chunk
        self._chunk *= 2
        if k < rest.size:
            part = np.partition(rest, k - 1)
            top, self._rest = np.sort(part[:k]), part[k:]
        else:
            top, self._rest = np.sort(rest), rest[:0]
        ids = top & 0xFFFFFFFF
        tenant = self._tenant_of_id[ids]
        base = len(self._ids)
        self._ids += ids.tolist()
        self._keys += (top >> 32).tolist()
        # each tenant's positions, ascending: the chunk's positions grouped by tenant (a stable sort keeps
        # them in order within a tenant), one slice per tenant rather than a step per job
        at = self._at
        by = np.argsort(tenant, kind="stable")
        sorted_tenant = tenant[by]
        positions = (by + base).tolist()
        cuts = [0, *(np.flatnonzero(sorted_tenant[1:] != sorted_tenant[:-1]) + 1).tolist(), len(positions)]
        for a, b in zip(cuts, cuts[1:]):
            t = int(sorted_tenant[a])
            mine = at.get(t)
            if mine is None:
                at[t] = positions[a:b]
            else:
                mine += positions[a:b]
        return True

    def _next_unskipped(self, i: int, skip: set[int]) -> int:
        """The first position from `i` on in _ids of a pending job of a tenant not in `skip` (len(_ids)
        if none): a bisection in each other tenant's positions, not a walk past the skipped ones."""
        ids, pending = self._ids, self.r.pending
        best = len(ids)
        for t, mine in self._at.items():
            if t in skip:
                continue
            x = bisect.bisect_left(mine, i)
            while x < len(mine) and mine[x] < best and ids[mine[x]] not in pending:
                x += 1
            if x < len(mine) and mine[x] < best:
                best = mine[x]
        return best

    def _merged(self, skip: set[int] | None = None):
        """The recalculated list and the jobs submitted since, merged by (-priority, id), skipping
        jobs no longer pending and those of the tenants in `skip` (read as it is at each step)."""
        pending = self.r.pending
        ids, keys, new = self._ids, self._keys, self._new
        while self._head < len(ids) and ids[self._head] not in pending:
            self._head += 1
        # the jobs submitted since the recalculation that have started lead that list (they had the
        # highest priorities): dropped, as a Slurm job never returns to pending (no preemption here),
        # rather than stepped over by every pass until the next recalculation
        gone = 0
        while gone < len(new) and new[gone][1] not in pending:
            gone += 1
        if gone:
            del new[:gone]
        i, k = self._head, 0
        while True:
            while True:
                if skip:
                    i = self._next_unskipped(i, skip)
                else:
                    while i < len(ids) and ids[i] not in pending:
                        i += 1
                if i < len(ids) or not self._extend():
                    break
            while k < len(new) and (new[k][1] not in pending or (skip and new[k][2] in skip)):
                k += 1
            if i < len(ids) and (k >= len(new) or (keys[i], ids[i]) < new[k]):  # (a, b) < (a, b, c)
                yield pending[ids[i]]
                i += 1
            elif k < len(new):
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
        if current and self.r._pool_free[self.r.pool_index(job)] < job.gpus:
            return None  # fewer GPUs free in its partition than it asks for (avail is at most free)
        ok = avail >= job.per_node
        if job.partition not in self._whole:
            ok &= self.part_mask[job.partition]
        return pick(ok, self.r.nodes.leaf, job.nodes, self._one_leaf(job, now), len(self.r.nodes.leaves))

    def _fit_now(self, job: Job, now: float) -> np.ndarray | None:
        """_fit on the GPUs free now, remembering a shape that does not fit until GPUs next come free
        (until then they are only taken, and what did not fit still does not): most passes are for an
        arrival, and a long queue's first job of a partition is tried again on each."""
        key = (job.partition, job.nodes, job.per_node, self._one_leaf(job, now))
        if self._no_fit.get(key) == self.r.frees:
            return None
        got = self._fit(job, self.r.nodes.free, now)
        if got is None:
            self._no_fit[key] = self.r.frees
        return got

    def possible(self, job: Job) -> bool:
        """Whether the job fits its partition when it is empty (else it never starts: the report
        counts it, as sbatch would refuse it)."""
        ok = self._nodes_for(job.partition, job.per_node) >= job.nodes
        if ok:
            key = (job.partition, job.nodes, job.per_node, job.limit)
            self.shapes[key] = self.shapes.get(key, 0) + 1
            self.pending_of[job.tenant] = self.pending_of.get(job.tenant, 0) + 1
            self._a_pending[self._ix[job.id]] = True
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
        k = self._ix[job.id]
        self._a_pending[k] = False
        self._a_running[k] = True
        self._seq += 1
        self._a_seq[k] = self._seq
        self.r.start(job, nodes)
        if not math.isinf(job.limit):
            bisect.insort(self._ends, (self._round(job.start + job.limit), job.id, job.partition, job.per_node,
                                       nodes.tolist()))

    def ended(self, job: Job) -> None:
        self._a_running[self._ix[job.id]] = False
        if not math.isinf(job.limit):
            key = (self._round(job.start + job.limit), job.id)
            i = bisect.bisect_left(self._ends, key)
            del self._ends[i]

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
        nodes = self.r.nodes
        free = nodes.free.copy()
        ends = self._ends  # kept sorted as jobs start (this pass's too) and end
        resv: list[tuple[float, float, np.ndarray, int]] = []
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
        while True:
            # read no further once only capped tenants' jobs are left (skipped below, or by order(),
            # one by one to the end of the queue)
            job = next(queue, None) if uncapped > 0 else None
            if job is None:
                break
            unread[job.tenant] -= 1
            if job.tenant not in capped:
                uncapped -= 1
            if tested >= self.p.bf_max_job_test or len(capped) >= tenants:
                break
            if capped and len(capped) >= len(self.pending_of) and capped.issuperset(self.pending_of):
                break  # every tenant with a job still pending is capped: the rest of the queue is skipped
            if len(blocked_shapes) >= len(self.shapes):
                break  # every shape in the queue is blocked: nothing more can start in this pass
            if job.tenant in capped:
                continue
            if per_user.get(job.tenant, 0) + 1 >= self.p.bf_max_job_user:
                capped.add(job.tenant)
                skip.add(self._tenant_ix[job.tenant])
                uncapped -= unread[job.tenant]
            tested += 1
            per_user[job.tenant] = per_user.get(job.tenant, 0) + 1
            key = (job.partition, job.nodes, job.per_node, job.limit)
            one_leaf = self._one_leaf(job, now)
            if key in blocked_shapes or (one_leaf and key in blocked_one_leaf):
                continue
            got = None
            if self.r._pool_free[self.r.pool_index(job)] >= job.gpus:  # else _fit says no before reading avail
                t1 = now + job.limit
                avail = windows.get(t1)
                if avail is None:
                    avail = windows[t1] = self._avail(free, resv, now, t1)
                got = self._fit(job, avail, now)
            if got is not None:
                free[got] -= job.per_node
                for avail in windows.values():
                    if avail is not free:
                        avail[got] -= job.per_node
                self._start(job, got)  # its end (in ends) frees these nodes for the later jobs' plans of this pass
                continue
            # no later job of this shape can start in this pass (resources only shrink in it): its
            # reservation is the first's (Slurm would reserve for each; the rest of the pass is the same)
            (blocked_one_leaf if one_leaf else blocked_shapes).add(key)
            when = self._earliest(job, free, ends, resv, now)
            if when is not None:
                t, picked = when
                start, end = self._round(t), self._round(t + job.limit)
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

    def _earliest(self, job: Job, free: np.ndarray, ends: list, resv: list, now: float):
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
        ok = (free >= per) & mask
        count = int(np.count_nonzero(ok))  # nodes with per_node GPUs free and not reserved
        per_leaf = np.bincount(nodes.leaf[ok], minlength=len(nodes.leaves)).tolist() if one_leaf else []
        most = max(per_leaf) if one_leaf else need  # the most such nodes on one leaf
        now_free = memoryview(free)  # GPUs free per node, as Python ints
        freed: dict[int, int] = {}  # node -> GPUs free there once the ends so far have come
        taken: dict[int, int] = {}  # node -> GPUs the overlapping reservations take there
        freed_get, taken_get = freed.get, taken.get  # bound once: the walk calls them per node
        n_resv = len(resv)
        state = [0] * n_resv  # per reservation: 0 not yet overlapping, 1 overlapping, 2 no longer
        by_start = sorted((r[0], k) for k, r in enumerate(resv))
        by_end = sorted((r[1], k) for k, r in enumerate(resv))
        s_at = e_at = 0
        i, n_ends = 0, len(ends)
        while i < n_ends:
            t = ends[i][0]
            if t > horizon:
                return None
            touched = False
            while i < n_ends and ends[i][0] == t:
                _, _, j_part, add, j_nodes = ends[i]
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
                i += 1
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
            got = self._fit(job, self._avail(self._freed(free, freed), resv, t, t + limit), now, current=False)
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
    def _freed(free: np.ndarray, freed: dict[int, int]) -> np.ndarray:
        """`free` with the GPUs free per node of `freed` (node -> GPUs) in place of its own."""
        avail = free.copy()
        if freed:
            avail[np.fromiter(freed, dtype=np.int64, count=len(freed))] = np.fromiter(
                freed.values(), dtype=avail.dtype, count=len(freed))
        return avail
