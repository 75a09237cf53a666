"""Bundles applied to a real Kubernetes control plane (tests/kubeenv: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler built from Go modules, KWOK playing the fleet's nodes, and
Kueue's real controller manager): every example with a Kubernetes plane is accepted by the API
server (server-side apply, no dry run), the scheduler places pods only where they tolerate and
select, and Kueue admits gangs whole where the default scheduler splits them."""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import tenant_walls
from tests.kubeenv import admission, bundle as kb
from tests.kubeenv.fixture import kube, kube_factory  # noqa: F401
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def plan(workload: Path, out: Path) -> Path:
    r = subprocess.run([*orchgen_argv(), "plan", str(workload), "-o", str(out)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return out


def pods(cluster, *args: str) -> list[dict[str, Any]]:
    return cluster.get("pods", *args)["items"]


def tolerates(pod: dict[str, Any], taint: dict[str, Any]) -> bool:
    for t in pod["spec"].get("tolerations", []):
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def assert_placement(cluster) -> int:
    """Every bound pod sits on a node whose NoSchedule/NoExecute taints it tolerates and whose labels
    its nodeSelector selects. Returns how many pods were checked."""
    nodes = {n["metadata"]["name"]: n for n in cluster.get("nodes")["items"]}
    checked = 0
    for p in pods(cluster, "-A"):
        node = p["spec"].get("nodeName")
        if not node:
            continue
        n = nodes[node]
        for taint in n["spec"].get("taints", []):
            if taint["effect"] in ("NoSchedule", "NoExecute"):
                assert tolerates(p, taint), f"pod {p['metadata']['name']} on {node} ignores taint {taint}"
        for k, v in (p["spec"].get("nodeSelector") or {}).items():
            assert n["metadata"]["labels"].get(k) == v, \
                f"pod {p['metadata']['namespace']}/{p['metadata']['name']} on {node}: {k}={v} not on the node"
        checked += 1
    return checked


# Examples whose bundle this plane cannot take whole, and the test that checks their path instead.
# nvl72-kubernetes: its ComputeDomain jobs need Kubernetes 1.34 (the DRA driver; Kueue 0.19.2 reads
# resource.k8s.io/v1), this plane is 1.33; the same generator path (ComputeDomain, claims, the clique
# Topology, a job kept in one clique) runs in the TAS test's cluster, on a pool of NVLink domains.
CHECKED_ELSEWHERE = {
    "nvl72-kubernetes": "ComputeDomain jobs need Kubernetes 1.34; its path is checked by "
                        "test_kueue_tas_puts_a_gang_under_one_leaf_and_an_nvlink_job_in_one_clique",
}


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_example_applies(example: Path, tmp_path: Path, kube_factory) -> None:
    out = plan(example, tmp_path / "bundle")
    p = json.loads((out / "plan.json").read_text())
    if not any(k in p["planes"] for k in ("kubernetes", "k3s")) and \
            not any(v.get("host") == "kubernetes" for v in p["planes"].values()):
        pytest.skip(f"{example.name}: no Kubernetes plane in its plan")
    if example.stem in CHECKED_ELSEWHERE:
        pytest.skip(f"{example.name}: {CHECKED_ELSEWHERE[example.stem]}")
    # LeaderWorkerSet's controller runs where the bundle installs it, so its model servers get pods;
    # Volcano's scheduler, controllers and webhooks likewise, so its queues admit and its scheduler places
    charts = {r["chart"] for r in kb.releases(out)}
    kube = kube_factory(lws="lws" in charts, volcano="volcano" in charts)
    result = kb.apply_bundle(kube, example, out, with_workloads=False)
    queued = p.get("gang_scheduler") in ("kueue", "volcano")
    if queued:  # issue 34: the Job a user writes for each pool is admitted and placed there
        tenant = sorted(t["name"] for t in p["tenants"])[0]
        jobs, units = admission.plain_jobs(example, out, tenant)
        kube.apply(jobs)
        admission.wait_admitted_and_placed(kube, units, example)
        kube.kubectl("delete", "jobs", "-n", tenant, *[j["metadata"]["name"] for j in jobs], "--wait=true",
                     "--cascade=foreground", timeout=120)
    starters = kb.apply_workloads(kube, out)
    if queued:  # every starter and service of the bundle, admitted and placed on its pool
        extra, units = admission.expected_units(out, kb.manifests(kube, out) + starters)
        if extra:
            kube.apply(extra)
        admission.wait_admitted_and_placed(kube, units, example)
    if p.get("gang_scheduler") == "kueue":  # Ray autoscaling only as Kueue elastic jobs
        assert_kueue_takes_ray_autoscaling_only_as_elastic_jobs(kube, kb.manifests(kube, out) + starters)
    if p.get("gang_scheduler") == "volcano":  # a gang larger than its pool waits whole, and Volcano says why
        tenant = sorted(t["name"] for t in p["tenants"])[0]
        gang, pool = admission.oversized_gang(example, out, tenant)
        kube.apply([gang])
        said = admission.wait_gang_refused(kube, gang)
        assert f"{gang['spec']['minAvailable']} minAvailable" in said, (pool, said)
        kube.kubectl("delete", "jobs.batch.volcano.sh", "-n", tenant, gang["metadata"]["name"], "--wait=true",
                     timeout=120)
    # every object of the manifests and the starters is stored as written
    for o in kb.prerequisites(out) + kb.manifests(kube, out) + kb.operator_resources(out) + kb.workloads(out):
        got = kube.read(o)
        assert got["metadata"]["name"] == o["metadata"]["name"] and got["kind"] == o["kind"], (o["kind"], got)
    # the nodes node-labels.sh gave the Kubernetes plane carry its label, the Slurm side its taint
    nodes = kube.get("nodes")["items"]
    assert nodes, "no node joined"
    if (out / "kubernetes" / "node-labels.sh").is_file():
        assert "the plan has" not in result["node_labels"], result["node_labels"]
    # let the controllers and the scheduler act on what was applied, then check where pods went
    time.sleep(5)
    assert_placement(kube)
    # the walls between tenants, on this cluster (tests/tenant_walls.py): NetworkPolicies as stored,
    # against the documented rule; can-i; Pod Security; the GPU checker's own-node policy
    tenant_walls.check(kube, out)
    assert_secret_references(kube, out, p)
    if example.stem == TENANT_GROUPS_EXAMPLE:  # RBAC of each tenant's group, every right asked of the authorizer
        assert_tenant_groups_reach_only_their_namespace(kube, example)


WORKLOAD = "orchgen.io/workload"


# Issue 34 under NVIDIA's KAI Scheduler: oke-training with options.gang_scheduler kai (the golden case
# oke-training-kai). KAI's scheduler, binder and pod grouper cannot run here (the Go module proxy refuses
# its modules, tests/kubeenv/README.md "Not covered", so it cannot be built), so nothing admits or places
# these pods: what is checked is all the real API server decides. The bundle goes in as its README
# applies it, KAI's CRDs from its chart (v0.17.0) holding the Queues, the Topology and the PodGroup; the
# API server type-checks the tenant namespace's queue policy (a ValidatingAdmissionPolicy) against the
# Pod schema and KAI's PodGroup CRD with no warning; the policy lets in the starter's pods and the Job the
# README tells a user to write for each pool (its pod made by the Job controller), and refuses a pod or a
# PodGroup that would skip the tenant's queue, with its message; the default scheduler binds none of
# them (a pod naming kai-scheduler waits for KAI); and the tenant walls hold as for every example.
def test_kai_bundle_goes_in_and_its_queue_policy_admits_what_the_readme_says(tmp_path: Path, kube) -> None:
    doc = yaml.safe_load((REPO / "examples" / "oke-training.yaml").read_text())
    doc.setdefault("options", {})["gang_scheduler"] = "kai"
    example = tmp_path / "oke-training.yaml"
    example.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = plan(example, tmp_path / "bundle")
    p = json.loads((out / "plan.json").read_text())
    assert p["gang_scheduler"] == "kai"
    kb.apply_bundle(kube, example, out, with_workloads=False)
    objs = kb.manifests(kube, out)
    [policy] = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"
                and o["metadata"]["name"] == f"{p['name']}-tenant-queues"]

    def type_checked() -> dict[str, Any] | None:
        got = (kube.get("validatingadmissionpolicy", policy["metadata"]["name"]).get("status") or {})
        return got if got.get("observedGeneration") else None

    status = kube.wait_for("the API server's type check of the queue policy", type_checked, timeout=60)
    assert not (status.get("typeChecking") or {}).get("expressionWarnings"), status
    tenant = sorted(t["name"] for t in p["tenants"])[0]
    jobs, units = admission.plain_jobs(example, out, tenant)
    kube.apply(jobs)
    starters = kb.apply_workloads(kube, out)  # refused whole if the policy refused a pod of it
    for w in p["workloads"]:
        made = [o for o in starters if o["kind"] == "Pod" and o["metadata"]["labels"].get(WORKLOAD) == w["name"]]
        if made:
            units.append(admission.Unit(f"starter {w['name']}", w["tenant"], {WORKLOAD: w["name"]}, len(made),
                                        w.get("pool")))
    assert len(units) > len(jobs), "no starter made of pods"
    assert admission.wait_kai_held(kube, units) == sum(u.pods for u in units)
    # a pod or PodGroup that would skip the tenant's queue, refused by the policy with its message
    group = next(o for o in starters if o["kind"] == "PodGroup")
    pod = json.loads(json.dumps(jobs[0]["spec"]["template"]))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**pod["metadata"], "name": "stray", "namespace": tenant},
           "spec": pod["spec"]}
    queue = pod["metadata"]["labels"][admission.KAI_QUEUE]
    no_scheduler = json.loads(json.dumps(pod))
    del no_scheduler["spec"]["schedulerName"]
    other_queue = json.loads(json.dumps(pod))
    other_queue["metadata"]["labels"][admission.KAI_QUEUE] = f"{queue}-other"
    other_group = {**group, "metadata": {"name": "stray", "namespace": tenant},
                   "spec": {**group["spec"], "queue": f"{queue}-other"}}
    for stray, said in ((no_scheduler, "must set schedulerName: kai-scheduler"),
                        (other_queue, f"must carry the label kai.scheduler/queue: {queue}"),
                        (other_group, f"must use queue {queue}")):
        r = kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(stray), check=False)
        assert r.returncode != 0 and said in r.stderr, (stray["kind"], said, r.stderr[-1000:])
    r = kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
    assert r.returncode == 0, r.stderr[-1000:]  # the README's pod, as a bare pod, goes in
    for o in kb.prerequisites(out) + objs + kb.operator_resources(out) + kb.workloads(out):
        got = kube.read(o)
        assert got["metadata"]["name"] == o["metadata"]["name"] and got["kind"] == o["kind"], (o["kind"], got)
    assert_placement(kube)
    tenant_walls.check(kube, out)
    assert_secret_references(kube, out, p)


