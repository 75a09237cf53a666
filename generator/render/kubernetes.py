"""The Kubernetes plane's own objects: kubernetes/manifests/, kubernetes/workloads/ and
kubernetes/node-labels.sh (Helm releases and their values are generator/render/helm.py's).

Manifests are applied in file-name order (by Pulumi or GitOps), each file one multi-document YAML:
  00-namespaces.yaml  a Namespace per tenant
  10-quotas.yaml      a ResourceQuota on GPU requests per tenant namespace
  20-<scheduler>.yaml the gang scheduler's queues (Kueue flavors/cohort/queues, Volcano or KAI queues)
  30-topology.yaml    the fabric as the scheduler's topology (Kueue/KAI Topology, Volcano HyperNodes)
  40-ray.yaml         a RayCluster per Ray workload
Files with nothing to say are not written. Returns {} without a Kubernetes plane.
"""
from __future__ import annotations

from typing import Any

from ..plan import Plan
from ..yamlio import dump_yaml_all
from . import k8s_kai, k8s_kueue, k8s_labels, k8s_ray, k8s_tenancy, k8s_volcano, k8s_workloads
from .k8s_common import queues_enabled, workloads

SCHEDULERS = {"kueue": k8s_kueue, "volcano": k8s_volcano, "kai": k8s_kai}


def manifests(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """File name (under kubernetes/manifests/) -> its objects, in apply order."""
    files = {"00-namespaces.yaml": k8s_tenancy.namespaces(plan), "10-quotas.yaml": k8s_tenancy.quotas(plan)}
    if queues_enabled(plan):
        module = SCHEDULERS[plan.gang_scheduler or ""]
        files[f"20-{plan.gang_scheduler}.yaml"] = module.objects(plan)
        files["30-topology.yaml"] = module.topology(plan)
    files["40-ray.yaml"] = k8s_ray.objects(plan)
    return {name: objs for name, objs in files.items() if objs}


def starters(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    return {f"{w.name}.yaml": k8s_workloads.starter(plan, w) for w in workloads(plan)}


def render(plan: Plan) -> dict[str, bytes]:
    if plan.kube_plane is None:
        return {}
    out = {f"kubernetes/manifests/{name}": dump_yaml_all(objs) for name, objs in manifests(plan).items()}
    out.update({f"kubernetes/workloads/{name}": dump_yaml_all(objs) for name, objs in starters(plan).items()})
    out["kubernetes/node-labels.sh"] = k8s_labels.render_script(plan).encode()
    return out
