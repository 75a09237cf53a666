"""The provider table: one record per place the Kubernetes nodes may run (`fleet.provider`).

Each record holds what orchgen knows of the provider, with its source: the node-pool label and
the pool names it allows (spec/checks.py: default selectors), the topology labels it puts on GPU
nodes and the level a gang prefers (decide/platform.py), who owns the GPU stack and the GPU
Operator profile (render/kubernetes/gpu_operator.py), the RDMA path for tightly coupled jobs, the
default taints of its GPU pools, and documentation links. spec/models.py's `fleet.provider`
accepts exactly these names.

Adding a provider: one record here (and its GPU Operator profile's source in gpu_operator.py's
PROFILE_SOURCES when it has one). See CONTRIBUTING.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Provider:
    """What orchgen knows of one provider's Kubernetes: how it labels pools and topology, and what it allows."""

    name: str
    managed: bool  # a managed Kubernetes service (runs its own, upstream distribution)
    pool_label: str | None  # the label it puts on a pool's nodes, `<label>=<pool name>`
    pool_name: tuple[re.Pattern[str], str] | None  # the pool names it allows, and in words
    topology_labels: tuple[str, ...]  # network-topology node labels, broadest level first
    preferred_level: str | None  # the narrowest level several nodes share (where a gang prefers to fit)
    gpu_stack: str  # "operator" (the GPU Operator release) | "provider" (the provider's add-ons)
    gpu_operator_profile: str | None  # its key in gpu_operator.PROFILE_SOURCES
    # How tightly coupled jobs get RDMA: "efa" (the EFA device plugin release), "network-operator"
    # (the NVIDIA Network Operator on an IB/RoCE fabric) or "not-configured" (a warning naming `rdma_doc`)
    rdma: str
    rdma_doc: str  # what the site sets up itself when orchgen does not
    default_taints: tuple[str, ...] = ()  # taints its GPU node pools carry by default (key=value:effect)
    docs: tuple[str, ...] = ()


