"""The fabric as cabled (issue 10): fleet.fabric.leaves / spines / core, fleet.fabric.from (an
import), or the nodes_per_leaf shorthand, into the one fabric model every artifact follows.

* the model, node for node, from explicit leaves (the irregular SuperPOD, a one-switch lab, two
  pools on one leaf) and from each importer's fixture (tests/data/fabric/), blocks as NVLink domains;
* bad input: one stderr line `file:line: field: message`, exit 2, nothing written, the line being
  workload.yaml's or the imported file's;
* every artifact follows the model: Slurm topology, node labels, Kueue/KAI levels, Volcano
  HyperNodes, plan.json; and `orchgen validate` catches a bundle that leaves it.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.decide import make_plan
from generator.render import render
from generator.render.kubernetes import volcano
from generator.spec import Fleet, hostlist
from generator.spec.fabric import LABEL_LEAF, LABEL_NVLINK, LABEL_SPINE
from generator.validate.bundle_checks import validate_bundle as check

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
DATA = REPO / "tests" / "data" / "fabric"


def fleet(pools: list[dict], fabric: dict, workloads: list[dict] | None = None, **options) -> dict[str, Any]:
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "fab"},
            "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", **fabric}, "pools": pools},
            "workloads": workloads or [{"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"slurm_version": "22.05", **options}}


def write(tmp_path: Path, doc: dict, name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


from .support import on_kubernetes, plan_of  # noqa: E402


def leaves(plan) -> dict[str, str]:
    return {leaf.name: hostlist.compress(leaf.nodes) for leaf in plan.fabric.leaves}


DGX = {"name": "dgx", "nodes": 127, "hostnames": "dgx[001-031,033-128]", "gpu": {"type": "h100", "count": 8}}
A100 = {"name": "a100", "nodes": 4, "hostnames": "a100-[1-4]", "gpu": {"type": "a100", "count": 8}}
L40S = {"name": "l40s", "nodes": 4, "hostnames": "l40s-[1-4]", "gpu": {"type": "l40s", "count": 4}}
SHARED = {"leaves": [{"name": "rack1", "nodes": "a100-[1-2],l40s-[1-2]"},
                     {"name": "rack2", "nodes": "a100-[3-4],l40s-[3-4]"}]}


# ------------------------------------------------------------------ the model


def test_superpod_leaves_as_cabled_dgx032_absent():
    plan = plan_of(EXAMPLES / "superpod.yaml")
    fab = plan.fabric
    assert fab.source == "leaves" and fab.nodes_per_leaf is None
    assert leaves(plan) == {"su1-leaf": "dgx[001-031]", "su2-leaf": "dgx[033-064]", "su3-leaf": "dgx[065-096]",
                            "su4-leaf": "dgx[097-128]"}
    assert [s.name for s in fab.spines] == [f"spine-g{i}" for i in range(1, 9)] and fab.core is None
    # every SU is under all 8 spine groups; Kubernetes labels a leaf with its first
    assert all(leaf.spines == tuple(f"spine-g{i}" for i in range(1, 9)) for leaf in fab.leaves)
    assert fab.node_labels("dgx128") == {"orchgen.io/pool": "dgx", LABEL_LEAF: "su4-leaf", LABEL_SPINE: "spine-g1"}
    # the shorthand cut the same pool by position: SU boundaries shifted by dgx032's absence
    short = yaml.safe_load((EXAMPLES / "superpod.yaml").read_text())
    short["fleet"]["fabric"] = {"kind": "infiniband", "nodes_per_leaf": 32}
    plan = make_plan(Fleet.model_validate(short), "superpod.yaml")
    assert leaves(plan)["leaf001"] == "dgx[001-031,033]"


def test_one_switch_invents_no_switch():
    plan = plan_of(EXAMPLES / "university-lab.yaml")
    assert leaves(plan) == {"ib-lab": "a100-[01-08],l40s-[01-04],cpu-[01-04]"}
    assert plan.fabric.spines == () and plan.fabric.core is None and plan.fabric.levels == [LABEL_LEAF]
    assert plan.fabric.leaves[0].pools == ("a100", "l40s", "cpu")


def test_two_pools_share_a_leaf(tmp_path):
    plan = plan_of(write(tmp_path, fleet([A100, L40S], SHARED)))
    assert leaves(plan) == {"rack1": "a100-[1-2],l40s-[1-2]", "rack2": "a100-[3-4],l40s-[3-4]"}
    assert [leaf.pools for leaf in plan.fabric.leaves] == [("a100", "l40s")] * 2
    # absent spines: one spine named `spine` over all leaves (the input format says so)
    assert [(s.name, s.leaves) for s in plan.fabric.spines] == [("spine", ("rack1", "rack2"))]
    assert plan.fabric.pool_nodes("a100") == hostlist.expand("a100-[1-4]")
    slurm = {s.pool: s for s in plan.slurm_plane.slices}
    assert slurm["a100"].leaves == ("rack1", "rack2")


@pytest.mark.parametrize("kind,name,pools", [
    ("topology_conf", "superpod-topology.conf", [DGX]),
    ("topology_conf", "lab-topology.conf", [{"name": "ws", "nodes": 6, "hostnames": "ws-b214-[01-06]",
                                             "gpu": {"type": "rtx4090", "count": 1}}]),
    ("topology_yaml", "nvl72-topology.yaml", [{"name": "gb200", "nodes": 72, "gpu": {"type": "gb200", "count": 4},
                                               "hostnames": "gb200-r[01-04]-t[01-18]"}]),
    ("ibnetdiscover", "ib-2leaf.ibnetdiscover", [{"name": "a", "nodes": 4, "hostnames": "gpu[01-04]"},
                                                 {"name": "b", "nodes": 4, "hostnames": "gpu[05-08]"}]),
    ("ibnetdiscover", "ib-rail.ibnetdiscover", [{"name": "gpu", "nodes": 8, "hostnames": "gpu[01-08]",
                                                 "gpu": {"type": "h100", "count": 8}}]),
])
def test_import_is_the_file(tmp_path, kind, name, pools):
    from generator.spec.importers import load

    (tmp_path / "site").mkdir()
    shutil.copy(DATA / name, tmp_path / "site" / name)
    path = write(tmp_path, fleet(pools, {"from": {kind: f"site/{name}"}}))
    plan = plan_of(path)
    imported = load(kind, DATA / name)
    assert plan.fabric.source == kind and plan.fabric.source_file == f"site/{name}"
    assert [(leaf.name, leaf.nodes) for leaf in plan.fabric.leaves] == [(leaf.name, leaf.nodes) for leaf in imported.leaves]
    assert [(s.name, s.leaves) for s in plan.fabric.spines] == [(s.name, s.leaves) for s in imported.spines]
    assert [(d.name, d.nodes) for d in plan.fabric.domains] == [(b.name, b.nodes) for b in imported.blocks]
    data = json.loads(render(plan)["plan.json"])
    assert data["fabric"]["source"] == kind and data["fabric"]["file"] == f"site/{name}"


def test_blocks_are_the_nvlink_domains(tmp_path):
    (tmp_path / "site").mkdir()
    shutil.copy(DATA / "nvl72-topology.yaml", tmp_path / "site" / "t.yaml")
    gb200 = {"name": "gb200", "nodes": 72, "gpu": {"type": "gb200", "count": 4}, "hostnames": "gb200-r[01-04]-t[01-18]"}
    plan = plan_of(write(tmp_path, fleet([gb200], {"from": {"topology_yaml": "site/t.yaml"}}, slurm_version="25.11")))
    assert [d.name for d in plan.fabric.domains] == ["nvl-r01", "nvl-r02", "nvl-r03", "nvl-r04"]
    assert plan.fabric.domain_nodes("gb200") == 18  # from the blocks: the pool gave no nvlink_domain_nodes
    assert plan.slurm_plane.slices[0].nvlink_domain_nodes == 18
    topo = yaml.safe_load(render(plan)["slurm/topology.yaml"])
    assert [b["block"] for b in topo[1]["block"]["blocks"]] == ["nvl-r01", "nvl-r02", "nvl-r03", "nvl-r04"]
    assert topo[1]["block"]["block_sizes"] == [18, 36, 72]
    # a topology.conf of blocks only: the NVLink domains, and the leaves from nodes_per_leaf
    shutil.copy(DATA / "nvl72-topology.conf", tmp_path / "site" / "t.conf")
    plan = plan_of(write(tmp_path, fleet([gb200], {"from": {"topology_conf": "site/t.conf"}, "nodes_per_leaf": 36},
                                         slurm_version="24.11")))
    assert [d.name for d in plan.fabric.domains] == ["nvl-r01", "nvl-r02", "nvl-r03", "nvl-r04"]
    assert len(plan.fabric.leaves) == 2
    assert "BlockName=nvl-r01 Nodes=gb200-r01-t[01-18]" in render(plan)["slurm/topology.conf"].decode()
    assert "BlockSizes=18,36,72" in render(plan)["slurm/topology.conf"].decode()  # the file's: no spares
    # a site that keeps 2 trays of each rack spare (BlockSizes=16,...): re-planned, it keeps them (issue 38)
    (tmp_path / "site" / "t.conf").write_text((DATA / "nvl72-topology.conf").read_text()
                                              .replace("BlockSizes=18,36,72", "BlockSizes=16,32"))
    plan = plan_of(write(tmp_path, fleet([gb200], {"from": {"topology_conf": "site/t.conf"}, "nodes_per_leaf": 36},
                                         slurm_version="24.11")))
    assert "BlockSizes=16,32,64" in render(plan)["slurm/topology.conf"].decode()


def test_shorthand_is_unchanged():
    plan = plan_of(EXAMPLES / "research-lab.yaml")
    assert plan.fabric.source == "shorthand" and plan.fabric.nodes_per_leaf == 16
    assert leaves(plan) == {"leaf001": "gpu-h100-[001-016]", "leaf002": "gpu-h100-[017-032]",
                            "leaf003": "gpu-h100-[033-048]", "leaf004": "gpu-h100-[049-064]",
                            "leaf005": "l40s-[001-016]"}
    assert [(s.name, s.leaves) for s in plan.fabric.spines] == [("spine01", ("leaf001", "leaf002", "leaf003", "leaf004")),
                                                               ("spine02", ("leaf005",))]
    assert plan.fabric.core == "core"


def test_spines_no_switch_joins_plan_with_a_warning(tmp_path):
    doc = fleet([A100, L40S], {**SHARED, "spines": [{"name": "s1", "leaves": ["rack1"]}, {"name": "s2", "leaves": ["rack2"]}]})
    doc["fleet"]["slurm"] = {"controllers": ["head01"]}  # else the placeholder SlurmctldHost warns too (issue 10)
    plan = plan_of(write(tmp_path, doc))
    fabric_warnings = lambda p: [w for w in p.warnings if w.field.startswith("fleet.fabric")]  # noqa: E731
    (w,) = fabric_warnings(plan)  # (a fleet without fleet.slurm also gets the controllers' warning)
    assert w.field == "fleet.fabric.spines" and "no switch joins the leaves rack1; rack2" in w.message
    doc["fleet"]["fabric"]["core"] = "core1"
    plan = plan_of(write(tmp_path, doc))
    assert not fabric_warnings(plan) and plan.fabric.core == "core1"
    assert "SwitchName=core1 Switches=s[1-2]" in render(plan)["slurm/topology.conf"].decode()


# ------------------------------------------------------------------ bad input: one line, exit 2, nothing written


def _lines_of(path: Path, needle: str) -> int:
    """The line of `needle` in the file (`needle#2`: of its second occurrence)."""
    needle, _, nth = needle.partition("#")
    found = [i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    return found[int(nth or 1) - 1]


BAD = [
    ("leaf names a node no pool has", {"leaves": [{"name": "rack1", "nodes": "a100-[1-2],l40s-[1-2]"},
                                                  {"name": "rack2", "nodes": "a100-[3-5],l40s-[3-4]"}]},
     "a100-[3-5],l40s-[3-4]", "fleet.fabric.leaves[1].nodes", r"leaf rack2 names node a100-5, which no pool has"),
    ("node in two leaves", {"leaves": [{"name": "rack1", "nodes": "a100-[1-2],l40s-[1-2]"},
                                       {"name": "rack2", "nodes": "a100-[2-4],l40s-[3-4]"}]},
     "a100-[2-4],l40s-[3-4]", "fleet.fabric.leaves[1].nodes", r"node a100-2 is in two leaves: rack1 and rack2"),
    ("pool node in no leaf", {"leaves": [{"name": "rack1", "nodes": "a100-[1-2],l40s-[1-2]"},
                                         {"name": "rack2", "nodes": "a100-[3-4],l40s-3"}]},
     "leaves:", "fleet.fabric.leaves", r"1 node of pool l40s \(l40s-4\) in no leaf"),
    ("spine names an unknown leaf", {**SHARED, "spines": [{"name": "s1", "leaves": ["rack1", "rack3"]}]},
     "name: s1", "fleet.fabric.spines[0]", r"spine s1 names leaf rack3, which is not a leaf \(did you mean rack[12]\?\)"),
    ("leaf under no spine", {**SHARED, "spines": [{"name": "s1", "leaves": ["rack1"]}]},
     "name: rack2", "fleet.fabric.leaves[1]", r"leaf rack2 is under no spine"),
    ("a bad hostlist", {"leaves": [{"name": "rack1", "nodes": "a100-[1-2"}]},
     "a100-[1-2", "fleet.fabric.leaves[0].nodes", r"not a Slurm hostlist"),
    ("leaves naming a million nodes", {"leaves": [{"name": "rack1", "nodes": "a100-[1-4],l40s-[1-4]"},
                                                  {"name": "rack2", "nodes": "x[0-999999]"}]},
     "x[0-999999]", "fleet.fabric.leaves[1].nodes", r"the leaves name more nodes than the pools have \(8\)"),
    ("a switch name twice", {"leaves": [{"name": "rack1", "nodes": "a100-[1-4]"}, {"name": "rack1", "nodes": "l40s-[1-4]"}]},
     "name: rack1#2", "fleet.fabric.leaves[1]", r"switch name rack1 is used twice"),
    ("leaves and the shorthand", {**SHARED, "nodes_per_leaf": 2},
     "nodes_per_leaf", "fleet.fabric.nodes_per_leaf", r"nodes_per_leaf is the shorthand for `leaves`"),
    ("spines without leaves", {"spines": [{"name": "s1", "leaves": ["rack1"]}]},
     "spines:", "fleet.fabric.spines", r"`spines` needs `leaves`"),
    ("core without spines", {**SHARED, "core": "c1"}, "core: c1", "fleet.fabric.core", r"give `spines` too"),
    ("from and leaves", {**SHARED, "from": {"topology_conf": "t.conf"}}, "leaves:", "fleet.fabric.leaves",
     r"`from` imports the leaves"),
    ("from two files", {"from": {"topology_conf": "t.conf", "ibnetdiscover": "x"}}, "from:", "fleet.fabric.from",
     r"give exactly one of topology_conf, topology_yaml, ibnetdiscover \(got topology_conf, ibnetdiscover\)"),
    ("from a missing file", {"from": {"topology_conf": "nope.conf"}}, "topology_conf: nope.conf",
     "fleet.fabric.from.topology_conf", r"cannot read nope.conf \(relative to workload.yaml\): No such file"),
]


@pytest.mark.parametrize("fabric,needle,field,pattern", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_fabric(tmp_path, orchgen, fabric, needle, field, pattern):
    path = write(tmp_path, fleet([A100, L40S], fabric))
    out = tmp_path / "out"
    proc = orchgen("plan", path, "-o", out)
    assert proc.returncode == 2, proc.stdout
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"orchgen: {path}:{_lines_of(path, needle)}: {field}: "), line
    assert re.search(pattern, line), line
    assert not out.exists()


IMPORTED_BAD = [
    # (file, text, pools, line, pattern): the error names the imported file and its line
    ("t.conf", "SwitchName=s1 Nodes=a100-[1-2]\nSwitchName=s2 Nodes=a100-[3-4],l40s-[1-5]\n", [A100, L40S], 2,
     r"leaf s2 names node l40s-5, which no pool has"),
    ("t.conf", "SwitchName=s1 Nodes=a100-[1-4]\nSwitchName=s2 Nodes=l40s-[1-4]\nSwitchName=sp Switches=s[1-3]\n",
     [A100, L40S], 3, r"switch sp names an undefined child switch s3"),
    ("t.conf", "SwitchName=S_1 Nodes=a100-[1-4],l40s-[1-4]\n", [A100, L40S], 1,
     r"switch name 'S_1' is not a DNS-1123 label"),
    ("t.yaml", "- topology: ib\n  tree:\n    switches:\n      - {switch: s1, nodes: 'a100-[1-4],l40s-[1-4]'}\n"
     "- topology: nvl\n  block:\n    blocks:\n      - {block: b1, nodes: 'a100-[1-2],l40s-[1-2]'}\n", [A100, L40S], 8,
     r"block b1 holds nodes of pools a100 and l40s"),
    ("t.yaml", "- topology: ib\n  tree:\n    switches:\n      - {switch: s1, nodes: 'a100-[1-4],l40s-[1-4]'}\n"
     "- topology: nvl\n  block:\n    blocks:\n      - {block: b1, nodes: 'a100-[1-2]'}\n      - {block: b2, nodes: 'a100-3'}\n",
     [A100, L40S], 9, r"block b2 has 1 nodes but b1 of the same pool a100 has 2"),
    ("t.yaml", "- topology: ib\n  tree:\n    switches:\n      - {switch: s1, nodes: 'a100-[1-4],l40s-[1-4]'}\n"
     "- topology: nvl\n  block:\n    blocks:\n      - {block: b1, nodes: 'a100-[1-2]'}\n      - {block: b2, nodes: 'a100-[3-4]'}\n",
     [dict(A100, nvlink_domain_nodes=4), L40S], 8, r"block b1 has 2 nodes but pool a100 says nvlink_domain_nodes: 4"),
    ("t.conf", "SwitchName=s1 Nodes=a100-[1-4]\nSwitchName=s1 Nodes=l40s-[1-4]\n", [A100, L40S], 2,
     r"switch s1 is defined twice"),  # the importer's own refusal, through the loader
]


@pytest.mark.parametrize("name,text,pools,line,pattern", IMPORTED_BAD)
def test_bad_import_names_the_imported_line(tmp_path, orchgen, name, text, pools, line, pattern):
    kind = {"conf": "topology_conf", "yaml": "topology_yaml"}[name.rsplit(".", 1)[1]]
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / name).write_text(text)
    path = write(tmp_path, fleet(pools, {"from": {kind: f"site/{name}"}}))
    out = tmp_path / "out"
    proc = orchgen("plan", path, "-o", out)
    assert proc.returncode == 2, proc.stdout
    (err,) = proc.stderr.strip().splitlines()
    assert err.startswith(f"orchgen: {tmp_path / 'site' / name}:{line}: fabric.from.{kind}: "), err
    assert re.search(pattern, err), err
    assert not out.exists()


def test_a_pool_node_missing_from_the_import_names_the_from_line(tmp_path, orchgen):
    (tmp_path / "t.conf").write_text("SwitchName=s1 Nodes=a100-[1-4],l40s-[1-3]\n")
    path = write(tmp_path, fleet([A100, L40S], {"from": {"topology_conf": "t.conf"}}))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"orchgen: {path}:{_lines_of(path, 'topology_conf: t.conf')}: "
                                  "fleet.fabric.from.topology_conf: 1 node of pool l40s (l40s-4) in no leaf")


# ------------------------------------------------------------------ every artifact follows the model


def test_artifacts_follow_a_shared_leaf(tmp_path):
    """Two pools on two leaves, a100 on Slurm and l40s on Kubernetes (volcano): each leaf carries both
    planes; Slurm's tree and Volcano's HyperNodes list each leaf's nodes of their own plane."""
    doc = fleet([A100, L40S], SHARED,
                [{"name": "train", "nodes": 2, "tightly_coupled": True, "pool": "a100"},
                 {"name": "api", "long_lived_services": True, "bare_metal": False, "pool": "l40s"}],
                gang_scheduler="volcano")
    plan = plan_of(write(tmp_path, doc))
    files = render(plan)
    conf = files["slurm/topology.conf"].decode()
    assert "SwitchName=rack1 Nodes=a100-[1-2]\n" in conf and "SwitchName=rack2 Nodes=a100-[3-4]\n" in conf
    assert "SwitchName=spine Switches=rack[1-2]" in conf
    hyper = {h["metadata"]["name"]: h["spec"] for h in volcano.topology(plan)}
    # issue 15: by the leaf label, which node-labels.sh sets on exactly this plane's nodes of the leaf
    # (and, in a hybrid, the plane label, as every selector there: node-labels.sh sets it)
    match = {LABEL_LEAF: "rack1", **({"orchgen.io/plane": "kubernetes"} if plan.hybrid else {})}
    assert hyper["rack1"]["members"] == [{"type": "Node", "selector": {"labelMatch": {"matchLabels": match}}}]
    assert hyper["spine"]["tier"] == 2
    script = files["kubernetes/node-labels.sh"].decode()
    assert "label l40s-1 l40s-2 orchgen.io/leaf=rack1" in script
    assert "a100-" not in script  # the Slurm nodes of the shared leaf are no Kubernetes nodes
    assert [s.leaf for s in plan.shared_leaves] == ["rack1", "rack2"]
    data = json.loads(files["plan.json"])
    assert data["fabric"]["leaves"][0] == {"name": "rack1", "nodes": "a100-[1-2],l40s-[1-2]", "pools": ["a100", "l40s"],
                                           "spines": ["spine"]}


