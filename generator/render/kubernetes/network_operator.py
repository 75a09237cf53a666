"""NVIDIA Network Operator (Mellanox/network-operator v26.4.1): the network-operator release's values
and kubernetes/manifests/35-network.yaml, for a plan whose Kubernetes jobs use a bare-metal
InfiniBand or RoCE fabric (`platform.network.kind == "rdma-shared"`).

- values: the chart's defaults except `nfd.enabled: false`: the GPU Operator release in the same
  bundle runs Node Feature Discovery with the NodeFeature API, whose PCI whitelist (class 02) gives
  the `feature.node.kubernetes.io/pci-15b3.present` label the operator needs (the chart README:
  "If NFD is already deployed in the cluster, make sure to pass --set nfd.enabled=false"); on k3s
  the operator's CNI directories are k3s's (`operator.cniBinDirectory`, `operator.cniNetworkDirectory`).
- a NicClusterPolicy (mellanox.com/v1alpha1, CRD in the chart): the RDMA shared device plugin
  (`rdma/rdma_shared_device_a`: every Mellanox HCA of the fabric's link type, shared by up to 63
  pods), Multus with the containernetworking plugins, the IPoIB CNI on InfiniBand, and NVIDIA's
  IPAM (nv-ipam). No ofedDriver: the hosts' network drivers are used (DMA-BUF needs no MOFED).
  Component images and tags are the release's own (example/crs/mellanox.com_v1alpha1_
  nicclusterpolicy_cr.yaml at the tag: nvcr.io/nvidia/mellanox, `network-operator-v<version>`).
- an nv-ipam IPPool (nv-ipam.nvidia.com/v1alpha1) in the operator's namespace: the fabric subnet,
  a block of addresses per node (example/crs/nvidia.com_v1alpha1_nv_ipam_ippool_cr.yaml), in
  kubernetes/operator-resources/35-network.yaml. Its CRD is created by the operator once the
  NicClusterPolicy deploys nv-ipam (manifests/state-nv-ipam-cni/005-nv-ipam.nvidia.com_ippools.yaml
  at the tag), not by the chart (v26.4.1's crds/ and templates/ hold none), so the pool cannot sit
  beside the policy: kubectl and Flux's dry run refuse a kind the API server does not serve yet. It
  is applied after the manifests once the CRD exists, as the operator's docs order it (policy with
  nvIpam first, then the IPPool); contract.OPERATOR_RESOURCES_DIR says how each path waits. For
  Pulumi the policy carries `pulumi.com/waitFor: jsonpath={.status.state}=ready` (pulumi-kubernetes
  4.18+): the operator reports `ready` once every state it deploys, nv-ipam's CRD included, is.
- a NetworkAttachmentDefinition (k8s.cni.cncf.io/v1) per tenant namespace with a fabric workload:
  IPoIB on InfiniBand, macvlan on RoCE, configured as the operator's own IPoIBNetwork / MacvlanNetwork
  controllers write them (manifests/state-ipoib-network, state-macvlan-network at the tag).
- per compute rail, where every fabric node's rails are known (platform or pool.nics; issue 35): one
  device plugin resource over that rail's port alone (selector `ifNames`, its netdev), one IPPool (a
  slice of the fabric subnet) and one NetworkAttachmentDefinition whose `master` is the rail's netdev,
  so a pod asking for every rail gets every HCA with an interface on each.
"""
from __future__ import annotations

import json
from typing import Any

from ...decide.plan import Network, Plan
from . import gpu_operator
from .common import meta, namespace_of, slices

API = "mellanox.com/v1alpha1"
IPAM_API = "nv-ipam.nvidia.com/v1alpha1"
NAD_API = "k8s.cni.cncf.io/v1"
REPOSITORY = "nvcr.io/nvidia/mellanox"
POLICY_NAME = "nic-cluster-policy"  # the name the operator's examples and docs use
PULUMI_WAIT_FOR = "pulumi.com/waitFor"
READY = "jsonpath={.status.state}=ready"
# The CRDs the operator applies when the policy enables nv-ipam (manifests/state-nv-ipam-cni at the
# tag), which the pools in kubernetes/operator-resources/ wait for
IPAM_CRDS = ("ippools.nv-ipam.nvidia.com",)
RDMA_HCA_MAX = 63  # pods sharing one node's HCAs (the NicClusterPolicy examples' value)
MELLANOX_VENDOR = "15b3"  # PCI vendor ID of NVIDIA (Mellanox) NICs
# k3s's CNI directories ("Multus and IPAM plugins", k3s-io/docs docs/networking/multus-ipams.md):
# binaries in /var/lib/rancher/k3s/data/current/bin, configuration in .../agent/etc/cni/net.d.
K3S_CNI_BIN = "/var/lib/rancher/k3s/data/current/bin"
K3S_CNI_CONF = "/var/lib/rancher/k3s/agent/etc/cni/net.d"


def network(plan: Plan) -> Network | None:
    net = plan.platform.network
    return net if net is not None and net.kind == "rdma-shared" else None


def image_tag(plan: Plan) -> str:
    """The operator's component image tag for the pinned (or overridden) chart version."""
    return f"network-operator-v{plan.charts['network-operator'].version.lstrip('v')}"


def _component(plan: Plan, image: str) -> dict[str, str]:
    return {"image": image, "repository": REPOSITORY, "version": image_tag(plan)}


