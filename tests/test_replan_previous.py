"""Re-plans from bundles the previous orchgen wrote (tests/data/previous-bundles: KAI v0.13.0 from
its old home and the Topology after the flavors; GKE's quota among the manifests) to today's
(KAI v0.17.0, 18-topology.yaml, kubernetes/prerequisites/), issue 20:
- `orchgen validate NEW --against OLD` passes with the pinned CRDs (KAI's v0.17.0 ones from
  ../shared/charts, CEL transition rules included) and reports the KAI version change;
- under Pulumi's mocks, the previous program's state (its own pulumi/__main__.py on its own files)
  and today's program agree that nothing deleted goes before what names it.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from generator.render import render
from tests import golden
from tests._consumers import REPO, crd_paths, require
from tests.support import orchgen_argv

PREVIOUS = REPO / "tests" / "data" / "previous-bundles"
CASES = sorted(p.name for p in PREVIOUS.iterdir() if p.is_dir())


def _new_bundle(case: str, root: Path) -> Path:
    (c,) = [c for c in golden.CASES if c.name == case]
    for rel, data in render(golden.plan_of(c)).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_the_previous_bundles_are_the_old_versions_and_layout():
    assert CASES == ["gke-training", "oke-training-kai"]
    kai = (PREVIOUS / "oke-training-kai/kubernetes/helm/releases.yaml").read_text()
    assert "oci://ghcr.io/nvidia/kai-scheduler" in kai and "v0.13.0" in kai
    assert (PREVIOUS / "gke-training/kubernetes/manifests/05-gpu-operator.yaml").is_file()
    assert (PREVIOUS / "gke-training/kubernetes/manifests/30-topology.yaml").is_file()


@pytest.mark.parametrize("case", CASES)
def test_validate_against_the_previous_bundle_passes(case, tmp_path):
    new = _new_bundle(case, tmp_path / "new")
    crds = [a for p in crd_paths() for a in ("--crds", str(p))]  # every pinned CRD directory
    proc = subprocess.run([*orchgen_argv(), "validate", str(new), "--against",
                           str(PREVIOUS / case), *crds, "--no-fetch"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if case == "oke-training-kai":
        assert "kai-scheduler" in proc.stdout and "v0.17.0" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("case", CASES)
def test_pulumi_replan_from_the_previous_bundle_deletes_nothing_early(case, tmp_path):
    from tests import test_pulumi_replan as pr

    require(pr.pulumi_mocks, "Pulumi SDK not importable")
    old_deps, old = pr.graph(PREVIOUS / case)
    new_deps, new = pr.graph(_new_bundle(case, tmp_path / "new"))
    assert pr.hangs(old_deps, old, set(new)) == []
    assert pr.inversions(new_deps, new) == []
    # the quota moved from the manifests to the prerequisites: the same object, not deleted. The
    # tenant namespace's GPU ResourceQuota is deleted on purpose where Kueue's queue is the quota
    # (generator/render/kubernetes/common.py resource_quota_gpus), and nothing names it
    gone = set(old) - set(new)
    assert gone <= {k for k in old if k[1] in ("Topology", "ResourceFlavor", "Queue")
                    or (k[1] == "ResourceQuota" and k[3] == "gpu-quota")}, gone
