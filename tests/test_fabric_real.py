"""The fabric as cabled and the split by node (issues 10 and 11), proven by a real Slurm: each bundle
is written by the CLI and its slurm/ booted unchanged by tests/slurmharness, and `scontrol show
topology` is compared with what the INPUT says (the leaves in workload.yaml, or the imported file),
not with the files orchgen wrote:

* the SuperPOD example as cabled (dgx032 absent, 8 spine groups over 4 SUs), Slurm 24.11: every SU on
  Slurm, node for node, but the one node its Kubernetes eval needs (dgx128 off su4-leaf);
* two pools sharing each of two leaves (22.05): the leaves hold both pools' nodes, and a
  `--switches=1` job lands on one leaf across the pools;
* the one-switch university lab (22.05): both planes planned, the Slurm side boots with only its own
  A100 nodes under the one switch, and a GPU job runs on the A100 partition;
* each importer's result re-rendered: topology.conf (the SuperPOD, 22.05), ibnetdiscover (rail
  groups, 22.05), topology.conf blocks (24.11) and topology.yaml tree + blocks (26.05): the booted
  topology is the imported file's.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from generator.spec.importers import load as import_file
from tests.slurmharness import SlurmCluster, expand_hostlist, parse, require_slurm
from tests.support import on_kubernetes
from tests.test_slurm_real import (Planned, bundle, check_blocks, check_clean_log, check_nodes, check_partitions,
                                   check_tree, gpu_job, nodes_of_batch, busy, switches_job)

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
DATA = REPO / "tests" / "data" / "fabric"
pytestmark = pytest.mark.slurm


def input_tree(doc: dict) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(leaf -> nodes, spine -> leaves) as workload.yaml's fleet.fabric writes them."""
    fab = doc["fleet"]["fabric"]
    leaves = {leaf["name"]: set(expand_hostlist(leaf["nodes"])) for leaf in fab["leaves"]}
    spines = {s["name"]: set(s["leaves"]) for s in fab.get("spines") or []}
    if not fab.get("spines") and len(leaves) > 1:
        spines = {"spine": set(leaves)}
    return leaves, spines


def booted_tree(c: SlurmCluster, *args: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    got = parse.switches(c.topology(*args))
    return ({n: s["nodes"] for n, s in got.items() if s["level"] == 0},
            {n: s["switches"] for n, s in got.items() if s["level"] == 1})


# ------------------------------------------------------------------ explicit leaves


@pytest.mark.chroot
def test_superpod_as_cabled_keeps_every_su_on_slurm_but_the_eval_node_2411(tmp_path):
    require_slurm("trixie")
    # its eval pinned to Kubernetes (issue 36's rule keeps it on Slurm otherwise): the one-node split is the subject
    source = on_kubernetes("superpod", "eval-harness", tmp_path=tmp_path)
    doc = yaml.safe_load(source.read_text())
    out = bundle(tmp_path, source)
    p = Planned(out)
    assert p.plan["planes"]["kubernetes"]["nodes"] == ["dgx128"]  # the eval's one node, not an SU
    leaves, spines = input_tree(doc)
    want = {name: nodes - {"dgx128"} for name, nodes in leaves.items()}
    with SlurmCluster(out / "slurm", suite="trixie") as c:
        assert c.version.startswith("24.11")
        check_clean_log(c, p)
        check_nodes(c, p)
        got_leaves, got_spines = booted_tree(c)
        assert got_leaves == want  # node for node: dgx032 nowhere, su4-leaf without dgx128
        assert got_spines == spines and len(got_spines) == 8
        assert "dgx032" not in c.nodes() and "dgx128" not in c.nodes()
        check_partitions(c, p)
        gpu_job(c, p, "dgx", nodes=4)
        # a job of one SU's size with dgx001 busy lands on one whole SU of 32 (su1 has only 31)
        holder = busy(c, "dgx001", "dgx")
        try:
            got = nodes_of_batch(c, "-p", "dgx", "-N", "32", "--switches=1@00:00:30", "--exclusive")
        finally:
            c.run("scancel", holder)
        assert got in (want["su2-leaf"], want["su3-leaf"]), sorted(got)[:3]


def test_two_pools_share_each_leaf_2205(tmp_path):
    require_slurm("bookworm")
    doc = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "shared-leaves"},
           "fleet": {"bare_metal": True, "slurm": {"controllers": ["head1"]},
                     "fabric": {"kind": "infiniband",
                                "leaves": [{"name": "rack1", "nodes": "a100-[1-2],l40s-[1-2]"},
                                           {"name": "rack2", "nodes": "a100-[3-4],l40s-[3-4]"}]},
                     "pools": [{"name": "a100", "nodes": 4, "hostnames": "a100-[1-4]",
                                "gpu": {"type": "a100", "count": 4}, "cpus": 64, "memory_gib": 512},
                               {"name": "l40s", "nodes": 4, "hostnames": "l40s-[1-4]",
                                "gpu": {"type": "l40s", "count": 2}, "cpus": 32, "memory_gib": 256}]},
           "workloads": [{"name": "train", "nodes": 4, "tightly_coupled": True, "pool": "a100"},
                         {"name": "render", "nodes": 2, "tightly_coupled": True, "pool": "l40s"}],
           "options": {"slurm_version": "22.05"}}
    out = bundle(tmp_path, doc)
    p = Planned(out)
    leaves, spines = input_tree(doc)
    with SlurmCluster(out / "slurm") as c:
        check_clean_log(c, p)
        check_nodes(c, p)
        check_tree(c, p)
        assert booted_tree(c) == (leaves, spines)  # each leaf holds both pools' nodes
        check_partitions(c, p)
        gpu_job(c, p, "a100", nodes=2)
        gpu_job(c, p, "l40s", nodes=2)
        holder = busy(c, "a100-1", "a100")
        try:
            got = nodes_of_batch(c, "-p", "all", "-N", "4", "--switches=1@00:00:30", "--exclusive")
        finally:
            c.run("scancel", holder)
        assert got == leaves["rack2"]  # one leaf, across the two pools


