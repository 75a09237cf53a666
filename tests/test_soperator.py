"""Soperator (4.1.7) output, checked against its consumers: the values keys against the charts'
defaults in ../shared/reference, the NodeSets and the SlurmCluster fields the chart passes through
against the CRDs, the Slurm content against `slurm_config(plan)`, and the NodeSets' selectors
against kubernetes/node-labels.sh.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import json
from typing import Any

import pytest
import yaml

from generator.spec import hostlist
from generator.render import render
from generator.render.kubernetes import soperator
from generator.render.slurm import slurm_config
from generator.render.slurm.model import model
from generator.validate.crds import convert_schema
from generator.validate.values import load_defaults, unknown_keys
from tests._consumers import REPO, require, reference_dir
from tests.test_hybrid import example, labels_script, reachable, spec_plan

PLANS = {
    "soperator-lab": lambda: spec_plan(REPO / "examples" / "soperator-lab.yaml"),
    "cloud-training+soperator": lambda: example("cloud-training", slurm_on_kubernetes="soperator"),
    "topology-yaml+soperator": lambda: example("topology-yaml", slurm_on_kubernetes="soperator"),
    "fsdp-pretraining+soperator": lambda: example("fsdp-pretraining", slurm_on_kubernetes="soperator"),
}


@pytest.fixture(scope="module", params=sorted(PLANS))
def case(request):
    plan = PLANS[request.param]()
    assert soperator.operated(plan)
    files = render(plan)
    values = {r: yaml.safe_load(files[f"kubernetes/helm/{r}.values.yaml"])
              for r in ("soperator", "soperator-slurm-cluster")}
    nodesets = list(yaml.safe_load_all(files[soperator.NODESETS_FILE]))
    return plan, files, values, nodesets


@functools.cache
def _crd(name: str) -> dict[str, Any]:
    text = (reference_dir() / "soperator" / "crds" / name).read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def registry():
    require(_importable("jsonschema"), "jsonschema not installed")
    from generator.validate.crds import CRDRegistry

    return CRDRegistry.from_dir(reference_dir() / "soperator" / "crds")


def crd_schema(*path: str) -> dict[str, Any]:
    """The SlurmCluster CRD's schema at spec.<path>, as a JSON Schema (unknown fields rejected)."""
    crd = _crd("slurm.nebius.ai_slurmclusters.yaml")
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for key in path:
        node = node["items"] if key == "[]" else node["properties"][key]
    return convert_schema(node, root=False)


def schema_errors(instance: Any, *path: str) -> list[str]:
    require(_importable("jsonschema"), "jsonschema not installed")
    from jsonschema import Draft7Validator

    return sorted(e.message for e in Draft7Validator(crd_schema(*path)).iter_errors(instance))


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


# ------------------------------------------------------------------ plan and releases


def test_soperator_brings_cert_manager_and_its_slurm(case):
    plan, files, _, _ = case
    assert plan.slurm_version == "25.11"  # Soperator 4.1.7's images: slurm25.11.3
    rels = yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"]
    names = [r["name"] for r in rels]
    by = {r["name"]: r for r in rels}
    assert names.index("cert-manager") < names.index("soperator") < names.index("soperator-slurm-cluster")
    assert by["soperator"]["crds"] == ["slurm.nebius.ai"]
    assert by["soperator"]["dependsOn"] == ["cert-manager", "kube-prometheus-stack"]  # its ServiceMonitor
    assert "soperator" in by["soperator-slurm-cluster"]["dependsOn"]
    assert not any(p.startswith("slurm/") for p in files)
    assert not any("slurm-operator" in p for p in files if p.startswith("kubernetes/helm/"))


# ------------------------------------------------------------------ keys and schemas


def test_values_keys_exist_in_the_chart_defaults(case):
    _, _, values, _ = case
    ref = reference_dir() / "soperator"
    assert unknown_keys(values["soperator"], load_defaults(ref / "soperator" / "values.yaml")) == []
    cluster = values["soperator-slurm-cluster"]
    defaults = load_defaults(ref / "slurm-cluster" / "values.yaml")
    assert unknown_keys(cluster, soperator.chart_defaults(defaults, cluster)) == []
    found = unknown_keys(cluster, defaults)
    # The only ones: externalDB's host and password reference, which the chart's defaults carry as
    # comments and its template requires when externalDB is enabled; the CRD field they fill has them.
    # Never `user`: no template of the 4.1.7 chart reads it (the README's post-install patch sets it).
    db = cluster.get("slurmNodes", {}).get("accounting", {}).get("externalDB", {})
    assert "user" not in db
    assert found == [f"slurmNodes.accounting.externalDB.{k}: unknown key" for k in sorted({"host", "passwordSecretKeyRef"} & set(db))]
    if db:
        assert schema_errors(db, "slurmNodes", "accounting", "externalDB") == []


