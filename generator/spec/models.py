"""workload.yaml's models (pydantic): the input contract, one class per section.

Field names here are a public contract: other tools write these files. Unknown keys are errors.
Single-field rules live on the fields; rules that span fields are `checks.py`'s.
"""
# No `from __future__ import annotations` in this module: pydantic would evaluate every field's annotation
# from its string (typing.ForwardRef compiles each one: 235 of the 276 compile() calls of importing
# models.py and site.py went; ~1% of a plan's instructions, issue 41).

import re
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, WithJsonSchema, field_validator,
                      model_validator)

from .. import providers, schedulers
from ..errors import cut, mask_urls
from . import platforms, slurmtime
from .site import Site, empty_dict, empty_list

API_VERSION = "orchgen/v1alpha1"
MAX_NODES_PER_POOL = 65_536
MAX_FLEET_NODES = 65_536
MAX_POOLS = 256

# The validators below use fullmatch: `$` alone also matches before a trailing newline ("gpu\n").
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# A GRES type as Slurm takes it (gres.conf(5) Type=: a name without ':' ',' '=' or spaces; Slurm keeps
# its case, so `gpu:GV100GL:4` is a different type from `gpu:gv100gl:4`): letters, digits, '_', '-', '.'.
_GPU_TYPE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
# A Slurm object name (partition, QOS): PartitionName is case-sensitive; sacctmgr keeps QOS names
# lower-case, so QOS names are lower-case here. No '=', ',', spaces or quotes (slurm.conf syntax).
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_QOS_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.-]{0,63}$")
# A TRES limit string as sacctmgr takes it (sacctmgr(1) GrpTRES): cpu=64,mem=512G,gres/gpu=8,gres/gpu:h100=8
_TRES_LIMIT = re.compile(r"^[a-z]+(/[A-Za-z0-9_.:-]+)?=[0-9]+[KMGTP]?(,[a-z]+(/[A-Za-z0-9_.:-]+)?=[0-9]+[KMGTP]?)*$")
# A TRES weight string (slurm.conf(5) PriorityWeightTRES): CPU=1000,Mem=2000,GRES/gpu=3000
_TRES_WEIGHT = re.compile(r"^[A-Za-z]+(/[A-Za-z0-9_.:-]+)?=[0-9]+(\.[0-9]+)?[KMGTP]?"
                          r"(,[A-Za-z]+(/[A-Za-z0-9_.:-]+)?=[0-9]+(\.[0-9]+)?[KMGTP]?)*$")
# One SchedulerParameters item (slurm.conf(5)): a lower-case key, optionally =value
_SCHED_PARAM = re.compile(r"^[a-z][a-z0-9_]*(=[A-Za-z0-9_.:/+-]+)?$")
# MAJOR.MINOR, or a patch release (25.11.1): the renderers read MAJOR.MINOR
_VERSION = re.compile(r"^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,4})?$")
# A POSIX user or group name as Slurm keeps it (sacctmgr lower-cases user names): it is written
# into accounts.sh as a shell word, so the characters are a safe subset (no quotes, spaces, `$`).
_UNIX_NAME = re.compile(r"^[a-z_][a-z0-9_.-]*$")
MAX_UNIX_NAME = 32
# A Kubernetes RBAC group subject: any string the authenticator reports; a safe subset here, since
# it lands in YAML and in the README's commands
_KUBE_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._@/-]*$")
MAX_KUBE_GROUP = 253
# A path on the Slurm hosts: it lands in slurm.conf, nhc.conf and shell lines, so a safe subset
HOST_PATH_PATTERN = r"^/[A-Za-z0-9._+-]+(/[A-Za-z0-9._+-]+)*$"
_HOST_PATH = re.compile(HOST_PATH_PATTERN)
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
# options.prometheus_url: the site's own Prometheus, an http(s) URL with no user or password in it
# (it is written into the bundle, which is committed)
PROMETHEUS_URL_PATTERN = rf"^https?://{_GIT_HOST}(?::[0-9]{{1,5}})?(?:/[A-Za-z0-9_.~%+/-]*)?$"
_PROMETHEUS_URL = re.compile(PROMETHEUS_URL_PATTERN)


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{_short(value)} is not a DNS-1123 label (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return value


def _gpu_type(value: str) -> str:
    if len(value) > 32 or not _GPU_TYPE.fullmatch(value):
        raise ValueError(
            f"{_short(value)} is not a GRES type (letters, digits, '-', '_' and '.', starting and ending "
            "with a letter or digit, at most 32; Slurm keeps the case)"
        )
    return value


def _slurm_name(value: str) -> str:
    if not _SLURM_NAME.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a Slurm name (letters, digits, '_', '.', '-', at most 64, "
                         "not starting with '.' or '-')")
    return value


def _qos_name(value: str) -> str:
    if not _QOS_NAME.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a QOS name (lower-case letters, digits, '_', '.', '-', at "
                         "most 64: sacctmgr keeps QOS names lower-case)")
    return value


def _tres_limit(value: str) -> str:
    if len(value) > 1_024 or not _TRES_LIMIT.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a TRES limit such as gres/gpu=8,cpu=256,mem=1T (sacctmgr(1))")
    return value


def _tres_weight(value: str) -> str:
    if len(value) > 1_024 or not _TRES_WEIGHT.fullmatch(value):
        raise ValueError(f"{_short(value)} is not TRES weights such as CPU=1000,GRES/gpu=2000 "
                         "(slurm.conf(5) PriorityWeightTRES)")
    return value


def _sched_param(value: str) -> str:
    if len(value) > 256 or not _SCHED_PARAM.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a SchedulerParameters item such as bf_interval=60 or "
                         "bf_busy_nodes (a lower-case key, optionally =value without ',' or spaces)")
    return value


def _version(value: str) -> str:
    if not _VERSION.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a MAJOR.MINOR version such as \"25.11\" (or a patch "
                         "release such as \"25.11.1\")")
    return value


def _unix_name(value: str) -> str:
    if len(value) > MAX_UNIX_NAME or not _UNIX_NAME.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a user or group name (lower-case letters, digits, '_', "
                         f"'.', '-', starting with a letter or '_', at most {MAX_UNIX_NAME} characters)")
    return value


def _slurm_time(value: str) -> str:
    slurmtime.minutes(value)  # raises ValueError with the accepted forms
    return value


def _host_path(value: str) -> str:
    if len(value) > 255 or not _HOST_PATH.fullmatch(value) or "/../" in f"{value}/" or "/./" in f"{value}/":
        raise ValueError(f"{_short(value)} is not an absolute path of letters, digits and '._+-' "
                         "(no spaces, quotes, '..' or trailing '/'; at most 255 characters)")
    return value


# A node label as the API server takes it (apimachinery validation: qualified name, label value).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# A Linux network interface name (IFNAMSIZ: at most 15 characters, no '/' or whitespace).
_IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,14}$")
_CIDR4 = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})$")


