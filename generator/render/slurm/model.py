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
* Partitions: `all` (every Slurm node, the default), one per pool (named after it), and one per
  workload class (`training`, `ray`) only when the Slurm plane runs more than one class.
* Tenants: fair share (priority/multifactor) over slurmdbd accounting; accounts.sh creates them.
  Without tenants there is no accounting and slurmdbd is not needed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...spec import hostlist
from ...errors import OrchgenError
from ...decide.plan import Plan, PoolSlice
from ...spec.hardware import MigLayout, NodeHardware
from .topology import BlockTopology, Topology, topology

DEFAULT_PARTITION = "all"
CLASS_PARTITIONS = ("training", "ray")  # workload classes that run on Slurm, in this order
HEADROOM_MIN_GIB = 4
HEADROOM_FRACTION = 0.05
REPORTED_MARGIN_MIN_MIB = 512  # below slurmd -C's RealMemory, when MemSpecLimit keeps the OS its share
REPORTED_MARGIN_DIVISOR = 200  # 0.5%
KERNEL_FRACTION = 0.03  # what firmware and the kernel keep of the installed memory (1-3% on servers)
# SlurmctldHost when fleet.slurm is not given: a name no machine has, so that slurmctld refuses to start
# ("This host (...) not a valid controller") until the site sets fleet.slurm.controllers.
PLACEHOLDER_CONTROLLER = "set-fleet-slurm-controllers"
# Names Slurm reads as keywords in NodeName=/PartitionName=/Nodes= values (case-insensitively).
SLURM_KEYWORDS = ("default", "all")


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

    @property
    def hostlist(self) -> str:
        return hostlist.compress(self.nodes)

    @property
    def cpus(self) -> int:
        return self.hw.cpus

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
        return f"gpu:{self.gres_type}:{self.gres_count}" if self.gpu_type else None

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
    def mem_per_cpu(self) -> int:
        """RealMemory per CPU jobs can have: MemSpecLimit and the specialised cores' CPUs taken out."""
        return (self.real_memory - self.mem_spec_limit) // self.hw.allocatable_cpus

    @property
    def node_attrs(self) -> list[tuple[str, str]]:
        """The NodeName line after NodeName=, in slurm.conf's order."""
        hw = self.hw
        out = [("CPUs", str(hw.cpus))]
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
        return out + [("Features", self.features), ("State", "UNKNOWN")]

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
class Partition:
    name: str
    pools: tuple[str, ...]
    nodes: str  # hostlist, or ALL
    default: bool
    topology: str | None  # topology.yaml name; None: the cluster default
    def_mem_per_cpu: int
    why: str

    @property
    def line(self) -> str:
        parts = [f"PartitionName={self.name}", f"Nodes={self.nodes}"]
        if self.default:
            parts.append("Default=YES")
        parts += ["MaxTime=INFINITE", "State=UP", f"DefMemPerCPU={self.def_mem_per_cpu}"]
        if self.topology:
            parts.append(f"Topology={self.topology}")
        return " ".join(parts)


@dataclass(frozen=True)
class RayJob:
    workload: str
    file: str
    partition: str
    nodes: int
    gpus_per_node: int
    account: str | None


@dataclass(frozen=True)
class SlurmModel:
    cluster: str
    source: str
    version: str
    host: str  # bare-metal | kubernetes
    groups: tuple[NodeGroup, ...]
    partitions: tuple[Partition, ...]
    topology: Topology
    accounts: tuple[tuple[str, int], ...]  # (tenant, share); empty without real tenants
    ray_jobs: tuple[RayJob, ...]
    controllers: tuple[str, ...]  # SlurmctldHost lines, primary first (a placeholder when not given)
    accounting_host: str  # AccountingStorageHost: fleet.slurm.accounting, else the primary controller

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
        return out + (["accounts.sh"] if self.accounting else []) + [j.file for j in self.ray_jobs]

    def outside(self, topo: BlockTopology) -> list[str]:
        """Pools whose nodes a block topology leaves out (Slurm logs "Blocks lack access")."""
        return [g.pool for g in self.groups if g.pool not in topo.pools]


