"""Issue 39, what the commands print: `--format text|json` spelt alike everywhere, validate's JSON
document, output that fits the terminal, and simulate saying what its figures rest on."""
from __future__ import annotations

import json
import re

import pytest

from .conftest import REPO, run_orchgen
from .support import run_cli

GRES = "slurm/gres.conf"


def _bundle(tmp_path, example: str = "research-lab"):
    out = tmp_path / "out"
    run_orchgen("plan", REPO / f"examples/{example}.yaml", "-o", out, "-q", check=True)
    return out


def test_validate_format_json_is_one_document_matching_the_text(tmp_path):
    out = _bundle(tmp_path)
    gres = out / GRES
    gres.write_text(gres.read_text().replace("Type=h100", "Type=a100", 1))  # one error, as test_validate_cmd's
    text = run_orchgen("validate", out, "--no-fetch")
    proc = run_orchgen("validate", out, "--no-fetch", "--format", "json")
    assert proc.returncode == text.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    findings = doc["findings"]
    assert findings and all(set(f) == {"file", "line", "severity", "message"} for f in findings)
    as_text = [f"{f['file']}:{f['line']}: {'warning: ' if f['severity'] == 'warning' else ''}{f['message']}"
               for f in findings]
    lines = text.stdout.splitlines()
    assert as_text == [line for line in lines if re.match(r"\S+:\d+: ", line)], (as_text, lines)
    assert any(f["file"] == GRES and f["severity"] == "error" for f in findings)
    assert doc["summary"]["errors"] == sum(f["severity"] == "error" for f in findings) >= 1
    assert doc["summary"]["ok"] is False and doc["summary"]["text"] == lines[-1]
    assert doc["notices"] == [line.removeprefix("notice: ") for line in lines if line.startswith("notice: ")]


