"""Node identity, property-based (issue 15): random fleets on every provider, bare metal or not.

- Where the provider names the nodes, the plan's node names are invented (`<pool>-NNN`, for
  counting): no object selects a node by `kubernetes.io/hostname` (nodeSelector, flavor, HyperNode
  member by name, nodeName) and none of those names appears anywhere on the Kubernetes side of the
  bundle (kubernetes/, gitops/, pulumi/).
- On bare metal every label an object selects (flavors, pods, Slinky and Soperator NodeSets) is set
  by node-labels.sh on exactly the nodes of its pool on its plane, worked out here from the fleet
  model; and `orchgen validate`'s cross-checks agree (no finding), both ways.
"""
from __future__ import annotations

import re
import shlex
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from generator import bundle
from generator.decide import make_plan
from generator.errors import OrchgenError
from generator.render import render
from generator.spec import Fleet
from generator.spec.checks import check_fleet, pool_hostnames
from generator.spec.fabric import LABEL_HOSTNAME, LABEL_PLANE, LABEL_POOL
from generator.validate.bundle_checks import load_crds, validate_bundle
from tests._consumers import crd_paths, reference_dir

PROVIDER_POOL_LABEL = {"eks": "eks.amazonaws.com/nodegroup", "gke": "cloud.google.com/gke-nodepool",
                       "aks": "kubernetes.azure.com/agentpool", "oke": "oke.oraclecloud.com/pool.name"}


@cache
def registry():
    return load_crds(crd_paths())


@st.composite
def fleets(draw) -> dict[str, Any]:
    provider = draw(st.sampled_from(["generic", "generic", "eks", "gke", "aks", "oke"]))
    bare_metal = provider == "generic" and draw(st.booleans())
    per_leaf = draw(st.sampled_from([1, 2, 4]))
    pools = []
    for i in range(draw(st.integers(1, 3))):
        pool: dict[str, Any] = {"name": f"p{i}", "nodes": per_leaf * draw(st.integers(1, 4)),
                                "cpus": 64, "memory_gib": 512}
        if i == 0 or draw(st.booleans()):
            pool["gpu"] = {"type": draw(st.sampled_from(["h100", "a100", "l40s"])), "count": draw(st.sampled_from([1, 8]))}
        if provider != "generic" and draw(st.booleans()):
            pool["node_labels"] = {PROVIDER_POOL_LABEL[provider]: f"ng-{i}", "example.com/team": "ml"}
        elif provider == "generic" and draw(st.booleans()):
            pool["hostnames"] = f"m{i}n[{1:03d}-{pool['nodes']:03d}]" if pool["nodes"] > 1 else f"m{i}n001"
        pools.append(pool)
    names = [p["name"] for p in pools]
    # train with bare_metal: true goes to Slurm (on Kubernetes with Slinky/Soperator off bare metal)
    workloads = [{"name": "train", "nodes": draw(st.integers(1, 4)), "tightly_coupled": True,
                  "bare_metal": draw(st.booleans()), "pool": draw(st.sampled_from(names))},
                 {"name": "serve", "long_lived_services": True, "multi_tenant": True, "bare_metal": False,
                  "pool": draw(st.sampled_from(names))}]
    if draw(st.booleans()):
        workloads.append({"name": "rl", "nodes": 2, "tightly_coupled": True, "python_native_pipeline": True,
                          "bare_metal": False, "pool": draw(st.sampled_from(names))})
    if draw(st.booleans()):
        workloads.append({"name": "batch", "nodes": draw(st.integers(1, 3)), "multi_tenant": True, "bare_metal": False})
    tenants = [{"name": f"t{k}", "share": k + 1} for k in range(draw(st.integers(0, 2)))]
    for w in workloads:
        if tenants:
            w["tenant"] = draw(st.sampled_from(tenants))["name"]
    # a Slurm plane on machines of its own needs its controllers, or the bundle's placeholder is a finding
    spec = {"slurm": {"controllers": draw(st.sampled_from([["head01"], ["head01", "head02"]]))}}
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "fleet"},
        "fleet": {"provider": provider, "bare_metal": bare_metal, **spec,
                  "fabric": {"kind": draw(st.sampled_from(["infiniband", "roce", "ethernet"])),
                             "nodes_per_leaf": per_leaf,
                             "leaves_per_spine": draw(st.one_of(st.none(), st.integers(1, 3)))},
                  "pools": pools},
        "tenants": tenants,
        "workloads": workloads,
        "options": {"gang_scheduler": draw(st.sampled_from(["auto", "kueue", "volcano", "kai"])),
                    "slurm_on_kubernetes": draw(st.sampled_from(["auto", "soperator", "none"])),
                    "gitops": draw(st.sampled_from(["none", "kustomize", "argocd", "flux"])),
                    # two controllers need a StateSaveLocation both mount, or validate says so
                    "slurm": {"state_save_location": "/shared/slurm/statesave"}},
    }


def _plan(data: dict[str, Any]):
    sizes = {p["name"]: p["nodes"] for p in data["fleet"]["pools"]}
    for w in data["workloads"]:
        w["nodes"] = min(w.get("nodes", 1), sizes.get(w.get("pool"), min(sizes.values())))
    fleet = Fleet.model_validate(data)
    assume(not list(check_fleet(fleet)))
    try:
        return fleet, make_plan(fleet, "fleet.yaml")
    except OrchgenError as exc:  # the planner's documented refusals (a plane left without a leaf ...)
        event(f"refused: {str(exc)[:40]}")
        assume(False)
        raise AssertionError from exc  # pragma: no cover


