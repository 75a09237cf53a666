#!/usr/bin/env python3
"""The production checks of an orchgen Slurm bundle (the decision guide's "How to run it in production").

Run on a controller (or any host with the Slurm client commands and the cluster's slurm.conf), with
checks.json beside this file; prints one JSON object {check: {"ok": bool, "detail": ...}} and exits 1 when
any check fails. The bring-up runs it as its last step (bringup/up.sh, `pulumi up`); on its own:

    bringup/up.sh HOSTS.yaml --tags checks        # on the controller, through Ansible
    python3 checks/run.py [--skip nccl] [--nccl-log FILE]   # on a controller, by hand

Checks:
- gres: every node is idle (or running jobs) with its GPUs visible as GRES, type and count as planned;
- allocation: a 2-node job gets its whole allocation under one job ID, on the fewest leaf switches the
  topology allows (a job that fits one leaf lands under one leaf);
- health: NHC passes on every node (run on each, and no node drained with an NHC reason);
- takeover (a plan with two or more controllers): a job runs, `scontrol takeover` hands control to the first
  backup (the primary's slurmctld saves its state and exits: scontrol(1) takeover), the job is still RUNNING on its
  nodes under the backup and the backup starts a new job; then slurmctld starts again on the primary, which takes
  control back at startup (scontrol(1)), and the job is still RUNNING. Then the check cancels it and runs `scontrol
  reconfigure`, so that every slurmd registers with the primary (a slurmd keeps sending to the controller it last
  reached, the backup, now standing by), waits until every node has registered with the primary (sinfo's %v shows
  its slurmd's version) and is idle, mix or alloc with its planned GRES, and no job of the check's is left (one that
  ended while its slurmd sent to the backup can stay completing), and runs one job over every node with every GPU
  of each (one job per GPU count): the GPUs are usable after the hand-back, or the check names each node and what
  was wrong. Run on the primary controller: the check starts its slurmctld again there with `--start-controller
  CMD` (default `systemctl start slurmctld`); the bring-up gives its own start command where the hosts have no
  init system;
- nccl: nccl-tests all_reduce_perf over two nodes with NCCL_DEBUG=INFO uses the fabric's RDMA transport
  (NET/IB on InfiniBand and RoCE), never the socket fallback, and reaches the bus-bandwidth floor of the
  fabric kind (on nodes of multi-node NVLink domains, GB200 NVL72, with NCCL_MNNVL_ENABLE=0: checks.json
  nccl_env). NCCL's own log line names the transport ("via NET/IB/0/GDRDMA"); `--nccl-log FILE` checks
  a recorded run instead of starting one. Needs nccl-tests' all_reduce_perf on the nodes: where the bring-up
  builds it (checks.json nccl_tests.binary, on GPU nodes with CUDA and NCCL), else on PATH, or `--nccl-tests PATH`
  / $ORCHGEN_NCCL_TESTS; where it is absent the check says NOT INSTALLED with the steps (checks.json
  nccl_tests.steps, the bring-up's and the README's) and run.py exits 3 (NOT_INSTALLED_EXIT) when nothing else failed.

Every Slurm job the checks submit is bounded: srun --immediate (`--immediate S`) so a busy partition fails
that check with one line naming the partition, the nodes asked and what squeue shows, and a total bound per
check (`--check-timeout S`); every job they started is cancelled (scancel of the recorded job IDs) on any
exit, SIGINT and SIGTERM included. The per-node health check is one job over every node (one task each).
- gang (a plan with a Kubernetes plane): a small gang test job (checks.json `kubernetes.gang`: N pods of
  one GPU on a GPU pool, made by the plan's own starter code, so in a tenant namespace under the plan's
  gang scheduler, queue and priority class) is admitted whole or not at all: it passes when all N pods
  run; it fails when it stays split between Running and Pending, or is never admitted (with the
  scheduler's reason: Kueue's Workload conditions, the pods' PodScheduled messages, the job's events).
  The job is deleted afterwards, pass or fail.
- kube-nccl (a plan with a Kubernetes GPU pool of two or more nodes): checks.json `kubernetes.nccl`, two pods
  with every GPU of their node on that pool, made by the plan's starter code with the fabric wiring of its
  multi-node jobs (RDMA or EFA resources, IPC_LOCK, the secondary network, NCCL's variables), run torchrun's
  all_reduce of 1 GiB in the plan's training image with NCCL_DEBUG=INFO. It fails when an inter-node channel
  went over sockets where the plan wired RDMA or EFA, when the wired transport (NET/IB; NET/Libfabric on EFA)
  never appears, on a wrong sum, or under the bus-bandwidth floor; the job's pods must also all be admitted
  and run. `--kube-nccl-log FILE` judges a recorded run instead. Deleted afterwards, pass or fail.
  Both need kubectl (or $KUBECTL) and a kubeconfig ($KUBECONFIG; `--kube-context` or $ORCHGEN_KUBE_CONTEXT
  picks the context):

    python3 checks/run.py --plane kubernetes [--kube-context CTX]   # on any machine that reaches the API

`--plane slurm|kubernetes` runs only that plane's checks (the Slurm bring-up runs `--plane slurm` on the
controller); without it, every check of the plan runs.
Standard library only: it runs on a bare controller.
"""
from __future__ import annotations

import argparse
import getpass
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent

# How long a check's job may wait for its nodes before srun gives up (srun(1) --immediate): a busy partition
# then fails the check with what squeue shows instead of queueing behind other jobs; raise it on a busy site.
IMMEDIATE_S = 30
# The most one check may take in all, its jobs included (all_reduce_perf from 8 B to 4 GB over two nodes takes
# minutes; NHC seconds); `--check-timeout` overrides every one. srun(1): a killed srun leaves its job, so the
# checks scancel(1) what they started.
CHECK_BOUND_S = {"gres": 60, "allocation": 300, "health": 600, "takeover": 600, "nccl": 1200, "gang": 1800,
                 "kube-nccl": 1800}
# How the takeover check starts slurmctld on the primary again after `scontrol takeover` stopped it (scontrol(1):
# "The primary controller daemon will shut down ... It will take control back at startup"); --start-controller.
START_CONTROLLER = "systemctl start slurmctld"
# How long each hand-over may take: the backup waits for the primary to save its state and exit, then loads that
# state (slurm.conf(5) SlurmctldTimeout bounds only an unannounced failure, not a takeover)
HANDOVER_S = 120
# run.py's exit status where the only failures are checks whose tools are not installed (nccl-tests)
NOT_INSTALLED_EXIT = 3
NCCL_MISSING = "orchgen-checks: NOT INSTALLED"
# Where checks.json has no `nccl_tests` (a checks.json older than the bring-up's nccl-tests build): the steps. A
# bundle's checks.json carries the bring-up's own (generator/render/bringup/manual.py nccl_tests: the same record as
# the bring-up's NOT INSTALLED line and the README), with the prefix it builds all_reduce_perf into.
NCCL_TESTS_STEPS = [
    "on every GPU node: CUDA and NCCL (NVIDIA's CUDA repository), then nccl-tests as its README says "
    "(https://github.com/NVIDIA/nccl-tests#build; MPI=1); the bundle README, 'Bringing it up', has the exact steps",
    "or skip the check: checks/run.py --skip nccl (bring-up: sh bringup/up.sh HOSTS.yaml -e '{\"orchgen_check_args\": \"--skip nccl\"}')",
]

