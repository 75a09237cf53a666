"""What a tenant submits, admitted by the real Kueue (or the real Volcano) and placed on the right pool
(issue 34).

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

Volcano bundles (`gang_scheduler: volcano`, the plan's): what the README tells a user is that the
tenant namespace gives a pod Volcano and the tenant's queue (Volcano's pod webhook, the namespace's
queue annotation), so the plain Job of a pool is a batch/v1 Job with the pool's node labels and the
tolerations of its provider taints (AKS documents `sku=gpu:NoSchedule` for its GPU pools) and nothing
of Volcano's. A unit is admitted when its PodGroup (Volcano's controller makes one per Job,
ReplicaSet or Volcano Job) is `Inqueue` or `Running`, and placed when all its pods are bound by
Volcano (`schedulerName: volcano`) on its pool. `oversized_gang`/`wait_gang_refused`: a Volcano Job
whose gang (`minAvailable`) is larger than a pool stays Pending whole, with Volcano's message.

KAI bundles: the plain Job of a pool is the Volcano one plus what the README's "Pods use ..." line asks
of every pod (`schedulerName: kai-scheduler`, the tenant's `kai.scheduler/queue` label). KAI's scheduler
cannot be built here (the Go module proxy refuses its modules), so `wait_kai_held` checks the API
server's part only: the pods were made (the tenant namespace's queue policy let them in), and none is
bound by anything but KAI.
"""
from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from generator.decide.platform import pool_taints
from generator.spec.checks import pool_hostnames, pool_node_labels
from generator.spec import load as load_fleet  # the function: importing the submodule generator.spec.load would shadow it (generator/spec/__init__.py)
from tests._consumers import load_all as _load_all

WORKLOAD_LABEL = "orchgen.io/workload"
VOLCANO = "volcano"
KAI = "kai"
KAI_SCHEDULER = "kai-scheduler"  # the pods' schedulerName (KAI's chart: the scheduler's name)
KAI_QUEUE = "kai.scheduler/queue"  # the queue label KAI's pod grouper reads
VCJOB_API = "batch.volcano.sh/v1alpha1"
VCJOB_LABEL = "volcano.sh/job-name"  # on a Volcano Job's pods (volcano pkg/apis batch JobNameKey)
PODGROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # a pod's PodGroup, set by Volcano's controllers
PODGROUP_ADMITTED = ("Inqueue", "Running")  # PodGroup phases past Volcano's enqueue action
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
    owner: tuple[str, str] | None = None  # (kind, name) whose Kueue Workload (Volcano: PodGroup) must be admitted
    scheduler: str = "kueue"  # who admits it: the plan's gang_scheduler


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


def gang_scheduler(bundle: Path) -> str | None:
    """The plan's gang scheduler; None for a folder with no plan.json (a cluster of a multi-cluster bundle)."""
    plan = bundle / "plan.json"
    return json.loads(plan.read_text()).get("gang_scheduler") if plan.is_file() else None


def plane_pools(bundle: Path) -> list[str]:
    """The pools of the plan's Kubernetes plane."""
    plan = json.loads((bundle / "plan.json").read_text())
    return sorted(p["pool"] for name, plane in plan["planes"].items() if name in ("kubernetes", "k3s")
                  for p in plane.get("pools") or [])


def _restricted_pod(name: str, requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    # Pod Security `restricted` (the tenant namespaces enforce it unless RDMA pods need IPC_LOCK)
    return {"restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "600"],
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                            "resources": {"requests": requests, **({"limits": limits} if limits else {})}}]}


