"""The split of a fleet between the Slurm and the Kubernetes plane (issue 11), as properties over
random fleets (shorthand and cabled fabrics, pools sharing leaves, NVLink domains) and every
`options.split`:

* the planes are disjoint and together cover the fleet; NVLink domains are whole;
* each plane gets at least its demand in nodes on each pool, or the plan says why;
* a plane's part of a pool is one contiguous block of the pool's fabric order, Slurm's first;
* the leaves with nodes on both planes are exactly the ones plan.json and the README name;
* the Slurm topology and the Volcano HyperNodes list each leaf's nodes of their own plane only;
* `split: leaf` is the old whole-leaf rule, compared with the code orchgen had before (commit 40e4300,
  copied below as the oracle) on shorthand fleets.

And the two fleets the issue names: a one-switch lab that wants both planes plans, and a SuperPOD
whose only Kubernetes workload is a one-node eval gives Kubernetes that one node, not a scalable unit.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from generator.decide import make_plan
from generator.decide.partition import split
from generator.errors import OrchgenError
from generator.render import render
from generator.render.kubernetes import volcano
from generator.render.slurm.topology import slurm_tree
from generator.spec import Fleet, fabric as fabric_mod, hostlist

from .refusals import check_refusal

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


# ------------------------------------------------------------------ the oracle: the split before issue 11


def old_build(nodes_per_leaf: int, leaves_per_spine: int | None, pools: list[tuple[str, list[str], int]]):
    """generator/fabric.py's build() at 40e4300: leaves -> (pool, nodes), domains' pool -> size."""
    chunks = [(pool, nodes[i:i + nodes_per_leaf]) for pool, nodes, _ in pools
              for i in range(0, len(nodes), nodes_per_leaf)]
    names = [f"leaf{i:0{max(3, len(str(len(chunks))))}d}" for i in range(1, len(chunks) + 1)]
    return dict(zip(names, chunks)), {pool: size for pool, _, size in pools if size > 1}


def old_split(leaves: dict[str, tuple[str, list[str]]], domain_size: dict[str, int], nodes_per_leaf: int,
              pools: list[str], demand: dict[str, dict[str, int]], slurm: str | None, kube: str | None):
    """decide/partition.py's split() at 40e4300, verbatim but for its inputs: plane -> pool -> leaves,
    or the string "refused"."""
    leaves_of: dict[str, list[str]] = {p: [] for p in pools}
    for name, (pool, _) in leaves.items():
        leaves_of[pool].append(name)
    out: dict[str, dict[str, list[str]]] = {p: {} for p in (slurm, kube) if p}
    for pool in pools:
        wanted = [p for p in (slurm, kube) if p and demand.get(p, {}).get(pool, 0) > 0]
        pool_leaves = leaves_of[pool]
        if not wanted:
            out[kube or slurm][pool] = pool_leaves
            continue
        if len(wanted) == 1:
            out[wanted[0]][pool] = pool_leaves
            continue
        ds, dk = demand[slurm][pool], demand[kube][pool]
        unit = math.lcm(nodes_per_leaf, domain_size.get(pool, 1)) // nodes_per_leaf
        units = -(-len(pool_leaves) // unit)
        if units < 2:
            out[slurm if ds >= dk else kube][pool] = pool_leaves
            continue
        s = unit * min(units - 1, max(1, round(units * ds / (ds + dk))))
        out[slurm][pool], out[kube][pool] = pool_leaves[:s], pool_leaves[s:]
    for plane, pools_of in out.items():
        if not any(pools_of.values()):
            return "refused"
    return out


@st.composite
def shorthand_cases(draw):
    per_leaf = draw(st.integers(1, 12))
    pools = []
    for i in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from([1, 1, 2, 3, 4, 6, 18]))
        nodes = size * draw(st.integers(1, 8))
        pools.append((f"p{i}", [f"p{i}-{k:03d}" for k in range(1, nodes + 1)], size))
    planes = draw(st.sampled_from([("slurm", "kubernetes"), ("slurm", None), (None, "kubernetes")]))
    demand: dict[str, dict[str, int]] = {}
    for plane in planes:
        for pool, _, _ in pools:
            if plane and draw(st.booleans()):
                demand.setdefault(plane, {})[pool] = draw(st.integers(1, 40))
    return per_leaf, draw(st.one_of(st.none(), st.integers(1, 4))), pools, planes, demand


@settings(max_examples=400, deadline=None)
@given(shorthand_cases())
def test_split_leaf_is_the_old_whole_leaf_rule(case):
    per_leaf, per_spine, pools, (slurm, kube), demand = case
    fab = fabric_mod.build("infiniband", per_leaf, per_spine, pools)
    leaves, domains = old_build(per_leaf, per_spine, pools)
    assert [leaf.name for leaf in fab.leaves] == list(leaves)  # same leaves, same names
    want = old_split(leaves, domains, per_leaf, [p for p, _, _ in pools], demand, slurm, kube)
    try:
        got = split(fab, [p for p, _, _ in pools], demand, slurm, kube, "f.yaml", "leaf")
    except OrchgenError as exc:
        assert want == "refused", exc
        assert "gets no nodes" in exc.message and "never splits a leaf" in exc.message
        return
    assert want != "refused"
    nodes = {name: nodes for name, (_, nodes) in leaves.items()}
    expected = {plane: {pool: tuple(n for leaf in ls for n in nodes[leaf]) for pool, ls in by_pool.items() if ls}
                for plane, by_pool in want.items()}
    assert got.plane_nodes == expected
    assert {plane: {pool: ls for pool, ls in by_pool.items()} for plane, by_pool in got.plane_leaves.items()} == \
        {plane: {pool: ls for pool, ls in by_pool.items() if ls} for plane, by_pool in want.items()}
    assert not got.shared  # shorthand leaves hold one pool, and whole leaves never split one


# ------------------------------------------------------------------ random fleets, every mode


@st.composite
def fleets(draw) -> dict[str, Any]:
    """Fleets with work for both planes, on a shorthand fabric or leaves as cabled (which may mix pools
    and be of any size), NVLink domains on some pools."""
    pools: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 3))):
        gpu = i == 0 or draw(st.booleans())
        size = draw(st.sampled_from([1, 1, 2, 4])) if gpu else 1
        pool: dict[str, Any] = {"name": f"p{i}", "nodes": size * draw(st.integers(1, 10)),
                                "hostnames": None, "cpus": 64, "memory_gib": 512}
        pool["hostnames"] = f"p{i}-[001-{pool['nodes']:03d}]" if pool["nodes"] > 1 else f"p{i}-001"
        if gpu:
            pool["gpu"] = {"type": "h100", "count": draw(st.sampled_from([1, 4, 8]))}
        if size > 1:
            pool["nvlink_domain_nodes"] = size
        pools.append(pool)
    fabric: dict[str, Any] = {"kind": draw(st.sampled_from(["infiniband", "roce", "ethernet"]))}
    if draw(st.booleans()):
        fabric["nodes_per_leaf"] = draw(st.integers(1, 16))
        fabric["leaves_per_spine"] = draw(st.one_of(st.none(), st.integers(1, 3)))
        fabric = {k: v for k, v in fabric.items() if v is not None}
    else:
        nodes = [n for p in pools for n in hostlist.expand(p["hostnames"])]
        if draw(st.booleans()):  # cable the pools' nodes in another order: pools share leaves
            nodes = draw(st.permutations(nodes))
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(nodes) - 1)), max_size=6))) if len(nodes) > 1 else []
        bounds = [0, *[c for c in cuts if c < len(nodes)], len(nodes)]
        fabric["leaves"] = [{"name": f"leaf-{j}", "nodes": ",".join(nodes[a:b])}
                            for j, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        if len(fabric["leaves"]) > 1 and draw(st.booleans()):
            names = [leaf["name"] for leaf in fabric["leaves"]]
            fabric["spines"] = [{"name": "sp-a", "leaves": names},
                                {"name": "sp-b", "leaves": names[: draw(st.integers(1, len(names)))]}]
    names = [p["name"] for p in pools]
    workloads = [{"name": "train", "nodes": draw(st.integers(2, 6)), "tightly_coupled": True, "bare_metal": True,
                  "pool": draw(st.sampled_from(names))},
                 {"name": "serve", "long_lived_services": True, "bare_metal": False,
                  "pool": draw(st.sampled_from(names))}]
    if draw(st.booleans()):
        workloads.append({"name": "eval", "bare_metal": False, "pool": draw(st.sampled_from(names)),
                          "gpus": draw(st.integers(0, 16))})
    if draw(st.booleans()):
        workloads.append({"name": "train2", "nodes": draw(st.integers(2, 12)), "tightly_coupled": True,
                          "bare_metal": True, "pool": draw(st.sampled_from(names))})
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "split"},
        "fleet": {"bare_metal": draw(st.booleans()), "fabric": fabric, "pools": pools},
        "workloads": workloads,
        # kubernetes_min_nodes 1: a plane of any size, the split's subject (issue 36's floor: test_fleet_choice)
        "options": {"split": draw(st.sampled_from(["auto", "leaf", "node"])), "slurm_version": "25.11",
                    "kubernetes_min_nodes": 1},
    }


def fit(data: dict[str, Any]) -> dict[str, Any]:
    """Keep workloads within their pools (what load's checks require)."""
    sizes = {p["name"]: p["nodes"] for p in data["fleet"]["pools"]}
    gpus = {p["name"]: p.get("gpu") for p in data["fleet"]["pools"]}
    for w in data["workloads"]:
        w["nodes"] = min(w.get("nodes", 1), sizes[w["pool"]])
        if not gpus[w["pool"]]:
            w.pop("gpus", None)
        elif "gpus" in w:  # one job's GPUs fit its nodes (issue 24 refuses more)
            w["gpus"] = min(w["gpus"], w["nodes"] * gpus[w["pool"]]["count"])
    return data


def check_split(plan) -> None:
    fab = plan.fabric
    every = [n for leaf in fab.leaves for n in leaf.nodes]
    plane_of: dict[str, str] = {}
    for plane in plan.planes.values():
        for s in plane.slices:
            for n in s.nodes:
                assert n not in plane_of, f"{n} is in two planes"
                plane_of[n] = plane.name
            assert set(hostlist.expand(s.hostlist)) == set(s.nodes)
            assert list(s.leaves) == list(dict.fromkeys(fab.leaf_of(n).name for n in s.nodes))
    native = [p for p in plan.planes.values() if p.slices]
    assert set(plane_of) == set(every), "nodes on no plane"
    for dom in fab.domains:
        assert len({plane_of[n] for n in dom.nodes}) == 1, f"NVLink domain {dom.name} split"
    # each plane's part of a pool: a contiguous block of the pool's fabric order, Slurm's first
    for pool in fab.pools:
        order = [plane_of[n] for n in fab.pool_nodes(pool)]
        runs = [p for i, p in enumerate(order) if i == 0 or order[i - 1] != p]
        assert len(runs) == len(set(runs)) and (runs[0] == "slurm" or "slurm" not in runs), (pool, runs)
    # demand met, or the plan says why
    for s in plan.pool_splits:
        for plane, want in s.demand.items():
            got = sum(len(x.nodes) for x in plan.planes[plane].slices if x.pool == s.pool) \
                if plane in plan.planes else 0
            assert got == s.nodes.get(plane, 0)
            if got < want:
                assert any(r.startswith(f"pool {s.pool}: {plane} gets {got} node") and f"demand of {want}" in r
                           for r in plan.reasons), (s, plan.reasons)
    # the leaves carrying both planes are the ones named
    both = [leaf.name for leaf in fab.leaves if len({plane_of[n] for n in leaf.nodes}) > 1]
    assert [s.leaf for s in plan.shared_leaves] == both
    for s in plan.shared_leaves:
        assert {p: set(hostlist.expand(h)) for p, h in s.nodes.items()} == \
            {p: {n for n in fab.leaf_of(next(iter(hostlist.expand(h)))).nodes if plane_of[n] == p}
             for p, h in s.nodes.items()}
        assert s.cost
    # each plane's topology lists its own nodes only, leaf by leaf
    if plan.slurm_plane and plan.slurm_plane.slices:
        tree = slurm_tree(plan, plan.slurm_plane.slices)
        assert {sw.name: set(sw.nodes) for sw in tree if sw.nodes} == \
            {leaf.name: {n for n in leaf.nodes if plane_of[n] == "slurm"} for leaf in fab.leaves
             if any(plane_of[n] == "slurm" for n in leaf.nodes)}
    if plan.kube_plane and plan.kube_plane.slices and plan.gang_scheduler == "volcano":
        leaves = {h["metadata"]["name"]: {m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]}
                  for h in volcano.topology(plan) if h["spec"]["tier"] == 1}
        assert all(plane_of[n] == plan.kube_plane.name for nodes in leaves.values() for n in nodes)
    assert native


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_random_splits(data):
    fleet = Fleet.model_validate(fit(data))
    try:
        plan = make_plan(fleet, "split.yaml")
    except OrchgenError as exc:
        # The split's refusal: a plane with no node at all, because a pool cannot be split (whole
        # leaves, or one NVLink domain); or placement's: a workload's own pool or job size that its
        # plane's part cannot hold (tests/refusals.py says what each must name).
        kind = check_refusal(exc, fit(data))
        mode = data["options"]["split"]
        if kind.startswith("split:"):
            assert mode == "leaf" or "one NVLink domain" in exc.message, exc
        event(f"refused ({mode}): {kind}")
        return
    assume(plan.slurm_plane is not None and plan.kube_plane is not None)
    event(f"{data['options']['split']}: " + ",".join(sorted({s.how for s in plan.pool_splits})))
    check_split(plan)
    if data["options"]["split"] == "leaf":
        cut = [s for s in plan.shared_leaves
               if len({plan.fabric.pool_of[n] for n in plan.fabric.leaf_of(
                   hostlist.expand(next(iter(s.nodes.values())))[0]).nodes}) == 1]
        assert not cut, "split: leaf cut a one-pool leaf"
    files = render(plan)
    assert "plan.json" in files


