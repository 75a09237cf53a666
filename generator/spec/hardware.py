"""A pool's node hardware as the site has it, resolved once from the input: sockets, cores, threads,
memory, what is reserved for the OS and the node agents, and its GPUs' socket affinity and MIG layout.

Three ways to say how a node's CPUs are built, from most to least exact:
- `slurmd_c`: the line `slurmd -C` prints on one node (Boards, SocketsPerBoard, CoresPerSocket,
  ThreadsPerCore, RealMemory as the kernel reports it);
- `cpu: {sockets, cores_per_socket, threads_per_core}`;
- `cpus` alone: ONE socket of `cpus` cores with one thread each. Slurm then treats every CPU as a
  core it can give to one job, never the two halves of a hyperthreaded core to two jobs, since it
  does not know about the halves; and it never again reads the count as `cpus` sockets (which it
  does when slurm.conf has CPUs= only). Give `cpu` (or `slurmd_c`) for the real layout.
Given together they must agree (`checks.py` says where they do not).

`memory_gib` is the installed memory; with `slurmd_c` alone it is RealMemory rounded up to whole GiB.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from . import mig as mig_table
from . import platforms
from .models import Path_, Pool

DEFAULT_CPUS = 64
DEFAULT_MEMORY_GIB = 256
# slurmd -C's RealMemory is MemTotal: below the installed memory by what firmware and the kernel keep
# (1-3% on servers). A reading far below `memory_gib` is a different machine, or a typo.
REPORTED_MIN_FRACTION = 0.85
AUTODETECT = ("off", "nvml", "nvidia")

# `slurmd -C` (slurmd.c, _print_config): NodeName=<n> [NodeAddr=..] CPUs=.. Boards=.. SocketsPerBoard=..
# CoresPerSocket=.. ThreadsPerCore=.. RealMemory=.. [Gres=..]; then "UpTime=..." on its own line.
SLURMD_C_INTS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
SLURMD_C_OPTIONAL = ("NodeAddr", "Gres")


class HardwareError(ValueError):
    """A hardware description that does not hold together: (message, path below the pool)."""

    def __init__(self, message: str, path: Path_ = ()):
        super().__init__(message)
        self.message, self.path = message, path


@dataclass(frozen=True)
class SlurmdC:
    """The line `slurmd -C` prints, parsed."""

    node: str
    cpus: int
    boards: int
    sockets_per_board: int
    cores_per_socket: int
    threads_per_core: int
    real_memory: int  # MiB
    gres: str | None

    @property
    def sockets(self) -> int:
        return self.boards * self.sockets_per_board


def parse_slurmd_c(line: str, cpus_are_cores: bool = False) -> SlurmdC:
    """Parse one `slurmd -C` line; HardwareError (naming the token) where it is not one. With
    `cpus_are_cores` (pool.cpu_count: cores) CPUs= may also count cores, as a slurm.conf NodeName
    line of a hyperthreaded node often does (slurm.conf(5) CPUs); the SlurmdC then counts threads."""
    text = line.strip()
    if "\n" in text:
        raise HardwareError("holds several lines; give the first line `slurmd -C` prints (NodeName=... RealMemory=...)")
    tokens = text.split()
    if not tokens or not tokens[0].startswith("NodeName="):
        raise HardwareError(f"does not start with NodeName=: {text[:40]!r} is not a `slurmd -C` line")
    values: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not value:
            raise HardwareError(f"{token!r} is not KEY=VALUE (a `slurmd -C` line is NodeName=... CPUs=... "
                                f"Boards=... SocketsPerBoard=... CoresPerSocket=... ThreadsPerCore=... RealMemory=...)")
        if key not in ("NodeName", *SLURMD_C_INTS, *SLURMD_C_OPTIONAL):
            raise HardwareError(f"unknown key {key!r}; a `slurmd -C` line has NodeName, CPUs, Boards, "
                                "SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory and maybe Gres")
        if key in values:
            raise HardwareError(f"{key} appears twice")
        values[key] = value
    missing = [k for k in SLURMD_C_INTS if k not in values]
    if missing:
        raise HardwareError(f"lacks {', '.join(missing)} (slurmd -C prints all of CPUs, Boards, SocketsPerBoard, "
                            "CoresPerSocket, ThreadsPerCore and RealMemory)")
    ints = {}
    for key in SLURMD_C_INTS:
        if not re.fullmatch(r"[0-9]{1,9}", values[key]) or int(values[key]) < 1:
            raise HardwareError(f"{key}={values[key]} is not a positive whole number")
        ints[key] = int(values[key])
    out = SlurmdC(values["NodeName"], ints["CPUs"], ints["Boards"], ints["SocketsPerBoard"], ints["CoresPerSocket"],
                  ints["ThreadsPerCore"], ints["RealMemory"], values.get("Gres"))
    product = out.sockets * out.cores_per_socket * out.threads_per_core
    if cpus_are_cores and out.cpus == out.sockets * out.cores_per_socket:
        from dataclasses import replace

        return replace(out, cpus=product)
    if product != out.cpus:
        raise HardwareError(f"CPUs={out.cpus} but Boards x SocketsPerBoard x CoresPerSocket x ThreadsPerCore = "
                            f"{product}: not a line slurmd -C printed")
    return out


@dataclass(frozen=True)
class MigLayout:
    """Every GPU of the pool cut into `per_gpu` MIG instances of `profile`."""

    profile: str  # e.g. 1g.10gb
    per_gpu: int

    @property
    def resource(self) -> str:
        """The extended resource the GPU Operator's device plugin advertises (mig.strategy mixed)."""
        return f"nvidia.com/mig-{self.profile}"

    @property
    def config_name(self) -> str:
        """The MIG manager configuration (node label nvidia.com/mig.config) that makes this layout."""
        return f"all-{self.profile}-x{self.per_gpu}"


