"""The Slurm model: what slurm.conf, gres.conf, cgroup.conf, the topology, accounts.sh and the Ray
launchers say, decided once from the Plan (`model(plan)`); files.py turns it into text, and the
Slurm-on-Kubernetes renderers (Slinky, Soperator) read it for the same nodes, GRES and partitions.

Decisions, each also told in the README's Slurm section:
* Only the Slurm plane's pool slices become nodes; one NodeName line per slice, with the node's
  layout (Sockets, or Boards/SocketsPerBoard as slurmd -C gave them; CoresPerSocket; ThreadsPerCore),
  so that Slurm never hands the threads of one core to two jobs (slurm.conf(5), CPUs; CR_Core).
* RealMemory: `real_memory` (never above what slurmd finds: "Low RealMemory" drains the node);
  CoreSpecCount and MemSpecLimit from `reserved` (slurm.conf(5): MemSpecLimit in MiB confines slurmd
  with task/cgroup and ConstrainRAMSpace=yes, which cgroup.conf sets). Which cores CoreSpecCount
  takes is Slurm's choice (CPUSpecList in `scontrol show node`; on the loopback harness 22.05 to
  26.05 took the last socket's top cores, not core_spec.html's alternating order); gres.conf's
  Cores= still list every core of a socket, as gres.conf(5) advises.
* GRES: `gpu:<type>:<count>`, or with MIG `gpu:<profile>:<count x per_gpu>`; gres.conf gives Cores=
  from gpu.sockets in Slurm's abstract core numbering (gres.conf(5), Cores: core 0 is the first core
  of the first socket), or AutoDetect (MIG needs AutoDetect=nvml: gres.html, MIG Management).
* SlurmctldHost from fleet.slurm.controllers (slurmctld compares its own short hostname with it),
  a placeholder that slurmctld refuses when not given; AccountingStorageHost from
  fleet.slurm.accounting, else the primary controller.
* Partitions: `all` (every Slurm node), one per pool (named after it), and one per workload class
  (`training`, `ray`) only when the Slurm plane runs more than one class. The default partition is
  CPU-only when the Slurm plane has a CPU pool (its pool's partition, or `cpu` over several CPU
  pools), else `all`: a job that names no partition then cannot take a GPU node's CPUs.
* Node Weight: CPU nodes 1, GPU nodes GPU_NODE_WEIGHT: Slurm gives a job the lowest-weight nodes
  that fit it (slurm.conf(5) Weight), so CPU-only work fills CPU nodes before GPU nodes.
* Time limits: a pool's time limit is the longest max_time of the Slurm workloads on it (a workload
  without one, or a pool without workloads, counts as options.slurm.max_time); a partition's MaxTime
  is the longest of its pools' (a class partition's: of its class's workloads); DefaultTime is options.slurm.default_time,
  at most the MaxTime. Backfill's window covers the longest MaxTime (SchedMD's sched_config guide).
* GPU defaults: each partition with GPU pools gets DefCpuPerGPU and DefMemPerGPU, the CPUs and
  memory per GPU of its smallest GPU node shape, counted from what jobs may use on it
  (`NodeGroup.usable_cpus`, `usable_memory`).
* Tenants: fair share (priority/multifactor) over slurmdbd accounting, billed in GPUs on GPU
  partitions (TRESBillingWeights, PriorityFlags=MAX_TRES); QOS `normal` and a preemptible
  `scavenger` (preempt/qos, REQUEUE); accounts.sh creates the accounts, QOS and users.
  Without tenants there is no accounting, no fair share, no QOS and slurmdbd is not needed.
* GPU-node operations (health checks, containers, MPI, containment, IMEX, HA, NCCL): `ops.py`, on
  bare metal only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...spec import hostlist, slurmtime
from ...errors import OrchgenError
from ...decide.plan import Plan, PoolSlice
from ...spec.hardware import MigLayout, NodeHardware
from .ops import Ops, operations
from .site import SitePolicy, policy, scheduler_parameters
from .topology import BlockTopology, Topology, topology

DEFAULT_PARTITION = "all"
CLASS_PARTITIONS = ("training", "ray")  # workload classes that run on Slurm, in this order
HEADROOM_MIN_GIB = 4
HEADROOM_FRACTION = 0.05
REPORTED_MARGIN_MIN_MIB = 512  # below slurmd -C's RealMemory, when MemSpecLimit keeps the OS its share
REPORTED_MARGIN_DIVISOR = 200  # 0.5%
KERNEL_FRACTION = 0.03  # what firmware and the kernel keep of the installed memory (1-3% on servers)
from ...contract import PLACEHOLDER_CONTROLLER  # noqa: F401  (the bundle contract's; re-exported)
# Names Slurm reads as keywords in NodeName=/PartitionName=/Nodes= values (case-insensitively).
SLURM_KEYWORDS = ("default", "all")
CPU_PARTITION = "cpu"  # the default partition over several CPU pools
CPU_NODE_WEIGHT = 1
GPU_NODE_WEIGHT = 100  # above every CPU node's: a job that fits on either gets CPU nodes first
NORMAL_QOS = "normal"
SCAVENGER_QOS = "scavenger"
# StoragePassScript (slurmdbd.conf(5)) exists from Slurm 25.11 (release notes: "Added ...
# StoragePassScript to enable database password rotation"); before it, slurmdbd.conf Includes a
# file that holds the StoragePass line.
STORAGE_PASS_SCRIPT_SINCE = (25, 11)
# slurmctld's own metrics (MetricsType=metrics/openmetrics): "Slurm 25.11 introduced" them (Metrics Guide,
# https://slurm.schedmd.com/metrics.html); older releases need an exporter of their own
METRICS_SINCE = (25, 11)
# ... but the GPU counts the GPU alert and dashboard read (slurm_partition_gpus, slurm_partition_jobs_gpus_alloc,
# slurm_nodes_gpus_*) came later: Slurm's NEWS, "Changes in 26.05.0rc1": "Add gpu statistics to metrics endpoints".
# Before 26.05 the bundle's exporter (bringup/slurm_metrics.py) writes them, beside 25.11's own metrics; it runs on
# 26.05 too, for the count no release serves: jobs pending on resources or priority (the exporter's
# orchgen_slurm_partition_jobs_pending_resources; 26.05's slurm_partition_jobs_pending counts every pending job,
# held, dependent and limited ones included: src/slurmctld/statistics.c, _statistics_part_aggregate_job)
GPU_METRICS_SINCE = (26, 5)
# The Slurm plane's Prometheus files (every bare-metal plane): the scrape jobs (node exporter on every host,
# DCGM exporter on GPU nodes, Slurm's metrics), the alerts, and a Grafana dashboard over them
METRICS_FILES = ["prometheus-slurm.yaml", "prometheus-slurm-rules.yaml", "grafana-slurm.json"]
# Debian's prometheus-node-exporter reads *.prom files here (its build's --collector.textfile.directory
# default, `prometheus-node-exporter --help`; the package ships the directory)
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
STORAGE_PASS_FILE = "/etc/slurm/slurmdbd-storage-pass.conf"
STORAGE_PASS_SCRIPT = "/etc/slurm/slurmdbd-storage-pass.sh"


@dataclass(frozen=True)
class GresLine:
    """One gres.conf line's worth of a pool's GPUs: device files and the cores close to them."""

    files: str  # File= value
    cores: str | None  # Cores= value, Slurm's abstract core ids; None: not given


@dataclass(frozen=True)
class NodeGroup:
    """One pool slice as Slurm nodes; gres.conf and slurm.conf both read `gres`/`gres_lines`."""

    pool: str
    nodes: tuple[str, ...]
    hw: NodeHardware
    gpu_type: str | None
    gpus: int  # physical GPUs per node
    nvlink_domain_nodes: int
    gres_typed: bool = True  # gpu.typed: false: Gres=gpu:N, gres.conf without Type=

    @property
    def hostlist(self) -> str:
        return hostlist.compress(self.nodes)

    @property
    def cpus(self) -> int:
        """Slurm CPUs per node (CPUs=): threads, or cores with pool.cpu_count: cores."""
        return self.hw.cores if self.hw.cpus_are_cores else self.hw.cpus

    @property
    def memory_gib(self) -> int:
        return self.hw.memory_gib

    @property
    def headroom_gib(self) -> int:
        """Whole GiB of the installed memory that RealMemory leaves out."""
        return self.memory_gib - self.real_memory // 1024

    @property
    def real_memory(self) -> int:
        """MiB, as slurm.conf counts it (see `real_memory`)."""
        return real_memory(self.hw)

    @property
    def mem_spec_limit(self) -> int:
        """MiB kept from jobs for slurmd, slurmstepd and the OS (slurm.conf MemSpecLimit)."""
        return self.hw.reserved_memory_gib * 1024

    @property
    def core_spec_count(self) -> int:
        return self.hw.reserved_cores

    @property
    def mig(self) -> MigLayout | None:
        return self.hw.mig if self.gpu_type else None

    @property
    def gres_type(self) -> str | None:
        """The GRES type: the GPU type, or with MIG the profile. Slurm matches a MIG GRES type as a
        substring of the profile NVML reports (e.g. nvidia_h100_80gb_hbm3_1g.10gb; gres.html, MIG
        Management), so the bare profile matches on every GPU model, and `<type>_<profile>` would not."""
        if not self.gpu_type:
            return None
        return self.mig.profile if self.mig else self.gpu_type

    @property
    def gres_count(self) -> int:
        return self.gpus * (self.mig.per_gpu if self.mig else 1)

    @property
    def gres(self) -> str | None:
        if not self.gpu_type:
            return None
        if not self.gres_typed:  # untyped: requests gpu:N only (gres.conf(5) Type is optional)
            return f"gpu:{self.gres_count}"
        return f"gpu:{self.gres_type}:{self.gres_count}"

    @property
    def autodetect(self) -> str:
        return self.hw.autodetect if self.gpu_type else "off"

    @property
    def gpu_files(self) -> str:
        return _files(0, self.gpus - 1)

    @property
    def gres_lines(self) -> tuple[GresLine, ...]:
        """File= (and Cores= from gpu.sockets) lines. None with MIG, whose devices only NVML finds, nor
        with AutoDetect and no sockets: NVML (or the driver) gives files and cores. With AutoDetect and
        sockets, slurmd checks the detected GPUs against these lines (gres.html, AutoDetect)."""
        if not self.gpu_type or self.mig:
            return ()
        sockets = self.hw.gpu_sockets
        if self.autodetect != "off" and not sockets:
            return ()
        if not sockets:
            return (GresLine(self.gpu_files, None),)
        out, start = [], 0
        for i in range(1, len(sockets) + 1):  # runs of consecutive GPUs on one socket
            if i == len(sockets) or sockets[i] != sockets[start]:
                first, last = self.hw.socket_cores(sockets[start])
                out.append(GresLine(_files(start, i - 1), f"{first}-{last}"))
                start = i
        return tuple(out)

    @property
    def features(self) -> str:
        return ",".join(dict.fromkeys(f for f in (self.pool, self.gpu_type) if f))

    @property
    def usable_cpus(self) -> int:
        """CPUs jobs may be given on one node: the node's CPUs less the threads of the cores
        CoreSpecCount keeps for the OS (`reserved.cores`), so the per-GPU defaults follow them. With
        pool.cpu_count: cores a Slurm CPU is a core."""
        if self.hw.cpus_are_cores:
            return self.hw.cores - self.hw.reserved_cores
        return self.hw.allocatable_cpus

    @property
    def usable_memory(self) -> int:
        """MiB jobs may be given on one node: RealMemory (already without the OS headroom) less
        MemSpecLimit (`reserved.memory_gib`, kept for slurmd and the OS), so the per-GPU defaults follow it."""
        return self.real_memory - self.mem_spec_limit

    @property
    def mem_per_cpu(self) -> int:
        """RealMemory per CPU jobs can have: MemSpecLimit and the specialised cores' CPUs taken out."""
        return self.usable_memory // self.usable_cpus

    @property
    def cpus_per_gpu(self) -> int:
        """Usable CPUs per `gpu` GRES unit: per GPU, or with MIG per MIG instance (what --gres=gpu:1 gets)."""
        return self.usable_cpus // self.gres_count if self.gres else 0

    @property
    def mem_per_gpu(self) -> int:
        """Usable MiB per `gpu` GRES unit (per MIG instance with MIG)."""
        return self.usable_memory // self.gres_count if self.gres else 0

    @property
    def weight(self) -> int:
        return GPU_NODE_WEIGHT if self.gres else CPU_NODE_WEIGHT

    @property
    def node_attrs(self) -> list[tuple[str, str]]:
        """The NodeName line after NodeName=, in slurm.conf's order."""
        hw = self.hw
        out = [("CPUs", str(self.cpus))]
        if hw.boards is not None:  # as slurmd -C gave it
            out += [("Boards", str(hw.boards)), ("SocketsPerBoard", str(hw.sockets_per_board))]
        else:
            out.append(("Sockets", str(hw.sockets)))
        out += [("CoresPerSocket", str(hw.cores_per_socket)), ("ThreadsPerCore", str(hw.threads_per_core)),
                ("RealMemory", str(self.real_memory))]
        if self.core_spec_count:
            out.append(("CoreSpecCount", str(self.core_spec_count)))
        if self.mem_spec_limit:
            out.append(("MemSpecLimit", str(self.mem_spec_limit)))
        if self.gres:
            out.append(("Gres", self.gres))
        return out + [("Features", self.features), ("Weight", str(self.weight)), ("State", "UNKNOWN")]

    @property
    def node_line(self) -> str:
        return " ".join([f"NodeName={self.hostlist}", *(f"{k}={v}" for k, v in self.node_attrs)])


