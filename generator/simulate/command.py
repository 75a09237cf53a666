"""`orchgen simulate`'s command body: load, plan, replay, print (the CLI only registers it)."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Any

import click

from ..errors import OrchgenError
from ..terminal import echo as fit_echo
from . import jobs as jobs_mod, simulate

GANG_CHOICES = ("kueue", "volcano", "kai")


def run(workload: str, trace: str | None, hours: float, seed: int, fmt: str, compare: bool) -> None:
    from .. import spec
    from ..decide import make_plan

    fleet, locate = spec.load_located(workload)
    try:
        plan = make_plan(fleet, workload)
    except OrchgenError as err:
        raise locate(err) from None
    try:
        with _no_cycle_collection():
            _run(fleet, plan, workload, trace, hours, seed, fmt, compare)
    except OrchgenError as err:  # a refusal naming a field (jobs_per_day too large) gets its file and line
        raise locate(err) from None


@contextmanager
def _no_cycle_collection():
    """Python's cycle collector off while the jobs are read and replayed: a replay makes no cycles
    worth collecting (its jobs, events and arrays are freed by reference counting), and with a million
    jobs alive each full collection walks them all (issue 41: about a third of reading a large trace)."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _run(fleet, plan, workload: str, trace: str | None, hours: float, seed: int, fmt: str, compare: bool) -> None:
    defaults = [] if trace else default_demand(fleet, plan)
    if not compare:
        jobs = _jobs(plan, trace, hours, seed)
        with _progress(jobs) as tick:
            # the jobs are this replay's alone; the planes side by side where that is worth it (the console
            # script's and `python -m generator`'s main modules are guarded: a spawned process imports them)
            report = simulate(plan, jobs, progress=tick, own=True, parallel=None)
        report.update(seed=seed, hours=hours if trace is None else None, trace=trace, default_demand=defaults)
        if fmt == "json":
            click.echo(json.dumps(report, indent=2))
        else:
            _table(report)
            _basis(report["planes"], defaults)
        return
    rows = compare_variants(fleet, plan, workload, trace, hours, seed)
    if fmt == "json":
        click.echo(json.dumps({"seed": seed, "hours": hours if trace is None else None, "trace": trace,
                               "default_demand": defaults, "variants": rows}, indent=2))
    else:
        _compare_table(rows)
        _basis([p for r in rows for p in r.get("planes", ())], defaults)


def default_demand(fleet, plan) -> list[str]:
    """The replayed batch workloads whose demand is orchgen's default (workload.yaml gives none of
    jobs_per_day, jobs_at_once, runtime): one job at a time, each running half its time limit."""
    given = {w.name for w in fleet.workloads
             if w.jobs_per_day is not None or w.jobs_at_once is not None or w.runtime is not None}
    return [d.name for d in plan.workloads if d.plane in ("slurm", "kubernetes", "k3s") and d.name not in given
            and d.workload_class != "service" and d.serving is None]


def _basis(planes: list[dict], defaults: list[str]) -> None:
    """What the figures rest on, a line each: utilization of a plane of services only; a default demand."""
    lines = []
    if any(p.get("utilization_of") == "services" for p in planes):
        lines.append("(services): a plane that runs only long-lived services has no replayed span; its GPU "
                     "utilization is the GPUs its services hold, over the whole horizon")
    if defaults:
        lines.append(f"demand: orchgen's default for {', '.join(defaults)} (one job at a time, each running half "
                     "its time limit): set workloads[].jobs_per_day and runtime (or jobs_at_once) in "
                     "workload.yaml to replay yours")
    for line in lines:
        fit_echo(line)


def compare_variants(fleet, plan, workload: str, trace: str | None, hours: float, seed: int) -> list[dict]:
    """One report per variant (the plan, then its alternatives: `_variants`), each replaying the same
    demand drawn with `seed` (or the same trace); a refused variant is {"variant", "refused"}."""
    from ..decide import make_plan

    rows = []
    for name, variant, why in _variants(fleet, plan):
        kept = {"plan_keeps": why} if why else {}
        try:
            alt = make_plan(variant, workload)
        except OrchgenError as err:
            rows.append({"variant": name, "refused": str(err.message), **kept})
            continue
        jobs = _jobs(alt, trace, hours, seed)
        with _progress(jobs, name) as tick:
            rows.append({"variant": name, **simulate(alt, jobs, progress=tick, own=True, parallel=None), **kept})
    return rows


