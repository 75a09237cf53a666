"""`orchgen simulate` and honest demand (issue 24).

* The decision guide's proof, reproduced by simulate's own Kubernetes models: on 8 GPUs, two 5-GPU
  jobs with interleaved pod arrivals: the per-pod scheduler holds 4 + 4 and deadlocks; gang
  admission runs one job whole and leaves 3 free. Property (hypothesis, random pools and jobs): gang
  admission never places part of a job and never oversubscribes a node.
* Slurm's model: the main scheduler keeps priority order in a partition, backfill starts a job that
  ends before the top job's reservation and holds one that would delay it, --switches keeps a job
  on one leaf.
* Demand: `gpus` beyond one job's nodes is refused with one line naming the fields; jobs_per_day
  without runtime, or with jobs_at_once, is refused; jobs_per_day x runtime gives the jobs at once;
  pools are split by the jobs at once; a starter's gang is one job's span in every example.
* The command: deterministic per seed, JSON and table, traces (orchgen's CSV and Alibaba's
  pai_task_table.csv), --compare, and `plan` never imports the simulator.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings, strategies as st

from generator.decide import make_plan
from generator.simulate import simulate
from generator.simulate.cluster import Nodes
from generator.simulate.engine import Replay
from generator.simulate.jobs import Job, from_demand, from_trace
from generator.simulate.kube import GangScheduler, PerPodScheduler
from generator.simulate import cluster
from generator.simulate.slurm import Policy, SlurmScheduler, policy_of
from generator.spec import load
from tests.conftest import all_examples
from tests.support import orchgen_argv


class _Tenant:
    def __init__(self, gpus: int, pool: str = "p"):
        self.name, self.share, self.implicit = "t", 1, True
        self.quotas = {pool: type("Q", (), {"gpus": gpus})()}


class _Plan:
    """What the Kubernetes schedulers read of a plan: its tenants and their quotas."""

    def __init__(self, gpus: int):
        self.tenants = [_Tenant(gpus)]


def nodes(count: int, per_node: int, leaves: int = 1) -> Nodes:
    cap = np.full(count, per_node, dtype=np.int32)
    leaf = np.arange(count, dtype=np.int32) * leaves // count
    return Nodes([f"n{i}" for i in range(count)], np.zeros(count, dtype=np.int32), leaf, cap, cap.copy(), ["p"],
                 [f"leaf{i}" for i in range(leaves)])


def job(i: int, pods: int, per: int, submit: float = 0.0, runtime: float = 100.0, limit: float = 1000.0,
        plane: str = "kubernetes", coupled: bool = True) -> Job:
    return Job(i, "w", "t", plane, "p", submit, pods, per, runtime, limit, coupled)


# ------------------------------------------------------------------ the decision guide's proof


def test_per_pod_scheduler_deadlocks_holding_4_plus_4():
    r = Replay(nodes(8, 1), [job(1, 5, 1), job(2, 5, 1)])
    s = PerPodScheduler(r, _Plan(8))
    r.run()
    assert [len(s.bound[j.id]) for j in r.jobs] == [4, 4]  # the pods arrived A, B, A, B, ...
    assert int(r.nodes.free.sum()) == 0  # every GPU held
    assert {j.id for j in s.deadlocked} == {1, 2} and all(j.start is None for j in r.jobs)


def test_gang_admission_runs_one_job_whole_and_leaves_3_free():
    r = Replay(nodes(8, 1), [job(1, 5, 1), job(2, 5, 1)])
    GangScheduler(r, _Plan(8))
    r.run(until=50)
    assert [j.start for j in r.jobs] == [0.0, None]
    assert int(r.nodes.free.sum()) == 3 and r.partial_gpus.sum() == 0
    r.run()  # and the second runs whole when the first ends
    assert [j.start for j in r.jobs] == [0.0, 100.0]


def test_simulate_reports_the_deadlock_next_to_the_gang_scheduler(tmp_path):
    fleet = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "proof"},
             "fleet": {"fabric": {"kind": "ethernet", "nodes_per_leaf": 8},
                       "pools": [{"name": "g1", "nodes": 8, "gpu": {"type": "l4", "count": 1}, "cpus": 16,
                                  "memory_gib": 64}]},
             "workloads": [{"name": "train", "nodes": 5, "tightly_coupled": True, "pool": "g1"}]}
    src = tmp_path / "proof.yaml"
    src.write_text(yaml.safe_dump(fleet))
    trace = tmp_path / "two.csv"
    trace.write_text("submit_time,gpus,nodes,duration\n0,5,5,600\n0,5,5,600\n")
    plan = make_plan(load(src), src.name)
    assert plan.gang_scheduler == "kueue"
    report = simulate(plan, from_trace(plan, trace))
    gang, per_pod = report["kubernetes_gangs"]["schedulers"]
    assert gang["deadlocked_jobs"] == 0 and gang["partly_placed_gpu_hours"] == 0
    assert gang["coupled_jobs_never_started"] == 0
    assert per_pod["deadlocked_jobs"] == 2 and per_pod["deadlocked_gpus"] == 8
    assert per_pod["coupled_jobs_never_started"] == 2
    w = report["workloads"][0]  # waits 0 and 600 s: the second runs when the first ends
    assert (w["wait_p50_s"], w["wait_p95_s"]) == (300.0, 570.0)


@pytest.mark.parametrize("name", ["cloud-training", "dev-ci"])
def test_a_replay_is_freed_without_the_cycle_collector(example, name):
    """simulate() leaves no replay or scheduler for the cycle collector to find (the command replays with
    it off, and at a million jobs its first walk afterwards took 3.3 s: issue 41): a Slurm plane, a
    Kubernetes plane with Kueue and the per-pod replay beside it (cloud-training), k3s's per-pod one
    (dev-ci)."""
    import gc

    plan = make_plan(load(example(name)), f"{name}.yaml")
    jobs = from_demand(plan, hours=24, seed=0)
    gc.collect()
    gc.disable()
    try:
        report = simulate(plan, jobs)
        left = [type(o).__name__ for o in gc.get_objects()
                if isinstance(o, (Replay, SlurmScheduler, GangScheduler, PerPodScheduler))]
    finally:
        gc.enable()
    assert report["planes"] and all(j.start is None for j in jobs)  # it replayed copies
    assert not left


class _Checked(Replay):
    """A replay that checks after every placement that no node is oversubscribed."""

    def start(self, j, where):
        super().start(j, where)
        assert (self.nodes.free >= 0).all()
        assert len(set(where.tolist())) == j.nodes  # one pod per node, all of them at once


@settings(max_examples=150, deadline=None)
@given(count=st.integers(1, 12), per_node=st.integers(1, 8),
       shapes=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 8), st.integers(0, 5), st.integers(1, 9)),
                       min_size=1, max_size=12))
def test_gang_admission_never_places_part_of_a_job(count, per_node, shapes):
    jobs = [job(i + 1, pods, min(per, per_node), submit=float(t), runtime=float(run))
            for i, (pods, per, t, run) in enumerate(shapes)]
    r = _Checked(nodes(count, per_node), jobs)
    GangScheduler(r, _Plan(count * per_node))
    r.run()
    assert r.partial_gs.sum() == 0 and r.partial_gpus.sum() == 0
    for j in r.jobs:
        fits = j.nodes <= count
        assert (j.start is not None) == fits  # a job that fits the pool runs whole, eventually
        assert j.start is None or len(j.nodes_held) == j.nodes
    assert int(r.nodes.free.sum()) == count * per_node  # everything released at the end


# ------------------------------------------------------------------ Slurm's model


def slurm(jobs, count=8, per_node=8, leaves=1, **policy):
    r = Replay(nodes(count, per_node, leaves), jobs)
    plan = type("P", (), {"tenants": [_Tenant(count * per_node)]})()
    SlurmScheduler(r, plan, Policy(bf_interval=1, bf_resolution=1, bf_window=86_400, **policy))
    r.run()
    return r


def test_backfill_starts_what_ends_before_the_reservation_and_holds_what_would_delay_it():
    running = job(1, 4, 8, runtime=100, limit=100, plane="slurm")
    big = job(2, 8, 8, submit=1, runtime=10, limit=100, plane="slurm")
    delays = job(3, 1, 8, submit=2, runtime=10, limit=500, plane="slurm")  # would still run at 100
    fits = job(4, 1, 8, submit=3, runtime=10, limit=50, plane="slurm")  # ends by 53
    r = slurm([running, big, delays, fits])
    start = {j.id: j.start for j in r.jobs}
    assert start[1] == 0 and start[4] is not None and start[4] < 10  # backfilled within a pass or two
    assert start[2] == 100  # the big job keeps its place
    assert start[3] == 110  # after the big job
    assert not any(j.start is None for j in r.jobs)


def test_main_scheduler_keeps_priority_order_in_a_partition():
    jobs = [job(1, 8, 8, runtime=50, limit=60, plane="slurm"), job(2, 8, 8, submit=1, runtime=50, limit=60,
                                                                      plane="slurm"),
            job(3, 2, 8, submit=2, runtime=50, limit=60, plane="slurm")]  # would delay job 2: waits
    r = slurm(jobs)
    assert [j.start for j in r.jobs] == [0, 50, 100]


def test_switches_keep_a_coupled_job_on_one_leaf():
    r = slurm([job(1, 2, 8, runtime=10, plane="slurm"), job(2, 4, 8, submit=1, runtime=10, plane="slurm")],
              count=8, leaves=2)
    second = r.jobs[1]
    assert len({int(r.nodes.leaf[n]) for n in second.nodes_held}) == 1


# ------------------------------------------------------------------ demand

BASE = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: lab
fleet:
  bare_metal: true
  fabric:
    kind: infiniband
    nodes_per_leaf: 8
  pools:
    - name: h100
      nodes: 32
      gpu: {type: h100, count: 8}
      cpus: 224
      memory_gib: 2048
workloads:
  - name: train
    tightly_coupled: true
    pool: h100
"""


