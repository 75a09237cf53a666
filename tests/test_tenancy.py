"""Tenancy that holds: every pod of a tenant namespace goes through its tenant's queue, nothing
outside the tenant namespaces is under the queueing scheduler's webhooks, and the ResourceQuota,
the borrowing rule and the README agree.

Each scheduler's own rules, as read in its source at the pinned version, are applied here to the
bundle's objects and values together (fast, for every plan of tests/test_k8s_manifests.py):
- Kueue 0.19.2 (pkg/controller/jobframework/defaults.go; the webhooks' namespaceSelector in
  charts/kueue/templates/webhook/manifests.yaml): a job without a queue label, in a namespace that
  matches managedJobsNamespaceSelector and has a LocalQueue `default`, gets that label; with
  manageJobsWithoutQueueName it stays suspended until that queue admits it.
- Volcano 1.15.1 (pkg/webhooks/admission/pods/mutate, podgroups/mutate): a pod of a namespace in
  a `namespace` resource group gets the group's schedulerName; a PodGroup of queue `default` gets
  its namespace's `scheduling.volcano.sh/queue-name`.
- The ValidatingAdmissionPolicy (Volcano, KAI) is evaluated with cel-python on the starter pods
  and PodGroups, on the RayCluster pods KubeRay makes, and on ones that must be refused. The real
  API server evaluates KAI's on oke-training's KAI bundle too (tests/test_kube_real.py
  test_kai_bundle_goes_in_and_its_queue_policy_admits_what_the_readme_says), and Volcano's runs with
  the real Volcano there.
"""
from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from generator.render import report
from generator.render.kubernetes import common, gpu_health, helm, manifests, volcano
from tests._consumers import reference_dir, require
from tests.test_k8s_manifests import PLANS

Obj = dict[str, Any]
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


# the GPU-health checker's and controller's policies and their bindings (generator/render/kubernetes/gpu_health.py)
GPU_HEALTH_POLICY = (f"orchgen-{gpu_health.NAME}-own-node", f"orchgen-{gpu_health.CONTROLLER}")

def objects(plan) -> list[Obj]:
    return [o for objs in manifests.manifests(plan).values() for o in objs]


def starters(plan) -> list[Obj]:
    return [o for objs in manifests.starter_files(plan).values() for o in objs]


def by_kind(objs: list[Obj], kind: str) -> list[Obj]:
    """Objects of `kind`; the Pod Security guard of privileged tenant namespaces (tests/
    test_tenant_access.py) and the GPU-health checker's own-node policy (tests/test_gpu_health.py) are left
    out of the admission policies, which here are the queue policy's."""
    return [o for o in objs if o["kind"] == kind and not (
        kind.startswith("ValidatingAdmissionPolicy") and (o["metadata"]["name"].endswith(guard_name_suffix())
                                                          or o["metadata"]["name"].startswith(GPU_HEALTH_POLICY)))]


def guard_name_suffix() -> str:
    return "-tenant-pod-security"


