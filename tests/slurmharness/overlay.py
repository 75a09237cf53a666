"""The loopback overlay: the only changes made to a production config dir before booting it.

The input dir is copied unchanged (unknown files such as accounts.sh or a README included) and
then only these files are adapted, in the copy:

slurm.conf
    Keys that name hosts, ports, users, paths, auth, accounting, mail, or programs to run are
    dropped and replaced by a header of loopback values under the work dir (TmpFS included: each
    node gets a /tmp of its own, <work>/tmp/<node>, as on real machines; PMIx keeps each step's
    directory there). Each NodeName line
    gets `NodeHostname=<hostname -s> NodeAddr=127.0.0.1 Port=[unique range]` (Debian builds
    with MULTIPLE_SLURMD, so one slurmd per node runs on this one host), and SlurmdParameters
    gets `config_overrides`, so slurmd reports the configured CPUs/RealMemory/Gres rather than
    this machine's. Everything else (partitions, GRES, topology, priority, scheduler) is kept.
    ProctrackType/TaskPlugin become proctrack/linuxproc (+ task/none on 22.05; later versions
    have no task/none, so TaskPlugin is left unset): cgroup writes fail in this sandbox.
    `AcctGather*` (energy, profile, interconnect plugins: hardware) and `JobComp*` (a job
    completion store elsewhere) are dropped; `JobCompType=jobcomp/none`.
    Accounting depends on the cluster (`SlurmCluster(accounting=...)`):
    * without (the default): `AccountingStorage*` and `JobAcctGather*` are dropped, as there is
      no slurmdbd, and `AccountingStorageTRES=gres/gpu` without one is fatal
      (`accounting_storage/none`, `jobacct_gather/none`). For the same reason, when the input
      used slurmdbd, `GRES/...` items leave TRESBillingWeights and PriorityWeightTRES (fatal to
      parse without that TRES); their CPU/Mem weights stay, and a key left with no weight at all
      (`PriorityWeightTRES=GRES/gpu=2000`) goes. PreemptType=preempt/qos is kept: it parses, and
      without slurmdbd there is simply no QOS to preempt by.
    * with (`Layout.dbd_port`): only where slurmdbd is changes: `AccountingStorageType=
      accounting_storage/slurmdbd`, `AccountingStorageHost=<hostname -s>`,
      `AccountingStoragePort=<slurmdbd's free port>`, and `AccountingStoragePass=<the private
      munge socket>` (connections to slurmdbd authenticate through the socket this key names,
      not AuthInfo's: without it sacctmgr looks for /run/munge/munge.socket.2 and fails, on
      22.05, 24.11 and 26.05 alike);
      `AccountingStorageBackupHost`, `...ExternalHost`, `...User`, `...Loc` are dropped.
      `JobAcctGatherType` becomes `jobacct_gather/linux` (reads /proc; the cgroup one cannot
      work here). AccountingStorageEnforce, AccountingStorageTRES, the other JobAcctGather*
      keys, TRESBillingWeights and PriorityWeightTRES are kept as written.
    Node lines keep their CoreSpecCount and MemSpecLimit: slurmctld still takes the specialised
    cores and memory out of what jobs get (scontrol shows CoreSpecCount, CPUSpecList, MemSpecLimit,
    CPUEfctv), but without task/cgroup nothing confines slurmd to them, which slurmd logs as an
    error ("Resource spec: Limited MemSpecLimit support. Slurmd daemon not memory constrained");
    the cluster treats that line as harmless only when the input had task/cgroup
    (`Overlaid.dropped_task_cgroup`).
gres.conf
    `File=/dev/...` becomes `<work>/dev/...`, each expanded name a symlink to /dev/null (slurmd
    insists on a character device). `AutoDetect=nvml|nvidia|rsmi|oneapi|nrt` becomes `off`, and
    GPUs that detection would have found get File= lines synthesised from slurm.conf's Gres=
    (or, for `Name=gpu ... Count=N` lines beside AutoDetect, from their Count).
    Count-only GPU lines without autodetection are left alone on purpose: slurmd drops those
    GPUs on real nodes too ("Removing file-less GPU"), which is a finding, not noise.
Include
    `Include /etc/slurm/x.conf` points at the copy when x.conf is in the config dir; the lines
    of included files are not overlaid (orchgen emits none).
cgroup.conf
    Copied and parsed as is. From 23.x on, slurmd initialises the cgroup plugin even with
    proctrack/linuxproc and fails without /sys/fs/cgroup, so `CgroupPlugin=disabled` replaces
    any CgroupPlugin line there (the other keys are still parsed and checked).
slurmdbd.conf (with accounting only; written from scratch when the config dir has none)
    A header of loopback values: `DbdHost=<hostname -s>` (slurmdbd checks it against its own
    host name), `DbdAddr=127.0.0.1`, `DbdPort=<free port>`, `SlurmUser=root`, `AuthType=
    auth/munge` with `AuthInfo=socket=<the private munge socket>`, `StorageType=
    accounting_storage/mysql` and `StorageHost=127.0.0.1`, `StoragePort`, `StorageUser`,
    `StoragePass`, `StorageLoc` of the cluster's own database on the private MariaDB (a random
    password made per cluster), `PidFile`/`LogFile` under the work dir, `DebugLevel=info`. The
    input's values of those keys are dropped, as are `StorageParameters` (TLS files of the real
    server), `DbdBackupHost`/`DbdBackupAddr`, `AuthAlt*`, `TLS*`, `PluginDir` and
    `ArchiveScript`; `ArchiveDir` moves under the work dir. Every other key (Purge*, Archive*,
    TrackWCKey, PrivateData, CommitDelay ...) is kept. The file is mode 0600: it may hold the
    password, and slurmdbd refuses one that others can read.
    Where the input keeps the password out of slurmdbd.conf, the overlay plays the operator and
    fills the place it names instead of writing `StoragePass` into the header, so the bundle's own
    mechanism is what slurmdbd uses: `Include <file>` of a file the config dir does not ship gets
    `<work>/etc/<file>` (mode 0600) holding `StoragePass=<the loopback password>`, and
    `StoragePassScript=<script>` (Slurm 25.11+) gets `<work>/etc/<script>` (mode 0700) printing
    `TOKEN=<the loopback password>`. An Include of a shipped file points at its copy.
Permissions (set by cluster.py, on the copies)
    etc/ and its files become readable by all (except slurmdbd.conf and the password file or script
    above), and the work dir and the munge socket's dir traversable, so that `run(..., user=UID)` can
    act as a user other than root. With `unix_users`/`unix_groups`, the namespace's /etc/passwd and
    /etc/group are copies with those added (the bundle's files are not changed by it).
Programs (Prolog, Epilog, TaskProlog, HealthCheckProgram ...)
    A program the config dir ships (e.g. `TaskProlog=/etc/slurm/task-prolog.sh` beside a
    task-prolog.sh) runs from the copy: `<work>/etc/task-prolog.sh`. Any other program path names
    something of the real machines and is dropped. HealthCheckProgram (NHC, not installed here) is
    replaced, only when the cluster asks for it (`health_check=True`), by the NHC stand-in of
    `nhc.py`, which runs the `check_cmd_output` lines of the shipped nhc.conf for each node, with
    `<work>/bin` first on PATH, and drains a failing node with NHC's reason; HealthCheckInterval and
    HealthCheckNodeState stay as written. plugstack.conf needs nothing: Slurm reads it from the
    directory of slurm.conf, and its relative `include` from its own.
MpiDefault
    Kept: whether the packages' mpi plugin loads is part of what a boot proves (see HARMLESS in
    cluster.py for the one loopback artefact of PMIx).
SwitchType=switch/nvidia_imex
    Kept. `imex_dev_major=<a major no driver registered>` joins SwitchParameters: this host has
    no nvidia-caps-imex-channels in /proc/devices, where the plugin would look it up (and else
    disable itself on the nodes). Each step then mknods its channel in a private tmpfs at
    /dev/nvidia-caps-imex-channels, as on a GPU node; opening it fails (no such device). The
    plugin's slurmd creates that (empty) directory in the root it runs in; in a chroot the root is
    bind-mounted onto itself, so that the step can make its mounts private (cluster.py).
SchedulerParameters, with `bf_interval_s` (tests of scheduling order only, test_simulate_slurm.py)
    `bf_interval=<s>` joins the bundle's SchedulerParameters (which sets none: Slurm's default
    is 30 s): jobs there run for seconds, not hours, and backfill must look at the queue within
    seconds for its starts to be measured against `orchgen simulate`'s, which is given the same
    interval. Everything else of the line (bf_window, bf_resolution, bf_max_job_test ...) is kept.
Controllers (`controllers=N`, N > 1)
    Each controller gets a name of its own, `orchgen-ctld<i>` at 127.0.0.<i>, through a private
    /etc/hosts (bind-mounted in the cluster's namespace) and a UTS namespace in which it runs
    under that hostname: slurmctld takes the SlurmctldHost line that names its gethostname().
    `CommunicationParameters=NoCtldInAddrAny` makes each listen on its own address, since
    SlurmctldPort is one port for all. StateSaveLocation is the one <work>/state of every
    controller: shared, as production needs it. `failover_timeout_s` replaces SlurmctldTimeout, so
    that a takeover test waits seconds rather than the bundle's minutes.
Backup slurmdbd (`controllers=N`, N > 1, with accounting, where the input's slurmdbd.conf names DbdBackupHost)
    `DbdHost=orchgen-ctld1`, `DbdBackupHost=orchgen-ctld2` (slurmdbd.conf) and `AccountingStorageHost`/
    `AccountingStorageBackupHost` the same (slurm.conf), in place of the input's hosts: each slurmdbd runs under its
    name (UTS namespace; the backup with its own /run), both on the one database. `CommunicationParameters=
    NoInAddrAny` joins slurmdbd.conf: each then listens on its own name's address, 127.0.0.1 and 127.0.0.2, one
    DbdPort; bound to any address, the backup that took over would answer its own pings to the primary's address
    here and give control back at once ("Primary has come back").
Re-plans (`SlurmCluster.apply_config`, issue 23)
    A re-planned config dir gets exactly this overlay again, with the booted cluster's layout, and
    replaces etc/ (slurmdbd.conf stays as booted). Node ports follow NodeName order, so a node added
    or removed at the tail of the last NodeName line leaves the others' ports as they were; the
    port block keeps SPARE_NODE_PORTS free for added nodes. Nothing else in the bundle changes.
Chart repositories (`orchgen validate` without --crds/--chart-defaults; no bundle file changes)
    The bundle's `kubernetes/helm/releases.yaml` keeps its upstream repositories. The tests set
    `ORCHGEN_CHART_MIRROR` (documented in the README) to a repository on loopback serving
    ../shared/charts: an http:// Helm repository (index.yaml and archives, tests/test_validate_fetch.py
    and tests/test_readme_commands.py) or oci://127.0.0.1:<port>/charts (Debian's docker-registry),
    and `XDG_CACHE_HOME` to a temporary directory, so every run fetches for real into a fresh cache.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import nhc
from .hostlist import expand, split_top

if TYPE_CHECKING:
    from .mariadb import Database

# slurm.conf keys (lower case) whose value only makes sense on the production machines
_DROP = {
    # who and where the daemons are
    "slurmctldhost", "controlmachine", "controladdr", "backupcontroller", "backupaddr",
    "slurmctldaddr", "slurmctldport", "slurmdport", "slurmuser", "slurmduser",
    # authentication and credentials: a private munged of our own replaces them
    "authtype", "authinfo", "authalttypes", "authaltparameters", "credtype",
    "tlstype", "tlsparameters", "certmgrtype", "certmgrparameters",
    # paths: state, spool, pid and log files
    "statesavelocation", "slurmdspooldir", "slurmctldpidfile", "slurmdpidfile",
    "slurmctldlogfile", "slurmdlogfile", "slurmschedlogfile", "plugindir", "tmpfs",
    # log levels: forced to info so WARNING lines always reach the log we read
    "slurmctlddebug", "slurmddebug", "slurmctldsyslogdebug", "slurmdsyslogdebug",
    # mail goes nowhere here
    "mailprog", "maildomain",
    # needs root-only kernel features the sandbox lacks
    "jobcontainertype",
    # merged into our own value below
    "slurmdparameters",
}
# programs that run on real machines: run from the copy when the config dir ships them, else dropped
_CASE = {"prolog": "Prolog", "epilog": "Epilog", "taskprolog": "TaskProlog", "taskepilog": "TaskEpilog",
         "srunprolog": "SrunProlog", "srunepilog": "SrunEpilog", "healthcheckprogram": "HealthCheckProgram"}
_PROGRAMS = {
    "prolog", "epilog", "prologslurmctld", "epilogslurmctld", "taskprolog", "taskepilog", "srunprolog",
    "srunepilog", "resvprolog", "resvepilog", "healthcheckprogram", "resumeprogram", "suspendprogram",
    "rebootprogram", "unkillablestepprogram", "slurmctldprimaryonprog", "slurmctldprimaryoffprog",
}
_DROP_PREFIXES = ("accountingstorage", "jobacctgather", "acctgather", "jobcomp")
# With accounting on (Layout.dbd_port): the accounting keys that name where slurmdbd is, or that
# need hardware or cgroups; every other AccountingStorage*/JobAcctGather* key is kept as written.
_DROP_WITH_DBD = {"accountingstoragetype", "accountingstoragehost", "accountingstorageport",
                  "accountingstoragebackuphost", "accountingstoragepass", "accountingstorageexternalhost",
                  "accountingstorageuser", "accountingstorageloc", "jobacctgathertype"}
_DROP_PREFIXES_WITH_DBD = ("acctgather", "jobcomp")
_CGROUP_KEYS = {"proctracktype", "taskplugin"}
_TRES_WEIGHT_KEYS = {"tresbillingweights", "priorityweighttres"}
_AUTODETECT = {"nvml", "nvidia", "rsmi", "oneapi", "nrt"}


@dataclass
class Layout:
    """Loopback values for one cluster. `work` is the work dir as the daemons see it."""

    work: str
    host: str
    ctld_port: int
    node_port_base: int
    legacy: bool  # Slurm < 23.02: has task/none, no CgroupPlugin=disabled
    dbd_port: int = 0  # slurmdbd's port; 0: no accounting (the overlay drops it)
    controllers: int = 1
    failover_timeout_s: int | None = None  # replaces SlurmctldTimeout
    health_check: str | None = None  # the HealthCheckProgram standing in for the input's (NHC)
    imex_dev_major: int = 4000  # a character major no driver registered (see pick_free_major)
    bf_interval_s: int | None = None  # joins SchedulerParameters (see the module doc)
    dbd_backup: bool = False  # a backup slurmdbd under controller 2's name (see the module doc)

    @property
    def etc(self) -> str:
        return f"{self.work}/etc"

    @property
    def dbd_host(self) -> str:
        """DbdHost and AccountingStorageHost: this host, or with a backup slurmdbd controller 1's name."""
        return self.controller(0)[0] if self.dbd_backup else self.host

    @property
    def accounting(self) -> bool:
        return self.dbd_port != 0

    def controller(self, index: int) -> tuple[str, str]:
        """(hostname, address) of controller `index` (0: the primary). One controller keeps this
        host's name at 127.0.0.1; a pair or more get names of their own (see the module doc)."""
        if self.controllers == 1:
            return self.host, "127.0.0.1"
        return f"orchgen-ctld{index + 1}", f"127.0.0.{index + 1}"


