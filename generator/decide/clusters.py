"""A Kubernetes plane beyond one cluster: worker clusters cut along the fabric, behind a MultiKueue manager.

Upstream supports at most 5,000 nodes and 150,000 pods per cluster ("Considerations for large
clusters", kubernetes.io/docs/setup/best-practices/cluster-large; platform.MAX_NODES, MAX_PODS). A
plane past that is planned as several worker clusters plus one manager cluster running Kueue's
MultiKueue (kueue.sigs.k8s.io/docs/concepts/multikueue): users submit to the manager's LocalQueues,
the manager admits a job against its ClusterQueue's quota, then its MultiKueue admission check
creates the job's Workload in the worker clusters, each of which admits it again against its own
ClusterQueue, like a standalone Kueue; the first worker to admit it runs it and the copies in the
others are removed (KEP-693 "MultiKueue", keps/693-multikueue in kubernetes-sigs/kueue). A job runs
whole in one worker: no gang spans two clusters.

The cut: whole spines in fabric order (a spine group too big for one cluster is cut at its leaves),
packed into clusters of at most the envelope's nodes (`_units`, as the old warning's suggested split).
A site may cap clusters below upstream's envelope (options.kubernetes_cluster_max_nodes: smaller failure
and upgrade domains); the plane is then cut the same way at that size.

Refused, one line naming the field: a leaf bigger than a cluster (fleet.fabric), a multi-node job
that no worker holds enough nodes of its pool for (workloads[i].nodes), more workers than one
MultiKueueConfig lists (20, its CRD's maxItems), a gang scheduler other than Kueue and Slurm on
Kubernetes. A GitOps mode is written per cluster (render/clusters/: clusters/<name>/gitops/).
A plane with nothing MultiKueue would dispatch (no queues, or Ray or notebooks, which are not the
starters' batch Jobs) stays one cluster with the envelope's warning, saying why (`_one_cluster`).

Services beside batch: MultiKueue dispatches batch jobs, not long-lived servers (the manager enables
the batch/job integration only, render/clusters), so a plane with services gets a serving cluster
beside the workers (`_serving`), as large sites run inference apart from training: a standalone
cluster with its own Kueue, no MultiKueue, holding the services' pools' nodes they need, taken as whole
leaves from the end of the fabric order (a server's nodes stay under one leaf where they fit one), and
the rest cut into workers as above. Its quotas are the tenants' shares of its capacity, in its own
cohort, so a tenant's service borrows what the others leave idle there, as on one cluster.

Quotas: the manager's ClusterQueues carry each tenant's whole quota (the concept page: "the quota
in the manager cluster should equal the total quota available in all worker clusters"); a worker's
carry the tenant's share of that worker's capacity, split so that per pool and resource the
workers' quotas of a tenant add up to its quota and each worker's tenants add up to its capacity.
"""
from __future__ import annotations

from dataclasses import replace

from .. import schedulers
from ..errors import OrchgenError
from ..spec import hostlist
from ..spec.models import Fleet
from . import platform
from .plan import KubeCluster, Plan, Quota, Warning_
from .quotas import largest_remainder

MANAGER = "manager"
MAX_WORKERS = 20  # MultiKueueConfig spec.clusters maxItems (kueue.x-k8s.io_multikueueconfigs.yaml, 0.19.2)


def beyond(plan: Plan, max_nodes: int = platform.MAX_NODES) -> bool:
    """Whether the plan's Kubernetes plane is past one cluster's envelope (nodes or pods); `max_nodes`:
    options.kubernetes_cluster_max_nodes (upstream's 5,000 unless the site sets fewer)."""
    kube = plan.kube_plane
    if kube is None:
        return False
    nodes = len(kube.nodes)
    pods = sum(s.gpus for s in kube.slices) + platform.DAEMON_PODS_PER_NODE * nodes
    return nodes > min(max_nodes, platform.MAX_NODES) or pods > platform.MAX_PODS


