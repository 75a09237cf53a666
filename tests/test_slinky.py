"""Slinky (slurm-operator 1.2.1) values, checked against their consumers:

* every key against the charts' defaults in ../shared/reference (`unknown_keys`; the slurm chart's
  map-valued keys against the entry templates the chart merges them with);
* the custom resources the slurm chart makes of the values (Controller, NodeSet, LoginSet,
  Accounting: emulated from the chart's templates) against the CRDs, their pod templates with
  kubernetes-validate;
* the Slurm content against `slurm_config(plan)`, the bare-metal renderer's, piece by piece;
* GRES in extraConfMap, the slurmd GPU limit, slurm.conf and gres.conf;
* NodeSet selectors and the topology annotations against kubernetes/node-labels.sh;
* and a real Slurm 26.05 (Slinky 1.2.1's) booted from a config dir assembled from the values the
  way the operator assembles it.
"""
from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.spec import hostlist
from generator.errors import OrchgenError
from generator.decide import make_plan
from generator.render import render
from generator.render.kubernetes import slinky
from generator.render.kubernetes.common import SLURM_TAINT
from generator.render.slurm import slurm_config
from generator.render.slurm.model import model
from generator.spec import Fleet
from generator.validate.values import load_defaults, unknown_keys
from tests._consumers import require, reference_dir, tool, offline_kubeconfig
from tests.test_hybrid import example, labels_script, reachable

RELEASES = ("slurm-operator-crds", "slurm-operator", "slurm")

# A small Slinky lab that has everything at once: an NVLink pool (blocks), a plain GPU pool, a
# Kubernetes pool, two tenants (accounting), a training and a Ray workload (class partitions).
LAB = {
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "slinky-lab"},
    "fleet": {"bare_metal": False, "fabric": {"kind": "infiniband", "nodes_per_leaf": 4, "leaves_per_spine": 2},
              "pools": [{"name": "gb200", "nodes": 8, "gpu": {"type": "gb200", "count": 4}, "cpus": 72,
                         "memory_gib": 480, "nvlink_domain_nodes": 4},
                        {"name": "h100", "nodes": 4, "gpu": {"type": "h100", "count": 8}, "cpus": 96,
                         "memory_gib": 1024},
                        {"name": "l4", "nodes": 2, "gpu": {"type": "l4", "count": 1}, "cpus": 16, "memory_gib": 64}]},
    "tenants": [{"name": "research", "share": 3}, {"name": "product", "share": 1}],
    "workloads": [{"name": "pretrain", "nodes": 8, "tightly_coupled": True, "bare_metal": True,
                   "pool": "gb200", "tenant": "research"},
                  {"name": "rl", "nodes": 2, "tightly_coupled": True, "bare_metal": True,
                   "python_native_pipeline": True, "pool": "h100", "tenant": "product"},
                  {"name": "api", "long_lived_services": True, "multi_tenant": True, "pool": "l4",
                   "tenant": "product"}],
}


def lab_plan(data: dict[str, Any] = LAB):
    return make_plan(Fleet.model_validate(data), f"{data['metadata']['name']}.yaml")


PLANS = {
    "cloud-training": lambda: example("cloud-training"),
    "slinky-lab": lab_plan,
    "topology-yaml+slinky": lambda: example("topology-yaml", slurm_on_kubernetes="slinky"),
    "research-lab+slinky": lambda: example("research-lab", slurm_on_kubernetes="slinky"),
    "fsdp-pretraining+slinky": lambda: example("fsdp-pretraining", slurm_on_kubernetes="slinky"),
}


@pytest.fixture(scope="module", params=sorted(PLANS))
def case(request):
    plan = PLANS[request.param]()
    assert slinky.operated(plan)
    files = render(plan)
    values = {r: yaml.safe_load(files[f"kubernetes/helm/{r}.values.yaml"]) for r in RELEASES}
    return plan, files, values


# ------------------------------------------------------------------ the plan and the releases


def test_slinky_runs_its_own_slurm_release():
    assert example("cloud-training").slurm_version == "26.05"  # the slurm chart's appVersion
    plan = example("cloud-training", slurm_version="25.11")
    assert plan.slurm_version == "26.05"
    assert any("Slurm 26.05, not options.slurm_version=25.11" in r for r in plan.reasons)


