"""`orchgen simulate`: each gang scheduler's admission and preemption as the bundle configures it
(generator/simulate/admission.py, kube.py; issue 24).

Each case replays a few jobs on a real plan of a small two-tenant fleet under Kueue, Volcano and
KAI, the policy read from the objects the bundle writes, and asserts where the three differ:
* Kueue's quotas are per pool (flavor): a service within its tenant's quota of the pool reclaims
  GPUs another tenant borrowed there; Volcano and KAI count quotas over the whole plane, where the
  borrower is within its own, so the service waits and nothing is preempted;
* KAI runs non-preemptible work (services, priority 1000) only within quota: a service larger than
  its tenant's quota never starts under KAI, and starts by borrowing under Kueue and Volcano;
* a service preempts its own tenant's batch job under all three; a batch job preempts nothing;
* a bundle whose ClusterQueues set no preemption preempts nothing;
* `simulate --compare` gives the gang-scheduler variants different numbers where the policies differ.
"""
from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

import numpy as np
import pytest
import yaml

from generator.decide import make_plan
from generator.simulate import admission, simulate
from generator.simulate import cluster
from generator.simulate.cluster import Nodes
from generator.simulate.engine import Replay
from generator.simulate.jobs import Job
from generator.simulate.kube import GangScheduler
from generator.spec import load

SERVICE, BATCH = 1000, 50  # render/kubernetes/priority.py


def fleet(tmp_path, pools: list[tuple[str, int]], gang: str, workloads: list[dict] | None = None):
    doc = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "two"},
           "fleet": {"fabric": {"kind": "ethernet", "nodes_per_leaf": 8},
                     "pools": [{"name": p, "nodes": n, "gpu": {"type": "l40s", "count": 4}, "cpus": 32,
                                "memory_gib": 256} for p, n in pools]},
           "tenants": [{"name": "a", "share": 1}, {"name": "b", "share": 1}],
           "workloads": workloads or [
               {"name": "api", "long_lived_services": True, "tenant": "a", "pool": pools[0][0],
                "serving": {"gpus_per_replica": 4, "min_replicas": 1, "max_replicas": 2, "model": "m",
                            "weights": "baked"}},
               {"name": "train", "multi_tenant": True, "bare_metal": False, "tenant": "b", "pool": pools[0][0],
                "nodes": 2, "tightly_coupled": True}],
           "options": {"gang_scheduler": gang}}
    src = tmp_path / f"two-{gang}.yaml"
    src.write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = make_plan(load(src), src.name)
    assert plan.gang_scheduler == gang
    return plan, src


def replay(plan, jobs: list[Job], policy=None) -> Replay:
    r = Replay(cluster.of_plane(plan, "kubernetes"), jobs)
    GangScheduler(r, plan, policy)
    r.run()
    return r


def job(i, tenant, pool, submit, pods, runtime, priority, workload="w"):
    return Job(i, workload, tenant, "kubernetes", pool, float(submit), pods, 4, float(runtime), float(runtime),
               pods > 1, service=priority == SERVICE, priority=priority)


GANGS = ("kueue", "volcano", "kai")


def borrowed_then_service(pool="p1"):
    """b's 8-GPU training job fills pool p1 (b's quota there is 4: Kueue counts 4 borrowed; b's
    quota over the plane is 8: Volcano and KAI count none); at t=100 a's service scales up by one
    4-GPU replica in p1, within a's quota however counted."""
    return [job(1, "b", pool, 0, 2, 1000, BATCH, "train"), job(2, "a", pool, 100, 1, 500, SERVICE, "api")]


