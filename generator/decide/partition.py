"""Split the fleet's nodes between the Slurm and the Kubernetes plane.

Sizing rule (also in the bundle README): a workload's demand is max(nodes, ceil(gpus / GPUs per
node)) nodes on its pool. A pool that only one plane wants goes to that plane whole; a pool nobody
names goes to the Kubernetes plane (elastic: services and batch absorb spare nodes). A pool both
planes want is split, in the pool's fabric order (leaf by leaf), Slurm taking the first part, and
never inside an NVLink domain (Slurm's topology/block needs whole ones). `options.split` says how:

* `leaf`: whole leaves (the pool's nodes on a leaf), in proportion to the two demands, rounded, each
  plane keeping at least one; where NVLink domains span leaves, only at leaves where no domain is cut.
  A pool with one such unit goes whole to the larger demand (Slurm on a tie). This is the rule
  orchgen always had; a plane left with no node at all is an error naming the fix.
* `node`: a contiguous block of nodes. Where both demands fit in the pool, the smaller demand
  (Kubernetes on a tie) gets exactly its demand, rounded up to whole NVLink domains, and the other
  plane the rest; where they do not, the nodes are shared in proportion to the demands, each plane
  keeping its largest job that starts all at once (a Slurm allocation, a gang), and where the pool
  cannot hold both of those, the larger demand takes it whole.
* `auto` (the default): whole leaves where they fit, by node where a leaf costs too much. By node
  when the pool has a single leaf (no whole-leaf split exists), when a plane's demand is smaller
  than a leaf and the leaves it would get waste more than that demand (given - demand > demand), or
  when no whole-leaf split meets both demands though the pool holds them; else whole leaves: the
  proportional split, or, if it leaves a plane short, the whole-leaf split nearest to it that meets
  both demands.

A leaf whose nodes end up in both planes (split by node, or two pools sharing the leaf) carries both
planes' traffic; `Split.shared` says which, and what it costs. A node is always in exactly one plane.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import OrchgenError
from ..spec import hostlist
from ..spec.fabric import FabricModel
from .plan import PoolSplit, SharedLeaf

MODES = ("auto", "leaf", "node")


@dataclass(frozen=True)
class Split:
    """How the pools' nodes are split between planes, along the fabric, and why."""

    plane_nodes: dict[str, dict[str, tuple[str, ...]]]  # plane -> pool -> nodes, fabric order
    plane_leaves: dict[str, dict[str, list[str]]]  # plane -> pool -> the leaves those nodes sit on
    reasons: tuple[str, ...]
    pools: tuple[PoolSplit, ...] = ()
    shared: tuple[SharedLeaf, ...] = ()


