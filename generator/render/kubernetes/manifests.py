"""The Kubernetes plane's own objects: kubernetes/manifests/, kubernetes/workloads/ and
kubernetes/node-labels.sh (Helm releases and their values are helm.py's, beside this module).

Manifests are applied in file-name order (by Pulumi or GitOps), each file one multi-document YAML:
  00-namespaces.yaml  a Namespace per tenant
  01-priorities.yaml  the PriorityClasses every starter names (services, batch, preemptible)
  05-network-policies.yaml  per tenant namespace: deny all ingress, then allow its own pods, the
                      platform namespaces that call in (monitoring, KubeRay, JupyterHub) and a model
                      server's port (tenancy.network_policies)
  10-quotas.yaml      a ResourceQuota on GPU requests per tenant namespace (none under Kueue: the
                      tenant's ClusterQueue is its quota, tenancy.quotas)
  15-access.yaml      a Role and RoleBinding per tenant namespace for the tenant's kubernetes_group,
                      and the policy holding privileged (RDMA) tenant namespaces to baseline + IPC_LOCK
  18-topology.yaml    the fabric as the scheduler's topology (Kueue/KAI Topology, Volcano HyperNodes):
                      before the flavors that name it, so Pulumi creates it first and deletes it last
                      (Kueue's finalizer holds a Topology while a flavor names it)
  20-<scheduler>.yaml the gang scheduler's queues (Kueue flavors/cohort/queues, Volcano or KAI queues)
                      and, for Volcano and KAI, the admission policy keeping tenants in their queues
  35-network.yaml     the RDMA fabric for multi-node jobs (NicClusterPolicy, attachments)
  38-gpu-health.yaml  the GPU check per GPU pool (a node condition) and the controller that cordons and taints (gpu_health.py)
  40-ray.yaml         a RayCluster per Ray workload
  45-notebooks.yaml   the Role that lets JupyterHub start notebook servers in the tenant's namespace
kubernetes/prerequisites/ holds what the provider needs before the Helm releases (`prerequisites`):
  gpu-operator.yaml   on GKE, the GPU Operator's namespace and the quota its pods need there
kubernetes/operator-resources/ holds custom resources whose CRD an operator creates at run time
(`operator_resources`), applied once that CRD exists (contract.OPERATOR_RESOURCES_DIR):
  35-network.yaml     the nv-ipam IPPool (its CRD: the Network Operator's, once the policy is in)
Files with nothing to say are not written. Returns {} without a Kubernetes plane.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from ...yamlio import dump_yaml_all
from ... import schedulers
from ...contract import MANIFESTS_DIR, OPERATOR_RESOURCES_DIR, PREREQUISITES_DIR, WORKLOADS_DIR
from . import (gang, gpu_health, gpu_operator, jupyterhub, kai, kueue, labels, network_operator, priority, ray, tenancy, volcano,
               workloads)
from .common import (has_topology, node_selector, queues_enabled, slices, tolerations, topology_name,
                     workloads as kube_workloads)

# Each gang scheduler's module (its record in generator/schedulers.py names it): objects(plan)
# writes its queues, topology(plan) its topology objects.
MODULES = {m.__name__.rsplit(".", 1)[-1]: m for m in (kueue, volcano, kai)}


def manifests(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """File name (under kubernetes/manifests/) -> its objects, in apply order."""
    files = {"00-namespaces.yaml": tenancy.namespaces(plan), "01-priorities.yaml": priority.objects(plan),
             "05-network-policies.yaml": tenancy.network_policies(plan), "10-quotas.yaml": tenancy.quotas(plan),
             "15-access.yaml": tenancy.access(plan) + tenancy.pod_security_guard(plan)}
    if queues_enabled(plan):
        module = MODULES[gang.scheduler(plan).module]
        files["18-topology.yaml"] = module.topology(plan)
        files[f"20-{plan.gang_scheduler}.yaml"] = module.objects(plan) + tenancy.queue_policy(plan)
    files["35-network.yaml"] = network_operator.objects(plan)
    files["38-gpu-health.yaml"] = gpu_health.objects(plan)
    files["40-ray.yaml"] = ray.objects(plan)
    files["45-notebooks.yaml"] = jupyterhub.objects(plan)
    return {name: objs for name, objs in files.items() if objs}


def prerequisites(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """File name (under kubernetes/prerequisites/) -> its objects: what the provider needs before
    any release installs."""
    files = {"gpu-operator.yaml": gpu_operator.objects(plan)}
    return {name: objs for name, objs in files.items() if objs}


def operator_resources(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """File name (under kubernetes/operator-resources/) -> its objects."""
    files = {"35-network.yaml": network_operator.operator_resources(plan)}
    return {name: objs for name, objs in files.items() if objs}


def runtime_crds(plan: Plan) -> list[str]:
    """The CRDs (plural.group) an operator creates that kubernetes/operator-resources/ waits for."""
    return network_operator.runtime_crds(plan) if plan.kube_plane is not None else []


def starter_files(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    return {f"{w.name}.yaml": workloads.starter(plan, w) for w in kube_workloads(plan)}


def readme(plan: Plan) -> dict[str, Any]:
    """What the README's Kubernetes section says about object names: the content-named ones."""
    s = schedulers.get(plan.gang_scheduler)
    topology = topology_name(plan) if has_topology(plan) and s and s.topology_object else None
    flavors = ({sl.pool: kueue.flavor_name(plan, sl.pool) for sl in slices(plan)}
               if queues_enabled(plan) and s and s.flavors else {})
    policy = tenancy.policy_name(plan) if tenancy.queue_policy(plan) else None
    hosts = ({sl.pool for sl in slices(plan)} if queues_enabled(plan) and s and s.flavors else set())
    hosts_pools = sorted(p for p in hosts if kueue.flavor_topology(plan, p) == kueue.hosts_topology_name(plan))
    # the files of kubernetes/manifests/ this plan writes: the README names only those
    return {"topology": topology, "flavors": flavors, "policy": policy,
            "hosts_topology": kueue.hosts_topology_name(plan) if hosts_pools else None, "hosts_pools": hosts_pools, "files": sorted(manifests(plan)),
            "prerequisites": sorted(prerequisites(plan)), "runtime_crds": runtime_crds(plan), "gpu_health": gpu_health.readme(plan),
            "pod_security_guard": tenancy.guard_name(plan) if tenancy.pod_security_guard(plan) else None,
            # what a pod of the user's own names to land on each pool: Kueue's flavors add a pool's
            # selector and tolerations to what they admit; under Volcano nothing does
            "pool_placement": {sl.pool: {"selector": node_selector(plan, sl.pool), "tolerations": tolerations(plan, sl.pool)}
                               for sl in slices(plan)}}


def render(plan: Plan) -> dict[str, bytes]:
    if plan.kube_plane is None:
        return {}
    out = {f"{MANIFESTS_DIR}/{name}": dump_yaml_all(objs) for name, objs in manifests(plan).items()}
    s = schedulers.get(plan.gang_scheduler)
    if f"{MANIFESTS_DIR}/18-topology.yaml" in out and s and s.flavors:  # Kueue's flavors name its Topologies
        out[f"{MANIFESTS_DIR}/18-topology.yaml"] = kueue.topology_comment(plan).encode() + out[f"{MANIFESTS_DIR}/18-topology.yaml"]
    out.update({f"{PREREQUISITES_DIR}/{name}": dump_yaml_all(objs) for name, objs in prerequisites(plan).items()})
    out.update({f"{OPERATOR_RESOURCES_DIR}/{name}": dump_yaml_all(objs)
                for name, objs in operator_resources(plan).items()})
    out.update({f"{WORKLOADS_DIR}/{name}": dump_yaml_all(objs) for name, objs in starter_files(plan).items()})
    out["kubernetes/node-labels.sh"] = labels.render_script(plan).encode()
    return out
