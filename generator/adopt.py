"""`orchgen import slurm`: adopt a running Slurm site (issue 22).

Reads the site's slurm.conf (its Includes followed), gres.conf, cgroup.conf, topology.conf or
topology.yaml and a `sacctmgr dump` file, only through the one Slurm lexer (spec/slurmconf.py) and
the bounded reader (spec/inputs.py), and writes a workload.yaml that plans back into the site's
configuration:

* pools from the NodeName lines (one pool per line: its hostlist, CPU layout, memory, GPU GRES as
  Slurm writes it, typed or not);
* the fabric from the topology file (spec/importers.py reads it; the file is copied beside
  workload.yaml when it lies elsewhere, since workload.yaml may only name files in its own folder);
* tenants from the dump's accounts (share = Fairshare, users);
* the cluster name, controllers, accounting host, partitions and policy into options.slurm.

Then it plans the workload and reads back the slurm.conf, gres.conf and cgroup.conf orchgen writes:
every key of the site whose value orchgen does not write the same is carried in `site:` (spec/site.py),
verbatim, with the reason, and emitted in place. So "modelled" means "orchgen writes the site's value
itself", checked, not assumed; "carried" means "kept verbatim"; "refused" means "not written", each
with its file:line. What orchgen writes that the site did not set is `ORCHGEN_BETTER`: the one list
of the differences a regenerated site has on purpose, each with its reason (docs/slurm-admins.md,
"Adopting a running Slurm site"; tests/test_import_slurm_real.py holds the real slurmctld to it).
"""
from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import catalog
from .errors import OrchgenError, secret_in
from .spec import hostlist, slurmconf
from .spec.inputs import Refused, read_bounded
from .spec.models import MAX_POOLS, Options
from .spec.site import SiteLine
from .spec.site import (CREDENTIAL_KEYS, ORCHGEN_BETTER, ORCHGEN_BETTER_CGROUP, ORCHGEN_BETTER_NODES,  # noqa: F401
                         ORCHGEN_WRITES, authinfo_unknown)  # re-exported for the tests
from .spec.slurm_keys import CGROUP_KNOWN, GRES_KNOWN, KNOWN

# Node keys orchgen writes with a value of its own where the site relies on Slurm's default: the
# default is carried, so the regenerated node is the site's (Weight decides which nodes a job gets)
NODE_DEFAULTS = {
    "weight": ("Weight", "1", "Slurm's default Weight, which the site relies on"),
    # orchgen writes the pool's memory (memory_gib); a site that gives no RealMemory has Slurm's 1 MB, and a
    # job asking for memory is scheduled by it: kept, so nothing changes without the site saying so
    "realmemory": ("RealMemory", "1", "Slurm's default RealMemory (1 MB), which the site relies on: give the "
                   "nodes' memory (slurmd -C) in the pool to schedule memory"),
}
# Slurm reads `CPUs=N` with no socket/core layout as N sockets of one core (slurm.conf(5) CPUs; slurmd.c): kept
_CPUS_ONLY = "Slurm reads CPUs={cpus} alone as {cpus} sockets of 1 core, 1 thread (slurm.conf(5) CPUs), which the " \
    "site relies on; give the real layout (slurmd -C) so jobs do not share a core's hyperthreads"
_LAYOUT_KEYS = ("sockets", "boards", "socketsperboard", "corespersocket", "threadspercore")

# slurm.conf keys whose Slurm default a site that sets nothing depends on, where orchgen would write another
# value: the default is carried (the change is the site's to make, not the import's)
SLURM_DEFAULTS = {
    "slurmuser": ("root", "Slurm's default SlurmUser, which the site's slurmctld runs as and its state and spool "
                  "files belong to (slurm.conf(5) SlurmUser)"),
}

# Keys Slurm removed or renamed: what the site's line becomes (None: dropped, Slurm ignores it), and why.
OBSOLETE: dict[str, tuple[str | None, str]] = {
    "fastschedule": (None, "obsolete since Slurm 20.02, which ignores it (\"Ignoring obsolete FastSchedule\")"),
    "accountingstorejobcomment": ("AccountingStoreFlags=job_comment", "removed in Slurm 21.08, fatal to "
                                  "22.05+: AccountingStoreFlags=job_comment says the same"),
    "accountingstorageloc": (None, "removed in Slurm 21.08 (\"safe to remove\"): slurmdbd.conf's StorageLoc "
                             "names the database"),
    "cryptotype": (None, "removed in Slurm 23.11; munge, its only value in use, is the default before"),
    "schedulerport": (None, "removed (sched/wiki); Slurm ignores it"),
    "schedulerrootfilter": (None, "removed (sched/wiki); Slurm ignores it"),
}

# cgroup.conf keys Slurm no longer uses (src/interfaces/cgroup.c; the strings are in each of Debian's libslurmfull,
# 22.05 to 26.05): not carried, each refused with its line
CGROUP_IGNORED = {
    "alloweddevicesfile": "read and ignored by Slurm 22.05 to 26.05, which confine devices from gres.conf (ConstrainDevices) "
                          "instead (slurmd: \"AllowedDevicesFile option is obsolete\")",
    # not ignored by 24.11: slurmctld stops (verified; tests/test_import_slurm_real.py, DeepOps)
    "cgroupreleaseagentdir": "removed from Slurm, and fatal to 24.11 (\"fatal: Support for CgroupReleaseAgentDir option has "
                             "been removed\")",
}

# Keys whose value is a credential: never carried (workload.yaml and the bundle are committed)
CREDENTIALS = CREDENTIAL_KEYS

# Keys orchgen models, and the field that holds them (checked after planning: if orchgen does not
# write the site's value, the key is carried regardless)
MODELLED = {
    "clustername": "options.slurm.cluster_name", "slurmctldhost": "fleet.slurm.controllers",
    "controlmachine": "fleet.slurm.controllers", "backupcontroller": "fleet.slurm.controllers",
    "accountingstoragehost": "fleet.slurm.accounting", "statesavelocation": "options.slurm.state_save_location",
    "maxjobcount": "options.slurm.max_job_count", "maxarraysize": "options.slurm.max_array_size",
    "rebootprogram": "options.slurm.reboot_program", "resumetimeout": "options.slurm.resume_timeout",
    "propagateresourcelimits": "options.slurm.propagate_resource_limits",
    "propagateresourcelimitsexcept": "options.slurm.propagate_resource_limits_except",
    "prolog": "options.slurm.prolog", "epilog": "options.slurm.epilog",
    "schedulerparameters": "options.slurm.scheduler_parameters",
    "priorityweightage": "options.slurm.priority.weight_age",
    "priorityweightfairshare": "options.slurm.priority.weight_fairshare",
    "priorityweightjobsize": "options.slurm.priority.weight_jobsize",
    "priorityweightpartition": "options.slurm.priority.weight_partition",
    "priorityweightqos": "options.slurm.priority.weight_qos", "priorityweighttres": "options.slurm.priority.weight_tres",
    "prioritydecayhalflife": "options.slurm.priority.decay_half_life", "prioritymaxage": "options.slurm.priority.max_age",
    "priorityfavorsmall": "options.slurm.priority.favor_small", "prioritycalcperiod": "options.slurm.priority.calc_period",
    "priorityflags": "options.slurm.priority.flags",
    "healthcheckinterval": "options.slurm.health_check_interval",
    "unkillablesteptimeout": "options.slurm.unkillable_step_timeout", "gresTypes".lower(): "fleet.pools[].gpu",
    "topologyplugin": "fleet.fabric", "nodename": "fleet.pools", "partitionname": "options.slurm.partitions",
}
# slurm.conf keys the site's lines said already in another form (the controllers' lines, Slurm's
# renamed keys): not reported as orchgen's additions
_SAID = {"slurmctldhost", "accountingstoreflags", "include"}
_DNS = re.compile(r"[^a-z0-9-]+")


@dataclass
class Item:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class Report:
    modelled: list[Item] = field(default_factory=list)
    carried: list[Item] = field(default_factory=list)
    refused: list[Item] = field(default_factory=list)
    added: list[Item] = field(default_factory=list)  # what orchgen writes where the site set nothing
    asks: list[Item] = field(default_factory=list)  # facts the site's files do not say, left out until given
    fatal: list[Item] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"modelled  {i}" for i in self.modelled]
        out += [f"carried   {i}" for i in self.carried]
        out += [f"refused   {i}" for i in self.refused]
        out += [f"added     {i}" for i in self.added]
        out += [f"asks      {i}" for i in self.asks]
        return out


