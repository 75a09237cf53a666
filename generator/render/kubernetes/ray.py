"""A RayCluster (ray.io/v1) per Ray workload on the Kubernetes plane: a CPU head and one GPU worker
group sized from the workload, on its pool's nodes, wired to its tenant's queue.

KubeRay's autoscaler (`enableInTreeAutoscaling`: a sidecar in the head pod that adds workers for
the tasks, actors and placement groups Ray cannot place and removes idle ones, docs.ray.io "KubeRay
Autoscaling") sizes the worker group between minReplicas and maxReplicas where the plan allows it
(`elastic`): a workload that is no fixed gang (not tightly coupled across nodes, not on the RDMA fabric),
under a gang scheduler that admits a cluster changing size. Volcano's PodGroup then holds the head and
minReplicas (KubeRay's Volcano plugin: CalculateMinReplicas + 1 when autoscaling is on) and KAI's
grouper scales the gang within min/max (docs.ray.io, "KAI Scheduler" with KubeRay). Kueue 0.19 admits an
autoscaling RayCluster only as an elastic job (the `kueue.x-k8s.io/elastic-job: "true"` annotation with
the ElasticJobsViaWorkloadSlices gate on, schedulers.ray_autoscaling_annotations; the kueue release's
values turn the gate on, kueue.py): each size KubeRay's autoscaler sets becomes a Workload slice Kueue
admits within the ClusterQueue's quota, the larger slice replacing the admitted one, a smaller one
giving quota back. Not on a plane with a Topology (schedulers.ray_autoscaling_with_topology), and never
behind MultiKueue, whose RayClusters the webhook refuses to autoscale (raycluster_webhook.go
validateElasticJob; a plane with Ray stays one cluster, decide/clusters.py `_one_cluster`). For a fixed
gang, and where the scheduler cannot resize it, minReplicas = replicas = maxReplicas: the gang is sized
from the desired replicas and a fixed size keeps every worker inside it.

The gang is placed by the bundle's topology, the way each scheduler reads it from a RayCluster
(`topology_wiring`): KAI's pod grouper takes `kai.scheduler/topology` and
`kai.scheduler/topology-preferred-placement` from the top owner's annotations into the PodGroup
(pkg/podgrouper/podgrouper/plugins/defaultgrouper at v0.13.0, used by its Ray grouper); Kueue's
TAS reads `kueue.x-k8s.io/podset-preferred-topology` on a worker group's pod template (the
RayCluster integration's podset annotations, 0.19.2); KubeRay's Volcano plugin turns the
RayCluster label `volcano.sh/network-topology-mode` into the PodGroup's networkTopology (1.7.0).
"""
from __future__ import annotations

from typing import Any

from ... import schedulers
from ...decide import sizing
from ...decide.plan import Plan, WorkloadDecision
from . import fabric_wiring, gang, pod_security, priority
from .common import (KUEUE_PREFERRED_TOPOLOGY, RAY_AUTH_OPTIONS, RAY_IMAGE, RAY_VERSION, PodShape, dns1035, has_topology, meta,
                     namespace_of, node_selector, pool_has_topology, preferred_level, resources, shape, slice_of,
                     tolerations, topology_levels, topology_name)

KAI_TOPOLOGY = "kai.scheduler/topology"
KAI_PREFERRED_PLACEMENT = "kai.scheduler/topology-preferred-placement"
VOLCANO_NETWORK_TOPOLOGY_MODE = "volcano.sh/network-topology-mode"


