"""`gitops: argocd`: one Argo CD Application per Helm release, and the manifests, in sync waves.

Layout (all under `gitops/`):
- `apps/<release>.yaml`: an Application per release, chart pinned, values inline
  (`helm.valuesObject`, the values file as data), sync wave from the releases' `dependsOn`;
- `manifests/kustomization.yaml`: the bundle's manifests (via `../../kubernetes`), every object
  annotated with the wave after the last release, so custom resources come after their CRDs;
- `kustomization.yaml`: the two above, which is what the root Application syncs;
- `bootstrap/root-app.yaml`: the root ("app of apps") Application, applied once by hand.

Why the manifests are not an Application of their own: an Application needs the GitOps
repository's URL, which the input does not carry; a placeholder committed in a synced file would
have to be edited, and an edited bundle fails `orchgen plan --check` forever. The root
Application is applied once with the URL substituted on the way (README), never edited, so
nothing that Argo CD syncs from git holds a placeholder.

OCI charts use Argo CD's native OCI source (3.1+): `repoURL: oci://registry/path/chart`,
`path: .`, the version as `targetRevision`; it needs no repository Secret for a public registry,
unlike the older `enableOCI` Helm-repository form.
"""
from __future__ import annotations

from typing import Any

from ..plan import Plan
from ..yamlio import dump_yaml
from .gitops import Release, kustomization, repo_dir, waves

API = "argoproj.io/v1alpha1"
NAMESPACE = "argocd"
IN_CLUSTER = "https://kubernetes.default.svc"
WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
RETRY = {"limit": 10, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}}


def placeholder_repo(plan: Plan) -> str:
    """The repoURL of the root Application until the operator substitutes theirs (README)."""
    return f"https://git.example.com/{plan.name}-gitops.git"


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


def application(plan: Plan, rel: Release, wave: int) -> dict[str, Any]:
    owner = bool(rel.crds)
    options = ["CreateNamespace=true"]
    if owner:
        # Client-side apply stores the whole object in an annotation capped at 256 KiB; several
        # upstream CRDs are bigger (KubeRay's, Kueue's Workload), server-side apply has no cap.
        options.append("ServerSideApply=true")
    return {
        "apiVersion": API,
        "kind": "Application",
        "metadata": {"name": app_name(plan, rel.name), "namespace": NAMESPACE,
                     "annotations": {WAVE: str(wave)},
                     "labels": {"app.kubernetes.io/part-of": plan.name}},
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


def root_application(plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Application",
        "metadata": {"name": plan.name, "namespace": NAMESPACE,
                     "labels": {"app.kubernetes.io/part-of": plan.name}},
        "spec": {
            "project": "default",
            "source": {"repoURL": placeholder_repo(plan), "targetRevision": "HEAD",
                       "path": f"{repo_dir(plan)}/gitops"},
            "destination": {"server": IN_CLUSTER, "namespace": NAMESPACE},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, "retry": RETRY},
        },
    }


def manifests_kustomization(wave: int) -> dict[str, Any]:
    # A strategic-merge patch with a match-all target annotates every object's own metadata
    # (commonAnnotations would also stamp pod templates). SkipDryRunOnMissingResource: when
    # Argo CD does not wait for the releases (no Application health check), the custom
    # resources' dry run would fail the whole sync before their CRDs exist; retry then converges.
    patch = {"apiVersion": "v1", "kind": "AnyKind",
             "metadata": {"name": "any", "annotations": {
                 WAVE: str(wave), SYNC_OPTIONS: "SkipDryRunOnMissingResource=true"}}}
    return kustomization(["../../kubernetes"],
                         patches=[{"target": {"name": ".*"}, "patch": dump_yaml(patch).decode()}])


def render(plan: Plan, releases: list[Release]) -> dict[str, bytes]:
    wave = waves(releases)
    manifests_wave = 1 + max(wave.values(), default=-1)
    out = {f"gitops/apps/{rel.name}.yaml": dump_yaml(application(plan, rel, wave[rel.name]))
           for rel in releases}
    out["gitops/manifests/kustomization.yaml"] = dump_yaml(manifests_kustomization(manifests_wave))
    out["gitops/kustomization.yaml"] = dump_yaml(kustomization(
        [f"apps/{rel.name}.yaml" for rel in releases] + ["manifests"]))
    out["gitops/bootstrap/root-app.yaml"] = dump_yaml(root_application(plan))
    return out
