"""NVIDIA GPU Operator: the gpu-operator release's values (Plan -> dict).

Only keys that exist in the chart's upstream default values.yaml are emitted (tests check each
against the reference copy), and only where the Plan calls for something other than the default.
Helm replaces lists wholesale, so a list we extend (tolerations) repeats the upstream entries.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, PoolSlice
from ...spec.fabric import LABEL_PLANE
from ...spec.hardware import MigLayout
from ...yamlio import dump_yaml

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


# MIG: the node label the MIG manager applies a configuration from (GPU Operator docs, "GPU Operator
# with MIG"), the ConfigMap of ours it reads them from, and the configuration every other node keeps.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_MAP = "orchgen-mig-parted-config"
MIG_DISABLED = "all-disabled"


def kube_managed_slices(plan: Plan) -> list[PoolSlice]:
    """Pool slices whose nodes Kubernetes runs: its own plane's, and Slurm's when an operator runs it."""
    out = list(plan.kube_plane.slices) if plan.kube_plane else []
    slurm = plan.slurm_plane
    if slurm is not None and slurm.host == "kubernetes":
        out += list(slurm.slices)
    return out


def mig_layouts(plan: Plan) -> dict[str, MigLayout]:
    """pool -> its MIG layout, for the pools on Kubernetes-run nodes that have one."""
    return {s.pool: s.hardware.mig for s in kube_managed_slices(plan) if s.gpu_type and s.hardware.mig}


def mig_parted_config(plan: Plan) -> dict[str, Any]:
    """mig-parted's configuration file (version v1, `mig-configs`): `all-disabled` and one
    `all-<profile>-x<n>` per layout in the plan, every GPU of the node cut alike."""
    configs: dict[str, Any] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for layout in mig_layouts(plan).values():
        configs[layout.config_name] = [{"devices": "all", "mig-enabled": True,
                                        "mig-devices": {layout.profile: layout.per_gpu}}]
    return {"version": "v1", "mig-configs": configs}


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
    migs = mig_layouts(plan)
    values: dict[str, Any] = {
        "driver": driver,
        # mixed with MIG: the device plugin advertises each instance as nvidia.com/mig-<profile>,
        # which quotas count and pods ask for, beside the nvidia.com/gpu of pools without MIG
        # (k8s-device-plugin's MIG strategies; `single` would call the instances nvidia.com/gpu).
        "mig": {"strategy": "mixed" if migs else "single"},
        # The ServiceMonitor is created only where the Prometheus Operator's CRD exists.
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
    }
    if migs:
        # The MIG manager applies the layout named by each node's nvidia.com/mig.config label
        # (node-labels.sh sets it) from this ConfigMap; mig-parted's default layouts put each
        # profile's maximum on a GPU (all-1g.10gb: 7), not a per_gpu below it.
        values["migManager"] = {"config": {"create": True, "name": MIG_CONFIG_MAP, "default": MIG_DISABLED,
                                           "data": {"config.yaml": dump_yaml(mig_parted_config(plan)).decode()}}}
    if plan.kube_plane is not None and plan.kube_plane.name == "k3s":
        values["toolkit"] = {"env": [dict(e) for e in K3S_TOOLKIT_ENV]}
    if plan.hybrid:
        values["daemonsets"] = {"tolerations": [dict(_GPU_TOLERATION), dict(PLANE_TOLERATION)]}
        # NFD's worker labels the GPU nodes the operator's daemonsets select: it must reach them too.
        values["node-feature-discovery"] = {"worker": {"tolerations": [
            dict(_CONTROL_PLANE_TOLERATION), dict(_GPU_TOLERATION), dict(PLANE_TOLERATION)]}}
    return values
