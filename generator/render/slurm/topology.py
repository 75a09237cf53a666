"""The Slurm plane's network topology, cut from the one fabric model and shaped by the Slurm version.

What each version can say (checked against the topology.conf(5), topology.yaml(5) and slurm.conf(5)
man pages of Slurm 22.05, 24.11 and 26.05, and by booting them; see tests/test_slurm_real.py):

* every version: topology/tree in topology.conf, `SwitchName=leaf001 Nodes=...`, `SwitchName=spine
  Switches=...`, one TopologyPlugin for the whole cluster;
* 23.11: topology/block (`BlockName=... Nodes=...`), every block the same size, no BlockSizes;
* 24.05: `BlockSizes=base,2*base,...` (each size a power-of-two multiple of the previous, every block
  at least the base size);
* 25.05: topology.yaml, which holds several named topologies at once (the fabric tree as the
  cluster default beside block topologies), bound per partition with `Topology=`; when it exists
  topology.conf and TopologyPlugin are ignored.

Before 25.05 one plugin covers every node, so blocks are written only when every Slurm node sits in
an NVLink domain of one size; otherwise the tree is written and the reason goes at the top of the
file (and into the README). A topology/block cluster places nodes outside every block in no
multi-node job, and one BlockSizes list cannot describe domains of two sizes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...spec import hostlist
from ...errors import OrchgenError
from ...decide.plan import Plan, PoolSlice

TREE_TOPOLOGY = "fabric"  # topology.yaml name of the fabric tree (the cluster default)


def version_of(plan: Plan) -> tuple[int, int]:
    major, minor = plan.slurm_version.split(".")[:2]  # a patch release (25.11.1) is its minor's
    return int(major), int(minor)


def block_topology_name(size: int) -> str:
    """topology.yaml name of the block topology of `size`-node NVLink domains: stable as pools change."""
    return f"nvlink{size}"


@dataclass(frozen=True)
class Switch:
    """A switch of topology.conf's tree, with the nodes or switches below it."""

    name: str
    nodes: tuple[str, ...]  # a leaf's nodes (empty above the leaves)
    switches: tuple[str, ...]  # a spine's leaves, the core's spines
    compressed: str = ""  # hostlist.compress(nodes) where it is known already (the fabric leaf's, Leaf.hostlist)

    @property
    def line(self) -> str:
        child = f"Nodes={self.compressed or hostlist.compress(self.nodes)}" if self.nodes else \
            f"Switches={hostlist.compress(self.switches)}"
        return f"SwitchName={self.name} {child}"

    def yaml(self) -> dict[str, str]:
        if self.nodes:
            return {"switch": self.name, "nodes": self.compressed or hostlist.compress(self.nodes)}
        return {"switch": self.name, "children": hostlist.compress(self.switches)}


@dataclass(frozen=True)
class Block:
    """A block of the block topology: one NVLink domain's nodes."""

    name: str  # the NVLink domain's name in the fabric model
    nodes: tuple[str, ...]

    @property
    def hostlist(self) -> str:
        return hostlist.compress(self.nodes)


# Spare trays per NVLink domain where options.slurm.nvlink_spares is not given: 2 in domains of SPARES_MIN_DOMAIN
# nodes or more (an NVL72 rack's 18 compute trays: BlockSizes=16, as topology.conf(5)'s own example keeps 2 of each
# 32-node block spare with BlockSizes=30,120), else none. The trade-off: a job of the base size still fits a domain
# with up to that many trays drained (one failed tray would otherwise take the rack out of domain-sized jobs);
# no single job gets every node of one domain, and a job larger than the base spans two domains.
DEFAULT_SPARES = 2
SPARES_MIN_DOMAIN = 16
IMPORTED = ("topology_conf", "topology_yaml", "ibnetdiscover")  # fleet.fabric.from: the site's own file, whose
# BlockSizes (if any) decide the spares instead


@dataclass(frozen=True)
class BlockTopology:
    """The NVLink domains of one size: blocks, and the sizes Slurm may aggregate them to."""

    size: int
    pools: tuple[str, ...]
    blocks: tuple[Block, ...]
    spares: int = 0  # nodes per domain kept out of the base block size (options.slurm.nvlink_spares)

    @property
    def name(self) -> str:
        return block_topology_name(self.size)

    @property
    def base(self) -> int:
        """BlockSizes' first value: the nodes of one domain a job may count on (topology.conf(5): every block
        has at least the base size)."""
        return self.size - self.spares

    @property
    def block_sizes(self) -> tuple[int, ...]:
        """The base size, then each doubling that still fits in the blocks there are."""
        sizes = [self.base]
        while sizes[-1] * 2 <= self.base * len(self.blocks):
            sizes.append(sizes[-1] * 2)
        return tuple(sizes)