def pool_placement(workload: Path, pool: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """(nodeSelector, tolerations) a user writes for a pool: its node labels, its provider taints."""
    fleet = load_fleet(workload)
    p = next(p for p in fleet.fleet.pools if p.name == pool)
    tolerations = [{"key": k, "operator": "Equal", "value": v, "effect": e} if v else
                   {"key": k, "operator": "Exists", "effect": e} for k, v, e in pool_taints(fleet).get(pool, ())]
    return dict(pool_node_labels(fleet, p)), tolerations


def _readme_plain_jobs(workload: Path, bundle: Path, namespace: str,
                       scheduler: str) -> tuple[list[dict[str, Any]], list[Unit]]:
    """Volcano and KAI: the Job the README tells a user to write for each pool (its selector and
    tolerations; under KAI also `schedulerName: kai-scheduler` and the tenant's queue label, which the
    README's "Pods use ..." line asks of every pod)."""
    jobs, units = [], []
    readme = (bundle / "README.md").read_text()
    pod_labels: dict[str, str] = {}
    if scheduler == KAI:
        assert f"Pods use `schedulerName: {KAI_SCHEDULER}` and the label `{KAI_QUEUE}: <tenant>`." in readme
        ns = next(o for o in _load_all((bundle / "kubernetes" / "manifests" / "00-namespaces.yaml").read_text())
                  if o and o["kind"] == "Namespace" and o["metadata"]["name"] == namespace)
        pod_labels = {KAI_QUEUE: ns["metadata"]["labels"]["orchgen.io/queue"]}
    for pool in plane_pools(bundle):
        name = f"plain-{pool}"[:50].rstrip("-")
        res = pool_resource(workload, pool)
        selector, tolerations = pool_placement(workload, pool)
        # the README's line for the pool tells the user exactly this selector and these tolerations
        line = f"- `{pool}`: `nodeSelector: {json.dumps(selector, sort_keys=True)}`" + \
            (f", `tolerations: {json.dumps(tolerations, sort_keys=True)}`" if tolerations else "")
        assert line in readme.splitlines(), f"the README does not tell a user how to land on pool {pool}: {line}"
        pod = _restricted_pod(name, {"cpu": "1", "memory": "1Gi", **({res: "1"} if res else {})},
                              {res: "1"} if res else {})
        pod["nodeSelector"] = selector
        if tolerations:
            pod["tolerations"] = tolerations
        if scheduler == KAI:
            pod["schedulerName"] = KAI_SCHEDULER
        jobs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
                     "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"app": name, **pod_labels}},
                                                              "spec": pod}}})
        units.append(Unit(f"plain Job {namespace}/{name} on pool {pool}", namespace, {"app": name}, 1, pool,
                          ("Job", name), scheduler))
    return jobs, units


def oversized_gang(workload: Path, bundle: Path, namespace: str) -> tuple[dict[str, Any], str]:
    """A Volcano Job, as the README tells a user to write a gang (`minAvailable` = its pod count), of
    one more whole-node pod than the largest GPU pool has nodes; (the Job, the pool)."""
    plan = json.loads((bundle / "plan.json").read_text())
    pools = [p for name, plane in plan["planes"].items() if name in ("kubernetes", "k3s")
             for p in plane.get("pools") or [] if p.get("gpu")]
    pool = max(pools, key=lambda p: (p["node_count"], p["pool"]))
    size = pool["node_count"] + 1
    res = pool_resource(workload, pool["pool"])
    count = str(pool["gpu"]["count"])
    selector, tolerations = pool_placement(workload, pool["pool"])
    spec = _restricted_pod("gang", {"cpu": "1", "memory": "1Gi", res: count}, {res: count})
    spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    # the tenant's queue, as the README's table of starters names it: the namespace's queue annotation
    queue = next(o["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"]
                 for o in _load_all((bundle / "kubernetes" / "manifests" / "00-namespaces.yaml").read_text())
                 if o and o["kind"] == "Namespace" and o["metadata"]["name"] == namespace)
    job = {"apiVersion": VCJOB_API, "kind": "Job",
           "metadata": {"name": f"gang-over-{pool['pool']}"[:50].rstrip("-"), "namespace": namespace},
           "spec": {"schedulerName": VOLCANO, "queue": queue, "minAvailable": size,
                    "tasks": [{"name": "worker", "replicas": size, "minAvailable": size,
                               "template": {"metadata": {"labels": {"app": "gang-over"}}, "spec": spec}}]}}
    return job, pool["pool"]


