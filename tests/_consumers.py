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


def crd_paths() -> list[Path]:
    """Every CRD the bundle's custom resources are checked against: the pinned upstream ones,
    Gateway API's (../shared/charts/_extra-crds: HTTPRoute, which the site's Gateway controller
    installs), and tests/data/crds (a checked subset of a CRD the reference lacks, with its source noted)."""
    return [reference_dir(), charts_dir() / "_extra-crds" / "gateway-api", REPO / "tests" / "data" / "crds"]


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
