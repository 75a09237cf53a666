"""The gang invariant for multi-node serving on the real control plane (issue 21): every replica of
a multi-node model is admitted whole; and the serving cluster beside MultiKueue workers (issue 34)
admits and places its services with its own Kueue.

serving-platform's llama-405b (a LeaderWorkerSet, one leader and one worker per replica, two 8-GPU
nodes each) with two replicas, in a plane past the site's per-cluster cap
(options.kubernetes_cluster_max_nodes) beside a batch job: the plan cuts it into a MultiKueue manager,
one worker and a serving cluster (generator/decide/clusters.py `_serving`), whose `clusters/serving/`
is what this test applies, as the bundle README's per-cluster checklist says. That folder is a whole
single-cluster bundle (its own standalone Kueue, the LWS release, the service's starter), rendered
by the same code as a one-cluster plane's, so the gang check below is the one a single cluster gets.
The serving cluster holds one leaf of 3 KWOK nodes, room for one whole replica and a half: the real
API server, kube-scheduler, Kueue 0.19.2's controller with the serving cluster's configuration (its
LWS integration, no multiKueue) and LeaderWorkerSet's own controller (tests/kubeenv/lws/build.sh),
every release applied from the folder as its README says (tests/kubeenv/bundle.py). The default
scheduler alone would bind the second replica's leader on the free node and leave its worker
Pending; Kueue admits one group's Workload and holds the other's pods behind its scheduling gate,
none bound. A tenant's plain Job aimed at the serving cluster's pool is then admitted and placed on
the node left free (tests/kubeenv/admission.py). The manager and the worker are not booted here
(tests/test_multikueue_dispatch_real.py boots that pair): the manager's MultiKueueConfig is checked
to list the worker only, so nothing is ever dispatched to the serving cluster.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from generator.spec import hostlist
from tests.kubeenv import admission, bundle as kb
from tests.kubeenv.fixture import kube_factory  # noqa: F401
from tests.test_kube_real import assert_placement, plan

REPO = Path(__file__).resolve().parent.parent
NAME = "llama-405b"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


def fleet(tmp_path: Path) -> Path:
    """serving-platform with only its multi-node model, two replicas, and a 2-node training job, on 6
    of its 8-GPU nodes in leaves of 3, with a site cap of 3 nodes per cluster: a worker of one leaf,
    and a serving cluster of the other, where one replica (2 nodes) fits and the second does not (it
    would need 4; the tenant's quota there is the cluster's 24 GPUs). The site's Prometheus, so that
    no kube-prometheus-stack is applied (KEDA's trigger needs only its address)."""
    doc = yaml.safe_load((REPO / "examples" / "serving-platform.yaml").read_text())
    doc["metadata"]["name"] = "lws-gang"
    doc["fleet"]["fabric"]["nodes_per_leaf"] = 3
    doc["fleet"]["pools"] = [dict(next(p for p in doc["fleet"]["pools"] if p["name"] == "h100"), nodes=6)]
    doc["tenants"] = [t for t in doc["tenants"] if t["name"] == "chat"]
    w = next(w for w in doc["workloads"] if w["name"] == NAME)
    w["gpus"] = 16
    # the issue 34 form: a tightly coupled service of 2 nodes, no serving.nodes_per_replica. The plan's
    # "gang REQUIRED" becomes one LeaderWorkerSet replica over both nodes (decide/serving.py _nodes),
    # its templates asking Kueue's TAS for one leaf switch as a training gang does
    del w["serving"]["nodes_per_replica"]
    w.update(nodes=2, tightly_coupled=True)
    w["serving"].update(min_replicas=2, max_replicas=2)
    # a batch job beside it, which MultiKueue dispatches to the worker (a plane of services only stays
    # one cluster: nothing to dispatch)
    doc["workloads"] = [w, {"name": "train", "plane": "kubernetes", "tenant": "chat", "nodes": 2,
                            "tightly_coupled": True}]
    doc["options"] = {"gang_scheduler": "kueue", "metrics": "site", "kubernetes_cluster_max_nodes": 3,
                      "prometheus_url": "http://prometheus.monitoring.svc:9090"}
    path = tmp_path / "lws-gang.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def groups(kube) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in kube.get("pods", "-n", "chat", "-l", f"{LWS_NAME_LABEL}={NAME}")["items"]:
        out[p["metadata"]["labels"].get(GROUP_LABEL, "?")].append(p)
    return dict(out)


def running(pods: list[dict[str, Any]]) -> int:
    return sum(1 for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName"))


def bound(pods: list[dict[str, Any]]) -> int:
    return sum(1 for p in pods if p["spec"].get("nodeName"))


def test_each_lws_replica_is_admitted_whole(tmp_path: Path, kube_factory) -> None:
    kube = kube_factory(lws=True)
    workload = fleet(tmp_path)
    out = plan(workload, tmp_path / "bundle")
    clusters = {c["name"]: c for c in json.loads((out / "plan.json").read_text())["clusters"]}
    assert {n: c["role"] for n, c in clusters.items()} == {"manager": "manager", "worker-01": "worker",
                                                           "serving": "serving"}
    # the manager dispatches to the worker only: the services' cluster is not MultiKueue's
    (mk,) = [o for o in kb.manifests(kube, out / "clusters" / "manager") if o["kind"] == "MultiKueueConfig"]
    assert mk["spec"]["clusters"] == ["worker-01"]
    assert {o["metadata"]["name"] for o in kb.workloads(out / "clusters" / "manager")} == {"train"}
    root = out / "clusters" / "serving"
    lws_obj = next(o for o in yaml.safe_load_all((root / "kubernetes" / "workloads" / f"{NAME}.yaml").read_text())
                   if o and o["kind"] == "LeaderWorkerSet")
    assert lws_obj["spec"]["replicas"] == 2 and lws_obj["spec"]["leaderWorkerTemplate"]["size"] == 2
    lwt = lws_obj["spec"]["leaderWorkerTemplate"]
    assert all(t["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"]
               for t in (lwt["leaderTemplate"], lwt["workerTemplate"]))
    # the serving cluster's checklist (README "Beyond one cluster"): its nodes and node-labels.sh, its
    # releases (its standalone Kueue, LWS), manifests and starters
    mine = set(hostlist.expand(clusters["serving"]["pools"]["h100"]["nodes"]))
    assert len(mine) == 3
    kube.add_nodes([n for n in kb.fleet_nodes(workload, out) if n["name"] in mine])
    kb.run_node_labels(kube, root)
    for rel in kb.releases(root):
        kb.apply_release(kube, rel, root, "1.33")
    kube.apply(kb.manifests(kube, root))
    kb.apply_workloads(kube, root)

    def one_whole() -> bool:
        g = groups(kube)
        return sorted(running(p) for p in g.values()) == [0, 2] and len(g) == 2

    kube.wait_for("one replica Running whole, the other created and waiting", one_whole, timeout=150)
    for _ in range(8):  # and it stays so: never a split of Running and Pending
        g = groups(kube)
        assert sorted((running(p), bound(p)) for p in g.values()) == [(0, 0), (2, 2)], \
            {k: [(p["metadata"]["name"], p["status"].get("phase"), p["spec"].get("nodeName")) for p in v]
             for k, v in g.items()}
        time.sleep(1)
    g = groups(kube)
    waiting = next(k for k, p in g.items() if running(p) == 0)
    # the waiting group's pods exist (LWS made them) and are held by Kueue's admission gate
    for p in g[waiting]:
        gates = [s["name"] for s in p["spec"].get("schedulingGates") or []]
        assert "kueue.x-k8s.io/admission" in gates, (p["metadata"]["name"], gates)
    # what Kueue reports: one Workload per group, one admitted; the other not, for want of quota
    wls = kube.get("workloads.kueue.x-k8s.io", "-n", "chat")["items"]
    admitted = [w for w in wls if (w.get("status") or {}).get("admission")]
    assert len(wls) == 2 and len(admitted) == 1, [(w["metadata"]["name"], w.get("status")) for w in wls]
    [pending] = [w for w in wls if w not in admitted]
    why = " ".join(c.get("message", "") for c in (pending.get("status") or {}).get("conditions", []))
    assert "quota" in why.lower() or "insufficient" in why.lower(), why
    # what LWS reports: two groups, one of them ready
    status = kube.get("leaderworkerset", NAME, "-n", "chat").get("status") or {}
    assert status.get("replicas") == 2 and status.get("readyReplicas") == 1, status
    # a tenant's own Job on the serving cluster's pool (no Kueue annotation, no toleration): admitted by
    # its Kueue and placed on the node the first replica left, beside the waiting replica
    jobs, units = admission.plain_jobs(workload, root, "chat")
    kube.apply(jobs)
    admission.wait_admitted_and_placed(kube, units, workload)
    assert sorted((running(p), bound(p)) for p in groups(kube).values()) == [(0, 0), (2, 2)]
    assert_placement(kube)
