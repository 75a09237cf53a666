"""clusters/: a plane beyond one cluster (plan.clusters, generator/decide/clusters.py), clusters/<name>/ per cluster.

Each cluster's folder is laid out as a single-cluster bundle's kubernetes/ and pulumi/ are
(contract.cluster_dir), so its Pulumi program reads ../kubernetes as everywhere else:

- clusters/manager/: the Kueue MultiKueue manager. Only the kueue release, with MultiKueue's
  settings (`multiKueue:` in the Configuration); the tenants' namespaces, PriorityClasses, access;
  the same Topology, flavors, cohort and ClusterQueues as a single cluster, each ClusterQueue with
  the tenant's WHOLE quota and the MultiKueue AdmissionCheck; the AdmissionCheck, its
  MultiKueueConfig listing every worker and a MultiKueueCluster per worker naming the kubeconfig
  Secret the site creates (never in the bundle); and the starters (kubernetes/workloads/): tenants
  submit to the manager.
- clusters/worker-NN/: a cluster as orchgen plans one (GPU Operator, Network Operator, Kueue ...)
  over its own nodes, with the same namespaces, PriorityClasses, ClusterQueue and LocalQueue names
  as the manager (MultiKueue creates a dispatched job in the same namespace and LocalQueue on the
  worker: kueue.sigs.k8s.io/docs/tasks/manage/setup_multikueue, "In the Worker Cluster"), the
  tenants' quotas of that worker (decide/clusters.py: they add up to the tenant's), and no
  starters (MultiKueue creates the jobs there).

- clusters/serving/ (a plane with services, decide/clusters.py): a standalone cluster as orchgen
  plans one over its own nodes, with its own Kueue and the services' starters only; no MultiKueue
  reaches it (the manager's MultiKueueConfig lists the workers), and the manager's starters are the
  batch ones.

Object names stay the fleet's in every cluster (a dispatched job names the same PriorityClass and
LocalQueue everywhere); only each Pulumi project is named after its cluster.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml

from ... import schedulers
from ...contract import MANIFESTS_DIR, WORKLOADS_DIR, cluster_dir
from ...decide.plan import KubeCluster, Plan
from ...yamlio import dump_yaml, dump_yaml_all
from ..templating import render_template

API = "kueue.x-k8s.io/v1beta2"
# The controller name MultiKueue's admission check controller answers to (Kueue 0.19.2
# apis/kueue/v1beta2: MultiKueueControllerName; the setup task's AdmissionCheck uses it).
CONTROLLER = "kueue.x-k8s.io/multikueue"
CHECK = "multikueue"  # the AdmissionCheck and its MultiKueueConfig
KUBECONFIG_SECRET = "{cluster}-kubeconfig"  # in the kueue release's namespace, key `kubeconfig` (the CRD's text)
# The manager's Configuration `multiKueue:` block (config.kueue.x-k8s.io/v1beta2, configuration_types.go
# MultiKueue): Kueue's defaults written out so a site sees and tunes them:
# - gcInterval 1m: how often remote objects whose manager-side Workload is gone are collected;
# - origin: the label value marking objects this manager created in the workers (one manager per fleet);
# - workerLostTimeout 15m: how long a job stays Ready on a worker the manager lost contact with
#   before it is requeued elsewhere (apis/config/v1beta1/defaults.go DefaultMultiKueueWorkerLostTimeout).
MANAGER_FRAMEWORKS = ("batch/job",)
# The identity the manager's MultiKueue uses in a worker (kueue.sigs.k8s.io/docs/tasks/manage/
# setup_multikueue, create-multikueue-kubeconfig.sh): a ServiceAccount in Kueue's namespace with the
# script's rights for the integrations the manager enables (batch/job) and Workloads, and a
# long-lived token Secret the token controller fills in the worker (nothing secret in the bundle).
WORKER_SA = "multikueue"
WORKER_RIGHTS = (
    ("batch", "jobs", ("create", "delete", "get", "list", "watch")),
    ("batch", "jobs/status", ("get",)),
    ("kueue.x-k8s.io", "workloads", ("create", "delete", "get", "list", "watch")),
    ("kueue.x-k8s.io", "workloads/status", ("get", "patch", "update")),
)
MULTIKUEUE_CONFIG = {"gcInterval": "1m", "origin": "multikueue", "workerLostTimeout": "15m"}


def workers(plan: Plan) -> list[KubeCluster]:
    return [c for c in plan.clusters if c.role == "worker"]


def serving(plan: Plan) -> KubeCluster | None:
    return next((c for c in plan.clusters if c.role == "serving"), None)


def _services(plan: Plan) -> set[str]:
    from ...decide.clusters import is_service

    return {w.name for w in plan.workloads if is_service(w)}


def worker_plan(plan: Plan, c: KubeCluster) -> Plan:
    """The plan as one cluster holding only this worker's nodes, with the tenants' quotas there."""
    kube = plan.kube_plane
    slices = tuple(replace(s, nodes=c.nodes[s.pool], leaves=tuple(x for x in s.leaves if x in c.leaves))
                   for s in kube.slices if s.pool in c.nodes)
    planes = {**plan.planes, kube.name: replace(kube, slices=slices)}
    tenants = tuple(replace(t, quotas={p: q for p, q in c.quotas[t.name].items() if p in c.nodes})
                    for t in plan.tenants)
    pools = set(c.nodes)
    topo = tuple(p for p in plan.platform.topology_pools if p in pools)
    return replace(plan, planes=planes, tenants=tenants, clusters=(),
                   platform=replace(plan.platform, topology_pools=topo))


def _pulumi(plan: Plan, cluster: str) -> dict[str, bytes]:
    from ..pulumi import render as pulumi_render

    return pulumi_render(replace(plan, name=f"{plan.name}-{cluster}"))


def _gitops(plan: Plan, sub: Plan, cluster: str, files: dict[str, bytes]) -> dict[str, bytes]:
    """The cluster's gitops/ (and kubernetes/kustomization.yaml) for `plan.gitops`, wrapped from its own
    files exactly as a single cluster's are (render/gitops/wrap.py: the same waves, dependsOn,
    prerequisites first and operator resources last), the paths it reads in the GitOps repository
    being its folder `<fleet>/clusters/<cluster>` and its Argo CD Applications and Flux
    Kustomizations named `<fleet>-<cluster>-...`.

    One GitOps controller per cluster, each reading its own folder. Flux: every cluster's Flux is
    bootstrapped on a path of its own in the one repository, as Flux's guide lays a fleet out ("Each
    cluster state is defined in a dedicated dir e.g. clusters/production": fluxcd.io/flux/guides/
    repository-structure). Argo CD: likewise one Argo CD in each cluster (its in-cluster destination,
    an app of apps per cluster), not one on the manager managing the workers. A hub would need each
    worker registered as a cluster Secret holding a bearer token or client certificate (Argo CD
    operator-manual/declarative-setup.md, "Clusters"): credentials that must not be in Git, on top of
    the MultiKueue kubeconfigs; it would stop every worker's reconciliation whenever the manager is
    down, though the workers run the jobs; and one application controller would watch every
    4,000-node worker's objects (operator-manual/high_availability.md shards the controller by
    cluster for that load). The README (multicluster.md.j2) says the same to the site."""
    from ..gitops import wrap

    if plan.gitops == "none":
        return {}
    from ..gitops.common import repo_dir

    named = replace(sub, name=f"{plan.name}-{cluster}", gitops_path=f"{repo_dir(plan)}/{cluster_dir(cluster)}")
    return wrap.render(named, files)


def _under(cluster: str, files: dict[str, bytes]) -> dict[str, bytes]:
    return {f"{cluster_dir(cluster)}/{path}": data for path, data in files.items()}


def worker_files(plan: Plan, c: KubeCluster) -> dict[str, bytes]:
    from ..kubernetes import helm, manifests
    from ..kubernetes.slurm_values import slurm_on_kubernetes_values

    sub = worker_plan(plan, c)
    files = {**helm.render(sub, extra=slurm_on_kubernetes_values()), **manifests.render(sub)}
    files = {p: d for p, d in files.items() if not p.startswith(f"{WORKLOADS_DIR}/")}
    files[f"{MANIFESTS_DIR}/{WORKER_ACCESS_FILE}"] = dump_yaml_all(worker_access(plan))
    return _under(c.name, {**files, **_gitops(plan, sub, c.name, files), **_pulumi(sub, c.name)})


WORKER_ACCESS_FILE = "19-multikueue-access.yaml"
CONNECT_SCRIPT = "kubernetes/connect-worker.sh"  # the manager's: a worker's kubeconfig Secret from its token


def worker_access(plan: Plan) -> list[dict[str, Any]]:
    """What the manager's MultiKueue may do in this worker, and the token it does it with: the
    ServiceAccount, a ClusterRole of WORKER_RIGHTS only, its binding, and a
    kubernetes.io/service-account-token Secret (no data here: the worker's token controller writes the
    token and CA into it; the bundle README makes the manager's kubeconfig Secret from them)."""
    from ..kubernetes.common import meta

    ns = plan.charts[schedulers.get(plan.gang_scheduler).chart].namespace
    role = f"orchgen-{WORKER_SA}"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(WORKER_SA, ns)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(role),
         "rules": [{"apiGroups": [g], "resources": [r], "verbs": list(v)} for g, r, v in WORKER_RIGHTS]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(role),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": WORKER_SA, "namespace": ns}]},
        # a long-lived token, as the setup script makes it (kubernetes.io/docs/concepts/configuration/
        # secret/#serviceaccount-token-secrets): the manager holds it for as long as it dispatches here
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": meta(WORKER_SA, ns, annotations={"kubernetes.io/service-account.name": WORKER_SA})},
    ]


