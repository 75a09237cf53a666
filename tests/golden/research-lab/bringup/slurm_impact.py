"""The Slurm impact of a re-plan: which action applies each changed setting of a bundle's slurm/
directory to a running cluster, from ONE table (`TABLE`) keyed by file, setting and release, each
row citing the man page of the release it follows.

Interface (issue 26's bring-up applies re-plans with it; every bundle with a bring-up ships this file as
bringup/slurm_impact.py, with generator/spec/hostlist.py as bringup/hostlist.py, which bringup/apply.py
imports: so it needs the standard library only, outside `_files`, which orchgen's own callers use):

    slurm_impact(old_dir, new_dir, release) -> list[SlurmChange]   # sorted, deterministic

`old_dir`/`new_dir` are bundle `slurm/` directories; `release` is the Slurm the site runs ("22.05",
"24.11", "26.05"; the bundle's plan.json `versions.slurm`). Every action includes installing the new
files on every host and everything a less disruptive action does (ACTIONS is in increasing order):

    none               nothing to run: comments only, or a file read afresh by each job or check
    sacctmgr           run accounts.sh (accounts, shares, QOS, users; `sacctmgr reconfigure` for
                       slurmdbd.conf): no daemon restarts
    reconfigure        `scontrol reconfigure` (from 23.11 it restarts the daemons in place)
    restart_slurmctld  restart slurmctld (then `scontrol reconfigure` for the slurmds)
    restart_slurmd     restart slurmctld and slurmd on `nodes` (running jobs survive: slurmstepd
                       keeps them while slurmd restarts)
    drain_restart      drain `nodes`, wait until their jobs end, restart slurmctld and their slurmd,
                       resume them (a node removed, or its GRES/CPUs/memory changed: a job on it
                       would be killed or the node would register as invalid)
    upgrade            Slurm's packages change (another release, or the other packaging: options.slurm.repository
                       added or changed, the pseudo file `(packages)`): stop, upgrade and start the daemons,
                       every slurmdbd first, then every slurmctld, then every slurmd (SchedMD's upgrade guide);
                       no drain: running jobs survive a slurmd upgrade
    impossible         not in place: a new cluster (ClusterName, AuthType, SwitchType)

The facts are the man pages at SchedMD's release tags: slurm.conf(5) names the settings that need
a restart ("A restart of slurmctld is required ..."); its NODE CONFIGURATION section says node
changes need slurmctld and every slurmd restarted up to 24.05, "restarting or reconfiguring" from
24.11; scontrol(1) of 24.11 says that from 23.11 `scontrol reconfigure` creates new daemon
processes (a restart in place), except for listening ports and authentication. tests/
test_replan_impact_real.py applies each class to a running real Slurm (22.05, 24.11, 26.05).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ACTIONS = ("none", "sacctmgr", "reconfigure", "restart_slurmctld", "restart_slurmd", "drain_restart", "upgrade",
           "impossible")


# How to apply each action on a running site (README and `plan --diff` print it; the tests do exactly this)
HOW = {
    "none": "install the new files; nothing to run",
    "sacctmgr": "run slurm/accounts.sh where sacctmgr reaches slurmdbd (slurmdbd.conf: `sacctmgr reconfigure`)",
    "reconfigure": "install the files on every host, then `scontrol reconfigure`",
    "restart_slurmctld": "install the files, restart slurmctld, then `scontrol reconfigure` for the slurmds",
    "restart_slurmd": "install the files, restart slurmctld, then slurmd on the named nodes (their jobs run on)",
    "drain_restart": "`scontrol update nodename=NODES state=drain reason=replan`, wait until their jobs end, install "
                     "the files, restart slurmctld and the nodes' slurmd, then `state=resume`",
    "upgrade": "the bring-up upgrades Slurm's packages host by host in SchedMD's order: every slurmdbd host (stop, "
               "upgrade, start: it converts the database), then every slurmctld host, then every slurmd host (their "
               "jobs run on); back up the database first (https://slurm.schedmd.com/upgrades.html)",
    "impossible": "not in place: a new cluster (drain everything, stop every daemon, start afresh)",
}


@dataclass(frozen=True)
class SlurmChange:
    file: str
    key: str
    old: str | None
    new: str | None
    action: str
    nodes: tuple[str, ...] = ()
    reason: str = ""
    cite: str = ""


def _man(tag: str, page: str, line: int) -> str:
    return f"https://github.com/SchedMD/slurm/blob/{tag}/doc/man/{page}?plain=1#L{line}"


T2205, T2302, T2311, T2411 = "slurm-22-05-8-1", "slurm-23-02-0-1", "slurm-23-11-0-1", "slurm-24-11-0-1"
CONF = "man5/slurm.conf.5"


@dataclass(frozen=True)
class Row:
    file: str  # bundle file under slurm/ ("*" any file not listed)
    key: str  # the setting (slurm.conf key, lower-case), or a pseudo key: node:added, node:removed,
    #           node:hardware, node:other, partition, gres, topology, *
    since: str  # the first release the row holds for (the newest row not after the target wins)
    action: str
    reason: str
    cite: str


def _restart_rows(key: str, action: str, lines: tuple[int, int, int], what: str) -> list[Row]:
    """A slurm.conf key whose man page says it needs a restart up to 23.02 and, from 23.11, the
    reconfigure that restarts the daemons in place (scontrol(1) of 24.11, line 347)."""
    (l22, l23, l2311) = lines
    return [Row("slurm.conf", key, "22.05", action, f"slurm.conf(5) 22.05: {what}", _man(T2205, CONF, l22)),
            Row("slurm.conf", key, "23.02", action, f"slurm.conf(5) 23.02: {what}", _man(T2302, CONF, l23)),
            Row("slurm.conf", key, "23.11", "reconfigure",
                f"slurm.conf(5) 23.11 still says {what}, and from 23.11 `scontrol reconfigure` starts new "
                "daemon processes that take over (scontrol(1) 24.11: \"Starting in 23.11\")",
                _man(T2411, "man1/scontrol.1", 347))]


_CTLD = "a restart of slurmctld is required"
_BOTH = "a restart of slurmctld and the slurmd daemons is required"
_NODE_WHY = ("\"Changes in node configuration (e.g. adding nodes, changing their processor count, etc.) "
             "require restarting both the slurmctld daemon and the slurmd daemons\"")

TABLE: tuple[Row, ...] = (
    # --- slurm.conf: the default, and the keys the man page names -------------------------------
    Row("slurm.conf", "*", "22.05", "reconfigure",
        "slurm.conf(5): changes take effect on `scontrol reconfigure` unless noted", _man(T2205, CONF, 21)),
    Row("slurm.conf", "*", "24.11", "reconfigure",
        "slurm.conf(5): changes take effect on `scontrol reconfigure` unless noted", _man(T2411, CONF, 21)),
    *_restart_rows("accountingstorageenforce", "restart_slurmctld", (90, 90, 93), _CTLD),
    *_restart_rows("credtype", "restart_slurmctld", (852, 876, 850), _CTLD),
    *_restart_rows("jobcontainertype", "restart_slurmctld", (1721, 1883, 1846), _CTLD),
    *_restart_rows("maxjobcount", "restart_slurmctld", (2137, 2305, 2271), _CTLD),
    *_restart_rows("maxnodecount", "restart_slurmctld", (2194, 2362, 2327), _CTLD),
    *_restart_rows("powerplugin", "restart_slurmctld", (2462, 2630, 2595), _CTLD),
    *_restart_rows("proctracktype", "restart_slurmctld", (3002, 3217, 3206), _CTLD),
    *_restart_rows("schedulertype", "restart_slurmctld", (4222, 4441, 4435), _CTLD),
    *_restart_rows("selecttypeparameters", "restart_slurmctld", (4333, 4552, 4541), _CTLD),
    *_restart_rows("slurmctldhost", "restart_slurmctld", (4573, 4793, 4802), _CTLD),
    *_restart_rows("statesavelocation", "restart_slurmctld", (5162, 5420, 5445), _CTLD),
    *_restart_rows("corespecplugin", "restart_slurmd", (762, 786, 764), "a restart of the slurmd daemons is required"),
    *_restart_rows("grestypes", "restart_slurmd", (1342, 1371, 1309), _BOTH),
    *_restart_rows("plugindir", "restart_slurmd", (2314, 2482, 2447), _BOTH),
    *_restart_rows("selecttype", "restart_slurmd", (4267, 4486, 4486), "a restart of slurmctld and slurmd is required"),
    # listening ports: a reconfigure cannot change them, on any release
    Row("slurm.conf", "slurmctldport", "22.05", "restart_slurmctld", f"slurm.conf(5) 22.05: {_CTLD}", _man(T2205, CONF, 4721)),
    Row("slurm.conf", "slurmctldport", "23.11", "restart_slurmctld",
        "scontrol(1): reconfigure \"will not be able to change the daemons' listening TCP port\"",
        _man(T2411, "man1/scontrol.1", 351)),
    Row("slurm.conf", "slurmdport", "22.05", "restart_slurmd", f"slurm.conf(5) 22.05: {_CTLD} (and every slurmd listens on it)",
        _man(T2205, CONF, 4950)),
    Row("slurm.conf", "slurmdport", "23.11", "restart_slurmd",
        "scontrol(1): reconfigure \"will not be able to change the daemons' listening TCP port\"",
        _man(T2411, "man1/scontrol.1", 351)),
    # a new cluster, not a change
    Row("slurm.conf", "clustername", "22.05", "impossible",
        "slurmctld refuses to start on a StateSaveLocation written under another ClusterName "
        "(\"CLUSTER NAME MISMATCH\"): a new cluster, jobs and state lost",
        "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/src/slurmctld/controller.c#L3025"),
    Row("slurm.conf", "authtype", "22.05", "impossible",
        "slurm.conf(5): all daemons and commands must be terminated before changing AuthType",
        _man(T2205, CONF, 504)),
    Row("slurm.conf", "authtype", "23.11", "impossible",
        "slurm.conf(5): all daemons and commands must be terminated before changing AuthType; it "
        "\"will interrupt outstanding job steps\"", _man(T2411, CONF, 554)),
    Row("slurm.conf", "switchtype", "22.05", "impossible",
        "slurm.conf(5): all daemons, commands and running jobs must be restarted; job records may be lost",
        _man(T2205, CONF, 5339)),
    # --- nodes ------------------------------------------------------------------------------------
    Row("slurm.conf", "node:added", "22.05", "restart_slurmd", f"slurm.conf(5) 22.05, NODE CONFIGURATION: {_NODE_WHY}; "
        "every slurmd must know each node (a reconfigure alone stops slurmctld: \"fatal: MaxNodeCount has changed "
        "during reconfig, slurmctld must be restarted\", seen on 22.05.8)", _man(T2205, CONF, 5716)),
    Row("slurm.conf", "node:added", "23.02", "restart_slurmd", "scontrol(1) 23.02: \"The slurmctld daemon and all slurmd "
        "daemons must also be restarted if nodes are added to or removed from the cluster\"",
        _man(T2302, "man1/scontrol.1", 269)),
    Row("slurm.conf", "node:added", "23.11", "restart_slurmd", f"slurm.conf(5) 23.11, NODE CONFIGURATION: {_NODE_WHY}",
        _man(T2311, CONF, 6093)),
    Row("slurm.conf", "node:added", "24.11", "reconfigure", "slurm.conf(5) 24.11, NODE CONFIGURATION: node changes "
        "\"require restarting or reconfiguring all slurmctld and slurmd daemons\"", _man(T2411, CONF, 6314)),
    Row("slurm.conf", "node:removed", "22.05", "drain_restart", f"a job on a removed node is lost; slurm.conf(5) 22.05: "
        f"{_NODE_WHY}", _man(T2205, CONF, 5716)),
    Row("slurm.conf", "node:removed", "23.11", "drain_restart", f"a job on a removed node is lost; slurm.conf(5) 23.11: "
        f"{_NODE_WHY}", _man(T2311, CONF, 6093)),
    Row("slurm.conf", "node:removed", "24.11", "drain_restart", "a job on a removed node is lost; slurm.conf(5) 24.11: "
        "node changes \"require restarting or reconfiguring all slurmctld and slurmd daemons\"", _man(T2411, CONF, 6314)),
    Row("slurm.conf", "node:hardware", "22.05", "drain_restart", f"slurm.conf(5) 22.05: {_NODE_WHY}; a node whose "
        "resources change under running jobs registers as invalid", _man(T2205, CONF, 5716)),
    Row("slurm.conf", "node:hardware", "23.11", "drain_restart", f"slurm.conf(5) 23.11: {_NODE_WHY}",
        _man(T2311, CONF, 6093)),
    Row("slurm.conf", "node:hardware", "24.11", "drain_restart", "slurm.conf(5) 24.11: node changes \"require restarting "
        "or reconfiguring all slurmctld and slurmd daemons\"; the node's jobs hold the old resources",
        _man(T2411, CONF, 6314)),
    Row("slurm.conf", "node:other", "22.05", "reconfigure",
        "slurm.conf(5): changes take effect on `scontrol reconfigure` unless noted (features, weight)",
        _man(T2205, CONF, 21)),
    Row("slurm.conf", "partition", "22.05", "reconfigure",
        "slurm.conf(5): changes take effect on `scontrol reconfigure` unless noted (partitions are rebuilt "
        "from slurm.conf, see ReconfigFlags)", _man(T2205, CONF, 21)),
    # --- the other files ----------------------------------------------------------------------
    Row("gres.conf", "gres", "22.05", "drain_restart",
        "gres.conf(5) 22.05: a restart of slurmctld and slurmd is required for Type changes; a node's GPUs "
        "changing under its jobs", "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man5/gres.conf.5?plain=1#L360"),
    Row("gres.conf", "gres", "24.11", "drain_restart",
        "gres.conf(5) 24.11: Type changes take effect on reconfigure only while every affected slurmd "
        "responds, else restart; a node's GPUs changing under its jobs",
        "https://github.com/SchedMD/slurm/blob/slurm-24-11-0-1/doc/man/man5/gres.conf.5?plain=1#L395"),
    Row("gres.conf", "*", "22.05", "reconfigure", "gres.conf(5): changes take effect on `scontrol reconfigure`",
        "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man5/gres.conf.5?plain=1#L33"),
    Row("topology.conf", "*", "22.05", "reconfigure", "topology.conf(5): changes take effect on `scontrol reconfigure`",
        "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man5/topology.conf.5?plain=1#L21"),
    Row("topology.yaml", "*", "22.05", "reconfigure", "topology.yaml(5) as topology.conf(5): read on `scontrol reconfigure`",
        "https://github.com/SchedMD/slurm/blob/slurm-24-11-0-1/doc/man/man5/topology.conf.5?plain=1#L15"),
    Row("cgroup.conf", "*", "22.05", "reconfigure", "cgroup.conf(5): changes take effect on `scontrol reconfigure`",
        "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man5/cgroup.conf.5?plain=1#L15"),
    Row("accounts.sh", "*", "22.05", "sacctmgr", "accounts.sh runs sacctmgr: slurmdbd pushes associations and QOS "
        "to slurmctld at once; no daemon restarts",
        "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man1/sacctmgr.1?plain=1#L47"),
    Row("slurmdbd.conf", "*", "22.05", "sacctmgr", "slurmdbd.conf(5): changes take effect on SIGHUP, which "
        "`sacctmgr reconfigure` sends (restart slurmdbd for its listening settings)",
        "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man5/slurmdbd.conf.5?plain=1#L14"),
    Row("plugstack.conf", "*", "22.05", "reconfigure", "SPANK plugins are loaded at each job step; "
        "`scontrol reconfigure` makes slurmd re-read it", "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man8/spank.8?plain=1#L9"),
    Row("mariadb-slurm.cnf", "*", "22.05", "restart_slurmctld", "MariaDB reads its option files at start: restart "
        "MariaDB, then slurmdbd (slurmctld queues accounting records meanwhile; jobs run on)",
        "https://mariadb.com/kb/en/configuring-mariadb-with-option-files/"),
    Row("*", "*", "22.05", "none", "read afresh by each job, check or script run (prolog, NHC, enroot, pyxis, NCCL "
        "environment, job scripts): install it on every node; no daemon reads it",
        "https://github.com/SchedMD/slurm/blob/slurm-22-05-8-1/doc/man/man5/slurm.conf.5?plain=1#L21"),
)

HARDWARE = {"cpus", "boards", "socketsperboard", "sockets", "corespersocket", "threadspercore", "realmemory",
            "gres", "corespeccount", "cpuspeclist", "memspeclimit", "tmpdisk"}


def _rel(release: str) -> tuple[int, ...]:
    nums = re.findall(r"\d+", release)
    return tuple(int(n) for n in nums[:2]) or (0,)


def rule(file: str, key: str, release: str) -> Row:
    """The row of `TABLE` that holds for `key` of `file` under `release`."""
    target = _rel(release)
    name = "plugstack.conf" if file.startswith("plugstack.conf.d/") else file.rsplit("/", 1)[-1]
    if name.startswith("topology.yaml"):
        name = "topology.yaml"
    for f, k in ((name, key.lower()), (name, "*"), ("*", "*")):
        rows = [r for r in TABLE if r.file == f and r.key == k and _rel(r.since) <= target]
        if rows:
            return max(rows, key=lambda r: _rel(r.since))
    raise LookupError(f"no row for {file} {key} {release}")  # unreachable: ("*", "*", "22.05")


# ---- parsing ---------------------------------------------------------------------------------------


def _strip(text: str) -> list[str]:
    """Logical lines without comments and blank lines (a trailing backslash continues a line)."""
    out, buf = [], ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line = (buf + line).strip()
        buf = ""
        if line:
            out.append(line)
    return out


def _tokens(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for tok in line.split():
        k, _, v = tok.partition("=")
        out[k.lower()] = v
    return out


def _hostlist():
    try:
        from generator.spec import hostlist
    except ImportError:  # in a bundle: bringup/hostlist.py, generator/spec/hostlist.py byte for byte
        import hostlist  # type: ignore[no-redef]
    return hostlist


def _expand(expr: str) -> list[str]:
    hostlist = _hostlist()
    try:
        return hostlist.expand(expr)
    except Exception:  # noqa: BLE001 - a hand-edited list we cannot read: one name
        return [expr]


@dataclass
class _Conf:
    keys: dict[str, tuple[str, str]]  # lower key -> (as written, value; repeated keys joined)
    nodes: dict[str, dict[str, str]]  # node -> attributes (lower key -> value)
    named: dict[str, dict[str, str]]  # "PartitionName=x", "NodeSet=y" -> attributes


def _parse_slurm_conf(text: str) -> _Conf:
    conf = _Conf({}, {}, {})
    defaults: dict[str, dict[str, str]] = {"nodename": {}, "partitionname": {}}
    for line in _strip(text):
        first = line.split(None, 1)[0]
        k, _, v = first.partition("=")
        kl = k.lower()
        if kl in ("nodename", "partitionname", "nodeset") and v:
            attrs = _tokens(line)
            attrs.pop(kl)
            if v.upper() == "DEFAULT":
                defaults.setdefault(kl, {}).update(attrs)
                continue
            merged = {**defaults.get(kl, {}), **attrs}
            if kl == "nodename":
                for node in _expand(v):
                    conf.nodes[node] = merged
            else:
                conf.named[f"{k}={v}"] = merged
            continue
        if "=" not in first:
            continue  # Include lines and the like: not compared
        key, _, value = line.partition("=")
        old = conf.keys.get(key.strip().lower())
        conf.keys[key.strip().lower()] = (key.strip(), f"{old[1]}, {value.strip()}" if old else value.strip())
    return conf


def _parse_gres(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """gres.conf: node -> its lines (without NodeName); and the lines that name no node."""
    per_node: dict[str, list[str]] = {}
    glob: list[str] = []
    for line in _strip(text):
        attrs = _tokens(line)
        if "nodename" in attrs:
            rest = " ".join(t for t in line.split() if not t.lower().startswith("nodename="))
            for node in _expand(attrs["nodename"]):
                per_node.setdefault(node, []).append(rest)
        else:
            glob.append(line)
    return per_node, glob


# ---- comparing -------------------------------------------------------------------------------------


def _change(file: str, key: str, old: str | None, new: str | None, row: Row,
            nodes: tuple[str, ...] = (), reason: str = "") -> SlurmChange:
    return SlurmChange(file, key, old, new, row.action, tuple(sorted(nodes)),
                       f"{reason}{'; ' if reason else ''}{row.reason}", row.cite)


def _compress(nodes) -> str:
    hostlist = _hostlist()

    try:
        return hostlist.compress(sorted(nodes))
    except Exception:  # noqa: BLE001
        return ",".join(sorted(nodes))


def _slurm_conf(old: str, new: str, release: str) -> list[SlurmChange]:
    a, b = _parse_slurm_conf(old), _parse_slurm_conf(new)
    out: list[SlurmChange] = []
    f = "slurm.conf"
    for key in sorted(a.keys.keys() | b.keys.keys()):
        va, vb = a.keys.get(key), b.keys.get(key)
        if (va and va[1]) != (vb and vb[1]):
            row = rule(f, key, release)
            every = tuple(b.nodes) if row.action in ("restart_slurmd", "drain_restart") else ()  # every slurmd
            out.append(_change(f, (vb or va)[0], va and va[1], vb and vb[1], row, every))
    added = sorted(b.nodes.keys() - a.nodes.keys())
    removed = sorted(a.nodes.keys() - b.nodes.keys())
    if added:
        row = rule(f, "node:added", release)
        nodes = tuple(b.nodes) if row.action == "restart_slurmd" else ()
        out.append(_change(f, "NodeName", None, _compress(added), row, nodes, f"node(s) added: {_compress(added)}"))
    if removed:
        row = rule(f, "node:removed", release)
        out.append(_change(f, "NodeName", _compress(removed), None, row, tuple(removed),
                           f"node(s) removed: {_compress(removed)}"))
        # every remaining slurmd must learn the node list too: restarted up to 24.05, reconfigured from 24.11
        # (slurm.conf(5) 24.11, NODE CONFIGURATION: "restarting or reconfiguring all slurmctld and slurmd
        # daemons"); slurmctld's restart for the removal does not make the slurmds re-read slurm.conf
        row = rule(f, "node:added", release)
        out.append(_change(f, "NodeName", _compress(removed), None, row,
                           tuple(b.nodes) if row.action == "restart_slurmd" else (),
                           "the other nodes' slurmd must know the new node list"))
    hw: dict[tuple[str, str, str], list[str]] = {}
    other: dict[tuple[str, str, str], list[str]] = {}
    for node in sorted(a.nodes.keys() & b.nodes.keys()):
        na, nb = a.nodes[node], b.nodes[node]
        for attr in sorted(na.keys() | nb.keys()):
            if na.get(attr) != nb.get(attr):
                bucket = hw if attr in HARDWARE else other
                bucket.setdefault((attr, na.get(attr, ""), nb.get(attr, "")), []).append(node)
    for (attr, va_, vb_), nodes in sorted(hw.items()):
        out.append(_change(f, f"NodeName={_compress(nodes)} {attr}", va_ or None, vb_ or None,
                           rule(f, "node:hardware", release), tuple(nodes)))
    for (attr, va_, vb_), nodes in sorted(other.items()):
        out.append(_change(f, f"NodeName={_compress(nodes)} {attr}", va_ or None, vb_ or None,
                           rule(f, "node:other", release)))
    for name in sorted(a.named.keys() | b.named.keys()):
        pa, pb = a.named.get(name), b.named.get(name)
        row = rule(f, "partition", release)
        if pa is None or pb is None:
            out.append(_change(f, name, None if pa is None else "defined", None if pb is None else "defined", row,
                               reason="added" if pa is None else "removed (its pending jobs are refused)"))
            continue
        for attr in sorted(pa.keys() | pb.keys()):
            if pa.get(attr) != pb.get(attr):
                out.append(_change(f, f"{name} {attr}", pa.get(attr), pb.get(attr), row))
    return out


def _gres_conf(old: str, new: str, release: str, added: set[str]) -> list[SlurmChange]:
    (na, ga), (nb, gb) = _parse_gres(old), _parse_gres(new)
    out: list[SlurmChange] = []
    changed: dict[tuple[str, str], list[str]] = {}
    for node in sorted(na.keys() | nb.keys()):
        if node in added or node not in nb:
            continue  # a new or removed node: slurm.conf's change says what to do
        if na.get(node) != nb.get(node):
            changed.setdefault(("\n".join(na.get(node, [])), "\n".join(nb[node])), []).append(node)
    for (va, vb), nodes in sorted(changed.items()):
        out.append(_change("gres.conf", f"NodeName={_compress(nodes)}", va or None, vb or None,
                           rule("gres.conf", "gres", release), tuple(nodes)))
    if ga != gb:
        out.append(_change("gres.conf", "(global)", "\n".join(ga) or None, "\n".join(gb) or None,
                           rule("gres.conf", "*", release)))
    return out


def _accounts(old: str, new: str, release: str) -> list[SlurmChange]:
    """accounts.sh: per statement (its first two words: `tenant nlp`, `qos_exists normal`)."""
    def by_head(text: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for line in _strip(text):
            out.setdefault(" ".join(line.split()[:2]), []).append(line)
        return out

    a, b = by_head(old), by_head(new)
    row = rule("accounts.sh", "*", release)
    return [_change("accounts.sh", head, "\n".join(a[head]) if head in a else None,
                    "\n".join(b[head]) if head in b else None, row)
            for head in sorted(a.keys() | b.keys()) if a.get(head) != b.get(head)]


# The pseudo file of Slurm's packages the hosts run (not under slurm/): "release R", "packaging debian|schedmd" and,
# from a bundle's bringup/vars.yaml, "source URL SUITE" (or "source the OS's archive"). bringup/running.yml reads the
# first two from every host of each role that answers (dpkg-query); orchgen's bundle comparison reads all three from
# vars.yaml.
PACKAGES = "(packages)"
UPGRADE_GUIDE = "https://slurm.schedmd.com/upgrades.html"


def packages_of_vars(data: dict) -> str:
    """The `(packages)` text of a bundle's bringup/vars.yaml (as Ansible reads it)."""
    repo = data.get("orchgen_slurm_repo") or {}
    source = f"{repo.get('url')} {repo.get('suite')}" if repo else "the OS's archive"
    return (f"release {data.get('orchgen_slurm_release')}\npackaging {data.get('orchgen_slurm_packaging') or 'debian'}"
            f"\nsource {source}\n")