@pytest.mark.parametrize("gang", GANGS)
def test_a_service_reclaims_borrowed_gpus_only_where_the_quota_is_per_pool(tmp_path, gang):
    plan, _ = fleet(tmp_path, [("p1", 2), ("p2", 2)], gang)
    quotas = {t.name: {p: q.gpus for p, q in t.quotas.items()} for t in plan.tenants}
    assert quotas == {"a": {"p1": 4, "p2": 4}, "b": {"p1": 4, "p2": 4}}
    train, api = replay(plan, borrowed_then_service()).jobs
    if gang == "kueue":  # reclaimWithinCohort: b is above its nominal quota of p1's flavor
        assert (api.start, train.preemptions, train.lost_gs, train.start) == (100.0, 1, 8 * 100.0, 600.0)
    else:  # b holds 8 of its 8 over the plane: not above its deserved / quota, nothing to reclaim
        assert (api.start, train.preemptions, train.lost_gs, train.start) == (1000.0, 0, 0.0, 0.0)


@pytest.mark.parametrize("gang", GANGS)
def test_kai_runs_a_service_only_within_its_quota(tmp_path, gang):
    plan, _ = fleet(tmp_path, [("p", 4)], gang)
    # a's quota is 8 of the pool's 16; its service asks for 12, b is idle
    (api,) = replay(plan, [job(1, "a", "p", 0, 3, 500, SERVICE, "api")]).jobs
    assert api.start == (None if gang == "kai" else 0.0)


@pytest.mark.parametrize("gang", GANGS)
def test_a_service_preempts_its_own_tenant_s_batch_and_a_batch_job_preempts_nothing(tmp_path, gang):
    plan, _ = fleet(tmp_path, [("p", 4)], gang)
    def full():
        return [job(1, "a", "p", 0, 2, 1000, BATCH), job(2, "b", "p", 0, 2, 1000, BATCH)]
    a_batch, b_batch, api = replay(plan, full() + [job(3, "a", "p", 100, 1, 500, SERVICE, "api")]).jobs
    assert api.start == 100.0 and a_batch.preemptions == 1 and b_batch.preemptions == 0
    assert a_batch.start == 600.0  # requeued, runs when the service's replica ends
    a_batch, b_batch, late = replay(plan, full() + [job(3, "a", "p", 100, 1, 500, BATCH)]).jobs
    assert late.start == 1000.0 and a_batch.preemptions == b_batch.preemptions == 0


def test_a_bundle_without_preemption_preempts_nothing(tmp_path, monkeypatch):
    from generator.render.kubernetes import kueue

    plan, _ = fleet(tmp_path, [("p1", 2), ("p2", 2)], "kueue")
    real = kueue.cluster_queue

    def without(plan, tenant):
        cq = real(plan, tenant)
        del cq["spec"]["preemption"]
        return cq

    monkeypatch.setattr(kueue, "cluster_queue", without)
    policy = admission.of_plan(plan)
    assert not policy.within_queue and not policy.reclaim and policy.borrow
    train, api = replay(plan, borrowed_then_service(), policy).jobs
    assert (api.start, train.preemptions) == (1000.0, 0)


def test_policies_read_from_the_bundle(tmp_path):
    kueue = admission.of_plan(fleet(tmp_path, [("p1", 2), ("p2", 2)], "kueue")[0])
    assert kueue.per_pool and kueue.quota[("a", "p1")] == 4 and kueue.within_queue and kueue.reclaim
    volcano = admission.of_plan(fleet(tmp_path, [("p1", 2), ("p2", 2)], "volcano")[0])
    assert not volcano.per_pool and volcano.quota[("a", "")] == 8 and volcano.limit["a"] == 16
    kai = admission.of_plan(fleet(tmp_path, [("p1", 2), ("p2", 2)], "kai")[0])
    assert kai.preemptible_below == 100 and kai.must_fit_quota(SERVICE) and not kai.must_fit_quota(BATCH)