def device_plugin_config(net: Network) -> str:
    """k8s-rdma-shared-dev-plugin's configList: one resource over every Mellanox HCA whose link is
    the fabric's (selectors vendors / linkTypes, Mellanox/k8s-rdma-shared-dev-plugin README)."""
    link = "infiniband" if net.cni == "ipoib" else "ether"
    if net.rails:  # one resource per compute rail, over that rail's port alone (selector ifNames: its netdev)
        return json.dumps({"configList": [
            {"resourceName": r.resource.split("/", 1)[1], "rdmaHcaMax": RDMA_HCA_MAX,
             "selectors": {"vendors": [MELLANOX_VENDOR], "linkTypes": [link], "ifNames": [r.netdev]}}
            for r in net.rails]}, sort_keys=True)
    name = net.resource.split("/", 1)[1]
    return json.dumps({"configList": [{"resourceName": name, "rdmaHcaMax": RDMA_HCA_MAX,
                                       "selectors": {"vendors": [MELLANOX_VENDOR], "linkTypes": [link]}}]},
                      sort_keys=True)


def nic_cluster_policy(plan: Plan, net: Network) -> dict[str, Any]:
    secondary: dict[str, Any] = {"cniPlugins": _component(plan, "plugins"),
                                 "multus": _component(plan, "multus-cni")}
    if net.cni == "ipoib":
        secondary["ipoib"] = _component(plan, "ipoib-cni")
    spec: dict[str, Any] = {
        "rdmaSharedDevicePlugin": {**_component(plan, "k8s-rdma-shared-dev-plugin"),
                                   "config": device_plugin_config(net)},
        "secondaryNetwork": secondary,
        "nvIpam": {**_component(plan, "nvidia-k8s-ipam"), "enableWebhook": False},
    }
    # The policy's daemonsets (device plugin, CNI plugins, multus, nv-ipam node) run on the GPU
    # nodes: spec.tolerations (NicClusterPolicy v1alpha1) carries their pools' taints
    if tols := gpu_operator.gpu_pool_tolerations(plan, []):
        spec["tolerations"] = tols
    # Pulumi waits for the operator's `ready` before anything after it (the IPPool): only Pulumi
    # reads this annotation (https://www.pulumi.com/registry/packages/kubernetes/api-docs/yaml/v2/configgroup/,
    # "pulumi.com/waitFor"); NicClusterPolicyStatus.state is ready/notReady/ignore/error.
    return {"apiVersion": API, "kind": "NicClusterPolicy",
            "metadata": meta(POLICY_NAME, annotations={PULUMI_WAIT_FOR: READY}), "spec": spec}


def per_node_block(plan: Plan) -> int:
    """Addresses nv-ipam gives each node: one per pod the node can hold (a pod takes at least one
    GPU, or the whole node on a CPU pool), at least 2."""
    return max([2, *(s.gpus_per_node for s in slices(plan))])


def _networks(net: Network) -> list[tuple[str, str | None, str | None]]:
    """(name, master netdev, subnet) of each network: one per compute rail, or the one shared network."""
    if net.rails:
        return [(r.name, r.netdev, r.subnet) for r in net.rails]
    return [(net.attachment or "", net.interface, net.subnet)]


def ip_pool(plan: Plan, net: Network) -> list[dict[str, Any]]:
    return [{"apiVersion": IPAM_API, "kind": "IPPool",
             "metadata": meta(name, plan.charts["network-operator"].namespace),
             "spec": {"subnet": subnet, "perNodeBlockSize": per_node_block(plan)}}
            for name, _, subnet in _networks(net)]


def cni_config(net: Network, name: str | None = None, master: str | None = None) -> str:
    name = name or net.attachment
    master = master if name != net.attachment else net.interface
    config: dict[str, Any] = {"cniVersion": "0.3.1", "name": name, "type": net.cni}
    if master:  # macvlan without a master uses the node's default-route interface
        config["master"] = master
    if net.cni == "macvlan":
        config["mode"] = "bridge"
    config["ipam"] = {"type": "nv-ipam", "poolName": name}
    return json.dumps(config, sort_keys=True)


def attachments(plan: Plan, net: Network) -> list[dict[str, Any]]:
    tenants = sorted({w.tenant for w in plan.workloads if w.name in plan.platform.fabric_workloads})
    return [{"apiVersion": NAD_API, "kind": "NetworkAttachmentDefinition",
             "metadata": meta(name, namespace_of(t)), "spec": {"config": cni_config(net, name, master)}}
            for t in tenants for name, master, _ in _networks(net)]


def objects(plan: Plan) -> list[dict[str, Any]]:
    """manifests/35-network.yaml: the policy (its operator then creates the IPPool CRD), the attachments."""
    net = network(plan)
    if net is None:
        return []
    return [nic_cluster_policy(plan, net), *attachments(plan, net)]


def operator_resources(plan: Plan) -> list[dict[str, Any]]:
    """operator-resources/35-network.yaml: the IPPool, whose CRD the operator creates."""
    net = network(plan)
    return ip_pool(plan, net) if net is not None else []


def runtime_crds(plan: Plan) -> list[str]:
    """The CRDs kubernetes/operator-resources/ waits for."""
    return list(IPAM_CRDS) if network(plan) is not None else []


def values(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {"nfd": {"enabled": False}}
    if plan.platform.distribution == "k3s":
        out["operator"] = {"cniBinDirectory": K3S_CNI_BIN, "cniNetworkDirectory": K3S_CNI_CONF}
    return out
