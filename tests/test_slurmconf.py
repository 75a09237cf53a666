"""The one Slurm configuration lexer (generator/spec/slurmconf.py), held to Slurm's parse_config.c.

* each rule of `_get_next_line`, `_strip_comments`, `_strip_continuation`, `_strip_escapes`,
  `keyvalue_pattern` and `_parse_include_directive`, on small texts;
* `read` of a site's slurm.conf with Include: relative names resolved against slurm.conf's
  directory, `%c`, globs refused, loops detected, every record with its file and line;
* the probe tests/data/slurmconf/probe-topology.conf (continuation lines, a comment after the
  backslash, trailing blanks, keys in any case): the importer and `orchgen validate`'s reader see
  the same leaves and spine, and the real slurmctld boots it unchanged and shows exactly those.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator.spec import slurmconf
from generator.spec.hostlist import compress
from generator.spec.importers import import_topology_conf
from generator.validate.slurm_conf import parse_topology_conf

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "data" / "slurmconf" / "probe-topology.conf"
PROBE_LEAVES = {"leaf1": {"gpu01", "gpu02", "gpu03", "gpu04"}, "leaf2": {"gpu05", "gpu06", "gpu07", "gpu08"}}
PROBE_SPINES = {"spine": {"leaf1", "leaf2"}}


def texts(text: str) -> list[tuple[int, str]]:
    return [(r.line, r.text) for r in slurmconf.parse(text, "t.conf")]


# ------------------------------------------------------------------ lines, comments, escapes


def test_continuation_joins_with_nothing_between_and_counts_from_the_first_line():
    assert texts("A=1\nNodes=a[1-2],\\\nb[1-2]\nC=3\n") == [(1, "A=1"), (2, "Nodes=a[1-2],b[1-2]"), (4, "C=3")]
    rec = slurmconf.parse("\n\nX=1 \\\n  Y=2 \\\n  Z=3\n", "t")[0]
    assert (rec.line, rec.lines, rec.params()) == (3, 3, {"x": "1", "y": "2", "z": "3"})


def test_trailing_blanks_and_a_comment_after_the_backslash_still_continue():
    assert texts("A=1 \\   \t\nB=2\n") == [(1, "A=1 B=2")]
    assert texts("A=1 \\ # why\nB=2\n") == [(1, "A=1 B=2")]


def test_an_even_run_of_backslashes_does_not_continue_and_is_unescaped():
    assert texts("A=x\\\\\nB=2\n") == [(1, "A=x\\"), (2, "B=2")]  # `\\` at the end: a literal `\`
    assert texts("A=x\\\\\\\nB=2\n") == [(1, "A=x\\B=2")]  # three: `\` kept, the line continues


def test_comments_and_escaped_hashes():
    assert texts("# all comment\n   \nA=1 # tail\n") == [(3, "A=1 ")]
    assert texts("Feature=a\\#b # cut here\n") == [(1, "Feature=a#b ")]
    assert texts("Feature=a\\\\#b\n") == [(1, "Feature=a\\")]  # `\\#`: an escaped backslash, then a comment


def test_a_continued_last_line_ends_the_record():
    assert texts("A=1 \\") == [(1, "A=1 ")]


# ------------------------------------------------------------------ pairs, case, repeats


def test_pairs_quotes_operators_and_blanks_around_equals():
    rec = slurmconf.parse('NodeName=n1 Features="a b" Weight = 5 Gres+=gpu:1\n', "t")[0]
    assert [(p.key, p.value, p.op) for p in rec.pairs] == [
        ("NodeName", "n1", ""), ("Features", "a b", ""), ("Weight", "5", ""), ("Gres", "gpu:1", "+")]
    assert rec.leftover == "" and rec.kind == "nodename"


def test_keys_are_case_insensitive_and_a_repeated_key_keeps_the_last_value():
    recs = slurmconf.parse("clustername=a\nCLUSTERNAME=b\nPartitionName=p Nodes=x nodes=y\n", "t")
    assert [r.kind for r in recs] == ["clustername", "clustername", "partitionname"]
    assert recs[2].get("NODES") == "y"
    config = slurmconf.read("slurm.conf", text="clustername=a\nCLUSTERNAME=b\n")
    assert config.last("ClusterName").get("clustername") == "b"
    assert [r.line for r in config.every("ClusterName")] == [1, 2]


def test_what_is_not_key_value_is_leftover_with_its_line():
    recs = slurmconf.parse("A=1\nSwitchName s1 Nodes=x\nB= \nC=1 junk\n", "t")
    assert [(r.line, r.leftover) for r in recs] == [(1, ""), (2, "SwitchName s1 Nodes=x"), (3, "B="), (4, "junk")]
    problems = slurmconf.read("t.conf", text="A=1\nSwitchName s1\n").problems
    assert [(p.line, p.message) for p in problems] == [(2, "not Key=Value: Slurm's parse error (the line's text is not quoted: it may hold anything)")]


# ------------------------------------------------------------------ Include


def site(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path / "etc" / "slurm.conf"


def test_include_is_read_in_place_relative_to_slurm_conf_with_file_and_line(tmp_path):
    conf = site(tmp_path, {
        "etc/slurm.conf": "ClusterName=Alpha\nInclude nodes.d/gpu.conf\nINCLUDE  %c-parts.conf\nSchedulerType=sched/backfill\n",
        # a relative Include inside an included file is still resolved against slurm.conf's directory
        "etc/nodes.d/gpu.conf": "NodeName=g[1-2] \\\n  Gres=gpu:8\ninclude more.conf\n",
        "etc/more.conf": "NodeName=c1\n",
        "etc/alpha-parts.conf": "PartitionName=all Nodes=ALL\n",
    })
    config = slurmconf.read(conf)
    assert config.problems == []
    assert [(Path(r.file).name, r.line, r.kind) for r in config.records] == [
        ("slurm.conf", 1, "clustername"), ("gpu.conf", 1, "nodename"), ("more.conf", 1, "nodename"),
        ("alpha-parts.conf", 1, "partitionname"), ("slurm.conf", 4, "schedulertype")]
    assert [Path(f).name for f in config.files] == ["slurm.conf", "gpu.conf", "more.conf", "alpha-parts.conf"]


def test_include_problems_name_the_including_line(tmp_path):
    conf = site(tmp_path, {
        "etc/slurm.conf": "Include a.conf\nInclude parts/*.conf\nInclude missing.conf\n  Include b.conf\n",
        "etc/a.conf": "Include slurm.conf\n",
    })
    got = [(Path(p.file).name, p.line, p.message.split(":")[0]) for p in slurmconf.read(conf).problems]
    assert got == [("a.conf", 1, "Include loop"), ("slurm.conf", 2, "Include parts/*.conf"),
                   ("slurm.conf", 3, "Include"),
                   ("slurm.conf", 4, "not Key=Value")]  # Include must start in column one
    assert "a.conf -> slurm.conf" in slurmconf.read(conf).problems[0].message


def test_include_records_kept_when_not_followed():
    recs = slurmconf.read("x.conf", text="Include other.conf\n", follow_includes=False).records
    assert [(r.kind, r.get("include")) for r in recs] == [("include", "other.conf")]


# ------------------------------------------------------------------ the probe: our readers, then slurmctld


def test_probe_importer_and_validate_read_it_alike():
    fab = import_topology_conf(PROBE)
    assert {leaf.name: set(leaf.nodes) for leaf in fab.leaves} == PROBE_LEAVES
    assert {s.name: set(s.leaves) for s in fab.spines} == PROBE_SPINES
    assert [leaf.line for leaf in fab.leaves] == [4, 6]
    problems: list = []
    (tree,) = parse_topology_conf(str(PROBE), PROBE.read_text(), problems)
    assert problems == []
    assert {k: set(v[0]) for k, v in tree.leaves.items()} == PROBE_LEAVES
    assert {k: set(v[0]) for k, v in tree.children.items()} == PROBE_SPINES
    assert {k: v[1] for k, v in tree.leaves.items()} == {"leaf1": 4, "leaf2": 6}


@pytest.mark.slurm
def test_probe_boots_unchanged_in_slurmctld_as_our_readers_read_it(tmp_path):
    from tests.slurmharness import SlurmCluster, parse, require_slurm
    from tests.test_slurm_real import bundle

    require_slurm("bookworm")
    (tmp_path / "site").mkdir()
    shutil.copy(PROBE, tmp_path / "site" / PROBE.name)
    nodes = sorted(set().union(*PROBE_LEAVES.values()))
    fleet = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "probe"},
             "fleet": {"bare_metal": True,
                       "fabric": {"kind": "infiniband", "from": {"topology_conf": f"site/{PROBE.name}"}},
                       "pools": [{"name": "gpu", "nodes": len(nodes), "hostnames": compress(nodes),
                                  "gpu": {"type": "h100", "count": 4}, "cpus": 32, "memory_gib": 256}]},
             "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
             "options": {"slurm_version": "22.05"}}
    out = bundle(tmp_path, fleet)
    shutil.copy(PROBE, out / "slurm" / "topology.conf")  # the probe itself, byte for byte
    with SlurmCluster(out / "slurm", wait_idle_s=0) as c:
        got = parse.switches(c.topology())
        assert c.problems() == []
    assert {n: s["nodes"] for n, s in got.items() if s["level"] == 0} == PROBE_LEAVES
    assert {n: s["switches"] for n, s in got.items() if s["level"] == 1} == PROBE_SPINES
