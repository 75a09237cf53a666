"""The GPU-node operations of a bare-metal Slurm plane (options.slurm), decided once from the Plan
and the Slurm version: what slurm.conf's operations settings, nhc.conf, gpu-health.sh,
plugstack.conf(.d), enroot.conf, nccl.env and task-prolog.sh say. The README's Slurm section tells
the operator the same decisions and how to install what Slurm does not ship (NHC, pyxis, enroot).

Decisions (each setting's one-line why, with its source, sits beside it in the file it lands in):
* Health: LBNL NHC as HealthCheckProgram, every 5 minutes in any node state, spread over the
  interval (CYCLE). nhc.conf checks per pool the GPU count and type (gpu-health.sh, nvidia-smi), the
  fabric's RDMA ports (infiniband, roce) and the site's mounts. NHC drains a failing node with its
  reason.
* Containers: pyxis (SPANK) + enroot where a Slurm pool has GPUs; the plugin line is `optional`.
* MPI: pmix from Slurm 23.11 (older mpi/pmix opens the unversioned libpmix.so that only PMIx's
  development package installs: SchedMD bug 14868, fixed in 23.02.5), else none with a note.
* Containment: PrologFlags=Contain for pam_slurm_adopt (pam_systemd off for sshd, options.slurm.admin_group let in
  by pam_access); KillOnBadExit=1; UnkillableStepTimeout=180.
* IMEX: switch/nvidia_imex (Slurm 24.05+) when an NVLink domain spans nodes; older: a note.
* HA: StateSaveLocation (shared between controllers) and SlurmctldTimeout.
* NCCL: one small table per fabric kind, given to every task through TaskProlog.
* Job hygiene: Prolog=prolog.d/* (DCGM job statistics start) and Epilog=epilog.d/* (the job user's /dev/shm
  files, enroot containers, leftover GPU processes; DCGM statistics kept): globs, accepted from 22.05 on.

Slurm on Kubernetes (Slinky, Soperator) gets none of this: the operator's images, not slurm/, make
its nodes, and the GPU operator checks its GPUs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ...decide.plan import Plan
from ...spec import hostlist

ETC = "/etc/slurm"  # where the README installs slurm/ on the controllers and every node
NHC_PROGRAM = "/usr/sbin/nhc"  # LBNL NHC's install path (its RPM/deb and `make install` with prefix /usr)
PYXIS_PLUGIN = "/usr/local/lib/slurm/spank_pyxis.so"  # pyxis `make install` (NVIDIA/pyxis README)
DEFAULT_STATE_SAVE = "/var/spool/slurmctld"
SLURMCTLD_TIMEOUT = 120
IMEX_CHANNELS = 2048
IMEX_MIN = (24, 5)  # switch/nvidia_imex first ships in Slurm 24.05 (src/plugins/switch/nvidia_imex)
PMIX_AUTO_MIN = (23, 11)  # mpi/pmix opens libpmix.so.2 from 23.02.5 on (SchedMD commit 5d35aa58ad)
NCCL_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


@dataclass(frozen=True)
class NcclVar:
    """One line of nccl.env: a variable NCCL reads, its value for this fabric, why, and its docs anchor."""

    name: str
    value: str
    why: str
    anchor: str
    site: bool = False  # a value only the site knows: written commented out, as an example

    @property
    def doc(self) -> str:
        return f"{NCCL_DOCS}#{self.anchor}"


_MLX5 = NcclVar("NCCL_IB_HCA", "mlx5", "RDMA devices whose name starts with mlx5 (ConnectX); on rail-optimized "
                "nodes list the compute rails exactly (=mlx5_0,mlx5_3,...) so storage HCAs stay out", "nccl-ib-hca")
# The one table of NCCL settings per fleet.fabric.kind.
NCCL: dict[str, tuple[NcclVar, ...]] = {
    "infiniband": (_MLX5,),
    "roce": (
        _MLX5,
        NcclVar("NCCL_IB_GID_INDEX", "3", "RoCE v2 over IPv4 is GID index 3 on ConnectX (show_gids); NCCL before "
                "2.21 defaults to 0, a RoCE v1 link-local GID that does not cross a router", "nccl-ib-gid-index"),
        # RoCE's lossless class when fleet.fabric does not say: DSCP 26 at priority 3, what NVIDIA's switch QoS
        # ships for RoCE (Cumulus Linux user guide, "RDMA over Converged Ethernet - RoCE": lossless mode trusts
        # DSCP 26 -> switch priority 3, CNPs at DSCP 48); NCCL_IB_TC carries the DSCP in its upper six bits
        NcclVar("NCCL_IB_TC", "104", "the IP traffic class of NCCL's RoCE packets, DSCP 26 x 4: the class the "
                "switches keep lossless (fleet.fabric.traffic_class); NCCL's default 0 rides the lossy queue",
                "nccl-ib-tc"),
        NcclVar("NCCL_IB_SL", "3", "the priority of that lossless class (fleet.fabric.service_level); NCCL's "
                "default 0 is best effort", "nccl-ib-sl"),
    ),
    "ethernet": (
        NcclVar("NCCL_IB_DISABLE", "1", "no RDMA on this fabric: NCCL goes straight to TCP sockets instead of "
                "probing verbs devices", "nccl-ib-disable"),
        NcclVar("NCCL_SOCKET_IFNAME", "=eth0", "the interface(s) between nodes; the default takes any but lo and "
                "docker*, so set it where a node has more than one", "nccl-socket-ifname", site=True),
    ),
}


@dataclass(frozen=True)
class GpuCheck:
    """nhc.conf's GPU check for one pool: NHC match strings covering its nodes, and what it must have."""

    pool: str
    targets: tuple[str, ...]
    count: int
    gpu_type: str
    # gpu-health.sh's third argument on nodes of an NVLink domain that spans nodes (GB200 NVL72): "imex"
    # (fabric state and the IMEX daemon, which the bring-up configures) or "fabric" (options.slurm.imex off)
    fabric: str = ""


