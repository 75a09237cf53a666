"""Every kind of bad input: one line on stderr naming file, line and field; exit 2; nothing written."""
from __future__ import annotations

import re

import pytest

BASE = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: lab
fleet:
  bare_metal: true
  fabric:
    kind: infiniband
    nodes_per_leaf: 4
  pools:
    - name: h100
      nodes: 8
      hostnames: gpu[001-008]
      gpu: {type: h100, count: 8}
      cpus: 224
      memory_gib: 2048
tenants:
  - {name: nlp, share: 3}
workloads:
  - name: train
    nodes: 4
    tightly_coupled: true
    tenant: nlp
    pool: h100
"""

BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)

# (id, text, expected line or None, regex the message must match)
CASES = [
    ("malformed-yaml", BASE.replace("  name: lab", "  name: [lab"), None, r"malformed YAML"),
    ("wrong-type-int", BASE.replace("nodes: 8", 'nodes: "8"'), 12, r"fleet\.pools\[0\]\.nodes: .*integer"),
    ("wrong-type-bool", BASE.replace("bare_metal: true", "bare_metal: 3"), 6, r"fleet\.bare_metal: .*bool"),
    ("unknown-key", BASE.replace("  bare_metal: true", "  bare_metl: true"), 6,
     r"fleet\.bare_metl: unknown key \(did you mean 'bare_metal'\?\)"),
    ("unknown-top-key", BASE + "extra: 1\n", 25, r"extra: unknown key"),
    ("negative-count", BASE.replace("nodes: 8", "nodes: -2"), 12, r"fleet\.pools\[0\]\.nodes: .*greater than or equal to 1"),
    ("zero-gpus", BASE.replace("count: 8}", "count: 0}"), 14, r"fleet\.pools\[0\]\.gpu\.count"),
    ("hostlist-count", BASE.replace("gpu[001-008]", "gpu[001-007]"), 13,
     r"fleet\.pools\[0\]\.hostnames: hostlist 'gpu\[001-007\]' names 7 nodes but nodes is 8"),
    ("hostlist-syntax", BASE.replace("gpu[001-008]", "gpu[008-001]"), 13, r"fleet\.pools\[0\]\.hostnames: not a Slurm hostlist"),
    ("unknown-pool", BASE.replace("    pool: h100", "    pool: h10"), 24, r"workloads\[0\]\.pool: unknown pool 'h10' \(did you mean 'h100'\?\)"),
    ("unknown-tenant", BASE.replace("    tenant: nlp", "    tenant: cv"), 23, r"workloads\[0\]\.tenant: unknown tenant 'cv'"),
    ("duplicate-workload", BASE + "  - name: train\n", 25, r"workloads\[1\]\.name: duplicate name 'train'"),
    ("duplicate-key", BASE.replace("  bare_metal: true", "  bare_metal: true\n  bare_metal: false"), 7,
     r"fleet\.bare_metal: duplicate key"),
    ("not-dns-label", BASE.replace("  name: lab", "  name: Lab_1"), 4, r"metadata\.name: 'Lab_1' is not a DNS-1123 label"),
    ("path-separator", BASE.replace("- name: train", "- name: ../etc"), 20, r"workloads\[0\]\.name: .*not a DNS-1123 label"),
    ("slash-in-pool", BASE.replace("- name: h100", "- name: h1/00"), 11, r"fleet\.pools\[0\]\.name: .*DNS-1123"),
    ("bad-enum", BASE + "options:\n  gang_scheduler: volcan\n", 26, r"options\.gang_scheduler: .*did you mean 'volcano'"),
    ("float-version", BASE + "options:\n  slurm_version: 25.10\n", 26, r"options\.slurm_version: .*in quotes.*as the number 25\.1\b"),
    ("bad-gitops-repo", BASE + "options:\n  gitops_repo: 'not a url'\n", 26,
     r"options\.gitops_repo: 'not a url' .*Git clone URL"),
    ("overlapping-hosts", BASE.replace("      memory_gib: 2048\n",
                                       "      memory_gib: 2048\n    - {name: b, nodes: 2, hostnames: 'gpu[008-009]'}\n"), 17,
     r"fleet\.pools\[1\]\.hostnames: hostname 'gpu008' is also in pool 'h100'"),
    ("missing-field", BASE.replace("kind: Fleet\n", ""), None, r"kind: required field is missing"),
    ("wrong-kind", BASE.replace("kind: Fleet", "kind: Cluster"), 2, r"kind: "),
    ("nvlink-not-multiple", BASE.replace("      cpus: 224", "      nvlink_domain_nodes: 3\n      cpus: 224"), 15,
     r"nvlink_domain_nodes: 8 nodes do not fill whole NVLink domains of 3"),
    ("too-big", BASE.replace("nodes: 8\n      hostnames: gpu[001-008]", "nodes: 100000000000000000000"), 12, r"nodes"),
    ("workload-too-wide", BASE.replace("    nodes: 4", "    nodes: 9"), 21, r"workloads\[0\]\.nodes: spans 9 nodes but pool 'h100' has 8"),
    ("yaml-bomb", BOMB, None, r"more than \d+ YAML nodes"),
    ("deep-nesting", "a: " + "[" * 200 + "]" * 200 + "\n", None, r"nested deeper|malformed"),
    ("empty-file", "", None, r"file is empty"),
    ("only-comments", "# nothing\n", None, r"file is empty"),
    ("scalar-document", "just a string\n", 1, r"expected a mapping"),
    ("two-documents", BASE + "---\n" + BASE, 26, r"several YAML documents"),
    ("unicode-name", BASE.replace("- name: train", "- name: tr\u00e4in"), 20, r"workloads\[0\]\.name: .*DNS-1123"),
    ("python-tag", BASE.replace("  name: lab", "  name: !!python/object:os.system lab"), 4, r"unsupported YAML tag"),
    ("binary", "\xff\xfe", None, r"not UTF-8|malformed"),
    # Slurm policy (issue 12): time strings as Slurm reads them, with a time limit backfill can plan with
    ("max-time-format", BASE.replace("    pool: h100", "    pool: h100\n    max_time: 2days"), 25,
     r"workloads\[0\]\.max_time: '2days' is not a Slurm time: write MM, MM:SS, HH:MM:SS, D-HH"),
    ("max-time-unlimited", BASE.replace("    pool: h100", "    pool: h100\n    max_time: UNLIMITED"), 25,
     r"workloads\[0\]\.max_time: 'UNLIMITED' has no end: backfill cannot plan"),
    ("max-time-minutes-60", BASE.replace("    pool: h100", "    pool: h100\n    max_time: '1-04:60'"), 25,
     r"workloads\[0\]\.max_time: '1-04:60': minutes must be below 60"),
    ("max-time-beyond-bf-window", BASE.replace("    pool: h100", "    pool: h100\n    max_time: 31-0"), 25,
     r"workloads\[0\]\.max_time: '31-0' is longer than 30 days.*bf_window=43200"),
    ("max-time-a-number", BASE.replace("    pool: h100", "    pool: h100\n    max_time: 90"), 25,
     r"workloads\[0\]\.max_time: .*string"),
    ("default-time-format", BASE + "options:\n  slurm:\n    default_time: 4h\n", 27,
     r"options\.slurm\.default_time: '4h' is not a Slurm time"),
    ("slurm-option-unknown", BASE + "options:\n  slurm:\n    defaulttime: '4:00:00'\n", 27,
     r"options\.slurm\.defaulttime: unknown key \(did you mean 'default_time'\?\)"),
    ("user-name-shell", BASE.replace("{name: nlp, share: 3}", "{name: nlp, share: 3, users: ['a;rm -rf /']}"), 18,
     r"tenants\[0\]\.users\[0\]: 'a;rm -rf /' is not a user or group name"),
    ("unix-group-upper", BASE.replace("{name: nlp, share: 3}", "{name: nlp, share: 3, unix_group: ML}"), 18,
     r"tenants\[0\]\.unix_group: 'ML' is not a user or group name"),
    ("max-gpus-zero", BASE.replace("{name: nlp, share: 3}", "{name: nlp, share: 3, max_gpus: 0}"), 18,
     r"tenants\[0\]\.max_gpus: .*greater than or equal to 1"),
]


@pytest.mark.parametrize("name,text,line,pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, orchgen, name, text, line, pattern):
    path = tmp_path / "fleet.yaml"
    path.write_bytes(text.encode("latin-1") if name == "binary" else text.encode())
    out = tmp_path / "out"
    for cmd in (["plan", path, "-o", out], ["recommend", path]):
        proc = orchgen(*cmd)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        msg = lines[0]
        assert msg.startswith(f"orchgen: {path}"), msg
        if line is not None:
            assert msg.startswith(f"orchgen: {path}:{line}: "), msg
        assert re.search(pattern, msg), msg
        assert not out.exists()


def test_directory_instead_of_file(tmp_path, orchgen):
    proc = orchgen("plan", tmp_path, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "is a directory" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_file(tmp_path, orchgen):
    proc = orchgen("recommend", tmp_path / "nope.yaml")
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_base_is_valid(tmp_path, orchgen):
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE)
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr


LATE = [  # refused after loading, by the planner or a renderer: still file:line: field
    ("slurm-partition-clash", BASE.replace("- name: h100", "- name: training").replace("pool: h100", "pool: training")
     .replace("workloads:\n", "workloads:\n  - {name: rl, nodes: 2, tightly_coupled: true, "
                              "python_native_pipeline: true, pool: training}\n"),
     11, r"fleet\.pools\[0\]\.name: pool 'training' would give a Slurm partition the name 'training'"),
    ("plane-without-nodes", BASE.replace("nodes_per_leaf: 4", "nodes_per_leaf: 8")
     + "  - {name: api, long_lived_services: true, bare_metal: false, pool: h100}\n", 19,
     r"workloads: the kubernetes plane gets no nodes"),
]


@pytest.mark.parametrize("name,text,line,pattern", LATE, ids=[c[0] for c in LATE])
def test_late_refusals_name_the_line(tmp_path, orchgen, name, text, line, pattern):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"orchgen: {path}:{line}: "), proc.stderr
    assert re.search(pattern, proc.stderr), proc.stderr
    assert not (tmp_path / "out").exists()
