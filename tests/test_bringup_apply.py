"""bringup/apply.py, the bring-up's one entry point (up.sh runs it): each impact-table action maps to the
playbook's step (`orchgen_apply`), every change is logged with the action used, and `impossible` refuses
before anything runs. It runs on the Python standard library alone (`python3 -I -S`: no site-packages, so
no orchgen and no PyYAML), with the bundle's own copy of the impact table. tests/test_bringup_real.py runs
it on real clusters, reading what they run from the hosts."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._consumers import require
from tests.support import cli_env, orchgen_argv

DATA = Path(__file__).parent / "data" / "bringup"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("apply") / "out"
    subprocess.run([*orchgen_argv(), "plan", str(DATA / "fleet.yaml"), "-o", str(out)],
                   check=True, capture_output=True, timeout=120, env=cli_env())
    return out


# the Python standard library only: isolated (-I: no PYTHONPATH, no user site) and no site-packages (-S); Ansible
# installed apart (this venv's ansible-playbook on PATH), whose Python's PyYAML then reads vars.yaml for apply.py
STDLIB_ONLY = [sys.executable, "-I", "-S"]
ANSIBLE_APART = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def change(action: str, nodes=(), key="k") -> dict:
    return {"file": "slurm.conf", "key": key, "old": "a", "new": "b", "action": action, "nodes": list(nodes),
            "reason": f"why {action}", "cite": "slurm.conf(5)"}


def apply(bundle: Path, tmp_path: Path, changes: list[dict]) -> subprocess.CompletedProcess:
    path = tmp_path / "changes.json"
    path.write_text(json.dumps(changes))
    return subprocess.run([*STDLIB_ONLY, str(bundle / "bringup/apply.py"), "hosts.yaml", "--changes", str(path),
                           "--dry-run"], capture_output=True, text=True, timeout=60,
                          env=ANSIBLE_APART)


def orchgen_apply(out: str) -> dict:
    line = next(ln for ln in out.splitlines() if ln.startswith("apply: orchgen_apply="))
    return json.loads(line.split("=", 1)[1])


@pytest.mark.parametrize("action,expected", [
    ("none", {"drain": [], "reconfigure": False, "restart_slurmctld": False, "restart_slurmd": []}),
    ("sacctmgr", {"drain": [], "reconfigure": False, "restart_slurmctld": False, "restart_slurmd": []}),
    ("reconfigure", {"drain": [], "reconfigure": True, "restart_slurmctld": False, "restart_slurmd": []}),
    ("restart_slurmctld", {"drain": [], "reconfigure": False, "restart_slurmctld": True, "restart_slurmd": []}),
    # the table's actions include every lesser one (generator/impact/slurm.py): slurmctld restarts first
    ("restart_slurmd", {"drain": [], "reconfigure": False, "restart_slurmctld": True,
                        "restart_slurmd": ["gpu01", "gpu02"]}),
    ("drain_restart", {"drain": ["gpu01", "gpu02"], "reconfigure": False, "restart_slurmctld": True,
                       "restart_slurmd": ["gpu01", "gpu02"], "resume": ["gpu01", "gpu02"]}),
])
def test_each_action_maps_to_its_step(bundle, tmp_path, action, expected):
    out = apply(bundle, tmp_path, [change(action)])
    assert out.returncode == 0, out.stderr
    assert orchgen_apply(out.stdout) == {"resume": [], "stop_slurmd": [], **expected}
    assert f"apply: slurm.conf: k: 'a' -> 'b': {action} (why {action})" in out.stdout


def test_node_lists_are_kept(bundle, tmp_path):
    out = apply(bundle, tmp_path, [change("drain_restart", ["gpu02"]), change("reconfigure", key="x")])
    assert orchgen_apply(out.stdout) == {"drain": ["gpu02"], "reconfigure": True, "restart_slurmctld": True,
                                         "restart_slurmd": ["gpu02"], "resume": ["gpu02"], "stop_slurmd": []}
    assert "drain_restart on gpu02" in out.stdout


def test_a_removed_node_is_drained_and_not_resumed(bundle, tmp_path):
    """A node the re-plan removes (not in this bundle's slurm.conf) is drained while slurmctld still knows it,
    never resumed or restarted (it no longer exists for slurmctld); its slurmd is stopped (site.yml's play
    "Nodes the re-plan removed", on the hosts of `stop_slurmd`), and the log says so."""
    out = apply(bundle, tmp_path, [change("drain_restart", ["gpu07"])])
    assert out.returncode == 0, out.stderr
    assert orchgen_apply(out.stdout) == {"drain": ["gpu07"], "reconfigure": False, "restart_slurmctld": True,
                                         "restart_slurmd": [], "resume": [], "stop_slurmd": ["gpu07"]}
    assert "apply: gpu07: removed by the re-plan" in out.stdout


@pytest.mark.parametrize("part,expected", [
    # a per-host step of `pulumi up`: installs, drains, restarts; what needs every host's new files waits
    ("hosts", {"drain": ["gpu02", "gpu07"], "reconfigure": False, "restart_slurmctld": True,
               "restart_slurmd": ["gpu02"], "resume": [], "stop_slurmd": []}),
    # the last step, after every host's: the reconfigure (every slurmd reads its new files), the resumes, and the
    # removed node's slurmd stopped
    ("finish", {"drain": [], "reconfigure": True, "restart_slurmctld": False, "restart_slurmd": [],
                "resume": ["gpu02"], "stop_slurmd": ["gpu07"]}),
])
def test_a_decision_is_split_between_the_steps(bundle, tmp_path, part, expected):
    """ORCHGEN_APPLY_PLAN (the `impact` step's --dry-run) run by one step of the Pulumi program: the playbook gets
    that part of the decision (an `ansible-playbook` on PATH that prints its arguments stands in for Ansible)."""
    decided = apply(bundle, tmp_path, [change("drain_restart", ["gpu07"]), change("drain_restart", ["gpu02"]),
                                       change("reconfigure", key="x")]).stdout
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ansible-playbook").write_text("#!/bin/sh\nfor a; do printf '%s\\n' \"$a\"; done\n")
    (fake / "ansible-playbook").chmod(0o755)
    env = {**ANSIBLE_APART, "PATH": f"{fake}:{ANSIBLE_APART['PATH']}", "ORCHGEN_APPLY_PLAN": decided,
           "ORCHGEN_APPLY_PART": part}
    out = subprocess.run([*STDLIB_ONLY, str(bundle / "bringup/apply.py"), "hosts.yaml", "--limit", "ctl1"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    args = out.stdout.splitlines()
    assert json.loads(args[args.index("-e") + 1])["orchgen_apply"] == expected


def test_impossible_is_refused_before_anything_runs(bundle, tmp_path):
    out = apply(bundle, tmp_path, [change("reconfigure"), change("impossible", key="SlurmUser")])
    assert out.returncode == 2 and "apply: refused: slurm.conf: SlurmUser: why impossible" in out.stderr
    assert "orchgen_apply" not in out.stdout


def test_unknown_action_is_an_error(bundle, tmp_path):
    out = apply(bundle, tmp_path, [change("reboot")])
    assert out.returncode == 2 and "unknown action 'reboot'" in out.stderr and "Traceback" not in out.stderr


def resized(tmp_path: Path, release: str, old: int, new: int) -> subprocess.CompletedProcess:
    """`apply.py --old OLD --dry-run` (the standard library only) from the test fleet with `old` nodes to the same
    fleet with `new`, both planned by orchgen for Slurm `release`."""
    import yaml

    fleet = yaml.safe_load((DATA / "fleet.yaml").read_text())
    fleet.setdefault("options", {})["slurm_version"] = release
    bundles = {}
    for name, n in (("old", old), ("new", new)):
        pool = fleet["fleet"]["pools"][0]
        pool["nodes"], pool["hostnames"] = n, f"gpu[01-{n:02d}]"
        fleet["fleet"]["fabric"]["leaves"][0]["nodes"] = f"gpu[01-{n:02d}]"
        src = tmp_path / f"{name}.yaml"
        src.write_text(yaml.safe_dump(fleet, sort_keys=False))
        bundles[name] = tmp_path / name
        subprocess.run([*orchgen_argv(), "plan", str(src), "-o", str(bundles[name]), "-q"],
                       check=True, capture_output=True, timeout=120, env=cli_env())
    return subprocess.run([*STDLIB_ONLY, str(bundles["new"] / "bringup/apply.py"), "hosts.yaml", "--old",
                           str(bundles["old"]), "--dry-run"], capture_output=True, text=True, timeout=60,
                          env=ANSIBLE_APART)


@pytest.mark.parametrize("release,restart", [("22.05", True), ("24.11", False)])
def test_old_bundle_goes_through_the_impact_table(tmp_path, release, restart):
    """`--old OLD_BUNDLE`: the changes come from the bundle's copy of generator.impact.slurm (the one table),
    not a list. A node added needs slurmctld and every slurmd restarted before 24.11; from 24.11 a
    reconfigure adds it."""
    out = resized(tmp_path, release, 2, 3)
    assert out.returncode == 0, out.stderr
    got = orchgen_apply(out.stdout)
    assert got["restart_slurmctld"] is restart and got["drain"] == []
    assert got["restart_slurmd"] == (["gpu01", "gpu02", "gpu03"] if restart else [])
    assert got["reconfigure"] is True
    assert "NodeName" in out.stdout and "gpu03" in out.stdout


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_removing_a_node_drains_it_and_resumes_none(tmp_path, release):
    """The re-plan drops gpu03: the impact table drains it (its jobs end first); it is not resumed, and no slurmd
    restart names it (apply.py and the table from the bundle alone, the standard library only)."""
    out = resized(tmp_path, release, 3, 2)
    assert out.returncode == 0, out.stderr
    got = orchgen_apply(out.stdout)
    assert got["drain"] == ["gpu03"] and got["resume"] == [] and "gpu03" not in got["restart_slurmd"]
    assert got["restart_slurmctld"] is True
    assert "apply: gpu03: removed by the re-plan" in out.stdout


# --- issue 33: Slurm's compatibility window in the playbook itself; a re-plan with a role's first host down ---------
# Real ansible-playbook on this machine (`ansible_connection: local` hosts) and the real dpkg-query of stand-in Slurm
# packages that the real dpkg installed into a database of the test's own (DPKG_ADMINDIR, dpkg-query(1)): what a host
# running those releases answers, with no bring-up host and nothing installed on this machine.

def dpkg_db(top: Path, versions: dict[str, str]) -> dict[str, str]:
    """The environment of a dpkg database at `top` where these packages (name: version), stand-ins built by
    dpkg-deb, are installed by dpkg (--root, --force-not-root: no maintainer script, nothing outside `top`)."""
    for tool_name in ("dpkg", "dpkg-deb"):
        require(shutil.which(tool_name), f"{tool_name} not installed (a Debian machine's)")
    root = top / "root"
    admin = root / "var/lib/dpkg"
    for sub in ("info", "updates", "triggers"):
        (admin / sub).mkdir(parents=True)
    (admin / "status").touch()
    debs = []
    for name, version in versions.items():
        src = top / "src" / name
        (src / "DEBIAN").mkdir(parents=True)
        (src / "DEBIAN/control").write_text(f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
                                            "Maintainer: orchgen tests <tests@example.invalid>\n"
                                            "Description: stand-in for Slurm's package of this release\n")
        debs.append(top / f"{name}.deb")
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(src), str(debs[-1])],
                       check=True, capture_output=True)
    subprocess.run(["dpkg", f"--root={root}", "--force-not-root", "--force-script-chrootless", "-i", *map(str, debs)],
                   check=True, capture_output=True)
    return {**ANSIBLE_APART, "DPKG_ADMINDIR": str(admin)}


def local_hosts(tmp_path: Path, down: tuple[str, ...] = ()) -> Path:
    """The operator's inventory: every host of the test bundle on this machine (ansible_connection: local), but
    those `down`, whose address is a closed port on loopback (SSH: connection refused, Ansible: UNREACHABLE)."""
    hosts = {h: {"ansible_host": "127.0.0.1", "ansible_port": 1} if h in down else {"ansible_connection": "local"}
             for h in ("ctl1", "db1", "gpu01", "gpu02")}
    path = tmp_path / "hosts.yaml"
    path.write_text(json.dumps({"all": {"hosts": hosts}}))
    return path


def playbook(bundle: Path, hosts: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory.yaml", "-i",
                           str(hosts), "site.yml", *args], cwd=bundle / "bringup", capture_output=True, text=True,
                          timeout=120, env={**env, "ANSIBLE_CONFIG": str(bundle / "bringup/ansible.cfg")})


def test_a_plain_ansible_playbook_stops_outside_slurm_s_compatibility_window(bundle, tmp_path):
    """Issue 33: `ansible-playbook site.yml` run directly (not through apply.py, which refuses such a re-plan from
    the impact table) stops before anything changes on any host when a host's Slurm is one the plan's 24.11 cannot
    upgrade in place, with one line per host naming the installed release, the plan's, and the release to go
    through first (or that it is a downgrade), from the same table (vars.yaml's orchgen_slurm_upgrade_from and
    _refused, upgrade.yml's guard). ctl1's slurmctld 23.11, two majors behind 24.11 and within its window, passes
    the guard; db1's slurmdbd 25.05 (a downgrade) and gpu01's slurmd 22.05 (past the window) are refused. The whole
    playbook runs, in check mode: a guard placed after a change could change nothing here either."""
    v = yaml.safe_load((bundle / "bringup/vars.yaml").read_text())
    assert v["orchgen_slurm_release"] == "24.11" and v["orchgen_slurm_upgrade_from"] == ["23.02", "23.11", "24.05"]
    env = dpkg_db(tmp_path / "db", {"slurmctld": "23.11.4-1", "slurmdbd": "25.05.1-1", "slurmd": "22.05.8-1"})
    status = (Path(env["DPKG_ADMINDIR"]) / "status").read_bytes()
    # facts are not gathered (the guard reads none; the play's first task, before the OS check that reads them)
    out = playbook(bundle, local_hosts(tmp_path), {**env, "ANSIBLE_GATHERING": "explicit"}, "--check", "--limit",
                   "ctl1,db1,gpu01")
    said = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 2, said[-3000:]
    assert ("gpu01: slurmd 22.05.8-1 is installed (Slurm 22.05) and the plan targets Slurm 24.11: Slurm 24.11 upgrades "
            "in place from the 3 major releases before it (23.02, 23.11, 24.05), not from 22.05: upgrade to 23.11 "
            "first, then plan 24.11 (https://slurm.schedmd.com/upgrades.html).") in said, said[-3000:]
    assert ("db1: slurmdbd 25.05.1-1 is installed (Slurm 25.05) and the plan targets Slurm 24.11: a downgrade "
            "(25.05 -> 24.11) is not in place") in said, said[-3000:]
    assert "Nothing was changed" in said and "ctl1: slurmctld" not in said
    # the guard's own result per host: ctl1 passed it (within the window), db1 and gpu01 failed it
    guard = out.stdout.split("within Slurm's compatibility window for 24.11", 1)[1].split("PLAY RECAP", 1)[0]
    assert "ok: [ctl1]" in guard and "fatal: [db1]" in guard and "fatal: [gpu01]" in guard, guard
    # it is the last task that ran, on every host; none before it would have changed anything
    tasks = [line for line in out.stdout.splitlines() if line.startswith("TASK [")]
    assert "within Slurm's compatibility window" in tasks[-1], tasks
    assert not [t for t in tasks if "munge" in t or "packages" in t or "repository" in t or "files" in t], tasks
    recap = out.stdout.split("PLAY RECAP", 1)[1]
    assert all(f"{h} " in recap for h in ("ctl1", "db1", "gpu01")) and "changed=0" in recap, recap
    assert not [ln for ln in recap.splitlines() if "changed=" in ln and "changed=0" not in ln], recap
    assert (Path(env["DPKG_ADMINDIR"]) / "status").read_bytes() == status


def test_a_replan_with_each_role_s_first_host_down_reads_every_host_that_answers(bundle, tmp_path):
    """Issue 33: running.yml asks every host of every role. ctl1 and gpu01 (the first host of slurmctld and of slurmd)
    are down; db1 and gpu02 answer with the bundle's files (this bundle's slurm/, bound on /etc/slurm in a mount
    namespace of the test's own) and the Slurm they run: slurmdbd 25.05 on db1, slurmd 23.11 on gpu02. apply.py
    names the hosts that did not answer, reports the mixed releases, and decides from every host that answered:
    refused (slurmdbd 25.05 cannot go back to the plan's 24.11), not an upgrade from gpu02's 23.11, not a first
    bring-up, not a failure. slurm.conf is read from gpu02 (unchanged); accounts.sh, which only ctl1 installs, is
    left out of the decision rather than taken for a file the re-plan adds."""
    require(shutil.which("unshare") and os.geteuid() == 0, "unshare and root (a mount namespace) needed")
    env = dpkg_db(tmp_path / "db", {"slurmdbd": "25.05.1-1", "slurmd": "23.11.4-1"})
    etc = tmp_path / "etc-slurm"
    shutil.copytree(bundle / "slurm", etc)
    hosts = local_hosts(tmp_path, down=("ctl1", "gpu01"))
    script = (f"mount --bind {etc} /etc/slurm && exec {' '.join(STDLIB_ONLY)} {bundle / 'bringup/apply.py'} "
              f"{hosts} --dry-run")
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], capture_output=True,
                         text=True, timeout=120, env=env)
    said = " ".join(out.stdout.split())
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-2000:]
    for host in ("ctl1", "gpu01"):
        assert f"apply: {host} did not answer (" in said and "Connection refused" in said, said
    assert ("apply: the hosts run different Slurm releases or packagings: Slurm 23.11 (debian packages) on gpu02 "
            "(slurmd); Slurm 25.05 (debian packages) on db1 (slurmdbd) (the plan: Slurm 24.11 (debian packages))"
            ) in said, said
    assert ("apply: refused: (packages): slurm: a downgrade (25.05 -> 24.11) is not in place: slurmdbd and slurmctld "
            "converted their state to 25.05 (https://slurm.schedmd.com/upgrades.html)") in out.stderr, out.stderr
    # accounts.sh is the controller's alone: unknown while ctl1 is down, not taken for absent (no `sacctmgr` change)
    assert "apply: accounts.sh: not read (no host that installs it answered): left out of this decision" in said, said
    assert "apply: accounts.sh: (file added)" not in said and "apply: slurm.conf:" not in said, said
    assert "first bring-up" not in said and "Traceback" not in out.stderr


def test_a_silent_host_s_message_is_printed_as_one_printable_line(bundle):
    """What Ansible quotes of an unreachable host (ssh's and the host's own words) goes through the bundle's
    printable(): an escape sequence or a bell from the host cannot reach the operator's terminal raw."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import apply; "
            "print(repr(apply.printable('ssh: \\x1b[2Jbanner\\x07\\n\\tConnection refused ' + 'x' * 300, 60)))")
    out = subprocess.run([*STDLIB_ONLY, "-c", code, str(bundle / "bringup")], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == repr("ssh: ?[2Jbanner? Connection refused " + "x" * 24), out.stdout
