"""The bundle writer: deterministic bytes, atomic replacement, --check, and the overwrite guard."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator import bundle, spec
from generator.decide import make_plan
from generator.render import render

from .conftest import all_examples


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("path", all_examples(), ids=lambda p: p.stem)
def test_render_twice_is_identical(path):
    first = render(make_plan(spec.load(path), path))
    second = render(make_plan(spec.load(path), path))
    assert first == second
    assert "plan.json" in first and "README.md" in first


@pytest.mark.parametrize("path", all_examples(), ids=lambda p: p.stem)
def test_bytes_identical_across_processes_and_hash_seeds(tmp_path, path):
    trees = []
    for seed in ("0", "1"):
        out = tmp_path / f"out{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "generator.cli", "plan", str(path), "-o", str(out)],
                       check=True, capture_output=True, env=env)
        trees.append(tree(out))
    assert trees[0] == trees[1]
    # nothing that changes from run to run or machine to machine
    blob = b"".join(trees[0].values())
    assert str(tmp_path).encode() not in blob
    host = os.uname().nodename
    if len(host) >= 6:  # a short name like "vm" occurs in ordinary words
        assert host.encode() not in blob
    assert not __import__("re").search(rb"20\d\d-\d\d-\d\dT\d\d:\d\d", blob)


def test_check_fresh_and_tampered(tmp_path, orchgen, example):
    src, out = example("research-lab"), tmp_path / "out"
    assert orchgen("plan", src, "-o", out).returncode == 0
    ok = orchgen("plan", src, "-o", out, "--check")
    assert ok.returncode == 0 and "up to date" in ok.stdout
    (out / "README.md").write_text("edited by hand\n")
    (out / "stray.txt").write_text("x")
    (out / "plan.json").unlink()
    bad = orchgen("plan", src, "-o", out, "--check")
    assert bad.returncode == 1
    assert "changed: README.md" in bad.stdout
    assert "missing: plan.json" in bad.stdout
    assert "extra:   stray.txt" in bad.stdout
    assert (out / "README.md").read_text() == "edited by hand\n", "--check must not write"


def test_check_on_missing_dir(tmp_path, orchgen, example):
    proc = orchgen("plan", example("dev-ci"), "-o", tmp_path / "none", "--check")
    assert proc.returncode == 1 and "missing: plan.json" in proc.stdout


def test_refuses_foreign_directory_without_force(tmp_path, orchgen, example):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    proc = orchgen("plan", example("dev-ci"), "-o", out)
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert tree(out) == {"precious.txt": b"keep me"}
    assert orchgen("plan", example("dev-ci"), "-o", out, "--force").returncode == 0
    assert not (out / "precious.txt").exists() and (out / "plan.json").is_file()


def test_rewrite_replaces_stale_files(tmp_path, orchgen, example):
    out = tmp_path / "out"
    orchgen("plan", example("research-lab"), "-o", out, check=True)
    orchgen("plan", example("dev-ci"), "-o", out, check=True)
    assert orchgen("plan", example("dev-ci"), "-o", out, "--check").returncode == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")], "staging left behind"


def test_unsafe_paths_refused():
    for bad in ("../x", "/etc/passwd", "a/../../b", "a\\b", ""):
        with pytest.raises(Exception):
            bundle.check_paths({bad: b""})


@pytest.mark.parametrize("fail_at", ["write", "exchange"])
def test_interrupted_write_keeps_previous_bundle(tmp_path, monkeypatch, example, fail_at):
    old_src, new_src = example("dev-ci"), example("research-lab")
    out = tmp_path / "out"
    bundle.write(render(make_plan(spec.load(old_src), old_src)), out)
    before = tree(out)
    new_files = render(make_plan(spec.load(new_src), new_src))
    if fail_at == "write":
        real, calls = Path.write_bytes, []

        def flaky(self, data):
            calls.append(self)
            if len(calls) == 2:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C mid-write
            return real(self, data)

        monkeypatch.setattr(Path, "write_bytes", flaky)
    else:
        monkeypatch.setattr(bundle, "_exchange", lambda a, b: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        bundle.write(new_files, out)
    assert tree(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "staging directory left behind"


def ours(files: dict[str, bytes]) -> dict[str, bytes]:
    """A bundle's files less the operator's (a Pulumi stack file outlives re-plans of another fleet)."""
    return {p: d for p, d in files.items() if not bundle.operator_owned(p)}


def test_killed_at_any_moment_leaves_a_whole_bundle(tmp_path, example):
    """SIGKILL `orchgen plan` at spread-out moments: the target is always one whole bundle."""
    old_src, new_src = example("dev-ci"), example("research-lab")
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "generator.cli", "plan", str(old_src), "-o", str(out)], check=True,
                   capture_output=True)
    old = ours(tree(out))
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "generator.cli", "plan", str(new_src), "-o", str(tmp_path / "ref")],
                   check=True, capture_output=True)
    duration = time.monotonic() - start
    new = ours(tree(tmp_path / "ref"))
    for i in range(12):
        proc = subprocess.Popen([sys.executable, "-m", "generator.cli", "plan",
                                 str(new_src if i % 2 == 0 else old_src), "-o", str(out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(duration * (0.5 + i / 12))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert ours(tree(out)) in (old, new)


# --- the operator's files: a Pulumi stack's config survives every re-plan ----------------------

OPERATOR_STACK = b"""\
encryptionsalt: v1:Zm9vYmFyYmF6:v1:cXV1eA==:c2VjcmV0
config:
  kubernetes:context: prod-east   # set with pulumi config set
  research-lab:token:
    secure: v1:AAAABBBBCCCC:DDDDEEEE
