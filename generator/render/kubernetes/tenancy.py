"""Tenants as namespaces: one Namespace per tenant and, unless Kueue manages it (its ClusterQueue is the
quota there), a ResourceQuota on its GPU requests (whole GPUs, and each MIG pool's instances,
`nvidia.com/mig-<profile>`), and
what makes every pod of a tenant namespace go through the tenant's queue (`queue_policy`).

How a pod that names no queue still reaches it, per scheduler:
- Kueue: its LocalQueue is named `default` (kueue.py), and the Kueue config manages exactly the
  tenant namespaces (managedJobsNamespaceSelector) with manageJobsWithoutQueueName.
- Volcano: the namespace annotation `scheduling.volcano.sh/queue-name` (read by Volcano's
  /podgroups/mutate webhook for a PodGroup in queue `default`), and Volcano's /pods/mutate webhook
  setting `schedulerName: volcano` on pods of the tenant namespaces (volcano.py's values).
- KAI: v0.13 has neither (its pod grouper reads the queue from the pod's or top owner's
  `kai.scheduler/queue` label only), so a ValidatingAdmissionPolicy refuses a tenant pod that does
  not name kai-scheduler and its tenant's queue: no pod skips the queues silently.
Under Volcano and KAI the policy also keeps a tenant's PodGroups in its own queue.

A tenant's Namespace holds its workloads and data, so no delivery path deletes it when the tenant
leaves the bundle (renamed or removed): Pulumi retains it (stacks/__main__.py), and it carries the
no-prune annotations of both GitOps tools (`NO_PRUNE`). Both, whatever `options.gitops` says: the
manifests are the same files for Pulumi and every GitOps mode (GitOps only adds files), and in
`kustomize` mode the operator picks the tool; an annotation no tool reads is inert.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from . import gang, pod_security
from .common import (KAI_QUEUE_LABEL, KAI_SCHEDULER, QUEUE_LABEL, TENANT_LABEL,
                     meta, namespace_of, queue_of, queues_enabled, resource_quota_gpus, tenant_namespaces)

# What each GitOps tool reads on an object to never prune it: Argo CD's resource sync option
# (docs/user-guide/sync-options.md, "No Prune Resources") and Flux kustomize-controller's
# prune annotation (its Kustomization docs, "Garbage collection").
NO_PRUNE = {"argocd.argoproj.io/sync-options": "Prune=false", "kustomize.toolkit.fluxcd.io/prune": "disabled"}


def namespace(plan: Plan, tenant: str) -> dict[str, Any]:
    labels = {TENANT_LABEL: tenant, **pod_security.labels(plan, tenant)}
    annotations = dict(NO_PRUNE)
    if queues_enabled(plan):
        labels[QUEUE_LABEL] = queue_of(tenant)
        annotation = gang.scheduler(plan).namespace_queue_annotation
        if annotation:
            annotations[annotation] = queue_of(tenant)
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": meta(namespace_of(tenant), labels=labels, annotations=annotations)}


def namespaces(plan: Plan) -> list[dict[str, Any]]:
    return [namespace(plan, t.name) for t in plan.tenants]


# --- the admission policy: tenant pods and PodGroups use their tenant's queue -----------------

ADMISSION_API = "admissionregistration.k8s.io/v1"  # ValidatingAdmissionPolicy: GA in Kubernetes 1.30
_OWN_QUEUE = f"namespaceObject.metadata.labels['{QUEUE_LABEL}']"


def _rule(group: str, resource: str, operations: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "apiVersions": ["*"], "operations": operations, "resources": [resource]}


def _policy_rules(plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(resourceRules, validations) of the policy for the plan's scheduler ([], [] for Kueue,
    whose LocalQueues are namespaced: a tenant cannot name another tenant's queue)."""
    admission = gang.scheduler(plan).admission if queues_enabled(plan) else ""
    if admission == "pods-and-podgroups":
        rules = [_rule("", "pods", ["CREATE"]), _rule("scheduling.run.ai", "podgroups", ["CREATE", "UPDATE"])]
        validations = [
            {"expression": f"object.kind != 'Pod' || object.spec.schedulerName == '{KAI_SCHEDULER}'",
             "message": f"a pod in a tenant namespace must set schedulerName: {KAI_SCHEDULER} (KAI "
                        "v0.13 cannot default it), or it would bypass the tenant's queue",
             "reason": "Forbidden"},
            {"expression": f"object.kind != 'Pod' || (has(object.metadata.labels) && '{KAI_QUEUE_LABEL}' in "
                           f"object.metadata.labels && object.metadata.labels['{KAI_QUEUE_LABEL}'] == {_OWN_QUEUE})",
             "messageExpression": f"'a pod in namespace ' + namespaceObject.metadata.name + ' must carry the "
                                  f"label {KAI_QUEUE_LABEL}: ' + {_OWN_QUEUE}",
             "reason": "Forbidden"},
            {"expression": f"object.kind != 'PodGroup' || object.spec.queue == {_OWN_QUEUE}",
             "messageExpression": f"'a PodGroup in namespace ' + namespaceObject.metadata.name + ' must use "
                                  f"queue ' + {_OWN_QUEUE}",
             "reason": "Forbidden"},
        ]
        return rules, validations
    if admission == "podgroups":
        # after Volcano's /podgroups/mutate webhook has put a `default` PodGroup in the namespace's
        # queue (validating admission runs after every mutating webhook)
        rules = [_rule("scheduling.volcano.sh", "podgroups", ["CREATE", "UPDATE"])]
        validations = [
            {"expression": f"object.spec.queue == {_OWN_QUEUE}",
             "messageExpression": f"'a PodGroup in namespace ' + namespaceObject.metadata.name + ' must use "
                                  f"queue ' + {_OWN_QUEUE}",
             "reason": "Forbidden"},
        ]
        return rules, validations
    return [], []


