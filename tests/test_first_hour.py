"""A new user's first hour (issue 25): what `plan` prints after writing, `recommend` in an 80-column
terminal, the schema an editor checks with, `orchgen init`, and the smaller surprises."""
from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from .conftest import REPO, all_examples, run_orchgen
from .test_bad_input import BASE, CASES, LATE
from tests.support import orchgen_argv, run_cli

# The recommend JSON of every example as it was before this table changes (made with the
# previous commit's code): `--format json` stays byte for byte.
JSON_BEFORE = Path(__file__).parent / "data" / "recommend-json"


def _pty_run(args: list[str], columns: int, env: dict[str, str] | None = None) -> str:
    """Run orchgen with its stdout on a pseudo-terminal of `columns` columns (as a user's terminal)."""
    main, sub = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**(os.environ if env is None else env), "COLUMNS": str(columns), "TERM": "xterm"}
    proc = subprocess.Popen([*orchgen_argv(), *args], stdin=sub, stdout=sub,
                            stderr=subprocess.PIPE, env=env, cwd=REPO)
    os.close(sub)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=30)
    os.close(main)
    assert proc.returncode == 0, proc.stderr.read()
    return b"".join(chunks).decode()


@pytest.mark.parametrize("name", ["research-lab", "superpod", "cloud-training", "eks-training"])
def test_recommend_fits_80_columns_in_a_terminal(name):
    text = _pty_run(["recommend", f"examples/{name}.yaml"], 80)
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text).replace("\r", "")
    lines = plain.splitlines()
    assert len(lines) > 5
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "fleet" in plain and "per workload" in plain


def test_recommend_uses_a_wide_terminal():
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", _pty_run(["recommend", "examples/research-lab.yaml"], 160))
    assert "┃ workload" in plain  # the bordered table where it fits
    assert max(len(line) for line in plain.replace("\r", "").splitlines()) <= 160


@pytest.mark.parametrize("path", all_examples(), ids=lambda p: p.stem)
def test_recommend_json_is_unchanged(path):
    proc = run_orchgen("recommend", path, "--format", "json", check=True)
    assert proc.stdout.encode() == (JSON_BEFORE / f"{path.stem}.json").read_bytes()


def test_recommend_refuses_what_plan_refuses_with_the_same_line(tmp_path):
    data = yaml.safe_load((REPO / "examples/cloud-training.yaml").read_text())
    # KAI below v0.17.0 under Argo CD is refused (its Config comes from a Helm hook Argo CD does not run)
    data["options"].update(gang_scheduler="kai", gitops="argocd", versions={"kai-scheduler": "v0.13.0"})
    src = tmp_path / "kai.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = run_orchgen("plan", src, "-o", tmp_path / "out")
    rec = run_orchgen("recommend", src)
    assert plan.returncode == rec.returncode == 2
    assert rec.stderr.strip().splitlines()[-1] == plan.stderr.strip() and "options.gitops" in plan.stderr


def test_plan_lists_by_folder_warns_last_and_says_what_next(tmp_path):
    path = tmp_path / "fleet.yaml"
    # bare-metal Slurm without fleet.slurm, of 25.11 (no bring-up OS packages it): two warnings; its nodes
    # described by their platform, so no third about what the plan guesses of them
    path.write_text(BASE.replace("      cpus: 224\n", "      platform: dgx-h100\n"))
    out = tmp_path / "out"
    proc = run_orchgen("plan", path, "-o", out, check=True)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("lab: slurm") and f"to {out}/" in lines[0]
    listing = [line for line in lines if re.match(r"  \S+/\s+\d+ files?: ", line)]
    folders = [line.split()[0] for line in listing]
    assert "slurm/" in folders and "./" in folders and len(folders) == len(set(folders))
    named = sum(int(line.split()[1]) for line in listing)
    assert named == sum(1 for p in out.rglob("*") if p.is_file() and p.name != ".orchgen-bundle")
    nxt = next(i for i, line in enumerate(lines) if line.startswith(f"next: read {out}/README.md"))
    assert nxt > max(lines.index(line) for line in listing)
    rest = "\n".join(lines[nxt:])
    assert f"orchgen validate {out}" in rest and "slurm: install Slurm" in rest and "2 warnings above" in rest
    assert proc.stderr.startswith("orchgen: warning: ")
    quiet = run_orchgen("plan", path, "-o", out, "-q", check=True)
    assert not any(re.match(r"  \S+/\s+\d+ files?: ", line) for line in quiet.stdout.splitlines())
    assert "next: read" in quiet.stdout and quiet.stderr == proc.stderr


