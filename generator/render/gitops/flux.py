"""`gitops: flux`: Helm sources and HelmReleases, and Flux Kustomizations that order them.

Layout (all under `gitops/`):
- `releases/sources.yaml`: a HelmRepository per https chart repository; an OCIRepository per
  OCI chart (Flux's recommended form for OCI charts: the chart's own artifact, tag = version);
- `releases/<release>.yaml`: a HelmRelease, chart pinned, values inline, `dependsOn` as in
  releases.yaml, CRDs created and replaced on upgrade for the releases that own CRDs;
- `releases/kustomization.yaml`: the two above;
- `kustomizations.yaml`: Flux Kustomization `<name>-releases` (applies `releases/` and is Ready
  when the CRD-owning HelmReleases are) and `<name>-manifests` (applies the manifests, dependsOn
  `<name>-releases`);
- where the bundle has `kubernetes/prerequisites/` (what the provider needs before any release, GKE's
  GPU Operator quota), a Kustomization `<name>-prerequisites` that applies it, and
  `<name>-releases` dependsOn it;
- where the bundle has `kubernetes/operator-resources/` (custom resources whose CRD an operator
  creates at run time: nv-ipam's IPPool), `<name>-manifests` health-checks those CRDs and a
  Kustomization `<name>-operator-resources` applies the folder, dependsOn `<name>-manifests`;
- `kustomization.yaml`: `kustomizations.yaml`; `bootstrap/flux-kustomization.yaml`: the Flux
  Kustomization that syncs `gitops/`, committed once where `flux bootstrap` syncs.

Why a Kustomization between the manifests and the HelmReleases: a Flux Kustomization's
`dependsOn` names Kustomizations only (kustomize-controller v1 CRD), and a Kustomization whose
custom resources have no CRD yet fails its whole server-side dry run; so the releases get a
Kustomization of their own whose health the manifests wait for.

The Git source is the `flux-system` GitRepository that `flux bootstrap` creates for the GitOps
repository: nothing generated holds a repository URL, so nothing needs editing (an edited bundle
fails `orchgen plan --check`). `options.gitops_repo` deliberately changes nothing here (the README
only shows it in the bootstrap command): `flux bootstrap` must be given the repository anyway, since
it installs Flux from it and makes the deploy key, and it already creates `flux-system` for it. A
GitRepository of our own for the same repository would need a credentials Secret of its own (or
borrow bootstrap's), fetch the repository a second time, and gain nothing.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

from ...contract import OPERATOR_RESOURCES_DIR, PREREQUISITES_DIR
from ...decide.plan import Plan
from ...yamlio import dump_yaml, dump_yaml_all
from .common import Release, kustomization, repo_dir

NAMESPACE = "flux-system"
GIT_SOURCE = {"kind": "GitRepository", "name": "flux-system"}
SOURCE_API = "source.toolkit.fluxcd.io/v1"
HELM_API = "helm.toolkit.fluxcd.io/v2"
KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
REMEDIATION = {"retries": 3}
NO_PRUNE = {"kustomize.toolkit.fluxcd.io/prune": "disabled"}  # kustomize-controller's opt-out


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE}


def helm_repository_name(url: str) -> str:
    """A stable object name for an https chart repository: its host and path as a DNS label."""
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^[a-z]+://", "", url.lower())).strip("-")
    if len(slug) > 63:
        slug = slug[:54].rstrip("-") + "-" + hashlib.sha256(url.encode()).hexdigest()[:8]
    return slug


def sources(releases: list[Release]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rel in releases:
        if rel.oci:
            out.append({"apiVersion": SOURCE_API, "kind": "OCIRepository", "metadata": _meta(rel.name),
                        "spec": {"url": rel.oci_url, "ref": {"tag": rel.version}, "interval": "1h",
                                 "layerSelector": {"mediaType": HELM_CHART_LAYER, "operation": "copy"}}})
        elif rel.repo not in seen:
            seen.add(rel.repo)
            out.append({"apiVersion": SOURCE_API, "kind": "HelmRepository",
                        "metadata": _meta(helm_repository_name(rel.repo)),
                        "spec": {"url": rel.repo, "interval": "1h"}})
    return out


def helm_release(rel: Release) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "interval": "30m",
        "releaseName": rel.name,
        "targetNamespace": rel.namespace,
        "storageNamespace": rel.namespace,  # `helm list -n <namespace>` finds it where it runs
        "install": {"createNamespace": True, "remediation": REMEDIATION},
        "upgrade": {"remediation": REMEDIATION},
    }
    if rel.oci:
        spec["chartRef"] = {"kind": "OCIRepository", "name": rel.name}
    else:
        spec["chart"] = {"spec": {"chart": rel.chart, "version": rel.version,
                                  "sourceRef": {"kind": "HelmRepository",
                                                "name": helm_repository_name(rel.repo)}}}
    if rel.crds:
        # Helm installs crds/ once and never upgrades them; stale CRDs crash-loop operators
        # after an upgrade (gpu-operator #602), so they are replaced with each chart version.
        spec["install"]["crds"] = "CreateReplace"
        spec["upgrade"]["crds"] = "CreateReplace"
    if rel.depends_on:
        spec["dependsOn"] = [{"name": d} for d in rel.depends_on]
    if rel.values:
        spec["values"] = rel.values
    meta = _meta(rel.name)
    if rel.crds:
        # Removing a HelmRelease from git would make the releases Kustomization delete it, and
        # helm-controller uninstall it: the CRDs that Kueue's, Volcano's and Slinky's charts keep in
        # their templates (no resource-policy keep at the pinned versions) would go, and every
        # queue and workload with them. kustomize-controller never prunes an object so annotated.
        meta["annotations"] = dict(NO_PRUNE)
    return {"apiVersion": HELM_API, "kind": "HelmRelease", "metadata": meta, "spec": spec}


def _flux_kustomization(name: str, path: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "metadata": _meta(name),
            "spec": {"interval": "10m", "retryInterval": "1m", "path": path, "prune": True,
                     "sourceRef": GIT_SOURCE, **spec}}


def kustomizations(plan: Plan, releases: list[Release], prerequisites: bool = False,
                   runtime_crds: list[str] | None = None) -> list[dict[str, Any]]:
    root = f"./{repo_dir(plan)}"
    checks = [{"apiVersion": HELM_API, "kind": "HelmRelease", "name": r.name, "namespace": NAMESPACE}
              for r in releases if r.crds]
    release_spec: dict[str, Any] = {"timeout": "15m"}  # GPU Operator's rollout is slow
    if checks:
        release_spec["healthChecks"] = checks
    before = []
    if prerequisites:
        # A plain directory: kustomize-controller generates its kustomization. `wait`: Ready only
        # once every object is applied and ready, which is what the releases depend on.
        before = [_flux_kustomization(f"{plan.name}-prerequisites", f"{root}/{PREREQUISITES_DIR}", wait=True)]
        release_spec["dependsOn"] = [{"name": f"{plan.name}-prerequisites"}]
    manifests_spec: dict[str, Any] = {"dependsOn": [{"name": f"{plan.name}-releases"}]}
    after = []
    if runtime_crds:
        # Ready only once the operator has created the CRDs (kstatus: a CRD is Current when
        # Established; a missing one keeps the check waiting until `timeout`, then the next retry):
        # the operator resources' Kustomization depends on that, so its dry run finds the kind.
        manifests_spec["healthChecks"] = [
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": crd}
            for crd in runtime_crds]
        manifests_spec["timeout"] = "10m"  # the operator deploys nv-ipam's pods first (image pulls)
        after = [_flux_kustomization(f"{plan.name}-operator-resources", f"{root}/{OPERATOR_RESOURCES_DIR}",
                                     dependsOn=[{"name": f"{plan.name}-manifests"}])]
    return before + [
        _flux_kustomization(f"{plan.name}-releases", f"{root}/gitops/releases", **release_spec),
        _flux_kustomization(f"{plan.name}-manifests", f"{root}/kubernetes", **manifests_spec),
    ] + after


def render(plan: Plan, releases: list[Release], prerequisites: bool = False,
           runtime_crds: list[str] | None = None) -> dict[str, bytes]:
    out = {f"gitops/releases/{rel.name}.yaml": dump_yaml(helm_release(rel)) for rel in releases}
    listed = [f"{rel.name}.yaml" for rel in releases]
    if releases:  # kustomize refuses a resource file without objects
        out["gitops/releases/sources.yaml"] = dump_yaml_all(sources(releases))
        listed.insert(0, "sources.yaml")
    out["gitops/releases/kustomization.yaml"] = dump_yaml(kustomization(listed))
    out["gitops/kustomizations.yaml"] = dump_yaml_all(kustomizations(plan, releases, prerequisites, runtime_crds))
    out["gitops/kustomization.yaml"] = dump_yaml(kustomization(["kustomizations.yaml"]))
    out["gitops/bootstrap/flux-kustomization.yaml"] = dump_yaml(
        _flux_kustomization(plan.name, f"./{repo_dir(plan)}/gitops"))
    return out
