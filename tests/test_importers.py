"""generator.spec.importers: the fabric as cabled, from the files sites keep (tests/data/fabric/).

Fixtures, written as sites write them:

    superpod-topology.conf    DGX SuperPOD, 4 SUs (one Slurm leaf each), dgx032 absent, 8 spine groups
    lab-topology.conf         a teaching lab: one leaf switch, six workstations
    nvl72-topology.conf       4 GB200 NVL72 racks as topology/block (Slurm 24.05+)
    nvl72-topology.yaml       the same racks in topology.yaml: an InfiniBand tree + NVLink blocks + flat
    ib-2leaf.ibnetdiscover    ibnetdiscover of 2 leaves, 1 spine, 8 hosts (one "HCA-1" description)
    ib-rail.ibnetdiscover     rail-optimized: 2 SUs x 2 rail leaves, 2 HCAs per host, 2 unnamed spines
    broken/                   one mistake each; the error must name file, line and field

Each good fixture is checked node for node; three are booted in a real Slurm (22.05, loopback harness)
from the import re-rendered as topology.conf, and `scontrol show topology` must show the same tree.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from generator.errors import OrchgenError
from generator.spec.hostlist import compress, expand
from generator.spec.importers import (ImportedBlock, ImportedFabric, ImportedLeaf, ImportedSpine, import_ibnetdiscover,
                                 import_topology_conf, import_topology_yaml, load)

DATA = Path(__file__).parent / "data" / "fabric"
KIND_OF = {"conf": "topology_conf", "yaml": "topology_yaml", "ib": "ibnetdiscover"}


def leaves(fabric: ImportedFabric) -> dict[str, tuple[str, ...]]:
    return {leaf.name: leaf.nodes for leaf in fabric.leaves}


def spines(fabric: ImportedFabric) -> dict[str, tuple[str, ...]]:
    return {spine.name: spine.leaves for spine in fabric.spines}


def hosts(expr: str) -> tuple[str, ...]:
    return tuple(expand(expr))


# ------------------------------------------------------------------ good fixtures, node for node


def test_superpod_topology_conf():
    fab = import_topology_conf(DATA / "superpod-topology.conf")
    assert leaves(fab) == {"su1": hosts("dgx[001-031]"), "su2": hosts("dgx[033-064]"),
                           "su3": hosts("dgx[065-096]"), "su4": hosts("dgx[097-128]")}
    assert sum(len(leaf.nodes) for leaf in fab.leaves) == 127
    assert "dgx032" not in {n for leaf in fab.leaves for n in leaf.nodes}
    assert spines(fab) == {f"sg{i}": ("su1", "su2", "su3", "su4") for i in range(1, 9)}
    # lower-case keys and a backslash-continued line read alike; lines are where each switch starts
    assert [leaf.line for leaf in fab.leaves] == [15, 16, 17, 18]
    assert [s.line for s in fab.spines] == list(range(23, 31))
    assert fab.blocks == () and fab.source == str(DATA / "superpod-topology.conf")


def test_lab_topology_conf():
    fab = load("topology_conf", DATA / "lab-topology.conf")
    assert fab == ImportedFabric((ImportedLeaf("ib-b214", hosts("ws-b214-[01-06]"), 4),), (), (),
                                 str(DATA / "lab-topology.conf"))


def test_nvl72_topology_conf_blocks():
    fab = import_topology_conf(DATA / "nvl72-topology.conf")
    assert fab.leaves == () and fab.spines == ()
    assert fab.blocks == tuple(ImportedBlock(f"nvl-r0{r}", hosts(f"gb200-r0{r}-t[01-18]"), 3 + r) for r in range(1, 5))


def test_nvl72_topology_yaml():
    fab = import_topology_yaml(DATA / "nvl72-topology.yaml")
    assert leaves(fab) == {"ib-leaf-01": hosts("gb200-r01-t[01-18],gb200-r02-t[01-18]"),
                           "ib-leaf-02": hosts("gb200-r03-t[01-18],gb200-r04-t[01-18]")}
    assert fab.spines == (ImportedSpine("ib-spine-01", ("ib-leaf-01", "ib-leaf-02"), 15),)
    assert [(b.name, b.nodes, b.line) for b in fab.blocks] == [
        (f"nvl-r0{r}", hosts(f"gb200-r0{r}-t[01-18]"), 20 + 2 * r) for r in range(1, 5)]


def test_ibnetdiscover_two_leaves():
    fab = load("ibnetdiscover", DATA / "ib-2leaf.ibnetdiscover")
    # names from the MLNX-OS descriptions ("MF0;IB-Spine-01:MQM9700/U1"), lower-cased; nodes in port order,
    # gpu08's "gpu08 HCA-1" description read like the others' "gpuNN mlx5_0"
    assert fab.leaves == (ImportedLeaf("ib-leaf-01", hosts("gpu[01-04]"), 10),
                          ImportedLeaf("ib-leaf-02", hosts("gpu[05-08]"), 32))
    assert fab.spines == (ImportedSpine("ib-spine-01", ("ib-leaf-01", "ib-leaf-02"), 22),)  # 2 cables each: once
    assert fab.blocks == ()


def test_ibnetdiscover_rail_optimized():
    fab = import_ibnetdiscover(DATA / "ib-rail.ibnetdiscover")
    # su1-rail0 and su1-rail1 serve the same 4 hosts (one HCA each): one scheduling leaf, named after
    # the first in the file; likewise su2. Every host is under exactly one leaf.
    assert fab.leaves == (ImportedLeaf("su1-rail0", hosts("gpu[01-04]"), 10),
                          ImportedLeaf("su2-rail0", hosts("gpu[05-08]"), 34))
    # both spines kept their factory description: the GUID tells them apart
    assert spines(fab) == {"quantum-2-mellanox-technologies-b83fd20300e10100": ("su1-rail0", "su2-rail0"),
                           "quantum-2-mellanox-technologies-b83fd20300e10101": ("su1-rail0", "su2-rail0")}
    for name in spines(fab):
        assert re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", name)  # Slurm and Kubernetes label safe


def test_data_is_frozen_and_plain():
    fab = load("topology_conf", DATA / "lab-topology.conf")
    with pytest.raises(AttributeError):
        fab.leaves[0].name = "x"  # type: ignore[misc]
    assert hash(fab)


# ------------------------------------------------------------------ broken variants: file, line, field

BROKEN = [  # (file under broken/, line, message regex)
    ("conf-unknown-key.conf", 16, r"unknown key 'Node' in a SwitchName line \(did you mean 'Nodes'\?\)"),
    ("conf-unknown-key-continued.conf", 18, r"unknown key 'Nodez'"),  # the line the switch starts on
    ("conf-not-key-value.conf", 4, r"expected Key=Value words"),
    ("conf-undefined-child.conf", 30, r"switch sg8 names an undefined child switch su5"),
    ("conf-loop.conf", 23, r"switch sg1 is its own ancestor \(sg1 -> sg8 -> sg1\)"),
    ("conf-node-two-leaves.conf", 16, r"node dgx031 is under two leaves: su1 and su2"),
    ("conf-bad-hostlist.conf", 17, r"switch su3: Nodes: not a Slurm hostlist: '\[' is never closed"),
    ("conf-three-tiers.conf", 31, r"switch core is above some spines but not sg8"),
    ("conf-empty.conf", 1, r"the file is empty"),
    ("conf-comments-only.conf", 1, r"no SwitchName or BlockName line: nothing to import"),
    ("conf-bad-block-sizes.conf", 8, r"block size 54 is not a power-of-two multiple .* of 18"),
    ("conf-tree-and-blocks.conf", 7, r"SwitchName in a file that also has BlockName/BlockSizes lines"),
    ("yaml-malformed.yaml", 14, r"malformed YAML"),
    ("yaml-not-a-list.yaml", 2, r"the file \(a list of topologies\) must be a list"),
    ("yaml-unknown-key.yaml", 19, r"topology #2: unknown key \(did you mean 'block'\?\)"),
    ("yaml-undefined-child.yaml", 15, r"switch ib-spine-01 names an undefined child switch ib-leaf-03"),
    ("yaml-switch-nodes-and-children.yaml", 15, r"switch ib-spine-01 has both nodes and child switches"),
    ("yaml-node-two-blocks.yaml", 24, r"node gb200-r01-t18 is in two blocks: nvl-r01 and nvl-r02"),
    ("yaml-two-trees.yaml", 30, r"2 tree topologies \(ib, ib-rail1\) and none of them is the cluster default"),
    ("ib-truncated.ibnetdiscover", 35, r"links to H-1070fd0300a00007, which has no section in this file"),
    ("ib-hca-without-hostname.ibnetdiscover", 58, r"node description 'MT4129 ConnectX7 +Mellanox Technologies', "
     r"which names no host"),
    ("ib-ports-report.ibnetdiscover", 1, r"not ibnetdiscover's default output"),
    # gpu04's second HCA went to SU2's rail-1 leaf: su1-rail1 now serves only gpu01-03
    ("ib-rail-miscabled.ibnetdiscover", 23, r"node gpu01 is cabled to leaves su1-rail0 \(serving gpu\[01-04\]\) "
     r"and su1-rail1 \(serving gpu\[01-03\]\), which serve different nodes"),
]


@pytest.mark.parametrize("name,line,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_variant(name, line, message):
    path = DATA / "broken" / name
    kind = KIND_OF[name.split("-")[0]]
    with pytest.raises(OrchgenError) as caught:
        load(kind, path)
    err = caught.value
    assert (err.file, err.line, err.field) == (str(path), line, f"fabric.from.{kind}")
    assert re.search(message, err.message), err.message
    assert str(err).startswith(f"{path}:{line}: fabric.from.{kind}: ")  # the CLI's one-line form


def test_every_broken_file_is_tested():
    assert sorted(p.name for p in (DATA / "broken").iterdir()) == sorted(b[0] for b in BROKEN)


def test_unknown_kind_and_missing_file(tmp_path):
    with pytest.raises(OrchgenError, match=r"unknown import kind 'topology_cnf' .*did you mean 'topology_conf'") as e:
        load("topology_cnf", DATA / "lab-topology.conf")
    assert e.value.field == "fabric.from"
    with pytest.raises(OrchgenError, match="cannot read the file") as e:
        load("ibnetdiscover", tmp_path / "nope")
    assert e.value.file == str(tmp_path / "nope")


@pytest.mark.parametrize("text,line,message", [
    ("SwitchName=s1 Nodes=a[1-2]\nSwitchName=s1 Nodes=a[3-4]\n", 2, r"switch s1 is defined twice \(first on line 1\)"),
    ("SwitchName=s1\n", 1, r"switch s1 has neither nodes nor child switches"),
    ("SwitchName=s1 Nodes=a1,a1\n", 1, r"Nodes: a1 is listed twice"),
    ("SwitchName=s1 Nodes=a1 LinkSpeed=fast\n", 1, r"LinkSpeed 'fast' is not a whole number"),
    ("RingName=r0 Nodes=a[1-8]\n", 1, r"topology/ring \(RingName\) is not imported"),
    ("Nodes=a1 SwitchName=s1\n", 1, r"a line starts with SwitchName=, BlockName= or BlockSizes="),
    ("SwitchName=" + "s" * 65 + " Nodes=a1\n", 1, r"longer than 64 characters"),
    ("SwitchName=s1 Nodes=a1\nSwitchName=s2 Nodes=a2\nSwitchName=p1 Switches=s1,p2\nSwitchName=p2 Switches=s2\n",
     3, r"switch p1 has both leaves \(s1\) and switches above leaves"),
])
def test_topology_conf_refusals(tmp_path, text, line, message):
    path = tmp_path / "topology.conf"
    path.write_text(text)
    with pytest.raises(OrchgenError, match=message) as e:
        import_topology_conf(path)
    assert e.value.line == line


def test_one_root_over_all_spines_is_implied(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("SwitchName=s1 Nodes=a[1-2]\nSwitchName=s2 Nodes=a[3-4]\n"
                    "SwitchName=p1 Switches=s1\nSwitchName=p2 Switches=s2\nSwitchName=core Switches=p[1-2]\n")
    fab = import_topology_conf(path)
    assert spines(fab) == {"p1": ("s1",), "p2": ("s2",)}
    assert (fab.core, fab.core_line) == ("core", 5)  # kept apart: a re-rendered tree is the file's


@pytest.mark.parametrize("text,line,message", [
    ("- topology: a\n  tree:\n    switches:\n      - {switch: s1, nodes: 'n[1-2]'}\n"
     "- topology: b\n  cluster_default: true\n  tree:\n    switches:\n      - {switch: s2, nodes: 'n[1-2]'}\n",
     None, None),  # two trees, one the cluster default: that one
    ("- cluster_default: true\n  topology: a\n  flat: true\n", 1, r"'topology' \(its name\) must be the first key"),
    ("- topology: a\n  flat: true\n", 1, r"no tree or block topology: nothing to import"),
    ("- topology: a\n  tree:\n    switches: []\n  flat: true\n", 1, r"exactly one of tree, block or flat"),
    ("- topology: a\n  cluster_default: yes please\n  flat: true\n", 2, r"cluster_default must be true or false"),
    ("- topology: a\n  block:\n    block_sizes: [18, '36']\n    blocks: []\n", 3, r"block_sizes must be a whole"),
    ("- topology: a\n  tree:\n    switches: []\n", 3, r"tree has no switches"),
    ("- topology: a\n  torus3d: {}\n", 2, r"torus3d topologies are not imported"),
    ("- topology: a\n  flat: true\n- topology: a\n  flat: true\n", 3, r"topology a is defined twice"),
])
def test_topology_yaml_cases(tmp_path, text, line, message):
    path = tmp_path / "topology.yaml"
    path.write_text(text)
    if message is None:
        assert leaves(import_topology_yaml(path)) == {"s2": ("n1", "n2")}
        return
    with pytest.raises(OrchgenError, match=message) as e:
        import_topology_yaml(path)
    assert e.value.line == line


def test_ibnetdiscover_node_name_map_wins(tmp_path):
    # with --node-name-map, port lines print the mapped name while Ca headers keep the raw description
    text = (DATA / "ib-2leaf.ibnetdiscover").read_text().replace('# "gpu03 mlx5_0"\n', '# "MT4129 ConnectX7"\n')
    path = tmp_path / "mapped.ibnetdiscover"
    path.write_text(text)
    assert leaves(import_ibnetdiscover(path))["ib-leaf-01"] == hosts("gpu[01-04]")


SPINE_PORT4 = '[4]\t"S-b83fd20300e10002"[34]\t\t# "MF0;ib-leaf-02:MQM9700/U1" lid 2 4xNDR\n'
LEAF2_PORT34 = '[34]\t"S-b83fd20300e10003"[4]\t\t# "MF0;IB-Spine-01:MQM9700/U1" lid 3 4xNDR\n'
LEAF1_PORT34 = '[34]\t"S-b83fd20300e10003"[2]\t\t# "MF0;IB-Spine-01:MQM9700/U1" lid 3 4xNDR\n'


@pytest.mark.parametrize("edits,line,message", [
    # leaf-02's port 34 (line 37 once the spine's line 26 is gone) is not listed back by the spine
    ([(SPINE_PORT4, "")], 37, r"the section of S-b83fd20300e10003 does not list this link back"),
    ([(SPINE_PORT4, SPINE_PORT4.replace("[4]", "[99]"))], 26, r"port 99 on a node with 64 ports"),
    ([('Ca\t1 "H-1070fd0300a00005"', 'Switch\t1 "H-1070fd0300a00005"')], 72, r"a Switch section with a H- GUID"),
    # one uplink of leaf-02 recabled to leaf-01 (both ends edited): not a leaf-spine tree any more
    ([(SPINE_PORT4, ""), (LEAF2_PORT34, '[34]\t"S-b83fd20300e10001"[35]\t\t# "x" lid 1 4xNDR\n'),
      (LEAF1_PORT34, LEAF1_PORT34 + '[35]\t"S-b83fd20300e10002"[34]\t\t# "x" lid 2 4xNDR\n')],
     17, r"leaf ib-leaf-01 is cabled to leaf ib-leaf-02: only leaf-spine fabrics are imported"),
])
def test_ibnetdiscover_refusals(tmp_path, edits, line, message):
    text = (DATA / "ib-2leaf.ibnetdiscover").read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "fabric.ibnetdiscover"
    path.write_text(text)
    with pytest.raises(OrchgenError, match=message) as e:
        import_ibnetdiscover(path)
    assert e.value.line == line


# ------------------------------------------------------------------ real Slurm reads the import alike


def render_topology_conf(fabric: ImportedFabric) -> str:
    """ImportedFabric -> topology.conf (topology/tree), as orchgen's renderer will write it."""
    lines = [f"SwitchName={leaf.name} Nodes={compress(leaf.nodes)}" for leaf in fabric.leaves]
    lines += [f"SwitchName={spine.name} Switches={compress(spine.leaves)}" for spine in fabric.spines]
    return "\n".join(lines) + "\n"


