"""The Slurm plane's files, read back the way Slurm reads them (no real Slurm here: see
test_slurm_real.py for that): GRES agrees everywhere, the topology places every Slurm node exactly
once and has the fabric's shape, the version decides the topology format, tenants decide accounting,
the output is deterministic and fast for 10,000+ nodes, and fleets Slurm would reject are refused."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from generator import spec
from generator.spec import hostlist
from generator.errors import OrchgenError
from generator.decide import make_plan
from generator.render import render
from generator.render.slurm import slurm_config
from generator.render.slurm.model import headroom_gib, model
from generator.render.slurm import render as render_slurm
from tests._consumers import require
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


# ------------------------------------------------------------------ helpers


def fleet(name: str = "lab", *, pools: list[dict], workloads: list[dict], tenants: list[dict] | None = None,
          fabric: dict | None = None, version: str = "22.05", bare_metal: bool = True, **options) -> dict:
    doc = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": name},
           "fleet": {"bare_metal": bare_metal, "fabric": fabric or {"kind": "infiniband", "nodes_per_leaf": 4},
                     "pools": pools},
           "workloads": workloads, "options": {"slurm_version": version, **options}}
    if tenants:
        doc["tenants"] = tenants
    return doc


from .support import plan_of_file as plan_of  # noqa: E402


def example(name: str):
    path = EXAMPLES / f"{name}.yaml"
    return make_plan(spec.load(path), path)


def records(text: str) -> list[dict[str, str]]:
    """slurm.conf-style lines as {key: value}, comments dropped (keys as written)."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("Include "):  # slurmdbd.conf's password file
            out.append({"Include": line.split(None, 1)[1]})
        elif line:
            out.append(dict(tok.split("=", 1) for tok in line.split()))
    return out


def nodes_gres_slurm_conf(conf: str) -> dict[str, str | None]:
    return {n: r.get("Gres") for r in records(conf) if "NodeName" in r for n in hostlist.expand(r["NodeName"])}


def nodes_gres_gres_conf(text: str) -> dict[str, str]:
    """node -> gpu:<type>:<count> over its gres.conf lines (one per socket run of GPUs with Cores=)."""
    found: dict[str, tuple[str, int]] = {}
    for r in records(text):
        assert r["Name"] == "gpu"
        count = len(hostlist.expand(r["File"]))
        for n in hostlist.expand(r["NodeName"]):
            gtype, before = found.get(n, (r["Type"], 0))
            assert gtype == r["Type"], f"{n} has two GPU types in gres.conf"
            found[n] = (gtype, before + count)
    return {n: f"gpu:{t}:{c}" for n, (t, c) in found.items()}


def tree_of(files: dict[str, str]) -> dict[str, dict]:
    """switch -> {"nodes": [...], "switches": [...]} from topology.conf or topology.yaml's tree."""
    if "topology.yaml" in files:
        doc = yaml.safe_load(files["topology.yaml"])
        tree = next(t for t in doc if t.get("cluster_default"))["tree"]["switches"]
        return {s["switch"]: {"nodes": hostlist.expand(s["nodes"]) if "nodes" in s else [],
                              "switches": hostlist.expand(s["children"]) if "children" in s else []}
                for s in tree}
    return {r["SwitchName"]: {"nodes": hostlist.expand(r.get("Nodes", "")) if "Nodes" in r else [],
                              "switches": hostlist.expand(r["Switches"]) if "Switches" in r else []}
            for r in records(files["topology.conf"]) if "SwitchName" in r}


def blocks_of(files: dict[str, str]) -> dict[str, dict]:
    """block topology name ("conf" for topology.conf) -> {"sizes": [...], "blocks": {name: nodes}}."""
    if "topology.yaml" in files:
        return {t["topology"]: {"sizes": t["block"]["block_sizes"],
                                "blocks": {b["block"]: hostlist.expand(b["nodes"]) for b in t["block"]["blocks"]}}
                for t in yaml.safe_load(files["topology.yaml"]) if "block" in t}
    recs = records(files["topology.conf"])
    blocks = {r["BlockName"]: hostlist.expand(r["Nodes"]) for r in recs if "BlockName" in r}
    sizes = [int(x) for r in recs if "BlockSizes" in r for x in r["BlockSizes"].split(",")]
    return {"conf": {"sizes": sizes, "blocks": blocks}} if blocks else {}


def partitions_of(conf: str) -> dict[str, dict[str, str]]:
    return {r["PartitionName"]: r for r in records(conf) if "PartitionName" in r}


def slurm_nodes(plan) -> list[str]:
    return list(plan.slurm_plane.nodes)


# ------------------------------------------------------------------ fleets used below


MULTI = dict(
    pools=[{"name": "a100", "nodes": 8, "gpu": {"type": "a100", "count": 4}, "cpus": 64, "memory_gib": 512},
           {"name": "l40s", "nodes": 4, "gpu": {"type": "l40s", "count": 2}, "cpus": 32, "memory_gib": 256},
           {"name": "cpu", "nodes": 4, "cpus": 128, "memory_gib": 1024}],
    workloads=[{"name": "train", "nodes": 4, "tightly_coupled": True, "pool": "a100", "tenant": "nlp"},
               {"name": "pipeline", "nodes": 2, "tightly_coupled": True, "python_native_pipeline": True,
                "pool": "l40s", "tenant": "vision"}],
    tenants=[{"name": "nlp", "share": 3}, {"name": "vision", "share": 1}],
)