@dataclass
class NodeLine:
    """One NodeName line of slurm.conf: its hostlist expression, the names, and their Gres= value."""

    expr: str
    names: list[str]
    gres: str


@dataclass
class Overlaid:
    """What the overlay found: node names (one slurmd each) and fake device names to create."""

    nodes: list[str] = field(default_factory=list)
    devices: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    dropped_slurmdbd: bool = False  # the input used slurmdbd accounting, which the overlay removed
    cluster_name: str = ""  # slurm.conf's ClusterName (the cluster slurmdbd must know)
    secret_files: list[str] = field(default_factory=list)  # etc/ files holding the database password
    dropped_task_cgroup: bool = False  # the input confined tasks with task/cgroup, which the overlay removed
    controllers: int = 1  # SlurmctldHost lines of the input
    health_check: str | None = None  # the input's HealthCheckProgram (replaced or dropped)


def _key(token: str) -> str:
    return token.split("=", 1)[0].lower()


def _value(token: str) -> str:
    return token.split("=", 1)[1] if "=" in token else ""


def _logical_lines(text: str) -> list[str]:
    """Lines without comments, blank lines or backslash continuations."""
    text = text.replace("\\\n", " ")
    return [s for s in (ln.split("#", 1)[0].strip() for ln in text.splitlines()) if s]


