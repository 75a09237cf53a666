"""The wheel is the product a user installs (`pip install .`, `pip install orchgen`): it holds every package
of generator/ and every data file of templates/ and stacks/ (issue 33: a hand-written package list once left
generator.impact and generator.render.clusters out, so `plan --diff`, `validate --against` and multi-cluster
fleets died with ModuleNotFoundError in a normal install while every test passed from the source tree).

The end-to-end tests run the installed wheel itself (scripts/test.sh: ORCHGEN_BIN, tests/support.py
orchgen_argv); this file holds the wheel's contents to the source tree.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests._consumers import require

REPO = Path(__file__).resolve().parent.parent
# the source folders that ship inside the package under another name (pyproject.toml's package-dir)
MAPPED = {"templates": "generator/templates", "stacks": "generator/stacks"}


def _source_files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> set[str]:
    """The file names in a wheel built from this tree (as `pip install .` builds it: in an isolated build environment with
    pyproject.toml's build requirements from PyPI or pip's cache)."""
    require(shutil.which("pip") or (Path(sys.executable).parent / "pip").exists(), "pip not installed")
    out = tmp_path_factory.mktemp("wheel")
    src = out / "src"  # a copy, so the build's build/ and *.egg-info stay out of the tree
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv*", ".git", "__pycache__", "build", "*.egg-info",
                                                             ".pytest_cache", ".hypothesis", "out"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(out / "dist"), str(src)], check=True, capture_output=True, text=True)
    (built,) = (out / "dist").glob("orchgen-*.whl")
    with zipfile.ZipFile(built) as z:
        return set(z.namelist())


def test_every_package_of_generator_ships(wheel):
    packages = sorted(str(p.parent.relative_to(REPO)) for p in (REPO / "generator").rglob("__init__.py")
                      if "__pycache__" not in p.parts)
    assert "generator/impact" in packages and "generator/render/clusters" in packages  # the two once left out
    missing = [p for p in packages if f"{p}/__init__.py" not in wheel]
    assert not missing, f"packages not in the wheel: {missing}"
    # and every module of them
    modules = sorted(str(p.relative_to(REPO)) for p in (REPO / "generator").rglob("*.py") if "__pycache__" not in p.parts)
    assert not [m for m in modules if m not in wheel], [m for m in modules if m not in wheel]


@pytest.mark.parametrize("folder", sorted(MAPPED))
def test_every_template_and_stack_file_ships(wheel, folder):
    files = _source_files(REPO / folder)
    assert files, folder
    missing = sorted(f for f in files if f"{MAPPED[folder]}/{f}" not in wheel)
    assert not missing, f"{folder}/ files not in the wheel as {MAPPED[folder]}/: {missing}"


def test_the_tests_run_the_installed_wheel_not_the_source_tree():
    """Under scripts/test.sh, ORCHGEN_BIN is the wheel's console script in its own venv, and that venv's
    Python imports generator from its site-packages, never from this tree."""
    installed = os.environ.get("ORCHGEN_BIN")
    require(installed, "ORCHGEN_BIN unset: scripts/test.sh builds and installs the wheel")
    python = Path(installed).parent / "python"
    where = subprocess.run([str(python), "-c", "import generator.impact, generator.render.clusters, generator; "
                            "print(generator.__file__)"], capture_output=True, text=True, check=True,
                           cwd="/").stdout.strip()
    assert "site-packages" in where and not Path(where).is_relative_to(REPO / "generator"), where
