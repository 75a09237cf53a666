"""Platform profiles: the GPU servers sites buy, as their vendors document them.

A pool names one (`platform: dgx-h100`) and gets its facts: the CPU layout (sockets x cores x
threads), the installed memory, the GPUs and the socket each hangs off (gres.conf Cores=), the
network adapters with their RDMA device names, ports, netdevs and rates, split into the compute
rails (GPU traffic: NCCL_IB_HCA, NHC check_hw_ib, one Kubernetes network each) and the storage /
in-band adapters (never NCCL's), and the NVLink domain size. A pool may also give the same facts
itself (`cpu`, `slurmd_c`, `gpu.sockets`, `nics`); a fact a pool gives wins where the platform marks
it as one the buyer chooses (an OEM server's CPU SKU, its NIC cards), and must agree where the
platform fixes it (a DGX's CPUs, its ports).

Every profile names its source. A fact the source does not state (an OEM server's CPU SKU and its
adapters, which the buyer picks) is listed in `guessed`: the plan warns about it, naming what to give
instead. Which facts a profile leaves out entirely (nics=None) are never guessed: the pool must give
them, or the plan warns and keeps the fabric-wide defaults.

Adding a platform: one record in PLATFORMS with its source; tests/test_platforms.py holds every
record to the rules below (one socket per GPU, rails unique, a source per record).
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

COMPUTE = "compute"
STORAGE = "storage"


@dataclass(frozen=True)
class Nic:
    """One RDMA port: its device (`ibv_devices`, /sys/class/infiniband), port, netdev (`ibdev2netdev`),
    line rate in Gb/s (/sys/class/infiniband/DEV/ports/PORT/rate), role, and the GPU it sits beside."""

    device: str
    rate_gbps: int
    role: str = COMPUTE  # compute | storage
    port: int = 1
    netdev: str | None = None  # None: the source does not name it
    gpu: int | None = None  # the GPU behind the same PCIe switch (GPUDirect RDMA), where known
    # the link layer `netdev` is named for (a source's table names the ports in InfiniBand mode, and an
    # Ethernet port's netdev differs); None: the site's own (pool.nics), true on its fabric
    netdev_link: str | None = None
    # the pool's own `nics` (or its facts): the site says the port is in use. A platform's storage / in-band ports
    # are the adapters the machine has, cabled as the site chooses (a DGX's optional InfiniBand storage ports,
    # its in-band ports at the Ethernet rate of the site's switches), so discover holds them only to being there
    declared: bool = False

    def netdev_on(self, kind: str) -> str | None:
        """The netdev on a fabric of `kind` (infiniband | roce), where known."""
        return self.netdev if self.netdev_link in (None, kind) else None

    @property
    def hca(self) -> str:
        """`device:port`, as NCCL_IB_HCA and NHC's check_hw_ib name a port."""
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class Platform:
    """A named server platform's facts (CPU layout, GPU affinity, NIC rails), from its vendor's document."""

    name: str
    title: str
    source: str  # the document the facts come from
    gpu_type: str
    gpu_count: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_gib: int
    gpu_sockets: tuple[int, ...]  # the CPU socket (NUMA node) of each GPU
    nics: tuple[Nic, ...] | None  # None: the buyer chooses the adapters; the pool gives `nics`
    nvlink_domain_nodes: int = 1
    # facts the source does not fix (the buyer's configuration): a pool's own value wins, and without
    # one the plan warns that it is guessed. Names: cpu, memory, gpu_sockets.
    guessed: tuple[str, ...] = ()
    note: str = ""

    @property
    def compute(self) -> tuple[Nic, ...]:
        return tuple(n for n in self.nics or () if n.role == COMPUTE)


_DGX_H_GUIDE = ("NVIDIA DGX H100/H200 User Guide, Introduction (component table: 2x Xeon Platinum 8480C, 56 cores "
                "each, 2 TB) and Network Connections: table 'Network Modules' (OSFP port, ConnectX, CPU, GPU, "
                "netdev, RDMA device); docs.nvidia.com/dgx/dgxh100-user-guide")
# DGX H100/H200 compute ports as the user guide's 'Network Modules' table lists them: RDMA device,
# netdev, the GPU on the same PCIe switch. The two dual-port ConnectX-7 storage / in-band cards take the
# device numbers between them (mlx5_1, mlx5_2 in slot 1; mlx5_7, mlx5_8 in slot 2), in PCI bus order.
_DGX_H_COMPUTE = (("mlx5_0", "ibp24s0", 0), ("mlx5_3", "ibp64s0", 1), ("mlx5_4", "ibp79s0", 2),
                  ("mlx5_5", "ibp94s0", 3), ("mlx5_6", "ibp154s0", 4), ("mlx5_9", "ibp192s0", 5),
                  ("mlx5_10", "ibp206s0", 6), ("mlx5_11", "ibp220s0", 7))
