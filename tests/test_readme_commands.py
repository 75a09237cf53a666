"""The README's and docs/' commands run as written, as a new user runs them (issue 25): in a copy of this
working tree (a fresh clone's files: tracked and untracked-not-ignored, no .venv, no out/), the
README's first line (a fresh venv, `pip install .` as a user installs, the first plan), then every command
of the `bash` blocks of the README, then of each file of docs/ in DOCS order, in one shell. Only
`./scripts/test.sh` (this test suite itself) is left out.

Harness change: `validate` fetches the pinned charts, so ORCHGEN_CHART_MIRROR points it at
../shared/charts served on loopback (tests/test_validate_fetch.py's repository) and XDG_CACHE_HOME at
a temporary cache; nothing else differs from a user's shell.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from ._consumers import REPO
from .test_validate_fetch import chart_repo  # noqa: F401 (the fixture)

NOT_RUN = ("./scripts/test.sh",)  # the whole test suite: not a user's first hour, and this test is in it
# the docs by reader, in the order their commands run (after the README's, in the shell it leaves)
DOCS = ("workload-yaml.md", "workload-yaml-reference.md", "decision-and-simulate.md", "applying-and-replanning.md", "kubernetes-platform.md",
        "slurm-admins.md",
        "ci-and-untrusted-input.md", "developers.md")


def commands_of(path) -> list[str]:
    lines = []
    for block in re.findall(r"^```bash\n(.*?)^```", path.read_text(), re.S | re.M):
        for line in block.splitlines():
            if line.strip() and not line.lstrip().startswith("#") and not line.startswith(NOT_RUN):
                lines.append(line)
    return lines


def readme_commands() -> list[str]:
    return commands_of(REPO / "README.md") + [c for d in DOCS for c in commands_of(REPO / "docs" / d)]


def test_every_doc_is_linked_from_the_readme_and_run():
    """docs/ is the README's reading list: each file is linked from it and in DOCS (its commands run)."""
    readme = (REPO / "README.md").read_text()
    docs = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert docs == sorted(DOCS)
    for name in docs:
        assert f"](docs/{name})" in readme, name
        assert "](../README.md)" in (REPO / "docs" / name).read_text(), name


def test_the_readme_has_the_commands_a_new_user_needs():
    commands = readme_commands()
    assert commands[0].startswith("python3 -m venv .venv && .venv/bin/pip install")
    assert "source .venv/bin/activate" in commands
    first_bare = next(i for i, c in enumerate(commands) if c.startswith("orchgen "))
    assert commands.index("source .venv/bin/activate") < first_bare  # no bare orchgen before activation
    for verb in ("recommend", "plan", "validate", "schema", "init"):
        assert any(c.startswith(f"orchgen {verb} ") for c in commands), verb
    assert any("_ORCHGEN_COMPLETE=bash_source" in c for c in commands)


def test_pip_refuses_an_older_python_by_name(tmp_path):
    """`requires-python`: pip names Python, not a dependency, when the interpreter is too old."""
    proc = subprocess.run([sys.executable, "-m", "pip", "download", str(REPO), "--no-deps", "--python-version",
                           "3.9", "-d", str(tmp_path), "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "requires a different Python: 3.9.0 not in '>=3.11'" in proc.stderr, proc.stderr


def _copy_tree(dst):
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


@pytest.mark.slow
def test_readme_commands_run_as_written_in_a_fresh_clone(tmp_path, chart_repo):  # noqa: F811
    url, hits = chart_repo
    clone = tmp_path / "orchgen"
    clone.mkdir()
    _copy_tree(clone)
    script = "set -euo pipefail\n" + "\n".join(
        f"echo '+ {c.replace(chr(39), '')}'\n{c}" for c in readme_commands()) + "\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    pip_cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pip")
    env.update(ORCHGEN_CHART_MIRROR=url, XDG_CACHE_HOME=str(tmp_path / "cache"),
               PIP_CACHE_DIR=env.get("PIP_CACHE_DIR", pip_cache))  # pip's downloads stay cached
    proc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert (clone / "out/README.md").is_file() and (clone / "my-bundle/plan.json").is_file()
    assert "next: read out/README.md" in proc.stdout
    assert any(h.endswith(".tgz") for h in hits)  # validate fetched the pinned charts
