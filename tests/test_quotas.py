"""Quotas as rendered add up: per pool, the tenants' nominal quotas in the Kueue ClusterQueues sum
to the pool's capacity exactly (GPUs, CPUs, memory); Volcano and KAI queues (not per pool) sum to
the plane's capacity, each tenant's being its per-pool quotas summed. A property over random fleets.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from generator.decide import make_plan
from generator.render.kubernetes import manifests as k8s
from generator.spec import Fleet


@st.composite
def kube_fleets(draw) -> dict[str, Any]:
    pools = []
    for i in range(draw(st.integers(1, 4))):
        pool = {"name": f"p{i}", "nodes": draw(st.integers(1, 40)), "cpus": draw(st.integers(1, 256)),
                "memory_gib": draw(st.integers(4, 4096))}
        if i == 0 or draw(st.booleans()):
            pool["gpu"] = {"type": "h100", "count": draw(st.sampled_from([1, 2, 4, 8]))}
        pools.append(pool)
    tenants = [{"name": f"t{k}", "share": draw(st.one_of(st.integers(1, 12), st.integers(1, 1_000_000)))}
               for k in range(draw(st.integers(0, 6)))]
    workloads = []
    for j in range(draw(st.integers(1, 3))):
        w: dict[str, Any] = {"name": f"w{j}", "long_lived_services": True, "multi_tenant": True,
                             "pool": draw(st.sampled_from(pools))["name"]}
        if tenants:
            w["tenant"] = draw(st.sampled_from(tenants))["name"]
        pool = next(p for p in pools if p["name"] == w["pool"])
        if pool.get("gpu") and draw(st.booleans()):
            w["gpus"] = draw(st.integers(0, pool["nodes"] * pool["gpu"]["count"]))
        workloads.append(w)
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "prop"},
        "fleet": {"fabric": {"nodes_per_leaf": draw(st.integers(1, 16)),
                             "leaves_per_spine": draw(st.one_of(st.none(), st.integers(1, 4)))},
                  "pools": pools},
        "tenants": tenants, "workloads": workloads,
        "options": {"gang_scheduler": draw(st.sampled_from(["kueue", "volcano", "kai"]))},
    }


def _gib(q: str | int) -> int:
    m = re.fullmatch(r"(\d+)Gi", str(q))
    assert m, q
    return int(m[1])


def _objects(files: dict[str, bytes], name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(files.get(f"kubernetes/manifests/{name}", b"")) if d]


def check_kueue(plan, files) -> None:
    flavors: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    objs = _objects(files, "20-kueue.yaml")
    # a flavor is named after its spec (content name), its pool is its orchgen.io/pool label
    pool_of = {o["metadata"]["name"]: o["spec"]["nodeLabels"]["orchgen.io/pool"]
               for o in objs if o["kind"] == "ResourceFlavor"}
    for cq in (o for o in objs if o["kind"] == "ClusterQueue"):
        tenant = next(t for t in plan.tenants if t.name == cq["metadata"]["name"])
        for rg in cq["spec"]["resourceGroups"]:
            for fl in rg["flavors"]:
                q = {r["name"]: r["nominalQuota"] for r in fl["resources"]}
                got = (int(q["nvidia.com/gpu"]), int(q["cpu"]), _gib(q["memory"]))
                want = tenant.quotas[pool_of[fl["name"]]]
                assert got == (want.gpus, want.cpus, want.memory_gib)
                for i, v in enumerate(got):
                    flavors[pool_of[fl["name"]]][i] += v
    for s in plan.kube_plane.slices:
        n = len(s.nodes)
        assert flavors[s.pool] == [s.gpus, s.cpus * n, s.memory_gib * n], s.pool


def _plane(plan) -> tuple[int, int, int]:
    ss = plan.kube_plane.slices
    return (sum(s.gpus for s in ss), sum(s.cpus * len(s.nodes) for s in ss),
            sum(s.memory_gib * len(s.nodes) for s in ss))


def _tenant_sum(tenant) -> tuple[int, int, int]:
    qs = tenant.quotas.values()
    return sum(q.gpus for q in qs), sum(q.cpus for q in qs), sum(q.memory_gib for q in qs)


def check_volcano(plan, files) -> None:
    total = [0, 0, 0]
    queues = [o for o in _objects(files, "20-volcano.yaml") if o["kind"] == "Queue"]
    assert {q["metadata"]["name"] for q in queues} == {t.name for t in plan.tenants}
    for q in queues:
        tenant = next(t for t in plan.tenants if t.name == q["metadata"]["name"])
        d, cap = q["spec"]["deserved"], q["spec"]["capability"]
        got = (int(d["nvidia.com/gpu"]), int(d["cpu"]), _gib(d["memory"]))
        assert got == _tenant_sum(tenant)
        assert (int(cap["nvidia.com/gpu"]), int(cap["cpu"]), _gib(cap["memory"])) == _plane(plan)
        assert 1 <= q["spec"]["weight"] <= 65535
        for i, v in enumerate(got):
            total[i] += v
    assert tuple(total) == _plane(plan)
    # weights keep the shares' order (what the proportion plugin would divide by; the bundle runs
    # the capacity plugin, which reads `deserved`)
    w = {q["metadata"]["name"]: q["spec"]["weight"] for q in queues}
    for a in plan.tenants:
        for b in plan.tenants:
            if a.share <= b.share:
                assert w[a.name] <= w[b.name]


MB_PER_GIB = 2**30 / 10**6


def check_kai(plan, files) -> None:
    total = [0, 0, 0]
    queues = [o for o in _objects(files, "20-kai.yaml") if o["kind"] == "Queue"]
    parent = queues[0]
    assert "parentQueue" not in parent["spec"]
    children = queues[1:]
    assert {q["metadata"]["name"] for q in children} == {t.name for t in plan.tenants}
    for q in children:
        tenant = next(t for t in plan.tenants if t.name == q["metadata"]["name"])
        r = q["spec"]["resources"]
        assert q["spec"]["parentQueue"] == parent["metadata"]["name"]
        assert r["cpu"]["quota"] % 1000 == 0
        got = (r["gpu"]["quota"], r["cpu"]["quota"] // 1000, round(r["memory"]["quota"] / MB_PER_GIB))
        assert got == _tenant_sum(tenant)
        assert r["memory"]["quota"] == got[2] * 2**30 // 10**6  # whole megabytes, rounded down
        assert r["gpu"]["overQuotaWeight"] == tenant.share
        for i, v in enumerate(got):
            total[i] += v
    assert tuple(total) == _plane(plan)
    p = parent["spec"]["resources"]
    assert (p["gpu"]["quota"], p["cpu"]["quota"] // 1000, round(p["memory"]["quota"] / MB_PER_GIB)) == _plane(plan)
    # KAI: children's quotas within the parent's
    for res in ("gpu", "cpu", "memory"):
        assert sum(q["spec"]["resources"][res]["quota"] for q in children) <= p[res]["quota"]


CHECKS = {"kueue": check_kueue, "volcano": check_volcano, "kai": check_kai}


def check_services_guaranteed(plan) -> None:
    """Each tenant's quota on a pool covers what its services' pods ask for there, where all the
    services fit in the pool; where they do not, the shares decide and the short ones are warned."""
    from generator.decide.quotas import largest_remainder

    for s in plan.kube_plane.slices:
        asks = [sum(d.shape.pods * d.shape.gpus for d in plan.workloads
                    if d.tenant == t.name and d.pool == s.pool
                    and (d.workload_class == "service" or d.serving is not None))
                for t in plan.tenants]
        got = [t.quotas[s.pool].gpus for t in plan.tenants]
        if sum(asks) <= s.gpus:
            assert all(g >= a for g, a in zip(got, asks)), (s.pool, got, asks)
        else:
            assert got == largest_remainder(s.gpus, [t.share for t in plan.tenants])
            short = {t.name for t, g, a in zip(plan.tenants, got, asks) if a > g}
            warned = {w.message.split("'")[0].removeprefix("tenant ") for w in plan.warnings
                      if w.message.startswith("tenant ") and f"on pool {s.pool} " in w.message}
            assert short <= warned, (short, plan.warnings)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kube_fleets())
def test_rendered_nominal_quotas_add_up_to_capacity(data):
    plan = make_plan(Fleet.model_validate(data), "prop.yaml")
    assert plan.kube_plane is not None and plan.gang_scheduler == data["options"]["gang_scheduler"]
    files = k8s.render(plan)
    # per pool, the plan's quotas add up (the renderers only ever copy or sum them)
    for s in plan.kube_plane.slices:
        n = len(s.nodes)
        assert sum(t.quotas[s.pool].gpus for t in plan.tenants) == s.gpus
        assert sum(t.quotas[s.pool].cpus for t in plan.tenants) == s.cpus * n
        assert sum(t.quotas[s.pool].memory_gib for t in plan.tenants) == s.memory_gib * n
    CHECKS[plan.gang_scheduler](plan, files)
    check_services_guaranteed(plan)
    rqs = _objects(files, "10-quotas.yaml")
    # under Kueue the ClusterQueue is the quota (no ResourceQuota refusing the gated pods it queues)
    assert len(rqs) == (0 if plan.gang_scheduler == "kueue" else len(plan.tenants))
    for rq in rqs:  # borrowing is on: the namespace cap is the plane
        assert rq["spec"]["hard"]["requests.nvidia.com/gpu"] == str(_plane(plan)[0])


@pytest.mark.parametrize("gang", ["kueue", "volcano", "kai"])
def test_example_multi_tenant_platform(gang):
    from tests.test_k8s_manifests import example_plan

    plan = example_plan("inference-platform", gang_scheduler=gang)
    CHECKS[gang](plan, k8s.render(plan))


def test_ray_service_is_guaranteed_like_any_service():
    """A Python-native long-lived workload on the Kubernetes plane is a RayService (Ray Serve): its GPUs
    are a service's, guaranteed by its tenant's quota, not left to a small share (issue 21)."""
    from tests.test_k8s_manifests import EXAMPLES, plan_from

    data = yaml.safe_load((EXAMPLES / "serving-platform.yaml").read_text())
    for t in data["tenants"]:
        t["share"] = {"chat": 20, "search": 20, "research": 1}[t["name"]]
    plan = plan_from(data, "serving-platform.yaml")
    ray = next(d for d in plan.workloads if d.name == "agent-pipeline")
    assert ray.workload_class == "ray" and ray.serving is not None and ray.serving.stack == "rayservice"
    # research's services on l40s: the RayService's 4 GPUs and the notebooks' 4; by share alone 32/41 -> 0
    research = next(t for t in plan.tenants if t.name == "research")
    assert research.quotas["l40s"].gpus == ray.shape.pods * ray.shape.gpus + 4 == 8
    assert any("research 8 (by share alone" in r for r in plan.reasons), plan.reasons
    check_services_guaranteed(plan)
