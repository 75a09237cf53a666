"""The jobs `orchgen simulate` replays: drawn from workload.yaml's demand, or read from a trace CSV.

A job is one submission: a span (nodes x GPUs per node), a runtime and the time limit its
scheduler plans with. Times are seconds from the start of the replay.

Trace CSV (README "orchgen simulate"), either of:

* orchgen's own, with a header: `submit_time,gpus,nodes,duration` (seconds, GPUs of the whole
  job, nodes it spans, seconds it runs) and optionally `workload` (a workload of the plan it belongs
  to; absent: the first workload whose pool has enough GPUs per node) and `time_limit` (seconds;
  absent: the workload's max_time or the site's DefaultTime, or MaxTime for a job running longer;
  a job is ended at its limit, as Slurm does);
* Alibaba's cluster-trace-gpu-v2020 `pai_task_table.csv` (no header; its columns, from the trace's
  pai_task_table.header: job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,
  plan_gpu,gpu_type). plan_gpu is per instance in percent of one GPU (100 = one GPU); a task's GPUs
  are inst_num x plan_gpu / 100 rounded up (the plan has no GPU sharing), submit = start_time,
  duration = end_time - start_time. Rows without GPUs or without an end are skipped.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..decide.plan import Plan, WorkloadDecision
from ..errors import OrchgenError

SECONDS_PER_DAY = 86_400
# A service that scales (serving: min_replicas < max_replicas) runs min_replicas from the start and
# the rest through a daily peak, PEAK_START to PEAK_START + PEAK_HOURS of each replayed day: an
# assumption (workload.yaml has no traffic profile), so that what scaling up does to batch work
# (preemption, kube.py) shows in the replay
PEAK_START = 9 * 3600
PEAK_HOURS = 8
ALIBABA_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu",
                   "plan_mem", "plan_gpu", "gpu_type")
ORCHGEN_COLUMNS = ("submit_time", "gpus", "nodes", "duration")
MAX_TRACE_ROWS = 5_000_000
# Jobs one simulation draws from the demand: each job and its events take about a kilobyte, so this
# is about a GiB; workload.yaml's jobs_per_day (up to 10 million a day) over a week would be 70 million
MAX_SIMULATED_JOBS = 1_000_000
# Alibaba's pai_task_table.csv (about 1.3 million rows) is well under this; read whole, regular files only
MAX_TRACE_BYTES = 512 * 1024 * 1024


@dataclass(eq=False, slots=True)  # slots: a month of a large site is a million of them (about 250 bytes each, not 1 KiB)
class Job:
    id: int
    workload: str
    tenant: str
    plane: str
    pool: str
    submit: float
    nodes: int  # nodes (Slurm) or pods (Kubernetes) the job spans
    per_node: int  # GPUs on each of them
    runtime: float  # seconds it runs (cut at `limit`: the scheduler ends it there)
    limit: float  # seconds: its time limit (Slurm plans backfill with it)
    coupled: bool  # tightly coupled across nodes: a Kubernetes gang, a Slurm job asking --switches
    service: bool = False  # a long-lived service: runs from the start, never ends
    partition: str = ""
    # its PriorityClass's value on a Kubernetes plane (render/kubernetes/priority.py: services 1000,
    # batch 50): what the gang schedulers' preemption compares (kube.py)
    priority: int = 0
    # (the fields above are what a job is given, FRESH_FROM of them; a replay sets those below)
    start: float | None = None
    end: float | None = None
    nodes_held: np.ndarray | None = field(default=None, repr=False)
    preemptions: int = 0  # times it was preempted (evicted and requeued) before it ran to its end
    lost_gs: float = 0.0  # GPU-seconds its preempted runs had used: work lost (no checkpoint modelled)
    run: int = 0  # its runs so far: an end event of an earlier, preempted run is ignored

    @property
    def gpus(self) -> int:
        return self.nodes * self.per_node


FRESH_FROM = 14  # Job's fields through `priority`: a fresh copy for another replay takes these (simulate._fresh)


def limit_of(plan: Plan, d: WorkloadDecision) -> int:
    """Seconds: the time limit a job of `d` runs under: its max_time, else the site's DefaultTime
    (options.slurm.default_time: what a Slurm job giving no --time gets; on Kubernetes it only bounds
    the drawn runtimes)."""
    minutes = d.max_time or plan.slurm_default_time
    return minutes * 60


def longest(plan: Plan, d: WorkloadDecision) -> int:
    """Seconds: the longest limit a job of `d` may ask for (its partition's MaxTime): what a job
    that runs longer than DefaultTime asks for (--time) in the replay."""
    return (d.max_time or plan.slurm_max_time) * 60


def _limit_for(plan: Plan, d: WorkloadDecision, longest_run: float) -> int:
    base = limit_of(plan, d)
    return base if longest_run <= base else longest(plan, d)


def span(d: WorkloadDecision) -> tuple[int, int]:
    """(nodes or pods, GPUs on each) of one job of `d`: the starter's shape on Kubernetes."""
    if d.shape is not None:
        return d.shape.pods, d.shape.gpus
    per = d.gpus_per_node
    if not per or not d.gpus:
        return d.facts.nodes, 0
    nodes = max(d.facts.nodes, -(-d.gpus // per))
    return nodes, -(-d.gpus // nodes)


def from_demand(plan: Plan, hours: float, seed: int) -> list[Job]:
    """Jobs drawn from each workload's demand over `hours`: a Poisson stream of jobs_per_day, or, where
    only jobs_at_once is given (default 1), that many back-to-back streams (the demand the plan was
    sized for); runtimes uniform in 0.5-1.5 x `runtime` (default: half the time limit), cut at the
    limit. Services run from t=0."""
    rng = np.random.default_rng(seed)
    horizon = hours * 3600
    jobs: list[Job] = []
    drawn = 0.0
    for i, d in enumerate(plan.workloads):  # the plan keeps workload.yaml's order: i names its field
        if d.plane in ("slurm", "kubernetes", "k3s") and d.workload_class != "service" and d.serving is None:
            runtime = (d.runtime * 60) if d.runtime else limit_of(plan, d) / 2
            per_day = d.jobs_per_day if d.jobs_per_day is not None else d.jobs_at_once * SECONDS_PER_DAY / runtime
            drawn += per_day / SECONDS_PER_DAY * horizon
            if drawn > MAX_SIMULATED_JOBS:
                field = "jobs_per_day" if d.jobs_per_day is not None else "jobs_at_once"
                raise OrchgenError(f"{hours:g} hours of this demand are about {int(drawn):,} jobs to simulate, more "
                                   f"than the {MAX_SIMULATED_JOBS:,} orchgen simulates at once: simulate fewer hours "
                                   "(--hours) or a sample of the demand", field=f"workloads[{i}].{field}")
    for d in plan.workloads:
        if d.plane not in ("slurm", "kubernetes", "k3s"):
            continue
        nodes, per = span(d)
        limit = limit_of(plan, d)
        service = d.workload_class == "service"
        prio = priority_of(d)
        if service or d.serving is not None:  # a RayService too: long-lived, a service's PriorityClass
            jobs += _service(d, nodes, per, prio, horizon)
            continue
        runtime = (d.runtime * 60) if d.runtime else limit / 2
        limit = _limit_for(plan, d, runtime * 1.5)
        coupled = d.gang_scheduler_required or (d.plane == "slurm" and nodes > 1)

        def job(t: float) -> Job:
            run = min(limit, runtime * float(rng.uniform(0.5, 1.5)))
            return Job(0, d.name, d.tenant, d.plane, d.pool, t, nodes, per, run, limit, coupled, priority=prio)

        if d.jobs_per_day is not None:  # arrivals: a Poisson stream
            rate = d.jobs_per_day / SECONDS_PER_DAY
            t = 0.0
            while True:
                t += float(rng.exponential(1 / rate))
                if t >= horizon:
                    break
                jobs.append(job(t))
            continue
        # jobs_at_once (default 1) is how many of its jobs run together, what the plan sizes its pools by:
        # that many streams, each submitting its next job when its last would end had it never waited
        # (a queue that every variant of the plan is given alike). A Poisson stream of jobs_at_once / runtime
        # would load a pool sized for it at exactly 100%, an unstable queue whose waits grow with the hours
        # replayed and favour whichever variant pools the most nodes, whatever the plan.
        for _ in range(d.jobs_at_once):
            t = float(rng.uniform(0, runtime))  # the streams are not in step
            while t < horizon:
                jobs.append(job(t))
                t += jobs[-1].runtime
    return _numbered(jobs)


def priority_of(d: WorkloadDecision) -> int:
    """The value of the PriorityClass the bundle gives `d`'s pods (render/kubernetes/priority.py
    class_of: services and serving platforms outrank batch); 0 on Slurm (its own priority, slurm.py)."""
    if d.plane == "slurm":
        return 0
    from ..render.kubernetes import priority

    return priority.SERVICES[1] if d.workload_class == "service" or d.serving is not None else priority.BATCH[1]


def _service(d: WorkloadDecision, nodes: int, per: int, prio: int, horizon: float) -> list[Job]:
    """A long-lived service: its whole span from t=0, never ending; one that scales (serving:
    min_replicas < max_replicas) min_replicas from t=0 and the other replicas through each day's
    peak (PEAK_START, PEAK_HOURS)."""
    s = d.serving
    if s is None or s.max_replicas <= s.min_replicas or not s.pod.gpus:
        return [Job(0, d.name, d.tenant, d.plane, d.pool, 0.0, nodes, per, math.inf, math.inf, False,
                    service=True, priority=prio)]
    pods, gpus = s.nodes_per_replica, s.pod.gpus

    def replica(at: float, runtime: float) -> Job:
        return Job(0, d.name, d.tenant, d.plane, d.pool, at, pods, gpus, runtime, runtime, pods > 1,
                   service=True, priority=prio)

    out = [replica(0.0, math.inf) for _ in range(s.min_replicas)]
    day = 0
    while day * SECONDS_PER_DAY + PEAK_START < horizon:
        at = day * SECONDS_PER_DAY + PEAK_START
        out += [replica(float(at), float(PEAK_HOURS * 3600)) for _ in range(s.max_replicas - s.min_replicas)]
        day += 1
    return out


def _numbered(jobs: list[Job]) -> list[Job]:
    """The jobs by (submit, workload), stably (a trace's order among equal ones), numbered from 1.
    numpy's lexsort is stable too and gives that order without a million key tuples."""
    names = sorted({j.workload for j in jobs})
    rank = {w: i for i, w in enumerate(names)}
    submit = np.fromiter((j.submit for j in jobs), dtype=float, count=len(jobs))
    workload = np.fromiter((rank[j.workload] for j in jobs), dtype=np.int64, count=len(jobs))
    order = np.lexsort((workload, submit)).tolist()
    jobs[:] = [jobs[i] for i in order]
    for i, j in enumerate(jobs, start=1):
        j.id = i
    return jobs


def from_trace(plan: Plan, path: str | Path) -> list[Job]:
    """Jobs of a trace CSV (module docstring), each given to a workload of the plan.

    One pass: each row becomes its Job as it is read (a month of a large site is a million rows; a
    list of parsed rows beside the jobs doubled the memory). What is refused, and in which order, is
    as it was with two passes: a row that cannot be read at once; then an empty trace, then more
    jobs than MAX_SIMULATED_JOBS (naming the first row past it); then the first row, in the file's
    order, that no workload of the plan can run (`_Jobs.add`)."""
    name = str(path)
    from ..spec.inputs import Refused, read_bounded

    try:  # a FIFO, a device or a directory is refused before a byte is read (issue 19's bounded input)
        data = read_bounded(path, MAX_TRACE_BYTES)
    except Refused as exc:
        raise OrchgenError(f"the trace {exc}", name, None, "--trace") from None
    except OSError as exc:
        raise OrchgenError(f"cannot read the trace: {exc.strerror}", name, None, "--trace") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise OrchgenError("not a CSV file (not UTF-8 text)", name, None, "--trace") from None
    del data
    handle = io.StringIO(text, newline="")
    del text
    out = _Jobs(plan, name)
    with handle:
        reader = csv.reader(handle)
        try:
            first = next(reader, None)
            if first is None:
                raise OrchgenError("the trace is empty", name, 1, "--trace")
            header = [c.strip() for c in first]
            if set(ORCHGEN_COLUMNS) <= set(header):
                col = {c: header.index(c) for c in header}
                fast = _orchgen_fast(col)
                for n, row in enumerate(reader, start=2):
                    if n > MAX_TRACE_ROWS:
                        raise OrchgenError(f"more than {MAX_TRACE_ROWS} rows", name, n, "--trace")
                    got = fast(row, n)
                    if got is None:  # anything but a plain row of numbers: the careful reading, its errors
                        if not any(c.strip() for c in row):
                            continue
                        got = _orchgen_row(row, col, name, n)
                    out.add(*got)
            elif len(header) == len(ALIBABA_COLUMNS):
                if header != list(ALIBABA_COLUMNS):
                    row = _alibaba_row(first, name, 1)
                    if row:
                        out.add(*row)
                for n, row in enumerate(reader, start=2):
                    if n > MAX_TRACE_ROWS:
                        raise OrchgenError(f"more than {MAX_TRACE_ROWS} rows", name, n, "--trace")
                    got = _alibaba_row(row, name, n)
                    if got:
                        out.add(*got)
            else:
                raise OrchgenError("not a trace CSV: give a header with submit_time,gpus,nodes,duration, or "
                                   "Alibaba's pai_task_table.csv (10 columns)", name, 1, "--trace")
        except (csv.Error, UnicodeDecodeError) as exc:
            raise OrchgenError(f"not a CSV file ({type(exc).__name__})", name, reader.line_num, "--trace") from None
    return out.done()


class _Jobs:
    """The jobs of a trace as its rows are read: each row's workload, span and limit, worked out once
    per workload (and per shape, for a trace without workloads) rather than once per row."""

    def __init__(self, plan: Plan, name: str):
        self.plan, self.name = plan, name
        self.by_name = {d.name: d for d in plan.workloads if d.plane}
        self.rows = 0
        self.past_limit: int | None = None  # the line of the first row past MAX_SIMULATED_JOBS
        self.refusal: OrchgenError | None = None  # the first row no workload can run
        self.jobs: list[Job] = []
        self.t0 = math.inf
        self._facts: dict[str, tuple] = {}  # workload -> (per node, base limit, longest limit, priority, gang)
        self._auto: dict[tuple[int, int | None], WorkloadDecision | None] = {}

    def add(self, line: int, submit: float, gpus: int, nodes: int | None, duration: float,
            workload: str | None, limit: float | None) -> None:
        self.rows += 1
        if self.rows > MAX_SIMULATED_JOBS:
            if self.past_limit is None:
                self.past_limit = line
            return
        if self.refusal is not None:
            return  # refused already: the rest is only read for the errors that come before
        if workload:
            d = self.by_name.get(workload)
        else:
            key = (gpus, nodes)
            if key not in self._auto:
                self._auto[key] = _workload_for(self.plan, gpus, nodes)
            d = self._auto[key]
        if d is None:
            self.refusal = OrchgenError(f"workload {workload!r} is not in the plan" if workload else
                                        "no workload of the plan runs GPU jobs", self.name, line, "workload")
            return
        facts = self._facts.get(d.name)
        if facts is None:
            facts = self._facts[d.name] = (d.gpus_per_node or 1, limit_of(self.plan, d), longest(self.plan, d),
                                           priority_of(d), d.gang_scheduler_required or d.plane == "slurm")
        per_node, base, most, prio, gang = facts
        span_nodes = nodes or -(-gpus // per_node)
        per = -(-gpus // span_nodes)
        if per > per_node:
            self.refusal = OrchgenError(f"{gpus} GPUs on {span_nodes} nodes is more than {per_node} per node "
                                        f"(pool {d.pool})", self.name, line, "nodes")
            return
        lim = limit if limit is not None else (base if duration <= base else most)  # _limit_for
        if submit < self.t0:
            self.t0 = submit
        self.jobs.append(Job(0, d.name, d.tenant, d.plane, d.pool, submit, span_nodes, per, min(duration, lim), lim,
                             span_nodes > 1 and gang, priority=prio))

    def done(self) -> list[Job]:
        if not self.rows:
            raise OrchgenError("the trace has no job with GPUs", self.name, None, "--trace")
        if self.past_limit is not None:  # the same bound as a drawn demand's: each job is about a kilobyte
            raise OrchgenError(f"{self.rows:,} jobs with GPUs, more than the {MAX_SIMULATED_JOBS:,} orchgen simulates "
                               "at once: simulate a part of the trace", self.name, self.past_limit, "--trace")
        if self.refusal is not None:
            raise self.refusal
        t0 = self.t0
        for j in self.jobs:
            j.submit = j.submit - t0
        return _numbered(self.jobs)


def _orchgen_fast(col: dict[str, int]):
    """A reader of one row of orchgen's CSV that takes the common case only, a row of plain numbers,
    and returns what `_orchgen_row` would; None for anything else (an empty field, a number that is
    not one, a missing column), which `_orchgen_row` then reads, with its errors."""
    at_submit, at_gpus, at_nodes, at_duration = (col[c] for c in ORCHGEN_COLUMNS)
    at_workload, at_limit = col.get("workload"), col.get("time_limit")
    width = max(col.values()) + 1
    isfinite = math.isfinite

    def read(row: list[str], n: int):
        if len(row) < width:
            return None
        try:
            submit, gpus, duration = float(row[at_submit]), int(row[at_gpus]), float(row[at_duration])
            nodes = row[at_nodes].strip()
            nodes = int(nodes) if nodes else None
            limit = None
            if at_limit is not None:
                text = row[at_limit].strip()
                if text:
                    limit = float(text)
                    if not (isfinite(limit) and limit >= 0):
                        return None
        except ValueError:
            return None
        if not (isfinite(submit) and submit >= 0 and isfinite(duration) and duration >= 0 and gpus >= 1
                and (nodes is None or nodes >= 1)):
            return None
        workload = (row[at_workload].strip() or None) if at_workload is not None else None
        return n, submit, gpus, nodes, duration, workload, limit

    return read


def _num(value: str, name: str, line: int, what: str, kind=float):
    try:
        out = kind(value)
    except ValueError:
        raise OrchgenError("not a number (the field is not quoted)", name, line, what) from None
    if not math.isfinite(out) or out < 0:
        raise OrchgenError("not a non-negative number (the field is not quoted)", name, line, what)
    return out


def _orchgen_row(row: list[str], col: dict[str, int], name: str, n: int):
    def get(c: str) -> str:
        if col[c] >= len(row):
            raise OrchgenError(f"the row has no {c}", name, n, c)
        return row[col[c]].strip()

    submit = _num(get("submit_time"), name, n, "submit_time")
    gpus = _num(get("gpus"), name, n, "gpus", int)
    nodes_text = get("nodes")
    nodes = _num(nodes_text, name, n, "nodes", int) if nodes_text else None
    duration = _num(get("duration"), name, n, "duration")
    if gpus < 1 or (nodes is not None and nodes < 1):
        raise OrchgenError("a job has at least one GPU and one node", name, n, "gpus")
    workload = get("workload") or None if "workload" in col else None
    limit = _num(get("time_limit"), name, n, "time_limit") if "time_limit" in col and get("time_limit") else None
    return n, submit, gpus, nodes, duration, workload, limit


def _alibaba_row(row: list[str], name: str, n: int):
    if len(row) != len(ALIBABA_COLUMNS):
        raise OrchgenError(f"{len(row)} columns, not pai_task_table's {len(ALIBABA_COLUMNS)}", name, n, "--trace")
    inst, start, end, plan_gpu = row[2].strip(), row[4].strip(), row[5].strip(), row[8].strip()
    if not (inst and start and end and plan_gpu):
        return None  # still running when the trace was cut, or no GPU asked for
    instances = _num(inst, name, n, "inst_num")
    per = _num(plan_gpu, name, n, "plan_gpu")
    gpus = math.ceil(instances * per / 100)
    begin, finish = _num(start, name, n, "start_time"), _num(end, name, n, "end_time")
    if gpus < 1 or finish < begin:
        return None
    return n, begin, gpus, None, finish - begin, None, None


def _workload_for(plan: Plan, gpus: int, nodes: int | None) -> WorkloadDecision | None:
    """The workload a trace job without a `workload` column belongs to: the first batch or training
    workload with GPUs whose pool's nodes hold its GPUs per node; else the first with GPUs."""
    cands = [d for d in plan.workloads if d.plane and d.gpus_per_node and d.workload_class != "service"]
    for d in cands:
        if -(-gpus // (nodes or -(-gpus // d.gpus_per_node))) <= d.gpus_per_node:
            return d
    return cands[0] if cands else None
