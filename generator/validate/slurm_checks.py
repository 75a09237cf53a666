"""Checks of the Slurm side of a bundle (slurm/): what slurmctld and slurmd would reject or misread.

- every node a topology names is defined in slurm.conf; every node is under exactly one leaf switch
  of a tree, and in at most one block;
- every partition names defined nodes (or node sets, or ALL), and only topologies that exist;
- GRES type and count agree between slurm.conf and gres.conf, node by node; GresTypes lists every
  GRES used;
- AccountingStorageTRES only with AccountingStorageType=accounting_storage/slurmdbd;
- the topology plugin matches the topology file present and the Slurm version (topology.yaml from
  25.05 and no TopologyPlugin line; topology.conf with topology/tree or topology/block, block from 23.11);
- batch scripts name existing partitions;
- SlurmctldHost names real controllers: not orchgen's placeholder (written when workload.yaml has no
  fleet.slurm), and at least one (slurmctld starts only where its own hostname is one of them).
- the GPU-node operations (health checks, IMEX, controllers' state, TaskProlog, SPANK, MPI):
  `slurm_ops_checks`.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from ..spec import hostlist
from ..contract import PLACEHOLDER_CONTROLLER
from . import slurm_ops_checks
from .bundle_view import Bundle, Finding, error, warning
from .slurm_conf import (GresConf, SlurmConf, Topology, format_gres, parse_gres_conf, parse_slurm_conf,
                         parse_topology_conf, parse_topology_yaml)

CONF, GRES, TOPO_CONF, TOPO_YAML = ("slurm/slurm.conf", "slurm/gres.conf", "slurm/topology.conf",
                                    "slurm/topology.yaml")
SLURMDBD = "accounting_storage/slurmdbd"


def version_tuple(text: str | None) -> tuple[int, int] | None:
    m = re.match(r"^\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def slurm_version(bundle: Bundle) -> str | None:
    """plan.json's versions.slurm; else the `for Slurm X.Y` our slurm.conf header states."""
    found = bundle.plan_version("slurm")
    if found:
        return found
    head = "\n".join((bundle.text(CONF) or "").splitlines()[:5])
    m = re.search(r"\bSlurm (\d+\.\d+)", head)
    return m.group(1) if m else None


def load_conf(bundle: Bundle, problems: list[Finding] | None = None) -> SlurmConf | None:
    """slurm.conf, parsed once per bundle; its problems go to the first caller that asks for them."""
    if CONF not in bundle.memo:
        text = bundle.text(CONF)
        found: list[Finding] = []
        bundle.memo[CONF] = (parse_slurm_conf(CONF, text, found) if text is not None else None, found)
    conf, found = bundle.memo[CONF]
    if problems is not None:
        problems.extend(found)
    return conf


def check(bundle: Bundle, notices: list[str]) -> Iterator[Finding]:
    if not any(f.startswith("slurm/") for f in bundle.files):
        return
    problems: list[Finding] = []
    conf = load_conf(bundle, problems)
    if conf is None:
        yield error("slurm/", 0, "the bundle has a slurm/ directory but no slurm/slurm.conf")
        return
    topologies = _topologies(bundle, problems)
    yield from problems
    version = slurm_version(bundle)
    if version is None:
        notices.append("Slurm version unknown (no plan.json versions.slurm): version rules of the "
                       "topology plugin not checked")
    yield from _controllers(conf.path, bundle.text(CONF) or "")
    yield from _topology_nodes(conf, topologies)
    yield from _partitions(conf, topologies)
    yield from _gres(bundle, conf)
    yield from _accounting(conf)
    yield from _topology_plugin(bundle, conf, topologies, version_tuple(version), version)
    yield from _batch_scripts(bundle, conf)
    yield from slurm_ops_checks.check(bundle, conf, version_tuple(version), version)


_CTLD = re.compile(r"^\s*(?:SlurmctldHost|ControlMachine)\s*=\s*([^\s(#]+)", re.I)


def _controllers(path: str, text: str) -> Iterator[Finding]:
    """slurmctld compares its own gethostname() with every SlurmctldHost line (slurm.conf(5))."""
    hosts = [(n, m.group(1)) for n, raw in enumerate(text.splitlines(), 1) if (m := _CTLD.match(raw))]
    if not hosts:
        yield error(path, 0, "no SlurmctldHost line: slurmctld has no host to start on")
    for number, host in hosts:
        if host == PLACEHOLDER_CONTROLLER:
            yield error(path, number, f"SlurmctldHost={host} is orchgen's placeholder: set fleet.slurm.controllers "
                                      "in workload.yaml to the controllers' short hostnames and plan again "
                                      "(slurmctld starts only on a host whose own hostname is a SlurmctldHost)")


