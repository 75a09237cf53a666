"""Helpers the test files share (one definition each): plans from an example, from Fleet data, or
from a workload.yaml written to a temporary directory, with options or a GitOps mode set on top.

Fixtures live in conftest.py; plain functions that tests import live here."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml


def _with_options(fleet, options: dict[str, Any]):
    if not options:
        return fleet
    return fleet.model_copy(update={"options": fleet.options.model_copy(update=options)})


def plan_of(source: Path | str | dict[str, Any], gitops: str | None = None, *, name: str = "fleet.yaml",
            **options: Any):
    """The Plan of a workload.yaml path (as `orchgen plan` loads it), or of Fleet data given as a dict
    (validated in memory, `name` standing for its file name). `options` are set on top of the file's
    `options:` (e.g. gang_scheduler="kai"); `gitops` replaces the plan's GitOps mode."""
    from generator import spec
    from generator.decide import make_plan
    from generator.spec.models import Fleet

    if isinstance(source, dict):
        plan = make_plan(_with_options(Fleet.model_validate(source), options), name)
    else:
        plan = make_plan(_with_options(spec.load(source), options), source)
    return dataclasses.replace(plan, gitops=gitops) if gitops else plan


def plan_of_file(tmp_path: Path, doc: dict[str, Any], name: str | None = "fleet.yaml"):
    """The Plan of `doc` written as tmp_path/<name> (None: <metadata.name>.yaml) and loaded from
    there, so that relative paths in it (fabric.from) resolve as a user's would."""
    path = tmp_path / (name or f"{doc['metadata']['name']}.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return plan_of(path)


def on_kubernetes(example: str, *workloads: str, tmp_path: Path | None = None, **options: Any):
    """examples/<example>.yaml with `workloads` pinned to Kubernetes (plane: kubernetes: the opt-in that keeps
    batch off Slurm on a bare-metal Slurm fleet, issue 36's rule slurm-site-batch, with its companion
    options.kubernetes_min_nodes: 1, the opt-in to a Kubernetes plane smaller than 4 nodes beside Slurm) and
    `options` set: its Plan, or with `tmp_path` the path of the file written there (for the CLI)."""
    from generator.decide import make_plan
    from generator.spec.models import Fleet

    doc = yaml.safe_load((Path(__file__).resolve().parent.parent / "examples" / f"{example}.yaml").read_text())
    for w in doc["workloads"]:
        if w["name"] in workloads:
            w["plane"] = "kubernetes"
    doc.setdefault("options", {}).setdefault("kubernetes_min_nodes", 1)
    doc["options"].update(options)
    if tmp_path is not None:
        path = tmp_path / f"{example}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path
    return make_plan(Fleet.model_validate(doc), f"{example}.yaml")


def orchgen_argv() -> list[str]:
    """How the tests run the real `orchgen` CLI: the installed product when scripts/test.sh built the wheel
    and installed it into a fresh venv (ORCHGEN_BIN, its console script: what `pip install orchgen` gives a
    user, with sys.path[0] its own bin/, so the source tree cannot shadow the package whatever the working
    directory); without it (a developer's quick run) the source tree's `python -m generator` (the console
    script's own entry point, so signals are trapped before the CLI is imported, as for users), which
    under ORCHGEN_STRICT=1 (CI) is a failure, since then the wheel's contents would go untested."""
    from tests._consumers import require

    installed = os.environ.get("ORCHGEN_BIN")
    if installed:
        require(Path(installed).is_file(), f"ORCHGEN_BIN={installed} does not exist (scripts/test.sh installs it)")
        return [installed]
    from tests._consumers import strict

    if strict():
        import pytest

        pytest.fail("ORCHGEN_BIN unset under ORCHGEN_STRICT=1: scripts/test.sh builds the wheel, installs it "
                    "into .venv-wheel and exports its orchgen; the tests run that, not the source tree",
                    pytrace=False)
    return [sys.executable, "-m", "generator"]  # entry.main, as the console script: signals trapped first


def outside_source() -> Path:
    """A working directory outside the source tree (where the installed `orchgen` runs by default)."""
    return Path(tempfile.gettempdir())


# The terminal width of a CLI run unless `extra` gives COLUMNS: wide, so that a test reads each finding,
# impact or report line whole, whatever the length of its temporary paths. Without a terminal orchgen fits
# its output to 80 columns (issue 39); tests/test_output_width.py and test_first_hour.py check the widths
# with COLUMNS of their own (80, none, 200, and on a pseudo-terminal).
TEST_COLUMNS = "1000"


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI run: this one, COLUMNS=TEST_COLUMNS, plus `extra`; when the installed product
    runs, without PYTHONPATH (one naming the source tree would shadow the package) and with the test tools on
    PATH."""
    env = {**os.environ, "COLUMNS": TEST_COLUMNS}
    if os.environ.get("ORCHGEN_BIN"):
        env.pop("PYTHONPATH", None)
        # the tools a user has on PATH (helm from scripts/install_helm.py, kubectl) sit next to the test
        # venv's Python; the installed orchgen looks on PATH and next to its own Python, which is another venv
        env["PATH"] = os.pathsep.join([env.get("PATH", ""), str(Path(sys.executable).parent)])
    return {**env, **(extra or {})}


def run_cli(args, *, cwd: Path | str | None = None, env: dict[str, str] | None = None,
            **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run of `orchgen ARGS` (orchgen_argv), from `cwd` or else outside the source tree."""
    return subprocess.run([*orchgen_argv(), *map(str, args)], cwd=cwd or outside_source(), env=cli_env(env),
                          **kwargs)
