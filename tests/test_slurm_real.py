"""The Slurm plane proven by a real Slurm: each bundle is written by the CLI, its slurm/ booted
unchanged by tests/slurmharness (only the loopback overlay differs), and then checked against
plan.json, the decision, not against the files themselves:

* no WARNING/error/fatal line in the controller's or any slurmd's log (one documented exception:
  topology.yaml's block topology names the nodes it leaves out, and they must be exactly the nodes
  outside the NVLink pools);
* every Slurm node IDLE, with the GRES of its pool (`sinfo -N -o "%N %G"`);
* `scontrol show topology` equal to the fabric restricted to the Slurm plane, node for node, and
  the blocks equal to the NVLink domains;
* the partitions as planned (names, nodes, default, bound topology);
* jobs: multi-node `--gres=gpu:N` (each task sees N GPUs), `--switches=1` (and `--segment` for
  blocks) with one node busy, so that only the topology explains where the job lands, and the Ray
  launcher end to end with a stand-in `ray` command.

Cases: Slurm 22.05 (the host's, bookworm): a single-pool tree fleet, a multi-pool fleet with tenants
and Ray, the Slurm side of a hybrid; 24.11 (trixie chroot): NVLink blocks; 26.05 (forky chroot):
topology.yaml with a tree and a block topology.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.slurmharness import SlurmCluster, expand_hostlist, parse, require_slurm
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
pytestmark = pytest.mark.slurm

MULTI_POOL = {  # 3 pools (one without GPUs), 2 tenants, a training and a Ray workload: 16 nodes
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "multi-pool"},
    "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 4, "leaves_per_spine": 2},
              "pools": [{"name": "a100", "nodes": 8, "gpu": {"type": "a100", "count": 4}, "cpus": 64,
                         "memory_gib": 512},
                        {"name": "l40s", "nodes": 4, "gpu": {"type": "l40s", "count": 2}, "cpus": 32,
                         "memory_gib": 256},
                        {"name": "cpu", "nodes": 4, "cpus": 128, "memory_gib": 1024}]},
    "tenants": [{"name": "nlp", "share": 3}, {"name": "vision", "share": 1}],
    "workloads": [{"name": "train", "nodes": 4, "tightly_coupled": True, "pool": "a100", "tenant": "nlp"},
                  {"name": "pipeline", "nodes": 3, "tightly_coupled": True, "python_native_pipeline": True,
                   "pool": "l40s", "tenant": "vision"}],
    "options": {"slurm_version": "22.05"},
}

# A stand-in for `ray` on the loopback (no Ray here): `start` records the Slurm node it runs on and
# blocks like `ray start --block`; `status` prints the "Active:" section `ray status` prints.
FAKE_RAY = """#!/bin/sh
dir=%(dir)s
case "$1" in
start)
    case " $* " in *" --head "*) touch "$dir/head" ;; esac
    touch "$dir/node_$SLURMD_NODENAME"
    exec sleep 300 ;;
status)
    [ -e "$dir/head" ] || { echo "no Ray cluster at $2" >&2; exit 1; }
    echo "Node status"
    echo "Active:"
    for f in "$dir"/node_*; do echo " 1 ${f##*/}"; done
    echo "Pending:"
    echo " (no pending nodes)" ;;