def brief(rows: list[dict]) -> list[str]:
    """`recommend --simulate`'s lines: per variant, each workload's wait p50 / p95 and each plane's
    GPU utilization (the full table is `orchgen simulate --compare`)."""
    out = []
    for r in rows:
        if "refused" in r:
            out.append(f"{r['variant']}: refused: {r['refused']}")
            continue
        waits = "; ".join(f"{w['workload']} {_fmt_wait(w['wait_p50_s'])} / {_fmt_wait(w['wait_p95_s'])}"
                          + (f" ({w['never_started']} never start)" if w["never_started"] else "")
                          for w in r["workloads"])
        util = ", ".join(f"{p['plane']} {p['gpu_utilization']:.0%}"
                         + (" (services)" if p.get("utilization_of") == "services" else "") for p in r["planes"])
        out.append(f"{r['variant']}: wait p50 / p95: {waits or '-'}; GPU utilization: {util or '-'}")
    return out


REJECTED = "rejected: "


def rejected(fleet, plan) -> list[tuple[str, Any, str]]:
    """The fleet-level alternatives the plan turned down (issue 36), to replay beside it: on a Slurm
    site whose batch the rule slurm-site-batch kept on Slurm, that batch on a Kubernetes plane of its
    own (the island, opted in past options.kubernetes_min_nodes); in a hybrid, one plane instead of two:
    every workload on Slurm where no long-lived service or notebook needs Kubernetes, else every workload
    on Kubernetes, and also, where the plan put batch on Kubernetes beside the services, that batch on
    Slurm (Kubernetes keeps only the services). Each: (name starting "rejected: ", the fleet, why the
    plan keeps its own choice: the rules of the workloads the alternative moves)."""
    out = []
    by_name = {d.name: d for d in plan.workloads}

    def rules(names) -> str:  # each moved workload's deciding rule, as the plan gives it
        return "; ".join(f"{n}: {by_name[n].reasons[0]}" for n in names if by_name[n].reasons)

    kept = [d.name for d in plan.workloads if d.rule == "slurm-site-batch"]
    if kept:
        ws = [w.model_copy(update={"plane": "kubernetes"}) if w.name in kept else w for w in fleet.workloads]
        alt = fleet.model_copy(update={"workloads": ws, "options": fleet.options.model_copy(
            update={"kubernetes_min_nodes": 1})})
        out.append((f"{REJECTED}{', '.join(kept)} on kubernetes", alt,
                    "a Kubernetes plane for batch that Slurm runs already costs a second control plane, the GPU "
                    "Operator, Kueue and Prometheus, and their operators' time (rule slurm-site-batch)"))
    if not (len(plan.planes) > 1 and plan.slurm_plane is not None and not plan.slurm_plane.operator):
        return out
    services = {w.name for w in fleet.workloads if w.long_lived_services or w.interactive}
    if not services:  # every workload on Slurm: no second plane at all
        ws = [w.model_copy(update={"plane": "slurm"}) for w in fleet.workloads]
        on_kube = [d.name for d in plan.workloads if d.plane and d.plane != "slurm"]
        out.append((f"{REJECTED}all on slurm", fleet.model_copy(update={"workloads": ws}), rules(on_kube)))
        return out
    # the services need Kubernetes: the batch the plan runs there could go to Slurm instead, and the
    # one-plane alternative is Kubernetes alone (its own gangs for the coupled jobs)
    kube = plan.kube_plane.name if plan.kube_plane else "kubernetes"
    moved = [d.name for d in plan.workloads if d.name not in services and (d.plane == kube or d.hybrid)]
    if moved:
        ws = [w.model_copy(update={"plane": "slurm"}) if w.name in moved else w for w in fleet.workloads]
        out.append((f"{REJECTED}{', '.join(moved)} on slurm (kubernetes for the services only)",
                    fleet.model_copy(update={"workloads": ws}), rules(moved)))
    ws = [w.model_copy(update={"plane": "kubernetes"}) for w in fleet.workloads]
    out.append((f"{REJECTED}all on kubernetes", fleet.model_copy(update={"workloads": ws}),
                rules([d.name for d in plan.workloads if d.plane == "slurm"])))
    return out


