"""How a Kubernetes workload's starter is sized: pods, and GPUs, CPUs and memory per pod.

A fact of the Plan (WorkloadDecision.shape, .ray_head), decided once: the starter manifests and
RayClusters are rendered from it, the tenants' guarantees are sized by it, and the planner checks
that the starters sharing a pool's nodes fit in them together.
"""
from __future__ import annotations

from .plan import PodShape


def pod_shape(nodes: int, gpus: int, per_node: int, cpus: int | None, memory_gib: int | None,
              gpu_resource: str = "nvidia.com/gpu", per_device: int = 1) -> PodShape:
    """One pod per node's worth of GPUs. `cpus` / `memory_gib`: what one node can give pods, None where
    the pool is not known (the pod then asks for a token 1 CPU and 2 GiB). `gpu_resource`, `per_device`:
    the resource a pool's GPUs are advertised as, and how many of it one GPU is (MIG instances)."""
    if per_node and gpus:
        pods = max(nodes, -(-gpus // per_node))
        # a workload asking for fewer GPUs than its nodes hold (gpus: 1 on a 2-GPU box) gets that many
        per_pod = min(per_node, -(-gpus // pods))
    else:
        pods, per_pod = nodes, 0
    if per_pod and cpus is not None and memory_gib is not None:
        # the node share the pod's GPUs stand for, less 20% for kubelet, system daemons and the
        # GPU operator's pods (allocatable is below capacity)
        cpu = max(1, cpus * per_pod * 8 // (per_node * 10))
        mem = max(1, memory_gib * per_pod * 8 // (per_node * 10))
    else:
        cpu, mem = 1, 2
    return PodShape(pods, per_pod, cpu, mem, gpu_resource, per_device)


def ray_head(cpus: int | None, memory_gib: int | None) -> PodShape:
    """A RayCluster's head runs the GCS and dashboard, no tasks: a small slice of a node is enough."""
    cpus, memory_gib = (8, 32) if cpus is None or memory_gib is None else (cpus, memory_gib)
    return PodShape(1, 0, max(1, min(8, cpus // 8)), max(2, min(32, memory_gib // 8)))


def totals(*shapes: PodShape | None) -> tuple[int, int, int]:
    """(GPUs, CPUs, memory GiB) that the pods of `shapes` request together."""
    ss = [s for s in shapes if s is not None]
    return (sum(s.pods * s.gpus for s in ss), sum(s.pods * s.cpu for s in ss),
            sum(s.pods * s.memory_gib for s in ss))