_DGX_H_NICS = tuple(Nic(dev, 400, COMPUTE, 1, netdev, gpu, "infiniband") for dev, netdev, gpu in _DGX_H_COMPUTE) + tuple(
    Nic(dev, 400, STORAGE) for dev in ("mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"))
_EIGHT_TWO_SOCKETS = (0, 0, 0, 0, 1, 1, 1, 1)

# GB200 NVL72 compute tray: ports and RDMA devices from NVIDIA Mission Control's "North-South network
# deployment guide for DGX GB200" (Compute Tray Network Ports: left/right bay OSFP P3/P4 = mlx5_0,
# mlx5_1, mlx5_4, mlx5_5 InfiniBand; the BlueField-3 ports mlx5_2, mlx5_3, mlx5_6, mlx5_7 Ethernet).
_GB200_NICS = tuple(Nic(dev, 400, COMPUTE) for dev in ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5")) + tuple(
    Nic(dev, 200, STORAGE) for dev in ("mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7"))

PLATFORMS: dict[str, Platform] = {p.name: p for p in (
    Platform("dgx-h100", "NVIDIA DGX H100", _DGX_H_GUIDE, "h100", 8, 2, 56, 2, 2048, _EIGHT_TWO_SOCKETS,
             _DGX_H_NICS),
    Platform("dgx-h200", "NVIDIA DGX H200", _DGX_H_GUIDE, "h200", 8, 2, 56, 2, 2048, _EIGHT_TWO_SOCKETS,
             _DGX_H_NICS),
    Platform("dgx-b200", "NVIDIA DGX B200",
             "NVIDIA DGX B200 User Guide, Introduction (component table: 2x Xeon Platinum 8570, 56 cores each; "
             "2 TB; 4x OSFP for 8x single-port ConnectX-7 400 Gb/s; 2x dual-port BlueField-3); "
             "docs.nvidia.com/dgx/dgxb200-user-guide",
             "b200", 8, 2, 56, 2, 2048, _EIGHT_TWO_SOCKETS, None, guessed=("gpu_sockets",),
             note="the user guide's port table is not in the catalog: give the eight compute rails as `nics` "
                  "(ibdev2netdev on one node)"),
    Platform("gb200-nvl72", "NVIDIA GB200 NVL72 compute tray",
             "NVIDIA DGX GB200 User Guide (compute tray: two GB200 superchips, a 72-core Grace and 480 GB LPDDR5X "
             "each, 4 B200 GPUs; 18 trays per NVLink domain) and NVIDIA Mission Control North-South network "
             "deployment guide for GB200 (compute tray network ports)",
             "gb200", 4, 2, 72, 1, 894, (0, 0, 1, 1), _GB200_NICS, nvlink_domain_nodes=18),
    Platform("dell-xe9680-h100", "Dell PowerEdge XE9680, HGX H100 8-GPU",
             "Dell PowerEdge XE9680 spec sheet (2x 4th/5th Gen Xeon Scalable, up to 56 cores each; 8x H100 SXM "
             "on the HGX board; up to 10 PCIe Gen5 slots for the adapters the buyer picks)",
             "h100", 8, 2, 48, 2, 2048, _EIGHT_TWO_SOCKETS, None, guessed=("cpu", "memory", "gpu_sockets"),
             note="reference configuration 2x Xeon Platinum 8468 (48 cores)"),
    Platform("dell-xe9680-h200", "Dell PowerEdge XE9680, HGX H200 8-GPU",
             "Dell PowerEdge XE9680 spec sheet (as dell-xe9680-h100, with 8x H200 SXM)",
             "h200", 8, 2, 48, 2, 2048, _EIGHT_TWO_SOCKETS, None, guessed=("cpu", "memory", "gpu_sockets"),
             note="reference configuration 2x Xeon Platinum 8468 (48 cores)"),
    Platform("supermicro-sys-821ge-h100", "Supermicro SYS-821GE-TNHR, HGX H100 8-GPU",
             "Supermicro SYS-821GE-TNHR spec sheet (2x 4th/5th Gen Xeon Scalable; HGX H100 8-GPU; 8 PCIe Gen5 "
             "x16 slots for one adapter per GPU, chosen by the buyer)",
             "h100", 8, 2, 56, 2, 2048, _EIGHT_TWO_SOCKETS, None, guessed=("cpu", "memory", "gpu_sockets"),
             note="reference configuration 2x Xeon Platinum 8480+ (56 cores)"),
    Platform("supermicro-sys-821ge-h200", "Supermicro SYS-821GE-TNHR, HGX H200 8-GPU",
             "Supermicro SYS-821GE-TNHR spec sheet (as supermicro-sys-821ge-h100, with HGX H200 8-GPU)",
             "h200", 8, 2, 56, 2, 2048, _EIGHT_TWO_SOCKETS, None, guessed=("cpu", "memory", "gpu_sockets"),
             note="reference configuration 2x Xeon Platinum 8480+ (56 cores)"),
    Platform("dell-r760xa-l40s", "Dell PowerEdge R760xa, 4x L40S PCIe",
             "Dell design guide 'Generative AI in the Enterprise - Inferencing' (PowerEdge R760xa: up to 4 "
             "dual-width L40/L40S PCIe GPUs; 2x 4th/5th Gen Xeon Scalable); infohub.delltechnologies.com",
             "l40s", 4, 2, 32, 2, 512, (0, 0, 1, 1), None, guessed=("cpu", "memory", "gpu_sockets"),
             note="reference configuration 2x Xeon Gold 6448Y (32 cores), two GPUs per socket"),
    Platform("dell-r760xa-l4", "Dell PowerEdge R760xa, 4x L4 PCIe",
             "Dell PowerEdge R760xa spec sheet (2x 4th/5th Gen Xeon Scalable; single-wide L4 PCIe GPUs on the "
             "front risers)",
             "l4", 4, 2, 32, 2, 512, (0, 0, 1, 1), None, guessed=("cpu", "memory", "gpu_sockets"),
             note="reference configuration 2x Xeon Gold 6448Y (32 cores), four L4, two per socket"),
)}


