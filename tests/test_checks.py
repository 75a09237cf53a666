"""The bundle's production checks (checks/run.py): the nccl-tests verdict on recorded all_reduce_perf runs
(one over InfiniBand that passes, one where NCCL fell back to sockets, which must fail), run as the bundle
ships them. The checks that need a cluster (GRES, whole allocation on the fewest leaves, NHC) run against a
real one in tests/test_bringup_real.py."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


DATA = Path(__file__).parent / "data" / "bringup"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("checks") / "out"
    subprocess.run([str(Path(sys.executable).parent / "orchgen"), "plan", str(DATA / "fleet.yaml"), "-o", str(out)],
                   check=True, capture_output=True, timeout=120)
    return out


def run_checks(bundle: Path, log: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, str(bundle / "checks/run.py"), "--only", "nccl", "--nccl-log",
                           str(DATA / log)], capture_output=True, text=True, timeout=60)
    return proc.returncode, json.loads(proc.stdout)


def test_checks_json_carries_the_plans_expectations(bundle):
    cfg = json.loads((bundle / "checks/checks.json").read_text())
    assert cfg["fabric"] == "infiniband" and cfg["nccl_transport"] == "NET/IB" and cfg["busbw_floor_gbps"] > 0
    assert cfg["nodes"] == {"gpu01": {"gpus": 2, "gpu_type": "a100"}, "gpu02": {"gpus": 2, "gpu_type": "a100"}}
    assert cfg["leaves"] == [{"name": "leaf1", "nodes": ["gpu01", "gpu02"]}]


def test_nccl_over_infiniband_passes(bundle):
    rc, out = run_checks(bundle, "nccl-ib-pass.log")
    assert rc == 0 and out["nccl"]["ok"] is True, out
    assert out["nccl"]["busbw_gbps"] == 75.81


def test_nccl_socket_fallback_fails(bundle):
    rc, out = run_checks(bundle, "nccl-socket-fallback.log")
    assert rc == 1 and out["nccl"]["ok"] is False, out
    detail = " ".join(out["nccl"]["detail"])
    assert "fell back to sockets" in detail and "no inter-node channel via NET/IB" in detail
    assert "below the 20.0 GB/s floor" in detail


def test_nccl_without_debug_lines_fails(bundle, tmp_path):
    quiet = tmp_path / "quiet.log"
    quiet.write_text("".join(ln for ln in (DATA / "nccl-ib-pass.log").read_text().splitlines(True) if "NCCL INFO" not in ln))
    proc = subprocess.run([sys.executable, str(bundle / "checks/run.py"), "--only", "nccl", "--nccl-log", str(quiet)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "is NCCL_DEBUG=INFO set?" in proc.stdout


def test_fewest_leaves(bundle):
    sys.path.insert(0, str(bundle / "checks"))
    try:
        import run as checks  # the bundle's own file
    finally:
        sys.path.pop(0)
    leaves = [{"nodes": ["a", "b"]}, {"nodes": ["c", "d", "e", "f"]}, {"nodes": ["g"]}]
    assert [checks.fewest_leaves(leaves, k) for k in (1, 4, 5, 6, 7)] == [1, 1, 2, 2, 3]