def test_releases_in_install_order(case):
    plan, files, _ = case
    rels = yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"]
    names = [r["name"] for r in rels]
    by = {r["name"]: r for r in rels}
    assert set(RELEASES) | {"cert-manager"} <= set(names)
    assert by["slurm-operator-crds"]["crds"] == ["slinky.slurm.net"]
    assert set(by["slurm-operator"]["dependsOn"]) == {"slurm-operator-crds", "cert-manager"}
    assert "slurm-operator" in by["slurm"]["dependsOn"]
    for rel in rels:
        assert all(names.index(d) < names.index(rel["name"]) for d in rel["dependsOn"])
    assert by["slurm"]["namespace"] == plan.charts["slurm"].namespace


def test_no_slinky_values_without_slinky():
    for plan in (example("research-lab"), example("cloud-training", slurm_on_kubernetes="soperator")):
        assert not slinky.operated(plan)
        assert not any(f"/{r}.values.yaml" in p for p in render(plan) for r in RELEASES)


# ------------------------------------------------------------------ keys against the chart defaults


def defaults_of(release: str) -> dict[str, Any]:
    path = reference_dir() / "slurm-operator" / release / "values.yaml"
    return load_defaults(path) if path.is_file() else {}


def test_every_key_exists_in_the_chart_defaults(case):
    plan, _, values = case
    assert values["slurm-operator-crds"] == {}  # the chart has no values (no values.yaml upstream)
    assert unknown_keys(values["slurm-operator"], defaults_of("slurm-operator")) == []
    defaults = defaults_of("slurm")
    assert unknown_keys(values["slurm"], slinky.chart_defaults(defaults, values["slurm"])) == []
    # Against the plain defaults only the partitions the chart's example `all` does not name show up:
    # entries of a map the chart documents as map[string]object (class partitions over several pools).
    plain = unknown_keys(values["slurm"], defaults)
    extra = {p for p in values["slurm"]["partitions"] if p not in defaults["partitions"]}
    assert plain == [f"partitions.{p}: unknown key" for p in sorted(extra)]


def test_the_key_check_has_teeth():
    values = slinky.slurm_values(lab_plan())
    defaults = defaults_of("slurm")
    broken = copy.deepcopy(values)
    broken["nodesets"]["h100"]["replica"] = 3
    broken["nodesets"]["h100"]["podSpec"]["tolerationz"] = []
    broken["partitions"]["training"]["configMapp"] = {}
    assert unknown_keys(broken, slinky.chart_defaults(defaults, broken)) == [
        "nodesets.h100.podSpec.tolerationz: unknown key", "nodesets.h100.replica: unknown key",
        "partitions.training.configMapp: unknown key"]


# ------------------------------------------------------------------ what the chart makes of them


def helm_merge(base: Any, over: Any) -> Any:
    """Helm's values merge: maps merge key by key, null deletes, anything else replaces."""
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = helm_merge(out.get(k), v)
    return out


def to_list(conf: dict[str, Any]) -> list[str]:
    """The chart's `_toList`: `key=v1,v2` per non-empty key, keys sorted (Go templates range so)."""
    return [f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sorted(conf.items()) if v]


def image(c: dict[str, Any]) -> str:
    return f"{c['image']['repository']}:{c['image']['tag']}"


def container(c: dict[str, Any], name: str) -> dict[str, Any]:
    out = {k: v for k, v in c.items() if k not in ("image",) and v not in ({}, [], None)}
    return {**out, "name": name, "image": image(c), "imagePullPolicy": "IfNotPresent"}