def multikueue_objects(names: list[str]) -> list[dict[str, Any]]:
    """The AdmissionCheck, its MultiKueueConfig (every worker, in fabric order: the Incremental
    dispatcher tries them in this order, the default AllAtOnce all at once) and one MultiKueueCluster
    per worker, which reads its kubeconfig from a Secret the site creates (kueue's namespace, key
    `kubeconfig`: the CRD's description of locationType Secret)."""
    from ..kubernetes.common import meta

    out: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "AdmissionCheck", "metadata": meta(CHECK),
         "spec": {"controllerName": CONTROLLER,
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CHECK}}},
        {"apiVersion": API, "kind": "MultiKueueConfig", "metadata": meta(CHECK), "spec": {"clusters": names}},
    ]
    out += [{"apiVersion": API, "kind": "MultiKueueCluster", "metadata": meta(name),
             "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                       "location": KUBECONFIG_SECRET.format(cluster=name)}}}}
            for name in names]
    return out


def manager_manifests(plan: Plan, names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The manager's kubernetes/manifests/ files; `names`: the workers, in fabric order."""
    from ..kubernetes import kueue, priority, tenancy

    queues = []
    for obj in kueue.objects(plan):
        if obj["kind"] == "ClusterQueue":  # the tenant's whole quota, admitted here, then dispatched
            obj = {**obj, "spec": {**obj["spec"], "admissionChecksStrategy": {
                "admissionChecks": [{"name": CHECK}]}}}
        queues.append(obj)
    files = {"00-namespaces.yaml": tenancy.namespaces(plan), "01-priorities.yaml": priority.objects(plan),
             "15-access.yaml": tenancy.access(plan), "18-topology.yaml": kueue.topology(plan),
             "19-multikueue.yaml": multikueue_objects(names),
             "20-kueue.yaml": queues + tenancy.queue_policy(plan)}
    return {name: objs for name, objs in files.items() if objs}


def manager_values(plan: Plan) -> dict[str, Any]:
    from ..kubernetes import kueue

    values = kueue.values(plan)
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    config["multiKueue"] = dict(MULTIKUEUE_CONFIG)
    # The manager's MultiKueue watches the kind of every enabled integration in each worker, and a
    # worker lacking one CRD is not connected at all (Kueue 0.19.2 reports the MultiKueueCluster
    # inactive, ClientConnectionFailed: `no matches for kind "LeaderWorkerSet"`, seen in
    # tests/test_multikueue.py): the manager enables only what tenants submit here, batch Jobs
    # (the starters; decide/clusters.py refuses the workloads of other kinds).
    config["integrations"]["frameworks"] = list(MANAGER_FRAMEWORKS)
    values["managerConfig"]["controllerManagerConfigYaml"] = dump_yaml(config).decode()
    return values


def manager_files(plan: Plan) -> dict[str, bytes]:
    from ..kubernetes import helm, manifests

    chart = schedulers.get(plan.gang_scheduler).chart  # the scheduler that dispatches (decide/clusters.py)
    manager = next(c for c in plan.clusters if c.role == "manager")
    # its ClusterQueues hold what the workers hold (the whole plane's quota, less a serving cluster's)
    tenants = tuple(replace(t, quotas=dict(manager.quotas.get(t.name, t.quotas))) for t in plan.tenants)
    sub = replace(plan, charts={chart: plan.charts[chart]}, clusters=(), tenants=tenants)
    files = helm.render(sub, extra={chart: manager_values})
    files.update({f"{MANIFESTS_DIR}/{name}": dump_yaml_all(objs) for name, objs in manager_manifests(sub, [c.name for c in workers(plan)]).items()})
    apart = _services(plan) if serving(plan) else set()  # served in the serving cluster, not dispatched
    files.update({f"{WORKLOADS_DIR}/{name}": dump_yaml_all(objs)
                  for name, objs in manifests.starter_files(plan).items() if name.removesuffix(".yaml") not in apart})
    files[CONNECT_SCRIPT] = render_template(
        "kubernetes/connect-worker.sh.j2", fleet=plan.name, sa=WORKER_SA, access_file=WORKER_ACCESS_FILE,
        namespace=plan.charts[chart].namespace, workers=[c.name for c in workers(plan)])
    return _under("manager", {**files, **_gitops(plan, sub, "manager", files), **_pulumi(sub, "manager")})


def serving_files(plan: Plan, c: KubeCluster) -> dict[str, bytes]:
    """The serving cluster: a single cluster over its nodes, its own Kueue (no MultiKueue), and the
    services' starters only."""
    from ..kubernetes import helm, manifests
    from ..kubernetes.slurm_values import slurm_on_kubernetes_values

    sub = worker_plan(plan, c)
    apart = _services(plan)
    files = {**helm.render(sub, extra=slurm_on_kubernetes_values()), **manifests.render(sub)}
    files = {p: d for p, d in files.items()
             if not p.startswith(f"{WORKLOADS_DIR}/") or p[len(WORKLOADS_DIR) + 1:].removesuffix(".yaml") in apart}
    return _under(c.name, {**files, **_gitops(plan, sub, c.name, files), **_pulumi(sub, c.name)})


def render(plan: Plan) -> dict[str, bytes]:
    """Every cluster's folder: the manager's, then each worker's, then the serving cluster's."""
    if not plan.clusters:
        return {}
    out = manager_files(plan)
    for c in workers(plan):
        out.update(worker_files(plan, c))
    if (c := serving(plan)) is not None:
        out.update(serving_files(plan, c))
    return out
