"""Notebooks (issue 21): JupyterHub (the zero-to-jupyterhub chart 4.4.0) for workloads with
`interactive: true`, its single-user servers on the tenant's queue with a per-user GPU limit.

The hub runs in the release's namespace; KubeSpawner starts each user's server in the tenant's
namespace (`hub.config.KubeSpawner.namespace`, which the chart's jupyterhub_config.py loads after its
own `c.KubeSpawner.namespace = POD_NAMESPACE`), so the servers count against the tenant's quota
(its ClusterQueue under Kueue, else its ResourceQuota) and its queue admits them (Kueue's pod integration over the tenant namespaces; KAI's
queue label and scheduler on the pods; Volcano's namespace webhook). A Role in the tenant's
namespace lets the hub's ServiceAccount manage the servers' pods and volumes there (`objects`).
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, WorkloadDecision
from . import gang, priority
from .common import GPU, meta, namespace_of, node_selector, tolerations

HUB_SERVICE_ACCOUNT = "hub"  # the chart's hub ServiceAccount (hub.serviceAccount.name defaults to it)
GPUS_PER_USER = 1  # one GPU per notebook server: a person's interactive work, not a training job


def notebook_workloads(plan: Plan) -> list[WorkloadDecision]:
    kube = plan.kube_plane
    return [w for w in plan.workloads if kube and w.plane == kube.name and w.interactive]


def hub_workload(plan: Plan) -> WorkloadDecision | None:
    """The workload whose tenant, pool and GPUs the hub serves (the first interactive one)."""
    ws = notebook_workloads(plan)
    return ws[0] if ws else None


def values(plan: Plan) -> dict[str, Any]:
    w = hub_workload(plan)
    if w is None:
        return {}
    wiring = gang.for_pods(plan, w.tenant)
    single: dict[str, Any] = {
        "nodeSelector": node_selector(plan, w.pool),
        # the pool's taints (a GPU pool's): the servers must land on its nodes
        "extraTolerations": tolerations(plan, w.pool),
        # a notebook is long-lived like a service: it is not preempted for batch
        "extraPodConfig": {"priorityClassName": priority.class_of(plan, w),
                           **({"schedulerName": wiring.scheduler_name} if wiring.scheduler_name else {})},
    }
    if w.gpus_per_node:
        # extended resources are requested and limited alike (Kubernetes: no overcommit of GPUs)
        single["extraResource"] = {"limits": {GPU: str(GPUS_PER_USER)}, "guarantees": {GPU: str(GPUS_PER_USER)}}
    if wiring.pod_labels:
        single["extraLabels"] = dict(wiring.pod_labels)
    return {
        "hub": {"config": {"KubeSpawner": {
            "namespace": namespace_of(w.tenant),
            # the tenant namespace enforces Pod Security `restricted` (pod_security.py); the chart
            # already runs the server as uid 1000 without privilege escalation; KubeSpawner's
            # container_security_context adds the rest restricted asks for
            "container_security_context": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                           "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}}}},
        "singleuser": single,
        # the user scheduler and placeholders would place and hold GPUs outside the tenant's queue,
        # and the image pullers run a DaemonSet on every node: left to the gang scheduler and the nodes
        "scheduling": {"userScheduler": {"enabled": False}, "userPlaceholder": {"enabled": False}},
        "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
    }


def objects(plan: Plan) -> list[dict[str, Any]]:
    """The Role and RoleBinding that let the hub manage its users' servers in the tenant's namespace
    (the verbs of the chart's own hub Role: templates/hub/rbac.yaml)."""
    w = hub_workload(plan)
    if w is None or "jupyterhub" not in plan.charts:
        return []
    ns, hub_ns = namespace_of(w.tenant), plan.charts["jupyterhub"].namespace
    name = "jupyterhub-spawner"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(name, ns),
            "rules": [{"apiGroups": [""], "resources": ["pods", "persistentvolumeclaims", "secrets", "services"],
                       "verbs": ["get", "watch", "list", "create", "delete"]},
                      {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "watch", "list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(name, ns),
               "subjects": [{"kind": "ServiceAccount", "name": HUB_SERVICE_ACCOUNT, "namespace": hub_ns}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}}
    return [role, binding]


def chart_defaults(defaults: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The chart's defaults as `orchgen validate` reads them: `hub.config` is a free-form map of
    traitlets configuration sections (the chart's values.schema.yaml: any Configurable class name,
    passed through by its jupyterhub_config.py), so each section the values set is open there."""
    import copy

    sections = ((values.get("hub") or {}).get("config") or {}) if isinstance(values.get("hub"), dict) else {}
    if not isinstance(sections, dict) or not isinstance(defaults.get("hub"), dict):
        return defaults
    out = copy.deepcopy(defaults)
    config = out["hub"].setdefault("config", {})
    for section in sections:
        config.setdefault(section, {})
    return out