def chart_objects(values: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The slinky.slurm.net objects the slurm chart 1.2.1 renders from `values` (its templates'
    fields, for the parts our values reach)."""
    v = helm_merge(defaults_of("slurm"), values)
    ref = {"name": "slurm"}  # 1.2.1 refs are by name, in the release namespace
    meta = {"name": "slurm", "namespace": namespace}
    controller: dict[str, Any] = {
        "clusterName": v["clusterName"],
        "extraConf": "\n".join(controller_extra_conf(values)),
        "slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
        "jwtHs256KeyRef": {"name": "slurm-auth-jwths256", "key": "jwt_hs256.key"},
        "slurmctld": container(v["controller"]["slurmctld"], "slurmctld"),
        "template": {"spec": v["controller"]["podSpec"]},
    }
    if v["configFiles"]:
        controller["configFileRefs"] = [{"name": "slurm-config-extra"}]
    if v["accounting"]["enabled"]:
        controller["accountingRef"] = ref
    out = [{"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller", "metadata": meta, "spec": controller}]
    for key, entry in v["nodesets"].items():
        ns = helm_merge(v["nodesetDefaults"], entry)
        spec = {"controllerRef": ref, "scalingMode": ns["scalingMode"], "replicas": ns["replicas"],
                "slurmd": container(ns["slurmd"], "slurmd"), "logfile": container(ns["logfile"], "logfile"),
                "template": {"spec": {**ns["podSpec"], "hostname": f"{key}-"}},
                "updateStrategy": ns["updateStrategy"], "ordinalPadding": ns["ordinalPadding"],
                "pinToNode": ns["pinToNode"], "workloadDisruptionProtection": ns["workloadDisruptionProtection"],
                "pruneSlurmNodeRecords": ns["pruneSlurmNodeRecords"],
                "partition": {"enabled": ns["partition"]["enabled"],
                              **({"config": ns["partition"]["config"]} if ns["partition"].get("config") else {})}}
        if ns["extraConfMap"]:
            spec["extraConf"] = " ".join(to_list(ns["extraConfMap"]))
        out.append({"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                    "metadata": {"name": f"slurm-worker-{key}", "namespace": namespace}, "spec": spec})
    for key, entry in v["loginsets"].items():
        ls = helm_merge(v["loginsetDefaults"], entry)
        out.append({"apiVersion": "slinky.slurm.net/v1beta1", "kind": "LoginSet",
                    "metadata": {"name": f"slurm-login-{key}", "namespace": namespace},
                    "spec": {"controllerRef": ref, "replicas": ls["replicas"],
                             "sssdConfRef": {"name": "slurm-sssd-conf", "key": "sssd.conf"},
                             "login": container(ls["login"], "login"), "service": ls["service"],
                             "template": {"spec": ls["podSpec"]}}})
    if v["accounting"]["enabled"]:
        out.append({"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Accounting", "metadata": meta,
                    "spec": {"storageConfig": v["accounting"]["storageConfig"],
                             "slurmdbd": container(v["accounting"]["slurmdbd"], "slurmdbd"),
                             "template": {"spec": v["accounting"]["podSpec"]}}})
    return out


def controller_extra_conf(values: dict[str, Any]) -> list[str]:
    """The chart's `slurm.controller.extraConf`: extraConfMap lines, then one line per enabled
    partition over its (sorted, unique) NodeSets."""
    lines = to_list(values["controller"].get("extraConfMap", {}))
    for name, part in sorted(values.get("partitions", {}).items()):
        if part.get("enabled"):
            nodes = ",".join(sorted(set(part["nodesets"])))
            lines.append(f"PartitionName={name} Nodes={nodes} {part.get('config', '')}".rstrip())
    return lines


def test_the_charts_custom_resources_validate_against_the_crds(case):
    require(_importable("jsonschema"), "jsonschema not installed")
    from generator.validate.crds import CRDRegistry

    plan, _, values = case
    registry = CRDRegistry.from_dir(reference_dir() / "slurm-operator" / "crds")
    objs = chart_objects(values["slurm"], plan.charts["slurm"].namespace)
    assert {o["kind"] for o in objs} >= {"Controller", "NodeSet", "LoginSet"}
    for obj in objs:
        assert registry.validate(obj) == [], obj["kind"]


def test_the_pods_validate_as_kubernetes_pods(case):
    require(_importable("kubernetes_validate"), "kubernetes-validate not installed")
    from generator.validate.builtin import validate_builtin

    plan, _, values = case
    for obj in chart_objects(values["slurm"], "slurm"):
        if obj["kind"] not in ("NodeSet", "LoginSet"):
            continue
        main = obj["spec"].get("slurmd") or obj["spec"]["login"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": obj["metadata"]["name"]},
               "spec": {**obj["spec"]["template"]["spec"], "containers": [main]}}
        pod["spec"] = {k: v for k, v in pod["spec"].items() if v not in ({}, [], None)}
        assert validate_builtin(pod, plan.kubernetes_version) == [], obj["metadata"]["name"]


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


# ------------------------------------------------------------------ one source of truth


def single_lines(conf: str) -> dict[str, str]:
    return {t[0].split("=", 1)[0]: t[0].split("=", 1)[1] for t in slinky.conf_lines(conf) if len(t) == 1}


def lines_with(conf: str, key: str) -> list[dict[str, str]]:
    return [dict(x.split("=", 1) for x in t) for t in slinky.conf_lines(conf) if t[0].startswith(f"{key}=")]


def test_slurm_conf_settings_are_slurm_configs(case):
    plan, _, values = case
    conf = slurm_config(plan)["slurm.conf"]
    settings = values["slurm"]["controller"]["extraConfMap"]
    ours = single_lines(conf)
    assert {k: v for k, v in ours.items() if k not in slinky.OWNED} == {
        k: v for k, v in settings.items() if k != "MaxNodeCount"}
    assert "GresTypes" in settings if model(plan).has_gpus else "GresTypes" not in settings
    # what the operator writes instead of ours
    assert set(ours) - set(settings) <= slinky.OWNED
    assert values["slurm"]["clusterName"] == ours["ClusterName"]
    assert values["slurm"].get("accounting", {}).get("enabled", False) == \
        (ours.get("AccountingStorageType") == "accounting_storage/slurmdbd")


def test_nodes_and_partitions_are_slurm_configs(case):
    plan, _, values = case
    m = model(plan)
    conf = slurm_config(plan)["slurm.conf"]
    nodesets = values["slurm"]["nodesets"]
    for line in lines_with(conf, "NodeName"):
        g = next(g for g in m.groups if g.hostlist == line["NodeName"])
        ns = nodesets[g.pool]
        assert ns["replicas"] == len(g.nodes)
        got = dict(ns["extraConfMap"])
        got["Features"] = ",".join([g.pool, *filter(None, got.pop("Features", "").split(","))])
        want = {k: v for k, v in line.items() if k not in ("NodeName", "State")}
        assert sorted(got.pop("Features").split(",")) == sorted(set(want.pop("Features").split(",")) | {g.pool})
        assert got == want
    assert set(nodesets) == {g.pool for g in m.groups}
    # each PartitionName line of slurm.conf is a partition of the chart's, over the same nodes
    rendered = {}
    for name, ns in nodesets.items():
        if ns.get("partition", {}).get("enabled"):
            rendered[name] = ({name}, ns["partition"]["config"])
    for name, part in values["slurm"]["partitions"].items():
        rendered[name] = (set(part["nodesets"]), part["config"])
    want = {}
    for line in lines_with(conf, "PartitionName"):
        pools = {"ALL"} if line["Nodes"] == "ALL" else \
            {g.pool for g in m.groups if set(g.nodes) & set(hostlist.expand(line["Nodes"]))}
        if pools != {"ALL"}:
            assert set(hostlist.expand(line["Nodes"])) == {n for g in m.groups if g.pool in pools for n in g.nodes}
        options = " ".join(f"{k}={v}" for k, v in line.items() if k not in ("PartitionName", "Nodes"))
        want[line["PartitionName"]] = (pools, options)
    assert rendered == want


def parse_gres(text: str, names: dict[str, str] | None = None) -> tuple[list[str], dict[str, list[str]]]:
    """(comment lines, node -> the rest of each of its gres.conf lines), node names mapped by `names`.
    A node has a line per socket run of GPUs when the pool gives gpu.sockets (Cores=, issue 10)."""
    comments, per_node = [], {}
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            comments.append(line)
            continue
        hosts, rest = line.split(" ", 1)
        for node in hostlist.expand(hosts.split("=", 1)[1]):
            per_node.setdefault((names or {}).get(node, node), []).append(rest)
    return comments, per_node


def test_config_files_are_slurm_configs(case):
    plan, _, values = case
    m = model(plan)
    files = slurm_config(plan)
    config = values["slurm"]["configFiles"]
    assert set(config) == {"gres.conf", "cgroup.conf", m.topology.file} | ({"accounts.sh"} & set(files))
    if "accounts.sh" in files:
        assert config["accounts.sh"] == files["accounts.sh"]
    # cgroup.conf: ours, plus the operator's two lines for slurmd in a container
    assert config["cgroup.conf"] == files["cgroup.conf"] + "".join(f"{ln}\n" for ln in slinky.CONTAINER_CGROUP)
    # gres.conf: the same lines, each node under the name Slinky gives its slot
    assert parse_gres(config["gres.conf"]) == parse_gres(files["gres.conf"], slinky.renamed_nodes(m))
    # topology.yaml: the same topologies, switches and blocks; the node lists moved to annotations
    assert m.topology.file == "topology.yaml"
    ours, theirs = yaml.safe_load(config["topology.yaml"]), yaml.safe_load(files["topology.yaml"])
    members = {}
    for topo in theirs:
        for entry in topo.get("tree", {}).get("switches", []) + topo.get("block", {}).get("blocks", []):
            if "nodes" in entry:
                members[(topo["topology"], entry.get("switch") or entry.get("block"))] = set(hostlist.expand(entry["nodes"]))
                entry["nodes"] = ""
    assert ours == theirs
    from_annotations: dict[tuple[str, str], set[str]] = {}
    for node, spec in slinky.node_topology(plan).items():
        for part in spec.split(","):
            topo, name = part.split(":")
            from_annotations.setdefault((topo, name), set()).add(node)
    assert from_annotations == {k: v for k, v in members.items() if v}
    assert config["topology.yaml"].startswith(files["topology.yaml"].split("\n- ")[0].rsplit("\n", 1)[0])


def test_gres_agrees_everywhere(case):
    plan, _, values = case
    m = model(plan)
    conf = slurm_config(plan)["slurm.conf"]
    _, gres_lines = parse_gres(values["slurm"]["configFiles"]["gres.conf"])
    for g in m.groups:
        ns = values["slurm"]["nodesets"][g.pool]
        line = next(ln for ln in lines_with(conf, "NodeName") if ln["NodeName"] == g.hostlist)
        names = slinky.node_names(g.pool, ns["replicas"])
        if not g.gres:
            assert "Gres" not in ns["extraConfMap"] and "slurmd" not in ns
            assert not set(names) & set(gres_lines)
            continue
        gpu_type, count = g.gpu_type, g.gpus
        assert ns["extraConfMap"]["Gres"] == line["Gres"] == f"gpu:{gpu_type}:{count}"
        assert ns["slurmd"]["resources"]["limits"]["nvidia.com/gpu"] == count
        for name in names:
            found = [dict(x.split("=", 1) for x in rest.split()) for rest in gres_lines[name]]
            assert all(f["Name"] == "gpu" and f["Type"] == gpu_type for f in found)
            assert sum(len(hostlist.expand(f["File"])) for f in found) == count


# ------------------------------------------------------------------ on the Kubernetes nodes


def test_nodesets_run_on_exactly_their_pools_slurm_nodes(case):
    plan, files, values = case
    labels, taints = labels_script(files)
    for s in plan.slurm_plane.slices:
        ns = values["slurm"]["nodesets"][s.pool]
        where = reachable(ns["podSpec"]["nodeSelector"], ns["podSpec"]["tolerations"], labels, taints)
        assert where == set(s.nodes) and len(where) == ns["replicas"]
        assert reachable(ns["podSpec"]["nodeSelector"], [], labels, taints) == set()  # the taint holds others off
    for node in plan.slurm_plane.nodes:
        assert {**SLURM_TAINT} in [dict(t) for t in taints[node]]


def test_annotation_commands_cover_every_slurm_node_once(case):
    plan, files, _ = case
    labels, _ = labels_script(files)
    spec_of = slinky.node_topology(plan)
    covered: list[str] = []
    for selector, value in slinky.annotation_groups(plan):
        nodes = {n for n, lb in labels.items() if all(lb.get(k) == v for k, v in selector.items())}
        assert nodes and all(spec_of[n] == value for n in nodes)
        covered += nodes
    assert sorted(covered) == sorted(plan.slurm_plane.nodes)
    assert len(slinky.annotate_commands(plan)) == len(slinky.annotation_groups(plan))


def test_kubectl_parses_the_annotate_commands(tmp_path):
    kubectl = tool("kubectl")
    config = offline_kubeconfig(tmp_path)
    env = {**os.environ, "KUBECONFIG": str(config)}
    for cmd in slinky.annotate_commands(lab_plan())[:2]:
        proc = subprocess.run([kubectl, *cmd.split()[1:]], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode != 0 and "refused" in proc.stderr, proc.stderr
    bad = subprocess.run([kubectl, "annotate", "node", "-l", "a=b", slinky.TOPOLOGY_ANNOTATION],
                         capture_output=True, text=True, env=env, timeout=60)
    assert "at least one annotation update is required" in bad.stderr  # parsed before connecting


def test_readme_tells_how_to_annotate_and_what_runs_where():
    plan = lab_plan()
    text = render(plan)["README.md"].decode()
    section = text.split("## Slurm on Kubernetes (Slinky)")[1].split("\n## ")[0]
    for cmd in slinky.annotate_commands(plan):
        assert cmd in section
    assert "| gb200 | 8 | `gb200-[0-7]` | gpu:gb200:4 | 4 |" in section
    assert "kubectl -n slurm create secret generic slurm-mariadb" in section
    for ref in slinky.AUTH_KEYS.values():  # the keys the chart no longer makes
        assert f"kubectl -n slurm create secret generic {ref['name']} --from-file={ref['key']}=" in section


def test_auth_keys_are_referenced_never_made_by_the_chart(case):
    """The chart's own keys come from `lookup` + a random fallback, new on every `helm template`
    (Argo CD) for an immutable Secret: off, and the chart reads the operator's Secrets instead."""
    _, files, values = case
    for key, ref in slinky.AUTH_KEYS.items():
        assert values["slurm"][key] == {"create": False, "secretRef": ref}
    blob = b"".join(files.values()).decode()
    assert "randAscii" not in blob and "slurm.key:" not in blob  # and no key material in the bundle


# ------------------------------------------------------------------ limits of the mapping


def test_more_nodes_than_slinkys_max_node_count():
    data = copy.deepcopy(LAB)
    data["fleet"]["pools"][1]["nodes"] = 1100
    data["fleet"]["pools"][1]["hostnames"] = "h[0001-1100]"
    data["workloads"][1]["nodes"] = 1100
    values = slinky.slurm_values(lab_plan(data))
    assert values["controller"]["extraConfMap"]["MaxNodeCount"] == str(sum(n["replicas"] for n in values["nodesets"].values()))
    assert "MaxNodeCount" not in slinky.slurm_values(lab_plan())["controller"]["extraConfMap"]


def test_a_pool_name_too_long_for_its_pods_hostnames_is_refused():
    data = copy.deepcopy(LAB)
    name = "p" * 62
    data["fleet"]["pools"][1]["name"] = name
    data["workloads"][1]["pool"] = name
    with pytest.raises(OrchgenError, match="longer than a hostname may be"):
        render(lab_plan(data))


# ------------------------------------------------------------------ a real Slurm 26.05


def slinky_config_dir(plan, values: dict[str, Any], out: Path) -> dict[str, str]:
    """Write /etc/slurm as Slinky's pods see it: the files of `configFiles`, and a slurm.conf put
    together as the operator does (its own lines, NodeSet and partition lines, the controller's
    extraConf), plus one NodeName line per NodeSet pod standing in for the dynamic node that pod's
    `slurmd -Z --conf ...` registers (the harness starts static slurmds). Pod <n> of a NodeSet runs
    on the n-th node of its pool's slice. Returns Slurm node name -> Kubernetes node."""
    out.mkdir()
    for name, text in values["configFiles"].items():
        (out / name).write_text(text)
    spec_of = slinky.node_topology(plan)
    lines = [f"ClusterName={values['clusterName']}", "SlurmctldHost=slurm-controller-0", "MaxNodeCount=1024",
             "AccountingStorageType=accounting_storage/" + ("slurmdbd" if values.get("accounting") else "none")]
    nodes, where = [], {}
    for key, ns in sorted(values["nodesets"].items()):
        lines.append(f"NodeSet={key} Feature={key}")
        if ns.get("partition", {}).get("enabled"):
            lines.append(f"PartitionName={key} Nodes={key} {ns['partition']['config']}")
        hosts = next(s.nodes for s in plan.slurm_plane.slices if s.pool == key)
        for i, name in enumerate(slinky.node_names(key, ns["replicas"])):
            conf = {k: str(v) for k, v in ns["extraConfMap"].items()}
            conf["Features"] = ",".join([key, *filter(None, conf.get("Features", "").split(","))])
            conf["Topology"] = spec_of.get(hosts[i], "")
            nodes.append(f"NodeName={name} " + " ".join(f"{k}={v}" for k, v in sorted(conf.items()) if v))
            where[name] = hosts[i]
    lines += controller_extra_conf(values) + nodes
    (out / "slurm.conf").write_text("\n".join(lines) + "\n")
    return where


# Logged at start-up because the harness's nodes are static: the topologies name no nodes until
# each node's Topology= (its annotation) applies, which the checks below then verify.
AT_BOOT = re.compile(r"(switches|Blocks) lack access to \d+ nodes|TOPOLOGY: no switch can reach all nodes")


def boot_and_check(tmp_path: Path, plan) -> None:
    from tests.slurmharness import SlurmCluster, parse, require_slurm

    require_slurm("forky")
    values = slinky.slurm_values(plan)
    where = slinky_config_dir(plan, values, tmp_path / "etc")
    slurm_name = {k8s: name for name, k8s in where.items()}
    m = model(plan)
    with SlurmCluster(tmp_path / "etc", suite="forky") as c:
        assert c.version.startswith("26.05")
        assert [p for p in c.problems() if not AT_BOOT.search(p)] == []
        nodes = c.nodes()
        assert set(nodes) == set(where) and {s["state"] for s in nodes.values()} == {"IDLE"}
        for name, ns in values["nodesets"].items():
            for node in slinky.node_names(name, ns["replicas"]):
                assert nodes[node]["gres"] == ns["extraConfMap"].get("Gres", ""), node
        # the fabric tree, node for node, through the annotations
        tree = parse.switches(c.topology())
        for switch in m.topology.tree:
            if switch.nodes:
                assert tree[switch.name]["nodes"] == {slurm_name[n] for n in switch.nodes}, switch.name
            else:
                assert tree[switch.name]["switches"] == set(switch.switches), switch.name
        for topo in m.topology.blocks:
            blocks = {b: v["nodes"] for b, v in parse.blocks(c.topology(topo.name)).items() if not v["aggregated"]}
            assert blocks == {b.name: {slurm_name[n] for n in b.nodes} for b in topo.blocks}
        # the partitions of slurm.conf, over the same (renamed) nodes
        parts = c.partitions()
        assert set(parts) == {p.name for p in m.partitions}
        for p in m.partitions:
            want = {slurm_name[n] for g in m.groups if g.pool in p.pools for n in g.nodes}
            assert set(hostlist.expand(parts[p.name]["nodes"])) == want, p.name
            assert parts[p.name]["default"] is p.default and parts[p.name]["topology"] == (p.topology or "")
        for g in (g for g in m.groups if g.gres):
            pool_nodes = slinky.node_names(g.pool, len(g.nodes))
            out = c.job("-N", "2", "-p", g.pool, f"--gres=gpu:{g.gpus}", "sh", "-c",
                        'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"').stdout.split("\n")
            seen = dict(line.split(" ", 1) for line in out if line.strip())
            assert set(seen) <= set(pool_nodes) and len(seen) == 2
            assert set(seen.values()) == {",".join(map(str, range(g.gpus)))}
        leafy = next((g for g in m.groups if len([s for s in m.topology.tree if set(s.nodes) & set(g.nodes)]) > 1), None)
        if leafy:  # with a leaf's first node busy, a leaf-sized --switches=1 job takes another whole leaf
            first = slurm_name[leafy.nodes[0]]
            holder = c.run("sbatch", "--parsable", "-p", leafy.pool, "-w", first, "--exclusive", f"--chdir={c.work}/jobs",
                           "--output=/dev/null", "--wrap", "sleep 120").stdout.strip()
            try:
                size = plan.fabric.nodes_per_leaf
                got = c.batch_wait('echo "NODES=$SLURM_JOB_NODELIST"', "-p", leafy.pool, "-N", str(size),
                                   "--switches=1@00:00:30", "--exclusive")
            finally:
                c.run("scancel", holder)
            got_nodes = {where[n] for n in hostlist.expand(re.search(r"NODES=(\S+)", got).group(1))}
            assert any(got_nodes == set(s.nodes) for s in m.topology.tree if s.nodes)
            assert leafy.nodes[0] not in got_nodes


@pytest.mark.slurm
@pytest.mark.chroot
def test_slinky_lab_values_boot_in_slurm_2605(tmp_path):
    boot_and_check(tmp_path, lab_plan())


@pytest.mark.slurm
@pytest.mark.chroot
def test_cloud_training_values_boot_in_slurm_2605(tmp_path):
    boot_and_check(tmp_path, example("cloud-training"))
