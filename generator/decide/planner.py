"""The fleet decision: combine the per-workload decisions into one Plan.

Which planes exist, which leaves of which pools each plane owns, how a hybrid runs (partitioned
node pools, or Slurm on Kubernetes), which gang scheduler, which charts, and the tenants' quotas.
"""
from __future__ import annotations

import math
from pathlib import Path

from .. import catalog
from ..contract import bringup_os_line
from ..schedulers import AUTO
from ..spec import fabric as fabric_mod
from ..spec import hostlist
from ..spec import slurmtime
from ..spec.hardware import node_hardware
from . import clusters, placement, platform as platform_mod, quotas, serving, slurm_names
from .rules import RULES, recommend
from .partition import split
from .plan import UNTYPED_GPU, Plan, Plane, Platform, PoolSlice, Tenant, Warning_, WorkloadDecision
from ..errors import OrchgenError
from ..spec.models import Fleet, Pool, Workload, format_path

# The Slurm release an operator's pinned images run (slurm chart 1.2.1's appVersion; Soperator
# 4.1.7's images are tagged 4.1.7-slurm25.11.3). With Slurm on Kubernetes the operator, not
# options.slurm_version, decides which Slurm reads the configuration.
OPERATOR_SLURM_VERSION = {"slinky": "26.05", "soperator": "25.11"}