"""


def test_a_replan_keeps_the_operators_stack_file_byte_for_byte(tmp_path, orchgen, example):
    src, out = example("research-lab"), tmp_path / "out"
    orchgen("plan", src, "-o", out, check=True)
    stack = out / "pulumi" / "Pulumi.research-lab.yaml"
    seed = stack.read_bytes()
    assert b"REPLACE-WITH-YOUR-KUBECONFIG-CONTEXT" in seed  # the first plan writes the seed
    stack.write_bytes(OPERATOR_STACK)
    other = out / "pulumi" / "Pulumi.staging.yaml"  # `pulumi stack init staging` made another
    other.write_bytes(b"config:\n  kubernetes:context: staging\n")
    (out / "README.md").write_text("stale\n")
    check = orchgen("plan", src, "-o", out, "--check")  # the operator's files are not a difference
    assert check.returncode == 1 and check.stdout.count("changed:") == 1 and "Pulumi." not in check.stdout
    orchgen("plan", src, "-o", out, check=True)
    assert stack.read_bytes() == OPERATOR_STACK
    assert other.read_bytes() == b"config:\n  kubernetes:context: staging\n"
    assert (out / "README.md").read_text() != "stale\n"  # everything else is orchgen's, rewritten
    assert orchgen("plan", src, "-o", out, "--check").returncode == 0
    # a different plan into the same directory keeps them too, and seeds its own stack
    orchgen("plan", example("grpo-rl"), "-o", out, check=True)
    grpo = example("grpo-rl")
    assert stack.read_bytes() == OPERATOR_STACK
    assert (out / "pulumi" / "Pulumi.grpo-rl.yaml").read_bytes() == render(
        make_plan(spec.load(grpo), grpo))["pulumi/Pulumi.grpo-rl.yaml"]


def test_only_stack_files_are_the_operators(tmp_path, example):
    """The allow-list is narrow: an edited Pulumi.yaml or program is orchgen's and is rewritten."""
    assert bundle.operator_owned("pulumi/Pulumi.research-lab.yaml")
    for path in ("pulumi/Pulumi.yaml", "pulumi/__main__.py", "Pulumi.x.yaml", "pulumi/sub/Pulumi.x.yaml",
                 "kubernetes/helm/releases.yaml"):
        assert not bundle.operator_owned(path), path
    src, out = example("grpo-rl"), tmp_path / "out"
    files = render(make_plan(spec.load(src), src))
    bundle.write(files, out)
    (out / "pulumi" / "Pulumi.yaml").write_text("edited\n")
    bundle.write(files, out)
    assert (out / "pulumi" / "Pulumi.yaml").read_bytes() == files["pulumi/Pulumi.yaml"]


def test_stack_files_of_a_foreign_directory_are_not_carried(tmp_path, example):
    """--force replaces a directory orchgen did not write whole: nothing of it is carried."""
    src, out = example("grpo-rl"), tmp_path / "out"
    (out / "pulumi").mkdir(parents=True)
    (out / "pulumi" / "Pulumi.grpo-rl.yaml").write_bytes(OPERATOR_STACK)
    files = render(make_plan(spec.load(src), src))
    bundle.write(files, out, force=True)
    assert (out / "pulumi" / "Pulumi.grpo-rl.yaml").read_bytes() == files["pulumi/Pulumi.grpo-rl.yaml"]