@dataclass
class Sources:
    slurm_conf: Path
    gres: Path | None = None
    topology: Path | None = None
    cgroup: Path | None = None
    sacctmgr_dump: Path | None = None
    # folders besides slurm.conf's own that its Include lines may read (--input-root)
    roots: tuple[str, ...] = ()
    sacctmgr_qos: Path | None = None  # `sacctmgr -P show qos` output: the QOS definitions a dump lacks
    fabric: str | None = None  # --fabric: the interconnect, which no Slurm file states (fleet.fabric.kind)


def _read(path: Path, what: str) -> str:
    try:
        return read_bounded(path).decode("utf-8", errors="replace")
    except Refused as exc:
        raise OrchgenError(f"{exc}", str(path), None, what) from None
    except OSError as exc:
        raise OrchgenError(f"cannot read: {exc.strerror or exc}", str(path), None, what) from None


def _write_new(path: Path, data: bytes) -> None:
    """Write a new file at `path` itself: never through a link put there meanwhile, never over a file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise OrchgenError(f"cannot write: {exc.strerror or exc}", str(path)) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _dns(name: str, fallback: str) -> str:
    out = _DNS.sub("-", name.lower()).strip("-")[:63].strip("-")
    return out or fallback


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and re.fullmatch(r"[0-9]{1,9}", value) else None


# ------------------------------------------------------------------------------------------------ read


@dataclass
class _Node:
    record: slurmconf.Record
    params: dict[str, str]  # lower-cased key -> value (NodeName=DEFAULT values applied)
    written: dict[str, str]  # key as written -> value, this line's own
    hosts: list[str]


def import_slurm(src: Sources, out: Path, slurm_version: str | None = None) -> tuple[str, Report, dict[str, bytes]]:
    """(workload.yaml text, the report, other files to write beside it). Raises OrchgenError on the
    first fatal problem after collecting them all in the report (the caller prints the report first)."""
    report = Report()
    main_text = _read(src.slurm_conf, "SLURM_CONF")
    conf = slurmconf.read(src.slurm_conf, main_text, roots=src.roots)
    for problem in conf.problems:
        report.fatal.append(Item(f"{problem.file}:{problem.line}", problem.message))
    base = src.slurm_conf.parent
    gres = _optional(src.gres, None if src.gres else _beside(src, "gres.conf", "--gres"), "--gres", report)
    cgroup = _optional(src.cgroup, None if src.cgroup else _beside(src, "cgroup.conf", "--cgroup"), "--cgroup",
                       report)

    doc: dict[str, Any] = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet"}
    slurm_opts: dict[str, Any] = {}
    fleet: dict[str, Any] = {"bare_metal": True}
    site_keys: list[dict] = []
    globals_: dict[str, slurmconf.Record] = {}
    nodes: list[_Node] = []
    partitions: list[slurmconf.Record] = []
    defaults: dict[str, str] = {}
    default_keys: dict[str, str] = {}  # lower-cased -> as written
    part_defaults: dict[str, str] = {}
    seen_hosts: dict[str, slurmconf.Record] = {}
    controllers: list[str] = []
    lines_carried: list[dict] = []
    nodesets: dict[str, slurmconf.Record] = {}  # NodeSet=name -> its line (partitions may name it)
    controller_lines: list[slurmconf.Record] = []
    controller_addrs: dict[str, str] = {}  # ControlAddr / BackupAddr

    for record in conf.records:
        kind = record.kind
        where = record.where
        if not kind:
            continue
        secret = secret_in(record.text)
        if secret:  # a password in JobCompLoc's URL, a token anywhere: the line is not written, nor repeated
            where_to = report.fatal if kind in ("nodename", "partitionname") else report.refused
            where_to.append(Item(where, f"{record.pairs[0].key}: holds what looks like a credential ({secret}); "
                                 "not written (workload.yaml and the bundle are committed): keep it in the "
                                 "site's own file or a Kubernetes Secret"))
            continue
        if kind == "nodename":
            name = record.pairs[0].value
            if name.upper() == "DEFAULT":
                defaults.update({p.key.lower(): p.value for p in record.pairs[1:]})
                default_keys.update({p.key.lower(): p.key for p in record.pairs[1:]})
                report.modelled.append(Item(where, "NodeName=DEFAULT: its values apply to the node lines after it"))
                continue
            try:
                hosts = hostlist.expand(name)
            except ValueError as exc:
                report.fatal.append(Item(where, f"NodeName: {exc}"))
                continue
            clash = [h for h in hosts if h in seen_hosts]
            if clash:
                report.fatal.append(Item(where, f"NodeName: {clash[0]} is already defined at "
                                     f"{seen_hosts[clash[0]].where} (Slurm: \"Duplicated NodeName\")"))
                continue
            for h in hosts:
                seen_hosts[h] = record
            params = {**defaults, **{p.key.lower(): p.value for p in record.pairs}}
            own = {p.key.lower() for p in record.pairs}
            written = {default_keys[k]: v for k, v in defaults.items() if k not in own}  # NodeName=DEFAULT's
            written.update({p.key: p.value for p in record.pairs[1:]})
            nodes.append(_Node(record, params, written, hosts))
            continue
        if kind == "partitionname":
            if record.pairs[0].value.upper() == "DEFAULT":
                part_defaults.update({p.key.lower(): p.value for p in record.pairs[1:]})
            partitions.append(record)
            continue
        if kind == "nodeset":
            nodesets[record.pairs[0].value] = record
        if kind in ("nodeset", "downnodes", "frontendname", "slurmctldparameters") and len(record.pairs) > 1 \
                or kind in ("nodeset", "downnodes", "frontendname"):
            lines_carried.append({"line": record.text.strip(), "reason": f"{record.pairs[0].key} lines are not "
                                  "modelled by orchgen", "from": where})
            report.carried.append(Item(where, f"{record.pairs[0].key} line, verbatim"))
            continue
        if len(record.pairs) > 1:
            report.fatal.append(Item(where, f"{record.pairs[0].key}: more than one Key=Value on a line that is not a "
                                     "NodeName/PartitionName/NodeSet line"))
            continue
        key = record.pairs[0].key
        if kind in OBSOLETE:
            new, why = OBSOLETE[kind]
            if new is None:
                report.refused.append(Item(where, f"{key}: {why}; not written"))
            else:
                k, _, v = new.partition("=")
                site_keys.append({"key": k, "value": v, "reason": f"the site's {key} ({why})", "from": where})
                report.carried.append(Item(where, f"{key} written as {new}: {why}"))
            continue
        if key not in KNOWN and kind not in {k.lower() for k in KNOWN}:
            report.fatal.append(Item(where, f"{key}: not a slurm.conf key (Slurm 22.05 to 26.05 refuse it: "
                                     "\"Parsing error at unrecognized key\")"))
            continue
        if kind == "authinfo" and authinfo_unknown(record.pairs[0].value):
            report.refused.append(Item(where, f"{key}: option {authinfo_unknown(record.pairs[0].value)[0]} is not "
                                       "one orchgen knows holds no secret (cred_expire, socket, ttl, "
                                       "use_client_ids: slurm.conf(5)); not written: keep it in the site's file"))
            continue
        if kind in CREDENTIALS:
            report.refused.append(Item(where, f"{key}: a credential; orchgen never writes one into a committed "
                                   "file (slurmdbd and munge authenticate: README, accounting)"))
            continue
        if kind in ("slurmctldhost", "controlmachine", "backupcontroller"):
            host, _, addr = record.pairs[0].value.partition("(")
            controllers.append(host)
            controller_lines.append(record)
            report.modelled.append(Item(where, f"{key}={host} -> fleet.slurm.controllers"))
            continue
        if kind == "controladdr" or kind == "backupaddr":  # the address of ControlMachine/BackupController
            controller_addrs[kind] = record.pairs[0].value
            report.modelled.append(Item(where, f"{key}: the controller's address, written with it as "
                                        "SlurmctldHost=name(addr)"))
            continue
        globals_[kind] = record  # the last one wins, as in Slurm

    cluster = globals_.get("clustername")
    cluster_name = cluster.pairs[0].value if cluster else src.slurm_conf.parent.name
    doc["metadata"] = {"name": _dns(cluster_name, "site")}
    if cluster and _dns(cluster_name, "site") != cluster_name.lower():
        slurm_opts["cluster_name"] = cluster_name.lower()
    elif cluster and cluster_name.lower() != doc["metadata"]["name"]:
        slurm_opts["cluster_name"] = cluster_name.lower()
    if controllers:
        fleet["slurm"] = {"controllers": [_dns(c, "ctld") for c in controllers]}
        _controllers(controller_lines, controller_addrs, site_keys, report)
    acct_host = globals_.get("accountingstoragehost")
    if acct_host and "slurm" in fleet:
        fleet["slurm"]["accounting"] = _dns(acct_host.pairs[0].value, "dbd")
    ssl = globals_.get("statesavelocation")
    if ssl and re.fullmatch(r"/[A-Za-z0-9._+-]+(/[A-Za-z0-9._+-]+)*", ssl.pairs[0].value):
        slurm_opts["state_save_location"] = ssl.pairs[0].value
    _policy(globals_, slurm_opts)

    if len(nodes) > MAX_POOLS:  # each node line is a pool: refused now, not after minutes of planning
        raise _fatal(Item(nodes[MAX_POOLS].record.where, f"NodeName: more than {MAX_POOLS} node lines, and each "
                          f"becomes a pool (fleet.pools holds at most {MAX_POOLS}): write nodes of the same "
                          "hardware on one line as a hostlist, e.g. NodeName=gpu[001-512]"))
    pools, pool_keys = _pools(nodes, report)
    fleet["pools"] = pools
    extra: dict[str, bytes] = {}
    fleet["fabric"] = _fabric(src, conf, globals_, out, report, extra, sum(p["nodes"] for p in pools),
                              slurm_version)
    if src.fabric:  # --fabric: the one fact no Slurm file states, given (a bare-metal fleet states it: spec/checks.py)
        fleet["fabric"] = {"kind": src.fabric, **fleet["fabric"]}
        report.modelled.append(Item("--fabric", f"fleet.fabric.kind {src.fabric}"))
    doc["fleet"] = fleet
    tenants, accounts = _tenants(src.sacctmgr_dump, report) if src.sacctmgr_dump else ([], {})
    if tenants:
        doc["tenants"] = tenants
    qos = _qos_set(src.sacctmgr_qos, report) if src.sacctmgr_qos else None
    if qos and tenants:
        slurm_opts["qos"] = qos
    elif qos:
        report.refused.append(Item(str(src.sacctmgr_qos), "the QOS set needs accounts (--sacctmgr-dump): "
                                   "orchgen's QOS go with its accounting, which tenants turn on"))
    _account_qos(accounts, qos, report)
    doc["workloads"] = [{"name": "site-jobs", "plane": "slurm", "bare_metal": True}]
    if not tenants:  # orchgen's priority and QOS go with its accounting, which tenants turn on: carried instead
        slurm_opts.pop("priority", None)
    # No Slurm file says what the fabric is (topology.conf gives the cabling, not InfiniBand or Ethernet), and
    # NCCL's settings differ by fabric (NCCL_IB_DISABLE=1 on Ethernet forces TCP on an InfiniBand cluster):
    # they are left out, and the report asks for the fact instead of assuming one
    if not src.fabric:
        slurm_opts["nccl"] = False
        report.asks.append(Item("fabric", "unknown — NCCL settings left out; give fleet.fabric.kind (infiniband, roce "
                                "or ethernet; or --fabric) and remove options.slurm.nccl: false for orchgen's NCCL "
                                "TaskProlog"))
    part_wheres: list[str] = []
    part_list = _partitions(partitions, part_defaults, nodesets, nodes, report, part_wheres)
    if part_list:
        slurm_opts["partitions"] = part_list
    # the site's own behaviour where orchgen would add an operation the site's users would notice
    options: dict[str, Any] = {}
    if slurm_version:
        options["slurm_version"] = slurm_version
    if slurm_opts:
        options["slurm"] = slurm_opts
    if options:
        doc["options"] = options

    if report.fatal:
        err = _fatal(report.fatal[0])
        err.others = [_fatal(i) for i in report.fatal[1:]]  # type: ignore[attr-defined]
        raise err

    # plan it, and carry whatever orchgen does not write as the site has it (the topology copy must be
    # beside workload.yaml for that; it goes again if planning refuses)
    written: list[Path] = []
    try:
        for name, data in extra.items():
            path = out.parent / name
            if os.path.lexists(path):  # a link there, dangling or not, is not written through (issue 40)
                continue
            _write_new(path, data)
            written.append(path)
        # where a field of the imported workload came from: a refusal while planning names the site's line
        origin = {f"options.slurm.partitions[{i}]": w for i, w in enumerate(part_wheres)}
        origin.update({f"fleet.pools[{i}]": n.record.where for i, n in enumerate(pool_keys.values())})
        site = _carry(doc, out, globals_, nodes, pool_keys, partitions, gres, cgroup, site_keys, lines_carried,
                      report, src, origin)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    if site:
        prefix = str(src.slurm_conf.parent) + os.sep  # file:line relative to slurm.conf's folder: no host paths
        for section in site.values():
            for entry in section.get("keys", []) + section.get("lines", []) if isinstance(section, dict) else ():
                if isinstance(entry, dict) and str(entry.get("from", "")).startswith(prefix):
                    entry["from"] = entry["from"][len(prefix):]
        doc["site"] = site
    from .yamlio import dump_yaml

    header = (f"# Imported by `orchgen import slurm` from {src.slurm_conf.name}: pools, fabric, tenants and policy are\n"
              "# modelled; site: carries verbatim what orchgen does not model, each with its reason.\n")
    return header + dump_yaml(doc).decode(), report, extra


def _controllers(records: list[slurmconf.Record], addrs: dict[str, str], site_keys: list[dict],
                 report: Report) -> None:
    """The site's controller lines, kept as written where orchgen's would differ: fleet.slurm.controllers
    holds DNS names (lower case, no address), but slurmctld compares SlurmctldHost's name with its own
    gethostname() case-sensitively ("This host (vm) not a valid controller", slurm.conf(5) SlurmctldHost)
    and the address in `name(addr)` is where slurmd and the clients reach it. So when any name has
    upper case or an address (SlurmctldHost=name(addr), or the old ControlAddr/BackupAddr), every
    controller is carried as `SlurmctldHost=name(addr)`, in the site's order (the first is the primary)."""
    values = []
    for i, record in enumerate(records):
        host, _, addr = record.pairs[0].value.partition("(")
        addr = addr.rstrip(")") or (addrs.get("controladdr") if i == 0 else addrs.get("backupaddr")
                                    if record.kind == "backupcontroller" else None) or ""
        values.append((record, host, addr))
    if all(host == _dns(host, "ctld") and not addr for _, host, addr in values):
        return
    for record, host, addr in values:
        value = f"{host}({addr})" if addr else host
        why = []
        if host != _dns(host, "ctld"):
            why.append(f"the name's case ({host}): slurmctld compares it with its host name case-sensitively")
        if addr:
            why.append(f"the address ({addr}) slurmd and the clients reach the controller at")
        site_keys.append({"key": "SlurmctldHost", "value": value, "from": record.where,
                          "reason": _safe("the site's controller as written, " + " and ".join(why or
                                          ["with the other controllers, in the site's order"]))})
        report.carried.append(Item(record.where, f"{record.pairs[0].key}: SlurmctldHost={value} as written "
                                   f"({'; '.join(why) or 'kept in order with the others'})"))