def make_plan(fleet: Fleet, source: str | Path, previous: dict[str, str] | None = None) -> Plan:
    """previous: node -> plane of the bundle this plan replaces (spec/planes.py), which each node
    keeps unless the input's fleet.pools[].planes moves it."""
    file = str(source)
    decisions = recommend(fleet)
    for message, loc in slurm_names.problems(fleet, decisions):
        raise OrchgenError(message + _pinned_to_slurm(decisions), file, None, format_path(loc))
    reasons: list[str] = []
    warnings: list[Warning_] = []  # what the user must hear about; errors under options.strict
    pools = {p.name: p for p in fleet.fleet.pools}
    fab = _fabric(fleet, warnings)

    slurm = "slurm" if any(d.primary == "slurm" for d in decisions) else None
    kube = _kube_plane(decisions, reasons, fleet)
    hybrid, operator = _hybrid_mode(fleet, slurm, kube, reasons)
    if operator and fleet.fleet.fabric.topograph:
        # Slinky's and Soperator's NodeSets select their nodes by orchgen's leaf label, whose
        # Topograph counterpart holds switch identifiers orchgen cannot know
        raise OrchgenError(f"Slurm on Kubernetes ({operator}) selects its nodes by orchgen's leaf labels, "
                           "which node-labels.sh does not write when Topograph labels the fabric; drop "
                           "fabric.topograph or set options.slurm_on_kubernetes: none", file, None,
                           "fleet.fabric.topograph")
    if operator and kube is None:
        kube = "kubernetes"
        reasons.append(f"Slurm runs on Kubernetes ({operator}): a Kubernetes plane hosts it")
    slurm_version = _slurm_version(fleet, operator, reasons)
    overridden = [d.name for d in decisions if d.pinned and (d.primary == "slurm") != RULES[0].matches(d.facts)]
    pins = f" (or is pinned there: {', '.join(overridden)})" if overridden else ""
    kept = [d.name for d in decisions if d.rule == "slurm-site-batch"]
    if slurm and not kube:
        reasons.append(f"Slurm only: every workload is tightly coupled multi-node batch on bare metal{pins}"
                       + (f", or batch kept on Slurm by rule slurm-site-batch ({', '.join(kept)}): no Kubernetes "
                          "plane is carved out for it" if kept else ""))
    elif kube and not slurm:
        reasons.append(f"{kube} only: no workload is tightly coupled multi-node on bare metal{pins}")

    tenants, default_tenant = placement.tenants_of(fleet)
    warnings.extend(placement.tenant_warnings(fleet, default_tenant))
    warnings.extend(placement.intent_warnings(fleet))
    picks = placement.picked_pools(fleet, decisions, slurm, kube)
    placed = [_demand(_place(d, picks[i][0], w.gpus, w.tenant or default_tenant, pools, slurm, kube, w.max_time,
                             picks[i][1]), w, i, file)
              for i, (d, w) in enumerate(zip(decisions, fleet.workloads))]

    native_kube = any(d.plane in ("kubernetes", "k3s") or d.hybrid for d in placed)
    demand: dict[str, dict[str, int]] = {}
    job: dict[str, dict[str, int]] = {}  # plane -> pool -> nodes of its largest job
    for d in placed:
        for plane in ([d.plane] + ([kube] if d.hybrid and kube else [])):
            if plane is None:
                continue
            per_node = max(1, d.gpus_per_node)
            # pools are sized by the demand at once: one job's span times the jobs running together
            need = max(d.facts.nodes, -(-d.gpus // per_node)) * d.jobs_at_once if plane == d.plane else 1
            demand.setdefault(plane, {}).setdefault(d.pool, 0)
            demand[plane][d.pool] += need
            # a Slurm allocation or a gang starts all its nodes at once: a split must not cut below it
            starts = d.facts.nodes if plane == d.plane and (plane == slurm or d.gang_scheduler_required) else 1
            job.setdefault(plane, {})[d.pool] = max(job.get(plane, {}).get(d.pool, 0), starts)
    kube_native = kube if native_kube else None
    held = _held(fleet, slurm, kube_native, warnings)
    parts = split(fab, list(pools), demand, slurm, kube_native, file, fleet.options.split, job, previous, held)
    reasons.extend(parts.reasons)
    if kube and not native_kube:
        parts.plane_nodes[kube] = {}

    if not operator:  # with Slurm on Kubernetes, Kubernetes runs every node anyway: no island to refuse
        _small_kube(fleet, decisions, slurm, kube_native, parts.plane_nodes, file)
    slices = {plane: tuple(_slice(pools[pool], plane, nodes, fab) for pool, nodes in by_pool.items() if nodes)
              for plane, by_pool in parts.plane_nodes.items()}
    placed = placement.settle(fleet, placed, slices, demand, file,
                              frozenset(p.pool for p in parts.pools if p.how == "kept"))
    placed = [placement.sized(d, pools[d.pool]) for d in placed]
    warnings.extend(placement.capacity_warnings(fleet, placed, slices))

    if slurm and not operator:
        warnings.extend(_slurm_ops_warnings(fleet))
    gang = _gang(fleet, placed, kube, tenants, reasons)
    tenants, quota_reasons, quota_warnings = quotas.quotas(tenants, slices.get(kube, ()) if kube else (), placed, kube)
    reasons.extend(quota_reasons)
    warnings.extend(quota_warnings)
    placed = serving.decide(fleet, placed, kube, tenants, file, warnings)
    kube_slices = slices.get(kube, ()) if kube else ()
    draft = Plane(kube, "", None, kube_slices, (), (), ()) if kube else None
    platform = platform_mod.decide(fleet, draft, placed, fab, reasons, warnings, file)
    charts = _charts(fleet, placed, kube, gang, operator, platform)
    # with Slurm on Kubernetes the Slurm nodes are Kubernetes nodes too: the operator's pods and DaemonSets run there
    _arches(fleet, kube_slices + (slices.get(slurm, ()) if operator else ()), charts,
            slices.get(slurm, ()) if slurm and not operator else (), file, warnings)
    _controllers(fleet, bool(slurm) and not operator, warnings)
    _bringup_os(slurm_version, bool(slurm) and not operator and fleet.options.slurm.repository is None, warnings)
    if fleet.options.slurm.repository is not None and not (slurm and not operator):
        warnings.append(Warning_("the site's Slurm repository is for the bare-metal Slurm bring-up (bringup/), and this "
                                 "plan has no bare-metal Slurm plane: nothing installs from it", "options.slurm.repository",
                                 bundle_only=True))
    if slurm and not operator:
        _schedmd_packaging(fleet, slurm_version, warnings)
    planes: dict[str, Plane] = {}
    if slurm:
        planes[slurm] = Plane(slurm, "kubernetes" if operator else "bare-metal", operator, slices[slurm],
                              tuple(d.name for d in placed if d.plane == slurm),
                              _slurm_addons(placed, tenants, fab), ())
    if kube:
        planes[kube] = Plane(kube, "bare-metal" if fleet.fleet.bare_metal else "virtual-machines", None,
                             kube_slices,
                             tuple(d.name for d in placed if d.plane == kube or d.hybrid),
                             tuple(charts), ())
    plan = Plan(
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
        split_mode=fleet.options.split,
        pool_splits=parts.pools,
        shared_leaves=parts.shared,
        slurm_controllers=tuple(fleet.fleet.slurm.controllers) if fleet.fleet.slurm else (),
        slurm_accounting=fleet.fleet.slurm.accounting if fleet.fleet.slurm else None,
        slurm_options=fleet.options.slurm,
        platform=platform,
        site=fleet.site,
        metrics=fleet.options.metrics,
        site_prometheus_url=fleet.options.prometheus_url,
        gpu_health=fleet.options.gpu_health,
    )
    return clusters.decide(plan, fleet, file)


# the image platform of each `uname -m` architecture, as the kubelet labels its node kubernetes.io/arch
_KUBE_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le"}


def _arches(fleet: Fleet, kube_slices: tuple[PoolSlice, ...], charts: list[str], slurm_slices: tuple[PoolSlice, ...],
            file: str, warnings: list[Warning_]) -> None:
    """CPU architecture against what each chosen component publishes (issue 36; catalog.IMAGE_ARCHES cites
    where). A component whose pods run on every node of the Kubernetes plane (catalog.NODE_COMPONENTS) refuses a
    pool of an architecture it lacks; one that runs a few controller pods refuses only where no node of the plane
    has an architecture it publishes, else the plan warns with the numbers: its pods must stay on the other nodes.
    On a bare-metal Slurm plane the same holds for what the bring-up installs (catalog.SLURM_PACKAGE_ARCHES)."""
    index = {p.name: i for i, p in enumerate(fleet.fleet.pools)}
    pools = fleet.fleet.pools
    arch = {s.pool: catalog.arch_of(pools[index[s.pool]]) for s in (*kube_slices, *slurm_slices)}
    slurm = bool(slurm_slices)
    total = sum(len(s.nodes) for s in kube_slices)
    for s in kube_slices:  # every node: the DaemonSets' components
        a = arch[s.pool]
        missing = [c for c in charts if c in catalog.NODE_COMPONENTS and c in catalog.IMAGE_ARCHES
                   and a not in catalog.IMAGE_ARCHES[c]]
        if missing:
            published = "; ".join(f"{c}: {', '.join(catalog.IMAGE_ARCHES[c])}" for c in missing)
            fix = ("run its workloads on Slurm (`plane: slurm`) or give the Kubernetes workloads another pool"
                   if slurm else "give the Kubernetes workloads another pool")
            raise OrchgenError(
                f"pool {s.pool} is {a}, and {len(s.nodes)} of its nodes would be on the Kubernetes plane, where "
                f"{', '.join(missing)} run{'s' if len(missing) == 1 else ''} on every node and publish"
                f"{'es' if len(missing) == 1 else ''} no {a} images ({published}; generator/catalog.py "
                f"IMAGE_ARCHES cites where): {fix}", file, None, f"fleet.pools[{index[s.pool]}].arch")
    for c in charts:  # a few controller pods: anywhere on the plane with an architecture they publish
        if c in catalog.NODE_COMPONENTS or c not in catalog.IMAGE_ARCHES:
            continue
        has = catalog.IMAGE_ARCHES[c]
        bad = [s for s in kube_slices if arch[s.pool] not in has]
        if not bad:
            continue
        good = [s for s in kube_slices if arch[s.pool] in has]
        first = bad[0]
        where = f"fleet.pools[{index[first.pool]}].arch"
        lacking = ", ".join(f"{s.pool} ({arch[s.pool]}, {len(s.nodes)} nodes)" for s in bad)
        if not good:
            raise OrchgenError(
                f"{c} publishes images for {', '.join(has)} only (generator/catalog.py IMAGE_ARCHES cites where), and "
                f"every node of the Kubernetes plane is of another architecture (pools {lacking}): give the plane "
                f"nodes of one of those, or run the workloads that need {c} elsewhere", file, None, where)
        fine = sum(len(s.nodes) for s in good)
        selector = sorted({_KUBE_ARCH[arch[s.pool]] for s in good})
        warnings.append(Warning_(
            f"{c} publishes images for {', '.join(has)} only (generator/catalog.py IMAGE_ARCHES), none for pool"
            f"{'s' * (len(bad) > 1)} {lacking}: its controller pods must run on the other {fine} of the Kubernetes "
            f"plane's {total} nodes ({', '.join(f'{s.pool}: {arch[s.pool]}' for s in good)}); pin them there with "
            f"the chart's nodeSelector kubernetes.io/arch: {' or '.join(selector)}, or a pod the scheduler puts on "
            f"{first.pool} fails to start (no {arch[first.pool]} image)", where))
    if not slurm_slices:
        return
    pyxis = fleet.options.slurm.containers == "pyxis" or (
        fleet.options.slurm.containers == "auto" and any(s.gpus_per_node for s in slurm_slices))
    needed = ["slurm-wlm", "munge"] + (["nhc"] if fleet.options.slurm.health_check else []) + (
        ["enroot"] if pyxis else [])
    for s in slurm_slices:
        a = arch[s.pool]
        for pkg in needed:
            if a in catalog.SLURM_PACKAGE_ARCHES[pkg]:
                continue
            where = f"fleet.pools[{index[s.pool]}].arch"
            had = ", ".join(catalog.SLURM_PACKAGE_ARCHES[pkg])
            if pkg in catalog.SLURM_BRINGUP_PACKAGES:
                raise OrchgenError(f"pool {s.pool} is {a}, and the Slurm bring-up installs {pkg}, which is had for "
                                   f"{had} only (generator/catalog.py SLURM_PACKAGE_ARCHES)", file, None, where)
            warnings.append(Warning_(
                f"pool {s.pool} is {a} ({len(s.nodes)} Slurm nodes): the {pkg} .deb the pyxis step downloads "
                f"({pkg}_<version>-1_<dpkg arch>.deb) is known for {had} only (generator/catalog.py "
                f"SLURM_PACKAGE_ARCHES); where NVIDIA's release has none for {a}, build it from source "
                "(NVIDIA/enroot doc/installation.md, \"From source\"), or set options.slurm.containers: none", where))


def _small_kube(fleet: Fleet, decisions: list[WorkloadDecision], slurm: str | None, kube: str | None,
                plane_nodes: dict[str, dict[str, tuple[str, ...]]], file: str) -> None:
    """A Kubernetes plane beside Slurm smaller than options.kubernetes_min_nodes is refused: its control
    plane and operators cost more than its few nodes repay (issue 36). Not where the whole fleet is that
    small (a one-box lab), nor where Kubernetes is the only plane."""
    floor = fleet.options.kubernetes_min_nodes
    if not (slurm and kube):
        return
    have = sum(len(n) for n in plane_nodes.get(kube, {}).values())
    total = sum(p.nodes for p in fleet.fleet.pools)
    if have >= floor or total <= floor or have == 0:
        return
    on = [d for d in decisions if d.primary != "slurm" or d.hybrid]
    interactive = {w.name for w in fleet.workloads if w.interactive}
    batch = [d.name for d in on if not (d.facts.long_lived_services or d.name in interactive)]
    fix = (f"run {', '.join(batch)} on Slurm (`plane: slurm`; containers through pyxis/enroot), " if batch else
           f"give its workloads at least {floor} nodes (their gpus, nodes or a pool of their own), ")
    raise OrchgenError(
        f"the {kube} plane would have {have} node{'s' * (have != 1)} (for {', '.join(d.name for d in on)}), fewer "
        f"than options.kubernetes_min_nodes ({floor}): a second plane beside Slurm costs a control plane, the GPU "
        f"Operator, Kueue and Prometheus and its operators' time; {fix}or set options.kubernetes_min_nodes to "
        f"{have} to opt in", file, None, "options.kubernetes_min_nodes")


def _held(fleet: Fleet, slurm: str | None, kube: str | None, warnings: list[Warning_]) -> dict[str, dict[str, str]]:
    """pool -> node -> plane, from fleet.pools[].planes (`kubernetes` is the plan's Kubernetes or k3s
    plane); nodes held to a plane the plan does not have are placed as the plan decides, with a warning."""
    out: dict[str, dict[str, str]] = {}
    for i, pool in enumerate(fleet.fleet.pools):
        for key, expr in (pool.planes or {}).items():
            plane = slurm if key == "slurm" else kube
            if plane is None:
                warnings.append(Warning_(
                    f"holds {expr} to {key}, but the plan has no {key} plane (no workload runs there): "
                    "the nodes go where the plan puts them", f"fleet.pools[{i}].planes.{key}"))
                continue
            for node in hostlist.expand(expr):
                out.setdefault(pool.name, {})[node] = plane
    return out


def _fabric(fleet: Fleet, warnings: list[Warning_]) -> fabric_mod.FabricModel:
    """The fabric model the loader resolved; a fabric no switch joins is planned, with a warning."""
    fab = fabric_mod.of(fleet)
    islands = fab.islands()
    if len(islands) > 1:
        given = fleet.fleet.fabric
        where = "fleet.fabric.from" if given.from_ else "fleet.fabric.spines"
        groups = "; ".join(", ".join(group) for group in islands[:3]) + ("; ..." if len(islands) > 3 else "")
        warnings.append(Warning_(
            f"no switch joins the leaves {groups}: Slurm places no job across them (its topology/tree has no "
            "switch above both) and Kubernetes sees no common spine; if a core switch joins the spines, "
            "name it (fleet.fabric.core, or the core line of the imported file)", where))
    return fab


def per_workload(fleet: Fleet) -> list[WorkloadDecision]:
    """The per-workload decisions with the plane each runs on, which no split changes: what
    `recommend` shows when the fleet as a whole cannot be planned."""
    from dataclasses import replace

    decisions = recommend(fleet)
    kube = _kube_plane(decisions, [], fleet)
    return [replace(d, plane="slurm" if d.primary == "slurm" else kube or "") for d in decisions]


def _pinned_to_slurm(decisions: list[WorkloadDecision]) -> str:
    """Where only pins bring Slurm into the plan, a Slurm refusal says so."""
    on_slurm = [(i, d) for i, d in enumerate(decisions) if d.primary == "slurm"]
    if not on_slurm or not all(d.pinned and not RULES[0].matches(d.facts) for _, d in on_slurm):
        return ""
    i, d = on_slurm[0]
    return f" (Slurm is in the plan because workloads[{i}].plane pins {d.name} to it)"


def _controllers(fleet: Fleet, bare_metal_slurm: bool, warnings: list[Warning_]) -> None:
    """slurmctld starts only on a host whose gethostname() is a SlurmctldHost, so a bare-metal Slurm
    plane needs the real names; without them the bundle carries a placeholder (an operator runs
    Slurm on Kubernetes under its own names)."""
    if bare_metal_slurm and fleet.fleet.slurm is None:
        warnings.append(Warning_(
            "not given: slurm.conf gets a placeholder SlurmctldHost, and slurmctld starts only on a host "
            "whose short hostname is a SlurmctldHost; set fleet.slurm.controllers to the controllers' "
            "hostnames (primary first)", "fleet.slurm.controllers", bundle_only=True))


def _bringup_os(release: str, bare_metal_slurm: bool, warnings: list[Warning_]) -> None:
    """bringup/site.yml installs the OS's own Slurm packages and refuses a host whose release is not the plan's
    (contract.BRINGUP_OS_SLURM): say at plan time when no OS it supports packages the planned release. With the
    site's own repository (options.slurm.repository) Slurm comes from there: the README says it must provide it."""
    line = bringup_os_line(release) if bare_metal_slurm else None
    if line:
        warnings.append(Warning_(line, "options.slurm_version", bundle_only=True))


def _schedmd_packaging(fleet: Fleet, release: str, warnings: list[Warning_]) -> None:
    """SchedMD's own Debian packaging (debian/ in its source tree, slurm-smd-*) starts at Slurm 23.11
    (https://slurm.schedmd.com/quickstart_admin.html#debuild): an older release under those names is the site's own
    backport, which the bring-up installs all the same."""
    repo = fleet.options.slurm.repository
    if repo is not None and repo.packaging == "schedmd" and tuple(int(p) for p in release.split(".")[:2]) < (23, 11):
        warnings.append(Warning_(
            f"packaging schedmd: SchedMD's Debian packaging (slurm-smd-*) starts at Slurm 23.11 and the plan targets "
            f"{release}: the repository must still provide slurm-smd packages of {release} (a backport of its "
            "debian/), or plan 23.11 or later", "options.slurm.repository.packaging", bundle_only=True))


def _slurm_ops_warnings(fleet: Fleet) -> list[Warning_]:
    """A backup controller with the host-local default StateSaveLocation: the backup would take over
    with none of the primary's jobs (slurm.conf(5) StateSaveLocation: "readable and writable by both")."""
    controllers = fleet.fleet.slurm.controllers if fleet.fleet.slurm else []
    if len(controllers) > 1 and fleet.options.slurm.state_save_location is None:
        return [Warning_(f"{len(controllers)} Slurm controllers ({', '.join(controllers)}) need a StateSaveLocation "
                         "on a filesystem both mount (NFS or similar); the default /var/spool/slurmctld is local to "
                         "each host, so a backup would take over with none of the primary's jobs: set it to the "
                         "shared directory", "options.slurm.state_save_location")]
    return []


def _kube_plane(decisions: list[WorkloadDecision], reasons: list[str], fleet: Fleet) -> str | None:
    full = [d.name for d in decisions
            if d.primary == "kubernetes" or d.ray_host == "kubernetes" or d.hybrid]
    small = [d.name for d in decisions if d.primary == "k3s" or d.ray_host == "k3s"]
    if full and small:
        reasons.append(f"k3s workloads ({', '.join(small)}) run on the fleet's Kubernetes plane: "
                       "one control plane, not a second small one beside it")
    if small and not full and fleet.fleet.provider in platform_mod.MANAGED:
        reasons.append(f"edge/dev workloads ({', '.join(small)}) run on {fleet.fleet.provider}'s Kubernetes: a "
                       "managed provider's nodes run its own Kubernetes, not k3s")
        return "kubernetes"
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
        reasons.append(f"hybrid, partitioned ({why}): Slurm and {kube} each own their part of the "
                       "fleet's nodes; no node is in both")
        return "partitioned", None
    reasons.append("hybrid, Slurm on Kubernetes with Slinky (fleet.bare_metal=false): Kubernetes runs "
                   "every node and Slurm's slurmd run as pods on the Slurm plane's nodes")
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


def _class_of(d: WorkloadDecision) -> str:
    f = d.facts
    if d.primary == "ray" or (d.primary == "slurm" and f.python_native_pipeline):
        return "ray"
    if d.primary == "slurm" or (f.tightly_coupled and f.nodes > 1):
        return "training"
    return "service" if f.long_lived_services else "batch"


def _place(d: WorkloadDecision, pool_name: str, gpus: int | None, tenant: str, pools: dict[str, Pool],
           slurm: str | None, kube: str | None, max_time: str | None = None, why: str = "") -> WorkloadDecision:
    from dataclasses import replace

    if why:
        d = replace(d, reasons=d.reasons + (why,))
    pool = pools[pool_name]
    per_node = pool.gpu.count if pool.gpu else 0
    plane = slurm if d.primary == "slurm" else kube
    return replace(d, plane=plane or "", workload_class=_class_of(d), tenant=tenant, pool=pool_name,
                   gpus=gpus if gpus is not None else d.facts.nodes * per_node, gpus_per_node=per_node,
                   max_time=slurmtime.minutes(max_time) if max_time else None)


def _demand(d: WorkloadDecision, w: Workload, i: int, file: str) -> WorkloadDecision:
    """A workload's demand with its pool known: one job's span checked against the pool's nodes (the
    README's Demand section), and the jobs at once (given, or jobs_per_day x runtime)."""
    from dataclasses import replace

    from ..spec.checks import demand_problems

    for message, field in demand_problems(w, d.gpus_per_node or None):
        raise OrchgenError(message, file, None, f"workloads[{i}].{field}")
    runtime = slurmtime.minutes(w.runtime) if w.runtime else None
    at_once = w.jobs_at_once or 1
    if w.jobs_per_day is not None and runtime:
        at_once = max(1, math.ceil(w.jobs_per_day * runtime / (24 * 60)))  # Little's law: L = lambda W
    return replace(d, jobs_at_once=at_once, runtime=runtime, jobs_per_day=w.jobs_per_day)


def _slice(pool: Pool, plane: str, nodes: tuple[str, ...], fab: fabric_mod.FabricModel) -> PoolSlice:
    hw = node_hardware(pool)
    leaves = tuple(dict.fromkeys(fab.leaf_of(n).name for n in nodes))
    return PoolSlice(pool=pool.name, plane=plane, nodes=nodes, leaves=leaves,
                     gpu_type=(pool.gpu.type or UNTYPED_GPU) if pool.gpu else None,
                     gres_typed=pool.gpu.typed if pool.gpu else True,
                     gpus_per_node=pool.gpu.count if pool.gpu else 0, cpus=hw.allocatable_cpus,
                     memory_gib=hw.allocatable_memory_gib, nvlink_domain_nodes=fab.domain_nodes(pool.name),
                     hardware=hw, arch=catalog.arch_of(pool))


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
        return AUTO.name
    if len(real_tenants) > 1:
        reasons.append(f"quota manager kueue (auto): {len(real_tenants)} tenants share the GPUs; Kueue's "
                       "ClusterQueues in one cohort lend idle quota between them")
        return AUTO.name
    reasons.append("no gang scheduler (auto): no workload is tightly coupled across nodes on Kubernetes")
    return None


def _charts(fleet: Fleet, placed: list[WorkloadDecision], kube: str | None, gang: str | None,
            operator: str | None, platform: Platform) -> list[str]:
    """Releases the Kubernetes plane installs, CRD owners first (install order)."""
    if not kube:
        return []
    # each chart's record says which of these needs install it (catalog.py, `needed_when`)
    needs = {f"gpu-stack:{platform.gpu_stack}"}
    if platform.network is not None:
        needs.add(f"network:{platform.network.kind}")
    if operator:
        needs.add(f"operator:{operator}")
    if gang:
        needs.add(f"gang:{gang}")
    if any(d.primary == "ray" for d in placed):
        needs.add("ray")
    if fleet.options.metrics == "install":
        needs.add("metrics:install")
    if platform.compute_domains:
        needs.add("nvlink:compute-domain")
    # the serving stacks' controllers (decide/serving.py): serving:<stack>, and KEDA for every
    # ScaledObject; notebooks: JupyterHub
    for d in placed:
        if d.serving is not None:
            needs.add(f"serving:{d.serving.stack}")
            needs.add(f"autoscaler:{d.serving.autoscaler}")
        if d.interactive and d.plane == kube:
            needs.add("notebooks")
    return catalog.needed(needs)


def _slurm_addons(placed: list[WorkloadDecision], tenants: list[Tenant], fab: fabric_mod.FabricModel) -> tuple[str, ...]:
    out = ["slurm-topology"]
    if fab.domains:
        out.append("nvlink-blocks")
    if any(not t.implicit for t in tenants):
        out.append("fair-share-accounting")
    if any(d.plane == "slurm" and d.workload_class == "ray" for d in placed):
        out.append("ray-on-slurm")
    return tuple(out)