def test_kueue_and_kai_levels_follow_the_model(tmp_path):
    lab = plan_of(EXAMPLES / "university-lab.yaml")
    topo = yaml.safe_load(render(lab)["kubernetes/manifests/18-topology.yaml"])
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [LABEL_LEAF, "kubernetes.io/hostname"]
    pod = on_kubernetes("superpod", "eval-harness")  # its eval on Kubernetes, as before issue 36
    topo = yaml.safe_load(render(pod)["kubernetes/manifests/18-topology.yaml"])
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [LABEL_SPINE, LABEL_LEAF, "kubernetes.io/hostname"]


def test_deterministic(tmp_path, orchgen):
    for name in ("superpod", "university-lab"):
        a, b = tmp_path / f"{name}-a", tmp_path / f"{name}-b"
        orchgen("plan", EXAMPLES / f"{name}.yaml", "-o", a, check=True)
        orchgen("plan", EXAMPLES / f"{name}.yaml", "-o", b, check=True)
        files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
        assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


# ------------------------------------------------------------------ orchgen validate holds bundles to the model


@pytest.fixture
def superpod_bundle(tmp_path, orchgen) -> Path:
    out = tmp_path / "superpod"
    # its eval pinned to Kubernetes (as before issue 36): a plane on one node of an SU to hold the labels to
    orchgen("plan", on_kubernetes("superpod", "eval-harness", tmp_path=tmp_path), "-o", out, check=True)
    assert not [f for f in check(out).errors]
    return out


