"""Renderers: one pure function per artifact family, Plan -> {relative path: bytes}.

A renderer does no I/O and keeps no state. It returns {} when the plan has nothing for it (a
Slurm renderer for a Kubernetes-only plan). Later artifact families plug in by adding a
function to RENDERERS; the pipeline does not change.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from importlib import resources

import jinja2

from ..errors import OrchgenError
from ..plan import Plan

Renderer = Callable[[Plan], dict[str, bytes]]
# A bundle renderer works over what the plan renderers wrote (GitOps wraps the manifests and
# values in Argo CD / Flux objects); it may not change those files, only add its own.
BundleRenderer = Callable[[Plan, dict[str, bytes]], dict[str, bytes]]


@cache
def templates() -> jinja2.Environment:
    root = resources.files("generator.templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,  # a missing fact is a bug, not an empty string
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.globals["slurm_summary"] = _slurm_summary  # the README's Slurm section reads the Slurm model
    env.globals["slurm_operator"] = _slurm_operator  # and its Slurm-on-Kubernetes section the operator's
    return env


def _slurm_summary(plan: Plan) -> object:
    from .slurm import summary

    return summary(plan)


def _slurm_operator(plan: Plan) -> object:
    from . import slinky, soperator

    return {"slinky": slinky.readme, "soperator": soperator.readme}[plan.slurm_plane.operator](plan)


def render_template(name: str, **context: object) -> bytes:
    return templates().get_template(name).render(**context).encode()


def renderers() -> list[Renderer]:
    """Every artifact family, in a fixed order. A new family adds its module here."""
    from . import helm, kubernetes, pulumi, report, slurm, soperator

    return [report.render, pulumi.render, partial(helm.render, extra=slurm_on_kubernetes_values()),
            kubernetes.render, slurm.render, soperator.render]


def slurm_on_kubernetes_values() -> dict[str, Callable[[Plan], dict]]:
    """Helm values builders of the Slurm-on-Kubernetes releases, by release name: the Helm
    renderer writes their values files and lists them in releases.yaml (helm.py's seam). A
    builder runs only for a release the plan installs."""
    from . import slinky, soperator

    return {**slinky.VALUES, **soperator.VALUES}


def bundle_renderers() -> list[BundleRenderer]:
    """Renderers that run after the plan renderers, in a fixed order."""
    from . import gitops

    return [gitops.render]


def _merge(files: dict[str, bytes], more: dict[str, bytes]) -> None:
    for path, data in more.items():
        if path in files:
            raise OrchgenError(f"two renderers write {path}")
        files[path] = data


def render(plan: Plan) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for fn in renderers():
        _merge(files, fn(plan))
    for post in bundle_renderers():
        _merge(files, post(plan, dict(files)))
    return dict(sorted(files.items()))