def test_slurm_cluster_fields_validate_against_the_crd(case):
    _, _, values, _ = case
    cluster = values["soperator-slurm-cluster"]
    assert schema_errors(cluster["partitionConfiguration"], "partitionConfiguration") == []
    assert schema_errors(cluster["slurmConfig"], "slurmConfig") == []
    for f in cluster["k8sNodeFilters"]:
        assert schema_errors(f, "k8sNodeFilters", "[]") == []
    if "topology" in cluster:
        assert schema_errors(cluster["topology"], "topology") == []


def test_the_schema_check_has_teeth():
    bad = {"configType": "structured", "partitions": [{"name": "a", "nodeSetRef": ["x"]}]}
    assert schema_errors(bad, "partitionConfiguration")
    assert schema_errors({"topologyPlugin": 3}, "slurmConfig")


def test_nodesets_validate_against_the_crd(case):
    plan, _, _, nodesets = case
    assert [n["metadata"]["name"] for n in nodesets] == [s.pool for s in plan.slurm_plane.slices]
    for ns in nodesets:
        assert registry().validate(ns) == [], ns["metadata"]["name"]
        assert ns["metadata"]["namespace"] == plan.charts["soperator-slurm-cluster"].namespace
    broken = copy.deepcopy(nodesets[0])
    broken["spec"]["nodeConfig"]["gresconfig"] = []
    assert registry().validate(broken)


# ------------------------------------------------------------------ one source of truth


def test_partitions_are_slurm_configs(case):
    plan, _, values, _ = case
    conf = slurm_config(plan)["slurm.conf"]
    m = model(plan)
    got = {p["name"]: p for p in values["soperator-slurm-cluster"]["partitionConfiguration"]["partitions"]}
    lines = [t for t in (ln.split() for ln in conf.splitlines()) if t and t[0].startswith("PartitionName=")]
    assert list(got) == [t[0].split("=", 1)[1] for t in lines]
    for tokens in lines:
        p = got[tokens[0].split("=", 1)[1]]
        nodes = tokens[1].split("=", 1)[1]
        assert p["config"] == " ".join(t for t in tokens[2:] if not t.startswith("Topology="))
        if nodes == "ALL":
            assert p["isAll"] is True and "nodeSetRefs" not in p
        else:
            refs = p["nodeSetRefs"]
            assert {n for g in m.groups if g.pool in refs for n in g.nodes} == set(hostlist.expand(nodes))


def test_nodes_and_gres_are_slurm_configs(case):
    plan, _, _, nodesets = case
    files = slurm_config(plan)
    m = model(plan)
    by_pool = {n["metadata"]["name"]: n["spec"] for n in nodesets}
    for g in m.groups:
        spec = by_pool[g.pool]
        line = next(dict(x.split("=", 1) for x in ln.split()) for ln in files["slurm.conf"].splitlines()
                    if ln.startswith(f"NodeName={g.hostlist} "))
        static = dict(x.split("=", 1) for x in spec["nodeConfig"]["static"].split())
        assert spec["replicas"] == len(g.nodes)
        assert static["RealMemory"] == line["RealMemory"]
        assert spec["slurmd"]["resources"]["memory"] == f"{line['RealMemory']}Mi"
        assert int(static["CPUs"]) == int(spec["slurmd"]["resources"]["cpu"]) < int(line["CPUs"])
        assert spec["nodeConfig"]["features"] == line["Features"].split(",")
        if g.gres:
            assert static["Gres"] == line["Gres"] == g.gres
            assert spec["slurmd"]["resources"]["nvidia.com/gpu"] == g.gpus and spec["gpu"]["enabled"] is True
            gres_lines = [ln for ln in files["gres.conf"].splitlines() if ln.startswith(f"NodeName={g.hostlist} ")]
            assert spec["nodeConfig"]["gresConfig"] == [ln.split(" ", 1)[1] for ln in gres_lines]
        else:
            assert "Gres" not in static and "gresConfig" not in spec["nodeConfig"] and spec["gpu"] == {"enabled": False}


def test_topology_plugin_follows_the_slurm_model():
    lab = spec_plan(REPO / "examples" / "soperator-lab.yaml")  # every Slurm node in an NVL18 rack
    values = soperator.cluster_values(lab)
    assert values["slurmConfig"]["topologyPlugin"] == "topology/block" and values["topology"] == {"blockSize": 18}
    mixed = example("topology-yaml", slurm_on_kubernetes="soperator")  # an H100 pool outside the blocks
    values = soperator.cluster_values(mixed)
    assert values["slurmConfig"]["topologyPlugin"] == "topology/tree" and "topology" not in values


# ------------------------------------------------------------------ on the Kubernetes nodes


def test_nodesets_run_on_exactly_their_pools_slurm_nodes(case):
    plan, files, values, nodesets = case
    labels, taints = labels_script(files)
    for ns in nodesets:
        s = next(s for s in plan.slurm_plane.slices if s.pool == ns["metadata"]["name"])
        where = reachable(ns["spec"]["nodeSelector"], ns["spec"]["tolerations"], labels, taints)
        if plan.platform.cloud:  # the provider names the nodes (labels_script simulates them): count them
            assert len(where) == len(s.nodes)
        else:
            assert where == set(s.nodes)
    gpu_filter = values["soperator-slurm-cluster"]["k8sNodeFilters"][0]
    where = reachable(gpu_filter["nodeSelector"], gpu_filter["tolerations"], labels, taints)
    assert (len(where) == len(plan.slurm_plane.nodes)) if plan.platform.cloud else where == set(plan.slurm_plane.nodes)