def split(fabric: FabricModel, pools: list[str], demand: dict[str, dict[str, int]],
          slurm: str | None, kube: str | None, file: str, mode: str = "auto",
          floor: dict[str, dict[str, int]] | None = None, previous: dict[str, str] | None = None,
          held: dict[str, dict[str, str]] | None = None) -> Split:
    """demand: plane -> pool -> nodes. `slurm`/`kube`: the plane names present (or None). floor:
    plane -> pool -> the nodes of its largest job that starts all at once (a Slurm allocation, a
    gang), which a split by node never cuts below while the pool can hold both planes' floors.
    previous: node -> the plane the bundle being replaced gave it; held: pool -> node -> plane, the
    input's fleet.pools[].planes. Both make the split stable (`_stable`)."""
    floor = floor or {}
    out: dict[str, dict[str, tuple[str, ...]]] = {p: {} for p in (slurm, kube) if p}
    reasons: list[str] = []
    decided: list[PoolSplit] = []
    for pool in pools:
        nodes = fabric.pool_nodes(pool)
        wanted = [p for p in (slurm, kube) if p and demand.get(p, {}).get(pool, 0) > 0]
        want = {p: demand[p][pool] for p in wanted}
        if len(wanted) < 2:
            owner = wanted[0] if wanted else (kube or slurm)
            assert owner is not None
            fresh = {n: owner for n in nodes}
            said = False
            if not wanted and slurm and kube:
                whole = f"all {len(nodes)} nodes" if len(nodes) != 1 else "its 1 node"
                why = f"no workload asks for it; {whole} to {owner} (elastic capacity)"
                said = True
            else:
                why = f"only {owner} wants it"
            how = "whole"
        else:
            assert slurm and kube
            floors = (floor.get(slurm, {}).get(pool, 0), floor.get(kube, {}).get(pool, 0))
            s, how, why = _divide(fabric, pool, nodes, want[slurm], want[kube], slurm, kube, mode, floors)
            fresh = {n: (slurm if i < s else kube) for i, n in enumerate(nodes)}
            said = True
        present = [p for p in (slurm, kube) if p]
        before = previous or {}
        new_planes = [p for p in wanted if before and p not in set(before.values())]
        if new_planes:  # a plane the replaced bundle did not have takes its fresh share: moves, which --diff lists
            before = {}
        got, kept_why = _stable(fabric, nodes, fresh, before, (held or {}).get(pool, {}), present, want)
        if new_planes and any(previous.get(n, got[n]) != got[n] for n in nodes):
            reasons.append(f"pool {pool}: {' and '.join(new_planes)} is a plane the replaced bundle did not have: "
                           "the pool is split afresh, and each node that changes plane is a disruptive move "
                           "(`plan --diff` lists the drains)")
        if kept_why:  # the fresh rule's line is quoted in plan.json's split; the plan says what it did
            how = "kept"
            why = f"{kept_why} (fresh: {why})"
            reasons.append(f"pool {pool}: {kept_why}")
        elif said:
            reasons.append(f"pool {pool}: {why}")
        counts = {}
        for plane in present:
            mine = tuple(n for n in nodes if got[n] == plane)
            if mine:
                out[plane][pool] = mine
            counts[plane] = len(mine)  # not a second pass over the pool's nodes per plane (16,384 at 131,072 GPUs)
        decided.append(PoolSplit(pool, how, {p: c for p, c in counts.items() if c or how != "whole"}, want, why))
    reasons += _shortfalls(decided, out)
    for plane, pools_of in out.items():
        if not any(pools_of.values()):
            why = ("with options.split: leaf orchgen never splits a leaf or an NVLink domain; options.split: "
                   "auto splits a leaf by node" if mode == "leaf" else
                   "a pool that is one NVLink domain, which orchgen never splits")
            raise OrchgenError(
                f"the {plane} plane gets no nodes: its workloads only want pools that cannot be split ({why}) "
                "and that the other plane needs more; give its workloads a pool of their own (`pool:`)",
                file, None, "workloads")
    leaves = {plane: {pool: list(dict.fromkeys(fabric.leaf_of(n).name for n in nodes))
                      for pool, nodes in by_pool.items()} for plane, by_pool in out.items()}
    return Split(out, leaves, tuple(reasons), tuple(decided), _shared(fabric, out))


# ------------------------------------------------------------------ a node keeps its plane