def _node_labels(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        prefix = key.split("/", 1)[0] if "/" in key else ""
        if len(key) > 316 or len(prefix) > 253 or not _LABEL_KEY.fullmatch(key):
            raise ValueError(f"{_short(key)} is not a label key (optional DNS-subdomain prefix and '/', then "
                             "at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric)")
        if not isinstance(val, str) or len(val) > 63 or not _LABEL_VALUE.fullmatch(val):
            raise ValueError(f"label {key}: {_short(val)} is not a label value (at most 63 letters, digits, "
                             "'-', '_' or '.', starting and ending alphanumeric)")
    return value


def _ifname(value: str) -> str:
    if not _IFNAME.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a network interface name (at most 15 characters)")
    return value


def _cidr4(value: str) -> str:
    m = _CIDR4.fullmatch(value)
    if not m or any(int(o) > 255 for o in m.groups()[:4]) or not 8 <= int(m.group(5)) <= 30:
        raise ValueError(f"{_short(value)} is not an IPv4 subnet such as 172.16.0.0/16 (prefix /8 to /30)")
    return value


def _git_url(value: str) -> str:
    if len(value) > MAX_GIT_URL:
        raise ValueError(f"longer than {MAX_GIT_URL} characters (got {len(value)})")
    # Never echoed: it may hold a token, and errors end up in CI logs.
    if re.match(r"^(https://[^/]*@|ssh://[^/@]*:[^/@]*@|[^/@:]+:[^/@]*@)", value):
        raise ValueError("must not carry credentials (a user, password or token in the URL): Argo CD "
                         "and Flux read them from a Secret, and this URL is committed with the bundle")
    if not _GIT_URL.fullmatch(value):
        why = " (it contains whitespace)" if re.search(r"\s", value) else ""
        raise ValueError(f"{_short(value)} is not a Git clone URL{why}: write https://host/path, "
                         "ssh://[user@]host/path or user@host:path")
    return value


def _prometheus_url(value: str) -> str:
    if len(value) > MAX_GIT_URL:
        raise ValueError(f"longer than {MAX_GIT_URL} characters (got {len(value)})")
    if re.match(r"^https?://[^/]*@", value):  # never echoed: the user part may be a token
        raise ValueError("must not carry credentials (a user, password or token in the URL): the bundle "
                         "that names it is committed")
    if not _PROMETHEUS_URL.fullmatch(value):
        # not echoed either: a query string may carry a token
        raise ValueError("is not an http(s) URL such as http://prometheus.monitoring.svc:9090 (scheme, host, "
                         "optional port and path; no query string)")
    return value


def _kube_group(value: str) -> str:
    if len(value) > MAX_KUBE_GROUP or not _KUBE_GROUP.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a group name (letters, digits and ':._@/-', starting with a "
                         f"letter or digit, at most {MAX_KUBE_GROUP} characters)")
    if value.startswith("system:"):
        raise ValueError(f"{_short(value)} is one of Kubernetes' own groups (system:), not a tenant's")
    return value


Name = Annotated[str, AfterValidator(_dns_label)]
KubeGroup = Annotated[str, AfterValidator(_kube_group)]
GpuType = Annotated[str, AfterValidator(_gpu_type)]
Version = Annotated[str, AfterValidator(_version)]
GitUrl = Annotated[str, AfterValidator(_git_url)]
PrometheusUrl = Annotated[str, AfterValidator(_prometheus_url)]
UnixName = Annotated[str, AfterValidator(_unix_name)]
SlurmTime = Annotated[str, AfterValidator(_slurm_time)]
HostPath = Annotated[str, AfterValidator(_host_path),
                     WithJsonSchema({"type": "string", "pattern": HOST_PATH_PATTERN, "maxLength": 255})]
NodeLabels = Annotated[dict[str, str], AfterValidator(_node_labels)]
IfName = Annotated[str, AfterValidator(_ifname)]
Cidr4 = Annotated[str, AfterValidator(_cidr4)]
SlurmName = Annotated[str, AfterValidator(_slurm_name)]
QosName = Annotated[str, AfterValidator(_qos_name)]
TresLimit = Annotated[str, AfterValidator(_tres_limit)]
TresWeight = Annotated[str, AfterValidator(_tres_weight)]
SchedParam = Annotated[str, AfterValidator(_sched_param)]


class _Model(BaseModel):
    # strict: a quoted "8" is not a node count, and 25.10 is not the version "25.10"
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Metadata(_Model):
    name: Name


_MIG_PROFILE = re.compile(r"^[1-8]g\.[0-9]{1,4}gb$")


def _mig_profile(value: str) -> str:
    if not _MIG_PROFILE.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a MIG profile name such as 1g.10gb or 3g.40gb "
                         "(media-extension profiles, +me, are not supported)")
    return value


MigProfile = Annotated[str, AfterValidator(_mig_profile)]


class Mig(_Model):
    """Every GPU of the pool cut into the same MIG layout."""

    profile: MigProfile = Field(description="MIG profile (GPU instance), e.g. 1g.10gb; see generator/spec/mig.py")
    per_gpu: int = Field(ge=1, le=7, description="instances of that profile on each GPU")


class Gpu(_Model):
    type: GpuType | None = Field(
        default=None, description="GRES type, e.g. h100 or GV100GL (Slurm keeps the case: write it as the "
        "site's scripts ask for it, --gres=gpu:GV100GL:4); required unless typed: false")
    typed: bool = Field(
        default=True, description="false: the GRES is untyped (slurm.conf Gres=gpu:8, gres.conf without "
        "Type=), as sites whose nodes say gpu:8 have it; `type`, if given, still names the model for the "
        "node's Features and the health check. Not with mig (the profile is the type)")
    custom: bool = Field(
        default=False, description="true: `type` is the site's own GRES name, not a GPU model orchgen knows; "
        "otherwise a type orchgen's catalog does not know (generator/catalog.py GPU_TYPES) is refused as a "
        "likely typo (h1000 for h100), since NHC's GPU check would then drain every node")
    count: int = Field(ge=1, le=64, description="GPUs per node")
    sockets: list[Annotated[int, Field(ge=0, le=63)]] | None = Field(
        default=None, description="the CPU socket of each GPU (from 0), for GPU-CPU affinity (gres.conf Cores=)")
    autodetect: Literal["nvml", "nvidia", "off"] | None = Field(
        default=None, description="gres.conf AutoDetect: nvml | nvidia (Slurm 24.11+) | off; default off, "
        "nvml with mig")
    mig: Mig | None = Field(default=None, description="optional: every GPU of the pool in this MIG layout")

    @field_validator("autodetect", mode="before")
    @classmethod
    def _off_is_off(cls, value: Any) -> Any:
        # YAML 1.1 (PyYAML) reads an unquoted `off` as false: that is what the user wrote
        return "off" if value is False else value


class Cpu(_Model):
    sockets: int = Field(ge=1, le=64)
    cores_per_socket: int = Field(ge=1, le=1_024)
    threads_per_core: int = Field(ge=1, le=8)


class Reserved(_Model):
    """Kept from jobs and pods for the OS and the node agents (slurmd, kubelet)."""

    cores: int = Field(default=0, ge=0, le=16_384, description="whole cores (Slurm CoreSpecCount)")
    memory_gib: int = Field(default=0, ge=0, le=1_048_576, description="GiB (Slurm MemSpecLimit)")


def _taint_key(value: str) -> str:
    prefix = value.split("/", 1)[0] if "/" in value else ""
    if len(value) > 316 or len(prefix) > 253 or not _LABEL_KEY.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a taint key (optional DNS-subdomain prefix and '/', then "
                         "at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric)")
    return value


def _taint_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(f"{_short(value)} is not a taint value (at most 63 letters, digits, '-', '_' or '.', "
                         "starting and ending alphanumeric)")
    return value


