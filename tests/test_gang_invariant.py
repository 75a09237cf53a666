"""The gang invariant, end to end: every workload the decision marks gang-required is submitted so
that ALL its pods go under the gang scheduler at once; a single-node workload has no gang forced.

Per scheduler, "under the gang" means:
- Kueue: the top object (Job / RayCluster) goes to an existing LocalQueue (by its label, or for a
  starter naming none, the tenant namespace's LocalQueue `default`: tests/test_tenancy.py), Kueue
  admits it whole, and the kueue release's configuration has waitForPodsReady (all-or-nothing
  start) when the Helm values are in the bundle;
- Volcano: a Volcano Job with schedulerName volcano and minAvailable = its pod count (every task's
  minAvailable = its replicas); a RayCluster with KubeRay's volcano labels and fixed replicas, and
  KubeRay's batchScheduler.name = volcano in its values when present; a Deployment is given Volcano
  and its tenant's queue by the namespace (tests/test_tenancy.py);
- KAI: a PodGroup with minMember = the pod count and exactly that many owner-less pods naming it,
  each with schedulerName kai-scheduler; a RayCluster with the KAI queue label, and KubeRay's
  batchScheduler.name = kai-scheduler when present.
The expected pod count is worked out here from the decision, not taken from the renderer.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from generator.render.kubernetes import manifests as k8s
from tests.test_k8s_manifests import PLANS, _pod_templates
from tests.test_tenancy import kueue_local_queue, pods_of, volcano_podgroup_queue, volcano_scheduler_of

QUEUE_LABEL = {"kueue": "kueue.x-k8s.io/queue-name", "kai": "kai.scheduler/queue"}


def expected_pods(w) -> int:
    per_node = w.gpus_per_node
    if per_node and w.gpus:
        return max(w.facts.nodes, -(-w.gpus // per_node))
    return w.facts.nodes


def _bundle(plan) -> dict[str, bytes]:
    """The whole bundle: with the Helm values when the helm renderer is registered."""
    from generator import render

    return render.render(plan)


def _release_values(files: dict[str, bytes], chart: str) -> dict[str, Any] | None:
    releases = files.get("kubernetes/helm/releases.yaml")
    if releases is None:
        return None
    for rel in yaml.safe_load(releases)["releases"]:
        if rel["chart"] == chart:
            return yaml.safe_load(files[f"kubernetes/helm/{rel['values']}"]) or {}
    return None


def _main_objects(files: dict[str, bytes], w) -> list[dict[str, Any]]:
    # the headless Service and a ComputeDomain (multi-node NVLink, render/kubernetes/dra_driver.py) hold no pods
    return [o for o in yaml.safe_load_all(files[f"kubernetes/workloads/{w.name}.yaml"])
            if o["kind"] not in ("Service", "ComputeDomain")]


def _raycluster(files: dict[str, bytes], w) -> dict[str, Any]:
    """The workload's RayCluster: the one its starter RayJob submits to."""
    (job,) = _main_objects(files, w)
    name = job["spec"]["clusterSelector"]["ray.io/cluster"]
    return next(o for o in yaml.safe_load_all(files["kubernetes/manifests/40-ray.yaml"])
                if o["metadata"]["name"] == name and o["metadata"]["namespace"] == w.tenant)


KUEUE_ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"  # Kueue 0.19.2 pkg/constants ElasticJobAnnotation


def kueue_topology_flavors(files: dict[str, bytes]) -> list[str]:
    """The bundle's Kueue ResourceFlavors that name a Topology (every pod set on them is placed by
    topology, which Kueue 0.19 does not keep across an elastic job's resize without an alpha gate)."""
    text = files.get("kubernetes/manifests/20-kueue.yaml")
    return [o["metadata"]["name"] for o in yaml.safe_load_all(text or b"") if o and o["kind"] == "ResourceFlavor"
            and o["spec"].get("topologyName")]


