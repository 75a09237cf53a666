"""Importers: the fabric as cabled, read from the files sites already keep.

This module owns reading three formats into plain data, and nothing else (no workload.yaml, no
pools, no rendering):

* Slurm's topology.conf(5): topology/tree (`SwitchName=... Nodes=|Switches=`) or topology/block
  (`BlockName=... Nodes=`, `BlockSizes=`);
* Slurm's topology.yaml(5) (25.05+): the tree topology (the cluster default, or the only tree)
  and the block topology (likewise);
* the default text output of infiniband-diags' ibnetdiscover(8).

Each returns an `ImportedFabric`: leaves (a switch and the nodes cabled to it), spines (a switch
and the leaves directly under it) and blocks, each with the line of the source file it came from.
Any problem raises `OrchgenError(message, file, line, field)` with field `fabric.from.<kind>`;
nothing is guessed. Decisions a reader would ask about:

* Two tiers. A tree is leaves and spines. One root switch over exactly all the spines (a core) is
  accepted and kept apart as `core` (re-rendered, the tree is the file's); any other deeper shape is
  refused.
* Slurm's rules are kept where Slurm itself is fatal (a switch with both or neither of Nodes and
  Switches, a name over 64 characters, a duplicate switch, an undefined child, a bad BlockSizes),
  and also where it only warns (a node under two leaves) or says nothing (a node in two blocks).
* ibnetdiscover: a leaf is a switch with at least one HCA cabled to it; a node is the first word
  of its HCA's node description ("dgx001 mlx5_0" -> dgx001). Slurm's tree needs each node under
  exactly one leaf, so leaves that serve the same set of nodes form one scheduling leaf, named
  after the first of them in the file: this is how a rail-optimized fabric (each HCA of a node on
  a different rail leaf) is scheduled. A node whose leaves serve different sets of nodes is refused.
  Spines are the switches with no HCA; each must be cabled to leaves only. Switch names come from
  the switch's node description, lower-cased to [a-z0-9-]; names that collide get the GUID added.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import OrchgenError
from . import slurmconf
from .hostlist import HostlistError, compress, expand

__all__ = ["ImportedBlock", "ImportedFabric", "ImportedLeaf", "ImportedSpine", "KINDS",
           "import_ibnetdiscover", "import_topology_conf", "import_topology_yaml", "load"]

KINDS = ("topology_conf", "topology_yaml", "ibnetdiscover")
MAX_IMPORT_BYTES = 64 * 1024 * 1024  # an ibnetdiscover dump of a 10,000-port fabric is a few MiB
_MAX_SWITCH_NAME = 64  # topology.conf(5) and topology.yaml(5): "cannot be longer than 64 characters"


@dataclass(frozen=True)
class ImportedLeaf:
    name: str
    nodes: tuple[str, ...]
    line: int  # line in the source file


@dataclass(frozen=True)
class ImportedSpine:
    name: str
    leaves: tuple[str, ...]  # direct children leaves
    line: int


@dataclass(frozen=True)
class ImportedBlock:
    name: str
    nodes: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class ImportedFabric:
    leaves: tuple[ImportedLeaf, ...]
    spines: tuple[ImportedSpine, ...]
    blocks: tuple[ImportedBlock, ...]
    source: str  # the file it was read from
    core: str | None = None  # the one root over all the spines, when the file has one
    core_line: int = 0
    block_base: int | None = None  # BlockSizes' first value (the base block size), when the file gives one


# ---------------------------------------------------------------- shared: the file, errors, hostlists


class _Source:
    """One import file: reads it and makes its errors."""

    def __init__(self, path: str | Path, kind: str):
        self.path = Path(path)
        self.file = str(path)
        self.field = f"fabric.from.{kind}"

    def error(self, line: int | None, message: str) -> OrchgenError:
        return OrchgenError(message, self.file, line, self.field)

    def text(self) -> str:
        from .inputs import Refused, read_bounded

        try:  # a regular file only, its size checked before reading (a FIFO would block for ever)
            data = read_bounded(self.path, MAX_IMPORT_BYTES)
        except Refused as exc:
            raise self.error(None, str(exc)) from None
        except OSError as exc:
            raise self.error(None, f"cannot read the file: {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8-sig")  # a byte-order mark from a Windows editor is not content
        except UnicodeDecodeError as exc:
            raise self.error(data.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None
        if not text.strip():
            raise self.error(1, "the file is empty")
        return text


def _hosts(src: _Source, line: int, expr: str, what: str) -> list[str]:
    """Expand a hostlist, refusing a bad one and a name listed twice."""
    if not expr:
        raise src.error(line, f"{what} is empty")
    try:
        names = expand(expr)
    except HostlistError as exc:
        raise src.error(line, f"{what}: not a Slurm hostlist: {exc}") from None
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise src.error(line, f"{what}: {name} is listed twice")
        seen.add(name)
    return names


def _suggest(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word.lower(), [k.lower() for k in known], n=1)
    return f" (did you mean '{next(k for k in known if k.lower() == close[0])}'?)" if close else ""


# ---------------------------------------------------------------- shared: switches -> leaves and spines


@dataclass
class _Switch:
    name: str
    line: int
    nodes: list[str] | None  # a leaf's nodes
    children: list[str] | None  # a spine's (or the core's) switches


_Tree = tuple[tuple[ImportedLeaf, ...], tuple[ImportedSpine, ...], _Switch | None]


def _tree(src: _Source, switches: list[_Switch]) -> _Tree:
    by_name = _check_switches(src, switches)
    _check_loops(src, switches, by_name)
    leaves = _leaves(src, switches)
    spines, core = _spines(src, switches, {leaf.name for leaf in leaves})
    return leaves, spines, core


def _check_switches(src: _Source, switches: list[_Switch]) -> dict[str, _Switch]:
    by_name: dict[str, _Switch] = {}
    for s in switches:
        if len(s.name) > _MAX_SWITCH_NAME:
            raise src.error(s.line, f"switch name {s.name!r} is longer than {_MAX_SWITCH_NAME} characters")
        if s.name in by_name:  # Slurm: "fatal: Switch (x) has already been defined"
            raise src.error(s.line, f"switch {s.name} is defined twice (first on line {by_name[s.name].line})")
        # Slurm refuses both (and some versions neither): a switch is a leaf or above other switches
        if (s.nodes is None) == (s.children is None):
            has = "both nodes and child switches" if s.nodes is not None else "neither nodes nor child switches"
            raise src.error(s.line, f"switch {s.name} has {has}")
        by_name[s.name] = s
    for s in switches:
        for child in s.children or ():
            if child not in by_name:  # Slurm: "fatal: Switch configuration x has invalid child (y)"
                raise src.error(s.line, f"switch {s.name} names an undefined child switch {child}")
    return by_name


def _check_loops(src: _Source, switches: list[_Switch], by_name: dict[str, _Switch]) -> None:
    done: set[str] = set()

    def visit(s: _Switch, path: list[str]) -> None:
        if s.name in path:
            cycle = " -> ".join(path[path.index(s.name):] + [s.name])
            raise src.error(s.line, f"switch {s.name} is its own ancestor ({cycle})")
        if s.name in done:
            return
        for child in s.children or ():
            visit(by_name[child], path + [s.name])
        done.add(s.name)

    for s in switches:
        visit(s, [])


def _leaves(src: _Source, switches: list[_Switch]) -> tuple[ImportedLeaf, ...]:
    owner: dict[str, str] = {}
    out = []
    for s in switches:
        if s.nodes is None:
            continue
        for node in s.nodes:
            # Slurm only warns ("Multiple leaf switches contain nodes") and then schedules as if the
            # node were under one of them: which one is a guess, so refuse.
            if node in owner:
                raise src.error(s.line, f"node {node} is under two leaves: {owner[node]} and {s.name}")
            owner[node] = s.name
        out.append(ImportedLeaf(s.name, tuple(s.nodes), s.line))
    return tuple(out)


def _spines(src: _Source, switches: list[_Switch],
            leaves: set[str]) -> tuple[tuple[ImportedSpine, ...], _Switch | None]:
    uppers = [s for s in switches if s.children is not None]
    spines = [s for s in uppers if all(c in leaves for c in s.children)]
    names = {s.name for s in spines}
    for s in uppers:
        mixed = [c for c in s.children if c in leaves]
        if s.name not in names and mixed:
            raise src.error(s.line, f"switch {s.name} has both leaves ({mixed[0]}) and switches above leaves "
                            "as children: only leaf and spine tiers are imported")
    cores = [s for s in uppers if s.name not in names]
    if len(cores) > 1:
        raise src.error(cores[1].line, f"switches {cores[0].name} and {cores[1].name} are both above the spines: "
                        "only leaf and spine tiers are imported (plus one root over all the spines)")
    if cores and set(cores[0].children) != names:
        missing = sorted(names - set(cores[0].children))
        raise src.error(cores[0].line, f"switch {cores[0].name} is above some spines but not {missing[0]}: "
                        "only one root over all the spines is accepted above them")
    # the one root over all the spines, if any, is kept apart: it is not a spine
    return tuple(ImportedSpine(s.name, tuple(s.children), s.line) for s in spines), (cores[0] if cores else None)


def _blocks(src: _Source, blocks: list[ImportedBlock]) -> tuple[ImportedBlock, ...]:
    seen: dict[str, int] = {}
    owner: dict[str, str] = {}
    for b in blocks:
        if b.name in seen:
            raise src.error(b.line, f"block {b.name} is defined twice (first on line {seen[b.name]})")
        seen[b.name] = b.line
        for node in b.nodes:
            # Slurm accepts this without a word; a node in two NVLink domains is a wrong file
            if node in owner:
                raise src.error(b.line, f"node {node} is in two blocks: {owner[node]} and {b.name}")
            owner[node] = b.name
    return tuple(blocks)


def _check_block_sizes(src: _Source, line: int, sizes: list[int]) -> None:
    # topology.conf(5) BlockSizes: "Successive BlockSizes must be a power of two larger than the
    # prior values"; Slurm stops with "Invalid BlockSizes value" otherwise.
    for prev, size in zip(sizes, sizes[1:]):
        ratio, rest = divmod(size, prev)
        if rest or ratio < 2 or ratio & (ratio - 1):
            raise src.error(line, f"block size {size} is not a power-of-two multiple (2, 4, 8...) of {prev}")


# ---------------------------------------------------------------- topology.conf

_CONF_LINES = {  # first key of a line -> the keys it may carry (topology.conf(5))
    "SwitchName": ("Switches", "Nodes", "LinkSpeed"),
    "BlockName": ("Nodes",),
    "BlockSizes": (),
}
_NOT_IMPORTED = {
    "ringname": "topology/ring (RingName) is not imported",
    "include": "Include is not followed: import the included file itself",
    "blocklevels": "BlockLevels (Slurm 23.11) is not imported: BlockSizes replaced it in 24.05",
}


def _conf_pairs(src: _Source, record: slurmconf.Record) -> tuple[str, dict[str, str]]:
    """The line's kind (its first key, canonical case) and its Key=Value pairs (canonical keys), from
    the one Slurm lexer (spec/slurmconf.py: continuations, comments and escapes as Slurm reads them)."""
    number = record.line
    if record.kind == "include":
        raise src.error(number, _NOT_IMPORTED["include"])
    pairs: dict[str, str] = {}
    kind = ""
    for pair in record.pairs:
        key, value = pair.key, pair.value
        if key.lower() in _NOT_IMPORTED:
            raise src.error(number, _NOT_IMPORTED[key.lower()])
        if pair.op:
            raise src.error(number, f"{key}{pair.op}= is not read here: give the whole value with {key}=")
        allowed = list(_CONF_LINES) if not kind else _CONF_LINES[kind]
        canon = next((k for k in allowed if k.lower() == key.lower()), None)  # keys are case-insensitive
        if canon is None and not kind:
            raise src.error(number, "a line starts with SwitchName=, BlockName= or BlockSizes="
                            f"{_suggest(key, allowed)}")
        if canon is None:
            raise src.error(number, f"unknown key {key!r} in a {kind} line{_suggest(key, allowed)}")
        if canon in pairs:
            raise src.error(number, f"{canon} is given twice")
        kind = kind or canon
        pairs[canon] = value
    if record.leftover:  # Slurm: "Parse error in file ... line N"
        # what was found is not quoted: the file may be anything (issue 19: a credentials file)
        raise src.error(number, "expected Key=Value words (SwitchName=..., Nodes=..., BlockName=...)")
    return kind, pairs


def _conf_switch(src: _Source, number: int, pairs: dict[str, str]) -> _Switch:
    name = pairs["SwitchName"]
    if not name:
        raise src.error(number, "SwitchName is empty")
    speed = pairs.get("LinkSpeed")
    if speed is not None and not (speed.isascii() and speed.isdigit() and int(speed) < 2**32):
        raise src.error(number, f"LinkSpeed {speed!r} is not a whole number (Slurm reads a uint32)")
    nodes = _hosts(src, number, pairs["Nodes"], f"switch {name}: Nodes") if "Nodes" in pairs else None
    children = _hosts(src, number, pairs["Switches"], f"switch {name}: Switches") if "Switches" in pairs else None
    return _Switch(name, number, nodes, children)


def _conf_block_sizes(src: _Source, number: int, value: str) -> list[int]:
    items = value.split(",")
    if not value or not all(i.isascii() and i.isdigit() and int(i) > 0 for i in items):
        raise src.error(number, f"BlockSizes {value!r} is not a comma-separated list of positive whole numbers")
    sizes = [int(i) for i in items]
    _check_block_sizes(src, number, sizes)
    return sizes


def import_topology_conf(path: str | Path) -> ImportedFabric:
    """Leaves and spines (topology/tree) or blocks (topology/block) of a Slurm topology.conf."""
    src = _Source(path, "topology_conf")
    switches: list[_Switch] = []
    blocks: list[ImportedBlock] = []
    sizes_line = 0
    base = None
    for record in slurmconf.parse(src.text(), src.file):
        number = record.line
        kind, pairs = _conf_pairs(src, record)
        # topology.conf is read by one plugin, whose parser knows only its own keys
        if (kind == "SwitchName" and (blocks or sizes_line)) or (kind != "SwitchName" and switches):
            raise src.error(number, f"{kind} in a file that also has "
                            f"{'SwitchName' if switches else 'BlockName/BlockSizes'} lines: "
                            "topology.conf is for one plugin, topology/tree or topology/block")
        if kind == "SwitchName":
            switches.append(_conf_switch(src, number, pairs))
        elif kind == "BlockName":
            if not pairs["BlockName"] or "Nodes" not in pairs:
                raise src.error(number, "a block needs a BlockName and Nodes")
            name = pairs["BlockName"]
            nodes = _hosts(src, number, pairs["Nodes"], f"block {name}: Nodes")
            blocks.append(ImportedBlock(name, tuple(nodes), number))
        else:
            if sizes_line:
                raise src.error(number, f"BlockSizes is given twice (first on line {sizes_line})")
            base = _conf_block_sizes(src, number, pairs["BlockSizes"])[0]
            sizes_line = number
    if switches:
        leaves, spines, core = _tree(src, switches)
        return ImportedFabric(leaves, spines, (), src.file, core.name if core else None, core.line if core else 0)
    if blocks:
        return ImportedFabric((), (), _blocks(src, blocks), src.file, block_base=base)
    raise src.error(sizes_line or 1, "no SwitchName or BlockName line: nothing to import")


# ---------------------------------------------------------------- topology.yaml


class _Yaml:
    """A composed YAML document walked by hand, so that every value keeps its line."""

    def __init__(self, src: _Source, text: str):
        self.src = src
        self.loader = yaml.SafeLoader(text)
        try:
            self.root = self.loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise src.error(mark.line + 1 if mark else 1, f"malformed YAML: {exc.problem}") from None
        except yaml.YAMLError as exc:
            raise src.error(1, f"malformed YAML: {exc}") from None

    @staticmethod
    def line(node: yaml.Node) -> int:
        return node.start_mark.line + 1  # marks count from 0

    def mapping(self, node: yaml.Node, what: str, keys: tuple[str, ...]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.src.error(self.line(node), f"{what} must be a mapping")
        out: dict[str, yaml.Node] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name not in keys:
                raise self.src.error(self.line(key), f"{what}: unknown key{_suggest(str(name), list(keys))}; expected "
                                     f"{', '.join(keys)}")
            if name in out:
                raise self.src.error(self.line(key), f"{what}: {name} is given twice")
            out[name] = value
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.src.error(self.line(node), f"{what} must be a list")
        return node.value

    def text(self, node: yaml.Node, what: str) -> str:
        """A name or hostlist: the scalar as written (Slurm reads these as strings)."""
        if not isinstance(node, yaml.ScalarNode) or node.tag.endswith(":null") or not node.value:
            raise self.src.error(self.line(node), f"{what} must be a non-empty string")
        return node.value

    def value(self, node: yaml.Node, what: str, kind: type) -> object:
        value = self.loader.construct_object(node, deep=True) if isinstance(node, yaml.ScalarNode) else None
        if type(value) is not kind:  # not isinstance: a bool is an int
            expected = "true or false" if kind is bool else "a whole number"
            raise self.src.error(self.line(node), f"{what} must be {expected}")
        return value


@dataclass
class _Topology:
    name: str
    default: bool
    kind: str  # tree | block | flat
    line: int
    switches: list[_Switch]
    blocks: list[ImportedBlock]
    block_base: int | None = None  # a block topology's block_sizes[0]


_TOPOLOGY_KEYS = ("topology", "cluster_default", "tree", "block", "flat", "ring", "torus3d")


def _yaml_topology(doc: _Yaml, node: yaml.Node, index: int) -> _Topology:
    what = f"topology #{index + 1}"
    keys = doc.mapping(node, what, _TOPOLOGY_KEYS)
    first = node.value[0][0].value if node.value else None
    if first != "topology":  # topology.yaml(5): "Must be the first attribute"
        raise doc.src.error(doc.line(node), f"{what}: 'topology' (its name) must be the first key")
    name = doc.text(keys["topology"], f"{what}: topology")
    for kind in ("ring", "torus3d"):
        if kind in keys:
            raise doc.src.error(doc.line(keys[kind]), f"topology {name}: {kind} topologies are not imported")
    kinds = [k for k in ("tree", "block", "flat") if k in keys]
    if len(kinds) != 1:  # topology.yaml(5): "exactly one of the following topology types"
        raise doc.src.error(doc.line(node), f"topology {name} must have exactly one of tree, block or flat "
                            f"(has {', '.join(kinds) or 'none'})")
    default = doc.value(keys["cluster_default"], f"topology {name}: cluster_default", bool) \
        if "cluster_default" in keys else False
    topo = _Topology(name, bool(default), kinds[0], doc.line(node), [], [])
    body = keys[kinds[0]]
    if kinds[0] == "flat" and doc.value(body, f"topology {name}: flat", bool) is not True:
        raise doc.src.error(doc.line(body), f"topology {name}: flat must be true")
    if kinds[0] == "tree":
        topo.switches = _yaml_switches(doc, body, name)
    if kinds[0] == "block":
        topo.blocks, topo.block_base = _yaml_blocks(doc, body, name)
    return topo


def _yaml_switches(doc: _Yaml, node: yaml.Node, topo: str) -> list[_Switch]:
    tree = doc.mapping(node, f"topology {topo}: tree", ("switches",))
    if "switches" not in tree:
        raise doc.src.error(doc.line(node), f"topology {topo}: tree has no switches")
    out = []
    for item in doc.sequence(tree["switches"], f"topology {topo}: switches"):
        keys = doc.mapping(item, f"topology {topo}: a switch", ("switch", "children", "nodes"))
        if "switch" not in keys:
            raise doc.src.error(doc.line(item), f"topology {topo}: a switch has no 'switch' (its name)")
        name = doc.text(keys["switch"], f"topology {topo}: switch")
        lists = {}
        for key in ("nodes", "children"):
            if key in keys:
                what = f"switch {name}: {key}"
                lists[key] = _hosts(doc.src, doc.line(keys[key]), doc.text(keys[key], what), what)
        out.append(_Switch(name, doc.line(item), lists.get("nodes"), lists.get("children")))
    if not out:
        raise doc.src.error(doc.line(node), f"topology {topo}: tree has no switches")
    return out


def _yaml_blocks(doc: _Yaml, node: yaml.Node, topo: str) -> tuple[list[ImportedBlock], int | None]:
    """The blocks, and block_sizes' first value (None where the topology gives none)."""
    keys = doc.mapping(node, f"topology {topo}: block", ("block_sizes", "blocks"))
    sizes: list[int] = []
    if "block_sizes" in keys:
        sizes_node = keys["block_sizes"]
        sizes = [doc.value(n, f"topology {topo}: block_sizes", int)
                 for n in doc.sequence(sizes_node, f"topology {topo}: block_sizes")]
        if not sizes or min(sizes) < 1:
            raise doc.src.error(doc.line(sizes_node), f"topology {topo}: block_sizes must be positive whole numbers")
        _check_block_sizes(doc.src, doc.line(sizes_node), sizes)
    if "blocks" not in keys:
        raise doc.src.error(doc.line(node), f"topology {topo}: block has no blocks")
    out = []
    for item in doc.sequence(keys["blocks"], f"topology {topo}: blocks"):
        block = doc.mapping(item, f"topology {topo}: a block", ("block", "nodes"))
        if "block" not in block or "nodes" not in block:
            raise doc.src.error(doc.line(item), f"topology {topo}: a block needs 'block' (its name) and 'nodes'")
        name = doc.text(block["block"], f"topology {topo}: block")
        what = f"block {name}: nodes"
        nodes = _hosts(doc.src, doc.line(block["nodes"]), doc.text(block["nodes"], what), what)
        out.append(ImportedBlock(name, tuple(nodes), doc.line(item)))
    if not out:
        raise doc.src.error(doc.line(node), f"topology {topo}: block has no blocks")
    return out, (sizes[0] if sizes else None)


