"""fleet.fabric.topograph (issue 20): the site runs NVIDIA Topograph, which labels nodes
`fabric.topograph.run/tier-N` (tier 0 the switch closest to the node) and
`accelerator.topograph.run/domain`. Kueue's and KAI's Topology, Volcano's HyperNode discovery and the
starters' preferred level then use its keys, node-labels.sh writes no switch labels of its own, and
the bundle passes `orchgen validate` with the pinned CRDs (their CEL rules included)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.render import render
from generator.validate.bundle_checks import load_crds, validate_bundle
from tests._consumers import REPO, crd_paths, reference_dir
from tests.conftest import run_orchgen
from tests.support import plan_of

BAREMETAL = yaml.safe_load((REPO / "examples" / "baremetal-k8s-training.yaml").read_text())
OWN = ("orchgen.io/leaf", "orchgen.io/spine", "orchgen.io/nvlink-domain")


def _bundle(gang: str, topograph: bool) -> dict[str, bytes]:
    data: dict[str, Any] = copy.deepcopy(BAREMETAL)
    data["fleet"]["fabric"]["topograph"] = topograph
    data.setdefault("options", {})["gang_scheduler"] = gang
    return render(plan_of(data, name="topograph.yaml"))


def _docs(files: dict[str, bytes], path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(files[path]) if d] if path in files else []


@pytest.mark.parametrize("gang", ["kueue", "kai"])
def test_topology_levels_are_topographs_tiers(gang):
    files = _bundle(gang, True)
    (topo,) = _docs(files, "kubernetes/manifests/18-topology.yaml")
    # two switch tiers in the example (leaves under spines): tier 1 the spine, tier 0 the leaf
    assert topo["spec"]["levels"] == [{"nodeLabel": "fabric.topograph.run/tier-1"},
                                      {"nodeLabel": "fabric.topograph.run/tier-0"},
                                      {"nodeLabel": "kubernetes.io/hostname"}]
    starters = b"".join(v for k, v in files.items() if k.startswith("kubernetes/workloads/")).decode()
    assert "fabric.topograph.run/tier-0" in starters and "orchgen.io/leaf" not in starters
    script = files["kubernetes/node-labels.sh"].decode()
    assert not any(k in script for k in OWN), "node-labels.sh writes switch labels Topograph owns"
    assert "orchgen.io/pool" in script  # the pool labels stay orchgen's
    # without the option, orchgen's own labels, written by node-labels.sh
    plain = _bundle(gang, False)
    assert "orchgen.io/leaf" in plain["kubernetes/node-labels.sh"].decode()


def test_volcano_discovers_hypernodes_from_topographs_labels():
    files = _bundle("volcano", True)
    assert "kubernetes/manifests/18-topology.yaml" not in files  # no HyperNodes by orchgen's switch names
    values = yaml.safe_load(files["kubernetes/helm/volcano.values.yaml"])
    (disc,) = values["custom"]["controller_config_override"]["networkTopologyDiscovery"]
    assert disc["source"] == "label" and disc["config"]["networkTopologyTypes"]["topograph"] == [
        {"nodeLabel": "fabric.topograph.run/tier-1"}, {"nodeLabel": "fabric.topograph.run/tier-0"},
        {"nodeLabel": "kubernetes.io/hostname"}]


@pytest.mark.parametrize("gang", ["kueue", "kai", "volcano"])
def test_the_topograph_bundle_validates(gang, tmp_path: Path):
    for rel, data in _bundle(gang, True).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    report = validate_bundle(tmp_path, load_crds(crd_paths()), reference_dir())
    assert not report.errors, "\n".join(map(str, report.errors))


def test_validate_sees_switch_labels_written_beside_topograph(tmp_path: Path):
    """The check has teeth: node-labels.sh writing orchgen's leaf labels on a Topograph fleet."""
    files = _bundle("kueue", True)
    files["kubernetes/node-labels.sh"] = _bundle("kueue", False)["kubernetes/node-labels.sh"]
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    report = validate_bundle(tmp_path, load_crds(crd_paths()), reference_dir())
    assert any("orchgen.io/leaf=leaf001 but plan.json's fabric says (none)" in str(f) for f in report.errors)


def test_slurm_on_kubernetes_with_topograph_is_refused(tmp_path: Path):
    data = yaml.safe_load((REPO / "examples" / "cloud-training.yaml").read_text())
    data["fleet"].setdefault("fabric", {})["topograph"] = True
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(data))
    proc = run_orchgen("plan", tmp_path / "w.yaml", "-o", tmp_path / "out")
    assert proc.returncode == 2 and not (tmp_path / "out").exists(), proc.stderr
    assert proc.stderr.count("\n") == 1 and "fleet.fabric.topograph" in proc.stderr, proc.stderr
