"""Checks of how a bundle installs its Kubernetes side: Helm releases, their values, GitOps copies.

- releases.yaml is well formed: every field of the contract, https:// or oci:// repos, values files
  that exist, `dependsOn` naming only releases installed earlier;
- every values key exists in the chart's defaults (`--chart-defaults`, keys the defaults document
  as comments included), Slinky's maps of named NodeSets/partitions read like their templates;
- Argo CD Applications and Flux HelmReleases carry the same values as kubernetes/helm/;
- every kustomization's resources exist in the bundle.
"""
from __future__ import annotations

import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import catalog
from ..contract import HELM_DIR as HELM, RELEASE_KEYS, RELEASES_FILE as RELEASES
from .bundle_view import Bundle, Doc, Finding, error, split_message, as_list


def load_releases(bundle: Bundle) -> tuple[list[dict[str, Any]], Doc | None]:
    doc = bundle.doc(RELEASES)
    if doc is None or not isinstance(doc.data, dict) or not isinstance(doc.data.get("releases"), list):
        return [], doc
    return [r for r in doc.data["releases"] if isinstance(r, dict)], doc


REQUIRED = RELEASE_KEYS  # the bundle contract (generator/contract.py)


def check_releases(bundle: Bundle) -> Iterator[Finding]:
    values_files = [p for p in bundle.under(f"{HELM}/") if p != RELEASES]
    doc = bundle.doc(RELEASES)
    if doc is None:
        if values_files:
            yield error(values_files[0], 0, f"values file without {RELEASES} (nothing installs it)")
        return
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("releases"), list):
        yield error(RELEASES, doc.line, "expected {releases: [...]}")
        return
    placed: set[str] = set()
    for i, rel in enumerate(doc.data["releases"]):
        at = doc.line_of(["releases", i])
        if not isinstance(rel, dict):
            yield error(RELEASES, at, f"releases[{i}]: expected a mapping")
            continue
        for key, typ in REQUIRED.items():
            if not isinstance(rel.get(key), typ):
                yield error(RELEASES, doc.line_of(["releases", i, key]),
                            f"releases[{i}].{key}: {'missing' if key not in rel else 'expected ' + typ.__name__}")
        name = str(rel.get("name"))
        if name in placed:
            yield error(RELEASES, at, f"release {name} is listed twice")
        chart, version = rel.get("chart"), rel.get("version")
        if isinstance(chart, str) and isinstance(version, str):  # validate fetches <chart> <version>: no paths
            from .pins import pin_problem

            problem = pin_problem(chart, version)
            if problem:
                yield error(RELEASES, doc.line_of(["releases", i, problem[0]]),
                            f"release {name}: {problem[0]} {chart if problem[0] == 'chart' else version} is "
                            f"{problem[1]}")
        repo = str(rel.get("repo", ""))
        if repo and not repo.startswith(("https://", "oci://")):
            yield error(RELEASES, doc.line_of(["releases", i, "repo"]),
                        f"release {name}: repo must be an https:// Helm repository or an oci:// registry")
        deps = rel.get("dependsOn") or []
        if not isinstance(deps, list):  # a hand edit can make it anything; a list of names is the contract
            yield error(RELEASES, doc.line_of(["releases", i, "dependsOn"]),
                        f"release {name}: dependsOn must be a list of release names")
            deps = []
        for dep in deps:
            if not isinstance(dep, str) or dep not in placed:
                yield error(RELEASES, doc.line_of(["releases", i, "dependsOn"]),
                            f"release {name} depends on {dep}, which is not installed before it")
        values = rel.get("values")
        if isinstance(values, str) and not bundle.has(f"{HELM}/{values}"):
            yield error(RELEASES, doc.line_of(["releases", i, "values"]),
                        f"release {name}: {HELM}/{values} does not exist")
        placed.add(name)


def component_of(chart: str, repo: str = "") -> catalog.Chart | None:
    """The catalog entry of a release's chart (its defaults say which values keys exist)."""
    hits = [c for c in catalog.CATALOG.values() if c.chart == chart]
    return next((c for c in hits if c.repo.rstrip("/") == repo.rstrip("/")), hits[0] if hits else None)


