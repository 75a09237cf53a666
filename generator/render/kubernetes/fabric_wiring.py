"""The fabric in a tightly coupled multi-node pod: what the starter workloads and RayCluster workers
add so that NCCL runs over InfiniBand/RoCE or EFA instead of TCP on the pod network.

Only for the plan's `platform.fabric_workloads` (tightly coupled, more than one pod, on the
Kubernetes plane, with a network the plan sets up): single-node and service workloads get none.

- the network's device resource in requests and limits (extended resources cannot overcommit):
  `rdma/rdma_shared_device_a` (one gives the pod every HCA: k8s-rdma-shared-dev-plugin shared mode)
  or `vpc.amazonaws.com/efa` (the pod's share of the node's EFA interfaces);
- `IPC_LOCK`: RDMA registers (pins) memory, which an unprivileged container may not lock beyond
  its small RLIMIT_MEMLOCK without it (the Network Operator's and GPU Operator's RDMA test pods add it);
- the secondary network, by Multus' annotation `k8s.v1.cni.cncf.io/networks` (the network plumbing
  working group's multi-net spec), on the bare-metal RDMA fabric;
- NCCL's interface variables (and libfabric's provider on EFA), from `platform.network.env`.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Network, Plan, WorkloadDecision
from .common import PodShape, slice_of

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
IPC_LOCK = "IPC_LOCK"


def network_of(plan: Plan, w: WorkloadDecision) -> Network | None:
    net = plan.platform.network
    return net if net is not None and w.name in plan.platform.fabric_workloads else None


def devices(plan: Plan, w: WorkloadDecision, sh: PodShape) -> int:
    net = network_of(plan, w)
    if net is None:
        return 0
    s = slice_of(plan, w.pool)
    return net.devices(w.pool, sh.gpus, s.gpus_per_node if s else 0)


def wire(plan: Plan, w: WorkloadDecision, sh: PodShape, template: dict[str, Any]) -> dict[str, Any]:
    """Add the fabric to a PodTemplateSpec (or a Pod) in place; return it. No-op off the fabric."""
    net = network_of(plan, w)
    if net is None:
        return template
    count = str(devices(plan, w, sh))
    # one of each rail's resource where the network is per rail (every HCA, an interface on each)
    wanted = {r.resource: "1" for r in net.rails} if net.rails else {net.resource: count}
    for c in template["spec"]["containers"]:
        res = c.setdefault("resources", {})
        for resource, n in wanted.items():
            res.setdefault("requests", {})[resource] = n
            res.setdefault("limits", {})[resource] = n
        caps = c.setdefault("securityContext", {}).setdefault("capabilities", {}).setdefault("add", [])
        if IPC_LOCK not in caps:
            caps.append(IPC_LOCK)
        env = c.setdefault("env", [])
        env += [{"name": k, "value": v} for k, v in net.env if not any(e["name"] == k for e in env)]
    if net.attachment:
        template.setdefault("metadata", {}).setdefault("annotations", {})[NETWORKS_ANNOTATION] = net.attachment
    return template
