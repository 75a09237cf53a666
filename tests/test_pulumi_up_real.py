"""The bundle's Slurm bring-up Pulumi program (bringup/pulumi/, from stacks/slurm_bringup.py) under the REAL Pulumi
toolchain, end to end, as a user does on Debian 13 (issue 33's proof: `init`, then `plan`, then the bring-up works
on Debian 13 with init's defaults): `orchgen init --os debian-13` (Slurm 24.11, the release Debian 13 packages),
`orchgen plan`, then the bundle README's steps: `pulumi login` (a file backend here), `pulumi stack init`, the
config it documents, `pulumi up` from bare hosts; a second `pulumi up --expect-no-changes`; then four re-plans,
planned into the same bundle folder as a user does and each applied by `pulumi up` with a job running; then
`pulumi destroy`. This is the suite's one Debian 13 bring-up (tests/test_bringup_real.py runs Debian 12 with up.sh).

The toolchain is the one ../shared/pulumi-src/build.sh builds (scripts/test.sh builds it once into
~/.cache/orchgen/pulumi/<version>; ORCHGEN_PULUMI_BIN names another folder): the CLI v3.276.0, the Python language
host, pulumi-resource-command v1.2.1 and pulumi-resource-random v4.21.1. The Python SDK packages are the test venv's,
which are the bundle's own pins (bringup/pulumi/requirements.txt: pulumi 3.272.0, pulumi-command 1.2.1,
pulumi-random 4.21.4; tests/test_pulumi_bringup.py holds them equal). The providers reach the engine from PATH (the
README's "put the plugins on PATH"): the engine then uses them whatever the version the SDK asks for (random: the
SDK asks 4.21.4, the newest buildable here is 4.21.1, a patch release of the same schema), and never downloads one
(PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION). The bundle's pins stay what users install.

The hosts are bare Debian 13 hosts (tests/bringupharness), the smallest fleet with every role, named as init names
them: ctl1 (slurmctld, and slurmdbd with MariaDB: init's default accounting host) and gpu-001, gpu-002 (slurmd, two
GPUs each); gpu-003 joins for the node added. What the harness changes in the bundle to run here is
tests/slurmharness/overlay.py BRINGUP_CHANGES, applied in place to the operator's bundle folder (and again after each
re-plan), nothing else. The operator's known_hosts holds the hosts' keys (ssh-keyscan), as it would after a first
`ssh` to each (ANSIBLE_SSH_COMMON_ARGS names that file: ssh reads ~/.ssh of the password database's home, not $HOME):
Ansible checks host keys, and the program's inventory asks nothing else of SSH.

Checked on the hosts, not only in Pulumi's answers: `sinfo -V` says 24.11 and MariaDB says 11.8; the production
checks pass; `srun -N2 --gres=gpu:2` runs on both nodes; slurmdbd holds the tenants' accounts; munged on every host
runs with the stack's RandomBytes key (and the key is nowhere in the bundle). Each re-plan (a tenant added with a
share and MaxTime changed, after munged was stopped by hand on one node, which that run repairs; a node added; that
node removed): the job survives it, slurmctld answers (its pid unchanged unless the impact class restarts it), the action
classes `impact` decided are those `orchgen plan --diff` printed, and the removed node is gone from sinfo, never
resumed, and its slurmd stopped by the run. `pulumi destroy` empties the stack and leaves the cluster running (the
steps have no delete: Pulumi forgets them).
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
from tests.bringupharness.hosts import SLURMD_RUNS, Hosts
from tests.bringupharness.run import Site
from tests.support import run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.chroot]

PULUMI_VERSION = "v3.276.0"  # ../shared/pulumi-src/build.sh's V; scripts/test.sh caches its build by it
PLUGINS = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-command",
           "pulumi-resource-random")
PASSPHRASE = "orchgen-test-passphrase"  # the stack's secrets provider (passphrase), only in this test's state
STACK = "pulumi-lab"  # the README's `pulumi stack init <plan name>`

# `orchgen init`'s answers for the test's hosts (the issue's proof: init, then plan, then the bring-up on Debian 13
# with init's defaults): the OS, the controller's name, two GPU nodes of two GPUs; the rest is init's own
INIT = ["init", "--name", STACK, "--os", "debian-13", "--slurm-controller", "ctl1", "--nodes", "2",
        "--gpu-type", "a100", "--gpus-per-node", "2", "--fabric", "infiniband", "--training-nodes", "2",
        "--no-service"]
ACTIONS = ("none", "sacctmgr", "reconfigure", "restart_slurmctld", "restart_slurmd", "drain_restart", "upgrade",
           "impossible")


def init_fleet(tmp_path: Path) -> dict:
    """The fleet `orchgen init` writes (the installed product), with only what these hosts force changed: the
    pool's sizes (a test host has the machine's few CPUs and little memory, and slurmd registers what it finds).
    Its names are init's (ctl1 by flag; gpu-001, gpu-002 init's default hostnames), accounting on the controller
    (init's default: MariaDB and slurmdbd on ctl1), and slurm_version init's pick for Debian 13."""
    out = tmp_path / "workload.yaml"
    r = run_cli([*INIT, "-o", out], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    fleet = yaml.safe_load(out.read_text())
    assert fleet["options"]["slurm_version"] == "24.11", fleet["options"]  # what Debian 13 packages
    assert fleet["fleet"]["slurm"] == {"controllers": ["ctl1"]} and "hostnames" not in fleet["fleet"]["pools"][0]
    pool = fleet["fleet"]["pools"][0]
    pool.update(cpu={"sockets": 1, "cores_per_socket": 4, "threads_per_core": 1}, memory_gib=8,
                reserved={"cores": 1, "memory_gib": 1})
    return fleet


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


def assoc(hosts: Hosts) -> set[str]:
    return set(hosts.ssh("ctl1", "sacctmgr -n -P show assoc format=account,user,fairshare").stdout.split())


def job_state(hosts: Hosts, job: str) -> str:
    return hosts.ssh("ctl1", f"squeue -h -j {job} -o %T", check=False).stdout.strip()


def decided_actions(decided: str) -> set[str]:
    """The action of each change `impact` (apply.py --dry-run) logged: `apply: FILE: KEY: OLD -> NEW: ACTION[ on
    NODES][ (REASON)]`."""
    out = set()
    for line in decided.splitlines():
        if line.startswith("apply: ") and " -> " in line:
            found = re.search(": (" + "|".join(ACTIONS) + r")(?= on | \(|$)", line.split(" -> ", 1)[1])
            assert found, line
            out.add(found.group(1))
    return out


def test_pulumi_up_on_debian13_from_init_then_converges_repairs_and_applies_replans(tmp_path: Path) -> None:
    bin_dir = _consumers()
    version = subprocess.run([str(bin_dir / "pulumi"), "version"], capture_output=True, text=True)
    assert version.stdout.strip() == PULUMI_VERSION, version
    fleet = init_fleet(tmp_path)
    # Debian 13 hosts (the suite's own range of loopback addresses, 127.0.0.60 on): init's names
    with Hosts("trixie", tmp_path / "hosts") as hosts:
        for name, gpus in [("ctl1", 0), ("gpu-001", 2), ("gpu-002", 2)]:
            hosts.boot(hosts.add(name, gpus=gpus))
        site = Site(hosts, tmp_path, legacy=False)
        bundle = tmp_path / "bundle"
        plan_into(fleet, tmp_path / "fleet.yaml", bundle)
        site.overlay(bundle)
        stack = Stack(site, bundle, bin_dir, tmp_path)
        stack.env.update(known_hosts(site, hosts))
        try:
            _run(stack, hosts, site, bundle, fleet, tmp_path)
        finally:
            print(f"bring-up log (every pulumi and Ansible run): {site.log}")


def _run(stack: Stack, hosts: Hosts, site: Site, bundle: Path, fleet: dict, tmp_path: Path) -> None:
    t0 = time.monotonic()
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
    print(f"pulumi up from bare Debian 13 hosts: {time.monotonic() - t:.0f} s")
    got = resources(stack.state())
    # ctl1 is the accounting host too (init's default): one step runs its database, slurmdbd and slurmctld in the
    # playbook's order; the nodes in one step for their leaf; `impact` first (bare hosts: a first bring-up)
    assert sorted(got) == ["checks", "impact", "munge-key", "slurmctld-ctl1", "slurmd-leaf001"], sorted(got)
    assert re.search(r"\+ 6 created", first.stdout), first.stdout[-3000:]  # the five and the stack itself
    assert "a first bring-up" in plain(got["impact"]["outputs"]["stdout"])
    # the production checks ran as the last step and passed: their output is the stack output `checks`
    checks = json.loads(stack("stack", "output", "--json", "--show-secrets").stdout)["checks"]
    said = " ".join(checks.split())  # Ansible's YAML result format wraps long lines
    assert "/usr/sbin/nhc passed on 2 nodes" in said and "production checks failed" not in said, checks[-3000:]
    assert "skipped (--skip)" in said  # nccl, by orchgen:checkArgs
    # on the hosts: Debian 13's Slurm and MariaDB, a 2-node GPU job, the tenants in slurmdbd
    assert re.fullmatch(r"slurm(-wlm)? 24\.11\.\d+", hosts.ssh("ctl1", "sinfo -V").stdout.strip())  # Debian's: slurm-wlm
    assert "11.8" in hosts.ssh("ctl1", "mariadb -N -e 'select @@version'").stdout
    job = hosts.ssh("ctl1", "srun -N2 --gres=gpu:2 sh -c 'echo $SLURM_JOB_ID $(hostname) $CUDA_VISIBLE_DEVICES'")
    rows = sorted(line.split() for line in job.stdout.splitlines())
    assert [r[1:] for r in rows] == [["gpu-001", "0,1"], ["gpu-002", "0,1"]] and rows[0][0] == rows[1][0], rows
    assert "research||1" in assoc(hosts), assoc(hosts)
    # one cluster munge key: the stack's RandomBytes on every host (the packages started munged with keys of their
    # own), a credential made on one host decodes on another, and the key is nowhere in the bundle
    key_hex = plain(got["munge-key"]["outputs"]["hex"])
    assert len(key_hex) == 1024, len(key_hex)
    for h in hosts.hosts:
        assert hosts.ssh(h, "cat /etc/munge/munge.key").stdout.strip() == key_hex, h
    cred = hosts.ssh("ctl1", "munge -n").stdout.strip()
    for h in ("gpu-001", "gpu-002"):
        assert "STATUS:          Success" in hosts.ssh(h, f"echo '{cred}' | unmunge").stdout, h
    assert not [p for p in bundle.rglob("*") if p.is_file() and key_hex[:64] in p.read_text(errors="replace")]

    # a second `pulumi up` changes nothing (and fails if it would)
    t = time.monotonic()
    stack("up", "--yes", "--expect-no-changes", timeout=600)
    print(f"pulumi up --expect-no-changes: {time.monotonic() - t:.0f} s")

    # Re-plans into the same folder (the operator's stack file stays), each applied by `pulumi up` with a job running
    # on gpu-001. The checks of each re-plan's last step: gres only (the first up ran them all)
    stack("config", "set", "orchgen:checkArgs", "--", "--only gres")
    running = hosts.ssh("ctl1", "sbatch --parsable -N1 -w gpu-001 -t 60 --wrap 'sleep 3000'").stdout.strip()
    for _ in range(100):
        if job_state(hosts, running) == "RUNNING":
            break
        time.sleep(0.2)
    assert job_state(hosts, running) == "RUNNING"
    as_planned = tmp_path / "as-planned"  # the plan as orchgen wrote it, without the harness's changes
    plan_into(fleet, tmp_path / "fleet.yaml", as_planned)

    def replan(name: str, new: dict) -> tuple[str, set[str], str]:
        """`orchgen plan --diff` against the previous plan (its action classes), then the re-plan into the bundle
        folder and `pulumi up`. Checked: the job still runs, slurmctld answers, and `impact` (read off the hosts,
        the decision every step applied) chose the action classes `plan --diff` printed. Returns the decision,
        its classes, and slurmctld's pid before."""
        src = tmp_path / f"{name}.yaml"
        src.write_text(yaml.safe_dump(new, sort_keys=False))
        diff = run_cli(["plan", src, "-o", as_planned, "--diff"], capture_output=True, text=True, timeout=300)
        classes = set(re.findall(r"(?m)^  (\w+): ", diff.stdout.split("Other files:")[0]))
        assert classes, diff.stdout[:3000]
        plan_into(new, src, as_planned)
        before = stack_file.read_bytes()  # the operator's config as set so far (gpu-003's address, say)
        plan_into(new, src, bundle)
        assert stack_file.read_bytes() == before, "orchgen plan changed or dropped the operator's stack file"
        site.overlay(bundle)
        ctld = slurm_pid(hosts, "ctl1", "slurmctld")
        t = time.monotonic()
        out = stack("up", "--yes", timeout=1800)
        decided = plain(resources(stack.state())["impact"]["outputs"]["stdout"])
        print(f"pulumi up of the re-plan ({name}): {time.monotonic() - t:.0f} s; `plan --diff`: {sorted(classes)}",
              *[ln for ln in decided.splitlines() if ln.startswith("apply: ")], sep="\n  ")
        assert "munge-key" not in re.findall(r"(?m)^\s+[+~-]+\s+\S+\s+(\S+)", out.stdout), out.stdout[-3000:]
        assert decided_actions(decided) == classes, (classes, decided[-3000:])
        assert job_state(hosts, running) == "RUNNING", f"job {running} did not survive the re-plan {name}"
        assert hosts.ssh("ctl1", "scontrol ping").stdout.count("UP") >= 1
        return decided, classes, ctld

    # 1. a tenant added, a share and a MaxTime changed, in one re-plan (CI's time: one `pulumi up` fewer), after munged
    # was stopped by hand on gpu-002 (killed: no init system here): the same `pulumi up` starts it again, with the
    # cluster key. Accounts are sacctmgr's; MaxTime is `scontrol reconfigure` (from 23.11 it starts new daemon
    # processes in place: slurmctld's pid changes, it never stops answering), run by the last step once every host
    # has the new slurm.conf; neither restarts slurmctld. (A share alone, sacctmgr and nothing else, is applied on each
    # release by test_replan_impact_real; test_bringup_real's Debian 12 `maxtime` pairs it with a MaxTime too.)
    hosts.ssh("gpu-002", "pid=$(cat /run/munge/munged.pid); kill $pid; for i in $(seq 50); do "
                         "kill -0 $pid 2>/dev/null || exit 0; sleep 0.1; done; exit 1")
    assert hosts.ssh("gpu-002", "munge -n", check=False).returncode != 0  # stopped indeed
    maxtime = json.loads(json.dumps(fleet))
    maxtime["tenants"][0]["share"] = 3
    maxtime["tenants"].append({"name": "speech", "share": 2, "users": ["bob"]})
    maxtime["workloads"][0]["max_time"] = "3-00:00:00"
    decided, classes, ctld = replan("accounts-and-maxtime", maxtime)
    assert classes == {"sacctmgr", "reconfigure"}, classes
    assert re.search(r"(?m)^apply: accounts\.sh: .*speech.*: sacctmgr", decided), decided[-2000:]
    assert re.search(r"(?mi)^apply: slurm\.conf: PartitionName=gpu maxtime: .*: reconfigure", decided), decided
    assert '"reconfigure": true' in decided and '"restart_slurmctld": false' in decided, decided[-2000:]
    assert {"speech||2", "speech|bob|1", "research||3"} <= assoc(hosts), assoc(hosts)
    assert "MaxTime=3-00:00:00" in hosts.ssh("ctl1", "scontrol show partition gpu").stdout
    cred = hosts.ssh("ctl1", "munge -n").stdout.strip()
    assert "STATUS:          Success" in hosts.ssh("gpu-002", f"echo '{cred}' | unmunge").stdout
    assert hosts.ssh("ctl1", "srun -N1 -w gpu-002 hostname").stdout.split() == ["gpu-002"]

    # 3. a node added (gpu-003, booted bare, its address in the stack's orchgen:hosts): on 24.11 the impact table
    # says reconfigure (slurm.conf(5) 24.11, NODE CONFIGURATION: "restarting or reconfiguring"); 22.05 would restart
    # slurmctld and every slurmd (test_bringup_real's Debian 12 test)
    hosts.boot(hosts.add("gpu-003", gpus=2))
    stack.env.update(known_hosts(site, hosts))
    stack("config", "set", "--path", "orchgen:hosts.gpu-003", hosts.hosts["gpu-003"].address)
    grown = json.loads(json.dumps(maxtime))
    grown["fleet"]["pools"][0]["nodes"] = 3
    decided, classes, ctld = replan("node", grown)
    assert re.search(r"(?m)^apply: slurm\.conf: NodeName: None -> 'gpu-003': reconfigure", decided), decided
    assert '"reconfigure": true' in decided and '"restart_slurmctld": false' in decided, decided[-2000:]
    assert classes - {"none"} == {"reconfigure"}, classes  # none: nhc.conf, read afresh by each check
    assert '"restart_slurmd": []' in decided, decided[-2000:]
    assert "slurmd-leaf002" in resources(stack.state())  # gpu-003's leaf (init's nodes_per_leaf: 2)
    states = hosts.ssh("ctl1", "sinfo -h -N -o '%N %t'").stdout.split("\n")
    assert "gpu-003 idle" in states, states
    assert sorted(hosts.ssh("ctl1", "srun -N2 -w gpu-002,gpu-003 --gres=gpu:2 hostname").stdout.split()) == \
        ["gpu-002", "gpu-003"]
    assert hosts.ssh("gpu-003", "cat /etc/munge/munge.key").stdout.strip() == key_hex

    # 4. the node removed again (still in orchgen:hosts for this run): drained while slurmctld still knows it,
    # slurmctld restarted without it, the other slurmds reconfigured, never resumed, and its slurmd stopped
    decided, classes, ctld = replan("unnode", maxtime)
    assert classes - {"none"} == {"drain_restart", "reconfigure"}, classes
    assert re.search(r"(?m)^apply: slurm\.conf: NodeName: 'gpu-003' -> None: drain_restart on gpu-003", decided)
    assert "apply: gpu-003: removed by the re-plan" in decided
    assert '"drain": ["gpu-003"]' in decided and '"resume": []' in decided, decided[-2000:]
    assert '"stop_slurmd": ["gpu-003"]' in decided, decided[-2000:]
    nodes = hosts.ssh("ctl1", "sinfo -h -N -o '%N %t'").stdout.split("\n")
    assert not [n for n in nodes if n.startswith("gpu-003")] and "gpu-002 idle" in nodes, nodes
    assert hosts.ssh("gpu-003", SLURMD_RUNS, check=False).returncode == 1, "gpu-003's slurmd still runs"
    assert hosts.ssh("ctl1", "srun -N1 -w gpu-002 --gres=gpu:2 hostname").stdout.split() == ["gpu-002"]

    # `pulumi destroy`: the stack forgets the steps and the key; nothing on the hosts is stopped or removed
    t = time.monotonic()
    stack("destroy", "--yes", timeout=600)
    print(f"pulumi destroy: {time.monotonic() - t:.0f} s")
    assert resources(stack.state()) == {}
    assert job_state(hosts, running) == "RUNNING"
    assert hosts.ssh("ctl1", "scontrol ping").stdout.count("UP") >= 1
    print(f"total: {time.monotonic() - t0:.0f} s")
