"""`orchgen validate` of a plane beyond one cluster (issue 20, "Beyond one cluster"): every
clusters/<name>/ is checked as a single cluster's kubernetes/ and pulumi/ are (CRD schemas and CEL,
chart values, references, node labels), findings name the file under clusters/<name>/; `--against`
compares cluster by cluster, a cluster added or removed reported whole; a damaged multi-cluster bundle
gives findings, never a traceback.

The fleet is examples/multicluster/kubernetes-128k.yaml cut to 5,120 nodes (five spine groups of
1,024: worker-01 four of them, worker-02 one), the smallest fleet past the 5,000-node envelope, so
the checks stay quick; one test validates the 128k example itself. CRDs and chart defaults are the
reference data, given as a user gives them (--crds / --chart-defaults).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator import bundle
from generator.decide import make_plan
from generator.render import render
from generator.spec.models import Fleet
from generator.validate.bundle_checks import load_crds, validate_bundle
from tests._consumers import REPO, crd_paths, reference_dir
from tests.test_hostile import damage_one
from tests.support import orchgen_argv

EXAMPLE = REPO / "examples" / "multicluster" / "kubernetes-128k.yaml"


def fleet(nodes: int) -> dict[str, Any]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    pool = doc["fleet"]["pools"][0]
    pool["nodes"], pool["hostnames"] = nodes, f"gpu[00001-{nodes:05d}]"
    doc["metadata"]["name"] = f"mk{nodes}"
    for w in doc["workloads"]:  # the starters fit the smaller fleet (no capacity warning)
        w["jobs_at_once"] = 1
    return doc


@cache
def files(nodes: int = 5120, gitops: str = "none") -> dict[str, bytes]:
    doc = fleet(nodes)
    doc["options"]["gitops"] = gitops
    return render(make_plan(Fleet.model_validate(doc), "fleet.yaml"))


@cache
def registry():
    return load_crds(crd_paths())


def write(tmp: Path, name: str, nodes: int = 5120, gitops: str = "none") -> Path:
    out = tmp / name
    bundle.write(files(nodes, gitops), out)
    return out


def orchgen(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ})


def consumers() -> list[str]:
    return [a for p in crd_paths() for a in ("--crds", p)] + ["--chart-defaults", reference_dir()]


def errors(root: Path) -> list[str]:
    return [str(f) for f in validate_bundle(root, registry(), reference_dir()).errors]


def test_the_bundle_has_two_workers():
    plan = json.loads(files()["plan.json"])
    assert [c["name"] for c in plan["clusters"]] == ["manager", "worker-01", "worker-02"]


@pytest.mark.parametrize("gitops", ["none", "flux", "argocd"])
def test_a_multi_cluster_bundle_validates_clean(gitops, tmp_path):
    root = write(tmp_path, "b", gitops=gitops)
    if gitops != "none":  # in process (the CLI's exit code is proven once, below)
        report = validate_bundle(root, registry(), reference_dir())
        assert not report.findings, "\n".join(map(str, report.findings))
        return
    r = orchgen("validate", root, *consumers())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not checked: validate reads one cluster" not in r.stdout
    assert "error" not in r.stdout and "warning:" not in r.stdout, r.stdout


def test_the_128k_example_validates_clean(tmp_path):
    out = tmp_path / "b"
    r = orchgen("plan", EXAMPLE, "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    report = validate_bundle(out, registry(), reference_dir())
    assert not report.errors and not report.warnings, "\n".join(map(str, report.findings))


def test_each_clusters_folder_is_really_checked(tmp_path):
    """The same damage in each cluster is found there: a worker's ClusterQueue field of the wrong type
    (its CRD's enum), the manager's MultiKueueCluster given two sources (its CRD's CEL rule), a
    worker's Helm value the chart does not have (chart defaults) and a built-in object's unknown field."""
    root = write(tmp_path, "b")
    w2 = root / "clusters/worker-02/kubernetes/manifests/20-kueue.yaml"
    text = w2.read_text()
    assert "  queueingStrategy: BestEffortFIFO\n" in text
    w2.write_text(text.replace("  queueingStrategy: BestEffortFIFO\n", "  queueingStrategy: Sometimes\n", 1))
    line_cq = w2.read_text().split("queueingStrategy: Sometimes")[0].count("\n") + 1
    mk = root / "clusters/manager/kubernetes/manifests/19-multikueue.yaml"
    text = mk.read_text()
    old = "    kubeConfig:\n"
    assert old in text
    mk.write_text(text.replace(old, "    clusterProfileRef: {name: x}\n" + old, 1))
    values = root / "clusters/worker-01/kubernetes/helm/kueue.values.yaml"
    values.write_text(values.read_text() + "notAKueueValue: 1\n")
    ns = root / "clusters/worker-01/kubernetes/manifests/00-namespaces.yaml"
    text = ns.read_text()
    ns.write_text(text.replace("metadata:\n", "metadata:\n  nmae: typo\n", 1))
    found = errors(root)
    assert any(e.startswith(f"clusters/worker-02/kubernetes/manifests/20-kueue.yaml:{line_cq}: ")
               and "queueingStrategy" in e for e in found), found
    assert any(e.startswith("clusters/manager/kubernetes/manifests/19-multikueue.yaml:") and "exactly one" in e
               for e in found), found
    assert any(e.startswith("clusters/worker-01/kubernetes/helm/kueue.values.yaml:") and "notAKueueValue" in e
               for e in found), found
    assert any(e.startswith("clusters/worker-01/kubernetes/manifests/00-namespaces.yaml:") and "nmae" in e
               for e in found), found
    # nothing is named outside the cluster folders, and the CLI exits 1 (findings), one line each
    assert all(e.startswith("clusters/") for e in found), found
    r = orchgen("validate", root, *consumers())
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "clusters/worker-02/kubernetes/manifests/20-kueue.yaml:" in r.stdout


def test_a_worker_labels_only_its_own_nodes_and_the_manager_reads_them_all(tmp_path):
    """The manager's flavors and starters select nodes that only the workers' node-labels.sh label: a
    worker script without the pool label leaves the manager's jobs nowhere to go."""
    root = write(tmp_path, "b")
    for w in ("worker-01", "worker-02"):
        script = root / f"clusters/{w}/kubernetes/node-labels.sh"
        script.write_text(script.read_text().replace("orchgen.io/pool=h100", "orchgen.io/pool=h200"))
    found = errors(root)
    assert any(e.startswith("clusters/manager/kubernetes/") and "orchgen.io/pool=h100" in e for e in found), found
    assert any(e.startswith("clusters/worker-01/kubernetes/") and "orchgen.io/pool=h100" in e for e in found), found


def test_a_replan_that_grows_the_fleet_by_one_cluster_validates_against_the_old(tmp_path):
    old = write(tmp_path, "old", 5120)
    new = write(tmp_path, "new", 10240)  # ten spine groups: 4 + 4 + 2, a third worker
    assert [c["name"] for c in json.loads((new / "plan.json").read_text())["clusters"]][-1] == "worker-03"
    r = orchgen("validate", new, "--against", old, *consumers())
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert f"cluster worker-03: created (not in {old})" in out
    assert "cluster manager:   created: MultiKueueCluster worker-03" in out
    assert "cluster manager:   changed: MultiKueueConfig multikueue" in out
    assert "cluster worker-03:   created: ClusterQueue frontier" in out
    # and back: the cluster is deleted whole, its releases and CRD owners named, disruptive
    r = orchgen("validate", old, "--against", new, *consumers())
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert f"cluster worker-03: deleted (only in {new})" in out
    assert "cluster worker-03:   release removed: kueue (kueue-system), owner of the CRDs of" in out
    assert "cluster manager:   disruptive: kubernetes deleted: MultiKueueCluster worker-03" in out


def test_an_update_the_api_server_refuses_is_found_in_a_cluster(tmp_path):
    """--against runs the CRDs' transition rules per cluster: a ResourceFlavor's spec is immutable in
    Kueue's CRD, so changing a worker's flavor's node labels in place is an error there."""
    old = write(tmp_path, "old")
    new = tmp_path / "new"
    shutil.copytree(old, new)
    path = new / "clusters/worker-01/kubernetes/manifests/20-kueue.yaml"
    text = path.read_text()
    assert "    orchgen.io/pool: h100\n" in text
    path.write_text(text.replace("    orchgen.io/pool: h100\n", "    orchgen.io/pool: h100\n    extra: x\n", 1))
    report = validate_bundle(new, registry(), reference_dir(), against=old)
    refused = [str(f) for f in report.errors if "would reject this update" in f.message]
    assert refused and all(f.startswith("clusters/worker-01/kubernetes/manifests/20-kueue.yaml:") for f in refused), \
        "\n".join(map(str, report.findings))


# ---- damaged multi-cluster bundles: findings, never a crash -------------------------------------------


def _damage(root: Path, how: str) -> None:
    clusters = root / "clusters"
    if how == "plan-lists-a-missing-cluster":
        shutil.rmtree(clusters / "worker-02")
    elif how == "folder-not-in-plan":
        shutil.copytree(clusters / "worker-02", clusters / "worker-09")
    elif how == "cluster-is-a-link-outside":
        shutil.rmtree(clusters / "worker-02")
        (clusters / "worker-02").symlink_to(root.parent / "elsewhere", target_is_directory=True)
        (root.parent / "elsewhere" / "kubernetes").mkdir(parents=True)
        (root.parent / "elsewhere" / "kubernetes" / "x.yaml").write_text("kind: Secret\n")
    elif how == "file-is-a-link-outside":
        (root.parent / "secret.txt").write_text("password=hunter2\n")
        target = clusters / "worker-01/kubernetes/manifests/20-kueue.yaml"
        target.unlink()
        target.symlink_to(root.parent / "secret.txt")
    elif how == "yaml-bomb":
        (clusters / "manager/kubernetes/manifests/20-kueue.yaml").write_text(
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
                for i in range(8)))
    elif how == "not-utf8":
        (clusters / "worker-01/kubernetes/helm/releases.yaml").write_bytes(b"releases: [\xff\xfe]\n")
    elif how == "clusters-junk-in-plan":
        plan = json.loads((root / "plan.json").read_text())
        plan["clusters"] = [{"name": 5}, "x", {"name": "worker-01", "pools": [1], "role": []},
                            {"name": "manager", "role": "manager"}]
        (root / "plan.json").write_text(json.dumps(plan))
    elif how == "clusters-is-a-file":
        shutil.rmtree(clusters)
        clusters.write_text("x")
    elif how == "bad-cluster-name":
        shutil.copytree(clusters / "worker-02", clusters / "Worker_2 ")
    elif how == "top-level-kubernetes":
        shutil.copytree(clusters / "worker-02" / "kubernetes", root / "kubernetes")


DAMAGE = ["plan-lists-a-missing-cluster", "folder-not-in-plan", "cluster-is-a-link-outside", "file-is-a-link-outside",
          "yaml-bomb", "not-utf8", "clusters-junk-in-plan", "clusters-is-a-file", "bad-cluster-name",
          "top-level-kubernetes"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_multi_cluster_bundle_gives_findings_not_a_crash(how, tmp_path):
    root = write(tmp_path, "b")
    _damage(root, how)
    report = validate_bundle(root, registry(), reference_dir())  # raising here is the failure
    assert report.errors  # the CLI exits 1 (findings), not 2 (bad input) nor 3 (an internal error)
    out = "\n".join(map(str, report.findings + report.notices))
    assert "hunter2" not in out  # never another file's content
    assert all(f.path and f.line >= 0 and "\n" not in f.message for f in report.findings)
    expected = {"plan-lists-a-missing-cluster": "plan.json:0: cluster worker-02 has no folder",
                "folder-not-in-plan": "clusters/worker-09/:0: a cluster folder that plan.json does not list",
                "file-is-a-link-outside": "clusters/worker-01/kubernetes/manifests/20-kueue.yaml:0: is a symbolic link",
                "yaml-bomb": "clusters/manager/kubernetes/manifests/20-kueue.yaml:",
                "not-utf8": "clusters/worker-01/kubernetes/helm/releases.yaml:0: not UTF-8",
                "bad-cluster-name": "not a cluster name orchgen writes",
                "top-level-kubernetes": "kubernetes/:0: a multi-cluster bundle keeps"}.get(how)
    if expected:
        assert expected in out, out


@cache
def _pristine_small() -> dict[str, bytes]:
    return dict(files(5120, "flux"))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_damage_inside_the_cluster_folders_never_crashes_validate(data):
    """tests/test_hostile.py's damage (flips, truncation, junk values, dropped files), aimed at clusters/."""
    pristine = _pristine_small()
    damaged = dict(pristine)
    inside = sorted(p for p in pristine if p.startswith("clusters/"))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(inside))
        damage_one(damaged, path, data.draw, flips=st.just(1))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "b"
        for rel, blob in damaged.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(blob)
        report = validate_bundle(root, registry(), reference_dir())  # raising here is the failure
    assert all(f.path and f.line >= 0 and "\n" not in f.message for f in report.findings)