def _dropped(key: str, lay: Layout) -> bool:
    if lay.accounting:
        return key in _DROP or key in _DROP_WITH_DBD or key.startswith(_DROP_PREFIXES_WITH_DBD)
    return key in _DROP or key.startswith(_DROP_PREFIXES)


# ---------------------------------------------------------------- slurm.conf


def count_controllers(text: str) -> int:
    """How many SlurmctldHost lines (at least one) a slurm.conf has."""
    return max(1, sum(_key(ln) == "slurmctldhost" for ln in _logical_lines(text)))


def count_nodes(text: str) -> int:
    """How many nodes the NodeName lines of a slurm.conf define (one port is reserved for each)."""
    count = 0
    for line in _logical_lines(text):
        key, _, value = line.split()[0].partition("=")
        if key.lower() == "nodename" and value.lower() != "default":
            count += len(expand(value))
    return count


def rewrite_slurm_conf(text: str, lay: Layout, etc_files: set[str]) -> tuple[str, Overlaid, list[NodeLine]]:
    """Return (new slurm.conf, what was found, the NodeName lines)."""
    out = Overlaid()
    node_lines: list[NodeLine] = []
    default_gres = ""  # from NodeName=DEFAULT lines
    port = lay.node_port_base
    extra_slurmd_params: list[str] = []
    body: list[str] = []
    lines = _logical_lines(text)
    used_slurmdbd = any(_key(ln) == "accountingstoragetype" and "slurmdbd" in _value(ln.split()[0]) for ln in lines)
    out.dropped_slurmdbd = used_slurmdbd and not lay.accounting
    out.controllers = count_controllers(text)
    switch_params: list[str] = []
    comm_params: list[str] = []
    imex = any(_key(ln) == "switchtype" and _value(ln.split()[0]) == "switch/nvidia_imex" for ln in lines)
    for line in lines:
        if out.dropped_slurmdbd:
            line = _drop_gres_weights(line, out)
            if not line:  # `PriorityWeightTRES=GRES/gpu=N` alone: nothing of the line is left
                continue
        tokens = line.split()
        key = _key(tokens[0])
        if key == "slurmdparameters":
            extra_slurmd_params += [p for p in _value(tokens[0]).split(",") if p and p != "config_overrides"]
        if key == "clustername":
            out.cluster_name = _value(tokens[0]).lower()  # slurmctld lower-cases it too
        if key == "include":
            body.append(_rewrite_include(line, lay, etc_files, out))
            continue
        if key == "taskplugin" and "task/cgroup" in _value(tokens[0]).split(","):
            out.dropped_task_cgroup = True
        if key in _PROGRAMS:
            body += _rewrite_program(key, _value(tokens[0]), lay, etc_files, out)
            continue
        if key == "switchparameters" and imex:
            switch_params += [p for p in _value(tokens[0]).split(",") if p and not p.startswith("imex_dev_major=")]
            continue
        if key == "communicationparameters" and lay.controllers > 1:
            comm_params += [p for p in _value(tokens[0]).split(",") if p and p.lower() != "noctldinaddrany"]
            continue
        if key == "slurmctldtimeout" and lay.failover_timeout_s:
            continue
        if key == "schedulerparameters" and lay.bf_interval_s:
            params = [p for p in _value(tokens[0]).split(",") if p and not p.startswith("bf_interval=")]
            body.append("SchedulerParameters=" + ",".join([*params, f"bf_interval={lay.bf_interval_s}"]))
            continue
        if _dropped(key, lay) or (key in _CGROUP_KEYS):
            continue
        if key == "nodename":
            names_expr = _value(tokens[0])
            node_gres = next((_value(t) for t in tokens if _key(t) == "gres"), None)
            if names_expr.lower() == "default":
                default_gres = node_gres if node_gres is not None else default_gres
                body.append(line)
                continue
            names = expand(names_expr)
            out.nodes += names
            node_lines.append(NodeLine(names_expr, names, node_gres if node_gres is not None else default_gres))
            tokens = [t for t in tokens if _key(t) not in ("nodehostname", "nodeaddr", "port")]
            last = port + len(names) - 1
            tokens += [f"NodeHostname={lay.host}", "NodeAddr=127.0.0.1",
                       f"Port={port}" if last == port else f"Port=[{port}-{last}]"]
            port = last + 1
            line = " ".join(tokens)
        body.append(line)
    header = _header(lay, extra_slurmd_params)
    if imex:
        header.insert(-1, "SwitchParameters=" + ",".join([*switch_params, f"imex_dev_major={lay.imex_dev_major}"]))
    if lay.controllers > 1:
        header.insert(-1, "CommunicationParameters=" + ",".join([*comm_params, "NoCtldInAddrAny"]))
    if lay.failover_timeout_s:
        header.insert(-1, f"SlurmctldTimeout={lay.failover_timeout_s}")
    return "\n".join(header + body) + "\n", out, node_lines


