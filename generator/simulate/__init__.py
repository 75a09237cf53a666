"""`orchgen simulate`: replay a demand against a plan and report what its users will wait and how
busy its GPUs will be (README "orchgen simulate").

    from generator.simulate import simulate, jobs
    report = simulate(plan, jobs.from_demand(plan, hours=168, seed=0))

Deterministic: the same plan, jobs and seed give the same report. `plan` never imports this
package (it needs numpy, which planning does not).
"""
from __future__ import annotations

import dataclasses
import operator
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


def simulate(plan: Plan, all_jobs: list[Job], *, slurm_policy: dict[str, Any] | None = None,
             per_pod: bool = True, progress: Callable[[int], None] | None = None,
             own: bool = False) -> dict[str, Any]:
    """The report (a JSON-able dict) of replaying `all_jobs` on `plan`. `slurm_policy`: overrides of
    slurm.Policy (a harness's shorter bf_interval); `per_pod`: also replay coupled Kubernetes work
    under the default per-pod scheduler, next to the plan's gang scheduler; `own`: the caller hands
    the jobs over (not started, not used again): they are replayed themselves, not copies (a million
    jobs are some hundreds of MiB), with the same report."""
    report: dict[str, Any] = {"plan": plan.name, "gang_scheduler": plan.gang_scheduler, "jobs": len(all_jobs),
                              "workloads": [], "pools": [], "planes": [], "kubernetes_gangs": None}
    by_plane: dict[str, list[Job]] = {}
    for j in all_jobs:
        by_plane.setdefault(j.plane, []).append(j)
    outcomes: list[tuple[Job, str]] = []  # (job, how it ended: started / never)
    for plane, mine in by_plane.items():
        if plane not in plan.planes:
            continue
        gpu_jobs = [j for j in mine if j.per_node > 0]
        nodes = cluster.of_plane(plan, plane)
        replay = Replay(nodes, gpu_jobs if own else _fresh(gpu_jobs), progress)
        if plane == "slurm":
            sched: Any = SlurmScheduler(replay, plan, policy_of(plan, **(slurm_policy or {})))
        elif plan.gang_scheduler:
            sched = GangScheduler(replay, plan)
        else:
            sched = PerPodScheduler(replay, plan)
        replay.run()
        _collect(report, plan, plane, replay, sched, outcomes)
        coupled = [j for j in gpu_jobs if j.coupled and j.nodes > 1]
        if plane != "slurm" and coupled:
            report["kubernetes_gangs"] = _gangs(plan, plane, gpu_jobs, replay, sched, per_pod)
        replay.close()  # (its cycles broken: freed by reference counting as this loop moves on)
    report["workloads"] = _per_workload(plan, outcomes)
    report["preemptions"] = _preemptions(plan, outcomes)
    return report


def _preemptions(plan: Plan, outcomes: list[tuple[Job, str]]) -> list[dict]:
    """Per Kubernetes workload (services too): how often its jobs were preempted by the gang
    scheduler's policy (kube.py), and the GPU-hours their preempted runs had used (lost: a preempted
    job restarts). Empty where no gang scheduler runs (nothing preempts)."""
    if not plan.gang_scheduler:
        return []
    by_workload: dict[str, list[Job]] = {}  # one pass over the outcomes, not one per workload
    for j, _ in outcomes:
        if j.plane != "slurm":
            by_workload.setdefault(j.workload, []).append(j)
    out = []
    for d in plan.workloads:
        mine = by_workload.get(d.name)
        if mine:
            out.append({"workload": d.name, "preemptions": sum(j.preemptions for j in mine),
                        "gpu_hours_lost": round(sum(j.lost_gs for j in mine) / 3600, 2)})
    return out


def _collect(report: dict, plan: Plan, plane: str, replay: Replay, sched: Any, outcomes: list) -> None:
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
        report["pools"].append({
            "plane": plane, "pool": pool, "gpus": int(cap[i]),
            "gpu_utilization": round(float(busy[i] / (cap[i] * span)), 4) if cap[i] else 0.0,
            "idle_gpu_hours_while_jobs_waited": round(float(replay.idle_waiting_gs[i]) / 3600, 2), **basis,
        })
    total = float(cap.sum())
    hours = round(max(replay.env.now, 1e-9) / 3600, 2)
    report["planes"].append({"plane": plane, "gpus": int(total), "hours": hours,
                             "gpu_utilization": round(float(busy.sum() / (total * span)), 4)
                             if total else 0.0, **basis})
    never = {j.id for j in replay.never}
    for j in replay.jobs:
        outcomes.append((j, "never" if j.start is None or j.id in never else "started"))


def _per_workload(plan: Plan, outcomes: list[tuple[Job, str]]) -> list[dict]:
    by_workload: dict[str, list[tuple[Job, str]]] = {}  # one pass over the outcomes, not one per workload
    for j, how in outcomes:
        if not j.service:
            by_workload.setdefault(j.workload, []).append((j, how))
    out = []
    for d in plan.workloads:
        mine = by_workload.get(d.name)
        if not mine:
            continue
        waits = np.array([j.start - j.submit for j, how in mine if how == "started"], dtype=float)
        out.append({
            "workload": d.name, "plane": d.plane, "pool": d.pool, "jobs": len(mine),
            "never_started": sum(1 for _, how in mine if how == "never"),
            "wait_p50_s": round(float(np.percentile(waits, 50)), 1) if waits.size else None,
            "wait_p95_s": round(float(np.percentile(waits, 95)), 1) if waits.size else None,
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
