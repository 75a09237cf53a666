"""A RayCluster (ray.io/v1) per Ray workload on the Kubernetes plane: a CPU head and one GPU worker
group sized from the workload, on its pool's nodes, wired to its tenant's queue.

Autoscaling stays off and minReplicas = replicas = maxReplicas: Volcano's and KAI's gangs and
Kueue's admission all size the gang from the desired replicas, so a fixed size keeps every worker
inside it.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, WorkloadDecision
from . import fabric_wiring, gang
from .common import (RAY_IMAGE, RAY_VERSION, PodShape, dns1035, meta, namespace_of, node_selector,
                         resources, shape, slice_of)


def cluster_name(w: WorkloadDecision) -> str:
    """KubeRay rejects RayCluster names that are no DNS-1035 label of at most 53 characters."""
    return dns1035(w.name, 53)


def _head_shape(plan: Plan, w: WorkloadDecision) -> PodShape:
    s = slice_of(plan, w.pool)
    cpus, mem = (s.cpus, s.memory_gib) if s else (8, 32)
    # the head runs the GCS and dashboard, no tasks: a small slice of a node is enough
    return PodShape(1, 0, max(1, min(8, cpus // 8)), max(2, min(32, mem // 8)))


def _pod(plan: Plan, w: WorkloadDecision, name: str, shape_: PodShape, image: str) -> dict[str, Any]:
    return {"spec": {
        "nodeSelector": node_selector(plan, w.pool),
        "containers": [{"name": name, "image": image,
                        "resources": resources(shape_, limits_cpu_memory=True)}],
    }}


def raycluster(plan: Plan, w: WorkloadDecision) -> dict[str, Any]:
    sh = shape(plan, w)
    worker_image = f"{RAY_IMAGE}-gpu" if sh.gpus else RAY_IMAGE
    group = {
        "groupName": "gpu-workers" if sh.gpus else "workers",
        "replicas": sh.pods, "minReplicas": sh.pods, "maxReplicas": sh.pods,
        "rayStartParams": {},
        # the workers carry the gang's collectives: they get the fabric, the head does not
        "template": fabric_wiring.wire(plan, w, sh, _pod(plan, w, "ray-worker", sh, worker_image)),
    }
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": meta(cluster_name(w), namespace_of(w.tenant), labels=gang.for_raycluster(plan, w.tenant)),
        "spec": {
            "rayVersion": RAY_VERSION,
            "enableInTreeAutoscaling": False,
            "headGroupSpec": {"rayStartParams": {},
                              "template": _pod(plan, w, "ray-head", _head_shape(plan, w), RAY_IMAGE)},
            "workerGroupSpecs": [group],
        },
    }


def ray_workloads(plan: Plan) -> list[WorkloadDecision]:
    kube = plan.kube_plane
    return [w for w in plan.workloads_on(kube.name) if w.workload_class == "ray"] if kube else []


def objects(plan: Plan) -> list[dict[str, Any]]:
    return [raycluster(plan, w) for w in ray_workloads(plan)]


def ray_planned(plan: Plan) -> bool:
    kube = plan.kube_plane
    return kube is not None and any(w.primary == "ray" and w.plane == kube.name for w in plan.workloads)


# --- the kuberay-operator release's values ---------------------------------------------------

# KubeRay 1.7's accepted batchScheduler.name strings. Kueue needs none: its queue label does it.
KUBERAY_SCHEDULER = {"volcano": "volcano", "kai": "kai-scheduler"}


def values(plan: Plan) -> dict[str, Any]:
    name = KUBERAY_SCHEDULER.get(plan.gang_scheduler or "")
    # Never batchScheduler.enabled: deprecated (means volcano) and an error together with `name`.
    return {"batchScheduler": {"name": name}} if name else {}
