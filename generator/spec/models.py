"""workload.yaml's models (pydantic): the input contract, one class per section.

Field names here are a public contract: other tools write these files. Unknown keys are errors.
Single-field rules live on the fields; rules that span fields are `checks.py`'s.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from . import slurmtime

API_VERSION = "orchgen/v1alpha1"
MAX_NODES_PER_POOL = 65_536
MAX_FLEET_NODES = 65_536

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GPU_TYPE = re.compile(r"^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+$")
# A POSIX user or group name as Slurm keeps it (sacctmgr lower-cases user names): it is written
# into accounts.sh as a shell word, so the characters are a safe subset (no quotes, spaces, `$`).
_UNIX_NAME = re.compile(r"^[a-z_][a-z0-9_.-]*$")
MAX_UNIX_NAME = 32
# A Git clone URL that Argo CD and Flux both accept, in the three forms Git hosts hand out. The
# characters are a safe subset on purpose: the URL lands in YAML, in a README code block and in a
# shell command there, so no quotes, backticks, spaces or `$`. No credentials: controllers take
# them from a Secret, and the bundle is committed. ssh keeps its user (git@), which is no secret;
# https gets none, since a token is often written as the user name (https://<token>@github.com/...).
_GIT_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?"
_GIT_PATH = r"[A-Za-z0-9_.~%+-][A-Za-z0-9_.~%+/-]*"
_GIT_USER = r"[A-Za-z0-9._-]+"
GIT_URL_PATTERN = (rf"^(?:https://{_GIT_HOST}(?::[0-9]{{1,5}})?/{_GIT_PATH}"
                   rf"|ssh://(?:{_GIT_USER}@)?{_GIT_HOST}(?::[0-9]{{1,5}})?/{_GIT_PATH}"
                   rf"|{_GIT_USER}@{_GIT_HOST}:/?{_GIT_PATH})$")
_GIT_URL = re.compile(GIT_URL_PATTERN)
MAX_GIT_URL = 512


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return value


def _gpu_type(value: str) -> str:
    if len(value) > 32 or not _GPU_TYPE.match(value):
        raise ValueError(
            f"{value!r} is not a GRES type (lower-case letters, digits, '-' and '_', at most 32)"
        )
    return value


def _version(value: str) -> str:
    if not _VERSION.match(value):
        raise ValueError(f"{value!r} is not a MAJOR.MINOR version such as \"25.11\"")
    return value


def _unix_name(value: str) -> str:
    if len(value) > MAX_UNIX_NAME or not _UNIX_NAME.match(value):
        raise ValueError(f"{_short(value)} is not a user or group name (lower-case letters, digits, '_', "
                         f"'.', '-', starting with a letter or '_', at most {MAX_UNIX_NAME} characters)")
    return value


def _slurm_time(value: str) -> str:
    slurmtime.minutes(value)  # raises ValueError with the accepted forms
    return value


def _git_url(value: str) -> str:
    if len(value) > MAX_GIT_URL:
        raise ValueError(f"longer than {MAX_GIT_URL} characters (got {len(value)})")
    # Never echoed: it may hold a token, and errors end up in CI logs.
    if re.match(r"^(https://[^/]*@|ssh://[^/@]*:[^/@]*@|[^/@:]+:[^/@]*@)", value):
        raise ValueError("must not carry credentials (a user, password or token in the URL): Argo CD "
                         "and Flux read them from a Secret, and this URL is committed with the bundle")
    if not _GIT_URL.match(value):
        why = " (it contains whitespace)" if re.search(r"\s", value) else ""
        raise ValueError(f"{_short(value)} is not a Git clone URL{why}: write https://host/path, "
                         "ssh://[user@]host/path or user@host:path")
    return value


Name = Annotated[str, AfterValidator(_dns_label)]
GpuType = Annotated[str, AfterValidator(_gpu_type)]
Version = Annotated[str, AfterValidator(_version)]
GitUrl = Annotated[str, AfterValidator(_git_url)]
UnixName = Annotated[str, AfterValidator(_unix_name)]
SlurmTime = Annotated[str, AfterValidator(_slurm_time)]


class _Model(BaseModel):
    # strict: a quoted "8" is not a node count, and 25.10 is not the version "25.10"
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Metadata(_Model):
    name: Name


class Gpu(_Model):
    type: GpuType = Field(description="GRES type, e.g. h100")
    count: int = Field(ge=1, le=64, description="GPUs per node")


class Pool(_Model):
    name: Name
    nodes: int = Field(ge=1, le=MAX_NODES_PER_POOL)
    hostnames: str | None = Field(
        default=None,
        description="Slurm hostlist of the pool's nodes; default <pool>-[001-NNN]",
    )
    gpu: Gpu | None = Field(default=None, description="omit for a CPU-only pool")
    cpus: int = Field(default=64, ge=1, le=16_384)
    memory_gib: int = Field(default=256, ge=4, le=1_048_576)
    nvlink_domain_nodes: int = Field(
        default=1, ge=1, le=1_024, description="nodes per NVLink domain (18 for GB200 NVL72)"
    )


class Fabric(_Model):
    kind: Literal["infiniband", "roce", "ethernet"] = "ethernet"
    nodes_per_leaf: int = Field(default=32, ge=1, le=4_096)
    leaves_per_spine: int | None = Field(
        default=None, ge=1, le=4_096, description="absent: one spine over all leaves"
    )


class SlurmHosts(_Model):
    """The machines that run Slurm's daemons (not GPU nodes), by the short hostname each prints."""

    controllers: list[Name] = Field(
        min_length=1, max_length=8,
        description="SlurmctldHost lines, primary first: slurmctld compares its own gethostname() "
        "with these, so give the short hostname each controller prints",
    )
    accounting: Name | None = Field(default=None, description="where slurmdbd runs (AccountingStorageHost); "
                                    "default: controllers[0]")


