"""Renderers: one pure function per artifact family, Plan -> {relative path: bytes}.

The folders mirror the bundle: `slurm/` writes slurm/, `kubernetes/` writes kubernetes/ (Helm
releases and one module per chart or scheduler, tenancy, workloads, node labels; Slinky and
Soperator, which read the Slurm model), `clusters/` writes clusters/ (a plane beyond one cluster), `gitops/` writes gitops/, `pulumi.py` pulumi/ and
`report.py` plan.json and README.md. `templating.py` holds the Jinja2 environment.

A renderer does no I/O and keeps no state. It returns {} when the plan has nothing for it (a
Slurm renderer for a Kubernetes-only plan). A new artifact family is one module added to
`renderers()`; the pipeline does not change.

May import: the decision's Plan (generator.decide.plan), the input side's constants
(generator.spec: fabric labels, hostlists), errors, yamlio, catalog; and generator.impact.slurm, the
one impact table, which the bring-up ships byte for byte and whose upgrade window its vars.yaml carries
for the playbook's own guard. Never the YAML loader or the planner: a renderer reads the Plan only.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..errors import OrchgenError
from ..decide.plan import Plan

Renderer = Callable[[Plan], dict[str, bytes]]
# A bundle renderer works over what the plan renderers wrote (GitOps wraps the manifests and
# values in Argo CD / Flux objects); it may not change those files, only add its own.
BundleRenderer = Callable[[Plan, dict[str, bytes]], dict[str, bytes]]


def renderers() -> list[Renderer]:
    """Every artifact family, in a fixed order. A new family adds its module here."""
    from . import pulumi, report, slurm
    from .kubernetes import helm, manifests, soperator

    return [report.render, pulumi.render, partial(helm.render, extra=slurm_on_kubernetes_values()),
            manifests.render, slurm.render, soperator.render]


def cluster_renderers() -> list[Renderer]:
    """A plane beyond one cluster (plan.clusters): plan.json, README and Slurm as always; the
    Kubernetes side as clusters/<name>/{kubernetes,pulumi} per cluster (clusters/) instead of
    the top-level kubernetes/ and pulumi/."""
    from . import clusters, report, slurm

    return [report.render, clusters.render, slurm.render]


def slurm_on_kubernetes_values() -> dict[str, Callable[[Plan], dict]]:
    """Helm values builders of the Slurm-on-Kubernetes releases, by release name: the Helm
    renderer writes their values files and lists them in releases.yaml (helm.py's seam). A
    builder runs only for a release the plan installs."""
    from .kubernetes.slurm_values import slurm_on_kubernetes_values as builders

    return builders()


def bundle_renderers() -> list[BundleRenderer]:
    """Renderers that run after the plan renderers, in a fixed order."""
    from . import bringup
    from .gitops import wrap

    return [wrap.render, bringup.render]


def _merge(files: dict[str, bytes], more: dict[str, bytes]) -> None:
    for path, data in more.items():
        if path in files:
            raise OrchgenError(f"two renderers write {path}")
        files[path] = data


def render(plan: Plan) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for fn in (cluster_renderers() if plan.clusters else renderers()):
        _merge(files, fn(plan))
    for post in bundle_renderers():
        _merge(files, post(plan, dict(files)))
    return dict(sorted(files.items()))