def test_aws_suggests_eks(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE.replace("  bare_metal: true\n", "  provider: aws\n"))
    proc = run_orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "(did you mean 'eks'?)" in proc.stderr, proc.stderr


def test_validate_ignores_byte_code_and_editor_droppings(tmp_path):
    out = tmp_path / "out"
    run_orchgen("plan", REPO / "examples/cloud-training.yaml", "-o", out, check=True)
    clean = run_orchgen("validate", out, "--no-fetch")
    subprocess.run([sys.executable, "-m", "py_compile", str(out / "pulumi/__main__.py")], check=True)
    (out / "kubernetes/helm/kueue.values.yaml~").write_bytes(b"\xff\xfe")
    (out / "kubernetes/helm/.kueue.values.yaml.swp").write_bytes(b"\x00\xff")
    proc = run_orchgen("validate", out, "--no-fetch")
    assert proc.returncode == clean.returncode == 0, proc.stdout
    assert "not UTF-8" not in proc.stdout
    assert re.search(r"notice: ignored 3 file\(s\) no tool reads .*__pycache__", proc.stdout), proc.stdout


# --- orchgen init --------------------------------------------------------------------------------

@pytest.mark.parametrize("flags", [[], ["--provider", "eks", "--name", "startup"],
                                   ["--bare-metal", "--slurm-controller", "head01", "--nodes", "16",
                                    "--training-nodes", "8", "--no-service", "--name", "lab"],
                                   ["--provider", "gke", "--training-nodes", "0"]],
                         ids=["defaults", "eks", "bare-metal-slurm", "gke-inference"])
