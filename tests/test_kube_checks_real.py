"""The Kubernetes production check (checks/run.py --plane kubernetes, issue 26) run as the bundle
documents it against the real API server, scheduler, Kueue and KWOK GPU nodes (tests/kubeenv): one
booted cluster, three runs of the real command.

- the bundle's own gang (2 pods of 1 GPU through the tenant's Kueue queue) passes, and is cleaned up;
- its NCCL run (2 pods, every GPU of a node each) is admitted and placed on two nodes of the pool, and
  cleaned up (KWOK runs no container: it cannot finish here);
- the same gang made bigger than the plane (10 GPUs of 8) is never admitted: it fails with Kueue's own
  message (`couldn't assign flavors ... > maximum capacity (8)`);
- the same 10-pod gang without the Kueue wiring (a namespace Kueue does not manage) is split by the
  default scheduler, 8 Running and 2 Pending: it fails as a split.
"""
from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.kubeenv import bundle as kb
from tests.kubeenv.admission import node_pools
from tests.kubeenv.fixture import kube, kube_factory  # noqa: F401
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent

FLEET = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: gang-check
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
  - {name: train, plane: kubernetes, tenant: team, nodes: 4, gpus: 4, tightly_coupled: true}
"""


def run_check(cluster, config: Path, *extra: str) -> tuple[int, dict]:
    env = {**cluster.env(), "KUBECTL": cluster.kubectl_bin}
    r = subprocess.run([sys.executable, str(config.parent / "run.py"), "--plane", "kubernetes",
                        "--config", str(config), *extra], capture_output=True, text=True, env=env, timeout=400)
    assert r.stdout.strip(), r.stderr
    return r.returncode, json.loads(r.stdout)


def with_pods(g: dict, n: int, namespace: str | None = None) -> dict:
    g = copy.deepcopy(g)
    g["pods"] = n
    for o in g["objects"]:
        if o["kind"] == "Job":
            o["spec"]["completions"] = o["spec"]["parallelism"] = n
        if namespace:
            o["metadata"]["namespace"] = namespace
    if namespace:
        g["namespace"] = namespace
    return g


def test_gang_check_passes_whole_and_fails_split_or_never_admitted(tmp_path: Path, kube) -> None:
    fleet = tmp_path / "gang-check.yaml"
    fleet.write_text(FLEET)
    out = tmp_path / "bundle"
    r = subprocess.run([*orchgen_argv(), "plan", str(fleet), "-o", str(out)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    kb.apply_bundle(kube, fleet, out, with_workloads=False)
    cfg = json.loads((out / "checks" / "checks.json").read_text())
    g = cfg["kubernetes"]["gang"]
    assert (g["namespace"], g["pods"], g["scheduler"]) == ("team", 2, "kueue")

    # 1. the bundle's checks, as documented: the gang admitted whole. The NCCL run is admitted whole and
    # placed on two nodes of the pool by the real Kueue and scheduler; KWOK runs no container, so it never
    # finishes here (its verdict on NCCL's own logs: tests/test_checks.py) and fails on the bound given
    rc, res = run_check(kube, out / "checks" / "checks.json", "--check-timeout", "25")
    assert res["gang"]["ok"] is True, res
    assert "admitted whole: 2/2 pods Running" in res["gang"]["detail"]
    assert set(res) == {"gang", "kube-nccl"}  # no Slurm check in a Kubernetes-only plan
    n = cfg["kubernetes"]["nccl"]
    assert (n["pods"], n["gpus_per_pod"], n["transport"]) == (2, 1, ["NET/Socket"])  # ethernet: the pod network
    assert rc == 1 and res["kube-nccl"]["ok"] is False, res
    head = res["kube-nccl"]["detail"][0]
    placed = re.fullmatch(r"did not finish in 25 s: 2 pods, on nodes \['(\S+)', '(\S+)'\] \(.*\)", head)
    assert placed and placed[1] != placed[2], head  # one pod per node: every GPU of each
    pools = node_pools(fleet)
    assert pools[placed[1]] == pools[placed[2]] == "g1", (placed.groups(), pools)
    assert not kube.get("pods", "-n", "team")["items"]  # cleaned up
    assert not kube.get("jobs", "-n", "team")["items"]

    # 2. the same gang, 10 pods of 1 GPU on 8 GPUs: Kueue never admits it, and says why
    big = out / "checks" / "big.json"
    big.write_text(json.dumps({"kubernetes": {"gang": with_pods(g, 10)}}))
    rc, res = run_check(kube, big, "--gang-timeout", "12")
    detail = res["gang"]["detail"]
    assert rc == 1 and res["gang"]["ok"] is False, res
    assert detail[0].startswith("never admitted in 12 s"), detail
    # Kueue's own words (0.19.2 pkg/scheduler/flavorassigner: the pod set can never fit the queue), as
    # the check prints the Workload's QuotaReserved condition
    [cq] = [o for o in yaml.safe_load_all((out / "kubernetes/manifests/20-kueue.yaml").read_text())
            if o and o["kind"] == "ClusterQueue"]
    [flavor] = [f["name"] for grp in cq["spec"]["resourceGroups"] for f in grp["flavors"]]
    said = (f"couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor {flavor}, "
            f"previously considered podsets requests (0) + current podset request (10) > maximum capacity (8)")
    assert any("admitted=False" in d and said in d for d in detail), detail
    assert not kube.get("pods", "-n", "team")["items"] and not kube.get("jobs", "-n", "team")["items"]

    # 3. the same 10-pod gang without the Kueue wiring (a namespace no LocalQueue serves): the default
    # scheduler binds 8 and leaves 2 Pending; the check calls it a split
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nogang"}}])
    split = out / "checks" / "split.json"
    split.write_text(json.dumps({"kubernetes": {"gang": with_pods(g, 10, "nogang")}}))
    rc, res = run_check(kube, split, "--gang-timeout", "20")
    detail = res["gang"]["detail"]
    assert rc == 1 and res["gang"]["ok"] is False, res
    assert detail[0].startswith("split after 20 s: 8 pods Running, 2 Pending, of a gang of 10"), detail
    assert any("Insufficient nvidia.com/gpu" in d for d in detail), detail
    assert not kube.get("pods", "-n", "nogang")["items"]
