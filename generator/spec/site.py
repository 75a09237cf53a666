"""workload.yaml's `site:` section (issue 22): what an adopted Slurm site configures that orchgen's
model does not cover, carried verbatim, each entry with the reason it is not modelled.

`orchgen import slurm` writes it; `orchgen plan` emits each entry in place in the file it came from
(generator/render/slurm/site.py): a key orchgen also writes gets the site's value on orchgen's line,
any other key is added; a whole record (a PartitionName, NodeSet or gres.conf line) is added, and the
site's PartitionName lines replace orchgen's per-pool partitions. Every emitted entry carries its
reason as a comment. Nothing here is interpreted: Slurm reads it.

Values land in Slurm's configuration files, whose syntax has no quoting for a `#` (a comment) or a
line break (a new record): those are refused here, naming the field.
"""
# No `from __future__ import annotations` in this module: pydantic would evaluate every field's annotation
# from its string (typing.ForwardRef compiles each one: 235 of the 276 compile() calls of importing
# models.py and site.py went; ~1% of a plan's instructions, issue 41).

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


def empty_list() -> list:
    """A field's empty list (models.py's too). A Python function, not the builtin `list`: pydantic reads each
    default factory's signature, and for a builtin inspect parses its text signature with tokenize, ~2 ms of
    every plan's start (issue 41)."""
    return []


def empty_dict() -> dict:
    """A field's empty mapping; a Python function for the reason `empty_list` gives."""
    return {}


# parse_config.c's key pattern ([[:alnum:]_.]+)
_KEY = re.compile(r"^[A-Za-z0-9_.]{1,64}$")
_POOL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# A file shipped beside slurm.conf (job_submit.lua, a prolog script): a plain name, no directory
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_SITE_FILE = 1 << 20


def _config_text(value: str) -> str:
    if "\n" in value or "\r" in value or "\v" in value or "\f" in value:
        raise ValueError("holds a line break: one entry is one line of the configuration file")
    if "#" in value:
        raise ValueError("holds '#', which Slurm reads as the start of a comment")
    if "\\" in value:
        raise ValueError("holds '\\', which Slurm reads as an escape or a continuation")
    if len(value) > 4096:
        raise ValueError("is longer than 4096 characters")
    return value


def _config_value(value: str) -> str:
    """One Key=Value's value as parse_config.c's keyvalue_pattern reads it back whole: a run of
    non-blanks, or `"..."` holding blanks (render/slurm/carried.py quotes such a value). A quote in it
    has no escape in that grammar, and a tab or another blank than a space would end the value."""
    _config_text(value)
    if '"' in value:
        raise ValueError("holds '\"', which slurm.conf cannot quote (Slurm would read a second key or a parse error)")
    if any(ch.isspace() and ch != " " for ch in value):
        raise ValueError("holds a tab or another blank than a space; slurm.conf reads a value only up to it")
    if value != value.strip(" "):
        raise ValueError("starts or ends with a blank, which Slurm drops")
    return value


def slurm_value(value: str) -> str:
    """`value` as written after `Key=`: quoted where it holds a blank (the grammar _config_value holds)."""
    return f'"{value}"' if " " in value or not value else value


# Keys whose value is a credential (slurm.conf(5): AccountingStoragePass, JobCompPass): never written into a
# committed file.
CREDENTIAL_KEYS = frozenset({"accountingstoragepass", "jobcomppass"})
# AuthInfo's options (slurm.conf(5) AuthInfo, auth/munge): `cred_expire=` (a job step credential's lifetime,
# seconds), `socket=` (the MUNGE daemon's socket path), `ttl=` (a credential's lifetime) and, from 23.02,
# `use_client_ids`: settings, not secrets, so a site's AuthInfo is kept. Any other option (auth/jwt's
# `jwt_key=`, a key file; what a later release adds) is refused: orchgen cannot tell it holds no secret.
AUTHINFO_OPTIONS = frozenset({"cred_expire", "socket", "ttl", "use_client_ids"})


def authinfo_unknown(value: str) -> list[str]:
    """The options of an AuthInfo value that are not AUTHINFO_OPTIONS (empty: the value may be kept)."""
    return [item.partition("=")[0] for item in value.split(",") if item.partition("=")[0].strip().lower()
            not in AUTHINFO_OPTIONS]