@dataclass(frozen=True)
class NodeHardware:
    """A node's CPU layout and memory, as given, named by platform, or read from `slurmd -C`."""

    sockets: int  # in total
    cores_per_socket: int
    threads_per_core: int
    memory_gib: int  # installed (or RealMemory rounded up, when slurmd -C alone gives it)
    boards: int | None = None  # from slurmd -C: slurm.conf then says Boards/SocketsPerBoard as it does
    reported_mib: int | None = None  # slurmd -C's RealMemory: what the kernel reports
    reserved_cores: int = 0  # for the OS and the node agents (slurmd, kubelet)
    reserved_memory_gib: int = 0
    gpu_sockets: tuple[int, ...] = ()  # the socket of each GPU; empty: not given
    autodetect: str = "off"  # gres.conf's AutoDetect: off | nvml | nvidia
    mig: MigLayout | None = None
    described_by: str = "cpus"  # slurmd_c | cpu | platform | cpus: what the input gave
    cpus_are_cores: bool = False  # pool.cpu_count: cores: a Slurm CPU is a core (slurm.conf CPUs=cores)
    # the RDMA ports (pool.nics, else its platform's; spec/platforms.py); None: not known
    rails: tuple[platforms.Nic, ...] | None = None

    @property
    def compute_rails(self) -> tuple[platforms.Nic, ...]:
        return tuple(n for n in self.rails or () if n.role == platforms.COMPUTE)

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def cpus(self) -> int:
        return self.cores * self.threads_per_core

    @property
    def sockets_per_board(self) -> int:
        return self.sockets // (self.boards or 1)

    @property
    def allocatable_cpus(self) -> int:
        """CPUs (threads) left to jobs and pods once the reserved cores are taken out."""
        return self.cpus - self.reserved_cores * self.threads_per_core

    @property
    def allocatable_memory_gib(self) -> int:
        return self.memory_gib - self.reserved_memory_gib

    def socket_cores(self, socket: int) -> tuple[int, int]:
        """First and last of a socket's cores in Slurm's abstract numbering (gres.conf Cores=):
        core 0 is the first core of the first socket, core 1 the second (gres.conf(5), Cores)."""
        return socket * self.cores_per_socket, (socket + 1) * self.cores_per_socket - 1


