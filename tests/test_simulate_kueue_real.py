"""simulate's Kueue model held to the real Kueue (tests/kubeenv: Kueue v0.19.2's controller manager,
the real API server and scheduler, KWOK nodes) on the bundle's own ClusterQueues (issue 24).

Two tenants, pools p1 and p2 of two 4-GPU nodes each, quotas 4 + 4 GPUs per pool (Kueue's flavors:
per pool). Tenant b's 2-pod training job fills p1 (4 GPUs of it borrowed from a's p1 quota through
the cohort); then a 1-pod job of tenant a with the services' PriorityClass (a service's replica
scaling up) asks for 4 GPUs of p1. The bundle's ClusterQueues say reclaimWithinCohort: Any, so the
real Kueue evicts b's job (Workload condition Evicted, reason Preempted) and admits a's; simulate,
given the same two jobs on the same plan, must preempt the same job once and start a's job at once.
What is compared is the outcome Kueue guarantees (who is admitted, who is preempted), not timing.
Volcano and KAI do not run here (tests/kubeenv builds Kueue only); their policies are checked on
the bundle's objects in tests/test_simulate_gang.py.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from generator.decide import make_plan
from generator.simulate import cluster
from generator.simulate.engine import Replay
from generator.simulate.jobs import Job
from generator.simulate.kube import GangScheduler
from generator.spec import load
from tests.kubeenv import bundle as kb
from tests.kubeenv.fixture import kube, kube_factory  # noqa: F401
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent

FLEET = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: reclaim
fleet:
  fabric: {kind: ethernet, nodes_per_leaf: 8}
  pools:
    - {name: p1, nodes: 2, gpu: {type: l4, count: 4}, cpus: 16, memory_gib: 64}
    - {name: p2, nodes: 2, gpu: {type: l4, count: 4}, cpus: 16, memory_gib: 64}
tenants:
  - {name: a, share: 1}
  - {name: b, share: 1}
workloads:
  - {name: train, plane: kubernetes, tenant: b, pool: p1, nodes: 2, tightly_coupled: true}
  - {name: burst, plane: kubernetes, tenant: a, pool: p1, nodes: 1}
"""


def simulated(fleet: Path) -> tuple[Job, Job]:
    plan = make_plan(load(fleet), fleet.name)
    assert plan.gang_scheduler == "kueue"
    train = Job(1, "train", "b", "kubernetes", "p1", 0.0, 2, 4, 1000.0, 1000.0, True, priority=50)
    burst = Job(2, "burst", "a", "kubernetes", "p1", 100.0, 1, 4, 500.0, 500.0, False, service=True, priority=1000)
    r = Replay(cluster.of_plane(plan, "kubernetes"), [train, burst])
    GangScheduler(r, plan)
    r.run()
    return train, burst


def workload_of(cluster, ns: str, job: str) -> dict:
    for w in cluster.get("workloads.kueue.x-k8s.io", "-n", ns)["items"]:
        if w["metadata"]["ownerReferences"][0]["name"] == job:
            return w
    return {}


def condition(w: dict, kind: str) -> dict:
    return next((c for c in w.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def running(cluster, ns: str, job: str) -> int:
    return sum(1 for p in cluster.get("pods", "-n", ns)["items"]
               if p["metadata"].get("labels", {}).get("job-name") == job and p["status"].get("phase") == "Running")


def test_kueue_reclaims_borrowed_gpus_for_a_service_as_simulate_does(tmp_path: Path, kube) -> None:
    fleet = tmp_path / "reclaim.yaml"
    fleet.write_text(FLEET)
    out = tmp_path / "bundle"
    r = subprocess.run([*orchgen_argv(), "plan", str(fleet), "-o", str(out)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr

    train, burst = simulated(fleet)
    assert (train.preemptions, burst.start) == (1, 100.0)  # the model: b's job preempted, a's at once

    kb.apply_bundle(kube, fleet, out, with_workloads=False)
    starters = {o["metadata"]["name"]: o for o in kb.workloads(out) if o["kind"] == "Job"}
    kube.apply([o for o in kb.workloads(out) if o["metadata"]["name"] == "train"])
    kube.wait_for("b's training job admitted, borrowing, and both pods running",
                  lambda: running(kube, "b", "train") == 2, timeout=90)
    w = workload_of(kube, "b", "train")
    assert condition(w, "Admitted").get("status") == "True"

    # a's replica: the bundle's starter with the services' PriorityClass (the class a service's pods name)
    job = starters["burst"]
    job["spec"]["template"]["spec"]["priorityClassName"] = "reclaim-services"
    kube.apply([job])
    kube.wait_for("a's job admitted and running", lambda: running(kube, "a", "burst") == 1, timeout=90)
    evicted = condition(workload_of(kube, "b", "train"), "Evicted")
    assert evicted.get("status") == "True" and evicted.get("reason") == "Preempted", evicted
    assert running(kube, "b", "train") == 0
    # and b's job waits whole for p1 (requeued, as simulate requeues it), nothing of it runs
    assert condition(workload_of(kube, "b", "train"), "Admitted").get("status") != "True"