def _files(first: int, last: int) -> str:
    return f"/dev/nvidia{first}" if first == last else f"/dev/nvidia[{first}-{last}]"


def headroom_gib(memory_gib: int) -> int:
    """Memory kept from Slurm for the OS: max(4 GiB, 5%) rounded up, never more than half."""
    want = max(HEADROOM_MIN_GIB, math.ceil(memory_gib * HEADROOM_FRACTION))
    return min(want, memory_gib // 2)


def real_memory(hw: NodeHardware) -> int:
    """slurm.conf RealMemory (MiB): never above what slurmd will find, since a node that reports
    less than its RealMemory is drained ("Low RealMemory").

    * Without `reserved.memory_gib`, RealMemory itself keeps the OS its share: the installed memory
      (or slurmd -C's RealMemory) less max(4 GiB, 5%), rounded up to whole GiB, at most half.
    * With it, MemSpecLimit keeps the reservation, and RealMemory is what the node reports: slurmd -C's
      RealMemory less max(512 MiB, 0.5%) (nodes of one model differ by a few MiB, and a kernel or
      firmware update takes a little more), or, from memory_gib alone, the installed memory less what
      firmware and the kernel keep (max(1 GiB, 3%), rounded up to whole GiB).
    """
    if not hw.reserved_memory_gib:
        if hw.reported_mib:
            return hw.reported_mib - headroom_gib(hw.reported_mib // 1024) * 1024
        return (hw.memory_gib - headroom_gib(hw.memory_gib)) * 1024
    if hw.reported_mib:
        return hw.reported_mib - max(REPORTED_MARGIN_MIN_MIB, hw.reported_mib // REPORTED_MARGIN_DIVISOR)
    return (hw.memory_gib - max(1, math.ceil(hw.memory_gib * KERNEL_FRACTION))) * 1024


@dataclass(frozen=True)
class Billing:
    """TRESBillingWeights of a partition, in CPU-equivalents: a CPU bills 1, a GiB of memory the
    node's CPUs per GiB, a GPU the node's CPUs per GPU. With PriorityFlags=MAX_TRES a job is billed
    its largest weighted TRES on a node, so a job with the default CPUs and memory per GPU is billed
    exactly its GPUs x the GPU weight, and one that takes a node's CPUs or memory without its GPUs
    is billed as if it took them (it kept them from GPU jobs)."""

    mem_per_gib: float  # rounded down, so memory never outbills the GPUs it comes with
    gpu: float  # 0: no GPUs in the partition; rounded up, so the GPU term is the largest

    @property
    def value(self) -> str:
        parts = ["CPU=1.0", f"Mem={_fmt_weight(self.mem_per_gib)}G"]
        if self.gpu:
            parts.append(f"GRES/gpu={_fmt_weight(self.gpu)}")
        return ",".join(parts)


def _fmt_weight(value: float) -> str:
    text = f"{value:.4f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


@dataclass(frozen=True)
class Partition:
    """A Slurm partition: its pools, nodes and topology."""

    name: str
    pools: tuple[str, ...]
    nodes: str  # hostlist, or ALL
    default: bool
    topology: str | None  # topology.yaml name; None: the cluster default
    def_mem_per_cpu: int
    why: str
    max_time: int = 0  # minutes
    default_time: int = 0  # minutes
    cpu_per_gpu: int = 0  # DefCpuPerGPU; 0: no GPUs, or fewer CPUs than GPUs on a node
    mem_per_gpu: int = 0  # DefMemPerGPU (MiB)
    billing: Billing | None = None  # TRESBillingWeights; None without accounting
    # options.slurm.partitions (a site's own): slurm.conf(5) PARTITION CONFIGURATION, absent: Slurm's
    state: str = "UP"
    max_nodes: int | None = None
    hidden: bool = False
    allow_groups: tuple[str, ...] = ()
    allow_accounts: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] = ()
    priority_tier: int | None = None
    oversubscribe: str | None = None
    site: bool = False  # from options.slurm.partitions

    @property
    def max_time_str(self) -> str:
        return slurmtime.format_minutes(self.max_time)

    @property
    def default_time_str(self) -> str:
        return slurmtime.format_minutes(self.default_time)

    @property
    def line(self) -> str:
        parts = [f"PartitionName={self.name}", f"Nodes={self.nodes}"]
        if self.default:
            parts.append("Default=YES")
        parts += [f"DefaultTime={self.default_time_str}", f"MaxTime={self.max_time_str}", f"State={self.state}",
                  f"DefMemPerCPU={self.def_mem_per_cpu}"]
        if self.max_nodes is not None:
            parts.append(f"MaxNodes={self.max_nodes}")
        if self.hidden:
            parts.append("Hidden=YES")
        for key, values in (("AllowGroups", self.allow_groups), ("AllowAccounts", self.allow_accounts),
                            ("AllowQos", self.allow_qos)):
            if values:
                parts.append(f"{key}={','.join(values)}")
        if self.priority_tier is not None:
            parts.append(f"PriorityTier={self.priority_tier}")
        if self.oversubscribe is not None:
            parts.append(f"OverSubscribe={self.oversubscribe}")
        if self.cpu_per_gpu:  # 0: a node with fewer CPUs than GPUs, where no whole CPU per GPU fits
            parts.append(f"DefCpuPerGPU={self.cpu_per_gpu}")
        if self.mem_per_gpu:
            parts.append(f"DefMemPerGPU={self.mem_per_gpu}")
        if self.billing:
            parts.append(f"TRESBillingWeights={self.billing.value}")
        if self.topology:
            parts.append(f"Topology={self.topology}")
        return " ".join(parts)


@dataclass(frozen=True)
class Account:
    """A tenant as a Slurm account: its share, who joins it, and its GPU cap."""

    name: str
    share: int
    users: tuple[str, ...]
    unix_group: str | None
    max_gpus: int | None
    qos: tuple[str, ...] = ()  # its own QOS list, sorted (empty: the whole set, added)
    default_qos: str | None = None  # with qos: its DefaultQOS


@dataclass(frozen=True)
class Backfill:
    """SchedulerParameters of sched/backfill, from the partitions' time limits (SchedMD's
    Scheduling Configuration Guide, https://slurm.schedmd.com/sched_config.html)."""

    window: int  # bf_window, minutes: the longest MaxTime, so no job's end lies beyond the plan
    resolution: int  # bf_resolution, seconds
    max_job_test: int = 1000  # bf_max_job_test: pending jobs looked at per cycle (Slurm's default 500)
    max_job_user: int = 50  # bf_max_job_user: one user's flood cannot take every slot of those 1000

    @property
    def window_str(self) -> str:
        return slurmtime.format_minutes(self.window)

    @property
    def value(self) -> str:
        return (f"bf_window={self.window},bf_resolution={self.resolution},bf_continue,"
                f"bf_max_job_test={self.max_job_test},bf_max_job_user={self.max_job_user}")


def backfill(partitions: tuple[Partition, ...]) -> Backfill:
    """bf_window at least the longest MaxTime ("A value at least as long as the highest allowed time
    limit is generally advisable to prevent job starvation"); a longer window gets a coarser
    bf_resolution ("if the value of bf_window is increased, then it is generally advisable to also
    increase bf_resolution"): 1 min up to a day (Slurm's defaults), 5 min up to a week, 10 min beyond."""
    window = max(p.max_time for p in partitions)
    resolution = 60 if window <= 1440 else (300 if window <= 10_080 else 600)
    return Backfill(window, resolution)


@dataclass(frozen=True)
class RayJob:
    """A Ray workload run on Slurm: the batch script that starts its cluster, and its size."""

    workload: str
    file: str
    partition: str
    nodes: int
    gpus_per_node: int
    account: str | None


@dataclass(frozen=True)
class SlurmModel:
    """Everything the Slurm files are rendered from: nodes, partitions, accounts and operations."""

    cluster: str
    source: str
    version: str
    host: str  # bare-metal | kubernetes
    groups: tuple[NodeGroup, ...]
    partitions: tuple[Partition, ...]
    topology: Topology
    accounts: tuple[Account, ...]  # empty without real tenants
    ray_jobs: tuple[RayJob, ...]
    controllers: tuple[str, ...]  # SlurmctldHost lines, primary first (a placeholder when not given)
    accounting_host: str  # AccountingStorageHost: fleet.slurm.accounting, else the primary controller
    ops: Ops | None = None  # bare metal only: Slurm on Kubernetes runs the operator's images
    site_default_time: int = 240  # options.slurm.default_time, minutes
    site_max_time: int = 10_080  # options.slurm.max_time, minutes
    site: SitePolicy | None = None  # options.slurm's site policy and green-field defaults (site.py)
    fleet: str = ""  # metadata.name (ClusterName unless options.slurm.cluster_name)

    @property
    def scheduler_parameters(self) -> str:
        """SchedulerParameters: backfill's items, the site's, max_switch_wait (site.scheduler_parameters)."""
        items = self.backfill.value.split(",")
        return scheduler_parameters(items, self.site) if self.site else ",".join(items)

    @property
    def site_default_time_str(self) -> str:
        return slurmtime.format_minutes(self.site_default_time)

    @property
    def site_max_time_str(self) -> str:
        return slurmtime.format_minutes(self.site_max_time)

    gpu_node_weight = GPU_NODE_WEIGHT
    cpu_node_weight = CPU_NODE_WEIGHT
    normal_qos = NORMAL_QOS
    scavenger_qos = SCAVENGER_QOS

    @property
    def backfill(self) -> Backfill:
        return backfill(self.partitions)

    @property
    def default_partition(self) -> Partition | None:
        """None only when the site's partitions mark none (jobs must then name one)."""
        return next((p for p in self.partitions if p.default), None)

    @property
    def site_partitions(self) -> bool:
        """The partitions are options.slurm.partitions, not orchgen's."""
        return any(p.site for p in self.partitions)

    @property
    def cpu_pools(self) -> list[str]:
        return [g.pool for g in self.groups if not g.gres]

    @property
    def storage_pass(self) -> tuple[str, str]:
        """How slurmdbd gets the database password without it in slurmdbd.conf: ("script", path) for
        StoragePassScript (Slurm 25.11+), else ("include", path) of a file with the StoragePass line."""
        version = tuple(int(x) for x in self.version.split("."))
        if version >= STORAGE_PASS_SCRIPT_SINCE:
            return "script", STORAGE_PASS_SCRIPT
        return "include", STORAGE_PASS_FILE

    @property
    def dbd_host(self) -> str:
        """DbdHost in slurmdbd.conf: the same host slurm.conf's AccountingStorageHost names."""
        return self.accounting_host

    @property
    def dbd_backup_host(self) -> str | None:
        """DbdBackupHost (slurmdbd.conf) and AccountingStorageBackupHost (slurm.conf): the first controller that is
        not the accounting host, where the controllers are paired and the site names a database both slurmdbd
        reach (options.slurm.accounting.storage_host: a backup against a database of its own host would keep
        another set of books). None: one slurmdbd."""
        if not self.accounting or not self.site or not self.site.storage_host or self.placeholder_controller:
            return None
        return next((c for c in self.controllers if c != self.accounting_host), None) \
            if len(self.controllers) > 1 else None

    @property
    def dbd_host_placeholder(self) -> bool:
        return self.accounting_host == PLACEHOLDER_CONTROLLER

    @property
    def placeholder_controller(self) -> bool:
        return self.controllers == (PLACEHOLDER_CONTROLLER,)

    @property
    def has_gpus(self) -> bool:
        return any(g.gres for g in self.groups)

    @property
    def accounting(self) -> bool:
        return bool(self.accounts)

    @property
    def node_count(self) -> int:
        return sum(len(g.nodes) for g in self.groups)

    @property
    def files(self) -> list[str]:
        """File names of `slurm_config`, in the order the README lists them."""
        out = ["slurm.conf", "gres.conf", "cgroup.conf", self.topology.file]
        if self.accounting:
            out += ["slurmdbd.conf", "mariadb-slurm.cnf", "accounts.sh"]
        out += [j.file for j in self.ray_jobs]
        return out + (self.ops.files if self.ops else []) + (METRICS_FILES if self.telemetry else [])

    @property
    def metrics(self) -> bool:
        """slurmctld serves OpenMetrics (25.11+) on a bare-metal plane: MetricsType and its scrape jobs."""
        return self.ops is not None and tuple(int(x) for x in self.version.split(".")) >= METRICS_SINCE

    @property
    def exporter(self) -> bool:
        """The bundle's Slurm exporter (bringup/slurm_metrics.py) runs on the controllers: wherever there is telemetry.
        Before 26.05 slurmctld serves no GPU counts (25.11: beside slurmctld's own metrics), and no release serves the
        count of pending jobs that wait on resources or priority, which the idle-GPU alert reads (issue 38)."""
        return self.telemetry

    @property
    def gpu_metrics(self) -> bool:
        """slurmctld serves the GPU counts itself (26.05+: slurm_partition_gpus, slurm_partition_jobs_gpus_alloc)."""
        return self.metrics and tuple(int(x) for x in self.version.split(".")) >= GPU_METRICS_SINCE

    @property
    def telemetry(self) -> bool:
        """A bare-metal plane with options.slurm.telemetry (issue 38): node exporter on every host, the scrape jobs,
        alerts and dashboard; Slurm's metrics from slurmctld itself (`metrics`, 25.11+; its GPU counts `gpu_metrics`,
        26.05+) and from the bundle's exporter (`exporter`: bringup/slurm_metrics.py)."""
        return self.ops is not None and self.ops.telemetry

    @property
    def hosts(self) -> list[str]:
        """Every Slurm host once: controllers, the slurmdbd host, then the nodes (the node exporter's targets)."""
        out = list(self.controllers) + [self.accounting_host] * self.accounting
        out += [n for g in self.groups for n in g.nodes]
        return list(dict.fromkeys(h for h in out if h != PLACEHOLDER_CONTROLLER))

    @property
    def gpu_nodes(self) -> list[str]:
        return [n for g in self.groups if g.gres for n in g.nodes]

    def outside(self, topo: BlockTopology) -> list[str]:
        """Pools whose nodes a block topology leaves out (Slurm logs "Blocks lack access")."""
        return [g.pool for g in self.groups if g.pool not in topo.pools]


_LAST: tuple[Plan, SlurmModel] | None = None  # the last plan's model: its renderers ask ~10 times (issue 41)


def model(plan: Plan) -> SlurmModel:
    """Everything the Slurm files say, decided once from the Plan. Raises OrchgenError where a real
    Slurm would fail on the plan (see `_refuse`). A plan is immutable and the model a function of it, so
    the last plan's model is kept and handed out again (slurm.conf, the bring-up, Slinky, Soperator and the
    README each ask: 10 builds of a 16,384-node plan's, 0.1 s); a new Plan object builds a new one."""
    global _LAST
    last = _LAST
    if last is not None and last[0] is plan:
        return last[1]
    built = _model(plan)
    _LAST = (plan, built)
    return built


def _model(plan: Plan) -> SlurmModel:
    plane = plan.slurm_plane
    if plane is None:
        raise OrchgenError("the plan has no Slurm plane")
    groups = tuple(_group(s) for s in plane.slices)
    topo = topology(plan)
    accounts = tuple(_account(t, plan) for t in plan.tenants if not t.implicit)
    _refuse_groups(plan, groups)  # before the partitions, whose per-CPU and per-GPU defaults divide by them
    partitions = _partitions(plan, groups, topo, bool(accounts))
    _refuse(plan, groups, partitions)
    controllers = plan.slurm_controllers or (PLACEHOLDER_CONTROLLER,)
    ops = operations(plan, groups) if plane.host == "bare-metal" else None
    site = policy(plan.slurm_options, any(g.gres for g in groups), bool(accounts), plan.source)
    return SlurmModel(plan.slurm_options.cluster_name or plan.name, plan.source, plan.slurm_version, plane.host,
                      groups, partitions, topo,
                      accounts, _ray_jobs(plan, groups, partitions, bool(accounts)), controllers,
                      plan.slurm_accounting or controllers[0], ops,
                      site_default_time=plan.slurm_default_time, site_max_time=plan.slurm_max_time, site=site,
                      fleet=plan.name)


def _group(s: PoolSlice) -> NodeGroup:
    return NodeGroup(s.pool, s.nodes, s.hardware, s.gpu_type, s.gpus_per_node if s.gpu_type else 0,
                     s.nvlink_domain_nodes, s.gres_typed)


def _classes(plan: Plan) -> dict[str, list[str]]:
    """Workload class -> pools its Slurm workloads run on (input order), for classes on Slurm."""
    out: dict[str, list[str]] = {}
    for w in plan.workloads_on("slurm"):
        if w.workload_class in CLASS_PARTITIONS:
            pools = out.setdefault(w.workload_class, [])
            if w.pool not in pools:
                pools.append(w.pool)
    return {c: out[c] for c in CLASS_PARTITIONS if c in out}


def _partitions(plan: Plan, groups: tuple[NodeGroup, ...], topo: Topology,
                accounting: bool) -> tuple[Partition, ...]:
    by_pool = {g.pool: g for g in groups}
    slurm_workloads = plan.workloads_on("slurm")

    def limit(pools: list[str], cls: str | None) -> int:
        """MaxTime: the longest time limit of the Slurm workloads of class `cls` on `pools`; without a
        class, the longest of its pools' (a pool no workload runs on takes the site's max_time)."""
        def longest(ws: list) -> int:
            return max((w.max_time or plan.slurm_max_time for w in ws), default=plan.slurm_max_time)
        if cls is not None:
            return longest([w for w in slurm_workloads if w.pool in pools and w.workload_class == cls])
        return max(longest([w for w in slurm_workloads if w.pool == p]) for p in pools)

    def make(name: str, pools: list[str], nodes: str, default: bool, why: str, cls: str | None = None,
             max_time: int | None = None, default_time: int | None = None, **site) -> Partition:
        gpu_groups = [by_pool[p] for p in pools if by_pool[p].gres]
        max_time = max_time or limit(pools, cls)
        return Partition(name, tuple(pools), nodes, default, topo.partition_topology(pools),
                         min(by_pool[p].mem_per_cpu for p in pools), why, max_time,
                         default_time or min(plan.slurm_default_time, max_time),
                         min((g.cpus_per_gpu for g in gpu_groups), default=0),
                         min((g.mem_per_gpu for g in gpu_groups), default=0),
                         _billing([by_pool[p] for p in pools]) if accounting else None, **site)

    if plan.slurm_options.partitions is not None:
        return _site_partitions(plan, groups, make)

    cpu_pools = [g.pool for g in groups if not g.gres]
    # the default: CPU-only when there are CPU pools (a pool named `cpu` keeps its own partition)
    combined_cpu = len(cpu_pools) > 1 and CPU_PARTITION not in by_pool
    default_name = (CPU_PARTITION if combined_cpu or CPU_PARTITION in cpu_pools else cpu_pools[0]) \
        if cpu_pools else DEFAULT_PARTITION
    out = [make(DEFAULT_PARTITION, list(by_pool), "ALL", default_name == DEFAULT_PARTITION,
                "every Slurm node" + ("; the default: the Slurm plane has no CPU pool"
                                      if default_name == DEFAULT_PARTITION else ""))]
    out += [make(g.pool, [g.pool], g.hostlist, default_name == g.pool,
                 f"pool {g.pool}" + ("; the default: CPU-only, so a job that names no partition stays off "
                                     "the GPU nodes" if default_name == g.pool else "")) for g in groups]
    if combined_cpu:
        nodes = hostlist.compress([n for p in cpu_pools for n in by_pool[p].nodes])
        out.append(make(CPU_PARTITION, cpu_pools, nodes, True,
                        f"the CPU pools ({', '.join(cpu_pools)}); the default: CPU-only, so a job that names "
                        "no partition stays off the GPU nodes"))
    classes = _classes(plan)
    if len(classes) > 1:
        for cls, pools in classes.items():
            pools = [p for p in pools if p in by_pool]
            if pools:
                nodes = hostlist.compress([n for p in pools for n in by_pool[p].nodes])
                out.append(make(cls, pools, nodes, False, f"{cls} workloads ({', '.join(pools)})", cls))
    return tuple(out)


def _site_partitions(plan: Plan, groups: tuple[NodeGroup, ...], make) -> tuple[Partition, ...]:
    """options.slurm.partitions as the site wrote them: over pools (their Slurm nodes) or a hostlist
    of Slurm nodes; orchgen's limits and per-CPU/GPU defaults for what the site leaves out."""
    by_node = {n: g.pool for g in groups for n in g.nodes}
    out = []
    for i, sp in enumerate(plan.slurm_options.partitions or ()):
        field = f"options.slurm.partitions[{i}]"
        if sp.pools is not None:
            missing = [p for p in sp.pools if p not in {g.pool for g in groups}]
            if missing:
                raise OrchgenError(f"partition {sp.name!r}: pool {missing[0]!r} has no Slurm nodes in this plan",
                                   plan.source, None, f"{field}.pools")
            pools = list(dict.fromkeys(sp.pools))
            names = [n for g in groups if g.pool in pools for n in g.nodes]
            nodes = "ALL" if len(names) == len(by_node) else hostlist.compress(names)
        elif sp.nodes == "ALL":
            pools, nodes = [g.pool for g in groups], "ALL"
        else:
            names = hostlist.expand(sp.nodes or "")
            stray = [n for n in names if n not in by_node]
            if stray:
                raise OrchgenError(f"partition {sp.name!r}: node {stray[0]!r} is not a Slurm node of this plan "
                                   f"({len(stray)} such)", plan.source, None, f"{field}.nodes")
            pools = list(dict.fromkeys(by_node[n] for n in names))
            nodes = hostlist.compress(names)
            if plan.slurm_plane.host != "bare-metal" and sorted(names) != sorted(
                    n for g in groups if g.pool in pools for n in g.nodes):
                raise OrchgenError(f"partition {sp.name!r}: Slurm on Kubernetes builds partitions from whole "
                                   "pools (NodeSets); give `pools`", plan.source, None, f"{field}.nodes")
        max_time = slurmtime.minutes(sp.max_time) if sp.max_time else None
        default_time = slurmtime.minutes(sp.default_time) if sp.default_time else None
        out.append(make(sp.name, pools, nodes, sp.default, f"{field}, the site's", None,
                        max_time, default_time, state=sp.state, max_nodes=sp.max_nodes, hidden=sp.hidden,
                        allow_groups=tuple(sp.allow_groups or ()), allow_accounts=tuple(sp.allow_accounts or ()),
                        allow_qos=tuple(sp.allow_qos or ()), priority_tier=sp.priority_tier,
                        oversubscribe=sp.oversubscribe, site=True))
    return tuple(out)


def _billing(groups: list[NodeGroup]) -> Billing:
    """Weights that bill every pool of the partition in CPU-equivalents (see Billing): memory at the
    lowest CPUs-per-GiB of its pools (rounded down), a GPU at the highest CPUs-per-GPU (rounded up),
    so that on every pool a GPU job with the default CPUs and memory per GPU is billed by its GPUs."""
    mem = min(g.usable_cpus / (g.usable_memory / 1024) for g in groups)
    gpu = max((g.usable_cpus / g.gres_count for g in groups if g.gres), default=0.0)
    return Billing(math.floor(mem * 10_000) / 10_000, math.ceil(gpu * 10_000) / 10_000)


def _ray_jobs(plan: Plan, groups: tuple[NodeGroup, ...], partitions: tuple[Partition, ...],
              tenants: bool) -> tuple[RayJob, ...]:
    names = {p.name for p in partitions}
    by_pool = {g.pool: g for g in groups}
    jobs = []
    for w in plan.workloads_on("slurm"):
        if w.workload_class != "ray":
            continue
        group = by_pool.get(w.pool, groups[0])
        per_node = group.gpus
        nodes = max(w.facts.nodes, -(-w.gpus // per_node) if per_node else 0)
        partition = "ray" if "ray" in names else group.pool if group.pool in names else next(
            (p.name for p in partitions if group.pool in p.pools), partitions[0].name)
        jobs.append(RayJob(w.name, f"ray-{w.name}.sbatch", partition, nodes, per_node,
                           w.tenant if tenants else None))
    return tuple(jobs)


def _refuse(plan: Plan, groups: tuple[NodeGroup, ...], partitions: tuple[Partition, ...]) -> None:
    """What a real slurmctld would reject, or mis-read, refused before anything is written."""
    pool_index = {p: i for i, p in enumerate(plan.fabric.pools)}
    seen: dict[str, str] = {}
    for p in partitions:
        if p.site:  # spec.checks._slurm_policy checked the site's names
            continue
        if p.name.lower() in SLURM_KEYWORDS and p.name != DEFAULT_PARTITION or p.name in seen:
            clash = seen.get(p.name, "a Slurm keyword")
            pool = next((g.pool for g in groups if g.pool == p.name), p.name)
            raise OrchgenError(
                f"pool {pool!r} would give a Slurm partition the name {p.name!r}, which is already "
                f"{clash}; rename the pool", plan.source, None,
                f"fleet.pools[{pool_index.get(pool, 0)}].name")
        seen[p.name] = f"the partition for {p.why}"


def _account(t, plan: Plan) -> Account:
    """A tenant's account; with tenants[].slurm_qos or slurm_default_qos, its own QOS list and DefaultQOS
    (spec/checks.py has made sure they name QOS of the set)."""
    if not (t.slurm_qos or t.slurm_default_qos):
        return Account(t.name, t.share, t.users, t.unix_group, t.max_gpus)
    site = plan.slurm_options.qos
    names = tuple(t.slurm_qos) or (tuple(q.name for q in site) if site else (NORMAL_QOS, SCAVENGER_QOS))
    default = t.slurm_default_qos or (NORMAL_QOS if NORMAL_QOS in names else names[0])
    return Account(t.name, t.share, t.users, t.unix_group, t.max_gpus, tuple(sorted(set(names))), default)


def _refuse_groups(plan: Plan, groups: tuple[NodeGroup, ...]) -> None:
    """Node groups a real slurmd would give jobs nothing on, or whose names Slurm mis-reads."""
    pool_index = {p: i for i, p in enumerate(plan.fabric.pools)}
    for g in groups:
        if g.mem_spec_limit and g.mem_spec_limit >= g.real_memory:
            raise OrchgenError(
                f"reserves {g.mem_spec_limit} MiB (MemSpecLimit) but RealMemory is {g.real_memory} MiB: "
                "slurmd would give jobs nothing", plan.source, None,
                f"fleet.pools[{pool_index.get(g.pool, 0)}].reserved.memory_gib")
        for node in (n for n in g.nodes if n.lower() in SLURM_KEYWORDS):
            raise OrchgenError(f"hostname {node!r} is a Slurm keyword in node lists; rename the node",
                               plan.source, None, f"fleet.pools[{pool_index.get(g.pool, 0)}].hostnames")
