"""GitOps output: wrap the bundle's Helm releases and manifests for Kustomize, Argo CD or Flux.

A bundle renderer: it reads `kubernetes/helm/releases.yaml`, the values files and the manifest
file names that the plan renderers wrote, and adds only its own files:

- `kubernetes/kustomization.yaml` (every mode): the manifests in file-name order. It sits one level
  above `manifests/` on purpose: the bundle contract says every `manifests/*.yaml` is a Kubernetes
  object (the Pulumi program loads them all), so a kustomization must not live in there; and
  kustomize's default load restrictor forbids listing files outside a kustomization's root, so
  `gitops/` reaches the manifests through this directory, never file by file.
- `gitops/...`: per mode, see `gitops_kustomize`, `gitops_argocd` and `gitops_flux`.

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

from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import OrchgenError
from ..plan import Plan
from ..yamlio import dump_yaml

HELM_DIR = "kubernetes/helm"
MANIFESTS_DIR = "kubernetes/manifests"
RELEASES_FILE = f"{HELM_DIR}/releases.yaml"
MANIFESTS_KUSTOMIZATION = "kubernetes/kustomization.yaml"
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
MODES = ("kustomize", "argocd", "flux")
# The keys of a releases.yaml entry (the bundle contract) and their types.
CONTRACT = {"name": str, "namespace": str, "repo": str, "chart": str, "version": str, "values": str,
            "crds": list, "dependsOn": list}


@dataclass(frozen=True)
class Release:
    """One entry of releases.yaml, with its values file already parsed."""

    name: str
    namespace: str
    repo: str  # https Helm repository, or oci://registry/path (the chart name is appended)
    chart: str
    version: str
    values_file: str
    crds: tuple[str, ...]  # API groups whose CRDs this release installs
    depends_on: tuple[str, ...]
    values: dict[str, Any]

    @property
    def oci(self) -> bool:
        return self.repo.startswith("oci://")

    @property
    def oci_url(self) -> str:
        """The chart's own OCI reference (oci://registry/path/chart), as Helm and Flux name it."""
        return f"{self.repo.rstrip('/')}/{self.chart}"


def repo_dir(plan: Plan) -> str:
    """Where the bundle sits in the GitOps repository (see the module docstring)."""
    return plan.name


def kustomization(resources: list[str], **extra: Any) -> dict[str, Any]:
    # fifo: kustomize would otherwise re-sort by kind; the bundle's order is its file order.
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": resources,
            "sortOptions": {"order": "fifo"}, **extra}


def _load_values(files: dict[str, bytes], name: str) -> dict[str, Any]:
    path = f"{HELM_DIR}/{name}"
    if path not in files:
        raise OrchgenError(f"names values file {name}, which the bundle does not have", RELEASES_FILE)
    values = yaml.safe_load(files[path])
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise OrchgenError("Helm values must be a mapping", path)
    return values


def load_releases(files: dict[str, bytes]) -> list[Release]:
    """The releases of releases.yaml in install order ([] when the bundle has none)."""
    if RELEASES_FILE not in files:
        return []
    data = yaml.safe_load(files[RELEASES_FILE]) or {}
    out: list[Release] = []
    for i, rel in enumerate(data.get("releases") or []):
        for name, typ in CONTRACT.items():
            if not isinstance(rel, dict) or not isinstance(rel.get(name), typ):
                # An unquoted version such as 1.10 arrives as the float 1.1: refuse, never guess.
                raise OrchgenError(f"releases[{i}].{name} must be a {typ.__name__}", RELEASES_FILE)
        out.append(Release(
            name=rel["name"], namespace=rel["namespace"], repo=rel["repo"], chart=rel["chart"],
            version=rel["version"], values_file=rel["values"], crds=tuple(rel["crds"]),
            depends_on=tuple(rel["dependsOn"]), values=_load_values(files, rel["values"])))
    names = [r.name for r in out]
    for rel in out:
        later = [d for d in rel.depends_on if d not in names[:names.index(rel.name)]]
        if later:  # GitOps ordering is derived from dependsOn: a forward reference would loop
            raise OrchgenError(f"release {rel.name} depends on {later}, not listed before it",
                               RELEASES_FILE)
    return out


def manifest_files(files: dict[str, bytes]) -> list[str]:
    """The manifest files in apply order (file name order), relative to `kubernetes/`."""
    prefix = MANIFESTS_DIR + "/"
    return sorted(p[len("kubernetes/"):] for p in files
                  if p.startswith(prefix) and "/" not in p[len(prefix):] and p.endswith(".yaml"))


def waves(releases: list[Release]) -> dict[str, int]:
    """Install wave per release: one more than the latest release it depends on (0 without any)."""
    out: dict[str, int] = {}
    for rel in releases:  # install order: dependencies are already placed
        out[rel.name] = 1 + max((out[d] for d in rel.depends_on), default=-1)
    return out


def render(plan: Plan, files: dict[str, bytes]) -> dict[str, bytes]:
    """The GitOps files for `plan.gitops` ({} for "none" or a plan without a Kubernetes plane)."""
    if plan.gitops == "none" or plan.kube_plane is None:
        return {}
    if plan.gitops not in MODES:
        raise OrchgenError(f"unknown GitOps mode {plan.gitops!r}")
    from . import gitops_argocd, gitops_flux, gitops_kustomize

    releases = load_releases(files)
    out = {MANIFESTS_KUSTOMIZATION: dump_yaml(kustomization(manifest_files(files)))}
    mode = {"kustomize": gitops_kustomize, "argocd": gitops_argocd, "flux": gitops_flux}[plan.gitops]
    out.update(mode.render(plan, releases))
    return out
