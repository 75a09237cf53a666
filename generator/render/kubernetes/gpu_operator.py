"""NVIDIA GPU Operator: the gpu-operator release's values (Plan -> dict).

Only keys that exist in the chart's upstream default values.yaml are emitted (tests check each
against the reference copy), and only where the Plan calls for something other than the default.
Helm replaces lists wholesale, so a list we extend (tolerations) repeats the upstream entries.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from ...spec.fabric import LABEL_PLANE

RDMA_FABRICS = ("infiniband", "roce")

# k3s runs its own containerd: the toolkit must edit k3s's generated config.toml (not the .tmpl,
# which holds Go template syntax the toolkit cannot parse, gpu-operator #473) and use its socket.
K3S_TOOLKIT_ENV = (
    {"name": "CONTAINERD_CONFIG", "value": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
    {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
)

# The plane taint the node-labels script puts on Slurm nodes in a hybrid (value `slurm`). Exists,
# not Equal: GPU Operator must run on every GPU node Kubernetes manages, whichever plane owns it
# (Slinky's slurmd pods need its driver, toolkit and device plugin too).
PLANE_TOLERATION = {"key": LABEL_PLANE, "operator": "Exists", "effect": "NoSchedule"}

# Upstream defaults (gpu-operator v26.7.0 values.yaml) of the lists the hybrid case extends.
_GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
_CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal",
                             "value": "", "effect": "NoSchedule"}


def gpudirect_rdma(plan: Plan) -> bool:
    """GPUDirect RDMA needs the operator's driver (bare metal) and an RDMA fabric; never on k3s."""
    kube = plan.kube_plane
    return (plan.bare_metal and plan.fabric.kind in RDMA_FABRICS
            and kube is not None and kube.name != "k3s")


def values(plan: Plan) -> dict[str, Any]:
    # Bare metal: the operator owns the driver (kernel-matched, upgraded node by node). Elsewhere
    # the cloud image ships one, and a second driver container would fight it.
    driver: dict[str, Any] = {"enabled": plan.bare_metal}
    if gpudirect_rdma(plan):
        # useHostMofed: this bundle installs no NVIDIA Network Operator, so the IB/RoCE stack
        # (DOCA-OFED / MLNX_OFED) is the host's, as it is for the Slurm side of a hybrid.
        driver["rdma"] = {"enabled": True, "useHostMofed": True}
    values: dict[str, Any] = {
        "driver": driver,
        "mig": {"strategy": "single"},
        # The ServiceMonitor is created only where the Prometheus Operator's CRD exists.
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
    }
    if plan.kube_plane is not None and plan.kube_plane.name == "k3s":
        values["toolkit"] = {"env": [dict(e) for e in K3S_TOOLKIT_ENV]}
    if plan.hybrid:
        values["daemonsets"] = {"tolerations": [dict(_GPU_TOLERATION), dict(PLANE_TOLERATION)]}
        # NFD's worker labels the GPU nodes the operator's daemonsets select: it must reach them too.
        values["node-feature-discovery"] = {"worker": {"tolerations": [
            dict(_CONTROL_PLANE_TOLERATION), dict(_GPU_TOLERATION), dict(PLANE_TOLERATION)]}}
    return values