class Taint(_Model):
    """A taint every node of the pool carries (the provider's node-pool setting, `kubectl taint`).
    orchgen's pods for the pool tolerate it; pods for other pools do not."""

    key: Annotated[str, AfterValidator(_taint_key)] = Field(description="e.g. nvidia.com/gpu")
    value: Annotated[str, AfterValidator(_taint_value)] | None = Field(
        default=None, description="absent: a taint without a value (tolerated with operator Exists)")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="NoSchedule (what GPU node pools use), PreferNoSchedule or NoExecute (evicts pods "
                    "that do not tolerate it)")


_RDMA_DEVICE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def _rdma_device(value: str) -> str:
    if not _RDMA_DEVICE.fullmatch(value):
        raise ValueError(f"{_short(value)} is not an RDMA device name as `ibv_devices` prints it (e.g. mlx5_0)")
    return value


def _platform_name(value: str) -> str:
    return platforms.check_name(value)


class Nic(_Model):
    """One RDMA port of the pool's nodes, as `ibdev2netdev` shows it (`mlx5_0 port 1 ==> ibp24s0 (Up)`)."""

    device: Annotated[str, AfterValidator(_rdma_device)] = Field(description="the RDMA device, e.g. mlx5_0")
    port: int = Field(default=1, ge=1, le=2, description="the device's port (1 on single-port adapters)")
    netdev: IfName | None = Field(default=None, description="its network interface, e.g. ibp24s0 (the master of "
                                  "the port's Kubernetes network)")
    rate_gbps: int = Field(ge=1, le=3_200, description="line rate in Gb/s, as /sys/class/infiniband/DEV/ports/"
                           "PORT/rate starts (400 for NDR or 400GbE)")
    role: Literal["compute", "storage"] = Field(
        default="compute", description="compute: a GPU rail (NCCL, health checks, one Kubernetes network each); "
        "storage: storage or in-band traffic, never NCCL's")
    gpu: int | None = Field(default=None, ge=0, le=63, description="the GPU beside it (same PCIe switch), if known")


class Pool(_Model):
    name: Name
    platform: Annotated[str, AfterValidator(_platform_name),
                        WithJsonSchema({"type": "string", "enum": sorted(platforms.PLATFORMS)})] | None = Field(
        default=None, description="the server platform (generator/spec/platforms.py), e.g. dgx-h100: gives the CPU "
        "layout, the GPUs and their sockets, the RDMA rails and the NVLink domain; the pool's own fields win "
        "where the platform leaves a fact to the buyer")
    cpu_count: Literal["threads", "cores"] = Field(
        default="threads", description="what a Slurm CPU is on this pool's nodes: threads (CPUs= every "
        "hardware thread, Slurm's default) or cores (CPUs= the cores of a hyperthreaded node, the common "
        "`CPUs=<cores> ThreadsPerCore=2` line: a job's CPU count is cores; slurm.conf(5) NodeName CPUs)")
    nodes: int = Field(ge=1, le=MAX_NODES_PER_POOL)
    hostnames: str | None = Field(
        default=None,
        description="Slurm hostlist of the pool's nodes; default <pool>-[001-NNN]",
    )
    gpu: Gpu | None = Field(default=None, description="omit for a CPU-only pool")
    arch: Literal["x86_64", "aarch64", "ppc64le"] | None = Field(
        default=None,
        description="the nodes' CPU architecture (`uname -m`); default aarch64 for Grace (GH200, GB200, GB300 GPUs or "
        "the gb200-nvl72 platform), else x86_64; plan.json records it per pool. Each component the bundle installs "
        "is checked against the platforms its images are published for (catalog.IMAGE_ARCHES): a pool on the "
        "Kubernetes plane lacking one whose pods run on every node (GPU Operator, Network Operator, node-exporter, "
        "Slurm's pods) is refused; one lacking a controller's is a warning where the plane's other nodes can run "
        "it. A bare-metal Slurm pool is checked against the bring-up's packages (catalog.SLURM_PACKAGE_ARCHES)")
    planes: dict[Literal["slurm", "kubernetes"], Annotated[str, Field(min_length=1, max_length=4_096)]] | None = Field(
        default=None,
        description="nodes of this pool held to a plane (Slurm hostlists; kubernetes is the Kubernetes or k3s "
        "plane): a node keeps its plane across re-plans (the bundle's plan.json says which) unless it is "
        "named here, and naming it under the other plane moves it, a disruptive change that `plan --diff` "
        "lists with the drains of both planes")
    cpu: Cpu | None = Field(default=None, description="sockets x cores per socket x threads per core")
    cpus: int | None = Field(
        default=None, ge=1, le=16_384,
        description="logical CPUs; alone it means 1 socket of `cpus` cores, 1 thread each (default 64)")
    memory_gib: int | None = Field(default=None, ge=4, le=1_048_576,
                                   description="installed memory (default 256, or from slurmd_c)")
    reserved: Reserved | None = Field(default=None, description="for the OS and the node agents")
    slurmd_c: str | None = Field(
        default=None, max_length=1_024,
        description="the line `slurmd -C` prints on one node: gives cpu and memory")
    nvlink_domain_nodes: int = Field(
        default=1, ge=1, le=1_024, description="nodes per NVLink domain (18 for GB200 NVL72)"
    )
    nics: list[Nic] | None = Field(
        default=None, min_length=1, max_length=32,
        description="the nodes' RDMA ports (default: the platform's): compute rails and storage adapters")
    facts: str | None = Field(
        default=None, min_length=1, max_length=1_024,
        description="the facts file `orchgen discover` wrote (relative to workload.yaml): the CPU layout "
        "(slurmd_c or cpu), the GPUs' sockets (gpu.sockets) and the RDMA ports (nics) the pool's hosts report, "
        "where the pool gives none")
    node_labels: NodeLabels | None = Field(
        default=None, max_length=16,
        description="labels the provisioner puts on this pool's nodes (a cloud node group's, e.g. "
        "{eks.amazonaws.com/nodegroup: h100-ng}); Kubernetes objects select the pool by them. Default "
        "off bare metal: the provider's node-pool label with the pool's name",
    )
    taints: list[Taint] | None = Field(
        default=None, max_length=16,
        description="taints on this pool's nodes; every pod orchgen writes or configures for the pool tolerates "
        "them. Absent: the provider's default for a GPU pool (eks nvidia.com/gpu=true, gke nvidia.com/gpu=present, "
        "aks sku=gpu, all NoSchedule; none on bare metal, oke or a CPU pool); [] for none",
    )

    @model_validator(mode="before")
    @classmethod
    def _platform_facts(cls, data: Any) -> Any:
        # a platform's GPUs and NVLink domain where the pool gives none (spec/platforms.py)
        return platforms.fill(data)


class RdmaNetwork(_Model):
    """The secondary network tightly coupled Kubernetes jobs attach on a bare-metal InfiniBand/RoCE fabric."""

    interface: IfName | None = Field(
        default=None, description="the RDMA port's netdev on every node (`ibdev2netdev` shows it); "
        "default ib0 on InfiniBand; required on RoCE")
    subnet: Cidr4 = Field(default="172.16.0.0/16",
                          description="addresses for the pods' fabric interfaces (must be unused on the nodes)")


