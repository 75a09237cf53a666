"""KAI Scheduler: a parent (department) Queue over one Queue per tenant (scheduling.run.ai/v2), and a
Topology (kai.scheduler/v1alpha1) from the fabric model.

KAI's units (from its Queue CRD): gpu in GPUs, cpu in millicores, memory in megabytes (10^6 bytes).
A tenant's `quota` is its nominal share summed over the plane's pools (KAI queues are not per pool);
`limit: -1` (unlimited) and `overQuotaWeight` = share let idle quota be borrowed and shared by
share; KAI reclaims it for the owner when the owner needs its quota back. A MIG pool's GPUs count
as whole GPUs here (KAI's queue unit); how KAI charges MIG instances against that is KAI's, and not
checked by this repository's tests.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from .common import level_topology, meta, plane_totals, queue_of, tenant_totals, unique

UNLIMITED = -1


def megabytes(gib: int) -> int:
    """GiB in KAI's megabytes, rounded down: whole numbers, and the tenants' never add up to more
    than the parent's (the floor of a sum is at least the sum of the floors)."""
    return gib * 2**30 // 10**6


def parent_name(plan: Plan) -> str:
    return unique(f"{plan.name}-department", {t.name for t in plan.tenants})


def _resources(gpus: int, cpus: int, memory_gib: int, weight: int) -> dict[str, Any]:
    def entry(quota: int) -> dict[str, Any]:
        return {"quota": quota, "limit": UNLIMITED, "overQuotaWeight": weight}

    return {"gpu": entry(gpus), "cpu": entry(cpus * 1000), "memory": entry(megabytes(memory_gib))}


def objects(plan: Plan) -> list[dict[str, Any]]:
    """20-kai.yaml: the parent first, so children never name a missing parent."""
    out = [{"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": meta(parent_name(plan)),
            "spec": {"displayName": plan.name, "resources": _resources(*plane_totals(plan), 1)}}]
    out += [{"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": meta(queue_of(t.name)),
             "spec": {"parentQueue": parent_name(plan), "displayName": t.name,
                      "resources": _resources(*tenant_totals(t), t.share)}}
            for t in plan.tenants]
    return out


def topology(plan: Plan) -> list[dict[str, Any]]:
    return level_topology(plan, "kai.scheduler/v1alpha1")


# --- the kai-scheduler release's values ------------------------------------------------------

def values(plan: Plan) -> dict[str, Any]:
    from ...catalog import version_key

    chart = plan.charts["kai-scheduler"]
    out: dict[str, Any] = {
        # The chart in git points at registry/local/kai-scheduler; the release workflow rewrites it
        # to the registry it publishes to, which is where the chart itself comes from.
        "global": {"registry": chart.repo.removeprefix("oci://").rstrip("/")},
        # Tenants' Queues come from kubernetes/manifests; an unlimited default queue would let
        # unlabelled work bypass their quotas.
        "defaultQueue": {"createDefaultQueue": False},
        # A pre-install hook that copies Kueue Topologies into KAI ones: no Kueue here, and hooks
        # that read the live cluster make GitOps renders differ from installs.
        "topologyMigration": {"enabled": False},
    }
    if version_key(chart.version) >= (0, 17) and plan.gitops == "argocd":
        # Argo CD: the Config CR as a plain chart resource, not a post-install hook's job (values.yaml
        # at v0.17.0: "For GitOps/ArgoCD installs disable this and set kaiConfig.render=true",
        # docs/gitops/README.md), so Argo CD tracks and self-heals it (catalog.KAI_ARGOCD). Helm,
        # Pulumi and Flux keep the chart's deployer hook: a release upgraded from v0.13.0, whose
        # pre-install hook created kai-config outside the release, would otherwise fail on Helm's
        # ownership check of a rendered kai-config (Argo CD never installed v0.13.0).
        out["kaiConfigDeployer"] = {"enabled": False}
        out["kaiConfig"] = {"render": True}
    # No runtime-class override from v0.17.0: KAI sets a runtimeClassName only on GPU-fraction
    # pods there (admission.gpuFractionRuntimeClassName; gpuPodRuntimeClassName is deprecated),
    # and orchgen leaves GPU sharing off (global.gpuSharing: false), so whole-GPU pods keep the
    # GPU Operator's default runtime. NVIDIA's recipe dropped its override with v0.17 too
    # (NVIDIA/aicr recipes/components/kai-scheduler/values.yaml, pinned at KAI v0.17.2).
    if version_key(chart.version) < (0, 17):
        # Before v0.17.0 KAI gave every GPU pod runtimeClassName `nvidia`; GPU Operator v25.10.0
        # and later make nvidia containerd's default runtime, so that injection takes the CDI path
        # and pods fail with "unresolvable CDI devices". NVIDIA's recipe sets it to "" (NVIDIA/aicr
        # recipes/components/kai-scheduler/values.yaml at KAI v0.14.1; "" is honoured from v0.13.0).
        out["admission"] = {"gpuPodRuntimeClassName": ""}
    return out
