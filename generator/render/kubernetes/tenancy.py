"""Tenants as namespaces: one Namespace per tenant and a ResourceQuota on its GPU requests.

A tenant's Namespace holds its workloads and data, so no delivery path deletes it when the tenant
leaves the bundle (renamed or removed): Pulumi retains it (stacks/__main__.py), and it carries the
no-prune annotations of both GitOps tools (`NO_PRUNE`). Both, whatever `options.gitops` says: the
manifests are the same files for Pulumi and every GitOps mode (GitOps only adds files), and in
`kustomize` mode the operator picks the tool; an annotation no tool reads is inert.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from .common import GPU, meta, namespace_of, resource_quota_gpus

TENANT_LABEL = "orchgen.io/tenant"

# What each GitOps tool reads on an object to never prune it: Argo CD's resource sync option
# (docs/user-guide/sync-options.md, "No Prune Resources") and Flux kustomize-controller's
# prune annotation (its Kustomization docs, "Garbage collection").
NO_PRUNE = {"argocd.argoproj.io/sync-options": "Prune=false", "kustomize.toolkit.fluxcd.io/prune": "disabled"}


def namespaces(plan: Plan) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": meta(namespace_of(t.name), labels={TENANT_LABEL: t.name},
                          annotations=NO_PRUNE)}
        for t in plan.tenants
    ]


def quotas(plan: Plan) -> list[dict[str, Any]]:
    # Extended resources are quota'd by their requests only (`requests.nvidia.com/gpu`).
    return [
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": meta("gpu-quota", namespace_of(t.name)),
         "spec": {"hard": {f"requests.{GPU}": str(resource_quota_gpus(plan, t))}}}
        for t in plan.tenants
    ]