*) exit 1 ;;
esac
"""


# ------------------------------------------------------------------ the bundle and what plan.json says


def bundle(tmp_path: Path, source: Path | dict) -> Path:
    """`orchgen plan` through the CLI, as a user runs it; returns the bundle directory."""
    if isinstance(source, dict):
        path = tmp_path / f"{source['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(source, sort_keys=False))
        source = path
    out = tmp_path / "bundle"
    subprocess.run([*orchgen_argv(), "plan", str(source), "-o", str(out)],
                   check=True, capture_output=True, cwd=REPO)
    return out


def _gres(gpu: dict | None) -> str:
    """plan.json's pool gpu as Slurm's GRES: gpu:<type>:<count>, with MIG gpu:<profile>:<count x per_gpu>."""
    if not gpu:
        return ""
    if gpu.get("mig"):
        return f"gpu:{gpu['mig']['profile']}:{gpu['count'] * gpu['mig']['per_gpu']}"
    return f"gpu:{gpu['type']}:{gpu['count']}"


class Planned:
    """The Slurm plane as plan.json describes it: what the booted cluster must show."""

    def __init__(self, out: Path):
        self.plan = json.loads((out / "plan.json").read_text())
        plane = self.plan["planes"]["slurm"]
        self.version = tuple(int(x) for x in self.plan["versions"]["slurm"].split("."))
        self.pools = {p["pool"]: expand_hostlist(p["nodes"]) for p in plane["pools"]}
        self.gres = {p["pool"]: _gres(p["gpu"]) for p in plane["pools"]}
        self.nodes = [n for nodes in self.pools.values() for n in nodes]
        fab = self.plan["fabric"]
        self.leaf_names = list(dict.fromkeys(leaf for p in plane["pools"] for leaf in p["leaves"]))
        # a leaf split between the planes (or shared with the other plane's pool) holds this plane's part
        mine = set(self.nodes)
        self.leaves = {leaf["name"]: set(expand_hostlist(leaf["nodes"])) & mine
                       for leaf in fab["leaves"] if leaf["name"] in self.leaf_names}
        spines = {s["name"]: set(s["leaves"]) & set(self.leaf_names) for s in fab["spines"]}
        self.spines = {name: leaves for name, leaves in spines.items() if leaves}
        self.core = {fab["core"]: set(self.spines)} if len(self.spines) > 1 and fab["core"] else {}
        self.domains = {d["name"]: set(expand_hostlist(d["nodes"])) for d in fab["nvlink_domains"]
                        if d["pool"] in self.pools}
        self.nvlink_pools = {d["pool"] for d in fab["nvlink_domains"] if d["pool"] in self.pools}

    def pool_of(self, node: str) -> str:
        return next(p for p, nodes in self.pools.items() if node in nodes)

    def classes(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for w in self.plan["workloads"]:
            if w["plane"] == "slurm" and w["class"] in ("training", "ray"):
                out.setdefault(w["class"], [])
                if w["pool"] not in out[w["class"]]:
                    out[w["class"]].append(w["pool"])
        return out if len(out) > 1 else {}


# ------------------------------------------------------------------ checks on a booted cluster


def optional_plugins_absent(c: SlurmCluster) -> list[str]:
    return c.optional_plugins_absent()


def check_clean_log(c: SlurmCluster, p: Planned, also: list[re.Pattern] = ()) -> None:
    outside = [n for n in p.nodes if n not in set().union(*p.domains.values())] if p.domains else []
    expected = list(also)  # the absent optional plugins' lines: SlurmCluster.problems leaves them out
    unexpected = []
    for line in c.problems():
        m = re.search(r"warning: Blocks lack access to (\d+) nodes: (\S+)$", line)
        if m and p.version >= (25, 5) and sorted(expand_hostlist(m.group(2))) == sorted(outside):
            continue  # topology.yaml's block topology leaves the non-NVLink pools out, as planned
        if any(e.search(line) for e in expected):
            continue
        unexpected.append(line)
    assert unexpected == []


def check_nodes(c: SlurmCluster, p: Planned) -> None:
    nodes = c.nodes()
    assert sorted(nodes) == sorted(p.nodes)
    assert {n: s["state"] for n, s in nodes.items()} == {n: "IDLE" for n in p.nodes}
    sinfo = c.run("sinfo", "-h", "-N", "-o", "%N %G").stdout.split("\n")
    per_node = dict(line.split(" ", 1) for line in sinfo if line.strip())
    want = {n: p.gres[p.pool_of(n)] or "(null)" for n in p.nodes}
    # "(S:0-1)": the sockets whose cores gres.conf's Cores= name (test_node_hardware_* check them)
    assert {n: re.sub(r"\(S:[0-9,-]+\)$", "", g.strip()) for n, g in per_node.items()} == want


def check_tree(c: SlurmCluster, p: Planned, *args: str) -> None:
    from tests.slurmharness import parse

    got = parse.switches(c.topology(*args))
    want = {leaf: {"level": 0, "nodes": nodes} for leaf, nodes in p.leaves.items()}
    want |= {s: {"level": 1, "switches": leaves} for s, leaves in p.spines.items()}
    want |= {s: {"level": 2, "switches": spines} for s, spines in p.core.items()}
    assert set(got) == set(want)
    for name, w in want.items():
        assert got[name]["level"] == w["level"], name
        if "nodes" in w:
            assert got[name]["nodes"] == w["nodes"] and not got[name]["switches"], name
        else:
            assert got[name]["switches"] == w["switches"], name


def check_blocks(c: SlurmCluster, p: Planned, base: int, *args: str) -> None:
    blocks = c.blocks(*args)
    assert {n: b["nodes"] for n, b in blocks.items() if not b["aggregated"]} == p.domains
    assert {b["size"] for b in blocks.values() if not b["aggregated"]} == {base}
    sizes = sorted({b["size"] for b in blocks.values()})
    assert sizes == [base * 2 ** k for k in range(len(sizes))]


def check_partitions(c: SlurmCluster, p: Planned, block_topology: str | None = None) -> None:
    # the default is CPU-only when the plane has CPU pools (one: its own partition; several: `cpu`)
    cpu_pools = [pool for pool in p.pools if not p.gres[pool]]
    default = "all" if not cpu_pools else (cpu_pools[0] if len(cpu_pools) == 1 else "cpu")
    want = {"all": (p.nodes, default == "all")}
    want |= {pool: (nodes, pool == default) for pool, nodes in p.pools.items()}
    if len(cpu_pools) > 1:
        want["cpu"] = ([n for pool in cpu_pools for n in p.pools[pool]], True)
    want |= {cls: ([n for pool in pools for n in p.pools[pool]], False) for cls, pools in p.classes().items()}
    parts = c.partitions()
    assert set(parts) == set(want)
    for name, (nodes, default) in want.items():
        assert sorted(expand_hostlist(parts[name]["nodes"])) == sorted(nodes), name
        assert parts[name]["default"] is default, name
        assert parts[name]["state"] == "UP", name
        if block_topology:
            pools = [name] if name in p.pools else p.classes().get(name, list(p.pools))
            bound = block_topology if set(pools) <= p.nvlink_pools else ""
            assert parts[name]["topology"] == bound, name


def gpu_job(c: SlurmCluster, p: Planned, pool: str, nodes: int = 2) -> None:
    count = int(p.gres[pool].rsplit(":", 1)[1])
    out = c.job("-N", str(nodes), "-p", pool, f"--gres=gpu:{count}",
                "sh", "-c", 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"').stdout.split("\n")
    seen = dict(line.split(" ", 1) for line in out if line.strip())
    assert len(seen) == nodes and set(seen) <= set(p.pools[pool])
    assert set(seen.values()) == {",".join(str(i) for i in range(count))}


def busy(c: SlurmCluster, node: str, pool: str) -> str:
    """Occupy `node` with a sleeping job; returns its id."""
    job = c.run("sbatch", "--parsable", "-p", pool, "-w", node, "--exclusive", f"--chdir={c.work}/jobs",
                "--output=/dev/null", "--wrap", "sleep 120").stdout.strip()
    for _ in range(100):
        if "RUNNING" in c.run("squeue", "-h", "-j", job, "-o", "%T").stdout:
            return job
        time.sleep(0.1)
    raise AssertionError(f"the job holding {node} never started")


def nodes_of_batch(c: SlurmCluster, *args: str) -> set[str]:
    out = c.batch_wait('echo "NODES=$SLURM_JOB_NODELIST"', *args)
    return set(expand_hostlist(re.search(r"NODES=(\S+)", out).group(1)))


def switches_job(c: SlurmCluster, p: Planned, pool: str, partition: str | None = None) -> None:
    """With the pool's first node busy, a leaf-sized --switches=1 job must take another whole leaf."""
    leaves = [nodes for nodes in p.leaves.values() if nodes <= set(p.pools[pool])]
    assert len(leaves) > 1, f"pool {pool} has one leaf: --switches=1 would prove nothing"
    holder = busy(c, p.pools[pool][0], partition or pool)
    try:
        got = nodes_of_batch(c, "-p", partition or pool, "-N", str(min(map(len, leaves))),
                             "--switches=1@00:00:30", "--exclusive")
    finally:
        c.run("scancel", holder)
    assert p.pools[pool][0] not in got
    assert any(got <= nodes for nodes in p.leaves.values()), got


