"""`gitops: kustomize`: one kustomization over the manifests; the Helm releases stay outside it.

Kustomize could inflate the charts itself (`helmCharts:`), but only with `--enable-helm` and
network access at build time, and Flux's kustomize-controller refuses `helmCharts` altogether
(it never shells out to helm: fluxcd/kustomize-controller #548, #1284), so a kustomization using
it would not build where GitOps tools build it. In this mode the releases
are installed by Pulumi (`pulumi/`, in releases.yaml order) and the GitOps tool, or
`kubectl apply --server-side -k gitops/`, syncs the manifests. Choose `argocd` or `flux` to have
the controller own the releases too.
"""
from __future__ import annotations

from ...decide.plan import Plan
from ...yamlio import dump_yaml
from .common import Release, kustomization


def render(plan: Plan, releases: list[Release], prerequisites: bool = False,
           runtime_crds: list[str] | None = None) -> dict[str, bytes]:
    # kubernetes/prerequisites/ is Pulumi's to apply here, before the releases it installs, and
    # kubernetes/operator-resources/ after the manifests (Pulumi waits for their operator)
    return {"gitops/kustomization.yaml": dump_yaml(kustomization(["../kubernetes"]))}
