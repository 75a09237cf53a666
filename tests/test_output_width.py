"""Issue 39, output that fits: every command that prints results fits its lines to the terminal's width
(COLUMNS, else the terminal's, else 80: not a terminal, as in a log), long paths and URLs wrapped, and a
wider terminal gets longer lines. Run as a user runs them, stdout a pipe (tests/support run_cli)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO
from .support import cli_env, orchgen_argv, outside_source, run_cli

RESEARCH = REPO / "examples" / "research-lab.yaml"
SITE = REPO / "tests" / "data" / "sites" / "slac" / "slurm.conf"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A bundle of research-lab, a changed fleet to diff it against (16 more H100 nodes: a restart of every
    slurmd, long hostlists and man-page URLs in the impact), and a bundle validate finds an error in."""
    work = tmp_path_factory.mktemp("width")
    run_cli(["plan", RESEARCH, "-o", work / "out", "-q"], check=True, capture_output=True)
    changed = RESEARCH.read_text().replace("nodes: 64", "nodes: 80").replace("gpu-h100-[001-064]", "gpu-h100-[001-080]")
    assert changed != RESEARCH.read_text()
    (work / "bigger.yaml").write_text(changed)
    gres = work / "out" / "slurm" / "gres.conf"
    run_cli(["plan", RESEARCH, "-o", work / "bad", "-q"], check=True, capture_output=True)
    bad = work / "bad" / "slurm" / "gres.conf"
    bad.write_text(gres.read_text().replace("Type=h100", "Type=a100", 1))
    return work


def _commands(work: Path) -> dict[str, list]:
    return {
        "plan": ["plan", RESEARCH, "-o", work / "fresh", "--force"],
        "plan --check": ["plan", work / "bigger.yaml", "-o", work / "out", "--check"],
        "plan --diff": ["plan", work / "bigger.yaml", "-o", work / "out", "--diff"],
        "plan --diff (none)": ["plan", RESEARCH, "-o", work / "out", "--diff"],
        "import slurm": ["import", "slurm", SITE, "-o", work / "site.yaml", "--force"],
        "simulate": ["simulate", RESEARCH, "--hours", "4"],
        "simulate --compare": ["simulate", RESEARCH, "--hours", "4", "--compare"],
        "validate": ["validate", work / "bad", "--no-fetch"],
        "recommend": ["recommend", RESEARCH],
    }


def _stdout(args: list, env: dict[str, str]) -> list[str]:
    proc = subprocess.run([*orchgen_argv(), *map(str, args)], cwd=outside_source(), env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode in (0, 1), (args, proc.stderr)  # 1: --check, --diff and validate found differences
    lines = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout).splitlines()
    assert len(lines) >= 1 and any(line.strip() for line in lines), (args, proc.stdout)
    return lines


def test_every_command_fits_80_columns_when_not_a_terminal(work):
    """COLUMNS=80, stdout a pipe: no line over 80; without COLUMNS (a log) the same; with COLUMNS=200 (a wide
    terminal) the commands that wrapped at 80 print longer lines: the width is the terminal's, not a constant."""
    bare = {k: v for k, v in cli_env().items() if k not in ("COLUMNS", "LINES")}
    commands = _commands(work)
    for name, args in commands.items():
        long = [line for line in _stdout(args, {**bare, "COLUMNS": "80"}) if len(line) > 80]
        assert not long, (name, long[:3])
    for name in ("plan --diff", "validate"):
        assert max(len(line) for line in _stdout(commands[name], bare)) <= 80, name
    for name in ("plan --diff", "simulate --compare", "validate", "import slurm"):
        widest = max(len(line) for line in _stdout(commands[name], {**bare, "COLUMNS": "200"}))
        assert 80 < widest <= 200, (name, widest)


def test_a_diff_line_wider_than_the_terminal_is_continued_not_cut(work):
    """slurm.conf's NodeName line of the H100 pool (about 200 characters): at 80 columns its pieces carry the line's marker and ↪,
    and together they are the line; --format json keeps it whole."""
    env = {**cli_env(), "COLUMNS": "80"}
    lines = _stdout(_commands(work)["plan --diff"], env)
    added = [i for i, line in enumerate(lines[:-1]) if line.startswith("+NodeName=gpu-h100-[001-080] CPUs=")]
    assert added, lines[:40]
    i = added[0]
    whole = lines[i]
    while i + 1 < len(lines) and lines[i + 1].startswith("+↪"):
        i += 1
        whole += lines[i][2:]
    proc = run_cli(["plan", work / "bigger.yaml", "-o", work / "out", "--diff", "--format", "json"],
                   capture_output=True, text=True)
    assert f"\n{whole}\n" in "".join(f["diff"] or "" for f in json.loads(proc.stdout)["files"])
    assert len(whole) > 80 and i > added[0]


def test_the_width_helpers_follow_columns():
    """generator/terminal.py, the one place the width comes from: COLUMNS, else 80 off a terminal."""
    from generator import terminal

    saved = os.environ.pop("COLUMNS", None)
    try:
        if not os.isatty(1):
            assert terminal.width() == shutil.get_terminal_size((80, 24)).columns == 80
        os.environ["COLUMNS"] = "120"
        assert terminal.width() == 120
        line = "x " * 100
        assert max(len(piece) for piece in terminal.wrap(line, 4)) <= 120 and len(terminal.wrap(line, 4)) == 2
        assert terminal.wrap("a" * 300, 4, 80)[1].startswith("    ")
    finally:
        os.environ.pop("COLUMNS", None)
        if saved is not None:
            os.environ["COLUMNS"] = saved
