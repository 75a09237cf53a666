"""The one fabric model: node -> leaf switch -> spine(s) (-> core), and NVLink domains.

Both planes read it: Slurm's topology.conf / topology.yaml and block topology, and Kubernetes'
node labels, Kueue Topology, Volcano HyperNodes and KAI Topology, plan.json and `orchgen validate`.
It is built once, when workload.yaml is loaded (`resolve`), from one of three inputs:

* `fleet.fabric.leaves` (+ `spines`, `core`): the switches as cabled, each leaf with the nodes
  cabled to it, of any pools (a lab on one switch; two pools sharing a leaf).
* `fleet.fabric.from`: a topology.conf, topology.yaml or ibnetdiscover file the site keeps (read by
  spec/importers.py). Its leaves, spines and core are taken as they are; its blocks (topology/block)
  are the NVLink domains (see below).
* the shorthand `nodes_per_leaf` / `leaves_per_spine`: each pool's hostlist cut into leaves of that
  many nodes, by position (leaves never mix pools then), one spine per `leaves_per_spine` leaves and
  a core over several spines. This is how fleets were described before leaves could be given.

Cabled input is never added to: no leaf and no switch that the input does not name, with the one
exception the input format states (explicit leaves without `spines`: one spine named `spine` over
all of them, when there are several). Every node of every pool is under exactly one leaf, and a leaf
holds only nodes some pool has; anything else is refused at load, at the line that says it (of
workload.yaml, or of the imported file).

Kubernetes labels a node with one spine. A leaf cabled to several spines (a rail-optimized SuperPOD:
every spine group reaches every scalable unit) carries the first of them, in input order, as its
`orchgen.io/spine`: leaves that share it share a spine domain in Kueue, KAI and Volcano. Slurm's tree
lists every spine.

NVLink domains are whole racks: a pool's `nvlink_domain_nodes` cuts its hostlist into domains, as
before, unless the import has blocks. Blocks (Slurm's topology/block) describe exactly that, so they
ARE the NVLink domains of the nodes they hold: each block lies in one pool, a pool's nodes are all in
blocks or none are, its blocks have one size, and that size must be the pool's `nvlink_domain_nodes`
where the pool gives one (it becomes the pool's domain size otherwise). A topology.conf with blocks and
no switches says nothing about leaves: give `nodes_per_leaf` too, and the shorthand cuts the leaves.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

# node labels: the bundle contract's (generator/contract.py), re-exported
from ..contract import (LABEL_CLIQUE, LABEL_HOSTNAME, LABEL_LEAF, LABEL_NVLINK, LABEL_PLANE,  # noqa: F401
                        LABEL_POOL, LABEL_SPINE, TOPOGRAPH_TIER)
from ..errors import OrchgenError
from . import hostlist
from .models import MAX_FLEET_NODES

if TYPE_CHECKING:
    from .importers import ImportedFabric
    from .models import Fleet, Path_  # noqa: F401

# Topograph's accelerator-interconnect (NVLink) domain label (its label contract: see TOPOGRAPH_TIER)
TOPOGRAPH_ACCELERATOR = "accelerator.topograph.run/domain"
# orchgen's own switch labels, and Topograph's key for the same level
TOPOGRAPH_OF = {LABEL_LEAF: TOPOGRAPH_TIER.format(0), LABEL_SPINE: TOPOGRAPH_TIER.format(1),
                LABEL_NVLINK: TOPOGRAPH_ACCELERATOR}

DEFAULT_SPINE = "spine"  # explicit leaves without spines: the one spine over all of them
SHORTHAND_CORE = "core"


@dataclass(frozen=True)
class Leaf:
    """A leaf switch of the fabric: the nodes cabled to it and the spines above it."""

    name: str
    nodes: tuple[str, ...]
    spines: tuple[str, ...]  # the spines cabled to it, in input order (none: the fabric is one leaf)
    pools: tuple[str, ...]  # the pools of its nodes, in node order

    @property
    def spine(self) -> str | None:
        """The spine Kubernetes labels its nodes with (the first one cabled to it)."""
        return self.spines[0] if self.spines else None

    @cached_property
    def hostlist(self) -> str:
        """Its nodes as one hostlist, compressed once: plan.json and topology.conf each name every leaf's
        nodes, and hostlist.compress's cache (256 lists) had let the first pass's leaves go before the second
        asked for them (131,072 GPUs: 1,024 leaves, 1,845 lists compressed, 8 found again; issue 41)."""
        return hostlist.compress(self.nodes)


@dataclass(frozen=True)
class Spine:
    """A spine switch of the fabric: the leaves cabled to it."""

    name: str
    leaves: tuple[str, ...]


@dataclass(frozen=True)
class NvlinkDomain:
    """An NVLink domain (one NVL72 rack, say): the nodes that share it, all of one pool."""

    name: str
    pool: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class FabricModel:
    """The fabric as orchgen reads it, from the shorthand or an imported file: leaves, spines, NVLink domains."""

    kind: str
    source: str  # shorthand | leaves | topology_conf | topology_yaml | ibnetdiscover
    source_file: str | None  # an import's file, as workload.yaml names it
    nodes_per_leaf: int | None  # the shorthand's (None: leaves as cabled)
    leaves: tuple[Leaf, ...]
    spines: tuple[Spine, ...]
    core: str | None  # the switch over the spines
    domains: tuple[NvlinkDomain, ...]
    pool_of: dict[str, str] = field(default_factory=dict, compare=False, repr=False)  # node -> pool
    _leaf_of: dict[str, Leaf] = field(default_factory=dict, compare=False, repr=False)
    _domain_of: dict[str, NvlinkDomain] = field(default_factory=dict, compare=False, repr=False)
    _pool_nodes: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)
    # RoCE's lossless class for NCCL (fleet.fabric.traffic_class, service_level); None: the default
    traffic_class: int | None = None
    service_level: int | None = None
    # an imported topology's BlockSizes base (its first value): the site's spare nodes per NVLink domain are the
    # domain's size less it (render/slurm/topology.py); None: the file gives no BlockSizes
    block_base: int | None = None

    def __post_init__(self) -> None:
        for pool in self.pool_of.values():
            self._pool_nodes.setdefault(pool, [])
        for leaf in self.leaves:
            for node in leaf.nodes:
                self._leaf_of[node] = leaf
                self._pool_nodes[self.pool_of[node]].append(node)
        for dom in self.domains:
            for node in dom.nodes:
                self._domain_of[node] = dom

    def leaf_of(self, node: str) -> Leaf:
        return self._leaf_of[node]

    def domain_of(self, node: str) -> NvlinkDomain | None:
        return self._domain_of.get(node)

    @property
    def pools(self) -> tuple[str, ...]:
        """Pool names in workload.yaml's order."""
        return tuple(self._pool_nodes)

    def pool_nodes(self, pool: str) -> list[str]:
        """The pool's nodes in fabric order: leaf by leaf, each leaf's nodes as listed."""
        return list(self._pool_nodes.get(pool, ()))

    def domain_nodes(self, pool: str) -> int:
        """Nodes per NVLink domain of the pool (1: none)."""
        return next((len(d.nodes) for d in self.domains if d.pool == pool), 1)

    @property
    def levels(self) -> list[str]:
        """Kubernetes topology levels, broadest first (the order Kueue and KAI want)."""
        out = []
        if self.spines:
            out.append(LABEL_SPINE)
        out.append(LABEL_LEAF)
        return out

    def spine_groups(self) -> list[tuple[str, list[str]]]:
        """(spine label, the leaves that carry it), in fabric order: the Kubernetes spine level."""
        groups: dict[str, list[str]] = {}
        for leaf in self.leaves:
            if leaf.spine:
                groups.setdefault(leaf.spine, []).append(leaf.name)
        return list(groups.items())

    def islands(self) -> list[list[str]]:
        """Groups of leaves that no switch joins (one group: one fabric)."""
        if self.core or len(self.leaves) < 2:
            return [[leaf.name for leaf in self.leaves]]
        parent = {leaf.name: leaf.name for leaf in self.leaves}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for spine in self.spines:
            for leaf in spine.leaves[1:]:
                parent[find(leaf)] = find(spine.leaves[0])
        out: dict[str, list[str]] = {}
        for leaf in self.leaves:
            out.setdefault(find(leaf.name), []).append(leaf.name)
        return list(out.values())

    def node_labels(self, node: str) -> dict[str, str]:
        leaf = self.leaf_of(node)
        labels = {LABEL_POOL: self.pool_of[node], LABEL_LEAF: leaf.name}
        if leaf.spine:
            labels[LABEL_SPINE] = leaf.spine
        dom = self.domain_of(node)
        if dom:
            labels[LABEL_NVLINK] = dom.name
        return labels