def _rewrite_program(key: str, value: str, lay: Layout, etc_files: set[str], out: Overlaid) -> list[str]:
    """A program line: the shipped copy, the health-check stand-in, or nothing (see the module doc)."""
    name = value.rsplit("/", 1)[-1]
    if key == "healthcheckprogram":
        out.health_check = value
        if lay.health_check:
            out.notes.append(f"slurm.conf: HealthCheckProgram={value} replaced by the stand-in {lay.health_check}")
            return [f"HealthCheckProgram={lay.health_check}"]
    if key != "healthcheckprogram" and name in etc_files:
        return [f"{_CASE.get(key, key)}={lay.etc}/{name}"]
    out.notes.append(f"slurm.conf: {_CASE.get(key, key)}={value} dropped (a program of the real machines)")
    return []


def _drop_gres_weights(line: str, out: Overlaid) -> str:
    """Without slurmdbd, GRES weights cannot be parsed: drop them from the TRES weight keys.

    A GRES TRES (gres/gpu) needs AccountingStorageTRES, which needs slurmdbd ("slurmdbd is
    required to run with TRES gres/gpu"); without it, `TRESBillingWeights=...,GRES/gpu=1.0`
    or `PriorityWeightTRES=GRES/gpu=...` is fatal ("failed to parse tres weights str").
    """
    tokens = line.split()
    kept = []
    for token in tokens:
        if _key(token) in _TRES_WEIGHT_KEYS:
            items = _value(token).strip('"').split(",")
            weights = [i for i in items if not i.lower().startswith("gres/")]
            if weights != items:
                out.notes.append(f"slurm.conf: no slurmdbd, so GRES weights dropped from {token}")
            if not weights:
                continue
            quote = '"' if _value(token).startswith('"') else ""
            token = f'{token.split("=", 1)[0]}={quote}{",".join(weights)}{quote}'
        kept.append(token)
    return " ".join(kept)


