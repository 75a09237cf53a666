"""What a tenant submits, admitted by the real Kueue and placed on the right pool (issue 34).

Used by tests/test_kube_real.py on the cluster each example's test already applied:
- `plain_jobs`: per pool of the plane, the Job a user writes for it: one pod asking for one of the
  pool's GPUs (or one CPU on a CPU pool), the pool's node labels as its nodeSelector, the queue-name
  label and nothing else of Kueue's (no TAS annotation, no toleration: Kueue adds the flavor's);
- `expected_units`: every starter of kubernetes/workloads/ and every service, with the pods its
  controller makes. KServe's controller does not run here, so an InferenceService's pods come from
  the Deployment KServe makes of it in Standard (raw deployment) mode: `<name>-predictor`, its pod
  spec the predictor's (`kserve_deployment`). KubeRay does not run either: a RayCluster's Kueue
  Workload must be admitted, and there are no Ray pods to place.
- `wait_admitted_and_placed`: each unit's pods all Running, each on a node of its pool; on time-out
  the assertion carries every Kueue Workload of the namespace that is not admitted, with Kueue's
  own message (e.g. `couldn't assign flavors to pod set main: ...`).
"""
from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from generator.spec.checks import pool_hostnames
from tests._consumers import load_all as _load_all
from generator.spec import load as load_fleet  # the function: importing the submodule generator.spec.load would shadow it (generator/spec/__init__.py)

WORKLOAD_LABEL = "orchgen.io/workload"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# KServe v1beta1 ComponentExtensionSpec and PredictorSpec fields that are not the pod's
# (kserve pkg/apis/serving/v1beta1/component.go, predictor.go): everything else of the predictor is a PodSpec
KSERVE_NOT_POD = {"minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType", "autoScaling",
                  "containerConcurrency", "timeout", "canaryTrafficPercent", "logger", "batcher", "labels",
                  "annotations", "deploymentStrategy", "model", "workerSpec", "storageUris"}


@dataclass
class Unit:
    """Something a tenant submitted and the pods it should get."""
    what: str  # "Job research/pretrain-8b", "plain Job on pool p5", ...
    namespace: str
    selector: dict[str, str]  # the labels of its pods
    pods: int  # how many pods run once it is admitted (0: no pod is made here, only admission)
    pool: str | None
    owner: tuple[str, str] | None = None  # (kind, name) whose Kueue Workload must be admitted


def kueue_flavors(bundle: Path) -> dict[str, dict[str, Any]]:
    """pool -> its ResourceFlavor (named `<pool>-<hash>`, generator/render/kubernetes/kueue.py)."""
    path = bundle / "kubernetes" / "manifests" / "20-kueue.yaml"
    if not path.is_file():
        return {}
    return {o["metadata"]["name"].rsplit("-", 1)[0]: o for o in _load_all(path.read_text())
            if o and o["kind"] == "ResourceFlavor"}


def node_pools(workload: Path) -> dict[str, str]:
    """node name -> its pool."""
    fleet = load_fleet(workload)
    return {n: p.name for p in fleet.fleet.pools for n in pool_hostnames(p)}


def pool_resource(workload: Path, pool: str) -> str | None:
    p = next(p for p in load_fleet(workload).fleet.pools if p.name == pool)
    if p.gpu is None:
        return None
    return f"nvidia.com/mig-{p.gpu.mig.profile}" if p.gpu.mig is not None else "nvidia.com/gpu"


def plain_jobs(workload: Path, bundle: Path, namespace: str) -> tuple[list[dict[str, Any]], list[Unit]]:
    """The Job a user writes for each pool, and what to expect of it."""
    jobs, units = [], []
    for pool, flavor in sorted(kueue_flavors(bundle).items()):
        name = f"plain-{pool}"[:50].rstrip("-")
        res = pool_resource(workload, pool)
        requests = {"cpu": "1", "memory": "1Gi", **({res: "1"} if res else {})}
        limits = {res: "1"} if res else {}
        jobs.append({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"}},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": {"app": name}},
                # Pod Security `restricted` (the tenant namespaces enforce it unless RDMA pods need IPC_LOCK)
                "spec": {"restartPolicy": "Never", "nodeSelector": dict(flavor["spec"]["nodeLabels"]),
                         "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                             "seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "600"],
                                         "securityContext": {"allowPrivilegeEscalation": False,
                                                             "capabilities": {"drop": ["ALL"]}},
                                         "resources": {"requests": requests, **({"limits": limits} if limits else {})}}]}}}})
        units.append(Unit(f"plain Job {namespace}/{name} on pool {pool}", namespace, {"app": name}, 1, pool,
                          ("Job", name)))
    return jobs, units


