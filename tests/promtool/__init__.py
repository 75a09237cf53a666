"""Prometheus's promtool for the telemetry tests, built from Go modules by tests/promtool/build.sh (README.md
beside it): `binary()` is where build.sh puts it."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def version() -> str:
    """The github.com/prometheus/prometheus module version module/go.mod requires (v0.3NN.P: Prometheus v3.NN.P)."""
    for line in (HERE / "module" / "go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:2] == ["require", "github.com/prometheus/prometheus"]:
            return parts[2]
    raise RuntimeError("tests/promtool/module/go.mod requires no github.com/prometheus/prometheus")


def binary() -> Path:
    """Same key as build.sh: the version and a hash of module/go.mod, module/go.sum and build.sh."""
    files = [HERE / "module" / "go.mod", HERE / "module" / "go.sum", HERE / "build.sh"]
    key = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    base = os.environ.get("ORCHGEN_PROMTOOL_CACHE") or \
        str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orchgen" / "promtool")
    return Path(base) / f"{version()}-{key}" / "promtool"