def _fatal(item: Item) -> OrchgenError:
    file, _, line = item.where.rpartition(":")
    return OrchgenError(item.what, file or item.where, int(line) if line.isdigit() and int(line) else None)


def _beside(src: Sources, name: str, flag: str) -> Path | None:
    """The site's file `name` beside slurm.conf (None: there is none), read only where it stays inside
    slurm.conf's folder (or an --input-root) once `..` and links are followed, as an Include is
    (spec/slurmconf.read): a gres.conf, cgroup.conf, topology file or job_submit.lua that is a link out
    of the folder would carry another file's content into workload.yaml (issue 40). A file named on the
    command line (`flag`) is read where it is."""
    path = src.slurm_conf.parent / name
    if not os.path.lexists(path):
        return None
    real = os.path.realpath(path)
    tops = [os.path.realpath(src.slurm_conf.parent), *(os.path.realpath(r) for r in src.roots)]
    if not any(real.startswith(top.rstrip(os.sep) + os.sep) for top in tops):
        raise _fatal(Item(str(path), f"leads outside the folder of {src.slurm_conf.name} (a symbolic "
                          f"link): not read; give the file with {flag} to read it"))
    return path if path.is_file() else None


def _optional(given: Path | None, beside: Path | None, flag: str, report: Report) -> slurmconf.Config | None:
    path = given or beside
    if path is None:
        return None
    text = _read(path, flag)
    conf = slurmconf.read(path, text, follow_includes=False)
    for problem in conf.problems:
        report.fatal.append(Item(f"{problem.file}:{problem.line}", problem.message))
    known = {k.lower() for k in (GRES_KNOWN if flag == "--gres" else CGROUP_KNOWN)}
    for record in conf.records:
        if secret_in(record.text):
            report.fatal.append(Item(record.where, f"holds what looks like a credential ({secret_in(record.text)}); "
                                     "orchgen never writes one into workload.yaml"))
        for pair in record.pairs:
            if pair.key.lower() not in known:
                report.fatal.append(Item(record.where, f"{pair.key}: not a {path.name} key (slurmd refuses the file: "
                                         "\"Parse error\")"))
    return conf