# ------------------------------------------------------------------ errors at the line that says it


class FabricProblem(Exception):
    """A fabric that cannot be: at a workload.yaml field (`path`) or at a line of an imported file."""

    def __init__(self, message: str, path: Path_ = (), file: str | None = None, line: int | None = None,
                 field: str | None = None):
        super().__init__(message)
        self.message, self.path, self.file, self.line, self.field = message, path, file, line, field


@dataclass(frozen=True)
class _Where:
    """Where an item of the fabric was said: a workload.yaml path, or a file and line."""

    path: Path_ = ()
    file: str | None = None
    line: int | None = None
    field: str | None = None

    def problem(self, message: str) -> FabricProblem:
        return FabricProblem(message, self.path, self.file, self.line, self.field)


@dataclass(frozen=True)
class _Item:
    """A leaf, spine or block as an imported file gives it, with where it was read."""

    name: str
    members: tuple[str, ...]  # a leaf's nodes, a spine's leaves, a block's nodes
    where: _Where


# ------------------------------------------------------------------ the shorthand


def _names(prefix: str, count: int, width: int = 3) -> list[str]:
    width = max(width, len(str(count)))
    return [f"{prefix}{i:0{width}d}" for i in range(1, count + 1)]


def build(kind: str, nodes_per_leaf: int, leaves_per_spine: int | None,
          pools: list[tuple[str, list[str], int]]) -> FabricModel:
    """The shorthand. pools: (pool name, its hostnames in order, nodes per NVLink domain)."""
    chunks: list[tuple[str, tuple[str, ...]]] = []
    for pool, nodes, _ in pools:
        for start in range(0, len(nodes), nodes_per_leaf):
            chunks.append((pool, tuple(nodes[start:start + nodes_per_leaf])))
    leaf_names = _names("leaf", len(chunks))
    per_spine = leaves_per_spine or len(chunks)
    spine_count = -(-len(chunks) // per_spine) if len(chunks) > 1 else 0
    spine_names = ["spine"] if spine_count == 1 else _names("spine", spine_count, 2)
    leaves = tuple(
        Leaf(name, nodes, (spine_names[i // per_spine],) if spine_count else (), (pool,))
        for i, (name, (pool, nodes)) in enumerate(zip(leaf_names, chunks))
    )
    spines = tuple(
        Spine(s, tuple(leaf_names[i * per_spine:(i + 1) * per_spine])) for i, s in enumerate(spine_names)
    ) if spine_count else ()
    pool_of = {n: pool for pool, nodes, _ in pools for n in nodes}
    return FabricModel(kind, "shorthand", None, nodes_per_leaf, leaves, spines,
                       SHORTHAND_CORE if spine_count > 1 else None, _chunked_domains(pools), pool_of)


def _chunked_domains(pools: list[tuple[str, list[str], int]]) -> tuple[NvlinkDomain, ...]:
    chunks = [
        (pool, tuple(nodes[start:start + size]))
        for pool, nodes, size in pools if size > 1
        for start in range(0, len(nodes), size)
    ]
    return tuple(NvlinkDomain(name, pool, nodes) for name, (pool, nodes) in zip(_names("nvl", len(chunks)), chunks))


# ------------------------------------------------------------------ from the fleet


def resolve(fleet: Fleet, base: Path | None, imported: ImportedFabric | None = None) -> FabricModel:
    """The fabric model of a checked fleet. `base`: the directory of workload.yaml (`from` paths are
    relative to it); None reads no file (then `from` is refused). Raises FabricProblem."""
    model = _resolve(fleet, base, imported)
    fab = fleet.fleet.fabric
    object.__setattr__(model, "traffic_class", fab.traffic_class)  # frozen; set once, as it is built
    object.__setattr__(model, "service_level", fab.service_level)
    return model


def _resolve(fleet: Fleet, base: Path | None, imported: ImportedFabric | None = None) -> FabricModel:
    from .checks import pool_hostnames

    fab = fleet.fleet.fabric
    pools = [(p.name, pool_hostnames(p), p.nvlink_domain_nodes) for p in fleet.fleet.pools]
    _exclusive(fab)
    if fab.from_ is None and fab.leaves is None:
        return build(fab.kind, fab.nodes_per_leaf, fab.leaves_per_spine, pools)
    if fab.from_ is not None:
        kind, rel = next((k, v) for k, v in fab.from_.model_dump().items() if v is not None)
        if imported is None:
            imported = _read_import(kind, rel, base)
        model = _from_import(fleet, kind, rel, imported, pools)
        object.__setattr__(model, "block_base", imported.block_base)  # frozen; set once, as it is built
        return model
    leaves = []
    # A leaf node is a pool node, in one leaf: past the pools' nodes there is an error to find, and
    # past that many more, expanding further only costs memory
    room = sum(len(nodes) for _, nodes, _ in pools) + MAX_FLEET_NODES
    for i, leaf in enumerate(fab.leaves or ()):
        at = ("fleet", "fabric", "leaves", i, "nodes")
        try:  # counted before expanded: "n[0-999999]" in each of thousands of leaves builds nothing
            room -= hostlist.count(leaf.nodes)
        except hostlist.HostlistError as exc:
            raise FabricProblem(f"not a Slurm hostlist: {exc}", at) from None
        if room < 0:
            raise FabricProblem(f"the leaves name more nodes than the pools have "
                                f"({sum(len(n) for _, n, _ in pools)})", at)
        leaves.append(_Item(leaf.name, _hostlist(leaf.nodes, at), _Where(("fleet", "fabric", "leaves", i))))
    spines = None if fab.spines is None else [
        _Item(s.name, tuple(s.leaves), _Where(("fleet", "fabric", "spines", i))) for i, s in enumerate(fab.spines)]
    if spines is None and len(leaves) > 1:
        if DEFAULT_SPINE in (leaf.name for leaf in leaves):
            raise FabricProblem(f"a leaf is named {DEFAULT_SPINE!r}, the name of the one spine over all leaves "
                                "when `spines` is absent: give `spines`", ("fleet", "fabric", "leaves"))
        spines = [_Item(DEFAULT_SPINE, tuple(leaf.name for leaf in leaves), _Where(("fleet", "fabric", "leaves")))]
    core = _Item(fab.core, (), _Where(("fleet", "fabric", "core"))) if fab.core else None
    return _cabled(fab.kind, "leaves", None, pools, leaves, spines or [], core, [],
                   _Where(("fleet", "fabric", "leaves")), fleet)


def read_import(fleet: Fleet, base: Path | None, roots: tuple[str, ...] = ()) -> ImportedFabric | None:
    """The `from` file's cabling (None without `from`), read relative to `base`, confined to it (or
    `roots`, from --input-root). Raises FabricProblem."""
    fab = fleet.fleet.fabric
    _exclusive(fab)
    if fab.from_ is None:
        return None
    kind, rel = next((k, v) for k, v in fab.from_.model_dump().items() if v is not None)
    return _read_import(kind, rel, base, roots)


def of(fleet: Fleet) -> FabricModel:
    """The fabric model of the fleet, from what the loader imported (no file is read here); a problem
    is an OrchgenError naming its field (the CLI points it at its line)."""
    try:
        return resolve(fleet, None, fleet.fleet.fabric._imported)
    except FabricProblem as p:
        from .models import format_path

        raise OrchgenError(p.message, p.file, p.line, p.field or format_path(p.path) or None) from None


def _exclusive(fab) -> None:
    at = ("fleet", "fabric")
    given = fab.model_fields_set
    if fab.from_ is not None:
        kinds = [k for k, v in fab.from_.model_dump().items() if v is not None]
        if len(kinds) != 1:
            raise FabricProblem("give exactly one of topology_conf, topology_yaml, ibnetdiscover"
                                + (f" (got {', '.join(kinds)})" if kinds else ""), (*at, "from"))
        for other in ("leaves", "spines", "core"):
            if other in given:
                raise FabricProblem(f"`from` imports the leaves, spines and core: leave out `{other}`", (*at, other))
        if "leaves_per_spine" in given:
            raise FabricProblem("`from` imports the spines: leave out leaves_per_spine", (*at, "leaves_per_spine"))
        return
    if fab.leaves is None:
        for other in ("spines", "core"):
            if other in given:
                raise FabricProblem(f"`{other}` needs `leaves` (the switches as cabled)", (*at, other))
        return
    for other in ("nodes_per_leaf", "leaves_per_spine"):
        if other in given:
            raise FabricProblem(f"{other} is the shorthand for `leaves`: give one or the other", (*at, other))
    if fab.core and fab.spines is None:
        raise FabricProblem("`core` is the switch above the spines: give `spines` too", (*at, "core"))


def _hostlist(expr: str, path: Path_) -> tuple[str, ...]:
    try:
        names = hostlist.expand(expr)
    except hostlist.HostlistError as exc:
        raise FabricProblem(f"not a Slurm hostlist: {exc}", path) from None
    if not names:
        raise FabricProblem("no nodes: a leaf switch has at least one node cabled to it", path)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise FabricProblem(f"node {name} is listed twice", path)
        seen.add(name)
    return tuple(names)


def _read_import(kind: str, rel: str, base: Path | None, roots: tuple[str, ...] = ()) -> ImportedFabric:
    from . import importers, inputs

    at = ("fleet", "fabric", "from", kind)
    if base is None:
        raise FabricProblem("the import is read when workload.yaml is loaded (orchgen plan/recommend "
                            "read it relative to the file)", at)
    try:  # inside workload.yaml's folder, symbolic links followed (issue 19: no reading /etc/passwd)
        path = inputs.confine(base, rel, roots)
        size = path.stat().st_size
        if not path.is_file():
            raise FabricProblem(f"cannot read {_cut(rel)}: not a regular file", at)
    except inputs.Refused as exc:
        raise FabricProblem(str(exc), at) from None
    except OSError as exc:
        raise FabricProblem(f"cannot read {_cut(rel)} (relative to workload.yaml): {exc.strerror}", at) from None
    if size > importers.MAX_IMPORT_BYTES:
        raise FabricProblem(f"{_cut(rel)} is larger than {importers.MAX_IMPORT_BYTES // 2**20} MiB", at)
    try:
        return importers.load(kind, path)
    except OrchgenError as err:
        raise FabricProblem(err.message, file=err.file, line=err.line, field=err.field) from None


def _cut(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _from_import(fleet: Fleet, kind: str, rel: str, imp: ImportedFabric,
                 pools: list[tuple[str, list[str], int]]) -> FabricModel:
    field_ = f"fabric.from.{kind}"

    def where(line: int | None) -> _Where:
        return _Where(file=imp.source, line=line, field=field_)

    at = _Where(("fleet", "fabric", "from", kind))
    blocks = [_Item(b.name, b.nodes, where(b.line)) for b in imp.blocks]
    if not imp.leaves:  # topology/block only: NVLink domains, but no switches
        fab = fleet.fleet.fabric
        if "nodes_per_leaf" not in fab.model_fields_set:
            raise at.problem(f"{rel} has blocks (NVLink domains) but no switches: give nodes_per_leaf too, "
                             "and the leaves are cut from each pool's hostlist by it")
        model = build(fab.kind, fab.nodes_per_leaf, None, pools)
        domains, sizes = _domains(pools, blocks, at, fleet)
        for name, size in sizes.items():
            pools = [(p, n, size if p == name else d) for p, n, d in pools]
        return FabricModel(model.kind, kind, rel, model.nodes_per_leaf, model.leaves, model.spines, model.core,
                           domains or _chunked_domains(pools), model.pool_of)
    if "nodes_per_leaf" in fleet.fleet.fabric.model_fields_set:
        raise FabricProblem(f"{rel} gives the leaf switches: leave out nodes_per_leaf",
                            ("fleet", "fabric", "nodes_per_leaf"))
    leaves = [_Item(leaf.name, leaf.nodes, where(leaf.line)) for leaf in imp.leaves]
    spines = [_Item(s.name, s.leaves, where(s.line)) for s in imp.spines]
    core = _Item(imp.core, (), where(imp.core_line)) if imp.core else None
    return _cabled(fleet.fleet.fabric.kind, kind, rel, pools, leaves, spines, core, blocks, at, fleet)


def _cabled(kind: str, source: str, source_file: str | None, pools: list[tuple[str, list[str], int]],
            leaves: list[_Item], spines: list[_Item], core: _Item | None, blocks: list[_Item],
            at: _Where, fleet: Fleet) -> FabricModel:
    """Leaves and spines as cabled, checked against the pools; `at`: where to point at for a pool
    node that no leaf holds (the leaves as a whole)."""
    pool_of = {n: pool for pool, nodes, _ in pools for n in nodes}
    _check_names(leaves + spines + ([core] if core else []))
    leaf_of: dict[str, str] = {}
    for leaf in leaves:
        # a node's error points at the leaf's `nodes` in workload.yaml (an import's: at its line)
        nodes_at = replace(leaf.where, path=(*leaf.where.path, "nodes")) if leaf.where.path else leaf.where
        for node in leaf.members:
            if node not in pool_of:
                raise nodes_at.problem(f"leaf {leaf.name} names node {node}, which no pool has"
                                       + _near(node, pool_of))
            if node in leaf_of:
                raise nodes_at.problem(f"node {node} is in two leaves: {leaf_of[node]} and {leaf.name} "
                                       "(a node is cabled to one leaf switch)")
            leaf_of[node] = leaf.name
    for pool, nodes, _ in pools:
        missing = [n for n in nodes if n not in leaf_of]
        if missing:
            raise at.problem(f"{_count(missing)} of pool {pool} ({_short(missing)}) in no leaf: every node is "
                             "cabled to one leaf switch")
    names = [leaf.name for leaf in leaves]
    spines_of: dict[str, list[str]] = {}
    for spine in spines:
        for child in spine.members:
            if child not in names:
                raise spine.where.problem(f"spine {spine.name} names leaf {child}, which is not a leaf"
                                          + _near(child, names))
            spines_of.setdefault(child, []).append(spine.name)
    if spines:
        for leaf in leaves:
            if leaf.name not in spines_of:
                raise leaf.where.problem(f"leaf {leaf.name} is under no spine: list it under the spine it is "
                                         "cabled to")
    model_leaves = tuple(
        Leaf(leaf.name, leaf.members, tuple(spines_of.get(leaf.name, ())),
             tuple(dict.fromkeys(pool_of[n] for n in leaf.members)))
        for leaf in leaves)
    domains, sizes = _domains(pools, blocks, at, fleet)
    if not blocks:
        domains = _chunked_domains(pools)
    else:
        pools = [(p, n, sizes.get(p, d)) for p, n, d in pools]
        covered = {d.pool for d in domains}
        domains += _chunked_domains([(p, n, d) for p, n, d in pools if p not in covered])
    return FabricModel(kind, source, source_file, None, model_leaves,
                       tuple(Spine(s.name, s.members) for s in spines), core.name if core else None,
                       tuple(domains), pool_of)


def _check_names(items: list[_Item]) -> None:
    from .models import _dns_label

    seen: set[str] = set()
    for item in items:
        try:
            _dns_label(item.name)
        except ValueError as exc:
            raise item.where.problem(f"switch name {exc}: it is also a Kubernetes label value and a Volcano "
                                     "HyperNode name") from None
        if item.name in seen:
            raise item.where.problem(f"switch name {item.name} is used twice: a switch is defined once")
        seen.add(item.name)


def _domains(pools: list[tuple[str, list[str], int]], blocks: list[_Item], at: _Where,
             fleet: Fleet) -> tuple[list[NvlinkDomain], dict[str, int]]:
    """An import's blocks as the NVLink domains: (domains, pool -> nodes per domain)."""
    if not blocks:
        return [], {}
    pool_of = {n: pool for pool, nodes, _ in pools for n in nodes}
    index = {p.name: i for i, p in enumerate(fleet.fleet.pools)}
    out: list[NvlinkDomain] = []
    sizes: dict[str, tuple[int, _Item]] = {}
    for block in blocks:
        owners = list(dict.fromkeys(pool_of.get(n) for n in block.members))
        if None in owners:
            node = next(n for n in block.members if n not in pool_of)
            raise block.where.problem(f"block {block.name} names node {node}, which no pool has" + _near(node, pool_of))
        if len(owners) > 1:
            raise block.where.problem(f"block {block.name} holds nodes of pools {owners[0]} and {owners[1]}: an NVLink "
                                      "domain is one rack type")
        pool = owners[0]
        size = len(block.members)
        first = sizes.setdefault(pool, (size, block))
        if first[0] != size:
            raise block.where.problem(f"block {block.name} has {size} nodes but {first[1].name} of the same pool "
                                      f"{pool} has {first[0]}: a pool's NVLink domains are all one size")
        out.append(NvlinkDomain(block.name, pool, block.members))
    for pool, nodes, declared in pools:
        if pool not in sizes:
            continue
        size, block = sizes[pool]
        p = fleet.fleet.pools[index[pool]]
        if "nvlink_domain_nodes" in p.model_fields_set and declared != size:
            raise block.where.problem(f"block {block.name} has {size} nodes but pool {pool} says "
                                      f"nvlink_domain_nodes: {declared}")
        if size > 1 and p.gpu is None:
            raise block.where.problem(f"block {block.name}: an NVLink domain needs GPUs, and pool {pool} has none")
        held = {n for d in out if d.pool == pool for n in d.nodes}
        missing = [n for n in nodes if n not in held]
        if missing:
            raise at.problem(f"{_count(missing)} of pool {pool} ({_short(missing)}) in no block, while its other "
                             "nodes are: a pool's nodes are all in NVLink domains or none are")
    return out, {pool: size for pool, (size, _) in sizes.items()}


def _count(nodes: list[str]) -> str:
    return f"{len(nodes)} node{'s' * (len(nodes) > 1)}"


def _short(nodes: list[str]) -> str:
    text = hostlist.compress(nodes)
    return text if len(text) <= 80 else text[:77] + "..."


def _near(name: str, known) -> str:
    import difflib

    hint = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {hint[0]}?)" if hint else ""