def _fields(text: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


# Slurm's major releases in order, and how far back an in-place upgrade may start (upgrades.html, "Compatibility
# Window": "Slurm has long supported in-place upgrades from the previous two major releases ... Slurm 24.11 introduced
# compatibility with the previous three major releases"); a downgrade is never in place (slurmdbd converts the
# database and the state files at its first start)
MAJORS = ("20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05", "26.11")


def _window(release: str) -> int:
    return 3 if MAJORS.index(release) >= MAJORS.index("24.11") else 2


def _no_upgrade(old: str | None, new: str | None) -> str | None:
    """Why the release `old` cannot be upgraded to `new` in place (None where it can, or where either is unknown)."""
    if old not in MAJORS or new not in MAJORS or old == new:
        return None
    i, j = MAJORS.index(old), MAJORS.index(new)
    if j < i:
        return f"a downgrade ({old} -> {new}) is not in place: slurmdbd and slurmctld converted their state to {old}"
    if j - i <= _window(new):
        return None
    step = max(k for k in range(i + 1, j) if k - i <= _window(MAJORS[k]))
    return (f"Slurm {new} upgrades in place from the {_window(new)} major releases before it "
            f"({', '.join(MAJORS[j - _window(new):j])}), not from {old}: upgrade to {MAJORS[step]} first, then plan {new}")


def upgrade_window(release: str) -> tuple[list[str], dict[str, str]]:
    """The releases `release` is upgraded to in place (its compatibility window, oldest first), and, for every other
    release of MAJORS, why not (`_no_upgrade`'s line: the release to go through first, or a downgrade). The bundle's
    upgrade.yml asserts them on every host before any package changes (bringup/vars.yaml), so that a plain
    `ansible-playbook site.yml` refuses what apply.py refuses; a release outside MAJORS is in neither (refused there)."""
    if release not in MAJORS:
        return [], {}
    allowed = [old for old in MAJORS if old != release and _no_upgrade(old, release) is None]
    return allowed, {old: why for old in MAJORS if old != release and (why := _no_upgrade(old, release))}


def _packages(old: str, new: str) -> list[SlurmChange]:
    a, b = _fields(old), _fields(new)
    was = f"Slurm {a.get('release')} ({a.get('packaging')} packages)"
    now = f"Slurm {b.get('release')} ({b.get('packaging')} packages)"
    why_not = _no_upgrade(a.get("release"), b.get("release"))
    if why_not:
        return [SlurmChange(PACKAGES, "slurm", was, now, "impossible", (), why_not, UPGRADE_GUIDE)]
    if (a.get("release"), a.get("packaging")) != (b.get("release"), b.get("packaging")):
        return [SlurmChange(PACKAGES, "slurm", was, now, "upgrade", (),
                            "SchedMD's upgrade guide: slurmdbd first (RELEASE_NOTES: \"If using the slurmdbd ... you "
                            "must update this first\"), then slurmctld, then slurmd (never newer than slurmctld)",
                            UPGRADE_GUIDE)]
    if "source" in a and "source" in b and a["source"] != b["source"]:
        return [SlurmChange(PACKAGES, "source", a["source"], b["source"], "none", (),
                            "the same release and packaging: the installed packages stay; apt reads the new source "
                            "from the next run", "")]
    return []


def _generic(file: str, old: str | None, new: str | None, release: str) -> list[SlurmChange]:
    if old is not None and new is not None and _strip(old) == _strip(new):
        return [SlurmChange(file, "(comments)", None, None, "none", (), "comments only", "")]
    key = "(file added)" if old is None else "(file removed)" if new is None else "(content)"
    return [_change(file, key, None, None, rule(file, "*", release))]


def _files(root: Path) -> dict[str, str]:
    """The folder's files as text, read through bundle.read_inside (a link out of it is left out)."""
    from generator.bundle import LinkOutside, listed, read_inside
    from generator.spec.inputs import Refused

    if not root.is_dir():
        return {}
    out = {}
    for path in listed(root):
        rel = path.relative_to(root).as_posix()
        try:
            out[rel] = read_inside(root, rel).decode("utf-8", errors="replace")
        except (LinkOutside, Refused, OSError):
            continue
    return out


def slurm_impact(old_dir: Path, new_dir: Path, release: str) -> list[SlurmChange]:
    """Every change from the bundle slurm/ directory `old_dir` to `new_dir`, with its action under
    Slurm `release`, sorted by (file, key, action)."""
    return impact_of_files(_files(Path(old_dir)), _files(Path(new_dir)), release)


def impact_of_files(old: dict[str, str], new: dict[str, str], release: str) -> list[SlurmChange]:
    """`slurm_impact` on {path under slurm/: text} (what `plan --diff` has in memory)."""
    out: list[SlurmChange] = []
    added_nodes: set[str] = set()
    if "slurm.conf" in old and "slurm.conf" in new:
        a, b = _parse_slurm_conf(old["slurm.conf"]), _parse_slurm_conf(new["slurm.conf"])
        added_nodes = set(b.nodes) - set(a.nodes)
    for name in sorted(old.keys() | new.keys()):
        va, vb = old.get(name), new.get(name)
        if va == vb:
            continue
        if va is not None and vb is not None and _strip(va) == _strip(vb):
            out.append(SlurmChange(name, "(comments)", None, None, "none", (), "comments only", ""))
        elif name == "slurm.conf" and va is not None and vb is not None:
            out += _slurm_conf(va, vb, release)
        elif name == "gres.conf" and va is not None and vb is not None:
            out += _gres_conf(va, vb, release, added_nodes)
        elif name == "accounts.sh" and va is not None and vb is not None:
            out += _accounts(va, vb, release)
        elif name == PACKAGES:
            out += _packages(va or "", vb or "") if va is not None and vb is not None else []
        else:
            out += _generic(name, va, vb, release)
    return sorted(out, key=lambda c: (c.file, c.key, ACTIONS.index(c.action), c.old or "", c.new or "", c.nodes))


def conf_nodes(text: str) -> list[str]:
    """The nodes a slurm.conf defines (its NodeName lines' hostlists), sorted."""
    return sorted(_parse_slurm_conf(text).nodes)


def worst(changes: list[SlurmChange]) -> str:
    """The most disruptive action of `changes` ("none" for no change)."""
    return max((c.action for c in changes), key=ACTIONS.index, default="none")
