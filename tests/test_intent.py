"""Issue 36, intent you can see: a long-lived workload that looks interactive but is not marked so is
warned about, and `plan` prints per workload its plane, its pool and the rule that chose it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import run_cli

from .test_bad_input import BASE

REPO = Path(__file__).resolve().parent.parent
SERVICE = "  - {name: %s, long_lived_services: true, bare_metal: false, pool: h100, gpus: 8%s}\n"


def _plan(tmp_path: Path, text: str, *flags: str):
    path = tmp_path / "fleet.yaml"
    # the lab's 2-node Kubernetes plane beside Slurm, opted in to (issue 36: below 4 nodes it is refused)
    path.write_text(text + "options: {kubernetes_min_nodes: 1}\n")
    return path, run_cli(["plan", path, "-o", tmp_path / "out", "-q", *flags], capture_output=True, text=True)


@pytest.mark.parametrize("name, extra, said", [
    ("notebooks", "", "its name says 'notebooks'"),
    ("team-jupyterhub", "", "its name says 'jupyterhub'"),
    ("workbench", ", description: 'JupyterHub + per-user notebook pods'", "its description says 'JupyterHub'"),
])
def test_a_service_that_looks_interactive_is_warned_about(tmp_path, name, extra, said):
    path, proc = _plan(tmp_path, BASE.replace("nodes_per_leaf: 4", "nodes_per_leaf: 2") + SERVICE % (name, extra))
    assert proc.returncode == 0, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if "looks interactive" in line)
    line = len(BASE.splitlines()) + 1
    assert warning.startswith(f"orchgen: warning: {path}:{line}: workloads[1].interactive: {name} looks interactive "
                              f"({said})"), warning
    assert "set interactive: true" in warning


@pytest.mark.parametrize("name, extra", [("notebooks", ", interactive: false"), ("notebooks", ", interactive: true"),
                                         ("chat-api", ""), ("notebook-ranker", ", interactive: false")])
def test_no_warning_where_the_intent_is_said_or_nothing_looks_interactive(tmp_path, name, extra):
    proc = _plan(tmp_path, BASE.replace("nodes_per_leaf: 4", "nodes_per_leaf: 2") + SERVICE % (name, extra))[1]
    assert proc.returncode == 0, proc.stderr
    assert "looks interactive" not in proc.stderr


def test_plan_prints_each_workloads_plane_pool_and_rule(tmp_path):
    text = (BASE.replace("nodes_per_leaf: 4", "nodes_per_leaf: 2") + SERVICE % ("chat-api", "")
            + "  - {name: probe, plane: slurm, pool: h100}\n")
    _, proc = _plan(tmp_path, text)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("lab: slurm")
    rows = {m.group(1): m.groups()[1:] for line in lines
            if (m := re.fullmatch(r"  (\S+): +(\S+), pool (\S+), (.+)", line))}
    assert rows == {"train": ("slurm", "h100", "rule coupled-multinode-bare-metal"),
                    "chat-api": ("kubernetes", "h100", "rule kubernetes-default"),
                    "probe": ("slurm", "h100", "pinned (plane: slurm)")}, proc.stdout
    doc = json.loads(_plan(tmp_path, text, "--format", "json")[1].stdout)
    assert doc["workloads"] == [{"name": "train", "plane": "slurm", "pool": "h100",
                                 "rule": "rule coupled-multinode-bare-metal"},
                                {"name": "chat-api", "plane": "kubernetes", "pool": "h100", "rule": "rule kubernetes-default"},
                                {"name": "probe", "plane": "slurm", "pool": "h100", "rule": "pinned (plane: slurm)"}]


def test_a_description_is_input_for_people_only(tmp_path):
    """workloads[].description changes nothing in the bundle (it is read only for the warning above)."""
    base = BASE.replace("nodes_per_leaf: 4", "nodes_per_leaf: 2")
    described = base.replace("    pool: h100\n", "    pool: h100\n    description: nightly pretraining\n", 1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _plan(tmp_path / "a", base)[1].returncode == 0
    assert _plan(tmp_path / "b", described)[1].returncode == 0
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}  # noqa: E731
    assert files(tmp_path / "a/out") == files(tmp_path / "b/out")
