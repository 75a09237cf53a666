"""One plane's nodes as the simulator sees them: GPUs free per node, and which pool and leaf each is in."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..decide.plan import Plan


@dataclass
class Nodes:
    names: list[str]
    pool: np.ndarray  # pool index of each node
    leaf: np.ndarray  # leaf index of each node
    cap: np.ndarray  # GPUs per node
    free: np.ndarray  # GPUs free now
    pools: list[str]
    leaves: list[str]

    def mask(self, pool: str) -> np.ndarray:
        return self.pool == self.pools.index(pool)

    def pool_gpus(self) -> dict[str, int]:
        return {p: int(self.cap[self.pool == i].sum()) for i, p in enumerate(self.pools)}


def of_plane(plan: Plan, plane: str) -> Nodes:
    """The nodes of `plane` in the plan's fabric order (its slices' nodes, leaf by leaf)."""
    names: list[str] = []
    pool: list[int] = []
    leaf: list[int] = []
    cap: list[int] = []
    pools: list[str] = []
    leaves: dict[str, int] = {}
    for s in plan.planes[plane].slices:
        if s.pool not in pools:
            pools.append(s.pool)
        for n in s.nodes:
            names.append(n)
            pool.append(pools.index(s.pool))
            leaf.append(leaves.setdefault(plan.fabric.leaf_of(n).name, len(leaves)))
            cap.append(s.gpus_per_node)
    capacity = np.array(cap, dtype=np.int32)
    return Nodes(names, np.array(pool, dtype=np.int32), np.array(leaf, dtype=np.int32), capacity,
                 capacity.copy(), pools, list(leaves))


def pick(ok: np.ndarray, leaf: np.ndarray, n: int, one_leaf: bool, nleaves: int) -> np.ndarray | None:
    """`n` node indexes among those `ok`: on the one leaf that holds them with the fewest to spare
    (best fit, as topology/tree places a job on the fewest switches), else, unless `one_leaf`, the
    first `n` in fabric order. None when they do not fit."""
    return pick_or_most(ok, leaf, n, one_leaf, nleaves)[0]


def pick_or_most(ok: np.ndarray, leaf: np.ndarray, n: int, one_leaf: bool,
                 nleaves: int) -> tuple[np.ndarray | None, int]:
    """pick's nodes, and where they do not fit, the most nodes it could have had (fewer than `n`): the
    `ok` nodes in all, or with `one_leaf` the most on one leaf. (A caller keeps it: until that many
    more nodes have come free, the same job still does not fit.)"""
    idx = ok.nonzero()[0]  # (flatnonzero of a 1-D array, without its wrappers: this runs per placement)
    if idx.size < n:
        return None, idx.size
    if nleaves > 1:
        on = leaf[idx]
        counts = np.bincount(on, minlength=nleaves)
        fits = (counts >= n).nonzero()[0]
        if fits.size:
            best = fits[counts[fits].argmin()]
            return idx[on == best][:n], n
        if one_leaf:
            return None, int(counts.max())
    return idx[:n], n