class FabricLeaf(_Model):
    """A leaf switch as cabled: its name and the nodes cabled to it, of any pools."""

    name: Name = Field(description="the switch's name: Slurm's SwitchName, the orchgen.io/leaf label, "
                       "the Volcano HyperNode")
    nodes: str = Field(max_length=1_000_000, description="Slurm hostlist of the nodes cabled to it")


class FabricSpine(_Model):
    name: Name
    leaves: list[Name] = Field(min_length=1, max_length=65_536, description="the leaves cabled to it")


class FabricImport(_Model):
    """The file the site keeps its fabric in, relative to workload.yaml; exactly one."""

    topology_conf: str | None = Field(default=None, min_length=1, max_length=4_096,
                                      description="Slurm topology.conf (topology/tree or topology/block)")
    topology_yaml: str | None = Field(default=None, min_length=1, max_length=4_096,
                                      description="Slurm topology.yaml (25.05+)")
    ibnetdiscover: str | None = Field(default=None, min_length=1, max_length=4_096,
                                      description="infiniband-diags ibnetdiscover output")


class Fabric(_Model):
    """The fabric as cabled (`leaves`/`spines`, or `from` a file the site keeps), or the shorthand
    `nodes_per_leaf`/`leaves_per_spine`, which cuts each pool's hostlist into leaves."""

    kind: Literal["infiniband", "roce", "ethernet"] = "ethernet"
    nodes_per_leaf: int = Field(default=32, ge=1, le=4_096,
                                description="shorthand: nodes under one leaf switch, by hostlist position")
    leaves_per_spine: int | None = Field(
        default=None, ge=1, le=4_096, description="shorthand; absent: one spine over all leaves"
    )
    leaves: list[FabricLeaf] | None = Field(default=None, min_length=1, max_length=65_536,
                                            description="the leaf switches as cabled, instead of nodes_per_leaf")
    spines: list[FabricSpine] | None = Field(default=None, min_length=1, max_length=4_096,
                                             description="with leaves; absent: one spine over all leaves")
    core: Name | None = Field(default=None, description="with spines: the switch above the spines "
                              "(three tiers); absent: none")
    from_: FabricImport | None = Field(default=None, alias="from",
                                       description="import leaves and spines (and NVLink blocks) from a file, "
                                       "instead of leaves/spines")
    rdma_network: RdmaNetwork | None = Field(
        default=None, description="Kubernetes' secondary network on an RDMA fabric (bare metal)")
    traffic_class: int | None = Field(
        default=None, ge=0, le=255, description="RoCE only: the IP traffic class byte NCCL marks its RDMA packets with "
        "(NCCL_IB_TC; DSCP x 4), the one the switches treat as lossless; default 104 (DSCP 26, the RoCE class of "
        "NVIDIA's switch QoS defaults)")
    service_level: int | None = Field(
        default=None, ge=0, le=7, description="RoCE only: NCCL_IB_SL, the priority of that lossless class; default 3")
    topograph: bool = Field(
        default=False, description="the site runs NVIDIA Topograph (Kubernetes engine), which labels the nodes "
        "fabric.topograph.run/tier-N (tier 0 the switch closest to the node) and accelerator.topograph.run/domain: "
        "Kueue/KAI/Volcano topology objects read those, and node-labels.sh writes no switch labels of its own")
    # What the loader read from the `from` file (a spec.importers.ImportedFabric), so planning never
    # reads a file again. Private: not input, set only by spec.load. The FabricModel itself is built
    # from this section whenever it is needed, so a fleet changed in code never keeps a stale one.
    _imported: Any = PrivateAttr(default=None)


class SlurmHosts(_Model):
    """The machines that run Slurm's daemons (not GPU nodes), by the short hostname each prints."""

    controllers: list[Name] = Field(
        min_length=1, max_length=8,
        description="SlurmctldHost lines, primary first: slurmctld compares its own gethostname() "
        "with these, so give the short hostname each controller prints",
    )
    accounting: Name | None = Field(default=None, description="where slurmdbd runs (AccountingStorageHost); "
                                    "default: controllers[0]")


PROVIDERS = providers.NAMES  # the provider table (generator/providers.py)
GANG_SCHEDULERS = ("auto", *schedulers.SCHEDULERS)  # the gang-scheduler registry (generator/schedulers.py)
DISTRIBUTIONS = ("upstream", "k3s", "rke2")


class FleetSpec(_Model):
    bare_metal: bool = False
    edge_or_dev: bool = False
    provider: Literal[PROVIDERS] = Field(  # type: ignore[valid-type]
        default="generic", description="where the Kubernetes nodes run; bare_metal: true implies generic")
    kubernetes_distribution: Literal["upstream", "k3s", "rke2"] = Field(
        default="upstream", description="the Kubernetes plane's distribution (an edge/dev plane is always k3s); "
        "a managed provider (eks, gke, aks, oke) runs its own, upstream")
    slurm: SlurmHosts | None = Field(default=None, description="Slurm's controllers and accounting host")
    fabric: Fabric = Fabric()
    pools: list[Pool] = Field(min_length=1, max_length=MAX_POOLS)


class Tenant(_Model):
    name: Name
    share: int = Field(default=1, ge=1, le=1_000_000)
    users: list[UnixName] = Field(
        default_factory=empty_list, max_length=100_000,
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
    slurm_qos: list[QosName] | None = Field(
        default=None, min_length=1, max_length=256,
        description="Slurm: the QOS this tenant's account may use (sacctmgr QOS=), from the site's set "
        "(options.slurm.qos) or orchgen's normal and scavenger; absent: all of them",
    )
    slurm_default_qos: QosName | None = Field(
        default=None, description="Slurm: the account's DefaultQOS, one of slurm_qos; absent: normal if the "
        "account may use it, else its first QOS",
    )
    default: bool = Field(
        default=False,
        description="the tenant of every workload that names none (at most one tenant is marked)",
    )
    kubernetes_group: KubeGroup | None = Field(
        default=None, description="Kubernetes: the group (as the API server's authenticator reports it, e.g. an "
        "OIDC groups claim) that gets a Role on this tenant's namespace: its workloads, never its quota, queue "
        "or another namespace",
    )


# A container image reference (registry/path:tag or @sha256:...): it lands in YAML and the README,
# so a safe subset; no credentials (a registry's pull secret is the site's, never the bundle's).
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*$")
# A model's name as servers take it (Hugging Face `org/name`, or a path inside the weights)
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
# Where weights come from: `pvc:NAME`, an object-store or hub URI, or `baked` (in the image)
_WEIGHTS = re.compile(r"^(baked|pvc:[a-z0-9]([-a-z0-9]*[a-z0-9])?|(s3|gs|hf|https|oci|pvc)://[A-Za-z0-9._~/%+:@-]+)$")
# A Gateway API parent: [namespace/]name
_GATEWAY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_HOSTNAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A Secret's name: a DNS subdomain (Kubernetes docs, "Object Names and IDs"; a Secret's name must be one)
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _pattern(rx: re.Pattern[str], what: str, longest: int):
    def check(value: str) -> str:
        if len(value) > longest or not rx.fullmatch(value):
            raise ValueError(f"{_short(value)} is not {what}")
        return value
    return check


Image = Annotated[str, AfterValidator(_pattern(_IMAGE, "a container image reference (registry/repository:tag, "
                                                       "lower-case, no credentials)", 255))]
