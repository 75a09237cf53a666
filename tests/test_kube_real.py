"""Bundles applied to a real Kubernetes control plane (tests/kubeenv: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler built from Go modules, KWOK playing the fleet's nodes, and
Kueue's real controller manager): every example with a Kubernetes plane is accepted by the API
server (server-side apply, no dry run), the scheduler places pods only where they tolerate and
select, and Kueue admits gangs whole where the default scheduler splits them."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubeenv import bundle as kb
from tests.kubeenv.fixture import kube, kube_factory  # noqa: F401
from tests._consumers import require

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def plan(workload: Path, out: Path) -> Path:
    r = subprocess.run([sys.executable, "-m", "generator.cli", "plan", str(workload), "-o", str(out)],
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


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_example_applies(example: Path, tmp_path: Path, kube) -> None:
    out = plan(example, tmp_path / "bundle")
    p = json.loads((out / "plan.json").read_text())
    if not any(k in p["planes"] for k in ("kubernetes", "k3s")) and \
            not any(v.get("host") == "kubernetes" for v in p["planes"].values()):
        pytest.skip(f"{example.name}: no Kubernetes plane in its plan")
    result = kb.apply_bundle(kube, example, out)
    # every object of the manifests and the starters is stored as written
    for o in kb.manifests(kube, out) + kb.workloads(out):
        md = o["metadata"]
        args = [o["kind"] + "." + o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else o["kind"],
                md["name"]]
        if md.get("namespace"):
            args += ["-n", md["namespace"]]
        got = kube.get(*args)
        assert got["metadata"]["name"] == md["name"]
    # the nodes node-labels.sh gave the Kubernetes plane carry its label, the Slurm side its taint
    nodes = kube.get("nodes")["items"]
    assert nodes, "no node joined"
    if (out / "kubernetes" / "node-labels.sh").is_file():
        assert "the plan has" not in result["node_labels"], result["node_labels"]
    # let the controllers and the scheduler act on what was applied, then check where pods went
    time.sleep(5)
    assert_placement(kube)


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
    assert_placement(kube)


def test_default_scheduler_splits_the_same_gangs(tmp_path: Path, kube) -> None:
    """The same two starters with no Kueue (no release, no queues): the Job controller creates all 10
    pods and the default scheduler binds 8, so a gang runs in part and holds GPUs it cannot use."""
    fleet, out = deadlock_bundle(tmp_path)
    kube.add_nodes(kb.fleet_nodes(fleet, out))
    kb.run_node_labels(kube, out)
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}])
    kube.apply(kb.workloads(out))
    kube.wait_for("8 pods bound", lambda: sum(running_by_job(kube, "team").values()) == 8, timeout=180)
    running = running_by_job(kube, "team")
    assert any(0 < n < 5 for n in running.values()), running  # a split: part of a gang runs
    pending = [p for p in pods(kube, "-n", "team") if p["status"].get("phase") == "Pending"]
    assert len(pending) == 2
    assert_placement(kube)
