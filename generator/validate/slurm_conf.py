"""Read slurm.conf, gres.conf, topology.conf and topology.yaml the way slurmctld does, with line numbers.

Only what the checks need: parameters (keys are case-insensitive in Slurm, so they are kept
lower-cased), node lines with their GRES, partitions, node sets, topology switches and blocks.
Anything malformed becomes a `Finding` in `problems` instead of an exception, because the input
may be a hand-edited file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..spec import hostlist, slurmconf
from .bundle_view import Doc, Finding, error

_SUFFIX = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


@dataclass
class Line:
    line: int
    params: dict[str, str]  # lower-cased keys

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.params.get(key.lower(), default)


def parse_lines(path: str, text: str, problems: list[Finding]) -> list[Line]:
    """`key=value ...` records as Slurm reads them (spec/slurmconf.py, after parse_config.c:
    continuation lines joined, `#` comments cut but not `\\#`, escapes removed)."""
    out = []
    for record in slurmconf.parse(text, path):
        if record.kind == "include":
            problems.append(error(path, record.line, f"Include {record.get('Include')}: not followed; orchgen "
                                  "writes each setting into the bundle's own file, where validate checks it"))
            continue
        if record.leftover or not record.pairs:
            problems.append(error(path, record.line, "not a key=value line (its text is not quoted: a damaged bundle file may hold anything)"))
            continue
        out.append(Line(record.line, record.params()))
    return out


def expand(path: str, line: int, expr: str, problems: list[Finding]) -> list[str]:
    try:
        return hostlist.expand(expr)
    except hostlist.HostlistError as exc:
        problems.append(error(path, line, f"not a Slurm hostlist: {exc}"))
        return []


def _count(text: str) -> int | None:
    m = re.fullmatch(r"(\d+)([kmgtKMGT]?)", text)
    if not m:
        return None
    return int(m.group(1)) * _SUFFIX.get(m.group(2).lower(), 1)


def parse_gres(spec: str) -> dict[tuple[str, str | None], int] | None:
    """`gpu:h100:8,gpu:a100:2(S:0-1)` -> {("gpu","h100"): 8, ("gpu","a100"): 2}; None if malformed."""
    out: dict[tuple[str, str | None], int] = {}
    for item in re.split(r",(?![^(]*\))", spec):
        item = re.sub(r"\(.*\)$", "", item.strip())
        parts = [p for p in item.split(":") if p != "no_consume"]
        if not parts or not parts[0]:
            return None
        name, gtype, count = parts[0], None, 1
        if len(parts) == 2:
            n = _count(parts[1])
            gtype, count = (None, n) if n is not None else (parts[1], 1)
        elif len(parts) >= 3:
            gtype, n = parts[1], _count(parts[2])
            if n is None:
                return None
            count = n
        out[(name, gtype)] = out.get((name, gtype), 0) + count
    return out


def format_gres(gres: dict[tuple[str, str | None], int]) -> str:
    return ",".join(f"{n}:{t}:{c}" if t else f"{n}:{c}" for (n, t), c in sorted(gres.items(), key=str)) or "none"


@dataclass
class NodeLine:
    line: int
    expr: str
    names: list[str]
    gres: dict[tuple[str, str | None], int]
    features: tuple[str, ...] = ()  # Features= (or Slurm's other spelling, Feature=), NodeName=DEFAULT's applied


@dataclass
class SlurmConf:
    path: str
    params: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (value, line), last wins
    every: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # key -> each (value, line), in order
    nodes: list[NodeLine] = field(default_factory=list)
    partitions: list[Line] = field(default_factory=list)
    nodesets: dict[str, list[str]] = field(default_factory=dict)
    node_line: dict[str, int] = field(default_factory=dict)  # node -> its first NodeName line

    def param(self, key: str) -> tuple[str | None, int]:
        value, line = self.params.get(key.lower(), (None, 0))
        return value, line

    def all(self, key: str) -> list[tuple[str, int]]:
        """Every (value, line) of a key that may repeat, e.g. SlurmctldHost."""
        return self.every.get(key.lower(), [])

    @property
    def node_names(self) -> set[str]:
        return set(self.node_line)


def parse_slurm_conf(path: str, text: str, problems: list[Finding]) -> SlurmConf:
    conf = SlurmConf(path)
    node_default: dict[str, str] = {}
    part_default: dict[str, str] = {}  # PartitionName=DEFAULT: its values apply to the lines after it, as in Slurm
    nodesets: list[Line] = []
    for ln in parse_lines(path, text, problems):
        first = next(iter(ln.params))
        if first == "nodename":
            params = {**node_default, **ln.params}
            if ln.params["nodename"].upper() == "DEFAULT":
                node_default = {k: v for k, v in ln.params.items() if k != "nodename"}
                continue
            gres = parse_gres(params["gres"]) if params.get("gres") else {}
            if gres is None:
                problems.append(error(path, ln.line, f"malformed Gres={params['gres']}"))
                gres = {}
            names = expand(path, ln.line, ln.params["nodename"], problems)
            features = (params.get("features") or params.get("feature") or "").split(",")
            conf.nodes.append(NodeLine(ln.line, ln.params["nodename"], names, gres, tuple(f for f in features if f)))
            for name in names:
                conf.node_line.setdefault(name, ln.line)
        elif first == "partitionname":
            if ln.params["partitionname"].upper() == "DEFAULT":
                part_default.update({k: v for k, v in ln.params.items() if k != "partitionname"})
            else:
                conf.partitions.append(Line(ln.line, {"partitionname": ln.params["partitionname"], **part_default,
                                                      **ln.params}))
        elif first == "nodeset":
            nodesets.append(ln)
        elif first in ("downnodes", "frontendname"):
            continue
        else:
            for key, value in ln.params.items():
                conf.params[key] = (value, ln.line)
                conf.every.setdefault(key, []).append((value, ln.line))
    for ln in nodesets:  # slurm.conf(5) NodeSet: Nodes= (a hostlist or ALL) or Feature= (the nodes with it)
        expr, feature = ln.get("nodes"), ln.get("feature") or ln.get("features")
        if expr and expr.upper() == "ALL":
            names = [n for node in conf.nodes for n in node.names]
        elif expr:
            names = expand(path, ln.line, expr, problems)
        elif feature:
            names = [n for node in conf.nodes if feature in node.features for n in node.names]
        else:
            names = []
        conf.nodesets[ln.params["nodeset"]] = names
    return conf


@dataclass
class GresConf:
    path: str
    autodetect: bool = False
    per_node: dict[str, dict[tuple[str, str | None], int]] = field(default_factory=dict)
    node_line: dict[str, int] = field(default_factory=dict)
    everywhere: dict[tuple[str, str | None], int] = field(default_factory=dict)  # lines without NodeName
    first_line: int = 0
    detect: dict[str, str] = field(default_factory=dict)  # node -> its node-specific AutoDetect value
    detect_all: str | None = None  # a global AutoDetect line's value

    def autodetect_of(self, node: str) -> str:
        """The AutoDetect in effect for a node (gres.conf(5): node-specific trumps global), lower-cased."""
        return (self.detect.get(node) or self.detect_all or "off").lower()


def parse_gres_conf(path: str, text: str, problems: list[Finding]) -> GresConf:
    conf = GresConf(path)
    for ln in parse_lines(path, text, problems):
        conf.first_line = conf.first_line or ln.line
        if ln.get("autodetect") and ln.get("autodetect", "").lower() != "off":
            conf.autodetect = True
        if ln.get("autodetect"):
            if ln.get("nodename"):
                for node in expand(path, ln.line, ln.get("nodename") or "", problems):
                    conf.detect[node] = ln.get("autodetect") or "off"
            else:
                conf.detect_all = ln.get("autodetect")
        name = ln.get("name")
        if not name:
            continue
        count = _count(ln.get("count") or "")
        if count is None:
            files = ln.get("file") or ln.get("multiple_files")
            count = len(expand(path, ln.line, files, problems)) if files else 1
        key = (name, ln.get("type"))
        if not ln.get("nodename"):
            conf.everywhere[key] = conf.everywhere.get(key, 0) + count
            continue
        for node in expand(path, ln.line, ln.get("nodename") or "", problems):
            gres = conf.per_node.setdefault(node, {})
            gres[key] = gres.get(key, 0) + count
            conf.node_line.setdefault(node, ln.line)
    return conf


@dataclass
class Topology:
    """One topology: a tree (leaf switch -> nodes, switch -> child switches) or blocks."""

    name: str
    kind: str  # tree | block | flat
    path: str
    line: int
    leaves: dict[str, tuple[list[str], int]] = field(default_factory=dict)  # leaf/block -> (nodes, line)
    children: dict[str, tuple[list[str], int]] = field(default_factory=dict)  # switch -> (switches, line)
    cluster_default: bool = False


def parse_topology_conf(path: str, text: str, problems: list[Finding]) -> list[Topology]:
    """topology.conf holds one topology: SwitchName lines (tree) or BlockName lines (block)."""
    tree = Topology("default", "tree", path, 0, cluster_default=True)
    block = Topology("default", "block", path, 0, cluster_default=True)
    for ln in parse_lines(path, text, problems):
        if ln.get("switchname"):
            tree.line = tree.line or ln.line
            if ln.get("nodes"):
                tree.leaves[ln.params["switchname"]] = (expand(path, ln.line, ln.params["nodes"], problems), ln.line)
            if ln.get("switches"):
                tree.children[ln.params["switchname"]] = (
                    expand(path, ln.line, ln.params["switches"], problems), ln.line)
        elif ln.get("blockname"):
            block.line = block.line or ln.line
            block.leaves[ln.params["blockname"]] = (expand(path, ln.line, ln.get("nodes") or "", problems)
                                                    if ln.get("nodes") else [], ln.line)
    return [t for t in (tree, block) if t.line]


def parse_topology_yaml(doc: Doc | None, problems: list[Finding]) -> list[Topology]:
    """topology.yaml (Slurm 25.05+): a list of named topologies, each a tree, a block or flat."""
    if doc is None:
        return []
    if not isinstance(doc.data, list):
        problems.append(error(doc.path, doc.line, "expected a list of topologies"))
        return []
    out = []
    for i, item in enumerate(doc.data):
        at = doc.line_of([i])
        if not isinstance(item, dict) or not item.get("topology"):
            problems.append(error(doc.path, at, "a topology needs a `topology:` name"))
            continue
        kinds = [k for k in ("tree", "block", "flat") if k in item]
        if len(kinds) != 1:
            problems.append(error(doc.path, at, f"topology {item['topology']}: needs exactly one of tree, block, flat"))
            continue
        topo = Topology(str(item["topology"]), kinds[0], doc.path, at,
                        cluster_default=bool(item.get("cluster_default")))
        _yaml_entries(doc, topo, item.get(kinds[0]), [i, kinds[0]], problems)
        out.append(topo)
    return out


def _yaml_entries(doc: Doc, topo: Topology, body: Any, at: list[Any], problems: list[Finding]) -> None:
    if topo.kind == "flat":
        return
    key, name_key = ("switches", "switch") if topo.kind == "tree" else ("blocks", "block")
    entries = body.get(key) if isinstance(body, dict) else None
    if not isinstance(entries, list):
        problems.append(error(doc.path, doc.line_of(at), f"topology {topo.name}: {topo.kind}.{key} must be a list"))
        return
    for j, entry in enumerate(entries):
        line = doc.line_of([*at, key, j])
        if not isinstance(entry, dict) or not entry.get(name_key):
            problems.append(error(doc.path, line, f"topology {topo.name}: each entry needs `{name_key}:`"))
            continue
        name = str(entry[name_key])
        if entry.get("nodes"):
            topo.leaves[name] = (expand(doc.path, line, str(entry["nodes"]), problems), line)
        if entry.get("children"):
            topo.children[name] = (expand(doc.path, line, str(entry["children"]), problems), line)