def kserve_deployment(isvc: dict[str, Any]) -> dict[str, Any]:
    """The Deployment KServe's controller makes of an InferenceService in Standard mode: named
    `<name>-predictor`, minReplicas replicas (KServe's default 1), the pod spec the predictor's."""
    md, pred = isvc["metadata"], copy.deepcopy(isvc["spec"]["predictor"])
    name = f"{md['name']}-predictor"
    labels = {**(pred.get("labels") or {}), "app": f"isvc.{name}",
              "serving.kserve.io/inferenceservice": md["name"], "component": "predictor"}
    pod = {k: v for k, v in pred.items() if k not in KSERVE_NOT_POD}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": md["namespace"], "labels": labels},
            "spec": {"replicas": pred.get("minReplicas", 1), "selector": {"matchLabels": {"app": f"isvc.{name}"}},
                     "template": {"metadata": {"labels": labels, "annotations": pred.get("annotations") or {}},
                                  "spec": pod}}}


def site_volumes(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claims the pod templates mount that the bundle does not create (`weights: pvc:NAME`: the
    site's, README), each as the site would give it: a PersistentVolumeClaim bound to a volume."""
    have = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs if o["kind"] == "PersistentVolumeClaim"}
    out: list[dict[str, Any]] = []
    for o in objs:
        ns = o["metadata"].get("namespace")
        for vol in [v for t in _pod_specs(o) for v in t.get("volumes") or []]:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim or (ns, claim) in have:
                continue
            have.add((ns, claim))
            pv = f"site-{ns}-{claim}"[:63].rstrip("-")
            out.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                        "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadOnlyMany"],
                                 "storageClassName": "", "hostPath": {"path": f"/srv/{claim}"},
                                 "claimRef": {"namespace": ns, "name": claim}}})
            out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": claim, "namespace": ns},
                        "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": pv,
                                 "resources": {"requests": {"storage": "1Ti"}}}})
    return out


def _pod_specs(o: dict[str, Any]) -> list[dict[str, Any]]:
    spec = o.get("spec") or {}
    if o["kind"] in ("Job", "Deployment", "StatefulSet"):
        return [spec["template"]["spec"]]
    if o["kind"] == "InferenceService":
        return [spec["predictor"]]
    if o["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [t["spec"] for t in (lwt.get("leaderTemplate"), lwt.get("workerTemplate")) if t]
    return []


def expected_units(bundle: Path, objs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Unit]]:
    """(what to create in KServe's and the site's place, the units) for the bundle's starters and
    services, and the RayClusters of manifests/40-ray.yaml."""
    plan = json.loads((bundle / "plan.json").read_text())
    pool_of = {w["name"]: w.get("pool") for w in plan["workloads"]}
    extra: list[dict[str, Any]] = site_volumes(objs)
    units: list[Unit] = []
    for o in objs:
        kind, md, spec = o["kind"], o["metadata"], o.get("spec") or {}
        ns = md.get("namespace", "")
        label = f"{kind} {ns}/{md['name']}"
        wl = ((spec.get("template") or {}).get("metadata") or {}).get("labels", {}).get(WORKLOAD_LABEL)
        if kind == "Job":
            units.append(Unit(label, ns, {"job-name": md["name"]}, int(spec.get("parallelism", 1)),
                              pool_of.get(wl or md["name"]), ("Job", md["name"])))
        elif kind == "Deployment":
            sel = spec["selector"]["matchLabels"]
            units.append(Unit(label, ns, dict(sel), int(spec.get("replicas", 1)), pool_of.get(wl or md["name"])))
        elif kind == "InferenceService":
            d = kserve_deployment(o)
            extra.append(d)
            units.append(Unit(f"{label} (its Deployment {d['metadata']['name']})", ns,
                              dict(d["spec"]["selector"]["matchLabels"]), d["spec"]["replicas"],
                              pool_of.get(md["name"])))
        elif kind == "LeaderWorkerSet":
            size = int(spec["leaderWorkerTemplate"].get("size", 1))
            units.append(Unit(label, ns, {"leaderworkerset.sigs.k8s.io/name": md["name"]},
                              int(spec.get("replicas", 1)) * size, pool_of.get(md["name"])))
        elif kind == "RayCluster":
            units.append(Unit(label, ns, {}, 0, None, ("RayCluster", md["name"])))
    return extra, units