def _stable(fabric: FabricModel, nodes: list[str], fresh: dict[str, str], previous: dict[str, str],
            held: dict[str, str], present: list[str], want: dict[str, int]) -> tuple[dict[str, str], str]:
    """The pool's nodes -> plane, stable across re-plans: a node the input holds to a plane
    (fleet.pools[].planes) is there; every other node the replaced bundle had on a plane that is
    still in the plan keeps it; the rest (new nodes, or nodes of a plane gone) are dealt out so that
    each plane nears the share the fresh split gives it (growth goes to the plane that grows), an
    NVLink domain following the plane its other nodes are on, in fabric order, preferring each
    node's fresh plane. Returns (assignment, why) with why "" where it is the fresh split."""
    fixed: dict[str, str] = {}
    for n in nodes:
        plane = held.get(n) or previous.get(n)
        if plane in present:
            fixed[n] = plane
    if not fixed:
        return fresh, ""
    target = {p: sum(1 for n in nodes if fresh[n] == p) for p in present}
    have = {p: sum(1 for n in fixed.values() if n == p) for p in present}
    got = dict(fixed)
    domain_plane: dict[str, str] = {}
    for n, plane in fixed.items():
        dom = fabric.domain_of(n)
        if dom:
            domain_plane.setdefault(dom.name, plane)
    for n in nodes:
        if n in got:
            continue
        dom = fabric.domain_of(n)
        plane = domain_plane.get(dom.name) if dom else None
        if plane is None:
            short = [p for p in present if have[p] < target[p]]
            plane = fresh[n] if fresh[n] in short or not short else max(short, key=lambda p: target[p] - have[p])
            if dom:
                domain_plane[dom.name] = plane
        got[n] = plane
        have[plane] += 1
    if got == fresh:
        return got, ""
    # what the plan says depends on the input and the assignment, not on the history: a re-plan over
    # its own bundle is byte-identical
    held_here = [n for n in nodes if n in held and held[n] in present]
    where = ", ".join(f"{p} {hostlist.compress([n for n in nodes if got[n] == p]) or '-'} ({have[p]} node"
                      f"{'s' * (have[p] != 1)}" + (f", demand {want[p]}" if p in want else "") + ")" for p in present)
    fresh_counts = ", ".join(f"{p} {target[p]}" for p in present)
    pinned = f"; {hostlist.compress(held_here)} held by the pool's planes:" if held_here else ""
    return got, (f"stable: a node keeps its plane across re-plans{pinned} {where}, where a fresh split would give "
                 f"{fresh_counts}; a node moves only where the pool's `planes:` names it under the other plane")


# ------------------------------------------------------------------ where a pool may be cut