def _header(lay: Layout, extra_slurmd_params: list[str]) -> list[str]:
    w = lay.work
    lines = [
        "# --- loopback overlay (tests/slurmharness); the generated config follows ---",
        *(f"SlurmctldHost={name}({addr})" for name, addr in map(lay.controller, range(lay.controllers))),
        f"SlurmctldPort={lay.ctld_port}",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={w}/munge/munge.sock",
        f"StateSaveLocation={w}/state", f"SlurmdSpoolDir={w}/spool/%n",
        f"SlurmctldPidFile={w}/run/slurmctld.pid", f"SlurmdPidFile={w}/run/slurmd.%n.pid",
        f"SlurmctldLogFile={w}/log/slurmctld.log", f"SlurmdLogFile={w}/log/slurmd.%n.log",
        f"TmpFS={w}/tmp/%n",
        "SlurmctldDebug=info", "SlurmdDebug=info", "MailProg=/bin/true",
        *_accounting_header(lay), "JobCompType=jobcomp/none",
        "SlurmdParameters=" + ",".join(["config_overrides", *extra_slurmd_params]),
        "ProctrackType=proctrack/linuxproc",
    ]
    if lay.legacy:
        lines.append("TaskPlugin=task/none")  # 23.02+ has no task/none: TaskPlugin stays unset
    return lines + ["# --- end of overlay ---"]


def _accounting_header(lay: Layout) -> list[str]:
    if not lay.accounting:
        return ["AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none"]
    # jobacct_gather/linux reads /proc; the cgroup one cannot work without cgroup writes here
    # AccountingStoragePass names the munge socket for connections to slurmdbd: AuthInfo's socket is
    # not used for those (22.05's sacctmgr and slurmctld then try /run/munge/munge.socket.2)
    backup = [f"AccountingStorageBackupHost={lay.controller(1)[0]}"] if lay.dbd_backup else []
    return ["AccountingStorageType=accounting_storage/slurmdbd", f"AccountingStorageHost={lay.dbd_host}", *backup,
            f"AccountingStoragePort={lay.dbd_port}", f"AccountingStoragePass={lay.work}/munge/munge.sock",
            "JobAcctGatherType=jobacct_gather/linux"]


def _rewrite_include(line: str, lay: Layout, etc_files: set[str], out: Overlaid) -> str:
    """`Include /etc/slurm/nodes.conf` -> the copied file in our etc dir, if it was shipped."""
    path = line.split(None, 1)[1].strip() if " " in line else ""
    name = os.path.basename(path)
    if name in etc_files:
        return f"Include {lay.etc}/{name}"
    out.notes.append(f"slurm.conf: {line!r} names a file not in the config dir; left as is")
    return line


# ---------------------------------------------------------------- gres.conf


def _gpu_spec(gres_value: str) -> tuple[str | None, int] | None:
    """("h100", 8) from "gpu:h100:8(S:0-1),nic:2"; (None, 4) from "gpu:4"; None without GPUs."""
    for item in split_top(gres_value):
        parts = re.sub(r"\(.*\)$", "", item).split(":")
        if parts[0] != "gpu" or len(parts) < 2 or not parts[-1].isdigit():
            continue
        return (parts[1] if len(parts) == 3 else None), int(parts[-1])
    return None


def _fake_file(value: str, lay: Layout, out: Overlaid) -> str:
    """Point every /dev path of a File= value at `<work>/dev/...`, recording the device names."""
    parts = []
    for path in split_top(value):
        if path.startswith("/dev/"):
            path = f"{lay.work}/dev/" + path[len("/dev/"):].replace("/", "_")
            out.devices.update(os.path.basename(p) for p in expand(path))
        parts.append(path)
    return ",".join(parts)


def _scope(keys: dict[str, str], all_nodes: list[str]) -> list[str]:
    """The nodes a gres.conf line applies to: its NodeName=, or every node."""
    return expand(keys["nodename"]) if "nodename" in keys else all_nodes


def rewrite_gres_conf(text: str, lay: Layout, node_lines: list[NodeLine], out: Overlaid) -> str:
    all_nodes = [n for line in node_lines for n in line.names]
    parsed = [(line.split(), {_key(t): _value(t) for t in line.split()}) for line in _logical_lines(text)]
    autodetect: set[str] = set()  # nodes whose GPUs a detection library would have found
    for _, keys in parsed:
        if keys.get("autodetect", "").lower() in _AUTODETECT:
            autodetect.update(_scope(keys, all_nodes))
    explicit: set[str] = set()  # nodes with Name=gpu lines of their own
    lines = []
    for tokens, keys in parsed:
        scope = _scope(keys, all_nodes)
        new = [_rewrite_gres_token(t, lay, out) for t in tokens]
        if keys.get("name") == "gpu":
            explicit.update(scope)
            count = keys.get("count", "")
            # `Name=gpu Type=h100 Count=8` beside AutoDetect: detection supplies the files
            if "file" not in keys and "multiplefiles" not in keys and count.isdigit() and set(scope) <= autodetect:
                new.append("File=" + _fake_file(_nvidia_files(int(count)), lay, out))
        lines.append(" ".join(new))
    lines += _synthesise_gpu_lines(autodetect - explicit, lay, node_lines, out)
    return "\n".join(lines) + "\n"


def _rewrite_gres_token(token: str, lay: Layout, out: Overlaid) -> str:
    key = _key(token)
    if key == "autodetect" and _value(token).lower() in _AUTODETECT:
        return "AutoDetect=off"
    if key in ("file", "multiplefiles"):
        return f"{token.split('=', 1)[0]}={_fake_file(_value(token), lay, out)}"
    return token


def _nvidia_files(count: int) -> str:
    return f"/dev/nvidia[0-{count - 1}]" if count > 1 else "/dev/nvidia0"


def _synthesise_gpu_lines(nodes: set[str], lay: Layout, node_lines: list[NodeLine], out: Overlaid) -> list[str]:
    """gres.conf lines for the GPUs that autodetection would have found on `nodes`.

    One line per slurm.conf NodeName line, keeping its hostlist expression when the whole line is
    autodetected (the usual case), else naming the nodes one by one.
    """
    lines = []
    for node_line in node_lines:
        spec = _gpu_spec(node_line.gres)
        names = [n for n in node_line.names if n in nodes]
        if not spec or not names:
            continue
        gpu_type, count = spec
        files = _fake_file(_nvidia_files(count), lay, out)
        expr = node_line.expr if names == node_line.names else ",".join(names)
        type_part = f" Type={gpu_type}" if gpu_type else ""
        lines.append(f"NodeName={expr} Name=gpu{type_part} File={files}")
        out.notes.append(f"gres.conf: AutoDetect replaced by: {lines[-1]}")
    return lines