def _policy(g: dict[str, slurmconf.Record], opts: dict[str, Any]) -> None:
    def val(key: str) -> str | None:
        r = g.get(key)
        return r.pairs[0].value if r else None

    for key, name in (("maxjobcount", "max_job_count"), ("maxarraysize", "max_array_size"),
                      ("resumetimeout", "resume_timeout")):
        if _int(val(key)) is not None:
            opts[name] = _int(val(key))
    path = re.compile(r"^/[A-Za-z0-9._+-]+(/[A-Za-z0-9._+-]+)*$")
    for key in ("rebootprogram", "prolog", "epilog"):
        v = val(key)
        if v and path.fullmatch(v):
            opts[{"rebootprogram": "reboot_program"}.get(key, key)] = v
    limits = ("AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK")
    prl, pre = val("propagateresourcelimits"), val("propagateresourcelimitsexcept")
    if pre is not None:
        items = [i.strip().upper() for i in pre.split(",") if i.strip()]
        if all(i in limits for i in items):
            opts["propagate_resource_limits_except"] = items
    if prl is not None:
        if prl.upper() in ("ALL", "NONE"):
            opts["propagate_resource_limits"] = prl.upper()
        else:
            items = [i.strip().upper() for i in prl.split(",") if i.strip()]
            if all(i in limits for i in items):
                opts["propagate_resource_limits"] = items
    sp = val("schedulerparameters")
    if sp:
        items = [i for i in sp.split(",") if i]
        rest = []
        for item in items:
            k, _, v = item.partition("=")
            if k == "max_switch_wait" and _int(v) is not None:
                opts["max_switch_wait"] = _int(v)
            elif re.fullmatch(r"[a-z][a-z0-9_]*(=[A-Za-z0-9_.:/+-]+)?", item):
                rest.append(item)
        if rest:
            opts["scheduler_parameters"] = rest
    prio: dict[str, Any] = {}
    for key in ("age", "fairshare", "jobsize", "partition", "qos"):
        if _int(val(f"priorityweight{key}")) is not None:
            prio[f"weight_{key}"] = _int(val(f"priorityweight{key}"))
    if val("priorityweighttres"):
        prio["weight_tres"] = val("priorityweighttres")
    for key, name in (("prioritydecayhalflife", "decay_half_life"), ("prioritymaxage", "max_age")):
        v = val(key)
        if v and re.fullmatch(r"[0-9-:]+", v):
            prio[name] = v
    fs = val("priorityfavorsmall")
    if fs and fs.upper() in ("YES", "NO"):
        prio["favor_small"] = fs.upper() == "YES"
    if _int(val("prioritycalcperiod")) is not None:
        prio["calc_period"] = _int(val("prioritycalcperiod"))
    if prio:
        opts["priority"] = prio


def _pool_name(expr: str, taken: dict[str, int]) -> str:
    """A pool name from a NodeName expression: its stem, then stem-2, stem-3 ... (`taken` keeps each
    name and the next suffix of its stem, so 10,000 node lines cost 10,000 steps, not 50 million)."""
    stem = _dns(re.sub(r"\[.*", "", expr).rstrip("0123456789-_") or expr, "pool")
    name, i = stem, taken.get(stem, 2) if stem in taken else 2
    while name in taken:
        name, i = f"{stem}-{i}", i + 1
    taken[stem] = max(taken.get(stem, 2), i)
    taken.setdefault(name, 2)
    return name


def _pools(nodes: list[_Node], report: Report) -> tuple[list[dict], dict[str, _Node]]:
    taken: dict[str, int] = {}
    pools, by_pool = [], {}
    for node in nodes:
        p = node.params
        where = node.record.where
        name = _pool_name(node.record.pairs[0].value, taken)
        pool: dict[str, Any] = {"name": name, "nodes": len(node.hosts), "hostnames": node.record.pairs[0].value}
        threads = _int(p.get("threadspercore")) or 1
        cores = _int(p.get("corespersocket"))
        sockets = _int(p.get("sockets")) or ((_int(p.get("boards")) or 1) * (_int(p.get("socketsperboard")) or 0)) or None
        cpus = _int(p.get("cpus"))
        boards, real = _int(p.get("boards")), _int(p.get("realmemory"))
        if boards and cores and sockets and real and cpus == sockets * cores * threads:
            # as slurmd -C prints it: orchgen then writes Boards/SocketsPerBoard as the site does
            pool["slurmd_c"] = (f"NodeName={node.hosts[0]} CPUs={cpus} Boards={boards} SocketsPerBoard={sockets // boards} "
                                f"CoresPerSocket={cores} ThreadsPerCore={threads} RealMemory={real}")
        elif cores and sockets:
            pool["cpu"] = {"sockets": sockets, "cores_per_socket": cores, "threads_per_core": threads}
            if cpus is not None and cpus == sockets * cores and threads > 1:
                pool["cpu_count"] = "cores"
        elif cpus:
            pool["cpus"] = cpus
        if "slurmd_c" not in pool:
            pool["memory_gib"] = max(4, math.ceil(real / 1024)) if real else 4
        gres = p.get("gres")
        if gres:
            gpus = [g for g in gres.split(",") if g.split(":")[0] == "gpu"]
            if gpus:
                parts = gpus[0].split(":")
                count = _int(parts[-1].split("(")[0])
                if count:
                    if len(parts) == 3:
                        pool["gpu"] = {"type": parts[1], "count": count}
                        if not catalog.gpu_type_known(parts[1]):  # the site's own name: what its jobs ask for
                            pool["gpu"]["custom"] = True
                            report.modelled.append(Item(where, f"GRES type {parts[1]} is no GPU model orchgen "
                                                        "knows: kept as the site's own (gpu.custom: true)"))
                    else:
                        pool["gpu"] = {"typed": False, "count": count}
        pools.append(pool)
        by_pool[name] = node
        report.modelled.append(Item(where, f"NodeName={node.record.pairs[0].value} -> fleet.pools {name} "
                                    f"({len(node.hosts)} nodes)"))
    return pools, by_pool


