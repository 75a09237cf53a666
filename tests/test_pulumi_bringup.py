"""The bundle's Slurm bring-up Pulumi program (bringup/pulumi/__main__.py, from stacks/slurm_bringup.py) under
Pulumi's mocks: it declares the bring-up for exactly the plan's Slurm hosts, in dependency order (database
before slurmdbd, slurmdbd before the controller, the controller before the nodes, the checks last), with the
munge key and the SSH key as secrets, and refuses a host it has no address for."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests._consumers import require
from tests.support import cli_env, orchgen_argv

DATA = Path(__file__).parent / "data" / "bringup"
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value on the wire
ADDRESSES = {"ctl1": "10.99.0.1", "db1": "10.99.0.2", "gpu01": "10.0.1.1", "gpu02": "10.0.1.2"}
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key-orchgen-test\n-----END OPENSSH PRIVATE KEY-----"

try:
    import pulumi_command  # noqa: F401
    import pulumi_random  # noqa: F401
    from tests import pulumi_mocks
except ImportError as e:  # pragma: no cover
    pulumi_mocks, MISSING = None, str(e)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    require(pulumi_mocks, "pulumi, pulumi-command or pulumi-random not importable (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("pulumi-bringup") / "out"
    subprocess.run([*orchgen_argv(), "plan", str(DATA / "fleet.yaml"), "-o", str(out)],
                   check=True, capture_output=True, timeout=120, env=cli_env())
    return out


def run(bundle: Path, addresses: dict[str, str], **extra: str):
    import pulumi

    mocks = pulumi_mocks.ValidatingMocks(lambda obj: [])
    config = {"orchgen:hosts": json.dumps(addresses), "orchgen:sshPrivateKey": KEY,
              **{f"orchgen:{k}": v for k, v in extra.items()}}
    monitor_run = pulumi_mocks.run_program
    pulumi.runtime.set_all_config(config, ["orchgen:sshPrivateKey"])
    return monitor_run(bundle / "bringup/pulumi/__main__.py", mocks, config, project="bringup-lab-slurm")


def is_secret(value) -> bool:
    return isinstance(value, dict) and SECRET_SIG in value


def test_declares_every_host_in_dependency_order(bundle):
    r = run(bundle, ADDRESSES)
    commands = {d.name: d for d in r.of_type("command:local:Command")}
    # the nodes in one step per leaf switch (issue 38: one `--limit` run per node does not scale): the fleet's two
    # nodes sit under leaf1
    assert sorted(commands) == ["checks", "database-db1", "impact", "slurmctld-ctl1", "slurmd-leaf1", "slurmdbd-db1"]
    urn = {name: d.urn for name, d in commands.items()}
    deps = {name: set(d.dependencies) for name, d in commands.items()}
    # the re-plan's actions are decided once, before any host changes, by up.sh --dry-run (apply.py)
    assert "--dry-run" in commands["impact"].inputs["create"] and not deps["impact"] & set(urn.values())
    assert all(urn["impact"] in deps[n] for n in commands if n != "impact")
    assert urn["database-db1"] in deps["slurmdbd-db1"]
    assert urn["slurmdbd-db1"] in deps["slurmctld-ctl1"]
    assert {urn["slurmctld-ctl1"]} <= deps["slurmd-leaf1"]
    assert {urn["slurmd-leaf1"], urn["slurmctld-ctl1"]} <= deps["checks"]
    assert "--limit db1" in commands["database-db1"].inputs["create"]
    assert """-e '{"orchgen_start_slurmdbd": false}'""" in commands["database-db1"].inputs["create"]  # a boolean
    assert """-e '{"orchgen_wait_idle": false}'""" in commands["slurmctld-ctl1"].inputs["create"]
    assert "--limit gpu01,gpu02 " in commands["slurmd-leaf1"].inputs["create"]
    assert "--limit" not in commands["checks"].inputs["create"]
    # the munge key: one RandomBytes, reaching the steps only through their secret environment
    (munge,) = r.of_type("random:index/randomBytes:RandomBytes")
    assert munge.inputs["length"] == 512
    for d in commands.values():
        assert is_secret(d.inputs["environment"]), f"{d.name}: environment (SSH key, munge key) is not secret"
        assert KEY not in json.dumps(d.inputs["create"])


def test_accounting_on_the_controller_is_one_step(tmp_path):
    """A controller that is the accounting host too gets one step (its database, slurmdbd and slurmctld in the
    playbook's own order): a database-only `--limit` run would play the controller's accounts.sh before slurmdbd
    started (the first real `pulumi up` failed so, issue 33)."""
    import yaml

    require(pulumi_mocks, "pulumi, pulumi-command or pulumi-random not importable (pip install -e '.[test]')")
    fleet = yaml.safe_load((DATA / "fleet.yaml").read_text())
    fleet["fleet"]["slurm"]["accounting"] = "ctl1"
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False))
    out = tmp_path / "out"
    subprocess.run([*orchgen_argv(), "plan", str(tmp_path / "fleet.yaml"), "-o", str(out)],
                   check=True, capture_output=True, timeout=120, env=cli_env())
    r = run(out, {k: v for k, v in ADDRESSES.items() if k != "db1"})
    commands = {d.name: d for d in r.of_type("command:local:Command")}
    assert sorted(commands) == ["checks", "impact", "slurmctld-ctl1", "slurmd-leaf1"]
    assert "orchgen_start_slurmdbd" not in commands["slurmctld-ctl1"].inputs["create"]
    assert commands["slurmctld-ctl1"].urn in set(commands["slurmd-leaf1"].dependencies)


def test_check_args_reach_the_checks_step_whole(bundle):
    """orchgen:checkArgs (up.sh's `-e orchgen_check_args=...`) reaches only the checks step, as one JSON extra var:
    Ansible's key=value form would split `--skip nccl` at the space. The script runs it as a shell would."""
    r = run(bundle, ADDRESSES, checkArgs="--skip nccl")
    commands = {d.name: d for d in r.of_type("command:local:Command")}
    assert "orchgen_check_args" not in commands["slurmd-leaf1"].inputs["create"]
    script = commands["checks"].inputs["create"]
    # the up.sh line, with `sh up.sh` replaced by printing its arguments one a line
    line = next(ln for ln in script.splitlines() if "up.sh" in ln).replace('sh "$ORCHGEN_BRINGUP/up.sh"', "printf '%s\\n'")
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-2:] == ["-e", '{"orchgen_check_args": "--skip nccl"}'], out


def test_no_secret_reaches_the_bundle(bundle):
    run(bundle, ADDRESSES)
    for path in bundle.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert b"not-a-real-key" not in text and b"10.99.0.1" not in text, path


def test_a_host_without_an_address_is_refused(bundle):
    with pytest.raises(Exception, match="no address for gpu02"):
        run(bundle, {k: v for k, v in ADDRESSES.items() if k != "gpu02"})


def test_a_host_the_plan_lacks_stays_in_the_inventory_said(bundle, capsys):
    """A host of orchgen:hosts that the plan does not have (a node the re-plan removed) is kept in the steps'
    inventory, where the playbook stops its slurmd when `impact` finds it removed; no step names it (`--limit`)."""
    r = run(bundle, {**ADDRESSES, "gpu09": "10.0.1.9"})
    commands = {d.name: d for d in r.of_type("command:local:Command")}
    env = commands["checks"].inputs["environment"]
    hosts = json.loads((env.get("value") if is_secret(env) else env)["ORCHGEN_HOSTS"])["all"]["hosts"]
    assert hosts["gpu09"] == {"ansible_host": "10.0.1.9"}
    assert not [n for n, d in commands.items() if "gpu09" in d.inputs["create"]]


def test_requirements_pin_the_installed_versions():
    from importlib import metadata

    pins = [line.split("==") for line in (Path(__file__).parents[1] / "stacks/bringup-requirements.txt").read_text()
            .splitlines() if "==" in line and not line.startswith("#")]
    assert {name for name, _ in pins} >= {"pulumi", "pulumi-command", "pulumi-random", "ansible-core"}
    for name, version in pins:
        assert metadata.version(name) == version, f"{name}: installed {metadata.version(name)}, pinned {version}"


def test_program_imports_no_orchgen():
    import ast

    tree = ast.parse((Path(__file__).parents[1] / "stacks/slurm_bringup.py").read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
        {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.split(".")[0] in ("generator", "orchgen", "tests") for m in mods), mods


def test_nodes_are_batched_per_leaf(tmp_path):
    """A bigger plane: one step per leaf switch with that leaf's nodes in one `--limit`; never a step per node."""
    import yaml

    require(pulumi_mocks, "pulumi, pulumi-command or pulumi-random not importable (pip install -e '.[test]')")
    fleet = yaml.safe_load((DATA / "fleet.yaml").read_text())
    pool = fleet["fleet"]["pools"][0]
    pool["nodes"], pool["hostnames"] = 6, "gpu[01-06]"
    fleet["fleet"]["fabric"]["leaves"] = [{"name": "leaf1", "nodes": "gpu[01-02]"},
                                          {"name": "leaf2", "nodes": "gpu[03-05]"}, {"name": "leaf3", "nodes": "gpu06"}]
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False))
    out = tmp_path / "out"
    plan = subprocess.run([*orchgen_argv(), "plan", str(tmp_path / "fleet.yaml"), "-o", str(out)],
                          capture_output=True, text=True, timeout=120, env=cli_env())
    assert plan.returncode == 0, plan.stderr
    addresses = {"ctl1": "10.0.0.1", "db1": "10.0.0.2", **{f"gpu0{i}": f"10.0.1.{i}" for i in range(1, 7)}}
    r = run(out, addresses)
    commands = {d.name: d for d in r.of_type("command:local:Command")}
    steps = {n: c.inputs["create"] for n, c in commands.items() if n.startswith("slurmd-")}
    assert sorted(steps) == ["slurmd-leaf1", "slurmd-leaf2", "slurmd-leaf3"] and "slurmdbd-db1" in commands
    assert "--limit gpu01,gpu02 " in steps["slurmd-leaf1"] and "--limit gpu03,gpu04,gpu05 " in steps["slurmd-leaf2"]
    assert "--limit gpu06 " in steps["slurmd-leaf3"]