ModelName = Annotated[str, AfterValidator(_pattern(_MODEL, "a model name such as meta-llama/Llama-3.1-8B-Instruct", 255))]
Weights = Annotated[str, AfterValidator(_pattern(_WEIGHTS, "where weights come from: pvc:NAME, an s3://, gs://, "
                                                           "hf://, https:// or oci:// URI, or baked", 1024))]
GatewayRef = Annotated[str, AfterValidator(_pattern(_GATEWAY, "a Gateway as [namespace/]name", 127))]
Hostname = Annotated[str, AfterValidator(_pattern(_HOSTNAME, "a DNS host name such as chat.example.com", 253))]
DnsName = Annotated[str, AfterValidator(_dns_label)]
SecretName = Annotated[str, AfterValidator(_pattern(_OBJECT_NAME, "a Kubernetes Secret's name (lower-case letters, "
                                                                  "digits, '-' and '.'; the name, never the value)",
                                                    253))]


class Serving(_Model):
    """workloads[].serving: how a long-lived workload serves (generator/decide/serving.py decides the
    stack; docs/workload-yaml.md's "Serving" section says what each field becomes). All optional."""

    stack: Literal["auto", "ray", "kserve", "plain"] = Field(
        default="auto", description="auto: options.serving; ray: a RayService (Ray Serve); kserve: a KServe "
        "InferenceService; plain: a Deployment, Service and autoscaler. A replica over several nodes is a "
        "LeaderWorkerSet unless the stack is ray")
    image: Image | None = Field(default=None, description="the model server's image (default: vLLM's OpenAI "
                                "server; Ray's image for a RayService)")
    model: ModelName | None = Field(default=None, description="the model the server loads (its --model)")
    port: int = Field(default=8000, ge=1, le=65_535, description="the container port the server listens on")
    gpus_per_replica: int | None = Field(default=None, ge=0, le=1_024,
                                         description="GPUs of one replica (default: one node's worth, or what "
                                         "`gpus` asks for if less)")
    nodes_per_replica: int = Field(default=1, ge=1, le=64, description="nodes one replica spans (a model too "
                                   "large for one node: a LeaderWorkerSet group, or Ray Serve's placement)")
    min_replicas: int | None = Field(default=None, ge=1, le=10_000, description="default 1")
    max_replicas: int | None = Field(default=None, ge=1, le=10_000,
                                     description="default: the replicas `gpus` holds (at least min_replicas)")
    scale_on: Literal["requests_in_flight", "gpu_utilization", "queue_depth"] = Field(
        default="requests_in_flight", description="the metric the autoscaler follows")
    scale_target: int | None = Field(default=None, ge=1, le=100_000, description="the metric's target per "
                                     "replica (default: 16 requests in flight, 80 % GPU utilization, 4 queued)")
    expose: Literal["cluster", "ingress", "gateway"] = Field(
        default="cluster", description="cluster: a Service only; ingress: plus an Ingress of `ingress_class`; "
                                       "gateway: plus a Gateway API HTTPRoute attached to `gateway`")
    ingress_class: DnsName | None = Field(default=None, description="the IngressClass (expose: ingress); "
                                          "absent: the cluster's default class")
    gateway: GatewayRef | None = Field(default=None, description="the Gateway the HTTPRoute attaches to, "
                                       "[namespace/]name (expose: gateway; required there)")
    host: Hostname | None = Field(default=None, description="the host name the Ingress or HTTPRoute matches")
    weights: Weights = Field(default="baked", description="pvc:NAME (an existing PVC in the tenant's "
                             "namespace), an s3:// gs:// hf:// https:// oci:// URI, or baked (in the image)")
    secret: SecretName | None = Field(
        default=None, description="an existing Kubernetes Secret in the tenant's namespace whose keys the model "
        "server gets as environment variables: HF_TOKEN for a gated or private Hugging Face model, "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for a private s3:// bucket (KServe's storage initializer "
        "reads it too). The bundle names it; the README says how to create it; its value is never in a file")
    image_pull_secret: SecretName | None = Field(
        default=None, description="an existing kubernetes.io/dockerconfigjson Secret in the tenant's namespace "
        "for a private registry (the pods' imagePullSecrets)")


class Workload(_Model):
    name: Name
    description: str | None = Field(
        default=None, max_length=1_000, description="what it is, for people; orchgen reads it only to warn where "
        "the flags seem to say something else (a long-lived workload described as notebooks without interactive)")
    nodes: int = Field(default=1, ge=1, le=MAX_FLEET_NODES, description="nodes one job spans")
    tightly_coupled: bool = False
    bare_metal: bool | None = Field(default=None, description="default: fleet.bare_metal")
    long_lived_services: bool = False
    multi_tenant: bool = False
    python_native_pipeline: bool = False
    serving: Serving | None = Field(
        default=None, description="a long-lived service's serving platform (all optional; needs "
        "long_lived_services): model, port, replicas, autoscaling metric, exposure, weights")
    interactive: bool = Field(
        default=False, description="notebooks for people (JupyterHub on the tenant's queue on Kubernetes; "
        "the README names Open OnDemand on a Slurm-only fleet)")
    edge_or_dev: bool | None = Field(default=None, description="default: fleet.edge_or_dev")
    plane: Literal["auto", "slurm", "kubernetes"] = Field(
        default="auto",
        description="auto: the decision guide's rules; slurm / kubernetes: pinned there (refused, "
        "with the reason, where that plane cannot run it)",
    )
    tenant: str | None = None
    pool: str | None = None
    gpus: int | None = Field(
        default=None, ge=0, le=16 * MAX_FLEET_NODES * 64,
        description="GPUs of ONE job (its span in GPUs): at most `nodes` x the pool's GPUs per node; absent: "
        "every GPU of its nodes. A long-lived service: the GPUs of all its replicas together")
    jobs_at_once: int | None = Field(
        default=None, ge=1, le=1_000_000,
        description="demand: how many of its jobs run at once (pools, splits and capacity are sized by it); "
        "default 1, or jobs_per_day x runtime (Little's law)")
    jobs_per_day: float | None = Field(
        default=None, gt=0, le=10_000_000,
        description="demand: how many of its jobs arrive per day (needs runtime); `orchgen simulate` replays "
        "them as a Poisson stream")
    runtime: SlurmTime | None = Field(
        default=None, description="demand: a typical job's runtime (a Slurm time such as \"02:00:00\"); "
        "`orchgen simulate` uses it, and with jobs_per_day it gives jobs_at_once")
    max_time: SlurmTime | None = Field(
        default=None, description="Slurm: the longest a job of this workload may run (a Slurm time such as "
        "\"2-00:00:00\"); its partitions' MaxTime covers it. Default: options.slurm.max_time",
    )


RESOURCE_LIMITS = ("AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK")
QOS_FLAGS = ("DenyOnLimit", "EnforceUsageThreshold", "NoDecay", "NoReserve", "OverPartQOS", "PartitionMaxNodes",
             "PartitionMinNodes", "PartitionTimeLimit", "RequiresReservation", "UsageFactorSafe", "Relative")
PRIORITY_FLAGS = ("ACCRUE_ALWAYS", "CALCULATE_RUNNING", "DEPTH_OBLIVIOUS", "NO_FAIR_TREE", "INCR_ONLY", "MAX_TRES",
                  "NO_NORMAL_ALL", "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES",
                  "SMALL_RELATIVE_TO_TIME")
_OVERSUBSCRIBE = re.compile(r"^(NO|EXCLUSIVE|(YES|FORCE)(:[0-9]{1,4})?)$")