def policy_name(plan: Plan) -> str:
    return f"{plan.name}-tenant-queues"


def policies_available(plan: Plan) -> bool:
    """admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy is served from Kubernetes 1.30 on
    (GA); before, it is beta and off unless the API server enables it."""
    major, minor = (int(x) for x in plan.kubernetes_version.split(".")[:2])
    return (major, minor) >= (1, 30)


def queue_policy(plan: Plan) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding over the tenant namespaces ([] if none needed,
    or on a Kubernetes without the v1 API: the README says what then holds)."""
    if not queues_enabled(plan) or not policies_available(plan):
        return []
    rules, validations = _policy_rules(plan)
    if not rules:
        return []
    name = policy_name(plan)
    return [
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": meta(name),
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"namespaceSelector": tenant_namespaces(), "resourceRules": rules},
                  "validations": validations}},
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": meta(name),
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def quotas(plan: Plan) -> list[dict[str, Any]]:
    """10-quotas.yaml: a ResourceQuota `gpu-quota` per tenant namespace, none where Kueue manages the
    namespaces (common.resource_quota_gpus says why: the ClusterQueue is the quota there)."""
    # Extended resources are quota'd by their requests only (`requests.nvidia.com/gpu`).
    out = []
    for t in plan.tenants:
        caps = resource_quota_gpus(plan, t)
        if caps:
            out.append({"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": meta("gpu-quota", namespace_of(t.name)),
                        "spec": {"hard": {f"requests.{r}": str(n) for r, n in caps.items()}}})
    return out


# --- tenant access: a Role and RoleBinding per tenant namespace for its kubernetes_group -------

RBAC_API = "rbac.authorization.k8s.io/v1"
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
READ = ["get", "list", "watch"]
# What every tenant runs, whatever the scheduler: its workloads and what they mount. Never
# resourcequotas, limitranges, roles or rolebindings (read at most), never a cluster-scoped object.
WORKLOAD_RULES: tuple[tuple[str, tuple[str, ...], list[str]], ...] = (
    ("", ("pods", "services", "configmaps", "secrets", "persistentvolumeclaims"), WRITE),
    ("", ("pods/log", "pods/exec", "pods/portforward", "pods/attach"), ["get", "create"]),
    ("", ("events", "resourcequotas", "limitranges"), READ),
    ("apps", ("deployments", "statefulsets"), WRITE),
    ("apps", ("replicasets",), READ),
    ("batch", ("jobs", "cronjobs"), WRITE),
    ("ray.io", ("rayclusters", "rayjobs", "rayservices"), WRITE),
)


def role_name(plan: Plan) -> str:
    return f"{plan.name}-tenant"


def rules(plan: Plan) -> list[dict[str, Any]]:
    out = [{"apiGroups": [g], "resources": list(r), "verbs": list(v)} for g, r, v in WORKLOAD_RULES]
    if queues_enabled(plan):
        for group, resources, how in gang.scheduler(plan).tenant_rbac:
            out.append({"apiGroups": [group], "resources": list(resources),
                        "verbs": list(WRITE if how == "write" else READ)})
    return out


def access(plan: Plan) -> list[dict[str, Any]]:
    """15-access.yaml: for each tenant with a kubernetes_group, a Role on its namespace's workloads
    and a RoleBinding of the group to it. A Role grants only in its own namespace, so the group
    reaches no other tenant's; quotas and queues are read at most."""
    out: list[dict[str, Any]] = []
    if plan.kube_plane is None:
        return out
    for t in plan.tenants:
        if not t.kubernetes_group:
            continue
        ns, name = namespace_of(t.name), role_name(plan)
        out.append({"apiVersion": RBAC_API, "kind": "Role", "metadata": meta(name, ns), "rules": rules(plan)})
        out.append({"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": meta(name, ns),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                  "name": t.kubernetes_group}]})
    return out