def test_topology_label_commands_cover_every_slurm_node_once(case):
    plan, files, _, _ = case
    if plan.platform.cloud:  # which VM sits under which switch is the provider's to say: no groups
        assert soperator.topology_groups(plan) == [] and soperator.label_commands(plan) == []
        return
    labels, _ = labels_script(files)
    covered: list[str] = []
    for selector, tiers in soperator.topology_groups(plan):
        nodes = {n for n, lb in labels.items() if all(lb.get(k) == v for k, v in selector.items())}
        leaf = {plan.fabric.leaf_of(n).name for n in nodes}
        assert nodes and leaf == {tiers["topology.nebius.com/tier-1"]}
        covered += nodes
    assert sorted(covered) == sorted(plan.slurm_plane.nodes)


def test_readme_section():
    plan = spec_plan(REPO / "examples" / "soperator-lab.yaml")
    text = render(plan)["README.md"].decode()
    section = text.split("## Slurm on Kubernetes (Soperator)")[1].split("\n## ")[0]
    for cmd in soperator.label_commands(plan):
        assert cmd in section
    assert "topology/block, block size 18" in section and "jail-pvc" in section


# ------------------------------------------------------------------ installs that converge


def test_no_monitoring_objects_without_the_prometheus_operator(case):
    """Both charts render monitoring.coreos.com ServiceMonitors by default (soperator
    templates/servicemonitor.yaml, helm-slurm-cluster templates/sconfigcontroller-servicemonitor.yaml).
    Under options.metrics site no release of the bundle installs the Prometheus Operator's CRDs:
    every switch is off, the operator's too."""
    plan, _, values, _ = case
    from generator.render.kubernetes import helm

    # by default the bundle installs kube-prometheus-stack (issue 20), and both charts' monitors are on
    assert helm.monitoring_installed(plan)
    assert values["soperator"]["serviceMonitor"] == {"enabled": True}
    assert [r for r in helm.releases(plan) if r["name"] == "soperator"][0]["dependsOn"] == [
        "cert-manager", "kube-prometheus-stack"]
    site = dataclasses.replace(plan, charts={c: v for c, v in plan.charts.items() if c != "kube-prometheus-stack"})
    assert not helm.monitoring_installed(site)
    assert soperator.operator_values(site)["serviceMonitor"] == {"enabled": False}
    assert soperator.operator_values(site)["controllerManager"]["manager"]["env"] == {"isPrometheusCrdInstalled": "false"}
    assert soperator.cluster_values(site)["sConfigController"] == {"serviceMonitor": {"enabled": False}}
    defaults = load_defaults(reference_dir() / "soperator" / "soperator" / "values.yaml")
    assert defaults["serviceMonitor"]["enabled"] is True  # what we turn off is on upstream
    cluster_defaults = load_defaults(reference_dir() / "soperator" / "slurm-cluster" / "values.yaml")
    assert cluster_defaults["sConfigController"]["serviceMonitor"]["enabled"] is True


def test_monitoring_follows_a_release_that_installs_its_crds(monkeypatch):
    from generator.render.kubernetes import helm

    plan = PLANS["soperator-lab"]()
    monkeypatch.setitem(helm.CRD_GROUPS, "gpu-operator", (*helm.CRD_GROUPS["gpu-operator"], helm.MONITORING_GROUP))
    assert soperator.operator_values(plan)["serviceMonitor"] == {"enabled": True}
    assert soperator.cluster_values(plan)["sConfigController"]["serviceMonitor"]["enabled"] is True


def test_external_db_user_is_a_documented_patch_the_crd_accepts():
    plan = spec_plan(REPO / "examples" / "soperator-lab.yaml")
    assert model(plan).accounting
    text = render(plan)["README.md"].decode()
    section = text.split("## Slurm on Kubernetes (Soperator)")[1].split("\n## ")[0]
    cmd = soperator.db_user_patch(plan)
    assert cmd in section and f"slurmcluster {model(plan).cluster} " in cmd
    patch = json.loads(cmd.split("-p '", 1)[1].rstrip("'"))
    db = patch["spec"]["slurmNodes"]["accounting"]["externalDB"]
    assert db == {"user": soperator.DB_USER}
    values = yaml.safe_load(render(plan)["kubernetes/helm/soperator-slurm-cluster.values.yaml"])
    merged = {**values["slurmNodes"]["accounting"]["externalDB"], **db}
    assert schema_errors(merged, "slurmNodes", "accounting", "externalDB") == []
    assert schema_errors({**merged, "usr": "x"}, "slurmNodes", "accounting", "externalDB")  # teeth