def namespaces(plan) -> dict[str, Obj]:
    """The tenant Namespaces as the API server keeps them: with the kubernetes.io/metadata.name
    label it adds to every namespace."""
    out = {}
    for o in by_kind(objects(plan), "Namespace"):
        if common.TENANT_LABEL not in o["metadata"].get("labels", {}):
            continue  # not a tenant's: GKE's gpu-operator namespace (issue 15) holds the operator's quota
        o = copy.deepcopy(o)
        o["metadata"]["labels"]["kubernetes.io/metadata.name"] = o["metadata"]["name"]
        out[o["metadata"]["name"]] = o
    return out


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector against labels (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        present, value = e["key"] in labels, labels.get(e["key"])
        ok = {"Exists": present, "DoesNotExist": not present, "In": value in e.get("values", []),
              "NotIn": value not in e.get("values", [])}[e["operator"]]
        if not ok:
            return False
    return True


def outside_namespaces(plan) -> list[dict[str, str]]:
    """Labels of namespaces that are no tenant's: every release's, the system's and GitOps tools'."""
    names = {c.namespace for c in plan.charts.values()} | {"kube-system", "default", "argocd", "flux-system"}
    return [{"kubernetes.io/metadata.name": n} for n in sorted(names - set(namespaces(plan)))]


def pods_of(obj: Obj) -> list[Obj]:
    """The pods an object makes, as the API server sees them (schedulerName defaulted)."""
    ns = obj["metadata"].get("namespace")
    if obj["kind"] == "Pod":
        pods = [copy.deepcopy(obj)]
    else:
        sp = obj.get("spec", {})
        if obj["kind"] == "RayService":  # its RayCluster's pods
            sp = sp["rayClusterConfig"]
        templates = ([sp["template"]] if "template" in sp else
                     [t["template"] for t in sp.get("tasks", [])] or
                     [sp["headGroupSpec"]["template"], *(g["template"] for g in sp.get("workerGroupSpecs", []))]
                     if obj["kind"] in ("RayCluster", "RayService") else [])
        if obj["kind"] == "InferenceService":  # KServe's predictor: a PodSpec plus its own fields
            pred = {k: v for k, v in sp["predictor"].items() if k not in ("labels", "minReplicas", "maxReplicas")}
            templates = [{"metadata": {"labels": sp["predictor"].get("labels", {})}, "spec": pred}]
        if obj["kind"] == "LeaderWorkerSet":
            t = sp["leaderWorkerTemplate"]
            templates = [t["leaderTemplate"], t["workerTemplate"]]
        pods = [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {**copy.deepcopy(t.get("metadata", {})), "namespace": ns, "name": "p"},
                 "spec": copy.deepcopy(t["spec"])} for t in templates]
    for pod in pods:
        pod["spec"].setdefault("schedulerName", "default-scheduler")
    return pods


def plans_with(gang: str) -> list[str]:
    return [pid for pid, plan in sorted(PLANS.items()) if plan.gang_scheduler == gang
            and common.queues_enabled(plan)]


# ---- Kueue ---------------------------------------------------------------------------------------

FRAMEWORK = {("batch/v1", "Job"): "batch/job", ("apps/v1", "Deployment"): "deployment", ("v1", "Pod"): "pod",
             ("ray.io/v1", "RayCluster"): "ray.io/raycluster",
             # the serving stacks: KServe's predictor is a Deployment in the same namespace
             ("serving.kserve.io/v1beta1", "InferenceService"): "deployment",
             ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkerset.x-k8s.io/leaderworkerset",
             ("ray.io/v1", "RayService"): "ray.io/rayservice"}


def kueue_config(plan) -> dict[str, Any]:
    return yaml.safe_load(helm.VALUES["kueue"](plan)["managerConfig"]["controllerManagerConfigYaml"])


def kueue_local_queue(plan, obj: Obj) -> str | None:
    """The LocalQueue Kueue admits `obj` through, None when Kueue leaves it alone."""
    config = kueue_config(plan)
    ns = namespaces(plan).get(obj["metadata"]["namespace"])
    labels = ns["metadata"]["labels"] if ns else {"kubernetes.io/metadata.name": obj["metadata"]["namespace"]}
    if not selects(config["managedJobsNamespaceSelector"], labels):
        return None
    framework = FRAMEWORK.get((obj["apiVersion"], obj["kind"]))
    if framework not in config["integrations"]["frameworks"]:
        return None
    named = obj["metadata"].get("labels", {}).get(QUEUE_LABEL)
    if named:
        return named
    queues = {q["metadata"]["name"] for q in by_kind(objects(plan), "LocalQueue")
              if q["metadata"]["namespace"] == obj["metadata"]["namespace"]}
    if common.KUEUE_DEFAULT_LOCAL_QUEUE in queues:
        return common.KUEUE_DEFAULT_LOCAL_QUEUE
    assert not config["manageJobsWithoutQueueName"], "a managed job with no queue would wait forever"
    return None


