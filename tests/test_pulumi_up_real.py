"""The bundle's Slurm bring-up Pulumi program (bringup/pulumi/, from stacks/slurm_bringup.py) under the REAL Pulumi
toolchain, end to end, as the bundle README tells a user: `pulumi login` (a file backend here), `pulumi stack init`,
the config it documents, `pulumi up`; then a second `pulumi up --expect-no-changes`, a re-plan (a tenant added, planned
into the same bundle folder as a user does) applied by `pulumi up` with a job running, and `pulumi destroy`.

The toolchain is the one ../shared/pulumi-src/build.sh builds (scripts/test.sh builds it once into
~/.cache/orchgen/pulumi/<version>; ORCHGEN_PULUMI_BIN names another folder): the CLI v3.276.0, the Python language
host, pulumi-resource-command v1.2.1 and pulumi-resource-random v4.21.1. The Python SDK packages are the test venv's,
which are the bundle's own pins (bringup/pulumi/requirements.txt: pulumi 3.272.0, pulumi-command 1.2.1,
pulumi-random 4.21.4; tests/test_pulumi_bringup.py holds them equal). The providers reach the engine from PATH (the
README's "put the plugins on PATH"): the engine then uses them whatever the version the SDK asks for (random: the
SDK asks 4.21.4, the newest buildable here is 4.21.1, a patch release of the same schema), and never downloads one
(PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION). The bundle's pins stay what users install.

The hosts are the bring-up's bare Debian 12 hosts (tests/bringupharness), two of them, the smallest fleet with every
role: ctl1 (slurmctld, and slurmdbd with MariaDB) and gpu01 (slurmd, two GPUs). What the harness changes in the bundle
to run here is tests/slurmharness/overlay.py BRINGUP_CHANGES, applied in place to the operator's bundle folder (and
again after the re-plan), nothing else. The operator's known_hosts holds the hosts' keys (ssh-keyscan), as it would
after a first `ssh` to each (ANSIBLE_SSH_COMMON_ARGS names that file: ssh reads ~/.ssh of the password database's
home, not $HOME): Ansible checks host keys, and the program's inventory asks nothing else of SSH.

Checked on the hosts, not only in Pulumi's answers: slurmctld answers, the node is idle with its GRES, `srun` runs a
GPU job, slurmdbd holds the tenants' accounts, munged on both hosts runs with the stack's RandomBytes key (and the
key is nowhere in the bundle); the re-plan's account exists after `pulumi up` while the running job survived it;
`pulumi destroy` empties the stack and leaves the cluster running (the steps have no delete: Pulumi forgets them).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests._consumers import require
from tests.bringupharness.hosts import Hosts
from tests.bringupharness.run import Site
from tests.support import run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.chroot]

PULUMI_VERSION = "v3.276.0"  # ../shared/pulumi-src/build.sh's V; scripts/test.sh caches its build by it
PLUGINS = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-command",
           "pulumi-resource-random")
PASSPHRASE = "orchgen-test-passphrase"  # the stack's secrets provider (passphrase), only in this test's state
STACK = "pulumi-lab"  # the README's `pulumi stack init <plan name>`

FLEET = {
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": STACK},
    "fleet": {
        "bare_metal": True,
        "slurm": {"controllers": ["ctl1"], "accounting": "ctl1"},
        "fabric": {"kind": "infiniband", "leaves": [{"name": "leaf1", "nodes": "gpu01"}]},
        "pools": [{"name": "a100", "nodes": 1, "hostnames": "gpu01",
                   "cpu": {"sockets": 1, "cores_per_socket": 4, "threads_per_core": 1}, "memory_gib": 8,
                   "reserved": {"cores": 1, "memory_gib": 1}, "gpu": {"type": "a100", "count": 2}}],
    },
    "tenants": [{"name": "nlp", "share": 3, "users": ["alice"]}, {"name": "vision", "share": 1, "default": True}],
    "workloads": [{"name": "pretrain", "plane": "slurm", "nodes": 1, "tenant": "nlp", "pool": "a100", "max_time": "1-00:00:00"}],
    "options": {"slurm_version": "22.05"},  # the release Debian 12 packages
}


def pulumi_bin() -> Path:
    return Path(os.environ.get("ORCHGEN_PULUMI_BIN")
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orchgen" / "pulumi"
                / PULUMI_VERSION / "bin")


def _consumers() -> Path:
    require(os.geteuid() == 0, "needs root (debootstrap, overlay mounts, namespaces)")
    require(shutil.which("debootstrap"), "debootstrap not installed (scripts/test.sh installs it)")
    require(shutil.which("ssh") and shutil.which("ssh-keyscan"), "openssh-client not installed")
    require((Path(sys.executable).parent / "ansible-playbook").exists(), "ansible-core not installed (pip install -e '.[test]')")
    bin_dir = pulumi_bin()
    missing = [p for p in PLUGINS if not os.access(bin_dir / p, os.X_OK)]
    require(not missing, f"the Pulumi toolchain is not built ({', '.join(missing)} missing in {bin_dir}): "
                         "scripts/test.sh runs ../shared/pulumi-src/build.sh")
    return bin_dir


class Stack:
    """The operator's shell in bundle/bringup/pulumi: the real `pulumi` CLI with a file backend."""

    def __init__(self, site: Site, bundle: Path, bin_dir: Path, work: Path) -> None:
        self.site, self.dir = site, bundle / "bringup" / "pulumi"
        self.env = {**site.env(),
                    # the built CLI, language host and providers first; then the venv (an activated venv: python
                    # with the pinned SDK, ansible-playbook)
                    "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
                    "VIRTUAL_ENV": str(Path(sys.executable).parent.parent),
                    "PULUMI_HOME": str(work / "pulumi-home"), "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
                    "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}
        self.env.pop("PULUMI_ACCESS_TOKEN", None)
        self.env.pop("PULUMI_BACKEND_URL", None)

    def __call__(self, *args: str, stdin: str | None = None, timeout: float = 120,
                 check: bool = True) -> subprocess.CompletedProcess:
        argv = list(args)
        argv.insert(argv.index("--") if "--" in argv else len(argv), "--non-interactive")
        proc = self.site._run(["pulumi", *argv], f"pulumi {' '.join(args[:2])}", timeout, env=self.env, cwd=self.dir,
                              stdin=stdin)
        if check:
            assert proc.returncode == 0, f"pulumi {' '.join(args)}: exit {proc.returncode}\n" \
                                         f"{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
        return proc

    def state(self) -> dict:
        return json.loads(self("stack", "export", "--show-secrets").stdout)


def known_hosts(site: Site, hosts: Hosts) -> dict[str, str]:
    """The operator's known_hosts with every host's key, as after a first `ssh` to each; returns the environment
    that points Ansible's ssh at it (ssh reads ~/.ssh from the password database, not $HOME, and this machine's
    root is not the operator). Host keys are checked, as Ansible does by default."""
    ssh = site.home / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    scan = subprocess.run(["ssh-keyscan", "-T", "10", *(h.address for h in hosts.hosts.values())],
                          capture_output=True, text=True, timeout=60)
    assert scan.stdout.strip(), scan.stderr
    (ssh / "known_hosts").write_text(scan.stdout)
    return {"ANSIBLE_SSH_COMMON_ARGS": f"-o UserKnownHostsFile={ssh / 'known_hosts'}"}


def plan_into(fleet: dict, src: Path, bundle: Path) -> None:
    """`orchgen plan FLEET -o BUNDLE` with the installed product (tests/support.run_cli)."""
    src.write_text(yaml.safe_dump(fleet, sort_keys=False))
    r = run_cli(["plan", src, "-o", bundle], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def slurm_pid(hosts: Hosts, host: str, daemon: str) -> str:
    return hosts.ssh(host, f"cat /run/{daemon}.pid 2>/dev/null || pgrep -o -x {daemon}").stdout.strip()


def plain(value):
    """An output of `pulumi stack export --show-secrets`: a secret is {<sig>: ..., "plaintext": <JSON>}."""
    return json.loads(value["plaintext"]) if isinstance(value, dict) and "plaintext" in value else value


def resources(state: dict) -> dict[str, dict]:
    return {r["urn"].rsplit("::", 1)[1]: r for r in state["deployment"].get("resources") or []
            if r["type"] in ("command:local:Command", "random:index/randomBytes:RandomBytes")}


def test_pulumi_up_brings_up_then_converges_then_applies_a_replan_then_destroys(tmp_path: Path) -> None:
    bin_dir = _consumers()
    version = subprocess.run([str(bin_dir / "pulumi"), "version"], capture_output=True, text=True)
    assert version.stdout.strip() == PULUMI_VERSION, version
    # a range of loopback addresses of its own (test_bringup_real's Debian 12 hosts use 127.0.0.20 on)
    with Hosts("bookworm", tmp_path / "hosts", next_octet=40) as hosts:
        for name, gpus in [("ctl1", 0), ("gpu01", 2)]:
            hosts.boot(hosts.add(name, gpus=gpus))
        site = Site(hosts, tmp_path, legacy=True)
        bundle = tmp_path / "bundle"
        plan_into(FLEET, tmp_path / "fleet.yaml", bundle)
        site.overlay(bundle)
        stack = Stack(site, bundle, bin_dir, tmp_path)
        stack.env.update(known_hosts(site, hosts))
        try:
            _run(stack, hosts, site, bundle, tmp_path)
        finally:
            print(f"bring-up log (every pulumi and Ansible run): {site.log}")


def _run(stack: Stack, hosts: Hosts, site: Site, bundle: Path, tmp_path: Path) -> None:
    # the README's steps (bundle README "Bringing it up"; bringup/pulumi/__main__.py's docstring)
    reqs = dict(line.split("==") for line in (stack.dir / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    from importlib import metadata
    assert {n: metadata.version(n) for n in reqs} == reqs  # `pip install -r requirements.txt`: what this venv has
    (tmp_path / "state").mkdir()
    stack("login", f"file://{tmp_path / 'state'}")
    stack("stack", "init", STACK)  # the file backend's default secrets provider: the passphrase (env)
    for name, host in hosts.hosts.items():
        stack("config", "set", "--path", f"orchgen:hosts.{name}", host.address)
    stack("config", "set", "--secret", "orchgen:sshPrivateKey", stdin=hosts.key.read_text())
    # nccl-tests is not installed here (no CUDA): the README's skip (bundle README, "Bringing it up")
    stack("config", "set", "orchgen:checkArgs", "--", "--skip nccl")
    stack_file = stack.dir / f"Pulumi.{STACK}.yaml"
    config = yaml.safe_load(stack_file.read_text())
    assert "secure" in config["config"]["orchgen:sshPrivateKey"] and "PRIVATE KEY" not in stack_file.read_text()

    t = time.monotonic()
    first = stack("up", "--yes", timeout=1800)
    print(f"pulumi up from bare hosts: {time.monotonic() - t:.0f} s")
    state = stack.state()
    got = resources(state)
    # ctl1 is the accounting host too: one step runs its database, slurmdbd and slurmctld in the playbook's order
    # `impact` first: apply.py --dry-run, which found bare hosts (a first bring-up) and decided nothing
    assert sorted(got) == ["checks", "impact", "munge-key", "slurmctld-ctl1", "slurmd-leaf1"], sorted(got)
    assert re.search(r"\+ 6 created", first.stdout), first.stdout[-3000:]  # the five and the stack itself
    assert "a first bring-up" in plain(got["impact"]["outputs"]["stdout"])
    # the production checks ran as the last step and passed: their output is the stack output `checks`
    checks = json.loads(stack("stack", "output", "--json", "--show-secrets").stdout)["checks"]
    said = " ".join(checks.split())  # Ansible's YAML result format wraps long lines
    assert "/usr/sbin/nhc passed on 1 nodes" in said and "production checks failed" not in said, checks[-3000:]
    assert "skipped (--skip)" in said  # nccl, by orchgen:checkArgs
    # on the hosts: the cluster runs, with the stack's munge key on both hosts and nowhere in the bundle
    states = hosts.ssh("ctl1", "sinfo -h -N -o '%N %t %G'").stdout.split()
    assert states[:2] == ["gpu01", "idle"] and "gpu:" in states[2], states
    job = hosts.ssh("ctl1", "srun -N1 --gres=gpu:2 sh -c 'echo $(hostname) $CUDA_VISIBLE_DEVICES'").stdout.split()
    assert job == ["gpu01", "0,1"], job
    assoc = hosts.ssh("ctl1", "sacctmgr -n -P show assoc format=account,user,fairshare").stdout.split()
    assert {"nlp||3", "nlp|alice|1", "vision||1"} <= set(assoc), assoc
    key_hex = plain(got["munge-key"]["outputs"]["hex"])
    assert len(key_hex) == 1024, len(key_hex)
    for h in hosts.hosts:
        assert hosts.ssh(h, "cat /etc/munge/munge.key").stdout.strip() == key_hex, h
    cred = hosts.ssh("ctl1", "munge -n").stdout.strip()
    assert "STATUS:          Success" in hosts.ssh("gpu01", f"echo '{cred}' | unmunge").stdout
    assert not [p for p in bundle.rglob("*") if p.is_file() and key_hex[:64] in p.read_text(errors="replace")]

    # a second `pulumi up` changes nothing (and fails if it would)
    t = time.monotonic()
    stack("up", "--yes", "--expect-no-changes", timeout=600)
    print(f"pulumi up --expect-no-changes: {time.monotonic() - t:.0f} s")

    # a re-plan into the same folder (the operator's stack file stays), a job running through its `pulumi up`
    before = stack_file.read_bytes()
    fleet = json.loads(json.dumps(FLEET))
    fleet["tenants"].append({"name": "speech", "share": 2, "users": ["bob"]})
    # the impact of the re-plan, as orchgen says it (against the plan as orchgen wrote it, without the harness's
    # changes): accounts only (sacctmgr), no daemon restarts
    plan_into(FLEET, tmp_path / "fleet1.yaml", tmp_path / "as-planned")
    (tmp_path / "fleet2.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False))
    diff = run_cli(["plan", tmp_path / "fleet2.yaml", "-o", tmp_path / "as-planned", "--diff"], capture_output=True,
                   text=True, timeout=300)
    actions = re.findall(r"(?m)^  (\w+): ", diff.stdout.split("Other files:")[0])
    assert actions and set(actions) == {"sacctmgr"}, diff.stdout[:3000]
    plan_into(fleet, tmp_path / "fleet.yaml", bundle)
    assert stack_file.read_bytes() == before, "orchgen plan changed or dropped the operator's stack file"
    site.overlay(bundle)
    running = hosts.ssh("ctl1", "sbatch --parsable -N1 -w gpu01 -t 60 --wrap 'sleep 3000'").stdout.strip()
    for _ in range(100):
        if hosts.ssh("ctl1", f"squeue -h -j {running} -o %T").stdout.strip() == "RUNNING":
            break
        time.sleep(0.2)
    ctld = slurm_pid(hosts, "ctl1", "slurmctld")
    t = time.monotonic()
    replan = stack("up", "--yes", timeout=1800)
    print(f"pulumi up of the re-plan (tenant added): {time.monotonic() - t:.0f} s")
    assert "munge-key" not in re.findall(r"(?m)^\s+[+~-]+\s+\S+\s+(\S+)", replan.stdout), replan.stdout[-3000:]
    assoc = hosts.ssh("ctl1", "sacctmgr -n -P show assoc format=account,user,fairshare").stdout.split()
    assert {"speech||2", "speech|bob|1", "nlp||3"} <= set(assoc), assoc
    assert hosts.ssh("ctl1", f"squeue -h -j {running} -o %T").stdout.strip() == "RUNNING", \
        f"job {running} did not survive the re-plan's pulumi up"
    # an account change is sacctmgr's (the impact table's `sacctmgr`): slurmctld kept running, not restarted;
    # the decision every step applied is the one `impact` read off the hosts, the same as `plan --diff`'s
    decided = plain(resources(stack.state())["impact"]["outputs"]["stdout"])
    assert re.search(r"(?m)^apply: accounts\.sh: .*speech.*: sacctmgr", decided), decided[-2000:]
    assert '"restart_slurmctld": false' in decided and '"restart_slurmd": []' in decided, decided[-2000:]
    assert slurm_pid(hosts, "ctl1", "slurmctld") == ctld
    stack("up", "--yes", "--expect-no-changes", timeout=600)

    # `pulumi destroy`: the stack forgets the steps and the key; nothing on the hosts is stopped or removed
    t = time.monotonic()
    stack("destroy", "--yes", timeout=600)
    print(f"pulumi destroy: {time.monotonic() - t:.0f} s")
    assert resources(stack.state()) == {}
    assert hosts.ssh("ctl1", f"squeue -h -j {running} -o %T").stdout.strip() == "RUNNING"
    assert hosts.ssh("ctl1", "scontrol ping").stdout.count("UP") >= 1