def nvl_fleet(version: str, pools: list[dict] | None = None, **kw) -> dict:
    pools = pools or [{"name": "gb200", "nodes": 72, "gpu": {"type": "gb200", "count": 4}, "cpus": 144,
                       "memory_gib": 880, "nvlink_domain_nodes": 18}]
    return fleet("nvl", pools=pools, workloads=[{"name": "pt", "nodes": 2, "tightly_coupled": True}],
                 fabric={"kind": "infiniband", "nodes_per_leaf": 18, "leaves_per_spine": 2}, version=version, **kw)


H100_8 = {"name": "h100", "nodes": 16, "gpu": {"type": "h100", "count": 8}, "cpus": 224, "memory_gib": 2048}
GB200 = {"name": "gb200", "nodes": 36, "gpu": {"type": "gb200", "count": 4}, "cpus": 144, "memory_gib": 880,
         "nvlink_domain_nodes": 18}
GB300_8 = {"name": "nvl8", "nodes": 16, "gpu": {"type": "b200", "count": 8}, "cpus": 224, "memory_gib": 2048,
           "nvlink_domain_nodes": 8}

SLURM_EXAMPLES = ["fsdp-pretraining", "research-lab", "nvl72-blocks", "topology-yaml"]


def all_cases(tmp_path: Path):
    yield from ((name, example(name)) for name in SLURM_EXAMPLES + ["cloud-training"])
    yield "multi", plan_of(tmp_path, fleet(**MULTI), "multi.yaml")
    for v in ("22.05", "23.11", "24.05", "25.05"):
        yield f"nvl-{v}", plan_of(tmp_path, nvl_fleet(v), f"nvl-{v}.yaml")
    yield "mixed-24.11", plan_of(tmp_path, nvl_fleet("24.11", [GB200, H100_8]), "mixed.yaml")
    yield "two-sizes-25.11", plan_of(tmp_path, nvl_fleet("25.11", [GB200, GB300_8]), "two.yaml")


# ------------------------------------------------------------------ which plans get files


def test_no_slurm_plane_writes_nothing():
    plan = example("inference-platform")
    assert plan.slurm_plane is None
    assert render_slurm(plan) == {}
    assert not any(p.startswith("slurm/") for p in render(plan))
    with pytest.raises(OrchgenError):
        slurm_config(plan)


def test_slurm_on_kubernetes_has_config_but_no_slurm_dir():
    plan = example("cloud-training")
    assert plan.slurm_plane.host == "kubernetes"
    assert render_slurm(plan) == {}
    files = slurm_config(plan)  # what the Slinky renderer reuses
    assert {"slurm.conf", "gres.conf", "cgroup.conf", "accounts.sh"} <= set(files)
    assert set(nodes_gres_slurm_conf(files["slurm.conf"])) == set(slurm_nodes(plan))


@pytest.mark.parametrize("name", SLURM_EXAMPLES)
def test_bare_metal_examples_write_slurm_dir(name):
    plan = example(name)
    files = render(plan)
    slurm = {p for p in files if p.startswith("slurm/")}
    assert slurm == {f"slurm/{f}" for f in slurm_config(plan)}
    assert {"slurm/slurm.conf", "slurm/gres.conf", "slurm/cgroup.conf"} <= slurm
    assert b"## Slurm" in files["README.md"]


# ------------------------------------------------------------------ GRES, nodes, memory


def test_gres_identical_in_slurm_conf_and_gres_conf(tmp_path):
    for name, plan in all_cases(tmp_path):
        files = slurm_config(plan)
        in_conf = nodes_gres_slurm_conf(files["slurm.conf"])
        in_gres = nodes_gres_gres_conf(files["gres.conf"])
        assert list(in_conf) == slurm_nodes(plan), name
        assert in_gres == {n: g for n, g in in_conf.items() if g}, name
        for s in plan.slurm_plane.slices:
            want = f"gpu:{s.gpu_type}:{s.gpus_per_node}" if s.gpu_type else None
            assert {in_conf[n] for n in s.nodes} == {want}, (name, s.pool)


def test_only_the_slurm_planes_nodes(tmp_path):
    plan = example("research-lab")
    files = slurm_config(plan)
    text = "\n".join(files.values())
    assert "l40s" not in text  # the Kubernetes pool
    assert set(nodes_gres_slurm_conf(files["slurm.conf"])) == set(hostlist.expand("gpu-h100-[001-064]"))


def test_node_lines_are_one_per_pool_with_compressed_hostlists(tmp_path):
    plan = plan_of(tmp_path, fleet(**MULTI))
    recs = [r for r in records(slurm_config(plan)["slurm.conf"]) if "NodeName" in r]
    assert [r["NodeName"] for r in recs] == ["a100-[001-008]", "l40s-[001-004]", "cpu-[001-004]"]
    assert recs[0]["Features"] == "a100" and recs[2]["Features"] == "cpu"
    assert "Gres" not in recs[2]  # a CPU pool has no Gres and no gres.conf line
    assert recs[0]["CPUs"] == "64" and recs[0]["RealMemory"] == str((512 - 26) * 1024)


@pytest.mark.parametrize("gib,kept", [(4, 2), (8, 4), (16, 4), (64, 4), (80, 4), (100, 5), (512, 26),
                                      (2048, 103)])
def test_memory_headroom(gib, kept):
    assert headroom_gib(gib) == kept
    assert 0 < gib - kept


def test_headroom_rule_is_what_the_comments_say():
    from generator.render.slurm import model as slurm

    assert (slurm.HEADROOM_MIN_GIB, slurm.HEADROOM_FRACTION) == (4, 0.05)
    conf = slurm_config(example("fsdp-pretraining"))["slurm.conf"]
    assert "minus max(4 GiB, 5%)" in conf


# ------------------------------------------------------------------ topology