def topology_wiring(plan: Plan, w: WorkloadDecision | None = None
                    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(RayCluster labels, RayCluster annotations, worker template annotations) that make the
    gang prefer one leaf switch (or the provider's narrowest shared level) under the plan's
    scheduler; empty without a topology, or on a pool whose nodes do not carry its levels."""
    on_topology = pool_has_topology(plan, w.pool) if w is not None else has_topology(plan)
    s = schedulers.get(plan.gang_scheduler)
    how = s.topology_wiring if s else None
    if how == "raycluster-annotations" and on_topology:
        return {}, {KAI_TOPOLOGY: topology_name(plan), KAI_PREFERRED_PLACEMENT: preferred_level(plan)}, {}
    if how == "podset-annotation" and on_topology:
        return {}, {}, {KUEUE_PREFERRED_TOPOLOGY: preferred_level(plan)}
    if how == "network-topology" and topology_levels(plan):
        # HyperNodes exist (listed on bare metal, discovered by label on a cloud)
        return {VOLCANO_NETWORK_TOPOLOGY_MODE: "soft"}, {}, {}  # prefer the fewest HyperNode tiers
    return {}, {}, {}


def cluster_name(w: WorkloadDecision) -> str:
    """KubeRay rejects RayCluster names that are no DNS-1035 label of at most 53 characters."""
    return dns1035(w.name, 53)


def _head_shape(plan: Plan, w: WorkloadDecision) -> PodShape:
    if w.ray_head is not None:
        return w.ray_head
    s = slice_of(plan, w.pool)
    return sizing.ray_head(s.cpus if s else None, s.memory_gib if s else None)


def _pod(plan: Plan, w: WorkloadDecision, name: str, shape_: PodShape, image: str,
         fabric: bool = False) -> dict[str, Any]:
    # head and workers both run on the workload's pool: both tolerate its taints
    spec: dict[str, Any] = {
        "priorityClassName": priority.class_of(plan, w),
        "nodeSelector": node_selector(plan, w.pool),
        "containers": [{"name": name, "image": image,
                        "resources": resources(shape_, limits_cpu_memory=True)}],
    }
    if tols := tolerations(plan, w.pool):
        spec["tolerations"] = tols
    if not fabric:  # a fabric pod needs root for IPC_LOCK (pod_security.py)
        pod_security.harden(spec)
    return {"spec": spec}


# KubeRay's autoscaler sidecar, which KubeRay adds to the head pod: the container securityContext that
# Pod Security `restricted` asks (the pod-level part is the head pod's, pod_security.harden)
AUTOSCALER_SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def scheduler_resizes(plan: Plan) -> bool:
    """Whether the plan's gang scheduler admits a Ray cluster KubeRay's autoscaler resizes, on this plane
    (schedulers.ray_autoscaling_with_topology): the rule for RayClusters and RayServices alike."""
    s = schedulers.get(plan.gang_scheduler)
    return s is None or s.ray_autoscaling_with_topology or not has_topology(plan)


def elastic(plan: Plan, w: WorkloadDecision) -> bool:
    """Whether KubeRay's autoscaler may resize this workload's cluster (module docstring)."""
    return (scheduler_resizes(plan) and not w.gang_scheduler_required and not w.facts.tightly_coupled
            and fabric_wiring.network_of(plan, w) is None)


def autoscaling_annotations(plan: Plan) -> dict[str, str]:
    """What an autoscaling RayCluster or RayService carries for the gang scheduler to admit it (Kueue:
    the elastic-job annotation, schedulers.ray_autoscaling_annotations)."""
    s = schedulers.get(plan.gang_scheduler)
    return dict(s.ray_autoscaling_annotations) if s else {}


def autoscaler_options() -> dict[str, Any]:
    # KubeRay's defaults, written out so a site sees what to tune (RayCluster autoscalerOptions, KubeRay
    # API reference): a worker idle this long is removed; Default upscaling is not rate-limited
    return {"idleTimeoutSeconds": 60, "upscalingMode": "Default",
            "securityContext": dict(AUTOSCALER_SECURITY_CONTEXT)}


def raycluster(plan: Plan, w: WorkloadDecision) -> dict[str, Any]:
    sh = shape(plan, w)
    scaling = elastic(plan, w)
    worker_image = f"{RAY_IMAGE}-gpu" if sh.gpus else RAY_IMAGE
    labels, annotations, worker_annotations = topology_wiring(plan, w)
    if scaling:
        annotations = {**annotations, **autoscaling_annotations(plan)}
    template = _pod(plan, w, "ray-worker", sh, worker_image, fabric=fabric_wiring.network_of(plan, w) is not None)
    if worker_annotations:
        template["metadata"] = {"annotations": worker_annotations}
    group = {
        "groupName": "gpu-workers" if sh.gpus else "workers",
        # autoscaling: from no worker (an idle cluster holds no GPU; the autoscaler adds workers for the
        # GPU tasks Ray queues) up to the GPUs the plan gives the workload; a fixed gang otherwise
        "replicas": 0 if scaling else sh.pods, "minReplicas": 0 if scaling else sh.pods, "maxReplicas": sh.pods,
        "rayStartParams": {},
        # the workers carry the gang's collectives: they get the fabric, the head does not
        "template": fabric_wiring.wire(plan, w, sh, template),
    }
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": meta(cluster_name(w), namespace_of(w.tenant), labels={**gang.for_raycluster(plan, w.tenant), **labels},
                         annotations=annotations or None),
        "spec": {
            "rayVersion": RAY_VERSION,
            "authOptions": dict(RAY_AUTH_OPTIONS),  # token auth on the dashboard, Jobs API, Ray Client
            "enableInTreeAutoscaling": scaling,
            **({"autoscalerOptions": autoscaler_options()} if scaling else {}),
            "headGroupSpec": {"rayStartParams": {},
                              "template": _pod(plan, w, "ray-head", _head_shape(plan, w), RAY_IMAGE)},
            "workerGroupSpecs": [group],
        },
    }


def ray_workloads(plan: Plan) -> list[WorkloadDecision]:
    kube = plan.kube_plane
    # a Ray service's cluster is its RayService's (serving.py), not a RayCluster of its own
    return [w for w in plan.workloads_on(kube.name) if w.workload_class == "ray" and w.serving is None] if kube else []


def objects(plan: Plan) -> list[dict[str, Any]]:
    return [raycluster(plan, w) for w in ray_workloads(plan)]


def resized(plan: Plan) -> list[str]:
    """The Ray workloads whose cluster KubeRay's autoscaler resizes: RayClusters (`elastic`) and
    RayServices (serving.ray_autoscaling)."""
    kube = plan.kube_plane
    services = [w.name for w in plan.workloads_on(kube.name) if w.serving is not None
                and w.serving.stack == "rayservice"] if kube and scheduler_resizes(plan) else []
    return [w.name for w in ray_workloads(plan) if elastic(plan, w)] + services


def ray_planned(plan: Plan) -> bool:
    kube = plan.kube_plane
    # KubeRay runs for Ray workloads and for RayServices (a serving stack, decide/serving.py)
    return kube is not None and any((w.primary == "ray" or (w.serving is not None and w.serving.stack == "rayservice"))
                                    and w.plane == kube.name for w in plan.workloads)


# --- the kuberay-operator release's values ---------------------------------------------------

def values(plan: Plan) -> dict[str, Any]:
    # KubeRay 1.7's accepted batchScheduler.name strings, in each scheduler's record (Kueue needs
    # none: its queue label does it)
    s = schedulers.get(plan.gang_scheduler)
    name = s.kuberay_batch_scheduler if s else None
    # Never batchScheduler.enabled: deprecated (means volcano) and an error together with `name`.
    return {"batchScheduler": {"name": name}} if name else {}
