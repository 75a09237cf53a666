"""`orchgen simulate`: replay a demand against a plan and report what its users will wait and how
busy its GPUs will be (README "orchgen simulate").

    from generator.simulate import simulate, jobs
    report = simulate(plan, jobs.from_demand(plan, hours=168, seed=0))

Deterministic: the same plan, jobs and seed give the same report. `plan` never imports this
package (it needs numpy, which planning does not).
"""
from __future__ import annotations

import contextlib
import dataclasses
import operator
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..decide.plan import Plan
from . import cluster, jobs as jobs_mod
from .engine import Replay
from .jobs import FRESH_FROM, Job
from .kube import GangScheduler, PerPodScheduler
from .slurm import SlurmScheduler, policy_of

__all__ = ["simulate", "Job"]


_GIVEN = operator.attrgetter(*(f.name for f in dataclasses.fields(Job)[:FRESH_FROM]))  # what a job is given


def _fresh(jobs: list[Job]) -> list[Job]:
    """Copies not yet started: the fields a job is given, the ones a replay sets at their defaults."""
    return [Job(*_GIVEN(j)) for j in jobs]


# a replay of fewer jobs than this in all on the planes other than the largest is not worth another
# process (starting one, importing numpy and passing the plan take about half a second)
PARALLEL_FROM = 20_000


def simulate(plan: Plan, all_jobs: list[Job], *, slurm_policy: dict[str, Any] | None = None,
             per_pod: bool = True, progress: Callable[[int], None] | None = None,
             own: bool = False, parallel: bool | None = False) -> dict[str, Any]:
    """The report (a JSON-able dict) of replaying `all_jobs` on `plan`. `slurm_policy`: overrides of
    slurm.Policy (a harness's shorter bf_interval); `per_pod`: also replay coupled Kubernetes work
    under the default per-pod scheduler, next to the plan's gang scheduler; `own`: the caller hands
    the jobs over (not started, not used again): they are replayed themselves, not copies (a million
    jobs are some hundreds of MiB), with the same report.

    Planes share no nodes and no jobs, so their replays are independent: `parallel` replays every
    plane but the one with the most jobs in other processes, at the same time as that one (True:
    always; None, what `orchgen simulate` passes: where the machine has another CPU for this process
    and those planes hold PARALLEL_FROM jobs or more; issue 41: a month of a large site's Kubernetes
    plane took 6.5 s of 66 beside its Slurm plane). The report is the same either way (test_simulate).
    False by default: a spawned process imports the caller's main module, so a script calling this
    at its top level, unguarded by `if __name__ == "__main__":`, would be run again in it."""
    report: dict[str, Any] = {"plan": plan.name, "gang_scheduler": plan.gang_scheduler, "jobs": len(all_jobs),
                              "workloads": [], "pools": [], "planes": [], "kubernetes_gangs": None}
    # per plane of the plan, in the order of its first job (GPUs or not), its jobs with GPUs: one pass
    planes: dict[str, list[Job]] = {}
    for j in all_jobs:
        mine = planes.get(j.plane)
        if mine is None:
            if j.plane not in plan.planes:
                continue
            mine = planes[j.plane] = []
        if j.per_node > 0:
            mine.append(j)
    away = _away(planes, parallel)
    replayed: list[tuple[list[Job], set[int]]] = []  # per plane: its GPU jobs, and the ids of those that never start
    # spawned, not forked: a fork copies this process's threads' locks (a progress bar's, numpy's thread
    # pools') as they are; a pool, ended by terminate() on the way out: a Ctrl-C or SIGTERM does not wait for
    # the other planes' replays. The jobs go as the fields they are given, and come back as what their
    # replay set.
    workers: Any = contextlib.nullcontext()
    if away:
        import multiprocessing

        workers = multiprocessing.get_context("spawn").Pool(len(away))
    with workers as pool:
        sent = {plane: pool.apply_async(_replay_away, (plan, plane, [_GIVEN(j) for j in planes[plane]],
                                                       slurm_policy, per_pod)) for plane in away}
        for plane, gpu_jobs in planes.items():
            mine = gpu_jobs if own else _fresh(gpu_jobs)
            if plane in sent:
                part, results = sent[plane].get()
                _set_results(mine, results)
                if progress:
                    progress(sum(1 for j in mine if j.end is not None))  # (its replay's job ends, at once)
            else:
                part = _replay_plane(plan, plane, mine, progress, slurm_policy, per_pod)
            report["pools"] += part["pools"]
            report["planes"] += part["planes"]
            if "kubernetes_gangs" in part:
                report["kubernetes_gangs"] = part["kubernetes_gangs"]
            replayed.append((mine, part["never"]))
    report["workloads"] = _per_workload(plan, replayed)
    report["preemptions"] = _preemptions(plan, replayed)
    return report