def node_hardware(pool: Pool) -> NodeHardware:
    """The pool's hardware; the pool must have passed `problems` (load does that)."""
    c = parse_slurmd_c(pool.slurmd_c, pool.cpu_count == "cores") if pool.slurmd_c else None
    plat = platforms.of(pool)
    if c is not None:
        shape, by = (c.sockets, c.cores_per_socket, c.threads_per_core), "slurmd_c"
    elif pool.cpu is not None:
        shape, by = (pool.cpu.sockets, pool.cpu.cores_per_socket, pool.cpu.threads_per_core), "cpu"
    elif plat is not None:
        shape, by = (plat.sockets, plat.cores_per_socket, plat.threads_per_core), "platform"
    else:
        shape, by = (1, pool.cpus or DEFAULT_CPUS, 1), "cpus"
    if pool.memory_gib is not None:
        memory = pool.memory_gib
    elif c is not None:
        memory = math.ceil(c.real_memory / 1024)
    else:
        memory = plat.memory_gib if plat is not None else DEFAULT_MEMORY_GIB
    gpu = pool.gpu
    mig = MigLayout(gpu.mig.profile, gpu.mig.per_gpu) if gpu is not None and gpu.mig is not None else None
    autodetect = (gpu.autodetect if gpu is not None and gpu.autodetect else ("nvml" if mig else "off"))
    return NodeHardware(
        sockets=shape[0], cores_per_socket=shape[1], threads_per_core=shape[2], memory_gib=memory,
        boards=c.boards if c is not None else None, reported_mib=c.real_memory if c is not None else None,
        reserved_cores=pool.reserved.cores if pool.reserved else 0,
        reserved_memory_gib=pool.reserved.memory_gib if pool.reserved else 0,
        gpu_sockets=_gpu_sockets(pool, plat, shape[0]), autodetect=autodetect, mig=mig,
        described_by=by, cpus_are_cores=pool.cpu_count == "cores", rails=platforms.rails(pool))


def _gpu_sockets(pool: Pool, plat, sockets: int) -> tuple[int, ...]:
    """The socket of each GPU: the pool's gpu.sockets, else its platform's (not with MIG, whose
    devices and cores only NVML gives, nor where the platform's would not fit the node given)."""
    gpu = pool.gpu
    if gpu is None:
        return ()
    if gpu.sockets is not None:
        return tuple(gpu.sockets)
    if plat is None or gpu.mig is not None or gpu.count != plat.gpu_count or max(plat.gpu_sockets) >= sockets:
        return ()
    return plat.gpu_sockets


def problems(pool: Pool, slurm_version: str | None = None) -> Iterator[tuple[str, Path_]]:
    """What does not hold together in a pool's hardware: (message, path below the pool)."""
    c = None
    if pool.slurmd_c is not None:
        try:
            c = parse_slurmd_c(pool.slurmd_c, pool.cpu_count == "cores")
        except HardwareError as exc:
            yield f"not a `slurmd -C` line: {exc.message}", ("slurmd_c",)
            return
    if pool.cpu is not None:
        cpu = pool.cpu
        total = cpu.sockets * cpu.cores_per_socket * cpu.threads_per_core
        if pool.cpus is not None and total != pool.cpus and not (
                pool.cpu_count == "cores" and pool.cpus == cpu.sockets * cpu.cores_per_socket):
            yield (f"cpus is {pool.cpus} but cpu gives {cpu.sockets} sockets x {cpu.cores_per_socket} cores x "
                   f"{cpu.threads_per_core} threads = {total}"), ("cpus",)
            return
        if c is not None and (cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core) != (
                c.sockets, c.cores_per_socket, c.threads_per_core):
            yield (f"cpu is {cpu.sockets} sockets x {cpu.cores_per_socket} cores x {cpu.threads_per_core} threads "
                   f"but slurmd_c says {c.sockets} (Boards={c.boards} x SocketsPerBoard={c.sockets_per_board}) x "
                   f"{c.cores_per_socket} x {c.threads_per_core}"), ("cpu",)
            return
    if c is not None and pool.cpus is not None and pool.cpus != c.cpus and not (
            pool.cpu_count == "cores" and pool.cpus == c.sockets * c.cores_per_socket):
        yield f"cpus is {pool.cpus} but slurmd_c says CPUs={c.cpus}", ("cpus",)
        return
    if c is not None and pool.memory_gib is not None:
        installed = pool.memory_gib * 1024
        if not REPORTED_MIN_FRACTION * installed <= c.real_memory <= installed:
            yield (f"memory_gib {pool.memory_gib} ({installed} MiB) does not fit slurmd_c's RealMemory="
                   f"{c.real_memory}: the kernel reports a little less than what is installed (at least "
                   f"{REPORTED_MIN_FRACTION:.0%}), never more"), ("memory_gib",)
            return
    hw = node_hardware(pool)
    yield from _reserved(pool, hw)
    yield from _gpu(pool, hw, c, slurm_version)