def worst_wait(r: dict) -> tuple[int, int]:
    """The metric the trade-off lines compare, lower is better: (jobs never started, worst wait p95 in whole
    minutes: seconds apart are no difference a reader of the line could see) of a replayed variant."""
    return (sum(w["never_started"] for w in r["workloads"]),
            round(max((w["wait_p95_s"] for w in r["workloads"] if w["wait_p95_s"] is not None), default=0.0) / 60))


def tradeoff(rows: list[dict]) -> list[str]:
    """`recommend --simulate`'s trade-off lines: the plan's worst wait p95 and each plane's GPU
    utilization beside each rejected alternative's, from the same replayed demand, and the verdict: which
    waits less, and why the plan keeps its choice (the rules of the workloads the alternative moves), said
    above all where the alternative waits less."""
    plan = next((r for r in rows if r["variant"] == "plan" and "refused" not in r), None)
    if plan is None:
        return []

    def figures(r: dict) -> str:
        worst = max((w["wait_p95_s"] for w in r["workloads"] if w["wait_p95_s"] is not None), default=None)
        never = sum(w["never_started"] for w in r["workloads"])
        util = ", ".join(f"{p['plane']} {p['gpu_utilization']:.0%} of {p.get('gpus', '?')} GPUs" for p in r["planes"])
        return (f"worst wait p95 {_fmt_wait(worst)}" + (f", {never} jobs never start" if never else "")
                + f"; GPU utilization {util or '-'}; planes: {', '.join(p['plane'] for p in r['planes']) or '-'}")

    out = []
    for r in rows:
        if not r["variant"].startswith(REJECTED):
            continue
        alt = r["variant"][len(REJECTED):]
        if "refused" in r:
            out.append(f"trade-off: the rejected alternative ({alt}) cannot be planned: {r['refused']}")
            continue
        ours, theirs = worst_wait(plan), worst_wait(r)
        verdict = ("the plan waits less, and keeps its choice" if ours < theirs else
                   "the alternative waits no less, so the plan keeps its choice" if ours == theirs else
                   "the alternative waits less, and the plan still keeps its choice")
        why = f": {r['plan_keeps']}" if r.get("plan_keeps") else ""
        out.append(f"trade-off: the plan: {figures(plan)}; the rejected alternative ({alt}): {figures(r)}; "
                   f"verdict: {verdict}{why}")
    return out


def _jobs(plan, trace: str | None, hours: float, seed: int):
    return jobs_mod.from_trace(plan, trace) if trace else jobs_mod.from_demand(plan, hours, seed)


def _variants(fleet, plan) -> list[tuple[str, Any, str | None]]:
    """The plan as given, then the fleet-level alternatives it rejected (`rejected`, with why the plan
    keeps its choice), options.split's other modes, the other gang schedulers (and none: what the stock
    kube-scheduler would do), and each workload pinned to the other plane."""
    def opts(**kw):
        return fleet.model_copy(update={"options": fleet.options.model_copy(update=kw)})
    out: list[tuple[str, Any, str | None]] = [("plan", fleet, None)] + rejected(fleet, plan)
    out += [(f"split={s}", opts(split=s), None) for s in ("auto", "leaf", "node") if s != fleet.options.split]
    out += [(f"gang={g}", opts(gang_scheduler=g), None) for g in GANG_CHOICES if g != fleet.options.gang_scheduler]
    on = {d.name: ("slurm" if d.plane == "slurm" else "kubernetes") for d in plan.workloads}
    for i, w in enumerate(fleet.workloads):
        for plane in ("slurm", "kubernetes"):
            if on.get(w.name) != plane:
                ws = list(fleet.workloads)
                ws[i] = w.model_copy(update={"plane": plane})
                # what if: a Kubernetes plane of any size (options.kubernetes_min_nodes would refuse a small one)
                out.append((f"{w.name} on {plane}", fleet.model_copy(update={"workloads": ws, "options": (
                    fleet.options.model_copy(update={"kubernetes_min_nodes": 1}))}), None))
    return out