def model(plan: Plan) -> SlurmModel:
    """Everything the Slurm files say, decided once from the Plan. Raises OrchgenError where a real
    Slurm would fail on the plan (see `_refuse`)."""
    plane = plan.slurm_plane
    if plane is None:
        raise OrchgenError("the plan has no Slurm plane")
    groups = tuple(_group(s) for s in plane.slices)
    topo = topology(plan)
    accounts = tuple((t.name, t.share) for t in plan.tenants if not t.implicit)
    partitions = _partitions(plan, groups, topo)
    _refuse(plan, groups, partitions)
    controllers = plan.slurm_controllers or (PLACEHOLDER_CONTROLLER,)
    return SlurmModel(plan.name, plan.source, plan.slurm_version, plane.host, groups, partitions, topo,
                      accounts, _ray_jobs(plan, groups, partitions, bool(accounts)), controllers,
                      plan.slurm_accounting or controllers[0])


def _group(s: PoolSlice) -> NodeGroup:
    return NodeGroup(s.pool, s.nodes, s.hardware, s.gpu_type, s.gpus_per_node if s.gpu_type else 0,
                     s.nvlink_domain_nodes)


def _classes(plan: Plan) -> dict[str, list[str]]:
    """Workload class -> pools its Slurm workloads run on (input order), for classes on Slurm."""
    out: dict[str, list[str]] = {}
    for w in plan.workloads_on("slurm"):
        if w.workload_class in CLASS_PARTITIONS:
            pools = out.setdefault(w.workload_class, [])
            if w.pool not in pools:
                pools.append(w.pool)
    return {c: out[c] for c in CLASS_PARTITIONS if c in out}


def _partitions(plan: Plan, groups: tuple[NodeGroup, ...], topo: Topology) -> tuple[Partition, ...]:
    by_pool = {g.pool: g for g in groups}

    def make(name: str, pools: list[str], nodes: str, default: bool, why: str) -> Partition:
        return Partition(name, tuple(pools), nodes, default, topo.partition_topology(pools),
                         min(by_pool[p].mem_per_cpu for p in pools), why)

    out = [make(DEFAULT_PARTITION, list(by_pool), "ALL", True, "every Slurm node; the default")]
    out += [make(g.pool, [g.pool], g.hostlist, False, f"pool {g.pool}") for g in groups]
    classes = _classes(plan)
    if len(classes) > 1:
        for cls, pools in classes.items():
            pools = [p for p in pools if p in by_pool]
            if pools:
                nodes = hostlist.compress([n for p in pools for n in by_pool[p].nodes])
                out.append(make(cls, pools, nodes, False, f"{cls} workloads ({', '.join(pools)})"))
    return tuple(out)


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
        partition = "ray" if "ray" in names else group.pool
        jobs.append(RayJob(w.name, f"ray-{w.name}.sbatch", partition, nodes, per_node,
                           w.tenant if tenants else None))
    return tuple(jobs)


def _refuse(plan: Plan, groups: tuple[NodeGroup, ...], partitions: tuple[Partition, ...]) -> None:
    """What a real slurmctld would reject, or mis-read, refused before anything is written."""
    pool_index = {p: i for i, p in enumerate(plan.fabric.pools)}
    seen: dict[str, str] = {}
    for p in partitions:
        if p.name.lower() in SLURM_KEYWORDS and p.name != DEFAULT_PARTITION or p.name in seen:
            clash = seen.get(p.name, "a Slurm keyword")
            pool = next((g.pool for g in groups if g.pool == p.name), p.name)
            raise OrchgenError(
                f"pool {pool!r} would give a Slurm partition the name {p.name!r}, which is already "
                f"{clash}; rename the pool", plan.source, None,
                f"fleet.pools[{pool_index.get(pool, 0)}].name")
        seen[p.name] = f"the partition for {p.why}"
    for g in groups:
        if g.mem_spec_limit and g.mem_spec_limit >= g.real_memory:
            raise OrchgenError(
                f"reserves {g.mem_spec_limit} MiB (MemSpecLimit) but RealMemory is {g.real_memory} MiB: "
                "slurmd would give jobs nothing", plan.source, None,
                f"fleet.pools[{pool_index.get(g.pool, 0)}].reserved.memory_gib")
        for node in (n for n in g.nodes if n.lower() in SLURM_KEYWORDS):
            raise OrchgenError(f"hostname {node!r} is a Slurm keyword in node lists; rename the node",
                               plan.source, None, f"fleet.pools[{pool_index.get(g.pool, 0)}].hostnames")
