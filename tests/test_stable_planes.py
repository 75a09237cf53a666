"""Stable assignment (issue 36): a node keeps its plane across re-plans unless the input moves it
(fleet.pools[].planes), growth goes to the plane that grows, and a move is always a disruptive change
in `plan --diff` and `validate --against`, with the drain steps of both planes.

- the issue's case through the real CLI: a hybrid pool grown from 32 to 40 nodes keeps gpu-025..032
  (the Kubernetes nodes running the service) on Kubernetes, where a fresh split would give them to
  Slurm; the fresh bundle, compared with `validate --against`, is a disruptive move with both drains;
- a move the input asks for (`planes:`) is disruptive in `plan --diff` (exit 1), JSON included;
- property: for random fleets and random size changes (both pools' sizes, job sizes, split modes, held
  nodes), no node changes plane unless the input holds it to the other plane, and every change of
  plane is among the disruptive changes `compare` reports for the two plan.json documents.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from generator.decide import make_plan
from generator.spec.planes import planes_of_document
from generator.errors import OrchgenError
from generator.impact.bundle import compare
from generator.spec import Fleet, hostlist

from .support import cli_env, orchgen_argv, outside_source


def _fleet(nodes: int, train: int, service_gpus: int, *, per_leaf: int = 8, split: str = "node",
           held: dict[str, str] | None = None, extra_pool: int = 0) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "gpu", "nodes": nodes, "gpu": {"type": "h100", "count": 8}}
    if held:
        pool["planes"] = held
    pools = [pool]
    if extra_pool:
        pools.append({"name": "l40s", "nodes": extra_pool, "gpu": {"type": "l40s", "count": 4}})
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "grow"},
        "fleet": {"bare_metal": True, "slurm": {"controllers": ["head01"]},
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": per_leaf}, "pools": pools},
        "workloads": [
            {"name": "pretrain", "nodes": train, "tightly_coupled": True, "pool": "gpu"},
            {"name": "chat-api", "long_lived_services": True, "multi_tenant": True, "bare_metal": False,
             "gpus": service_gpus, "pool": "gpu"},
        ],
        # small Kubernetes planes allowed: the subject here is which node is where, not the plane's size
        "options": {"split": split, "slurm_version": "24.11", "kubernetes_min_nodes": 1},
    }


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), *args], capture_output=True, text=True, cwd=cwd, env=cli_env())


def _planes(bundle: Path) -> dict[str, list[str]]:
    doc = json.loads((bundle / "plan.json").read_text())
    return {name: p["nodes"] for name, p in doc["planes"].items()}


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_growth_keeps_the_service_nodes_on_kubernetes_and_the_fresh_split_is_a_disruptive_move(tmp_path):
    small = _write(tmp_path / "grow.yaml", _fleet(32, 16, 64))
    out = tmp_path / "out"
    assert _run("plan", str(small), "-o", str(out), "-q", cwd=tmp_path).returncode == 0
    assert _planes(out) == {"kubernetes": ["gpu-[025-032]"], "slurm": ["gpu-[001-024]"]}
    old = tmp_path / "old"
    assert _run("plan", str(small), "-o", str(old), "-q", cwd=tmp_path).returncode == 0

    big = _write(tmp_path / "grow40.yaml", _fleet(40, 16, 64))
    fresh = tmp_path / "fresh"  # no bundle there yet: the fresh split moves the boundary
    assert _run("plan", str(big), "-o", str(fresh), "-q", cwd=tmp_path).returncode == 0
    assert _planes(fresh) == {"kubernetes": ["gpu-[033-040]"], "slurm": ["gpu-[001-032]"]}

    # the re-plan over the old bundle: the service's nodes stay, the 8 new ones go to the plane that grows
    proc = _run("plan", str(big), "-o", str(out), "--diff", cwd=tmp_path)
    assert proc.returncode == 1 and "move:" not in proc.stdout, proc.stdout[:3000]
    proc = _run("plan", str(big), "-o", str(out), "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _planes(out) == {"kubernetes": ["gpu-[025-032]"], "slurm": ["gpu-[001-024,033-040]"]}
    readme = (out / "README.md").read_text()
    assert "pool gpu: stable: a node keeps its plane across re-plans slurm gpu-[001-024,033-040] (32 nodes, demand 16)" in readme
    # planning the same input over its own bundle changes nothing (the fixed point)
    assert _run("plan", str(big), "-o", str(out), "--check", cwd=tmp_path).returncode == 0

    # recommend over the running bundle says the same as the re-plan
    proc = _run("recommend", str(big), "--previous", str(old), "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0 and any("pool gpu: stable: a node keeps its plane" in r
                                        for r in json.loads(proc.stdout)["fleet"]["reasons"]), proc.stdout[-2000:]
    proc = _run("validate", str(out), "--against", str(old), "--no-fetch", cwd=outside_source())
    assert proc.returncode == 0 and "move:" not in proc.stdout, proc.stdout[-3000:]
    # the fresh bundle against the old one: gpu-025..032 leave Kubernetes, which must drain them first
    proc = _run("validate", str(fresh), "--against", str(old), "--no-fetch", cwd=outside_source())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 disruptive change(s)" in proc.stdout or "disruptive change(s)" in proc.stdout
    assert "disruptive: move: gpu-[025-032] from kubernetes to slurm" in proc.stdout, proc.stdout[-3000:]
    assert "kubectl drain gpu-025" in proc.stdout and "--ignore-daemonsets" in proc.stdout
    assert "scontrol update NodeName=gpu-[025-032] State=RESUME" in proc.stdout


def test_a_move_the_input_asks_for_is_disruptive_with_both_planes_drains(tmp_path):
    out = tmp_path / "out"
    assert _run("plan", str(_write(tmp_path / "a.yaml", _fleet(32, 16, 64))), "-o", str(out), "-q",
                cwd=tmp_path).returncode == 0
    moved = _write(tmp_path / "b.yaml", _fleet(32, 16, 64, held={"kubernetes": "gpu-[023-024]"}))
    proc = _run("plan", str(moved), "-o", str(out), "--diff", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "disruptive: " not in proc.stdout  # plan --diff lists them under its own heading
    assert "move: gpu-[023-024] from slurm to kubernetes" in proc.stdout, proc.stdout[:3000]
    assert 'scontrol update NodeName=gpu-[023-024] State=DRAIN Reason="orchgen: moves to kubernetes"' in proc.stdout
    assert "kubectl uncordon gpu-023 gpu-024" in proc.stdout
    proc = _run("plan", str(moved), "-o", str(out), "--diff", "--format", "json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert [(m["nodes"], m["old"], m["new"]) for m in doc["moves"]] == [("gpu-[023-024]", "slurm", "kubernetes")]
    assert doc["disruptive"][0].startswith("move: gpu-[023-024] from slurm to kubernetes")
    assert _run("plan", str(moved), "-o", str(out), "-q", cwd=tmp_path).returncode == 0
    assert _planes(out) == {"kubernetes": ["gpu-[023-032]"], "slurm": ["gpu-[001-022]"]}


def test_a_held_node_of_another_pool_is_one_line(tmp_path):
    bad = _write(tmp_path / "bad.yaml", _fleet(8, 4, 16, held={"slurm": "gpu-[007-009]"}))
    proc = _run("plan", str(bad), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "fleet.pools[0].planes.slurm" in lines[0] and "'gpu-009' is not a node of pool gpu" \
        in lines[0], proc.stderr
    both = _write(tmp_path / "both.yaml", _fleet(8, 4, 16, held={"slurm": "gpu-001", "kubernetes": "gpu-[001-002]"}))
    proc = _run("plan", str(both), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2 and "held to both slurm and kubernetes" in proc.stderr, proc.stderr


# ------------------------------------------------------------------ the property


def _plan_doc(doc: dict[str, Any], previous: dict[str, str] | None) -> dict[str, Any]:
    return make_plan(Fleet.model_validate(doc), "grow.yaml", previous).to_json()


@st.composite
def _changes(draw):
    per_leaf = draw(st.sampled_from([4, 8, 16]))
    n = draw(st.integers(4, 48))
    train = draw(st.integers(2, max(2, n // 2)))  # multi-node: the Slurm plane stays in both plans
    service = draw(st.integers(1, max(1, (n - train) * 8)))
    split = draw(st.sampled_from(["auto", "node", "leaf"]))
    extra = draw(st.sampled_from([0, 0, 4]))
    before = _fleet(n, train, service, per_leaf=per_leaf, split=split, extra_pool=extra)
    n2 = max(1, n + draw(st.integers(-n // 2, 24)))
    train2 = max(2, min(n2, train + draw(st.integers(-4, 8))))
    service2 = max(1, service + draw(st.integers(-16, 32)))
    nodes = [f"gpu-{i:03d}" for i in range(1, n2 + 1)]
    moved = draw(st.lists(st.sampled_from(nodes), max_size=4, unique=True))
    held = {}
    for node in moved:
        held.setdefault(draw(st.sampled_from(["slurm", "kubernetes"])), []).append(node)
    held_expr = {plane: hostlist.compress(sorted(ns)) for plane, ns in held.items()}
    extra2 = max(1, extra + draw(st.integers(-3, 8))) if extra else 0  # the second pool grows or shrinks too
    after = _fleet(n2, train2, service2, per_leaf=per_leaf, split=split, held=held_expr or None, extra_pool=extra2)
    return before, after, {node: plane for plane, ns in held.items() for node in ns}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_changes())
def test_no_node_changes_plane_unless_the_input_moves_it_and_every_move_is_disruptive(case):
    before, after, held = case
    try:
        old = _plan_doc(before, None)
    except OrchgenError:
        assume(False)
        return
    assume(set(old["planes"]) == {"slurm", "kubernetes"})
    previous = planes_of_document(old)
    try:
        new = _plan_doc(after, previous)
    except OrchgenError as exc:  # a re-plan that cannot keep the nodes is refused, never moves them
        assert exc.field and exc.field.startswith(("workloads", "fleet")), exc
        return
    now = planes_of_document(new)
    changed = {n for n in previous.keys() & now.keys() if previous[n] != now[n]}
    assert set(new["planes"]) == set(old["planes"])  # both plans hybrid: no plane left whose nodes must go
    for node in changed:
        wanted = {"slurm": "slurm"}.get(held.get(node, ""), "kubernetes" if node in held else None)
        assert wanted == now[node], (node, previous[node], now[node], held)
    event(f"{len(changed)} moved, {len(previous.keys() & now.keys()) - len(changed)} kept")
    impact = compare({"plan.json": json.dumps(old).encode()}, {"plan.json": json.dumps(new).encode()}, "old", "new")
    moved = {n for m in impact.moves for n in hostlist.expand(m.nodes)}
    assert moved == changed
    assert len([line for line in impact.disruptive() if line.startswith("move: ")]) == len(impact.moves)
    for m in impact.moves:  # the plane each leaves drains it, the one it joins takes it
        steps = m.steps()
        assert steps[0].startswith(f"{m.old}: ") and steps[-1].startswith(f"{m.new}: ")
        assert ("scontrol update" in steps[0] and "State=DRAIN" in steps[0]) if m.old == "slurm" else \
            "kubectl drain" in steps[0]


def test_a_job_grown_past_what_its_plane_kept_is_refused_naming_the_move(tmp_path):
    out = tmp_path / "out"
    assert _run("plan", str(_write(tmp_path / "a.yaml", _fleet(32, 16, 64))), "-o", str(out), "-q",
                cwd=tmp_path).returncode == 0
    bigger = _write(tmp_path / "b.yaml", _fleet(32, 28, 16))  # Slurm kept 24 nodes; the job now wants 28
    proc = _run("plan", str(bigger), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "workloads[0].nodes" in line and "pretrain spans 28 nodes" in line and "the pool's `planes:` moves them" \
        in line, line
    # the move asked for: four of Kubernetes' nodes held to Slurm, and the plan goes through
    moved = _write(tmp_path / "c.yaml", _fleet(32, 28, 16, held={"slurm": "gpu-[025-028]"}))
    assert _run("plan", str(moved), "-o", str(out), "-q", cwd=tmp_path).returncode == 0
    assert _planes(out) == {"kubernetes": ["gpu-[029-032]"], "slurm": ["gpu-[001-028]"]}