KUEUE_ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"  # 0.19.2 pkg/constants ElasticJobAnnotation
ELASTIC_GATE = "kueue.x-k8s.io/elastic-job"  # 0.19.2 apis/kueue/v1beta2 ElasticJobSchedulingGate (same string)
# 0.19.2 pkg/controller/jobs/raycluster/raycluster_webhook.go validateCreate; raycluster/common.go ValidateCreate
KUEUE_REFUSES = {"RayCluster": "a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the "
                               "ElasticJobsViaWorkloadSlices feature gate and set the",
                 "RayService": "a kueue managed job should only use autoscaling when workload slicing is enabled"}


def _ray_cluster_spec(o: dict[str, Any]) -> dict[str, Any]:
    return o["spec"] if o["kind"] == "RayCluster" else o["spec"]["rayClusterConfig"]


def _templates(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [spec["headGroupSpec"]["template"], *[g["template"] for g in spec["workerGroupSpecs"]]]


def assert_kueue_takes_ray_autoscaling_only_as_elastic_jobs(kube, objs: list[dict[str, Any]]) -> int:
    """Issue 34 (Ray pools pinned at their maximum): under Kueue an autoscaling RayCluster or RayService
    of the bundle is an elastic job (generator/render/kubernetes/ray.py `elastic`, schedulers.py
    `ray_autoscaling_annotations`): as stored, every pod template carries the scheduling gate Kueue's
    own webhook added (0.19.2 raycluster_webhook.go / rayservice_webhook.go Default), which it takes only
    with the bundle's ElasticJobsViaWorkloadSlices gate on. The first object of each kind, autoscaler on
    and without the annotation, in its tenant namespace (server-side dry run, nothing stored) is refused
    with Kueue's message (KUEUE_REFUSES): why a fixed one stays fixed. Returns how many kinds were checked."""
    checked = 0
    for kind in ("RayCluster", "RayService"):
        o = next((o for o in objs if o["kind"] == kind), None)
        if o is None:
            continue
        elastic = bool(_ray_cluster_spec(o).get("enableInTreeAutoscaling"))
        assert elastic == ((o["metadata"].get("annotations") or {}).get(KUEUE_ELASTIC_JOB) == "true"), o["metadata"]
        if elastic:
            stored = kube.get(f"{kind.lower()}s.ray.io", o["metadata"]["name"], "-n", o["metadata"]["namespace"])
            for t in _templates(_ray_cluster_spec(stored)):
                assert {"name": ELASTIC_GATE} in t["spec"].get("schedulingGates", []), (kind, t["spec"])
        o = json.loads(json.dumps(o))
        _ray_cluster_spec(o)["enableInTreeAutoscaling"] = True
        annotations = {k: v for k, v in (o["metadata"].get("annotations") or {}).items() if k != KUEUE_ELASTIC_JOB}
        o["metadata"] = {k: v for k, v in o["metadata"].items() if k in ("namespace", "labels")} | \
            {"name": f"{o['metadata']['name']}-autoscaled"[:63], "annotations": annotations}
        r = kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(o), check=False)
        assert r.returncode != 0 and KUEUE_REFUSES[kind] in r.stderr, (kind, r.stdout, r.stderr[-1500:])
        checked += 1
    return checked


def _containers(x: Any) -> list[dict[str, Any]]:
    """Every container of every pod template (or pod) inside an object, in document order."""
    found: list[dict[str, Any]] = []
    if isinstance(x, dict):
        if isinstance(x.get("containers"), list):
            found += x["containers"]
        for v in x.values():
            found += _containers(v)
    elif isinstance(x, list):
        for v in x:
            found += _containers(v)
    return found