@pytest.mark.parametrize("pid", plans_with("kueue"))
def test_kueue_admits_every_tenant_job_through_its_namespaces_default_queue(pid):
    """The starters name no queue; Kueue's config and objects together put each in its tenant's
    LocalQueue `default`, onto the tenant's ClusterQueue, with a flavor its pods can use."""
    plan = PLANS[pid]
    config = kueue_config(plan)
    assert config["manageJobsWithoutQueueName"] is True
    cqs = {q["metadata"]["name"]: q for q in by_kind(objects(plan), "ClusterQueue")}
    lqs = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in by_kind(objects(plan), "LocalQueue")}
    flavors = {f["metadata"]["name"]: f for f in by_kind(objects(plan), "ResourceFlavor")}
    checked = 0
    for w, obj in [(w, o) for w in common.workloads(plan) for o in manifests.starter_files(plan)[f"{w.name}.yaml"]]:
        if (obj["apiVersion"], obj["kind"]) not in FRAMEWORK:
            continue  # Services; RayJobs on an existing cluster are not Kueue's (its RayCluster is)
        if obj["kind"] != "RayService":  # Ray objects name `default` explicitly, like the RayClusters
            assert QUEUE_LABEL not in obj["metadata"].get("labels", {}), "starters rely on the namespace"
        lq = kueue_local_queue(plan, obj)
        assert lq == common.KUEUE_DEFAULT_LOCAL_QUEUE, (w.name, lq)
        cq = cqs[lqs[(obj["metadata"]["namespace"], lq)]["spec"]["clusterQueue"]]
        assert cq["metadata"]["name"] == common.queue_of(w.tenant)
        assert selects(cq["spec"]["namespaceSelector"], namespaces(plan)[w.tenant]["metadata"]["labels"])
        for pod in pods_of(obj):  # some flavor of the queue fits the pod's node selector
            names = [f["name"] for rg in cq["spec"]["resourceGroups"] for f in rg["flavors"]]
            assert any(all(pod["spec"]["nodeSelector"].get(k) == v
                           for k, v in flavors[n]["spec"]["nodeLabels"].items()) for n in names), w.name
        checked += 1
    for rc in by_kind(objects(plan), "RayCluster"):
        assert kueue_local_queue(plan, rc) == common.KUEUE_DEFAULT_LOCAL_QUEUE
        checked += 1
    assert checked or not common.workloads(plan)


@pytest.mark.parametrize("pid", plans_with("kueue"))
def test_kueue_and_its_webhooks_stay_out_of_other_namespaces(pid):
    plan = PLANS[pid]
    selector = kueue_config(plan)["managedJobsNamespaceSelector"]
    assert selector == {"matchExpressions": [{"key": common.TENANT_LABEL, "operator": "Exists"}]}
    for labels in outside_namespaces(plan):
        assert not selects(selector, labels), labels
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "j", "namespace": labels["kubernetes.io/metadata.name"]}}
        assert kueue_local_queue(plan, job) is None
    for ns in namespaces(plan).values():
        assert selects(selector, ns["metadata"]["labels"])