def test_init_writes_a_commented_fleet_that_plans(tmp_path, flags):
    target = tmp_path / "workload.yaml"
    proc = subprocess.run([*orchgen_argv(), "init", "-o", str(target), *flags],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = target.read_text()
    assert sum(1 for line in text.splitlines() if "#" in line) >= 15
    schema = json.loads(run_orchgen("schema", check=True).stdout)
    jsonschema.validate(yaml.safe_load(text), schema)
    plan = run_orchgen("plan", target, "-o", tmp_path / "out", check=True)
    assert "next: read" in plan.stdout
    again = subprocess.run([*orchgen_argv(), "init", "-o", str(target)],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert again.returncode == 2 and "exists; pass --force" in again.stderr


@pytest.mark.parametrize("os_name, release", [(None, "24.11"), ("debian-13", "24.11"), ("debian-12", "22.05"),
                                              ("ubuntu-24.04", "23.11")])
def test_init_writes_the_slurm_release_the_hosts_os_packages(tmp_path, os_name, release):
    """A bare-metal fleet's Slurm is the one its hosts' OS packages (the bring-up installs that one and refuses
    any other): Debian 13 (the default) 24.11, Debian 12 22.05, Ubuntu 24.04 23.11; the plan targets it."""
    target = tmp_path / "workload.yaml"
    flags = ["--os", os_name] if os_name else []
    proc = subprocess.run([*orchgen_argv(), "init", "-o", str(target), "--bare-metal", "--slurm-controller",
                           "head01", *flags], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(target.read_text())["options"]["slurm_version"] == release
    run_orchgen("plan", target, "-o", tmp_path / "out", check=True)
    assert yaml.safe_load((tmp_path / "out/bringup/vars.yaml").read_text())["orchgen_slurm_release"] == release


def test_init_refuses_a_bad_answer_naming_it_and_writes_nothing(tmp_path):
    target = tmp_path / "w.yaml"
    proc = subprocess.run([*orchgen_argv(), "init", "-o", str(target), "--name", "Bad_Name"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert proc.returncode == 2 and "metadata.name" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not target.exists()


def test_init_asks_in_a_terminal(tmp_path):
    """With a terminal on stdin, init asks; the answers land in the file."""
    main, sub = pty.openpty()
    target = tmp_path / "w.yaml"
    proc = subprocess.Popen([*orchgen_argv(), "init", "-o", str(target)],
                            stdin=sub, stdout=sub, stderr=sub, cwd=tmp_path)
    os.close(sub)
    answers = iter(["uni-lab", "generic", "y", "8", "a100", "4", "ethernet", "2", "n", "lab-head"])
    seen = b""
    while proc.poll() is None:
        ready, _, _ = select.select([main], [], [], 10)
        if not ready:
            break
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        seen += chunk
        if chunk.rstrip().endswith((b":", b"]:", b"?")) or re.search(rb"[:?] ?(\[[^\]]*\])?: ?$", chunk):
            os.write(main, (next(answers, "") + "\n").encode())
    proc.wait(timeout=30)
    os.close(main)
    assert proc.returncode == 0, seen.decode(errors="replace")
    data = yaml.safe_load(target.read_text())
    assert data["metadata"]["name"] == "uni-lab"
    assert data["fleet"]["pools"][0]["gpu"] == {"type": "a100", "count": 4}
    assert data["fleet"]["slurm"]["controllers"] == ["lab-head"]


def _init_in_a_terminal(tmp_path: Path, answers: list[str], *flags: str) -> tuple[int, str, Path]:
    """`orchgen init` with a terminal on stdin, answering each prompt in turn: (exit code, what it showed, file)."""
    main, sub = pty.openpty()
    target = tmp_path / "w.yaml"
    proc = subprocess.Popen([*orchgen_argv(), "init", "-o", str(target), *flags],
                            stdin=sub, stdout=sub, stderr=sub, cwd=tmp_path)
    os.close(sub)
    replies = iter(answers)
    seen = b""
    while proc.poll() is None:
        ready, _, _ = select.select([main], [], [], 10)
        if not ready:
            break
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        seen += chunk
        if chunk.rstrip().endswith((b":", b"]:", b"?")) or re.search(rb"[:?] ?(\[[^\]]*\])?: ?$", chunk):
            os.write(main, (next(replies, "") + "\n").encode())
    proc.wait(timeout=30)
    os.close(main)
    return proc.returncode, seen.decode(errors="replace").replace("\r", ""), target


def test_init_checks_each_answer_when_given_and_asks_only_that_again(tmp_path):
    """Issue 39: a bad answer is refused at once with its reason, that question alone asked again, and the
    other answers kept (no nine questions thrown away at the end)."""
    answers = ["Uni_Lab", "uni-lab", "generic", "y", "8", "h1000", "a100", "4", "ethernet", "2", "n",
               "Lab_Head!", "lab-head"]
    rc, seen, target = _init_in_a_terminal(tmp_path, answers)
    assert rc == 0, seen
    assert "(did you mean 'h100'?)" in seen and "is not a DNS-1123 label" in seen, seen
    assert seen.count("Fleet name") == 2 and seen.count("GPU type (GRES name)") == 2 and seen.count("GPU nodes") == 1, seen
    assert seen.count("Slurm controller") == 2, seen
    data = yaml.safe_load(target.read_text())
    assert data["metadata"]["name"] == "uni-lab"
    assert data["fleet"]["pools"][0]["gpu"] == {"type": "a100", "count": 4}
    assert data["fleet"]["pools"][0]["nodes"] == 8
    assert data["fleet"]["slurm"]["controllers"] == ["lab-head"]


def test_init_in_a_terminal_keeps_a_node_for_the_service(tmp_path):
    """Training over every node of a bare-metal fleet with a service cannot be planned: the training
    question is asked again (it used to fail after every question, naming a file never written)."""
    rc, seen, target = _init_in_a_terminal(tmp_path, ["lab", "generic", "y", "3", "h100", "8", "infiniband",
                                                      "3", "y", "1", ""])
    assert rc == 0, seen
    assert "needs a node of its own" in seen and seen.count("Nodes of one training job") == 2, seen
    assert yaml.safe_load(target.read_text())["workloads"][0]["nodes"] == 1


@pytest.mark.parametrize("flags, named", [
    (["--gpu-type", "h1000"], "--gpu-type"),
    (["--name", "Bad_Name"], "--name"),
    (["--slurm-controller", "Head_01"], "--slurm-controller"),
    (["--provider", "eks", "--bare-metal"], "--bare-metal"),
    (["--provider", "gke", "--slurm-controller", "head01"], "--slurm-controller"),
    (["--no-bare-metal", "--os", "debian-12"], "--os"),
    (["--nodes", "2", "--training-nodes", "5"], "--training-nodes"),
    (["--nodes", "3", "--training-nodes", "3"], "--training-nodes"),
    (["--nodes", "0"], "--nodes"),
], ids=["gpu-typo", "name", "controller", "bare-metal-on-eks", "controller-on-gke", "os-not-bare",
        "training-over-nodes", "service-without-a-node", "zero-nodes"])
def test_init_refuses_a_bad_or_contradicting_flag_up_front(tmp_path, flags, named):
    """Without a terminal: one line naming the flag, exit 2, no file, and no file named that is not there."""
    target = tmp_path / "w.yaml"
    proc = run_cli(["init", "-o", target, *flags], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and named in proc.stderr, proc.stderr
    assert str(target) not in proc.stderr and "w.yaml" not in proc.stderr, proc.stderr
    assert not target.exists() and not list(tmp_path.iterdir())


# --- the schema ----------------------------------------------------------------------------------

def _properties(node, path=""):
    if isinstance(node, dict):
        for key, value in (node.get("properties") or {}).items():
            yield f"{path}.{key}", value
        for key, value in node.items():
            if key not in ("allOf", "if", "then"):  # conditions restate fields, they add none
                yield from _properties(value, f"{path}/{key}")
    elif isinstance(node, list):
        for value in node:
            yield from _properties(value, path)


def test_schema_describes_every_field():
    schema = json.loads(run_orchgen("schema", check=True).stdout)
    props = list(_properties(schema))
    assert len(props) > 90
    missing = [p for p, v in props if not v.get("description")]
    assert not missing, missing
    assert schema["$defs"]["Workload"]["properties"]["tightly_coupled"]["examples"] == [True]


# Mistakes `plan` refuses that an editor with the schema flags too (the rest need arithmetic or a
# look at other fields: a hostlist's count, a pool that must exist, hardware that must agree ...).
SCHEMA_CATCHES = {
    "wrong-type-int", "wrong-type-bool", "unknown-key", "unknown-top-key", "negative-count", "zero-gpus",
    "not-dns-label", "path-separator", "slash-in-pool", "bad-enum", "float-version", "bad-gitops-repo",
    "missing-field", "wrong-kind", "too-big", "yaml-bomb", "deep-nesting", "empty-file", "only-comments",
    "scalar-document", "bad-provider", "long-interface", "unicode-name", "binary", "gpu-socket-negative",
    "mig-profile-name", "autodetect-unknown", "controller-not-a-hostname", "cpu-unknown-key",
    "max-time-format", "max-time-unlimited", "max-time-a-number", "default-time-format",
    "slurm-option-unknown", "user-name-shell", "unix-group-upper", "max-gpus-zero",
    "max-time-minutes-60", "bad-subnet", "bad-label-key", "bad-label-value", "bare-metal-on-eks",
    "managed-with-rke2",
    # formats beyond test_bad_input's cases
    "hostlist-unclosed", "hostlist-letters-in-range", "leaf-hostlist", "version-no-minor", "version-text",
    "time-hours-24", "spine-name",
}
EXTRA = [
    ("hostlist-unclosed", BASE.replace("gpu[001-008]", "gpu[001-008")),
    ("hostlist-letters-in-range", BASE.replace("gpu[001-008]", "gpu[a-h]")),
    ("leaf-hostlist", BASE.replace("    nodes_per_leaf: 4\n", "    leaves: [{name: l1, nodes: 'gpu[001-008'}]\n")),
    ("version-no-minor", BASE + "options:\n  slurm_version: \"25\"\n"),
    ("version-text", BASE + "options:\n  kubernetes_version: latest\n"),
    ("time-hours-24", BASE + "options:\n  slurm:\n    max_time: '1-24:00:00'\n"),
    ("spine-name", BASE.replace("    nodes_per_leaf: 4\n", "    nodes_per_leaf: 4\n    spines: [{name: Spine_1, leaves: [a]}]\n")),
]
NOT_A_MAPPING_YAML = {"malformed-yaml", "two-documents", "python-tag"}  # no editor gets a document


def test_schema_catches_names_times_hostlists_and_versions(tmp_path):
    validator = jsonschema.Draft202012Validator(json.loads(run_orchgen("schema", check=True).stdout))
    caught = set()
    for name, text, *_ in CASES + LATE + [(n, t) for n, t in EXTRA]:
        if name in NOT_A_MAPPING_YAML:
            continue
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
        if not validator.is_valid(data):
            caught.add(name)
    assert caught == SCHEMA_CATCHES, (sorted(caught - SCHEMA_CATCHES), sorted(SCHEMA_CATCHES - caught))
    for name, text in EXTRA:  # plan refuses each of them too
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        proc = run_orchgen("plan", path, "-o", tmp_path / name)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, (name, proc.stderr)


# --- issue 39: a first hour without traps ---------------------------------------------------------

def test_diff_with_nothing_to_change_says_so(tmp_path):
    out = tmp_path / "out"
    src = REPO / "examples/dev-ci.yaml"
    run_orchgen("plan", src, "-o", out, check=True)
    proc = run_orchgen("plan", src, "-o", out, "--diff")
    assert proc.returncode == 0 and proc.stdout == "No changes.\n", proc.stdout
    empty = run_orchgen("plan", src, "-o", out, "--diff", "--format", "json")
    assert empty.returncode == 0
    doc = json.loads(empty.stdout)
    full = json.loads(run_orchgen("plan", src, "-o", tmp_path / "none", "--diff", "--format", "json").stdout)
    assert doc.keys() == full.keys() and full["files"]  # the same shape, nothing in it
    assert doc["files"] == doc["disruptive"] == doc["kubernetes"] == doc["slurm"] == doc["other"] == []


SGR = re.compile(r"\x1b\[[0-9;]*m")


def _pty_output(args: list[str], no_color: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    if no_color is not None:
        env["NO_COLOR"] = no_color
    return _pty_run(args, 120, env=env)


@pytest.mark.parametrize("args", [["recommend", "examples/research-lab.yaml"],
                                  ["simulate", "examples/research-lab.yaml", "--hours", "2"]],
                         ids=["recommend", "simulate"])
def test_no_color_means_no_ansi_styling(args):
    assert SGR.search(_pty_output(args, None)), "the control: a terminal gets styling"
    assert SGR.search(_pty_output(args, "")), "an empty NO_COLOR is no request"
    plain = _pty_output(args, "1")
    assert not SGR.search(plain), SGR.findall(plain)
    assert "research-lab" in plain


def test_plan_format_json_prints_the_result_as_json(tmp_path):
    out = tmp_path / "out"
    src = REPO / "examples/dev-ci.yaml"
    proc = run_orchgen("plan", src, "-o", out, "--format", "json", check=True)
    doc = json.loads(proc.stdout)
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                     if p.is_file() and p.name != ".orchgen-bundle")
    assert doc["fleet"] == "dev-ci" and doc["output"] == str(out) and doc["files"] == written
    assert doc["planes"] == {"k3s": {"nodes": 1}} and doc["removed"] == [] and doc["next"]
    (out / "README.md").write_text("edited\n")
    check = run_orchgen("plan", src, "-o", out, "--check", "--format", "json")
    assert check.returncode == 1
    assert json.loads(check.stdout) == {"output": str(out), "up_to_date": False, "changed": ["README.md"],
                                        "missing": [], "extra": []}


def test_slurm_on_kubernetes_next_step_names_its_operator(tmp_path):
    proc = run_orchgen("plan", REPO / "examples/soperator-lab.yaml", "-o", tmp_path / "out", "-q", check=True)
    assert "(None)" not in proc.stdout
    assert "kubernetes + Slurm (soperator)" in " ".join(proc.stdout.split()), proc.stdout


ONE_PLURAL = re.compile(r"(?<![\d.,])1 (nodes|leaves|GPUs|files|workloads|pools)\b")


def test_one_node_is_singular(tmp_path):
    src, out = REPO / "examples/dev-ci.yaml", tmp_path / "out"  # k3s on one workstation
    proc = run_orchgen("plan", src, "-o", out, check=True)
    assert "k3s (1 node)" in proc.stdout
    rec = run_orchgen("recommend", src, check=True)
    texts = {"plan": proc.stdout, "recommend": rec.stdout,
             **{p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*.md")}}
    for name, text in texts.items():
        assert not ONE_PLURAL.search(text), (name, ONE_PLURAL.findall(text))