@dataclass(frozen=True)
class RailCheck:
    """nhc.conf's port checks for one pool whose compute rails are known: each port Active, LinkUp, at its rate."""

    pool: str
    targets: tuple[str, ...]
    ports: tuple[tuple[str, int], ...]  # (device:port, rate in Gb/s)


@dataclass(frozen=True)
class HealthCheck:
    """What the node health check tests, and how often: GPUs, fabric ports, mounts."""

    interval: int
    node_state: str
    gpus: tuple[GpuCheck, ...]
    fabric_ports: bool  # RDMA ports (InfiniBand or RoCE) must be up
    mounts: tuple[str, ...]
    rails: tuple[RailCheck, ...] = ()  # pools whose compute rails are known: every rail, at its rate
    # NHC match strings of the nodes whose rails are not known (("*",) when no pool's are): any one port up
    any_port: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class Imex:
    """NVIDIA IMEX for Slurm: the pools whose NVLink domains span nodes, and one IMEX domain each."""

    pools: tuple[str, ...]  # pools whose NVLink domains span nodes
    domain_nodes: int  # the largest domain, in nodes
    supported: bool  # the Slurm version has switch/nvidia_imex
    domains: tuple[tuple[str, str], ...] = ()  # (NVLink domain, hostlist) of the Slurm nodes: one IMEX domain each
    channels: int = IMEX_CHANNELS


