"""`gitops: argocd`: one Argo CD Application per Helm release and one for the manifests, in sync waves.

Layout (all under `gitops/`):
- `apps/<release>.yaml`: an Application per release, chart pinned, values inline
  (`helm.valuesObject`, the values file as data), sync wave from the releases' `dependsOn`;
- `apps/prerequisites.yaml` (only where the bundle has `kubernetes/prerequisites/`): the Application
  `<name>-prerequisites`, wave 0, which syncs what the provider needs before any release (GKE: the
  GPU Operator's namespace and quota); the releases' waves then start at 1;
- `apps/manifests.yaml`: the Application `<name>-manifests`, which syncs `<name>/kubernetes`
  (the bundle's manifests, through `kubernetes/kustomization.yaml`) from the GitOps repository,
  one wave after the last release, so custom resources come after the releases owning their CRDs;
- `kustomization.yaml`: the Applications, which is what the root Application syncs;
- `bootstrap/root-app.yaml`: the root ("app of apps") Application, applied once by hand.

The GitOps repository's URL is an input (`options.gitops_repo`, `plan.gitops_repo`): the root and
manifests Applications read it, and nothing needs editing (an edited bundle fails
`orchgen plan --check`). Without it they carry `placeholder_repo`, and the README tells the
operator to set the option and plan again (or, for the root alone, substitute it on the way in).

OCI charts use Argo CD's native OCI source (3.1+): `repoURL: oci://registry/path/chart`,
`path: .`, the version as `targetRevision`; it needs no repository Secret for a public registry,
unlike the older `enableOCI` Helm-repository form.
"""
from __future__ import annotations

from typing import Any

from ...catalog import CATALOG
from ...errors import OrchgenError
from ...decide.plan import Plan
from ...yamlio import dump_yaml
from ...contract import OPERATOR_RESOURCES_DIR, PREREQUISITES_DIR
from .common import MANIFESTS_KUSTOMIZATION, RELEASES_FILE, Release, kustomization, repo_dir, waves

API = "argoproj.io/v1alpha1"
NAMESPACE = "argocd"
IN_CLUSTER = "https://kubernetes.default.svc"
WAVE = "argocd.argoproj.io/sync-wave"
MANIFESTS = "manifests"  # the manifests Application's suffix and file name under apps/
PREREQUISITES = "prerequisites"  # likewise, the prerequisites Application's
OPERATOR_RESOURCES = "operator-resources"  # and the operator resources' (operator_resources_application)
RETRY = {"limit": 10, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}}


def placeholder_repo(plan: Plan) -> str:
    """The GitOps repository's URL when the input does not give one (`options.gitops_repo`)."""
    return f"https://git.example.com/{repo_dir(plan).split('/')[0]}-gitops.git"  # the fleet's, for every cluster


def gitops_repo(plan: Plan) -> str:
    """The repoURL of the Applications that read the bundle itself from the GitOps repository."""
    return plan.gitops_repo or placeholder_repo(plan)


def app_name(plan: Plan, release: str) -> str:
    # One Argo CD often serves many clusters: the fleet's name keeps Applications apart.
    return f"{plan.name}-{release}"


def _source(rel: Release) -> dict[str, Any]:
    helm: dict[str, Any] = {"releaseName": rel.name}
    if rel.values:
        helm["valuesObject"] = rel.values
    if rel.oci:
        return {"repoURL": rel.oci_url, "path": ".", "targetRevision": rel.version, "helm": helm}
    return {"repoURL": rel.repo, "chart": rel.chart, "targetRevision": rel.version, "helm": helm}


# Argo CD's resource sync option "No Prune Resources" (docs/user-guide/sync-options.md); as an
# Application-level syncOption it is the default of every resource the Application syncs.
NO_PRUNE = "Prune=false"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"