def test_compare_tells_the_gang_schedulers_apart(tmp_path, orchgen):
    workloads = [
        {"name": "api", "long_lived_services": True, "tenant": "a", "pool": "p1",
         "serving": {"gpus_per_replica": 4, "min_replicas": 1, "max_replicas": 2, "model": "m", "weights": "baked"}},
        {"name": "train", "multi_tenant": True, "bare_metal": False, "tenant": "b", "pool": "p1", "nodes": 1,
         "jobs_per_day": 60, "runtime": "02:00:00"}]
    # p1: 16 GPUs, quotas 8 + 8; b's training jobs (4 GPUs each, about 5 at once) fill what a's
    # service leaves, 4 of them borrowed from a's p1 quota; b's quota over the plane is 16, never exceeded
    _, src = fleet(tmp_path, [("p1", 4), ("p2", 4)], "kueue", workloads)
    out = json.loads(orchgen("simulate", src, "--hours", "48", "--compare", "--format", "json", check=True).stdout)
    by = {v["variant"]: v for v in out["variants"]}
    lost = {name: {p["workload"]: p["preemptions"] for p in by[name]["preemptions"]}
            for name in ("plan", "gang=volcano", "gang=kai")}
    assert lost["plan"]["train"] > 0  # Kueue reclaims p1 from the borrowing training jobs at each peak
    assert lost["gang=volcano"]["train"] == lost["gang=kai"]["train"] == 0
    assert by["plan"]["gang_scheduler"] == "kueue" and by["gang=kai"]["gang_scheduler"] == "kai"
    table = orchgen("simulate", src, "--hours", "48", "--compare", check=True).stdout
    assert "preemptions" in table


def small_nodes(count: int, per_node: int) -> Nodes:
    cap = np.full(count, per_node, dtype=np.int32)
    return Nodes([f"n{i}" for i in range(count)], np.zeros(count, dtype=np.int32), np.zeros(count, dtype=np.int32),
                 cap, cap.copy(), ["p"], ["leaf0"])


class _Whole(Replay):
    """Checks after every start that no node is oversubscribed and the job got all its pods."""

    def start(self, j, where):
        super().start(j, where)
        assert (self.nodes.free >= 0).all()
        assert len(set(where.tolist())) == j.nodes


def _policies(gpus: int) -> list[admission.Admission]:
    half = {("a", "p"): gpus // 2, ("b", "p"): gpus - gpus // 2}
    whole = {("a", ""): gpus // 2, ("b", ""): gpus - gpus // 2}
    return [admission.Admission("kueue", True, half, {}, True, True, True, True),
            admission.Admission("volcano", False, whole, {"a": gpus, "b": gpus}, True, True, True, True),
            admission.Admission("kai", False, whole, {}, True, True, True, True, 100, 100)]


@settings(max_examples=120, deadline=None)
@given(count=st.integers(1, 8), per_node=st.integers(1, 8),
       shapes=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 8), st.integers(0, 5), st.integers(1, 9),
                                 st.booleans(), st.booleans()), min_size=1, max_size=10))
def test_preemption_never_places_part_of_a_job(count, per_node, shapes):
    """The guide's property with preemption on: under each scheduler's policy, random pools and jobs
    of two tenants, services and batch: every start is whole, no node is oversubscribed, every GPU
    comes back, and a job that never starts is one no policy could start (larger than the pool, or
    a KAI service larger than its tenant's quota)."""
    for policy in _policies(count * per_node):
        jobs = [Job(i + 1, "w", "a" if a else "b", "kubernetes", "p", float(t), pods, min(per, per_node), float(run),
                    float(run), pods > 1, service=svc, priority=SERVICE if svc else BATCH)
                for i, (pods, per, t, run, a, svc) in enumerate(shapes)]
        r = _Whole(small_nodes(count, per_node), jobs)
        plan = type("P", (), {"tenants": []})()
        GangScheduler(r, plan, policy)
        r.run()
        assert r.partial_gs.sum() == 0
        assert int(r.nodes.free.sum()) == count * per_node
        for j in r.jobs:
            if j.start is None:
                quota = policy.quota[policy.key(j.tenant, "p")]
                assert j.nodes > count or (policy.must_fit_quota(j.priority) and j.gpus > quota), (policy.scheduler, j)
            else:
                assert len(j.nodes_held) == j.nodes
