"""Issue 36: typos that used to plan and break a site. The refusals themselves (one line, file:line: field,
exit 2, nothing written) are tests/test_bad_input.py's CASES; here what must still plan, and init's and
import's side of the same rules."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from generator import catalog
from generator.spec import mig
from tests.support import run_cli

from .test_bad_input import BASE

REPO = Path(__file__).resolve().parent.parent


def test_the_catalog_knows_every_mig_gpu_type():
    """The MIG table's GPU types are GPU models the catalog knows (the two lists are kept by hand)."""
    assert set(mig.PROFILES) <= set(catalog.GPU_TYPES)


@pytest.mark.parametrize("name, known", [
    ("h100", True), ("H100", True), ("a100-80gb", True), ("a100_80gb", True),
    # Slurm's NVML AutoDetect names, lower-cased with '_' (gres.conf(5) Type: a substring of those)
    ("nvidia_h100_80gb_hbm3", True), ("tesla_v100-sxm2-16gb", True), ("nvidia_rtx_pro_6000_blackwell", True),
    ("h1000", False), ("a10o", False), ("nvidia_h1000_80gb", False), ("GV100GL", False), ("zork", False),
])
def test_gpu_type_known(name, known):
    assert catalog.gpu_type_known(name) is known


def _plan(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return run_cli(["plan", path, "-o", tmp_path / "out", "-q"], capture_output=True, text=True)


def test_a_custom_gpu_type_plans_and_reaches_slurm_as_written(tmp_path):
    """custom: true keeps the site's own GRES name: gres.conf and slurm.conf carry it as written."""
    proc = _plan(tmp_path, BASE.replace("gpu: {type: h100, count: 8}", "gpu: {type: GV100GL, custom: true, count: 8}"))
    assert proc.returncode == 0, proc.stderr
    assert "Gres=gpu:GV100GL:8" in (tmp_path / "out/slurm/slurm.conf").read_text()
    assert "Type=GV100GL" in (tmp_path / "out/slurm/gres.conf").read_text()


def test_an_nvml_gpu_name_plans_without_custom(tmp_path):
    proc = _plan(tmp_path, BASE.replace("type: h100,", "type: nvidia_h100_80gb_hbm3,"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("kind", ["infiniband", "roce", "ethernet"])
def test_a_stated_fabric_plans_and_sets_nccl_by_it(tmp_path, kind):
    proc = _plan(tmp_path, BASE.replace("kind: infiniband", f"kind: {kind}"))
    assert proc.returncode == 0, proc.stderr
    nccl = (tmp_path / "out/slurm/nccl.env").read_text()  # what TaskProlog gives every task
    assert ("NCCL_IB_DISABLE=1" in nccl) is (kind == "ethernet"), nccl


def test_a_cloud_fleet_may_leave_the_fabric_out(tmp_path):
    """Off bare metal the fabric kind is not the site's cabling (EKS: EFA; provider profiles): no refusal."""
    text = (BASE.replace("  bare_metal: true\n", "  provider: eks\n")
            .replace("  fabric:\n    kind: infiniband\n    nodes_per_leaf: 4\n", "")
            .replace("    tightly_coupled: true\n", ""))
    proc = _plan(tmp_path, text)
    assert proc.returncode == 0, proc.stderr


# --- init ------------------------------------------------------------------------------------------

def _init(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, Path]:
    target = tmp_path / "w.yaml"
    proc = run_cli(["init", "-o", target, *flags], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return proc, target


def test_init_on_eks_writes_no_infiniband(tmp_path):
    """EC2 has no InfiniBand: without --fabric, init on EKS writes ethernet (EFA is set up by the provider)."""
    proc, target = _init(tmp_path, "--provider", "eks")
    assert proc.returncode == 0, proc.stderr
    text = target.read_text()
    assert yaml.safe_load(text)["fleet"]["fabric"]["kind"] == "ethernet"
    assert "infiniband" not in text.split("fabric:")[1].split("pools:")[0]
    assert "EFA" in text


@pytest.mark.parametrize("fabric", ["infiniband", "roce"])
def test_init_refuses_an_rdma_fabric_eks_does_not_offer(tmp_path, fabric):
    proc, target = _init(tmp_path, "--provider", "eks", "--fabric", fabric)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert f"--fabric {fabric}" in proc.stderr and "EFA" in proc.stderr, proc.stderr
    assert not target.exists()


def test_init_writes_an_unknown_gpu_type_as_the_sites_own(tmp_path):
    """A GRES name init does not know and that is no near miss (GV100GL) is the site's: written custom: true,
    and the file plans."""
    proc, target = _init(tmp_path, "--gpu-type", "GV100GL", "--bare-metal", "--slurm-controller", "head01")
    assert proc.returncode == 0, proc.stderr
    gpu = yaml.safe_load(target.read_text())["fleet"]["pools"][0]["gpu"]
    assert gpu == {"type": "GV100GL", "custom": True, "count": 8}


# --- import slurm ----------------------------------------------------------------------------------

def test_import_keeps_the_sites_gpu_names_and_asks_for_the_fabric(tmp_path):
    """An imported site's GRES types are its own (custom: true where the catalog does not know them). The
    interconnect, which no Slurm file states, is asked for (NCCL settings left out, which the fabric rule
    accepts), or given with --fabric (then orchgen's NCCL settings for it)."""
    out = tmp_path / "w.yaml"
    proc = run_cli(["import", "slurm", REPO / "tests/data/import-edge/slurm.conf", "-o", out],
                   capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(out.read_text())
    gpus = {p["gpu"]["type"]: p["gpu"].get("custom", False) for p in doc["fleet"]["pools"] if "type" in p.get("gpu", {})}
    assert gpus and all(custom is not catalog.gpu_type_known(t) for t, custom in gpus.items()), gpus
    assert "kind" not in doc["fleet"]["fabric"] and doc["options"]["slurm"]["nccl"] is False
    assert any(line.startswith("asks") and "fleet.fabric.kind" in line and "--fabric" in line
               for line in proc.stdout.splitlines()), proc.stdout
    assert run_cli(["plan", out, "-o", tmp_path / "out", "-q"], capture_output=True, text=True).returncode == 0
    again = tmp_path / "ib.yaml"
    proc = run_cli(["import", "slurm", REPO / "tests/data/import-edge/slurm.conf", "--fabric", "infiniband",
                    "-o", again], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(again.read_text())
    assert doc["fleet"]["fabric"]["kind"] == "infiniband" and "nccl" not in doc.get("options", {}).get("slurm", {})
    assert not any(line.startswith("asks") and "fabric" in line for line in proc.stdout.splitlines()), proc.stdout


def test_the_fabric_may_stay_unsaid_only_without_nccl_settings(tmp_path):
    """options.slurm.nccl: false writes no NCCL settings (an adopted site's fabric not known yet): then a
    bare-metal fleet may leave fabric.kind out; with NCCL settings it may not."""
    text = BASE.replace("    kind: infiniband\n", "")
    assert _plan(tmp_path, text + "options:\n  slurm: {nccl: false}\n").returncode == 0
    assert _plan(tmp_path, text).returncode == 2