# ---------------------------------------------------------------- cgroup.conf


def rewrite_cgroup_conf(text: str | None, lay: Layout) -> str | None:
    if lay.legacy:
        return text
    kept = [ln for ln in (text or "").splitlines() if _key(ln.split("#", 1)[0].strip()) != "cgroupplugin"]
    return "\n".join(["CgroupPlugin=disabled", *kept]) + "\n"


# ---------------------------------------------------------------- slurmdbd.conf

# slurmdbd.conf keys (lower case) replaced by loopback values: where slurmdbd and its database
# are, who it runs as, how it authenticates, its files. Every other key (Purge*, Archive*,
# TrackWCKey, PrivateData, CommitDelay, DebugFlags ...) is kept as written.
_DBD_DROP = {
    "dbdhost", "dbdaddr", "dbdport", "dbdbackuphost", "dbdbackupaddr", "slurmuser",
    "authtype", "authinfo", "authalttypes", "authaltparameters", "tlstype", "tlsparameters",
    "storagetype", "storagehost", "storagebackuphost", "storageport", "storageuser", "storagepass",
    "storageloc", "storageparameters",  # StorageParameters names the TLS files of the real server
    "pidfile", "logfile", "debuglevel", "debuglevelsyslog", "plugindir",
    "archivedir", "archivescript",  # a path on the real machine, a program to run there
}


@dataclass
class SecretFile:
    """A file of the operator's that the input's slurmdbd.conf names but does not ship (it holds the
    database password): written by the overlay into etc/ with the loopback password."""

    name: str
    text: str
    mode: int


def rewrite_slurmdbd_conf(text: str | None, lay: Layout, db: "Database",
                          etc_files: frozenset[str] = frozenset()) -> tuple[str, list[SecretFile]]:
    """slurmdbd.conf for loopback: the input's (if the config dir has one) or a minimal one, and the
    password files it names that the operator would have written."""
    w = lay.work
    body: list[str] = []
    secrets: list[SecretFile] = []
    for line in _logical_lines(text or ""):
        key = _key(line.split()[0])
        if key == "include":
            name = os.path.basename(line.split(None, 1)[1].strip()) if " " in line else ""
            if name not in etc_files:  # the operator's `StoragePass=` file: the loopback password goes there
                secrets.append(SecretFile(name, f"StoragePass={db.password}\n", 0o600))
            body.append(f"Include {lay.etc}/{name}")
        elif key == "storagepassscript":  # Slurm 25.11+: a program printing TOKEN=<password>
            name = os.path.basename(_value(line.split()[0]))
            secrets.append(SecretFile(name, f"#!/bin/sh\necho TOKEN={db.password}\n", 0o700))
            body.append(f"StoragePassScript={lay.etc}/{name}")
        elif key in ("archivedir",):
            body.append(f"ArchiveDir={w}/archive")
        elif key not in _DBD_DROP:
            body.append(line)
    header = [
        "# --- loopback overlay (tests/slurmharness); the input's slurmdbd.conf follows, if any ---",
        f"DbdHost={lay.dbd_host}", "DbdAddr=127.0.0.1", f"DbdPort={lay.dbd_port}", "SlurmUser=root",
        *([f"DbdBackupHost={lay.controller(1)[0]}", "CommunicationParameters=NoInAddrAny"] if lay.dbd_backup else []),
        "AuthType=auth/munge", f"AuthInfo=socket={w}/munge/munge.sock",
        "StorageType=accounting_storage/mysql", f"StorageHost={db.host}", f"StoragePort={db.port}",
        f"StorageUser={db.user}", f"StorageLoc={db.name}",
        f"PidFile={w}/run/slurmdbd.pid", f"LogFile={w}/log/slurmdbd.log", "DebugLevel=info",
    ]
    if not secrets:  # the password in the file itself only where the input has no place for it
        header.insert(header.index(f"StorageLoc={db.name}"), f"StoragePass={db.password}")
    return "\n".join(header + ["# --- end of overlay ---"] + body) + "\n", secrets


# ---------------------------------------------------------------- the whole dir