@dataclass(frozen=True)
class Ops:
    """How the Slurm plane runs jobs: health checks, containers, MPI, job containment, IMEX."""

    health: HealthCheck | None
    containers: str  # pyxis | none
    mpi: str  # pmix | pmi2 | none
    mpi_asked: bool  # options.slurm.mpi named it (not auto)
    containment: bool
    kill_on_bad_exit: bool
    unkillable_step_timeout: int
    imex: Imex | None
    controllers: tuple[str, ...]  # fleet.slurm.controllers; empty: one, the host named "slurmctld"
    state_save_location: str
    state_save_asked: bool
    slurmctld_timeout: int
    fabric: str
    nccl: tuple[NcclVar, ...]
    legacy_pmix: bool  # this Slurm's mpi/pmix opens the unversioned libpmix.so
    admin_group: str = "slurm-admins"  # options.slurm.admin_group: pam_access lets it past pam_slurm_adopt
    hygiene: bool = False  # options.slurm.job_hygiene: prolog.d/ and epilog.d/ (Prolog=, Epilog= globs)
    site_prolog: bool = False  # the site gives its own Prolog= (options.slurm.prolog), which replaces ours
    site_epilog: bool = False
    telemetry: bool = True  # options.slurm.telemetry: node exporter, Slurm's metrics, Prometheus files (issue 38)
    etc: str = ETC
    nhc_program: str = NHC_PROGRAM
    pyxis_plugin: str = PYXIS_PLUGIN
    nccl_docs: str = NCCL_DOCS

    @property
    def ha(self) -> bool:
        return len(self.controllers) > 1

    @property
    def files(self) -> list[str]:
        """The files these operations add under slurm/, in the order the README lists them."""
        out = []
        if self.health:
            out += ["nhc.conf"] + (["gpu-health.sh"] if self.health.gpus else [])
        if self.containers == "pyxis":
            out += ["plugstack.conf", "plugstack.conf.d/pyxis.conf", "enroot.conf"]
        if self.nccl:
            out += ["nccl.env", "task-prolog.sh"]
        if self.hygiene:
            out += ["prolog.d/50-orchgen-dcgm.sh", "epilog.d/50-orchgen-hygiene.sh"]
        return out


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def operations(plan: Plan, groups) -> Ops:
    """The operations for the Slurm plane's node groups (model.NodeGroup) under plan.slurm_options."""
    o = plan.slurm_options
    version = _version(plan.slurm_version)
    has_gpus = any(g.gpu_type for g in groups)
    fabric = plan.fabric.kind
    health = None
    rdma = fabric in ("infiniband", "roce")
    if o.health_check:
        gpus = tuple(GpuCheck(g.pool, nhc_targets(g.nodes), g.gpus, g.gpu_type,
                              ("imex" if o.imex else "fabric") if g.nvlink_domain_nodes > 1 else "")
                     for g in groups if g.gpu_type)
        rails = tuple(RailCheck(g.pool, nhc_targets(g.nodes), tuple((n.hca, n.rate_gbps) for n in g.hw.compute_rails))
                      for g in groups if g.hw.compute_rails) if rdma else ()
        railed = {r.pool for r in rails}
        rest = [n for g in groups if g.pool not in railed for n in g.nodes]
        any_port = ("*",) if not railed else (nhc_targets(rest) if rest else ())
        health = HealthCheck(o.health_check_interval, "ANY,CYCLE", gpus, rdma, tuple(o.health_check_mounts),
                             rails, any_port)
    containers = ("pyxis" if has_gpus else "none") if o.containers == "auto" else o.containers
    mpi = ("pmix" if version >= PMIX_AUTO_MIN else "none") if o.mpi == "auto" else o.mpi
    spanning = [g for g in groups if g.nvlink_domain_nodes > 1]
    imex = None
    if o.imex and spanning:
        nodes = {n for g in spanning for n in g.nodes}
        domains = tuple((d.name, hostlist.compress([n for n in d.nodes if n in nodes]))
                        for d in plan.fabric.domains if any(n in nodes for n in d.nodes))
        imex = Imex(tuple(g.pool for g in spanning), max(g.nvlink_domain_nodes for g in spanning),
                    version >= IMEX_MIN, domains)
    return Ops(health, containers, mpi, o.mpi != "auto", o.containment, o.kill_on_bad_exit,
               o.unkillable_step_timeout, imex, plan.slurm_controllers,
               o.state_save_location or DEFAULT_STATE_SAVE, o.state_save_location is not None, SLURMCTLD_TIMEOUT,
               fabric, nccl_settings(plan, groups) if o.nccl else (), version < PMIX_AUTO_MIN, o.admin_group,
               o.job_hygiene, bool(o.prolog), bool(o.epilog), o.telemetry)