def _kube_side(files: dict[str, bytes]) -> dict[str, str]:
    return {p: d.decode() for p, d in files.items() if p.startswith(("kubernetes/", "gitops/", "pulumi/"))}


def _selections(files: dict[str, bytes]) -> list[tuple[str, dict[str, str]]]:
    """(where, selector) of every node selection in the bundle's Kubernetes objects and values."""
    out: list[tuple[str, dict[str, str]]] = []

    def walk(where: str, obj: Any) -> None:
        if isinstance(obj, dict):
            for key in ("nodeSelector", "nodeLabels"):
                if isinstance(obj.get(key), dict):
                    out.append((where, {str(k): str(v) for k, v in obj[key].items()}))
            if obj.get("nodeName"):
                out.append((where, {LABEL_HOSTNAME: str(obj["nodeName"])}))
            if obj.get("type") == "Node" and isinstance(obj.get("selector"), dict) and "exactMatch" in obj["selector"]:
                out.append((where, {LABEL_HOSTNAME: str(obj["selector"]["exactMatch"].get("name"))}))
            for value in obj.values():
                walk(where, value)
        elif isinstance(obj, list):
            for value in obj:
                walk(where, value)

    for path, data in files.items():
        if path.startswith("kubernetes/") and path.endswith(".yaml"):
            for doc in yaml.safe_load_all(data):
                walk(path, doc)
    return out


def _script_nodes(script: str) -> dict[str, dict[str, str]]:
    labels: dict[str, dict[str, str]] = {}
    for line in script.splitlines():
        if line.startswith("label ") and " -l " not in line:
            words = shlex.split(line)[1:]
            pairs = dict(w.split("=", 1) for w in words if "=" in w)
            for node in (w for w in words if "=" not in w):
                labels.setdefault(node, {}).update(pairs)
    return labels


def _validate(files: dict[str, bytes]) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        bundle.write(files, Path(tmp) / "out")
        report = validate_bundle(Path(tmp) / "out", registry(), reference_dir())
    return [str(f) for f in report.errors]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(fleets())
def test_nodes_are_known_as_the_real_cluster_knows_them(data):
    fleet, plan = _plan(data)
    assume(plan.kube_plane is not None)
    try:
        files = render(plan)
    except OrchgenError as exc:
        # The one combination a renderer refuses: KAI 0.13 under Argo CD (issue 14).
        assert exc.field == "options.gitops" and "cannot install kai-scheduler" in str(exc), exc
        assume(False)
    named = plan.platform.selectors == {}
    event(f"{plan.platform.provider} {'named' if named else 'by labels'} {plan.hybrid or ''}".strip())
    errors = _validate(files)
    assert not errors, "\n".join(errors)
    if not named:
        for where, sel in _selections(files):
            assert LABEL_HOSTNAME not in sel, f"{where} selects a node by name: {sel}"
        invented = {n for p in fleet.fleet.pools if p.hostnames is None for n in pool_hostnames(p)}
        tokens = re.compile(r"[A-Za-z0-9][-A-Za-z0-9.]*[A-Za-z0-9]|[A-Za-z0-9]")
        for path, text in _kube_side(files).items():
            hits = set(tokens.findall(text)) & invented
            assert not hits, f"{path} names invented node(s) {sorted(hits)[:3]}"
        return
    # named (bare metal, or every pool lists its hostnames): exactly the pool's nodes on the plane
    script = _script_nodes(files["kubernetes/node-labels.sh"].decode())
    nodes_of = {(plane.name if plane.name == "slurm" else "kubernetes", s.pool): set(s.nodes)
                for plane in plan.planes.values() for s in plane.slices}
    for where, sel in _selections(files):
        if LABEL_POOL not in sel:
            continue
        expected = nodes_of.get((sel.get(LABEL_PLANE, "kubernetes"), sel[LABEL_POOL]))
        assert expected is not None, (where, sel)
        wanted = {k: v for k, v in sel.items() if not k.startswith(("nvidia.com/", "kubernetes.io/"))}
        got = {n for n, lb in script.items() if all(lb.get(k) == v for k, v in wanted.items())}
        assert got == expected, f"{where}: {sel} selects {sorted(got - expected)[:3]} / misses {sorted(expected - got)[:3]}"


def test_the_property_has_teeth():
    """A flavor pointed at another pool's label, or a node name in a cloud bundle, is caught."""
    data = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "f"},
            "fleet": {"provider": "eks", "fabric": {"kind": "ethernet", "nodes_per_leaf": 2},
                      "pools": [{"name": "p0", "nodes": 2, "gpu": {"type": "h100", "count": 8}}]},
            "workloads": [{"name": "serve", "long_lived_services": True, "multi_tenant": True},
                          {"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"gang_scheduler": "kueue"}}
    plan = make_plan(Fleet.model_validate(data), "f.yaml")
    files = dict(render(plan))
    path = "kubernetes/workloads/serve.yaml"
    files[path] = files[path].replace(b"eks.amazonaws.com/nodegroup: p0", b"kubernetes.io/hostname: p0-001")
    errors = _validate(files)
    assert any("selects a node by name" in e for e in errors) and any("names node(s) p0-001" in e for e in errors)