def _oversubscribe(value: str) -> str:
    if not _OVERSUBSCRIBE.fullmatch(value):
        raise ValueError(f"{_short(value)} is not OverSubscribe: NO, EXCLUSIVE, YES[:N] or FORCE[:N] (slurm.conf(5))")
    return value


class SlurmPartition(_Model):
    """A partition as the site defines it (slurm.conf(5) PARTITION CONFIGURATION): over pools, or over
    any hostlist of the Slurm plane's nodes (time tiers over the same nodes, one partition over two GPU
    generations, a hidden maintenance partition). Absent limits take orchgen's defaults for its nodes."""

    name: SlurmName = Field(description="PartitionName, as users' scripts give it (-p NAME)")
    pools: list[Name] | None = Field(default=None, min_length=1, max_length=256,
                                     description="the pools whose Slurm nodes it spans (or `nodes`)")
    nodes: str | None = Field(default=None, min_length=1, max_length=1_000_000,
                              description="Slurm hostlist of its nodes, or ALL (or `pools`)")
    default: bool = Field(default=False, description="Default=YES: the partition of a job that names none "
                          "(at most one)")
    default_time: SlurmTime | None = Field(default=None, description="DefaultTime; default "
                                           "options.slurm.default_time, at most max_time")
    max_time: SlurmTime | None = Field(default=None, description="MaxTime; default: the longest max_time of "
                                       "the Slurm workloads on its pools, else options.slurm.max_time")
    max_nodes: int | None = Field(default=None, ge=1, le=MAX_FLEET_NODES, description="MaxNodes per job")
    hidden: bool = Field(default=False, description="Hidden=YES: not listed to users who cannot use it "
                         "(a maintenance partition)")
    allow_groups: list[UnixName] | None = Field(default=None, min_length=1, max_length=256,
                                                description="AllowGroups (Unix groups); absent: ALL")
    allow_accounts: list[SlurmName] | None = Field(default=None, min_length=1, max_length=1_024,
                                                   description="AllowAccounts; absent: ALL")
    allow_qos: list[QosName] | None = Field(default=None, min_length=1, max_length=256,
                                            description="AllowQos; absent: ALL")
    priority_tier: int | None = Field(default=None, ge=0, le=65_533,
                                      description="PriorityTier: jobs of a higher tier are scheduled first")
    oversubscribe: Annotated[str, AfterValidator(_oversubscribe)] | None = Field(
        default=None, description="OverSubscribe: NO, EXCLUSIVE, YES[:N] or FORCE[:N]; absent: Slurm's NO")
    state: Literal["UP", "DOWN", "DRAIN", "INACTIVE"] = Field(default="UP", description="State")


class SlurmQos(_Model):
    """A QOS of the site (sacctmgr(1) QOS fields); accounts.sh creates what is missing and sets these."""

    name: QosName = Field(description="the QOS name users give to --qos (sacctmgr's Name, lower case)")
    priority: int | None = Field(default=None, ge=0, le=4_294_967_294, description="Priority")
    preempt: list[QosName] = Field(default_factory=empty_list, max_length=256,
                                   description="Preempt: the QOS this one may preempt")
    preempt_mode: Literal["cancel", "requeue", "suspend", "off"] | None = Field(
        default=None, description="PreemptMode of jobs preempted in this QOS; absent: the cluster's")
    max_wall: SlurmTime | None = Field(default=None, description="MaxWall: a job's time limit")
    grp_tres: TresLimit | None = Field(default=None, description="GrpTRES: all running jobs of the QOS together")
    max_tres_per_user: TresLimit | None = Field(default=None, description="MaxTRESPerUser")
    max_jobs_per_user: int | None = Field(default=None, ge=0, le=4_294_967_294, description="MaxJobsPerUser")
    max_submit_jobs_per_user: int | None = Field(default=None, ge=0, le=4_294_967_294,
                                                 description="MaxSubmitJobsPerUser")
    usage_factor: float | None = Field(default=None, ge=0, le=1_000_000,
                                       description="UsageFactor: how its usage counts for fair share")
    flags: list[Literal[QOS_FLAGS]] = Field(default_factory=empty_list, max_length=16,  # type: ignore[valid-type]
                                           description="Flags, e.g. NoReserve, DenyOnLimit")


class SlurmPriority(_Model):
    """priority/multifactor's weights and decay (slurm.conf(5)); absent fields keep orchgen's."""

    weight_age: int | None = Field(default=None, ge=0, le=4_294_967_294, description="PriorityWeightAge")
    weight_fairshare: int | None = Field(default=None, ge=0, le=4_294_967_294,
                                         description="PriorityWeightFairshare")
    weight_jobsize: int | None = Field(default=None, ge=0, le=4_294_967_294, description="PriorityWeightJobSize")
    weight_partition: int | None = Field(default=None, ge=0, le=4_294_967_294,
                                         description="PriorityWeightPartition")
    weight_qos: int | None = Field(default=None, ge=0, le=4_294_967_294, description="PriorityWeightQOS")
    weight_tres: TresWeight | None = Field(default=None, description="PriorityWeightTRES, e.g. GRES/gpu=2000")
    decay_half_life: SlurmTime | None = Field(default=None, description="PriorityDecayHalfLife")
    max_age: SlurmTime | None = Field(default=None, description="PriorityMaxAge")
    favor_small: bool | None = Field(default=None, description="PriorityFavorSmall")
    calc_period: int | None = Field(default=None, ge=1, le=1_440, description="PriorityCalcPeriod, minutes")
    flags: list[Literal[PRIORITY_FLAGS]] | None = Field(  # type: ignore[valid-type]
        default=None, max_length=16, description="PriorityFlags; absent: orchgen's MAX_TRES")


DbHost = Annotated[str, AfterValidator(_pattern(re.compile(_GIT_HOST), "a database host name (letters, digits, '.' "
                                                                      "and '-')", 253))]


class SlurmAccounting(_Model):
    """The accounting database slurmdbd keeps, and whether it already runs (an adopted site)."""

    database: Annotated[str, AfterValidator(_slurm_name)] = Field(
        default="slurm_acct_db", description="StorageLoc, the MariaDB database (slurmdbd.conf(5); its default)")
    existing: bool = Field(
        default=False, description="true: join a running slurmdbd: accounts.sh neither adds the cluster "
        "nor creates the database, it only adds the accounts, QOS and users that are missing")
    storage_host: DbHost | None = Field(
        default=None, description="StorageHost: the site's MariaDB server (replicated or clustered) that slurmdbd "
        "uses instead of one on its own host; with two controllers a backup slurmdbd then runs on the one that is "
        "not the accounting host (DbdBackupHost), against the same database")


# options.slurm.repository: an apt repository's URL (http or https, no user or password: the bundle is committed),
# and its suite and components (deb822 sources.list(5) Suites/Components: a safe subset, they land in a .sources file)
APT_URL_PATTERN = rf"^https?://{_GIT_HOST}(?::[0-9]{{1,5}})?(?:/[A-Za-z0-9_.~%+/-]*)?$"
_APT_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+/-]{0,63}$")
AptUrl = Annotated[str, AfterValidator(_pattern(re.compile(APT_URL_PATTERN), "an http:// or https:// apt repository "
                                                "URL without a user or password", 512)),
                   WithJsonSchema({"type": "string", "pattern": APT_URL_PATTERN, "maxLength": 512})]
