"""What every Kubernetes-side module agrees on: object names, the queue wiring per gang scheduler,
pod sizing, node selection and the quota policy.

One place for these so the manifests, the starter workloads, the labelling script and the README
cannot drift apart (a queue a workload names must be a queue the manifests create).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from ... import schedulers
from ...spec import fabric
from ...decide import sizing
from ...decide.plan import PodShape, Plan, PoolSlice, Tenant, WorkloadDecision
# The queue labels, annotations and scheduler names live in the gang-scheduler registry
# (generator/schedulers.py); re-exported here for the renderers.
from ...schedulers import (KAI_QUEUE_LABEL, KAI_SCHEDULER, KUEUE_DEFAULT_LOCAL_QUEUE,  # noqa: F401
                           KUEUE_QUEUE_LABEL, RAY_SCHEDULER_LABEL, RAY_VOLCANO_QUEUE_LABEL,
                           VOLCANO_QUEUE_ANNOTATION, VOLCANO_SCHEDULER)

MANAGED = {"app.kubernetes.io/managed-by": "orchgen"}
GPU = "nvidia.com/gpu"

# Queue wiring, per scheduler (label and annotation names checked against upstream sources).
# (the queue labels, annotations and scheduler names: the gang-scheduler registry, imported above)
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
# Kueue 0.19.2 apis/kueue/v1beta2/topology_types.go: all pods in one domain of the level; each slice of
# podset-slice-size pods in one domain of the slice level (the slice annotations go with a
# podset-preferred-topology or alone: pkg/controller/jobframework/tas_validation.go)
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
KUEUE_SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KAI_PODGROUP_ANNOTATION = "pod-group-name"  # KAI's PodGroupAnnotationForPod

# Tenancy: every tenant namespace carries these labels; schedulers and admission policies select
# tenant namespaces by the first and read the tenant's queue from the second.
TENANT_LABEL = "orchgen.io/tenant"
QUEUE_LABEL = "orchgen.io/queue"
# Kueue's default LocalQueue (LocalQueueDefaulting, stable since 0.17 and without a feature gate
# at 0.19: site/content/en/docs/tasks/manage/enforce_job_management/setup_default_local_queue.md):
# a workload without a queue-name label in a namespace that has a LocalQueue of this name joins it.
# (KUEUE_DEFAULT_LOCAL_QUEUE = "default", in generator/schedulers.py)

# Slurm nodes that Kubernetes also runs (Slinky) carry this taint so that only slurmd pods land there.
SLURM_TAINT = {"key": fabric.LABEL_PLANE, "value": "slurm", "effect": "NoSchedule"}

# Placeholders teams replace; named plainly so nobody mistakes them for a real workload.
TRAIN_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
RAY_VERSION = "2.52.0"  # the ray-cluster chart 1.7.0 default
RAY_IMAGE = f"rayproject/ray:{RAY_VERSION}"
# Ray token authentication (Ray 2.52+, KubeRay 1.5.1+: spec.authOptions): KubeRay makes a Secret with a
# random token in the cluster's namespace and sets RAY_AUTH_MODE/RAY_AUTH_TOKEN on every Ray container, so
# the dashboard, the Jobs API and Ray Client answer only holders of the token (a tenant's Role reads the
# Secrets of its own namespace only). Off by default in Ray 2.52: https://docs.ray.io/en/latest/cluster/
# kubernetes/user-guides/kuberay-auth.html
RAY_AUTH_OPTIONS = {"mode": "token"}


def meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """ObjectMeta; cluster-scoped objects pass no namespace (and so carry none)."""
    out: dict[str, Any] = {"name": name, "labels": {**MANAGED, **(labels or {})}}
    if namespace is not None:
        out["namespace"] = namespace
    if annotations:
        out["annotations"] = dict(annotations)
    return out


def unique(base: str, taken: set[str]) -> str:
    """`base`, or `base-2`, `base-3` ... when a tenant already has that name."""
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}-{i}"
    return name


def fit(name: str, length: int) -> str:
    """`name` cut to `length` characters, never ending in '-' (names must end alphanumeric)."""
    return name[:length].rstrip("-")


def content_name(base: str, content: Any) -> str:
    """`<base>-<8 hex digits of the content's SHA-256>`: the name of an object whose fields the API
    server freezes after creation (Kueue Topology levels, `self == oldSelf`; a Kueue ResourceFlavor's
    nodeLabels, tolerations and topologyName once topologyName is set; KAI Topology levels). A
    re-plan that changes those fields then yields a new object beside the old one, and every delivery
    path (Pulumi, Argo CD and Flux prune) deletes the old one, instead of an update the API server
    rejects with "field is immutable". Same content, same name: an unchanged re-plan changes nothing.
    The content is hashed as canonical JSON (sorted keys), so the digest is stable across runs."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return f"{fit(base, 253 - 9)}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def dns1035(name: str, length: int = 63) -> str:
    """Service (and KubeRay) names must start with a letter; workload names may start with a digit."""
    return fit(name if name[:1].isalpha() else f"w{name}", length)