def test_topology_places_every_slurm_node_exactly_once(tmp_path):
    for name, plan in all_cases(tmp_path):
        files = slurm_config(plan)
        nodes = Counter(slurm_nodes(plan))
        blocks = blocks_of(files)
        if "topology.conf" in files and blocks:  # topology/block instead of the tree
            placed = Counter(n for b in blocks["conf"]["blocks"].values() for n in b)
        else:
            placed = Counter(n for s in tree_of(files).values() for n in s["nodes"])
        assert placed == nodes, name
        for topo in blocks.values():  # blocks are whole NVLink domains of Slurm nodes
            assert Counter(n for b in topo["blocks"].values() for n in b) <= nodes, name


def test_tree_shape_from_nodes_per_leaf_and_leaves_per_spine(tmp_path):
    tree = tree_of(slurm_config(example("fsdp-pretraining")))  # 16 nodes, 4 per leaf, one spine
    assert tree == {**{f"leaf00{i}": {"nodes": hostlist.expand(f"gpu[{4 * i - 3:03d}-{4 * i:03d}]"),
                                      "switches": []} for i in range(1, 5)},
                    "spine": {"nodes": [], "switches": ["leaf001", "leaf002", "leaf003", "leaf004"]}}
    doc = fleet(pools=[{"name": "h100", "nodes": 20, "gpu": {"type": "h100", "count": 8}}],
                workloads=[{"name": "t", "nodes": 8, "tightly_coupled": True}],
                fabric={"kind": "infiniband", "nodes_per_leaf": 4, "leaves_per_spine": 2})
    tree = tree_of(slurm_config(plan_of(tmp_path, doc)))
    assert [len(tree[f"leaf00{i}"]["nodes"]) for i in range(1, 6)] == [4] * 5
    assert tree["spine01"]["switches"] == ["leaf001", "leaf002"]
    assert tree["spine03"]["switches"] == ["leaf005"]
    assert tree["core"]["switches"] == ["spine01", "spine02", "spine03"]


def test_hybrid_keeps_only_the_slurm_leaves_and_their_spines():
    plan = example("research-lab")  # Kubernetes owns leaf005 under spine02
    tree = tree_of(slurm_config(plan))
    assert set(tree) == {"leaf001", "leaf002", "leaf003", "leaf004", "spine01"}  # no spine02, no core
    assert plan.fabric.core == "core"  # the whole fabric has one; one Slurm spine needs none


def test_one_leaf_fleet_is_one_switch(tmp_path):
    doc = fleet(pools=[{"name": "h100", "nodes": 4, "gpu": {"type": "h100", "count": 8}}],
                workloads=[{"name": "t", "nodes": 2, "tightly_coupled": True}],
                fabric={"kind": "infiniband", "nodes_per_leaf": 8})
    assert tree_of(slurm_config(plan_of(tmp_path, doc))) == {
        "leaf001": {"nodes": hostlist.expand("h100-[001-004]"), "switches": []}}


def _conf_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_version_2205_falls_back_to_the_tree_and_says_why(tmp_path):
    plan = plan_of(tmp_path, nvl_fleet("22.05"))
    files = slurm_config(plan)
    assert "topology.yaml" not in files
    assert "TopologyPlugin=topology/tree" in files["slurm.conf"]
    head = files["topology.conf"].splitlines()[:4]
    assert any(ln.startswith("# NOTE:") and "needs Slurm 23.11 and this is 22.05;" in ln for ln in head)
    assert not any(ln.startswith("Block") for ln in _conf_lines(files["topology.conf"]))
    readme = render(plan)["README.md"].decode()
    assert "topology/block needs Slurm 23.11" in readme


def test_version_2311_blocks_without_block_sizes(tmp_path):
    files = slurm_config(plan_of(tmp_path, nvl_fleet("23.11")))
    assert "TopologyPlugin=topology/block" in files["slurm.conf"]
    lines = _conf_lines(files["topology.conf"])
    assert lines == [f"BlockName=nvl00{i} Nodes=gb200-[{18 * i - 17:03d}-{18 * i:03d}]" for i in range(1, 5)]
    assert "BlockSizes needs" not in lines and "24.05" in files["topology.conf"]


def test_version_2405_blocks_with_block_sizes(tmp_path):
    files = slurm_config(plan_of(tmp_path, nvl_fleet("24.05")))
    assert "TopologyPlugin=topology/block" in files["slurm.conf"]
    assert blocks_of(files)["conf"]["sizes"] == [16, 32, 64]  # 2 spare trays per 18-node domain by default
    assert len(blocks_of(files)["conf"]["blocks"]) == 4


@pytest.mark.parametrize("domains,sizes", [(1, [16]), (2, [16, 32]), (3, [16, 32]), (4, [16, 32, 64]),
                                           (5, [16, 32, 64])])
def test_block_sizes_double_while_they_fit(tmp_path, domains, sizes):
    pool = dict(GB200, nodes=18 * domains)
    files = slurm_config(plan_of(tmp_path, nvl_fleet("24.11", [pool])))
    assert blocks_of(files)["conf"]["sizes"] == sizes


@pytest.mark.parametrize("spares,sizes", [(0, [18, 36, 72]), (1, [17, 34, 68]), (2, [16, 32, 64]), (4, [14, 28, 56])])
def test_spare_trays_per_domain_set_the_base_block_size(tmp_path, spares, sizes):
    """options.slurm.nvlink_spares: the base is the domain less its spares (issue 38: BlockSizes=18 on 18-tray
    domains takes a rack out of 18-node jobs when one tray drains); the blocks stay the whole domains."""
    doc = nvl_fleet("24.11", [dict(GB200, nodes=72)])
    doc["options"]["slurm"] = {"nvlink_spares": spares}
    files = slurm_config(plan_of(tmp_path, doc))
    assert blocks_of(files)["conf"]["sizes"] == sizes
    assert all(len(nodes) == 18 for nodes in blocks_of(files)["conf"]["blocks"].values())
    assert (f"each 18-node NVLink domain keeps {spares} spare" in files["topology.conf"]) is (spares > 0)


