"""NVIDIA GPU Operator: the gpu-operator release's values (Plan -> dict), one profile per provider
and distribution.

Only keys that exist in the chart's upstream default values.yaml are emitted (tests check each
against the reference copy), and only where the Plan calls for something other than the default
or the provider's documentation spells the setting out. Helm replaces lists wholesale, so a list
we extend (tolerations) repeats the upstream entries.

Every setting of a profile names its source (`PROFILE_SOURCES`; tests pin each setting to it):

| profile | driver | toolkit | other |
|---|---|---|---|
| generic, bare metal | operator | operator | RDMA fabric: DMA-BUF with the host's network drivers |
| generic, VMs | image | operator | |
| k3s | - | k3s's containerd config and socket | |
| rke2 | - | RKE2's containerd socket | |
| eks (AL2023 NVIDIA AMI) | image | image | EFA: device plugin without MOFED devices |
| gke (Google driver installer) | image, /home/kubernetes/bin/nvidia | same dir | CDI; RUNTIME_CONFIG_SOURCE=file from 1.33 |
| aks | image | image | operator.runtimeClass nvidia-container-runtime |
| oke | no GPU Operator: the provider's add-ons (decide.platform) |
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, PoolSlice
from ...spec.fabric import LABEL_PLANE
from ...spec.hardware import MigLayout
from ...yamlio import dump_yaml
from . import metrics

RDMA_FABRICS = ("infiniband", "roce")

# Where each profile's settings come from (docs as of GPU Operator v26.7.0, late 2026).
GPU_OPERATOR_DOCS = "NVIDIA/cloud-native-docs gpu-operator/"
PROFILE_SOURCES = {
    "bare-metal-driver": GPU_OPERATOR_DOCS + "getting-started.rst (driver.enabled defaults to true: the "
                         "operator builds the driver for each node's kernel)",
    "preinstalled-driver": GPU_OPERATOR_DOCS + "getting-started.rst \"Pre-Installed NVIDIA GPU Drivers\"",
    "dma-buf": GPU_OPERATOR_DOCS + "gpu-operator-rdma.rst: \"NVIDIA recommends using the DMA-BUF rather than "
               "... nvidia-peermem\"; DMA-BUF with host network drivers is `--set driver.rdma.useHostMofed=true`, "
               "legacy nvidia-peermem adds driver.rdma.enabled=true",
    "k3s": "k3s-io/docs docs/advanced.md \"Configuring containerd\" (k3s writes its containerd config to "
           "/var/lib/rancher/k3s/agent/etc/containerd/config.toml); socket /run/k3s/containerd/containerd.sock",
    "rke2": "rancher/rke2-docs docs/add-ons/gpu_operators.md, GPU Operator v26.3.x tab: toolkit.env "
            "CONTAINERD_SOCKET=/run/k3s/containerd/containerd.sock",
    "eks": "awsdocs/amazon-eks-user-guide latest/ug/ml/ml-eks-optimized-ami.adoc: with the AL2023 NVIDIA AMIs "
           "\"you must disable the operator installation of the driver and toolkit\"",
    "eks-efa": "awsdocs/amazon-eks-user-guide latest/ug/ml/device-management-efa.adoc: the NVIDIA device plugin "
               "mounting /dev/infiniband/uverbs* (MOFED) conflicts with the EFA device plugin, disable MOFED",
    "gke": GPU_OPERATOR_DOCS + "google-gke.rst \"Using the Google Driver Installer\": hostPaths.driverInstallDir "
           "and toolkit.installDir /home/kubernetes/bin/nvidia, cdi.enabled=true, driver.enabled=false",
    "gke-1.33": GPU_OPERATOR_DOCS + "google-gke.rst note: on GKE 1.33+ set the toolkit's RUNTIME_CONFIG_SOURCE=file",
    "aks": GPU_OPERATOR_DOCS + "microsoft-aks.rst \"Installing the Operator for Preinstalled Driver and "
           "Toolkit\": driver.enabled=false, toolkit.enabled=false, operator.runtimeClass=nvidia-container-runtime",
}

# k3s runs its own containerd: the toolkit must edit k3s's generated config.toml (not the .tmpl,
# which holds Go template syntax the toolkit cannot parse, gpu-operator #473) and use its socket.
K3S_TOOLKIT_ENV = (
    {"name": "CONTAINERD_CONFIG", "value": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
    {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
)
# RKE2's containerd listens on k3s's socket path (RKE2 docs "CLI tools": "The Containerd socket is
# located at /run/k3s/containerd/containerd.sock"); its GPU Operator page sets only that for v26.3.x.
RKE2_TOOLKIT_ENV = ({"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},)
GKE_INSTALL_DIR = "/home/kubernetes/bin/nvidia"  # writable and persistent on GKE node images
GKE_RUNTIME_CONFIG_ENV = ({"name": "RUNTIME_CONFIG_SOURCE", "value": "file"},)
AKS_RUNTIME_CLASS = "nvidia-container-runtime"
NO_MOFED_ENV = ({"name": "MOFED_ENABLED", "value": "false"},)

# DMA-BUF needs the open kernel modules (gpu-operator-rdma.rst prerequisites: "An Open Kernel module
# driver is required", Turing or newer), which the operator picks by default from v25.3.0 on with
# R570+ drivers ("Transitioned to installing the open kernel modules by default starting with R570",
# release notes 25.3.0; kernelModuleType auto). Pre-Turing GPUs and older operators keep nvidia-peermem.
DMA_BUF_SINCE = (25, 3, 0)
PRE_TURING = frozenset({"k80", "m40", "m60", "p4", "p40", "p100", "v100", "v100s", "gv100"})

# The plane taint the node-labels script puts on Slurm nodes in a hybrid (value `slurm`). Exists,
# not Equal: GPU Operator must run on every GPU node Kubernetes manages, whichever plane owns it
# (Slinky's slurmd pods need its driver, toolkit and device plugin too).
PLANE_TOLERATION = {"key": LABEL_PLANE, "operator": "Exists", "effect": "NoSchedule"}

# Upstream defaults (gpu-operator v26.7.0 values.yaml) of the lists the hybrid case extends.
_GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
_CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal",
                             "value": "", "effect": "NoSchedule"}


def _version(text: str) -> tuple[int, ...]:
    digits = [int(p) for p in text.lstrip("v").split("-")[0].split(".") if p.isdigit()]
    return tuple(digits) or (0,)


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
    """The operator owns the driver and the plan sets up an RDMA fabric for Kubernetes jobs."""
    net = plan.platform.network
    return plan.bare_metal and net is not None and net.kind == "rdma-shared"


def dma_buf(plan: Plan) -> bool:
    """DMA-BUF where the operator version and every GPU of the plane allow it; else nvidia-peermem."""
    kube = plan.kube_plane
    types = {s.gpu_type for s in kube.slices if s.gpu_type} if kube else set()
    old_gpu = any(set(t.lower().replace("_", "-").split("-")) & PRE_TURING for t in types)  # GRES types keep their case
    return _version(plan.charts["gpu-operator"].version) >= DMA_BUF_SINCE and not old_gpu


def profile(plan: Plan) -> list[str]:
    """The PROFILE_SOURCES keys whose settings this plan's values carry."""
    p = plan.platform
    out: list[str] = []
    if p.provider == "generic":
        out.append("bare-metal-driver" if plan.bare_metal else "preinstalled-driver")
    else:
        out.append(p.provider)
    if p.distribution in ("k3s", "rke2"):
        out.append(p.distribution)
    if p.provider == "gke" and _version(plan.kubernetes_version) >= (1, 33):
        out.append("gke-1.33")
    if p.network is not None and p.network.kind == "efa":
        out.append("eks-efa")
    if gpudirect_rdma(plan):
        out.append("dma-buf")
    return out