def assert_secret_references(kube, out: Path, p: dict[str, Any]) -> int:
    """Issue 40: serving.secret reaches the API server as a reference only. Each server object as
    stored (KServe's predictor, the LeaderWorkerSet's templates, ...) and each pod a controller made
    from it carry envFrom's secretRef to the named Secret and no literal value for it; no Secret of
    that name came from the bundle; KServe's storage ServiceAccount lists it. Returns the containers
    checked (serving-platform names two Secrets)."""
    checked = 0
    for w in p["workloads"]:
        secret = (w.get("serving") or {}).get("secret_name")
        if not secret:
            continue
        ns = w["tenant"]
        ref = [{"secretRef": {"name": secret, "optional": False}}]
        objs = [o for f in [out / "kubernetes" / "workloads" / f"{w['name']}.yaml"]
                for o in yaml.safe_load_all(f.read_text()) if o]
        assert not [o for o in objs if o["kind"] == "Secret"], f"{w['name']}: a Secret in the bundle"
        stored = []
        for o in objs:
            kind = o["kind"] + ("." + o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else "")
            got = kube.get(kind, o["metadata"]["name"], "-n", ns)
            if o["kind"] == "ServiceAccount":
                assert got["secrets"] == [{"name": secret}], got
            stored.append(got)
        pods = kube.get("pods", "-n", ns, "-l", f"orchgen.io/workload={w['name']}")["items"]
        containers = [c for o in stored + pods for c in _containers(o)]
        assert containers, f"{w['name']}: no server container stored"
        for c in containers:
            assert c.get("envFrom") == ref, (w["name"], c["name"], c.get("envFrom"))
            # the only literal values are orchgen's own (HOME, STORAGE_URI, MODEL, ...), none the Secret's
            assert not [e for e in c.get("env", []) if e["name"] in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY")], c
        checked += len(containers)
        assert kube.kubectl("get", "secret", secret, "-n", ns, check=False).returncode != 0, \
            f"{ns}/{secret}: a Secret came from the bundle"
    return checked


# The guide's deadlock: 8 one-GPU nodes, two 5-pod all-or-nothing jobs (10 GPUs asked, 8 there).
DEADLOCK_FLEET = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: gang-deadlock
fleet:
  fabric:
    kind: ethernet
    nodes_per_leaf: 8
  pools:
    - name: g1
      nodes: 8
      gpu: {type: l4, count: 1}
      cpus: 16
      memory_gib: 64
tenants:
  - name: team
workloads:
  - {name: gang-a, plane: kubernetes, tenant: team, nodes: 5, gpus: 5, tightly_coupled: true}
  - {name: gang-b, plane: kubernetes, tenant: team, nodes: 5, gpus: 5, tightly_coupled: true}
"""


def running_by_job(cluster, ns: str) -> dict[str, int]:
    out: dict[str, int] = {"gang-a": 0, "gang-b": 0}
    for p in pods(cluster, "-n", ns):
        job = p["metadata"].get("labels", {}).get("job-name")
        if job in out and p["status"].get("phase") == "Running":
            out[job] += 1
    return out


def deadlock_bundle(tmp_path: Path) -> tuple[Path, Path]:
    fleet = tmp_path / "gang-deadlock.yaml"
    fleet.write_text(DEADLOCK_FLEET)
    return fleet, plan(fleet, tmp_path / "bundle")


def test_kueue_admits_one_gang_whole_the_other_waits_whole(tmp_path: Path, kube) -> None:
    fleet, out = deadlock_bundle(tmp_path)
    kb.apply_bundle(kube, fleet, out)
    # one job admitted and all 5 of its pods Running; the other suspended by Kueue, no pod at all
    kube.wait_for("one gang running whole", lambda: sorted(running_by_job(kube, "team").values()) == [0, 5],
                  timeout=180)
    for _ in range(10):  # and it stays so: never a split of Running and Pending
        assert sorted(running_by_job(kube, "team").values()) == [0, 5]
        time.sleep(1)
    jobs = {j["metadata"]["name"]: j for j in kube.get("jobs", "-n", "team")["items"]}
    waiting = [n for n, j in jobs.items() if j["spec"].get("suspend")]
    assert len(waiting) == 1, {n: j["spec"].get("suspend") for n, j in jobs.items()}
    assert not [p for p in pods(kube, "-n", "team") if p["metadata"]["labels"].get("job-name") == waiting[0]]
    workloads = kube.get("workloads.kueue.x-k8s.io", "-n", "team")["items"]
    admitted = {w["metadata"]["ownerReferences"][0]["name"]: bool(w.get("status", {}).get("admission"))
                for w in workloads}
    assert sorted(admitted.values()) == [False, True], admitted
    assert admitted[waiting[0]] is False
    # a tenant over its quota waits: the waiting gang's 5 GPUs exceed what the tenant's ClusterQueue
    # has left (8 - 5), though 3 nodes stand idle; Kueue says it is the quota
    busy = {p["spec"].get("nodeName") for p in pods(kube, "-n", "team")}
    assert len({n["metadata"]["name"] for n in kube.get("nodes")["items"]} - busy) == 3
    w = next(w for w in workloads if w["metadata"]["ownerReferences"][0]["name"] == waiting[0])
    reasons = " ".join(c.get("message", "") for c in w.get("status", {}).get("conditions", []))
    assert "quota" in reasons.lower(), reasons
    assert_placement(kube)
    assert_pod_groups_admitted_whole(kube)


POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"


def _group_pod(group: str, i: int, total: int) -> dict[str, Any]:
    # a bare pod as the bundle README's "Bare pods that must start together form a pod group" says: the
    # group's label and total-count annotation, no queue label (the namespace's LocalQueue `default`),
    # Pod Security `restricted`
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{group}-{i}", "namespace": "team", "labels": {POD_GROUP_LABEL: group},
                         "annotations": {POD_GROUP_COUNT: str(total)}},
            "spec": {"restartPolicy": "Never",
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "600"],
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}},
                                     "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


def _user_job(name: str, pods: int) -> dict[str, Any]:
    # the Job a user writes: no queue label (the namespace's LocalQueue `default`), nothing of Kueue's
    spec = _group_pod(name, 0, pods)["spec"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "team"},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "template": {"spec": {**spec, "restartPolicy": "Never"}}}}


def _finish(kube, pod: dict[str, Any]) -> None:
    """A pod's containers exit 0 (what the kubelet would write; KWOK runs no container)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"phase": "Succeeded", "containerStatuses": [
        {"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "started": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}}
        for c in pod["spec"]["containers"]]}
    kube.request("PATCH", f"/api/v1/namespaces/team/pods/{pod['metadata']['name']}/status", {"status": status},
                 content_type="application/merge-patch+json")


