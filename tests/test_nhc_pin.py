"""Issue 39: the bring-up's NHC is pinned by content. bringup/fetch_nhc.sh fetches NHC 1.4.3 from
orchgen_nhc_url (ORCHGEN_NHC_URL for a mirror; file:// here, as a site's mirror may be) and installs
nothing unless each file the bring-up installs has tag 1.4.3's sha256 and helpers/ and scripts/ hold no
other file. Run with curl, tar and sha256sum for real, on archives laid out as GitHub serves the tag's.
Issue 35: NHC 1.4.3's own check_hw_ib runs the bundle's per-rail lines against a DGX H100's ports in sysfs, and its
check_cmd_output the GB200 check_gpus line against a tray off its NVLink fabric."""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from .conftest import REPO, run_orchgen

FILES = ("nhc", "nhc-genconf", "nhc-wrapper", "helpers/node-mark-offline", "helpers/node-mark-online",
         "scripts/common.nhc", "scripts/lbnl_nv.nhc")


@pytest.fixture(scope="module")
def fetch(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "out"
    run_orchgen("plan", REPO / "examples/research-lab.yaml", "-o", out, "-q", check=True)
    script = out / "bringup" / "fetch_nhc.sh"
    site = (out / "bringup" / "site.yml").read_text()
    assert "fetch_nhc.sh" in site and "ORCHGEN_NHC_URL" in site  # the playbook runs it, with the mirror variable
    return script


def _archive(tree: Path, dest: Path) -> str:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(tree, arcname="nhc-1.4.3")  # one top folder, as GitHub's tag archive
    return dest.as_uri()


def _run(script: Path, url: str, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(script), url, str(dest)], capture_output=True, text=True, timeout=60)


def _fake_tree(root: Path) -> Path:
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"#!/bin/sh\n# not NHC: {name}\n")
    return root


def test_a_tree_that_is_not_nhc_1_4_3_is_refused_and_nothing_is_installed(fetch, tmp_path):
    url = _archive(_fake_tree(tmp_path / "tree"), tmp_path / "mirror.tar.gz")
    dest = tmp_path / "cache" / "nhc"
    proc = _run(fetch, url, dest)
    assert proc.returncode == 1 and not dest.exists(), proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"NHC: {url} is not NHC 1.4.3"), proc.stderr
    assert "nhc: FAILED" in lines[0] and "ORCHGEN_NHC_URL" in lines[0]


def test_an_unreachable_mirror_is_one_line(fetch, tmp_path):
    url = (tmp_path / "missing.tar.gz").as_uri()
    proc = _run(fetch, url, tmp_path / "nhc")
    assert proc.returncode == 1 and not (tmp_path / "nhc").exists()
    assert proc.stderr.startswith(f"NHC: cannot fetch {url}: ") and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.skipif(not os.environ.get("ORCHGEN_NHC_SOURCE"),
                    reason="ORCHGEN_NHC_SOURCE (a checkout of github.com/mej/nhc at tag 1.4.3) not set")