def test_kueue_config_keys_exist_in_the_pinned_configuration_api():
    """managedJobsNamespaceSelector and manageJobsWithoutQueueName are fields of Kueue 0.19.2's
    config.kueue.x-k8s.io/v1beta2 Configuration (apis/config/v1beta2/configuration_types.go);
    the chart's own default config spells neither, so check the API version we write."""
    config = kueue_config(PLANS["platform+kueue"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert {"managedJobsNamespaceSelector", "manageJobsWithoutQueueName"} <= set(config)


# ---- Volcano -------------------------------------------------------------------------------------

def volcano_values(plan) -> dict[str, Any]:
    return helm.VALUES["volcano"](plan)["custom"]


def volcano_scheduler_of(plan, pod: Obj) -> str:
    """schedulerName after Volcano's /pods/mutate webhook (its resource groups by namespace)."""
    custom = volcano_values(plan)
    assert "/pods/mutate" in custom["enabled_admissions"].split(",")
    ns = namespaces(plan)[pod["metadata"]["namespace"]]
    if not selects({"matchExpressions": custom["webhooks_namespace_selector_expressions"]}, ns["metadata"]["labels"]):
        return pod["spec"]["schedulerName"]
    for group in yaml.safe_load(custom["admission_config_override"])["resourceGroups"]:
        if group["object"]["key"] == "namespace" and pod["metadata"]["namespace"] in group["object"]["value"]:
            return group["schedulerName"]
    return pod["spec"]["schedulerName"]


def volcano_podgroup_queue(plan, namespace: str, queue: str | None) -> str:
    """spec.queue of a PodGroup after its CRD default and /podgroups/mutate."""
    queue = queue or "default"
    assert "/podgroups/mutate" in volcano_values(plan)["enabled_admissions"].split(",")
    if queue == "default":
        annotations = namespaces(plan)[namespace]["metadata"].get("annotations", {})
        queue = annotations.get(common.VOLCANO_QUEUE_ANNOTATION, queue)
    return queue


@pytest.mark.parametrize("pid", plans_with("volcano"))
def test_volcano_takes_every_tenant_pod_into_its_tenants_queue(pid):
    plan = PLANS[pid]
    queues = {q["metadata"]["name"] for q in by_kind(objects(plan), "Queue")}
    policy = by_kind(objects(plan), "ValidatingAdmissionPolicy")
    assert len(policy) == 1
    for w in common.workloads(plan):
        for obj in manifests.starter_files(plan)[f"{w.name}.yaml"]:
            if obj["kind"] == "Job" and obj["apiVersion"].startswith("batch.volcano.sh"):
                assert obj["spec"]["queue"] == common.queue_of(w.tenant)
                group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                         "metadata": {"namespace": w.tenant, "name": "pg"}, "spec": {"queue": obj["spec"]["queue"]}}
                assert vap_errors(policy[0], group, namespaces(plan)[w.tenant]) == []
            for pod in pods_of(obj):
                if obj["kind"] in ("Deployment", "Pod"):
                    assert pod["spec"]["schedulerName"] == "default-scheduler"  # nothing in the manifest ...
                assert volcano_scheduler_of(plan, pod) == "volcano"  # ... and still Volcano's
                queue = volcano_podgroup_queue(plan, w.tenant, pod["metadata"].get("annotations", {}).get(
                    common.VOLCANO_QUEUE_ANNOTATION))
                assert queue == common.queue_of(w.tenant) and queue in queues
                group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                         "metadata": {"namespace": w.tenant, "name": "pg"}, "spec": {"queue": queue}}
                assert vap_errors(policy[0], group, namespaces(plan)[w.tenant]) == []


@pytest.mark.parametrize("pid", plans_with("volcano"))
def test_volcano_webhooks_stay_out_of_other_namespaces(pid):
    plan = PLANS[pid]
    selector = {"matchExpressions": volcano_values(plan)["webhooks_namespace_selector_expressions"]}
    for labels in outside_namespaces(plan):
        assert not selects(selector, labels)
    groups = yaml.safe_load(volcano_values(plan)["admission_config_override"])["resourceGroups"]
    assert [g["object"]["value"] for g in groups] == [sorted(namespaces(plan), key=list(namespaces(plan)).index)]


def test_volcano_admissions_extend_the_pinned_default():
    defaults = yaml.safe_load((reference_dir() / "volcano" / "values.yaml").read_text())
    assert defaults["custom"]["enabled_admissions"] == volcano.DEFAULT_ADMISSIONS
    assert defaults["custom"]["admission_config_override"] is None
    assert defaults["custom"]["webhooks_namespace_selector_expressions"] is None


# ---- the admission policy (Volcano, KAI), evaluated ---------------------------------------------

