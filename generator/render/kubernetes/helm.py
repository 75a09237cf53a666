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

from ...errors import OrchgenError
from ...decide.plan import Plan
from ...yamlio import dump_yaml
from . import cert_manager, gpu_operator, kai, kueue, ray, volcano

HELM_DIR = "kubernetes/helm"

# One values builder per chart, each in the chart's own module (a new chart is one module + one line).
VALUES: dict[str, Callable[[Plan], dict[str, Any]]] = {
    "cert-manager": cert_manager.values,
    "gpu-operator": gpu_operator.values,
    "kueue": kueue.values,
    "volcano": volcano.values,
    "kai-scheduler": kai.values,
    "kuberay-operator": ray.values,
}

ValuesBuilder = Callable[[Plan], dict[str, Any]]

# API groups of the CRDs each chart installs (at the catalog's pinned versions). gpu-operator's
# include its node-feature-discovery subchart's (nfd.enabled stays true); volcano's include groups
# whose CRDs it ships but this bundle does not use (bus, config, flow, nodeinfo, shard).
CRD_GROUPS: dict[str, tuple[str, ...]] = {
    "cert-manager": ("acme.cert-manager.io", "cert-manager.io"),
    "gpu-operator": ("nfd.k8s-sigs.io", "nvidia.com", "resource.nvidia.com"),
    "kueue": ("kueue.x-k8s.io",),
    "volcano": ("batch.volcano.sh", "bus.volcano.sh", "config.volcano.sh", "flow.volcano.sh",
                "nodeinfo.volcano.sh", "scheduling.volcano.sh", "shard.volcano.sh",
                "topology.volcano.sh"),
    "kai-scheduler": ("kai.scheduler", "scheduling.run.ai"),
    "kuberay-operator": ("ray.io",),
    "slurm-operator-crds": ("slinky.slurm.net",),
    "soperator": ("slurm.nebius.ai",),
}

# Charts whose CRDs sit in templates/ (not crds/) with no values key for `helm.sh/resource-policy:
# keep` at the pinned version, so a `helm uninstall` deletes them: kueue 0.19.2
# (charts/kueue/templates/crd/), volcano 1.15.1 (templates/*_v1*.yaml load crd/bases/ through
# tpl), slurm-operator-crds 1.2.1 (templates/; its values.yaml is empty). cert-manager's have
# crds.keep; gpu-operator's, KAI's, KubeRay's and Soperator's are in crds/, which Helm never
# deletes. The delivery paths never uninstall a CRD owner (README, "Nothing deleted by accident").
CRDS_IN_TEMPLATES = ("kueue", "volcano", "slurm-operator-crds")

# Releases that must be running before another installs. Only names present in the plan count.
_DEPENDS_ON: dict[str, tuple[str, ...]] = {
    # KubeRay's Volcano integration owns PodGroups: the operator does not start without their CRD.
    # KAI's integration only labels pods, but a RayCluster before KAI's webhooks would go unqueued.
    "kuberay-operator": ("volcano", "kai-scheduler"),
    # Slinky's webhook certificates come from cert-manager; its CRDs are their own release.
    "slurm-operator": ("slurm-operator-crds", "cert-manager"),
    # slurmd pods request nvidia.com/gpu: the device plugin must be there before NodeSets scale up.
    "slurm": ("slurm-operator", "gpu-operator"),
    "soperator": ("cert-manager",),  # certManager.enabled defaults to true in its chart
    "soperator-slurm-cluster": ("soperator", "gpu-operator"),
}


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
        "crds": list(CRD_GROUPS.get(component, ())) if chart.installs_crds else [],
        "dependsOn": [d for d in _DEPENDS_ON.get(component, ()) if d in plan.charts],
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
    files[f"{HELM_DIR}/releases.yaml"] = dump_yaml({"releases": rels})
    return files