def _pick(src: _Source, topologies: list[_Topology], kind: str) -> _Topology | None:
    """The topology of `kind` Slurm schedules by default, or the only one; refuse a choice."""
    found = [t for t in topologies if t.kind == kind]
    # topology.yaml(5): "The first topology defined with cluster_default: true" is the default
    default = next((t for t in topologies if t.default), None)
    if len(found) <= 1:
        return found[0] if found else None
    if default in found:
        return default
    raise src.error(found[1].line, f"{len(found)} {kind} topologies ({', '.join(t.name for t in found)}) "
                    "and none of them is the cluster default: which one is the fabric is not guessed")


def import_topology_yaml(path: str | Path) -> ImportedFabric:
    """The tree and the blocks of a Slurm topology.yaml (the cluster default, or the only one)."""
    src = _Source(path, "topology_yaml")
    doc = _Yaml(src, src.text())
    if doc.root is None:
        raise src.error(1, "the file is empty")
    topologies: list[_Topology] = []
    for index, node in enumerate(doc.sequence(doc.root, "the file (a list of topologies)")):
        topo = _yaml_topology(doc, node, index)
        if any(t.name == topo.name for t in topologies):  # Slurm starts, then cannot use it
            raise src.error(topo.line, f"topology {topo.name} is defined twice")
        topologies.append(topo)
    # every topology is checked, picked or not: Slurm loads them all, and one broken one stops it
    trees = {t.name: _tree(src, t.switches) for t in topologies if t.kind == "tree"}
    blocks = {t.name: _blocks(src, t.blocks) for t in topologies if t.kind == "block"}
    tree, block = _pick(src, topologies, "tree"), _pick(src, topologies, "block")
    if tree is None and block is None:
        raise src.error(topologies[0].line if topologies else 1, "no tree or block topology: nothing to import")
    leaves, spines, core = trees[tree.name] if tree else ((), (), None)
    return ImportedFabric(leaves, spines, blocks[block.name] if block else (), src.file,
                          core.name if core else None, core.line if core else 0,
                          block.block_base if block else None)