def test_nhc_1_4_3_passes_and_one_extra_script_fails_it(fetch, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(os.environ["ORCHGEN_NHC_SOURCE"], tree, ignore=shutil.ignore_patterns(".git"))
    dest = tmp_path / "cache" / "nhc"
    proc = _run(fetch, _archive(tree, tmp_path / "good.tar.gz"), dest)
    assert proc.returncode == 0, proc.stderr
    assert (dest / "nhc").read_bytes() == (tree / "nhc").read_bytes() and (dest / "helpers/node-mark-offline").exists()
    (tree / "scripts" / "site.nhc").write_text("rm -rf /\n")
    proc = _run(fetch, _archive(tree, tmp_path / "extra.tar.gz"), tmp_path / "other")
    assert proc.returncode == 1 and "not in 1.4.3: scripts/site.nhc." in proc.stderr and not (tmp_path / "other").exists()


# ------------------------------------------------------------------ NHC 1.4.3's own check_hw_ib on the bundle's lines

# A DGX H100's twelve RDMA ports as the kernel lays them out in sysfs (Documentation/ABI/stable/sysfs-class-infiniband:
# ports/N/state "4: ACTIVE", phys_state "5: LinkUp", rate "400 Gb/sec (4X NDR)"; infiniband_mad/abi_version, which
# check_hw_ib reads to tell the user-space MAD driver is loaded), mounted over /sys/class in a mount namespace of its
# own. The eight compute rails and the four storage ports are the DGX H100/H200 User Guide's (platforms.py). NHC runs
# as node dgx001 of the bundle (HOSTNAME), without marking anything offline.
SYSFS = r"""set -e
mount -t tmpfs tmpfs /sys/class
mkdir -p /sys/class/infiniband_mad && echo 5 > /sys/class/infiniband_mad/abi_version
for d in $(seq 0 11); do
    p=/sys/class/infiniband/mlx5_$d/ports/1
    mkdir -p $p
    if [ "mlx5_$d" = "$DOWN" ]; then echo "1: DOWN" > $p/state; echo "3: Disabled" > $p/phys_state
    else echo "4: ACTIVE" > $p/state; echo "5: LinkUp" > $p/phys_state; fi
    if [ "mlx5_$d" = "$SLOW" ]; then echo "200 Gb/sec (2X NDR)" > $p/rate; else echo "400 Gb/sec (4X NDR)" > $p/rate; fi
done
cd /
exec bash "$NHC/nhc" -c "$CONF" -D "$NHC" -l - -t 20 HOSTNAME=dgx001 MARK_OFFLINE=0 RESULTFILE="$STATUS"
"""


@pytest.mark.skipif(not os.environ.get("ORCHGEN_NHC_SOURCE"),
                    reason="ORCHGEN_NHC_SOURCE (a checkout of github.com/mej/nhc at tag 1.4.3) not set")
def test_nhc_1_4_3_check_hw_ib_holds_every_compute_rail(tmp_path):
    """The nhc.conf of a `platform: dgx-h100` pool, run by NHC 1.4.3 itself on a DGX H100's ports in sysfs: every
    compute rail Active at 400 Gb/s passes; one rail down, or one at 200 Gb/s, fails naming that rail (the drain
    reason); a storage port down does not, and neither does a rail down under the old one-port `check_hw_ib`."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (a mount namespace for the sysfs tree)")
    fleet = tmp_path / "dgx.yaml"
    fleet.write_text(
        "apiVersion: orchgen/v1alpha1\nkind: Fleet\nmetadata: {name: dgx}\n"
        "fleet:\n  bare_metal: true\n  slurm: {controllers: [head01]}\n  fabric: {kind: infiniband, nodes_per_leaf: 2}\n"
        "  pools: [{name: dgx, nodes: 2, hostnames: 'dgx[001-002]', platform: dgx-h100}]\n"
        "workloads: [{name: train, nodes: 2, tightly_coupled: true}]\n")
    run_orchgen("plan", fleet, "-o", tmp_path / "out", "-q", check=True)
    lines = [ln for ln in (tmp_path / "out/slurm/nhc.conf").read_text().splitlines() if "check_hw_ib" in ln
             and not ln.startswith("#")]
    assert len(lines) == 8 and all(ln.startswith("{dgx[001-002]} || check_hw_ib 400 mlx5_") for ln in lines), lines
    conf, old = tmp_path / "nhc.conf", tmp_path / "old.conf"
    conf.write_text("\n".join(lines) + "\n")
    old.write_text("* || check_hw_ib\n")
    script = tmp_path / "sysfs.sh"
    script.write_text(SYSFS)

    def nhc(config: Path, **ports: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "NHC": os.environ["ORCHGEN_NHC_SOURCE"], "CONF": str(config),
               "STATUS": str(tmp_path / "status"), **ports}
        return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", str(script)], env=env,
                              capture_output=True, text=True, timeout=60)

    healthy = nhc(conf)
    assert healthy.returncode == 0 and healthy.stdout + healthy.stderr == "", healthy
    for ports, rail in (({"DOWN": "mlx5_3"}, "mlx5_3:1"), ({"SLOW": "mlx5_9"}, "mlx5_9:1")):
        sick = nhc(conf, **ports)
        assert sick.returncode == 1 and f"check_hw_ib:  No IB port {rail} is ACTIVE (LinkUp 400 Gb/sec)." \
            in sick.stdout + sick.stderr, (ports, sick)
    assert nhc(conf, DOWN="mlx5_1").returncode == 0  # a storage port: not a compute rail
    assert nhc(old, DOWN="mlx5_3").returncode == 0  # what the issue found: one port up of twelve passes


@pytest.mark.skipif(not os.environ.get("ORCHGEN_NHC_SOURCE"),
                    reason="ORCHGEN_NHC_SOURCE (a checkout of github.com/mej/nhc at tag 1.4.3) not set")
def test_nhc_1_4_3_drains_a_gb200_tray_off_its_nvlink_fabric(tmp_path):
    """The check_gpus line of a `platform: gb200-nvl72` pool's nhc.conf, run by NHC 1.4.3's own check_cmd_output
    (its -m '!/^FAIL/' -M '%L' as NHC reads them; the Slurm tests run it under the loopback stand-in), with
    tests/fake_gpu.py's nvidia-smi and nvidia-imex-ctl: a tray registered with its NVLink fabric and IMEX READY
    passes; a tray whose fabric registration failed fails with gpu-health.sh's FAIL line, the drain reason."""
    from tests import fake_gpu

    fleet = tmp_path / "gb.yaml"
    fleet.write_text(
        "apiVersion: orchgen/v1alpha1\nkind: Fleet\nmetadata: {name: gb}\n"
        "fleet:\n  bare_metal: true\n  slurm: {controllers: [head01]}\n  fabric: {kind: infiniband, nodes_per_leaf: 18}\n"
        "  pools: [{name: gb, nodes: 18, hostnames: 'gb[01-18]', platform: gb200-nvl72}]\n"
        "workloads: [{name: train, nodes: 18, tightly_coupled: true}]\n")
    run_orchgen("plan", fleet, "-o", tmp_path / "out", "-q", check=True)
    slurm = tmp_path / "out" / "slurm"
    (line,) = [ln for ln in (slurm / "nhc.conf").read_text().splitlines() if "check_gpus" in ln]
    assert line.endswith("/etc/slurm/gpu-health.sh 4 gb200 imex"), line
    conf = tmp_path / "nhc.conf"
    conf.write_text(line.replace("/etc/slurm/gpu-health.sh", str(slurm / "gpu-health.sh")) + "\n")
    (slurm / "gpu-health.sh").chmod(0o755)
    fakes = tmp_path / "bin"
    fakes.mkdir()
    sick = {"gb02": {"gpu": 1, "fabric.status": "Failure"}}
    for name, text in (("nvidia-smi", fake_gpu.nvidia_smi(sick, count=4, name="NVIDIA GB200", fabric=fake_gpu.FABRIC,
                                                          node_var="NODE")),
                       ("dmesg", fake_gpu.dmesg()), ("nvidia-imex-ctl", fake_gpu.imex_ctl())):
        (fakes / name).write_text(text)
        (fakes / name).chmod(0o755)

    def nhc(node: str) -> subprocess.CompletedProcess:
        # NHC sets its own PATH (nhc: nhcmain_init_env); a variable on its command line replaces it
        return subprocess.run(["bash", str(Path(os.environ["ORCHGEN_NHC_SOURCE"]) / "nhc"), "-c", str(conf), "-D",
                               os.environ["ORCHGEN_NHC_SOURCE"], "-l", "-", "-t", "30", f"HOSTNAME={node}",
                               "MARK_OFFLINE=0", f"RESULTFILE={tmp_path / 'status'}",
                               f"PATH={fakes}:/sbin:/usr/sbin:/bin:/usr/bin"],
                              env={**os.environ, "NODE": node}, capture_output=True, text=True, timeout=90)

    healthy = nhc("gb01")
    assert healthy.returncode == 0 and healthy.stdout + healthy.stderr == "", healthy
    failed = nhc("gb02")
    assert failed.returncode == 1 and "Health check failed:  check_gpus:  FAIL: GPU 1 (00000000:19:00.0): NVLink " \
        "fabric state Completed, status Failure." in failed.stdout + failed.stderr, failed
