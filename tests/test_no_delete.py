"""Issue 39: `plan -o DIR` never deletes a file orchgen did not write. The bundle's manifest
(`.orchgen-bundle`) lists the files orchgen wrote and the fleet they belong to; a folder holding
anything else (the input file, a `.git`, a file a user added) is refused, --force or not, with one
line and nothing written. --force replaces only an orchgen bundle (another fleet's), listing what
it removes; a re-plan of the same fleet needs no --force and keeps the operator's stack files."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator import bundle, spec
from generator.decide import make_plan
from generator.render import render

from .conftest import REPO


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(proc, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("orchgen: ") and "internal error" not in proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_a_folder_holding_the_input_file_is_refused(tmp_path, orchgen, force):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    shutil.copy(REPO / "examples/dev-ci.yaml", scratch / "base.yaml")
    (scratch / "notes.txt").write_text("mine\n")
    before = tree(scratch)
    proc = orchgen("plan", scratch / "base.yaml", "-o", scratch, *force)
    _refused(proc, str(scratch), "base.yaml", "input")
    assert tree(scratch) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch"], "staging or lock left behind"


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_a_git_repository_is_refused(tmp_path, orchgen, example, force):
    out = tmp_path / "repo"
    (out / ".git" / "refs").mkdir(parents=True)
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "fleet.md").write_text("ours\n")
    before = tree(out)
    _refused(orchgen("plan", example("dev-ci"), "-o", out, *force), ".git")
    assert tree(out) == before


def test_a_git_repository_inside_a_bundle_is_refused(tmp_path, orchgen, example):
    """`git init` inside a bundle: a re-plan would delete the history; it refuses, --force too."""
    out = tmp_path / "out"
    orchgen("plan", example("dev-ci"), "-o", out, check=True)
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = tree(out)
    for force in ([], ["--force"]):
        _refused(orchgen("plan", example("dev-ci"), "-o", out, *force), ".git")
    assert tree(out) == before


def test_force_no_longer_replaces_a_folder_orchgen_did_not_write(tmp_path, orchgen, example):
    out = tmp_path / "mine"
    out.mkdir()
    for i in range(5):
        (out / f"precious{i}.txt").write_text("keep me")
    before = tree(out)
    proc = orchgen("plan", example("dev-ci"), "-o", out, "--force")
    _refused(proc, "precious0.txt", "not written by orchgen")
    assert "and 2 more" in proc.stderr, proc.stderr  # the first few by name, then a count
    assert tree(out) == before


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_a_file_added_inside_a_bundle_is_never_deleted(tmp_path, orchgen, example, force):
    out = tmp_path / "out"
    orchgen("plan", example("dev-ci"), "-o", out, check=True)
    (out / "kubernetes" / "my-notes.txt").write_text("mine\n")
    (out / "scratch").mkdir()  # an empty folder of the user's goes nowhere either
    before = tree(out)
    proc = orchgen("plan", example("dev-ci"), "-o", out, *force)
    _refused(proc, "kubernetes/my-notes.txt", "scratch/")
    assert tree(out) == before and (out / "scratch").is_dir()


def test_the_manifest_lists_every_file_orchgen_wrote(tmp_path, orchgen, example):
    out = tmp_path / "out"
    orchgen("plan", example("grpo-rl"), "-o", out, check=True)
    listed = bundle.manifest(out)
    assert listed is not None and listed.fleet == "grpo-rl"
    assert set(listed.files) == set(tree(out)) and list(listed.files) == sorted(listed.files)
    # deterministic: the same fleet from another file name and folder gives the same bytes
    other = tmp_path / "elsewhere" / "renamed.yaml"
    other.parent.mkdir()
    shutil.copy(example("grpo-rl"), other)
    orchgen("plan", other, "-o", tmp_path / "out2", check=True)
    assert tree(tmp_path / "out2") == tree(out)


def test_stale_files_orchgen_wrote_are_removed(tmp_path, example):
    """A file an earlier plan wrote and this one does not (a tenant removed, say) is orchgen's: it goes."""
    src, out = example("dev-ci"), tmp_path / "out"
    files = render(make_plan(spec.load(src), src))
    bundle.write({**files, "slurm/old-tenant.sh": b"echo old\n"}, out)
    assert (out / "slurm/old-tenant.sh").is_file()
    bundle.write(files, out)
    assert not (out / "slurm/old-tenant.sh").exists() and tree(out).keys() == set(files) | {bundle.MARKER}


