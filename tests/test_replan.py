"""Re-plans that the API server accepts: no field it freezes changes in place.

A re-plan is applied as an update of every object whose identity (API group, kind, namespace,
name) is in both bundles, a create of the new ones and a delete of the gone ones; that is what
`pulumi up` (the Pulumi resource name is the object's name), an Argo CD sync and a Flux reconcile
(both prune) do with kubernetes/manifests/. An update is refused when it changes a field a CRD's
transition rule (`oldSelf`) freezes. `immutable_violations` compares an old and a new bundle for
the frozen fields of the kinds a bundle emits (IMMUTABLE, read off the pinned CRDs; a test checks
that every transition rule of an emitted kind is listed there), and the re-plans below (a scale-out
to more leaves, a tenant added or removed, a hybrid turn) run it for every example with a
Kubernetes plane under every gang scheduler.
"""
from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from .support import plan_of as support_plan_of

from generator.render.kubernetes import common, manifests
from tests._consumers import REPO, reference_dir

EXAMPLES = REPO / "examples"
SCHEDULERS = ("kueue", "volcano", "kai")

Obj = dict[str, Any]
Identity = tuple[str, str, str, str]
MISSING = object()


def _get(obj: Obj, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return MISSING
        obj = obj[key]
    return obj


def _frozen(*paths: tuple[str, ...], when: Callable[[Obj], bool] = lambda old: True):
    """A rule: the fields at `paths` (presence and value) may not change once `when(old)` holds."""

    def check(old: Obj, new: Obj) -> list[str]:
        if not when(old):
            return []
        return [".".join(p) for p in paths if _get(old, p) != _get(new, p)]

    return check


# (API group, kind) -> rule. From the x-kubernetes-validations with `oldSelf` of the pinned CRDs
# (../shared/reference): kueue.x-k8s.io_topologies.yaml (spec.levels: `self == oldSelf`),
# kueue.x-k8s.io_resourceflavors.yaml ("nodeLabels / tolerations / topologyName are immutable when
# topologyName is set"), kueue.x-k8s.io_localqueues.yaml (spec.clusterQueue: `self == oldSelf`),
# kai.scheduler_topologies.yaml (spec.levels), ray.io_rayclusters.yaml (spec.managedBy,
# spec.gcsFaultToleranceOptions.backend), mellanox.com_nicclusterpolicies.yaml (NIC firmware storage).
IMMUTABLE: dict[tuple[str, str], Callable[[Obj, Obj], list[str]]] = {
    ("kueue.x-k8s.io", "Topology"): _frozen(("spec", "levels")),
    ("kueue.x-k8s.io", "ResourceFlavor"): _frozen(
        ("spec", "nodeLabels"), ("spec", "tolerations"), ("spec", "topologyName"),
        when=lambda old: "topologyName" in old.get("spec", {})),
    ("kueue.x-k8s.io", "LocalQueue"): _frozen(("spec", "clusterQueue")),
    ("kai.scheduler", "Topology"): _frozen(("spec", "levels")),
    ("ray.io", "RayCluster"): _frozen(("spec", "managedBy"), ("spec", "gcsFaultToleranceOptions", "backend")),
    # network-operator's mellanox.com_nicclusterpolicies.yaml (issue 15's NicClusterPolicy): "is
    # immutable once set" on the NIC firmware storage, which the bundle never sets
    ("mellanox.com", "NicClusterPolicy"): _frozen(
        ("spec", "nicConfigurationOperator", "nicFirmwareStorage", "availableStorageSize"),
        ("spec", "nicConfigurationOperator", "nicFirmwareStorage", "storageClassName")),
}


def identity(obj: Obj) -> Identity:
    meta = obj["metadata"]
    return obj["apiVersion"].rpartition("/")[0], obj["kind"], meta.get("namespace", ""), meta["name"]


def immutable_violations(old: list[Obj], new: list[Obj]) -> list[str]:
    """Every frozen field that an update from `old` to `new` (objects matched by identity) changes."""
    before = {identity(o): o for o in old}
    out = []
    for obj in new:
        key = identity(obj)
        rule = IMMUTABLE.get(key[:2])
        if key in before and rule:
            out += [f"{key[1]} {key[3]}: {path} changed" for path in rule(before[key], obj)]
    return out


def objects(plan) -> list[Obj]:
    """What Pulumi, Argo CD and Flux apply (kubernetes/manifests/, every file)."""
    return [o for objs in manifests.manifests(plan).values() for o in objs]


# ---- re-plans -----------------------------------------------------------------------------------


def example(name: str, gang: str | None = None) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    if gang:
        data.setdefault("options", {})["gang_scheduler"] = gang
    return data


plan_of = functools.partial(support_plan_of, name="replan.yaml")


def _grow_hostnames(expr: str, nodes: int) -> str | None:
    m = re.fullmatch(r"(.*)\[(\d+)-(\d+)\]", expr)
    if not m:
        return None  # a fixed list: fall back to the default names
    width = len(m.group(2))
    return f"{m.group(1)}[{m.group(2)}-{int(m.group(2)) + nodes - 1:0{width}d}]"


def scale_out(data: dict[str, Any]) -> dict[str, Any]:
    """Every pool twice as large: more leaves, and a spine level where there was one leaf."""
    data = copy.deepcopy(data)
    for pool in data["fleet"]["pools"]:
        pool["nodes"] *= 2
        if "hostnames" in pool:
            grown = _grow_hostnames(pool["hostnames"], pool["nodes"])
            if grown:
                pool["hostnames"] = grown
            else:
                del pool["hostnames"]
    return data


def add_tenant(data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    data.setdefault("tenants", []).append({"name": "newcomers", "share": 1})
    return data


def remove_tenant(data: dict[str, Any]) -> dict[str, Any] | None:
    tenants = data.get("tenants") or []
    if len(tenants) < 2:
        return None
    data = copy.deepcopy(data)
    gone = data["tenants"].pop()["name"]
    for w in data["workloads"]:
        if w.get("tenant") == gone:
            w["tenant"] = data["tenants"][0]["name"]
    return data


def without_slurm(data: dict[str, Any]) -> dict[str, Any] | None:
    """The fleet before its Slurm workloads were added (None unless that leaves a Kubernetes plane)."""
    plan = plan_of(data)
    slurm = {w.name for w in plan.workloads if w.plane == "slurm"}
    if not slurm or len(slurm) == len(plan.workloads):
        return None
    data = copy.deepcopy(data)
    data["workloads"] = [w for w in data["workloads"] if w["name"] not in slurm]
    return data


def kube_examples() -> list[str]:
    return [p.stem for p in sorted(EXAMPLES.glob("*.yaml")) if plan_of(example(p.stem)).kube_plane]


def replans() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(id, before, after) for every example with a Kubernetes plane, under each scheduler."""
    out = []
    for name in kube_examples():
        for gang in SCHEDULERS:
            data = example(name, gang)
            fabric = data["fleet"].get("fabric", {})
            if not ({"leaves", "from"} & set(fabric)):  # cabled fleets: a scale-out is a recabling, the
                out.append((f"{name}+{gang}:scale-out", data, scale_out(data)))  # site's new input
            out.append((f"{name}+{gang}:new-tenant", data, add_tenant(data)))
            removed = remove_tenant(data)
            if removed:
                out.append((f"{name}+{gang}:removed-tenant", data, removed))
            before = without_slurm(data)
            if before:
                out.append((f"{name}+{gang}:hybrid-turn", before, data))
    # the issue's own case: grpo-rl planned with 8 nodes (one leaf), then 16 (a second leaf, a spine).
    # Its machines named (hostnames): issue 15 gives orchgen's fabric levels only to nodes known by
    # name; a generic cloud's invented names get none, so nothing would be frozen to change.
    for gang in (None, *SCHEDULERS):
        small, big = example("grpo-rl", gang), example("grpo-rl", gang)
        small["fleet"]["pools"][0].update(nodes=8, hostnames="gpu-[001-008]")
        big["fleet"]["pools"][0]["hostnames"] = "gpu-[001-016]"
        small["workloads"][0]["gpus"] = 16
        out.append((f"grpo-rl{'+' + gang if gang else ''}:8-to-16-nodes", small, big))
    return out


REPLANS = replans()


def test_the_replans_cover_what_the_issue_names():
    ids = {i for i, _, _ in REPLANS}
    assert "research-lab+kueue:hybrid-turn" in ids and "grpo-rl:8-to-16-nodes" in ids
    assert {i.rpartition(":")[2] for i in ids} >= {"scale-out", "new-tenant", "removed-tenant", "hybrid-turn"}


@pytest.mark.parametrize(("rid", "before", "after"), REPLANS, ids=[r[0] for r in REPLANS])
def test_a_replan_changes_no_frozen_field_in_place(rid, before, after):
    old, new = objects(plan_of(before)), objects(plan_of(after))
    assert immutable_violations(old, new) == []
    if rid in ("grpo-rl:8-to-16-nodes", "grpo-rl+kai:8-to-16-nodes", "research-lab+kueue:hybrid-turn"):
        # the frozen content did move here: new names, and the old objects are gone (pruned)
        gone = {identity(o) for o in old} - {identity(o) for o in new}
        assert {k[1] for k in gone} & {"Topology", "ResourceFlavor"}, rid


def _names_without_hashes(monkeypatch) -> None:
    """The naming before content-derived names: the base name alone."""
    monkeypatch.setattr(common, "content_name", lambda base, content: base)
    from generator.render.kubernetes import kueue

    monkeypatch.setattr(kueue, "content_name", lambda base, content: base)


@pytest.mark.parametrize(("rid", "kind", "field"), [
    ("grpo-rl:8-to-16-nodes", "Topology", "spec.levels"),
    ("research-lab+kueue:hybrid-turn", "ResourceFlavor", "spec.nodeLabels"),
    ("grpo-rl+kai:8-to-16-nodes", "Topology", "spec.levels"),
])
def test_fixed_names_would_be_refused_and_the_check_sees_it(monkeypatch, rid, kind, field):
    """The issue's failures, reproduced with the old fixed names: the check has teeth."""
    _, before, after = next(r for r in REPLANS if r[0] == rid)
    _names_without_hashes(monkeypatch)
    found = immutable_violations(objects(plan_of(before)), objects(plan_of(after)))
    assert any(v.startswith(f"{kind} ") and v.endswith(f"{field} changed") for v in found), found


def test_same_input_same_names_and_a_changed_one_follows_everywhere():
    """Content names are stable, and whatever names a renamed object follows it (KAI: the
    RayCluster's kai.scheduler/topology annotation; gang PodGroups' topologyConstraint)."""
    _, small, big = next(r for r in REPLANS if r[0] == "grpo-rl+kai:8-to-16-nodes")
    files = [manifests.render(plan_of(small)) for _ in range(2)]
    assert files[0] == files[1]
    grown = plan_of(big)
    name = common.topology_name(grown)
    assert name.startswith("grpo-rl-fabric-") and name != common.topology_name(plan_of(small))
    rendered = manifests.render(grown)
    assert name in rendered["kubernetes/manifests/18-topology.yaml"].decode()
    assert name in rendered["kubernetes/manifests/40-ray.yaml"].decode()
    assert common.topology_name(plan_of(small)) not in b"".join(rendered.values()).decode()


def _transition_rules(schema: Any, path: str = "") -> list[str]:
    out = []
    if isinstance(schema, dict):
        for rule in schema.get("x-kubernetes-validations", []):
            if "oldSelf" in rule.get("rule", ""):
                out.append(path or ".")
        for key, sub in schema.items():
            if key in ("properties", "items", "additionalProperties"):
                if key == "properties":
                    for name, prop in sub.items():
                        out += _transition_rules(prop, f"{path}.{name}")
                else:
                    out += _transition_rules(sub, path + "[]")
    return out


def test_every_transition_rule_of_an_emitted_kind_is_in_the_table():
    """The table is read off the CRDs: a kind the bundles emit whose CRD has an `oldSelf` rule must
    be in IMMUTABLE (so a new rule, or a new kind with one, fails here until it is listed)."""
    emitted = {identity(o)[:2] for _, before, after in REPLANS for d in (before, after)
               for o in objects(plan_of(d))}
    with_rules = {}
    for path in Path(reference_dir()).rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            rules = [r for v in spec["versions"] for r in _transition_rules(v.get("schema", {}).get("openAPIV3Schema"))]
            if rules:
                with_rules[(spec["group"], spec["names"]["kind"])] = rules
    assert with_rules  # the reference CRDs were read
    assert {k for k in with_rules if k in emitted} <= set(IMMUTABLE), {
        k: v for k, v in with_rules.items() if k in emitted and k not in IMMUTABLE}