def _away(planes: dict[str, list[Job]], parallel: bool | None) -> list[str]:
    """The planes replayed in other processes: all but the one with the most jobs, where `parallel`
    says so (None: where they are worth it and there is a CPU for them)."""
    if parallel is False or len(planes) < 2:
        return []
    home = max(planes, key=lambda p: len(planes[p]))
    away = [p for p in planes if p != home]
    if parallel is None:
        try:
            cpus = len(os.sched_getaffinity(0))  # (the CPUs this process may run on)
        except AttributeError:  # (not on every platform)
            cpus = os.cpu_count() or 1
        if cpus < 2 or sum(len(planes[p]) for p in away) < PARALLEL_FROM:
            return []
    return away


def _replay_plane(plan: Plan, plane: str, jobs: list[Job], progress: Callable[[int], None] | None,
                  slurm_policy: dict[str, Any] | None, per_pod: bool) -> dict[str, Any]:
    """Replay one plane's GPU jobs (started in place): its pools' and its own lines of the report, its
    Kubernetes gangs' (where it has coupled work) and the ids of the jobs that can never start."""
    replay = Replay(cluster.of_plane(plan, plane), jobs, progress)
    if plane == "slurm":
        sched: Any = SlurmScheduler(replay, plan, policy_of(plan, **(slurm_policy or {})))
    elif plan.gang_scheduler:
        sched = GangScheduler(replay, plan)
    else:
        sched = PerPodScheduler(replay, plan)
    replay.run()
    part: dict[str, Any] = {"pools": [], "planes": [], "never": {j.id for j in replay.never}}
    _collect(part, plane, replay)
    if plane != "slurm" and any(j.coupled and j.nodes > 1 for j in jobs):
        part["kubernetes_gangs"] = _gangs(plan, plane, jobs, replay, sched, per_pod)
    replay.close()  # (its cycles broken: freed by reference counting as the caller moves on)
    return part


# what a replay sets on a job (its partition, on Slurm, and jobs.Job's fields from FRESH_FROM on), sent back
# from another process; its nodes go apart, as one array
_SET = ("partition",) + tuple(f.name for f in dataclasses.fields(Job)[FRESH_FROM:] if f.name != "nodes_held")


def _replay_away(plan: Plan, plane: str, given: list[tuple], slurm_policy: dict[str, Any] | None,
                 per_pod: bool) -> tuple[dict[str, Any], tuple]:
    """_replay_plane in another process (simulate's `parallel`), for jobs given as their given
    fields: its part of the report, and what the replay set on each job (_set_results)."""
    jobs = [Job(*fields) for fields in given]
    part = _replay_plane(plan, plane, jobs, None, slurm_policy, per_pod)
    fields = [tuple(getattr(j, name) for name in _SET) for j in jobs]
    held = [j.nodes_held for j in jobs]
    sizes = np.array([-1 if h is None else len(h) for h in held], dtype=np.int64)
    nodes = np.concatenate([h for h in held if h is not None] or [np.zeros(0, dtype=np.int64)])
    return part, (fields, sizes, nodes)


def _set_results(jobs: list[Job], results: tuple) -> None:
    """What _replay_away's replay set on each job, set on `jobs` (the same jobs, in the same order)."""
    fields, sizes, nodes = results
    at = 0
    for j, values, size in zip(jobs, fields, sizes.tolist()):
        for name, value in zip(_SET, values):
            setattr(j, name, value)
        if size >= 0:
            j.nodes_held = nodes[at:at + size]
            at += size


def _preemptions(plan: Plan, replayed: list[tuple[list[Job], set[int]]]) -> list[dict]:
    """Per Kubernetes workload (services too): how often its jobs were preempted by the gang
    scheduler's policy (kube.py), and the GPU-hours their preempted runs had used (lost: a preempted
    job restarts). Empty where no gang scheduler runs (nothing preempts)."""
    if not plan.gang_scheduler:
        return []
    by_workload: dict[str, list[Job]] = {}  # one pass over the Kubernetes planes' jobs, not one per workload
    for jobs, _ in replayed:
        if jobs and jobs[0].plane == "slurm":  # (a plane's jobs: all on it)
            continue
        for j in jobs:
            by_workload.setdefault(j.workload, []).append(j)
    out = []
    for d in plan.workloads:
        mine = by_workload.get(d.name)
        if mine:
            out.append({"workload": d.name, "preemptions": sum(j.preemptions for j in mine),
                        "gpu_hours_lost": round(sum(j.lost_gs for j in mine) / 3600, 2)})
    return out