def segment_job(c: SlurmCluster, p: Planned, pool: str, size: int) -> None:
    """A segment of the base block size (the NVLink domain less its spare trays, topology.conf's BlockSizes)
    lands inside one domain, and still does in the first domain with one of its nodes busy (a drained tray): the
    spares absorb it. Without spares (size = the domain) it lands in another domain."""
    holder = busy(c, p.pools[pool][0], pool)
    try:
        got = nodes_of_batch(c, "-p", pool, "-N", str(size), f"--segment={size}", "--exclusive")
    finally:
        c.run("scancel", holder)
    assert len(got) == size and any(set(got) <= nodes for nodes in p.domains.values()), got
    assert p.pools[pool][0] not in got


def ray_job(c: SlurmCluster, out: Path, workload: str, nodes: int) -> None:
    fake = c.workdir / "jobs" / "bin"
    fake.mkdir()
    (c.workdir / "jobs" / "ray-state").mkdir()
    (fake / "ray").write_text(FAKE_RAY % {"dir": f"{c.work}/jobs/ray-state"})
    (fake / "ray").chmod(0o755)
    script = (out / "slurm" / f"ray-{workload}.sbatch").read_text()
    log = c.batch_wait(script, f"--export=ALL,PATH={c.work}/jobs/bin:/usr/bin:/bin,RAY_POLL_SECONDS=0.2,"
                               "RAY_ENTRYPOINT=ray status", timeout=90)
    assert f"{nodes} of {nodes} Ray nodes up" in log
    assert len(re.findall(r"^ 1 node_", log, re.M)) == nodes  # the entrypoint ran against all of them