def unknown(name: str) -> str:
    """The message for a platform name the catalog does not hold, with the closest one."""
    hint = difflib.get_close_matches(name, list(PLATFORMS), n=1)
    known = ", ".join(sorted(PLATFORMS))
    return (f"unknown platform {name[:40]!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + f"; orchgen knows {known}, or leave it out and give cpu, gpu.sockets and nics")


def check_name(value: str) -> str:
    if value not in PLATFORMS:
        raise ValueError(unknown(value))
    return value


def fill(data: Any) -> Any:
    """A pool's input with the platform's GPUs and NVLink domain filled in where the pool gives
    none (pydantic's before-validator of Pool): everything else that reads `pool.gpu` then sees them.
    An unknown name is left for the field's own check to refuse."""
    if not isinstance(data, dict):
        return data
    p = PLATFORMS.get(data.get("platform")) if isinstance(data.get("platform"), str) else None
    if p is None:
        return data
    out = dict(data)
    if "gpu" not in out:
        out["gpu"] = {"type": p.gpu_type, "count": p.gpu_count}
    if "nvlink_domain_nodes" not in out and p.nvlink_domain_nodes > 1:
        out["nvlink_domain_nodes"] = p.nvlink_domain_nodes
    return out


def of(pool: Any) -> Platform | None:
    return PLATFORMS.get(pool.platform) if getattr(pool, "platform", None) else None


def rails(pool: Any) -> tuple[Nic, ...] | None:
    """The pool's RDMA ports (its own `nics`, else its platform's); None when neither gives them."""
    if pool.nics is not None:
        return tuple(Nic(n.device, n.rate_gbps, n.role, n.port, n.netdev, n.gpu, declared=True) for n in pool.nics)
    p = of(pool)
    return p.nics if p is not None and p.nics is not None else None


def compute_rails(pool: Any) -> tuple[Nic, ...] | None:
    found = rails(pool)
    return None if found is None else tuple(n for n in found if n.role == COMPUTE)


def problems(pool: Any) -> Iterator[tuple[str, tuple]]:
    """Where a pool's own facts contradict what its platform fixes: (message, path below the pool)."""
    p = of(pool)
    if p is None:
        return
    where = f"platform {p.name} ({p.title})"
    gpu = pool.gpu
    if gpu is not None:
        if gpu.count != p.gpu_count and "gpu_count" not in p.guessed:
            yield f"{where} has {p.gpu_count} GPUs, not {gpu.count}", ("gpu", "count")
            return
        if gpu.type is not None and gpu.type.lower() != p.gpu_type:
            yield (f"{where} has {p.gpu_type} GPUs, not {gpu.type}: name the type as {p.gpu_type!r} "
                   "or pick the platform with these GPUs"), ("gpu", "type")
            return
    if pool.nvlink_domain_nodes not in (1, p.nvlink_domain_nodes):
        yield (f"{where} has NVLink domains of {p.nvlink_domain_nodes} nodes, not {pool.nvlink_domain_nodes}"
               ), ("nvlink_domain_nodes",)
        return
    if "cpu" not in p.guessed and pool.cpu is not None:
        cpu = pool.cpu  # threads per core may differ: SMT is a BIOS setting
        if (cpu.sockets, cpu.cores_per_socket) != (p.sockets, p.cores_per_socket):
            yield (f"{where} has {p.sockets} sockets x {p.cores_per_socket} cores, not {cpu.sockets} x "
                   f"{cpu.cores_per_socket}: leave cpu out, or leave platform out for another machine"), ("cpu",)
            return
    if "gpu_sockets" not in p.guessed and gpu is not None and gpu.sockets is not None \
            and tuple(gpu.sockets) != p.gpu_sockets:
        yield (f"{where} has its GPUs on sockets {list(p.gpu_sockets)} ({p.source.split(';')[0]}), not "
               f"{list(gpu.sockets)}"), ("gpu", "sockets")


def nic_problems(pool: Any) -> Iterator[tuple[str, tuple]]:
    """A pool's own `nics`: one entry per device port, GPUs the pool has."""
    if pool.nics is None:
        return
    seen: set[str] = set()
    for i, n in enumerate(pool.nics):
        hca = f"{n.device}:{n.port}"
        if hca in seen:
            yield f"{hca} is listed twice", ("nics", i, "device")
            return
        seen.add(hca)
        if n.gpu is not None and (pool.gpu is None or n.gpu >= pool.gpu.count):
            have = pool.gpu.count if pool.gpu is not None else 0
            yield f"names GPU {n.gpu} but the pool has {have} GPU(s), numbered from 0", ("nics", i, "gpu")
            return


def guesses(pool: Any, fabric_kind: str, slurm: bool = True, rails_used: bool = True) -> list[str]:
    """What the plan guesses about a GPU pool's nodes because neither a platform nor the pool's own
    facts give it: for the warning (an empty list: nothing guessed). `slurm`: the pool has Slurm nodes
    (their CPU layout, GPU affinity and memory land in slurm.conf and gres.conf); `rails_used`: its
    RDMA rails land in the bundle (bare-metal Slurm's nhc.conf and nccl.env)."""
    if pool.gpu is None:
        return []
    p = of(pool)
    out = []
    cpu_given = pool.cpu is not None or pool.slurmd_c is not None
    if not slurm:
        pass
    elif not cpu_given:
        if p is None:
            cpus = pool.cpus or 64
            out.append(f"the CPU layout (1 socket x {cpus} cores x 1 thread: Slurm then never keeps a core's "
                       "hyperthreads to one job; give cpu or slurmd_c)")
        elif "cpu" in p.guessed:
            out.append(f"the CPU layout ({p.sockets} sockets x {p.cores_per_socket} cores x {p.threads_per_core} "
                       f"threads, {p.note or 'the reference configuration'}; give cpu or slurmd_c)")
    mig = pool.gpu.mig is not None
    if slurm and pool.gpu.sockets is None and not mig and (pool.gpu.autodetect in (None, "off")):
        if p is None:
            out.append("the GPUs' CPU affinity (none: gres.conf has no Cores=, so --gpu-bind=closest binds "
                       "nothing; give gpu.sockets)")
        elif "gpu_sockets" in p.guessed:
            out.append(f"the GPUs' sockets ({list(p.gpu_sockets)}, not stated by the source; check with "
                       "`nvidia-smi topo -m` and give gpu.sockets)")
    if rails_used and fabric_kind in ("infiniband", "roce") and rails(pool) is None:
        out.append("the RDMA rails (NCCL_IB_HCA takes every mlx5 device, storage HCAs included, and NHC checks "
                   "only that one port is up; give nics from `ibdev2netdev`)")
    if slurm and p is not None and "memory" in p.guessed and pool.memory_gib is None and pool.slurmd_c is None:
        out.append(f"the memory ({p.memory_gib} GiB, the reference configuration; give memory_gib)")
    return out


def fact_warnings(fleet: Any, plan: Any) -> list[tuple[str, str]]:
    """(message, field) for each GPU pool whose nodes the plan must partly guess (`guesses`), for
    what the bundle writes of them: Slurm's node lines (any Slurm plane) and the rails (bare-metal Slurm)."""
    out: list[tuple[str, str]] = []
    if fleet.fleet.provider != "generic":  # a cloud's instance types are the provider's to describe
        return out
    plane = plan.slurm_plane
    slurm = {s.pool for s in plane.slices} if plane is not None else set()
    railed = slurm if plane is not None and plane.host == "bare-metal" else set()
    kind = fleet.fleet.fabric.kind
    for i, pool in enumerate(fleet.fleet.pools):
        if pool.name not in slurm:
            continue
        guessed = guesses(pool, kind, True, pool.name in railed)
        if not guessed:
            continue
        field = f"fleet.pools[{i}].platform" if pool.platform else f"fleet.pools[{i}].gpu"
        hint = "" if pool.platform else (f"; name its platform (one of {', '.join(sorted(PLATFORMS))}) "
                                         "or give the facts")
        out.append((f"pool {pool.name}: the plan guesses " + "; ".join(guessed) + hint, field))
    return out
