"""What the plan turns on that the bring-up cannot install (issue 26: "install what the bundle turns on ...
or say exactly why one cannot be installed there"; "Whatever cannot be automated is refused or explained
with the exact steps; nothing is silently skipped"): pyxis and enroot, and the Kubernetes pool's nodes of a
bare-metal hybrid (upstream, k3s, RKE2). One record each (generator/render/bringup/manual.py) reaches both
the bring-up's output (vars.yaml -> site.yml's NOT INSTALLED messages) and the bundle README, with the same
steps. The real bring-up prints them: tests/test_bringup_real.py."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import run_orchgen

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "examples" / "research-lab.yaml"  # bare-metal Slurm + a Kubernetes pool, GPU nodes (pyxis: auto)
BRINGUP = REPO / "tests" / "data" / "bringup" / "fleet.yaml"  # Slurm only


def bundle(tmp_path: Path, source: Path, **fleet) -> Path:
    data = yaml.safe_load(source.read_text())
    data["fleet"].update(fleet)
    f = tmp_path / source.name
    f.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    run_orchgen("plan", f, "-o", out, check=True)
    return out


def records(out: Path) -> dict[str, dict]:
    return {r["name"]: r for r in yaml.safe_load((out / "bringup" / "vars.yaml").read_text())["orchgen_not_installed"]}


def test_the_bring_up_prints_every_record_with_why_and_steps(tmp_path: Path) -> None:
    site = yaml.safe_load((REPO / "templates" / "bringup" / "site.yml").read_text())
    nodes = next(p for p in site if p["name"] == "Nodes")
    [task] = [t for t in nodes["tasks"] if t["name"].startswith("NOT INSTALLED")]
    assert task["loop"] == "{{ orchgen_not_installed | default([]) }}"
    for field in ("item.name", "item.on", "item.why", "item.doc", "item.steps"):
        assert field in task["ansible.builtin.debug"]["msg"], field


@pytest.mark.parametrize("dist", ["upstream", "k3s", "rke2"])
def test_hybrid_kubernetes_nodes_and_containers_are_explained(tmp_path: Path, dist: str) -> None:
    out = bundle(tmp_path, LAB, kubernetes_distribution=dist)
    recs = records(out)
    kube = next(r for n, r in recs.items() if n.startswith("the Kubernetes pool's nodes"))
    assert {"enroot", "pyxis"} <= set(recs)
    readme = (out / "README.md").read_text()
    assert "**Not installed by the bring-up**" in readme
    for r in recs.values():  # the README says what the bring-up says, step by step
        assert f"**{r['name']}**, on {r['on']}: {r['why']} ({r['doc']})" in readme
        for step in r["steps"]:
            assert f"  {step}\n" in readme, step
    steps = "\n".join(kube["steps"])
    if dist == "k3s":  # https://docs.k3s.io/quick-start
        assert kube["doc"] == "https://docs.k3s.io/quick-start"
        assert "curl -sfL https://get.k3s.io | sh -" in steps
        assert "K3S_URL=https://l40s-001:6443 K3S_TOKEN=<token>" in steps
        assert "/var/lib/rancher/k3s/server/node-token" in steps
    elif dist == "rke2":  # https://docs.rke2.io/install/quickstart
        assert "INSTALL_RKE2_TYPE=agent" in steps and "server: https://l40s-001:9345" in steps
        assert "/var/lib/rancher/rke2/server/node-token" in steps
    else:
        assert "kubeadm" in steps and "pulumi config set kubernetes:context" in steps
    assert "bash kubernetes/node-labels.sh" in steps


def test_pyxis_steps_build_against_debians_slurm_headers(tmp_path: Path) -> None:
    recs = records(bundle(tmp_path, BRINGUP))
    assert set(recs) == {"dcgm-exporter", "enroot", "pyxis"}  # no Kubernetes plane: no Kubernetes record
    pyxis = "\n".join(recs["pyxis"]["steps"])
    # libslurm-dev ships /usr/include/slurm/spank.h of the OS's own Slurm release (dpkg -c, Debian 12)
    assert "apt-get install -y libslurm-dev gcc make git" in pyxis
    assert "/usr/local/lib/slurm/spank_pyxis.so" in pyxis  # where slurm/plugstack.conf.d/pyxis.conf loads it
    plug = (tmp_path / "out" / "slurm" / "plugstack.conf.d" / "pyxis.conf").read_text()
    assert "/usr/local/lib/slurm/spank_pyxis.so" in plug
    enroot = "\n".join(recs["enroot"]["steps"])
    assert "releases/download/v3.5.0/enroot_3.5.0-1_${arch}.deb" in enroot


def test_nothing_to_explain_when_the_plan_turns_nothing_on(tmp_path: Path) -> None:
    data = yaml.safe_load(BRINGUP.read_text())
    data.setdefault("options", {}).setdefault("slurm", {})["containers"] = "none"
    data["options"]["slurm"]["telemetry"] = False  # else the DCGM exporter's record (its scrape job wants it)
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump(data))
    run_orchgen("plan", f, "-o", tmp_path / "out", check=True)
    assert records(tmp_path / "out") == {}
    assert "Not installed by the bring-up" not in (tmp_path / "out" / "README.md").read_text()
