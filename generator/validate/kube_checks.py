"""Checks of the Kubernetes objects of a bundle (kubernetes/ and gitops/, kustomizations aside).

- custom resources against their CRD schemas (`--crds`) and the CEL rules in them, as the API server
  checks a new object; built-in kinds against kubernetes-validate in strict mode (the plan's
  Kubernetes version, default 1.33);
- cluster-scoped objects carry no namespace (kustomize and Argo CD would otherwise misplace them);
- no object is defined twice; every custom resource's API group is installed by a release.
Releases and values are in `helm_checks`; queue, flavor and label references in `kube_refs`.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .bundle_view import Bundle, Doc, Finding, error, split_message, warning, as_list
from ..contract import MANIFESTS_DIR, OPERATOR_RESOURCES_DIR, PREREQUISITES_DIR
from .helm_checks import HELM, RELEASES, load_releases

if TYPE_CHECKING:
    from .crds import CRDRegistry

DEFAULT_KUBERNETES = "1.33"
KUSTOMIZE_GROUP = "kustomize.config.k8s.io"

CLUSTER_SCOPED_BUILTINS = frozenset({
    "Namespace", "Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding", "StorageClass",
    "PriorityClass", "CustomResourceDefinition", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "APIService", "RuntimeClass",
    "IngressClass", "CSIDriver", "CSINode", "VolumeAttachment", "CertificateSigningRequest",
    "FlowSchema", "PriorityLevelConfiguration", "DeviceClass", "ResourceSlice", "VolumeAttributesClass",
    "ComponentStatus", "ClusterTrustBundle", "IPAddress", "ServiceCIDR", "StorageVersionMigration",
})
# Scope of the custom kinds orchgen emits, for when no --crds directory is given (from their CRDs).
CLUSTER_SCOPED_CUSTOM = frozenset({
    ("kueue.x-k8s.io", k) for k in ("ResourceFlavor", "ClusterQueue", "Cohort", "Topology",
                                    "WorkloadPriorityClass", "AdmissionCheck")
} | {("scheduling.volcano.sh", "Queue"), ("topology.volcano.sh", "HyperNode"),
     ("scheduling.run.ai", "Queue"), ("kai.scheduler", "Topology"), ("nvidia.com", "ClusterPolicy"),
     ("nvidia.com", "NVIDIADriver"), ("nvidia.com", "GPUCluster"), ("mellanox.com", "NicClusterPolicy")})
# Groups a GitOps controller brings itself: its objects need no release of ours.
GITOPS_GROUPS = ("argoproj.io", "toolkit.fluxcd.io")


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def objects(bundle: Bundle) -> list[Doc]:
    """Every Kubernetes object of the bundle (manifests, workloads, GitOps), kustomizations aside."""
    out = []
    paths = [p for p in bundle.under("kubernetes/") if not p.startswith(f"{HELM}/")] + bundle.under("gitops/")
    for path in paths:
        for doc in bundle.docs(path):
            if group_of(doc.api_version) == KUSTOMIZE_GROUP:
                continue
            out.append(doc)
    return out


def kubernetes_version(bundle: Bundle) -> str:
    return bundle.plan_version("kubernetes") or DEFAULT_KUBERNETES


def check_shapes(docs: list[Doc]) -> Iterator[Finding]:
    for doc in docs:
        if not isinstance(doc.data, dict) or not doc.api_version or not doc.kind:
            yield error(doc.path, doc.line, "not a Kubernetes object: apiVersion and kind are required")
        elif not doc.name:
            yield error(doc.path, doc.line, f"{doc.kind} has no metadata.name")


def _valid(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if isinstance(d.data, dict) and d.api_version and d.kind and d.name]


def check_schemas(docs: list[Doc], version: str, registry: CRDRegistry | None,
                  notices: list[str]) -> Iterator[Finding]:
    try:
        from .builtin import is_builtin, schema_version, validate_builtin
        schema_version(version)
    except ValueError:
        yield error("plan.json", 0, f"versions.kubernetes: {version!r} is not a Kubernetes version; "
                                    f"built-in kinds checked against {DEFAULT_KUBERNETES}")
        version = DEFAULT_KUBERNETES
    except ImportError:
        notices.append("kubernetes-validate is not installed: built-in kinds not checked")
        is_builtin = validate_builtin = None  # type: ignore[assignment]
    groups = {v.group for v in registry} if registry is not None else set()
    for doc in _valid(docs):
        if is_builtin is not None and is_builtin(doc.api_version, doc.kind, version):
            messages = validate_builtin(doc.data, version)
        elif is_builtin is not None and not is_custom(doc.api_version):
            messages = [f"(root): {doc.api_version} {doc.kind} is not a Kubernetes {version} kind"]
        elif registry is None:
            continue
        elif registry.knows(doc.api_version, doc.kind):
            # scope is checked by check_scope for every object, with or without CRDs
            messages = [m for m in registry.validate(doc.data) if not m.startswith("metadata.namespace: ")]
        elif group_of(doc.api_version) in groups:
            known = sorted({f"{v.api_version} {v.kind}" for v in registry if v.group == group_of(doc.api_version)})
            messages = [f"(root): no CRD defines {doc.api_version} {doc.kind} (known: {', '.join(known)})"]
        else:
            yield warning(doc.path, doc.line, f"{doc.label}: no CRD for {doc.api_version} in --crds: not checked")
            continue
        for message in messages:
            parts, _ = split_message(message)
            yield error(doc.path, doc.line_of(parts), f"{doc.label}: {message.removeprefix('(root): ')}")


def check_rules(docs: list[Doc], registry: CRDRegistry | None) -> Iterator[Finding]:
    """Every CEL rule (`x-kubernetes-validations`) that a custom resource breaks on CREATE."""
    if registry is None:
        return
    for doc in _valid(docs):
        crd = registry.get(doc.api_version, doc.kind)
        if crd is None:
            continue  # check_schemas says so
        for violation in crd.cel.check_create(doc.data).violations:
            yield error(doc.path, doc.line_of(list(violation.path)),
                        f"{doc.label}: {str(violation).removeprefix('(root): ')}")


# Kubernetes' own API groups that are served by CRDs, not by the API server (their CRDs carry the
# api-approved.kubernetes.io annotation): Gateway API (kubernetes-sigs/gateway-api config/crd).
# The site's Gateway controller (Envoy Gateway, Istio, Cilium ...) installs the version it
# implements, so no release of a bundle owns them (README, "Serving").
CRD_SERVED_K8S_GROUPS = frozenset({"gateway.networking.k8s.io"})


def is_custom(api_version: str) -> bool:
    """A custom resource's group has a dot and is not one of Kubernetes' own *.k8s.io groups (but
    for the few of those that CRDs serve)."""
    group = group_of(api_version)
    if group in CRD_SERVED_K8S_GROUPS:
        return True
    return "." in group and not (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


def _cluster_scoped(doc: Doc, registry: CRDRegistry | None) -> bool | None:
    """True/False when the kind's scope is known, None when not."""
    if not is_custom(doc.api_version):
        return doc.kind in CLUSTER_SCOPED_BUILTINS
    crd = registry.get(doc.api_version, doc.kind) if registry is not None else None
    if crd is not None:
        return crd.scope == "Cluster"
    return True if (group_of(doc.api_version), doc.kind) in CLUSTER_SCOPED_CUSTOM else None