def _metadata(plan: Plan, name: str, wave: int | None = None, keep: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    annotations = {}
    if wave is not None:
        annotations[WAVE] = str(wave)
    if keep:
        annotations[SYNC_OPTIONS] = NO_PRUNE
    if annotations:
        meta["annotations"] = annotations
    meta["labels"] = {"app.kubernetes.io/part-of": plan.name}
    return meta


def application(plan: Plan, rel: Release, wave: int) -> dict[str, Any]:
    owner = bool(rel.crds)
    options = ["CreateNamespace=true"]
    if owner:
        # Client-side apply stores the whole object in an annotation capped at 256 KiB; several
        # upstream CRDs are bigger (KubeRay's, Kueue's Workload), server-side apply has no cap.
        options.append("ServerSideApply=true")
        # Pruning a CRD deletes every custom resource of its kind: not even a manual sync with
        # prune does it.
        options.append(NO_PRUNE)
    return {
        "apiVersion": API,
        "kind": "Application",
        # A CRD owner's Application is never pruned by the root Application when its release leaves
        # releases.yaml (and it has no resources finalizer, so deleting it by hand orphans the
        # release instead of uninstalling it).
        "metadata": _metadata(plan, app_name(plan, rel.name), wave, keep=owner),
        "spec": {
            "project": "default",
            "source": _source(rel),
            "destination": {"server": IN_CLUSTER, "namespace": rel.namespace},
            "syncPolicy": {
                # Pruning a CRD deletes every custom resource of its kind: never automatic.
                "automated": {"prune": not owner, "selfHeal": True},
                "syncOptions": options,
                "retry": RETRY,
            },
        },
    }


def manifests_application(plan: Plan, wave: int) -> dict[str, Any]:
    """`<name>-manifests`: the bundle's manifests, in the wave after every release."""
    return {
        "apiVersion": API,
        "kind": "Application",
        "metadata": _metadata(plan, app_name(plan, MANIFESTS), wave),
        "spec": {
            "project": "default",
            # kubernetes/, not kubernetes/manifests/: its kustomization lists the manifests in
            # file order, and Argo CD builds a kustomization where it finds one.
            "source": {"repoURL": gitops_repo(plan), "targetRevision": "HEAD",
                       "path": f"{repo_dir(plan)}/{MANIFESTS_KUSTOMIZATION.rpartition('/')[0]}"},
            # No destination namespace: every namespaced manifest names its own (tests prove it),
            # and a default one would silently catch a manifest that forgot to.
            "destination": {"server": IN_CLUSTER},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                "syncOptions": [
                    # Argo CD does not wait for a release's health unless told (README), so this
                    # sync may start before the CRDs exist: without it the custom resources' dry
                    # run fails the whole sync; with it, the retry converges once they do.
                    "SkipDryRunOnMissingResource=true",
                    # Server-side, as Pulumi (pulumi-kubernetes' default since v4) and the README's
                    # `kubectl apply --server-side` apply them: one way of owning fields, whichever
                    # applied first, and no 256 KiB last-applied annotation.
                    "ServerSideApply=true",
                ],
                "retry": RETRY,
            },
        },
    }


def prerequisites_application(plan: Plan) -> dict[str, Any]:
    """`<name>-prerequisites`: kubernetes/prerequisites/ (a plain directory of objects), wave 0,
    before every release: a release that needs them would otherwise never become healthy (GKE's
    quota for the GPU Operator's system-node-critical pods), and its wave would never end."""
    return {
        "apiVersion": API,
        "kind": "Application",
        "metadata": _metadata(plan, app_name(plan, PREREQUISITES), 0),
        "spec": {
            "project": "default",
            "source": {"repoURL": gitops_repo(plan), "targetRevision": "HEAD",
                       "path": f"{repo_dir(plan)}/{PREREQUISITES_DIR}"},
            "destination": {"server": IN_CLUSTER},  # every object names its namespace
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                           "syncOptions": ["ServerSideApply=true"], "retry": RETRY},
        },
    }