# ---------------------------------------------------------------- ibnetdiscover
#
# Its default output (infiniband-diags ibnetdiscover.c: out_switch, out_ca, out_switch_port,
# out_ca_port) is one section per node, each link printed from both of its ends:
#
#   Switch  41 "S-b83fd20300e10001"   # "MF0;ib-leaf-01:MQM9700/U1" enhanced port 0 lid 1 lmc 0
#   [1]     "H-1070fd0300a10001"[1](1070fd0300a10001)     # "gpu01 mlx5_0" lid 21 4xNDR
#   [33]    "S-b83fd20300e30001"[1]       # "MF0;ib-spine-01:MQM9700/U1" lid 3 4xNDR
#   Ca      1 "H-1070fd0300a10001"   # "gpu01 mlx5_0"
#   [1](1070fd0300a10001)   "S-b83fd20300e10001"[1]   # lid 21 lmc 0 "MF0;ib-leaf-01:..." lid 1 4xNDR
#
# with vendid=/devid=/sysimgguid=/switchguid=/caguid= lines and "#" comments around them (and, with
# -g, Chassis and [ext N] annotations).

_HEADER = re.compile(r'(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]{1,16})"\s+#\s+"(.*)"'
                     r'(?:\s+(?:enhanced|base)\s+port\s+0\s+lid\s+\d+\s+lmc\s+\d+|\s+\(scp\))?\s*')