@dataclass(frozen=True)
class Topology:
    """The topology file Slurm reads (topology.conf or topology.yaml): the tree and the blocks."""

    file: str  # topology.conf | topology.yaml
    plugin: str | None  # TopologyPlugin for slurm.conf; None with topology.yaml (it is ignored then)
    tree: tuple[Switch, ...]  # leaves first, then spines, then the core
    blocks: tuple[BlockTopology, ...]  # what is written: one (topology.conf) or one per size (yaml)
    block_sizes_line: bool  # topology.conf: BlockSizes= (24.05+)
    notes: tuple[str, ...]  # why the file looks as it does (fallbacks); file header and README

    @property
    def kind(self) -> str:
        return "yaml" if self.file == "topology.yaml" else self.plugin.split("/")[1]  # type: ignore[union-attr]

    def partition_topology(self, pools: list[str]) -> str | None:
        """topology.yaml name a partition over `pools` binds to; None means the cluster default.

        A partition can use a block topology only if each of its nodes is in one of its blocks
        (Slurm refuses to place a job on nodes outside the blocks), so only partitions whose pools
        all belong to one block topology bind to it."""
        if self.kind != "yaml":
            return None
        for topo in self.blocks:
            if pools and set(pools) <= set(topo.pools):
                return topo.name
        return None

    def yaml_data(self) -> list[dict]:
        """topology.yaml as data: the tree first (cluster default), then the block topologies."""
        out: list[dict] = [{"topology": TREE_TOPOLOGY, "cluster_default": True,
                            "tree": {"switches": [s.yaml() for s in self.tree]}}]
        for topo in self.blocks:
            out.append({"topology": topo.name, "cluster_default": False,
                        "block": {"block_sizes": list(topo.block_sizes),
                                  "blocks": [{"block": b.name, "nodes": b.hostlist}
                                             for b in topo.blocks]}})
        return out


def slurm_tree(plan: Plan, slices: tuple[PoolSlice, ...]) -> tuple[Switch, ...]:
    """The fabric restricted to the Slurm plane's nodes: each leaf with the plane's nodes on it (a
    leaf split by node, or shared with another plane's pool, keeps only those), leaves without one
    dropped, spines without a remaining leaf dropped, the core kept over several remaining spines."""
    fab = plan.fabric
    mine = {n for s in slices for n in s.nodes}
    switches = []
    for leaf in fab.leaves:
        nodes = tuple(n for n in leaf.nodes if n in mine)
        if nodes:  # the whole leaf: its hostlist as plan.json has it
            switches.append(Switch(leaf.name, nodes, (), leaf.hostlist if len(nodes) == len(leaf.nodes) else ""))
    kept = {s.name for s in switches}
    spines = [(sp.name, tuple(leaf for leaf in sp.leaves if leaf in kept)) for sp in fab.spines]
    spines = [(name, leaves) for name, leaves in spines if leaves]
    switches += [Switch(name, (), leaves) for name, leaves in spines]
    if len(spines) > 1 and fab.core:
        switches.append(Switch(fab.core, (), tuple(name for name, _ in spines)))
    return tuple(switches)


def _block_topologies(plan: Plan, slices: tuple[PoolSlice, ...]) -> tuple[BlockTopology, ...]:
    """One per NVLink domain size, in pool order; a domain split between planes is refused."""
    sizes: dict[int, list[PoolSlice]] = {}
    for s in slices:
        if s.nvlink_domain_nodes > 1:
            sizes.setdefault(s.nvlink_domain_nodes, []).append(s)
    out = []
    for size, pools in sizes.items():
        names = {s.pool for s in pools}
        slurm_nodes = {n for s in pools for n in s.nodes}
        blocks = []
        for dom in plan.fabric.domains:
            if dom.pool not in names:
                continue
            inside = [n for n in dom.nodes if n in slurm_nodes]
            if inside and len(inside) < len(dom.nodes):
                # the split never cuts a domain (decide/partition.py): this guards the renderer's input
                raise OrchgenError(
                    f"NVLink domain {dom.name} of pool {dom.pool!r} is split between the Slurm plane "
                    f"({len(inside)} of its {len(dom.nodes)} nodes) and another plane; Slurm's "
                    "topology/block needs whole domains", plan.source, None, "fleet.fabric")
            if inside:
                blocks.append(Block(dom.name, dom.nodes))
        out.append(BlockTopology(size, tuple(s.pool for s in pools), tuple(blocks), _spares(plan, size)))
    return tuple(out)


def _spares(plan: Plan, size: int) -> int:
    """Spare nodes per NVLink domain of `size` nodes (options.slurm.nvlink_spares, else the default above)."""
    asked = plan.slurm_options.nvlink_spares
    if asked is None and plan.fabric.source in IMPORTED:
        # the site's own file: its BlockSizes base says how many nodes of each domain it keeps spare
        base = plan.fabric.block_base
        return size - base if base and base < size else 0
    if asked is None:
        return DEFAULT_SPARES if size >= SPARES_MIN_DOMAIN else 0
    if asked >= size:
        raise OrchgenError(f"nvlink_spares {asked} keeps every node of the {size}-node NVLink domains spare: "
                           f"at most {size - 1}", plan.source, None, "options.slurm.nvlink_spares")
    return asked