def plain_jobs(workload: Path, bundle: Path, namespace: str) -> tuple[list[dict[str, Any]], list[Unit]]:
    """The Job a user writes for each pool, and what to expect of it."""
    if gang_scheduler(bundle) in (VOLCANO, KAI):
        return _readme_plain_jobs(workload, bundle, namespace, gang_scheduler(bundle))
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
    if o["kind"] == "Job" and o["apiVersion"] == VCJOB_API:
        return [t["template"]["spec"] for t in spec.get("tasks") or []]
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
    sched = plan.get("gang_scheduler") or "kueue"
    tenants = {t["name"] for t in plan["tenants"]}  # each tenant's namespace is named after it
    extra: list[dict[str, Any]] = site_volumes(objs)
    units: list[Unit] = []
    for o in objs:
        kind, md, spec = o["kind"], o["metadata"], o.get("spec") or {}
        ns = md.get("namespace", "")
        label = f"{kind} {ns}/{md['name']}"
        wl = ((spec.get("template") or {}).get("metadata") or {}).get("labels", {}).get(WORKLOAD_LABEL)
        if kind == "Job" and o["apiVersion"] == VCJOB_API:  # a Volcano Job: its tasks' pods, one PodGroup
            wl = next((((t.get("template") or {}).get("metadata") or {}).get("labels", {}).get(WORKLOAD_LABEL)
                       for t in spec.get("tasks") or []), None)
            units.append(Unit(f"Volcano {label}", ns, {VCJOB_LABEL: md["name"]},
                              sum(int(t.get("replicas", 1)) for t in spec.get("tasks") or []),
                              pool_of.get(wl or md["name"]), ("Job", md["name"]), sched))
        elif kind == "Job":
            units.append(Unit(label, ns, {"job-name": md["name"]}, int(spec.get("parallelism", 1)),
                              pool_of.get(wl or md["name"]), ("Job", md["name"]), sched))
        elif kind == "Deployment":
            sel = spec["selector"]["matchLabels"]
            # outside the tenant namespaces (orchgen's own controllers: gpu-quarantine) no gang scheduler's
            # webhook sets schedulerName: the default scheduler places them, under every gang scheduler
            units.append(Unit(label, ns, dict(sel), int(spec.get("replicas", 1)), pool_of.get(wl or md["name"]),
                              scheduler=sched if ns in tenants else "default-scheduler"))
        elif kind == "InferenceService":
            d = kserve_deployment(o)
            extra.append(d)
            units.append(Unit(f"{label} (its Deployment {d['metadata']['name']})", ns,
                              dict(d["spec"]["selector"]["matchLabels"]), d["spec"]["replicas"],
                              pool_of.get(md["name"]), scheduler=sched))
        elif kind == "LeaderWorkerSet":
            size = int(spec["leaderWorkerTemplate"].get("size", 1))
            units.append(Unit(label, ns, {"leaderworkerset.sigs.k8s.io/name": md["name"]},
                              int(spec.get("replicas", 1)) * size, pool_of.get(md["name"]), scheduler=sched))
        elif kind == "RayCluster":
            units.append(Unit(label, ns, {}, 0, None, ("RayCluster", md["name"]), sched))
    return extra, units


