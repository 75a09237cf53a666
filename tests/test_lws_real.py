"""The gang invariant for multi-node serving on the real control plane (issue 21): every replica of
a multi-node model is admitted whole.

serving-platform's llama-405b (a LeaderWorkerSet, one leader and one worker per replica, two 8-GPU
nodes each) with two replicas, on KWOK nodes with room for one whole replica and a half: the real
API server, kube-scheduler, Kueue 0.19.2's controller with the bundle's configuration (its LWS
integration) and LeaderWorkerSet's own controller (tests/kubeenv/lws/build.sh), every release
applied from the bundle as its README says (tests/kubeenv/bundle.py). The default scheduler alone
would bind the second replica's leader on the free node and leave its worker Pending; Kueue admits
one group's Workload and holds the other's pods behind its scheduling gate, none bound.
"""
from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from tests.kubeenv import bundle as kb
from tests.kubeenv.fixture import kube_factory  # noqa: F401
from tests.test_kube_real import assert_placement, plan

REPO = Path(__file__).resolve().parent.parent
NAME = "llama-405b"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


def fleet(tmp_path: Path) -> Path:
    """serving-platform with only its multi-node model, two replicas, on 3 of its 8-GPU nodes: one
    replica (2 nodes) fits, the second does not (it would need 4). The site's Prometheus, so that no
    kube-prometheus-stack is applied (KEDA's trigger needs only its address)."""
    doc = yaml.safe_load((REPO / "examples" / "serving-platform.yaml").read_text())
    doc["metadata"]["name"] = "lws-gang"
    doc["fleet"]["pools"] = [dict(next(p for p in doc["fleet"]["pools"] if p["name"] == "h100"), nodes=3)]
    doc["tenants"] = [t for t in doc["tenants"] if t["name"] == "chat"]
    w = next(w for w in doc["workloads"] if w["name"] == NAME)
    w["gpus"] = 16
    # the issue 34 form: a tightly coupled service of 2 nodes, no serving.nodes_per_replica. The plan's
    # "gang REQUIRED" becomes one LeaderWorkerSet replica over both nodes (decide/serving.py _nodes),
    # its templates asking Kueue's TAS for one leaf switch as a training gang does
    del w["serving"]["nodes_per_replica"]
    w.update(nodes=2, tightly_coupled=True)
    w["serving"].update(min_replicas=2, max_replicas=2)
    doc["workloads"] = [w]
    doc["options"] = {"gang_scheduler": "kueue", "metrics": "site",
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
    lws_obj = next(o for o in yaml.safe_load_all((out / "kubernetes" / "workloads" / f"{NAME}.yaml").read_text())
                   if o and o["kind"] == "LeaderWorkerSet")
    assert lws_obj["spec"]["replicas"] == 2 and lws_obj["spec"]["leaderWorkerTemplate"]["size"] == 2
    lwt = lws_obj["spec"]["leaderWorkerTemplate"]
    assert all(t["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"]
               for t in (lwt["leaderTemplate"], lwt["workerTemplate"]))
    kb.apply_bundle(kube, workload, out)

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
    assert_placement(kube)
