"""`orchgen simulate`'s Slurm model held to the REAL scheduler (issue 24).

Two small mixes are planned into bundles, booted in real Slurm 22.05 on loopback
(tests/slurmharness, the bundle's slurm/ with the loopback overlay; `bf_interval_s` is the one
scheduling change, listed in overlay.py), and their jobs submitted with sbatch as the bundle's users
would: `-p <pool> -N <nodes> --gres=gpu:8 --exclusive -t <limit>`, `--switches=1` for a coupled job
within one leaf. Each job's start is read back from slurmctld (scontrol's StartTime). The same jobs,
with the submission times slurmctld recorded, are replayed by simulate's Slurm model with the
bundle's own policy (generator.simulate.slurm.policy_of) and the same bf_interval. Then:

* start order: wherever the real starts are more than TIE seconds apart, the model starts the jobs in
  the same order (TIE: scontrol gives whole seconds, and a job's real end is its sleep plus the
  ~0.1-1 s slurmd takes to launch and reap it, which the model does not have);
* waits: each job's model wait is within TOLERANCE of its real wait. The real scheduler is later than
  the model by the per-job launch/teardown overhead above, which accumulates along a chain of jobs
  that each wait for the one before (at most ~1 s per link here, and the chains are at most ~8
  long), plus up to one bf_interval for a backfilled start (the real backfill cycle's phase is not
  the model's). TOLERANCE = 2 s + 1 s per job that ended on the job's nodes before it started,
  + bf_interval.

Mixes: `fifo` (8 nodes, one leaf, 20 jobs of 1-8 nodes, no tenants so Slurm 22.05's submission
order): the main scheduler's strict order and a blocked top job; `backfill` (16 nodes, two leaves):
a 16-node job behind running 3-minute-limit jobs, later 1-minute jobs that backfill and 10-minute
ones that must wait behind it, 2-4-node coupled jobs kept on one leaf by --switches. About 1 minute each.
"""
from __future__ import annotations

import random
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from generator import bundle
from generator.decide import make_plan
from generator.render import render
from generator.simulate.cluster import of_plane
from generator.simulate.engine import Replay
from generator.simulate.jobs import Job
from generator.simulate.slurm import SlurmScheduler, policy_of
from generator.spec import load
from tests.slurmharness import SlurmCluster, require_slurm

pytestmark = pytest.mark.slurm

BF_INTERVAL = 2  # seconds (overlay.py: bf_interval_s); the model is given the same
TIE = 2
# Backfill plans in bf_resolution steps (the bundle's 60 s) of the absolute clock, and the model is given the same
# epoch. Two decisions a few seconds apart (a 1-minute job's backfill start against a 2-node job's reservation
# on the same node) fall in one step or in two depending on where the minute boundary lies, and where the real and
# modelled clocks differ by a second there they decide differently: a CI run (session 16) started the backfill mix
# at about :56 of a minute, the model backfilled job 14 at 6 s and Slurm at 18 s. So the backfill mix starts in a
# window of the minute where every decision of the model is the same for a start up to PHASE_MARGIN seconds
# earlier or later (test_backfill_mix_is_the_same_at_every_start_in_its_window replays it at each second);
# fifo's mix decides the same at every second of the minute.
BACKFILL_WINDOW = (8, 46)  # seconds past the minute
PHASE_MARGIN = 6


def fleet(name: str, nodes: int, per_leaf: int) -> dict:
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": name},
        "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": per_leaf},
                  "pools": [{"name": "h100", "nodes": nodes, "gpu": {"type": "h100", "count": 8}, "cpus": 16,
                             "memory_gib": 64}]},
        "workloads": [{"name": "train", "nodes": min(nodes, 8), "tightly_coupled": True, "pool": "h100",
                       "max_time": "00:20:00"}],
        "options": {"slurm_version": "22.05"},
    }


# (delay before submitting, nodes, seconds it runs, time limit in minutes)
def fifo_mix() -> list[tuple[float, int, int, int]]:
    rng = random.Random(24)
    return [(0.3, rng.choice([1, 1, 2, 3, 4, 8]), rng.randint(2, 6), 1) for _ in range(20)]


