"""The one fabric model: node -> leaf switch -> spine (-> core), and NVLink domains.

Both planes read it: Slurm's topology.conf / topology.yaml and block topology, and Kubernetes'
node labels, Kueue Topology, Volcano HyperNodes and KAI Topology. Leaves never mix pools (a pool
is a rack type; its nodes are cabled to their own leaves), so a plane can be given whole leaves.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Node labels: the same names in the labelling script, flavors, topologies and NodeSet selectors.
LABEL_POOL = "orchgen.io/pool"
LABEL_PLANE = "orchgen.io/plane"
LABEL_LEAF = "orchgen.io/leaf"
LABEL_SPINE = "orchgen.io/spine"
LABEL_NVLINK = "orchgen.io/nvlink-domain"
LABEL_HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Leaf:
    name: str
    pool: str
    nodes: tuple[str, ...]
    spine: str | None  # None when the whole fabric is one leaf


@dataclass(frozen=True)
class Spine:
    name: str
    leaves: tuple[str, ...]


@dataclass(frozen=True)
class NvlinkDomain:
    name: str
    pool: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class FabricModel:
    kind: str
    nodes_per_leaf: int
    leaves: tuple[Leaf, ...]
    spines: tuple[Spine, ...]
    core: str | None  # the switch over several spines
    domains: tuple[NvlinkDomain, ...]
    _leaf_of: dict[str, Leaf] = field(default_factory=dict, compare=False, repr=False)
    _domain_of: dict[str, NvlinkDomain] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for leaf in self.leaves:
            for node in leaf.nodes:
                self._leaf_of[node] = leaf
        for dom in self.domains:
            for node in dom.nodes:
                self._domain_of[node] = dom

    def leaf_of(self, node: str) -> Leaf:
        return self._leaf_of[node]

    def domain_of(self, node: str) -> NvlinkDomain | None:
        return self._domain_of.get(node)

    @property
    def levels(self) -> list[str]:
        """Kubernetes topology levels, broadest first (the order Kueue and KAI want)."""
        out = []
        if self.spines:
            out.append(LABEL_SPINE)
        out.append(LABEL_LEAF)
        return out

    def node_labels(self, node: str) -> dict[str, str]:
        leaf = self.leaf_of(node)
        labels = {LABEL_POOL: leaf.pool, LABEL_LEAF: leaf.name}
        if leaf.spine:
            labels[LABEL_SPINE] = leaf.spine
        dom = self.domain_of(node)
        if dom:
            labels[LABEL_NVLINK] = dom.name
        return labels


def _names(prefix: str, count: int, width: int = 3) -> list[str]:
    width = max(width, len(str(count)))
    return [f"{prefix}{i:0{width}d}" for i in range(1, count + 1)]


def build(kind: str, nodes_per_leaf: int, leaves_per_spine: int | None,
          pools: list[tuple[str, list[str], int]]) -> FabricModel:
    """pools: (pool name, its hostnames in order, nodes per NVLink domain)."""
    chunks: list[tuple[str, tuple[str, ...]]] = []
    for pool, nodes, _ in pools:
        for start in range(0, len(nodes), nodes_per_leaf):
            chunks.append((pool, tuple(nodes[start:start + nodes_per_leaf])))
    leaf_names = _names("leaf", len(chunks))
    per_spine = leaves_per_spine or len(chunks)
    spine_count = -(-len(chunks) // per_spine) if len(chunks) > 1 else 0
    spine_names = ["spine"] if spine_count == 1 else _names("spine", spine_count, 2)
    leaves = tuple(
        Leaf(name, pool, nodes, spine_names[i // per_spine] if spine_count else None)
        for i, (name, (pool, nodes)) in enumerate(zip(leaf_names, chunks))
    )
    spines = tuple(
        Spine(s, tuple(leaf_names[i * per_spine:(i + 1) * per_spine])) for i, s in enumerate(spine_names)
    ) if spine_count else ()
    domain_chunks = [
        (pool, tuple(nodes[start:start + size]))
        for pool, nodes, size in pools if size > 1
        for start in range(0, len(nodes), size)
    ]
    domains = tuple(
        NvlinkDomain(name, pool, nodes)
        for name, (pool, nodes) in zip(_names("nvl", len(domain_chunks)), domain_chunks)
    )
    return FabricModel(kind, nodes_per_leaf, leaves, spines, "core" if spine_count > 1 else None, domains)