def _topologies(bundle: Bundle, problems: list[Finding]) -> list[Topology]:
    out = []
    if bundle.has(TOPO_CONF):
        out += parse_topology_conf(TOPO_CONF, bundle.text(TOPO_CONF) or "", problems)
    if bundle.has(TOPO_YAML):
        out += parse_topology_yaml(bundle.doc(TOPO_YAML), problems)
    return out


def _compress(nodes: list[str] | set[str]) -> str:
    names = sorted(nodes) if isinstance(nodes, set) else nodes
    try:
        text = hostlist.compress(names)
    except hostlist.HostlistError:  # an unreadable expression quoted back as it is, never a crash
        text = ",".join(names)
    return text if len(text) <= 120 else text[:117] + "..."


def _topology_nodes(conf: SlurmConf, topologies: list[Topology]) -> Iterator[Finding]:
    defined = conf.node_names
    partition_nodes = _partition_nodes_by_topology(conf)
    for topo in topologies:
        where = f"topology {topo.name}: " if topo.path.endswith(".yaml") else ""
        owner: dict[str, str] = {}
        what = "leaf switch" if topo.kind == "tree" else "block"
        for leaf, (nodes, line) in topo.leaves.items():
            unknown = [n for n in nodes if n not in defined]
            if unknown:
                yield error(topo.path, line, f"{where}{what} {leaf} names nodes slurm.conf does not define: "
                                             f"{_compress(unknown)}")
            twice = [n for n in nodes if n in owner]
            if twice:
                yield error(topo.path, line, f"{where}{what} {leaf} repeats nodes already under "
                                             f"{owner[twice[0]]}: {_compress(twice)} (a node sits under one {what})")
            for n in nodes:
                owner.setdefault(n, leaf)
        switches = set(topo.leaves) | set(topo.children)
        for sw, (kids, line) in topo.children.items():
            missing = [k for k in kids if k not in switches]
            if missing:
                yield error(topo.path, line, f"{where}switch {sw} names undefined switches: {_compress(missing)}")
        must = defined if topo.cluster_default else partition_nodes.get(topo.name, set())
        outside = must - set(owner)
        if outside and topo.kind == "tree":
            yield error(topo.path, topo.line, f"{where}nodes under no leaf switch (slurmctld cannot place "
                                              f"multi-node jobs on them): {_compress(outside)}")
        elif outside and topo.kind == "block":
            yield warning(topo.path, topo.line, f"{where}nodes in no block (jobs placed by block topology "
                                                f"cannot use them): {_compress(outside)}")


def _partition_nodes_by_topology(conf: SlurmConf) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for part in conf.partitions:
        name = part.get("topology")
        if name:
            out[name] |= set(_partition_members(conf, part)[0])
    return out


def _partition_members(conf: SlurmConf, part) -> tuple[list[str], list[str]]:
    """(nodes the partition resolves to, names that are neither nodes nor node sets)."""
    expr = part.get("nodes") or ""
    if not expr:
        return [], []
    if expr.upper() == "ALL":
        return sorted(conf.node_names), []
    try:  # Slurm skips empty items ("a,,b" is a and b: scontrol show hostnames, 22.05 to 26.05)
        names = hostlist.expand(re.sub(r",{2,}", ",", expr).strip(","))
    except hostlist.HostlistError:
        return [], [expr]
    nodes, unknown = [], []
    for name in names:
        if name.upper() == "ALL":
            nodes += sorted(conf.node_names)
        elif name in conf.nodesets:
            nodes += conf.nodesets[name]
        elif name in conf.node_line:
            nodes.append(name)
        else:
            unknown.append(name)
    return nodes, unknown


def _partitions(conf: SlurmConf, topologies: list[Topology]) -> Iterator[Finding]:
    named = {t.name for t in topologies if t.path.endswith(".yaml")}
    seen: dict[str, int] = {}
    for part in conf.partitions:
        name = part.params["partitionname"]
        if name in seen:
            yield error(conf.path, part.line, f"partition {name} is defined twice (first on line {seen[name]})")
        seen.setdefault(name, part.line)
        _, unknown = _partition_members(conf, part)
        if unknown:
            yield error(conf.path, part.line, f"partition {name} names nodes slurm.conf does not define: "
                                              f"{_compress(unknown)}")
        if not part.get("nodes"):
            yield warning(conf.path, part.line, f"partition {name} has no Nodes=: it holds no node")
        topo = part.get("topology")
        if topo and topo not in named:
            yield error(conf.path, part.line, f"partition {name}: Topology={topo} is not a topology of "
                                              f"slurm/topology.yaml" + ("" if named else " (the bundle has none)"))