_PORT = re.compile(r'\[(\d+)\](?:\[ext \d+\])?(?:\([0-9a-fA-F]+\))?\s+"([SHR])-([0-9a-fA-F]{1,16})"\[(\d+)\]'
                   r'(?:\[ext \d+\])?\s*(?:\([0-9a-fA-F]+\))?\s*(?:#(.*))?')
_PEER_DESC = re.compile(r'"(.*)"\s+lid\s+\d+')  # in a port line's comment: the peer's description
_IGNORED = re.compile(r"#|(?:vendid|devid|sysimgguid|switchguid|caguid|rtguid)=|Chassis\s+\d|Hostname:")
_TYPES = {"Switch": "S", "Ca": "H", "Rt": "R"}
_MELLANOX_DESC = re.compile(r"MF0;([^:]+):")  # MLNX-OS switches: "MF0;<hostname>:<model>/<slot>"
_FIRMWARE_DESC = re.compile(r"MT\d+\b")  # an HCA whose description was never set: "MT4129 ConnectX7 ..."


@dataclass
class _IbNode:
    guid: str
    type: str  # S (switch), H (channel adapter), R (router)
    desc: str
    ports: int
    line: int


@dataclass
class _IbLink:
    guid: str  # the section the port line is in
    port: int
    peer: str
    peer_type: str
    peer_port: int
    peer_desc: str | None  # as the port line prints it (a --node-name-map applies here)
    line: int