def gdrcopy(plan: Plan) -> bool:
    """GDRCopy where the operator runs the driver (its sidecar needs the driver container: bare metal)
    and a GPU pool of Kubernetes-run nodes is a data-center GPU (GDRCopy needs GPUDirect RDMA, which
    GeForce boards lack: NVIDIA/gdrcopy README "Tesla or Quadro class GPUs")."""
    types = {s.gpu_type for s in kube_managed_slices(plan) if s.gpu_type}
    return plan.bare_metal and bool(types) and not all("geforce" in t for t in types)


def _driver(plan: Plan) -> dict[str, Any]:
    # Bare metal: the operator owns the driver (kernel-matched, upgraded node by node). Elsewhere
    # the node image ships one, and a second driver container would fight it.
    driver: dict[str, Any] = {"enabled": plan.bare_metal}
    if gpudirect_rdma(plan):
        # The Network Operator installs no OFED here (no ofedDriver in the NicClusterPolicy): the
        # network drivers are the host's, as they are for the Slurm side of a hybrid.
        driver["rdma"] = {"useHostMofed": True} if dma_buf(plan) else {"enabled": True, "useHostMofed": True}
    return driver


def values(plan: Plan) -> dict[str, Any]:
    keys = profile(plan)
    migs = mig_layouts(plan)
    values: dict[str, Any] = {
        "driver": _driver(plan),
        # mixed with MIG: the device plugin advertises each instance as nvidia.com/mig-<profile>,
        # which quotas count and pods ask for, beside the nvidia.com/gpu of pools without MIG
        # (k8s-device-plugin's MIG strategies; `single` would call the instances nvidia.com/gpu).
        "mig": {"strategy": "mixed" if migs else "single"},
        # The ServiceMonitor is created only where the Prometheus Operator's CRD exists.
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
    }
    if metrics.installed(plan):
        # the node's name on every DCGM series as `node` (values.yaml's own relabeling example), as
        # node-exporter's carry it: the alerts join a node's GPUs and RDMA ports (render/kubernetes/metrics.py)
        values["dcgmExporter"]["serviceMonitor"]["relabelings"] = [dict(metrics.NODE_RELABELING)]
    if gdrcopy(plan):
        # GDRCopy's gdrdrv, a sidecar of the operator's driver pod (getting-started.rst, gdrcopy.enabled:
        # "the GDRCopy Driver runs as a sidecar container in the GPU driver pod"): NCCL/NVSHMEM's low-latency
        # GPU-memory copies over GPUDirect RDMA; on where the references turn it on (Soperator's nodesets
        # gdrCopyEnabled: true, NVIDIA's AKS/DeepEP recipe gdrcopy.enabled=true)
        values["gdrcopy"] = {"enabled": True}
    if migs:
        # The MIG manager applies the layout named by each node's nvidia.com/mig.config label
        # (node-labels.sh sets it) from this ConfigMap; mig-parted's default layouts put each
        # profile's maximum on a GPU (all-1g.10gb: 7), not a per_gpu below it.
        values["migManager"] = {"config": {"create": True, "name": MIG_CONFIG_MAP, "default": MIG_DISABLED,
                                           "data": {"config.yaml": dump_yaml(mig_parted_config(plan)).decode()}}}
    toolkit: dict[str, Any] = {}
    env: list[dict[str, str]] = []
    if "k3s" in keys:
        env += [dict(e) for e in K3S_TOOLKIT_ENV]
    if "rke2" in keys:
        env += [dict(e) for e in RKE2_TOOLKIT_ENV]
    if "eks" in keys or "aks" in keys:
        toolkit["enabled"] = False  # the node image's toolkit
    if "aks" in keys:
        values["operator"] = {"runtimeClass": AKS_RUNTIME_CLASS}
    if "gke" in keys:
        values["hostPaths"] = {"driverInstallDir": GKE_INSTALL_DIR}
        toolkit["installDir"] = GKE_INSTALL_DIR
        values["cdi"] = {"enabled": True}
    if "gke-1.33" in keys:
        env += [dict(e) for e in GKE_RUNTIME_CONFIG_ENV]
    if env:
        toolkit["env"] = env
    if toolkit:
        values["toolkit"] = toolkit
    if "eks-efa" in keys:
        values["devicePlugin"] = {"env": [dict(e) for e in NO_MOFED_ENV]}
    extra = gpu_pool_tolerations(plan, [_GPU_TOLERATION])
    if plan.hybrid or extra:
        # Helm replaces the list: the upstream entry, then the GPU pools' taints it does not cover
        # (e.g. AKS's sku=gpu), then the hybrid's plane taint
        hybrid = [dict(PLANE_TOLERATION)] if plan.hybrid else []
        values["daemonsets"] = {"tolerations": [dict(_GPU_TOLERATION), *extra, *hybrid]}
        # NFD's worker labels the GPU nodes the operator's daemonsets select: it must reach them too.
        values["node-feature-discovery"] = {"worker": {"tolerations": [
            dict(_CONTROL_PLANE_TOLERATION), dict(_GPU_TOLERATION), *extra, *hybrid]}}
    return values