def _collect(part: dict, plane: str, replay: Replay) -> None:
    span = max(replay.env.now, 1e-9)
    nodes = replay.nodes
    cap = np.array([int(nodes.cap[nodes.pool == i].sum()) for i in range(len(nodes.pools))], dtype=float)
    # a plane whose replay has no span (only long-lived services: they start at 0 and never end) is as busy
    # as the GPUs its services hold, over the whole horizon; busy GPU-seconds over a span of 0 would say 0%
    services_only = replay.env.now <= 0 and bool(replay.jobs) and all(j.service for j in replay.jobs)
    if services_only:
        busy, span = replay.held_gpus, 1.0
    else:
        busy = replay.busy_gs
    basis = {"utilization_of": "services"} if services_only else {}  # the report says what the figure rests on
    for i, pool in enumerate(nodes.pools):
        part["pools"].append({
            "plane": plane, "pool": pool, "gpus": int(cap[i]),
            "gpu_utilization": round(float(busy[i] / (cap[i] * span)), 4) if cap[i] else 0.0,
            "idle_gpu_hours_while_jobs_waited": round(float(replay.idle_waiting_gs[i]) / 3600, 2), **basis,
        })
    total = float(cap.sum())
    hours = round(max(replay.env.now, 1e-9) / 3600, 2)
    part["planes"].append({"plane": plane, "gpus": int(total), "hours": hours,
                           "gpu_utilization": round(float(busy.sum() / (total * span)), 4)
                           if total else 0.0, **basis})


def _per_workload(plan: Plan, replayed: list[tuple[list[Job], set[int]]]) -> list[dict]:
    """Per workload with jobs (services left out): its jobs, those that never started, and the p50 and
    p95 of the started ones' waits. One pass over the jobs, each wait kept as it is read (a million
    jobs: no (job, outcome) pair made for each)."""
    waits: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}  # workload -> [jobs, never started]
    for jobs, never in replayed:
        for j in jobs:
            if j.service:
                continue
            w = j.workload
            c = counts.get(w)
            if c is None:
                c = counts[w] = [0, 0]
                waits[w] = []
            c[0] += 1
            if j.start is None or j.id in never:
                c[1] += 1
            else:
                waits[w].append(j.start - j.submit)
    out = []
    for d in plan.workloads:
        c = counts.get(d.name)
        if c is None:
            continue
        mine = np.array(waits[d.name], dtype=float)
        out.append({
            "workload": d.name, "plane": d.plane, "pool": d.pool, "jobs": c[0],
            "never_started": c[1],
            "wait_p50_s": round(float(np.percentile(mine, 50)), 1) if mine.size else None,
            "wait_p95_s": round(float(np.percentile(mine, 95)), 1) if mine.size else None,
        })
    return out


def _gangs(plan: Plan, plane: str, gpu_jobs: list[Job], replay: Replay, sched: Any, per_pod: bool) -> dict:
    """Coupled multi-node work on Kubernetes: the plan's gang scheduler next to the per-pod one."""
    def row(name: str, r: Replay, s: Any) -> dict:
        stuck = getattr(s, "deadlocked", [])
        coupled = [j for j in r.jobs if j.coupled and j.nodes > 1]
        waits = np.array([j.start - j.submit for j in coupled if j.start is not None], dtype=float)
        return {"scheduler": name,
                "partly_placed_gpu_hours": round(float(r.partial_gs.sum()) / 3600, 2),
                "deadlocked_jobs": len(stuck),
                "deadlocked_gpus": int(sum(len(s.bound.get(j.id, ())) * j.per_node for j in stuck)) if stuck else 0,
                "coupled_jobs_never_started": sum(1 for j in coupled if j.start is None),
                "coupled_wait_p95_s": round(float(np.percentile(waits, 95)), 1) if waits.size else None}
    rows = [row(plan.gang_scheduler or "default kube-scheduler (per pod)", replay, sched)]
    if per_pod and plan.gang_scheduler:
        other = Replay(cluster.of_plane(plan, plane), _fresh(gpu_jobs))
        pp = PerPodScheduler(other, plan)
        other.run()
        rows.append(row("default kube-scheduler (per pod)", other, pp))
        other.close()
    return {"plane": plane, "schedulers": rows}