def _ib_parse(src: _Source, text: str) -> tuple[dict[str, _IbNode], list[_IbLink]]:
    nodes: dict[str, _IbNode] = {}
    links: list[_IbLink] = []
    current: _IbNode | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or _IGNORED.match(line):
            continue
        if m := _HEADER.fullmatch(line):
            current = _ib_header(src, number, m, nodes)
        elif m := _PORT.fullmatch(line):
            if current is None:
                raise src.error(number, "a port line before any Switch or Ca line")
            port = int(m[1])
            if not 1 <= port <= current.ports:
                raise src.error(number, f"port {port} on a node with {current.ports} ports")
            desc = _PEER_DESC.search(m[5] or "")
            links.append(_IbLink(current.guid, port, m[3].lower().zfill(16), m[2], int(m[4]),
                                 desc[1] if desc else None, number))
        else:
            raise src.error(number, f"not ibnetdiscover's default output: {line[:60]!r}")
    if not nodes:
        raise src.error(1, "no Switch or Ca section: nothing to import")
    return nodes, links


def _ib_header(src: _Source, number: int, m: re.Match, nodes: dict[str, _IbNode]) -> _IbNode:
    word, ports, letter, guid, desc = m[1], int(m[2]), m[3], m[4].lower().zfill(16), m[5]
    if _TYPES[word] != letter:
        raise src.error(number, f"a {word} section with a {letter}- GUID")
    if guid in nodes:
        raise src.error(number, f"{letter}-{guid} has two sections (first on line {nodes[guid].line})")
    nodes[guid] = _IbNode(guid, letter, desc, ports, number)
    return nodes[guid]