def apply(src: Path, host_work: Path, lay: Layout, db: "Database | None" = None) -> Overlaid:
    """Copy `src` to `<host_work>/etc`, rewrite it for `lay`, create the fake devices.

    With accounting (`lay.dbd_port` and the database `db`), also write etc/slurmdbd.conf.
    """
    if not (src / "slurm.conf").is_file():
        raise FileNotFoundError(f"{src}/slurm.conf not found")
    etc = host_work / "etc"
    shutil.copytree(src, etc, symlinks=True)
    etc_files = {p.name for p in etc.iterdir()}
    conf, out, node_lines = rewrite_slurm_conf((etc / "slurm.conf").read_text(), lay, etc_files)
    (etc / "slurm.conf").write_text(conf)
    if (etc / "gres.conf").is_file():
        (etc / "gres.conf").write_text(rewrite_gres_conf((etc / "gres.conf").read_text(), lay, node_lines, out))
    cg_path = etc / "cgroup.conf"
    cgroup = rewrite_cgroup_conf(cg_path.read_text() if cg_path.is_file() else None, lay)
    if cgroup is not None:
        cg_path.write_text(cgroup)
    if lay.accounting:
        assert db is not None, "accounting needs a database"
        dbd_path = etc / "slurmdbd.conf"
        dbd, secrets = rewrite_slurmdbd_conf(dbd_path.read_text() if dbd_path.is_file() else None, lay, db,
                                             frozenset(etc_files))
        # it (or the file it names) holds the database password; slurmdbd also refuses a file others can read
        for path, content, mode in [(dbd_path, dbd, 0o600), *((etc / f.name, f.text, f.mode) for f in secrets)]:
            path.unlink(missing_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(fd, "w") as f:
                f.write(content)
        out.secret_files = [f.name for f in secrets]
        (host_work / "archive").mkdir(exist_ok=True)
    (host_work / "dev").mkdir(exist_ok=True)
    for name in sorted(out.devices):
        os.symlink("/dev/null", host_work / "dev" / name)
    if lay.health_check and out.health_check:
        nhc.write_standin(etc, lay.work, out.nodes)
    (host_work / "bin").mkdir(exist_ok=True)  # first on the stand-in's PATH: tests put fakes here
    return out


def hosts_file(text: str, controllers: int) -> str:
    """/etc/hosts plus a line per controller name (bind-mounted over /etc/hosts in the namespace)."""
    lay = Layout(work="", host="", ctld_port=0, node_port_base=0, legacy=False, controllers=controllers)
    extra = "".join(f"{addr} {name}\n" for name, addr in map(lay.controller, range(controllers)))
    return text.rstrip("\n") + "\n# loopback controllers (tests/slurmharness/overlay.py)\n" + extra


def pick_free_major(first: int = 4000) -> int:
    """A character-device major that no driver registered here (/proc/devices), for imex_dev_major."""
    try:
        used = {int(ln.split()[0]) for ln in Path("/proc/devices").read_text().splitlines()
                if ln.strip() and ln.split()[0].isdigit()}
    except OSError:
        used = set()
    major = first
    while major in used:
        major += 1
    return major


# ---------------------------------------------------------------------------------------------------------
# The bring-up harness (tests/bringupharness, tests/test_bringup_real.py): what it changes in a bundle copy
# before running bringup/up.sh against bare Debian roots on this machine. The roots share this machine's
# network namespace (apt reaches the mirror without NAT) and have no init system and no cgroup access.
# Everything else (packages, munge key, every file of slurm/, MariaDB, slurmdbd, accounts.sh, daemon order,
# NHC) runs as the bundle says.
BRINGUP_CHANGES = (
    ("slurm.conf NodeName lines: Port=[a-b]",
     "every slurmd listens on the one network namespace the hosts share: each node needs a port of its own"),
    ("slurm.conf SlurmctldPort, AccountingStoragePort; slurmdbd.conf DbdPort: free ports",
     "other tests on this machine run Slurm daemons too; the default ports may be taken"),
    ("slurm.conf SlurmdParameters=config_overrides",
     "the hosts are this machine: slurmd must report the planned CPUs, memory and GPUs, not its own"),
    ("slurm.conf ProctrackType=proctrack/linuxproc, TaskPlugin task/none (22.05) or unset, "
     "JobAcctGatherType=jobacct_gather/linux; cgroup.conf CgroupPlugin=disabled (23.02+)",
     "cgroup writes fail in this sandbox (tests/slurmharness notes)"),
    ("slurm.conf CommunicationParameters=NoCtldInAddrAny, with two or more SlurmctldHost lines",
     "the hosts share one network namespace and SlurmctldPort is one port for every controller: each slurmctld "
     "listens on its own host's address (slurm.conf(5) NoCtldInAddrAny), not on every address, which the first "
     "controller's would hold for both. What this costs here: slurmdbd calls slurmctld back at the address it "
     "registered from, 127.0.0.1 in the shared namespace, so slurmdbd's pushed updates are refused (its log: "
     "'update cluster: Connection refused'); what the bring-up test asserts of accounting reads the database"),
    ("slurmdbd.conf CommunicationParameters=NoInAddrAny, with DbdBackupHost",
     "likewise for the two slurmdbd (one DbdPort): bound to every address, the backup that took over would also "
     "answer at the primary's address, and slurmctld could not tell the primary come back (slurmdbd.conf(5))"),
    ("mariadb-slurm.cnf: innodb_buffer_pool_size=256M, innodb_log_file_size=64M; skip-networking where slurmdbd's "
     "StorageHost is localhost",
     "the plan's sizes are for a production database host; slurmdbd reaches a MariaDB of its own host over its "
     "socket, and port 3306 of the shared namespace may be taken (a site's database server named in "
     "options.slurm.accounting.storage_host serves the network: the test sets it up as the README says)"),
    ("nhc.conf: the check_hw_ib line removed", "no RDMA port on this machine"),
    ("vars.yaml orchgen_service_manager: none", "the roots run no init system: daemons start from their pidfiles"),
    ("vars.yaml orchgen_node_exporter_args: --web.listen-address=<the host's own 127.0.0.N>:9100",
     "the hosts share one network namespace: each node exporter needs an address of its own (Debian's default, :9100 "
     "on every address, would be the first host's alone)"),
    ("vars.yaml orchgen_nhc_source: a 1.4.3 checkout of github.com/mej/nhc (ORCHGEN_NHC_SOURCE), else a tree "
     "laid out as NHC's whose nhc is the NHC stand-in of nhc.py (tests/bringupharness/run.py standin_nhc_tree)",
     "CI reaches the Debian mirror, not GitHub, and no registry packages NHC"),
)
# Not changed (issue 33): the hosts start what their packages start at install, as a fresh Debian does
# (tests/bringupharness/hosts.py: runlevel 2 and a policy-rc.d that allows what is enabled), and the munge key
# stays at vars.yaml's own ~/.config/orchgen path, expanded by the playbook (the harness runs Ansible with HOME
# in the test's work dir, as an operator's own home).

# What the harness changes on the hosts themselves (tests/bringupharness/hosts.py applies each, but the database
# grant, which test_bringup_real's _site_database makes as the site's), never in the bundle: what a booted Debian
# host on its own network has and these roots, started without an init system in one shared namespace, lack.
HOST_CHANGES = (
    ("/sbin/runlevel answering `N 2`, /usr/sbin/policy-rc.d allowing what rc2.d enables",
     "no init system runs in the roots, so invoke-rc.d would start nothing at package install; with these it "
     "starts what a booted host's init starts (munged, MariaDB), as on a fresh Debian"),
    ("/etc/mysql/mariadb.conf.d/99-orchgen-harness.cnf: bind-address = the host's own 127.0.0.N",
     "the hosts share this machine's network namespace, and MariaDB starts at package install with Debian's "
     "50-server.cnf, bind-address 127.0.0.1, port 3306: the database hosts of two bring-ups running at once "
     "(the Debian 12 and 13 suites, the Pulumi test) would take the same port, and the second MariaDB would "
     "never start (stop 42's CI failure: db1's package install failed; a later run hung in its init script)"),
    ("/usr/sbin/policy-rc.d: prometheus-node-exporter not started at package install",
     "the hosts share this machine's network namespace; Debian starts the node exporter at install on :9100 of every "
     "address, which the first host's would hold for all: the bring-up starts each on its own address "
     "(BRINGUP_CHANGES orchgen_node_exporter_args)"),
    ("the site's database server (test_bringup_real: db1, options.slurm.accounting.storage_host) grants the slurm "
     "user at localhost too, beside the README's 'slurm'@'ctl1' and 'slurm'@'ctl2'",
     "the hosts share one network namespace, so a connection from ctl1 or ctl2 to db1's address leaves from "
     "127.0.0.1, which MariaDB names localhost; on a network each host connects from its own address"),
    ("/etc/default/mariadb: MYSQLD_STARTUP_TIMEOUT=300",
     "without systemd, MariaDB starts at install from /etc/init.d/mariadb, which gives up after 30 s by default "
     "and fails the package's postinst; a booted host starts it from mariadb.service, whose TimeoutStartSec is "
     "900 (Debian's mariadb-server 10.11 and 11.8). The first start, creating the system tables, is slow on a "
     "loaded machine; 300 s keeps a MariaDB that never starts a failure well inside the test's 900 s"),
)


def _communication(lines: list[str], extra: list[str], flag: str) -> None:
    """`flag` joins the file's CommunicationParameters (its line in `lines` kept in place), or a line of its own
    goes to `extra`."""
    for i, ln in enumerate(lines):
        if ln.split("=", 1)[0].strip().lower() == "communicationparameters":
            lines[i] = f"{ln.rstrip()},{flag}"
            return
    extra.append(f"CommunicationParameters={flag}")


def bringup_overlay(bundle: Path, *, legacy: bool, node_port_base: int, ctld_port: int, dbd_port: int,
                    nhc_source: Path | None) -> None:
    """Apply BRINGUP_CHANGES to the bundle copy at `bundle`, in place."""
    slurm = bundle / "slurm"
    lines = []
    for line in (slurm / "slurm.conf").read_text().splitlines():
        key = line.split("=", 1)[0].strip().lower()
        if key == "nodename" and "Port=" not in line:
            names = expand(line.split()[0].split("=", 1)[1])
            # a node keeps its port when a re-plan adds others: the port is derived from its name's index
            ports = [node_port_base + int(re.sub(r"\D", "", n) or 0) for n in names]
            line += f" Port=[{ports[0]}-{ports[-1]}]" if len(ports) > 1 else f" Port={ports[0]}"
        elif key in {"proctracktype", "taskplugin", "jobacctgathertype", "slurmdparameters", "slurmctldport",
                     "accountingstorageport"}:
            continue
        lines.append(line)
    head = ["# tests/slurmharness/overlay.py BRINGUP_CHANGES", f"SlurmctldPort={ctld_port}",
            "SlurmdParameters=config_overrides", "ProctrackType=proctrack/linuxproc",
            "JobAcctGatherType=jobacct_gather/linux"]
    if legacy:
        head.append("TaskPlugin=task/none")
    if sum(1 for ln in lines if ln.split("=", 1)[0].strip().lower() == "slurmctldhost") > 1:
        _communication(lines, head, "NoCtldInAddrAny")
    storage_host = "localhost"
    if (slurm / "slurmdbd.conf").exists():
        head.append(f"AccountingStoragePort={dbd_port}")
        dbd = [ln for ln in (slurm / "slurmdbd.conf").read_text().splitlines() if not ln.startswith("DbdPort=")]
        extra = [f"DbdPort={dbd_port}"]
        if any(ln.startswith("DbdBackupHost=") for ln in dbd):
            _communication(dbd, extra, "NoInAddrAny")
        storage_host = next((ln.split("=", 1)[1].strip() for ln in dbd if ln.startswith("StorageHost=")), "localhost")
        (slurm / "slurmdbd.conf").write_text("\n".join(dbd + extra) + "\n")
    (slurm / "slurm.conf").write_text("\n".join(head + lines) + "\n")
    if not legacy:
        cg = [ln for ln in (slurm / "cgroup.conf").read_text().splitlines() if not ln.startswith("CgroupPlugin=")]
        (slurm / "cgroup.conf").write_text("\n".join(cg + ["CgroupPlugin=disabled"]) + "\n")
    cnf = slurm / "mariadb-slurm.cnf"
    if cnf.exists():
        text = re.sub(r"(?m)^innodb_buffer_pool_size=.*$", "innodb_buffer_pool_size=256M", cnf.read_text())
        text = re.sub(r"(?m)^innodb_log_file_size=.*$", "innodb_log_file_size=64M", text)
        cnf.write_text(text.replace("[mysqld]\n", "[mysqld]\nskip-networking\n", 1) if storage_host == "localhost"
                       else text)
    nhc_conf = slurm / "nhc.conf"
    if nhc_conf.exists():
        nhc_conf.write_text("".join(ln for ln in nhc_conf.read_text().splitlines(True) if "check_hw_ib" not in ln))
    vars_file = bundle / "bringup" / "vars.yaml"
    text = vars_file.read_text()
    text = re.sub(r"(?m)^orchgen_service_manager: .*$", "orchgen_service_manager: none", text)
    text = re.sub(r"(?m)^orchgen_node_exporter_args: .*$",
                  "orchgen_node_exporter_args: '--web.listen-address={{ ansible_host }}:9100'", text)
    if nhc_source is not None:
        text = re.sub(r"(?m)^orchgen_nhc_source: .*$", f"orchgen_nhc_source: {nhc_source}", text)
    vars_file.write_text(text)
