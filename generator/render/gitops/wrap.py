"""GitOps output: wrap the bundle's Helm releases and manifests for Kustomize, Argo CD or Flux.

A bundle renderer: it reads `kubernetes/helm/releases.yaml`, the values files and the manifest
file names that the plan renderers wrote, and adds only its own files:

- `kubernetes/kustomization.yaml` (every mode): the manifests in file-name order. It sits one level
  above `manifests/` on purpose: the bundle contract says every `manifests/*.yaml` is a Kubernetes
  object (the Pulumi program loads them all), so a kustomization must not live in there; and
  kustomize's default load restrictor forbids listing files outside a kustomization's root, so
  `gitops/` reaches the manifests through this directory, never file by file.
- `gitops/...`: per mode, see `kustomize`, `argocd` and `flux` beside this module. Where the bundle
  has `kubernetes/prerequisites/` (what the provider needs before any release), Argo CD and Flux
  apply it before the releases; it is not in `kubernetes/kustomization.yaml`, so no two
  Applications or Kustomizations own one object (kustomize mode: Pulumi applies it). Likewise
  `kubernetes/operator-resources/` (custom resources whose CRD an operator creates at run time):
  Argo CD and Flux apply it after the manifests, once that CRD exists.

No kustomization here ever uses kustomize's `namespace:` field: it would stamp a namespace on
cluster-scoped custom resources (ClusterQueue, ResourceFlavor, Volcano Queue), whose scope
kustomize cannot know.

The GitOps repository layout is a convention, not an input: the bundle is committed as the
directory `<plan.name>/` at the root of the repository (so one repository can hold several fleets,
and CI can run `orchgen plan <file> -o <plan.name> --check` beside its own files). Argo CD and Flux
paths are relative to the repository root, so they carry that prefix (`repo_dir`). The repository's
URL, by contrast, is an input (`options.gitops_repo`): only Argo CD's Applications hold it.
"""
from __future__ import annotations

from ...decide.plan import Plan
from ...errors import OrchgenError
from ...yamlio import dump_yaml
from . import argocd, flux, kustomize
from .common import (MANIFESTS_KUSTOMIZATION, MODES, has_prerequisites, kustomization, load_releases, manifest_files,
                     runtime_crds)


def render(plan: Plan, files: dict[str, bytes]) -> dict[str, bytes]:
    """The GitOps files for `plan.gitops` ({} for "none" or a plan without a Kubernetes plane)."""
    if plan.gitops == "none" or plan.kube_plane is None:
        return {}
    if plan.clusters:  # a plane beyond one cluster: each cluster's gitops/ is wrapped in render/clusters/
        return {}
    if plan.gitops not in MODES:
        raise OrchgenError(f"unknown GitOps mode {plan.gitops!r}")
    releases = load_releases(files)
    out = {MANIFESTS_KUSTOMIZATION: dump_yaml(kustomization(manifest_files(files)))}
    mode = {"kustomize": kustomize, "argocd": argocd, "flux": flux}[plan.gitops]
    out.update(mode.render(plan, releases, prerequisites=has_prerequisites(files), runtime_crds=runtime_crds(files)))
    return out
