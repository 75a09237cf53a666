"""Platform profiles (issue 35) read back by the real Slurm: a pool that names `platform: dgx-h100`
and nothing else about its nodes boots under slurmctld and one slurmd per node (tests/slurmharness),
on Debian 12's 22.05 (the host) and in the trixie (24.11) and forky (26.05) chroots:

* `scontrol show node` reports the DGX H100's layout, 2 sockets x 56 cores x 2 threads, and its GPUs
  bound to their sockets (Gres=gpu:h100:8(S:0-1));
* `slurmd -G` (the GRES as slurmd parsed gres.conf) gives every GPU its socket's cores (Cores=0-55
  for GPUs 0-3, 56-111 for 4-7), in Slurm's abstract core numbering;
* `slurmd -C` of each release, run on the DGX H100's CPU layout as hwloc (which slurmd reads the
  machine through) describes it, prints the layout the bundle's NodeName line gives the pool, and
  `slurmd -G` on that layout still gives every GPU its socket's cores; `orchgen discover`'s parser and drift
  read that real line (the layout agrees; the test host's memory is reported below the DGX's RealMemory);
* TaskProlog gives every task NCCL_IB_HCA as exactly the eight compute rails, never a storage HCA;
* no WARNING or error in any daemon's log (tests/slurmharness: problems()).
"""
from __future__ import annotations

import re

import pytest

from generator import discover
from generator.decide import make_plan
from generator.render.slurm.model import model
from generator.spec import load_located
from tests.slurmharness import SlurmCluster, expand_hostlist, parse, require_slurm
from tests.test_slurm_ops_real import nodes_env
from tests.test_slurm_real import Planned, bundle, check_clean_log, check_nodes

pytestmark = pytest.mark.slurm

# the DGX H100/H200 User Guide's 'Network Modules' table: the compute ports' RDMA devices, GPU 0 to 7
COMPUTE_HCAS = "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"
# A DGX H100's CPUs as hwloc sees them: two Intel Xeon Platinum 8480C, 56 cores each, 2 threads per core (the
# DGX H100/H200 User Guide, "Hardware Overview"), one NUMA node per socket. Given to slurmd through hwloc's
# HWLOC_SYNTHETIC (hwloc's "Synthetic topologies"; an environment variable hwloc_topology_load honours), so
# `slurmd -C` prints what it would on the machine, not on the test host.
DGX_H100_HWLOC = "package:2 numa:1 core:56 pu:2"


def dgx_fleet(version: str, suite: str) -> dict:
    doc = {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "dgxp"},
        "fleet": {"bare_metal": True, "slurm": {"controllers": ["head01"]},
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": 2},
                  "pools": [{"name": "dgx", "nodes": 2, "platform": "dgx-h100"}]},
        "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
        "options": {"slurm_version": version},
    }
    if suite == "forky":  # Debian forky's 26.05 is built without mpi/pmix (test_slurm_real.test_topology_yaml_2605)
        doc["options"]["slurm"] = {"mpi": "pmi2"}
    return doc


def gres_cores(text: str) -> dict[str, str]:
    """`slurmd -G` lines -> {device file: Cores=}; a line may name a range (File=.../nvidia[0-3])."""
    out = {}
    for line in text.splitlines():
        f, c = re.search(r"File=(\S+)", line), re.search(r"Cores=(\S+)", line)
        if "Name=gpu" in line and f:
            for dev in expand_hostlist(f.group(1).rsplit("/", 1)[-1]):
                out[dev] = c.group(1) if c else None
    return out


def dgx_node_line(out) -> dict[str, str]:
    """slurm.conf's NodeName line of the DGX pool, key -> value."""
    conf = (out / "slurm/slurm.conf").read_text()
    line = next(ln for ln in conf.splitlines() if ln.startswith("NodeName=") and "Gres=gpu:h100:8" in ln)
    return dict(kv.split("=", 1) for kv in line.split())