# ------------------------------------------------------------------ the fleets of the issue


from .support import on_kubernetes, plan_of  # noqa: E402


def test_the_one_switch_lab_plans_both_planes():
    plan = on_kubernetes("university-lab", "model-eval", "data-prep")
    check_split(plan)
    assert [leaf.name for leaf in plan.fabric.leaves] == ["ib-lab"] and not plan.fabric.spines
    assert plan.slurm_plane.nodes == hostlist.expand("a100-[01-07]")
    assert set(plan.kube_plane.nodes) == set(hostlist.expand("a100-08,l40s-[01-04],cpu-[01-04]"))
    (a100,) = [s for s in plan.pool_splits if s.pool == "a100"]
    assert a100.how == "node" and a100.nodes == {"slurm": 7, "kubernetes": 1}
    (shared,) = plan.shared_leaves
    assert shared.leaf == "ib-lab" and "costs no topology" in shared.cost
    # whole leaves cannot do it: with options.split: leaf the one leaf's A100s all go to Slurm (the
    # larger demand), and model-eval, which names the a100 pool, is refused rather than moved
    with pytest.raises(OrchgenError) as refused:
        on_kubernetes("university-lab", "model-eval", "data-prep", split="leaf")
    assert refused.value.field == "workloads[3].pool"
    assert "the split gave all 8 nodes of a100 to slurm" in refused.value.message