JOBS: set[str] = set()  # Slurm job IDs the checks started, cancelled on exit
NAMES: set[str] = set()  # the job names they used (orchgen-check-<check>-<pid>), to find IDs srun never printed
PROCS: set[subprocess.Popen] = set()
_LOCK = threading.Lock()


def sh(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]} did not answer in {timeout:.0f} s")
    except FileNotFoundError:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: not found (run on a host with Slurm's commands)")


def _job_ids(text: str) -> set[str]:
    """The job IDs srun names on stderr ("srun: job 42 queued and waiting for resources", "jobid 42")."""
    return set(re.findall(r"\bjob(?:id)?[ =](\d+)", text, re.I))


def _default_partition() -> str:
    out = sh(["sinfo", "-h", "-o", "%P"], timeout=15)
    names = out.stdout.split() if out.returncode == 0 else []
    return next((n.rstrip("*") for n in names if n.endswith("*")), names[0] if names else "the default partition")


def _squeue(partition: str) -> str:
    out = sh(["squeue", "-h", "-p", partition, "-o", "%i %u %T %D %R"], timeout=15)
    if out.returncode != 0:
        return f"squeue failed: {out.stderr.strip()[-200:] or out.returncode}"
    rows = [r.strip() for r in out.stdout.splitlines() if r.strip()]
    return (f"{len(rows)} jobs: " + "; ".join(rows[:5]) + ("; ..." if len(rows) > 5 else "")) if rows else "no jobs"


class Busy(Exception):
    """A check's job did not get its nodes (srun --immediate) or ran past the check's bound."""


def srun(check: str, opts: list[str], command: list[str], asked: str, bound: float, immediate: int
         ) -> subprocess.CompletedProcess:
    """One bounded Slurm job: srun --immediate, killed and scancelled past `bound` seconds; raises Busy with one
    line (partition, nodes asked, what squeue shows) when the nodes were busy or the bound ran out."""
    name = f"orchgen-check-{check}-{os.getpid()}"
    argv = ["srun", f"--immediate={immediate}", "-J", name, *opts, *command]
    with _LOCK:
        NAMES.add(name)
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        return subprocess.CompletedProcess(argv, 127, "", "srun: not found (run on a host with Slurm's commands)")
    with _LOCK:
        PROCS.add(proc)
    try:
        try:
            out, err = proc.communicate(timeout=bound)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
    finally:
        with _LOCK:
            PROCS.discard(proc)
    ids = _job_ids(err)
    with _LOCK:
        JOBS.update(ids)
    started = "allocated resources" in err or bool(out.strip())
    last = next((ln for ln in reversed(err.splitlines()) if ln.strip()), "")
    # busy: what srun says when --immediate ran out (ESLURM_NODES_BUSY's text, src/srun/allocate.c) or the job was
    # refused for priority; not "Unable to allocate resources" alone, which prefixes every refusal (an invalid node
    # name, an account or QOS limit) and would call a misconfiguration busy
    busy = re.search(r"Immediate execution impossible|Requested nodes are busy|queued and waiting", err)
    if timed_out or (proc.returncode != 0 and busy and not started):
        if ids:  # now, not at exit: the other checks should not wait behind it
            sh(["scancel", *sorted(ids)], timeout=30)
        part = _default_partition()
        job = f" (job {', '.join(sorted(ids))}, cancelled)" if ids else ""
        if timed_out and started:
            raise Busy(f"{check}: stopped after the check's bound of {bound:.0f} s while its job ran on {asked}"
                       f"{job}; raise it with --check-timeout")
        why = (f"still waiting after the check's bound of {bound:.0f} s" if timed_out
               else f"not free within {immediate} s (srun --immediate; raise it with --immediate)")
        raise Busy(f"{check}: partition {part} busy: {asked} {why}{job}; srun: {last or 'nothing'}; "
                   f"squeue -p {part} shows {_squeue(part)}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def cancel_jobs() -> None:
    """scancel every job the checks started that squeue still lists: the IDs they recorded and any job under
    their names (orchgen-check-<check>-<pid>); without squeue, every recorded ID."""
    with _LOCK:
        procs, ids, names = list(PROCS), set(JOBS), set(NAMES)
    for p in procs:
        p.kill()
    if not ids and not names:
        return
    q = sh(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i %j"], timeout=15)
    if q.returncode == 0:
        rows = [r.split(None, 1) for r in q.stdout.splitlines() if r.strip()]
        ids = {r[0] for r in rows if r[0] in ids or (len(r) > 1 and r[1].strip() in names)}
    if ids:
        done = sh(["scancel", *sorted(ids, key=lambda i: int(i) if i.isdigit() else 0)], timeout=30)
        if done.returncode != 0:
            print(f"scancel {' '.join(sorted(ids))}: {done.stderr.strip()[-300:]}", file=sys.stderr)


def planned_gres(want: dict) -> str:
    """A node's GPUs as checks.json plans them, in gres.conf's words: gpu:h100:8, or gpu:8 where untyped."""
    return f"gpu:{want['gpu_type'] + ':' if want['gpu_type'] else ''}{want['gpus']}"


def gres_differs(want: dict, gres: str) -> bool:
    """sinfo's %G of a node against the plan: the count (and type, where planned) of its gpu GRES."""
    if not want["gpus"]:
        return False
    m = re.search(r"gpu:(?:([\w.-]+):)?(\d+)", gres)
    return not m or int(m.group(2)) != want["gpus"] or bool(want["gpu_type"] and m.group(1) != want["gpu_type"])


def check_gres(cfg: dict) -> dict:
    out = sh(["sinfo", "-h", "-N", "-o", "%N|%t|%G"])
    if out.returncode != 0:
        return {"ok": False, "detail": out.stderr.strip()}
    seen = {}
    for line in out.stdout.splitlines():
        name, state, gres = line.split("|")
        seen[name] = (state, gres)
    problems = []
    for node, want in cfg["nodes"].items():
        if node not in seen:
            problems.append(f"{node}: not in sinfo")
            continue
        state, gres = seen[node]
        if state.rstrip("*~#") not in ("idle", "mix", "alloc", "comp"):
            problems.append(f"{node}: state {state}")
        if gres_differs(want, gres):
            problems.append(f"{node}: GRES {gres}, planned {planned_gres(want)}")
    return {"ok": not problems, "detail": problems or f"{len(cfg['nodes'])} nodes ready with their GPUs"}


def fewest_leaves(leaves: list[dict], k: int) -> int:
    """The fewest leaf switches that can hold k nodes."""
    sizes = sorted((len(leaf["nodes"]) for leaf in leaves), reverse=True)
    total = 0
    for i, s in enumerate(sizes, 1):
        total += s
        if total >= k:
            return i
    return math.inf


def check_allocation(cfg: dict, k: int = 2, bound: float = CHECK_BOUND_S["allocation"],
                     immediate: int = IMMEDIATE_S) -> dict:
    gpus = min((n["gpus"] for n in cfg["nodes"].values()), default=0)
    opts = ["-N", str(k), "--ntasks-per-node=1", "-t", "5"]
    if gpus:
        opts.append(f"--gres=gpu:{gpus}")
    out = srun("allocation", opts, ["sh", "-c", 'echo "$SLURM_JOB_ID $SLURMD_NODENAME ${CUDA_VISIBLE_DEVICES:-}"'],
               f"{k} nodes" + (f" with gpu:{gpus}" if gpus else ""), bound, immediate)
    JOBS.update(r.split()[0] for r in out.stdout.splitlines() if r.split() and r.split()[0].isdigit())
    if out.returncode != 0:
        return {"ok": False, "detail": f"srun exit {out.returncode}: {out.stderr.strip()[-500:]}"}
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()]
    jobs = {r[0] for r in rows}
    nodes = sorted({r[1] for r in rows})
    leaf_of = {n: leaf["name"] for leaf in cfg["leaves"] for n in leaf["nodes"]}
    used = sorted({leaf_of.get(n, "?") for n in nodes})
    best = fewest_leaves(cfg["leaves"], k) if cfg["leaves"] else 1
    problems = []
    if len(jobs) != 1:
        problems.append(f"tasks ran under {len(jobs)} job IDs {sorted(jobs)}")
    if len(nodes) != k:
        problems.append(f"{len(nodes)} nodes of {k}: {nodes}")
    if gpus and any(len(r) < 3 or len(r[2].split(",")) != gpus for r in rows):
        problems.append(f"a task saw fewer than {gpus} GPUs: {rows}")
    if cfg["leaves"] and len(used) > best:
        problems.append(f"nodes {nodes} under {len(used)} leaves {used}; {best} would hold them")
    return {"ok": not problems,
            "detail": problems or f"job {next(iter(jobs))}: {k} nodes {nodes} under leaves {used} (fewest: {best})"}


# One task per node of the health job: NHC's exit status and last line, one line per node, and the task itself
# exits 0 so that KillOnBadExit (slurm.conf) does not end the other nodes' tasks when one node fails NHC.
HEALTH_TASK = 'out=$("$0" 2>&1); rc=$?; printf "%s %s %s\\n" "$SLURMD_NODENAME" "$rc" "$(printf %s "$out" | tail -n 1)"'


# The longest node list given on srun's command line: Linux refuses one argument over 128 KiB (MAX_ARG_STRLEN, 32
# pages; execve(2) E2BIG), which a plane of about 9,000 nodes reaches; a longer one goes in a file, which `srun -w`
# reads where the argument holds a "/" (srun(1) --nodelist)
NODELIST_ARG_MAX = 64 * 1024


@contextmanager
def nodelist(nodes: list[str]):
    """srun's -w value for these nodes: the names, or the path of a file of them where the list is too long for one
    argument (removed afterwards)."""
    names = ",".join(nodes)
    if len(names) <= NODELIST_ARG_MAX:
        yield names
        return
    with tempfile.NamedTemporaryFile("w", prefix="orchgen-check-nodes-", suffix=".txt") as f:
        f.write("\n".join(nodes) + "\n")
        f.flush()
        yield f.name


def check_health(cfg: dict, bound: float = CHECK_BOUND_S["health"], immediate: int = IMMEDIATE_S) -> dict:
    """NHC on every node in one job: `srun -N<all> -w <all> --ntasks-per-node=1 --immediate`, bounded like every
    check's job; each node's task prints its NHC result, so the result is per node (a node that printed none is
    named), sorted by node. One job, not one per node: on a 512-node plane it starts once and takes seconds."""
    program = cfg.get("health_program")
    if not program:
        return {"ok": True, "detail": "the plan runs no health check (options.slurm.health_check: false)"}
    nodes = sorted(cfg["nodes"])
    try:
        with nodelist(nodes) as listed:
            opts = ["-N", str(len(nodes)), "-w", listed, "--ntasks-per-node=1", "-t", "5"]
            out = srun("health", opts, ["sh", "-c", HEALTH_TASK, program], f"{len(nodes)} nodes", bound, immediate)
    except Busy as e:
        return {"ok": False, "detail": [str(e)]}
    results: dict[str, tuple[str, str]] = {}
    for line in out.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) >= 2 and parts[0] in cfg["nodes"]:
            results[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    problems = []
    for node in nodes:
        if node not in results:
            problems.append(f"{node}: no result (srun exit {out.returncode}: {out.stderr.strip()[-200:]})")
        elif results[node][0] != "0":
            problems.append(f"{node}: {program} exit {results[node][0]}: {results[node][1][-300:]}")
    drained = sh(["sinfo", "-h", "-R", "-o", "%N|%E"])
    for line in drained.stdout.splitlines():
        if "NHC" in line:
            problems.append(f"drained by NHC: {line}")
    return {"ok": not problems, "detail": problems or f"{program} passed on {len(nodes)} nodes"}


PING = re.compile(r"Slurmctld\((primary|backup\d*)\) at (\S+) is (UP|DOWN)")


def _ping() -> list[tuple[str, str, str]]:
    """`scontrol ping`: (role, host, UP|DOWN) per SlurmctldHost, primary first."""
    return PING.findall(sh(["scontrol", "ping"], timeout=30).stdout)


def _job_state(job: str) -> str:
    """`squeue -j JOB -o '%T %N'`: "RUNNING node1" ("" while no controller answers)."""
    out = sh(["squeue", "-h", "-j", job, "-o", "%T %N"], timeout=30)
    return out.stdout.strip() if out.returncode == 0 else ""


def _until(what: str, probe, timeout: float):
    end = time.monotonic() + timeout
    while True:
        value = probe()
        if value or time.monotonic() >= end:
            if not value:
                raise TimeoutError(f"{what}: not within {timeout:.0f} s")
            return value
        time.sleep(0.5)


def check_takeover(cfg: dict, bound: float = CHECK_BOUND_S["takeover"], immediate: int = IMMEDIATE_S,
                   start: str | None = None) -> dict:
    """`scontrol takeover` to the first backup and back with a job running; the job survives both hand-overs and
    each controller schedules a new job while it has control, the primary's over every node with every GPU once
    each slurmd registered with it again (after_hand_back; see the module docstring)."""
    planned = cfg.get("controllers") or []
    if len(planned) < 2:
        return {"ok": True, "detail": f"one controller ({', '.join(planned) or 'none planned'}): no takeover to try"}
    ping = _ping()
    if len(ping) < 2 or any(state != "UP" for _, _, state in ping[:2]):
        return {"ok": False, "detail": f"planned controllers {planned}; scontrol ping shows "
                                       f"{[' '.join(p) for p in ping] or 'none'}: both must be UP before a takeover"}
    primary, backup = ping[0][1], ping[1][1]
    here = sh(["hostname", "-s"]).stdout.strip()
    if start is None:
        if here != primary:
            return {"ok": False, "detail": f"run on the primary controller {primary}, not {here}: `scontrol takeover` "
                                           f"stops its slurmctld and the check starts it again there "
                                           f"(or give --start-controller CMD, e.g. 'ssh {primary} {START_CONTROLLER}')"}
        start = START_CONTROLLER
    end = time.monotonic() + bound
    left = lambda: max(1.0, min(HANDOVER_S, end - time.monotonic()))  # noqa: E731
    name = f"orchgen-check-takeover-{os.getpid()}"
    with _LOCK:
        NAMES.add(name)
    # the job that must survive: one task on one node, bounded by the check's own time (sbatch has no --immediate:
    # it is cancelled, as BUSY, when it does not run within --immediate seconds)
    sub = sh(["sbatch", "--parsable", "-J", name, "-N1", "-n1", "-t", str(max(2, int(bound // 60) + 1)),
              "-o", "/dev/null", "--wrap", f"sleep {int(bound)}"])
    job = sub.stdout.strip().split(";")[0]
    if sub.returncode != 0 or not job.isdigit():
        return {"ok": False, "detail": f"the takeover check's job was refused: sbatch exit {sub.returncode}: "
                                       f"{sub.stderr.strip()[-300:]}"}
    with _LOCK:
        JOBS.add(job)
    steps: list[str] = []
    try:
        try:
            running = _until(f"job {job} to run", lambda: (s := _job_state(job)).startswith("RUNNING") and s, immediate)
        except TimeoutError:
            sh(["scancel", job], timeout=30)
            part = _default_partition()
            raise Busy(f"takeover: partition {part} busy: 1 node not free within {immediate} s (raise it with "
                       f"--immediate) (job {job}, cancelled); squeue -p {part} shows {_squeue(part)}") from None
        t = time.monotonic()
        took = sh(["scontrol", "takeover"], timeout=left())
        if took.returncode != 0:
            return {"ok": False, "detail": f"scontrol takeover exit {took.returncode}: {took.stderr.strip()[-300:]}"}
        # the backup has control once the primary is DOWN and a controller answers for the job
        _until(f"{backup} to take control (scontrol ping: {primary} DOWN)",
               lambda: (p := _ping()) and p[0][2] == "DOWN" and len(p) > 1 and p[1][2] == "UP", left())
        under_backup = _until(f"{backup} to answer for job {job}", lambda: _job_state(job), left())
        steps.append(f"takeover by {backup} in {time.monotonic() - t:.0f} s")
        problems = [] if under_backup == running else [f"under {backup} job {job} is {under_backup!r}, was {running!r}"]
        new = srun("takeover", ["-N1", "-n1", "-t", "2"], ["true"], f"1 node under {backup}", left(), immediate)
        if new.returncode != 0:
            problems.append(f"{backup} did not run a new job: srun exit {new.returncode}: {new.stderr.strip()[-200:]}")
        t = time.monotonic()
        started = subprocess.run(start, shell=True, capture_output=True, text=True, timeout=left())
        if started.returncode != 0:
            problems.append(f"`{start}` exit {started.returncode}: {started.stderr.strip()[-300:]}; slurmctld on "
                            f"{primary} is still down, {backup} keeps control")
            return {"ok": False, "detail": problems}
        _until(f"{primary} to take control back (scontrol ping: both UP)",
               lambda: (p := _ping()) and len(p) > 1 and p[0][2] == "UP" and p[1][2] == "UP", left())
        back = _until(f"{primary} to answer for job {job}", lambda: _job_state(job), left())
        steps.append(f"back to {primary} in {time.monotonic() - t:.0f} s")
        if back != running:
            problems.append(f"back under {primary} job {job} is {back!r}, was {running!r}")
        sh(["scancel", job], timeout=30)  # it survived both: its node, free again, is one the GPU job needs
        gpus, proven = after_hand_back(cfg, primary, name, end, immediate)
        problems += gpus
        return {"ok": not problems,
                "detail": problems or f"job {job} ({running}) survived {', then '.join(steps)}; each ran a new job; "
                                      f"{proven}"}
    except TimeoutError as e:
        return {"ok": False, "detail": [f"{e} (job {job}; done: {', '.join(steps) or 'nothing'})",
                                        f"scontrol ping: {[' '.join(p) for p in _ping()]}"]}
    finally:
        sh(["scancel", job], timeout=30)


# sinfo(1) %t of a node that takes a job: idle, mix or alloc, and responding (no `*`)
READY_STATES = ("idle", "mix", "alloc")
# The most lines a failed wait for the nodes lists, one per node or job (a plane can have thousands of nodes)
NOT_READY_LINES = 20
# Each task of the GPU job (one per node) prints its job ID, node and the GPUs it was given
GPU_TASK = 'echo "$SLURM_JOB_ID $SLURMD_NODENAME ${CUDA_VISIBLE_DEVICES:-}"'


def not_ready(cfg: dict, primary: str, name: str) -> list[str]:
    """Under the primary after a hand-back, one line per planned node that has not registered with it, is not idle,
    mix or alloc and responding, or lacks its planned GRES, and per job of the check's (named `name`) still listed:
    one that ended while its node's slurmd was sending to the backup can stay completing, holding its GPUs.

    Registered: sinfo's %v, the slurmd's version, which a controller learns only from the node's registration (the
    state it recovers at startup, node_state in StateSaveLocation, does not keep it: node_mgr.c _dump_node_state), so
    it shows N/A until the node registered with this controller; until then a job's GPU step can fail ("Invalid
    generic resource (gres) specification", seen on 22.05) though sinfo shows the node idle with its GRES."""
    out = sh(["sinfo", "-h", "-N", "-o", "%N|%t|%G|%v"], timeout=30)
    if out.returncode != 0:
        return [f"sinfo exit {out.returncode}: {_last_line(out.stderr)}"]
    seen = {r[0]: r[1:] for r in (line.split("|", 3) for line in out.stdout.splitlines()) if len(r) == 4}
    problems = []
    for node, want in sorted(cfg["nodes"].items()):
        if node not in seen:
            problems.append(f"{node}: not in sinfo under {primary}")
            continue
        state, gres, version = seen[node]
        wrong = [] if re.fullmatch(r"\d[\w.-]*", version) else [f"not registered with {primary} (slurmd version "
                                                                 f"{version or 'none'}: its slurmd still sends to the "
                                                                 f"backup, or is down)"]
        wrong += [] if state in READY_STATES else [f"state {state}"]
        wrong += [f"GRES {gres}, planned {planned_gres(want)}"] if gres_differs(want, gres) else []
        if wrong:
            problems.append(f"{node}: {', '.join(wrong)}")
    q = sh(["squeue", "-h", "-n", name, "-o", "%i|%T|%N"], timeout=30)
    if q.returncode != 0:
        problems.append(f"squeue exit {q.returncode}: {_last_line(q.stderr)}")
    for row in q.stdout.splitlines():
        job, state, nodes = (row.split("|") + ["", ""])[:3]
        if job.strip():
            problems.append(f"job {job.strip()} of the check still {state} on {nodes or 'no node'}")
    return problems


def _last_line(text: str) -> str:
    """A command's last non-empty line of output (srun's error comes after spank's notes), at most 300 characters."""
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "nothing")[-300:]


def after_hand_back(cfg: dict, primary: str, name: str, end: float, immediate: int) -> tuple[list[str], str]:
    """Once control is back on the primary: every slurmd registers with it again, then one job over every node asks
    every GPU of each (gpu_jobs). Returns the problems, one line each, and what was proven.

    A slurmd keeps sending to the controller it last reached (src/common/slurm_protocol_api.c,
    slurm_send_recv_controller_msg's static use_backup, since 16.05): after a hand-back its registration, prolog and
    job-completion messages go to the backup, now standing by, which refuses them ("Invalid RPC received ... while
    in standby mode"), and it turns to the primary only SlurmctldTimeout/2 s later. The primary recovers each node
    from StateSaveLocation without what only a registration tells (the slurmd's version, its GPUs' device indexes:
    `scontrol -d show node` GresUsed without IDX), so a node that registered with the backup lacks its GRES under the
    primary, and a job that ended meanwhile can stay completing, holding its GPUs. `scontrol reconfigure` makes every
    slurmd register again (scontrol(1): slurmctld forwards it to every slurmd; 22.05's slurmd.c _reconfigure ends in
    send_registration_msg; from 23.11 each slurmd starts anew and registers at startup, slurmd.c _try_to_reconfig),
    which reaches the primary within SlurmctldTimeout/2 s; the wait for it is bounded by the check's own time."""
    t = time.monotonic()
    rc = sh(["scontrol", "reconfigure"], timeout=max(1.0, min(HANDOVER_S, end - time.monotonic())))
    if rc.returncode != 0:
        return [f"scontrol reconfigure exit {rc.returncode}: {_last_line(rc.stderr)}; the slurmds may not have "
                f"registered with {primary}"], ""
    while (problems := not_ready(cfg, primary, name)) and time.monotonic() < end - 1:
        time.sleep(1)
    if problems:
        more = [f"... and {len(problems) - NOT_READY_LINES} more"] if len(problems) > NOT_READY_LINES else []
        return [f"not ready under {primary} {time.monotonic() - t:.0f} s after `scontrol reconfigure` (each node "
                f"registered, idle, mix or alloc, with its GRES; no job of the check left):",
                *problems[:NOT_READY_LINES], *more], ""
    ready = f"all {len(cfg['nodes'])} nodes registered with {primary}, with their GRES, {time.monotonic() - t:.0f} s " \
            f"after `scontrol reconfigure`"
    problems, proven = gpu_jobs(cfg, primary, end, immediate)
    return problems, f"{ready}, and {proven}"


def gpu_jobs(cfg: dict, primary: str, end: float, immediate: int) -> tuple[list[str], str]:
    """One job over every node with every GPU of each (srun -N<all> -w <all> --ntasks-per-node=1 --gres=gpu:<n>
    --immediate), each task printing the GPUs it got; one job per GPU count where the nodes' counts differ (a job asks
    the same GRES on each of its nodes). Returns one line per node that ran no task or saw fewer GPUs, and what ran."""
    groups: dict[int, list[str]] = {}
    for node, want in cfg["nodes"].items():
        groups.setdefault(want["gpus"], []).append(node)
    problems, jobs, shapes = [], set(), []
    for gpus, nodes in sorted(groups.items(), reverse=True):
        nodes.sort()
        asked = f"gpu:{gpus}" if gpus else "no GPU"
        with nodelist(nodes) as listed:
            opts = ["-N", str(len(nodes)), "-w", listed, "--ntasks-per-node=1", "-t", "2",
                    *([f"--gres=gpu:{gpus}"] if gpus else [])]
            out = srun("takeover", opts, ["sh", "-c", GPU_TASK],
                       f"{len(nodes)} nodes with {asked} each under {primary}",
                       max(1.0, min(HANDOVER_S, end - time.monotonic())), immediate)
        rows = [line.split() for line in out.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
        seen = {r[1]: r[2] if len(r) > 2 else "" for r in rows if len(r) > 1}
        jobs.update(r[0] for r in rows)
        with _LOCK:
            JOBS.update(jobs)
        shapes.append(f"{asked} on {len(nodes)} nodes")
        if out.returncode != 0 and not seen:
            problems.append(f"{primary} did not run the job over {len(nodes)} nodes with {asked} each: srun exit "
                            f"{out.returncode}: {_last_line(out.stderr)}")
            continue
        for node in nodes:
            if node not in seen:
                problems.append(f"{node}: no task ran in the job with {asked} (srun exit {out.returncode}: "
                                f"{_last_line(out.stderr)})")
            elif gpus and len([g for g in seen[node].split(",") if g]) != gpus:
                problems.append(f"{node}: its task saw GPUs {seen[node] or 'none'!r} of the {asked} it asked")
    return problems, (f"job{'s' if len(jobs) > 1 else ''} {', '.join(sorted(jobs, key=int))} had every GPU of each "
                      f"({', '.join(shapes)})")


def judge_nccl(log: str, transport: str, floor: float) -> dict:
    """The verdict on one all_reduce_perf run's output (stdout and NCCL_DEBUG=INFO lines together)."""
    problems = []
    via = set(re.findall(r"\bvia (NET/[A-Za-z]+)", log))
    sockets = transport != "NET/Socket" and ("NET/Socket" in via or bool(re.search(r"NCCL INFO Using network Socket", log)))
    if sockets:
        problems.append("NCCL fell back to sockets (via NET/Socket / Using network Socket)")
    if transport not in via:
        problems.append(f"no inter-node channel via {transport} (saw {sorted(via) or 'none'}; is NCCL_DEBUG=INFO set?)")
    rows = [line.split() for line in log.splitlines()
            if re.match(r"^\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s", line)]
    if not rows:
        problems.append("no all_reduce_perf result rows")
        busbw = 0.0
    else:
        # columns: size count type redop root | out-of-place time algbw busbw #wrong | in-place time algbw busbw #wrong
        busbw = max(float(x) for r in rows for x in (r[7], r[11] if len(r) > 11 else r[7]))
        wrong = [r for r in rows if r[8] not in ("0", "N/A") or (len(r) > 12 and r[12] not in ("0", "N/A"))]
        if wrong:
            problems.append(f"{len(wrong)} sizes with wrong results")
        if busbw < floor:
            problems.append(f"peak busbw {busbw} GB/s below the {floor} GB/s floor")
    return {"ok": not problems, "detail": problems or f"via {transport}, peak busbw {busbw} GB/s >= {floor}",
            "busbw_gbps": busbw, "socket_fallback": sockets}


def check_nccl(cfg: dict, log_file: str | None, binary: str | None = None,
               bound: float = CHECK_BOUND_S["nccl"], immediate: int = IMMEDIATE_S) -> dict:
    built = cfg.get("nccl_tests") or {}
    if log_file:
        log = Path(log_file).read_text()
    else:
        gpus = min((n["gpus"] for n in cfg["nodes"].values()), default=0) or 1
        # the binary given (--nccl-tests, $ORCHGEN_NCCL_TESTS), else the one the bring-up built (checks.json), else
        # all_reduce_perf on the nodes' PATH; a node without it says so (the marker) instead of slurmstepd's execve error
        fallback = "" if binary else "all_reduce_perf"
        binary = binary or built.get("binary") or "all_reduce_perf"
        probe = (f'b="$0"; command -v "$b" >/dev/null 2>&1 || b="{fallback}"; '
                 f'[ -n "$b" ] && command -v "$b" >/dev/null 2>&1 || {{ echo "{NCCL_MISSING} $0 on $(hostname)"; exit 127; }}; '
                 'exec "$b" "$@"')
        # checks.json nccl_env: on nodes of multi-node NVLink domains NCCL_MNNVL_ENABLE=0, so the two nodes talk over
        # their compute rails (NCCL would otherwise go over NVLink, "via P2P/MNNVL", and never use the fabric checked)
        extra = "".join(f",{k}={v}" for k, v in sorted((cfg.get("nccl_env") or {}).items()))
        out = srun("nccl", ["-N", "2", f"--ntasks-per-node={gpus}", f"--gres=gpu:{gpus}", "-t", "15",
                            f"--export=ALL,NCCL_DEBUG=INFO{extra}"],
                   ["sh", "-c", probe, binary, "-b", "8", "-e", "4G", "-f", "2", "-g", "1"],
                   f"2 nodes with gpu:{gpus}", bound, immediate)
        log = out.stdout + out.stderr
        if NCCL_MISSING in log:
            where = sorted({m for m in re.findall(re.escape(NCCL_MISSING) + r" \S+ on (\S+)", log)})
            return {"ok": False, "status": "NOT INSTALLED",
                    "detail": [f"NOT INSTALLED: nccl-tests' {binary} is not on {', '.join(where) or 'the nodes'} "
                               "(https://github.com/NVIDIA/nccl-tests)", *(built.get("steps") or NCCL_TESTS_STEPS)]}
        if out.returncode != 0:
            return {"ok": False, "detail": f"all_reduce_perf over 2 nodes exit {out.returncode}: {log.strip()[-500:]}"}
    return judge_nccl(log, cfg["nccl_transport"], float(cfg["busbw_floor_gbps"]))


def kubectl(ctx: str | None, *args: str, input: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    argv = [os.environ.get("KUBECTL") or "kubectl", *(["--context", ctx] if ctx else []), *args]
    try:
        return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: not found (install kubectl or set KUBECTL)")


def _gang_pods(ctx: str | None, g: dict) -> list[dict]:
    out = kubectl(ctx, "get", "pods", "-n", g["namespace"], "-l", g["selector"], "-o", "json")
    if out.returncode != 0:
        raise RuntimeError(f"kubectl get pods: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout)["items"]


def _gang_delete(ctx: str | None, g: dict) -> str | None:
    """Delete the test job (and its pods, in the foreground); None when all is gone."""
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": g["objects"]})
    kubectl(ctx, "delete", "-f", "-", "--ignore-not-found", "--cascade=foreground", "--wait=true",
            "--timeout=120s", input=listing, timeout=150)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        try:
            if not _gang_pods(ctx, g):
                return None
        except RuntimeError as e:
            return str(e)
        time.sleep(2)
    return f"pods {g['selector']} still in {g['namespace']} after 120 s"


def _gang_reasons(ctx: str | None, g: dict, pods: list[dict]) -> list[str]:
    """What the scheduler says about the gang: Kueue's Workload conditions, Pending pods' PodScheduled
    messages, the top objects' warning events."""
    names = {o["metadata"]["name"] for o in g["objects"]}
    why: list[str] = []
    if g.get("scheduler") == "kueue":
        w = kubectl(ctx, "get", "workloads.kueue.x-k8s.io", "-n", g["namespace"], "-o", "json")
        for item in json.loads(w.stdout)["items"] if w.returncode == 0 else []:
            if {r.get("name") for r in item["metadata"].get("ownerReferences", [])} & names:
                admitted = bool(item.get("status", {}).get("admission"))
                conds = [f"{c['type']}={c['status']}: {c.get('message', '')}"
                         for c in item.get("status", {}).get("conditions", [])]
                why.append(f"Kueue Workload {item['metadata']['name']} admitted={admitted}; " + "; ".join(conds))
    for p in pods:
        if not p["spec"].get("nodeName"):
            for c in p.get("status", {}).get("conditions", []):
                if c["type"] == "PodScheduled" and c.get("message"):
                    why.append(f"pod {p['metadata']['name']}: {c['message']}")
                    break
    ev = kubectl(ctx, "get", "events", "-n", g["namespace"], "-o", "json")
    for e in json.loads(ev.stdout)["items"] if ev.returncode == 0 else []:
        if e.get("involvedObject", {}).get("name") in names and e.get("type") == "Warning":
            why.append(f"{e['involvedObject']['kind']} {e['involvedObject']['name']}: {e.get('message', '')}")
    return why[-8:] or ["nothing said why (no Workload condition, pod condition or warning event)"]


def check_gang(cfg: dict, ctx: str | None, timeout: float | None = None) -> dict:
    g = cfg["kubernetes"]["gang"]
    if "skip" in g:
        return {"ok": True, "detail": f"not run: {g['skip']}"}
    n, timeout = g["pods"], float(timeout or g["timeout_s"])
    where = f"{g['namespace']}, {n} pods of 1 GPU on pool {g['pool']}, {g['scheduler']}"
    leftover = _gang_delete(ctx, g)  # a test job an interrupted run left behind
    if leftover:
        return {"ok": False, "detail": f"cannot clear an earlier test job: {leftover}"}
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": g["objects"]})
    applied = kubectl(ctx, "apply", "-f", "-", input=listing)
    if applied.returncode != 0:
        return {"ok": False, "detail": f"the gang test job ({where}) was refused: {applied.stderr.strip()[-500:]}"}
    try:
        end = time.monotonic() + timeout
        while True:
            pods = _gang_pods(ctx, g)
            running = sorted(p["spec"]["nodeName"] for p in pods
                             if p["spec"].get("nodeName") and p.get("status", {}).get("phase") == "Running")
            if len(running) >= n:
                return {"ok": True, "detail": f"admitted whole: {len(running)}/{n} pods Running on {running} ({where})"}
            if time.monotonic() >= end:
                break
            time.sleep(2)
        reasons = _gang_reasons(ctx, g, pods)
        if not running and not any(p["spec"].get("nodeName") for p in pods):
            return {"ok": False, "detail": [f"never admitted in {timeout:.0f} s: {len(pods)} pods exist, none "
                                            f"scheduled ({where})", *reasons]}
        missing = f", {n - len(pods)} never created" if len(pods) < n else ""
        return {"ok": False, "detail": [f"split after {timeout:.0f} s: {len(running)} pods Running, "
                                        f"{len(pods) - len(running)} Pending, of a gang of {n}{missing} ({where})",
                                        *reasons]}
    except (RuntimeError, ValueError, KeyError) as e:
        return {"ok": False, "detail": f"gang test job ({where}): {e}"}
    finally:
        gone = _gang_delete(ctx, g)
        if gone:
            print(f"gang test job not cleaned up: {gone}", file=sys.stderr)


KUBE_NCCL_RESULT = re.compile(r"orchgen-nccl ranks=(\d+) bytes=(\d+) algbw_gbps=([\d.]+) busbw_gbps=([\d.]+) "
                              r"wrong=(\d+)")


def judge_kube_nccl(log: str, transports: list[str], floor: float) -> dict:
    """The verdict on the Kubernetes NCCL run's logs: its inter-node channels ("via NET/IB/0/GDRDMA",
    "via NET/Libfabric/1/GDRDMA/Shared", "via NET/Socket/0"), NCCL's network choice ("Using network IB"),
    and rank 0's result line."""
    problems = []
    via = set(re.findall(r"\bvia (NET/[^/\n]+)", log))
    chosen = set(re.findall(r"NCCL INFO Using network ([A-Za-z][A-Za-z ]*[A-Za-z])", log))
    if "NET/Socket" not in transports and ("NET/Socket" in via or "Socket" in chosen):
        problems.append(f"NCCL fell back to sockets (via NET/Socket / Using network Socket) where the plan wired "
                        f"{' or '.join(transports)}")
    if not via & set(transports):
        problems.append(f"no inter-node channel via {' or '.join(transports)} (saw {sorted(via) or 'none'}; "
                        "is NCCL_DEBUG=INFO set?)")
    m = KUBE_NCCL_RESULT.search(log)
    busbw = 0.0
    if not m:
        problems.append("no result line from rank 0 (orchgen-nccl ranks=...)")
    else:
        busbw, wrong = float(m[4]), int(m[5])
        if wrong:
            problems.append(f"{wrong} elements of the all_reduce sum were wrong")
        if busbw < floor:
            problems.append(f"busbw {busbw} GB/s below the {floor} GB/s floor")
    return {"ok": not problems, "busbw_gbps": busbw,
            "detail": problems or f"via {sorted(via & set(transports))[0]}, busbw {busbw} GB/s >= {floor}"}


def _pod_phases(pods: list[dict]) -> tuple[int, int]:
    """(pods Succeeded, pods Failed) of the check's run: by its pods, whichever object made them (a Job,
    a Volcano Job, KAI's pods)."""
    phases = [p.get("status", {}).get("phase") for p in pods]
    return phases.count("Succeeded"), phases.count("Failed")


def check_kube_nccl(cfg: dict, ctx: str | None, log_file: str | None, timeout: float | None = None) -> dict:
    n = cfg["kubernetes"].get("nccl") or {"skip": "checks.json has no kubernetes.nccl"}
    if "skip" in n:
        return {"ok": True, "detail": f"not run: {n['skip']}"}
    floor = float(n["busbw_floor_gbps"])
    if log_file:
        return judge_kube_nccl(Path(log_file).read_text(), n["transport"], floor)
    pods_n, timeout = n["pods"], float(timeout or n["timeout_s"])
    where = f"{n['namespace']}, {pods_n} pods of {n['gpus_per_pod']} GPUs on pool {n['pool']} over {n['network']}"
    leftover = _gang_delete(ctx, n)
    if leftover:
        return {"ok": False, "detail": f"cannot clear an earlier NCCL check job: {leftover}"}
    applied = kubectl(ctx, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                 "items": n["objects"]}))
    if applied.returncode != 0:
        return {"ok": False, "detail": f"the NCCL check job ({where}) was refused: {applied.stderr.strip()[-500:]}"}
    try:
        end, nodes = time.monotonic() + timeout, []
        while True:
            pods = _gang_pods(ctx, n)
            nodes = sorted({p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")})
            done, failed = _pod_phases(pods)
            if done >= pods_n or failed:
                break
            if time.monotonic() >= end:
                placed = (f"{len(pods)} pods, on nodes {nodes}" if nodes else f"{len(pods)} pods, none scheduled")
                return {"ok": False, "detail": [f"did not finish in {timeout:.0f} s: {placed} ({where})",
                                                *_gang_reasons(ctx, n, pods)]}
            time.sleep(5)
        logs = kubectl(ctx, "logs", "-n", n["namespace"], "-l", n["selector"], "--prefix", "--tail=-1",
                       "--max-log-requests=10", "-c", "main", timeout=120)
        verdict = judge_kube_nccl(logs.stdout, n["transport"], floor)
        if failed:
            verdict["ok"] = False
            verdict["detail"] = [f"{failed} pods failed ({where}): " + logs.stdout.strip()[-400:],
                                 *(verdict["detail"] if isinstance(verdict["detail"], list) else [])]
        elif len(nodes) < pods_n:
            verdict["ok"] = False
            verdict["detail"] = [f"ran on {nodes}, not {pods_n} nodes: no channel crossed the fabric ({where})"]
        return verdict
    except (RuntimeError, ValueError, KeyError) as e:
        return {"ok": False, "detail": f"NCCL check job ({where}): {e}"}
    finally:
        gone = _gang_delete(ctx, n)
        if gone:
            print(f"NCCL check job not cleaned up: {gone}", file=sys.stderr)


SLURM_CHECKS = ("gres", "allocation", "health", "takeover", "nccl")
KUBE_CHECKS = ("gang", "kube-nccl")
CHECKS = SLURM_CHECKS + KUBE_CHECKS


def write_textfile(path: str, results: dict) -> None:
    """The results as Prometheus text (a skipped check is left out): orchgen_check_ok per check, and NCCL's socket
    fallback where the NCCL check ran (NCCL exports no metric of its transport: this verdict is what the bundle's
    SlurmNCCLOnSockets alert reads). Written beside, then renamed, so the node exporter never reads half a file."""
    lines = ["# HELP orchgen_check_ok The production check passed (1) or failed (0) on its last run.",
             "# TYPE orchgen_check_ok gauge"]
    lines += [f'orchgen_check_ok{{check="{n}"}} {int(bool(r["ok"]))}' for n, r in sorted(results.items())
              if r["ok"] is not None]
    if "socket_fallback" in results.get("nccl", {}):
        lines += ["# HELP orchgen_nccl_socket_fallback NCCL fell back to sockets where the plan wired RDMA (last check).",
                  "# TYPE orchgen_nccl_socket_fallback gauge",
                  f"orchgen_nccl_socket_fallback {int(results['nccl']['socket_fallback'])}"]
    lines += ["# HELP orchgen_checks_timestamp_seconds When the checks last ran.",
              "# TYPE orchgen_checks_timestamp_seconds gauge", f"orchgen_checks_timestamp_seconds {int(time.time())}"]
    tmp = f"{path}.tmp"
    Path(tmp).write_text("\n".join(lines) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _on_signal(signum, frame):  # SIGTERM: leave through main's finally (scancel), as SIGINT does
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(HERE / "checks.json"))
    ap.add_argument("--skip", action="append", default=[], choices=CHECKS, help="a check not to run (repeatable)")
    ap.add_argument("--only", action="append", default=[], choices=CHECKS)
    ap.add_argument("--nccl-log", help="judge this recorded all_reduce_perf output instead of running one")
    ap.add_argument("--nccl-tests", default=os.environ.get("ORCHGEN_NCCL_TESTS") or None,
                    help="nccl-tests' all_reduce_perf on the nodes (default: where the bring-up builds it, checks.json "
                    "nccl_tests.binary, else on PATH; or $ORCHGEN_NCCL_TESTS)")
    ap.add_argument("--immediate", type=int, default=IMMEDIATE_S,
                    help=f"seconds a check's job may wait for its nodes (srun --immediate; default {IMMEDIATE_S})")
    ap.add_argument("--check-timeout", type=float, help="the most seconds one check may take (default: per check)")
    ap.add_argument("--start-controller", default=None,
                    help="the command that starts slurmctld on the primary again after the takeover check's "
                         f"`scontrol takeover` (default: {START_CONTROLLER!r}, run on the primary)")
    ap.add_argument("--plane", choices=("slurm", "kubernetes"), help="only this plane's checks")
    ap.add_argument("--kube-context", default=os.environ.get("ORCHGEN_KUBE_CONTEXT") or None,
                    help="the kubeconfig context of the gang check (default: the current one)")
    ap.add_argument("--gang-timeout", type=float, help="seconds to wait for the gang (default: checks.json's)")
    ap.add_argument("--kube-nccl-log", help="judge these recorded logs of the Kubernetes NCCL run instead of one")
    ap.add_argument("--textfile", help="also write the results as Prometheus text to this file (the node exporter's "
                                       "textfile directory: the bundle's alerts read it)")
    args = ap.parse_args(argv)
    cfg = json.loads(Path(args.config).read_text())
    # the plan's checks: Slurm's where checks.json has Slurm nodes, the gang where it has a Kubernetes plane
    planes = {"slurm": SLURM_CHECKS if "nodes" in cfg else (), "kubernetes": KUBE_CHECKS if "kubernetes" in cfg else ()}
    mine = [c for p, cs in planes.items() if args.plane in (None, p) for c in cs]
    run = [c for c in CHECKS if c in mine and c not in args.skip and (not args.only or c in args.only)]
    results = {}
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        for name in run:
            bound, imm = args.check_timeout or CHECK_BOUND_S[name], args.immediate
            try:
                if name == "gres":
                    results[name] = check_gres(cfg)
                elif name == "allocation":
                    results[name] = (check_allocation(cfg, bound=bound, immediate=imm) if len(cfg["nodes"]) >= 2
                                     else {"ok": True, "detail": "one node"})
                elif name == "health":
                    results[name] = check_health(cfg, bound, imm)
                elif name == "takeover":
                    results[name] = check_takeover(cfg, bound, imm, args.start_controller)
                elif name == "gang":
                    results[name] = check_gang(cfg, args.kube_context, args.gang_timeout)
                elif name == "kube-nccl":
                    results[name] = check_kube_nccl(cfg, args.kube_context, args.kube_nccl_log,
                                                    args.check_timeout)
                else:
                    results[name] = check_nccl(cfg, args.nccl_log, args.nccl_tests, bound, imm)
            except Busy as e:
                results[name] = {"ok": False, "status": "BUSY", "detail": str(e)}
            if results[name]["ok"] is False:  # one line on stderr per failed check, what the JSON says first
                d = results[name]["detail"]
                print(f"check {name} failed: {d[0] if isinstance(d, list) else d}", file=sys.stderr)
    except KeyboardInterrupt:
        print("checks/run.py: interrupted (SIGINT); cancelling the jobs it started", file=sys.stderr)
        return 130
    finally:
        cancel_jobs()
    for name in args.skip:
        if name in mine:
            results[name] = {"ok": None, "detail": "skipped (--skip)"}
    print(json.dumps(results, indent=1, sort_keys=True))
    if args.textfile:
        write_textfile(args.textfile, results)
    failed = [r for r in results.values() if r["ok"] is False]
    if failed and all(r.get("status") == "NOT INSTALLED" for r in failed):
        return NOT_INSTALLED_EXIT
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