# ------------------------------------------------------------------ Slurm 22.05 (Debian 12)


def test_single_pool_tree_2205(tmp_path):
    require_slurm("bookworm")
    out = bundle(tmp_path, EXAMPLES / "fsdp-pretraining.yaml")
    p = Planned(out)
    with SlurmCluster(out / "slurm") as c:
        check_clean_log(c, p)
        check_nodes(c, p)
        check_tree(c, p)
        check_partitions(c, p)
        gpu_job(c, p, "h100", nodes=4)
        switches_job(c, p, "h100")


def test_multi_pool_with_tenants_and_ray_2205(tmp_path):
    require_slurm("bookworm")
    out = bundle(tmp_path, MULTI_POOL)
    assert (out / "slurm" / "accounts.sh").is_file()
    p = Planned(out)
    with SlurmCluster(out / "slurm") as c:
        assert c.overlay_result.dropped_slurmdbd  # accounting was configured (the harness has no slurmdbd)
        check_clean_log(c, p)
        check_nodes(c, p)
        check_tree(c, p)
        check_partitions(c, p)
        gpu_job(c, p, "a100", nodes=3)
        gpu_job(c, p, "l40s", nodes=2)
        c.job("-N", "4", "-p", "cpu", "true")
        switches_job(c, p, "a100")
        ray_job(c, out, "pipeline", 3)


def test_slurm_side_of_a_hybrid_2205(tmp_path):
    require_slurm("bookworm")
    out = bundle(tmp_path, EXAMPLES / "research-lab.yaml")
    p = Planned(out)
    assert "l40s" not in p.pools and len(p.nodes) == 64  # the Kubernetes pool stays out
    with SlurmCluster(out / "slurm") as c:
        check_clean_log(c, p)
        check_nodes(c, p)
        check_tree(c, p)
        check_partitions(c, p)
        gpu_job(c, p, "h100", nodes=16)
        switches_job(c, p, "h100")