def check_discover_reads(out, shown: str) -> None:
    """`orchgen discover`'s slurmd -C path on this release's real output: the line FACTS_SCRIPT keeps (the first)
    through discover's parser and drift against the fleet's model. The layout (hwloc's DGX H100) matches the
    NodeName line, so only the memory differs: slurmd counts the test host's, far below a DGX's RealMemory."""
    first = shown.splitlines()[0]
    facts = discover.parse(f"@@ slurmd\n{first}\n@@ end\n")
    got = dict(kv.split("=", 1) for kv in first.split())
    assert facts["slurmd_c"] == first and facts["cpu"] == {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2}
    assert (facts["cpus"], facts["real_memory_mib"]) == (224, int(got["RealMemory"])), facts
    fleet, _ = load_located(out.parent / "dgxp.yaml")
    plan = make_plan(fleet, out.parent / "dgxp.yaml")
    nodes = [n for g in model(plan).groups if g.pool == "dgx" for n in g.nodes]
    assert len(nodes) == 2, nodes
    real = dgx_node_line(out)["RealMemory"]
    lines = [ln for ln in discover.drift(plan, dict.fromkeys(nodes, facts)) if "slurmd -C" in ln or "CPU" in ln]
    assert lines == [f"{n}: slurmd -C says RealMemory={got['RealMemory']} MiB, below slurm.conf's RealMemory={real}: "
                     "slurmctld drains the node (Low RealMemory; pool dgx)" for n in nodes], lines


def check_slurmd_c(c: SlurmCluster, out, node: str) -> None:
    """`slurmd -C` on the DGX H100's layout prints what slurm.conf's NodeName line says; `slurmd -G` on it
    gives each GPU its socket's cores."""
    want = dgx_node_line(out)
    shown = c.run("env", f"HWLOC_SYNTHETIC={DGX_H100_HWLOC}", "slurmd", "-C").stdout
    got = dict(kv.split("=", 1) for kv in shown.splitlines()[0].split())
    assert got["CPUs"] == "224" and (int(got["Boards"]) * int(got["SocketsPerBoard"]), got["CoresPerSocket"],
                                     got["ThreadsPerCore"]) == (2, "56", "2"), shown  # the layout took
    sockets = want.get("Sockets") or str(int(want["Boards"]) * int(want["SocketsPerBoard"]))
    assert (want["CPUs"], sockets, want["CoresPerSocket"], want["ThreadsPerCore"]) == \
        (got["CPUs"], str(int(got["Boards"]) * int(got["SocketsPerBoard"])), got["CoresPerSocket"],
         got["ThreadsPerCore"]), (shown, want)
    check_discover_reads(out, shown)
    g = c.run("env", f"HWLOC_SYNTHETIC={DGX_H100_HWLOC}", "slurmd", "-G", "-N", node)
    assert gres_cores(g.stdout + g.stderr) == {f"nvidia{i}": "0-55" if i < 4 else "56-111" for i in range(8)}, \
        g.stdout + g.stderr
    assert "error" not in (g.stdout + g.stderr).lower(), g.stdout + g.stderr


def platform_case(tmp_path, version: str, suite: str) -> None:
    out = bundle(tmp_path, dgx_fleet(version, suite))
    p = Planned(out)
    with SlurmCluster(out / "slurm", suite=suite) as c:
        check_clean_log(c, p)
        check_nodes(c, p)
        raw = {r["NodeName"]: r for r in parse.records(c.run("scontrol", "-d", "-o", "show", "node").stdout)}
        for node in p.pools["dgx"]:
            got = {k: raw[node].get(k) for k in ("Sockets", "CoresPerSocket", "ThreadsPerCore", "CPUTot", "Gres")}
            assert got == {"Sockets": "2", "CoresPerSocket": "56", "ThreadsPerCore": "2", "CPUTot": "224",
                           "Gres": "gpu:h100:8(S:0-1)"}, (node, got)
        node = p.pools["dgx"][0]
        shown = c.run("slurmd", "-G", "-N", node)
        cores = gres_cores(shown.stdout + shown.stderr)
        assert cores == {f"nvidia{i}": "0-55" if i < 4 else "56-111" for i in range(8)}, shown.stdout + shown.stderr
        check_slurmd_c(c, out, node)
        assert nodes_env(c, "-N", "2", var="NCCL_IB_HCA") == [COMPUTE_HCAS, COMPUTE_HCAS]
        c.job("-N", "2", "--gres=gpu:h100:8", "--gpu-bind=closest", "true")


def test_dgx_h100_platform_2205(tmp_path):
    require_slurm("bookworm")
    platform_case(tmp_path, "22.05", "bookworm")


@pytest.mark.chroot
def test_dgx_h100_platform_2411(tmp_path):
    require_slurm("trixie")
    platform_case(tmp_path, "24.11", "trixie")


@pytest.mark.chroot
def test_dgx_h100_platform_2605(tmp_path):
    require_slurm("forky")
    platform_case(tmp_path, "25.11", "forky")  # 26.05 reads the 25.11 configuration
