"""What every GitOps mode shares: the releases.yaml contract (`Release`), the manifests'
kustomization, the repository layout (`repo_dir`) and sync waves. Imports no mode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ...errors import OrchgenError
from ...decide.plan import Plan

from ...contract import HELM_DIR, MANIFESTS_DIR, OPERATOR_RESOURCES_DIR, PREREQUISITES_DIR, RELEASE_KEYS, RELEASES_FILE  # the bundle contract
MANIFESTS_KUSTOMIZATION = "kubernetes/kustomization.yaml"
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
MODES = ("kustomize", "argocd", "flux")
CONTRACT = RELEASE_KEYS  # the keys of a releases.yaml entry and their types

# libyaml's parser (the safe loader's constructors and resolvers): the bundle's own values files are read
# back here, and PyYAML's Python parser was ~10% of a 16,384-GPU plan (cProfile, issue 41)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    """Where the bundle sits in the GitOps repository (see wrap's module docstring); one cluster of a
    plane beyond one cluster: its folder in the bundle, `<fleet>/clusters/<cluster>` (render/clusters/)."""
    return plan.gitops_path or plan.name


def kustomization(resources: list[str], **extra: Any) -> dict[str, Any]:
    # fifo: kustomize would otherwise re-sort by kind; the bundle's order is its file order.
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": resources,
            "sortOptions": {"order": "fifo"}, **extra}


def _load_values(files: dict[str, bytes], name: str) -> dict[str, Any]:
    path = f"{HELM_DIR}/{name}"
    if path not in files:
        raise OrchgenError(f"names values file {name}, which the bundle does not have", RELEASES_FILE)
    values = yaml.load(files[path], Loader=_Loader)
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise OrchgenError("Helm values must be a mapping", path)
    return values


def load_releases(files: dict[str, bytes]) -> list[Release]:
    """The releases of releases.yaml in install order ([] when the bundle has none)."""
    if RELEASES_FILE not in files:
        return []
    data = yaml.load(files[RELEASES_FILE], Loader=_Loader) or {}
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


def has_prerequisites(files: dict[str, bytes]) -> bool:
    """Whether the bundle has objects the provider needs before any release (PREREQUISITES_DIR)."""
    return any(p.startswith(PREREQUISITES_DIR + "/") and p.endswith(".yaml") for p in files)


def runtime_crds(files: dict[str, bytes]) -> list[str]:
    """The CRDs (plural.group) of the custom resources in OPERATOR_RESOURCES_DIR, which an operator
    creates at run time and the GitOps path waits for. The plural is the kind's lower case plus "s",
    the kubebuilder default the operators' CRDs keep (IPPool -> ippools; tests/test_ordering.py
    holds it to the real CRD)."""
    out: set[str] = set()
    for path, blob in files.items():
        if path.startswith(OPERATOR_RESOURCES_DIR + "/") and path.endswith(".yaml"):
            for obj in yaml.load_all(blob, Loader=_Loader):
                if obj:
                    out.add(f"{obj['kind'].lower()}s.{obj['apiVersion'].rpartition('/')[0]}")
    return sorted(out)


def waves(releases: list[Release], first: int = 0) -> dict[str, int]:
    """Install wave per release: one more than the latest release it depends on (`first` without
    any; 1 where the prerequisites take wave 0)."""
    out: dict[str, int] = {}
    for rel in releases:  # install order: dependencies are already placed
        out[rel.name] = 1 + max((out[d] for d in rel.depends_on), default=first - 1)
    return out
