"""The serving platform (issue 21): each long-lived service's stack, read by its real consumers.

- every new custom resource (InferenceService, LeaderWorkerSet, RayService, ScaledObject, HTTPRoute)
  passes its CRD's schema and CEL rules (../shared/reference, Gateway API from
  ../shared/charts/_extra-crds); built-in kinds pass kubernetes-validate (strict);
- every new release renders with `helm template` of the pinned chart and what it renders validates;
- per stack, the objects read as their controllers read them: the Service selects the serving pods,
  the probes hit the container's port, the PDB matches the pods, the autoscaler targets the object
  the controller scales within min/max, priority and queue wiring, tolerations of the pool's taints;
- a multi-node replica is one gang under each scheduler (Kueue's LWS integration, Volcano's
  PodGroup per group through LWS's gangSchedulingManagement);
- re-plans (replicas changed, a model added, one removed) pass `orchgen validate --against`.
"""
from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import bundle, spec
from generator.decide import make_plan
from generator.render import render
from generator.render.kubernetes import common, kueue, serving
from generator.validate.builtin import is_builtin, validate_builtin
from generator.validate.crds import CRDRegistry
from tests._consumers import REPO, charts_dir, reference_dir, require, tool
from tests.support import plan_of

EXAMPLE = REPO / "examples" / "serving-platform.yaml"
STACKS = {"chat-api": "kserve", "rerank": "plain", "llama-405b": "lws", "agent-pipeline": "rayservice"}
NEW_RELEASES = ("kserve-crd", "kserve-resources", "lws", "keda", "jupyterhub")


@cache
def registry() -> CRDRegistry:
    return CRDRegistry.from_paths([reference_dir(), charts_dir() / "_extra-crds" / "gateway-api"])


def _doc(**changes: Any) -> dict[str, Any]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    for path, value in changes.items():
        node = doc
        *parents, last = path.split(".")
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is None:
            node.pop(last)
        else:
            node[last] = value
    return doc


@pytest.fixture(scope="module")
def planned():
    plan = plan_of(EXAMPLE)
    return plan, render(plan)


def objects_of(files: dict[str, bytes], workload: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(files[f"kubernetes/workloads/{workload}.yaml"]) if d]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [obj] = [o for o in objs if o["kind"] == kind]
    return obj


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# ---- the decision ------------------------------------------------------------------------------

def test_each_service_gets_its_stack_with_the_reason_in_plan_json_and_readme(planned):
    plan, files = planned
    doc = json.loads(files["plan.json"])
    got = {w["name"]: w["serving"]["stack"] for w in doc["workloads"] if "serving" in w}
    assert got == STACKS
    readme = files["README.md"].decode()
    for w in doc["workloads"]:
        if "serving" in w:
            assert w["serving"]["why"] and w["serving"]["why"].split(":")[0] in readme, w["name"]
    assert "multi_tenant" not in got and "finetune" not in got  # a batch job keeps its Job
    assert {"kserve-crd", "kserve-resources", "lws", "keda", "cert-manager", "kuberay-operator"} <= set(plan.charts)


def test_options_serving_plain_and_the_k3s_default():
    plan = plan_of(_doc(**{"options": {"serving": "plain"}}))
    stacks = {w.name: w.serving.stack for w in plan.workloads if w.serving}
    # plain for single-pod servers; a Python-native service stays Ray, a multi-node replica LWS
    assert stacks == {**STACKS, "chat-api": "plain"}
    assert "kserve-resources" not in plan.charts and "cert-manager" not in plan.charts


# ---- schemas, CEL, charts ----------------------------------------------------------------------