def _reserved(pool: Pool, hw: NodeHardware) -> Iterator[tuple[str, Path_]]:
    if pool.reserved is None:
        return
    if hw.reserved_cores >= hw.cores:
        yield (f"reserves {hw.reserved_cores} cores but the node has {hw.cores} "
               f"({hw.sockets} sockets x {hw.cores_per_socket}): nothing would be left for jobs"), ("reserved", "cores")
    reported = hw.reported_mib / 1024 if hw.reported_mib else hw.memory_gib
    if hw.reserved_memory_gib >= reported:
        yield (f"reserves {hw.reserved_memory_gib} GiB but the node has {_gib(reported)} GiB: nothing would be "
               "left for jobs"), ("reserved", "memory_gib")


def _gib(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _gpu(pool: Pool, hw: NodeHardware, c: SlurmdC | None, slurm_version: str | None) -> Iterator[tuple[str, Path_]]:
    gpu = pool.gpu
    if gpu is None:
        return
    if gpu.sockets is not None:
        if len(gpu.sockets) != gpu.count:
            yield f"lists {len(gpu.sockets)} sockets for {gpu.count} GPUs: give the socket of each GPU", ("gpu", "sockets")
            return
        bad = [s for s in gpu.sockets if s >= hw.sockets]
        if bad:
            yield (f"names socket {bad[0]} but the node has {hw.sockets} socket(s), numbered from 0"), ("gpu", "sockets")
            return
    if gpu.mig is not None:
        yield from _mig(gpu, hw)
    if gpu.autodetect == "nvidia" and slurm_version and _version(slurm_version) < (24, 11):
        yield (f"AutoDetect=nvidia needs Slurm 24.11 or newer (options.slurm_version is {slurm_version}); "
               "use nvml, or off with gpu.sockets"), ("gpu", "autodetect")
    if c is not None and c.gres:
        yield from _detected_gres(gpu, hw, c.gres)


def _mig(gpu, hw: NodeHardware) -> Iterator[tuple[str, Path_]]:
    if gpu.type is None:  # checks._slurm_policy asks for it
        return
    offered = mig_table.profiles_of(gpu.type)
    if offered is None:
        known = ", ".join(sorted(mig_table.PROFILES))
        yield (f"orchgen does not know the MIG profiles of GPU type {gpu.type!r} (it knows {known}); "
               "name the type as one of these, or leave MIG out"), ("gpu", "mig")
        return
    profile = gpu.mig.profile
    if profile not in offered:
        yield (f"{gpu.type} offers no MIG profile {profile!r}; it offers "
               f"{', '.join(f'{p} (up to {n})' for p, n in offered.items())}"), ("gpu", "mig", "profile")
        return
    if gpu.mig.per_gpu > offered[profile]:
        yield (f"{offered[profile]} instances of {profile} fit on one {gpu.type}, not {gpu.mig.per_gpu}"
               ), ("gpu", "mig", "per_gpu")
        return
    if gpu.autodetect not in (None, "nvml"):
        yield (f"MIG needs autodetect: nvml: Slurm finds MIG devices through NVML only (AutoDetect=nvidia does not "
               f"detect MIGs, and File= lines cannot name them); got {gpu.autodetect}"), ("gpu", "autodetect")
        return
    if gpu.sockets is not None:
        yield ("gpu.sockets with MIG: Slurm takes MIG devices and their cores from NVML only (its AutoDetect "
               "sanity check does not support MIGs); leave sockets out"), ("gpu", "sockets")


def _detected_gres(gpu, hw: NodeHardware, gres: str) -> Iterator[tuple[str, Path_]]:
    """slurmd -C prints the GPUs AutoDetect finds: their count must be the pool's."""
    found = 0
    names = []
    for item in gres.split(","):
        parts = re.sub(r"\(.*\)$", "", item).split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            found += int(parts[-1])
            names.append(parts[1] if len(parts) == 3 else "")
    want = gpu.count * (hw.mig.per_gpu if hw.mig else 1)
    if found and found != want:
        what = f"{gpu.count} GPUs x {hw.mig.per_gpu} MIG instances" if hw.mig else f"{gpu.count} GPUs"
        yield f"slurmd_c found Gres={gres} ({found}) but the pool has {what} = {want}", ("gpu", "count")
        return
    want_type = hw.mig.profile if hw.mig else gpu.type
    if want_type and gpu.typed and hw.autodetect != "off" and names and any(want_type not in n for n in names if n):
        # gres.html, AutoDetect: the slurm.conf type must equal, or be a substring of, the detected name
        yield (f"AutoDetect finds {', '.join(sorted(set(names)))}, which does not contain the GRES type "
               f"{want_type!r}: slurmd would not match them; use a substring of the detected name"), ("gpu", "type")


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]  # 25.11.1 is a 25.11
    return int(major), int(minor)
