"""A plane bigger than one cluster is several clusters behind one queue, shown live (issue 20).

Two real control planes (tests/kubeenv: etcd, kube-apiserver, controller manager, scheduler, KWOK
and Kueue 0.19.2's controller manager, each with its bundle's own Kueue Configuration): cluster A
runs the bundle's `clusters/manager/`, cluster B its `clusters/worker-01/` with KWOK playing that
worker's nodes. The manager gets B's kubeconfig Secret exactly as the bundle README says: B's
bundle makes a ServiceAccount with only the rights of Kueue's setup script and its token Secret, and
the README's connect-worker.sh line stores that token as the manager's kubeconfig Secret. A
gang submitted to the manager's LocalQueue is reserved by the manager's Kueue, dispatched by its
MultiKueue admission check to B, admitted there by B's ClusterQueue and run on B's nodes; nothing of
it runs on A. A gang bigger than the worker's whole capacity is not split: it never runs anywhere.

The fleet is small (8 nodes) and cut into two workers of 4 by options.kubernetes_cluster_max_nodes,
the site's own per-cluster cap (the same cut as a plane past 5,000 nodes, at a size KWOK plays in
seconds). worker-02 is planned but not booted: its MultiKueueCluster stays inactive (no Secret), as
on a site where one worker is down, and MultiKueue dispatches only to the active one.
"""
from __future__ import annotations

import base64
import json
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.spec import hostlist
from tests.kubeenv import bundle as kb
from tests.kubeenv.fixture import kube_factory  # noqa: F401
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent

FLEET = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: mk-small
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 4, leaves_per_spine: 1}
  pools:
    - name: h100
      nodes: 8
      hostnames: gpu[01-08]
      gpu: {type: h100, count: 8}
      cpus: 32
      memory_gib: 256
tenants:
  - {name: alpha, share: 1, kubernetes_group: "oidc:alpha"}
  - {name: beta, share: 1, kubernetes_group: "oidc:beta"}
workloads:
  - name: train
    nodes: 2
    tightly_coupled: true
    bare_metal: false
    multi_tenant: true
    tenant: alpha
    jobs_at_once: 2
options:
  gang_scheduler: kueue
  kubernetes_cluster_max_nodes: 4   # two workers of 4 nodes (one spine each)
  metrics: site                     # the workers' kube-prometheus-stack is not what this test is about
  prometheus_url: http://prometheus.monitoring.svc:9090
  gpu_health: site