def test_every_serving_object_passes_its_schema_and_cel_rules(planned):
    plan, files = planned
    reg = registry()
    kinds = set()
    for name in STACKS:
        for obj in objects_of(files, name):
            kinds.add(obj["kind"])
            if is_builtin(obj["apiVersion"], obj["kind"], plan.kubernetes_version):
                assert validate_builtin(obj, plan.kubernetes_version) == [], (name, obj["kind"])
                continue
            crd = reg.get(obj["apiVersion"], obj["kind"])
            assert crd is not None, obj["apiVersion"]
            assert reg.validate(obj) == [], (name, obj["kind"], reg.validate(obj))
            outcome = crd.cel.check_create(obj)
            assert outcome.violations == [], (name, obj["kind"], [str(v) for v in outcome.violations])
            if obj["kind"] == "HTTPRoute":
                assert outcome.evaluated > 0, obj["kind"]  # their rules really ran
    assert {"InferenceService", "LeaderWorkerSet", "RayService", "ScaledObject", "HTTPRoute", "Ingress",
            "Deployment", "Service", "PodDisruptionBudget", "PodMonitor"} <= kinds


def test_the_rules_catch_a_broken_route_and_lws(planned):
    _, files = planned
    route = copy.deepcopy(one(objects_of(files, "chat-api"), "HTTPRoute"))
    route["spec"]["parentRefs"] *= 2  # the same parent twice without sectionName or port
    crd = registry().get(route["apiVersion"], route["kind"])
    assert crd.cel.check_create(route).violations
    # the LeaderWorkerSet CRD has no CEL rules (its webhook guards it): its schema catches a typo
    lws = copy.deepcopy(one(objects_of(files, "llama-405b"), "LeaderWorkerSet"))
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RecreateGroup"
    assert registry().validate(lws)