def _fabric(src: Sources, conf: slurmconf.Config, g: dict[str, slurmconf.Record], out: Path, report: Report,
            extra: dict[str, bytes], total: int, slurm_version: str | None = None) -> dict:
    topo = src.topology
    if topo is None:
        plugin = g.get("topologyplugin")
        beside = _beside(src, "topology.conf", "--topology") or src.slurm_conf.parent / "topology.conf"
        yaml = _beside(src, "topology.yaml", "--topology") or src.slurm_conf.parent / "topology.yaml"
        # the release the import plans for (--slurm-version, else options.slurm_version's default)
        m = re.match(r"(\d+)\.(\d+)", slurm_version or Options.model_fields["slurm_version"].default)
        release = (int(m[1]), int(m[2])) if m else (99, 99)  # a version the plan refuses later, with its line
        if plugin and plugin.pairs[0].value in ("topology/tree", "topology/block") and beside.is_file():
            topo = beside
        elif yaml.is_file() and release < (25, 5):
            report.refused.append(Item(str(yaml), f"topology.yaml: not read, as Slurm {'.'.join(map(str, release))} "
                                       "does not read it (topology.yaml(5) is 25.05+); give --topology to import "
                                       "the cabling"))
        elif yaml.is_file():  # Slurm 25.05+ read topology.yaml beside slurm.conf before any TopologyPlugin
            topo = yaml
        elif beside.is_file():
            report.refused.append(Item(str(beside), "topology.conf: not read, as Slurm does not read it without "
                                       "TopologyPlugin=topology/tree or topology/block; give --topology to import it"))
    if topo is None:
        report.modelled.append(Item(str(src.slurm_conf), "no topology given: fleet.fabric is one leaf per pool "
                                    "(--topology topology.conf|topology.yaml imports the cabling)"))
        return {"nodes_per_leaf": 4096}
    kind = "topology_yaml" if topo.suffix in (".yaml", ".yml") else "topology_conf"
    data = read_bounded(topo)
    folder = out.parent.resolve()
    try:
        rel = str(topo.resolve().relative_to(folder))
    except ValueError:
        rel = topo.name
        extra[rel] = data
    report.modelled.append(Item(str(topo), f"the fabric -> fleet.fabric.from.{kind}: {rel}"))
    from .spec import importers

    try:
        imported = importers.load(kind, topo)
    except OrchgenError as err:
        raise OrchgenError(err.message, str(topo), err.line, "--topology") from None
    if not imported.leaves:  # blocks (NVLink domains) only: the switch tree is one leaf per pool
        return {"from": {kind: rel}, "nodes_per_leaf": 4096}
    return {"from": {kind: rel}}


# what a `sacctmgr dump` line says about an account or user that orchgen models elsewhere or not at all
_ACCOUNT_SAID = {"Description", "Organization", "Fairshare", "QOS", "DefaultQOS"}
_USER_SAID = {"DefaultAccount", "Fairshare", "AdminLevel"}


def _dump_fields(rest: str) -> dict[str, str]:
    """The `:Key=value` fields after a dump line's name. sacctmgr writes a TRES limit unquoted, and a typed
    GRES inside it has a colon of its own (`GrpTRES=cpu=64,gres/gpu:a100=4`, sacctmgr(1) "TRES"): a piece
    that follows a TRES name with no `=` yet is that TRES's type, not a new field. Quoted values keep
    their colons."""
    pieces: list[str] = []
    for m in re.finditer(r":((?:'[^']*'|[^:'])*)", rest):
        piece = m.group(1)
        last = pieces[-1].rsplit(",", 1)[-1] if pieces else ""
        if pieces and re.fullmatch(r"(?:[A-Za-z]+=)?[a-z]+/[A-Za-z0-9_.-]+", last):
            pieces[-1] += ":" + piece
        else:
            pieces.append(piece)
    fields = {}
    for piece in pieces:
        key, eq, value = piece.partition("=")
        if eq and re.fullmatch(r"[A-Za-z]+", key):
            fields[key] = value.strip("'")
    return fields


def _tenants(path: Path, report: Report) -> tuple[list[dict], dict[str, tuple[str, dict[str, str], dict]]]:
    """Tenants from the dump's accounts under root, and each account's line and fields (its QOS lists are
    checked against the site's QOS set once that is read: _account_qos)."""
    text = _read(path, "--sacctmgr-dump")
    tenants: dict[str, dict] = {}
    accounts: dict[str, tuple[str, dict[str, str]]] = {}
    parent = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(Cluster|Parent|Account|User|QOS)\s*-\s*'([^']*)'(.*)$", line)
        if not m:
            report.refused.append(Item(f"{path}:{number}", "not a sacctmgr dump line (Cluster/Parent/Account/User)"))
            continue
        what, name, rest = m.groups()
        fields = _dump_fields(rest)
        where = f"{path}:{number}"
        if what == "Parent":
            parent = name
        elif what == "Account" and parent == "root":
            share = _int(fields.get("Fairshare", "1")) or 1
            tname = _dns(name, "account")
            tenants[name] = {"name": tname, "share": share}
            accounts[name] = (where, fields, tenants[name])
            report.modelled.append(Item(where, f"account {name} -> tenants {tname} (share {share})"))
            gpus = re.fullmatch(r"gres/gpu=([0-9]{1,7})", fields.get("GrpTRES", ""))
            if gpus:
                tenants[name]["max_gpus"] = int(gpus.group(1))
                report.modelled.append(Item(where, f"account {name} GrpTRES -> tenants {tname} max_gpus"))
            for key, value in fields.items():
                if key not in _ACCOUNT_SAID and not (key == "GrpTRES" and gpus):
                    report.refused.append(Item(where, f"account {name} {key}={value}: not modelled by orchgen"))
        elif what == "User" and parent in tenants and re.fullmatch(r"[a-z_][a-z0-9_.-]*", name):
            tenants[parent].setdefault("users", []).append(name)
            for key, value in fields.items():
                if key not in _USER_SAID or key == "Fairshare" and value != "1":
                    report.refused.append(Item(where, f"user {name} of {parent} {key}={value}: not modelled by "
                                               "orchgen (a user's association gets Slurm's defaults)"))
        elif what == "Account":
            report.refused.append(Item(where, f"account {name} under {parent}: orchgen's tenants are "
                                       "one level below root"))
    return list(tenants.values()), accounts


def _account_qos(accounts: dict[str, tuple[str, dict[str, str], dict]], qos: list[dict] | None,
                 report: Report) -> None:
    """An account's QOS list and DefaultQOS from its dump line. accounts.sh gives every account the site's
    whole QOS set (or orchgen's normal and scavenger) and `normal` (else the first) as default; an account
    whose line says otherwise keeps its own as the tenant's slurm_qos / slurm_default_qos. A QOS outside
    the set, or a default the account may not use, is refused."""
    names = sorted(q["name"] for q in qos) if qos else ["normal", "scavenger"]
    for account, (where, fields, tenant) in accounts.items():
        given = sorted(x for x in fields.get("QOS", "").split(",") if x)
        unknown = [x for x in given if x not in names]
        if unknown:
            report.refused.append(Item(where, f"account {account} QOS={','.join(given)}: {','.join(unknown)} not in "
                                       f"the QOS set ({','.join(names)}; --sacctmgr-qos gives the site's)"))
            continue
        own = given or names
        default = fields.get("DefaultQOS")
        if default and default not in own:
            report.refused.append(Item(where, f"account {account} DefaultQOS={default}: not one of its QOS "
                                       f"({','.join(own)})"))
            continue
        said = []
        if given and given != names:
            tenant["slurm_qos"] = given
            said.append("slurm_qos")
        if default and default != ("normal" if "normal" in own else own[0]):
            tenant["slurm_default_qos"] = default
            said.append("slurm_default_qos")
        if said:
            report.modelled.append(Item(where, f"account {account} QOS/DefaultQOS -> tenants {tenant['name']} "
                                        f"{' and '.join(said)}"))


# `sacctmgr -P show qos` columns -> options.slurm.qos fields; a column not listed here (GrpTRESMins, MaxTRESPA,
# ...) is refused with its line when it holds more than sacctmgr's empty default
_QOS_COLUMNS = {"Priority": "priority", "Preempt": "preempt", "PreemptMode": "preempt_mode", "Flags": "flags",
                "UsageFactor": "usage_factor", "GrpTRES": "grp_tres", "MaxWall": "max_wall",
                "MaxTRESPU": "max_tres_per_user", "MaxJobsPU": "max_jobs_per_user",
                "MaxSubmitPU": "max_submit_jobs_per_user"}
# what `sacctmgr show qos` prints for a value nobody set
_QOS_UNSET = {"", "cluster", "00:00:00"}