def _ib_check_links(src: _Source, nodes: dict[str, _IbNode], links: list[_IbLink]) -> None:
    """Every link names a node of the file, as the type it is, and is printed from both ends."""
    ends = {(k.guid, k.port, k.peer, k.peer_port) for k in links}
    for k in links:
        peer = nodes.get(k.peer)
        if peer is None:
            raise src.error(k.line, f"links to {k.peer_type}-{k.peer}, which has no section in this file "
                            "(a truncated or edited dump?)")
        if peer.type != k.peer_type:
            raise src.error(k.line, f"links to {k.peer_type}-{k.peer}, whose section says it is {peer.type}-")
        if (k.peer, k.peer_port, k.guid, k.port) not in ends:
            raise src.error(k.line, f"the section of {k.peer_type}-{k.peer} does not list this link back "
                            "(a truncated or edited dump?)")


def _switch_names(src: _Source, nodes: dict[str, _IbNode]) -> dict[str, str]:
    """GUID -> a Slurm- and Kubernetes-safe switch name ([a-z0-9-], at most 63 characters), unique."""
    base = {}
    for guid, node in nodes.items():
        if node.type == "S":
            m = _MELLANOX_DESC.match(node.desc)
            text = m[1] if m else node.desc
            base[guid] = re.sub(r"[^a-z0-9]+", "-", text.lower())[:46].strip("-") or "switch"
    counts: dict[str, int] = {}
    for name in base.values():
        counts[name] = counts.get(name, 0) + 1
    # Unconfigured switches share their default description: the GUID tells them apart
    names = {guid: name if counts[name] == 1 else f"{name}-{guid}" for guid, name in base.items()}
    seen: dict[str, str] = {}
    for guid, name in names.items():
        if name in seen:  # only if a switch is really called "<other name>-<other GUID>"
            raise src.error(nodes[guid].line, f"switches S-{seen[name]} and S-{guid} would both be named {name}")
        seen[name] = guid
    return names


