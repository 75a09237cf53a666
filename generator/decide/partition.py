"""Split the fleet's nodes between the Slurm and the Kubernetes plane, whole leaves at a time.

Sizing rule (also in the bundle README): a workload's demand is max(nodes, ceil(gpus / GPUs per
node)) nodes on its pool (its `pool`, else the fleet's first GPU pool). A pool that only one
plane wants goes to that plane whole; a pool nobody names goes to the Kubernetes plane (elastic:
services and batch absorb spare nodes). A pool both planes want is split at leaf boundaries in
proportion to the two demands, rounded, each plane keeping at least one leaf; Slurm takes the
lowest-numbered leaves. A leaf is never split: a pool of one leaf that both planes want goes to the
larger demand (Slurm on a tie); a plane left with no node at all is an error naming the fix.
Nor is an NVLink domain (Slurm's topology/block needs whole ones): where domains span leaves, the
split is made in whole units of lcm(nodes per leaf, nodes per domain) nodes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import OrchgenError
from ..spec.fabric import FabricModel


@dataclass(frozen=True)
class Split:
    plane_leaves: dict[str, dict[str, list[str]]]  # plane -> pool -> leaf names
    reasons: tuple[str, ...]


def split(fabric: FabricModel, pools: list[str], demand: dict[str, dict[str, int]],
          slurm: str | None, kube: str | None, file: str) -> Split:
    """demand: plane -> pool -> nodes. `slurm`/`kube`: the plane names present (or None)."""
    leaves_of: dict[str, list[str]] = {p: [] for p in pools}
    for leaf in fabric.leaves:
        leaves_of[leaf.pool].append(leaf.name)
    domain_size = {d.pool: len(d.nodes) for d in fabric.domains}
    out: dict[str, dict[str, list[str]]] = {p: {} for p in (slurm, kube) if p}
    reasons: list[str] = []
    for pool in pools:
        wanted = [p for p in (slurm, kube) if p and demand.get(p, {}).get(pool, 0) > 0]
        leaves = leaves_of[pool]
        if not wanted:
            owner = kube or slurm
            assert owner is not None
            out[owner][pool] = leaves
            if slurm and kube:
                reasons.append(f"pool {pool}: no workload asks for it; all {len(leaves)} leaves to "
                               f"{owner} (elastic capacity)")
            continue
        if len(wanted) == 1:
            out[wanted[0]][pool] = leaves
            continue
        assert slurm and kube
        ds, dk = demand[slurm][pool], demand[kube][pool]
        # leaves per unit that holds whole leaves and whole NVLink domains (1 without domains)
        unit = math.lcm(fabric.nodes_per_leaf, domain_size.get(pool, 1)) // fabric.nodes_per_leaf
        units = -(-len(leaves) // unit)
        if units < 2:
            # a leaf is never split: the larger demand takes it, the other plane uses its other pools
            owner = slurm if ds >= dk else kube
            out[owner][pool] = leaves
            if len(leaves) < 2:
                reasons.append(f"pool {pool}: one leaf wanted by Slurm ({ds} nodes) and {kube} ({dk} nodes); "
                               f"a leaf is never split, so {owner} (the larger demand) takes it")
            else:
                reasons.append(f"pool {pool}: wanted by Slurm ({ds} nodes) and {kube} ({dk} nodes), but its NVLink "
                               f"domains span all {len(leaves)} leaves and a domain is never split, so {owner} "
                               "(the larger demand) takes it")
            continue
        s = unit * min(units - 1, max(1, round(units * ds / (ds + dk))))
        out[slurm][pool], out[kube][pool] = leaves[:s], leaves[s:]
        reasons.append(f"pool {pool}: demand Slurm {ds} / {kube} {dk} nodes over {len(leaves)} leaves "
                       f"-> Slurm {s} leaves ({', '.join(leaves[:s][:1])}..), {kube} {len(leaves) - s}")
    for plane, pools_of in out.items():
        if not any(pools_of.values()):
            raise OrchgenError(
                f"the {plane} plane gets no nodes: its workloads only want pools that cannot be split "
                "(a single leaf switch, or NVLink domains spanning every leaf) and that the other plane "
                "needs more; orchgen never splits a leaf or an NVLink domain: give its workloads a pool of "
                "their own (`pool:`)", file, None, "workloads")
    return Split(out, tuple(reasons))
