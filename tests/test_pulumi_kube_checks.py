"""The Kubernetes Pulumi program (pulumi/__main__.py) under Pulumi's mocks: its last step is the
production gang check (checks/run.py --plane kubernetes, issue 26), a pulumi-command local.Command that
waits for every release and object, runs with the stack's `kubernetes:context`, and whose output is the
stack output `checks`. The check itself runs for real in tests/test_kube_checks_real.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._consumers import REPO, require
from tests.conftest import run_orchgen

try:
    from tests import pulumi_mocks
    from tests.test_pulumi_stack import CONTEXT, _mocks, check_run, crds  # noqa: F401
except ImportError as missing:  # pulumi not installed
    pulumi_mocks, MISSING = None, str(missing)

COMMAND = "command:local:Command"


@pytest.fixture(autouse=True)
def _pulumi_installed() -> None:
    require(pulumi_mocks, f"Pulumi SDK not importable: {MISSING if pulumi_mocks is None else ''}")


def test_the_gang_check_is_the_last_step(tmp_path: Path, crds) -> None:  # noqa: F811
    out = tmp_path / "bundle"
    run_orchgen("plan", REPO / "examples" / "baremetal-k8s-training.yaml", "-o", out, check=True)
    gang = json.loads((out / "checks" / "checks.json").read_text())["kubernetes"]["gang"]
    assert gang["pods"] == 2 and gang["scheduler"] == "kueue" and gang["objects"]
    run = pulumi_mocks.run_program(out / "pulumi" / "__main__.py", _mocks(crds), CONTEXT)
    check_run(out, run)  # everything else as before
    [check] = run.of_type(COMMAND)
    assert check.name == "checks" and run.resources[-1] is check
    assert check.inputs["create"] == f"python3 {out / 'checks' / 'run.py'} --plane kubernetes"
    assert check.inputs["environment"] == {"ORCHGEN_KUBE_CONTEXT": CONTEXT["kubernetes:context"]}
    # after every release and object the program declared
    installed = {r.urn for r in run.resources if r.typ.startswith("kubernetes:")}
    assert installed and installed <= set(check.dependencies), installed - set(check.dependencies)
    # a change to the check or what it expects re-runs it
    before = check.inputs["triggers"]
    (out / "checks" / "checks.json").write_text(json.dumps({"kubernetes": {"gang": {**gang, "pods": 3}}}))
    again = pulumi_mocks.run_program(out / "pulumi" / "__main__.py", _mocks(crds), CONTEXT)
    assert again.named(COMMAND, "checks").inputs["triggers"] != before


def test_a_bundle_without_checks_declares_none(tmp_path: Path, crds) -> None:  # noqa: F811
    out = tmp_path / "bundle"
    run_orchgen("plan", REPO / "examples" / "baremetal-k8s-training.yaml", "-o", out, check=True)
    for f in (out / "checks").iterdir():
        f.unlink()
    run = pulumi_mocks.run_program(out / "pulumi" / "__main__.py", _mocks(crds), CONTEXT)
    assert run.of_type(COMMAND) == []