def _helm_template(rel: dict[str, Any], values: bytes, tmp: Path) -> list[dict[str, Any]]:
    helm = tool("helm")
    chart = charts_dir() / rel["chart"] / rel["version"]
    require(chart.is_dir(), f"chart {rel['chart']} {rel['version']} not in {charts_dir()}")
    vfile = tmp / rel["values"]
    vfile.write_bytes(values)
    env = {**os.environ, **{k: str(tmp / k.lower()) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}}
    out = subprocess.run([helm, "template", rel["name"], str(chart), "-n", rel["namespace"], "-f", str(vfile),
                          "--kube-version", "1.33", "--include-crds"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def test_new_releases_render_with_their_charts_and_validate(planned, tmp_path):
    plan, files = planned
    rels = yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"]
    names = [r["name"] for r in rels]
    # cert-manager (KServe's webhook certificate) and the CRDs before the KServe controller
    assert names.index("cert-manager") < names.index("kserve-resources")
    assert names.index("kserve-crd") < names.index("kserve-resources")
    assert {"kserve-crd", "cert-manager"} <= set(rels[names.index("kserve-resources")]["dependsOn"])
    rendered: dict[str, list[dict[str, Any]]] = {}
    for rel in rels:
        if rel["name"] in (*NEW_RELEASES, "cert-manager"):
            rendered[rel["name"]] = _helm_template(rel, files[f"kubernetes/helm/{rel['values']}"], tmp_path)
    assert set(rendered) == {*NEW_RELEASES, "cert-manager"}
    # custom resources the charts render are checked against the CRDs the charts install
    crd_file = tmp_path / "rendered-crds.yaml"
    crd_file.write_text(yaml.safe_dump_all([o for objs in rendered.values() for o in objs
                                            if o["kind"] == "CustomResourceDefinition"]))
    crds = CRDRegistry.from_paths([crd_file])
    checked = custom = 0
    for name, objs in rendered.items():
        for o in objs:
            if is_builtin(o["apiVersion"], o["kind"], "1.33"):
                assert validate_builtin(o, "1.33") == [], (name, o["kind"], o["metadata"]["name"])
                checked += 1
            elif o["kind"] != "CustomResourceDefinition":
                assert crds.knows(o["apiVersion"], o["kind"]), (name, o["apiVersion"], o["kind"])
                assert crds.validate(o) == [], (name, o["kind"], crds.validate(o))
                assert not crds.get(o["apiVersion"], o["kind"]).cel.check_create(o).violations
                custom += 1
    assert checked > 50 and custom >= 2  # KServe's Issuer and Certificate at least
    # the CRDs the charts install are the groups the catalog records (releases.yaml `crds`)
    for rel in rels:
        if rel["name"] in NEW_RELEASES:
            groups = {o["spec"]["group"] for o in rendered[rel["name"]] if o["kind"] == "CustomResourceDefinition"}
            assert groups == set(rel["crds"]), rel["name"]
    # KServe runs without Knative: Standard mode, no Ingress of its own
    config = next(o for o in rendered["kserve-resources"] if o["kind"] == "ConfigMap"
                  and o["metadata"]["name"] == "inferenceservice-config")
    assert json.loads(config["data"]["deploy"])["defaultDeploymentMode"] == "Standard"
    assert '"disableIngressCreation": true' in config["data"]["ingress"]
    # JupyterHub: the Role in the tenant's namespace names the hub's real ServiceAccount
    [sa] = [o for o in rendered["jupyterhub"] if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "hub"]
    hub_ns = rels[names.index("jupyterhub")]["namespace"]
    binding = next(d for d in yaml.safe_load_all(files["kubernetes/manifests/45-notebooks.yaml"])
                   if d and d["kind"] == "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": hub_ns}]
    # and the chart's hub Role grants what the tenant-namespace Role grants (KubeSpawner's needs)
    [hub_role] = [o for o in rendered["jupyterhub"] if o["kind"] == "Role" and o["metadata"]["name"] == "hub"]
    role = next(d for d in yaml.safe_load_all(files["kubernetes/manifests/45-notebooks.yaml"]) if d and d["kind"] == "Role")
    assert role["rules"] == hub_role["rules"]


def test_notebooks_run_in_the_tenants_namespace_with_a_gpu_limit(planned):
    plan, files = planned
    [w] = [x for x in plan.workloads if x.interactive]
    assert w.serving is None  # JupyterHub's, not a serving platform
    values = yaml.safe_load(files["kubernetes/helm/jupyterhub.values.yaml"])
    spawner = values["hub"]["config"]["KubeSpawner"]
    assert spawner["namespace"] == common.namespace_of(w.tenant)
    single = values["singleuser"]
    assert single["extraResource"]["limits"] == {"nvidia.com/gpu": "1"}
    assert single["nodeSelector"] == common.node_selector(plan, w.pool)
    taints = [{"key": k, "value": v or "", "effect": e} for k, v, e in plan.platform.taints.get(w.pool, ())]
    assert all(common.tolerates(single["extraTolerations"], t) for t in taints)
    # Pod Security `restricted` in the tenant namespace: what KubeSpawner adds makes the pod pass it
    assert spawner["container_security_context"]["capabilities"] == {"drop": ["ALL"]}
    assert values["scheduling"]["userScheduler"]["enabled"] is False
    readme = files["README.md"].decode()
    assert "## Notebooks" in readme and "JupyterHub" in readme


def test_notebooks_on_a_slurm_only_fleet_name_open_ondemand():
    doc = yaml.safe_load((REPO / "examples" / "fsdp-pretraining.yaml").read_text())
    doc["workloads"][0]["interactive"] = True
    plan = plan_of(doc)
    assert plan.kube_plane is None
    readme = render(plan)["README.md"].decode()
    assert "Open OnDemand" in readme


# ---- each stack as its controller reads it -----------------------------------------------------

def _pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates a controller makes pods from, with the labels it adds itself."""
    kind = obj["kind"]
    if kind == "Deployment":
        return [obj["spec"]["template"]]
    if kind == "InferenceService":
        # KServe's predictor: a PodSpec plus its component fields; `labels` go on the pods
        p = dict(obj["spec"]["predictor"])
        labels = p.pop("labels")
        for k in ("minReplicas", "maxReplicas", "annotations"):
            p.pop(k, None)
        return [{"metadata": {"labels": labels}, "spec": p}]
    if kind == "LeaderWorkerSet":
        t = obj["spec"]["leaderWorkerTemplate"]
        return [t["leaderTemplate"], t["workerTemplate"]]
    if kind == "RayService":
        c = obj["spec"]["rayClusterConfig"]
        # KubeRay labels a pod ray.io/serve=true while its Serve proxy is ready
        return [{"metadata": {"labels": {**t["metadata"]["labels"], "ray.io/serve": "true"}}, "spec": t["spec"]}
                for t in (c["headGroupSpec"]["template"], *[g["template"] for g in c["workerGroupSpecs"]])]
    raise AssertionError(kind)


@pytest.mark.parametrize("workload", sorted(STACKS))
def test_the_stack_reads_right_to_its_controllers(planned, workload):
    plan, files = planned
    w = next(x for x in plan.workloads if x.name == workload)
    sv = w.serving
    objs = objects_of(files, workload)
    server = objs[0]
    pods = _pods(server)
    svc, pdb = one(objs, "Service"), one(objs, "PodDisruptionBudget")
    ns = common.namespace_of(w.tenant)
    assert all(o["metadata"]["namespace"] == ns for o in objs)
    # the Service selects the serving pods, on the container's port
    serving_pods = [p for p in pods if matches(svc["spec"]["selector"], p["metadata"]["labels"])]
    assert serving_pods, workload
    for p in serving_pods:
        ports = {cp["containerPort"] for c in p["spec"]["containers"] for cp in c.get("ports", [])}
        assert {sp["targetPort"] for sp in svc["spec"]["ports"]} <= ports
    if sv.stack == "lws":  # only the leader serves: a worker is no endpoint
        assert not matches(svc["spec"]["selector"], pods[1]["metadata"]["labels"])
    # the probes hit a port the container listens on; a serving pod has readiness and liveness
    for p in pods:
        for c in p["spec"]["containers"]:
            ports = {cp["containerPort"] for cp in c.get("ports", [])}
            probes = [c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if k in c]
            assert all(pr["httpGet"]["port"] in ports for pr in probes), (workload, c["name"])
    for p in serving_pods:
        for c in p["spec"]["containers"]:
            # a Ray container's liveness is KubeRay's own (it adds one where none is set), the form that
            # holds under Ray token auth
            assert "readinessProbe" in c and ("livenessProbe" in c) == (sv.stack != "rayservice")
            assert c["readinessProbe"]["httpGet"]["port"] == sv.port
    # the PDB covers the pods, one at a time
    assert pdb["spec"]["maxUnavailable"] == 1
    assert any(matches(pdb["spec"]["selector"]["matchLabels"], p["metadata"]["labels"]) for p in pods)
    # priority, pool, taints, GPUs
    taints = [{"key": k, "value": v or "", "effect": e} for k, v, e in plan.platform.taints.get(w.pool, ())]
    assert taints  # the GPU pools carry the provider's taint
    for p in pods:
        spec = p["spec"]
        assert spec["priorityClassName"] == f"{plan.name}-services"
        assert spec["nodeSelector"] == common.node_selector(plan, w.pool)
        assert all(common.tolerates(spec.get("tolerations", []), t) for t in taints)
    gpus = [int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) for p in pods[-1:] for c in p["spec"]["containers"]]
    assert sum(gpus) * sv.nodes_per_replica == sv.gpus_per_replica
    # the autoscaler: the object the controller scales, within min and max
    if sv.autoscaler == "keda":
        so = one(objs, "ScaledObject")
        ref = so["spec"]["scaleTargetRef"]
        expected = {"kserve": ("Deployment", f"{server['metadata']['name']}-predictor"),
                    "plain": ("Deployment", server["metadata"]["name"]),
                    "lws": ("LeaderWorkerSet", server["metadata"]["name"])}[sv.stack]
        assert (ref["kind"], ref["name"]) == expected
        assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (sv.min_replicas, sv.max_replicas)
        assert 1 <= sv.min_replicas <= sv.max_replicas
        [trigger] = so["spec"]["triggers"]
        assert trigger["type"] == "prometheus" and trigger["metadata"]["serverAddress"] == serving.prometheus_url(plan)
        assert f'namespace="{ns}"' in trigger["metadata"]["query"] or f'exported_namespace="{ns}"' in trigger["metadata"]["query"]
        # the query's series exist: DCGM's are scraped by the GPU Operator's ServiceMonitor; vLLM's only
        # through this workload's PodMonitor, which selects the serving pods on a port they name, and
        # whose targets' namespace/pod labels are the ones the query selects by
        monitors = [o for o in objs if o["kind"] == "PodMonitor"]
        if sv.scale_on == "gpu_utilization":
            assert "DCGM_FI_DEV_GPU_UTIL" in trigger["metadata"]["query"] and monitors == []
        else:
            [pm] = monitors
            assert "vllm:" in trigger["metadata"]["query"]
            scraped = [p for p in pods if matches(pm["spec"]["selector"]["matchLabels"], p["metadata"]["labels"])]
            names = {cp.get("name") for p in scraped for c in p["spec"]["containers"] for cp in c.get("ports", [])}
            assert scraped and {e["port"] for e in pm["spec"]["podMetricsEndpoints"]} <= names
            pod_re = re.search(r'pod=~"([^"]+)"', trigger["metadata"]["query"]).group(1)
            target = ref["name"]
            assert re.fullmatch(pod_re, f"{target}-7d9f8b6c5-x2x4z" if ref["kind"] == "Deployment" else f"{target}-0")
        if sv.stack == "kserve":  # KServe makes no autoscaler of its own and leaves replicas to KEDA
            assert server["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "external"
            assert server["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    else:  # Ray Serve: its own autoscaler within the same bounds; KubeRay adds the workers
        config = yaml.safe_load(server["spec"]["serveConfigV2"])
        auto = config["applications"][0]["args"]["llm_configs"][0]["deployment_config"]["autoscaling_config"]
        assert (auto["min_replicas"], auto["max_replicas"]) == (sv.min_replicas, sv.max_replicas)
        cluster = server["spec"]["rayClusterConfig"]
        # Kueue 0.19 resizes a RayService only as an elastic job, and not where its flavors place by
        # topology: then the cluster holds max_replicas' workers
        from tests.test_gang_invariant import KUEUE_ELASTIC_JOB, kueue_topology_flavors

        tas = plan.gang_scheduler == "kueue" and bool(kueue_topology_flavors(files))
        assert cluster["enableInTreeAutoscaling"] is not tas
        elastic_job = (server["metadata"].get("annotations") or {}).get(KUEUE_ELASTIC_JOB)
        assert elastic_job == ("true" if plan.gang_scheduler == "kueue" and not tas else None)
        [group] = cluster["workerGroupSpecs"]
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"] == sv.max_replicas * sv.nodes_per_replica
        if not cluster["enableInTreeAutoscaling"]:
            assert group["replicas"] == group["maxReplicas"]
    # the tenant's queue: Kueue takes the pods through the namespace's LocalQueue `default`
    assert plan.gang_scheduler == "kueue"
    config = kueue.kueue_config(plan)
    namespaces = [d for d in yaml.safe_load_all(files["kubernetes/manifests/00-namespaces.yaml"]) if d]
    tenant_ns = next(d for d in namespaces if d["metadata"]["name"] == ns)
    assert all(e["operator"] == "Exists" and e["key"] in tenant_ns["metadata"]["labels"]
               for e in config["managedJobsNamespaceSelector"]["matchExpressions"])
    queues = [d for d in yaml.safe_load_all(files["kubernetes/manifests/20-kueue.yaml"]) if d]
    assert any(q["kind"] == "LocalQueue" and q["metadata"]["namespace"] == ns
               and q["metadata"]["name"] == "default" for q in queues)
    frameworks = config["integrations"]["frameworks"]
    needed = {"kserve": "deployment", "plain": "deployment", "lws": "leaderworkerset.x-k8s.io/leaderworkerset",
              "rayservice": "ray.io/rayservice"}[sv.stack]
    assert needed in frameworks


def test_a_multi_node_replica_is_one_gang_under_each_scheduler(tmp_path):
    """Kueue admits a LeaderWorkerSet group as one workload (its LWS integration, on in the Kueue
    configuration); Volcano gets a PodGroup per group from LWS (gangSchedulingManagement); KAI's
    pods carry its queue label and scheduler name."""
    for gang in ("kueue", "volcano", "kai"):
        plan = plan_of(_doc(**{"options": {"gang_scheduler": gang}}))
        files = render(plan)
        lws = one(objects_of(files, "llama-405b"), "LeaderWorkerSet")
        t = lws["spec"]["leaderWorkerTemplate"]
        assert t["size"] == 2 and t["restartPolicy"] == "RecreateGroupOnPodRestart"
        values = yaml.safe_load(files["kubernetes/helm/lws.values.yaml"]) or {}
        if gang == "kueue":
            assert "leaderworkerset.x-k8s.io/leaderworkerset" in kueue.kueue_config(plan)["integrations"]["frameworks"]
            assert values == {}
        elif gang == "volcano":
            assert values == {"gangSchedulingManagement": {"schedulerProvider": "volcano"}}
        else:
            for pod in (t["leaderTemplate"], t["workerTemplate"]):
                assert pod["spec"]["schedulerName"] == "kai-scheduler"
                assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "chat"


def test_a_multi_node_replica_is_wired_to_volcano_and_kai_as_their_groupers_read_it():
    """Volcano: the LWS controller's volcano provider (gangSchedulingManagement) makes a PodGroup per
    group, minMember = size under startupPolicy LeaderCreated, its queue from the LWS's
    `scheduling.volcano.sh/queue-name` annotation; the pods name the volcano scheduler (LWS
    docs/examples/sample/gang-scheduling). KAI (v0.13+): its pod grouper's LWS plugin makes a PodGroup
    `<lws>-group-<index>` per group, minAvailable = leaderWorkerTemplate.size under LeaderCreated, in
    the queue of the `kai.scheduler/queue` label on the LWS (the top owner). Each object passes the
    LWS CRD's schema."""
    for gang, scheduler in (("volcano", "volcano"), ("kai", "kai-scheduler")):
        files = render(plan_of(_doc(**{"options": {"gang_scheduler": gang}})))
        lws = one(objects_of(files, "llama-405b"), "LeaderWorkerSet")
        assert registry().validate(lws) == [], (gang, registry().validate(lws))
        spec = lws["spec"]
        assert spec["startupPolicy"] == "LeaderCreated"  # the whole group is the gang (both groupers)
        assert spec["leaderWorkerTemplate"]["size"] == 2
        templates = (spec["leaderWorkerTemplate"]["leaderTemplate"], spec["leaderWorkerTemplate"]["workerTemplate"])
        assert {t["spec"].get("schedulerName") for t in templates} == {scheduler}
        md = lws["metadata"]
        if gang == "volcano":
            assert md["annotations"] == {"scheduling.volcano.sh/queue-name": "chat"}
            assert yaml.safe_load(files["kubernetes/helm/lws.values.yaml"]) == {
                "gangSchedulingManagement": {"schedulerProvider": "volcano"}}
        else:
            assert md["labels"]["kai.scheduler/queue"] == "chat"
            assert all(t["metadata"]["labels"]["kai.scheduler/queue"] == "chat" for t in templates)
            # the topology rule of a training gang: KAI's LWS grouper starts from its default grouper,
            # which reads the preferred placement on the top owner
            assert set(md["annotations"]) == {"kai.scheduler/topology", "kai.scheduler/topology-preferred-placement"}
    # Kueue needs no queue wiring: the namespace's LocalQueue takes the group (its LWS integration); the
    # topology preference is on both pod sets' templates, where that integration reads it
    lws = one(objects_of(render(plan_of(_doc(**{"options": {"gang_scheduler": "kueue"}}))), "llama-405b"),
              "LeaderWorkerSet")
    assert "annotations" not in lws["metadata"]
    templates = (lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"], lws["spec"]["leaderWorkerTemplate"]["workerTemplate"])
    assert all("schedulerName" not in t["spec"] for t in templates)
    assert all(set(t["metadata"]["annotations"]) == {"kueue.x-k8s.io/podset-preferred-topology"} for t in templates)


# ---- the fabric of a multi-node replica (RDMA, as the training starters) -------------------------

def _containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    return template["spec"]["containers"]


def test_multi_node_replicas_get_the_fabric_on_efa(planned):
    """serving-platform runs on p5.48xlarge (32 EFA interfaces per node): the LeaderWorkerSet's leader
    and worker each ask for their node's EFA devices (a pod takes all 8 GPUs), add IPC_LOCK and carry
    libfabric's provider, as the training starter beside it; a one-node replica gets no fabric."""
    plan, files = planned
    assert plan.platform.network is not None and plan.platform.network.kind == "efa"
    assert "llama-405b" in plan.platform.fabric_workloads
    assert not {"chat-api", "rerank", "agent-pipeline"} & set(plan.platform.fabric_workloads)
    t = one(objects_of(files, "llama-405b"), "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for pod in (t["leaderTemplate"], t["workerTemplate"]):
        [c] = _containers(pod)
        assert c["resources"]["requests"]["vpc.amazonaws.com/efa"] == "32" == c["resources"]["limits"]["vpc.amazonaws.com/efa"]
        assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
        assert {"name": "FI_PROVIDER", "value": "efa"} in c["env"]
    for name in ("chat-api", "rerank"):
        text = files[f"kubernetes/workloads/{name}.yaml"].decode()
        assert "vpc.amazonaws.com/efa" not in text and "IPC_LOCK" not in text
    # the tenant's namespace is one of the fabric's (its pods may add IPC_LOCK: pod_security.py)
    from generator.render.kubernetes import pod_security

    assert pod_security.level(plan, "chat") == pod_security.PRIVILEGED


def test_multi_node_replicas_get_the_rdma_fabric_on_bare_metal():
    """A bare-metal InfiniBand fleet: a LeaderWorkerSet's pods and a multi-node RayService's workers
    ask for the RDMA shared device, add IPC_LOCK, join the IPoIB network by Multus' annotation and
    carry NCCL's interface variables, exactly as the training starter's pods do; the Ray head does not."""
    doc = yaml.safe_load((REPO / "examples" / "baremetal-k8s-training.yaml").read_text())
    doc["workloads"] += [
        {"name": "big-model", "long_lived_services": True, "tenant": "llm", "gpus": 16, "bare_metal": False,
         "serving": {"nodes_per_replica": 2}},
        {"name": "ray-model", "long_lived_services": True, "python_native_pipeline": True, "tenant": "speech",
         "gpus": 16, "bare_metal": False, "serving": {"nodes_per_replica": 2}},
    ]
    plan = plan_of(doc)
    files = render(plan)
    net = plan.platform.network
    assert net is not None and net.kind == "rdma-shared"
    assert {"big-model", "ray-model", "pretrain-70b"} <= set(plan.platform.fabric_workloads)
    [starter] = [d for d in yaml.safe_load_all(files["kubernetes/workloads/pretrain-70b.yaml"]) if d and d["kind"] == "Job"] \
        or [None]
    lws = one(objects_of(files, "big-model"), "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    rs = one(objects_of(files, "ray-model"), "RayService")["spec"]["rayClusterConfig"]
    fabric_pods = [lws["leaderTemplate"], lws["workerTemplate"], rs["workerGroupSpecs"][0]["template"]]
    for pod in fabric_pods:
        [c] = _containers(pod)
        assert c["resources"]["requests"][net.resource] == "1" == c["resources"]["limits"][net.resource]
        assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert all(env.get(k) == v for k, v in net.env), (env, net.env)
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == net.attachment
        if starter is not None:  # the same wiring as the training starter's pods
            [sc] = _containers(starter["spec"]["template"])
            assert {e["name"] for e in sc["env"]} >= {k for k, _ in net.env}
    [head] = _containers(rs["headGroupSpec"]["template"])
    assert net.resource not in head["resources"].get("requests", {})
    assert "capabilities" not in head.get("securityContext", {}) or \
        "IPC_LOCK" not in head["securityContext"]["capabilities"].get("add", [])
    reg = registry()
    for obj in (one(objects_of(files, "big-model"), "LeaderWorkerSet"), one(objects_of(files, "ray-model"), "RayService")):
        assert reg.validate(obj) == [], reg.validate(obj)
        assert reg.get(obj["apiVersion"], obj["kind"]).cel.check_create(obj).violations == []


def test_prometheus_url_without_a_prometheus_is_an_input_error(planned):
    """No assert: a plan with no Prometheus address (only a Plan built around the input checks can be
    one) gets the one-line input error naming the field, never a ScaledObject with no server."""
    import dataclasses

    from generator.errors import OrchgenError
    from generator.render.kubernetes import metrics

    plan, _ = planned
    bare = dataclasses.replace(plan, charts={k: v for k, v in plan.charts.items() if k != metrics.RELEASE},
                               site_prometheus_url=None)
    with pytest.raises(OrchgenError) as e:
        serving.prometheus_url(bare)
    assert e.value.field == "options.prometheus_url" and "\n" not in str(e.value)
    assert str(e.value).startswith(plan.source)


# ---- quotas, bad input, re-plans ---------------------------------------------------------------

def test_max_replicas_beyond_the_tenants_quota_is_a_warning_and_refused_under_strict(orchgen, tmp_path):
    doc = _doc(**{"workloads.0.serving.max_replicas": 64})
    plan = plan_of(doc)
    [warning] = [w for w in plan.warnings if w.field == "workloads[0].serving.max_replicas"]
    assert "guaranteed" in warning.message and "borrowed" in warning.message
    doc["options"] = {"strict": True}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("change, field", [
    ({"workloads.0.long_lived_services": False, "workloads.0.gpus": 4}, "workloads[0].serving.stack"),
    ({"workloads.0.serving.min_replicas": 9, "workloads.0.serving.max_replicas": 3}, "workloads[0].serving.min_replicas"),
    ({"workloads.0.serving.gateway": None}, "workloads[0].serving.gateway"),
    ({"workloads.2.serving.gpus_per_replica": 18}, "workloads[2].serving.gpus_per_replica"),
    ({"workloads.0.serving.weights": "ftp://x"}, "workloads[0].serving.weights"),
    ({"workloads.0.serving.scale_on": "vibes"}, "workloads[0].serving.scale_on"),
    ({"workloads.1.serving.weights": "oci://registry/model:1"}, "workloads[1].serving.weights"),  # plain: KServe only
])
def test_bad_serving_input_is_one_line_naming_the_field(orchgen, tmp_path, change, field):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(_doc(**change), sort_keys=False))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2 and not (tmp_path / "out").exists(), proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert f"w.yaml:" in line and field in line, line


def test_replans_pass_validate_against(orchgen, tmp_path):
    """Replicas changed, a model added, one removed: each re-plan is a valid update of the old bundle
    (no immutable field changed, every CEL transition rule holds)."""
    base = _doc()
    added = copy.deepcopy(base["workloads"][0])
    added.update(name="summarize", gpus=4)
    added["serving"] = {"model": "Qwen/Qwen2.5-7B-Instruct", "max_replicas": 4}
    variants = {
        "replicas": _doc(**{"workloads.0.serving.min_replicas": 3, "workloads.0.serving.max_replicas": 12,
                            "workloads.2.serving.max_replicas": 1}),
        "added": {**base, "workloads": [*base["workloads"], added]},
        "removed": {**base, "workloads": [w for w in base["workloads"] if w["name"] != "rerank"]},
    }
    old = tmp_path / "old"
    bundle.write(render(plan_of(base)), old)
    crds = [reference_dir(), charts_dir() / "_extra-crds"]
    for name, doc in variants.items():
        new = tmp_path / name
        bundle.write(render(plan_of(doc)), new)
        args = ["validate", new, "--against", old, "--no-fetch"] + [a for c in crds for a in ("--crds", c)]
        proc = orchgen(*args)
        assert proc.returncode == 0, (name, proc.stdout[-2000:], proc.stderr[-2000:])


def test_the_bundle_is_deterministic(planned):
    plan, files = planned
    assert render(make_plan(spec.load(EXAMPLE), "serving-platform.yaml")) == render(make_plan(spec.load(EXAMPLE), "serving-platform.yaml"))
