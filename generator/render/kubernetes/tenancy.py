"""Tenants as namespaces: one Namespace per tenant and a ResourceQuota on its GPU requests (whole GPUs,
and each MIG pool's instances, `nvidia.com/mig-<profile>`)."""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from .common import meta, namespace_of, resource_quota_gpus


def namespaces(plan: Plan) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": meta(namespace_of(t.name), labels={"orchgen.io/tenant": t.name})}
        for t in plan.tenants
    ]


def quotas(plan: Plan) -> list[dict[str, Any]]:
    # Extended resources are quota'd by their requests only (`requests.nvidia.com/gpu`).
    return [
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": meta("gpu-quota", namespace_of(t.name)),
         "spec": {"hard": {f"requests.{r}": str(n) for r, n in resource_quota_gpus(plan, t).items()}}}
        for t in plan.tenants
    ]