def write(tmp_path: Path, extra: str, text: str = BASE) -> Path:
    src = tmp_path / "workload.yaml"
    src.write_text(text + "".join(f"    {line}\n" for line in extra.splitlines()))
    return src


@pytest.mark.parametrize("extra, field, words", [
    ("nodes: 16\ngpus: 512", "workloads[0].gpus", "gpus: 128 and jobs_at_once: 4"),
    ("nodes: 2\ngpus: 20", "workloads[0].gpus", "spans 3 nodes"),
    ("nodes: 2\njobs_per_day: 10", "workloads[0].jobs_per_day", "needs runtime"),
    ("nodes: 2\njobs_per_day: 10\njobs_at_once: 2\nruntime: \"01:00:00\"", "workloads[0].jobs_per_day",
     "not both"),
])
def test_inconsistent_demand_is_refused_naming_the_fields(tmp_path, orchgen, extra, field, words):
    src = write(tmp_path, extra)
    proc = orchgen("plan", src, "-o", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{src}:" in lines[0] and field in lines[0] and words in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_the_k8s_starter_of_16_nodes_512_gpus_is_refused_not_a_64_pod_gang(tmp_path, orchgen):
    text = BASE.replace("bare_metal: true", "bare_metal: false")
    src = write(tmp_path, "nodes: 16\ngpus: 512", text)
    proc = orchgen("plan", src, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "jobs_at_once: 4" in proc.stderr


def test_a_service_has_no_runtime(tmp_path, orchgen):
    text = BASE.replace("    tightly_coupled: true\n", "    long_lived_services: true\n    bare_metal: false\n")
    proc = orchgen("plan", write(tmp_path, "runtime: \"01:00:00\"", text), "-o", tmp_path / "out")
    assert proc.returncode == 2 and "workloads[0].runtime" in proc.stderr


def test_jobs_per_day_and_runtime_give_the_jobs_at_once(tmp_path):
    src = write(tmp_path, "nodes: 2\njobs_per_day: 30\nruntime: \"04:00:00\"")
    plan = make_plan(load(src), src.name)
    d = plan.workloads[0]
    assert d.jobs_at_once == 5 and d.runtime == 240  # 30 a day x 4 h = 5 at once (Little's law)
    assert plan.to_json()["workloads"][0]["demand"] == {"jobs_at_once": 5, "jobs_per_day": 30, "runtime_minutes": 240}


def test_pools_are_split_by_the_jobs_at_once(tmp_path):
    """A hybrid pool: the Kubernetes side's share grows with its jobs at once, not its one job's span."""
    text = BASE + """\
  - name: finetunes
    pool: h100
    bare_metal: false
    multi_tenant: true
    plane: kubernetes   # a Slurm site keeps unpinned batch on Slurm (rule slurm-site-batch)
"""
    def k8s_nodes(extra: str) -> int:
        src = tmp_path / "w.yaml"
        src.write_text(text + "".join(f"    {line}\n" for line in extra.splitlines()))
        src.write_text(src.read_text().replace("    tightly_coupled: true\n", "    tightly_coupled: true\n    nodes: 8\n"))
        # a one-job Kubernetes side is one node: opted in past options.kubernetes_min_nodes (issue 36)
        src.write_text(src.read_text() + "options: {kubernetes_min_nodes: 1}\n")
        plan = make_plan(load(src), src.name)
        return len(plan.planes["kubernetes"].nodes)
    one, many = k8s_nodes(""), k8s_nodes("jobs_at_once: 16")
    assert many > one, (one, many)
    assert many >= 16


def test_capacity_warning_counts_the_jobs_at_once(tmp_path, orchgen):
    proc = orchgen("plan", write(tmp_path, "nodes: 8\njobs_at_once: 5"), "-o", tmp_path / "out")
    assert proc.returncode == 0
    assert "train 320" in proc.stderr and "queue behind one another" in proc.stderr


@pytest.mark.parametrize("path", all_examples(), ids=lambda p: p.stem)
def test_a_starter_s_gang_is_one_job_s_span(path):
    plan = make_plan(load(path), path.name)
    for d in plan.workloads:
        if d.shape is None or d.workload_class == "service":
            continue
        assert d.shape.pods * d.shape.gpus <= d.facts.nodes * max(1, d.gpus_per_node), d.name
        if d.gang_scheduler_required:
            assert d.shape.pods == d.facts.nodes, d.name


# ------------------------------------------------------------------ the command


def test_same_seed_same_numbers_other_seed_other_numbers(example, orchgen):
    src = example("baremetal-k8s-training")
    runs = [orchgen("simulate", src, "--hours", "24", "--seed", s, "--format", "json", check=True).stdout
            for s in ("1", "1", "2")]
    assert runs[0] == runs[1] and runs[0] != runs[2]
    report = json.loads(runs[0])
    assert {w["workload"] for w in report["workloads"]} == {"pretrain-70b", "asr-finetune", "eval"}
    assert 0 < report["planes"][0]["gpu_utilization"] <= 1
    schedulers = [r["scheduler"] for r in report["kubernetes_gangs"]["schedulers"]]
    assert schedulers == ["kueue", "default kube-scheduler (per pod)"]


def test_table_and_compare(example, orchgen):
    src = example("university-lab")
    table = orchgen("simulate", src, "--hours", "12", check=True).stdout
    assert "wait p95" in table and "ddp-training" in table and "GPU utilization" in table
    out = json.loads(orchgen("simulate", src, "--hours", "12", "--compare", "--format", "json", check=True).stdout)
    names = [v["variant"] for v in out["variants"]]
    assert names[0] == "plan" and "split=leaf" in names and "gang=volcano" in names
    assert "ddp-training on kubernetes" in names
    assert all("workloads" in v or "refused" in v for v in out["variants"])
    assert "the same demand" in orchgen("simulate", src, "--hours", "12", "--compare", check=True).stdout


class _CheckedSlurm(SlurmScheduler):
    """SlurmScheduler whose incremental bookkeeping (kept for speed) is checked against what it
    stands for, recomputed the slow way, at every backfill pass and priority recalculation."""

    checks = 0
    ruled_out = 0
    dead = 0  # the most ended times seen listed among the ends
    revived = 0  # starts whose end was such a time
    END_DEAD_MIN = 2  # (the list is rebuilt often here: that is checked too)

    def backfill(self, now):
        running = [j for j in self.r.running.values() if not math.isinf(j.limit)]
        # the ends listed: sorted, distinct, every live one and _end_dead more whose jobs have all ended
        assert self._end_times == sorted(set(self._end_times)) and all(self._end_at.values())
        assert [t for t in self._end_times if t in self._end_at] == sorted(self._end_at)
        assert len(self._end_times) - len(self._end_at) == self._end_dead
        _CheckedSlurm.dead = max(_CheckedSlurm.dead, self._end_dead)
        assert sorted((t, i, *entry) for t in self._end_at for i, entry in self._end_at[t].items()) == sorted(
            (self._round(j.start + j.limit), j.id, j.partition, j.per_node, j.nodes_held.tolist()) for j in running)
        # the priority order (a merge of groups' heads) is every pending job sorted by (-priority, id):
        # those submitted by the last recalculation with its priority, formed as one sum over them all
        # would (fair-share + size, + age x weight, truncated); the others with the one given at submission
        got = [j.id for j in self.order(now)]
        p = self.p
        recalculated = [(-int(p.weight_fairshare * self._fs.get(j.tenant, 0.0)
                              + p.weight_gpu * (j.gpus / max(1, self.part_gpus.get(j.partition, 0)))
                              + min(1.0, (self._calc_at - j.submit) / p.age_max) * p.weight_age), j.id)
                        for j in self.r.pending.values() if self._ix[j.id] <= self._cut]
        later = [(key, i) for key, i, _ in self._new if i in self.r.pending]
        assert {i for _, i in later} == {j.id for j in self.r.pending.values() if self._ix[j.id] > self._cut}
        assert got == [i for _, i in sorted(recalculated + later)]
        pending = {}
        for j in self.r.pending.values():
            pending[j.tenant] = pending.get(j.tenant, 0) + 1
        assert self.pending_of == pending
        # a shape _fits_not rules out (without placing it) has fewer than `nodes` nodes with per_node
        # GPUs free, in its partition (or on any one leaf, for --switches=1)
        free, leaf = self.r.nodes.free, self.r.nodes.leaf
        # the replay's per-pool counts of nodes by GPUs free (what _fit_most and _earliest read in place
        # of a scan) are those of the GPUs free now
        nodes = self.r.nodes
        assert self.r.free_counts == [np.bincount(free[nodes.pool == i], minlength=int(nodes.cap.max()) + 1).tolist()
                                      for i in range(len(nodes.pools))]
        for key in self._no_fit:
            partition, need, per, one_leaf = key
            if self._fits_not(key, partition, need):
                ok = (free >= per) & self.part_mask[partition]
                assert (np.bincount(leaf[ok]).max(initial=0) if one_leaf else ok.sum()) < need
                _CheckedSlurm.ruled_out += 1
        _CheckedSlurm.checks += 1
        super().backfill(now)

    def _start(self, job, nodes):
        dead = self._end_dead
        super()._start(job, nodes)
        _CheckedSlurm.revived += self._end_dead < dead

    def _decay_usage(self, now):
        dt = now - self._usage_at
        want = dict(self.usage)
        if dt > 0:  # the loop it replaces: the same float sums, in the same order
            for t in want:
                want[t] *= 0.5 ** (dt / (7 * 86_400))
            for j in self.r.running.values():
                want[j.tenant] = want.get(j.tenant, 0.0) + j.gpus * dt
        super()._decay_usage(now)
        assert self.usage == want and list(self.usage) == list(want)


@pytest.mark.parametrize("seed", [0, 1])
def test_slurm_bookkeeping_matches_what_it_stands_for(example, seed):
    """The sorted ends, the priority order, pending jobs per tenant, the nodes counted by GPUs free and
    decayed fair-share usage that make the replay fast equal their slow definitions, on a two-tenant
    Slurm plane under load."""
    plan = make_plan(load(example("research-lab")), "research-lab.yaml")
    drawn = [j for j in from_demand(plan, hours=48, seed=seed) if j.plane == "slurm" and j.per_node]
    for j in list(drawn):  # each three times more, minutes later: queues build up (64 nodes)
        drawn += [Job(0, j.workload, j.tenant, j.plane, j.pool, j.submit + 60 * k, j.nodes, j.per_node,
                      j.runtime, j.limit, j.coupled) for k in (1, 2, 3)]
    for j in list(drawn[:40]):  # and jobs of seconds, one GPU, seconds apart: their end (to bf_resolution, by
        # their limit) is often one whose jobs have all ended already
        drawn += [Job(0, j.workload, j.tenant, j.plane, j.pool, j.submit + 7 * k, 1, 1, 5.0 + k, j.limit, False)
                  for k in range(6)]
    drawn.sort(key=lambda j: j.submit)
    for i, j in enumerate(drawn):
        j.id = i + 1
    replay = Replay(cluster.of_plane(plan, "slurm"), drawn)
    _CheckedSlurm.checks = _CheckedSlurm.ruled_out = _CheckedSlurm.dead = _CheckedSlurm.revived = 0
    _CheckedSlurm(replay, plan, policy_of(plan))
    replay.run()
    assert _CheckedSlurm.checks > 10 and all(j.start is not None for j in replay.jobs)
    assert _CheckedSlurm.ruled_out > 10
    assert _CheckedSlurm.dead >= 2 and _CheckedSlurm.revived >= 1
    assert len({j.tenant for j in replay.jobs}) == 2


def test_recommend_quotes_simulate_for_the_plan_and_its_alternatives(example, orchgen):
    """recommend --simulate quotes simulate --compare's figures (same seed, same numbers); plain
    recommend does not replay anything."""
    src = example("university-lab")
    rec = json.loads(orchgen("recommend", src, "--simulate", "--hours", "12", "--seed", "3", "--format", "json",
                             check=True).stdout)
    cmp = json.loads(orchgen("simulate", src, "--hours", "12", "--seed", "3", "--compare", "--format", "json",
                             check=True).stdout)
    assert rec["simulate"]["seed"] == 3 and rec["simulate"]["variants"] == cmp["variants"]
    assert "simulate" not in json.loads(orchgen("recommend", src, "--format", "json", check=True).stdout)
    text = orchgen("recommend", src, "--simulate", "--hours", "12", "--seed", "3", check=True).stdout
    plan_row = next(v for v in cmp["variants"] if v["variant"] == "plan")
    assert "simulated" in text and "seed 3" in text and "split=leaf:" in text
    assert f"{plan_row['planes'][0]['gpu_utilization']:.0%}" in text


def test_orchgen_trace(tmp_path, example):
    plan = make_plan(load(example("research-lab")), "research-lab.yaml")
    trace = tmp_path / "t.csv"
    trace.write_text("submit_time,gpus,nodes,duration,workload\n100,128,16,3600,pretrain-70b\n"
                     "50,8,,60,vision-sweeps\n")
    jobs = from_trace(plan, trace)
    assert [(j.submit, j.nodes, j.per_node, j.workload) for j in jobs] == [
        (0.0, 1, 8, "vision-sweeps"), (50.0, 16, 8, "pretrain-70b")]


def test_alibaba_trace(tmp_path, example):
    """pai_task_table.csv rows (no header): 2 instances of 100% of a GPU, one of 50% (one GPU), one
    without GPUs and one still running (skipped)."""
    plan = make_plan(load(example("baremetal-k8s-training")), "x.yaml")
    trace = tmp_path / "pai_task_table.csv"
    trace.write_text("j1,worker,2,Terminated,1000,1600,600,29.3,100,V100\n"
                     "j2,worker,1,Terminated,1100,1200,600,29.3,50,T4\n"
                     "j3,ps,1,Terminated,1100,1200,600,29.3,,\n"
                     "j4,worker,1,Running,1200,,600,29.3,100,V100\n")
    jobs = from_trace(plan, trace)
    assert [(j.submit, j.gpus, j.runtime) for j in jobs] == [(0.0, 2, 600.0), (100.0, 1, 100.0)]
    report = simulate(plan, jobs)
    assert sum(w["jobs"] for w in report["workloads"]) == 2


@pytest.mark.parametrize("text, field", [
    ("a,b\n1,2\n", "--trace"),
    ("submit_time,gpus,nodes,duration\nsoon,8,1,60\n", "submit_time"),
    ("submit_time,gpus,nodes,duration,workload\n0,8,1,60,nope\n", "workload"),
])
def test_bad_trace_is_one_line(tmp_path, example, orchgen, text, field):
    trace = tmp_path / "bad.csv"
    trace.write_text(text)
    proc = orchgen("simulate", example("research-lab"), "--trace", trace)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{trace}:" in proc.stderr and field in proc.stderr


def test_demand_jobs_come_from_the_workloads(example):
    plan = make_plan(load(example("research-lab")), "research-lab.yaml")
    jobs = from_demand(plan, 24, seed=3)
    assert {j.workload for j in jobs} >= {"pretrain-70b", "model-api"}
    pre = [j for j in jobs if j.workload == "pretrain-70b"]
    assert all(j.nodes == 16 and j.per_node == 8 for j in pre)
    assert all(j.runtime <= j.limit for j in jobs)


def test_plan_does_not_import_the_simulator(example, tmp_path):
    code = ("import sys; from generator.cli import main; sys.argv=['orchgen','plan',%r,'-o',%r]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED:' + ','.join(m for m in ('simpy', 'numpy', 'generator.simulate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code % (str(example("research-lab")), str(tmp_path / "o"))],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "LOADED:", out.stdout


def test_a_trace_is_read_bounded_and_never_quoted(tmp_path):
    """--trace follows issue 19's rules for input: a FIFO is refused before it is read (no hang), and a
    bad field is named by line and column, its text (here a terminal escape) never echoed."""
    import os

    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)
    bad = tmp_path / "bad.csv"
    bad.write_text("submit_time,gpus,nodes,duration\n0,ghp_SECRET\x1b]0;x,1,10\n")
    example = Path(__file__).resolve().parents[1] / "examples" / "research-lab.yaml"
    for trace, want in ((fifo, "not a regular file"), (bad, ":2: gpus: not a number")):
        proc = subprocess.run([*orchgen_argv(), "simulate", str(example), "--trace", str(trace)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert want in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "SECRET" not in proc.stderr + proc.stdout and "\x1b" not in proc.stderr


@pytest.mark.parametrize("name", ["cloud-training", "research-lab"])
def test_planes_replayed_in_other_processes_give_the_same_report(example, name):
    """simulate(parallel=True) replays the planes but the largest in spawned processes: the report, and
    what each job was given by its replay (start, end, preemptions, nodes...), equal a replay in this one."""
    plan = make_plan(load(example(name)), f"{name}.yaml")
    here, away = from_demand(plan, hours=48, seed=3), from_demand(plan, hours=48, seed=3)
    assert len({j.plane for j in here if j.per_node}) == 2
    ticks: list[int] = []
    want = simulate(plan, here, own=True, parallel=False)
    got = simulate(plan, away, own=True, parallel=True, progress=ticks.append)
    assert got == want
    fields = [f.name for f in dataclasses.fields(Job)]
    for a, b in zip(here, away):
        assert [getattr(a, f) for f in fields if f != "nodes_held"] == [getattr(b, f) for f in fields if f != "nodes_held"]
        assert (a.nodes_held is None) == (b.nodes_held is None)
        assert a.nodes_held is None or a.nodes_held.tolist() == b.nodes_held.tolist()
    assert sum(ticks) == sum(1 for j in away if j.end is not None) > 0
    assert any(j.start is not None for j in away if j.plane != "slurm")


def _spawned_workers(pid: int) -> list[int]:
    """The pids of `pid`'s children that are multiprocessing's spawned workers (not its resource tracker)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmdline:
            out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or len(os.sched_getaffinity(0)) < 2,
                    reason="reads /proc; on one CPU simulate replays every plane in its own process")
def test_sigterm_during_a_parallel_replay_ends_it_and_its_workers(tmp_path):
    """`orchgen simulate` replays a plane of 20,000 jobs or more in a spawned process beside the largest
    plane (issue 41). A SIGTERM then ends it the one way (one line, exit 2) at once, and takes the other
    replay with it, rather than waiting for it to finish or leaving it running."""
    import importlib.util
    import random
    import signal
    import time

    spec = importlib.util.spec_from_file_location("orchgen_bench", Path(__file__).parent.parent / "benchmarks"
                                                  / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(bench.fleet(2048)))
    rng, week = random.Random(0), 7 * 86_400
    rows = ["submit_time,gpus,nodes,duration,workload"]  # Slurm's w03 on 1,536 nodes, Kueue's w02 on 512
    rows += [f"{rng.uniform(0, week):.0f},8,1,{rng.expovariate(1 / 20_000):.0f},w03" for _ in range(200_000)]
    rows += [f"{rng.uniform(0, week):.0f},32,4,{rng.expovariate(1 / 3_000):.0f},w02" for _ in range(120_000)]
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(rows) + "\n")
    from tests.support import cli_env

    def foreground() -> None:  # (a CI runner's background job inherits SIGINT ignored; these at their defaults)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)

    proc = subprocess.Popen([*orchgen_argv(), "simulate", str(fleet), "--trace", str(trace), "--format", "json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(), preexec_fn=foreground)
    try:
        deadline = time.monotonic() + 60
        while not (workers := _spawned_workers(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, "no plane was replayed in another process"
            time.sleep(0.05)
        time.sleep(0.5)  # (into both replays: Kueue's plane of 120,000 jobs takes seconds)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 2 and err == b"orchgen: stopped by SIGTERM\n", (proc.returncode, err)
    assert took < 5, f"it waited {took:.1f} s for the other replay"
    left = [pid for pid in workers if Path(f"/proc/{pid}").exists()
            and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not left, f"replay processes left running: {left}"
