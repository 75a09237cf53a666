"""Multi-node NVLink on Kubernetes (GB200 NVL72): the NVIDIA DRA driver's release, a ComputeDomain per
multi-node job, and the job's pods claiming its IMEX channel.

Sources: kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 (formerly NVIDIA/k8s-dra-driver-gpu): README
("An individual ComputeDomain (CD) guarantees MNNVL-reachability between pods that are in the CD ...
its lifetime is bound to the lifetime of the consuming workload"), docs/install.md ("Run a sample
ComputeDomain workload"), deployments/helm/dra-driver-nvidia-gpu/values.yaml and crds/.

- The release (values below): ComputeDomains only. GPUs stay with the GPU Operator's device plugin
  (nvidia.com/gpu is what the starters ask for and Kueue's quotas count), so the driver's GPU plugin
  is off; it runs on the driver the GPU Operator installs on bare metal.
- A ComputeDomain per multi-node job on a pool of NVLink domains (`platform.compute_domains`):
  `numNodes` is the job's pod count (one pod per node's worth of GPUs), and
  `channel.resourceClaimTemplate.name` names the ResourceClaimTemplate that the driver's controller
  creates in the job's namespace (docs/install.md: "names a ResourceClaimTemplate that the controller
  creates automatically"; cmd/compute-domain-controller/resourceclaimtemplate.go). The bundle does not
  write that template: the controller owns it (finalizer, labels) and would collide with ours.
- Each pod of the job claims the channel: `spec.resourceClaims[].resourceClaimTemplateName` and the
  container's `resources.claims`; Kubernetes makes one ResourceClaim per pod from the template.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, WorkloadDecision
from .common import PodShape, meta, namespace_of, slice_of

API = "resource.nvidia.com/v1beta1"  # the ComputeDomain CRD's served version (crds/, v0.4.1 and GPU Operator v26.7.0)
CLAIM = "imex-channel"  # the pod's name for its claim (the container's resources.claims refer to it)
# The DeviceClass of a ComputeDomain's channel: the one the controller's template requests
# (templates/compute-domain-workload-claim-template.tmpl.yaml; the chart's
# deviceclass-compute-domain-default-channel.yaml). Kueue must map it to a quota'd resource (kueue.py).
CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
# The GPU Operator's driver container root on the host (GPU Operator docs; the DRA driver's
# docs/install.md: "If the NVIDIA GPU Operator manages the NVIDIA GPU driver on your nodes, set to
# /run/nvidia/driver"); the chart's default `/` is a driver installed on the host itself.
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"


def values(plan: Plan) -> dict[str, Any]:
    """The release's values; every key is in v0.4.1's values.yaml (`helm template` of the chart with
    them renders the controller Deployment, the kubelet-plugin DaemonSet and the two compute-domain
    DeviceClasses, no gpu.nvidia.com class)."""
    from .gpu_operator import gpu_pool_tolerations

    out: dict[str, Any] = {
        # GPUs stay with the GPU Operator's device plugin (values.yaml resources.gpus.enabled; the GPU
        # plugin also needs gpuResourcesEnabledOverride, left false)
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
    }
    if plan.bare_metal:  # the GPU Operator's driver container (gpu_operator._driver: driver.enabled on bare metal)
        out["nvidiaDriverRoot"] = OPERATOR_DRIVER_ROOT
    # the kubelet plugin runs on every GPU node: the chart tolerates nvidia.com/gpu; the pools' other taints
    chart_default = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if extra := gpu_pool_tolerations(plan, chart_default):
        out["kubeletPlugin"] = {"tolerations": [*chart_default, *extra]}
    return out


def applies(plan: Plan, w: WorkloadDecision, sh: PodShape) -> bool:
    """A multi-node job on a pool of NVLink domains gets a ComputeDomain."""
    return sh.pods > 1 and w.pool in plan.platform.compute_domains


def domain_name(w: WorkloadDecision) -> str:
    return w.name


def channel_template(w: WorkloadDecision) -> str:
    return f"{w.name}-imex-channel"


def compute_domain(plan: Plan, w: WorkloadDecision, sh: PodShape) -> dict[str, Any]:
    # numNodes: the GPU Operator v26.7.0 CRD (the copy a cluster keeps) requires it; the driver makes
    # the domain Ready once that many nodes' IMEX daemons joined (v0.4.1's CRD: 0 waits for none)
    return {"apiVersion": API, "kind": "ComputeDomain", "metadata": meta(domain_name(w), namespace_of(w.tenant)),
            "spec": {"numNodes": sh.pods, "channel": {"resourceClaimTemplate": {"name": channel_template(w)}}}}


def claim(w: WorkloadDecision, template: dict[str, Any]) -> dict[str, Any]:
    """The pod template with its IMEX channel claimed by every container that asks for GPUs."""
    spec = template["spec"]
    spec["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": channel_template(w)}]
    for c in spec["containers"]:
        res = c.setdefault("resources", {})
        if any(k.startswith("nvidia.com/") for k in res.get("limits", {})):
            res["claims"] = [{"name": CLAIM}]
    return template


def domain_size(plan: Plan, pool: str) -> int:
    s = slice_of(plan, pool)
    return s.nvlink_domain_nodes if s else 1
