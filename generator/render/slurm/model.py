"""The Slurm model: what slurm.conf, gres.conf, cgroup.conf, the topology, accounts.sh and the Ray
launchers say, decided once from the Plan (`model(plan)`); files.py turns it into text, and the
Slurm-on-Kubernetes renderers (Slinky, Soperator) read it for the same nodes, GRES and partitions.

Decisions, each also told in the README's Slurm section:
* Only the Slurm plane's pool slices become nodes; one NodeName line per slice.
* RealMemory = memory_gib x 1024 MiB minus max(4 GiB, 5%) (rounded up to whole GiB, at most half):
  the kernel and firmware keep 1-3% of installed RAM from slurmd (a RealMemory above what slurmd
  finds drains the node as "Low RealMemory"); the rest is for the OS, slurmd and the page cache.
* Partitions: `all` (every Slurm node, the default), one per pool (named after it), and one per
  workload class (`training`, `ray`) only when the Slurm plane runs more than one class.
* Tenants: fair share (priority/multifactor) over slurmdbd accounting; accounts.sh creates them.
  Without tenants there is no accounting and slurmdbd is not needed.
* GPU-node operations (health checks, containers, MPI, containment, IMEX, HA, NCCL): `ops.py`, on
  bare metal only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...spec import hostlist
from ...errors import OrchgenError
from ...decide.plan import Plan, PoolSlice
from .ops import Ops, operations
from .topology import BlockTopology, Topology, topology

DEFAULT_PARTITION = "all"
CLASS_PARTITIONS = ("training", "ray")  # workload classes that run on Slurm, in this order
HEADROOM_MIN_GIB = 4
HEADROOM_FRACTION = 0.05
# Names Slurm reads as keywords in NodeName=/PartitionName=/Nodes= values (case-insensitively).
SLURM_KEYWORDS = ("default", "all")


@dataclass(frozen=True)
class NodeGroup:
    """One pool slice as Slurm nodes; gres.conf and slurm.conf both read `gres`/`gpu_files`."""

    pool: str
    nodes: tuple[str, ...]
    cpus: int
    memory_gib: int
    headroom_gib: int
    gpu_type: str | None
    gpus: int
    nvlink_domain_nodes: int

    @property
    def hostlist(self) -> str:
        return hostlist.compress(self.nodes)

    @property
    def real_memory(self) -> int:
        """MiB, as slurm.conf counts it."""
        return (self.memory_gib - self.headroom_gib) * 1024

    @property
    def gres(self) -> str | None:
        return f"gpu:{self.gpu_type}:{self.gpus}" if self.gpu_type else None

    @property
    def gpu_files(self) -> str:
        return "/dev/nvidia0" if self.gpus == 1 else f"/dev/nvidia[0-{self.gpus - 1}]"

    @property
    def features(self) -> str:
        return ",".join(dict.fromkeys(f for f in (self.pool, self.gpu_type) if f))

    @property
    def mem_per_cpu(self) -> int:
        return self.real_memory // self.cpus


def headroom_gib(memory_gib: int) -> int:
    """Memory kept from Slurm for the OS: max(4 GiB, 5%) rounded up, never more than half."""
    want = max(HEADROOM_MIN_GIB, math.ceil(memory_gib * HEADROOM_FRACTION))
    return min(want, memory_gib // 2)


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
    ops: Ops | None = None  # bare metal only: Slurm on Kubernetes runs the operator's images

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
        out += (["accounts.sh"] if self.accounting else []) + [j.file for j in self.ray_jobs]
        return out + (self.ops.files if self.ops else [])

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
    ops = operations(plan, groups) if plane.host == "bare-metal" else None
    return SlurmModel(plan.name, plan.source, plan.slurm_version, plane.host, groups, partitions, topo,
                      accounts, _ray_jobs(plan, groups, partitions, bool(accounts)), ops)


def _group(s: PoolSlice) -> NodeGroup:
    return NodeGroup(s.pool, s.nodes, s.cpus, s.memory_gib, headroom_gib(s.memory_gib), s.gpu_type,
                     s.gpus_per_node if s.gpu_type else 0, s.nvlink_domain_nodes)


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
    pool_index = {p: i for i, p in enumerate(dict.fromkeys(leaf.pool for leaf in plan.fabric.leaves))}
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
        for node in (n for n in g.nodes if n.lower() in SLURM_KEYWORDS):
            raise OrchgenError(f"hostname {node!r} is a Slurm keyword in node lists; rename the node",
                               plan.source, None, f"fleet.pools[{pool_index.get(g.pool, 0)}].hostnames")
