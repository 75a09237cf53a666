"""Shared fixtures: example paths and a runner for the real `orchgen` CLI."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def all_examples() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


@pytest.fixture
def example():
    def get(name: str) -> Path:
        path = EXAMPLES / f"{name}.yaml"
        assert path.is_file(), path
        return path

    return get


def run_orchgen(*args: str, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run the CLI as a user would (a subprocess), returning its exit code and output."""
    proc = subprocess.run([sys.executable, "-m", "generator.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"orchgen {' '.join(map(str, args))} exited {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def orchgen():
    return run_orchgen