@contextmanager
def _progress(jobs: list, label: str = "replaying"):
    """A rich progress bar of finished jobs (those of `jobs` that end: not services), on a terminal only
    (stderr), never in a pipe or a log (where the jobs are not even counted: a pass over a million)."""
    total = sum(1 for j in jobs if not j.service) if sys.stderr.isatty() else 0
    if total == 0:
        yield None
        return
    from rich.progress import Progress

    from ..terminal import console

    with Progress(console=console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _fmt_wait(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _fmt_util(p: dict) -> str:
    """A utilization figure; `(services)` where it is the GPUs long-lived services hold (no replayed span)."""
    return f"{p['gpu_utilization']:.1%}" + (" (services)" if p.get("utilization_of") == "services" else "")


def _table(report: dict) -> None:
    from rich.table import Table

    from ..terminal import console as make_console

    console = make_console()  # the terminal's width (80 when not a terminal): rich wraps the cells to fit
    t = Table(title=f"{report['plan']}: queue waits ({report['jobs']} jobs, seed {report['seed']})")
    for col in ("workload", "plane", "pool", "jobs", "wait p50", "wait p95", "never started"):
        t.add_column(col)
    for w in report["workloads"]:
        t.add_row(w["workload"], w["plane"], w["pool"], str(w["jobs"]), _fmt_wait(w["wait_p50_s"]),
                  _fmt_wait(w["wait_p95_s"]), str(w["never_started"]))
    console.print(t)
    t = Table(title="GPU utilization")
    for col in ("plane", "pool", "GPUs", "utilization", "idle GPU-h while jobs waited"):
        t.add_column(col)
    for p in report["pools"]:
        t.add_row(p["plane"], p["pool"], str(p["gpus"]), _fmt_util(p), f"{p['idle_gpu_hours_while_jobs_waited']:.1f}")
    for p in report["planes"]:
        t.add_row(p["plane"], "(plane)", str(p["gpus"]), _fmt_util(p), "")
    console.print(t)
    pre = [p for p in report.get("preemptions", ()) if p["preemptions"]]
    if report.get("preemptions"):
        t = Table(title=f"preemption under {report.get('gang_scheduler')} (a preempted job restarts)")
        for col in ("workload", "preemptions", "GPU-h lost"):
            t.add_column(col)
        for p in pre or report["preemptions"]:
            t.add_row(p["workload"], str(p["preemptions"]), f"{p['gpu_hours_lost']:.1f}")
        console.print(t)
    gangs = report.get("kubernetes_gangs")
    if gangs:
        t = Table(title=f"coupled multi-node jobs on {gangs['plane']}")
        for col in ("scheduler", "GPU-h held by partly placed gangs", "deadlocked jobs", "GPUs deadlocked",
                    "never started", "wait p95"):
            t.add_column(col)
        for r in gangs["schedulers"]:
            t.add_row(r["scheduler"], f"{r['partly_placed_gpu_hours']:.1f}", str(r["deadlocked_jobs"]),
                      str(r["deadlocked_gpus"]), str(r["coupled_jobs_never_started"]), _fmt_wait(r["coupled_wait_p95_s"]))
        console.print(t)


def _compare_table(rows: list[dict]) -> None:
    from rich.table import Table

    from ..terminal import console as make_console

    console = make_console()  # the terminal's width (80 when not a terminal): rich wraps the cells to fit
    t = Table(title="the same demand against the alternatives", show_lines=True)
    # short headers, and long cells folded rather than cut, so that the table reads at 80 columns
    for col in ("variant", "wait p50 / p95\nper workload", "never\nstarted", "GPU\nutilization", "idle GPU-h\nwhile waiting",
                "preemptions\n(GPU-h lost)"):
        t.add_column(col, overflow="fold")
    for r in rows:
        if "refused" in r:
            t.add_row(r["variant"], f"refused: {r['refused']}", "", "", "", "")
            continue
        waits = "\n".join(f"{w['workload']}: {_fmt_wait(w['wait_p50_s'])} / {_fmt_wait(w['wait_p95_s'])}"
                          for w in r["workloads"])
        never = str(sum(w["never_started"] for w in r["workloads"]))
        util = "\n".join(f"{p['plane']}: {_fmt_util(p)}" for p in r["planes"])
        idle = f"{sum(p['idle_gpu_hours_while_jobs_waited'] for p in r['pools']):.1f}"
        pre = "\n".join(f"{p['workload']}: {p['preemptions']} ({p['gpu_hours_lost']:.1f})"
                        for p in r.get("preemptions", ()) if p["preemptions"]) or "0"
        t.add_row(r["variant"], waits, never, util, idle, pre)
    console.print(t)