def _owned_workloads(cluster, ns: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for w in cluster.list("workloads.kueue.x-k8s.io", ns):
        for ref in w["metadata"].get("ownerReferences", []):
            out[(ref["kind"], ref["name"])] = w
    return out


def _podgroups(cluster, ns: str) -> list[dict[str, Any]]:
    return cluster.list("podgroups.scheduling.volcano.sh", ns)


def _owned_podgroups(groups: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(ref["kind"], ref["name"]): g for g in groups for ref in g["metadata"].get("ownerReferences", [])}


def _admitted(w: dict[str, Any] | None) -> bool:
    return bool(w and (w.get("status") or {}).get("admission"))


def _group_admitted(g: dict[str, Any] | None) -> bool:
    return bool(g and (g.get("status") or {}).get("phase") in PODGROUP_ADMITTED)


def _conditions(o: dict[str, Any]) -> str:
    return "; ".join(f"{c.get('type')}={c.get('status')}: {c.get('reason', '')} {c.get('message', '')}".rstrip()
                     for c in (o.get("status") or {}).get("conditions", []))


def _why(cluster, namespaces: set[str], scheduler: str = "kueue") -> list[str]:
    """Every Kueue Workload (Volcano: PodGroup) of the namespaces that is not admitted, with the
    scheduler's conditions, and the events that say why a pod was not made or not bound."""
    out = []
    for ns in sorted(namespaces):
        if scheduler == VOLCANO:
            for g in _podgroups(cluster, ns):
                if not _group_admitted(g):
                    out.append(f"{ns}/{g['metadata']['name']} PodGroup {(g.get('status') or {}).get('phase')}: "
                               f"{_conditions(g) or 'no condition yet'}")
        else:
            for w in cluster.get("workloads.kueue.x-k8s.io", "-n", ns)["items"]:
                if _admitted(w):
                    continue
                out.append(f"{ns}/{w['metadata']['name']} not admitted: {_conditions(w) or 'no condition yet'}")
        # and why admitted ones have no pod, or no node: the Job controller's and the scheduler's word
        for e in cluster.get("events", "-n", ns)["items"]:
            if e.get("reason") in ("FailedCreate", "FailedScheduling", "Unschedulable", "PodGroupPending"):
                out.append(f"{ns} {e['involvedObject']['kind']} {e['involvedObject']['name']}: {e['reason']}: {e.get('message', '')}")
    return out


def state(cluster, units: list[Unit], pools: dict[str, str]) -> list[str]:
    """What is not yet right, one line per unit ([] when every unit is admitted and placed)."""
    wrong = []
    by_ns: dict[str, list[dict[str, Any]]] = {}
    owned: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for u in units:
        if u.scheduler == VOLCANO and u.namespace not in groups:
            groups[u.namespace] = _podgroups(cluster, u.namespace)
        if u.owner:
            if u.scheduler == VOLCANO:
                ok = _group_admitted(_owned_podgroups(groups[u.namespace]).get(u.owner))
            else:
                if u.namespace not in owned:
                    owned[u.namespace] = _owned_workloads(cluster, u.namespace)
                ok = _admitted(owned[u.namespace].get(u.owner))
            if not ok:
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
        if u.scheduler == VOLCANO:
            # bound by Volcano (not the default scheduler), each in a PodGroup Volcano admitted
            by_name = {g["metadata"]["name"]: g for g in groups[u.namespace]}
            bad = [f"{p['metadata']['name']} (schedulerName {p['spec'].get('schedulerName')}, PodGroup "
                   f"{p['metadata'].get('annotations', {}).get(PODGROUP_ANNOTATION)})" for p in running
                   if p["spec"].get("schedulerName") != VOLCANO or not _group_admitted(
                       by_name.get(p["metadata"].get("annotations", {}).get(PODGROUP_ANNOTATION, "")))]
            if bad:
                wrong.append(f"{u.what}: pods not bound by Volcano in an admitted PodGroup: {bad}")
                continue
        off = [f"{p['metadata']['name']} on {p['spec']['nodeName']} ({pools.get(p['spec']['nodeName'])})"
               for p in running if u.pool and pools.get(p["spec"]["nodeName"]) != u.pool]
        if off:
            wrong.append(f"{u.what}: pods off pool {u.pool}: {off}")
    return wrong


def wait_admitted_and_placed(cluster, units: list[Unit], workload: Path, timeout: float = 120) -> None:
    pools = node_pools(workload)
    deadline = time.monotonic() + timeout
    scheduler = VOLCANO if any(u.scheduler == VOLCANO for u in units) else "kueue"
    while True:
        wrong = state(cluster, units, pools)
        if not wrong:
            return
        if time.monotonic() > deadline:
            why = _why(cluster, {u.namespace for u in units}, scheduler)[-40:]
            who = "Volcano" if scheduler == VOLCANO else "Kueue"
            raise AssertionError("not admitted or not placed:\n  " + "\n  ".join(wrong)
                                 + (f"\n{who} says:\n  " + "\n  ".join(why) if why else ""))
        time.sleep(1)


def wait_gang_refused(cluster, job: dict[str, Any], timeout: float = 60, hold: float = 3) -> str:
    """A Volcano Job larger than its pool: its PodGroup stays Pending whole (no pod of it bound, none
    made: Volcano's job controller makes pods once the PodGroup is Inqueue) and Volcano says why.
    Once Volcano has said so, it must stay so for `hold` seconds (the scheduler's period is 1 s, the
    chart's `--schedule-period`). Returns Volcano's messages (the PodGroup's Unschedulable condition or
    the scheduler's events on it)."""
    md = job["metadata"]
    ns, name = md["namespace"], md["name"]
    deadline = time.monotonic() + timeout
    said_at: float | None = None
    while True:
        groups = [g for g in _podgroups(cluster, ns) if ("Job", name) in
                  {(r["kind"], r["name"]) for r in g["metadata"].get("ownerReferences", [])}]
        pods = [p for p in cluster.get("pods", "-n", ns, "-l", f"{VCJOB_LABEL}={name}")["items"]]
        bound = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
        assert not bound, f"Volcano Job {ns}/{name}: pods of a gang larger than its pool bound: {bound}"
        assert not [g for g in groups if _group_admitted(g)], \
            f"Volcano Job {ns}/{name}: a gang larger than its pool admitted: {groups}"
        said = [f"{c.get('reason', '')}: {c.get('message', '')}" for g in groups
                for c in (g.get("status") or {}).get("conditions", [])
                if c.get("status") == "True" and c.get("type") == "Unschedulable" and c.get("message")]
        # the scheduler's events on the PodGroup: the gang plugin's ("0/0 tasks in gang unschedulable:
        # pod group is not ready, N minAvailable") and the enqueue action's reason, when it gives one
        # ("resource in cluster is overused: overused nvidia.com/gpu")
        said += [e.get("message", "") for e in cluster.get("events", "-n", ns)["items"]
                 if e["involvedObject"].get("kind") == "PodGroup" and groups and e.get("reason") == "Unschedulable"
                 and e["involvedObject"].get("name") == groups[0]["metadata"]["name"]]
        if groups and any("minAvailable" in m for m in said):
            said_at = said_at or time.monotonic()
            if time.monotonic() - said_at >= hold:
                return "; ".join(sorted(set(said)))
        elif time.monotonic() > deadline:
            raise AssertionError(f"Volcano Job {ns}/{name}: no word from Volcano after {timeout:.0f} s; "
                                 f"PodGroups {[(g['metadata']['name'], g.get('status')) for g in groups]}, "
                                 f"{len(pods)} pods")
        time.sleep(2)


def wait_kai_held(cluster, units: list[Unit], timeout: float = 60, hold: float = 3) -> int:
    """KAI bundles (no KAI scheduler runs here: the Go module proxy refuses its modules, so this is the
    API server's part only): each unit's pods were made, so the API server's admission, the tenant
    namespace's queue policy included, let them in; each names `kai-scheduler` and its tenant's queue;
    and none is bound, for `hold` seconds after all exist: the default scheduler leaves them to KAI. On
    time-out the assertion carries the controllers' FailedCreate events (the policy's message).
    Returns the pods checked."""
    deadline = time.monotonic() + timeout
    seen_at: float | None = None
    while True:
        wrong, checked = [], 0
        for u in units:
            mine = [p for p in cluster.list("pods", u.namespace)
                    if all(p["metadata"].get("labels", {}).get(k) == v for k, v in u.selector.items())]
            bound = [p["metadata"]["name"] for p in mine if p["spec"].get("nodeName")]
            assert not bound, f"{u.what}: bound without KAI: {bound}"
            for p in mine:
                labels = p["metadata"].get("labels", {})
                assert p["spec"].get("schedulerName") == KAI_SCHEDULER and KAI_QUEUE in labels, \
                    (u.what, p["metadata"]["name"], p["spec"].get("schedulerName"), labels)
            if len(mine) < u.pods:
                wrong.append(f"{u.what}: {len(mine)}/{u.pods} pods made")
            checked += len(mine)
        if not wrong:
            seen_at = seen_at or time.monotonic()
            if time.monotonic() - seen_at >= hold:
                return checked
        elif time.monotonic() > deadline:
            events = [f"{e['involvedObject']['kind']} {e['involvedObject']['name']}: {e.get('message', '')}"
                      for ns in sorted({u.namespace for u in units}) for e in cluster.get("events", "-n", ns)["items"]
                      if e.get("reason") == "FailedCreate"]
            raise AssertionError("pods not made:\n  " + "\n  ".join(wrong) + "\n  " + "\n  ".join(events[-20:]))
        time.sleep(1)