def _spare_notes(blocks: tuple[BlockTopology, ...], sizes_line: bool) -> tuple[str, ...]:
    out = []
    for t in blocks:
        if t.spares and sizes_line:
            out.append(f"BlockSizes starts at {t.base}: each {t.size}-node NVLink domain keeps {t.spares} spare "
                       f"node(s) (options.slurm.nvlink_spares), so a {t.base}-node job still fits a domain with "
                       f"{t.spares} drained; no job gets all {t.size} nodes of one domain, and a larger one spans "
                       "two (topology.conf(5) BlockSizes: every block has at least the base size)")
        elif t.spares:
            out.append(f"no spare nodes per NVLink domain here (options.slurm.nvlink_spares): they need BlockSizes, "
                       "from Slurm 24.05")
    return tuple(out)


def topology(plan: Plan) -> Topology:
    plane = plan.slurm_plane
    assert plane is not None
    slices = plane.slices
    tree = slurm_tree(plan, slices)
    version = version_of(plan)
    nvlink = [s for s in slices if s.nvlink_domain_nodes > 1]
    fabric = _fabric_notes(plan)
    if version >= (25, 5):
        blocks = _block_topologies(plan, slices)
        return Topology("topology.yaml", None, tree, blocks, False, (*fabric, *_spare_notes(blocks, True)))
    if not nvlink:
        return Topology("topology.conf", "topology/tree", tree, (), False, fabric)
    why = _no_blocks_reason(plan.slurm_version, slices, nvlink)
    if why:
        return Topology("topology.conf", "topology/tree", tree, (), False, (*fabric, why))
    notes = ["topology/block replaces the fabric tree here: before Slurm 25.05 one topology plugin "
             "covers the whole cluster (topology.yaml from 25.05 holds both)"]
    if version < (24, 5):
        notes.append(f"no BlockSizes line: it needs Slurm 24.05 (this is {plan.slurm_version}); "
                     "Slurm picks the aggregation levels itself")
    blocks = _block_topologies(plan, slices)
    return Topology("topology.conf", "topology/block", tree, blocks, version >= (24, 5),
                    (*fabric, *notes, *_spare_notes(blocks, version >= (24, 5))))


def _fabric_notes(plan: Plan) -> tuple[str, ...]:
    """Where the switches come from, and the leaves this plane shares with the other one."""
    fab = plan.fabric
    out = []
    if fab.source_file:
        out.append(f"switches as imported from {fab.source_file} ({fab.source})")
    for shared in plan.shared_leaves:
        if "slurm" in shared.nodes:
            # off bare metal the plan's node names are invented (issue 15): say how many, not which
            others = "; ".join(
                f"{len(hostlist.expand(nodes)) if plan.platform.cloud else nodes} "
                f"{'node(s) ' if plan.platform.cloud else ''}on the {plane} plane"
                for plane, nodes in shared.nodes.items() if plane != "slurm")
            out.append(f"{shared.leaf} lists only the Slurm plane's nodes of the leaf ({others}): see the "
                       "README, How the nodes are split")
    return tuple(out)


def _no_blocks_reason(version: str, slices: tuple[PoolSlice, ...], nvlink: list[PoolSlice]) -> str | None:
    """Why NVLink domains cannot be written as topology/block before 25.05, or None if they can."""
    major, minor = version.split(".")
    if (int(major), int(minor)) < (23, 11):
        return (f"NVLink domains not described: topology/block needs Slurm 23.11 and this is "
                f"{version}; the fabric tree is written instead "
                "(slurm_version 25.05 or later writes topology.yaml with both)")
    plain = [s.pool for s in slices if s.nvlink_domain_nodes <= 1]
    if plain:
        return (f"NVLink domains not described: pool(s) {', '.join(plain)} have none, and under "
                "topology/block nodes outside every block get no multi-node jobs; before Slurm 25.05 "
                "one topology plugin covers the cluster, so the fabric tree is written instead "
                "(slurm_version 25.05 or later writes topology.yaml with both)")
    sizes = sorted({s.nvlink_domain_nodes for s in nvlink})
    if len(sizes) > 1:
        return (f"NVLink domains not described: they come in sizes {', '.join(map(str, sizes))} and "
                "one topology/block has one base block size; the fabric tree is written instead "
                "(slurm_version 25.05 or later writes topology.yaml with one block topology per size)")
    return None


def covered_nodes(topo: Topology) -> list[str]:
    """Every node the written topology places, in file order (tests: each Slurm node exactly once)."""
    if topo.kind == "block":
        return [n for t in topo.blocks for b in t.blocks for n in b.nodes]
    return [n for s in topo.tree for n in s.nodes]