def indexed_name(name: str, pods: int, infix: str = "") -> str:
    """A name whose pods become hostnames `<name><infix>-<index>`: hostnames are DNS labels (63
    characters) and the Job controller does not shorten them, so the name gives way, never the index."""
    return fit(name, 63 - len(infix) - len(str(max(pods - 1, 0))) - 1)


def namespace_of(tenant: str) -> str:
    """Each tenant gets its own namespace, named after it (the implicit tenant after the fleet)."""
    return tenant


def tenant_namespaces() -> dict[str, Any]:
    """A label selector matching every tenant namespace and nothing else."""
    return {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]}


def queue_of(tenant: str) -> str:
    """The queue a tenant's workloads name: Kueue LocalQueue (in the tenant's namespace),
    Volcano Queue or KAI leaf Queue. Equal to the tenant name, which is a DNS label, so it also
    fits label values (63 characters)."""
    return tenant


def queues_enabled(plan: Plan) -> bool:
    """Queues and quotas exist only with a gang scheduler / quota manager in the plan: a k3s box
    with one implicit tenant gets none."""
    return plan.gang_scheduler is not None and plan.kube_plane is not None


def borrowing(plan: Plan) -> bool:
    """Idle quota can be borrowed across tenants whenever a queueing scheduler manages quotas
    (Kueue cohort, Volcano reclaimable queues with capability above deserved, KAI over-quota)."""
    return queues_enabled(plan)


def slices(plan: Plan) -> tuple[PoolSlice, ...]:
    kube = plan.kube_plane
    return kube.slices if kube else ()


def slice_of(plan: Plan, pool: str) -> PoolSlice | None:
    return next((s for s in slices(plan) if s.pool == pool), None)


def plane_totals(plan: Plan) -> tuple[int, int, int]:
    """(GPUs, CPUs, memory GiB) of the whole Kubernetes plane."""
    ss = slices(plan)
    return (sum(s.gpus for s in ss), sum(s.cpus * len(s.nodes) for s in ss),
            sum(s.memory_gib * len(s.nodes) for s in ss))


def tenant_totals(tenant: Tenant) -> tuple[int, int, int]:
    """A tenant's nominal (GPUs, CPUs, memory GiB) summed over the plane's pools."""
    qs = tenant.quotas.values()
    return sum(q.gpus for q in qs), sum(q.cpus for q in qs), sum(q.memory_gib for q in qs)


def gpu_resource(s: PoolSlice | None) -> tuple[str, int]:
    """(extended resource, devices per GPU) of a pool's GPUs as the device plugin advertises them:
    `nvidia.com/gpu`, or with MIG (mig.strategy mixed) `nvidia.com/mig-<profile>`, per_gpu per GPU."""
    mig = s.hardware.mig if s is not None and s.gpu_type else None
    return (mig.resource, mig.per_gpu) if mig else (GPU, 1)


def gpu_resources(plan: Plan) -> list[str]:
    """The GPU resources quotas count on this plane: nvidia.com/gpu always (the resource a plane
    without MIG is about), then each MIG resource in pool order."""
    return list(dict.fromkeys([GPU, *(gpu_resource(s)[0] for s in slices(plan))]))


def devices(plan: Plan, gpus_by_pool: dict[str, int]) -> dict[str, int]:
    """Whole GPUs per pool as device counts per resource (a MIG pool's GPU is per_gpu instances)."""
    out = {r: 0 for r in gpu_resources(plan)}
    for pool, gpus in gpus_by_pool.items():
        resource, per_gpu = gpu_resource(slice_of(plan, pool))
        out[resource] += gpus * per_gpu
    return out


def plane_devices(plan: Plan) -> dict[str, int]:
    """GPU devices of the whole Kubernetes plane, per resource."""
    return devices(plan, {s.pool: s.gpus for s in slices(plan)})


def tenant_devices(plan: Plan, tenant: Tenant) -> dict[str, int]:
    """A tenant's nominal GPU devices summed over the plane's pools, per resource."""
    return devices(plan, {pool: q.gpus for pool, q in tenant.quotas.items()})


def queue_is_quota(plan: Plan) -> bool:
    """The plane's gang scheduler is its tenants' GPU quota and holds their pods gated until it admits
    them (Kueue: kueue.py's managedJobsNamespaceSelector, manageJobsWithoutQueueName and the pod
    integration), so no namespace ResourceQuota caps GPUs (schedulers.py namespace_gpu_quota)."""
    s = schedulers.get(plan.gang_scheduler)
    return queues_enabled(plan) and s is not None and not s.namespace_gpu_quota


