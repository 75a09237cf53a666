"""The fleet decision: combine the per-workload decisions into one Plan.

Which planes exist, which leaves of which pools each plane owns, how a hybrid runs (partitioned
node pools, or Slurm on Kubernetes), which gang scheduler, which charts, and the tenants' quotas.
"""
from __future__ import annotations

from pathlib import Path

from .. import catalog
from ..spec import fabric as fabric_mod
from ..spec import slurmtime
from ..spec.checks import pool_hostnames
from . import slurm_names
from .rules import recommend
from .partition import split
from .plan import Plan, Plane, PoolSlice, Quota, Tenant, Warning_, WorkloadDecision
from ..errors import OrchgenError
from ..spec.models import Fleet, Pool, format_path

# The Slurm release an operator's pinned images run (slurm chart 1.2.1's appVersion; Soperator
# 4.1.7's images are tagged 4.1.7-slurm25.11.3). With Slurm on Kubernetes the operator, not
# options.slurm_version, decides which Slurm reads the configuration.
OPERATOR_SLURM_VERSION = {"slinky": "26.05", "soperator": "25.11"}


def make_plan(fleet: Fleet, source: str | Path) -> Plan:
    file = str(source)
    decisions = recommend(fleet)
    for message, loc in slurm_names.problems(fleet, decisions):
        raise OrchgenError(message, file, None, format_path(loc))
    reasons: list[str] = []
    warnings: list[Warning_] = []  # what the user must hear about; errors under options.strict
    pools = {p.name: p for p in fleet.fleet.pools}
    hosts = {p.name: pool_hostnames(p) for p in fleet.fleet.pools}
    fab = fabric_mod.build(fleet.fleet.fabric.kind, fleet.fleet.fabric.nodes_per_leaf,
                           fleet.fleet.fabric.leaves_per_spine,
                           [(p.name, hosts[p.name], p.nvlink_domain_nodes) for p in fleet.fleet.pools])

    slurm = "slurm" if any(d.primary == "slurm" for d in decisions) else None
    kube = _kube_plane(decisions, reasons)
    hybrid, operator = _hybrid_mode(fleet, slurm, kube, reasons)
    if operator and kube is None:
        kube = "kubernetes"
        reasons.append(f"Slurm runs on Kubernetes ({operator}): a Kubernetes plane hosts it")
    slurm_version = _slurm_version(fleet, operator, reasons)
    if slurm and not kube:
        reasons.append("Slurm only: every workload is tightly coupled multi-node batch on bare metal")
    elif kube and not slurm:
        reasons.append(f"{kube} only: no workload is tightly coupled multi-node on bare metal")

    tenants = _tenants(fleet)
    default = _default_pools(fleet, decisions, slurm, kube)
    placed = [_place(d, w.pool or default[d.primary == "slurm"], w.gpus, w.tenant or tenants[0].name,
                     pools, slurm, kube, w.max_time)
              for d, w in zip(decisions, fleet.workloads)]

    native_kube = any(d.plane in ("kubernetes", "k3s") or d.hybrid for d in placed)
    demand: dict[str, dict[str, int]] = {}
    for d in placed:
        for plane in ([d.plane] + ([kube] if d.hybrid and kube else [])):
            if plane is None:
                continue
            per_node = max(1, d.gpus_per_node)
            need = max(d.facts.nodes, -(-d.gpus // per_node)) if plane == d.plane else 1
            demand.setdefault(plane, {}).setdefault(d.pool, 0)
            demand[plane][d.pool] += need
    parts = split(fab, list(pools), demand, slurm, kube if native_kube else None, file)
    reasons.extend(parts.reasons)
    if kube and not native_kube:
        parts.plane_leaves[kube] = {}

    leaf_nodes = {leaf.name: leaf.nodes for leaf in fab.leaves}
    slices = {plane: tuple(_slice(pools[pool], plane, leaves, leaf_nodes)
                           for pool, leaves in by_pool.items() if leaves)
              for plane, by_pool in parts.plane_leaves.items()}
    placed = [_repool(d, slices) for d in placed]

    gang = _gang(fleet, placed, kube, tenants, reasons)
    tenants = _quotas(tenants, slices.get(kube, ()) if kube else ())
    charts = _charts(fleet, placed, kube, gang, operator)
    planes: dict[str, Plane] = {}
    if slurm:
        planes[slurm] = Plane(slurm, "kubernetes" if operator else "bare-metal", operator, slices[slurm],
                              tuple(d.name for d in placed if d.plane == slurm),
                              _slurm_addons(placed, tenants, fab), ())
    if kube:
        planes[kube] = Plane(kube, "bare-metal" if fleet.fleet.bare_metal else "virtual-machines", None,
                             slices.get(kube, ()),
                             tuple(d.name for d in placed if d.plane == kube or d.hybrid),
                             tuple(charts), ())
    return Plan(
        name=fleet.metadata.name,
        source=Path(file).name,
        workloads=tuple(placed),
        planes=planes,
        hybrid=hybrid,
        fabric=fab,
        tenants=tuple(tenants),
        gang_scheduler=gang,
        gitops=fleet.options.gitops,
        gitops_repo=fleet.options.gitops_repo,
        slurm_version=slurm_version,
        kubernetes_version=fleet.options.kubernetes_version,
        bare_metal=fleet.fleet.bare_metal,
        charts={c: catalog.chart(c, fleet.options.versions) for c in charts},
        reasons=tuple(reasons),
        warnings=tuple(warnings),
        strict=fleet.options.strict,
        slurm_default_time=slurmtime.minutes(fleet.options.slurm.default_time),
        slurm_max_time=slurmtime.minutes(fleet.options.slurm.max_time),
        slurm_hosts=fleet.fleet.slurm,
    )


def _kube_plane(decisions: list[WorkloadDecision], reasons: list[str]) -> str | None:
    full = [d.name for d in decisions
            if d.primary == "kubernetes" or d.ray_host == "kubernetes" or d.hybrid]
    small = [d.name for d in decisions if d.primary == "k3s" or d.ray_host == "k3s"]
    if full and small:
        reasons.append(f"k3s workloads ({', '.join(small)}) run on the fleet's Kubernetes plane: "
                       "one control plane, not a second small one beside it")
    return "kubernetes" if full else ("k3s" if small else None)


def _hybrid_mode(fleet: Fleet, slurm: str | None, kube: str | None,
                 reasons: list[str]) -> tuple[str | None, str | None]:
    opt = fleet.options.slurm_on_kubernetes
    if not slurm:
        if opt not in ("auto", "none"):
            reasons.append(f"options.slurm_on_kubernetes={opt} ignored: no workload needs Slurm")
        return None, None
    if opt in ("slinky", "soperator"):
        reasons.append(f"Slurm on Kubernetes with {opt}: options.slurm_on_kubernetes asks for it")
        return "slurm-on-kubernetes", opt
    if not kube:
        return None, None
    if opt == "none" or fleet.fleet.bare_metal:
        why = "options.slurm_on_kubernetes=none" if opt == "none" else "fleet.bare_metal=true"
        reasons.append(f"hybrid, partitioned ({why}): Slurm and {kube} each own whole leaves of the "
                       "fleet; no node is in both")
        return "partitioned", None
    reasons.append("hybrid, Slurm on Kubernetes with Slinky (fleet.bare_metal=false): Kubernetes runs "
                   "every node and Slurm's slurmd run as pods on the Slurm leaves")
    return "slurm-on-kubernetes", "slinky"


def _slurm_version(fleet: Fleet, operator: str | None, reasons: list[str]) -> str:
    asked = fleet.options.slurm_version
    runs = OPERATOR_SLURM_VERSION.get(operator or "")
    if runs is None:
        return asked
    if "slurm_version" in fleet.options.model_fields_set and asked != runs:
        reasons.append(f"Slurm {runs}, not options.slurm_version={asked}: {operator}'s pinned images run "
                       f"{runs}, and the configuration is written for the Slurm that reads it")
    return runs


def _default_pools(fleet: Fleet, decisions: list[WorkloadDecision], slurm: str | None,
                   kube: str | None) -> dict[bool, str]:
    """Pool of a workload that names none: {on Slurm?: pool}. Slurm takes the first GPU pool;
    Kubernetes the first GPU pool Slurm does not claim, so services do not split a training pool."""
    gpu_pools = [p.name for p in fleet.fleet.pools if p.gpu] or [p.name for p in fleet.fleet.pools]
    claimed = {w.pool or gpu_pools[0] for d, w in zip(decisions, fleet.workloads) if d.primary == "slurm"}
    free = [p for p in gpu_pools if p not in claimed]
    return {True: gpu_pools[0], False: free[0] if (slurm and kube and free) else gpu_pools[0]}


def _tenants(fleet: Fleet) -> list[Tenant]:
    if not fleet.tenants:
        return [Tenant(fleet.metadata.name, 1, True)]
    return [Tenant(t.name, t.share, False, users=tuple(t.users), unix_group=t.unix_group, max_gpus=t.max_gpus)
            for t in fleet.tenants]


def _class_of(d: WorkloadDecision) -> str:
    f = d.facts
    if d.primary == "ray" or (d.primary == "slurm" and f.python_native_pipeline):
        return "ray"
    if d.primary == "slurm" or (f.tightly_coupled and f.nodes > 1):
        return "training"
    return "service" if f.long_lived_services else "batch"


def _place(d: WorkloadDecision, pool_name: str, gpus: int | None, tenant: str, pools: dict[str, Pool],
           slurm: str | None, kube: str | None, max_time: str | None = None) -> WorkloadDecision:
    from dataclasses import replace

    pool = pools[pool_name]
    per_node = pool.gpu.count if pool.gpu else 0
    plane = slurm if d.primary == "slurm" else kube
    return replace(d, plane=plane or "", workload_class=_class_of(d), tenant=tenant, pool=pool_name,
                   gpus=gpus if gpus is not None else d.facts.nodes * per_node, gpus_per_node=per_node,
                   max_time=slurmtime.minutes(max_time) if max_time else None)


def _repool(d: WorkloadDecision, slices: dict[str, tuple[PoolSlice, ...]]) -> WorkloadDecision:
    """A workload whose pool went wholly to the other plane runs on its own plane's first GPU pool."""
    from dataclasses import replace

    mine = slices.get(d.plane, ())
    if not mine or any(s.pool == d.pool for s in mine):
        return d
    target = next((s for s in mine if s.gpus_per_node), mine[0])
    return replace(d, pool=target.pool, gpus_per_node=target.gpus_per_node)


def _slice(pool: Pool, plane: str, leaves: list[str], leaf_nodes: dict[str, tuple[str, ...]]) -> PoolSlice:
    return PoolSlice(pool=pool.name, plane=plane, nodes=tuple(n for leaf in leaves for n in leaf_nodes[leaf]),
                     leaves=tuple(leaves), gpu_type=pool.gpu.type if pool.gpu else None,
                     gpus_per_node=pool.gpu.count if pool.gpu else 0, cpus=pool.cpus,
                     memory_gib=pool.memory_gib, nvlink_domain_nodes=pool.nvlink_domain_nodes)


def _gang(fleet: Fleet, placed: list[WorkloadDecision], kube: str | None, tenants: list[Tenant],
          reasons: list[str]) -> str | None:
    opt = fleet.options.gang_scheduler
    need = [d.name for d in placed if d.gang_scheduler_required]
    if not kube:
        if opt != "auto":
            reasons.append(f"options.gang_scheduler={opt} ignored: no Kubernetes plane")
        return None
    if opt != "auto":
        reasons.append(f"gang scheduler {opt}: options.gang_scheduler asks for it"
                       + (f"; required by {', '.join(need)}" if need else ""))
        return opt
    real_tenants = [t.name for t in tenants if not t.implicit]
    if need:
        reasons.append(f"gang scheduler kueue (auto): {', '.join(need)} need all-or-nothing admission; "
                       "Kueue gives it (waitForPodsReady) together with tenant quotas, cohorts and "
                       "Ray/Job integrations, without replacing kube-scheduler")
        return "kueue"
    if len(real_tenants) > 1:
        reasons.append(f"quota manager kueue (auto): {len(real_tenants)} tenants share the GPUs; Kueue's "
                       "ClusterQueues in one cohort lend idle quota between them")
        return "kueue"
    reasons.append("no gang scheduler (auto): no workload is tightly coupled across nodes on Kubernetes")
    return None


def _largest_remainder(total: int, shares: list[int]) -> list[int]:
    """Split `total` by `shares` into integers that add up to `total` exactly."""
    weight = sum(shares)
    exact = [total * s / weight for s in shares]
    out = [int(x) for x in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def _quotas(tenants: list[Tenant], slices: tuple[PoolSlice, ...]) -> list[Tenant]:
    from dataclasses import replace

    shares = [t.share for t in tenants]
    per: list[dict[str, Quota]] = [{} for _ in tenants]
    for s in slices:
        n = len(s.nodes)
        columns = [_largest_remainder(total, shares) for total in (s.gpus, s.cpus * n, s.memory_gib * n)]
        for i, (g, c, m) in enumerate(zip(*columns)):
            per[i][s.pool] = Quota(g, c, m)
    return [replace(t, quotas=q) for t, q in zip(tenants, per)]


def _charts(fleet: Fleet, placed: list[WorkloadDecision], kube: str | None, gang: str | None,
            operator: str | None) -> list[str]:
    """Releases the Kubernetes plane installs, CRD owners first (install order)."""
    if not kube:
        return []
    out = ["gpu-operator"]
    if operator in ("slinky", "soperator"):  # both operators' webhooks take certificates from it
        out[:0] = ["cert-manager"]
    if gang == "kai":
        out.append("kai-scheduler")
    elif gang:
        out.append(gang)
    if any(d.primary == "ray" for d in placed):
        out.append("kuberay-operator")
    if operator == "slinky":
        out += ["slurm-operator-crds", "slurm-operator", "slurm"]
    elif operator == "soperator":
        out += ["soperator", "soperator-slurm-cluster"]
    return out


def _slurm_addons(placed: list[WorkloadDecision], tenants: list[Tenant], fab: fabric_mod.FabricModel) -> tuple[str, ...]:
    out = ["slurm-topology"]
    if fab.domains:
        out.append("nvlink-blocks")
    if any(not t.implicit for t in tenants):
        out.append("fair-share-accounting")
    if any(d.plane == "slurm" and d.workload_class == "ray" for d in placed):
        out.append("ray-on-slurm")
    return tuple(out)