def gpu_pool_tolerations(plan: Plan, have: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Tolerations of the taints of the GPU pools on Kubernetes-run nodes that `have` does not
    already tolerate, in pool order, each once: what a GPU-node daemonset adds to its defaults."""
    from .common import taints, toleration, tolerates

    out: list[dict[str, str]] = []
    for s in kube_managed_slices(plan):
        if not s.gpu_type:
            continue
        for t in taints(plan, s.pool):
            if not tolerates([*have, *out], t):
                out.append(toleration(t))
    return out


# GKE admits pods of priority class system-node-critical / system-cluster-critical outside
# kube-system only under a ResourceQuota that allows them (google-gke.rst: "Create the resource
# quota", manifests/input/google-gke-gpu-operator-quota.yaml); the operator's daemonsets run at
# system-node-critical (values.yaml daemonsets.priorityClassName).
GKE_QUOTA = {"name": "gpu-operator-quota", "pods": 100,
             "priority_classes": ("system-node-critical", "system-cluster-critical")}


def objects(plan: Plan) -> list[dict[str, Any]]:
    """prerequisites/gpu-operator.yaml: on GKE, the operator's namespace and the quota its pods need there."""
    if plan.platform.provider != "gke" or "gpu-operator" not in plan.charts:
        return []
    from .common import meta
    from .tenancy import NO_PRUNE

    ns = plan.charts["gpu-operator"].namespace
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(GKE_QUOTA["name"], ns),
             "spec": {"hard": {"pods": str(GKE_QUOTA["pods"])},
                      "scopeSelector": {"matchExpressions": [
                          {"operator": "In", "scopeName": "PriorityClass",
                           "values": list(GKE_QUOTA["priority_classes"])}]}}}
    # Both are prerequisites (kubernetes/prerequisites/): every delivery path applies them before
    # any release, since the release's daemonsets never become ready without the quota (the README's
    # kubectl step, Pulumi's dependsOn, Argo CD's earlier wave, Flux's Kustomization dependsOn).
    # The namespace is the release's home: never pruned (tenancy.NO_PRUNE; Pulumi retains every
    # manifest Namespace).
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": meta(ns, annotations=dict(NO_PRUNE))}, quota]