SLURM_CONF = """\
ClusterName=imported
SlurmctldHost=slurmctl
SelectType=select/cons_tres
TopologyPlugin=topology/tree
NodeName={nodes} CPUs=4 RealMemory=8000 State=UNKNOWN
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@pytest.mark.slurm
@pytest.mark.parametrize("kind,name", [("topology_conf", "superpod-topology.conf"),  # 127 slurmds, ~1.3 s
                                       ("topology_yaml", "nvl72-topology.yaml"),
                                       ("ibnetdiscover", "ib-rail.ibnetdiscover")])  # rail groups merged
def test_real_slurm_reads_the_imported_tree(tmp_path, kind, name):
    from tests.slurmharness import SlurmCluster, require_slurm

    require_slurm()
    fab = load(kind, DATA / name)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "slurm.conf").write_text(SLURM_CONF.format(nodes=compress(n for leaf in fab.leaves for n in leaf.nodes)))
    (conf / "topology.conf").write_text(render_topology_conf(fab))
    with SlurmCluster(conf, wait_idle_s=0) as c:
        got = c.switches()
        assert c.problems() == []
    assert {name: (s["level"], s["nodes"]) for name, s in got.items() if s["level"] == 0} == \
        {leaf.name: (0, set(leaf.nodes)) for leaf in fab.leaves}
    assert {name: (s["level"], s["switches"]) for name, s in got.items() if s["level"] > 0} == \
        {spine.name: (1, set(spine.leaves)) for spine in fab.spines}