def test_batch_of_a_slurm_site_runs_on_slurm_2205(tmp_path):
    """Issue 36's rule slurm-site-batch on a real slurmctld: university-lab's model evaluation (one A100 node)
    and data preparation (CPU nodes) stay on the Slurm plane instead of carving Kubernetes a slice of the
    A100 pool and the CPU pool, and run there as the batch jobs they are."""
    require_slurm("bookworm")
    out = bundle(tmp_path, EXAMPLES / "university-lab.yaml")
    p = Planned(out)
    planes = {w["name"]: w["plane"] for w in p.plan["workloads"]}
    assert planes == {"ddp-training": "slurm", "thesis-runs": "slurm", "notebooks": "kubernetes",
                      "model-eval": "slurm", "data-prep": "slurm"}
    assert set(p.pools) == {"a100", "cpu"} and len(p.pools["a100"]) == 8  # the whole A100 pool, no split
    with SlurmCluster(out / "slurm") as c:
        check_clean_log(c, p)
        check_nodes(c, p)
        check_partitions(c, p)
        gpu_job(c, p, "a100", nodes=1)  # model-eval: one node, its 8 GPUs
        gpu_job(c, p, "a100", nodes=2)  # ddp-training beside it
        c.job("-N", "1", "-p", "cpu", "true")  # data-prep


# ------------------------------------------------------------------ newer Slurm in a chroot


@pytest.mark.chroot
def test_nvlink_blocks_2411(tmp_path):
    require_slurm("trixie")
    out = bundle(tmp_path, EXAMPLES / "nvl72-blocks.yaml")
    p = Planned(out)
    with SlurmCluster(out / "slurm", suite="trixie") as c:
        assert c.version.startswith("24.11")
        check_clean_log(c, p)
        check_nodes(c, p)
        check_blocks(c, p, 16)  # 18-node domains, 2 spare trays each (options.slurm.nvlink_spares' default)
        check_partitions(c, p)
        gpu_job(c, p, "gb200", nodes=4)
        segment_job(c, p, "gb200", 16)


def with_slurm_options(example: str, **options) -> dict:
    """An example with options.slurm changed."""
    doc = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())
    doc.setdefault("options", {})["slurm"] = {**doc["options"].get("slurm", {}), **options}
    return doc


@pytest.mark.chroot
def test_topology_yaml_2605(tmp_path):
    require_slurm("forky")
    # Debian forky's Slurm 26.05 is built without mpi/pmix (test_slurm_ops_real.py shows the default then
    # failing every srun, as the README says): PMI2 here
    out = bundle(tmp_path, with_slurm_options("topology-yaml", mpi="pmi2"))
    p = Planned(out)
    assert p.nvlink_pools == {"gb200"}
    with SlurmCluster(out / "slurm", suite="forky") as c:
        assert c.version.startswith("26.05")
        check_clean_log(c, p)
        check_nodes(c, p)
        check_tree(c, p)  # the cluster default
        check_tree(c, p, "fabric")
        check_blocks(c, p, 16, "nvlink18")
        check_partitions(c, p, block_topology="nvlink18")
        gpu_job(c, p, "gb200", nodes=2)
        gpu_job(c, p, "h100", nodes=4)
        segment_job(c, p, "gb200", 16)
        switches_job(c, p, "gb200", partition="all")  # `all` uses the tree, the cluster default
        ray_job(c, out, "rl-pipeline", 4)


# ------------------------------------------------------------------ node hardware (issue 10)

# `slurmd -C` lines as a DGX H100 and a GH200 node print them
DGX_C = "NodeName=dgx001 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2063937"
GH200_C = "NodeName=gh001 CPUs=72 Boards=1 SocketsPerBoard=1 CoresPerSocket=72 ThreadsPerCore=1 RealMemory=470464"


