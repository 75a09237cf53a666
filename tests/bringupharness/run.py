"""Drive the bundle's own bring-up (bringup/up.sh, bringup/apply.py) against bare hosts of hosts.py."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

import yaml

from tests.slurmharness import nhc as nhc_standin
from tests.slurmharness.net import free_port_block
from tests.slurmharness.overlay import bringup_overlay

from .hosts import Hosts

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def plan(fleet: Path, out: Path, slurm_version: str, pool_nodes: int | None = None) -> Path:
    """orchgen plan of `fleet` with options.slurm_version (and the pool's size) set for the suite."""
    data = yaml.safe_load(fleet.read_text())
    data["options"]["slurm_version"] = slurm_version
    if pool_nodes:
        pool = data["fleet"]["pools"][0]
        pool["nodes"] = pool_nodes
        pool["hostnames"] = f"gpu[01-{pool_nodes:02d}]"
        data["fleet"]["fabric"]["leaves"][0]["nodes"] = f"gpu[01-{pool_nodes:02d}]"
    src = out.with_suffix(".yaml")
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([str(VENV_BIN / "orchgen"), "plan", str(src), "-o", str(out)], check=True, capture_output=True)
    return out


def standin_nhc_tree(slurm: Path, dest: Path) -> Path:
    """Without ORCHGEN_NHC_SOURCE (CI reaches no GitHub, and no registry packages NHC): a tree laid out
    as NHC 1.4.3's source, whose `nhc` is the loopback harness's NHC stand-in (tests/slurmharness/nhc.py:
    the shipped nhc.conf's check_cmd_output lines per node, draining as NHC does) with the hosts' own
    paths (/etc/slurm, /var/log/nhc.log). The playbook installs it exactly as it installs NHC."""
    if dest.exists():
        shutil.rmtree(dest)
    gen = dest / "gen" / "etc"
    gen.mkdir(parents=True)
    if (slurm / "nhc.conf").exists():
        shutil.copy(slurm / "nhc.conf", gen / "nhc.conf")
    work = "/ORCHGEN-WORK"
    written = nhc_standin.write_standin(gen, work, _slurm_nodes(slurm))
    script = (gen.parent / "nhc" / nhc_standin.STANDIN).read_text() if written else "#!/bin/sh\nexit 0\n"
    script = (script.replace(f"{work}/etc/", "/etc/slurm/").replace(f"{work}/etc", "/etc/slurm")
              .replace(f"{work}/bin", "/usr/local/bin").replace(f"{work}/log/nhc.log", "/var/log/nhc.log"))
    shutil.rmtree(dest / "gen")
    (dest / "helpers").mkdir()
    (dest / "scripts").mkdir()
    (dest / "nhc").write_text(script)
    (dest / "nhc-genconf").write_text("#!/bin/sh\n# NHC stand-in (tests/bringupharness): nhc.conf comes from the bundle\n")
    (dest / "nhc-wrapper").write_text("#!/bin/sh\n# NHC stand-in (tests/bringupharness)\nexec /usr/sbin/nhc \"$@\"\n")
    for name in ("helpers/README", "scripts/README"):
        (dest / name).write_text("NHC stand-in of the orchgen test harness: its checks are in nhc itself\n")
    for name in ("nhc", "nhc-genconf", "nhc-wrapper"):
        (dest / name).chmod(0o755)
    return dest


def _slurm_nodes(slurm: Path) -> list[str]:
    from tests.slurmharness.hostlist import expand

    out: list[str] = []
    for line in (slurm / "slurm.conf").read_text().splitlines():
        if line.split("=", 1)[0].strip().lower() == "nodename":
            name = line.split()[0].split("=", 1)[1]
            if name.upper() != "DEFAULT":
                out += expand(name)
    return out


class Site:
    """One cluster's bundle copy with the harness overlay, its hosts and ports."""

    def __init__(self, hosts: Hosts, work: Path, legacy: bool) -> None:
        self.hosts = hosts
        self.work = work
        self.legacy = legacy
        base = free_port_block(40)
        self.node_port_base, self.ctld_port, self.dbd_port = base, base + 38, base + 39
        self.home = work / "home"  # the operator's home on the machine running Ansible (HOME of every run)
        self.home.mkdir(parents=True, exist_ok=True)
        # ssh's ControlPath is a Unix socket (at most 107 bytes): Ansible puts it under ~/.ansible/cp, and HOME
        # under pytest's per-worker temp folders is too deep for it ("too long for Unix domain socket"). A
        # short folder of its own, as a user's short HOME gives; the bundle is not changed.
        self.control_dir = tempfile.mkdtemp(prefix="orchgen-cp-", dir="/tmp")
        weakref.finalize(self, shutil.rmtree, self.control_dir, True)  # removed with the Site
        self.log = work / "bringup.log"

    def install(self, bundle: Path) -> Path:
        """The bundle as the hosts get it: a copy with BRINGUP_CHANGES applied."""
        dest = self.work / "bundle"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(bundle, dest)
        return self.overlay(dest)

    def overlay(self, bundle: Path) -> Path:
        """BRINGUP_CHANGES applied to `bundle` in place (the operator's own bundle folder, re-planned there by
        `orchgen plan -o` as a user does, so that the files it keeps, a Pulumi stack's config, stay)."""
        nhc = os.environ.get("ORCHGEN_NHC_SOURCE")
        source = Path(nhc) if nhc else standin_nhc_tree(bundle / "slurm", self.work / "nhc-standin")
        bringup_overlay(bundle, legacy=self.legacy, node_port_base=self.node_port_base, ctld_port=self.ctld_port,
                        dbd_port=self.dbd_port, nhc_source=source)
        return bundle

    def env(self) -> dict[str, str]:
        """The environment of the operator's runs here (up.sh, apply.py, `pulumi up`): the test venv's tools
        (ansible-playbook) on PATH, HOME the operator's home in the work dir, Ansible's folders beside it."""
        env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1",
               "ANSIBLE_LOCAL_TEMP": str(self.work / "ansible-tmp"), "ANSIBLE_HOME": str(self.work / "ansible-home"),
               "HOME": str(self.home), "ANSIBLE_SSH_CONTROL_PATH_DIR": self.control_dir}
        env.pop("ORCHGEN_MUNGE_KEY_HEX", None)
        return env

    def _run(self, argv: list[str], what: str, timeout: float, env: dict[str, str] | None = None,
             cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        t = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env or self.env(), timeout=timeout, cwd=cwd,
                              input=stdin)
        with open(self.log, "a") as f:
            f.write(f"\n===== {what} ({time.monotonic() - t:.1f} s, exit {proc.returncode}): {' '.join(argv)}\n")
            f.write(proc.stdout + proc.stderr)
        return proc

    def up(self, bundle: Path, *extra: str, timeout: float = 900) -> subprocess.CompletedProcess:
        inv = self.hosts.inventory(self.work / "hosts.yaml")
        return self._run(["sh", str(bundle / "bringup/up.sh"), str(inv), *extra], "up.sh", timeout)

    def apply(self, bundle: Path, changes: Path, *extra: str, timeout: float = 900) -> subprocess.CompletedProcess:
        inv = self.hosts.inventory(self.work / "hosts.yaml")
        return self._run([sys.executable, str(bundle / "bringup/apply.py"), str(inv), "--changes", str(changes),
                          *extra], "apply.py", timeout)


def failure(proc: subprocess.CompletedProcess, tail: int = 3000) -> str:
    """What an assertion on a failed run shows: every failed task's block in full (the task's name and
    Ansible's `fatal:`/`failed:` answer, wherever in the run it came), then the run's tail and stderr. The
    tail alone can miss the first failure: a host that failed early drops out of the later plays."""
    out = proc.stdout
    blocks = []
    for m in re.finditer(r"^(?:fatal|failed): \[", out, re.M):
        start = out.rfind("\nTASK [", 0, m.start())
        end = out.find("\n\n", m.end())
        blocks.append(out[start + 1 if start >= 0 else m.start():end if end >= 0 else len(out)][:6000])
    return "\n...\n".join(["exit %d" % proc.returncode, *blocks, out[-tail:], proc.stderr[-2000:]])


def recap(output: str) -> dict[str, dict[str, int]]:
    """Ansible's PLAY RECAP: {host: {ok, changed, failed, ...}}."""
    out = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", output, re.M):
        out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out