def _qos_set(path: Path, report: Report) -> list[dict]:
    """The site's QOS from `sacctmgr -P show qos` (a `sacctmgr dump` names QOS but does not define them)."""
    text = _read(path, "--sacctmgr-qos")
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines or "|" not in lines[0][1] or lines[0][1].split("|")[0] != "Name":
        report.fatal.append(Item(f"{path}:{lines[0][0] if lines else 1}",
                                 "not `sacctmgr -P show qos` output (its first line is Name|Priority|...)"))
        return []
    header = lines[0][1].split("|")
    out = []
    for number, line in lines[1:]:
        row = dict(zip(header, line.split("|")))
        name = row.get("Name", "")
        if len(line.split("|")) != len(header) or not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", name):
            report.refused.append(Item(f"{path}:{number}", "not a QOS row of this file's columns"))
            continue
        qos: dict[str, Any] = {"name": name}
        for column, value in row.items():
            field_, value = _QOS_COLUMNS.get(column), value.strip()
            if column == "Name" or value in _QOS_UNSET or (column, value) in (("Priority", "0"), ("UsageFactor", "1.000000")):
                continue
            if field_ is None:
                report.refused.append(Item(f"{path}:{number}", f"QOS {name} {column}={value}: not modelled by orchgen"))
            elif field_ in ("preempt", "flags"):
                qos[field_] = value.split(",")
            elif field_ == "preempt_mode":
                qos[field_] = value.lower()
            elif field_ == "usage_factor":
                qos[field_] = float(value) if re.fullmatch(r"[0-9]{1,7}(\.[0-9]{1,6})?", value) else value
            elif field_ in ("priority", "max_jobs_per_user", "max_submit_jobs_per_user"):
                qos[field_] = _int(value) if _int(value) is not None else value
            else:
                qos[field_] = value
        out.append(qos)
        report.modelled.append(Item(f"{path}:{number}", f"QOS {name} -> options.slurm.qos"))
    return out


def _node_items(expr: str) -> list[str]:
    """The comma-separated items of a node list, commas inside brackets kept (`a[1-2,5],set1,ALL`)."""
    items, depth, current = [], 0, ""
    for ch in expr:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    return [item for item in (*items, current) if item]  # Slurm skips empty items: "a,,b" is a and b


def _node_list(expr: str, nodesets: dict[str, slurmconf.Record], nodes: list[_Node], where: str,
               seen: tuple[str, ...] = ()) -> list[str]:
    """The host names a node list names, as slurmctld reads a partition's or NodeSet's Nodes=: each
    comma-separated item is `ALL` (every node), the name of a NodeSet (its Nodes= or the nodes with its
    Feature=), or a hostlist expression (ranges, several brackets: rack[1-2]gpu[01-08]). Slurm's order,
    duplicates dropped. Raises ValueError naming what it cannot read."""
    everyone = [h for n in nodes for h in n.hosts]
    out: list[str] = []
    for item in _node_items(expr):
        if item.upper() == "ALL":
            names = everyone
        elif item in nodesets:
            if item in seen:
                raise ValueError(f"NodeSet {item} names itself (through {' -> '.join(seen)})")
            ns = nodesets[item].params()
            if "nodes" in ns:
                names = _node_list(ns["nodes"], nodesets, nodes, where, (*seen, item))
            elif "feature" in ns or "features" in ns:
                want = ns.get("feature") or ns.get("features") or ""
                names = [h for n in nodes for h in n.hosts
                         if want in (n.params.get("features") or n.params.get("feature") or "").split(",")]
            else:
                raise ValueError(f"NodeSet {item} gives neither Nodes= nor Feature= (slurm.conf(5) NodeSet)")
        else:
            names = hostlist.expand(item)
        out += names
    return list(dict.fromkeys(out))


def _partitions(records: list[slurmconf.Record], defaults: dict[str, str], nodesets: dict[str, slurmconf.Record],
                nodes: list[_Node], report: Report, wheres: list[str]) -> list[dict]:
    """options.slurm.partitions from the site's lines; `wheres` gets each one's file:line, in order."""
    out = []
    known = {h for n in nodes for h in n.hosts}
    for record in records:
        p = {**defaults, **{x.key.lower(): x.value for x in record.pairs}}
        name = record.pairs[0].value
        if name.upper() == "DEFAULT":
            continue
        given = p.get("nodes", "")
        try:
            names = _node_list(given, nodesets, nodes, record.where) if given else []
        except ValueError as exc:
            report.fatal.append(Item(record.where, f"PartitionName={name} Nodes={given}: {exc}"))
            continue
        stray = [h for h in names if h not in known]
        if stray:  # slurmctld: "fatal: Invalid node names in partition"
            report.fatal.append(Item(record.where, f"PartitionName={name}: node {stray[0]} is on no NodeName line "
                                     "(slurmctld: \"Invalid node names in partition\")"))
            continue
        # the site's Nodes= resolved as slurmctld does (NodeSets, ALL, hostlists); the line itself is carried
        # verbatim when orchgen's would say it another way (_carry)
        resolved = "ALL" if given.upper() == "ALL" else hostlist.compress(names) if names else None
        # (a partition without Nodes= has none in Slurm: ALL stands for it here, and the site's line is carried)
        part: dict[str, Any] = {"name": name, "nodes": resolved or "ALL"}
        wheres.append(record.where)
        if p.get("default", "").upper() == "YES":
            part["default"] = True
        for key, f in (("defaulttime", "default_time"), ("maxtime", "max_time")):
            v = p.get(key)
            if v and v.lower() not in ("infinite", "unlimited"):
                part[f] = v
        if _int(p.get("maxnodes")):
            part["max_nodes"] = _int(p.get("maxnodes"))
        if p.get("hidden", "").upper() == "YES":
            part["hidden"] = True
        for key, f in (("allowgroups", "allow_groups"), ("allowaccounts", "allow_accounts"), ("allowqos", "allow_qos")):
            v = p.get(key)
            if v and v.upper() != "ALL":
                part[f] = v.split(",")
        if _int(p.get("prioritytier")) is not None:
            part["priority_tier"] = _int(p.get("prioritytier"))
        if p.get("state"):
            part["state"] = p["state"].upper()
        out.append(part)
        report.modelled.append(Item(record.where, f"PartitionName={name} -> options.slurm.partitions"))
    return out


# ------------------------------------------------------------------------------------------------ carry


def _norm(value: str) -> str:
    return value.strip().strip('"').lower()