def hardware_fleet(version: str) -> dict:
    """Five node shapes, two nodes each: what each must look like in the booted Slurm is HARDWARE."""
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "hardware"},
        "fleet": {"bare_metal": True, "slurm": {"controllers": ["head01"]},
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": 2},
                  "pools": [
                      {"name": "dgx", "nodes": 2, "slurmd_c": DGX_C, "memory_gib": 2048,
                       "reserved": {"cores": 4, "memory_gib": 64},
                       "gpu": {"type": "h100", "count": 8, "sockets": [0, 0, 0, 0, 1, 1, 1, 1]}},
                      {"name": "p9", "nodes": 2, "memory_gib": 512,  # IBM AC922: POWER9 SMT4
                       "cpu": {"sockets": 2, "cores_per_socket": 20, "threads_per_core": 4},
                       "reserved": {"cores": 2, "memory_gib": 16},
                       "gpu": {"type": "v100", "count": 4, "sockets": [0, 0, 1, 1]}},
                      {"name": "gh", "nodes": 2, "slurmd_c": GH200_C, "gpu": {"type": "gh200", "count": 1, "sockets": [0]}},
                      {"name": "mig", "nodes": 2, "memory_gib": 1024,
                       "cpu": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2},
                       "gpu": {"type": "a100", "count": 2, "mig": {"profile": "3g.40gb", "per_gpu": 2}}},
                      {"name": "old", "nodes": 2, "cpus": 8, "memory_gib": 64}]},
        "workloads": [{"name": f"w-{p}", "nodes": 2, "tightly_coupled": True, "pool": p}
                      for p in ("dgx", "p9", "gh", "mig", "old")],
        "options": {"slurm_version": version},
    }


