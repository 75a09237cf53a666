"""The bundle writer: deterministic bytes, atomic replacement, --check, and the overwrite guard."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from generator import bundle, spec
from generator.decide import make_plan
from generator.errors import OrchgenError
from generator.render import render

from .conftest import all_examples
from tests.support import orchgen_argv


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
        subprocess.run([*orchgen_argv(), "plan", str(path), "-o", str(out)],
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


def test_refuses_foreign_directory_even_with_force(tmp_path, orchgen, example):
    """Issue 39: orchgen never deletes a file it did not write; --force replaces only a bundle."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    for force in ([], ["--force"]):
        proc = orchgen("plan", example("dev-ci"), "-o", out, *force)
        assert proc.returncode == 2 and "precious.txt" in proc.stderr and "--force or not" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert tree(out) == {"precious.txt": b"keep me"}


def test_rewrite_replaces_stale_files(tmp_path, orchgen, example):
    out = tmp_path / "out"
    orchgen("plan", example("research-lab"), "-o", out, check=True)
    orchgen("plan", example("dev-ci"), "-o", out, "--force", check=True)  # another fleet: --force
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
        bundle.write(new_files, out, force=True)
    assert tree(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "staging directory left behind"


def test_a_failed_fsync_of_any_file_keeps_the_previous_bundle(tmp_path, monkeypatch, example):
    """The staged files are synced side by side on plain threads (bundle._side_by_side): an error of any one
    of them reaches the writer, which refuses with one line and keeps the previous bundle; no file is synced
    twice."""
    old_src, new_src = example("dev-ci"), example("research-lab")
    out = tmp_path / "out"
    bundle.write(render(make_plan(spec.load(old_src), old_src)), out)
    before = tree(out)
    new_files = render(make_plan(spec.load(new_src), new_src))
    synced: list[str] = []

    def failing(path: str) -> None:
        synced.append(path)
        if path.endswith("README.md"):
            raise OSError(5, "Input/output error", path)

    monkeypatch.setattr(bundle, "_fsync_one", failing)
    with pytest.raises(OrchgenError, match="cannot write the bundle: Input/output error"):  # one line, exit 2
        bundle.write(new_files, out, force=True)
    assert tree(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "staging directory left behind"
    assert len(synced) == len(set(synced)) > len(new_files) // 2  # each at most once, most of them tried

def ours(files: dict[str, bytes]) -> dict[str, bytes]:
    """A bundle's files less the operator's (a Pulumi stack file outlives re-plans of another fleet)."""
    return {p: d for p, d in files.items() if not bundle.operator_owned(p)}


def test_killed_at_any_moment_leaves_a_whole_bundle(tmp_path, example):
    """SIGKILL `orchgen plan` at spread-out moments: the target is always one whole bundle."""
    old_src, new_src = example("dev-ci"), example("research-lab")
    out = tmp_path / "out"
    subprocess.run([*orchgen_argv(), "plan", str(old_src), "-o", str(out)], check=True,
                   capture_output=True)
    old = ours(tree(out))
    start = time.monotonic()
    subprocess.run([*orchgen_argv(), "plan", str(new_src), "-o", str(tmp_path / "ref")],
                   check=True, capture_output=True)
    duration = time.monotonic() - start
    new = ours(tree(tmp_path / "ref"))
    for i in range(12):
        proc = subprocess.Popen([*orchgen_argv(), "plan",
                                 str(new_src if i % 2 == 0 else old_src), "-o", str(out), "--force"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(duration * (0.5 + i / 12))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert ours(tree(out)) in (old, new)


# ---- the output side: places orchgen cannot or will not write, links, modes ---------------------

@pytest.mark.parametrize("where", ["proc", "under-a-file"])
def test_an_impossible_output_is_one_line_exit_2(tmp_path, orchgen, example, where):
    if where == "proc":
        target = Path("/proc") / "orchgen-no-such-dir"
    else:
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "out"
    proc = orchgen("plan", example("dev-ci"), "-o", target)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"orchgen: {target}: cannot write the bundle: "), proc.stderr
    assert "internal error" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_force_writes_through_a_symlink_only_to_a_bundle(tmp_path, orchgen, example):
    """A link is written through to a bundle orchgen wrote (the link stays a link); a directory a link
    leads to that orchgen did not write is never replaced, --force or not (issue 40: `-o link --force`
    replaced a directory elsewhere; issue 39: never delete what orchgen did not write)."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    (real / "precious.txt").write_text("keep me")
    link.symlink_to(real)
    for force in ([], ["--force"]):  # a folder orchgen did not write: never
        proc = orchgen("plan", example("dev-ci"), "-o", link, *force)
        assert proc.returncode == 2 and "internal error" not in proc.stderr
        assert proc.stderr.startswith(f"orchgen: {link}: is not empty")
        assert tree(real) == {"precious.txt": b"keep me"}
    (real / "precious.txt").unlink()
    proc = orchgen("plan", example("dev-ci"), "-o", link)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert (real / "plan.json").is_file()
    assert tree(link) == tree(real)
    # now dev-ci's bundle: another fleet needs --force, and --check reads through the link too
    assert orchgen("plan", example("research-lab"), "-o", link).returncode == 2
    assert orchgen("plan", example("research-lab"), "-o", link, "--force").returncode == 0
    assert link.is_symlink() and orchgen("plan", example("research-lab"), "-o", link, "--check").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"], "staging left behind"


def test_a_dangling_symlink_is_refused(tmp_path, orchgen, example):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    proc = orchgen("plan", example("dev-ci"), "-o", link, "--force")
    assert proc.returncode == 2 and "which does not exist" in proc.stderr
    assert link.is_symlink() and not (tmp_path / "gone").exists()


def test_the_current_directory_is_refused(tmp_path, orchgen, example):
    out = tmp_path / "out"
    assert orchgen("plan", example("dev-ci"), "-o", out).returncode == 0
    before = tree(out)
    proc = orchgen("plan", example("dev-ci"), "-o", ".", cwd=out)
    assert proc.returncode == 2 and "is the current directory" in proc.stderr
    assert tree(out) == before


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_modes_follow_the_umask(tmp_path, example, umask):
    out = tmp_path / "out"

    def run(src):
        subprocess.run([*orchgen_argv(), "plan", str(src), "-o", str(out), "--force"], check=True,
                       capture_output=True, preexec_fn=lambda: os.umask(umask))

    for src in (example("dev-ci"), example("research-lab")):  # a first write, then a replacement
        run(src)
        dirs = [out] + [p for p in out.rglob("*") if p.is_dir()]
        files = [p for p in out.rglob("*") if p.is_file()]
        assert {p.stat().st_mode & 0o777 for p in dirs} == {0o777 & ~umask}
        scripts = {p for p in files if p.suffix in (".sh", ".sbatch")}
        assert scripts and {p.stat().st_mode & 0o777 for p in scripts} == {0o777 & ~umask}
        assert {p.stat().st_mode & 0o777 for p in set(files) - scripts} == {0o666 & ~umask}


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
    # another fleet replaces the bundle only with --force (issue 39): the old fleet's stacks go with it,
    # the new one seeds its own
    assert orchgen("plan", example("grpo-rl"), "-o", out).returncode == 2 and stack.read_bytes() == OPERATOR_STACK
    orchgen("plan", example("grpo-rl"), "-o", out, "--force", check=True)
    grpo = example("grpo-rl")
    assert not stack.exists() and not other.exists()
    assert (out / "pulumi" / "Pulumi.grpo-rl.yaml").read_bytes() == render(
        make_plan(spec.load(grpo), grpo))["pulumi/Pulumi.grpo-rl.yaml"]


def test_only_stack_files_are_the_operators(tmp_path, example):
    """The allow-list is narrow: an edited Pulumi.yaml or program is orchgen's and is rewritten."""
    assert bundle.operator_owned("pulumi/Pulumi.research-lab.yaml")
    assert bundle.operator_owned("bringup/pulumi/Pulumi.bringup-lab.yaml")  # the Slurm bring-up's stack
    for path in ("pulumi/Pulumi.yaml", "pulumi/__main__.py", "Pulumi.x.yaml", "pulumi/sub/Pulumi.x.yaml",
                 "bringup/pulumi/Pulumi.yaml", "bringup/pulumi/__main__.py", "bringup/Pulumi.x.yaml",
                 "kubernetes/helm/releases.yaml"):
        assert not bundle.operator_owned(path), path
    src, out = example("grpo-rl"), tmp_path / "out"
    files = render(make_plan(spec.load(src), src))
    bundle.write(files, out)
    (out / "pulumi" / "Pulumi.yaml").write_text("edited\n")
    bundle.write(files, out)
    assert (out / "pulumi" / "Pulumi.yaml").read_bytes() == files["pulumi/Pulumi.yaml"]


def test_stack_files_of_a_foreign_directory_are_not_carried(tmp_path, example):
    """A directory orchgen did not write is refused whole, --force or not: a stack file there is the
    user's (issue 39), neither carried nor deleted."""
    from generator.errors import OrchgenError

    src, out = example("grpo-rl"), tmp_path / "out"
    (out / "pulumi").mkdir(parents=True)
    (out / "pulumi" / "Pulumi.grpo-rl.yaml").write_bytes(OPERATOR_STACK)
    files = render(make_plan(spec.load(src), src))
    with pytest.raises(OrchgenError, match="not written by orchgen"):
        bundle.write(files, out, force=True)
    assert tree(out) == {"pulumi/Pulumi.grpo-rl.yaml": OPERATOR_STACK}


def test_folders_are_pathlibs_parents():
    """bundle._folders names a manifest's folders as PurePosixPath(path).parents does (issue 41's string fast
    path), for the clean paths orchgen writes and for a hand-edited manifest's odd ones."""
    import random
    from pathlib import PurePosixPath

    rng = random.Random(41)
    paths = ["a/b/c.yaml", "x", "a//b", "/abs/x", "./a/b", "a/./b", "a/b/", "a/b/.", ".", "", "../a/b", "a/../b"]
    paths += ["/".join(rng.choice(["a", "b", ".", "..", "", "c.y"]) for _ in range(rng.randint(1, 5)))
              for _ in range(500)]
    for i in range(0, len(paths), 5):
        group = set(paths[i:i + 5])
        assert bundle._folders(group) == {str(p) for path in group for p in PurePosixPath(path).parents}, group
