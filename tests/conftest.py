"""Shared fixtures: example paths, a runner for the real `orchgen` CLI, and one MariaDB per test
session for the Slurm clusters that run with accounting (slurm_db)."""
from __future__ import annotations

import shutil
import subprocess
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
    """Run the CLI as a user would (a subprocess: the installed `orchgen` of ORCHGEN_BIN when scripts/test.sh
    set it, from outside the source tree unless `cwd` says else), returning its exit code and output."""
    from tests.support import run_cli

    proc = run_cli(args, cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"orchgen {' '.join(map(str, args))} exited {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def orchgen():
    return run_orchgen


@pytest.fixture(scope="session")
def slurm_db(tmp_path_factory):
    """One private MariaDB for the session's accounting clusters: `SlurmCluster(conf, database=slurm_db)`.

    Each cluster still gets a database and a database user of its own on it; starting it once
    saves ~1 s per cluster. Skips (fails under ORCHGEN_STRICT=1) without root or MariaDB.
    """
    import os

    from tests._consumers import require
    from tests.slurmharness import mariadb

    require(os.geteuid() == 0, "a private MariaDB for slurmdbd runs as root here")
    problem = mariadb.installed()
    require(problem is None, f"{problem}; run: apt-get install -y --no-install-recommends mariadb-server")
    directory = tmp_path_factory.mktemp("mariadb")
    with mariadb.MariaDB(directory) as db:
        yield db
    shutil.rmtree(directory, ignore_errors=True)  # ~100 MB of datadir; pytest keeps its last 3 tmp trees