def _hostname(src: _Source, node: _IbNode) -> str:
    words = node.desc.split()
    host = words[0] if words else ""
    if not host or host == "localhost" or _FIRMWARE_DESC.fullmatch(host):
        raise src.error(node.line, f"HCA H-{node.guid} has the node description {node.desc!r}, which names no "
                        "host (set it on the node: rdma-ndd, or /sys/class/infiniband/*/node_desc)")
    try:
        compress([host])
    except HostlistError:
        raise src.error(node.line, f"HCA H-{node.guid}: {host!r} is not a valid Slurm node name") from None
    return host


def _ib_leaves(src: _Source, nodes: dict[str, _IbNode], links: list[_IbLink], names: dict[str, str],
               hosts: dict[str, str]) -> tuple[list[ImportedLeaf], dict[str, str]]:
    """Scheduling leaves (rail groups merged) and the map switch GUID -> its scheduling leaf's name."""
    served: dict[str, list[tuple[str, int]]] = {}  # leaf switch GUID -> (host, port line), port order
    for k in links:
        if nodes[k.guid].type == "S" and k.peer_type == "H":
            served.setdefault(k.guid, []).append((hosts[k.peer], k.line))
    cabled = {k.peer for k in links if k.peer_type == "H" and nodes[k.guid].type == "S"}
    for hca in (n for n in nodes.values() if n.type == "H" and n.guid not in cabled):
        raise src.error(hca.line, f"HCA H-{hca.guid} ({hosts[hca.guid]}) is cabled to no switch")
    group_of: dict[frozenset, str] = {}  # set of nodes served -> the first leaf switch serving it
    leaf_of: dict[str, str] = {}
    host_group: dict[str, tuple[frozenset, str]] = {}
    leaves = []
    for guid in (g for g in nodes if g in served):  # file order
        key = frozenset(h for h, _ in served[guid])
        for host, line in served[guid]:
            first = host_group.setdefault(host, (key, guid))
            if first[0] != key:
                serving = [f"{names[g]} (serving {compress(sorted(k))})" for k, g in (first, (key, guid))]
                raise src.error(line, f"node {host} is cabled to leaves {' and '.join(serving)}, which serve "
                                "different nodes: it cannot be placed under one leaf")
        if key not in group_of:
            group_of[key] = guid
            ordered = tuple(dict.fromkeys(h for h, _ in served[guid]))
            leaves.append(ImportedLeaf(names[guid], ordered, nodes[guid].line))
        leaf_of[guid] = names[group_of[key]]
    return leaves, leaf_of