def _carry(doc: dict, out: Path, g: dict[str, slurmconf.Record], nodes: list[_Node], pool_nodes: dict[str, _Node],
           partitions: list[slurmconf.Record], gres: slurmconf.Config | None, cgroup: slurmconf.Config | None,
           site_keys: list[dict], lines: list[dict], report: Report, src: Sources,
           origin: dict[str, str] | None = None) -> dict:
    rendered = _render(doc, out, src.slurm_conf, origin or {})
    plugstack = _plugstack(g, src, "plugstack.conf.d/pyxis.conf" in rendered, report)
    if plugstack is not None:  # its lines go into the bundle's plugstack.conf, which Slurm reads by default
        g = {k: v for k, v in g.items() if k != "plugstackconfig"}
    ours = slurmconf.parse(rendered.get("slurm.conf", ""), "slurm.conf")
    ours_last = {r.kind: r for r in ours if len(r.pairs) == 1}
    for kind, record in g.items():
        key, value = record.pairs[0].key, record.pairs[0].value
        mine = ours_last.get(kind)
        if mine is not None and _norm(mine.pairs[0].value) == _norm(value):
            report.modelled.append(Item(record.where, f"{key} -> {MODELLED.get(kind, 'orchgen writes the same value')}"))
            continue
        if kind in MODELLED:
            why = f"orchgen writes {mine.pairs[0].value} for {MODELLED[kind]}" if mine else \
                f"{MODELLED[kind]} does not give Slurm this value"
            reason = f"modelled as {MODELLED[kind]}, but the site's value is kept: {why}"
        elif mine is not None:
            reason = f"orchgen's own choice ({mine.pairs[0].value}) is replaced by the site's"
        else:
            reason = "not modelled by orchgen"
        site_keys.append({"key": key, "value": value, "reason": _safe(reason), "from": record.where})
        report.carried.append(Item(record.where, f"{key}: {reason}"))
    for record in ours:  # what orchgen adds where the site relied on Slurm's default: said, never silent
        if len(record.pairs) == 1 and record.kind not in g and record.kind not in _SAID:
            key = record.pairs[0].key
            if record.kind in SLURM_DEFAULTS:  # the site's behaviour depends on Slurm's default: kept
                value, why = SLURM_DEFAULTS[record.kind]
                site_keys.append({"key": key, "value": value, "from": str(src.slurm_conf),
                                  "reason": _safe(f"{why} (orchgen would write {record.pairs[0].value})")})
                report.carried.append(Item(str(src.slurm_conf), f"{key}={value}: {why} (orchgen would write "
                                           f"{record.pairs[0].value})"))
                continue
            why = ORCHGEN_BETTER.get(key) or ORCHGEN_WRITES.get(key) or (
                "orchgen's choice where the site relied on Slurm's default: check it, or set the site's value in "
                "workload.yaml")
            report.added.append(Item("slurm.conf", f"{key}={record.pairs[0].value}: {why}"))
    _cgroup_added(cgroup, rendered.get("cgroup.conf", ""), report, skip={"constrainramspace"} if any(
        "realmemory" not in n.params for n in pool_nodes.values()) else set())
    # node lines: every key orchgen writes differently, on that pool's line
    our_nodes = [r for r in ours if r.kind == "nodename"]
    no_memory = False  # a pool keeps Slurm's RealMemory=1: orchgen's ConstrainRAMSpace=yes would hold jobs to 1 MB
    for pool, node in pool_nodes.items():
        hosts = set(node.hosts)
        line = next((r for r in our_nodes if set(hostlist.expand(r.pairs[0].value)) <= hosts), None)
        theirs = line.params() if line else {}
        written = dict(node.written)
        why_default: dict[str, str] = {}
        for k, (key, default, why) in NODE_DEFAULTS.items():
            if k in theirs and k not in {w.lower() for w in written} and k not in node.params:
                written[key], why_default[k] = default, why
                no_memory |= k == "realmemory"
        cpus = node.params.get("cpus")
        if cpus and not any(k in node.params for k in _LAYOUT_KEYS):
            for key, value in (("Sockets", cpus), ("CoresPerSocket", "1"), ("ThreadsPerCore", "1")):
                written[key], why_default[key.lower()] = value, _CPUS_ONLY.format(cpus=cpus)
        for key, value in written.items():
            k = key.lower()
            if k == "feature":  # Slurm's other spelling of Features: it replaces orchgen's Features, not beside it
                key, k = "Features", "features"
            if k == "nodename" or k in ("sockets", "boards", "socketsperboard") and k not in why_default \
                    and _sockets(theirs) == _sockets(node.params):
                continue  # the same layout said another way (Sockets or Boards x SocketsPerBoard): modelled
            if _norm(theirs.get(k, "\0")) == _norm(value):
                continue
            would = f" (orchgen would write {theirs[k]})" if k in theirs else ""
            reason = f"{why_default[k]}{would}" if k in why_default else f"pool {pool}'s {key} as the site sets it{would}"
            site_keys.append({"key": key, "value": value, "pool": pool, "from": node.record.where,
                              "reason": _safe(reason)})
            report.carried.append(Item(node.record.where, f"NodeName {key}={value}: kept on pool {pool}'s line"
                                       + (f": {reason}" if k in why_default else "")))
    # partitions: orchgen's lines, if they say the same, else the site's lines verbatim
    our_records = {r.pairs[0].value: r for r in ours if r.kind == "partitionname"}
    our_parts = {name: r.params() for name, r in our_records.items()}
    differ: dict[str, str] = {}  # partition -> why orchgen's line is not the site's
    site_defaults = {p.key.lower(): p.value for r in partitions if r.pairs[0].value.upper() == "DEFAULT"
                     for p in r.pairs[1:]}
    for record in partitions:
        name = record.pairs[0].value
        if name.upper() == "DEFAULT":
            continue
        mine = our_parts.get(name)
        theirs = {**site_defaults, **{p.key.lower(): p.value for p in record.pairs[1:]}}
        if mine is None:
            differ[name] = "orchgen writes no such partition"
            continue
        other = [p.key for p in record.pairs[1:] if _norm(mine.get(p.key.lower(), "\0")) != _norm(p.value)]
        # keys orchgen adds (DefaultTime, DefMemPerCPU, DefCpuPerGPU, DefMemPerGPU ...) change what a job gets
        # where the site set nothing: not silently, so the site's line is kept instead
        extra = [f"{p.key}={p.value}" for p in our_records[name].pairs[1:] if p.key.lower() not in theirs]
        if other or extra:
            differ[name] = "; ".join(x for x in (f"orchgen would write {', '.join(other)} otherwise" if other else "",
                                                 f"orchgen would add {' '.join(extra)}" if extra else "") if x)
    if differ:
        for record in partitions:
            name = record.pairs[0].value
            why = differ.get(name, "kept with the site's other partitions")
            lines.append({"line": record.text.strip(), "reason": _safe("the site's partition as written (limits and "
                          "options orchgen does not model, e.g. Priority, Shared, PreemptMode, DefMemPerCPU): "
                          + why), "from": record.where})
            report.carried.append(Item(record.where, f"PartitionName={name}: the line verbatim ({why})"))
    site: dict[str, Any] = {}
    if site_keys or lines:
        site["slurm_conf"] = {k: v for k, v in (("keys", site_keys), ("lines", lines)) if v}
    for name, conf in (("gres.conf", gres), ("cgroup.conf", cgroup)):
        carried = _carry_file(name, conf, rendered.get(name, ""), report) if conf is not None else {}
        if name == "cgroup.conf" and no_memory and "cgroup.conf" in rendered and not (
                cgroup and cgroup.last("ConstrainRAMSpace")):
            why = ("the site's nodes keep Slurm's RealMemory=1 (no RealMemory given): with orchgen's "
                   "ConstrainRAMSpace=yes every job would be held to 1 MB; give the pools' memory, then drop this")
            carried.setdefault("keys", []).append({"key": "ConstrainRAMSpace", "value": "no", "reason": why,
                                                   "from": str(src.slurm_conf)})
            report.carried.append(Item("cgroup.conf", f"ConstrainRAMSpace=no: {why}"))
        if carried:
            site[name.replace(".", "_")] = carried
    if plugstack:
        site["plugstack_conf"] = {"lines": plugstack}
    files = _site_files(g, src, report)
    if files:
        site["files"] = files
    return site


_PYXIS = re.compile(r"(^|/)spank_pyxis\.so$")