def vap_errors(policy: Obj, obj: Obj, namespace: Obj) -> list[str]:
    """The messages of the policy's failing validations for `obj` ([] if it is admitted or the
    policy does not match it), evaluated with cel-python as the API server evaluates CEL."""
    require(_importable("celpy"), "cel-python not installed")
    import celpy

    spec = policy["spec"]
    match = spec["matchConstraints"]
    if not selects(match["namespaceSelector"], namespace["metadata"]["labels"]):
        return []
    group = obj["apiVersion"].rpartition("/")[0]
    resource = obj["kind"].lower() + "s"
    if not any(group in r["apiGroups"] and resource in r["resources"] for r in match["resourceRules"]):
        return []
    env = celpy.Environment()
    activation = {"object": celpy.json_to_cel(obj), "namespaceObject": celpy.json_to_cel(namespace)}
    out = []
    for v in spec["validations"]:
        result = env.program(env.compile(v["expression"])).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), (v["expression"], result)
        if not result:
            if "messageExpression" in v:
                out.append(str(env.program(env.compile(v["messageExpression"])).evaluate(activation)))
            else:
                out.append(v["message"])
    return out


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("pid", plans_with("kai"))
def test_kai_policy_admits_the_bundles_pods_and_refuses_strays(pid):
    plan = PLANS[pid]
    [policy] = by_kind(objects(plan), "ValidatingAdmissionPolicy")
    [binding] = by_kind(objects(plan), "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    ns_objs = namespaces(plan)
    admitted = 0
    for obj in starters(plan):
        ns = ns_objs[obj["metadata"]["namespace"]]
        if obj["kind"] == "PodGroup":
            assert vap_errors(policy, obj, ns) == []
        for pod in pods_of(obj):
            if obj["kind"] == "RayService":  # KubeRay copies its labels to its RayCluster (below)
                pod["spec"]["schedulerName"] = "kai-scheduler"
                pod["metadata"].setdefault("labels", {})["kai.scheduler/queue"] = \
                    obj["metadata"]["labels"]["kai.scheduler/queue"]
            assert vap_errors(policy, pod, ns) == [], obj["metadata"]["name"]
            admitted += 1
    for rc in by_kind(objects(plan), "RayCluster"):  # KubeRay's KAI plugin stamps its pods
        for pod in pods_of(rc):
            pod["spec"]["schedulerName"] = "kai-scheduler"
            pod["metadata"].setdefault("labels", {})["kai.scheduler/queue"] = rc["metadata"]["labels"]["kai.scheduler/queue"]
            assert vap_errors(policy, pod, ns_objs[rc["metadata"]["namespace"]]) == []
            admitted += 1
    assert admitted or not common.workloads(plan)
    tenants = list(ns_objs)
    ns = ns_objs[tenants[0]]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": tenants[0],
           "labels": {"kai.scheduler/queue": common.queue_of(tenants[0])}},
           "spec": {"schedulerName": "default-scheduler", "containers": []}}
    assert any("schedulerName" in m for m in vap_errors(policy, pod, ns))  # forgot the scheduler
    pod["spec"]["schedulerName"] = "kai-scheduler"
    assert vap_errors(policy, pod, ns) == []
    del pod["metadata"]["labels"]
    assert vap_errors(policy, pod, ns)  # forgot the queue
    pod["metadata"]["labels"] = {"kai.scheduler/queue": "someone-else"}
    assert vap_errors(policy, pod, ns)  # another tenant's queue
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": tenants[0]}, "spec": {"queue": "someone-else"}}
    assert vap_errors(policy, group, ns)
    outside = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator", "labels": {}}}
    pod["metadata"]["namespace"] = "gpu-operator"
    assert vap_errors(policy, pod, outside) == []  # not a tenant namespace: not the policy's business


def test_volcano_policy_refuses_another_tenants_queue():
    plan = PLANS["platform+volcano"]
    [policy] = by_kind(objects(plan), "ValidatingAdmissionPolicy")
    ns = namespaces(plan)["research"]
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "research"}, "spec": {"queue": "prod"}}
    assert vap_errors(policy, group, ns) == ["a PodGroup in namespace research must use queue research"]


def test_kueue_needs_no_policy():
    """Kueue's LocalQueues are namespaced: a tenant can only name its own."""
    for pid in plans_with("kueue"):
        assert not by_kind(objects(PLANS[pid]), "ValidatingAdmissionPolicy")


# ---- ResourceQuota, borrowing and README agree ---------------------------------------------------