def check_scope(docs: list[Doc], registry: CRDRegistry | None) -> Iterator[Finding]:
    for doc in _valid(docs):
        scoped = _cluster_scoped(doc, registry)
        if scoped and "namespace" in doc.metadata:
            yield error(doc.path, doc.line_of(["metadata", "namespace"]),
                        f"{doc.label}: cluster-scoped, but has metadata.namespace")
        elif scoped is False and not doc.namespace and doc.path.startswith("kubernetes/"):
            yield warning(doc.path, doc.line, f"{doc.label}: namespaced, but has no metadata.namespace "
                                              "(it would land in whatever namespace kubectl uses)")


def check_duplicates(docs: list[Doc]) -> Iterator[Finding]:
    seen: dict[tuple[str, str, str | None, str], Doc] = {}
    for doc in _valid(docs):
        if not doc.path.startswith((f"{MANIFESTS_DIR}/", f"{PREREQUISITES_DIR}/", f"{OPERATOR_RESOURCES_DIR}/")):
            continue  # starter workloads and GitOps objects are applied separately
        key = (group_of(doc.api_version), doc.kind, doc.namespace, doc.name)
        if key in seen:
            first = seen[key]
            yield error(doc.path, doc.line, f"{doc.label} is defined twice (first at {first.path}:{first.line})")
        seen.setdefault(key, doc)


def check_crd_owners(docs: list[Doc], bundle: Bundle) -> Iterator[Finding]:
    """A custom resource Pulumi applies must wait for the release that installs its CRD."""
    if not bundle.has(RELEASES):
        return
    owned = {g for r in load_releases(bundle)[0] for g in as_list(r.get("crds")) if isinstance(g, str)}
    for doc in _valid(docs):
        group = group_of(doc.api_version)
        if doc.path.startswith("kubernetes/") and is_custom(doc.api_version) and group not in owned \
                and not group.endswith(GITOPS_GROUPS) and group not in CRD_SERVED_K8S_GROUPS:
            yield error(doc.path, doc.line, f"{doc.label}: no release in {RELEASES} installs the CRDs of {group}")