def limit(plan: Plan, max_nodes: int = platform.MAX_NODES) -> int:
    """Nodes one worker may hold: `max_nodes` (5,000 unless the site sets fewer), fewer where a node's
    pods (one per GPU, plus its daemons, as platform._scale counts them) would pass 150,000 pods first."""
    per_node = max((s.gpus // max(1, len(s.nodes)) if s.nodes else 0) for s in plan.kube_plane.slices)
    return min(max_nodes, platform.MAX_NODES, platform.MAX_PODS // (per_node + platform.DAEMON_PODS_PER_NODE))


def decide(plan: Plan, fleet: Fleet, file: str | None) -> Plan:
    """The plan with its `clusters` where the Kubernetes plane is beyond one cluster (else as it is)."""
    max_nodes = fleet.options.kubernetes_cluster_max_nodes
    if fleet.options.kubernetes_clusters == "one" or not beyond(plan, max_nodes):
        return plan
    why_not = _one_cluster(plan)
    served = _services(plan)
    if why_not:  # nothing MultiKueue could dispatch: one cluster, with the old warning and why
        warnings: list[Warning_] = []
        platform._scale(plan.kube_plane, plan.fabric, [], warnings)
        if not warnings:  # within upstream's envelope, beyond only the site's own cap
            warnings.append(Warning_(
                f"the {plan.kube_plane.name} plane has {len(plan.kube_plane.nodes):,} nodes, more than "
                f"options.kubernetes_cluster_max_nodes ({max_nodes:,})", "options.kubernetes_cluster_max_nodes"))
        warnings = [replace(w, message=f"{w.message}; orchgen plans it as one cluster: {why_not}") for w in warnings]
        return replace(plan, warnings=(*plan.warnings, *warnings))
    _refuse_combinations(plan, fleet, file)
    kube = plan.kube_plane
    cap = limit(plan, max_nodes)
    serving = _serving(plan, served, cap, file) if served else None
    groups = _pack(_units(plan, cap, file, set(serving.leaves) if serving else set()), cap)
    if len(groups) > MAX_WORKERS:
        raise OrchgenError(
            f"the {kube.name} plane needs {len(groups)} clusters of at most {cap:,} nodes, and one MultiKueueConfig "
            f"lists at most {MAX_WORKERS} (its CRD's maxItems): plan fewer nodes per fleet (or raise "
            "options.kubernetes_cluster_max_nodes)", file, None, "fleet.pools")
    workers = [_worker(plan, i, g) for i, g in enumerate(groups)]
    _gangs_fit(plan, workers, file, skip={d.name for d in served})
    if serving is not None:
        _gangs_fit(plan, [serving], file, only={d.name for d in served})
    workers = _split_quotas(plan, workers + ([serving] if serving else []))
    serving = workers.pop() if serving is not None else None
    manager = KubeCluster(
        MANAGER, "manager", quotas=_sum_quotas(plan, workers),
        why="MultiKueue manager: no GPU nodes; tenants submit here, its ClusterQueues hold each tenant's whole "
            "quota and its AdmissionCheck dispatches every admitted job whole to one worker")
    envelope = ("upstream's per-cluster envelope (5,000 nodes, 150,000 pods: "
                "kubernetes.io/docs/setup/best-practices/cluster-large)")
    if not beyond(plan):  # only the site's own cap cuts it
        envelope = (f"options.kubernetes_cluster_max_nodes, the site's cap of {max_nodes:,} nodes per cluster (upstream's "
                    "envelope is 5,000 nodes, 150,000 pods: kubernetes.io/docs/setup/best-practices/cluster-large)")
    reason = (f"the {kube.name} plane has {len(kube.nodes):,} nodes, beyond {envelope}: planned as "
              f"{len(workers)} worker clusters of at most {cap:,} nodes cut at whole spines/leaves "
              f"({'; '.join(f'{w.name}: {hostlist.compress(list(w.units))}, {w.node_count:,} nodes' for w in workers)}) "
              "behind a Kueue MultiKueue manager cluster; a job runs whole in one worker")
    if serving is not None:
        reason += (f"; the services ({', '.join(d.name for d in served)}) run in a serving cluster beside them "
                   f"({serving.name}: {hostlist.compress(list(serving.leaves))}, {serving.node_count:,} nodes), "
                   "which MultiKueue does not dispatch to")
    return replace(plan, clusters=(manager, *workers, *([serving] if serving else [])),
                   reasons=(*plan.reasons, reason))


SERVING = "serving"


def is_service(d) -> bool:
    return d.workload_class == "service" or d.serving is not None


def _services(plan: Plan) -> list:
    kube = plan.kube_plane
    return [d for d in plan.workloads if d.plane == kube.name and is_service(d)]


def _serving(plan: Plan, served: list, cap: int, file: str | None) -> KubeCluster:
    """The serving cluster: per pool, the nodes its services need (each server's GPUs in whole nodes),
    as whole leaves from the end of the fabric order, so the workers keep the front whole."""
    need: dict[str, int] = {}
    for d in served:
        per_node = d.gpus_per_node or next((s.gpus // max(1, len(s.nodes)) for s in plan.kube_plane.slices
                                            if s.pool == d.pool), 0)
        nodes = max(d.facts.nodes, -(-d.gpus // per_node)) if per_node else d.facts.nodes
        need[d.pool] = need.get(d.pool, 0) + max(1, nodes)
    mine = set(plan.kube_plane.nodes)
    pool_of = {n: s.pool for s in plan.kube_plane.slices for n in s.nodes}
    taken: list[str] = []
    got: dict[str, list[str]] = {}
    for leaf in reversed(plan.fabric.leaves):
        here = [n for n in leaf.nodes if n in mine]
        pools = {pool_of[n] for n in here}
        if not here or not any(len(got.get(p, [])) < need.get(p, 0) for p in pools):
            continue
        taken.append(leaf.name)
        for n in here:
            got.setdefault(pool_of[n], []).append(n)
    total = sum(len(v) for v in got.values())
    if total > cap:
        raise OrchgenError(
            f"the services of the {plan.kube_plane.name} plane need {total:,} nodes in whole leaves, more than one "
            f"cluster holds ({cap:,}); serve them from fewer nodes or plan them in a fleet of their own",
            file, None, "workloads")
    leaves = tuple(reversed(taken))
    order = {n: i for i, n in enumerate(plan.kube_plane.nodes)}
    nodes = {s.pool: tuple(sorted(got[s.pool], key=order.get)) for s in plan.kube_plane.slices if got.get(s.pool)}
    return KubeCluster(SERVING, SERVING, leaves, leaves, nodes,
                       why="the services' nodes, whole leaves: long-lived servers, which MultiKueue does not dispatch, "
                           "in a standalone cluster with its own Kueue")


def _sum_quotas(plan: Plan, workers: list[KubeCluster]) -> dict[str, dict[str, Quota]]:
    """The manager's quotas: per tenant and pool, the sum of its workers' (the concept page: the
    manager's quota equals the total in the worker clusters); the whole plane's without a serving cluster."""
    out: dict[str, dict[str, Quota]] = {}
    for t in plan.tenants:
        for pool in t.quotas:
            parts = [w.quotas[t.name][pool] for w in workers if pool in w.quotas.get(t.name, {})]
            if parts:
                out.setdefault(t.name, {})[pool] = Quota(sum(q.gpus for q in parts), sum(q.cpus for q in parts),
                                                         sum(q.memory_gib for q in parts))
    return out


def _refuse_combinations(plan: Plan, fleet: Fleet, file: str | None) -> None:
    kube = plan.kube_plane
    what = f"the {kube.name} plane ({len(kube.nodes):,} nodes) is beyond one cluster and planned behind MultiKueue"
    sched = schedulers.get(plan.gang_scheduler)
    if sched is not None and not sched.multicluster:
        raise OrchgenError(f"{what}, which is Kueue's; gang_scheduler {plan.gang_scheduler} cannot dispatch across "
                           "clusters (use kueue, or options.kubernetes_clusters: one)", file, None,
                           "options.gang_scheduler")
    if plan.slurm_plane is not None and plan.slurm_plane.operator:
        raise OrchgenError(f"{what}; Slurm on Kubernetes ({plan.slurm_plane.operator}) runs in one cluster",
                           file, None, "options.slurm_on_kubernetes")


def _one_cluster(plan: Plan) -> str | None:
    """Why the plane stays one cluster though beyond the envelope: MultiKueue has nothing to dispatch
    (no Kueue queues), or workloads that orchgen does not submit through it and does not serve
    apart (Ray, notebooks: not the starters' batch Jobs; services go to a serving cluster). None: it
    is planned as several clusters."""
    kube = plan.kube_plane
    if plan.gang_scheduler is None:
        return ("no gang workload gives it queues, and MultiKueue dispatches Kueue's queued jobs; split the fleet "
                "or give it options.gang_scheduler kueue")
    for i, d in enumerate(plan.workloads):
        if d.plane == kube.name and not is_service(d) and (d.workload_class == "ray" or d.interactive
                                                            or d.ray_host):
            return (f"workloads[{i}] ({d.name}) is a {d.workload_class or 'service'} workload, which orchgen does not "
                    "submit through MultiKueue; plan it in a fleet of its own")
    if not any(d.plane == kube.name and not is_service(d) for d in plan.workloads):
        return ("its workloads are all services, and MultiKueue dispatches batch jobs; split the fleet, or give it the "
                "batch workloads the workers would run")
    return None


def _units(plan: Plan, cap: int, file: str | None, serving: set[str] = frozenset()
           ) -> list[tuple[str, tuple[str, ...], int]]:
    """(name, its leaves, nodes of the plane) per fabric unit: a whole spine where its leaves fit
    one cluster, else each of its leaves; fabric order. `serving`: leaves the serving cluster holds."""
    fab = plan.fabric
    mine = set(plan.kube_plane.nodes)
    count = {leaf.name: sum(1 for n in leaf.nodes if n in mine) for leaf in fab.leaves}
    leaves = [leaf for leaf in fab.leaves if count[leaf.name] and leaf.name not in serving]
    units: list[tuple[str, tuple[str, ...], int]] = []
    placed: set[str] = set()
    for spine in fab.spines or ():
        below = [leaf for leaf in leaves if leaf.spine == spine.name and leaf.name not in placed]
        size = sum(count[leaf.name] for leaf in below)
        if below and size <= cap:
            units.append((spine.name, tuple(leaf.name for leaf in below), size))
        else:
            units += [(leaf.name, (leaf.name,), count[leaf.name]) for leaf in below]
        placed |= {leaf.name for leaf in below}
    units += [(leaf.name, (leaf.name,), count[leaf.name]) for leaf in leaves if leaf.name not in placed]
    for name, _, size in units:
        if size > cap:
            raise OrchgenError(f"leaf {name} has {size:,} nodes of the {plan.kube_plane.name} plane, more than one "
                               f"cluster holds ({cap:,}); cut the fabric into smaller leaves", file, None, "fleet.fabric")
    return units


def _pack(units: list[tuple[str, tuple[str, ...], int]], cap: int) -> list[list[tuple[str, tuple[str, ...], int]]]:
    groups: list[list[tuple[str, tuple[str, ...], int]]] = [[]]
    for unit in units:
        if groups[-1] and sum(u[2] for u in groups[-1]) + unit[2] > cap:
            groups.append([])
        groups[-1].append(unit)
    return groups


def _worker(plan: Plan, i: int, group: list[tuple[str, tuple[str, ...], int]]) -> KubeCluster:
    leaves = tuple(leaf for _, ls, _ in group for leaf in ls)
    leaf_nodes = {leaf.name: set(leaf.nodes) for leaf in plan.fabric.leaves}
    here = set().union(*(leaf_nodes[leaf] for leaf in leaves))
    nodes = {s.pool: tuple(n for n in s.nodes if n in here) for s in plan.kube_plane.slices}
    units = tuple(name for name, _, _ in group)
    return KubeCluster(f"worker-{i + 1:02d}", "worker", units, leaves, {p: n for p, n in nodes.items() if n},
                       why=f"whole fabric units {', '.join(units)}: no leaf or spine is cut, so a job placed "
                           "in this cluster stays under its switches")


def _gangs_fit(plan: Plan, workers: list[KubeCluster], file: str | None, skip: set[str] = frozenset(),
               only: set[str] | None = None) -> None:
    """Every multi-node job of the plane fits the nodes one worker has of its pool: MultiKueue runs a
    job whole in one worker, so a bigger one would never be admitted anywhere (the services, in the
    serving cluster: `only`; `skip`: not the workers')."""
    kube = plan.kube_plane.name
    for i, d in enumerate(plan.workloads):
        if d.plane != kube or d.name in skip or (only is not None and d.name not in only):
            continue
        # one job's span, as the planner sizes pools (planner.py: nodes, or its GPUs in whole nodes)
        span = max(d.facts.nodes, -(-d.gpus // d.gpus_per_node)) if d.gpus_per_node else d.facts.nodes
        most = max((len(w.nodes.get(d.pool, ())) for w in workers), default=0)
        if span > most:
            raise OrchgenError(
                f"{d.name} spans {span:,} nodes of pool {d.pool}, but the largest worker cluster holds {most:,} of "
                "them; MultiKueue runs a job whole in one cluster, so no gang may span two: make the job smaller",
                file, None, f"workloads[{i}].nodes")


def _split_quotas(plan: Plan, workers: list[KubeCluster]) -> list[KubeCluster]:
    """Each tenant's quota on a pool split across the workers holding that pool: per resource, the
    workers' quotas of a tenant add up to its quota, and a worker's tenants to its capacity (cluster
    by cluster, each tenant's rest divided in proportion to what it has left: exact integers)."""
    tenants = [t.name for t in plan.tenants]
    out: list[dict[str, dict[str, Quota]]] = [{t: {} for t in tenants} for _ in workers]
    for s in plan.kube_plane.slices:
        total = len(s.nodes)
        holders = [k for k, w in enumerate(workers) if w.nodes.get(s.pool)]
        left = {t.name: [t.quotas[s.pool].gpus, t.quotas[s.pool].cpus, t.quotas[s.pool].memory_gib]
                for t in plan.tenants}
        for k in holders:
            n = len(workers[k].nodes[s.pool])
            cols = []
            for r, per_node_total in enumerate((s.gpus, s.cpus * total, s.memory_gib * total)):
                remaining = sum(left[t][r] for t in tenants)
                # this worker's capacity of the resource: its share of the pool's, by its nodes
                capacity = per_node_total * n // total if k != holders[-1] else remaining
                weights = [left[t][r] for t in tenants]
                cols.append(largest_remainder(capacity, weights) if sum(weights) else [0] * len(tenants))
            for j, t in enumerate(tenants):
                got = [cols[r][j] for r in range(3)]
                out[k][t][s.pool] = Quota(*got)
                left[t] = [a - b for a, b in zip(left[t], got)]
    return [replace(w, quotas=q) for w, q in zip(workers, out)]