def test_one_switch_lab_plans_both_planes_and_boots_only_its_slurm_nodes_2205(tmp_path):
    require_slurm("bookworm")
    # model-eval and data-prep pinned to Kubernetes (issue 36's rule keeps them on Slurm otherwise), so the A100
    # pool is split by node on the one switch, which is the subject here
    out = bundle(tmp_path, on_kubernetes("university-lab", "model-eval", "data-prep", tmp_path=tmp_path))
    p = Planned(out)
    assert set(p.plan["planes"]) == {"slurm", "kubernetes"}
    assert p.nodes == expand_hostlist("a100-[01-07]")
    assert p.plan["split"]["shared_leaves"][0]["leaf"] == "ib-lab"
    with SlurmCluster(out / "slurm") as c:
        check_clean_log(c, p)
        check_nodes(c, p)  # only its own nodes: no L40S, CPU or Kubernetes A100 node
        assert booted_tree(c) == ({"ib-lab": set(expand_hostlist("a100-[01-07]"))}, {})
        check_partitions(c, p)
        gpu_job(c, p, "a100", nodes=2)


# ------------------------------------------------------------------ imports, re-rendered


def import_fleet(tmp_path: Path, kind: str, name: str, version: str, **fabric) -> dict:
    """A fleet whose fabric is `from` the fixture, with one pool of every node it cables."""
    (tmp_path / "site").mkdir()
    shutil.copy(DATA / name, tmp_path / "site" / name)
    imp = import_file(kind, DATA / name)
    nodes = [n for leaf in imp.leaves for n in leaf.nodes] or [n for b in imp.blocks for n in b.nodes]
    from generator.spec.hostlist import compress

    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "imported"},
            "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "from": {kind: f"site/{name}"}, **fabric},
                      "pools": [{"name": "gpu", "nodes": len(nodes), "hostnames": compress(sorted(nodes)),
                                 "gpu": {"type": "h100", "count": 4}, "cpus": 32, "memory_gib": 256}]},
            "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"slurm_version": version}}


@pytest.mark.parametrize("kind,name", [("topology_conf", "superpod-topology.conf"),
                                       ("ibnetdiscover", "ib-rail.ibnetdiscover")])
def test_imported_tree_re_rendered_boots_as_the_file_2205(tmp_path, kind, name):
    require_slurm("bookworm")
    imp = import_file(kind, DATA / name)
    out = bundle(tmp_path, import_fleet(tmp_path, kind, name, "22.05"))
    p = Planned(out)
    with SlurmCluster(out / "slurm", wait_idle_s=0) as c:
        got_leaves, got_spines = booted_tree(c)
        assert c.problems() == []
    assert got_leaves == {leaf.name: set(leaf.nodes) for leaf in imp.leaves}
    assert got_spines == {s.name: set(s.leaves) for s in imp.spines}
    assert p.plan["fabric"]["source"] == kind


@pytest.mark.chroot
def test_imported_blocks_re_rendered_boot_as_the_file_2411(tmp_path):
    require_slurm("trixie")
    imp = import_file("topology_conf", DATA / "nvl72-topology.conf")
    out = bundle(tmp_path, import_fleet(tmp_path, "topology_conf", "nvl72-topology.conf", "24.11", nodes_per_leaf=36))
    p = Planned(out)
    with SlurmCluster(out / "slurm", suite="trixie") as c:
        check_clean_log(c, p)
        check_nodes(c, p)
        blocks = c.blocks()
        assert {n: b["nodes"] for n, b in blocks.items() if not b["aggregated"]} == \
            {b.name: set(b.nodes) for b in imp.blocks}
        assert sorted({b["size"] for b in blocks.values()}) == [18, 36, 72]  # the file's BlockSizes=18,36,72
        check_blocks(c, p, 18)


@pytest.mark.chroot
def test_imported_topology_yaml_re_rendered_boots_as_the_file_2605(tmp_path):
    require_slurm("forky")
    imp = import_file("topology_yaml", DATA / "nvl72-topology.yaml")
    out = bundle(tmp_path, import_fleet(tmp_path, "topology_yaml", "nvl72-topology.yaml", "25.11"))
    p = Planned(out)
    with SlurmCluster(out / "slurm", suite="forky") as c:
        assert c.version.startswith("26.05")
        check_clean_log(c, p)
        check_nodes(c, p)
        assert booted_tree(c) == ({leaf.name: set(leaf.nodes) for leaf in imp.leaves},
                                  {s.name: set(s.leaves) for s in imp.spines})
        blocks = c.blocks("nvlink18")
        assert {n: b["nodes"] for n, b in blocks.items() if not b["aggregated"]} == \
            {b.name: set(b.nodes) for b in imp.blocks}
        switches_job(c, p, "gpu", partition="all")