def resource_quota_gpus(plan: Plan, tenant: Tenant) -> dict[str, int]:
    """The namespace ResourceQuota's GPU caps, per resource ({} under Kueue: no ResourceQuota).

    Under Kueue the tenant's ClusterQueue is its GPU quota and no ResourceQuota caps GPUs: the API
    server enforces a ResourceQuota when a pod is created and counts every pod not yet terminated,
    a scheduling-gated one included (Kubernetes docs "Resource Quotas"; blog "Kubernetes 1.26: Pod
    Scheduling Readiness", Use Cases), while Kueue's pod integration creates pods gated
    (`kueue.x-k8s.io/admission`, Kueue KEP-976 "Gating Pod Scheduling") and admits them later. So
    past the cap the API server refused pods Kueue would queue: a second pod group was partly refused
    and its stored pods waited forever for the missing ones (seen with the real Kueue,
    tests/test_kube_real.py).

    With borrowing on (Volcano, KAI) it is the whole plane: a hard cap at the nominal share would make
    the API server reject exactly the pods the scheduler lets borrow. Without a quota manager it is the
    tenant's nominal share, the only enforcement there is.

    With borrowing, plus the GPUs of the tenant's multi-node serving replicas (lws_pod_devices): a
    ResourceQuota counts every pod not yet terminated, Pending ones too, so the pods of a
    LeaderWorkerSet group waiting for quota would use up the cap, and the API server would refuse a
    worker of the group that was admitted, which then runs split."""
    if queue_is_quota(plan):
        return {}
    if not borrowing(plan):
        return tenant_devices(plan, tenant)
    caps = plane_devices(plan)
    for r, n in lws_pod_devices(plan, tenant).items():
        caps[r] = caps.get(r, 0) + n
    return caps


def lws_pod_devices(plan: Plan, tenant: Tenant) -> dict[str, int]:
    """GPU devices of all the pods of a tenant's LeaderWorkerSets at max_replicas, per resource. LWS
    creates a group's pods before a gang scheduler places them (Kueue gates them; Volcano and KAI
    leave them Pending), and Kueue's Workload for a group exists before its workers do. A one-pod
    replica (Deployment, InferenceService) is whole or absent, and a RayService's cluster is
    suspended by Kueue instead, so they add none."""
    out: dict[str, int] = {}
    for w in workloads(plan):
        sv = w.serving
        if w.tenant != tenant.name or sv is None or sv.stack != "lws" or not sv.pod.gpus:
            continue
        r = sv.pod.gpu_resource
        out[r] = out.get(r, 0) + sv.max_replicas * sv.nodes_per_replica * sv.pod.gpu_devices
    return out


def workloads(plan: Plan) -> list[WorkloadDecision]:
    """Workloads that run natively on the Kubernetes plane (not Slurm jobs hosted by an operator)."""
    kube = plan.kube_plane
    return plan.workloads_on(kube.name) if kube else []


def shape(plan: Plan, w: WorkloadDecision) -> PodShape:
    """The pods of a workload's starter: the Plan's (the planner sizes every Kubernetes workload);
    sized here by the same rule only for a decision the planner did not place."""
    if w.shape is not None:
        return w.shape
    s = slice_of(plan, w.pool)
    per_node = w.gpus_per_node or (s.gpus_per_node if s else 0)
    resource, per_gpu = gpu_resource(s)
    return sizing.pod_shape(w.facts.nodes, w.gpus, per_node, s.cpus if s else None,
                            s.memory_gib if s else None, resource, per_gpu)


def pool_labels(plan: Plan, pool: str) -> dict[str, str]:
    """How a pool's nodes are known. Bare metal: orchgen's pool label, which node-labels.sh sets on
    the real hostnames. Off bare metal: the labels the provisioner sets (the pool's node_labels, or
    the provider's node-pool label), never a node name, since the plan's names there are invented."""
    cloud = plan.platform.selectors.get(pool)
    return dict(cloud) if cloud is not None else {fabric.LABEL_POOL: pool}


def taints(plan: Plan, pool: str) -> list[dict[str, str]]:
    """The taints of a pool's nodes as Node.spec.taints writes them (decide.platform.pool_taints)."""
    return [{"key": k, **({"value": v} if v else {}), "effect": e} for k, v, e in plan.platform.taints.get(pool, ())]


def toleration(taint: dict[str, str]) -> dict[str, str]:
    """The toleration of exactly one taint: Equal on its value, Exists for a taint without one."""
    if taint.get("value"):
        return {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]}
    return {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}