def _ib_spines(src: _Source, nodes: dict[str, _IbNode], links: list[_IbLink], names: dict[str, str],
               leaf_of: dict[str, str]) -> list[ImportedSpine]:
    below: dict[str, list[str]] = {g: [] for g, n in nodes.items() if n.type == "S" and g not in leaf_of}
    for k in links:
        if k.peer_type != "S" or nodes[k.guid].type != "S":
            continue
        if (k.guid in leaf_of) == (k.peer in leaf_of):  # leaf-leaf or spine-spine: not a two-tier tree
            tier = "leaf" if k.guid in leaf_of else "spine"
            raise src.error(k.line, f"{tier} {names[k.guid]} is cabled to {tier} {names[k.peer]}: "
                            "only leaf-spine fabrics are imported")
        if k.guid in below:
            below[k.guid].append(leaf_of[k.peer])
    spines = []
    for guid, children in below.items():
        if not children:
            raise src.error(nodes[guid].line, f"switch {names[guid]} has no HCA and no leaf cabled to it: "
                            "only leaf-spine fabrics are imported")
        spines.append(ImportedSpine(names[guid], tuple(dict.fromkeys(children)), nodes[guid].line))
    return spines


def import_ibnetdiscover(path: str | Path) -> ImportedFabric:
    """Leaves (rail groups merged) and spines of an InfiniBand fabric from ibnetdiscover's output."""
    src = _Source(path, "ibnetdiscover")
    nodes, links = _ib_parse(src, src.text())
    _ib_check_links(src, nodes, links)
    # routers (Rt) join subnets; they are neither hosts nor part of this subnet's tree
    nodes = {g: n for g, n in nodes.items() if n.type != "R"}
    links = [k for k in links if k.peer_type != "R" and k.guid in nodes]
    names = _switch_names(src, nodes)
    # A --node-name-map renames nodes in switch headers and port lines, never in Ca headers
    # (ibnetdiscover.c prints those with clean_nodedesc): the name a switch port prints wins.
    for k in links:
        if k.peer_type == "H" and nodes[k.guid].type == "S" and k.peer_desc:
            nodes[k.peer].desc = k.peer_desc
    hosts = {g: _hostname(src, n) for g, n in nodes.items() if n.type == "H"}
    if not hosts:
        raise src.error(1, "no HCA in the fabric: no node to place under a leaf")
    leaves, leaf_of = _ib_leaves(src, nodes, links, names, hosts)
    spines = _ib_spines(src, nodes, links, names, leaf_of)
    return ImportedFabric(tuple(leaves), tuple(spines), (), src.file)


# ---------------------------------------------------------------- one entry point

_IMPORTERS = {
    "topology_conf": import_topology_conf,
    "topology_yaml": import_topology_yaml,
    "ibnetdiscover": import_ibnetdiscover,
}


def load(kind: str, path: str | Path) -> ImportedFabric:
    """Import `path` as `kind`: topology_conf | topology_yaml | ibnetdiscover."""
    if kind not in _IMPORTERS:
        raise OrchgenError(f"unknown import kind {kind!r} (one of {', '.join(KINDS)}){_suggest(kind, list(KINDS))}",
                           str(path), None, "fabric.from")
    return _IMPORTERS[kind](path)