def assert_pod_groups_admitted_whole(kube) -> dict[str, int]:
    """Issue 34 (plain pods in a Kueue-managed namespace, and the ResourceQuota), on the deadlock test's
    cluster with its jobs gone: the bundle README's pod group is admitted whole by the real Kueue, as one
    Workload, where pods one by one would split. And the tenant's quota is its ClusterQueue alone: the
    bundle writes no ResourceQuota where Kueue manages the namespace, so two pod groups and a plain Job
    asking 13 GPUs of the tenant's 8 are all stored (none refused by the API server, as a ResourceQuota
    would refuse a pod Kueue holds back gated); group a runs (5), the Job runs in what is left (3),
    group b waits whole in Kueue, gated, with Kueue's word why; when a finishes, b is admitted and
    placed. A Job asking for a pool the tenant's queue cannot give is never admitted, with Kueue's
    message. Returns {group: pods bound}."""
    kube.kubectl("delete", "jobs", "--all", "-n", "team", "--wait=true", "--cascade=foreground", timeout=120)
    kube.wait_for("the gangs' pods gone", lambda: not pods(kube, "-n", "team"), timeout=120)
    assert not kube.get("resourcequotas", "-n", "team")["items"]
    [cq] = kube.get("clusterqueues.kueue.x-k8s.io")["items"]
    [flavor] = [f for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]}["nvidia.com/gpu"] == "8", flavor
    kube.apply([_group_pod("a", i, 5) for i in range(5)])

    def bound() -> dict[str, int]:
        out = {"a": 0, "b": 0, "job": 0}
        for pod in pods(kube, "-n", "team"):
            labels = pod["metadata"].get("labels", {})
            g = labels.get(POD_GROUP_LABEL) or ("job" if labels.get("job-name") == "job" else None)
            if g in out and pod["spec"].get("nodeName") and pod["status"].get("phase") == "Running":
                out[g] += 1
        return out

    kube.wait_for("pod group a running whole", lambda: bound()["a"] == 5, timeout=120)
    for i in range(5):  # group b: every pod stored, none refused
        r = kube.kubectl("create", "-f", "-", input=json.dumps(_group_pod("b", i, 5)), check=False)
        assert r.returncode == 0, r.stderr
    kube.apply([_user_job("job", 3)])
    kube.wait_for("the Job running in the GPUs left", lambda: bound() == {"a": 5, "b": 0, "job": 3}, timeout=120)

    def workloads() -> dict[str, dict[str, Any]]:
        out = {}
        for w in kube.get("workloads.kueue.x-k8s.io", "-n", "team")["items"]:
            for r in w["metadata"].get("ownerReferences", []):
                out[r["name"].split("-")[0] if r["kind"] == "Pod" else r["name"]] = w
        return out

    def admitted(w: dict[str, Any]) -> bool:
        return bool((w.get("status") or {}).get("admission"))

    for _ in range(3):  # b waits whole, gated: never a pod of it bound
        assert bound() == {"a": 5, "b": 0, "job": 3}, bound()
        time.sleep(1)
    gated = [pod for pod in pods(kube, "-n", "team") if pod["metadata"]["labels"].get(POD_GROUP_LABEL) == "b"]
    assert len(gated) == 5 and all(pod["spec"].get("schedulingGates") for pod in gated), gated
    # group a is one Workload, owned by its 5 pods, and admitted; b one Workload, not admitted, and Kueue
    # says it is the quota: GPUs short in the pool's flavor (0.19.2 pkg/scheduler/flavorassigner; 2 when
    # Kueue last tried it beside a alone, 5 beside a and the Job)
    wl = workloads()
    assert len(wl["a"]["metadata"]["ownerReferences"]) == 5 and admitted(wl["a"]) and admitted(wl["job"])
    assert not admitted(wl["b"])
    [said] = [c["message"] for c in wl["b"].get("status", {}).get("conditions", [])
              if (c["type"], c["status"]) == ("QuotaReserved", "False")]
    assert re.fullmatch(rf"couldn't assign flavors to pod set \S+: insufficient unused quota for nvidia.com/gpu "
                        rf"in flavor {flavor['name']}, [25] more needed", said), wl["b"]["status"]
    # a Job asking for a pool its tenant's queue cannot give (a value of the flavor's node label no flavor
    # has) is never admitted, and Kueue says so in its Workload's condition
    rf = kube.get("resourceflavors.kueue.x-k8s.io", flavor["name"])
    lost = _user_job("lost", 1)
    lost["spec"]["template"]["spec"]["nodeSelector"] = {sorted(rf["spec"]["nodeLabels"])[0]: "no-such-pool"}
    kube.apply([lost])
    said = kube.wait_for("Kueue's word on the Job", lambda: next(
        (c["message"] for c in (workloads().get("lost", {}).get("status") or {}).get("conditions", [])
         if (c["type"], c["status"]) == ("QuotaReserved", "False")), None), timeout=30)
    assert said == f"couldn't assign flavors to pod set main: flavor {flavor['name']} doesn't match node affinity", said
    # group a finishes: Kueue marks its Workload finished, gives its quota back and admits b whole
    for pod in pods(kube, "-n", "team"):
        if pod["metadata"]["labels"].get(POD_GROUP_LABEL) == "a":
            _finish(kube, pod)
    kube.wait_for("group b admitted and placed", lambda: bound() == {"a": 0, "b": 5, "job": 3}, timeout=120)
    assert admitted(workloads()["b"]) and not admitted(workloads()["lost"])
    assert_placement(kube)
    return bound()


# An elastic Ray workload under Kueue (issue 34: "Ray pools are pinned at their maximum"): one tenant,
# 8 one-GPU nodes (the tenant's ClusterQueue: 8 GPUs), a Ray pipeline that is no fixed gang (not tightly
# coupled, no RDMA fabric) of up to 4 workers.
ELASTIC_FLEET = DEADLOCK_FLEET.replace("name: gang-deadlock", "name: elastic-ray").split("workloads:")[0] + """\
workloads:
  - {name: rl, plane: kubernetes, tenant: team, nodes: 4, gpus: 4, python_native_pipeline: true}
  - {name: agents, plane: kubernetes, tenant: team, gpus: 1, long_lived_services: true, python_native_pipeline: true,
     serving: {model: Qwen/Qwen2.5-0.5B-Instruct, min_replicas: 1, max_replicas: 2}}
options:
  gang_scheduler: kueue
"""
SLICE_REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"  # 0.19.2 pkg/workloadslicing


