"""Helm releases of the Kubernetes plane: kubernetes/helm/releases.yaml + <release>.values.yaml.

`releases(plan)` is every release the Plan installs (`plan.charts`), in install order, each
`{name, namespace, repo, chart, version, values, crds, dependsOn}`:

- install order: releases that install CRDs first (so every custom resource in
  kubernetes/manifests/ finds its CRD), then the rest; within that, `plan.charts` order, moved
  later only where a `dependsOn` demands it. `dependsOn` names only earlier releases.
- `crds`: the API groups whose CRDs the release installs; Pulumi / GitOps make a custom resource of
  such a group wait for that release.
- `version`: the catalog's pinned version, with `options.versions` applied by the planner.

`render(plan, extra=None)` writes releases.yaml and one values file per release it has a values
builder for (`VALUES`: each chart's module's `values`: cert-manager, gpu-operator, kueue,
volcano, kai-scheduler, kuberay-operator). releases.yaml lists exactly the releases whose values file the bundle holds, so a
bundle is never half-described.

Seam for the Slinky / Soperator renderer: it does NOT write files under kubernetes/helm/ itself
(two renderers writing one path is an error). It exposes a mapping `VALUES: {release name: builder}`,
a builder being `Plan -> dict` of Helm values, for `slurm-operator-crds`, `slurm-operator`, `slurm`
(and `soperator`, `soperator-slurm-cluster`), and its registration in
`generator.render.renderers()` becomes `functools.partial(helm.render, extra=slinky.VALUES)`.
Its releases then appear in releases.yaml with the `crds` / `dependsOn` computed here, in order.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...catalog import CATALOG
from ...errors import OrchgenError
from ...decide.plan import Plan
from ...yamlio import dump_yaml
from . import (cert_manager, dra_driver, efa, gpu_operator, jupyterhub, kai, keda, kserve, kueue, lws, metrics,
               network_operator, ray, volcano)

from ...contract import HELM_DIR, RELEASES_FILE

# One values builder per chart, each in the chart's own module (a new chart is one module + one line).
VALUES: dict[str, Callable[[Plan], dict[str, Any]]] = {
    "cert-manager": cert_manager.values,
    "gpu-operator": gpu_operator.values,
    "network-operator": network_operator.values,
    # multi-node NVLink (ComputeDomains) on GB200-class pools: dra_driver.py says which values and why
    "dra-driver-nvidia-gpu": dra_driver.values,
    # The EFA device plugin: its defaults but the GPU node groups' tolerations (efa.py says why)
    "aws-efa-k8s-device-plugin": efa.values,
    "kueue": kueue.values,
    "volcano": volcano.values,
    "kai-scheduler": kai.values,
    "kuberay-operator": ray.values,
    "kube-prometheus-stack": metrics.values,
    # the serving platform (issue 21)
    "kserve-crd": kserve.crd_values,
    "kserve-resources": kserve.values,
    "lws": lws.values,
    "keda": keda.values,
    "jupyterhub": jupyterhub.values,
}

ValuesBuilder = Callable[[Plan], dict[str, Any]]

# Read from the chart registry (generator/catalog.py), which holds each chart's CRD groups,
# whether its CRDs sit in templates/, and the releases it waits for; kept here under their old
# names for the README and the tests.
CRD_GROUPS: dict[str, tuple[str, ...]] = {c.component: c.crd_groups for c in CATALOG.values() if c.crd_groups}
CRDS_IN_TEMPLATES = tuple(c.component for c in CATALOG.values() if c.crds_in_templates)


# The API group of ServiceMonitor / PodMonitor. No chart in the catalog installs it (the
# Prometheus Operator is not part of any bundle); a chart that renders such objects without the
# CRD fails to install, so they are on only when a release of the plan installs this group.
MONITORING_GROUP = "monitoring.coreos.com"


def monitoring_installed(plan: Plan) -> bool:
    return any(MONITORING_GROUP in CRD_GROUPS.get(c, ()) for c in plan.charts)


def _release(plan: Plan, component: str) -> dict[str, Any]:
    chart = plan.charts[component]
    return {
        "name": component,
        "namespace": chart.namespace,
        "repo": chart.repo,
        "chart": chart.chart,
        "version": chart.version,
        "values": f"{component}.values.yaml",
        "crds": list(chart.crd_groups),
        "dependsOn": [d for d in chart.depends_on if d in plan.charts],
    }


def _install_order(rels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CRD owners first, then plan order; a release waits until everything it depends on is placed."""
    pending = sorted(rels, key=lambda r: not r["crds"])  # stable: keeps plan order within a class
    placed: list[dict[str, Any]] = []
    while pending:
        names = {r["name"] for r in placed}
        ready = next((r for r in pending if set(r["dependsOn"]) <= names), None)
        if ready is None:
            raise OrchgenError(f"Helm releases depend on each other in a cycle: "
                               f"{', '.join(r['name'] for r in pending)}")
        pending.remove(ready)
        placed.append(ready)
    return placed


def releases(plan: Plan) -> list[dict[str, Any]]:
    """Every release of `plan.charts` in install order ([] without a Kubernetes/k3s plane)."""
    if plan.kube_plane is None:
        return []
    return _install_order([_release(plan, c) for c in plan.charts])


def render(plan: Plan, extra: Mapping[str, ValuesBuilder] | None = None) -> dict[str, bytes]:
    if plan.kube_plane is None:
        return {}
    builders = {**VALUES, **(extra or {})}
    rels = [r for r in releases(plan) if r["name"] in builders]
    written = {r["name"] for r in rels}
    for rel in rels:
        missing = [d for d in rel["dependsOn"] if d not in written]
        if missing:  # a renderer seam wired half-way: fail loudly rather than write a dangling list
            raise OrchgenError(f"Helm release {rel['name']} depends on {', '.join(missing)}, "
                               "which has no values builder")
    files = {f"{HELM_DIR}/{r['values']}": dump_yaml(builders[r["name"]](plan)) for r in rels}
    files[RELEASES_FILE] = dump_yaml({"releases": rels})
    return files