AptWord = Annotated[str, AfterValidator(_pattern(_APT_WORD, "an apt suite or component (letters, digits, '.', '_', "
                                                 "'+', '-', '/')", 64))]


class SlurmRepository(_Model):
    """The site's own apt repository of Slurm packages (a mirror of Debian's slurm-wlm from a newer suite, the
    site's rebuild, or SchedMD's own Debian packaging built by the site): the bring-up installs it on every Slurm
    host as a deb822 source signed by `key`, pinned above the OS's archive for Slurm's packages, before it installs
    Slurm. It must carry options.slurm_version under the package names `packaging` says."""

    url: AptUrl = Field(description="the repository's URL (deb822 URIs), e.g. https://mirror.example/slurm/debian")
    suite: AptWord = Field(description="its suite (Suites), e.g. bookworm")
    components: list[AptWord] = Field(default_factory=lambda: ["main"], min_length=1, max_length=16,
                                      description="its components (Components)")
    key: str = Field(min_length=1, max_length=4_096,
                     description="the ASCII-armored OpenPGP public key that signs its Release files, a file relative "
                     "to workload.yaml; the bundle carries a copy, which apt trusts for this repository only "
                     "(Signed-By)")
    packaging: Literal["debian", "schedmd"] = Field(
        default="debian", description="whose package names it carries: debian (Debian's slurm-wlm: slurmd, "
        "slurmctld, slurmdbd, slurm-client, libpam-slurm-adopt) or schedmd (SchedMD's debian/ packaging, Slurm 23.11+, "
        "built with `debuild`: slurm-smd, slurm-smd-slurmd, slurm-smd-slurmctld, slurm-smd-slurmdbd, "
        "slurm-smd-client, slurm-smd-libpam-slurm-adopt; they make no slurm user, the bring-up does)")
    _key: bytes | None = PrivateAttr(default=None)  # the key file's bytes, read by the loader (spec/load.py)