def backfill_mix() -> list[tuple[float, int, int, int]]:
    running = [(0.2, 4, 14, 3), (0.2, 4, 16, 3), (0.2, 4, 12, 3), (0.2, 2, 15, 3)]  # 14 of 16 nodes
    big = [(0.3, 16, 4, 3)]
    later = [(0.3, 1, 5, 10), (0.3, 1, 4, 1), (0.3, 2, 4, 1), (0.3, 1, 3, 10), (0.3, 2, 5, 1)]
    # limits of 1 minute end well before the 16-node job's reservation (~3 minutes ahead), 5 minutes well
    # after it: none is within a bf_resolution (60 s) of it, where the real clock's rounding decides
    after = [(0.3, n, r, t) for n, r, t in ((4, 3, 5), (2, 4, 5), (8, 3, 5), (4, 2, 1), (1, 3, 1), (4, 4, 5))]
    return running + big + later + after


def _start_in(window: tuple[int, int] | None) -> None:
    """Sleep until the clock is `window` seconds past a minute (BACKFILL_WINDOW), unless it already is."""
    if window is not None:
        lo, hi = window
        now = time.time() % 60
        if not lo <= now <= hi:
            time.sleep((lo - now) % 60)


def run_real(tmp_path: Path, spec: dict, mix, window: tuple[int, int] | None = None) -> tuple[list[dict], object]:
    src = tmp_path / f"{spec['metadata']['name']}.yaml"
    src.write_text(yaml.safe_dump(spec, sort_keys=False))
    plan = make_plan(load(src), src.name)
    out = tmp_path / "bundle"
    bundle.write(render(plan), out)
    leaf = spec["fleet"]["fabric"]["nodes_per_leaf"]
    nodes = spec["fleet"]["pools"][0]["nodes"]
    with SlurmCluster(out / "slurm", bf_interval_s=BF_INTERVAL) as c:
        ids = []
        _start_in(window)
        for delay, n, secs, limit in mix:
            time.sleep(delay)
            args = ["-p", "h100", "-N", str(n), "--gres=gpu:8", "--exclusive", "-t", str(limit)]
            if n > 1 and n <= leaf < nodes:
                args.append("--switches=1")
            ids.append(c.submit(f"sleep {secs}", *args))
        records = {}

        def all_done():
            for j in ids:
                if j not in records:
                    r = c.job_record(j)
                    if r.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
                        records[j] = r
            return len(records) == len(ids)
        c.wait_for(all_done, 240, "every job of the mix to end")
        assert all(r["JobState"] == "COMPLETED" for r in records.values()), records
        rows = []
        for (delay, n, secs, limit), j in zip(mix, ids):
            r = records[j]
            rows.append({"id": j, "nodes": n, "secs": secs, "limit": limit, "submit": _t(r["SubmitTime"]),
                         "start": _t(r["StartTime"]), "end": _t(r["EndTime"]), "nodelist": r["NodeList"]})
    return rows, plan


