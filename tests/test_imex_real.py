"""IMEX on a GB200 NVL72 fleet's nodes (bringup/imex.yml, which site.yml imports before the nodes' play),
run by Ansible on bare Debian 12 hosts of the bring-up harness (tests/bringupharness: sshd on 127.0.0.N),
without the rest of the bring-up (no Slurm: IMEX does not need it).

NVIDIA's nvidia-imex-<branch> package is not in Debian (Ubuntu's multiverse and NVIDIA's CUDA repository have
it), and no GPU is here. So two nodes of one NVLink domain get a local apt repository holding a stand-in
package of that name (built below with dpkg-deb: /usr/bin/nvidia-imex, which daemonizes and is READY only when
its nodes_config.cfg lists this host's address, and nvidia-imex-ctl, whose `-q` answers only when
IMEX_CMD_ENABLED=1, as the IMEX guide's command service does; /etc/nvidia-imex/config.cfg a conffile with
the guide's keys). A node of another domain has no such repository: the play says NOT INSTALLED with the
steps. The GPUs are tests/fake_gpu.py's nvidia-smi (4 GB200 whose NVLink fabric registration completed).

Proven: the play finds the driver's branch, installs nvidia-imex-570 where apt has it, writes each node's
nodes_config.cfg with the addresses of its own NVLink domain only, sets config.cfg and starts the daemon;
the bundle's gpu-health.sh then passes with "IMEX READY" there and fails with "nvidia-imex-ctl not found"
on the node without it; a second run changes nothing.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import fake_gpu
from tests._consumers import require
from tests.bringupharness.hosts import Hosts
from tests.bringupharness.run import Site, failure, recap
from tests.support import run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.chroot]

FLEET = {
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "imex-lab"},
    "fleet": {"bare_metal": True, "slurm": {"controllers": ["ctl1"]},
              "fabric": {"kind": "infiniband", "nodes_per_leaf": 4},
              "pools": [{"name": "gb200", "nodes": 4, "gpu": {"type": "gb200", "count": 4, "sockets": [0, 0, 1, 1]},
                         "cpu": {"sockets": 2, "cores_per_socket": 4, "threads_per_core": 1}, "memory_gib": 8,
                         "nvlink_domain_nodes": 2}]},
    "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
    "options": {"slurm_version": "22.05"},
}

# The stand-in package's programs (see the module's docstring).
IMEX = r"""#!/bin/sh
# stand-in for NVIDIA's nvidia-imex (tests/test_imex_real.py): daemonizes; READY when its nodes file lists this host
cfg=/etc/nvidia-imex/config.cfg
[ "${1:-}" = -c ] && cfg=$2
val() { sed -n "s/^$1=//p" "$cfg" | tail -n 1; }
nodes=$(val IMEX_NODE_CONFIG_FILE)
me=$(awk -v h="$(hostname)" '$2 == h { print $1 }' /etc/hosts)
mkdir -p /run/nvidia-imex
if [ -n "$nodes" ] && grep -qx "$me" "$nodes"; then state=READY; else state=UNAVAILABLE; fi
echo "$state $(val IMEX_CMD_ENABLED)" > /run/nvidia-imex/state
( exec </dev/null >/dev/null 2>&1; while :; do sleep 3600; done ) &
exit 0
"""
IMEX_CTL = r"""#!/bin/sh
# stand-in for NVIDIA's nvidia-imex-ctl (tests/test_imex_real.py): -q asks the daemon's command service
running=
for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = nvidia-imex ] && running=1; done
[ -n "$running" ] || { echo "Failed to connect to IMEX command service"; exit 1; }
read -r state cmd < /run/nvidia-imex/state
[ "$cmd" = 1 ] || { echo "Failed to connect to IMEX command service"; exit 1; }
echo "$state"
"""
CONFIG = """# stand-in of the package's /etc/nvidia-imex/config.cfg (keys of the IMEX guide, "IMEX Service Config Options")
DAEMONIZE=1
SERVER_PORT=50000
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
IMEX_CMD_ENABLED=0
IMEX_CMD_PORT=50005
"""
PACKAGE = "nvidia-imex-570"


def _deb(work: Path) -> Path:
    root = work / "pkg"
    for rel, text, mode in [("usr/bin/nvidia-imex", IMEX, 0o755), ("usr/bin/nvidia-imex-ctl", IMEX_CTL, 0o755),
                            ("etc/nvidia-imex/config.cfg", CONFIG, 0o644)]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN/control").write_text(
        f"Package: {PACKAGE}\nVersion: 570.133.20-1\nArchitecture: all\nMaintainer: orchgen tests <t@example.invalid>\n"
        "Description: stand-in for NVIDIA's IMEX package (tests/test_imex_real.py)\n")
    (root / "DEBIAN/conffiles").write_text("/etc/nvidia-imex/config.cfg\n")
    deb = work / f"{PACKAGE}_570.133.20-1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


def _repo(host_root: Path, deb: Path) -> None:
    """A flat apt repository in the host (file:/srv/imex-repo), as a site's mirror of NVIDIA's would be."""
    repo = host_root / "srv/imex-repo"
    repo.mkdir(parents=True)
    shutil.copy(deb, repo / deb.name)
    data = deb.read_bytes()
    control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
    (repo / "Packages").write_text(control.rstrip("\n") + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                                   f"SHA256: {hashlib.sha256(data).hexdigest()}\n\n")
    (host_root / "etc/apt/sources.list.d/imex.list").write_text("deb [trusted=yes] file:/srv/imex-repo ./\n")


def _plan(work: Path) -> Path:
    src, out = work / "imex-lab.yaml", work / "imex-lab"
    src.write_text(yaml.safe_dump(FLEET, sort_keys=False))
    proc = run_cli(["plan", src, "-o", out], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def test_imex_installed_configured_per_domain_or_not_installed(tmp_path):
    require(os.geteuid() == 0, "needs root (debootstrap, overlay mounts, namespaces)")
    require(shutil.which("debootstrap"), "debootstrap not installed (scripts/test.sh installs it)")
    require(shutil.which("dpkg-deb"), "dpkg-deb not installed")
    bundle = _plan(tmp_path)
    imex = yaml.safe_load((bundle / "bringup/vars.yaml").read_text())["orchgen_imex"]
    domain = imex["node_domain"]["gb200-001"]
    assert imex["domains"][domain] == ["gb200-001", "gb200-002"], imex
    other = imex["node_domain"]["gb200-003"]
    assert other != domain and imex["domains"][other] == ["gb200-003", "gb200-004"], imex
    deb = _deb(tmp_path)
    smi = fake_gpu.nvidia_smi(count=4, name="NVIDIA GB200", fabric=fake_gpu.FABRIC)
    # addresses of their own (200+), apart from the bring-up tests' 127.0.0.20+ that may run at the same time
    with Hosts("bookworm", tmp_path / "hosts", next_octet=200) as hosts:
        for name in ("gb200-001", "gb200-002", "gb200-003"):
            host = hosts.add(name, gpus=4)
            hosts.boot(host)
            (host.root / "usr/bin/nvidia-smi").write_text(smi)
            if name != "gb200-003":
                _repo(host.root, deb)
            # Ansible's modules need python3 (site.yml's first play installs it; from the suite's apt cache)
            hosts.ssh(name, "apt-get update -qq -o Dir::Etc::sourcelist=/dev/null -o APT::Get::List-Cleanup=0 2>&1 | tail -n 3; "
                            "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 "
                            ">/dev/null", timeout=300)
        site = Site(hosts, tmp_path, legacy=True)
        copy = site.install(bundle)
        inv = hosts.inventory(tmp_path / "hosts.yaml")
        argv = [str(Path(os.sys.executable).parent / "ansible-playbook"), "-i", str(copy / "bringup/inventory.yaml"),
                "-i", str(inv), str(copy / "bringup/imex.yml"), "--limit", "gb200-001,gb200-002,gb200-003"]
        run = site._run(argv, "imex.yml", 600, cwd=copy / "bringup")
        assert run.returncode == 0, failure(run)
        a, b, c = (hosts.hosts[n].address for n in ("gb200-001", "gb200-002", "gb200-003"))

        for name in ("gb200-001", "gb200-002"):
            assert hosts.ssh(name, f"dpkg-query -W -f '${{Status}}' {PACKAGE}").stdout == "install ok installed"
            # its own NVLink domain only: gb200-003's address is not there
            assert hosts.ssh(name, "cat /etc/nvidia-imex/nodes_config.cfg").stdout == f"{a}\n{b}\n"
            cfg = hosts.ssh(name, "cat /etc/nvidia-imex/config.cfg").stdout.splitlines()
            assert {"IMEX_CMD_ENABLED=1", "IMEX_CMD_PORT=50005",
                    "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg"} <= set(cfg), cfg
            assert "IMEX_CMD_ENABLED=0" not in cfg
            assert hosts.ssh(name, "nvidia-imex-ctl -q").stdout.strip() == "READY"
        # the node without the package: NOT INSTALLED with the steps, nothing written
        said = " ".join(run.stdout.split())  # Ansible's YAML callback wraps long lines
        assert f"NOT INSTALLED: nvidia-imex on gb200-003 (NVLink domain {other}): {PACKAGE} is in none of its apt " \
               "sources" in said, run.stdout[-4000:]
        assert "apt-get update && apt-get install -y nvidia-imex-$(nvidia-smi --query-gpu=driver_version " \
               "--format=csv,noheader | head -n 1 | cut -d. -f1)" in said
        assert hosts.ssh("gb200-003", "test -e /etc/nvidia-imex", check=False).returncode != 0
        assert said.count("NOT INSTALLED: nvidia-imex on") == 1

        # the health check NHC runs on these nodes (nhc.conf: gpu-health.sh 4 gb200 imex)
        line = next(ln for ln in (bundle / "slurm/nhc.conf").read_text().splitlines() if "gpu-health.sh" in ln
                    and not ln.startswith("#"))
        assert line.endswith("/etc/slurm/gpu-health.sh 4 gb200 imex"), line
        script = (bundle / "slurm/gpu-health.sh").read_text()
        for name in ("gb200-001", "gb200-002", "gb200-003"):
            (hosts.hosts[name].root / "usr/local/bin/gpu-health.sh").write_text(script)
        ok = hosts.ssh("gb200-001", "sh /usr/local/bin/gpu-health.sh 4 gb200 imex")
        assert ok.stdout.startswith("ok: 4x gb200 GPUs: 4x NVIDIA GB200; NVLink fabric: cluster ") and \
            ok.stdout.rstrip().endswith("clique 32766, IMEX READY"), ok.stdout
        bad = hosts.ssh("gb200-003", "sh /usr/local/bin/gpu-health.sh 4 gb200 imex", check=False)
        assert bad.returncode == 1 and bad.stdout.strip() == (
            "FAIL: nvidia-imex-ctl not found: nvidia-imex is not installed (the bring-up says NOT INSTALLED with "
            "the steps)"), bad.stdout

        # idempotent: a second run changes nothing
        again = site._run(argv, "imex.yml again", 600, cwd=copy / "bringup")
        assert again.returncode == 0, failure(again)
        assert {h: r["changed"] for h, r in recap(again.stdout).items()} == \
            {"gb200-001": 0, "gb200-002": 0, "gb200-003": 0}, again.stdout[-3000:]
        # the daemon dies: the next run starts it again
        hosts.ssh("gb200-002", "kill $(cat /run/nvidia-imex.orchgen.pid)")
        assert hosts.ssh("gb200-002", "nvidia-imex-ctl -q", check=False).returncode != 0
        third = site._run(argv, "imex.yml after a stop", 600, cwd=copy / "bringup")
        assert third.returncode == 0, failure(third)
        assert recap(third.stdout)["gb200-002"]["changed"] > 0
        assert hosts.ssh("gb200-002", "nvidia-imex-ctl -q").stdout.strip() == "READY"