def _key(value: str) -> str:
    if not _KEY.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a Slurm configuration key (letters, digits, '_' and '.')")
    if value.lower() in CREDENTIAL_KEYS or value.lower().endswith(("pass", "password")):
        raise ValueError(f"{value} holds a credential, which orchgen never writes into a committed file: keep "
                         "it in the site's slurm.conf as it is, or in a Kubernetes Secret or Pulumi secret")
    return value


# Every file orchgen writes under slurm/ (render/slurm/model.py SlurmModel.files, ops.py OpsModel.files;
# a RayJob's ray-NAME.sbatch): a site's file of the same name would replace orchgen's, e.g. a
# task-prolog.sh that every task of every job runs. render/slurm/carried.py refuses a clash again.
ORCHGEN_FILES = frozenset({"slurm.conf", "gres.conf", "cgroup.conf", "topology.conf", "topology.yaml",
                           "slurmdbd.conf", "mariadb-slurm.cnf", "accounts.sh", "nhc.conf", "gpu-health.sh",
                           "plugstack.conf", "plugstack.conf.d", "enroot.conf", "pyxis.conf", "nccl.env",
                           "task-prolog.sh", "prolog.d", "epilog.d"})


def _file_name(value: str) -> str:
    if not _FILE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a file name orchgen may ship beside slurm.conf (letters, "
                         "digits, '._-', no directory)")
    if value in ORCHGEN_FILES or (value.startswith("ray-") and value.endswith(".sbatch")):
        raise ValueError(f"{value} is a file orchgen writes itself; give the site's file another name (and point "
                         "the site's key at it)")
    return value


def _pool(value: str) -> str:
    if len(value) > 63 or not _POOL.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a pool name")
    return value


def _file_text(value: str) -> str:
    if len(value.encode()) > MAX_SITE_FILE:
        raise ValueError(f"is larger than {MAX_SITE_FILE // 1024} KiB")
    return value


ConfText = Annotated[str, AfterValidator(_config_text)]
ConfValue = Annotated[str, AfterValidator(_config_value)]
Key = Annotated[str, AfterValidator(_key)]


# What a regenerated site differs in, on purpose: slurm.conf keys orchgen writes where the site set
# nothing (Slurm's default applied there). Each is a choice the site can turn off in workload.yaml.
# The real-Slurm test allows exactly these differences in `scontrol show config`, and no other.
ORCHGEN_BETTER: dict[str, str] = {
    "HealthCheckProgram": "LBNL NHC checks each node's GPUs and fabric and drains a failing node "
                          "(options.slurm.health_check: false turns it off)",
    "HealthCheckInterval": "NHC every 300 s (options.slurm.health_check_interval)",
    "HealthCheckNodeState": "ANY,CYCLE: allocated nodes are checked too, in turns",
    "KillOnBadExit": "one crashed rank ends the step instead of leaving the others in NCCL until the time "
                     "limit (options.slurm.kill_on_bad_exit)",
    "UnkillableStepTimeout": "GPU teardown outlasts Slurm's 60 s, which drains healthy nodes "
                             "(options.slurm.unkillable_step_timeout)",
    "PrologFlags": "Contain: pam_slurm_adopt puts ssh sessions into the job's cgroup (options.slurm.containment)",
    "TaskProlog": "NCCL settings for the fabric in every task (options.slurm.nccl)",
    "Prolog": "prolog.d/*: DCGM records each job's GPU statistics where it is installed (options.slurm.job_hygiene)",
    "Epilog": "epilog.d/*: the job user's /dev/shm files, enroot containers and leftover GPU processes go after each "
              "job (options.slurm.job_hygiene)",
    "PlugStackConfig": "pyxis + enroot containers on GPU nodes (options.slurm.containers: none)",
    "MaxJobCount": "100000 instead of Slurm's 10000: AI sweeps queue many jobs (options.slurm.max_job_count)",
    "MaxArraySize": "10001 instead of Slurm's 1001 (options.slurm.max_array_size)",
    "RebootProgram": "`scontrol reboot` rolls out GPU driver updates (options.slurm.reboot_program: null)",
    "ResumeTimeout": "a GPU node's reboot outlasts Slurm's 60 s, which marks it DOWN (options.slurm.resume_timeout)",
    "PropagateResourceLimitsExcept": "MEMLOCK: the login shell's memlock limit never reaches a job (RDMA "
                                     "registration; Slurm FAQ) (options.slurm.propagate_resource_limits_except)",
    "PropagateResourceLimits": "with PropagateResourceLimitsExcept (options.slurm.propagate_resource_limits)",
    "SchedulerParameters": "backfill sized to the partitions' time limits (bf_window, bf_resolution, "
                           "bf_continue, bf_max_job_test, bf_max_job_user) and max_switch_wait for --switches "
                           "(options.slurm.scheduler_parameters replaces any item)",
    "MpiDefault": "pmix from Slurm 23.11: srun wires up MPI ranks without --mpi (options.slurm.mpi: none)",
    "EnforcePartLimits": "ALL: a job beyond its partition's limits is refused at submission instead of pending forever",
    "ReturnToService": "2: a node DOWN for being unreachable rejoins when its slurmd registers again",
    "TopologyPlugin": "topology/tree from fleet.fabric, so `--switches` and leaf-aware placement work (with no "
                      "topology given, one leaf per pool: placement is unchanged)",
    "TopologyParam": "with the topology",
    "JobAcctGatherType": "cgroup accounting of each job's usage",
    "SwitchType": "switch/nvidia_imex where NVLink domains span nodes",
    "SwitchParameters": "with switch/nvidia_imex",
    "MetricsType": "metrics/openmetrics: slurmctld serves its own metrics on its port for the bundle's Prometheus "
                   "scrape jobs and alerts (Slurm 25.11+, Metrics Guide)",
}