def test_validate_format_json_of_a_clean_bundle_exits_0(tmp_path):
    proc = run_orchgen("validate", _bundle(tmp_path, "dev-ci"), "--no-fetch", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["findings"] == [] and doc["summary"]["ok"] is True and doc["summary"]["errors"] == 0


@pytest.mark.parametrize("command", [["recommend", "examples/dev-ci.yaml"],
                                     ["simulate", "examples/dev-ci.yaml", "--hours", "1"]],
                         ids=["recommend", "simulate"])
def test_format_is_text_or_json_everywhere_and_table_still_means_text(command):
    args = [a if not a.startswith("examples/") else REPO / a for a in command]
    text = run_orchgen(*args, "--format", "text", check=True)
    old = run_orchgen(*args, "--format", "table", check=True)
    assert text.stdout == old.stdout and text.stdout.strip() and not text.stdout.lstrip().startswith("{")
    json.loads(run_orchgen(*args, "--format", "json", check=True).stdout)
    helptext = " ".join(run_orchgen(command[0], "--help", check=True).stdout.split())
    assert "[text|json]" in helptext and "`table`, the old name of text" in helptext


def test_every_results_command_takes_the_same_format_option():
    for command in (["plan"], ["recommend"], ["simulate"], ["validate"]):
        helptext = " ".join(run_orchgen(*command, "--help", check=True).stdout.split())
        assert "--format [text|json]" in helptext, (command, helptext)


# --- output that fits the terminal (80 columns when stdout is no terminal, as here) -------------------------

SITES = REPO / "tests" / "data" / "sites"


def _at_80(*args) -> str:
    proc = run_cli(args, env={"COLUMNS": "80"}, capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


def _too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > 80]


@pytest.mark.parametrize("example", ["research-lab", "superpod", "cloud-training", "eks-training", "dev-ci"])
def test_plan_and_recommend_fit_80_columns(tmp_path, example):
    out = tmp_path / "a-rather-long-folder-name-for-the-bundle" / "of-this-fleet" / "out"
    src = REPO / f"examples/{example}.yaml"
    for text in (_at_80("plan", src, "-o", out), _at_80("recommend", src)):
        assert text.strip() and not _too_wide(text), _too_wide(text)
    assert "next: read" in _at_80("plan", src, "-o", out)


def test_simulate_compare_fits_80_columns_and_says_what_it_left_out():
    text = _at_80("simulate", REPO / "examples/research-lab.yaml", "--compare", "--hours", "4")
    assert not _too_wide(text), _too_wide(text)
    assert "gang=volcano" in text and "…" not in text  # names fold, never cut
    assert "left out at 80 columns: idle GPU-h while waiting, preemptions (GPU-h lost)" in " ".join(text.split())
    wide = run_cli(["simulate", REPO / "examples/research-lab.yaml", "--compare", "--hours", "4"],
                   env={"COLUMNS": "160"}, capture_output=True, text=True).stdout
    assert "preemptions" in wide and "left out" not in wide


@pytest.mark.parametrize("site", ["acct-lab", "nvidia-dgx", "slac"])
def test_import_slurm_fits_80_columns(tmp_path, site):
    text = _at_80("import", "slurm", SITES / site / "slurm.conf", "-o", tmp_path / "w.yaml")
    assert "wrote" in text and not _too_wide(text), _too_wide(text)


def test_plan_diff_summary_fits_80_columns_and_the_hunks_stay_whole(tmp_path):
    out = tmp_path / "out"
    run_orchgen("plan", REPO / "examples/research-lab.yaml", "-o", out, "-q", check=True)
    text = _at_80("plan", REPO / "examples/superpod.yaml", "-o", out, "--diff")
    summary, _, hunks = text.partition(f"\n--- {out}/")
    assert hunks, text[:2000]
    assert "would change" in summary and not _too_wide(summary), _too_wide(summary)
    assert _too_wide(hunks)  # content: a long line of a file is shown whole, never folded


def test_terminal_width_follows_the_terminal():
    from generator.terminal import fold, middle

    assert middle("/a/very/long/path/to/the/bundle", 15) == "/a/very…/bundle"
    assert all(len(line) <= 30 for line in fold("see /a/" + "x" * 60 + "/file and more words here", 30, "  "))


def test_plan_uses_a_wide_terminal(tmp_path):
    """The width is the terminal's (COLUMNS here), not a fixed 100."""
    proc = run_cli(["plan", REPO / "examples/cloud-training.yaml", "-o", tmp_path / "out"], env={"COLUMNS": "160"},
                   capture_output=True, text=True)
    listing = [line for line in proc.stdout.splitlines() if re.match(r"  \S+/\s+\d+ files?: ", line)]
    assert listing and max(len(line) for line in listing) > 100 and max(map(len, proc.stdout.splitlines())) <= 160


# --- simulate says what its figures rest on -----------------------------------------------------------------

def test_a_plane_of_services_only_shows_the_gpus_they_hold_and_says_so():
    """research-lab's Kubernetes plane runs only a long-lived service: its replay has no span, which used to
    read as 0.0% utilization; it is the GPUs the service holds over the horizon, marked as such."""
    src = REPO / "examples/research-lab.yaml"
    doc = json.loads(run_orchgen("simulate", src, "--hours", "4", "--format", "json", check=True).stdout)
    kube = next(p for p in doc["planes"] if p["plane"] == "kubernetes")
    assert kube["utilization_of"] == "services" and kube["gpu_utilization"] > 0, kube
    slurm = next(p for p in doc["planes"] if p["plane"] == "slurm")
    assert "utilization_of" not in slurm and slurm["gpu_utilization"] > 0
    text = run_orchgen("simulate", src, "--hours", "4", check=True).stdout
    assert f"{kube['gpu_utilization']:.1%} (services)" in text and "0.0%" not in text
    assert "its GPU utilization is the GPUs its services hold" in " ".join(text.split())
    compare = run_cli(["simulate", src, "--hours", "4", "--compare"], env={"COLUMNS": "200"},
                      capture_output=True, text=True).stdout
    assert "kubernetes: 6.2% (services)" in compare and "kubernetes: 0.0%" not in compare


def test_simulate_says_when_the_demand_is_orchgens_default(tmp_path):
    import yaml

    src = REPO / "examples/research-lab.yaml"
    text = " ".join(run_orchgen("simulate", src, "--hours", "4", check=True).stdout.split())
    assert "demand: orchgen's default for pretrain-70b" in text and "workloads[].jobs_per_day and runtime" in text
    data = yaml.safe_load(src.read_text())
    for w in data["workloads"]:
        if not w.get("long_lived_services"):
            w.update(jobs_per_day=2, runtime="01:00:00")
    own = tmp_path / "demand.yaml"
    own.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_orchgen("simulate", own, "--hours", "4", check=True)
    assert "orchgen's default" not in proc.stdout
    doc = json.loads(run_orchgen("simulate", own, "--hours", "4", "--format", "json", check=True).stdout)
    assert doc["default_demand"] == []
    assert json.loads(run_orchgen("simulate", src, "--hours", "4", "--format", "json",
                                  check=True).stdout)["default_demand"][0] == "pretrain-70b"