def borrowing_ceiling_gpus(plan, tenant: str) -> int:
    """The most GPUs the scheduler lets a tenant's queue hold, borrowing included."""
    objs = objects(plan)
    plane = sum(s.gpus for s in plan.kube_plane.slices)
    if plan.gang_scheduler == "kueue":
        [cq] = [q for q in by_kind(objs, "ClusterQueue") if q["metadata"]["name"] == common.queue_of(tenant)]
        cohort = [q for q in by_kind(objs, "ClusterQueue") if q["spec"]["cohortName"] == cq["spec"]["cohortName"]]
        assert "borrowingLimit" not in str(cq)  # unlimited borrowing from the cohort
        return sum(int(r["nominalQuota"]) for q in cohort for rg in q["spec"]["resourceGroups"]
                   for f in rg["flavors"] for r in f["resources"] if r["name"] == common.GPU)
    if plan.gang_scheduler == "volcano":
        [q] = [q for q in by_kind(objs, "Queue") if q["metadata"]["name"] == common.queue_of(tenant)]
        return int(q["spec"]["capability"][common.GPU])
    queues = {q["metadata"]["name"]: q for q in by_kind(objs, "Queue")}
    leaf = queues[common.queue_of(tenant)]
    assert leaf["spec"]["resources"]["gpu"]["limit"] == -1
    return min(plane, queues[leaf["spec"]["parentQueue"]]["spec"]["resources"]["gpu"]["quota"])


@pytest.mark.parametrize("pid", sorted(PLANS))
def test_resource_quota_is_the_borrowing_ceiling_and_the_readme_says_so(pid):
    plan = PLANS[pid]
    readme = report.render(plan)["README.md"].decode()
    tenant_rqs = [rq for rq in by_kind(objects(plan), "ResourceQuota") if rq["metadata"]["namespace"] in namespaces(plan)]
    if common.queue_is_quota(plan):
        # the ClusterQueue is the tenant's quota: a ResourceQuota would refuse the gated pods Kueue queues
        assert tenant_rqs == []
        assert "**No GPU ResourceQuota under Kueue.**" in readme and "ResourceQuota and borrowing" not in readme
        return
    assert len(tenant_rqs) == len(plan.tenants)
    for rq in tenant_rqs:
        tenant = rq["metadata"]["namespace"]
        hard = int(rq["spec"]["hard"]["requests.nvidia.com/gpu"])
        if common.queues_enabled(plan):
            # whole GPUs (nvidia.com/gpu); a MIG pool counts in its own resource, nvidia.com/mig-*
            ceiling = borrowing_ceiling_gpus(plan, tenant)
            # plus the pods of the tenant's LeaderWorkerSet groups that may wait, gated or Pending, at
            # max_replicas: a ResourceQuota counts them, and an admitted group must still get its pods
            waiting = sum(w.serving.max_replicas * w.serving.nodes_per_replica * w.serving.pod.gpus
                          for w in plan.workloads if w.tenant == tenant and w.serving is not None
                          and w.serving.stack == "lws")
            if plan.gang_scheduler == "kai":  # KAI's queues count whole GPUs, a MIG pool's included
                assert ceiling == sum(s.gpus for s in plan.kube_plane.slices)
                assert hard == common.plane_devices(plan)[common.GPU] + waiting
            else:
                assert hard - waiting == ceiling == common.plane_devices(plan)[common.GPU]
        else:
            t = next(t for t in plan.tenants if t.name == tenant)
            assert hard == sum(q.gpus for q in t.quotas.values())
    if common.queues_enabled(plan):
        assert "**Every pod of a tenant namespace goes through the tenant's queue.**" in readme
        word = {"kueue": "LocalQueue `default`", "volcano": "`scheduling.volcano.sh/queue-name`",
                "kai": f"`{plan.name}-tenant-queues`"}[plan.gang_scheduler]
        assert word in readme
        assert "bypasses the shares" not in readme


@pytest.mark.parametrize("gang", ["volcano", "kai"])
def test_before_kubernetes_1_30_there_is_no_policy_and_the_readme_says_so(gang):
    """ValidatingAdmissionPolicy v1 is GA in 1.30; before, the bundle must not hold one (the API
    server would refuse the manifest), and under KAI the README says tenancy then rests on the
    manifests."""
    from tests.test_k8s_manifests import plan_from, platform_fleet

    old = plan_from(platform_fleet(gang, kubernetes_version="1.29"))
    assert not by_kind(objects(old), "ValidatingAdmissionPolicy")
    readme = report.render(old)["README.md"].decode()
    assert "tenant-queues" not in readme
    if gang == "kai":
        assert "needs Kubernetes 1.30" in readme and "bypasses the shares" in readme
    new = plan_from(platform_fleet(gang, kubernetes_version="1.30"))
    assert by_kind(objects(new), "ValidatingAdmissionPolicy")