def _t(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def run_model(plan, rows: list[dict]) -> list[float]:
    t0 = min(r["submit"] for r in rows)
    jobs = [Job(i + 1, "train", plan.workloads[0].tenant, "slurm", "h100", r["submit"] - t0, r["nodes"], 8,
                float(r["secs"]), r["limit"] * 60.0, r["nodes"] > 1) for i, r in enumerate(rows)]
    replay = Replay(of_plane(plan, "slurm"), jobs)
    # epoch: backfill rounds absolute times to bf_resolution, so the model's t=0 is the real clock's t0
    SlurmScheduler(replay, plan, policy_of(plan, bf_interval=BF_INTERVAL, epoch=t0))
    replay.run()
    assert all(j.start is not None for j in jobs)
    return [j.start + t0 for j in jobs]


def compare(rows: list[dict], model: list[float]) -> list[str]:
    problems = []
    for a in range(len(rows)):
        for b in range(len(rows)):
            if rows[a]["start"] + TIE < rows[b]["start"] and not model[a] <= model[b]:
                problems.append(f"order: real starts job {a} ({rows[a]['start'] - rows[0]['submit']:.0f} s) before "
                                f"job {b} ({rows[b]['start'] - rows[0]['submit']:.0f} s), the model the other way round")
    for i, r in enumerate(rows):
        before = sum(1 for o in rows if o["end"] <= r["start"] + 0.5 and _overlap(o["nodelist"], r["nodelist"]))
        tolerance = 2 + before + BF_INTERVAL
        real_wait, model_wait = r["start"] - r["submit"], model[i] - r["submit"]
        if abs(real_wait - model_wait) > tolerance:
            problems.append(f"wait of job {i} ({r['nodes']} nodes, -t {r['limit']}): real {real_wait:.0f} s, "
                            f"model {model_wait:.1f} s (tolerance {tolerance} s)")
    return problems


def _overlap(a: str, b: str) -> bool:
    from tests.slurmharness import expand_hostlist

    return bool(set(expand_hostlist(a)) & set(expand_hostlist(b)))


@pytest.mark.parametrize("name, nodes, per_leaf, mix", [
    pytest.param("fifo", 8, 8, fifo_mix(), id="fifo-8-nodes"),
    pytest.param("backfill", 16, 8, backfill_mix(), id="backfill-16-nodes"),
])
def test_simulate_starts_jobs_as_real_slurm_does(tmp_path, name, nodes, per_leaf, mix):
    require_slurm("bookworm")
    rows, plan = run_real(tmp_path, fleet(name, nodes, per_leaf), mix,
                          window=BACKFILL_WINDOW if name == "backfill" else None)
    model = run_model(plan, rows)
    report = "\n".join(f"job {i}: {r['nodes']} nodes -t {r['limit']} runs {r['secs']} s: submit "
                       f"{r['submit'] - rows[0]['submit']:.0f} real start {r['start'] - rows[0]['submit']:.0f} "
                       f"model {model[i] - rows[0]['submit']:.1f} on {r['nodelist']}" for i, r in enumerate(rows))
    problems = compare(rows, model)
    assert not problems, "\n".join(problems) + "\n" + report
    if name == "backfill":
        # the mix does what it is for: the 1-minute jobs started before the 16-node job (backfill),
        # the 10-minute ones after it
        big = rows[4]["start"]
        assert all(rows[i]["start"] < big for i in (6, 7, 9)), report
        assert all(rows[i]["start"] >= big for i in (5, 8)), report


def test_backfill_mix_is_the_same_at_every_start_in_its_window(tmp_path):
    """The model alone (no Slurm): the backfill mix, submitted as run_real submits it, starts every job at the same
    offsets whichever second of BACKFILL_WINDOW (widened by PHASE_MARGIN each side) the mix starts at, so a real
    clock a few seconds off the model's cannot fall on the other side of a bf_resolution step. (Outside it the model
    does change: near the minute's end it backfills job 14 before job 7, the order of the CI run that failed.)"""
    spec = fleet("backfill", 16, 8)
    src = tmp_path / "backfill.yaml"
    src.write_text(yaml.safe_dump(spec, sort_keys=False))
    plan = make_plan(load(src), src.name)
    minute = 1_800_000_000 - 1_800_000_000 % 60

    def offsets(second: int) -> tuple[int, ...]:
        t0, at, rows = minute + second, 0.0, []
        for delay, n, secs, limit in backfill_mix():
            at += delay
            rows.append({"nodes": n, "secs": secs, "limit": limit, "submit": t0 + at})
        return tuple(round(m - rows[0]["submit"]) for m in run_model(plan, rows))

    lo, hi = BACKFILL_WINDOW
    seen = {offsets(sec) for sec in range(lo - PHASE_MARGIN, hi + PHASE_MARGIN + 1)}
    assert len(seen) == 1, seen
    # the test can tell: outside the window the model decides otherwise at some second (here :58 and :59)
    assert any(offsets(sec) not in seen for sec in range(hi + PHASE_MARGIN + 1, 60 + lo - PHASE_MARGIN))