def tolerations(plan: Plan, pool: str) -> list[dict[str, str]]:
    """What a pod for `pool` tolerates: its nodes' taints, and nothing else (a pod for a CPU pool
    does not tolerate the GPU pools' taints, so it stays off GPU nodes)."""
    return [toleration(t) for t in taints(plan, pool)]


def tolerates(tols: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    """Kubernetes' rule (core/v1 Toleration.ToleratesTaint): an empty effect matches every effect, an
    empty key with Exists every key; Exists ignores the value, Equal (the default) compares it."""
    for t in tols:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("key") and t["key"] != taint["key"]:
            continue
        if not t.get("key") and t.get("operator") != "Exists":
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_selector(plan: Plan, pool: str) -> dict[str, str]:
    """The labels this plane's nodes of `pool` carry. In a hybrid the plane label is added (node-
    labels.sh sets it), since a pool split between the planes has nodes of the same pool on both sides."""
    out = pool_labels(plan, pool)
    if plan.hybrid:
        out[fabric.LABEL_PLANE] = "kubernetes"
    return out


def topology_spec_levels(plan: Plan) -> list[dict[str, str]]:
    """The Kueue / KAI Topology's `spec.levels`: the plane's topology labels broadest first (the
    fabric's on bare metal, the provider's on a cloud), the hostname level last (Kueue allows it
    only there; both take the same shape)."""
    return [{"nodeLabel": lv} for lv in (*topology_levels(plan), fabric.LABEL_HOSTNAME)]


def clique_topology_levels(plan: Plan) -> list[dict[str, str]]:
    """The Kueue Topology of a pool of NVLink domains (`platform.compute_domains`): the fabric's levels,
    then the NVLink clique GFD labels each tray with (fabric.LABEL_CLIQUE), then the node. A rack's
    trays under several leaves make one clique domain per leaf in Kueue's tree: a job that requires the
    clique then stays under one leaf too, stricter than NVLink needs, never looser."""
    levels = topology_spec_levels(plan)
    return [*levels[:-1], {"nodeLabel": fabric.LABEL_CLIQUE}, levels[-1]]


def clique_topology_name(plan: Plan) -> str:
    return content_name(f"{plan.name}-nvlink", clique_topology_levels(plan))


def topology_name(plan: Plan) -> str:
    """Kueue / KAI Topology object name (cluster-scoped): `<fleet>-fabric-<hash of the levels>`.
    Both CRDs make `spec.levels` immutable, and a fleet that grows a second leaf gains a spine
    level, so the name follows the levels (see `content_name`)."""
    return content_name(f"{plan.name}-fabric", topology_spec_levels(plan))


def topology_levels(plan: Plan) -> list[str]:
    """The plane's topology labels, broadest first, without the hostname level: the fabric model's
    on bare metal (node-labels.sh sets them), the provider's own on a cloud (decide.platform)."""
    return list(plan.platform.topology)


def has_topology(plan: Plan) -> bool:
    return queues_enabled(plan) and bool(topology_levels(plan)) and bool(plan.platform.topology_pools)


def pool_has_topology(plan: Plan, pool: str) -> bool:
    """Whether the pool's flavor names the Topology (every node of the pool carries its levels)."""
    return has_topology(plan) and pool in plan.platform.topology_pools


def preferred_level(plan: Plan) -> str:
    """The level a multi-pod gang prefers to fit in (a leaf switch on bare metal)."""
    return plan.platform.preferred_level or fabric.LABEL_LEAF


def level_topology(plan: Plan, api_version: str) -> list[dict[str, Any]]:
    """A Kueue or KAI Topology named after its levels (the provider's labels on a cloud)."""
    if not has_topology(plan):
        return []
    return [{"apiVersion": api_version, "kind": "Topology", "metadata": meta(topology_name(plan)),
             "spec": {"levels": topology_spec_levels(plan)}}]


def resources(shape_: PodShape, *, limits_cpu_memory: bool = False) -> dict[str, Any]:
    """Container resources: GPUs in requests and limits (extended resources cannot overcommit),
    CPU and memory requested so that quota managers count them."""
    req: dict[str, Any] = {"cpu": str(shape_.cpu), "memory": f"{shape_.memory_gib}Gi"}
    lim: dict[str, Any] = {}
    if shape_.gpus:  # a MIG pool's pods ask for its instances: per_gpu of them per whole GPU
        req[shape_.gpu_resource] = str(shape_.gpu_devices)
        lim[shape_.gpu_resource] = str(shape_.gpu_devices)
    if limits_cpu_memory:  # Ray sizes its raylet from limits
        lim.update({"cpu": req["cpu"], "memory": req["memory"]})
    out: dict[str, Any] = {"requests": req}
    if lim:
        out["limits"] = lim
    return out
