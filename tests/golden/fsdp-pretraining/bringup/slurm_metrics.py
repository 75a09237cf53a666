#!/usr/bin/env python3
"""Slurm's metrics for Prometheus: sinfo and squeue read once, written as a Prometheus text file into the node
exporter's textfile directory, which Debian's prometheus-node-exporter serves on :9100 (its textfile collector). The
bring-up installs it on every controller and runs it every minute (systemd timer orchgen-slurm-metrics.timer), on
every release: before 25.11 Slurm serves no metrics of its own, 25.11 none of GPUs, and no release counts apart the
pending jobs that wait on resources or priority (orchgen_slurm_partition_jobs_pending_resources, which the alert
SlurmGPUsPendingWhileIdle reads; slurmctld's slurm_partition_jobs_pending counts held, dependent and limited jobs too).

Why not an exporter of its own: Debian packages no Slurm exporter for bookworm or trixie (`apt-cache search slurm`
lists none; packages.debian.org has no prometheus-slurm-exporter), the maintained ones are Go builds from GitHub
(the bring-up installs from the OS's archive only), and the node exporter already runs on every host. The metrics
the bundle's alerts read carry the names Slurm 25.11+ serves itself (https://slurm.schedmd.com/metrics.html), so one
rule file and one dashboard serve both; the others are this script's own (orchgen_slurm_*).

    slurm_metrics.py [--out DIR]     (default /var/lib/prometheus/node-exporter; standard library only)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

FILE = "orchgen_slurm.prom"


def run(argv: list[str]) -> str:
    # 30 s: a controller that takes longer to answer is reported by orchgen_slurm_controllers_up and the stale alert
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


def gpus(gres: str) -> int:
    """GPUs in a GRES string: sinfo's %G ("gpu:a100:2(S:0-1)", "gpu:2") or squeue's %b ("gres:gpu:2", "gres/gpu:2")."""
    return sum(int(n) for n in re.findall(r"gpu(?::[^:,(]+)?:(\d+)", gres))


# squeue's reasons (%r) of a pending job that would start on free resources: "Resources" (the job is waiting for
# resources to become available) and "Priority" (one or more higher priority jobs exist for this partition or advanced
# reservation), squeue(1) JOB REASON CODES. Every other reason is a job that cannot start when GPUs free up: held
# (JobHeldUser, JobHeldAdmin), waiting on another job (Dependency, DependencyNeverSatisfied) or its start time
# (BeginTime), blocked by a limit (AssocGrp*/AssocMax*/QOSGrp*/QOSMax* limits, PartitionNodeLimit, PartitionTimeLimit),
# by its partition (PartitionDown, PartitionInactive), a reservation or license, or nodes it named (ReqNodeNotAvail)
RUNNABLE_REASONS = ("Resources", "Priority")


def state_of(compact: str) -> str:
    """sinfo's compact node state without its flags' marks (`*` not responding, `~` powered off, ...)."""
    s = compact.rstrip("*~#!%$@^-+")
    return "drain" if s in ("drain", "drng") else s


def collect() -> list[str]:
    ping = run(["scontrol", "ping"])
    up = len(re.findall(r"\bis UP\b", ping))
    # one row per node and partition: NODE|PARTITION|GRES|STATE (the default partition's name ends in `*`)
    nodes: dict[str, str] = {}
    part_gpus: dict[str, int] = {}
    for line in run(["sinfo", "-h", "-N", "-o", "%N|%P|%G|%t"]).splitlines():
        node, part, gres, state = line.split("|")
        nodes[node] = state_of(state)
        part_gpus[part.rstrip("*")] = part_gpus.get(part.rstrip("*"), 0) + gpus(gres)
    alloc = dict.fromkeys(part_gpus, 0)
    pending = dict.fromkeys(part_gpus, 0)
    runnable = dict.fromkeys(part_gpus, 0)
    # one row per job: PARTITION(S)|STATE|NODES|TRES-PER-NODE|REASON (a job pending in several partitions counts in
    # each; the reason last: it is free text)
    for line in run(["squeue", "-h", "-a", "-t", "PD,R", "-o", "%P|%T|%D|%b|%r"]).splitlines():
        parts, state, count, tres, reason = line.split("|", 4)
        for p in parts.split(","):
            if state == "PENDING":
                pending[p] = pending.get(p, 0) + 1
                if reason in RUNNABLE_REASONS:
                    runnable[p] = runnable.get(p, 0) + 1
            else:  # GPUs per node (--gres/--gpus-per-node) times nodes; a job's --gpus total shows no %b
                alloc[p] = alloc.get(p, 0) + gpus(tres) * int(count or 0)
    states = sorted(set(nodes.values()))
    out = [
        "# HELP orchgen_slurm_controllers_up Controllers that answer scontrol ping.",
        "# TYPE orchgen_slurm_controllers_up gauge",
        f"orchgen_slurm_controllers_up {up}",
        "# HELP orchgen_slurm_nodes Nodes by their state (sinfo's compact state, flags stripped).",
        "# TYPE orchgen_slurm_nodes gauge",
        *[f'orchgen_slurm_nodes{{state="{s}"}} {sum(1 for v in nodes.values() if v == s)}' for s in states],
        "# HELP slurm_nodes_drain Nodes with the DRAIN flag (draining or drained).",
        "# TYPE slurm_nodes_drain gauge",
        f"slurm_nodes_drain {sum(1 for v in nodes.values() if v == 'drain')}",
    ]
    for name, what, values in (("slurm_partition_gpus", "GPUs of the partition's nodes.", part_gpus),
                               ("slurm_partition_jobs_gpus_alloc", "GPUs allocated to the partition's running jobs.",
                                alloc),
                               ("slurm_partition_jobs_pending", "Jobs pending in the partition.", pending),
                               ("orchgen_slurm_partition_jobs_pending_resources",
                                "Jobs pending in the partition on resources or priority (squeue reason Resources, "
                                "Priority), not held, dependent or limited.", runnable)):
        out += [f"# HELP {name} {what}", f"# TYPE {name} gauge"]
        out += [f'{name}{{partition="{p}"}} {values[p]}' for p in sorted(values)]
    out += ["# HELP orchgen_slurm_metrics_timestamp_seconds When this file was written.",
            "# TYPE orchgen_slurm_metrics_timestamp_seconds gauge",
            f"orchgen_slurm_metrics_timestamp_seconds {int(time.time())}"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/var/lib/prometheus/node-exporter", help="the node exporter's textfile directory")
    args = ap.parse_args(argv)
    try:
        lines = collect()
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        # controllers down: say so in the file (the alert reads it), keep the rest out rather than stale
        print(f"slurm_metrics.py: {e}", file=sys.stderr)
        # (HELP as in the full file: `promtool check metrics` flags a metric without one)
        lines = ["# HELP orchgen_slurm_controllers_up Controllers that answer scontrol ping.",
                 "# TYPE orchgen_slurm_controllers_up gauge", "orchgen_slurm_controllers_up 0",
                 "# HELP orchgen_slurm_metrics_timestamp_seconds When this file was written.",
                 "# TYPE orchgen_slurm_metrics_timestamp_seconds gauge",
                 f"orchgen_slurm_metrics_timestamp_seconds {int(time.time())}"]
    # written beside, then renamed: the node exporter never reads half a file (its textfile collector's advice)
    fd, tmp = tempfile.mkstemp(dir=args.out, prefix=".orchgen_slurm.")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(args.out, FILE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