def test_superpod_eval_takes_one_node_not_a_scalable_unit():
    plan = on_kubernetes("superpod", "eval-harness")
    check_split(plan)
    assert plan.kube_plane.nodes == ["dgx128"]
    assert plan.slurm_plane.nodes == hostlist.expand("dgx[001-031,033-127]")
    (shared,) = plan.shared_leaves
    assert shared.leaf == "su4-leaf" and shared.nodes == {"slurm": "dgx[097-127]", "kubernetes": "dgx128"}
    assert "31 of its 32 nodes" in shared.cost
    # whole leaves: Kubernetes would take a whole SU (the old behaviour, still options.split: leaf)
    whole = on_kubernetes("superpod", "eval-harness", split="leaf")
    assert whole.kube_plane.nodes == hostlist.expand("dgx[097-128]") and not whole.shared_leaves


def test_auto_keeps_whole_leaves_where_they_fit():
    doc = yaml.safe_load((EXAMPLES / "research-lab.yaml").read_text())
    doc["workloads"][2]["pool"] = "h100"  # model-api (16 GPUs = 2 nodes) now wants the h100 pool too
    doc["workloads"][2]["gpus"] = 160  # 20 nodes: more than a leaf of 16, so whole leaves fit
    plan = make_plan(Fleet.model_validate(doc), "research-lab.yaml")
    (h100,) = [s for s in plan.pool_splits if s.pool == "h100"]
    assert h100.how == "leaf" and not plan.shared_leaves
    check_split(plan)


def test_plan_json_and_readme_say_which_leaves_carry_both_planes(tmp_path, orchgen):
    out = tmp_path / "out"
    orchgen("plan", on_kubernetes("superpod", "eval-harness", tmp_path=tmp_path), "-o", out, check=True)
    import json

    data = json.loads((out / "plan.json").read_text())
    assert data["split"]["mode"] == "auto"
    assert data["split"]["shared_leaves"][0]["leaf"] == "su4-leaf"
    assert data["split"]["pools"][0]["how"] == "node"
    readme = (out / "README.md").read_text()
    assert "**su4-leaf** (Slurm `dgx[097-127]`, Kubernetes `dgx128`)" in readme
    assert "su4-leaf lists only the Slurm plane's nodes" in (out / "slurm" / "topology.conf").read_text()