"""
JOB_LABEL = "batch.kubernetes.io/job-name"


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def is_true(obj: dict[str, Any], kind: str) -> bool:
    c = condition(obj, kind)
    return bool(c and c["status"] == "True")


def workload_of(cluster, ns: str, job: str) -> dict[str, Any] | None:
    """The Workload Kueue made for a Job (owner reference to it)."""
    for w in cluster.get("workloads.kueue.x-k8s.io", "-n", ns)["items"]:
        if any(o["kind"] == "Job" and o["name"] == job for o in w["metadata"].get("ownerReferences", [])):
            return w
    return None


def job_pods(cluster, ns: str, job: str) -> list[dict[str, Any]]:
    return cluster.get("pods", "-n", ns, "-l", f"{JOB_LABEL}={job}")["items"]


def small_fleet(**options: Any) -> Any:
    from generator.spec.models import Fleet

    doc = yaml.safe_load(FLEET)
    doc["options"].update(options)
    return Fleet.model_validate(doc)


# ---- the site's cap: the cut at its size, without a cluster ------------------------------------


def test_a_site_cap_cuts_the_plane_like_the_envelope_and_quotas_add_up():
    from generator.decide import make_plan

    plan = make_plan(small_fleet(), "fleet.yaml")
    manager, *workers = plan.clusters
    assert manager.role == "manager" and [w.name for w in workers] == ["worker-01", "worker-02"]
    assert [w.units for w in workers] == [("spine01",), ("spine02",)]  # whole spines, fabric order
    assert all(w.node_count == 4 for w in workers)
    for t in plan.tenants:
        for r in ("gpus", "cpus", "memory_gib"):
            assert sum(getattr(w.quotas[t.name]["h100"], r) for w in workers) == getattr(t.quotas["h100"], r)
    assert any("options.kubernetes_cluster_max_nodes, the site's cap of 4 nodes" in r for r in plan.reasons)
    # upstream's 5,000 (the default) keeps these 8 nodes one cluster, as before
    assert not make_plan(small_fleet(kubernetes_cluster_max_nodes=5_000), "fleet.yaml").clusters
    assert not make_plan(small_fleet(kubernetes_clusters="one"), "fleet.yaml").clusters


def test_a_site_cap_with_nothing_to_dispatch_stays_one_cluster_and_warns():
    from generator.decide import make_plan

    from generator.spec.models import Fleet

    doc = yaml.safe_load(FLEET)
    doc["workloads"] = [{"name": "chat", "long_lived_services": True, "bare_metal": False, "gpus": 8,
                         "tenant": "alpha"}]
    doc["options"] = {"kubernetes_cluster_max_nodes": 4}
    plan = make_plan(Fleet.model_validate(doc), "fleet.yaml")
    assert not plan.clusters
    (w,) = [w for w in plan.warnings if w.field == "options.kubernetes_cluster_max_nodes"]
    assert "more than options.kubernetes_cluster_max_nodes (4)" in w.message and "one cluster" in w.message


@pytest.mark.parametrize("value,why", [(0, "greater than or equal to 1"), (5_001, "less than or equal to 5000"),
                                       ("x", "valid integer")])
def test_a_bad_cap_is_refused_with_one_line(value, why, tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET.replace("kubernetes_cluster_max_nodes: 4", f"kubernetes_cluster_max_nodes: {value}"))
    out = tmp_path / "out"
    r = subprocess.run([*orchgen_argv(), "plan", str(path), "-o", str(out)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert f"{path}:" in line and "options.kubernetes_cluster_max_nodes:" in line and why in line, line
    assert not out.exists()


def test_a_leaf_bigger_than_the_cap_is_refused(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET.replace("kubernetes_cluster_max_nodes: 4", "kubernetes_cluster_max_nodes: 3"))
    r = subprocess.run([*orchgen_argv(), "plan", str(path), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "fleet.fabric:" in r.stderr and "(3)" in r.stderr, r.stderr


# ---- live: a manager and a worker ----------------------------------------------------------------


# The rights of Kueue's setup task's create-multikueue-kubeconfig.sh (kueue.sigs.k8s.io/docs/tasks/
# manage/setup_multikueue) for the one integration the manager enables (batch/job, render/clusters
# MANAGER_FRAMEWORKS), (API group, resource) -> verbs: what the worker's 19-multikueue-access.yaml must
# grant, no more.
MULTIKUEUE_RIGHTS = {
    ("batch", "jobs"): ["create", "delete", "get", "list", "watch"],
    ("batch", "jobs/status"): ["get"],
    ("kueue.x-k8s.io", "workloads"): ["create", "delete", "get", "list", "watch"],
    ("kueue.x-k8s.io", "workloads/status"): ["get", "patch", "update"],
}


def two_contexts(path: Path, manager, worker) -> dict[str, str]:
    """One kubeconfig with a context per cluster, as a site's kubectl reaches both (the README's
    <manager> and <worker-01>), for connect-worker.sh."""
    docs = {name: yaml.safe_load(Path(c.kubeconfig).read_text()) for name, c in (("manager", manager),
                                                                                  ("worker-01", worker))}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "manager",
        "clusters": [{"name": n, "cluster": d["clusters"][0]["cluster"]} for n, d in docs.items()],
        "users": [{"name": n, "user": d["users"][0]["user"]} for n, d in docs.items()],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in docs]}))
    return {**manager.env(), "KUBECONFIG": str(path)}


def apply_tree(cluster, root: Path) -> None:
    """A cluster's kubernetes/ as the README's Helm/kubectl path applies it: the releases in order
    (Kueue's controller starts with its release), then the manifests. The worker's
    operator-resources/ (nv-ipam's IPPool, after the operator's runtime CRD) are left out: nothing
    here runs the Network Operator, and MultiKueue does not touch them (tests/test_kube_real.py
    applies them for a single cluster)."""
    for rel in kb.releases(root):
        kb.apply_release(cluster, rel, root, "1.33")
    cluster.apply(kb.manifests(cluster, root))


def test_the_manager_dispatches_a_gang_to_a_live_worker(tmp_path: Path, kube_factory) -> None:
    started = time.monotonic()
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    out = tmp_path / "bundle"
    r = subprocess.run([*orchgen_argv(), "plan", str(fleet), "-o", str(out), "-q"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    plan = json.loads((out / "plan.json").read_text())
    clusters = {c["name"]: c for c in plan["clusters"]}
    assert list(clusters) == ["manager", "worker-01", "worker-02"]
    w1_nodes = set(hostlist.expand(clusters["worker-01"]["pools"]["h100"]["nodes"]))
    assert w1_nodes == {"gpu01", "gpu02", "gpu03", "gpu04"}

    a = kube_factory()  # the manager: no GPU nodes
    b = kube_factory()  # worker-01
    # B: the worker's nodes join, node-labels.sh, its releases and manifests (README checklist per cluster)
    b_root = out / "clusters" / "worker-01"
    b.add_nodes([n for n in kb.fleet_nodes(fleet, out) if n["name"] in w1_nodes])
    kb.run_node_labels(b, b_root)
    apply_tree(b, b_root)
    # A: the manager's kueue release (with multiKueue:) and manifests
    a_root = out / "clusters" / "manager"
    apply_tree(a, a_root)

    # the worker's identity for the manager is the bundle's (19-multikueue-access.yaml, applied with B's
    # manifests): exactly the setup script's rights, so it may not, e.g., make pods on the worker
    access = yaml.safe_load_all((b_root / "kubernetes" / "manifests" / "19-multikueue-access.yaml").read_text())
    (role,) = [o for o in access if o["kind"] == "ClusterRole"]
    assert {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]} == MULTIKUEUE_RIGHTS
    who = "--as=system:serviceaccount:kueue-system:multikueue"
    for verb, what in (("create", "jobs.batch"), ("create", "workloads.kueue.x-k8s.io")):
        assert b.kubectl("auth", "can-i", verb, what, "-n", "alpha", who, check=False).stdout.strip() == "yes"
    for verb, what in (("create", "pods"), ("get", "secrets"), ("create", "clusterqueues.kueue.x-k8s.io")):
        assert b.kubectl("auth", "can-i", verb, what, "-n", "alpha", who, check=False).stdout.strip() == "no"
    # the manager's Secret for it, with the README's own line (its contexts are A's and B's here)
    readme = (out / "README.md").read_text()
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("clusters/manager/kubernetes/connect-worker.sh worker-01 ")]
    argv = shlex.split(line.replace("<manager>", "manager").replace("<worker-01>", "worker-01"))
    env = two_contexts(tmp_path / "site.kubeconfig", a, b)
    done = subprocess.run(["sh", *argv], cwd=out, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    secret = a.get("secret", "worker-01-kubeconfig", "-n", "kueue-system")
    assert "kubectl.kubernetes.io/last-applied-configuration" not in secret["metadata"].get("annotations", {})
    assert yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))["users"][0]["name"] == "multikueue"
    again = subprocess.run(["sh", *argv], cwd=out, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr  # safe to run again

    def active() -> dict[str, Any] | None:
        mkc = {o["metadata"]["name"]: o for o in a.get("multikueueclusters.kueue.x-k8s.io")["items"]}
        checks = a.get("admissionchecks.kueue.x-k8s.io")["items"]
        ok = "worker-01" in mkc and is_true(mkc["worker-01"], "Active") and checks and is_true(checks[0], "Active")
        return mkc if ok else None

    mkc = a.wait_for("worker-01 connected", active, timeout=90)
    assert not is_true(mkc["worker-02"], "Active")  # planned, not booted: no Secret

    # a gang: the bundle's own starter, submitted to the manager (its namespace's LocalQueue `default`)
    starters = kb.workloads(a_root)
    job = next(o for o in starters if o["kind"] == "Job" and o["metadata"]["name"] == "train")
    ns, name, width = job["metadata"]["namespace"], job["metadata"]["name"], job["spec"]["parallelism"]
    assert width == 2
    a.apply(starters)

    def dispatched() -> tuple | None:
        w = workload_of(a, ns, name)
        if not w or not is_true(w, "Admitted"):
            return None
        pods = [p for p in job_pods(b, ns, name) if p["status"].get("phase") == "Running"]
        return (w, pods) if len(pods) == width else None

    wl, b_pods = a.wait_for("the gang dispatched and Running on worker-01", dispatched, timeout=120)
    # the manager reserved quota in its own ClusterQueue and records where the job went
    assert is_true(wl, "QuotaReserved")
    assert wl["status"]["admission"]["clusterQueue"] == "alpha"
    assert wl["status"].get("clusterName") == "worker-01", wl["status"]
    (check,) = wl["status"]["admissionChecks"]
    assert check["name"] == "multikueue" and check["state"] == "Ready", check
    # B: its copy of the Job, admitted by B's own ClusterQueue of the same name, pods on B's nodes
    remote = b.get("job", name, "-n", ns)
    rwl = workload_of(b, ns, name)
    assert rwl and is_true(rwl, "Admitted") and rwl["status"]["admission"]["clusterQueue"] == "alpha"
    assert {p["spec"]["nodeName"] for p in b_pods} <= w1_nodes
    assert not remote["spec"].get("suspend")
    # A: the Job is MultiKueue's (spec.managedBy, which Kueue's Job webhook sets for a queue with a
    # MultiKueue check: jobframework ApplyDefaultForManagedBy), so A's Job controller makes no pod; MultiKueue copies the worker's Job status
    # to it (KEP-693, "Workload Controller": "to keep the impression that the job is running in the
    # management cluster")
    local = a.get("job", name, "-n", ns)
    assert local["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue", local["spec"]
    a.wait_for("the manager's Job mirrors the worker's status",
               lambda: a.get("job", name, "-n", ns)["status"].get("active") == width, timeout=30)
    assert job_pods(a, ns, name) == []
    # the manager has no nodes: nothing runs there (the kueue release's own Deployment pod stays unbound)
    assert a.get("nodes")["items"] == []
    assert not [p["metadata"]["name"] for p in a.get("pods", "-A")["items"] if p["spec"].get("nodeName")]

    # a gang bigger than worker-01's whole capacity (4 nodes x 8 GPUs) but within the manager's
    # quota (both workers' capacity, borrowed in its cohort). What upstream guarantees (KEP-693,
    # keps/693-multikueue, "Workload Controller"): MultiKueue first creates only the Workload in the
    # workers, and "only after the workload is admitted [in one] and other clusters are cleaned-up
    # the real job will be created"; a Workload is admitted whole or not at all. So the manager
    # reserves its quota and waits (check Pending), the worker's copy stays pending for quota, no
    # Job is created on the worker and no pod runs anywhere: it is never split.
    big = json.loads(json.dumps(job))
    big["metadata"]["name"] = "too-big"
    big["spec"]["parallelism"] = big["spec"]["completions"] = 5
    big["spec"]["template"]["metadata"]["labels"] = {"orchgen.io/workload": "too-big"}
    a.apply([big])

    bw = a.wait_for("the big gang's Workload on the manager", lambda: workload_of(a, ns, "too-big"), timeout=30)

    def refused_on_worker() -> dict[str, Any] | None:
        # MultiKueue's copy in the worker has the manager's Workload's name (no Job owns it there yet)
        found = [w for w in b.get("workloads.kueue.x-k8s.io", "-n", ns)["items"]
                 if w["metadata"]["name"] == bw["metadata"]["name"]]
        qr = found and condition(found[0], "QuotaReserved")
        return found[0] if qr and qr["status"] == "False" and "insufficient quota" in qr.get("message", "") else None

    rw = b.wait_for("the big gang's Workload pending on worker-01", refused_on_worker, timeout=90)
    bw = workload_of(a, ns, "too-big")
    assert bw and is_true(bw, "QuotaReserved") and not is_true(bw, "Admitted"), bw.get("status")
    assert not bw["status"].get("clusterName")
    assert {c["state"] for c in bw["status"]["admissionChecks"]} == {"Pending"}
    assert not is_true(rw, "Admitted")
    # no Job copy on the worker (MultiKueue creates it only in a worker that reserved quota), no pod anywhere
    assert not [j for j in b.get("jobs", "-n", ns)["items"] if j["metadata"]["name"] == "too-big"]
    assert job_pods(a, ns, "too-big") == [] and job_pods(b, ns, "too-big") == []
    assert a.get("job", "too-big", "-n", ns)["spec"].get("suspend") is True
    # the first gang is untouched
    assert len([p for p in job_pods(b, ns, name) if p["status"].get("phase") == "Running"]) == width
    print(f"multikueue dispatch test: {time.monotonic() - started:.0f} s")
    # both control planes at once (each waits on its processes' shutdown); the fixture's stop is then a no-op
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda c: c.stop(), (a, b)))
