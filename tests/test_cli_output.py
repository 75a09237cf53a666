"""Issue 39, what the commands print: `--format text|json` spelt alike everywhere, validate's JSON
document, and simulate saying what its figures rest on."""
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


# --- simulate says what its figures rest on -----------------------------------------------------------------

def test_a_plane_of_services_only_shows_the_gpus_they_hold_and_says_so(tmp_path):
    """research-lab without its eval batch (pinned to Kubernetes): its Kubernetes plane runs only a long-lived
    service, so its replay has no span, which used to read as 0.0% utilization; it is the GPUs the service
    holds over the horizon, marked as such."""
    import yaml

    data = yaml.safe_load((REPO / "examples/research-lab.yaml").read_text())
    data["workloads"] = [w for w in data["workloads"] if w["name"] != "eval-batch"]
    src = tmp_path / "research-lab.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
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
    assert f"kubernetes: {kube['gpu_utilization']:.1%} (services)" in compare and "kubernetes: 0.0%" not in compare


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