# The same for node lines: what orchgen adds to a node where the site set nothing (`scontrol show node`
# shows Features as ActiveFeatures and AvailableFeatures). The site's own features replace orchgen's.
ORCHGEN_BETTER_NODES: dict[str, str] = {
    "Features": "ActiveFeatures AvailableFeatures: the pool's name and GPU type as node features, so "
                "`--constraint=<pool>` works; only where the site's node line gives no Features",
}


# The same for cgroup.conf: keys orchgen writes where the site's cgroup.conf (or its absence) relies on Slurm's
# default ("no" for each Constrain* key, cgroup.conf(5)). The import prints each as an `added` line.
ORCHGEN_BETTER_CGROUP: dict[str, str] = {
    "ConstrainCores": "yes: a job's tasks stay on the cores Slurm gave it, so two jobs on a node do not share "
                      "cores (cgroup.conf(5) ConstrainCores)",
    "ConstrainDevices": "yes: a job sees only the GPUs Slurm gave it, whatever CUDA_VISIBLE_DEVICES says "
                        "(cgroup.conf(5) ConstrainDevices)",
    "ConstrainRAMSpace": "yes: a job is held to the memory it asked for, so one job cannot push its neighbours "
                         "into the OOM killer (cgroup.conf(5) ConstrainRAMSpace)",
}

# slurm.conf keys orchgen writes out where the site relied on Slurm's default, that are not improvements but
# orchgen's layout or Slurm's own default written down. The import prints each as an `added` line with this
# reason; the real-Slurm test does not allow them as differences (where one differs from Slurm's default,
# the loopback overlay sets it for both boots alike: host paths, users, auth).
ORCHGEN_WRITES: dict[str, str] = {
    "AuthType": "auth/munge, Slurm's default, written out",
    "CredType": "cred/munge, Slurm's default, written out",
    "SchedulerType": "sched/backfill, Slurm's default, written out",
    "SlurmctldTimeout": "120 s, Slurm's default, written out (more controllers: options.slurm.slurmctld_timeout)",
    "SlurmdSpoolDir": "/var/spool/slurmd, Slurm's default, written out",
    "SlurmctldPidFile": "/run/slurmctld.pid: Slurm's default /var/run/slurmctld.pid is the same file where /var/run "
                        "links to /run (Debian, Ubuntu, RHEL)",
    "SlurmdPidFile": "/run/slurmd.pid: the same file as Slurm's default /var/run/slurmd.pid where /var/run links to /run",
    "SlurmctldLogFile": "a log file under /var/log/slurm instead of Slurm's default, syslog",
    "SlurmdLogFile": "a log file under /var/log/slurm instead of Slurm's default, syslog",
    "StateSaveLocation": "/var/spool/slurmctld: a site that gives none keeps its state in Slurm's default place; "
                         "copy it, or set options.slurm.state_save_location to it, before the regenerated "
                         "slurmctld starts (it starts with no jobs otherwise)",
    "SelectType": "select/cons_tres: GPUs are allocated as GRES per job and cores per task (Slurm's default before "
                  "23.02 is select/linear, whole nodes; slurm.conf(5) SelectType)",
    "SelectTypeParameters": "CR_Core_Memory: cores and memory are what jobs consume (slurm.conf(5) "
                            "SelectTypeParameters)",
    "ProctrackType": "proctrack/cgroup: every process of a job is found and ended with it",
    "TaskPlugin": "task/cgroup,task/affinity: tasks are confined to their cores, GPUs and memory (with cgroup.conf) "
                  "and bound to their cores",
}