def test_too_many_spares_are_refused(tmp_path):
    doc = nvl_fleet("24.11", [dict(GB200, nodes=36)])
    doc["options"]["slurm"] = {"nvlink_spares": 18}
    with pytest.raises(OrchgenError, match="nvlink_spares 18 keeps every node of the 18-node NVLink domains spare"):
        slurm_config(plan_of(tmp_path, doc))


@pytest.mark.parametrize("version", ["25.05", "25.11", "26.05"])
def test_version_2505_topology_yaml_tree_and_blocks(tmp_path, version):
    files = slurm_config(plan_of(tmp_path, nvl_fleet(version, [GB200, H100_8])))
    assert "topology.conf" not in files
    assert not any(ln.startswith("TopologyPlugin") for ln in files["slurm.conf"].splitlines())
    doc = yaml.safe_load(files["topology.yaml"])
    assert [t["topology"] for t in doc] == ["fabric", "nvlink18"]
    assert [t["cluster_default"] for t in doc] == [True, False]
    parts = partitions_of(files["slurm.conf"])
    assert parts["gb200"]["Topology"] == "nvlink18"
    assert "Topology" not in parts["h100"] and "Topology" not in parts["all"]
    assert "Blocks lack access" in files["topology.yaml"]  # the expected warning is explained


def test_mixed_pools_before_2505_use_the_tree(tmp_path):
    files = slurm_config(plan_of(tmp_path, nvl_fleet("24.11", [GB200, H100_8])))
    assert "TopologyPlugin=topology/tree" in files["slurm.conf"]
    assert "# NOTE: NVLink domains not described: pool(s) h100 have none" in files["topology.conf"]


def test_two_domain_sizes(tmp_path):
    files = slurm_config(plan_of(tmp_path, nvl_fleet("24.11", [GB200, GB300_8])))
    assert "TopologyPlugin=topology/tree" in files["slurm.conf"]
    assert "sizes 8, 18" in files["topology.conf"]
    files = slurm_config(plan_of(tmp_path, nvl_fleet("25.11", [GB200, GB300_8])))
    topos = blocks_of(files)
    assert {n: t["sizes"] for n, t in topos.items()} == {"nvlink18": [16, 32], "nvlink8": [8, 16]}  # spares only in 16+
    parts = partitions_of(files["slurm.conf"])
    assert (parts["gb200"]["Topology"], parts["nvl8"]["Topology"]) == ("nvlink18", "nvlink8")


def test_nvlink_domains_are_never_split_between_planes(tmp_path):
    workloads = [{"name": "pt", "nodes": 8, "tightly_coupled": True, "pool": "gb200"},
                 {"name": "svc", "long_lived_services": True, "bare_metal": False, "pool": "gb200", "gpus": 80}]
    # 8-node leaves under 18-node domains: no leaf boundary is also a domain boundary inside the pool,
    # so whole leaves cannot split it (options.split: leaf refuses, as orchgen always did) ...
    doc = fleet(pools=[dict(GB200)], workloads=workloads, fabric={"kind": "infiniband", "nodes_per_leaf": 8},
                version="25.11", split="leaf")
    with pytest.raises(OrchgenError, match="never splits a leaf or an NVLink domain"):
        plan_of(tmp_path, doc)
    # ... and since issue 11 the default (auto) splits by node, at the domain boundary
    doc["options"]["split"] = "auto"
    plan = plan_of(tmp_path, doc)
    assert plan.slurm_plane.nodes == list(plan.fabric.domains[0].nodes)
    assert plan.kube_plane.nodes == list(plan.fabric.domains[1].nodes)
    assert any("kubernetes gets 18 nodes for a demand of 20: NVLink domains are never split" in r
               for r in plan.reasons)
    slurm_config(plan)
    # 9-node leaves: every second leaf boundary is a domain boundary, so the split lands on one
    doc = fleet(pools=[dict(GB200)], workloads=workloads, fabric={"kind": "infiniband", "nodes_per_leaf": 9},
                version="25.11")
    plan = plan_of(tmp_path, doc)
    slurm_nodes = set(plan.slurm_plane.nodes)
    assert slurm_nodes and set(plan.kube_plane.nodes)
    for domain in plan.fabric.domains:
        assert set(domain.nodes) <= slurm_nodes or not set(domain.nodes) & slurm_nodes
    slurm_config(plan)  # renders: every Slurm block is whole


# ------------------------------------------------------------------ partitions, tenants, Ray