def root_application(plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Application",
        "metadata": _metadata(plan, plan.name),
        "spec": {
            "project": "default",
            "source": {"repoURL": gitops_repo(plan), "targetRevision": "HEAD",
                       "path": f"{repo_dir(plan)}/gitops"},
            "destination": {"server": IN_CLUSTER, "namespace": NAMESPACE},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, "retry": RETRY},
        },
    }


# Releases Argo CD cannot install, with the reason: each chart's record says so (catalog.py,
# `gitops_unsupported`, where KAI's pre-install hook is explained).
UNSUPPORTED = {c.component: why for c in CATALOG.values() if (why := c.unsupported_by("argocd"))}


def unsupported(component: str, version: str | None = None) -> str | None:
    """Why Argo CD cannot install a release of `component` (at `version`), read from its chart
    record now."""
    chart = CATALOG.get(component)
    return chart.unsupported_by("argocd", version) if chart else None


def operator_resources_application(plan: Plan, wave: int) -> dict[str, Any]:
    """`<name>-operator-resources`: kubernetes/operator-resources/ (a plain directory), the wave after
    the manifests: custom resources whose CRD an operator creates once it reconciles a manifest (the
    Network Operator, nv-ipam's IPPool). Argo CD cannot wait for a CRD nothing in git declares, so
    its dry run is skipped while the kind is missing and the retry applies them once it exists
    (Argo CD docs, sync options "Skip Dry Run for new custom resources types")."""
    return {
        "apiVersion": API,
        "kind": "Application",
        "metadata": _metadata(plan, app_name(plan, OPERATOR_RESOURCES), wave),
        "spec": {
            "project": "default",
            "source": {"repoURL": gitops_repo(plan), "targetRevision": "HEAD",
                       "path": f"{repo_dir(plan)}/{OPERATOR_RESOURCES_DIR}"},
            "destination": {"server": IN_CLUSTER},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                "syncOptions": ["SkipDryRunOnMissingResource=true", "ServerSideApply=true"],
                "retry": RETRY,
            },
        },
    }


def render(plan: Plan, releases: list[Release], prerequisites: bool = False,
           runtime_crds: list[str] | None = None) -> dict[str, bytes]:
    for rel in releases:
        why = unsupported(rel.name, rel.version)
        if why:
            raise OrchgenError(f"gitops argocd cannot install {rel.name} {rel.version}: {why}",
                               field="options.gitops")
    for own in (MANIFESTS, PREREQUISITES, OPERATOR_RESOURCES):
        if any(rel.name == own for rel in releases):  # its Application would be overwritten
            raise OrchgenError(f"a release named {own!r} collides with the {own} Application", RELEASES_FILE)
    first = 1 if prerequisites else 0
    wave = waves(releases, first)
    out = {f"gitops/apps/{rel.name}.yaml": dump_yaml(application(plan, rel, wave[rel.name]))
           for rel in releases}
    manifests_wave = max(wave.values(), default=first - 1) + 1
    out[f"gitops/apps/{MANIFESTS}.yaml"] = dump_yaml(manifests_application(plan, manifests_wave))
    after = []
    if runtime_crds:
        out[f"gitops/apps/{OPERATOR_RESOURCES}.yaml"] = dump_yaml(
            operator_resources_application(plan, manifests_wave + 1))
        after = [f"apps/{OPERATOR_RESOURCES}.yaml"]
    before = []
    if prerequisites:
        out[f"gitops/apps/{PREREQUISITES}.yaml"] = dump_yaml(prerequisites_application(plan))
        before = [f"apps/{PREREQUISITES}.yaml"]
    out["gitops/kustomization.yaml"] = dump_yaml(kustomization(
        before + [f"apps/{rel.name}.yaml" for rel in releases] + [f"apps/{MANIFESTS}.yaml"] + after))
    out["gitops/bootstrap/root-app.yaml"] = dump_yaml(root_application(plan))
    return out