def _plugstack(g: dict[str, slurmconf.Record], src: Sources, pyxis: bool, report: Report) -> list[dict] | None:
    """The site's plugstack.conf (PlugStackConfig's file, else the one beside slurm.conf; spank(8)): each line
    carried into the bundle's plugstack.conf, merged with orchgen's pyxis where the plan enables it, or
    refused, with its line. None: the site has no plugstack.conf here to read (a PlugStackConfig key naming
    a file that is not beside slurm.conf is then carried as it is)."""
    key = g.get("plugstackconfig")
    name = Path(key.pairs[0].value).name if key else "plugstack.conf"
    path = src.slurm_conf.parent / name
    if not path.is_file():
        if pyxis and not key:
            report.added.append(Item("plugstack.conf", f"pyxis: {ORCHGEN_BETTER['PlugStackConfig']}"))
        if key:
            report.refused.append(Item(key.where, f"PlugStackConfig: {name} is not beside slurm.conf, so its "
                                       "plugins are not read: give the file there and import again"))
        return None
    if key:
        report.modelled.append(Item(key.where, f"PlugStackConfig: {name}'s lines go into the bundle's plugstack.conf, "
                                    "which Slurm reads beside slurm.conf"))
    text = _read(path, "plugstack.conf")
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0].strip()
        where = f"{path}:{number}"
        if not body:
            continue
        words = body.split()
        if secret_in(body):
            report.refused.append(Item(where, f"holds what looks like a credential ({secret_in(body)}); not written"))
            continue
        if words[0] == "include" and len(words) == 2:
            folder = words[1].rsplit("/", 1)[0] if "/" in words[1] else ""
            if pyxis and Path(folder).name == "plugstack.conf.d":
                report.modelled.append(Item(where, f"include {words[1]}: orchgen's `include plugstack.conf.d/*.conf` "
                                            "reads that folder (the site's *.conf files there keep loading)"))
                continue
        elif words[0] not in ("required", "optional") or len(words) < 2:
            report.refused.append(Item(where, "not a SPANK line (required|optional PLUGIN [ARGS], or include GLOB; "
                                       "spank(8)); not written"))
            continue
        elif pyxis and _PYXIS.search(words[1]):  # loaded once: a second line would load the plugin twice
            args = " ".join(words[2:])
            if args:
                report.refused.append(Item(where, f"pyxis's arguments ({args[:80]}): orchgen's plugstack.conf.d/"
                                           "pyxis.conf loads pyxis with its own; not written: give them there"))
            else:
                report.modelled.append(Item(where, "pyxis: orchgen's plugstack.conf.d/pyxis.conf loads it"))
            continue
        try:
            _ = SiteLine.model_validate({"line": body, "reason": "x"})
        except ValueError as exc:
            report.refused.append(Item(where, f"cannot be written back as it is: {str(exc).splitlines()[-1][:120]}"))
            continue
        out.append({"line": body, "from": where, "reason": "the site's SPANK plugin, loaded as the site loads it"
                    + (" (beside orchgen's pyxis)" if pyxis else "")})
        report.carried.append(Item(where, f"plugstack.conf: {words[0]} {words[1][:80]}, kept"))
    return out


def _cgroup_added(cgroup: slurmconf.Config | None, rendered: str, report: Report, skip: set[str]) -> None:
    """An `added` line for each cgroup.conf key orchgen writes that the site's cgroup.conf (or its absence:
    every Constrain* key is then Slurm's "no") does not set."""
    theirs = {r.kind for r in cgroup.records} if cgroup else set()
    for record in slurmconf.parse(rendered, "cgroup.conf"):
        if len(record.pairs) == 1 and record.kind not in theirs and record.kind not in skip:
            key, value = record.pairs[0].key, record.pairs[0].value
            why = ORCHGEN_BETTER_CGROUP.get(key, "orchgen's choice where the site relied on Slurm's default")
            report.added.append(Item("cgroup.conf", f"{key}={value}: {why}"))


def _sockets(params: dict[str, str]) -> int | None:
    return _int(params.get("sockets")) or ((_int(params.get("boards")) or 1) * (_int(params.get("socketsperboard")) or 0)) \
        or None


def _safe(text: str) -> str:
    return text.replace("#", "no.").replace("\n", " ").replace("\\", "/")


def _carry_file(name: str, conf: slurmconf.Config, rendered: str, report: Report) -> dict:
    ours = slurmconf.parse(rendered, name)
    keys, lines = [], []
    ours_keys = {r.kind: r for r in ours if len(r.pairs) == 1}
    ours_lines = {tuple(sorted((p.key.lower(), _norm(p.value)) for p in r.pairs if p.key.lower() != "count"))
                  for r in ours if len(r.pairs) > 1}
    site_lines = [r for r in conf.records if len(r.pairs) > 1]
    same = all(tuple(sorted((p.key.lower(), _norm(p.value)) for p in r.pairs if p.key.lower() != "count"))
               in ours_lines for r in site_lines)
    for r in conf.records:
        if len(r.pairs) == 1 and name == "cgroup.conf" and r.kind in CGROUP_IGNORED:
            report.refused.append(Item(r.where, f"{r.pairs[0].key}: {CGROUP_IGNORED[r.kind]}; not written"))
            continue
        if len(r.pairs) == 1:
            mine = ours_keys.get(r.kind)
            if mine is not None and _norm(mine.pairs[0].value) == _norm(r.pairs[0].value):
                report.modelled.append(Item(r.where, f"{r.pairs[0].key}: orchgen writes the same"))
                continue
            keys.append({"key": r.pairs[0].key, "value": r.pairs[0].value, "from": r.where,
                         "reason": "the site's value, which orchgen does not write"})
            report.carried.append(Item(r.where, f"{r.pairs[0].key}: kept as the site sets it"))
        elif same:
            report.modelled.append(Item(r.where, "GPU line: orchgen writes the same from fleet.pools[].gpu"))
        else:
            lines.append({"line": r.text.strip(), "reason": "the site's GPU line as written (device files, "
                          "types and CPU affinity orchgen does not derive)", "from": r.where})
            report.carried.append(Item(r.where, "the line verbatim"))
    return {k: v for k, v in (("keys", keys), ("lines", lines)) if v}


# slurm.conf keys naming programs the site installs on its nodes (slurm.conf(5)): a value is a path, or (Prolog,
# Epilog, 21.08+) a glob whose every match runs in name order; the bundle ships none of them
_SITE_PROGRAMS = {"prolog": "every node, before a job", "epilog": "every node, after a job",
                  "prologslurmctld": "the controller, before a job", "epilogslurmctld": "the controller, after a job",
                  "taskprolog": "every node, before each task", "taskepilog": "every node, after each task",
                  "srunprolog": "the submit host, before srun", "srunepilog": "the submit host, after srun"}
_GLOB = re.compile(r"[*?\[]")


def _site_programs(g: dict[str, slurmconf.Record], report: Report) -> None:
    """A line for each prolog/epilog the site's slurm.conf names: where it runs, and that the site keeps it."""
    for kind, runs in _SITE_PROGRAMS.items():
        record = g.get(kind)
        if record is None:
            continue
        key, value = record.pairs[0].key, record.pairs[0].value.strip('"')
        if _GLOB.search(value) or value.endswith("/"):
            what = f"{key}={value}: each script the glob matches runs, in name order, on {runs} (slurm.conf(5) {key})"
        else:
            what = f"{key}={value}: the site's program, run on {runs}"
        report.carried.append(Item(record.where, f"{what}; the bundle ships no such script: keep it installed there"))


def _site_files(g: dict[str, slurmconf.Record], src: Sources, report: Report) -> dict[str, str]:
    """Files slurm.conf's plugins read beside it (job_submit.lua), shipped verbatim when present."""
    _site_programs(g, report)
    out = {}
    plugins = g.get("jobsubmitplugins")
    if plugins and "lua" in plugins.pairs[0].value.split(","):
        lua = _beside(src, "job_submit.lua", "--input-root DIR (the folder it leads to)")
        if lua is not None:
            out["job_submit.lua"] = _read(lua, "job_submit.lua")
            report.carried.append(Item(str(lua), "job_submit.lua: shipped verbatim beside slurm.conf"))
        else:
            report.refused.append(Item(plugins.where, "JobSubmitPlugins=lua but no job_submit.lua beside slurm.conf: "
                                       "slurmctld will not start until it is installed there"))
    return out


def _render(doc: dict, out: Path, conf: Path, origin: dict[str, str]) -> dict[str, str]:
    """The Slurm files orchgen writes for `doc`, planned exactly as `orchgen plan` would (the same
    loader, from a file in the folder workload.yaml will be written to). A refusal names the site's line
    the field came from (`origin`: field prefix -> file:line), else the site's slurm.conf: never the
    temporary file, which is gone when the message is read."""
    from .decide.planner import make_plan
    from .render.slurm.files import slurm_config
    from .spec import load
    from .yamlio import dump_yaml

    folder = out.parent
    fd, tmp = tempfile.mkstemp(prefix=".orchgen-import-", suffix=".yaml", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(dump_yaml(doc))
        try:
            fleet = load(tmp)
            plan = make_plan(fleet, tmp)
            return {} if plan.slurm_plane is None else slurm_config(plan)
        except OrchgenError as err:  # the temporary file is nobody's: name the site's file and line
            where = next((w for f, w in origin.items() if err.field and (err.field == f or err.field.startswith(
                (f + ".", f + "[")))), None)
            file, _, line = (where or "").rpartition(":")
            raise OrchgenError(f"the imported configuration does not plan ({err.field or 'workload'}): {err.message}",
                               file or str(conf), int(line) if line.isdigit() else None) from None
    finally:
        os.unlink(tmp)