def _edit(path: Path, old: str, new: str) -> int:
    text = path.read_text()
    assert old in text, old
    text = text.replace(old, new, 1)
    path.write_text(text)
    return text[: text.index(new)].count("\n") + 1


def test_validate_catches_a_node_moved_between_leaves(superpod_bundle):
    topo = superpod_bundle / "slurm" / "topology.conf"
    _edit(topo, "SwitchName=su1-leaf Nodes=dgx[001-031]", "SwitchName=su1-leaf Nodes=dgx[001-030]")
    line = _edit(topo, "SwitchName=su2-leaf Nodes=dgx[033-064]", "SwitchName=su2-leaf Nodes=dgx[031,033-064]")
    errors = [str(f) for f in check(superpod_bundle).errors]
    assert f"slurm/topology.conf:{line}: leaf switch su2-leaf lists dgx031, which plan.json's fabric does not " \
           "cable to it" in errors


def test_validate_catches_a_label_off_the_model(superpod_bundle):
    script = superpod_bundle / "kubernetes" / "node-labels.sh"
    line = _edit(script, "orchgen.io/leaf=su4-leaf orchgen.io/plane", "orchgen.io/leaf=su3-leaf orchgen.io/plane")
    errors = [str(f) for f in check(superpod_bundle).errors]
    assert f"kubernetes/node-labels.sh:{line}: node dgx128 is labelled {LABEL_LEAF}=su3-leaf but plan.json's " \
           "fabric says su4-leaf" in errors


def test_validate_catches_a_block_that_is_no_domain(tmp_path, orchgen):
    out = tmp_path / "nvl"
    orchgen("plan", EXAMPLES / "nvl72-blocks.yaml", "-o", out, check=True)
    topo = out / "slurm" / "topology.conf"
    text = topo.read_text()
    first = re.search(r"BlockName=(\S+) Nodes=(\S+)", text)
    line = _edit(topo, first.group(0), f"BlockName={first.group(1)} Nodes=gb200-[001-017]")
    errors = [str(f) for f in check(out).errors]
    assert any(e.startswith(f"slurm/topology.conf:{line}: block {first.group(1)} lists") for e in errors), errors
    assert LABEL_NVLINK  # the NVLink label is checked the same way as the leaf label