def test_partitions(tmp_path):
    parts = partitions_of(slurm_config(example("fsdp-pretraining"))["slurm.conf"])
    assert list(parts) == ["all", "h100"]  # one class: no class partition
    assert parts["all"]["Nodes"] == "ALL" and parts["all"]["Default"] == "YES"
    assert "Default" not in parts["h100"] and parts["h100"]["Nodes"] == "gpu[001-016]"
    parts = partitions_of(slurm_config(plan_of(tmp_path, fleet(**MULTI)))["slurm.conf"])
    assert list(parts) == ["all", "a100", "l40s", "cpu", "training", "ray"]
    assert parts["training"]["Nodes"] == "a100-[001-008]" and parts["ray"]["Nodes"] == "l40s-[001-004]"
    assert parts["all"]["DefMemPerCPU"] == str(min((512 - 26) * 1024 // 64, 252 * 1024 // 32,
                                                  (1024 - 52) * 1024 // 128))


def test_tenants_give_fair_share_accounting_and_accounts_sh(tmp_path):
    files = slurm_config(plan_of(tmp_path, fleet(**MULTI)))
    conf = {k: v for r in records(files["slurm.conf"]) for k, v in r.items() if len(r) == 1}
    assert conf["PriorityType"] == "priority/multifactor"
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStorageTRES"] == "gres/gpu"
    script = files["accounts.sh"]
    assert _conf_lines(script)[-3:] == ["tenant nlp 3 -", "tenant vision 1 -", "prune"]
    assert "sacctmgr -i add account" in script and "fairshare=" in script


def test_no_tenants_no_slurmdbd(tmp_path):
    files = slurm_config(example("fsdp-pretraining"))
    assert "accounts.sh" not in files
    keys = {k for r in records(files["slurm.conf"]) for k in r}
    assert not {k for k in keys if k.startswith("AccountingStorage") or k.startswith("Priority")}


def test_no_secret_is_ever_written(tmp_path):
    secret_keys = {"storagepass", "accountingstoragepass", "jwtkey", "authinfo"}
    for name, plan in all_cases(tmp_path):
        for fname, text in slurm_config(plan).items():
            slurm_format = fname in ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf")  # key=value files
            keys = {k.lower() for r in records(text) for k in r} if slurm_format else set()
            assert not keys & secret_keys, (name, fname)
            assert not re.search(r"BEGIN .*PRIVATE KEY|password\s*=", text, re.I), (name, fname)


def test_ray_launcher(tmp_path):
    plan = plan_of(tmp_path, fleet(**MULTI))
    files = slurm_config(plan)
    script = files["ray-pipeline.sbatch"]
    directives = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
    assert "#SBATCH --partition=ray" in directives and "#SBATCH --nodes=2" in directives
    assert "#SBATCH --gres=gpu:2" in directives and "#SBATCH --account=vision" in directives
    assert "ray status" in script and "RAY_START_TIMEOUT" in script and "RAY_ENTRYPOINT" in script
    assert "ray-train.sbatch" not in files  # a training workload gets none


def test_shell_scripts_parse_and_pass_shellcheck(tmp_path):
    scripts = {n: t for n, t in slurm_config(plan_of(tmp_path, fleet(**MULTI))).items()
               if n.endswith((".sh", ".sbatch"))}
    assert set(scripts) == {"accounts.sh", "ray-pipeline.sbatch", "gpu-health.sh", "task-prolog.sh",
                            "prolog.d/50-orchgen-dcgm.sh", "epilog.d/50-orchgen-hygiene.sh"}
    for name, text in scripts.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
        shell = "bash" if text.startswith("#!/bin/bash") else "sh"
        subprocess.run([shell, "-n", str(tmp_path / name)], check=True)
    checker = shutil.which("shellcheck")
    require(checker, "shellcheck not installed (apt-get install shellcheck)")
    result = subprocess.run([checker, *(str(tmp_path / n) for n in scripts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


# ------------------------------------------------------------------ scale and determinism


BIG = fleet("big", pools=[{"name": "h100", "nodes": 8192, "gpu": {"type": "h100", "count": 8}},
                          {"name": "gb200", "nodes": 4032, "gpu": {"type": "gb200", "count": 4},
                           "nvlink_domain_nodes": 18}],
            workloads=[{"name": "t", "nodes": 1024, "tightly_coupled": True, "pool": "h100"},
                       {"name": "g", "nodes": 72, "tightly_coupled": True, "pool": "gb200"}],
            fabric={"kind": "infiniband", "nodes_per_leaf": 32, "leaves_per_spine": 16})


@pytest.mark.parametrize("version", ["22.05", "25.11"])
def test_ten_thousand_nodes_render_fast_and_compressed(tmp_path, version):
    plan = plan_of(tmp_path, dict(BIG, options={"slurm_version": version}))
    start = time.perf_counter()
    files = slurm_config(plan)
    assert time.perf_counter() - start < 5
    # the why-comments of both the hardware/ops and the policy blocks are ~8 KB on their own; what
    # must stay small whatever the node count is the configuration itself
    body = "\n".join(ln for ln in files["slurm.conf"].splitlines() if not ln.startswith("#"))
    # slurm.conf: the node lines compressed, plus a fixed set of commented settings
    # (25.11+: 12.7 kB with MetricsType's two lines of why)
    assert len(body) < 3_000 and len(files["slurm.conf"]) < 12_800 and len(files["gres.conf"]) < 2_000
    assert [r["NodeName"] for r in records(files["slurm.conf"]) if "NodeName" in r] == [
        "h100-[0001-8192]", "gb200-[0001-4032]"]
    topo = files.get("topology.conf") or files["topology.yaml"]
    assert len(topo) < 60_000
    assert sum(len(s["nodes"]) for s in tree_of(files).values()) == 12_224


def test_deterministic(tmp_path):
    plan = plan_of(tmp_path, fleet(**MULTI))
    assert slurm_config(plan) == slurm_config(plan_of(tmp_path, fleet(**MULTI)))
    path = tmp_path / "fleet.yaml"
    digests = set()
    for seed in ("0", "1"):
        out = tmp_path / f"out{seed}"
        subprocess.run([*orchgen_argv(), "plan", str(path), "-o", str(out)], check=True, capture_output=True,
                       cwd=REPO, env={**os.environ, "PYTHONHASHSEED": seed})
        digests.add(tuple(sorted((p.relative_to(out).as_posix(), p.read_bytes())
                                 for p in (out / "slurm").rglob("*") if p.is_file())))
    assert len(digests) == 1
    text = "".join(slurm_config(plan).values())
    # no timestamp; time limits (DefaultTime=04:00:00, MaxTime=7-00:00:00) are durations, not times
    text = re.sub(r"\b(?:\d+-)?\d\d:\d\d:00\b", "", text)
    assert not re.search(r"20\d\d-\d\d-\d\d|\d\d:\d\d:\d\d", text)


def test_model_is_the_one_source(tmp_path):
    m = model(plan_of(tmp_path, fleet(**MULTI)))
    assert [g.gres for g in m.groups] == ["gpu:a100:4", "gpu:l40s:2", None]
    assert [p.name for p in m.partitions][0] == "all"


# ------------------------------------------------------------------ refusals, through the CLI


def run_cli(tmp_path: Path, doc: dict) -> tuple[subprocess.CompletedProcess, Path]:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "bundle"
    result = subprocess.run([*orchgen_argv(), "plan", str(path), "-o", str(out)], capture_output=True, text=True,
                            cwd=REPO)
    return result, out


def _one(pools=None, **kw) -> dict:
    return fleet(pools=pools or [{"name": "h100", "nodes": 4, "gpu": {"type": "h100", "count": 8}}],
                 workloads=kw.pop("workloads", [{"name": "t", "nodes": 2, "tightly_coupled": True}]), **kw)


REFUSALS = [
    ("overlapping hostnames", _one([{"name": "a", "nodes": 2, "hostnames": "gpu[1-2]"},
                                    {"name": "b", "nodes": 2, "hostnames": "gpu[2-3]"}]),
     "fleet.pools[1].hostnames", "also in pool 'a'"),
    ("hostname Slurm cannot take", _one([{"name": "a", "nodes": 2, "hostnames": "GPU_[1-2]"}]),
     "fleet.pools[0].hostnames", "not a DNS-1123 label"),
    ("pool named all", _one([{"name": "all", "nodes": 4}]), "fleet.pools[0].name", "Nodes=ALL"),
    ("pool named default", _one([{"name": "default", "nodes": 4}]), "fleet.pools[0].name", "DEFAULT"),
    ("hostname default", _one([{"name": "a", "nodes": 2, "hostnames": "gpu1,default"}]),
     "fleet.pools[0].hostnames", "node name"),
    ("tenant root", _one(tenants=[{"name": "root"}]), "tenants[0].name", "root account"),
    ("cluster name too long", dict(_one(), metadata={"name": "a" * 41}), "metadata.name", "at most 40"),
]


@pytest.mark.parametrize("doc,field,text", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_cli_refuses_what_slurm_rejects(tmp_path, doc, field, text):
    result, out = run_cli(tmp_path, doc)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert re.match(rf"orchgen: \S*fleet\.yaml:\d+: {re.escape(field)}: ", lines[0]), lines[0]
    assert text in lines[0]
    assert not out.exists()


def test_cli_refuses_a_class_partition_named_like_a_pool(tmp_path):
    doc = fleet(**dict(MULTI, pools=[dict(MULTI["pools"][0], name="ray"), *MULTI["pools"][1:]],
                       workloads=[dict(MULTI["workloads"][0], pool="ray"), MULTI["workloads"][1]]))
    result, out = run_cli(tmp_path, doc)
    assert result.returncode == 2
    assert "fleet.pools[0].name: pool 'ray' would give a Slurm partition the name 'ray'" in result.stderr
    assert not out.exists()


def test_cli_refuses_a_split_nvlink_domain(tmp_path):
    doc = fleet(pools=[dict(GB200)],
                workloads=[{"name": "pt", "nodes": 8, "tightly_coupled": True, "pool": "gb200"},
                           {"name": "svc", "long_lived_services": True, "bare_metal": False, "pool": "gb200",
                            "gpus": 80}],
                fabric={"kind": "infiniband", "nodes_per_leaf": 8}, version="24.11", split="leaf")
    result, out = run_cli(tmp_path, doc)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "workloads: the slurm plane gets no nodes" in result.stderr
    assert "never splits a leaf or an NVLink domain" in result.stderr
    assert not out.exists()


# ------------------------------------------------------------------ site policy (issue 12)


def _part(files: dict[str, str], name: str) -> dict[str, str]:
    return partitions_of(files["slurm.conf"])[name]


def _single(conf: str) -> dict[str, str]:
    return {k: v for r in records(conf) for k, v in r.items() if len(r) == 1}


def test_time_limits_come_from_the_input_and_backfill_covers_them(tmp_path):
    doc = fleet(**dict(MULTI, workloads=[dict(MULTI["workloads"][0], max_time="2-00:00:00"),
                                         dict(MULTI["workloads"][1], max_time="90")]),
                slurm={"default_time": "02:30:00", "max_time": "3-00:00:00"})
    files = slurm_config(plan_of(tmp_path, doc))
    want = {"a100": "2-00:00:00", "l40s": "01:30:00", "cpu": "3-00:00:00", "all": "3-00:00:00",
            "training": "2-00:00:00", "ray": "01:30:00"}
    assert {n: p["MaxTime"] for n, p in partitions_of(files["slurm.conf"]).items()} == want
    # DefaultTime is the site's, but never above the partition's MaxTime
    assert {n: p["DefaultTime"] for n, p in partitions_of(files["slurm.conf"]).items()} == {
        n: ("01:30:00" if v == "01:30:00" else "02:30:00") for n, v in want.items()}
    conf = _single(files["slurm.conf"])
    assert conf["SchedulerParameters"].split(",")[:3] == ["bf_window=4320", "bf_resolution=300", "bf_continue"]
    assert conf["EnforcePartLimits"] == "ALL"
    assert not re.search(r"Time=(INFINITE|UNLIMITED)", files["slurm.conf"])


@pytest.mark.parametrize("longest,resolution", [("1-00:00:00", 60), ("7-00:00:00", 300), ("14-00:00:00", 600)])
def test_backfill_resolution_grows_with_the_window(tmp_path, longest, resolution):
    doc = fleet(pools=[H100_8], workloads=[{"name": "t", "nodes": 2, "tightly_coupled": True, "max_time": longest}],
                slurm={"max_time": "1-00:00:00"})
    m = model(plan_of(tmp_path, doc))
    assert m.backfill.window == max(p.max_time for p in m.partitions)
    assert m.backfill.resolution == resolution


def test_gpu_defaults_follow_the_usable_node_shape(tmp_path):
    m = model(plan_of(tmp_path, fleet(**MULTI)))
    parts = {p.name: p for p in m.partitions}
    a100, l40s = m.groups[0], m.groups[1]
    assert (parts["a100"].cpu_per_gpu, parts["a100"].mem_per_gpu) == (64 // 4, a100.real_memory // 4)
    assert (parts["l40s"].cpu_per_gpu, parts["l40s"].mem_per_gpu) == (32 // 2, l40s.real_memory // 2)
    # a partition over several GPU shapes takes the smallest share, which fits on each
    assert parts["all"].mem_per_gpu == min(a100.real_memory // 4, l40s.real_memory // 2)
    assert not parts["cpu"].cpu_per_gpu and "DefCpuPerGPU" not in _part(slurm_config(plan_of(tmp_path, fleet(**MULTI))), "cpu")
    # fewer CPUs than GPUs on a node: no whole CPU per GPU, so no DefCpuPerGPU (memory still)
    few = fleet(pools=[dict(H100_8, cpus=4)], workloads=[{"name": "t", "nodes": 2, "tightly_coupled": True}])
    line = _part(slurm_config(plan_of(tmp_path, few)), "h100")
    assert "DefCpuPerGPU" not in line and int(line["DefMemPerGPU"]) > 0


def test_gpu_defaults_and_billing_follow_reserved_and_mig(tmp_path):
    """DefCpuPerGPU/DefMemPerGPU/DefMemPerCPU and the GPU billing weight count what jobs may use: the
    CPUs less CoreSpecCount's cores x threads, RealMemory less MemSpecLimit; with MIG, per instance."""
    pool = {"name": "h100", "nodes": 4, "cpu": {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2},
            "memory_gib": 2048, "reserved": {"cores": 4, "memory_gib": 64}, "gpu": {"type": "h100", "count": 8}}
    doc = fleet(pools=[pool], workloads=[{"name": "t", "nodes": 2, "tightly_coupled": True, "tenant": "nlp"}],
                tenants=[{"name": "nlp", "share": 1}])
    files = slurm_config(plan_of(tmp_path, doc))
    node = next(r for r in records(files["slurm.conf"]) if "NodeName" in r)
    real, spec = int(node["RealMemory"]), int(node["MemSpecLimit"])
    assert (node["CoreSpecCount"], spec) == ("4", 64 * 1024)
    line = _part(files, "h100")
    assert int(line["DefCpuPerGPU"]) == (224 - 4 * 2) // 8 == 27
    assert int(line["DefMemPerGPU"]) == (real - spec) // 8
    assert int(line["DefMemPerCPU"]) == (real - spec) // (224 - 8)
    assert line["TRESBillingWeights"].endswith(f"GRES/gpu={(224 - 8) / 8}")
    mig = dict(pool, gpu={"type": "h100", "count": 8, "mig": {"profile": "1g.10gb", "per_gpu": 7}})
    files = slurm_config(plan_of(tmp_path, dict(doc, fleet=dict(doc["fleet"], pools=[mig]))))
    line = _part(files, "h100")  # --gres=gpu:1 is one of 56 instances
    assert int(line["DefCpuPerGPU"]) == 216 // 56 and int(line["DefMemPerGPU"]) == (real - spec) // 56


def test_default_partition_is_cpu_only_when_there_is_a_cpu_pool(tmp_path):
    parts = partitions_of(slurm_config(plan_of(tmp_path, fleet(**MULTI)))["slurm.conf"])
    assert [n for n, p in parts.items() if p.get("Default") == "YES"] == ["cpu"]
    parts = partitions_of(slurm_config(example("fsdp-pretraining"))["slurm.conf"])
    assert [n for n, p in parts.items() if p.get("Default") == "YES"] == ["all"]  # no CPU pool
    two = fleet(**dict(MULTI, pools=[*MULTI["pools"][:2], dict(MULTI["pools"][2], name="cpua"),
                                     dict(MULTI["pools"][2], name="cpub", hostnames="cpub-[001-004]")]))
    parts = partitions_of(slurm_config(plan_of(tmp_path, two))["slurm.conf"])
    assert [n for n, p in parts.items() if p.get("Default") == "YES"] == ["cpu"]
    assert parts["cpu"]["Nodes"] == "cpua-[001-004],cpub-[001-004]"
    # GPU nodes weigh more than CPU nodes: Slurm fills the lighter nodes first
    nodes = {r["NodeName"]: r["Weight"] for r in records(slurm_config(plan_of(tmp_path, fleet(**MULTI)))["slurm.conf"])
             if "NodeName" in r}
    assert nodes == {"a100-[001-008]": "100", "l40s-[001-004]": "100", "cpu-[001-004]": "1"}


def test_readme_says_why_the_default_partition_is_not_cpu_only(tmp_path):
    from generator.render import render

    readme = render(example("fsdp-pretraining"))["README.md"].decode()
    assert "The default partition is `all`: the Slurm plane has no CPU pool" in readme
    readme = render(plan_of(tmp_path, fleet(**MULTI)))["README.md"].decode()
    assert "The default partition `cpu` is CPU-only" in readme


def test_billing_makes_a_default_gpu_job_cost_its_gpus(tmp_path):
    m = model(plan_of(tmp_path, fleet(**MULTI)))
    groups = {g.pool: g for g in m.groups}
    for p in m.partitions:
        assert p.billing is not None
        for g in (groups[pool] for pool in p.pools if groups[pool].gres):
            for gpus in range(1, g.gpus + 1):  # the job's default CPUs and memory, on each GPU shape
                cpu_term = gpus * p.cpu_per_gpu * 1.0
                mem_term = gpus * p.mem_per_gpu / 1024 * p.billing.mem_per_gib
                assert max(cpu_term, mem_term) <= gpus * p.billing.gpu, (p.name, g.pool, gpus)
    conf = _single(slurm_config(plan_of(tmp_path, fleet(**MULTI)))["slurm.conf"])
    assert conf["PriorityFlags"] == "MAX_TRES" and conf["PriorityWeightTRES"] == "GRES/gpu=2000"
    assert conf["PreemptType"] == "preempt/qos" and conf["PreemptMode"] == "REQUEUE"
    assert conf["AccountingStorageEnforce"] == "associations,limits,qos"


def test_no_tenants_no_billing_qos_or_slurmdbd_files(tmp_path):
    files = slurm_config(example("fsdp-pretraining"))
    assert not {"slurmdbd.conf", "mariadb-slurm.cnf", "accounts.sh"} & set(files)
    keys = {k for r in records(files["slurm.conf"]) for k in r}
    assert not keys & {"TRESBillingWeights", "PreemptType", "PriorityWeightTRES"}
    assert {"DefaultTime", "MaxTime", "DefCpuPerGPU", "DefMemPerGPU", "SchedulerParameters"} <= keys


@pytest.mark.parametrize("hosts,want", [(None, "set-fleet-slurm-controllers"), ({"controllers": ["ctl1", "ctl2"]}, "ctl1"),
                                        ({"controllers": ["ctl1"], "accounting": "db1"}, "db1")])
def test_slurmdbd_conf_host_and_no_password(tmp_path, hosts, want):
    doc = fleet(**MULTI)
    if hosts:
        doc["fleet"]["slurm"] = hosts
    for version, line in (("22.05", "Include /etc/slurm/slurmdbd-storage-pass.conf"),
                          ("25.11", "StoragePassScript=/etc/slurm/slurmdbd-storage-pass.sh")):
        doc["options"]["slurm_version"] = version
        files = slurm_config(plan_of(tmp_path, doc))
        text = files["slurmdbd.conf"]
        recs = records(text)
        assert {"DbdHost": want} in recs
        assert {"AccountingStorageHost": want} in records(files["slurm.conf"])  # the same host
        assert line in [ln for ln in text.splitlines() if not ln.startswith("#")]
        assert not [r for r in recs if "StoragePass" in r]
        assert ("placeholder" in text) is (hosts is None)


def test_mariadb_snippet_has_schedmds_settings(tmp_path):
    text = slurm_config(plan_of(tmp_path, fleet(**MULTI)))["mariadb-slurm.cnf"]
    settings = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln and not ln.startswith("#"))
    assert settings == {"innodb_buffer_pool_size": "4096M", "innodb_log_file_size": "1024M",
                        "innodb_lock_wait_timeout": "900", "max_allowed_packet": "16M",
                        "loose-innodb_snapshot_isolation": "OFF"}


def test_accounts_sh_carries_users_groups_and_caps(tmp_path):
    doc = fleet(**dict(MULTI, tenants=[{"name": "nlp", "share": 3, "users": ["alice", "bob"], "max_gpus": 32},
                                       {"name": "vision", "share": 1, "unix_group": "cv-team"}]))
    script = slurm_config(plan_of(tmp_path, doc))["accounts.sh"]
    assert _conf_lines(script)[-6:] == ["tenant nlp 3 32", "tenant vision 1 -", "member nlp alice", "member nlp bob",
                                        "group vision cv-team", "prune"]
    for qos in ("add qos scavenger", "Preempt+=scavenger", "Flags+=NoReserve", "UsageFactor=0", "qos+=normal,scavenger"):
        assert qos in script


POLICY_KEYS = ("SchedulerParameters", "EnforcePartLimits", "PriorityFlags", "PriorityDecayHalfLife", "PriorityMaxAge",
               "PriorityWeightFairshare", "PriorityWeightQOS", "PriorityWeightTRES", "PriorityWeightAge",
               "AccountingStorageTRES", "AccountingStorageEnforce", "PreemptType", "PreemptMode")


def test_every_site_tunable_value_says_why(tmp_path):
    """Each policy key's paragraph (the lines above it up to a blank line) carries a comment."""
    files = slurm_config(plan_of(tmp_path, fleet(**MULTI)))
    lines = files["slurm.conf"].splitlines()
    for key in POLICY_KEYS:
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"{key}="))
        above = []
        for ln in reversed(lines[:at]):
            if not ln.strip():
                break
            above.append(ln)
        assert any(ln.startswith("#") for ln in above), key
    for name in ("slurmdbd.conf", "mariadb-slurm.cnf"):  # the same, paragraph by paragraph
        paragraph_commented = False
        for ln in files[name].splitlines():
            if ln.startswith("#"):
                paragraph_commented = True
            elif ln and not ln.startswith("[") and not ln.startswith(("AuthType", "LogFile", "PidFile")):
                assert paragraph_commented, (name, ln)
            elif not ln:
                paragraph_commented = False