def _gres(bundle: Bundle, conf: SlurmConf) -> Iterator[Finding]:
    used = {name for node in conf.nodes for (name, _) in node.gres}
    types_value, types_line = conf.param("GresTypes")
    declared = {t.strip() for t in (types_value or "").split(",") if t.strip()}
    for name in sorted(used - declared):
        line = types_line or next(n.line for n in conf.nodes if any(k[0] == name for k in n.gres))
        what = f"GresTypes={types_value} does not list {name}" if types_value else "GresTypes is missing"
        yield error(conf.path, line, f"{what}, but nodes have Gres={name}:... (slurmctld refuses the node lines)")
    if not used:
        return
    text = bundle.text(GRES)
    if text is None:
        first = next(n for n in conf.nodes if n.gres)
        yield error(conf.path, first.line, f"nodes have Gres={format_gres(first.gres)} but the bundle has no "
                                           f"{GRES} (slurmd would report no GPUs and drain the nodes)")
        return
    problems: list[Finding] = []
    gconf = parse_gres_conf(GRES, text, problems)
    yield from problems
    yield from _gres_agree(conf, gconf)


def _gres_agree(conf: SlurmConf, gconf: GresConf) -> Iterator[Finding]:
    """Node by node; mismatches grouped by (slurm.conf line, gres.conf line, both GRES) into one finding."""
    groups: dict[tuple[int, int, str, str], list[str]] = defaultdict(list)
    excess: dict[tuple[int, int, str, str], bool] = {}
    for node in conf.nodes:
        want = node.gres
        for name in node.names:
            have = dict(gconf.everywhere)
            for key, count in gconf.per_node.get(name, {}).items():
                have[key] = have.get(key, 0) + count
            if not have and (gconf.autodetect or not want):
                continue  # AutoDetect finds the devices itself; nothing to compare
            if not _same_gres(want, have):
                line = gconf.node_line.get(name, gconf.first_line)
                key = (node.line, line, format_gres(want), format_gres(have))
                groups[key].append(name)
                excess[key] = _covers(want, have)
    for (conf_line, gres_line, want, have), nodes in sorted(groups.items()):
        if excess.get((conf_line, gres_line, want, have)):
            # slurmctld keeps the configured count and ignores the rest (gres.c _node_config_validate:
            # "Ignoring excess count"); only a count or type below slurm.conf's drains the node ("count too low")
            yield warning(GRES, gres_line, f"{_compress(nodes)}: gres.conf has {have} but slurm.conf:{conf_line} "
                                           f"says Gres={want}: slurmctld ignores the GRES beyond slurm.conf's, so "
                                           "jobs cannot ask for them")
        elif have == "none":
            yield error(GRES, gres_line, f"no GRES lines for {_compress(nodes)}, but slurm.conf:{conf_line} "
                                         f"gives them Gres={want}")
        else:
            yield error(GRES, gres_line, f"{_compress(nodes)}: gres.conf has {have} but slurm.conf:{conf_line} "
                                         f"says Gres={want} (type and count must agree, or slurmd drains the node)")
    extra = sorted(set(gconf.per_node) - conf.node_names)
    if extra:
        yield warning(GRES, gconf.node_line[extra[0]], f"GRES for nodes slurm.conf does not define: {_compress(extra)}")


def _same_gres(want: dict, have: dict) -> bool:
    """Equal, where an untyped slurm.conf count (gpu:8) matches the total of that GRES's typed lines."""
    for name in {n for n, _ in want} | {n for n, _ in have}:
        w = {t: c for (n, t), c in want.items() if n == name}
        h = {t: c for (n, t), c in have.items() if n == name}
        if list(w) == [None]:
            if w[None] != sum(h.values()):
                return False
        elif w != h:
            return False
    return True


def _covers(want: dict, have: dict) -> bool:
    """gres.conf has at least every GRES slurm.conf configures, of each type (an untyped count against the
    typed lines' total), and some more: the node registers with the configured count."""
    for name in {n for n, _ in want}:
        w = {t: c for (n, t), c in want.items() if n == name}
        h = {t: c for (n, t), c in have.items() if n == name}
        if list(w) == [None]:
            if sum(h.values()) < w[None]:
                return False
        elif any(h.get(t, 0) < c for t, c in w.items()):
            return False
    return True


