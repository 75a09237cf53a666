"""A Kubernetes plane beyond one cluster (issue 20, "Beyond one cluster"): examples/kubernetes-128k.yaml
(16,384 nodes x 8 GPUs = 131,072 GPUs) plans into worker clusters of at most 5,000 nodes cut at whole
fabric units, behind a Kueue MultiKueue manager; every cluster's custom resources pass their CRDs'
schema and CEL rules (the reference CRDs of Kueue 0.19.2, MultiKueue's included); no gang can span
two clusters; the tenants' quotas add up; the plan is deterministic; bad combinations are refused
with one line and exit 2; and the manager's objects, applied to a real API server running Kueue's
controller manager with the bundle's own Configuration, are accepted and reported as Kueue sees them.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import bundle, contract
from generator.decide import make_plan
from generator.decide.plan import Plan
from generator.render import render
from generator.render.kubernetes import gpu_health
from generator.spec import load
from generator.validate.crds import CRDRegistry
from tests._consumers import REPO, reference_dir
from tests.support import orchgen_argv

# in a folder of its own: the sweeps over examples/*.yaml read a single cluster's layout (kubernetes/,
# pulumi/ at the top), which a multi-cluster bundle does not have (clusters/<name>/...)
EXAMPLE = REPO / "examples" / "multicluster" / "kubernetes-128k.yaml"
RESOURCES = ("gpus", "cpus", "memory_gib")


@cache
def plan128k() -> Plan:
    return make_plan(load(EXAMPLE), "kubernetes-128k.yaml")


@cache
def files128k() -> dict[str, bytes]:
    return render(plan128k())


@cache
def registry() -> CRDRegistry:
    return CRDRegistry.from_dir(reference_dir())


def docs(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(files128k()[path]) if d]


def cluster_objects(cluster: str) -> list[tuple[str, dict[str, Any]]]:
    prefix = f"{contract.cluster_dir(cluster)}/{contract.MANIFESTS_DIR}/"
    return [(p, d) for p in files128k() if p.startswith(prefix) for d in docs(p)]


def run_orchgen(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, **(env or {})})


# ---- the cut ----------------------------------------------------------------------------------


def test_128k_gpus_plan_into_clusters_of_at_most_5000_nodes_along_the_fabric():
    plan = plan128k()
    kube = plan.kube_plane
    assert sum(s.gpus for s in kube.slices) == 131_072
    manager, *workers = plan.clusters
    assert manager.role == "manager" and not manager.nodes
    assert len(workers) == 4 and all(w.role == "worker" for w in workers)
    assert all(0 < w.node_count <= 5_000 for w in workers)
    # every node of the plane in exactly one worker
    placed = Counter(n for w in workers for nodes in w.nodes.values() for n in nodes)
    assert set(placed) == set(kube.nodes) and set(placed.values()) == {1}
    # whole leaves: all of a leaf's nodes sit in the worker that lists it, and whole spines here
    where = {n: w.name for w in workers for nodes in w.nodes.values() for n in nodes}
    for leaf in plan.fabric.leaves:
        assert len({where[n] for n in leaf.nodes}) == 1, leaf.name
        owner = next(w for w in workers if leaf.name in w.leaves)
        assert where[leaf.nodes[0]] == owner.name
    spine_of = {leaf.name: leaf.spine for leaf in plan.fabric.leaves}
    for w in workers:
        spines = {spine_of[leaf] for leaf in w.leaves}
        assert set(w.units) == spines  # the units are whole spine groups
        assert all(spine_of[leaf] in spines for leaf in w.leaves)
    assert not any(w.field == "fleet.pools" for w in plan.warnings)  # planned, not just warned about
    assert any("4 worker clusters" in r for r in plan.reasons)


def test_plan_json_and_readme_say_which_nodes_go_where_and_why():
    files = files128k()
    doc = json.loads(files[contract.PLAN_FILE])
    import jsonschema

    jsonschema.validate(doc, contract.PLAN_SCHEMA)
    clusters = {c["name"]: c for c in doc["clusters"]}
    assert list(clusters) == ["manager", "worker-01", "worker-02", "worker-03", "worker-04"]
    assert clusters["worker-01"]["pools"]["h100"] == {"nodes": "gpu[00001-04096]", "node_count": 4096}
    assert clusters["worker-04"]["units"] == ["spine13", "spine14", "spine15", "spine16"]
    assert all(c["why"] for c in clusters.values())
    readme = files[contract.README_FILE].decode()
    assert "## Beyond one cluster: 4 worker clusters behind a MultiKueue manager" in readme
    assert "| `worker-02` | worker | spine05, spine06, spine07, spine08 | h100: 4096 |" in readme
    assert "clusters/manager/kubernetes/connect-worker.sh worker-03 <manager> <worker-03>" in readme
    # the layout: every cluster has its own kubernetes/ and pulumi/, nothing at the top
    assert not any(p.startswith(("kubernetes/", "pulumi/")) for p in files)
    for c in clusters:
        root = contract.cluster_dir(c)
        assert f"{root}/{contract.RELEASES_FILE}" in files
        assert f"{root}/pulumi/Pulumi.yaml" in files
        assert yaml.safe_load(files[f"{root}/pulumi/Pulumi.yaml"])["name"] == f"kubernetes-128k-{c}"
    # the Secrets are the site's: no kubeconfig is in the bundle; the only Secrets are the workers'
    # empty service-account-token ones, which each worker's token controller fills
    secrets = [(p, d) for p in files if p.endswith(".yaml") for d in yaml.safe_load_all(files[p])
               if isinstance(d, dict) and d.get("kind") == "Secret"]
    assert sorted(p for p, _ in secrets) == [f"clusters/worker-0{i}/kubernetes/manifests/19-multikueue-access.yaml"
                                             for i in range(1, 5)]
    assert all(d["type"] == "kubernetes.io/service-account-token" and not ({"data", "stringData"} & set(d))
               for _, d in secrets)


def test_the_plan_is_deterministic(tmp_path):
    outs = []
    for seed in ("0", "1"):
        out = tmp_path / f"out{seed}"
        r = run_orchgen("plan", EXAMPLE, "-o", out, "-q", env={"PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr
        outs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1]
    assert {k: v for k, v in outs[0].items() if k != bundle.MARKER} == files128k()


# ---- CRDs, schema and CEL ---------------------------------------------------------------------


def test_every_clusters_custom_resources_pass_their_crds_schema_and_cel_rules():
    reg = registry()
    seen: Counter[str] = Counter()
    for c in plan128k().clusters:
        for path, obj in cluster_objects(c.name):
            crd = reg.get(obj["apiVersion"], obj["kind"])
            if crd is None:
                continue
            assert not reg.validate(obj), (path, obj["kind"], reg.validate(obj))
            outcome = crd.cel.check_create(obj)
            assert not outcome.violations, (path, obj["kind"], list(map(str, outcome.violations)))
            seen[obj["kind"]] += 1
    for kind in ("AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster", "ClusterQueue", "LocalQueue",
                 "ResourceFlavor", "Topology", "Cohort"):
        assert seen[kind], kind
    assert seen["MultiKueueCluster"] == 4 and seen["AdmissionCheck"] == 1
    # the CEL rule of a MultiKueueCluster ("exactly one of kubeConfig, clusterProfileRef") really runs
    (_, mkc), *_ = [(p, o) for p, o in cluster_objects("manager") if o["kind"] == "MultiKueueCluster"]
    broken = copy.deepcopy(mkc)
    broken["spec"]["clusterSource"]["clusterProfileRef"] = {"name": "x"}
    crd = reg.get(broken["apiVersion"], broken["kind"])
    assert any("exactly one" in str(v) for v in crd.cel.check_create(broken).violations)


def test_the_manager_dispatches_through_multikueue_and_the_workers_mirror_its_queues():
    objs = [o for _, o in cluster_objects("manager")]
    check = next(o for o in objs if o["kind"] == "AdmissionCheck")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    config = next(o for o in objs if o["kind"] == "MultiKueueConfig")
    assert check["spec"]["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                           "name": config["metadata"]["name"]}
    assert config["spec"]["clusters"] == ["worker-01", "worker-02", "worker-03", "worker-04"]
    for o in objs:
        if o["kind"] == "MultiKueueCluster":
            assert o["spec"]["clusterSource"]["kubeConfig"] == {
                "locationType": "Secret", "location": f"{o['metadata']['name']}-kubeconfig"}
        if o["kind"] == "ClusterQueue":
            assert o["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": check["metadata"]["name"]}]}
    # the manager's Kueue configuration turns MultiKueue's settings on; the workers' do not
    values = yaml.safe_load(files128k()["clusters/manager/kubernetes/helm/kueue.values.yaml"])
    cfg = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert cfg["multiKueue"] == {"gcInterval": "1m", "origin": "multikueue", "workerLostTimeout": "15m"}
    releases = yaml.safe_load(files128k()["clusters/manager/kubernetes/helm/releases.yaml"])["releases"]
    assert [r["name"] for r in releases] == ["kueue"]  # no GPU stack on the manager
    names = lambda objs, kind: sorted((o["metadata"].get("namespace"), o["metadata"]["name"])  # noqa: E731
                                      for o in objs if o["kind"] == kind)
    for w in plan128k().clusters[1:]:
        wobjs = [o for _, o in cluster_objects(w.name)]
        for kind in ("Namespace", "LocalQueue", "ClusterQueue", "PriorityClass"):
            # a worker has GPU nodes, so also the GPU health checker's own namespace; the manager has none
            own = [(None, gpu_health.NAMESPACE)] if kind == "Namespace" else []
            assert names(wobjs, kind) == sorted(names(objs, kind) + own), (w.name, kind)
        assert not any(o["kind"] in ("AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster") for o in wobjs)
        wcfg = yaml.safe_load(yaml.safe_load(files128k()[f"clusters/{w.name}/kubernetes/helm/kueue.values.yaml"])
                              ["managerConfig"]["controllerManagerConfigYaml"])
        assert "multiKueue" not in wcfg


# ---- gangs and quotas -------------------------------------------------------------------------


def test_no_gang_spans_two_clusters():
    """Jobs are submitted only on the manager (MultiKueue runs each whole in one worker), and every
    multi-node job fits the nodes one worker has of its pool; the workers' topology is their own."""
    files, plan = files128k(), plan128k()
    starters = [p for p in files if "/kubernetes/workloads/" in p]
    assert starters and all(p.startswith("clusters/manager/") for p in starters)
    workers = plan.clusters[1:]
    for d in plan.workloads:
        span = max(d.facts.nodes, -(-d.gpus // d.gpus_per_node))
        assert any(len(w.nodes.get(d.pool, ())) >= span for w in workers), d.name
    for w in workers:  # a worker's node-labels.sh labels its own nodes only
        script = files[f"clusters/{w.name}/kubernetes/node-labels.sh"].decode()
        first, last = w.nodes["h100"][0], w.nodes["h100"][-1]
        assert first in script and last in script
        others = [x.nodes["h100"][0] for x in workers if x is not w]
        assert not any(f" {n} " in script or f" {n}\n" in script for n in others)


def quota_table(cluster: str) -> dict[tuple[str, str], dict[str, int]]:
    """(tenant ClusterQueue, resource) -> nominalQuota, read from the rendered ClusterQueues."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for _, o in cluster_objects(cluster):
        if o["kind"] != "ClusterQueue":
            continue
        for group in o["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    q = r["nominalQuota"]
                    out.setdefault((o["metadata"]["name"], r["name"]), {})[flavor["name"]] = \
                        int(q[:-2]) if isinstance(q, str) and q.endswith("Gi") else int(q)
    return out


def test_tenant_quotas_add_up():
    plan = plan128k()
    manager, *workers = plan.clusters
    for t in plan.tenants:
        for pool, q in t.quotas.items():
            assert manager.quotas[t.name][pool] == q  # the manager holds the whole quota
            for r in RESOURCES:
                assert sum(getattr(w.quotas[t.name][pool], r) for w in workers) == getattr(q, r), (t.name, r)
    for w in workers:  # and each worker's tenants add up to its capacity
        s = next(s for s in plan.kube_plane.slices if s.pool == "h100")
        n = len(w.nodes["h100"])
        capacity = {"gpus": s.gpus_per_node * n, "cpus": s.cpus * n, "memory_gib": s.memory_gib * n}
        for r in RESOURCES:
            assert sum(getattr(w.quotas[t.name]["h100"], r) for t in plan.tenants) == capacity[r], (w.name, r)
    # the same sums on the ClusterQueues the bundle writes
    top = quota_table("manager")
    per_worker = [quota_table(w.name) for w in workers]
    for key, by_flavor in top.items():
        assert sum(sum(t[key].values()) for t in per_worker) == sum(by_flavor.values()), key
    gpus = {t.name: t.quotas["h100"].gpus for t in plan.tenants}
    assert sum(gpus.values()) == 131_072


# ---- the old behaviour, and refusals ------------------------------------------------------------


def fleet_doc(**changes: Any) -> dict[str, Any]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    for path, value in changes.items():
        node = doc
        *head, last = path.split(".")
        for key in head:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value
    return doc


def test_kubernetes_clusters_one_keeps_one_cluster_and_the_warning():
    from generator.spec.models import Fleet

    doc = fleet_doc(**{"options.kubernetes_clusters": "one"})
    plan = make_plan(Fleet.model_validate(doc), "x.yaml")
    assert not plan.clusters
    (w,) = [w for w in plan.warnings if w.field == "fleet.pools"]
    assert "split it into 4 clusters" in w.message


@pytest.mark.parametrize("changes,field", [
    ({"workloads.0.nodes": 4_200, "workloads.0.jobs_at_once": 1}, "workloads[0].nodes"),
    ({"options.gang_scheduler": "volcano"}, "options.gang_scheduler"),
], ids=["gang-beyond-a-worker", "volcano"])
def test_a_bad_combination_is_refused_with_one_line(changes, field, tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_doc(**changes), sort_keys=False))
    out = tmp_path / "out"
    r = run_orchgen("plan", path, "-o", out)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{field}:" in lines[0] and str(path) in lines[0], r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def test_each_clusters_pulumi_stack_config_is_the_operators(tmp_path):
    out = tmp_path / "out"
    bundle.write(files128k(), out)
    stack = out / "clusters" / "worker-02" / "pulumi" / "Pulumi.kubernetes-128k-worker-02.yaml"
    stack.write_text("config:\n  kubernetes:context: site-w2\n")
    bundle.write(files128k(), out)
    assert stack.read_text() == "config:\n  kubernetes:context: site-w2\n"


# ---- the manager on a real API server with Kueue ----------------------------------------------------

from tests.kubeenv.fixture import kube, kube_factory  # noqa: E402,F401


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def test_the_managers_objects_are_accepted_by_kueue(tmp_path, kube):
    """The manager's kueue release (the bundle's own Configuration, with multiKueue:) runs Kueue's
    real controller manager; its manifests are applied as the README says. One worker gets a
    kubeconfig Secret that reaches this same API server, the others none: Kueue then reports the
    first MultiKueueCluster Active and the rest inactive, naming the missing Secret."""
    from tests.kubeenv import bundle as kb

    out = tmp_path / "b"
    bundle.write(files128k(), out)
    root = out / "clusters" / "manager"
    for rel in kb.releases(root):
        kb.apply_release(kube, rel, root, "1.33")
    namespace = kb.releases(root)[0]["namespace"]
    kubeconfig = yaml.safe_load(Path(kube.kubeconfig).read_text())
    kube.apply([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "worker-01-kubeconfig", "namespace": namespace},
                 "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()}}])
    kube.apply(kb.manifests(kube, root))

    def reported() -> dict[str, Any] | None:
        clusters = {o["metadata"]["name"]: o for o in kube.get("multikueueclusters.kueue.x-k8s.io")["items"]}
        checks = kube.get("admissionchecks.kueue.x-k8s.io")["items"]
        if len(clusters) == 4 and all(condition(o, "Active") for o in clusters.values()) and \
                checks and condition(checks[0], "Active"):
            return {"clusters": clusters, "check": checks[0]}
        return None

    got = kube.wait_for("MultiKueue status", reported, timeout=60)
    clusters = got["clusters"]
    assert condition(clusters["worker-01"], "Active")["status"] == "True", clusters["worker-01"]["status"]
    for name in ("worker-02", "worker-03", "worker-04"):
        active = condition(clusters[name], "Active")
        assert active["status"] == "False" and f"{name}-kubeconfig" in active["message"], active
    check = condition(got["check"], "Active")
    assert check["status"] == "True", got["check"]["status"]  # at least one usable worker
    # the ClusterQueues (topology-aware flavors and the MultiKueue check together) are active
    # (Kueue reconciles each queue as its flavors, Topologies and check come in: one may first report Active False,
    # "Can't admit new workloads", and turn True a pass later; CI's load made that pass later than the first look)
    seen: dict[str, Any] = {}

    def active() -> list[dict[str, Any]] | None:
        queues = kube.get("clusterqueues.kueue.x-k8s.io")["items"]
        seen.update({q["metadata"]["name"]: (condition(q, "Active") or {}) for q in queues})
        return queues if sorted(seen) == ["frontier", "product", "research"] and \
            all(c.get("status") == "True" for c in seen.values()) else None

    try:
        kube.wait_for("ClusterQueues active", active, timeout=90)
    except TimeoutError:
        raise AssertionError({n: (c.get("status"), c.get("message")) for n, c in seen.items()}) from None


def test_a_plane_with_nothing_to_dispatch_stays_one_cluster_and_says_why():
    from generator.spec.models import Fleet

    doc = fleet_doc()
    doc["workloads"] = [{"name": "chat", "long_lived_services": True, "bare_metal": False, "gpus": 64,
                         "tenant": "product"}]
    doc["options"] = {}
    plan = make_plan(Fleet.model_validate(doc), "x.yaml")
    assert not plan.clusters
    (w,) = [w for w in plan.warnings if w.field == "fleet.pools"]
    assert "split it into 4 clusters" in w.message and "orchgen plans it as one cluster" in w.message


# ---- services beside batch: a serving cluster, which MultiKueue does not dispatch to ---------------


@cache
def served() -> tuple[Plan, dict[str, bytes]]:
    """The 128k fleet with two model servers, one of 64 GPUs and one of two tightly coupled nodes."""
    from generator.spec.models import Fleet

    doc = fleet_doc()
    doc["workloads"] += [
        {"name": "chat", "long_lived_services": True, "bare_metal": False, "gpus": 64, "tenant": "product"},
        {"name": "big-model", "long_lived_services": True, "nodes": 2, "tightly_coupled": True,
         "bare_metal": False, "tenant": "frontier"}]
    plan = make_plan(Fleet.model_validate(doc), "x.yaml")
    return plan, render(plan)


def test_services_run_in_a_serving_cluster_beside_the_multikueue_workers():
    plan, files = served()
    roles = Counter(c.role for c in plan.clusters)
    assert roles == {"manager": 1, "worker": 4, "serving": 1}, roles
    manager = next(c for c in plan.clusters if c.role == "manager")
    workers = [c for c in plan.clusters if c.role == "worker"]
    (serving,) = [c for c in plan.clusters if c.role == "serving"]
    # whole leaves from the end of the fabric: the services' nodes (8 + 2), so one leaf of 32
    leaves = {leaf.name: leaf for leaf in plan.fabric.leaves}
    assert serving.leaves == (plan.fabric.leaves[-1].name,)
    assert set(serving.nodes["h100"]) == set(leaves[serving.leaves[0]].nodes)
    held = [n for w in workers for n in w.nodes["h100"]]
    assert not set(held) & set(serving.nodes["h100"])
    assert len(held) + serving.node_count == len(plan.kube_plane.nodes)
    assert all(w.node_count <= 5000 for w in workers)
    # the manager dispatches to the workers only, and its starters are the batch ones; the services'
    # starters are the serving cluster's, and no worker has any
    (config,) = [d for p, d in cluster_objects_of(files, "manager") if d["kind"] == "MultiKueueConfig"]
    assert config["spec"]["clusters"] == [w.name for w in workers]
    starters = {p.split("/")[1]: set() for p in files if "/kubernetes/workloads/" in p}
    for path in files:
        if "/kubernetes/workloads/" in path:
            starters[path.split("/")[1]].add(Path(path).stem)
    batch = {d.name for d in plan.workloads} - {"chat", "big-model"}
    assert starters == {"manager": batch, "serving": {"chat", "big-model"}}, starters
    assert "clusters/serving/kubernetes/manifests/19-multikueue-access.yaml" not in files
    values = yaml.safe_load(files["clusters/serving/kubernetes/helm/kueue.values.yaml"])
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert "multiKueue" not in config  # a standalone Kueue, admitting the services itself
    # the 2-node server is a LeaderWorkerSet there, whose LWS controller the serving cluster installs
    big = [d for d in yaml.safe_load_all(files["clusters/serving/kubernetes/workloads/big-model.yaml"]) if d]
    assert any(d["kind"] == "LeaderWorkerSet" for d in big)
    releases = yaml.safe_load(files["clusters/serving/kubernetes/helm/releases.yaml"])["releases"]
    assert any(r["chart"] == "lws" for r in releases)
    # quotas: the workers and the serving cluster add up to each tenant's; the manager holds the workers'
    for t in plan.tenants:
        for pool, q in t.quotas.items():
            for r in RESOURCES:
                in_workers = sum(getattr(w.quotas[t.name][pool], r) for w in workers)
                assert getattr(manager.quotas[t.name][pool], r) == in_workers, (t.name, r)
                assert in_workers + getattr(serving.quotas[t.name][pool], r) == getattr(q, r), (t.name, r)
    s = plan.kube_plane.slices[0]
    assert sum(serving.quotas[t.name]["h100"].gpus for t in plan.tenants) == s.gpus_per_node * serving.node_count
    # ... and so do the ClusterQueues written: the manager's, the workers' summed
    top = quota_table_of(files, "manager")
    per_worker = [quota_table_of(files, w.name) for w in workers]
    for key, by_flavor in top.items():
        assert sum(sum(t[key].values()) for t in per_worker) == sum(by_flavor.values()), key
    # every custom resource of the serving cluster passes its CRD's schema and CEL rules
    reg = registry()
    checked = 0
    for path, obj in cluster_objects_of(files, "serving", "manifests", "workloads"):
        crd = reg.get(obj["apiVersion"], obj["kind"])
        if crd is None:
            continue
        assert not reg.validate(obj), (path, obj["kind"], reg.validate(obj))
        assert not crd.cel.check_create(obj).violations, (path, obj["kind"])
        checked += 1
    assert checked
    # the README and plan.json say where the services went
    assert any("serving cluster" in r for r in plan.reasons)
    assert not any(w.field == "fleet.pools" for w in plan.warnings)
    readme = files["README.md"].decode()
    assert "and a serving cluster" in readme and "Services run apart, in the cluster `serving`" in readme


def cluster_objects_of(files: dict[str, bytes], cluster: str, *dirs: str) -> list[tuple[str, dict[str, Any]]]:
    prefixes = [f"{contract.cluster_dir(cluster)}/kubernetes/{d}/" for d in (dirs or ("manifests",))]
    return [(p, d) for p in files if any(p.startswith(x) for x in prefixes) and p.endswith(".yaml")
            for d in yaml.safe_load_all(files[p]) if d]


def quota_table_of(files: dict[str, bytes], cluster: str) -> dict[tuple[str, str], dict[str, int]]:
    out: dict[tuple[str, str], dict[str, int]] = {}
    for _, o in cluster_objects_of(files, cluster):
        if o["kind"] != "ClusterQueue":
            continue
        for group in o["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    q = r["nominalQuota"]
                    out.setdefault((o["metadata"]["name"], r["name"]), {})[flavor["name"]] = \
                        int(q[:-2]) if isinstance(q, str) and q.endswith("Gi") else int(q)
    return out


@pytest.mark.parametrize("cluster", ["manager", "worker-01"])
def test_each_clusters_pulumi_program_installs_its_own_folder(cluster, tmp_path):
    """The bundle's Pulumi program, run in clusters/<name>/pulumi under Pulumi's mocks with every
    object validated (built-ins by schema, custom resources by their CRDs), declares exactly that
    cluster's releases and manifests (tests/test_pulumi_stack.py's check)."""
    from tests import test_pulumi_stack as ps

    from tests._consumers import require

    require(ps.pulumi_mocks, "Pulumi SDK not importable (pip install -e '.[test]')")
    out = tmp_path / "b"
    bundle.write(files128k(), out)
    root = out / "clusters" / cluster
    from generator.validate.crds import CRDRegistry
    from tests._consumers import crd_paths

    run = ps.pulumi_mocks.run_program(root / "pulumi" / "__main__.py", ps._mocks(CRDRegistry.from_paths(crd_paths())),
                                      ps.CONTEXT)
    ps.check_run(root, run)
    names = {r.name for r in run.of_type(ps.RELEASE)}
    assert names == ({"kueue"} if cluster == "manager" else
                     {"gpu-operator", "network-operator", "kube-prometheus-stack", "kueue"})
    if cluster == "manager":
        assert run.named("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueCluster", "worker-04")


def test_a_workers_and_the_managers_releases_render_with_the_real_charts(tmp_path):
    """`helm template` of every release of the manager and of one worker, from ../shared/charts at the
    pinned version with the bundle's values: the charts accept them, and their custom resources pass
    the reference CRDs."""
    from tests._consumers import charts_dir, helm_objects, tool

    helm = tool("helm")
    env = {**os.environ, **{k: str(tmp_path / k.lower()) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME",
                                                                   "HELM_DATA_HOME")}}
    reg = registry()
    for cluster in ("manager", "worker-01"):
        root = contract.cluster_dir(cluster)
        releases = yaml.safe_load(files128k()[f"{root}/{contract.RELEASES_FILE}"])["releases"]
        for rel in releases:
            chart = charts_dir() / rel["chart"] / rel["version"]
            assert chart.is_dir(), chart
            values = tmp_path / f"{cluster}-{rel['values']}"
            values.write_bytes(files128k()[f"{root}/{contract.values_path(rel['values'])}"])
            r = subprocess.run([helm, "template", rel["name"], str(chart), "-n", rel["namespace"], "-f", str(values),
                                "--kube-version", "1.33"], capture_output=True, text=True, env=env, timeout=300)
            assert r.returncode == 0, (cluster, rel["name"], r.stderr[-2000:])
            objs = [o for o in helm_objects(r.stdout) if isinstance(o, dict) and o.get("kind")]
            assert objs, (cluster, rel["name"])
            for o in objs:
                if reg.get(o.get("apiVersion", ""), o["kind"]) is not None:
                    assert not reg.validate(o), (cluster, rel["name"], o["kind"], reg.validate(o))
            if rel["name"] == "kueue" and cluster == "manager":
                cm = next(o for o in objs if o["kind"] == "ConfigMap" and "controller_manager_config.yaml"
                          in o.get("data", {}))
                cfg = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
                assert cfg["multiKueue"]["origin"] == "multikueue"
                assert cfg["integrations"]["frameworks"] == ["batch/job"]


def test_validate_checks_every_clusters_folder(tmp_path):
    """`orchgen validate` reads clusters/<name>/ as it reads one cluster's bundle (the damage cases,
    --against and GitOps trees: tests/test_multikueue_validate.py)."""
    out = tmp_path / "b"
    files = files128k()
    bundle.write(files, out)
    r = run_orchgen("validate", out, "--no-fetch")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not checked: validate reads one cluster" not in r.stdout + r.stderr
    assert f"({len(files)} files checked" in r.stdout, r.stdout  # every file, the clusters' included
