"""Issue 23: what a re-plan does to a running site, before it is written.

- the bundle does not depend on the input's path or file name;
- `orchgen plan -o out/ --diff` (text and JSON) and `orchgen validate NEW --against OLD` give the
  content diff and the impact class of every change on both planes;
- the Slurm classes come from generator/impact/slurm.py's table (applied to a real Slurm in
  tests/test_replan_impact_real.py); the Kubernetes ones render the real charts with `helm template`.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import yaml

from tests.conftest import EXAMPLES
from tests.support import run_cli


def _bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_content_from_two_paths_and_two_names_gives_the_same_bundle(orchgen, tmp_path):
    for example in ("research-lab", "soperator-lab", "cloud-training"):
        (tmp_path / "a" / "deep").mkdir(parents=True, exist_ok=True)
        (tmp_path / "b").mkdir(exist_ok=True)
        first, second = tmp_path / "a" / "deep" / "workload.yaml", tmp_path / "b" / f"{example}-zq9x.yml"
        shutil.copy(EXAMPLES / f"{example}.yaml", first)
        shutil.copy(EXAMPLES / f"{example}.yaml", second)
        orchgen("plan", first, "-o", tmp_path / f"{example}-1", check=True)
        orchgen("plan", second.name, "-o", tmp_path / f"{example}-2", cwd=second.parent, check=True)
        one, two = _bytes(tmp_path / f"{example}-1"), _bytes(tmp_path / f"{example}-2")
        assert one == two, [p for p in one if one[p] != two.get(p)]
        text = b"".join(one.values()).decode()
        assert "zq9x" not in text and "/deep/" not in text
        # the header names the fleet and says to re-plan from its workload.yaml
        name = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())["metadata"]["name"]
        for path, data in one.items():
            if path.startswith("slurm/") and path.endswith(".conf") and b"Written by" in data:
                assert f"`orchgen plan workload.yaml` for fleet {name}".encode() in data, path
        assert "source" not in json.loads(one["plan.json"])


# ---- plan --diff and validate --against ------------------------------------------------------------

def _edited(tmp_path: Path, example: str, *edits: tuple[str, str]) -> Path:
    text = (EXAMPLES / f"{example}.yaml").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "edited" / "workload.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


RESEARCH_EDITS = (("{name: nlp, share: 3}", "{name: nlp, share: 4}"),
                  ("nodes: 64\n      hostnames: gpu-h100-[001-064]", "nodes: 65\n      hostnames: gpu-h100-[001-065]"))


def test_diff_right_after_plan_says_no_changes_and_exits_0(orchgen, example, tmp_path):
    out = tmp_path / "out"
    orchgen("plan", example("research-lab"), "-o", out, check=True)
    proc = orchgen("plan", example("research-lab"), "-o", out, "--diff")
    assert (proc.returncode, proc.stdout, proc.stderr.count("error")) == (0, "No changes.\n", 0), proc.stderr
    # JSON says the same for CI: nothing to do
    proc = orchgen("plan", example("research-lab"), "-o", out, "--diff", "--format", "json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["files"] == data["slurm"] == data["kubernetes"] == data["disruptive"] == []


def test_diff_prints_content_and_impact_disruptive_first_and_writes_nothing(orchgen, example, tmp_path):
    out = tmp_path / "out"
    orchgen("plan", example("research-lab"), "-o", out, check=True)
    before = _bytes(out)
    edited = _edited(tmp_path, "research-lab", *RESEARCH_EDITS)
    proc = orchgen("plan", edited, "-o", out, "--diff")
    assert proc.returncode == 1, proc.stderr
    assert _bytes(out) == before  # nothing written
    text = proc.stdout
    # a unified content diff per file
    assert f"--- {out}/slurm/accounts.sh\n+++ new/slurm/accounts.sh\n" in text
    assert "-tenant nlp 3 -\n+tenant nlp 4 -\n" in text
    # the impact classes, the disruptive summary first
    lines = text.splitlines()
    assert lines[1].startswith("disruptive (")
    assert lines[2] == "  slurm restart_slurmd: slurm.conf NodeName [nodes gpu-h100-[001-065]]"
    assert "  sacctmgr: accounts.sh tenant nlp: tenant nlp 3 - -> tenant nlp 4 -" in lines
    assert lines.index("  sacctmgr: accounts.sh tenant nlp: tenant nlp 3 - -> tenant nlp 4 -") < lines.index(
        f"--- {out}/slurm/accounts.sh")
    assert "  changed: ClusterQueue nlp: updated in place" in lines
    assert "  none (documentation): README.md" in lines
    # JSON, for CI
    proc = orchgen("plan", edited, "-o", out, "--diff", "--format", "json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["slurm_release"] == "22.05"
    assert {(c["file"], c["key"], c["action"]) for c in data["slurm"]} >= {
        ("accounts.sh", "tenant nlp", "sacctmgr"), ("slurm.conf", "NodeName", "restart_slurmd"),
        ("topology.conf", "(content)", "reconfigure")}
    assert data["disruptive"] == ["slurm restart_slurmd: slurm.conf NodeName [nodes gpu-h100-[001-065]]"]
    files = {f["path"]: f for f in data["files"]}
    assert files["slurm/accounts.sh"]["status"] == "changed" and "+tenant nlp 4 -" in files["slurm/accounts.sh"]["diff"]
    assert not any(p.startswith("pulumi/Pulumi.") for p in files)  # the stack config is the operator's, as --check
    # validate NEW --against OLD: the same classes
    new = tmp_path / "new"
    orchgen("plan", edited, "-o", new, check=True)
    proc = orchgen("validate", "--no-fetch", new, "--against", out)
    assert "impact: " in proc.stdout and \
        "  disruptive: slurm restart_slurmd: slurm.conf NodeName [nodes gpu-h100-[001-065]]" in proc.stdout
    assert "  sacctmgr: accounts.sh tenant nlp: tenant nlp 3 - -> tenant nlp 4 -" in proc.stdout


# ---- the Slurm table ---------------------------------------------------------------------------------

def test_the_slurm_table_is_one_cited_table_keyed_by_release():
    from dataclasses import fields

    from generator.impact import slurm

    assert slurm.ACTIONS == ("none", "sacctmgr", "reconfigure", "restart_slurmctld", "restart_slurmd",
                             "drain_restart", "upgrade", "impossible")
    assert [f.name for f in fields(slurm.SlurmChange)] == ["file", "key", "old", "new", "action", "nodes", "reason",
                                                           "cite"]
    for row in slurm.TABLE:
        assert row.action in slurm.ACTIONS and row.cite.startswith("https://") and row.reason, row
    rule = slurm.rule
    assert [rule("slurm.conf", "SelectTypeParameters", v).action for v in ("22.05", "23.02", "23.11", "24.11")] == [
        "restart_slurmctld", "restart_slurmctld", "reconfigure", "reconfigure"]
    assert "slurm-23-02-0-1" in rule("slurm.conf", "SelectTypeParameters", "23.02").cite
    assert [rule("slurm.conf", "node:added", v).action for v in ("22.05", "23.11", "24.11", "26.05")] == [
        "restart_slurmd", "restart_slurmd", "reconfigure", "reconfigure"]
    assert rule("slurm.conf", "SlurmctldPort", "26.05").action == "restart_slurmctld"  # listening ports
    assert rule("slurm.conf", "ClusterName", "24.11").action == "impossible"
    assert rule("slurm.conf", "MpiDefault", "22.05").action == "reconfigure"
    assert rule("accounts.sh", "tenant nlp", "24.11").action == "sacctmgr"


def test_slurm_impact_of_bundle_dirs(tmp_path):
    from generator.impact.slurm import ACTIONS, slurm_impact

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    conf = ("ClusterName=c\nSelectTypeParameters=CR_Core_Memory\n"
            "NodeName=n-[1-3] CPUs=8 RealMemory=1000 Gres=gpu:4 Features=a\n"
            "PartitionName=p Nodes=n-[1-3] MaxTime=1:00:00\n")
    (old / "slurm.conf").write_text("# one comment\n" + conf)
    (old / "cgroup.conf").write_text("# a\nConstrainCores=yes\n")
    (new / "cgroup.conf").write_text("# b\nConstrainCores=yes\n")
    (new / "slurm.conf").write_text(conf.replace("n-[1-3] CPUs=8 RealMemory=1000 Gres=gpu:4",
                                                 "n-[1-2] CPUs=8 RealMemory=1000 Gres=gpu:4\nNodeName=n3 CPUs=8 RealMemory=1000 Gres=gpu:2")
                                    .replace("Nodes=n-[1-3]", "Nodes=n-[1-2],n3"))
    got = slurm_impact(old, new, "24.11")
    assert got == sorted(got, key=lambda c: (c.file, c.key, ACTIONS.index(c.action), c.old or "", c.new or "", c.nodes))
    summary = [(c.file, c.key, c.action, c.nodes) for c in got]
    assert ("cgroup.conf", "(comments)", "none", ()) in summary
    assert ("slurm.conf", "NodeName", "drain_restart", ("n-3",)) in summary  # n-3 removed
    assert ("slurm.conf", "NodeName", "reconfigure", ()) in summary  # n3 added: a reconfigure from 24.11
    assert ("slurm.conf", "PartitionName=p nodes", "reconfigure", ()) in summary
    assert slurm_impact(old, new, "24.11") == got  # deterministic
    assert slurm_impact(old, old, "22.05") == []
    (new / "slurm.conf").write_text((new / "slurm.conf").read_text() + "GresTypes=gpu\n")
    grestypes = [c for c in slurm_impact(old, new, "22.05") if c.key == "GresTypes"]
    assert [(c.action, c.nodes) for c in grestypes] == [("restart_slurmd", ("n-1", "n-2", "n3"))]
    assert "slurm-22-05-8-1/doc/man/man5/slurm.conf.5" in grestypes[0].cite


# ---- Kubernetes: the real charts, rendered ---------------------------------------------------------

def _kube_files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.yaml"))}


def _with_values(files: dict[str, str], release: str, mutate) -> dict[str, str]:
    path = f"kubernetes/helm/{release}.values.yaml"
    values = yaml.safe_load(files[path])
    mutate(values)
    return {**files, path: yaml.safe_dump(values)}


def test_a_values_change_is_a_rollout_or_an_in_place_change_of_the_rendered_chart(orchgen, example, tmp_path):
    from tests._consumers import REPO, require, tool

    from generator.impact.kube import kube_impact

    tool("helm")
    charts = Path(os.environ.get("ORCHGEN_CHARTS", REPO.parent / "shared" / "charts"))
    require((charts / "gpu-operator").is_dir(), f"charts not found at {charts}")
    orchgen("plan", example("research-lab"), "-o", tmp_path / "out", check=True)
    old = _kube_files(tmp_path / "out")
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}

    # the NFD worker DaemonSet's pod template changes: it rolls on every node of its selector
    new = _with_values(old, "gpu-operator", lambda v: v["node-feature-discovery"]["worker"]["tolerations"].append(toleration))
    got = [(c.action, c.object, c.detail) for c in kube_impact(old, new, charts, 16)]
    assert ("rollout", "release gpu-operator: DaemonSet gpu-operator/gpu-operator-node-feature-discovery-worker",
            "pod template changed: rolls on every node (no node selector)") in got, got
    # the GPU Operator's own DaemonSets (ClusterPolicy): on every GPU node
    new = _with_values(old, "gpu-operator", lambda v: v["daemonsets"]["tolerations"].append(toleration))
    rolls = [c for c in kube_impact(old, new, charts, 16) if c.action == "rollout"]
    assert len(rolls) == 1 and "every component on every GPU node (16 GPU nodes in this plan)" in rolls[0].detail
    # a change no pod sees: in place
    new = _with_values(old, "gpu-operator", lambda v: v["dcgmExporter"]["serviceMonitor"].update(interval="30s"))
    got = kube_impact(old, new, charts, 16)
    assert {c.action for c in got} == {"upgraded", "changed"}, got
    assert any("changed in place" in c.detail for c in got)
    # Slurm on Kubernetes (Slinky): a NodeSet's pod template changes, its slurmd pods are recreated
    slinky = _edited(tmp_path, "research-lab", ("slurm_on_kubernetes: auto", "slurm_on_kubernetes: slinky"))
    orchgen("plan", slinky, "-o", tmp_path / "slinky", check=True)
    old_sl = _kube_files(tmp_path / "slinky")
    new = _with_values(old_sl, "slurm", lambda v: v["nodesets"]["h100"]["podSpec"].setdefault("tolerations", [])
                       .append(toleration))
    got = [(c.action, c.object) for c in kube_impact(old_sl, new, charts, 16)]
    assert ("recreates_pods", "release slurm: NodeSet slurm/slurm-worker-h100") in got, got
    # through the CLI, with the charts from ORCHGEN_CHARTS
    edited = tmp_path / "out-edit"
    shutil.copytree(tmp_path / "out", edited)
    vals = edited / "kubernetes/helm/gpu-operator.values.yaml"
    data = yaml.safe_load(vals.read_text())
    data["node-feature-discovery"]["worker"]["tolerations"].append(toleration)
    vals.write_text(yaml.safe_dump(data))
    proc = run_cli(["plan", example("research-lab"), "-o", edited, "--diff", "--format", "json"],
                   capture_output=True, text=True, env={"ORCHGEN_CHARTS": str(charts)})
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert "kubernetes rollout: release gpu-operator: DaemonSet gpu-operator/gpu-operator-node-feature-discovery-" \
           "worker: pod template changed: rolls on every node (no node selector)" in data["disruptive"]


def test_without_helm_the_output_says_so(monkeypatch, orchgen, example, tmp_path):
    from generator.impact import kube

    orchgen("plan", example("research-lab"), "-o", tmp_path / "out", check=True)
    old = _kube_files(tmp_path / "out")
    new = _with_values(old, "kueue", lambda v: v.setdefault("controllerManager", {}).update(replicas=2))
    monkeypatch.setattr(kube, "helm_binary", lambda: None)
    got = kube.kube_impact(old, new, None)
    assert any("helm is not installed" in c.detail for c in got), got


def test_content_named_objects_are_replaced_and_a_raycluster_recreates_its_pods():
    from generator.impact.kube import kube_impact
    from generator.render import render
    from tests.test_replan import REPLANS, plan_of

    _, small, big = next(r for r in REPLANS if r[0] == "grpo-rl+kai:8-to-16-nodes")
    text = lambda files: {p: d.decode() for p, d in files.items() if p.endswith(".yaml")}  # noqa: E731
    got = kube_impact(text(render(plan_of(small))), text(render(plan_of(big))))
    actions = {(c.action, c.object.split()[0]) for c in got}
    assert ("replaced", "Topology") in actions and ("recreates_pods", "RayCluster") in actions, got
    assert got[0].action == "recreates_pods"  # the most disruptive first


def test_a_renamed_kueue_flavor_says_drain_before_applying(orchgen, tmp_path):
    """Issue 34: a re-plan that renames a ResourceFlavor (a hybrid turn adds orchgen.io/plane to the
    flavors' frozen nodeLabels) leaves the workloads admitted on the old flavor outside their tenant's
    usage: `plan --diff` calls it disruptive and says to drain them, naming the old and new flavor."""
    from tests.test_replan import REPLANS

    _, before, after = next(r for r in REPLANS if r[0] == "research-lab+kueue:hybrid-turn")
    (tmp_path / "before.yaml").write_text(yaml.safe_dump(before))
    (tmp_path / "after.yaml").write_text(yaml.safe_dump(after))
    out = tmp_path / "out"
    orchgen("plan", tmp_path / "before.yaml", "-o", out, check=True)
    old = {o["metadata"]["name"] for o in yaml.safe_load_all((out / "kubernetes/manifests/20-kueue.yaml").read_text())
           if o and o["kind"] == "ResourceFlavor"}
    proc = orchgen("plan", tmp_path / "after.yaml", "-o", out, "--diff", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    drains = [c for c in data["kubernetes"] if c["action"] == "drain"]
    assert {c["object"] for c in drains} == {f"ResourceFlavor {n}" for n in old}, data["kubernetes"]
    for c in drains:
        name = c["object"].split()[-1]
        assert f"workloads Kueue admitted on {name} keep running but leave their tenant's quota usage" in c["detail"]
        assert f"kubernetes drain: {c['object']}: {c['detail']}" in data["disruptive"]
    # and the text form leads with it among the disruptive changes
    text = orchgen("plan", tmp_path / "after.yaml", "-o", out, "--diff").stdout
    assert any(line.startswith("  kubernetes drain: ResourceFlavor ") for line in text.splitlines()), text[:3000]
    # a re-plan that keeps the flavors asks for no drain
    proc = orchgen("plan", tmp_path / "before.yaml", "-o", out, "--diff", "--format", "json")
    assert not [c for c in json.loads(proc.stdout)["kubernetes"] if c["action"] == "drain"]