class SlurmOptions(_Model):
    """options.slurm: the GPU-node operations of a bare-metal Slurm plane (the README's Slurm section
    says what each does and how to install what Slurm does not ship). Each is on by default where a
    GPU site expects it; `auto` resolves from the fleet and the Slurm version. default_time/max_time
    are the site's job time limits (partitions' DefaultTime/MaxTime, and backfill's window)."""

    health_check: bool = Field(
        default=True, description="LBNL NHC as HealthCheckProgram with a generated nhc.conf (GPU count and type, "
        "fabric ports, health_check_mounts); a failing node is drained with the reason")
    health_check_interval: int = Field(default=300, ge=30, le=86_400, description="HealthCheckInterval, seconds")
    health_check_mounts: list[HostPath] = Field(
        default_factory=empty_list, max_length=64,
        description="filesystems every Slurm node must have mounted read-write (e.g. /home, /scratch)")
    containers: Literal["auto", "pyxis", "none"] = Field(
        default="auto", description="pyxis + enroot (srun --container-image); auto: pyxis when a Slurm pool has GPUs")
    mpi: Literal["auto", "pmix", "pmi2", "none"] = Field(
        default="auto", description="MpiDefault; auto: pmix from Slurm 23.11 (older mpi/pmix needs PMIx's "
        "development package on every node), else none")
    containment: bool = Field(
        default=True, description="PrologFlags=Contain, for pam_slurm_adopt: ssh into a job's node lands in its cgroup")
    admin_group: UnixName = Field(
        default="slurm-admins", description="the group that logs in to every node without a job there (pam_access "
        "before pam_slurm_adopt, with containment on); the bring-up's SSH account, when not root, is put in it")
    job_hygiene: bool = Field(
        default=True, description="Prolog/Epilog (prolog.d/, epilog.d/): after each job its user's /dev/shm files, "
        "enroot containers and leftover GPU processes go, and DCGM records the job's GPU statistics where installed")
    telemetry: bool = Field(
        default=True, description="the Slurm plane's telemetry (bare metal): the bring-up installs Debian's node exporter "
        "on every host and the bundle's Slurm exporter on the controllers; the bundle gives the "
        "Prometheus scrape jobs, alerts and a Grafana dashboard; false: the site monitors its hosts its own way")
    kill_on_bad_exit: bool = Field(default=True, description="KillOnBadExit=1: one crashed rank ends the step")
    unkillable_step_timeout: int = Field(
        default=180, ge=60, le=3_600, description="UnkillableStepTimeout, seconds (GPU teardown outlasts the 60 s default)")
    nvlink_spares: int | None = Field(
        default=None, ge=0, le=71, description="spare nodes (trays) per NVLink domain: topology/block's BlockSizes "
        "base is the domain less them, so a job of that size still fits a domain with that many nodes drained; "
        "null: 2 in domains of 16 nodes or more (an NVL72 rack's 18 trays: BlockSizes=16), 0 in smaller ones; "
        "with the site's own topology file (fleet.fabric.from), what its BlockSizes keep")
    imex: bool = Field(
        default=True, description="switch/nvidia_imex (Slurm 24.05+) when a pool's NVLink domains span nodes")
    nccl: bool = Field(default=True, description="NCCL settings for fleet.fabric.kind, given to every task by TaskProlog")
    state_save_location: HostPath | None = Field(
        default=None, description="StateSaveLocation; with more than one controller it must be a shared filesystem "
        "both mount (default /var/spool/slurmctld, host-local)")
    # Site policy that no fleet fact decides (issue 12): time limits, in Slurm time strings
    default_time: SlurmTime = Field(
        default="04:00:00", description="time limit of a job that gives none (partitions' DefaultTime, "
        "at most their MaxTime): backfill plans with it, so it must not be unlimited",
    )
    max_time: SlurmTime = Field(
        default="7-00:00:00", description="MaxTime of a partition none of whose workloads sets max_time",
    )
    # Site policy of an adopted site, and green-field defaults a GPU site needs (issue 22)
    cluster_name: QosName | None = Field(
        default=None, description="ClusterName, lower-case as slurmctld keeps it (slurmdbd's name for the "
        "cluster); default metadata.name")
    accounting: SlurmAccounting | None = Field(
        default=None, description="the accounting database, or an existing slurmdbd to join")
    partitions: list[SlurmPartition] | None = Field(
        default=None, min_length=1, max_length=256,
        description="the site's partitions; they replace orchgen's (`all`, one per pool, per class)")
    qos: list[SlurmQos] | None = Field(
        default=None, min_length=1, max_length=256,
        description="the site's QOS set; it replaces orchgen's normal and scavenger (with tenants)")
    priority: SlurmPriority | None = Field(default=None, description="priority weights and decay (with tenants)")
    scheduler_parameters: list[SchedParam] = Field(
        default_factory=empty_list, max_length=64,
        description="more SchedulerParameters items; one with the key of orchgen's replaces it")
    max_switch_wait: int = Field(
        default=86_400, ge=0, le=31_536_000,
        description="SchedulerParameters max_switch_wait, seconds: how long a job asking --switches=1 waits for "
        "one leaf (Slurm's default 300 spreads it after 5 minutes)")
    max_job_count: int = Field(default=100_000, ge=1, le=10_000_000,
                               description="MaxJobCount: jobs slurmctld holds (Slurm's default 10000)")
    max_array_size: int = Field(default=10_001, ge=1, le=4_000_001,
                                description="MaxArraySize: array indexes 0..N-1 (Slurm's default 1001)")
    reboot_program: HostPath | None = Field(
        default="/usr/sbin/reboot", description="RebootProgram, for `scontrol reboot` (driver updates); null: none")
    resume_timeout: int = Field(
        default=1_800, ge=60, le=86_400,
        description="ResumeTimeout, seconds: a rebooting node is marked DOWN after it (Slurm's default 60)")
    propagate_resource_limits: Literal["ALL", "NONE"] | list[Literal[RESOURCE_LIMITS]] = Field(  # type: ignore[valid-type]
        default="ALL", description="PropagateResourceLimits: ALL, NONE or a list of limits (AS, CORE, CPU, DATA, "
        "FSIZE, MEMLOCK, NOFILE, NPROC, RSS, STACK)")
    propagate_resource_limits_except: list[Literal[RESOURCE_LIMITS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["MEMLOCK"], max_length=10,
        description="with ALL: PropagateResourceLimitsExcept; default MEMLOCK, so the login shell's memlock "
        "limit never reaches a job (RDMA registration, Slurm FAQ); [] for all")
    prolog: HostPath | None = Field(default=None, description="Prolog: the site's, run by slurmd as root at a "
                                    "job's start on each node (orchgen's TaskProlog and PrologFlags are kept)")
    epilog: HostPath | None = Field(default=None, description="Epilog: the site's, run at a job's end on each node")
    repository: SlurmRepository | None = Field(
        default=None, description="the site's own apt repository of Slurm packages: the bring-up installs Slurm "
        "from it (every host; pinned above the OS's archive), and options.slurm_version is then the release it must "
        "provide, which no OS of the bring-up needs to package")


class Options(_Model):
    gang_scheduler: Literal[GANG_SCHEDULERS] = "auto"  # type: ignore[valid-type]
    slurm_on_kubernetes: Literal["auto", "slinky", "soperator", "none"] = "auto"
    split: Literal["auto", "leaf", "node"] = Field(
        default="auto",
        description="how a pool both planes want is split: whole leaf switches (leaf), contiguous blocks of "
        "nodes within a leaf (node), or auto: whole leaves where they fit the demands, by node where a pool "
        "has one leaf or a whole leaf would waste more than a plane's demand",
    )
    gitops: Literal["none", "kustomize", "argocd", "flux"] = "none"
    kubernetes_clusters: Literal["auto", "one"] = Field(
        default="auto",
        description="a Kubernetes plane beyond upstream's per-cluster envelope (5,000 nodes, 150,000 pods): auto "
        "plans it as worker clusters cut along the fabric behind a Kueue MultiKueue manager cluster; one keeps "
        "it one cluster (with a warning)")
    kubernetes_min_nodes: int = Field(
        default=4, ge=1, le=1_024,
        description="the fewest nodes a Kubernetes plane beside Slurm may have: a second plane costs its control "
        "plane (API server, etcd, scheduler), the GPU Operator's and Prometheus' pods on every node, Kueue, and "
        "its operators' time, which a plane of a node or three does not repay; smaller is refused (workloads "
        "batch on a Slurm site stay on Slurm by rule slurm-site-batch). Set it lower to opt in to a small "
        "plane. Not checked where the fleet itself has fewer nodes, where Kubernetes is the only plane, or "
        "where Slurm runs on Kubernetes (Kubernetes runs every node then)")
    kubernetes_cluster_max_nodes: int = Field(
        default=5_000, ge=1, le=5_000,
        description="with kubernetes_clusters auto: the most nodes one cluster of the plane may hold; a plane with "
        "more becomes MultiKueue worker clusters of at most this many nodes. Default and ceiling: upstream's "
        "5,000 (kubernetes.io/docs/setup/best-practices/cluster-large); a site sets less to keep each "
        "cluster's failure and upgrade domain smaller")
    serving: Literal["auto", "ray", "kserve", "plain"] = Field(
        default="auto", description="the serving stack of long-lived workloads (workloads[].serving.stack "
        "overrides it; a Python-native service is a RayService unless its own stack says else): auto picks a "
        "LeaderWorkerSet for a replica over several nodes, else a KServe InferenceService (a plain Deployment on k3s)")
    slurm_version: Version = "25.11"
    kubernetes_version: Version = "1.33"
    versions: dict[str, str] = Field(default_factory=empty_dict, description="chart version by component")
    strict: bool = Field(
        default=False,
        description="refuse (exit 2) instead of warning: a placeholder the site must fill, demand "
        "beyond capacity or quota, a workload given a tenant it did not name",
    )
    gitops_repo: GitUrl | None = Field(
        default=None,
        description="clone URL of the GitOps repository that Argo CD / Flux read this bundle from "
        "(the bundle sits at <metadata.name>/ in it); argocd writes it into its Applications",
        json_schema_extra={"pattern": GIT_URL_PATTERN, "maxLength": MAX_GIT_URL},
    )
    slurm: SlurmOptions = Field(default_factory=SlurmOptions,
                                description="GPU-node operations and site policy (time limits) of bare-metal Slurm")
    metrics: Literal["install", "site"] = Field(
        default="install",
        description="the Kubernetes plane's metrics stack: install (kube-prometheus-stack with the GPU "
        "dashboards and alerts) or site (the site runs its own Prometheus; give options.prometheus_url)",
    )
    gpu_health: Literal["install", "site"] = Field(
        default="install",
        description="GPU health on the Kubernetes plane: install (a DaemonSet per GPU pool runs the GPU check "
        "Slurm's NHC runs, gpu-health.sh, and reports it as the node condition orchgen.io/GPUHealthy; one "
        "controller cordons and taints a failing node nvidia.com/gpu-health=failed:NoSchedule) or site (the "
        "site runs its own, e.g. NVIDIA NVSentinel; the bundle installs none)",
    )
    prometheus_url: PrometheusUrl | None = Field(
        default=None,
        description="with options.metrics site: the site's Prometheus (http(s)://host:port), where the "
        "bundle's README and consumers of GPU metrics look",
        json_schema_extra={"pattern": PROMETHEUS_URL_PATTERN, "maxLength": MAX_GIT_URL},
    )


class Fleet(_Model):
    apiVersion: Literal["orchgen/v1alpha1"]
    kind: Literal["Fleet"]
    metadata: Metadata
    fleet: FleetSpec
    tenants: list[Tenant] = Field(default_factory=empty_list, max_length=1_024)
    workloads: list[Workload] = Field(min_length=1, max_length=4_096)
    options: Options = Options()
    site: Site | None = Field(default=None, description="what an adopted Slurm site configures that orchgen "
                              "does not model, carried verbatim with reasons (`orchgen import slurm` writes it)")


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of workload.yaml (for editors)."""
    schema = Fleet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "orchgen workload.yaml"
    from .schema_doc import document

    return document(schema)


Path_ = tuple[str | int, ...]  # a location in the document: keys and list indexes


def format_path(path: Path_) -> str:
    out = ""
    for part in path:  # a key is the user's: cut (a 10 MB unknown key is not a 10 MB error line)
        out += f"[{part}]" if isinstance(part, int) else (f".{cut(str(part))}" if out else cut(str(part)))
    return out


def _short(value: Any) -> str:
    # credentials masked before the cut: a cut URL no longer looks like one (errors.mask_urls)
    text = repr(mask_urls(value) if isinstance(value, str) else value)
    return text if len(text) <= 40 else text[:37] + "..."
