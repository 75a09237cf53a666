"""Re-plans under Pulumi's own mocks: the bundle's program, run on the old bundle and on the new one,
deletes nothing before what depends on it (issue 20).

Pulumi deletes what left the program in reverse dependency order of its state (a resource after
every resource that depends on it) and waits for each delete to finish. Kueue keeps a finalizer on
a Topology while a ResourceFlavor names it, on a ResourceFlavor while a ClusterQueue uses it, and
on a ClusterQueue while a LocalQueue points at it: a named object that depends on its namer in
Pulumi's graph is deleted first and waits for ever (the issue's hang, with the Topology depending
on the flavors). So, for every re-plan scenario of tests/test_replan.py that deletes objects: no
deleted object that another deleted object names depends (transitively) on that namer in the old
run's graph. And for every bundle, each Topology is a dependency of the flavors that name it.
The old file layout (the Topology in 30-topology.yaml, after the flavors) is shown to hang.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from generator.render import render
from tests import kube_order as ko
from tests._consumers import require
from tests.support import plan_of as support_plan_of
from tests.test_replan import REPLANS, identity, objects

CONTEXT = {"kubernetes:context": "test-cluster"}


def plan_of(data: dict[str, Any]):
    """The scenario's plan, for Pulumi (no GitOps files: Argo CD refuses some scheduler variants)."""
    data = copy.deepcopy(data)
    data.setdefault("options", {})["gitops"] = "none"
    return support_plan_of(data, name="replan.yaml")

try:
    from tests import pulumi_mocks
except ImportError as missing:  # pulumi or pulumi-kubernetes not installed
    pulumi_mocks, MISSING = None, str(missing)


@pytest.fixture(autouse=True)
def _pulumi_installed() -> None:
    require(pulumi_mocks, f"Pulumi SDK not importable: {MISSING if pulumi_mocks is None else ''}")


class _Mocks(pulumi_mocks.ValidatingMocks if pulumi_mocks else object):  # type: ignore[misc]
    """Records only: the objects' schemas are tests/test_pulumi_stack.py's to check."""

    def __init__(self) -> None:
        super().__init__(lambda obj: [])


Ident = ko.Ident
names = ko.names  # what an object names, whose deletion a finalizer holds while it exists


def _ident(inputs: dict[str, Any]) -> Ident:
    return identity(inputs)


def graph(bundle: Path) -> tuple[dict[Ident, set[Ident]], dict[Ident, dict[str, Any]]]:
    """The bundle's Pulumi program under mocks: each object's transitive dependencies among the
    objects (through releases too), and the objects by identity."""
    mocks = _Mocks()
    run = pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", mocks, CONTEXT)
    mocks.check()
    direct = {r.urn: set(r.dependencies) for r in run.resources}
    closure: dict[str, set[str]] = {}

    def reach(urn: str) -> set[str]:
        if urn not in closure:
            closure[urn] = set()
            for dep in direct.get(urn, ()):
                closure[urn] |= {dep} | reach(dep)
        return closure[urn]

    by_urn = {r.urn: _ident(r.inputs) for r in run.objects}
    deps = {by_urn[u]: {by_urn[d] for d in reach(u) if d in by_urn} for u in by_urn}
    return deps, {_ident(r.inputs): r.inputs for r in run.objects}


def write(files: dict[str, bytes], root: Path) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def hangs(old_deps: dict[Ident, set[Ident]], old: dict[Ident, dict[str, Any]], new: set[Ident]) -> list[str]:
    """Deletes Pulumi would start before what holds them: a deleted X named by a deleted Y while X
    depends on Y in the old state (so X goes first, and its finalizer waits for Y)."""
    gone = old.keys() - new
    out = []
    for y in sorted(gone):
        for x in names(old[y]):
            if x in gone and y in old_deps.get(x, set()):
                out.append(f"{x[1]} {x[3]} is deleted before {y[1]} {y[3]}, which names it")
    return out


def inversions(deps: dict[Ident, set[Ident]], objs: dict[Ident, dict[str, Any]]) -> list[str]:
    """Named objects that depend on their namer (a later re-plan deleting both would hang)."""
    return [f"{x[1]} {x[3]} depends on {y[1]} {y[3]}, which names it"
            for y, obj in sorted(objs.items()) for x in names(obj) if x in objs and y in deps[x]]


def _deleting() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The scenarios of tests/test_replan.py that delete something Kueue, KAI or Volcano hold."""
    out = []
    for rid, before, after in REPLANS:
        old, new = objects(plan_of(before)), objects(plan_of(after))
        gone = {identity(o) for o in old} - {identity(o) for o in new}
        if any(k[1] != "Namespace" for k in gone):
            out.append((rid, before, after))
    return out


DELETING = _deleting()


def test_the_deleting_replans_include_a_topology_change():
    ids = {r[0] for r in DELETING}
    assert {"grpo-rl:8-to-16-nodes", "grpo-rl+kai:8-to-16-nodes"} <= ids


@pytest.mark.parametrize(("rid", "before", "after"), DELETING, ids=[r[0] for r in DELETING])
def test_a_replan_deletes_nothing_before_what_names_it(rid, before, after, tmp_path: Path) -> None:
    old_deps, old = graph(write(render(plan_of(before)), tmp_path / "old"))
    new_deps, new = graph(write(render(plan_of(after)), tmp_path / "new"))
    assert hangs(old_deps, old, set(new)) == [], rid
    assert inversions(new_deps, new) == [], rid


def test_each_topology_is_a_dependency_of_its_flavors(tmp_path: Path) -> None:
    _, before, after = next(r for r in REPLANS if r[0] == "grpo-rl:8-to-16-nodes")
    deps, objs = graph(write(render(plan_of(after)), tmp_path / "b"))
    flavors = [(i, o) for i, o in objs.items() if i[1] == "ResourceFlavor" and o["spec"].get("topologyName")]
    assert flavors
    for ident, flavor in flavors:
        assert ("kueue.x-k8s.io", "Topology", "", flavor["spec"]["topologyName"]) in deps[ident], ident


def test_the_old_layout_hangs_and_the_check_sees_it(tmp_path: Path) -> None:
    """The Topology in a file after the flavors (orchgen's layout before issue 20): the old
    Topology depends on the old flavors, so Pulumi deletes it first and Kueue's finalizer holds it."""
    _, before, after = next(r for r in REPLANS if r[0] == "grpo-rl:8-to-16-nodes")
    old_root = write(render(plan_of(before)), tmp_path / "old")
    manifests = old_root / "kubernetes" / "manifests"
    (manifests / "18-topology.yaml").rename(manifests / "30-topology.yaml")
    old_deps, old = graph(old_root)
    _, new = graph(write(render(plan_of(after)), tmp_path / "new"))
    found = hangs(old_deps, old, set(new))
    assert any(f.startswith("Topology ") and "ResourceFlavor" in f for f in found), found