def _cuts(fabric: FabricModel, nodes: list[str]) -> list[int]:
    """Positions 1..n-1 where the pool may be cut: no NVLink domain has nodes on both sides."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, n in enumerate(nodes):
        dom = fabric.domain_of(n)
        if dom:
            first.setdefault(dom.name, i)
            last[dom.name] = i
    blocked = [0] * (len(nodes) + 1)
    for name, start in first.items():  # a cut at c splits the domain when start < c <= last
        blocked[start + 1] += 1
        blocked[last[name] + 1] -= 1
    out, open_ = [], 0
    for c in range(1, len(nodes)):
        open_ += blocked[c]
        if open_ == 0:
            out.append(c)
    return out


def _leaf_cuts(fabric: FabricModel, nodes: list[str], cuts: list[int]) -> list[int]:
    """The cuts that fall between two leaves: whole-leaf splits."""
    ok = set(cuts)
    return [i for i in range(1, len(nodes))
            if i in ok and fabric.leaf_of(nodes[i]).name != fabric.leaf_of(nodes[i - 1]).name]


# ------------------------------------------------------------------ one pool both planes want


def _divide(fabric: FabricModel, pool: str, nodes: list[str], ds: int, dk: int, slurm: str, kube: str,
            mode: str, floors: tuple[int, int] = (0, 0)) -> tuple[int, str, str]:
    """(Slurm's share: the first s nodes, leaf | node, why)."""
    n = len(nodes)
    cuts = _cuts(fabric, nodes)
    leaf_cuts = _leaf_cuts(fabric, nodes, cuts)
    if mode == "leaf":
        return _by_leaf(fabric, pool, nodes, leaf_cuts, ds, dk, kube)
    if mode == "node":
        return _by_node(pool, n, cuts, ds, dk, kube, "options.split: node", floors)
    if not leaf_cuts:
        return _by_node(pool, n, cuts, ds, dk, kube, "one leaf switch" if len(_leaves(fabric, nodes)) < 2
                        else "its NVLink domains span every leaf", floors)
    s, _, why = _by_leaf(fabric, pool, nodes, leaf_cuts, ds, dk, kube)
    smallest = min(_leaves(fabric, nodes).values())
    for plane, d, got in ((slurm, ds, s), (kube, dk, n - s)):
        if d < smallest and got - d > d:
            return _by_node(pool, n, cuts, ds, dk, kube,
                            f"{plane} wants {d} node{'s' * (d > 1)}, less than a leaf, and whole leaves would "
                            f"give it {got} ({got - d} idle)", floors)
    if s >= ds and n - s >= dk or ds + dk > n:
        return s, "leaf", why
    fits = [c for c in leaf_cuts if c >= ds and n - c >= dk]
    if fits:
        best = min(fits, key=lambda c: (abs(c - s), c))
        return best, "leaf", (f"demand Slurm {ds} / {kube} {dk} nodes: whole leaves, Slurm the first "
                              f"{best} nodes ({_leaf_count(fabric, nodes[:best])} leaves), {kube} {n - best}; "
                              "the proportional split would leave a plane short")
    return _by_node(pool, n, cuts, ds, dk, kube, "no whole-leaf split gives both planes their demand", floors)


def _leaves(fabric: FabricModel, nodes: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in nodes:
        leaf = fabric.leaf_of(node).name
        out[leaf] = out.get(leaf, 0) + 1
    return out


def _leaf_count(fabric: FabricModel, nodes: list[str]) -> int:
    return len(_leaves(fabric, nodes))


def _by_leaf(fabric: FabricModel, pool: str, nodes: list[str], leaf_cuts: list[int], ds: int, dk: int,
             kube: str) -> tuple[int, str, str]:
    """The whole-leaf rule orchgen always had: proportional, rounded, each plane at least one unit
    (a run of leaves no NVLink domain crosses); one unit goes whole to the larger demand."""
    n, leaves = len(nodes), len(_leaves(fabric, nodes))
    if not leaf_cuts:
        slurm_takes = ds >= dk
        owner = "Slurm" if slurm_takes else kube
        why = ("one leaf" if leaves < 2 else f"its NVLink domains span all {leaves} leaves and a domain is never split")
        return (n if slurm_takes else 0), "leaf", (
            f"wanted by Slurm ({ds} nodes) and {kube} ({dk} nodes), but {why} and a leaf is never split "
            f"(options.split: leaf), so {owner} (the larger demand) takes it")
    units = len(leaf_cuts) + 1
    j = min(units - 1, max(1, round(units * ds / (ds + dk))))
    s = leaf_cuts[j - 1]
    first = fabric.leaf_of(nodes[0]).name
    return s, "leaf", (f"demand Slurm {ds} / {kube} {dk} nodes over {leaves} leaves -> Slurm "
                       f"{_leaf_count(fabric, nodes[:s])} leaves ({first}..), {kube} {_leaf_count(fabric, nodes[s:])}")


def _by_node(pool: str, n: int, cuts: list[int], ds: int, dk: int, kube: str, because: str,
             floors: tuple[int, int] = (0, 0)) -> tuple[int, str, str]:
    """A contiguous block of nodes: the smaller demand gets exactly its demand (whole NVLink domains).
    Where the demands exceed the pool, each plane still keeps its floor (its largest job that starts
    all at once); where the pool cannot hold both floors, the larger demand takes it whole."""
    if not cuts:
        slurm_takes = ds >= dk
        owner = "Slurm" if slurm_takes else kube
        return (n if slurm_takes else 0), "node", (
            f"wanted by Slurm ({ds} nodes) and {kube} ({dk} nodes), but the pool is one NVLink domain, "
            f"which is never split, so {owner} (the larger demand) takes it")
    if ds + dk <= n:
        if dk <= ds:  # Kubernetes gets its demand from the end of the pool
            s = max([c for c in cuts if n - c >= dk] or [cuts[0]])
            small = f"{kube} its {dk}"
        else:  # Slurm its demand from the start
            s = min([c for c in cuts if c >= ds] or [cuts[-1]])
            small = f"Slurm its {ds}"
        rule = f"{small} (the smaller demand), the other plane the rest"
    else:
        target = n * ds / (ds + dk)
        fs, fk = floors
        keep = [c for c in cuts if c >= fs and n - c >= fk]
        if keep:
            s = min(keep, key=lambda c: (abs(c - target), c))
            rule = f"demand ({ds + dk}) exceeds the pool ({n}): shared in proportion"
            if (fs or fk) and s != min(cuts, key=lambda c: (abs(c - target), c)):
                rule += f", each plane keeping its largest job that starts at once (Slurm {fs}, {kube} {fk} nodes)"
        else:
            s = n if ds >= dk else 0
            owner = "Slurm" if s else kube
            return s, "node", (f"wanted by Slurm ({ds} nodes) and {kube} ({dk} nodes), but the {n} nodes cannot "
                               f"hold both planes' largest jobs that start at once (Slurm {fs}, {kube} {fk} "
                               f"nodes), so {owner} (the larger demand) takes it")
    return s, "node", (f"split by node ({because}): Slurm the first {s} of {n} nodes, {kube} the last {n - s}; "
                       f"{rule}")


# ------------------------------------------------------------------ what the plan must say


def _shortfalls(decided: list[PoolSplit], out: dict[str, dict[str, tuple[str, ...]]]) -> list[str]:
    lines = []
    for d in decided:
        for plane, want in d.demand.items():
            got = len(out.get(plane, {}).get(d.pool, ()))
            if got < want:
                total = sum(d.nodes.values())
                if d.how == "kept":
                    cause = ("its nodes keep their planes across re-plans; name the nodes to move under "
                             f"{plane} in the pool's `planes:`")
                elif d.how == "whole":
                    cause = f"the pool has {total} nodes"
                elif sum(d.demand.values()) > total:
                    cause = f"both planes want {sum(d.demand.values())} of its {total} nodes"
                elif d.how == "leaf":
                    cause = "whole leaves (options.split: leaf) do not fit both demands"
                else:
                    cause = "NVLink domains are never split"
                lines.append(f"pool {d.pool}: {plane} gets {got} node{'s' * (got != 1)} for a demand of {want}: "
                             f"{cause}")
    return lines


def _shared(fabric: FabricModel, out: dict[str, dict[str, tuple[str, ...]]]) -> tuple[SharedLeaf, ...]:
    plane_of = {n: plane for plane, by_pool in out.items() for nodes in by_pool.values() for n in nodes}
    result = []
    one_switch = len(fabric.leaves) == 1
    for leaf in fabric.leaves:
        mine: dict[str, list[str]] = {}
        for node in leaf.nodes:
            if node in plane_of:
                mine.setdefault(plane_of[node], []).append(node)
        if len(mine) < 2:
            continue
        counts = ", ".join(f"{plane} {len(nodes)}" for plane, nodes in mine.items())
        if one_switch:
            cost = (f"the fabric is this one switch, so the split costs no topology (every node is one hop "
                    f"from every other, whichever plane it is in); the planes share its bandwidth ({counts} nodes)")
        else:
            slurm = len(mine.get("slurm", ()))
            cost = (f"both planes' traffic shares {leaf.name}'s uplinks to the spines ({counts} nodes): a "
                    f"Kubernetes job's traffic leaving the leaf competes with Slurm jobs' for them"
                    + (f", and a Slurm job asking for one switch (--switches=1) finds {slurm} of its "
                       f"{len(leaf.nodes)} nodes there" if slurm else ""))
        if fabric.kind == "infiniband":
            cost += ("; both planes are in one InfiniBand subnet (give them separate partition keys if "
                     "they must not reach each other)")
        result.append(SharedLeaf(leaf.name, {p: hostlist.compress(nodes) for p, nodes in mine.items()}, cost))
    return tuple(result)