def check_values(bundle: Bundle, defaults_dir: Path | None, notices: list[str]) -> Iterator[Finding]:
    releases, _ = load_releases(bundle)
    if not releases:
        return
    if defaults_dir is None:
        notices.append("no --chart-defaults: Helm values not checked against the charts' default values")
        return
    from .values import unknown_keys
    from .values_comments import load_defaults_with_comments

    for rel in releases:
        path = f"{HELM}/{rel.get('values')}"
        doc = bundle.doc(path)
        entry = component_of(str(rel.get("chart")), str(rel.get("repo", "")))
        if doc is None or entry is None:
            if entry is None:
                notices.append(f"chart {rel.get('chart')} is not in orchgen's catalog: {path} not checked")
            continue
        source = defaults_dir / entry.values_reference / "values.yaml"
        if not source.is_file():
            notices.append(f"no {entry.values_reference}/values.yaml under --chart-defaults: {path} not checked")
            continue
        if not isinstance(doc.data, dict):
            yield error(path, doc.line, "Helm values must be a mapping")
            continue
        defaults = _adapt(entry.component, _defaults(source, load_defaults_with_comments), doc.data)
        for message in unknown_keys(doc.data, defaults):
            parts, text = split_message(message)
            yield error(path, doc.line_of(parts), f"{'.'.join(map(str, parts))}: {text} "
                                                  f"(not in {entry.chart} {entry.version} defaults)")


_DEFAULTS: dict[Path, dict[str, Any]] = {}


def _adapt(component: str, defaults: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Charts whose maps of named entries (Slinky's `nodesets.<name>`) are read like a template
    elsewhere in the defaults: the renderer that knows the chart says how (one place for it)."""
    if component == "slurm":
        from ..render.kubernetes.slinky import chart_defaults

        try:
            return chart_defaults(defaults, values)
        except (KeyError, TypeError, AttributeError):  # other chart version: check against plain defaults
            return defaults
    if component == "jupyterhub":
        from ..render.kubernetes.jupyterhub import chart_defaults as hub_defaults

        return hub_defaults(defaults, values)
    return defaults


def _defaults(path: Path, load) -> dict[str, Any]:
    if path not in _DEFAULTS:  # the property tests validate hundreds of bundles against one directory
        _DEFAULTS[path] = load(path)
    return _DEFAULTS[path]


def check_gitops_values(docs: list[Doc], bundle: Bundle) -> Iterator[Finding]:
    """Argo CD Applications and Flux HelmReleases carry copies of the values: they must match."""
    by_release = {}
    for rel in load_releases(bundle)[0]:
        doc = bundle.doc(f"{HELM}/{rel.get('values')}")
        if doc is not None:
            by_release[str(rel.get("name"))] = doc.data
    for doc in docs:
        if not isinstance(doc.data, dict):
            continue
        spec = doc.data.get("spec") if isinstance(doc.data.get("spec"), dict) else {}
        if doc.kind == "Application" and isinstance(spec.get("source"), dict):
            helm = spec["source"].get("helm")
            helm = helm if isinstance(helm, dict) else {}  # a damaged file: never crash on it
            at = ["spec", "source", "helm", "valuesObject"]
            name, values = helm.get("releaseName"), helm.get("valuesObject")
        elif doc.kind == "HelmRelease":
            name, values, at = spec.get("releaseName") or doc.name, spec.get("values"), ["spec", "values"]
        else:
            continue
        if isinstance(name, str) and name in by_release and values is not None and values != by_release[name]:
            yield error(doc.path, doc.line_of(at), f"{doc.label}: values differ from {HELM}/{name}.values.yaml "
                                                   "(Pulumi and GitOps would install different settings)")


def check_kustomizations(bundle: Bundle) -> Iterator[Finding]:
    for path in bundle.files:
        if not path.endswith("kustomization.yaml"):
            continue
        doc = bundle.doc(path)
        if doc is None or not isinstance(doc.data, dict):
            continue
        base = posixpath.dirname(path)
        for i, res in enumerate(as_list(doc.data.get("resources"))):
            if not isinstance(res, str) or "://" in res or res.startswith(("github.com/", "git@")):
                continue
            target = posixpath.normpath(posixpath.join(base, res))
            if not (bundle.has(target) or bundle.has(f"{target}/kustomization.yaml")):
                yield error(path, doc.line_of(["resources", i]), f"resource {res} does not exist in the bundle")