def _owned_workloads(cluster, ns: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for w in cluster.list("workloads.kueue.x-k8s.io", ns):
        for ref in w["metadata"].get("ownerReferences", []):
            out[(ref["kind"], ref["name"])] = w
    return out


def _admitted(w: dict[str, Any] | None) -> bool:
    return bool(w and (w.get("status") or {}).get("admission"))


def _why(cluster, namespaces: set[str]) -> list[str]:
    """Every Kueue Workload of the namespaces that is not admitted, with Kueue's conditions."""
    out = []
    for ns in sorted(namespaces):
        for w in cluster.get("workloads.kueue.x-k8s.io", "-n", ns)["items"]:
            if _admitted(w):
                continue
            conds = "; ".join(f"{c.get('type')}={c.get('status')}: {c.get('message', '')}"
                              for c in (w.get("status") or {}).get("conditions", []))
            out.append(f"{ns}/{w['metadata']['name']} not admitted: {conds or 'no condition yet'}")
        # and why admitted ones have no pod, or no node: the Job controller's and the scheduler's word
        for e in cluster.get("events", "-n", ns)["items"]:
            if e.get("reason") in ("FailedCreate", "FailedScheduling"):
                out.append(f"{ns} {e['involvedObject']['kind']} {e['involvedObject']['name']}: {e['reason']}: {e.get('message', '')}")
    return out


def state(cluster, units: list[Unit], pools: dict[str, str]) -> list[str]:
    """What is not yet right, one line per unit ([] when every unit is admitted and placed)."""
    wrong = []
    by_ns: dict[str, list[dict[str, Any]]] = {}
    owned: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for u in units:
        if u.owner:
            if u.namespace not in owned:
                owned[u.namespace] = _owned_workloads(cluster, u.namespace)
            w = owned[u.namespace].get(u.owner)
            if not _admitted(w):
                wrong.append(f"{u.what}: not admitted")
                continue
        if not u.pods:
            continue
        if u.namespace not in by_ns:
            by_ns[u.namespace] = cluster.list("pods", u.namespace)
        mine = [p for p in by_ns[u.namespace] if p["metadata"].get("deletionTimestamp") is None
                and all(p["metadata"].get("labels", {}).get(k) == v for k, v in u.selector.items())]
        running = [p for p in mine if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
        if len(running) < u.pods:
            gates = sorted({g["name"] for p in mine for g in p["spec"].get("schedulingGates") or []})
            wrong.append(f"{u.what}: {len(running)}/{u.pods} pods Running ({len(mine)} pods"
                         f"{', gated by ' + ', '.join(gates) if gates else ''})")
            continue
        off = [f"{p['metadata']['name']} on {p['spec']['nodeName']} ({pools.get(p['spec']['nodeName'])})"
               for p in running if u.pool and pools.get(p["spec"]["nodeName"]) != u.pool]
        if off:
            wrong.append(f"{u.what}: pods off pool {u.pool}: {off}")
    return wrong


def wait_admitted_and_placed(cluster, units: list[Unit], workload: Path, timeout: float = 120) -> None:
    pools = node_pools(workload)
    deadline = time.monotonic() + timeout
    while True:
        wrong = state(cluster, units, pools)
        if not wrong:
            return
        if time.monotonic() > deadline:
            why = _why(cluster, {u.namespace for u in units})[-40:]
            raise AssertionError("not admitted or not placed:\n  " + "\n  ".join(wrong)
                                 + ("\nKueue says:\n  " + "\n  ".join(why) if why else ""))
        time.sleep(1)