# pool -> what `scontrol show node` must report: the node as the input describes it, written out here
# rather than recomputed, with RealMemory by the rule the README states
HARDWARE = {
    "dgx": {"Sockets": "2", "Boards": "1", "CoresPerSocket": "56", "ThreadsPerCore": "2", "CPUTot": "224",
            "RealMemory": str(2063937 - 2063937 // 200), "CoreSpecCount": "4", "MemSpecLimit": "65536",
            "Gres": "gpu:h100:8(S:0-1)"},
    "p9": {"Sockets": "2", "CoresPerSocket": "20", "ThreadsPerCore": "4", "CPUTot": "160",
           "RealMemory": str((512 - 16) * 1024), "CoreSpecCount": "2", "MemSpecLimit": "16384",
           "Gres": "gpu:v100:4(S:0-1)"},
    "gh": {"Sockets": "1", "CoresPerSocket": "72", "ThreadsPerCore": "1", "CPUTot": "72",
           "RealMemory": str(470464 - 23 * 1024), "Gres": "gpu:gh200:1(S:0)"},
    "mig": {"Sockets": "2", "CoresPerSocket": "32", "ThreadsPerCore": "2", "CPUTot": "128",
            "RealMemory": str((1024 - 52) * 1024), "Gres": "gpu:3g.40gb:4"},
    "old": {"Sockets": "1", "CoresPerSocket": "8", "ThreadsPerCore": "1", "CPUTot": "8",
            "RealMemory": str((64 - 4) * 1024)},
}


def cpu_ids(text: str) -> list[int]:
    """The CPUs `scontrol -d show job` says the job holds on its node (Slurm's abstract CPU ids)."""
    return expand_ids(re.search(r"CPU_IDs=(\S+)", text).group(1))


def expand_ids(ids: str) -> list[int]:
    """"0-1,4" -> [0, 1, 4]."""
    out: list[int] = []
    for part in ids.split(","):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def whole_core(ids: list[int], threads: int) -> int:
    """The one core `ids` are all the threads of (abstract CPU ids number a core's threads together)."""
    cores = {i // threads for i in ids}
    assert len(cores) == 1 and len(ids) == threads, (ids, threads)
    return cores.pop()


def check_hardware(c: SlurmCluster, p: Planned) -> None:
    raw = {r["NodeName"]: r for r in parse.records(c.run("scontrol", "-d", "-o", "show", "node").stdout)}
    for pool, want in HARDWARE.items():
        for node in p.pools[pool]:
            got = {k: raw[node].get(k) for k in want}
            assert got == want, (node, got)
            if pool in ("dgx", "p9"):  # CoreSpecCount's cores are no job's
                spec = int(want["CoreSpecCount"]) * int(want["ThreadsPerCore"])
                assert raw[node]["CPUEfctv"] == str(int(want["CPUTot"]) - spec)
                # whole cores: every thread of each (which cores is Slurm's choice; CPUSpecList names them)
                assert len(expand_ids(raw[node]["CPUSpecList"])) == spec
            else:
                assert raw[node].get("CoreSpecCount") in (None, "0", "N/A") and raw[node].get("MemSpecLimit") in (None, "0")


def check_whole_cores(c: SlurmCluster, p: Planned) -> None:
    """`srun -c 2` on a 2-threads-per-core node gets one whole core, never the half of a core another
    job has; `-c 1` still gets the whole core (CR_Core); on SMT4 `-c 2` gets a whole 4-thread core."""
    dgx = p.pools["dgx"][0]
    # `-p all`: the default partition is the CPU pool's (`old`), which has no dgx node
    holder = c.run("sbatch", "--parsable", "-p", "all", "-c", "2", "-w", dgx, f"--chdir={c.work}/jobs", "--output=/dev/null",
                   "--wrap", "sleep 120").stdout.strip()
    try:
        for _ in range(300):
            held = c.run("scontrol", "-d", "show", "job", holder).stdout
            if "JobState=RUNNING" in held:
                break
            time.sleep(0.1)
        show = 'scontrol -d show job "$SLURM_JOB_ID"'
        mine = c.job("-p", "all", "-c", "2", "-w", dgx, "sh", "-c", show).stdout
        assert whole_core(cpu_ids(mine), 2) != whole_core(cpu_ids(held), 2)  # two jobs, two cores
        one = c.job("-p", "all", "-c", "1", "-w", dgx, "sh", "-c", show).stdout
        assert "NumCPUs=2 " in one and whole_core(cpu_ids(one), 2) != whole_core(cpu_ids(held), 2)
    finally:
        c.run("scancel", holder)
    p9 = c.job("-p", "all", "-c", "2", "-w", p.pools["p9"][0], "sh", "-c", show).stdout
    assert "NumCPUs=4 " in p9
    whole_core(cpu_ids(p9), 4)
    old = c.job("-c", "2", "-w", p.pools["old"][0], "sh", "-c", show).stdout  # cpus alone: a CPU is a core
    assert "NumCPUs=2 " in old and len(set(cpu_ids(old))) == 2


def hardware_case(tmp_path: Path, version: str, suite: str) -> None:
    doc = hardware_fleet(version)
    if suite == "forky":  # Debian forky's 26.05 is built without mpi/pmix (see test_topology_yaml_2605)
        doc["options"]["slurm"] = {"mpi": "pmi2"}
    out = bundle(tmp_path, doc)
    p = Planned(out)
    conf = (out / "slurm" / "slurm.conf").read_text()
    assert re.findall(r"^SlurmctldHost=(\S+)$", conf, re.M) == ["head01"]  # the overlay puts its own in front
    with SlurmCluster(out / "slurm", suite=suite) as c:
        assert c.overlay_result.dropped_task_cgroup  # MemSpecLimit confines nothing here: see overlay.py
        check_clean_log(c, p)
        check_nodes(c, p)
        check_hardware(c, p)
        check_whole_cores(c, p)
        gpu_job(c, p, "dgx", nodes=2)
        c.job("-N", "2", "-p", "mig", "--gres=gpu:3g.40gb:4", "true")  # the MIG GRES, by its profile


def test_node_hardware_2205(tmp_path):
    require_slurm("bookworm")
    hardware_case(tmp_path, "22.05", "bookworm")


@pytest.mark.chroot
def test_node_hardware_2411(tmp_path):
    require_slurm("trixie")
    hardware_case(tmp_path, "24.11", "trixie")


@pytest.mark.chroot
def test_node_hardware_2605(tmp_path):
    require_slurm("forky")
    hardware_case(tmp_path, "25.11", "forky")  # 26.05 reads the 25.11 configuration (topology.yaml)
