"""Where the real consumers and the upstream reference data are, and what to do when one is missing.

A test whose consumer (slurmctld, kubectl, pulumi, kubernetes-validate ...) or reference data is
missing skips with the reason. `.ci/run` sets ORCHGEN_STRICT=1, which turns every such skip into a
failure, so CI proves that every consumer really ran.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from generator.yamlio import resolve_numbers_as_go

REPO = Path(__file__).resolve().parent.parent


def strict() -> bool:
    return os.environ.get("ORCHGEN_STRICT") == "1"


def require(ok: object, reason: str) -> None:
    """Skip (or, under ORCHGEN_STRICT=1, fail) the calling test unless `ok` is truthy."""
    if ok:
        return
    if strict():
        pytest.fail(f"consumer missing under ORCHGEN_STRICT=1: {reason}", pytrace=False)
    pytest.skip(reason)


def charts_dir() -> Path:
    """The unpacked upstream charts (../shared/charts unless ORCHGEN_CHARTS says else)."""
    path = Path(os.environ.get("ORCHGEN_CHARTS", REPO.parent / "shared" / "charts"))
    require(path.is_dir(), f"charts not found at {path} (set ORCHGEN_CHARTS)")
    return path


def reference_dir() -> Path:
    """Upstream chart defaults and CRDs (../shared/reference unless ORCHGEN_REFERENCE says else)."""
    path = Path(os.environ.get("ORCHGEN_REFERENCE", REPO.parent / "shared" / "reference"))
    require(path.is_dir(), f"reference data not found at {path} (set ORCHGEN_REFERENCE)")
    return path


# Charts pinned past the reference data's CRDs: the reference folder holds one definition per kind
# (KAI's are still v0.13.0's), so the pinned release's CRDs are read from its chart in
# ../shared/charts/<chart>/<version>/crds until the reference moves with the product (issue 20).
PINNED_PAST_REFERENCE = ("kai-scheduler",)


def crd_paths() -> list[Path]:
    """Every CRD the bundle's custom resources are checked against: the pinned upstream ones,
    Gateway API's (../shared/charts/_extra-crds: HTTPRoute, which the site's Gateway controller
    installs), and tests/data/crds (a checked subset of a CRD the reference lacks, with its source noted)."""
    from generator.catalog import CATALOG

    ref = reference_dir()
    out = [p for p in sorted(ref.iterdir()) if p.is_dir() and p.name not in PINNED_PAST_REFERENCE
           and any("CustomResourceDefinition" in f.read_text(errors="replace") for f in p.rglob("*.yaml"))]
    for name in PINNED_PAST_REFERENCE:
        crds = charts_dir() / name / CATALOG[name].version / "crds"
        require(crds.is_dir(), f"{name} {CATALOG[name].version}'s CRDs not at {crds}")
        out.append(crds)
    return out + [charts_dir() / "_extra-crds" / "gateway-api", REPO / "tests" / "data" / "crds"]


def tool(name: str) -> str:
    """Path of an executable on PATH (or next to the running Python), or skip."""
    import sys

    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    require(found, f"{name} not installed")
    return found  # type: ignore[return-value]


def offline_kubeconfig(directory: Path) -> Path:
    """A kubeconfig whose API server is a closed port: real kubectl parses its arguments, then
    fails only on connecting (no API server can run here)."""
    import yaml

    config = directory / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "x"}}]}))
    return config


class HelmOutputLoader(yaml.SafeLoader):
    """YAML 1.1's `=` (the "value" type) read as the string it is in YAML 1.2, as the API server reads it:
    the Prometheus Operator's CRDs (kube-prometheus-stack) list `=` among the relabel actions. For reading
    `helm template --include-crds` output."""


HelmOutputLoader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_yaml_str)
# and a plain 1e5, 3e36 or 0o17 read as the number Go's YAML reads (generator.yamlio), where YAML 1.1 sees a string
resolve_numbers_as_go(HelmOutputLoader)

# libyaml's parser under the same constructors, where PyYAML was built with it (its wheels are): a chart
# such as kube-prometheus-stack renders megabytes, which the pure-Python scanner reads ten times slower
if getattr(yaml, "__with_libyaml__", False):
    class HelmOutputCLoader(yaml.CSafeLoader):
        """HelmOutputLoader on libyaml."""

    HelmOutputCLoader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_yaml_str)
    resolve_numbers_as_go(HelmOutputCLoader)
    _HELM_LOADER: type = HelmOutputCLoader
else:
    _HELM_LOADER = HelmOutputLoader


_SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_all(text: str) -> list:
    """yaml.safe_load_all on libyaml where PyYAML has it, for the harness's reading of bundles, charts' CRDs and
    cluster objects (megabytes per example; the pure-Python scanner cost a bundle's check about 10 s: CI time).
    The same safe constructors; the documents as a list, empty ones left out."""
    return [o for o in yaml.load_all(text, Loader=_SAFE_LOADER) if o]


def helm_objects(text: str) -> list:
    """`helm template` output as Helm installs it: `=` read as a string (HelmOutputLoader), and a
    `kind: List` (kube-prometheus-stack's additionalServiceMonitors) as its items, as Helm's resource
    builder flattens lists."""
    docs = [o for o in yaml.load_all(text, Loader=_HELM_LOADER) if o]
    return [i for o in docs for i in ((o.get("items") or []) if o.get("kind") == "List" else [o])]