def check_raycluster(plan, files, w, gang: bool) -> None:
    rc = _raycluster(files, w)
    labels = rc["metadata"]["labels"]
    groups = rc["spec"]["workerGroupSpecs"]
    # KubeRay's autoscaler only for a workload that is no fixed gang, under a scheduler admitting a
    # cluster that changes size (Kueue 0.19: as an elastic job, not where its flavors place by
    # topology): from no worker up to the workload's pods
    kueue_tas = plan.gang_scheduler == "kueue" and bool(kueue_topology_flavors(files))
    elastic = (not kueue_tas and not gang and not w.facts.tightly_coupled
               and w.name not in (plan.platform.fabric_workloads if plan.platform.network else ()))
    assert bool(rc["spec"].get("enableInTreeAutoscaling")) == elastic, (w.name, plan.gang_scheduler)
    elastic_job = (rc["metadata"].get("annotations") or {}).get(KUEUE_ELASTIC_JOB)
    assert elastic_job == ("true" if elastic and plan.gang_scheduler == "kueue" else None), (w.name, elastic_job)
    if elastic_job:  # Kueue's webhook takes the annotation only with the gate on: the release turns it on
        gates = (_release_values(files, "kueue") or {})["controllerManager"]["featureGates"]
        assert {"name": "ElasticJobsViaWorkloadSlices", "enabled": True} in gates, gates
    if elastic:
        assert sum(g["maxReplicas"] for g in groups) == expected_pods(w)
        assert all(g["minReplicas"] == g["replicas"] == 0 for g in groups)
        # KubeRay's sidecar in the head pod meets the namespace's `restricted`
        assert rc["spec"]["autoscalerOptions"]["securityContext"] == {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    else:
        assert sum(g["replicas"] for g in groups) == expected_pods(w)
        for g in groups:  # the operators size the gang from these: all equal, so no worker is outside it
            assert g["minReplicas"] == g["replicas"] == g["maxReplicas"]
    sched = plan.gang_scheduler
    if sched == "kueue":  # the tenant namespace's LocalQueue `default`, by name (tests/test_tenancy.py)
        assert labels.get(QUEUE_LABEL[sched]) == "default"
        assert kueue_local_queue(plan, rc) == "default"
    elif sched in QUEUE_LABEL:
        assert labels.get(QUEUE_LABEL[sched]) == w.tenant
    if sched == "volcano":
        assert labels.get("ray.io/scheduler-name") == "volcano"
        assert labels.get("volcano.sh/queue-name") == w.tenant
    if sched in ("volcano", "kai"):
        values = _release_values(files, "kuberay-operator")
        if values is not None:
            assert values["batchScheduler"]["name"] == ("volcano" if sched == "volcano" else "kai-scheduler")
            assert not values["batchScheduler"].get("enabled")
    if gang:
        assert sched is not None
    # the starter submits to this cluster, adding no pods of its own to the gang
    (job,) = _main_objects(files, w)
    assert job["kind"] == "RayJob" and job["spec"]["clusterSelector"]["ray.io/cluster"] == rc["metadata"]["name"]


def check_kueue(plan, files, w, gang: bool) -> None:
    (job,) = _main_objects(files, w)
    assert kueue_local_queue(plan, job) == "default"  # its namespace's queue, onto the tenant's
    if job["kind"] == "Job":
        pods = expected_pods(w)
        assert job["spec"]["completionMode"] == "Indexed"
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == pods
    if gang:
        values = _release_values(files, "kueue")
        if values is not None:
            config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
            wfpr = config.get("waitForPodsReady")
            assert wfpr is not None and wfpr.get("enable", True) is not False


def check_volcano(plan, files, w, gang: bool) -> None:
    (obj,) = _main_objects(files, w)
    if obj["kind"] == "Deployment":
        assert not gang
        for pod in pods_of(obj):
            assert volcano_scheduler_of(plan, pod) == "volcano"
            assert volcano_podgroup_queue(plan, w.tenant, None) == w.tenant
        return
    assert obj["apiVersion"] == "batch.volcano.sh/v1alpha1" and obj["spec"]["schedulerName"] == "volcano"
    tasks = obj["spec"]["tasks"]
    pods = sum(t["replicas"] for t in tasks)
    assert pods == expected_pods(w)
    assert all(t["template"]["spec"].get("schedulerName", "volcano") == "volcano" for t in tasks)
    if gang:
        assert obj["spec"]["minAvailable"] == pods
        assert all(t.get("minAvailable", t["replicas"]) == t["replicas"] for t in tasks)
    else:
        assert obj["spec"]["minAvailable"] <= 1


def check_kai(files, w, gang: bool) -> None:
    objs = _main_objects(files, w)
    groups = [o for o in objs if o["kind"] == "PodGroup"]
    if not gang:
        assert not groups, "a non-gang workload must not get a forced PodGroup"
        for o in objs:
            for tmpl in _pod_templates(o):
                assert tmpl["spec"]["schedulerName"] == "kai-scheduler"
                assert tmpl["metadata"]["labels"]["kai.scheduler/queue"] == w.tenant
        return
    (pg,) = groups
    pods = [o for o in objs if o["kind"] == "Pod"]
    assert pg["spec"]["minMember"] == len(pods) == expected_pods(w)
    assert pg["spec"]["queue"] == w.tenant
    assert len(objs) == 1 + len(pods), "every pod of the workload is in the PodGroup"
    for p in pods:
        assert p["metadata"]["annotations"]["pod-group-name"] == pg["metadata"]["name"]
        assert "ownerReferences" not in p["metadata"]  # KAI's pod grouper leaves owner-less pods to it
        assert p["spec"]["schedulerName"] == "kai-scheduler"
        assert p["metadata"]["labels"]["kai.scheduler/queue"] == w.tenant


def check_serving(plan, files, w) -> None:
    """A serving platform (issue 21): a multi-node replica (LeaderWorkerSet) is one gang of
    nodes_per_replica pods, each with its share of the replica's GPUs, admitted whole: Kueue's
    LeaderWorkerSet integration (each group one workload), Volcano's PodGroup per group (LWS's
    gangSchedulingManagement), KAI's queue label and scheduler on every pod. A single-pod replica
    needs no gang, only its tenant's queue."""
    sv = w.serving
    objs = _main_objects(files, w)
    server = objs[0]
    sched = plan.gang_scheduler
    if sv.stack == "lws":
        t = server["spec"]["leaderWorkerTemplate"]
        assert t["size"] == sv.nodes_per_replica > 1
        assert t["restartPolicy"] == "RecreateGroupOnPodRestart"  # a group restarts whole
        for tmpl in (t["leaderTemplate"], t["workerTemplate"]):
            [c] = tmpl["spec"]["containers"]
            assert int(c["resources"]["limits"]["nvidia.com/gpu"]) * t["size"] == sv.gpus_per_replica
        if sched == "volcano":
            assert _release_values(files, "lws") == {"gangSchedulingManagement": {"schedulerProvider": "volcano"}}
    if sched == "kueue":
        assert kueue_local_queue(plan, server) == "default", (w.name, server["kind"])
    elif sched == "kai":
        for pod in pods_of(server):
            if server["kind"] == "RayService":  # KubeRay's KAI plugin stamps the RayCluster's pods
                assert server["metadata"]["labels"][QUEUE_LABEL["kai"]] == w.tenant
                continue
            assert pod["spec"]["schedulerName"] == "kai-scheduler"
            assert pod["metadata"]["labels"][QUEUE_LABEL["kai"]] == w.tenant
    elif sched == "volcano" and server["kind"] != "RayService":
        for pod in pods_of(server):
            assert volcano_scheduler_of(plan, pod) == "volcano"


GANG_PLANS = sorted(pid for pid, p in PLANS.items() if any(w.gang_scheduler_required for w in p.workloads))


def test_the_plans_cover_every_scheduler_and_class_with_a_gang():
    seen = {(PLANS[pid].gang_scheduler, w.workload_class) for pid in GANG_PLANS
            for w in PLANS[pid].workloads if w.gang_scheduler_required}
    for sched in ("kueue", "volcano", "kai"):
        assert {(sched, "training"), (sched, "ray")} <= seen


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_gang_invariant(pid):
    plan = PLANS[pid]
    files = _bundle(plan)
    for w in plan.workloads:
        if w.plane != plan.kube_plane.name:
            continue
        gang = w.gang_scheduler_required
        if gang:
            assert plan.gang_scheduler, f"{w.name} needs a gang but the plan has no gang scheduler"
            assert expected_pods(w) > 1
        if w.serving is not None:
            check_serving(plan, files, w)
        elif w.workload_class == "ray":
            check_raycluster(plan, files, w, gang)
        elif plan.gang_scheduler == "kueue":
            check_kueue(plan, files, w, gang)
        elif plan.gang_scheduler == "volcano":
            check_volcano(plan, files, w, gang)
        elif plan.gang_scheduler == "kai":
            check_kai(files, w, gang)


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_single_node_workloads_have_no_gang_forced(pid):
    plan = PLANS[pid]
    files = k8s.render(plan)
    for w in plan.workloads:
        if w.plane != plan.kube_plane.name or w.facts.nodes > 1:
            continue
        assert not w.gang_scheduler_required
        for o in _main_objects(files, w):
            assert o["kind"] != "PodGroup"
            if o["apiVersion"] == "batch.volcano.sh/v1alpha1":
                assert o["spec"]["minAvailable"] <= 1
                assert all(t.get("minAvailable", 1) <= 1 for t in o["spec"]["tasks"])
            for tmpl in _pod_templates(o):
                assert "pod-group-name" not in tmpl.get("metadata", {}).get("annotations", {})
                assert "kueue.x-k8s.io/podset-preferred-topology" not in tmpl.get("metadata", {}).get(
                    "annotations", {}) or expected_pods(w) > 1


# ---- the fabric invariant (issue 15) -------------------------------------------------------------
#
# A tightly coupled workload whose pods span nodes, on a plane with an RDMA-capable fabric, gets the
# fabric in every pod that carries its collectives (a training job's pods, a RayCluster's workers):
# the network's device resource in requests and limits, IPC_LOCK, NCCL's interface variables and, on
# InfiniBand/RoCE, the secondary network by Multus' annotation, whose NetworkAttachmentDefinition
# exists in the pod's namespace. Single-node, service and Ray-head/submitter pods get none of it.
# "RDMA-capable" is worked out here from the input: a generic (bare-metal or VM) InfiniBand/RoCE
# fabric, or EKS (EFA). GKE, AKS and OKE are not configured by orchgen (a warning says so).

NETWORKS = "k8s.v1.cni.cncf.io/networks"


def fabric_of(plan) -> str | None:
    if plan.platform.provider == "eks":
        return "vpc.amazonaws.com/efa"
    if plan.platform.provider == "generic" and plan.fabric.kind in ("infiniband", "roce"):
        return "rdma/rdma_shared_device_a"
    return None


def collective_templates(files, w) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(templates of pods that run the collectives, templates of the workload's other pods)."""
    if w.serving is not None:  # a serving platform's server pods (tests/test_tenancy.py pods_of)
        return pods_of(_main_objects(files, w)[0]), []
    if w.workload_class == "ray":
        rc = _raycluster(files, w)
        (job,) = _main_objects(files, w)
        return ([g["template"] for g in rc["spec"]["workerGroupSpecs"]],
                [rc["spec"]["headGroupSpec"]["template"], *_pod_templates(job)])
    return [t for o in _main_objects(files, w) for t in _pod_templates(o)], []


def fabric_parts(tmpl: dict[str, Any], resource: str) -> dict[str, Any]:
    containers = tmpl["spec"]["containers"]
    return {
        "requests": {c.get("resources", {}).get("requests", {}).get(resource) for c in containers},
        "limits": {c.get("resources", {}).get("limits", {}).get(resource) for c in containers},
        "ipc_lock": all("IPC_LOCK" in c.get("securityContext", {}).get("capabilities", {}).get("add", [])
                        for c in containers),
        "env": {e["name"]: e.get("value") for c in containers for e in c.get("env", [])},
        "network": tmpl.get("metadata", {}).get("annotations", {}).get(NETWORKS),
    }


def test_the_plans_cover_every_fabric():
    from tests.test_k8s_manifests import PLANS as ALL

    kinds = {fabric_of(p) for p in ALL.values()}
    assert {"vpc.amazonaws.com/efa", "rdma/rdma_shared_device_a", None} <= kinds
    assert any(p.fabric.kind == "roce" and fabric_of(p) for p in ALL.values())


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_fabric_invariant(pid):
    plan = PLANS[pid]
    files = _bundle(plan)
    resource = fabric_of(plan)
    releases = [r["name"] for r in yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"]]
    network_objs = list(yaml.safe_load_all(files.get("kubernetes/manifests/35-network.yaml", b"")))
    for w in plan.workloads:
        if w.plane != plan.kube_plane.name:
            continue
        # a serving replica over several nodes (LeaderWorkerSet group, multi-node RayService) passes
        # activations over NCCL between them: coupled like a training gang (issue 21)
        coupled = (w.serving.nodes_per_replica > 1 if w.serving is not None else
                   w.facts.tightly_coupled and expected_pods(w) > 1 and w.workload_class != "service")
        wired, others = collective_templates(files, w)
        assert wired, w.name
        for tmpl in others:
            parts = fabric_parts(tmpl, resource or "rdma/rdma_shared_device_a")
            assert parts["requests"] == {None} and not parts["network"], (w.name, "a pod without collectives")
        for tmpl in wired:
            if not (coupled and resource):
                for res in ("rdma/rdma_shared_device_a", "vpc.amazonaws.com/efa"):
                    parts = fabric_parts(tmpl, res)
                    assert parts["requests"] == {None} == parts["limits"], (w.name, res)
                    assert not parts["network"] and not parts["ipc_lock"], w.name
                continue
            parts = fabric_parts(tmpl, resource)
            assert None not in parts["requests"] and parts["requests"] == parts["limits"], (w.name, parts)
            assert all(int(n) >= 1 for n in parts["requests"])
            assert parts["ipc_lock"], w.name
            assert "NCCL_SOCKET_IFNAME" in parts["env"], w.name
            if resource == "vpc.amazonaws.com/efa":
                assert parts["env"].get("FI_PROVIDER") == "efa" and parts["network"] is None
                assert "aws-efa-k8s-device-plugin" in releases
                continue
            assert parts["env"]["NCCL_IB_HCA"] == "mlx5" and parts["env"]["NCCL_SOCKET_IFNAME"] == "net1"
            assert parts["requests"] == {"1"}
            nad = [o for o in network_objs if o["kind"] == "NetworkAttachmentDefinition"
                   and o["metadata"]["name"] == parts["network"] and o["metadata"]["namespace"] == w.tenant]
            assert nad, (w.name, parts["network"])
            (policy,) = [o for o in network_objs if o["kind"] == "NicClusterPolicy"]
            config = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])
            assert [c["resourceName"] for c in config["configList"]] == [resource.split("/", 1)[1]]
            assert "network-operator" in releases


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_single_node_workloads_get_no_fabric(pid):
    plan = PLANS[pid]
    files = k8s.render(plan)
    for w in plan.workloads:
        if w.plane != plan.kube_plane.name or expected_pods(w) > 1:
            continue
        for o in _main_objects(files, w):
            for tmpl in _pod_templates(o):
                text = yaml.safe_dump(tmpl)
                assert "rdma/" not in text and "vpc.amazonaws.com/efa" not in text and NETWORKS not in text
                assert "IPC_LOCK" not in text


@pytest.mark.parametrize("gang", ["volcano", "kai", "kueue"])
def test_a_ray_workload_that_is_no_fixed_gang_autoscales_where_the_scheduler_allows(gang):
    """A Ray pipeline that is not tightly coupled: KubeRay's autoscaler (0 workers up to its pods) under
    Volcano and KAI, and under Kueue as an elastic job on this plane without a Topology; the RayCluster
    passes KubeRay's CRD schema."""
    from generator.validate.crds import CRDRegistry
    from tests._consumers import reference_dir
    from tests.test_k8s_manifests import plan_from, platform_fleet

    doc = platform_fleet(gang)
    rl = next(w for w in doc["workloads"] if w["name"] == "rl")
    rl["tightly_coupled"] = False
    plan = plan_from(doc)
    (w,) = [w for w in plan.workloads if w.name == "rl"]
    assert w.workload_class == "ray" and not w.gang_scheduler_required
    files = _bundle(plan)
    check_raycluster(plan, files, w, gang=False)
    rc = _raycluster(files, w)
    assert not kueue_topology_flavors(files)
    assert rc["spec"]["enableInTreeAutoscaling"] is True
    crd = CRDRegistry.from_dir(reference_dir())
    assert not crd.validate(rc), crd.validate(rc)
    readme = files["README.md"].decode()
    assert "KubeRay's autoscaler (`enableInTreeAutoscaling: true`" in readme and "`rl`" in readme
    if gang == "kueue":
        assert "an elastic job" in readme.replace("\n  ", " ")
