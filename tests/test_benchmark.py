"""Issue 41's speed targets, measured by benchmarks/bench.py (the commands as subprocesses, side by side
with the import floor): on a quiet machine, a figure over 1.5x its target fails. On a loaded machine (the
1-minute load average over bench.QUIET_LOAD per CPU core before, or other processes' CPU use over it during
the run, as in a parallel test run) the timings are mostly other work's, so the test skips with the figures
it has instead of failing on them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark

MARGIN = 1.5  # a figure fails at more than 1.5x its target (issue 41)


def _bench():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench.py"
    spec = importlib.util.spec_from_file_location("orchgen_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def over_target(result: dict) -> list[str]:
    """The figures of one bench.run over MARGIN x their targets."""
    out = []
    for row in result["plan"]:
        if row["target_ratio"] and row["ratio"] > MARGIN * row["target_ratio"]:
            out.append(f"plan of {row['gpus']} GPUs: {row['ratio']:.1f}x the floor, target {row['target_ratio']:.0f}x")
    v = result.get("validate")
    if v and v["wall_s"] > MARGIN * v["target_s"]:
        out.append(f"validate of {v['gpus']} GPUs: {v['wall_s']:.2f} s, target {v['target_s']:.0f} s")
    s = result.get("simulate")
    if s and s["wall_s"] > MARGIN * s["target_s"]:
        out.append(f"simulate of {s['jobs']} jobs on {s['nodes']} nodes: {s['wall_s']:.1f} s, target {s['target_s']:.0f} s")
    return out


def test_over_target_reads_each_figure():
    floor = {"wall_s": 0.1, "cpu_s": 0.1}
    row = {"nodes": 2048, "gpus": 16384, "wall_s": 0.31, "ratio": 3.1, "target_ratio": 2.0}
    result = {"floor": floor, "plan": [row, {**row, "nodes": 8, "ratio": 50.0, "target_ratio": None}],
              "validate": {"gpus": 16384, "wall_s": 1.6, "target_s": 1.0},
              "simulate": {"jobs": 1_000_000, "nodes": 16384, "wall_s": 90.5, "target_s": 60.0}}
    assert over_target(result) == ["plan of 16384 GPUs: 3.1x the floor, target 2x",
                                   "validate of 16384 GPUs: 1.60 s, target 1 s",
                                   "simulate of 1000000 jobs on 16384 nodes: 90.5 s, target 60 s"]
    result["plan"][0]["ratio"], result["validate"]["wall_s"], result["simulate"]["wall_s"] = 2.9, 1.5, 90.0
    assert over_target(result) == []


def test_quietness_counts_other_work_only(monkeypatch):
    """The run's own commands keep a core busy: the CPU time the machine was busy, less the run's own, is the
    other work; without /proc/stat, the load after less the cores the run kept busy."""
    import time

    bench = _bench()
    start = (100.0, 10.0, time.perf_counter() - 2.0)  # 2 s ago: busy 100 s since boot, 10 s of it ours
    monkeypatch.setattr(bench, "busy_cpu_s", lambda: 104.0)  # 4 s busy since, 2 of them ours
    monkeypatch.setattr(bench, "own_cpu_s", lambda: 12.0)
    after = {"1min": 1.5, "5min": 1.0, "15min": 0.5, "cpus": 2}
    assert bench.other_work(start, after) == pytest.approx(1.0, rel=0.05)
    monkeypatch.setattr(bench, "own_cpu_s", lambda: 14.0)  # all of it ours: no other work
    assert bench.other_work(start, after) == pytest.approx(0.0, abs=0.01)
    monkeypatch.setattr(bench, "busy_cpu_s", lambda: None)  # no /proc/stat: 1.5 less our 2 s / 2 s
    monkeypatch.setattr(bench, "own_cpu_s", lambda: 12.0)
    assert bench.other_work((None, 10.0, start[2]), after) == pytest.approx(0.5, rel=0.05)


def test_the_bench_times_the_orchgen_of_its_own_interpreter(tmp_path):
    """The console script pip wrote for this interpreter, never another install's orchgen beside it."""
    bench = _bench()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = str(bin_dir / "python")
    assert bench.orchgen_command(python) == [python, "-m", "generator"]  # no script
    (bin_dir / "orchgen").write_text(f"#!{python}\nfrom generator.entry import main\n")
    assert bench.orchgen_command(python) == [str(bin_dir / "orchgen")]
    (bin_dir / "orchgen").write_text("#!/usr/bin/python3\nfrom generator.entry import main\n")
    assert bench.orchgen_command(python) == [python, "-m", "generator"]  # another interpreter's


def test_the_bench_finds_the_reference_beside_the_repository_a_clone_came_from(tmp_path, monkeypatch):
    """As scripts/test.sh: ../shared beside the checkout, else beside the local repository it was cloned
    from (CI's clean clone), by absolute or relative path; $ORCHGEN_REFERENCE first."""
    import subprocess

    bench = _bench()
    monkeypatch.delenv("ORCHGEN_REFERENCE", raising=False)
    origin, ref = tmp_path / "work" / "main", tmp_path / "work" / "shared" / "reference"
    origin.mkdir(parents=True)
    ref.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    for source, clone in ((str(origin), tmp_path / "a" / "cc"), ("../../work/main", tmp_path / "b" / "cc")):
        clone.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "remote", "add", "origin", source], check=True)
        monkeypatch.setattr(bench, "REPO", clone)
        assert bench.reference() == ref.resolve()
    subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin", "https://example.com/x.git"], check=True)
    assert bench.reference() is None
    monkeypatch.setenv("ORCHGEN_REFERENCE", str(tmp_path))
    assert bench.reference() == tmp_path
    monkeypatch.delenv("ORCHGEN_REFERENCE")
    monkeypatch.setattr(bench, "REPO", origin)  # beside the checkout itself
    assert bench.reference() == origin.parent / "shared" / "reference"


def test_speed_targets_on_a_quiet_machine():
    bench = _bench()
    now = bench.load()
    if not bench.quiet(now):
        pytest.skip(f"machine not quiet (1-min load average {now['1min']} on {now['cpus']} CPUs): not timed")
    result = bench.run([2048, 16384], repeat=3, validate=True)
    figures = "; ".join(bench.report(result))
    if not result["quiet"]:
        pytest.skip(f"the machine got busy during the run: {figures}")
    problems = over_target(result)
    assert not problems, f"{problems}: {figures}"


def test_simulate_target_on_a_quiet_machine():
    """simulate at issue 41's size (1,000,000 jobs on 16,384 nodes): a minute or more, so a test of its
    own, timed only where the machine is quiet before and after (never in CI's parallel run)."""
    bench = _bench()
    now = bench.load()
    if not bench.quiet(now):
        pytest.skip(f"machine not quiet (1-min load average {now['1min']} on {now['cpus']} CPUs): not timed")
    result = bench.run([], repeat=3, validate=False, simulate=(16_384, 1_000_000))
    figures = "; ".join(bench.report(result))
    if not result["quiet"]:
        pytest.skip(f"the machine got busy during the run: {figures}")
    assert result["simulate"]["jobs"] == 1_000_000
    problems = over_target(result)
    assert not problems, f"{problems}: {figures}"