# --- the Pod Security guard of privileged (RDMA) tenant namespaces (pod_security.py says why) ---

def guard_name(plan: Plan) -> str:
    return f"{plan.name}-tenant-pod-security"


def pod_security_guard(plan: Plan) -> list[dict[str, Any]]:
    """The policy holding a privileged tenant namespace's pods to every baseline control, IPC_LOCK
    excepted for the fabric's containers ([] when no
    tenant namespace is privileged, or before Kubernetes 1.30: the ValidatingAdmissionPolicy v1 API)."""
    if plan.kube_plane is None or not policies_available(plan):
        return []
    if not any(pod_security.level(plan, t.name) == pod_security.PRIVILEGED for t in plan.tenants):
        return []
    name = guard_name(plan)
    selector = {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"},
                                     {"key": f"{pod_security.PSA}/enforce", "operator": "In",
                                      "values": [pod_security.PRIVILEGED]}]}
    return [
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": meta(name),
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"namespaceSelector": selector, "resourceRules": [
                      # pods/ephemeralcontainers: `kubectl debug` adds a container to a running pod
                      # through that subresource, whose body is the whole Pod (as Pod Security Admission
                      # checks it)
                      {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                       "resources": ["pods", "pods/ephemeralcontainers"]}]},
                  "validations": [{"expression": e, "message": m, "reason": "Forbidden"}
                                  for e, m in pod_security.guard_validations(plan)]}},
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": meta(name),
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


# --- the network wall between tenants: NetworkPolicies per tenant namespace --------------------

NETWORK_API = "networking.k8s.io/v1"
NS_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace, not editable
# the label a site puts on its own Prometheus's namespace (options.metrics site) to scrape tenant pods
SITE_MONITORING_LABEL = "orchgen.io/monitoring"


def _from_namespace(ns: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NS_NAME_LABEL: ns}}}