OPERATOR_STACK = b"encryptionsalt: v1:Zm9vYmFyYmF6:v1:cXV1eA==:c2VjcmV0\nconfig:\n  kubernetes:context: prod\n"


def test_another_fleet_needs_force_and_takes_its_stack_files_with_it(tmp_path, orchgen, example):
    out = tmp_path / "out"
    orchgen("plan", example("grpo-rl"), "-o", out, check=True)
    (out / "pulumi" / "Pulumi.grpo-rl.yaml").write_bytes(OPERATOR_STACK)
    (out / "pulumi" / "Pulumi.staging.yaml").write_bytes(OPERATOR_STACK)  # `pulumi stack init staging`
    before = tree(out)
    proc = orchgen("plan", example("cloud-training"), "-o", out)
    _refused(proc, "grpo-rl", "cloud-training", "--force")
    assert tree(out) == before
    proc = orchgen("plan", example("cloud-training"), "-o", out, "--force")
    assert proc.returncode == 0, proc.stderr
    assert "pulumi/Pulumi.grpo-rl.yaml" in proc.stderr and "pulumi/Pulumi.staging.yaml" in proc.stderr
    assert not (out / "pulumi" / "Pulumi.grpo-rl.yaml").exists()
    assert not (out / "pulumi" / "Pulumi.staging.yaml").exists()
    assert bundle.manifest(out).fleet == "cloud-training"
    assert orchgen("plan", example("cloud-training"), "-o", out, "--check").returncode == 0


def test_the_same_fleet_replans_without_force_and_keeps_the_stack_config(tmp_path, orchgen, example):
    out = tmp_path / "out"
    orchgen("plan", example("grpo-rl"), "-o", out, check=True)
    (out / "pulumi" / "Pulumi.grpo-rl.yaml").write_bytes(OPERATOR_STACK)
    (out / "pulumi" / "Pulumi.staging.yaml").write_bytes(OPERATOR_STACK)
    (out / "README.md").write_text("edited\n")  # orchgen's file: replaced
    proc = orchgen("plan", example("grpo-rl"), "-o", out)
    assert proc.returncode == 0 and "remov" not in proc.stderr, proc.stderr
    assert (out / "pulumi" / "Pulumi.grpo-rl.yaml").read_bytes() == OPERATOR_STACK
    assert (out / "pulumi" / "Pulumi.staging.yaml").read_bytes() == OPERATOR_STACK
    assert (out / "README.md").read_text() != "edited\n"
    assert orchgen("plan", example("grpo-rl"), "-o", out, "--check").returncode == 0


def test_a_file_added_while_the_bundle_is_staged_is_refused_not_lost(tmp_path, example, monkeypatch):
    """The check runs again just before the swap: a file that appeared meanwhile stops the write."""
    from generator.errors import OrchgenError

    src, out = example("dev-ci"), tmp_path / "out"
    files = render(make_plan(spec.load(src), src))
    bundle.write(files, out)
    before = tree(out)
    real = bundle._fsync_tree

    def meanwhile(stage):
        real(stage)
        (out / "late.txt").write_text("mine\n")

    monkeypatch.setattr(bundle, "_fsync_tree", meanwhile)
    with pytest.raises(OrchgenError, match="late.txt"):
        bundle.write(files, out)
    assert tree(out) == {**before, "late.txt": b"mine\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "staging left behind"


def test_a_bundle_of_an_orchgen_before_the_manifest_replans(tmp_path, orchgen, example):
    """A marker that lists nothing (written before issue 39): the fleet is plan.json's; the files
    orchgen writes now are its; anything else is still refused."""
    out = tmp_path / "out"
    orchgen("plan", example("dev-ci"), "-o", out, check=True)
    (out / bundle.MARKER).write_bytes(bundle.MARKER_TEXT)
    assert orchgen("plan", example("dev-ci"), "-o", out).returncode == 0
    assert bundle.manifest(out).fleet == "dev-ci"
    (out / bundle.MARKER).write_bytes(bundle.MARKER_TEXT)
    assert orchgen("plan", example("research-lab"), "-o", out).returncode == 2
    (out / "mine.txt").write_text("x")
    assert orchgen("plan", example("dev-ci"), "-o", out, "--force").returncode == 2
    assert (out / "mine.txt").is_file()