# Sources:
# - pool labels: eks: "Amazon EKS adds Kubernetes labels to managed node group instances ... prefixed
#   with eks.amazonaws.com" (EKS user guide, managed-node-groups.adoc), eks.amazonaws.com/nodegroup=
#   <node group name> among them (the key cluster-autoscaler reads as AWSNodePoolLabelKey); Karpenter
#   or self-managed nodes carry no such label: give node_labels there. gke: cloud.google.com/
#   gke-nodepool=<node pool name> (GKE "Node pools" and node labels docs); names: lower-case letters,
#   digits and '-', starting with a letter, at most 40. aks: kubernetes.azure.com/agentpool=<agent
#   pool name> (AKS "Use labels", reserved system labels table); Linux pool names: lower-case letters
#   and digits, starting with a letter, at most 12. oke: oke.oraclecloud.com/pool.name=<pool name>,
#   the initial node label Oracle's terraform-oci-oke module (and oracle-quickstart/oci-hpc-oke, which
#   builds on it) gives every node it creates; OKE itself sets no pool-name label.
# - topology labels: eks: "Place distributed AI/ML workloads with network topology labels" (EKS user
#   guide, ml-workload-topology): network-node-layer-1 is the top of the hierarchy, layer-3 the bottom
#   for most supported instance types (layer-4 exists only on four-layer types, so it is left out:
#   Kueue's TAS skips nodes that miss a level). gke: "Schedule GKE workloads with Topology Aware
#   Scheduling" (cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas): block,
#   sub-block and host of compactly placed VMs; a gang prefers the sub-block (the host level is one
#   machine). oke: "Using RDMA network locality when running workloads on OKE" (oracle-quickstart/
#   oci-hpc-oke docs/using-rdma-network-locality-when-running-workloads-on-oke.md): HPC island,
#   network block, local block, set during bootstrap when the capacity topology is available. aks
#   documents no network-topology node labels: no topology there.
# - default taints (the taints a provider's GPU node pools carry unless the site says otherwise; a
#   pool's `taints` in workload.yaml replaces them): eks: the EKS user guide's recipe "Prevent pods
#   from being scheduled on specific nodes" (node-taints-managed-node-groups) taints GPU managed node
#   groups, and GPU node pools of EKS blueprints (Karpenter NodePools, ai-on-eks) carry
#   nvidia.com/gpu=true:NoSchedule. gke: "when you add a GPU node pool to a cluster that already runs a
#   non-GPU node pool, GKE automatically taints the GPU nodes" with nvidia.com/gpu=present:NoSchedule
#   (GKE "Run GPUs in Standard node pools"; its ExtendedResourceToleration admission adds the
#   toleration only to pods that request nvidia.com/gpu, not to a CPU head or a daemonset). aks: the
#   AKS best practices for advanced scheduler features add GPU pools with `--node-taints
#   sku=gpu:NoSchedule` (operator-best-practices-advanced-scheduler, use-node-taints). oke: a node
#   pool carries no taint unless the site adds one (kubelet --register-with-taints in its cloud-init;
#   oracle/terraform-provider-oci#1504): none by default. Bare metal (generic): none by default.
# - oke's GPU stack: Oracle's GPU node images carry the NVIDIA driver and container toolkit and OKE's
#   NvidiaGpuPlugin add-on advertises nvidia.com/gpu (NVIDIA AI Cluster Runtime, "OKE GPU Setup").
PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("generic", managed=False, pool_label=None, pool_name=None, topology_labels=(),
                 preferred_level=None, gpu_stack="operator", gpu_operator_profile=None,
                 rdma="network-operator", rdma_doc="the NVIDIA Network Operator (InfiniBand or RoCE fabrics)",
                 docs=("https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/",)),
        Provider("eks", managed=True, pool_label="eks.amazonaws.com/nodegroup", pool_name=None,
                 topology_labels=("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                                  "topology.k8s.aws/network-node-layer-3"),
                 preferred_level="topology.k8s.aws/network-node-layer-3", gpu_stack="operator",
                 gpu_operator_profile="eks", rdma="efa",
                 rdma_doc="EFA (the aws-efa-k8s-device-plugin release; EKS user guide, device-management-efa)",
                 default_taints=("nvidia.com/gpu=true:NoSchedule",),
                 docs=("https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html",
                       "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html",
                       "https://docs.aws.amazon.com/eks/latest/userguide/node-taints-managed-node-groups.html")),
        Provider("gke", managed=True, pool_label="cloud.google.com/gke-nodepool",
                 pool_name=(re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$"),
                            "lower-case letters, digits and '-', starting with a letter, at most 40 characters"),
                 topology_labels=("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
                                  "cloud.google.com/gce-topology-host"),
                 preferred_level="cloud.google.com/gce-topology-subblock", gpu_stack="operator",
                 gpu_operator_profile="gke", rdma="not-configured",
                 rdma_doc="GPUDirect-TCPX/TCPXO (A3 High/Mega, H100: GKE \"Maximize GPU network bandwidth with "
                          "GPUDirect and multi-networking\") or GPUDirect RDMA (A3 Ultra H200, A4 B200: AI "
                          "Hypercomputer \"Create a custom AI-optimized GKE cluster\")",
                 default_taints=("nvidia.com/gpu=present:NoSchedule",),
                 docs=("https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas",
                       "https://cloud.google.com/kubernetes-engine/docs/how-to/gpus")),
        Provider("aks", managed=True, pool_label="kubernetes.azure.com/agentpool",
                 pool_name=(re.compile(r"^[a-z][a-z0-9]{0,11}$"),
                            "lower-case letters and digits, starting with a letter, at most 12 characters"),
                 topology_labels=(), preferred_level=None, gpu_stack="operator", gpu_operator_profile="aks",
                 rdma="not-configured", rdma_doc="InfiniBand on ND-series VMs (the NVIDIA Network Operator on AKS)",
                 default_taints=("sku=gpu:NoSchedule",),
                 docs=("https://learn.microsoft.com/azure/aks/use-labels",
                       "https://learn.microsoft.com/azure/aks/operator-best-practices-advanced-scheduler")),
        Provider("oke", managed=True, pool_label="oke.oraclecloud.com/pool.name", pool_name=None,
                 topology_labels=("oci.oraclecloud.com/rdma.hpc_island_id", "oci.oraclecloud.com/rdma.network_block_id",
                                  "oci.oraclecloud.com/rdma.local_block_id"),
                 preferred_level="oci.oraclecloud.com/rdma.local_block_id", gpu_stack="provider",
                 gpu_operator_profile=None, rdma="not-configured",
                 rdma_doc="the RDMA cluster network's SR-IOV VFs (oracle-quickstart/oci-hpc-oke docs/"
                          "running-rdma-workloads-on-oke.md)",
                 docs=("https://github.com/oracle-quickstart/oci-hpc-oke",)),
    )
}

NAMES: tuple[str, ...] = tuple(PROVIDERS)


def parse_taint(text: str) -> tuple[str, str | None, str]:
    """`key=value:effect` or `key:effect` -> (key, value or None, effect)."""
    rest, effect = text.rsplit(":", 1)
    key, _, value = rest.partition("=")
    return key, (value or None), effect
MANAGED: tuple[str, ...] = tuple(p.name for p in PROVIDERS.values() if p.managed)
