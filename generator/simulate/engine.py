"""The discrete-event replay: arrivals, job ends and the schedulers' passes as events.

The event loop is a heap of (time, priority, sequence, callback, argument): each event costs one
push and one pop, whatever the number of jobs (issue 41: a month of a large site is millions of
events); the two most frequent, the scheduler's pass and the arrivals' next step, are held beside the
heap with the same key and cost neither. It orders events exactly as SimPy 4 did
(simpy.core.Environment.schedule: time, then URGENT before NORMAL, then the order they were scheduled
in), so the replay's figures are the ones SimPy gave.

One `Replay` per plane. Its scheduler (slurm.py or kube.py) decides which pending jobs start; the
replay moves the clock, starts and ends jobs, and integrates the figures: GPU-seconds busy per pool,
GPU-seconds idle while jobs that asked for them waited, GPU-seconds held by partly placed gangs.
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator

import numpy as np

from .cluster import Nodes
from .jobs import Job


URGENT, NORMAL = 0, 1  # simpy.events' priorities: a process starts before the other events of its instant


class Clock:
    """The event heap and the clock. `now` is the time of the event being handled."""

    __slots__ = ("now", "_queue", "_seq")

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple] = []
        self._seq = itertools.count()

    def at(self, delay: float, call: Callable, arg=None, priority: int = NORMAL) -> None:
        """`call(arg)` at now + delay (the sum as SimPy forms it: the same float)."""
        heapq.heappush(self._queue, (self.now + delay, priority, next(self._seq), call, arg))

    def process(self, steps: Iterator[float]) -> None:
        """A process: a generator yielding the delay to its next step (SimPy's `yield env.timeout(d)`)."""
        self.at(0, self._step, steps, URGENT)

    def _step(self, steps: Iterator[float]) -> None:
        delay = next(steps, None)
        if delay is not None:
            self.at(delay, self._step, steps)


class Replay:
    def __init__(self, nodes: Nodes, jobs: list[Job], progress: Callable[[int], None] | None = None):
        self.env = Clock()
        self.nodes = nodes
        self.jobs = jobs
        self.pending: dict[int, Job] = {}  # by job id: submission order
        self.freed = True  # since the last scheduler pass: a job ended (GPUs came free)
        self.frees = 0  # times GPUs came free (a job ended or was preempted): between two, GPUs only get taken
        self.arrived: list[Job] = []  # since the last scheduler pass
        self.never: list[Job] = []  # larger than every node set its scheduler could give it
        self.running: dict[int, Job] = {}
        self.done: list[Job] = []
        self.progress = progress
        self.changed = True  # since the last backfill pass: a job started, ended or arrived
        self._kick_queued = False  # a scheduler pass is due (kick), at _kick_at
        self._kick_at: tuple[float, int, int] = (0.0, NORMAL, -1)
        self._arrivals: Iterator[float] | None = None  # the arrival process (_arrive), once run() has begun
        self._arrival_at: tuple[float, int, int] | None = None  # its next step: (time, priority, sequence)
        self._begun = False
        self._arrivals_left = len(jobs)
        self.finished = False  # every job has ended or can never start (set when that event is handled)
        self._finish_due = False  # ... and that event is scheduled
        self._stop = False  # the event loop stops after the current event
        self._stop_on_finish = True  # run(until=None): the loop stops with `finished` itself
        self._running_finite = 0  # running jobs that end (not long-lived services)
        npools = len(nodes.pools)
        # per pool, as Python floats (a pool or two: numpy's per-call cost would dominate; the same
        # float64 arithmetic); busy_gs & co. below give them as arrays
        self._busy = [0.0] * npools  # GPU-seconds busy
        self._idle = [0.0] * npools  # GPU-seconds idle while a job asking for GPUs there waited
        self._partial = [0.0] * npools  # GPU-seconds held by partly placed jobs (per-pod scheduling)
        self._waiting = [0.0] * npools  # GPUs the pending jobs of each pool ask for
        self._partial_now = [0.0] * npools  # GPUs held now by partly placed jobs
        self._pool_free = [float(nodes.free[nodes.pool == i].sum()) for i in range(npools)]
        self._pool_cap = list(self._pool_free)
        self._last = 0.0
        self._pool_ix = {p: i for i, p in enumerate(nodes.pools)}
        self.scheduler = None  # set by the scheduler: .schedule(now) and optional .periodic()
        # a job's nodes are distinct (Slurm, gang placement): its GPUs come back node by node, or with one indexed add;
        # the per-pod scheduler sets False (two pods of a job may share a node: np.add.at, unbuffered)
        self.distinct_nodes = True
        self._free = memoryview(nodes.free)  # its items, as Python ints (_take and _give_back)
        # where a scheduler asks for them (count_free()): per pool, per count g of GPUs, how many of its nodes
        # have exactly g free, kept node by node as GPUs are taken and given back (slurm.py: a job asking
        # for more nodes with g GPUs free than there are does not fit, found without reading every node)
        self.free_counts: list[list[int]] | None = None
        self._pool_of: list[int] = []  # each node's pool index (free_counts)

    busy_gs = property(lambda self: np.array(self._busy))
    idle_waiting_gs = property(lambda self: np.array(self._idle))
    partial_gs = property(lambda self: np.array(self._partial))
    waiting_gpus = property(lambda self: np.array(self._waiting))
    partial_gpus = property(lambda self: np.array(self._partial_now))
    held_gpus = property(lambda self: np.array(self._pool_cap) - np.array(self._pool_free))  # per pool, now

    # -- the clock's integrals
    def account(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0:
            free, waiting, partial = self._pool_free, self._waiting, self._partial_now
            for i, cap in enumerate(self._pool_cap):
                self._busy[i] += (cap - free[i]) * dt
                self._idle[i] += min(max(free[i], 0.0), waiting[i]) * dt
                self._partial[i] += partial[i] * dt
            self._last = now

    def pool_index(self, job: Job) -> int:
        return self._pool_ix[job.pool]

    # -- events
    def run(self, until: float | None = None) -> None:
        """Replay until every job has ended or can never start; `until`: stop at that time instead
        (a later run() goes on from there)."""
        env = self.env
        if not self._begun:
            self._begun = True
            # the arrivals: a process (Clock.process) whose next step is held beside the heap, as a kick is
            # (a million arrivals: a push and a pop each of a heap of every running job's end)
            self._arrivals = self._arrive()
            self._arrival_at = (env.now, URGENT, next(env._seq))
            if self.scheduler is not None and hasattr(self.scheduler, "periodic"):
                env.process(self.scheduler.periodic())
        if self.finished:
            return
        # SimPy's run(until=finished | timeout(until)) stopped on a condition event, scheduled (NORMAL) when
        # either came: the events already due at that instant ran first; the same here with a stop event
        self._stop_on_finish = until is None
        if until is not None:
            env.at(until, self._stop_soon)
        if not self.jobs:
            return
        queue, pop = env._queue, heapq.heappop
        self._stop = False
        # The scheduler's pass (kick: about one per arrival and per end) and the arrivals' next step are
        # events held beside the heap, not in it (a push and a pop each of a heap of every running job's
        # end), each handled where the heap would have had it: before the first event whose (time,
        # priority, sequence) is greater. No more events: nothing can change any more (a deadlock, or
        # jobs that never fit).
        arrivals = self._arrivals
        while True:
            top = queue[0] if queue else None
            arrival = self._arrival_at
            if self._kick_queued:
                kick = self._kick_at
                if (top is None or top > kick) and (arrival is None or arrival > kick):
                    env.now = kick[0]
                    self._kicked()
                    if self._stop:
                        break
                    continue
            if arrival is not None and (top is None or top > arrival):
                env.now = arrival[0]
                delay = next(arrivals, None)  # (Clock._step's)
                self._arrival_at = None if delay is None else (env.now + delay, NORMAL, next(env._seq))
            elif top is not None:
                env.now, _, _, call, arg = pop(queue)
                call(arg)
            else:
                break
            if self._stop:
                break
        self.account()

    def close(self) -> None:
        """Drop what ties the replay and its scheduler in a cycle (each holds the other; the clock's
        events left hold their bound methods and processes): reference counting then frees the replay's
        jobs and tables once the caller lets go of it, rather than the cycle collector walking them all
        (a replay of a million jobs leaves a million objects or more to walk: 3.3 s of 73 at issue 41's
        size). Its figures stay readable; it cannot run on."""
        self.scheduler = None
        self.env._queue.clear()
        self._kick_queued = False
        self._arrivals = self._arrival_at = None
        self.finished = True

    def _stop_soon(self, _arg=None) -> None:
        self.env.at(0, self._halt)

    def _halt(self, _arg=None) -> None:
        self._stop = True

    def _finish(self, _arg=None) -> None:
        self.finished = True
        if self._stop_on_finish:
            self._stop = True
        else:
            self._stop_soon()

    def _arrive(self):
        for job in self.jobs:
            if job.submit > self.env.now:
                yield job.submit - self.env.now
            self.account()
            self._arrivals_left -= 1
            if not self.scheduler.possible(job):
                self.never.append(job)
                continue
            self.pending[job.id] = job
            self.arrived.append(job)
            self._waiting[self.pool_index(job)] += job.gpus
            self.changed = True
            self.kick()
        self._check_end()

    def kick(self) -> None:
        """Run the scheduler once, after every event of this instant (as slurmctld batches them)."""
        if not self._kick_queued:
            self._kick_queued = True
            env = self.env
            self._kick_at = (env.now, NORMAL, next(env._seq))  # (its place among the events: Clock.at's key)

    def _kicked(self) -> None:
        self._kick_queued = False
        self.account()
        self.scheduler.schedule(self.env.now)
        self.freed = False
        self.arrived = []
        self._check_end()

    def start(self, job: Job, nodes: np.ndarray) -> None:
        self.account()
        now = self.env.now
        job.start = now
        job.nodes_held = nodes
        del self.pending[job.id]
        self._take(nodes, job.per_node)
        i = self.pool_index(job)
        self._pool_free[i] -= job.gpus
        self._waiting[i] -= job.gpus
        self.running[job.id] = job
        self.changed = True
        self._ends_at(job)

    def _ends_at(self, job: Job) -> None:
        job.run += 1
        if not math.isinf(job.runtime):
            self._running_finite += 1
            self.env.at(job.runtime, self._ends, (job, job.run))

    def _ends(self, arg: tuple[Job, int]) -> None:
        job, run = arg
        if job.run == run:  # a run cut short by preemption (`preempt`) does not end the job's later run
            self._end(job)

    def preempt(self, job: Job) -> None:
        """Evict a running job (its scheduler's preemption, kube.py): its GPUs come free now, the
        GPU-seconds it ran are lost (it restarts from the beginning: no checkpoint is modelled), and
        it is pending again, with its first submission time (its wait counts from there)."""
        self.account()
        now = self.env.now
        job.lost_gs += job.gpus * (now - job.start)
        job.preemptions += 1
        job.run += 1  # its end event, if any, is void
        if not math.isinf(job.runtime):
            self._running_finite -= 1
        self._give_back(job)
        self.frees += 1
        i = self.pool_index(job)
        self._pool_free[i] += job.gpus
        self._waiting[i] += job.gpus
        del self.running[job.id]
        job.start = None
        job.nodes_held = None
        self.pending[job.id] = job
        self.changed = True

    def hold(self, job: Job, node: int, gpus: int) -> None:
        """A pod of a job bound before the whole job is (per-pod scheduling): its GPUs are held."""
        self.account()
        self._take(np.array([node]), gpus)
        i = self.pool_index(job)
        self._pool_free[i] -= gpus
        self._waiting[i] -= gpus
        self._partial_now[i] += gpus

    def held_to_running(self, job: Job, nodes: np.ndarray) -> None:
        """The last pod of a partly placed job bound: it runs (its GPUs were taken pod by pod)."""
        self.account()
        job.start = self.env.now
        job.nodes_held = nodes
        del self.pending[job.id]
        i = self.pool_index(job)
        self._partial_now[i] -= job.gpus - job.per_node
        self._take(nodes[-1:], job.per_node)
        self._pool_free[i] -= job.per_node
        self._waiting[i] -= job.per_node
        self.running[job.id] = job
        self.changed = True
        self._ends_at(job)

    def _end(self, job: Job) -> None:
        self.account()
        job.end = self.env.now
        self._running_finite -= 1
        self._give_back(job)
        self.frees += 1
        self._pool_free[self.pool_index(job)] += job.gpus
        del self.running[job.id]
        self.freed = True
        self.done.append(job)
        if hasattr(self.scheduler, "ended"):
            self.scheduler.ended(job)
        self.changed = True
        if self.progress:
            self.progress(1)
        self.kick()

    def count_free(self) -> None:
        """Keep `free_counts` from now on."""
        nodes = self.nodes
        most = int(nodes.cap.max(initial=0))  # (a node's GPUs, not its free ones now: ends free up to all of them)
        self.free_counts = [np.bincount(nodes.free[nodes.pool == i], minlength=most + 1).tolist()
                            for i in range(len(nodes.pools))]
        self._pool_of = nodes.pool.tolist()

    def free_at_least(self, pool: int, gpus: int) -> int:
        """The nodes of a pool with `gpus` GPUs free or more (free_counts)."""
        return sum(self.free_counts[pool][gpus:])

    def _take(self, nodes: np.ndarray, per: int) -> None:
        """`per` GPUs taken on each of `nodes` (distinct): item by item where free_counts are kept (each
        node moves between its pool's counts) or the nodes are few (numpy's indexed subtraction costs
        microseconds per call, per start), else by numpy. Every write to nodes.free goes through here or
        _give_back, so the counts stay those of the GPUs free (test_simulate's bookkeeping test)."""
        counts = self.free_counts
        if counts is not None:
            free, pool_of = self._free, self._pool_of
            for n in nodes.tolist():
                old = free[n]
                new = free[n] = old - per
                c = counts[pool_of[n]]
                c[old] -= 1
                c[new] += 1
        elif len(nodes) > 8:
            self.nodes.free[nodes] -= per
        else:
            free = self._free
            for n in nodes.tolist():
                free[n] -= per

    def _give_back(self, job: Job) -> None:
        """The GPUs the job holds, free again on its nodes."""
        counts = self.free_counts
        if counts is not None:
            free, pool_of, per = self._free, self._pool_of, job.per_node
            for n in job.nodes_held.tolist():  # (one by one: the same sums as np.add.at's, nodes distinct or not)
                old = free[n]
                new = free[n] = old + per
                c = counts[pool_of[n]]
                c[old] -= 1
                c[new] += 1
        elif self.distinct_nodes:
            nodes, per = job.nodes_held, job.per_node
            if len(nodes) > 8:
                self.nodes.free[nodes] += per
            else:
                free = self._free
                for n in nodes.tolist():
                    free[n] += per
        else:
            np.add.at(self.nodes.free, job.nodes_held, job.per_node)  # per-pod: two pods may share a node

    def _check_end(self) -> None:
        if self._kick_queued:
            return  # a scheduler pass is due at this instant: it may start something
        if self._arrivals_left == 0 and not self._running_finite and not self._finish_due:
            self._finish_due = True
            self.env.at(0, self._finish)

    def ends_pending(self) -> bool:
        """Whether a running job will still end (not only long-lived services run)."""
        return self._running_finite > 0
