#!/usr/bin/env python3
"""Benchmark orchgen as a user runs it (a subprocess each time), every figure side by side with the floor.

    .venv/bin/python benchmarks/bench.py [--sizes 2048,16384] [--repeat 3] [--no-validate]
                                         [--simulate [--nodes 16384] [--jobs 1000000]] [--json FILE]

The floor is a bare `python -c "import generator"`, measured the same way. Since `generator` imports its
models lazily, that is little more than the interpreter's start; the run also gives the libraries' floor
(`import pydantic, yaml, jinja2, click`, what every plan imports), where issue 41's 0.09 s floor was, and
that with one pydantic model defined (a model's first build imports pydantic's schema machinery: any
command that validates its input with pydantic starts there). For each fleet size (synthetic:
8 GPUs per node, two pools, up to 64 tenants, 20 workloads, a Slurm + Kubernetes hybrid with Argo CD)
it prints the best wall time of `orchgen plan` of `--repeat` runs, as seconds and as a ratio to the
floor, with its target (issue 41: 16,384 GPUs at most 2x the floor, 131,072 at most 3x), the least
user+system CPU time and the bundle written. Then `orchgen validate` of the 16,384-GPU bundle with
`--crds` and `--chart-defaults` from the reference data ($ORCHGEN_REFERENCE, else ../shared/reference;
target 1 s), and with --simulate `orchgen simulate --trace` of the same synthetic fleet and a trace of
`--jobs` jobs over a week (single-node jobs of 1-8 GPUs, 2-16-node jobs on Slurm and 4-pod gangs on
Kubernetes) asking for about 1.8x the week's GPU time (target: 1,000,000 jobs on 16,384 nodes in 60 s).

It records the machine's load average before and after, and judges whether the run was quiet by the
*other* work on the machine, not its own: timings on a loaded machine are mostly other people's work, and
the figures say which kind of run they come from. A run is quiet when the 1-minute load average before it
was at or under QUIET_LOAD per CPU core and, during it, the other processes kept at most QUIET_LOAD per
core busy on average. The load average after a run cannot say that: a run of a minute or more (simulate,
the default sizes) keeps one core busy itself, so its own 'after' reading was never under 0.25 per core
on 2 cores, and a quiet machine read as loaded. "Other work" is the machine's busy CPU time over the run
(/proc/stat: user, nice, system, irq, softirq, steal) less the benchmark's own (its process and the
commands it timed, getrusage); where there is no /proc/stat, the 1-minute load after, less the cores the
run kept busy on average. Not a test by itself (tests/test_benchmark.py holds a quiet machine to 1.5x the
targets); the README records a run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def fleet(nodes: int) -> dict:
    tenants = min(64, max(1, nodes // 32))
    big, small = nodes - nodes // 4, nodes // 4
    pools = [{"name": "h100", "nodes": big or nodes, "gpu": {"type": "h100", "count": 8},
              "cpus": 224, "memory_gib": 2048}]
    if small:
        pools.append({"name": "l40s", "nodes": small, "gpu": {"type": "l40s", "count": 8},
                      "cpus": 128, "memory_gib": 1024})
    workloads = []
    for i in range(20):
        kind = i % 4
        w = {"name": f"w{i:02d}", "tenant": f"t{i % tenants:02d}"}
        if kind == 0:
            w.update(nodes=min(8, pools[0]["nodes"]), tightly_coupled=True, bare_metal=True, pool="h100")
        elif kind == 1:
            w.update(long_lived_services=True, multi_tenant=True, bare_metal=False, pool=pools[-1]["name"])
        elif kind == 2:
            w.update(nodes=min(4, pools[-1]["nodes"]), tightly_coupled=True, python_native_pipeline=True,
                     bare_metal=False, pool=pools[-1]["name"])
        else:
            w.update(multi_tenant=True, bare_metal=False)
        workloads.append(w)
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": f"bench-{nodes}"},
        "fleet": {"bare_metal": True, "slurm": {"controllers": ["slurm-ctl01"]}, "fabric": {"kind": "infiniband", "nodes_per_leaf": 16,
                                                  "leaves_per_spine": 16}, "pools": pools},
        "tenants": [{"name": f"t{k:02d}", "share": 1 + k % 4} for k in range(tenants)],
        "workloads": workloads,
        # kubernetes_min_nodes: the smallest sizes give the Kubernetes plane fewer nodes than plan's default
        # minimum beside Slurm (issue 36), so the synthetic fleet opts in, as a site would, to keep one shape
        "options": {"gitops": "argocd", "slurm_version": "24.11", "kubernetes_min_nodes": 1},
    }


QUIET_LOAD = 0.25  # per CPU core: the 1-minute load average before, and the other work's CPU use during a run
TARGETS = {2048: 2.0, 16384: 3.0}  # plan: nodes -> the most wall time as a multiple of the floor (issue 41)
VALIDATE_TARGET_S = 1.0  # validate of the 16,384-GPU bundle with --crds and --chart-defaults
SIMULATE_TARGET_S = 60.0  # simulate: 1,000,000 jobs on 16,384 nodes
REPO = Path(__file__).resolve().parent.parent


# As a user's install runs: pip writes the bytecode of a wheel at install, so the timed runs may write and
# read __pycache__ too (a shell with PYTHONDONTWRITEBYTECODE set would compile every module on every run).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
LIBRARIES = "import pydantic, yaml, jinja2, click"  # what every plan imports before it reads a line
# ... and one pydantic model defined: its first model build imports pydantic's schema machinery (~0.25 of a
# 16,384-GPU plan's instructions on this machine's callgrind), which any command that validates input pays
ONE_MODEL = LIBRARIES + "\nclass M(pydantic.BaseModel):\n    x: int"


def orchgen_command(python: str = sys.executable) -> list[str]:
    """The command a user runs: the `orchgen` console script beside this interpreter, written by pip for it
    (its first line names this interpreter: not another install's orchgen on the same bin directory, such
    as /usr/bin's), else `python -m generator`, the same entry point (generator/entry.py)."""
    script = Path(python).parent / "orchgen"
    try:
        with open(script, "rb") as f:
            first = f.readline(4096)
    except OSError:
        first = b""
    if first.rstrip(b"\r\n") == b"#!" + os.fsencode(python):
        return [str(script)]
    return [python, "-m", "generator"]


ORCHGEN = orchgen_command()


def best(cmd: list[str], repeat: int, **kwargs) -> tuple[float, float]:
    """(least wall time, least user+system CPU time) of `repeat` runs of cmd, after one untimed run that
    leaves the bytecode and the template cache warm, as a user's second command finds them."""
    kwargs.setdefault("env", ENV)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def load() -> dict:
    one, five, fifteen = os.getloadavg()
    return {"1min": round(one, 2), "5min": round(five, 2), "15min": round(fifteen, 2), "cpus": os.cpu_count() or 1}


def quiet(*loads: dict) -> bool:
    return all(entry["1min"] <= QUIET_LOAD * entry["cpus"] for entry in loads)


def busy_cpu_s() -> float | None:
    """Seconds all CPUs spent busy since boot (/proc/stat's first line); None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds of this process and of the commands it ran and waited for."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def other_work(start: tuple[float | None, float, float], after: dict) -> float:
    """The CPU cores other processes kept busy on average since `start` (busy_cpu_s(), own_cpu_s(),
    time.perf_counter() then); without /proc/stat, `after`'s 1-minute load less the cores this run kept busy."""
    busy0, own0, t0 = start
    wall = max(time.perf_counter() - t0, 1e-9)
    own = own_cpu_s() - own0
    busy = busy_cpu_s()
    if busy0 is None or busy is None:
        return max(0.0, after["1min"] - own / wall)
    return max(0.0, (busy - busy0 - own) / wall)


def reference() -> Path | None:
    """$ORCHGEN_REFERENCE, else ../shared/reference beside the checkout, else beside the repository a local
    clone was made from (as scripts/test.sh finds it: CI's clean clone prints validate's figure too)."""
    if os.environ.get("ORCHGEN_REFERENCE"):
        path = Path(os.environ["ORCHGEN_REFERENCE"])
        return path if path.is_dir() else None
    beside = REPO.parent / "shared" / "reference"
    if beside.is_dir():
        return beside
    try:
        origin = subprocess.run(["git", "-C", str(REPO), "config", "--get", "remote.origin.url"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:  # no git
        return None
    source = REPO / origin if origin else None  # (a clone made from a relative path names it from the clone)
    path = source.resolve().parent / "shared" / "reference" if source is not None and source.is_dir() else None
    return path if path is not None and path.is_dir() else None


LOAD = 1.8  # GPU-time asked for over the week, as a multiple of the fleet's: queues build up (the jobs go
# to one pool of each plane, about half the GPUs)


def trace(nodes: int, jobs: int, seed: int = 0) -> str:
    """A week of `jobs` jobs on fleet(nodes)'s workloads, loading its GPUs to about 90%: w00 (Slurm,
    tightly coupled, up to 16 nodes), w02 (a 4-pod gang on Kubernetes), w03 (single-node batch)."""
    import random

    rng = random.Random(seed)
    week = 7 * 86_400
    rows = ["submit_time,gpus,nodes,duration,workload"]
    gpu_seconds = 0.0
    shapes = []
    for _ in range(jobs):
        kind = rng.random()
        if kind < 0.6:
            shapes.append((rng.choice([1, 2, 4, 8]), 1, "w03"))
        elif kind < 0.9:
            n = rng.choice([2, 4, 8, 16])
            shapes.append((8 * n, n, "w00"))
        else:
            shapes.append((32, 4, "w02"))
        gpu_seconds += shapes[-1][0]
    mean = LOAD * nodes * 8 * week / gpu_seconds  # mean runtime for that much GPU time over the week
    for gpus, n, w in shapes:
        rows.append(f"{rng.uniform(0, week):.0f},{gpus},{n},{rng.expovariate(1 / mean):.0f},{w}")
    return "\n".join(rows) + "\n"


def simulate_case(nodes: int, jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"fleet-{nodes}.yaml"
        src.write_text(yaml.safe_dump(fleet(nodes)))
        csv = Path(tmp) / "trace.csv"
        csv.write_text(trace(nodes, jobs))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run([*ORCHGEN, "simulate", str(src), "--trace", str(csv),
                              "--format", "json"], check=True, capture_output=True, text=True, env=ENV)
        took = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU time too: on a shared machine the wall time is mostly other people's load
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        report = json.loads(out.stdout)
        return {"nodes": nodes, "jobs": report["jobs"], "wall_s": took, "cpu_s": cpu,
                "max_rss_mib": after.ru_maxrss / 1024,
                "gpu_utilization": {p["plane"]: p["gpu_utilization"] for p in report["planes"]}}


def run(sizes: list[int], repeat: int, validate: bool = True, simulate: tuple[int, int] | None = None) -> dict:
    """Every figure of one run, with the floor and the load around it."""
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_before": load()}
    start = (busy_cpu_s(), own_cpu_s(), time.perf_counter())
    floor, floor_cpu = best([sys.executable, "-c", "import generator"], repeat)
    result["floor"] = {"wall_s": floor, "cpu_s": floor_cpu}
    libs, libs_cpu = best([sys.executable, "-c", LIBRARIES], repeat)
    result["libraries"] = {"wall_s": libs, "cpu_s": libs_cpu}
    model, model_cpu = best([sys.executable, "-c", ONE_MODEL], repeat)
    result["one_model"] = {"wall_s": model, "cpu_s": model_cpu}
    result["plan"] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            src = Path(tmp) / f"fleet-{size}.yaml"
            src.write_text(yaml.safe_dump(fleet(size)))
            out = Path(tmp) / f"out-{size}"
            took, cpu = best([*ORCHGEN, "plan", str(src), "-o", str(out), "-q"], repeat)
            files = [p for p in out.rglob("*") if p.is_file()]
            result["plan"].append({"nodes": size, "gpus": size * 8, "wall_s": took, "cpu_s": cpu, "ratio": took / floor,
                                   "target_ratio": TARGETS.get(size), "files": len(files),
                                   "bundle_kib": sum(p.stat().st_size for p in files) / 1024})
            if size != 2048 or not validate:
                shutil.rmtree(out)
        ref = reference()
        if validate and ref is not None:
            out = Path(tmp) / "out-2048"
            if not out.is_dir():
                src = Path(tmp) / "fleet-2048.yaml"
                src.write_text(yaml.safe_dump(fleet(2048)))
                subprocess.run([*ORCHGEN, "plan", str(src), "-o", str(out), "-q"],
                               check=True, stdout=subprocess.DEVNULL)
            took, cpu = best([*ORCHGEN, "validate", str(out), "--crds", str(ref),
                              "--chart-defaults", str(ref)], repeat)
            result["validate"] = {"nodes": 2048, "gpus": 16384, "wall_s": took, "cpu_s": cpu, "ratio": took / floor,
                                  "target_s": VALIDATE_TARGET_S}
        elif validate:
            result["validate"] = None  # no reference data
    if simulate:
        sim = simulate_case(*simulate)
        result["simulate"] = sim | {"ratio": sim["wall_s"] / floor, "target_s": SIMULATE_TARGET_S}
    result["load_after"] = load()
    # the run's own commands are no one else's load: judged by the other work during it (see the docstring)
    result["other_cpus"] = round(other_work(start, result["load_after"]), 2)
    result["quiet"] = (quiet(result["load_before"])
                       and result["other_cpus"] <= QUIET_LOAD * result["load_before"]["cpus"])
    return result


def report(result: dict) -> list[str]:
    floor = result["floor"]["wall_s"]
    lb, la = result["load_before"], result["load_after"]
    others = result.get("other_cpus")
    lines = [f"orchgen benchmark, {result['date']}: load average {lb['1min']}/{lb['5min']}/{lb['15min']} before, "
             f"{la['1min']}/{la['5min']}/{la['15min']} after, {lb['cpus']} CPUs"
             + (f", other work {others} CPUs during the run" if others is not None else "") + ": "
             + ("quiet" if result["quiet"] else f"NOT quiet (quiet: 1-min load before, and other work during, "
                f"<= {QUIET_LOAD} per CPU); timings are mostly other work's"),
             f"floor (python -c 'import generator'): {floor:.3f} s wall, {result['floor']['cpu_s']:.3f} s CPU",
             *([f"libraries (python -c '{LIBRARIES}'): {result['libraries']['wall_s']:.3f} s wall, "
                f"{result['libraries']['cpu_s']:.3f} s CPU"
                + "".join(f"; plan of 16,384 GPUs is {row['wall_s'] / result['libraries']['wall_s']:.1f}x of it"
                          for row in result["plan"] if row["nodes"] == 2048)]
               if "libraries" in result else []),
             *([f"libraries and one pydantic model defined: {result['one_model']['wall_s']:.3f} s wall, "
                f"{result['one_model']['cpu_s']:.3f} s CPU"
                + "".join(f"; plan of 16,384 GPUs is {row['wall_s'] / result['one_model']['wall_s']:.1f}x of it"
                          for row in result["plan"] if row["nodes"] == 2048)]
               if "one_model" in result else []),
             f"{'':9}{'nodes':>7} {'gpus':>7} {'wall s':>8} {'x floor':>8} {'target':>8} {'CPU s':>7} "
             f"{'files':>6} {'bundle KiB':>11}"]
    for row in result["plan"]:
        target = f"{row['target_ratio']:.0f}x" if row["target_ratio"] else "-"
        lines.append(f"{'plan':9}{row['nodes']:>7} {row['gpus']:>7} {row['wall_s']:>8.3f} {row['ratio']:>7.1f}x "
                     f"{target:>8} {row['cpu_s']:>7.3f} {row['files']:>6} {row['bundle_kib']:>11.0f}")
    if "validate" in result:
        v = result["validate"]
        lines.append("validate: skipped, no reference data (ORCHGEN_REFERENCE)" if v is None else
                     f"{'validate':9}{v['nodes']:>7} {v['gpus']:>7} {v['wall_s']:>8.3f} {v['ratio']:>7.1f}x "
                     f"{v['target_s']:>7.0f}s {v['cpu_s']:>7.3f}  (--crds and --chart-defaults from the reference)")
    if "simulate" in result:
        s = result["simulate"]
        util = ", ".join(f"{k} {u:.0%}" for k, u in s["gpu_utilization"].items())
        lines.append(f"{'simulate':9}{s['nodes']:>7} {s['nodes'] * 8:>7} {s['wall_s']:>8.1f} {s['ratio']:>7.0f}x "
                     f"{s['target_s']:>7.0f}s {s['cpu_s']:>7.1f}  ({s['jobs']} jobs, max RSS {s['max_rss_mib']:.0f} MiB; "
                     f"GPU utilization {util})")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,128,2048,16384")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-validate", action="store_true", help="leave out `orchgen validate`")
    ap.add_argument("--simulate", action="store_true", help="also time `orchgen simulate --trace`")
    ap.add_argument("--nodes", type=int, default=16_384)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file as JSON")
    args = ap.parse_args()
    result = run([int(s) for s in args.sizes.split(",")], args.repeat, not args.no_validate,
                 (args.nodes, args.jobs) if args.simulate else None)
    for line in report(result):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