class FleetSpec(_Model):
    bare_metal: bool = False
    edge_or_dev: bool = False
    slurm: SlurmHosts | None = Field(default=None, description="Slurm's controllers and accounting host")
    fabric: Fabric = Fabric()
    pools: list[Pool] = Field(min_length=1, max_length=256)


class Tenant(_Model):
    name: Name
    share: int = Field(default=1, ge=1, le=1_000_000)
    users: list[UnixName] = Field(
        default_factory=list, max_length=100_000,
        description="Slurm: users of this tenant's account (accounts.sh adds their associations)",
    )
    unix_group: UnixName | None = Field(
        default=None, description="Slurm: the members of this Unix group (getent group, and the users whose "
        "primary group it is) join this tenant's account when accounts.sh runs",
    )
    max_gpus: int | None = Field(
        default=None, ge=1, le=16 * MAX_FLEET_NODES * 64,
        description="Slurm: GPUs the tenant's running jobs may hold at once (GrpTRES=gres/gpu=N); absent: no cap",
    )


class Workload(_Model):
    name: Name
    nodes: int = Field(default=1, ge=1, le=MAX_FLEET_NODES, description="nodes one job spans")
    tightly_coupled: bool = False
    bare_metal: bool | None = Field(default=None, description="default: fleet.bare_metal")
    long_lived_services: bool = False
    multi_tenant: bool = False
    python_native_pipeline: bool = False
    edge_or_dev: bool | None = Field(default=None, description="default: fleet.edge_or_dev")
    tenant: str | None = None
    pool: str | None = None
    gpus: int | None = Field(default=None, ge=0, le=16 * MAX_FLEET_NODES * 64)
    max_time: SlurmTime | None = Field(
        default=None, description="Slurm: the longest a job of this workload may run (a Slurm time such as "
        "\"2-00:00:00\"); its partitions' MaxTime covers it. Default: options.slurm.max_time",
    )


class SlurmOptions(_Model):
    """Site policy of the Slurm plane that no fleet fact decides."""

    default_time: SlurmTime = Field(
        default="04:00:00", description="time limit of a job that gives none (partitions' DefaultTime, "
        "at most their MaxTime): backfill plans with it, so it must not be unlimited",
    )
    max_time: SlurmTime = Field(
        default="7-00:00:00", description="MaxTime of a partition none of whose workloads sets max_time",
    )


class Options(_Model):
    gang_scheduler: Literal["auto", "kueue", "volcano", "kai"] = "auto"
    slurm_on_kubernetes: Literal["auto", "slinky", "soperator", "none"] = "auto"
    gitops: Literal["none", "kustomize", "argocd", "flux"] = "none"
    slurm_version: Version = "25.11"
    kubernetes_version: Version = "1.33"
    versions: dict[str, str] = Field(default_factory=dict, description="chart version by component")
    strict: bool = Field(
        default=False,
        description="refuse (exit 2) instead of warning: a placeholder the site must fill, demand "
        "beyond capacity or quota, a workload given a tenant it did not name",
    )
    slurm: SlurmOptions = SlurmOptions()
    gitops_repo: GitUrl | None = Field(
        default=None,
        description="clone URL of the GitOps repository that Argo CD / Flux read this bundle from "
        "(the bundle sits at <metadata.name>/ in it); argocd writes it into its Applications",
        json_schema_extra={"pattern": GIT_URL_PATTERN, "maxLength": MAX_GIT_URL},
    )


class Fleet(_Model):
    apiVersion: Literal["orchgen/v1alpha1"]
    kind: Literal["Fleet"]
    metadata: Metadata
    fleet: FleetSpec
    tenants: list[Tenant] = Field(default_factory=list, max_length=1_024)
    workloads: list[Workload] = Field(min_length=1, max_length=4_096)
    options: Options = Options()


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of workload.yaml (for editors)."""
    schema = Fleet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "orchgen workload.yaml"
    return schema


Path_ = tuple[str | int, ...]  # a location in the document: keys and list indexes


def format_path(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