def orchgen_better_markdown() -> str:
    """The documented list of what a regenerated site gains or says differently, from the tables above
    (docs/slurm-admins.md's block between the `orchgen-better` markers is this text; tests/test_import_slurm.py
    checks it)."""
    out = ["Improvements (each can be turned off in workload.yaml; the real-Slurm test allows only these):", ""]
    out += [f"- slurm.conf `{k}`: {why}" for k, why in ORCHGEN_BETTER.items()]
    out += [f"- node lines `{k}`: {why}" for k, why in ORCHGEN_BETTER_NODES.items()]
    out += [f"- cgroup.conf `{k}`: {why}" for k, why in ORCHGEN_BETTER_CGROUP.items()]
    out += ["", "Written out where the site relied on Slurm's default (the import prints each as `added`):", ""]
    out += [f"- slurm.conf `{k}`: {why}" for k, why in ORCHGEN_WRITES.items()]
    return "\n".join(out) + "\n"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class SiteKey(_Model):
    """One `Key=Value` of the site, kept as written."""

    @model_validator(mode="after")
    def _authinfo(self) -> "SiteKey":
        unknown = authinfo_unknown(self.value) if self.key.lower() == "authinfo" else []
        if unknown:
            raise ValueError(f"AuthInfo option {unknown[0][:40]!r} is not one orchgen knows holds no secret "
                             f"({', '.join(sorted(AUTHINFO_OPTIONS))}, slurm.conf(5)): keep it in the site's "
                             "slurm.conf as it is")
        return self

    key: Key = Field(description="the key as the site writes it (Slurm reads keys in any case)")
    value: ConfValue = Field(description="the value, verbatim (written in quotes where it holds a space)")
    reason: ConfText = Field(min_length=1, description="why orchgen does not model it")
    source: ConfText | None = Field(default=None, alias="from", description="file:line it was imported from")
    pool: Annotated[str, AfterValidator(_pool)] | None = Field(
        default=None, description="a key of this pool's NodeName line (Features, Weight, RealMemory ...) "
        "instead of a key of the whole file")


class SiteLine(_Model):
    """One whole record of the site (PartitionName=..., NodeSet=..., a gres.conf line), kept as written."""

    line: ConfText = Field(min_length=1, description="the record, verbatim")
    reason: ConfText = Field(min_length=1, description="why orchgen does not model it")
    source: ConfText | None = Field(default=None, alias="from", description="file:line it was imported from")


class SiteFile(_Model):
    keys: list[SiteKey] = Field(default_factory=empty_list, max_length=4_096,
                                description="the site's own Key=Value settings of this file, each with its reason")
    lines: list[SiteLine] = Field(default_factory=empty_list, max_length=65_536,
                                  description="whole records of this file kept as written, each with its reason")


class Site(_Model):
    """What the site's configuration says that orchgen's model does not: emitted in place, each with
    its reason (workload.yaml written by `orchgen import slurm`)."""

    slurm_conf: SiteFile | None = Field(default=None, description="carried into slurm.conf")
    gres_conf: SiteFile | None = Field(default=None, description="carried into gres.conf")
    cgroup_conf: SiteFile | None = Field(default=None, description="carried into cgroup.conf")
    plugstack_conf: SiteFile | None = Field(
        default=None, description="the site's SPANK lines (spank(8): `required|optional PLUGIN [ARGS]`, `include "
        "GLOB`), added to the bundle's plugstack.conf after orchgen's own (pyxis), or its only lines")
    files: dict[Annotated[str, AfterValidator(_file_name)], Annotated[str, AfterValidator(_file_text)]] = Field(
        default_factory=empty_dict, max_length=64,
        description="files the site ships beside slurm.conf (job_submit.lua ...), written verbatim into "
        "the bundle's slurm/ folder")

    def of(self, name: str) -> SiteFile | None:
        return {"slurm.conf": self.slurm_conf, "gres.conf": self.gres_conf, "cgroup.conf": self.cgroup_conf,
                "plugstack.conf": self.plugstack_conf}.get(name)