def _callers(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """(why, peer) of each namespace outside the tenant's whose pods call into tenant pods."""
    out: list[tuple[str, dict[str, Any]]] = []
    metrics_ns = plan.charts["kube-prometheus-stack"].namespace if "kube-prometheus-stack" in plan.charts else None
    if metrics_ns:
        out.append(("monitoring: kube-prometheus-stack's Prometheus scrapes the servers' /metrics",
                    _from_namespace(metrics_ns)))
    else:
        out.append((f"monitoring: the site's Prometheus, in a namespace labelled {SITE_MONITORING_LABEL}=true",
                    {"namespaceSelector": {"matchLabels": {SITE_MONITORING_LABEL: "true"}}}))
    if "kuberay-operator" in plan.charts:
        out.append(("KubeRay's operator reads a RayService's Ray dashboard (8265) to deploy and watch Serve",
                    _from_namespace(plan.charts["kuberay-operator"].namespace)))
    if "jupyterhub" in plan.charts:
        out.append(("JupyterHub's hub and proxy reach the notebook servers it starts in the tenant's namespace",
                    _from_namespace(plan.charts["jupyterhub"].namespace)))
    return out


def network_policies(plan: Plan) -> list[dict[str, Any]]:
    """Per tenant namespace (https://kubernetes.io/docs/concepts/services-networking/network-policies/):
    - `default-deny-ingress`: selects every pod and allows no ingress, so a pod is reachable only as
      another policy allows ("Default deny all ingress traffic"). Policies are additive (a connection is
      allowed if any policy selecting the pod allows it), so the allows below open exactly their peers;
    - `allow-same-namespace`: the tenant's own pods (its gangs' collectives, Ray heads and workers);
    - `allow-platform`: the platform namespaces that call into tenant pods (`_callers`), selected by
      the API server's immutable kubernetes.io/metadata.name label, so no tenant can pose as one;
    - `allow-serving-<workload>`: a model server's port from anywhere in the cluster (the ingress
      controller or Gateway of the site, wherever it runs): the port a Service, Ingress or HTTPRoute
      already exposes, nothing else of the pod.
    Egress stays open (DNS, the API server, model and image downloads): every tenant namespace denies
    ingress, which already stops a pod of one tenant reaching another's. The control plane's admission
    webhooks run in the operators' own namespaces, which no policy here selects. Enforced only by a CNI
    with NetworkPolicy support (Calico, Cilium, the clouds' policy engines); without one the objects
    are stored and do nothing."""
    if plan.kube_plane is None:
        return []
    from .serving import name_of, serving_workloads  # serving imports tenancy's neighbours

    callers = _callers(plan)
    out: list[dict[str, Any]] = []
    for t in plan.tenants:
        ns = namespace_of(t.name)
        out.append({"apiVersion": NETWORK_API, "kind": "NetworkPolicy", "metadata": meta("default-deny-ingress", ns),
                    "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}})
        out.append({"apiVersion": NETWORK_API, "kind": "NetworkPolicy", "metadata": meta("allow-same-namespace", ns),
                    "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                             "ingress": [{"from": [{"podSelector": {}}]}]}})
        out.append({"apiVersion": NETWORK_API, "kind": "NetworkPolicy",
                    "metadata": meta("allow-platform", ns,
                                     annotations={"orchgen.io/why": "; ".join(why for why, _ in callers)}),
                    "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                             "ingress": [{"from": [peer for _, peer in callers]}]}})
        for w in serving_workloads(plan):
            if w.tenant != t.name or w.serving is None:
                continue
            out.append({"apiVersion": NETWORK_API, "kind": "NetworkPolicy",
                        "metadata": meta(f"allow-serving-{name_of(w)}", ns),
                        "spec": {"podSelector": {"matchLabels": {"orchgen.io/workload": w.name}},
                                 "policyTypes": ["Ingress"],
                                 "ingress": [{"ports": [{"protocol": "TCP", "port": w.serving.port}]}]}})
    return out