def test_kueue_resizes_an_elastic_raycluster_within_quota(tmp_path: Path, kube) -> None:
    """The bundle's autoscaling RayCluster, asked of the real Kueue 0.19.2 run with the bundle's feature
    gates (the release's `--feature-gates`, tests/kubeenv/cluster.py kueue_release_feature_gates). No
    KubeRay operator runs here, so no Ray pod is made: what is checked is Kueue's side, the RayCluster's
    Workloads and the ClusterQueue's usage, with the worker group's `replicas` patched as KubeRay's
    autoscaler patches it. Admitted at 0 workers (the head alone); scaled to 2, a new Workload slice
    replacing the admitted one is admitted and the old one finishes as replaced (0.19.2
    workloadslicing.EnsureWorkloadSlices, scheduler ReplacedWorkloadSlice); with a user's Job holding 5
    of the 8 GPUs, scaling to 4 (4 + 5 > 8) leaves the larger slice pending while the admitted one keeps
    the cluster's 2; once the Job is gone the larger one is admitted in its place; scaling down to 1
    shrinks the admitted slice in place and the ClusterQueue's GPU usage drops to 1. The bundle's
    autoscaling RayService is admitted as an elastic job at its min_replicas worker (KubeRay, which would
    make its RayCluster, is not here). The same RayCluster marked MultiKueue-managed is refused with
    Kueue's own message."""
    fleet = tmp_path / "elastic-ray.yaml"
    fleet.write_text(ELASTIC_FLEET)
    out = plan(fleet, tmp_path / "bundle")
    values = yaml.safe_load((out / "kubernetes" / "helm" / "kueue.values.yaml").read_text())
    assert {"name": "ElasticJobsViaWorkloadSlices", "enabled": True} in values["controllerManager"]["featureGates"]
    kb.apply_bundle(kube, fleet, out, with_workloads=False)
    [rc] = [o for o in kb.manifests(kube, out) if o["kind"] == "RayCluster"]
    assert rc["metadata"]["annotations"][KUEUE_ELASTIC_JOB] == "true" and rc["spec"]["enableInTreeAutoscaling"]
    [group] = rc["spec"]["workerGroupSpecs"]
    assert (group["minReplicas"], group["replicas"], group["maxReplicas"]) == (0, 0, 4)
    name = rc["metadata"]["name"]
    assert assert_kueue_takes_ray_autoscaling_only_as_elastic_jobs(kube, [rc]) == 1

    def slices() -> list[dict[str, Any]]:
        return [w for w in kube.get("workloads.kueue.x-k8s.io", "-n", "team")["items"]
                if any(r["kind"] == "RayCluster" and r["name"] == name for r in w["metadata"].get("ownerReferences", []))]

    def cond(w: dict[str, Any], t: str) -> dict[str, Any]:
        return next((c for c in (w.get("status") or {}).get("conditions", []) if c["type"] == t), {})

    def admitted() -> list[dict[str, Any]]:
        return [w for w in slices() if cond(w, "Admitted").get("status") == "True"
                and cond(w, "Finished").get("status") != "True"]

    def workers(w: dict[str, Any]) -> int:
        return next(p["count"] for p in w["spec"]["podSets"] if p["name"] == group["groupName"])

    def gpus_used() -> int:
        cq = kube.get("clusterqueues.kueue.x-k8s.io", "team")
        return sum(int(r["total"]) for f in (cq.get("status") or {}).get("flavorsUsage", [])
                   for r in f["resources"] if r["name"] == "nvidia.com/gpu")

    def scale(n: int) -> None:  # what KubeRay's autoscaler writes: the worker group's replicas
        kube.kubectl("patch", "rayclusters.ray.io", name, "-n", "team", "--type=json", "-p",
                     json.dumps([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": n}]))

    def one_admitted(n: int) -> dict[str, Any] | None:
        got = admitted()
        return got[0] if len(got) == 1 and workers(got[0]) == n and gpus_used() == n else None

    first = kube.wait_for("the RayCluster admitted at 0 workers", lambda: one_admitted(0), timeout=120)
    scale(2)
    second = kube.wait_for("a 2-worker slice admitted", lambda: one_admitted(2), timeout=120)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["metadata"]["annotations"][SLICE_REPLACES].endswith("/" + first["metadata"]["name"])
    # the replaced slice finishes as such (0.19.2 apis/kueue/v1beta2 WorkloadSliceReplaced), its quota released
    old = next(w for w in slices() if w["metadata"]["name"] == first["metadata"]["name"])
    assert cond(old, "Finished").get("reason") == "WorkloadSliceReplaced", old["status"]
    # a user's Job takes 5 of the 8 GPUs: 2 + 5 fit, 4 + 5 do not. At the cluster's priority (the bundle's
    # batch PriorityClass): at a lower one the ClusterQueue's `withinClusterQueue: LowerPriority` would
    # let the larger slice preempt it
    job = _user_job("job", 5)
    job["spec"]["template"]["spec"]["priorityClassName"] = rc["spec"]["headGroupSpec"]["template"]["spec"]["priorityClassName"]
    kube.apply([job])
    kube.wait_for("the Job admitted beside the cluster", lambda: gpus_used() == 7, timeout=120)
    scale(4)

    def pending_larger() -> dict[str, Any] | None:
        got = [w for w in slices() if workers(w) == 4 and SLICE_REPLACES in w["metadata"].get("annotations", {})]
        return got[0] if got and cond(got[0], "QuotaReserved").get("status") == "False" else None

    larger = kube.wait_for("the 4-worker slice waiting for quota", pending_larger, timeout=120)
    assert "insufficient unused quota for nvidia.com/gpu" in cond(larger, "QuotaReserved")["message"], larger["status"]
    assert [w["metadata"]["name"] for w in admitted()] == [second["metadata"]["name"]] and gpus_used() == 7
    kube.kubectl("delete", "jobs", "job", "-n", "team", "--wait=true", "--cascade=foreground", timeout=120)
    third = kube.wait_for("the 4-worker slice admitted once the Job is gone", lambda: one_admitted(4), timeout=120)
    assert third["metadata"]["name"] == larger["metadata"]["name"]
    assert third["metadata"]["annotations"][SLICE_REPLACES].endswith("/" + second["metadata"]["name"])
    scale(1)  # down: the admitted slice shrinks in place and gives 3 GPUs back
    fourth = kube.wait_for("the slice shrunk to 1 worker", lambda: one_admitted(1), timeout=120)
    assert fourth["metadata"]["name"] == third["metadata"]["name"]
    # the RayService (Ray Serve, KubeRay's autoscaler between min_replicas and max_replicas workers) is an
    # elastic job too: stored with Kueue's gate on its templates, admitted at its min_replicas worker
    [rs] = [o for o in yaml.safe_load_all((out / "kubernetes" / "workloads" / "agents.yaml").read_text())
            if o and o["kind"] == "RayService"]
    assert rs["metadata"]["annotations"][KUEUE_ELASTIC_JOB] == "true"
    kube.apply([rs])
    assert assert_kueue_takes_ray_autoscaling_only_as_elastic_jobs(kube, [rs]) == 1

    def service_admitted() -> bool:
        return any(r["kind"] == "RayService" for w in kube.get("workloads.kueue.x-k8s.io", "-n", "team")["items"]
                   if cond(w, "Admitted").get("status") == "True" for r in w["metadata"].get("ownerReferences", []))

    kube.wait_for("the RayService admitted", lambda: service_admitted() and gpus_used() == 2, timeout=120)
    # MultiKueue does not resize a Ray cluster: Kueue's webhook says so (0.19.2 raycluster_webhook.go
    # validateElasticJob); a plane with Ray is never planned behind MultiKueue (decide/clusters.py)
    mk = json.loads(json.dumps(rc))
    mk["metadata"] = {k: v for k, v in mk["metadata"].items() if k in ("namespace", "labels", "annotations")} | \
        {"name": f"{name}-multikueue"}
    mk["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    r = kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(mk), check=False)
    assert r.returncode != 0 and \
        "in-tree autoscaling is not supported for a MultiKueue-managed elastic RayCluster" in r.stderr, r.stderr[-1500:]


def test_default_scheduler_splits_the_same_gangs(tmp_path: Path, kube) -> None:
    """The same two starters with no Kueue (no release, no queues): the Job controller creates the pods
    and the default scheduler binds 8, so a gang runs in part and holds GPUs it cannot use. And where
    Kueue is off the namespace's ResourceQuota is the tenant's cap: the one the bundle of the same fleet
    without a gang (no quota manager planned) writes, 8 GPUs, refuses the Job controller's 9th and 10th
    pods with the API server's quota message."""
    fleet, out = deadlock_bundle(tmp_path)
    plain = tmp_path / "no-gang.yaml"
    plain.write_text(DEADLOCK_FLEET.replace("tightly_coupled: true", "tightly_coupled: false"))
    no_gang = plan(plain, tmp_path / "no-gang")
    assert json.loads((no_gang / "plan.json").read_text()).get("gang_scheduler") is None
    [rq] = [o for o in yaml.safe_load_all((no_gang / "kubernetes/manifests/10-quotas.yaml").read_text()) if o]
    assert (rq["metadata"]["name"], rq["metadata"]["namespace"], rq["spec"]) == \
        ("gpu-quota", "team", {"hard": {"requests.nvidia.com/gpu": "8"}}), rq
    kube.add_nodes(kb.fleet_nodes(fleet, out))
    kb.run_node_labels(kube, out)
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}, rq])
    # the starters name the bundle's PriorityClasses (manifests/01-priorities.yaml): those, but no queue
    kube.apply([o for o in kb.manifests(kube, out) if o["kind"] == "PriorityClass"])
    kube.apply(kb.workloads(out))
    kube.wait_for("8 pods bound", lambda: sum(running_by_job(kube, "team").values()) == 8, timeout=180)
    running = running_by_job(kube, "team")
    assert any(0 < n < 5 for n in running.values()), running  # a split: part of a gang runs
    assert len(pods(kube, "-n", "team")) == 8  # the other 2 never made: the quota refused them

    def refused() -> list[str]:
        return [e["message"] for e in kube.get("events", "-n", "team")["items"]
                if e.get("reason") == "FailedCreate" and "exceeded quota: gpu-quota" in e.get("message", "")]

    said = kube.wait_for("the quota's refusal", refused, timeout=60)
    assert any("requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8, "
               "limited: requests.nvidia.com/gpu=8" in m for m in said), said
    assert_placement(kube)


# A gang that prefers one leaf lands under one leaf: Kueue topology-aware scheduling over the fabric
# labels node-labels.sh puts on a bare-metal fleet (2 leaves of 4 one-GPU nodes). In the same cluster,
# a pool of NVLink domains (GB200-like trays, domains of 2 nodes, 2 leaves of 4): its multi-node job
# gets a ComputeDomain and claims its IMEX channel (issue 35), on an API server that serves
# resource.k8s.io (Cluster(dra=True)), and Kueue keeps it inside one NVLink clique. The fabric is RoCE
# with two compute rails on every GPU node (pool.nics, issue 35): each rail's network has its master, every
# training pod asks for every rail, and a node with a rail down (its rail resource gone) runs none of them.
TAS_FLEET = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: tas-leaf
fleet:
  bare_metal: true
  fabric:
    kind: roce
    nodes_per_leaf: 4
    leaves_per_spine: 2
    rdma_network: {subnet: 172.20.0.0/16}
  pools:
    - name: g1
      nodes: 8
      gpu: {type: l4, count: 1}
      cpus: 16
      memory_gib: 64
      nics:
        - {device: mlx5_0, netdev: enp0s0np0, rate_gbps: 400, gpu: 0}
        - {device: mlx5_1, netdev: enp1s0np0, rate_gbps: 400, gpu: 0}
    - name: nv
      nodes: 8
      gpu: {type: gb200, count: 4}
      cpu: {sockets: 2, cores_per_socket: 8, threads_per_core: 1}
      memory_gib: 64
      nvlink_domain_nodes: 2
      nics:
        - {device: mlx5_0, netdev: enp0s0np0, rate_gbps: 400, gpu: 0}
        - {device: mlx5_1, netdev: enp1s0np0, rate_gbps: 400, gpu: 2}
tenants:
  - name: team
workloads:
  - {name: filler, plane: kubernetes, tenant: team, pool: g1, nodes: 2, gpus: 2, tightly_coupled: true, bare_metal: false}
  - {name: gang, plane: kubernetes, tenant: team, pool: g1, nodes: 4, gpus: 4, tightly_coupled: true, bare_metal: false}
  - {name: rack, plane: kubernetes, tenant: team, pool: nv, nodes: 2, gpus: 8, tightly_coupled: true, bare_metal: false}
"""
# GPU Feature Discovery's clique label on a tray: `<ClusterUUID>.<CliqueId>` (dra-driver-nvidia-gpu
# v0.4.1 docs/install.md); one clique per NVLink domain, as the fabric manager reports it
CLUSTER_UUID = "7e4a0c1e-1b4c-4a8e-9c8a-5d0e2f31a7b2"


def test_kueue_tas_puts_a_gang_under_one_leaf_and_an_nvlink_job_in_one_clique(tmp_path: Path, kube_factory) -> None:
    fleet = tmp_path / "tas-leaf.yaml"
    fleet.write_text(TAS_FLEET)
    out = plan(fleet, tmp_path / "bundle")
    starter = (out / "kubernetes" / "workloads" / "gang.yaml").read_text()
    assert "kueue.x-k8s.io/podset-preferred-topology: orchgen.io/leaf" in starter
    rack = list(yaml.safe_load_all((out / "kubernetes" / "workloads" / "rack.yaml").read_text()))
    domain, job = rack[0], rack[-1]
    assert (domain["kind"], domain["spec"]["numNodes"]) == ("ComputeDomain", 2)
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == "nvidia.com/gpu.clique"
    claim = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert template["spec"]["resourceClaims"] == [{"name": "imex-channel", "resourceClaimTemplateName": claim}]

    kube = kube_factory(dra=True)
    # the trays' clique labels (GFD's, from the fabric manager), and two trays taken: leaf003 keeps one
    # node of each of its cliques free, leaf004 two whole cliques; a job that only preferred a leaf would
    # fit leaf003 best (Kueue's BestFit), across two cliques
    applied = kb.apply_bundle(kube, fleet, out, with_workloads=False)
    (dra,) = [r for r in kb.releases(out) if r["chart"] == "dra-driver-nvidia-gpu"]
    if kb.chart_missing(dra):  # tests/kubeenv/bundle.NO_CHART: reported as left out, never passed
        assert any(d.startswith("release dra-driver-nvidia-gpu") for d in applied["dropped"])
    else:  # the real chart (ORCHGEN_CHARTS): its release went in with the bundle's values
        classes = {c["metadata"]["name"] for c in kube.get("deviceclasses")["items"]}
        assert classes == {"compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"}, classes
        plugin = kube.get("daemonset", f"{dra['name']}-kubelet-plugin", "-n", dra["namespace"])["spec"]["template"]
        assert [c["name"] for c in plugin["spec"]["containers"]] == ["compute-domains"]  # no GPU plugin
        env = {e["name"]: e.get("value") for e in plugin["spec"]["containers"][0]["env"]}
        assert env["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver", env
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.get("nodes")["items"]}
    nv = sorted(n for n, lab in nodes.items() if lab.get("orchgen.io/pool") == "nv")
    cliques: dict[str, list[str]] = {}
    for n in nv:
        clique = f"{CLUSTER_UUID}.{int(nodes[n]['orchgen.io/nvlink-domain'].removeprefix('nvl'))}"
        cliques.setdefault(clique, []).append(n)
        nodes[n]["nvidia.com/gpu.clique"] = clique
    for clique, members in cliques.items():
        kube.kubectl("label", "node", *members, f"nvidia.com/gpu.clique={clique}")
    assert {nodes[n]["orchgen.io/leaf"] for n in nv} == {"leaf003", "leaf004"} and len(cliques) == 4
    kube.kubectl("taint", "node", nv[0], nv[3], "orchgen.test/busy=:NoSchedule")
    # each rail's network, as the API server holds it (Multus' CRD, from the network-operator release): a
    # macvlan on its own port, never the management NIC
    nads = kube.get("network-attachment-definitions", "-n", "team")["items"]
    assert sorted((o["metadata"]["name"], json.loads(o["spec"]["config"])["master"]) for o in nads) == \
        [("rdma-rail-0", "enp0s0np0"), ("rdma-rail-1", "enp1s0np0")]
    # a rail down on nv[4]: the RDMA device plugin no longer offers that rail's resource there
    down = nv[4]
    kube.kubectl("patch", "node", down, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"capacity": {"rdma/rdma_rail_1": "0"}, "allocatable": {"rdma/rdma_rail_1": "0"}}}))

    # the API server takes the starter as written: the ComputeDomain against the GPU Operator's CRD, the
    # Job's pods with their claim (resource.k8s.io served; without it the fields would be dropped)
    kb.apply_workloads(kube, out)
    got = kube.get("job", job["metadata"]["name"], "-n", "team")["spec"]["template"]["spec"]
    assert got["resourceClaims"] == template["spec"]["resourceClaims"]
    assert got["containers"][0]["resources"]["claims"] == [{"name": "imex-channel"}]
    assert kube.get("computedomain", domain["metadata"]["name"], "-n", "team")["spec"]["numNodes"] == 2
    # ... and the claim template the driver's controller would create from it (as
    # templates/compute-domain-workload-claim-template.tmpl.yaml, in 1.33's resource.k8s.io/v1beta2)
    kube.apply([{"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": claim, "namespace": "team"},
                 "spec": {"spec": {"devices": {"requests": [{"name": "channel", "exactly": {
                     "deviceClassName": "compute-domain-default-channel.nvidia.com"}}]}}}}])

    # Kueue 0.19.2 reads claim templates only as resource.k8s.io/v1 (Kubernetes 1.34; this plane is
    # 1.33), so the placement is checked on the same Job without its claim
    placed_job = json.loads(json.dumps(job))
    placed_job["metadata"]["name"] = "rack-placed"
    spec = placed_job["spec"]["template"]["spec"]
    del spec["resourceClaims"]
    del spec["containers"][0]["resources"]["claims"]
    kube.apply([placed_job])

    def placed() -> dict[str, list[str]] | None:
        got: dict[str, list[str]] = {"filler": [], "gang": [], "rack-placed": []}
        for p in pods(kube, "-n", "team"):
            job_name = p["metadata"]["labels"].get("job-name")
            if job_name in got and p["status"].get("phase") == "Running":
                got[job_name].append(p["spec"]["nodeName"])
        return got if (len(got["filler"]), len(got["gang"]), len(got["rack-placed"])) == (2, 4, 2) else None

    got = kube.wait_for("the gangs and the NVLink job running", placed, timeout=180)
    for job_name, on in got.items():
        leaves = {nodes[n]["orchgen.io/leaf"] for n in on}
        assert len(leaves) == 1, f"{job_name} spans leaves {leaves}: {on}"
    cliques = {nodes[n]["nvidia.com/gpu.clique"] for n in got["rack-placed"]}
    assert len(cliques) == 1, f"the NVLink job spans cliques {cliques}: {got['rack-placed']}"
    # every training pod asks for every rail and attaches every rail's network; none runs on the node
    # with a rail down (its clique was the other one free)
    for p in pods(kube, "-n", "team"):
        if p["metadata"]["labels"].get("job-name") in got:
            assert p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "rdma-rail-0,rdma-rail-1"
            for c in p["spec"]["containers"]:
                assert {k: v for k, v in c["resources"]["limits"].items() if k.startswith("rdma/")} == \
                    {"rdma/rdma_rail_0": "1", "rdma/rdma_rail_1": "1"}, c["resources"]
    assert down not in got["rack-placed"] and nodes[down]["nvidia.com/gpu.clique"] not in cliques, got
    # the daemonsets' pods were there before the trays were taken
    kube.kubectl("taint", "node", nv[0], nv[3], "orchgen.test/busy:NoSchedule-")
    assert_placement(kube)


# GKE admits pods of the system-node-critical and system-cluster-critical priority classes only in
# a namespace with a ResourceQuota covering that scope (GKE docs, "Limit Priority Class consumption";
# Kubernetes' ResourceQuota admission `limitedResources`). Reproduced with the API server's own
# admission configuration.
GKE_ADMISSION = {
    "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
    "plugins": [{"name": "ResourceQuota", "configuration": {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
        "limitedResources": [{"resource": "pods", "matchScopes": [{
            "scopeName": "PriorityClass", "operator": "In",
            "values": ["system-node-critical", "system-cluster-critical"]}]}]}}]}


def _critical_pod(ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "critical", "namespace": ns},
            "spec": {"priorityClassName": "system-node-critical",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def _operator_refusals(cluster) -> list[str]:
    events = cluster.get("events", "-n", "gpu-operator")["items"]
    return [e["message"] for e in events if e.get("reason") == "FailedCreate" and "quota" in e["message"]]


@pytest.fixture
def gke(tmp_path: Path, kube_factory):
    cluster = kube_factory(admission_config=GKE_ADMISSION)
    # the limit is real here: a critical pod where no quota covers the scope is refused
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "probe"}}])
    r = cluster.apply([_critical_pod("probe")], check=False)
    assert r.returncode != 0 and "insufficient quota" in r.stderr, r.stderr
    example = REPO / "examples" / "gke-training.yaml"
    out = plan(example, tmp_path / "bundle")
    kb.apply_bundle(cluster, example, out)

    def operator_pods() -> list[dict[str, Any]]:
        return [p for p in pods(cluster, "-n", "gpu-operator")
                if p["spec"].get("priorityClassName") == "system-node-critical"]

    return cluster, operator_pods


def test_gke_quota_precedes_the_critical_pods(gke) -> None:
    """In the bundle's Helm/kubectl order the GPU Operator's system-node-critical pods exist in the
    end (the quota of prerequisites/gpu-operator.yaml covers them), and none was ever refused: the
    README applies kubernetes/prerequisites/ before the GPU Operator's release (issue 20)."""
    cluster, operator_pods = gke
    assert cluster.wait_for("the GPU Operator's critical pods", operator_pods, timeout=240, every=2)
    assert _operator_refusals(cluster) == []


# ---- re-plans applied for real: updates, creates, and deletes of what the new bundle dropped ----
# (what `pulumi up`, an Argo CD sync and a Flux reconcile do with kubernetes/manifests/; see
# tests/test_replan.py). Kueue runs, so its finalizers on flavors, queues and topologies are real.
REAL_REPLANS = ("grpo-rl+kueue:8-to-16-nodes", "baremetal-k8s-training+kueue:scale-out",
                "baremetal-k8s-training+kueue:new-tenant", "baremetal-k8s-training+kueue:removed-tenant",
                "research-lab+kueue:hybrid-turn", "cloud-training+kueue:new-tenant")


def _replan_cases() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    from tests.test_replan import REPLANS

    by_id = {r[0]: r for r in REPLANS}
    return [by_id[i] for i in REAL_REPLANS if i in by_id]


def _identity(o: dict[str, Any]) -> tuple[str, str, str, str]:
    md = o["metadata"]
    return (o["apiVersion"].rpartition("/")[0], o["kind"], md.get("namespace", ""), md["name"])


def _kubectl_name(o: dict[str, Any]) -> list[str]:
    group = o["apiVersion"].rpartition("/")[0]
    args = [f"{o['kind']}.{group}" if group else o["kind"], o["metadata"]["name"]]
    return args + (["-n", o["metadata"]["namespace"]] if o["metadata"].get("namespace") else [])


@pytest.mark.parametrize(("rid", "before", "after"), _replan_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_replan_applies_as_updates_and_deletes(rid, before, after, tmp_path: Path, kube) -> None:
    assert len(_replan_cases()) == len(REAL_REPLANS), "a re-plan scenario of tests/test_replan.py is gone"
    bundles = []
    for tag, data in (("before", before), ("after", after)):
        f = tmp_path / f"{tag}.yaml"
        f.write_text(yaml.safe_dump(data))
        bundles.append((f, plan(f, tmp_path / tag)))
    (f0, old), (f1, new) = bundles
    kb.apply_bundle(kube, f0, old, with_workloads=False)
    drain = rid in DRAIN_REPLANS and _admit_before_drain(kube, f0, old, new)
    old_objs, new_objs = kb.manifests(kube, old), kb.manifests(kube, new)
    # nodes the scale-out adds join first, as the provisioner brings them
    have = {n["metadata"]["name"] for n in kube.get("nodes")["items"]}
    plan_new = json.loads((new / "plan.json").read_text())
    more = [n for n in kb.fleet_nodes(f1, new, tuple(plan_new["planes"])) if n["name"] not in have]
    if more:
        kube.add_nodes(more)
    if (new / "kubernetes" / "node-labels.sh").is_file():
        kb.run_node_labels(kube, new)
    r = kube.apply(new_objs, check=False)  # updates and creates: refused if a frozen field changed
    assert r.returncode == 0, f"{rid}: the API server refused the re-plan:\n{r.stderr[-3000:]}"
    gone = {_identity(o): o for o in old_objs}.keys() - {_identity(o) for o in new_objs}
    for ident in sorted(gone):
        o = {_identity(o): o for o in old_objs}[ident]
        if o["kind"] == "Namespace":  # tenant namespaces are never pruned (README: Prune=false)
            continue
        kube.kubectl("delete", *_kubectl_name(o), "--wait=true", "--timeout=120s", timeout=150)
    for o in new_objs:  # everything the new bundle has is there, as the new bundle says
        got = kube.read(o)
        assert got["metadata"]["name"] == o["metadata"]["name"]
        for field in FROZEN.get(o["kind"], ()):
            assert got["spec"].get(field) == o["spec"].get(field), (rid, o["kind"], field)
    if drain:
        _drain_as_plan_diff_says(kube, drain, f1, old, new)


# Issue 34 (re-plans keep accounting): a re-plan that renames a ResourceFlavor, under a workload Kueue
# admitted on it. `plan --diff` calls it a drain (tests/test_replan_impact.py); here the real Kueue shows
# why and that the drain it asks for works: after the re-plan the old flavor is pruned under the running
# workload, which stays admitted on it and drops out of its ClusterQueue's usage; deleted and re-created,
# it is admitted on the new flavor and counted again.
DRAIN_REPLANS = ("research-lab+kueue:hybrid-turn",)


def _gpu_usage(kube, cq: str) -> int:
    st = kube.get("clusterqueues.kueue.x-k8s.io", cq).get("status") or {}
    return sum(int(r.get("total", 0)) for f in st.get("flavorsUsage") or [] for r in f.get("resources") or []
               if r["name"] == "nvidia.com/gpu")


def _admitted_workload(kube, ns: str, job: str) -> dict[str, Any] | None:
    for w in kube.get("workloads.kueue.x-k8s.io", "-n", ns)["items"]:
        if any(r["name"] == job for r in w["metadata"].get("ownerReferences", [])) and \
                (w.get("status") or {}).get("admission") and not w["metadata"].get("deletionTimestamp"):
            return w
    return None


def _admit_before_drain(kube, workload: Path, bundle: Path, new: Path) -> dict[str, Any]:
    """A tenant's plain Job on the first GPU pool that stays on the plane (its flavor renamed: the hybrid
    turn adds orchgen.io/plane to the flavors' nodeLabels), admitted and running before the re-plan."""
    p = json.loads((bundle / "plan.json").read_text())
    tenant = sorted(t["name"] for t in p["tenants"])[0]
    jobs, units = admission.plain_jobs(workload, bundle, tenant)
    job, unit = next((j, u) for j, u in zip(jobs, units)
                     if admission.pool_resource(workload, u.pool) and u.pool in admission.kueue_flavors(new))
    kube.apply([job])
    admission.wait_admitted_and_placed(kube, [unit], workload)
    w = _admitted_workload(kube, tenant, job["metadata"]["name"])
    adm = w["status"]["admission"]
    flavor = adm["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"]
    assert _gpu_usage(kube, adm["clusterQueue"]) == 1
    return {"tenant": tenant, "job": job, "unit": unit, "flavor": flavor, "cq": adm["clusterQueue"]}


def _drain_as_plan_diff_says(kube, before: dict[str, Any], f1: Path, old: Path, new: Path) -> None:
    tenant, job, flavor, cq = before["tenant"], before["job"], before["flavor"], before["cq"]
    name = job["metadata"]["name"]
    # what `plan --diff` of this re-plan says of the flavor the job runs on
    r = subprocess.run([*orchgen_argv(), "plan", str(f1), "-o", str(old), "--diff", "--format", "json"],
                       capture_output=True, text=True, cwd=REPO)
    drains = {c["object"] for c in json.loads(r.stdout)["kubernetes"] if c["action"] == "drain"}
    assert f"ResourceFlavor {flavor}" in drains, (flavor, drains, r.stderr[-2000:])
    # the real Kueue: the flavor is gone, the job still runs admitted on it, and its ClusterQueue counts nothing
    assert kube.kubectl("get", "resourceflavors.kueue.x-k8s.io", flavor, check=False).returncode != 0
    w = _admitted_workload(kube, tenant, name)
    assert w and w["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == flavor, w
    assert [q for q in pods(kube, "-n", tenant, "-l", f"job-name={name}") if q["status"].get("phase") == "Running"]
    kube.wait_for("the ClusterQueue's usage without the job", lambda: _gpu_usage(kube, cq) == 0, timeout=60)
    # the drain: the job deleted and created again, admitted on the new flavor and counted
    kube.kubectl("delete", "job", name, "-n", tenant, "--wait=true", "--cascade=foreground", timeout=120)
    jobs, units = admission.plain_jobs(f1, new, tenant)
    again, unit = next((j, u) for j, u in zip(jobs, units) if u.pool == before["unit"].pool)
    kube.apply([again])
    admission.wait_admitted_and_placed(kube, [unit], f1)
    w = _admitted_workload(kube, tenant, name)
    assert w["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] != flavor
    kube.wait_for("the ClusterQueue's usage with the job", lambda: _gpu_usage(kube, cq) == 1, timeout=60)


# the fields the API server freezes (tests/test_replan.py IMMUTABLE): after the re-plan they are the new bundle's
FROZEN = {"Topology": ("levels",), "ResourceFlavor": ("nodeLabels", "topologyName"), "LocalQueue": ("clusterQueue",)}


# Tenancy, asked of the real API server's RBAC authorizer (SubjectAccessReview through `kubectl auth
# can-i --as-group`): each tenant's group works in its own namespace only, and never on quotas,
# queues, access or priorities.
TENANT_GROUPS_EXAMPLE = "baremetal-k8s-training"


def can_i(cluster, group: str, verb: str, resource: str, ns: str | None = None) -> bool:
    args = ["auth", "can-i", verb, resource, "--as=someone", f"--as-group={group}"]
    args += ["-n", ns] if ns else []
    r = cluster.kubectl(*args, check=False)
    assert r.stdout.strip() in ("yes", "no"), (r.stdout, r.stderr)
    return r.stdout.strip() == "yes"


def assert_tenant_groups_reach_only_their_namespace(kube, example: Path) -> int:
    """On the cluster test_example_applies applied the Kueue example with two tenant groups to
    (baremetal-k8s-training). Returns the rights asked."""
    groups = {t["name"]: t["kubernetes_group"] for t in yaml.safe_load(example.read_text())["tenants"]}
    asked = 0
    assert len(groups) == 2
    for tenant, group in groups.items():
        other = next(t for t in groups if t != tenant)
        for resource in ("jobs.batch", "pods", "deployments.apps", "services"):
            assert can_i(kube, group, "create", resource, tenant), (group, resource, tenant)
            assert not can_i(kube, group, "create", resource, other), (group, resource, other)
        assert can_i(kube, group, "get", "localqueues.kueue.x-k8s.io", tenant)
        for verb, resource, ns in (("update", "resourcequotas", tenant), ("create", "localqueues.kueue.x-k8s.io", tenant),
                                   ("update", "clusterqueues.kueue.x-k8s.io", None),
                                   ("create", "rolebindings.rbac.authorization.k8s.io", tenant),
                                   ("patch", "namespaces", None), ("create", "priorityclasses.scheduling.k8s.io", None),
                                   ("list", "secrets", other), ("create", "pods", "kube-system")):
            assert not can_i(kube, group, verb, resource, ns), (group, verb, resource, ns)
        asked += 17
    return asked