def _accounting(conf: SlurmConf) -> Iterator[Finding]:
    tres, line = conf.param("AccountingStorageTRES")
    storage, _ = conf.param("AccountingStorageType")
    if tres and (storage or "").lower() != SLURMDBD:
        yield error(conf.path, line, f"AccountingStorageTRES={tres} needs AccountingStorageType={SLURMDBD} "
                                     f"(it is {storage or 'unset'}): TRES are recorded by slurmdbd")


def _topology_plugin(bundle: Bundle, conf: SlurmConf, topologies: list[Topology],
                     version: tuple[int, int] | None, version_text: str | None) -> Iterator[Finding]:
    plugin, line = conf.param("TopologyPlugin")
    plugin = (plugin or "").lower() or None
    has_conf, has_yaml = bundle.has(TOPO_CONF), bundle.has(TOPO_YAML)
    conf_kinds = {t.kind for t in topologies if t.path == TOPO_CONF}
    if has_yaml:
        if version and version < (25, 5):
            yield error(TOPO_YAML, 1, f"topology.yaml needs Slurm 25.05 or newer; this bundle is for Slurm "
                                      f"{version_text} (write topology.conf instead)")
        defaults = [t for t in topologies if t.path == TOPO_YAML and t.cluster_default]
        # the same plugin as topology.yaml's cluster default is harmless: 26.05 boots with both and places jobs by
        # the YAML (a site's TopologyPlugin=topology/tree carried by `orchgen import slurm` beside orchgen's
        # topology.yaml: tests/test_import_slurm_real.py, import-edge on 26.05); it only shows in `scontrol show
        # config`. Another plugin than the YAML's says two different things.
        if plugin and defaults and plugin == f"topology/{defaults[0].kind}":
            yield warning(conf.path, line, f"TopologyPlugin={plugin} with slurm/topology.yaml: Slurm 25.05+ "
                                           "takes the plugin from topology.yaml (the same here); the line only "
                                           "shows in scontrol show config")
        elif plugin:
            yield error(conf.path, line, f"TopologyPlugin={plugin} with slurm/topology.yaml: Slurm 25.05+ "
                                         "takes the plugin from topology.yaml; remove this line")
        if len(defaults) > 1:
            yield error(TOPO_YAML, defaults[1].line, "more than one topology has cluster_default: true")
        if has_conf:
            yield warning(TOPO_CONF, 0, "ignored: Slurm reads slurm/topology.yaml when both exist")
        return
    if has_conf:
        if len(conf_kinds) > 1:
            yield error(TOPO_CONF, 0, "mixes SwitchName (tree) and BlockName (block) lines: one plugin reads it")
        if plugin not in ("topology/tree", "topology/block"):
            what = f"TopologyPlugin={plugin}" if plugin else "no TopologyPlugin"
            kind = next(iter(conf_kinds), "tree")
            yield error(conf.path, line, f"{what}, but the bundle has slurm/topology.conf: set "
                                         f"TopologyPlugin=topology/{kind} or Slurm ignores it")
        elif conf_kinds and plugin != f"topology/{next(iter(conf_kinds))}":
            kind = next(iter(conf_kinds))
            yield error(conf.path, line, f"TopologyPlugin={plugin}, but slurm/topology.conf holds "
                                         f"{'BlockName' if kind == 'block' else 'SwitchName'} lines "
                                         f"(topology/{kind})")
        if plugin == "topology/block" and version and version < (23, 11):
            yield error(conf.path, line, f"topology/block needs Slurm 23.11 or newer; this bundle is for "
                                         f"Slurm {version_text}")
        return
    if plugin in ("topology/tree", "topology/block"):
        yield error(conf.path, line, f"TopologyPlugin={plugin}, but the bundle has no slurm/topology.conf")


_SBATCH_PART = re.compile(r"^#SBATCH\s+(?:--partition[= ]|-p\s*)(\S+)")


def _batch_scripts(bundle: Bundle, conf: SlurmConf) -> Iterator[Finding]:
    parts = {p.params["partitionname"] for p in conf.partitions}
    for path in bundle.under("slurm/", (".sbatch",)):
        for number, line in enumerate((bundle.text(path) or "").splitlines(), 1):
            m = _SBATCH_PART.match(line)
            if m:
                for name in m.group(1).split(","):
                    if name not in parts:
                        yield error(path, number, f"partition {name} is not defined in slurm.conf")