def exact_hcas(groups) -> tuple[str, ...] | None:
    """The compute rails every GPU node of the plane shares (device:port), for an exact NCCL_IB_HCA;
    None where a GPU pool's rails are not known or the pools' differ (then the mlx5 prefix stays)."""
    sets = {tuple(n.hca for n in g.hw.compute_rails) for g in groups if g.gpu_type}
    if len(sets) != 1 or () in sets:
        return None
    return sets.pop()


def nccl_settings(plan: Plan, groups) -> tuple[NcclVar, ...]:
    """NCCL[fabric], with NCCL_IB_HCA as the exact list of compute rails where the nodes' rails are
    known, and on RoCE the lossless traffic class and its priority (fleet.fabric.traffic_class,
    service_level)."""
    fabric = plan.fabric.kind
    out = list(NCCL[fabric])
    hcas = exact_hcas(groups) if fabric in ("infiniband", "roce") else None
    if hcas:
        out = [NcclVar("NCCL_IB_HCA", "=" + ",".join(hcas), "exactly the compute rails of the nodes' platform or "
                       "pool.nics ('=' matches whole names, not prefixes), so storage and in-band HCAs stay out",
                       "nccl-ib-hca") if v.name == "NCCL_IB_HCA" else v for v in out]
    if fabric == "roce":
        given = {"NCCL_IB_TC": plan.fabric.traffic_class, "NCCL_IB_SL": plan.fabric.service_level}
        out = [NcclVar(v.name, str(given[v.name]), v.why.replace("DSCP 26 x 4", f"DSCP {given[v.name] // 4} x 4"),
                       v.anchor) if given.get(v.name) is not None else v for v in out]
    return tuple(out)


# ------------------------------------------------------------------ NHC match strings

# NHC's node range syntax (scripts/common.nhc, RANGE_MATCH_REGEXP1/2, NHC 1.2.2+): `{a,b}` holds single
# names ending in digits and `prefix[start-end]suffix` ranges with one bracket of one range, every
# number of the range's width. Names outside that become plain globs (an exact name matches itself).
_NAME = re.compile(r"^([-a-zA-Z0-9_]*[-a-zA-Z_])([0-9]+)([-.a-zA-Z]*)$")  # the last run of digits
_SINGLE = re.compile(r"^[-a-zA-Z0-9_]+[0-9]+[-.a-zA-Z0-9]*$")
_GLOB = re.compile(r"[*?\[\]{}!/\\|\s]")
NHC_LINE_NAMES = 64  # node-range groups per nhc.conf line, so that lines stay readable


def nhc_targets(nodes: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """NHC match strings that together match exactly `nodes`: `{gpu[001-064],gpu[100-120]}` style
    node ranges (at most NHC_LINE_NAMES groups each), then a glob per name NHC's ranges cannot hold."""
    return _nhc_targets(tuple(nodes))


@lru_cache(maxsize=64)
def _nhc_targets(nodes: tuple[str, ...]) -> tuple[str, ...]:
    """nhc_targets, once per list of nodes (the same groups' nodes are asked for by each file that
    names them: cProfile, 16,384 nodes: ~10% of `plan`)."""
    runs: list[list] = []  # [prefix, width, suffix, first, last]
    loose: list[str] = []
    for node in nodes:
        m = _NAME.match(node)
        if not m:
            loose.append(node)
            continue
        prefix, digits, suffix = m.groups()
        number, width = int(digits), len(digits)
        last = runs[-1] if runs else None
        if last and last[:3] == [prefix, width, suffix] and last[4] + 1 == number and len(str(number)) <= width:
            last[4] = number
        else:
            runs.append([prefix, width, suffix, number, number])
    groups = []
    for prefix, width, suffix, first, last in runs:
        lo, hi = str(first).zfill(width), str(last).zfill(width)
        name = f"{prefix}{lo}{suffix}"
        groups.append(name if first == last and _SINGLE.match(name) else f"{prefix}[{lo}-{hi}]{suffix}")
    out = ["{" + ",".join(groups[i:i + NHC_LINE_NAMES]) + "}" for i in range(0, len(groups), NHC_LINE_NAMES)]
    return tuple(out + [n for n in loose if not _GLOB.search(n)])
