"""The serving platform of a long-lived workload (kubernetes/workloads/<name>.yaml): its server, a
Service, a PodDisruptionBudget, an autoscaler and, where asked, an Ingress or a Gateway API HTTPRoute.

The stack is the Plan's (decide/serving.py, `WorkloadDecision.serving`):
- kserve: an InferenceService (serving.kserve.io/v1beta1) in Standard mode (raw Deployment; KServe
  0.20's name for RawDeployment) with `autoscalerClass: external`, so KServe makes no autoscaler
  and ignores the Deployment's replica count (kserve pkg/constants: "an external system manages
  autoscaling: KServe authors no ScaledObject"); the ScaledObject here scales its predictor
  Deployment, which KServe names `<isvc>-predictor`;
- plain: a Deployment;
- lws: a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), vLLM's multi-node recipe from the LWS
  docs (docs/examples/vllm): the leader starts a Ray head and `vllm serve` with pipeline
  parallelism over the group's nodes, each worker joins the leader's Ray head;
- rayservice: a RayService (ray.io/v1): Ray Serve LLM (`ray.serve.llm:build_openai_app`) with
  Serve's autoscaling_config and KubeRay's in-tree autoscaler adding and removing GPU workers.

Every server pod: the services PriorityClass, its tenant's queue wiring (gang.py), its pool's node
selector and tolerations, a startup, readiness and liveness probe on the container's port. The
PodDisruptionBudget lets a drain take one pod at a time (a multi-node replica: its group, which
LWS recreates whole). KEDA scales kserve, plain and lws on a Prometheus query between min and max
replicas (`prometheus_url` names the Prometheus). Where the query reads vLLM's own gauges and the
plane installs kube-prometheus-stack, a PodMonitor has Prometheus scrape the server's /metrics.
"""
from __future__ import annotations

from typing import Any

from ... import schedulers
from ...decide.plan import Plan, ServingDecision, WorkloadDecision
from ...decide import vllm
from ...decide.serving import VLLM_IMAGE
from ...errors import OrchgenError
from ...yamlio import dump_yaml
from . import fabric_wiring, gang, metrics, pod_security, priority, ray
from .common import RAY_AUTH_OPTIONS, RAY_VERSION, PodShape, dns1035, meta, namespace_of, node_selector, resources, tolerations

WORKLOAD_LABEL = "orchgen.io/workload"
ROLE_LABEL = "orchgen.io/role"
MODELS_DIR = "/models"  # where a pvc: weights volume is mounted
KSERVE_MODEL_DIR = "/mnt/models"  # where KServe's storage initializer puts STORAGE_URI (KServe docs, custom containers)
HEALTH = "/health"  # vLLM's OpenAI server: 200 once the engine is up
RAY_SERVE_HEALTH = "/-/healthz"  # Ray Serve's HTTP proxy on every node
RAY_AGENT_PORT = 52365  # the Ray dashboard agent; /api/local_raylet_healthz is KubeRay's own liveness check
# startup: a large model loads for many minutes (cold image pull, weights over the network, CUDA
# graph capture); 10 s x 180 = 30 min before the kubelet gives up, within Kueue's 45 min
# waitForPodsReady for services (kueue.SERVICE_START)
STARTUP = {"periodSeconds": 10, "failureThreshold": 180}
READINESS = {"periodSeconds": 5, "failureThreshold": 3}  # out of the Service within 15 s of failing
LIVENESS = {"periodSeconds": 15, "failureThreshold": 4}  # restarted after a minute of no answer


def prometheus_url(plan: Plan) -> str:
    """The Prometheus that KEDA's triggers query: the plane's metrics stack (render/kubernetes/metrics.py:
    kube-prometheus-stack's Service, or the site's own with options.metrics: site)."""
    url = metrics.prometheus_url(plan)
    if url is None:
        # not reachable from a checked workload.yaml (a serving workload is on the Kubernetes plane, and
        # options.metrics site without options.prometheus_url is refused), but a Plan built otherwise
        # gets the input error, never a ScaledObject with no server
        raise OrchgenError("KEDA's ScaledObjects query the plane's Prometheus and this plan has none: set "
                           "options.metrics install, or site with options.prometheus_url", plan.source, None,
                           "options.prometheus_url")
    return url


def serving_workloads(plan: Plan) -> list[WorkloadDecision]:
    kube = plan.kube_plane
    return [w for w in plan.workloads if kube and w.plane == kube.name and w.serving is not None]


def name_of(w: WorkloadDecision) -> str:
    """Services, RayServices and LeaderWorkerSets want DNS-1035 names; KubeRay appends `-serve-svc`
    and a hash to a RayService's, so it is kept short (KubeRay: at most 47 characters for its children)."""
    return dns1035(w.name, 40)


def _probe(path: str, port: int, timing: dict[str, int]) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, **timing}


def _weights(sv: ServingDecision) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) of the weights: a pvc: claim mounted read-only at /models."""
    if not sv.weights.startswith("pvc:"):
        return [], []
    claim = sv.weights.removeprefix("pvc:")
    return ([{"name": "weights", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}],
            [{"name": "weights", "mountPath": MODELS_DIR, "readOnly": True}])


def _model_ref(sv: ServingDecision, kserve: bool) -> str | None:
    """What vLLM's --model (or Ray Serve LLM's model_source) reads."""
    w = sv.weights
    if kserve and w not in ("baked",) and not w.startswith("pvc:"):
        return KSERVE_MODEL_DIR  # KServe's storage initializer downloaded STORAGE_URI there
    if w.startswith("hf://"):
        return w.removeprefix("hf://")
    if w.startswith(("s3://", "gs://")):
        return w  # vLLM streams it (--load-format runai_streamer)
    if w.startswith("pvc:") and sv.model:
        return f"{MODELS_DIR}/{sv.model}"
    return sv.model


def _vllm_args(sv: ServingDecision, ref: str | None, parallel: list[str]) -> list[str]:
    args = [ref] if ref else []
    args += ["--port", str(sv.port)]
    if sv.model and ref != sv.model:
        args += ["--served-model-name", sv.model]
    if ref and ref.startswith(("s3://", "gs://")):
        args += ["--load-format", "runai_streamer"]  # vLLM docs, "Loading models with Run:ai Model Streamer"
    return args + parallel


def _server(sv: ServingDecision, name: str, *, kserve: bool = False, command: list[str] | None = None,
            args: list[str] | None = None) -> dict[str, Any]:
    """The model server container: its port, the three probes on it, its GPUs, its weights."""
    c: dict[str, Any] = {"name": name, "image": sv.image,
                         "ports": [{"name": "http", "containerPort": sv.port, "protocol": "TCP"}],
                         "resources": resources(sv.pod, limits_cpu_memory=True),
                         "startupProbe": _probe(HEALTH, sv.port, STARTUP),
                         "readinessProbe": _probe(HEALTH, sv.port, READINESS),
                         "livenessProbe": _probe(HEALTH, sv.port, LIVENESS)}
    if command is not None:
        c["command"] = command
    if args is not None:
        c["args"] = args
    # the pods run as a non-root user (pod_security.py): caches go to a writable place
    env = [{"name": "HOME", "value": "/tmp"}]
    if kserve and sv.weights != "baked" and not sv.weights.startswith("pvc:"):
        env.append({"name": "STORAGE_URI", "value": sv.weights})  # KServe's storage initializer fetches it
    if sv.model and command is None:
        env.append({"name": "MODEL", "value": sv.model})  # your image's own entrypoint reads it
    c["env"] = env
    _secret_env(sv, c)
    _, mounts = _weights(sv)
    c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}, *mounts]  # NCCL and vLLM need a big /dev/shm
    return c


def _secret_env(sv: ServingDecision, container: dict[str, Any]) -> None:
    """serving.secret: every key of the site's Secret becomes an environment variable of the server, by
    reference (the Secret's value is never in the bundle): HF_TOKEN is what huggingface_hub, and so
    vLLM and Ray Serve LLM, read for a gated or private model (huggingface_hub docs, "Environment
    variables"); AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY what vLLM's Run:ai streamer reads for s3://.
    `optional: false`: a pod whose Secret is missing waits (CreateContainerConfigError, naming it)
    rather than starting without credentials and failing the download."""
    if sv.secret_name:
        container["envFrom"] = [{"secretRef": {"name": sv.secret_name, "optional": False}}]


def _pod_spec(plan: Plan, w: WorkloadDecision, containers: list[dict[str, Any]], fabric: bool = False
              ) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    volumes, _ = _weights(sv)
    spec: dict[str, Any] = {"priorityClassName": priority.class_of(plan, w),
                            "nodeSelector": node_selector(plan, w.pool), "containers": containers,
                            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}, *volumes]}
    if tols := tolerations(plan, w.pool):
        spec["tolerations"] = tols
    if sv.image_pull_secret:  # serving.image_pull_secret: the kubelet pulls a private image with it
        spec["imagePullSecrets"] = [{"name": sv.image_pull_secret}]
    if not fabric:  # a fabric pod needs root for IPC_LOCK (pod_security.py)
        pod_security.harden(spec)
    return spec


def _template(plan: Plan, w: WorkloadDecision, spec: dict[str, Any], labels: dict[str, str],
              wiring: gang.Wiring | None = None) -> dict[str, Any]:
    return gang.apply({"metadata": {"labels": dict(labels)}, "spec": spec},
                      wiring if wiring is not None else gang.for_pods(plan, w.tenant))


def _selector(w: WorkloadDecision) -> dict[str, str]:
    return {WORKLOAD_LABEL: w.name}


def parallel_sizes(sv: ServingDecision) -> tuple[int, int]:
    """(tensor, pipeline) parallel sizes of one replica: from the model's config where orchgen knows it
    (the placeholder: decide/vllm.py checks vLLM's head rule), else a pod's GPUs and the replica's pods."""
    return vllm.parallelism(sv.model, sv.pod.gpus, sv.nodes_per_replica)


def _parallel_args(sv: ServingDecision) -> list[str]:
    """vLLM's flags for parallel_sizes (none at 1: its default)."""
    tp, pp = parallel_sizes(sv)
    return ((["--tensor-parallel-size", str(tp)] if tp > 1 or pp > 1 else [])
            + (["--pipeline-parallel-size", str(pp)] if pp > 1 else []))


def _vllm_command(sv: ServingDecision) -> list[str] | None:
    """vLLM's own CLI for the default image; your image keeps its entrypoint (it reads MODEL)."""
    return ["vllm", "serve"] if _default_image(sv) else None


def _default_image(sv: ServingDecision) -> bool:
    return sv.image == VLLM_IMAGE


def _single_pod_server(plan: Plan, w: WorkloadDecision, container: str, kserve: bool) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    command = _vllm_command(sv)
    args = _vllm_args(sv, _model_ref(sv, kserve), _parallel_args(sv)) if command else None
    return _server(sv, container, kserve=kserve, command=command, args=args)


# ---- the four stacks -------------------------------------------------------------------------

def _deployment(plan: Plan, w: WorkloadDecision) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    spec = _pod_spec(plan, w, [_single_pod_server(plan, w, "server", kserve=False)])
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": meta(name_of(w), namespace_of(w.tenant), labels=gang.for_pods(plan, w.tenant).labels),
            "spec": {"replicas": sv.min_replicas, "selector": {"matchLabels": _selector(w)},
                     "template": _template(plan, w, spec, _selector(w))}}


def _inference_service(plan: Plan, w: WorkloadDecision) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    spec = _pod_spec(plan, w, [_single_pod_server(plan, w, "kserve-container", kserve=True)])
    pod = _template(plan, w, spec, _selector(w))
    # spec.predictor is a PodSpec plus KServe's component fields; `labels` go onto its pods
    predictor = {**pod["spec"], "labels": pod["metadata"]["labels"],
                 "minReplicas": sv.min_replicas, "maxReplicas": sv.max_replicas}
    if _storage_secret(sv):
        predictor["serviceAccountName"] = storage_account(w)
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": meta(name_of(w), namespace_of(w.tenant), labels=gang.for_pods(plan, w.tenant).labels,
                             annotations={"serving.kserve.io/deploymentMode": "Standard",
                                          "serving.kserve.io/autoscalerClass": "external"}),
            "spec": {"predictor": predictor}}


def _storage_secret(sv: ServingDecision) -> bool:
    """Whether KServe's storage initializer downloads the weights with serving.secret's credentials."""
    return bool(sv.secret_name) and sv.stack == "kserve" and sv.weights != "baked" and not sv.weights.startswith("pvc:")


def storage_account(w: WorkloadDecision) -> str:
    return dns1035(f"{w.name}-storage", 63)


def _storage_service_account(w: WorkloadDecision) -> dict[str, Any]:
    """KServe's storage initializer (an init container KServe adds to the predictor pod) takes its
    credentials from the Secrets its pod's ServiceAccount lists: HF_TOKEN for hf://, the AWS keys and
    the serving.kserve.io/s3-* annotations for s3:// (KServe 0.20 docs, "Deploy InferenceService with
    model from Hugging Face Hub", Option 1: a ServiceAccount with the secret's name in `secrets`,
    https://kserve.github.io/website/docs/0.20/model-serving/storage/providers/hf). The ServiceAccount
    names the Secret; the Secret is the site's."""
    sv = w.serving
    assert sv is not None and sv.secret_name
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(storage_account(w), namespace_of(w.tenant)),
            "secrets": [{"name": sv.secret_name}]}


def _leader_worker_set(plan: Plan, w: WorkloadDecision) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    # LWS docs/examples/vllm: the vLLM image's multi-node-serving.sh starts the Ray head on the
    # leader (waiting for the group's size) or joins it from a worker; LWS sets LWS_GROUP_SIZE and
    # LWS_LEADER_ADDRESS in every pod of a group
    script = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
    default = _default_image(sv)
    serve = " ".join(["vllm", "serve", *_vllm_args(sv, _model_ref(sv, False), _parallel_args(sv))])
    leader = _server(sv, "leader", command=["bash", "-c"] if default else None,
                     args=[f"{script} leader --ray_cluster_size=$(LWS_GROUP_SIZE); {serve}"] if default else None)
    worker = _server(sv, "worker", command=["bash", "-c"] if default else None,
                     args=[f"{script} worker --ray_address=$(LWS_LEADER_ADDRESS)"] if default else None)
    # a worker serves no HTTP: it lives and dies with its group (RecreateGroupOnPodRestart)
    for key in ("ports", "startupProbe", "readinessProbe", "livenessProbe"):
        del worker[key]
    # each group one gang under the plan's scheduler (gang.for_lws: Kueue's LWS integration, Volcano's
    # PodGroup per group through LWS, KAI's pod grouper); every pod of a group on the RDMA fabric where
    # the plan sets one up (fabric_wiring: the device resource, IPC_LOCK, NCCL's variables)
    wiring = gang.for_lws(plan, w.tenant)
    fabric = fabric_wiring.network_of(plan, w) is not None
    top_annotations, pod_annotations = _lws_topology(plan, w)
    leader_t, worker_t = (
        fabric_wiring.wire(plan, w, sv.pod, _template(plan, w, _pod_spec(plan, w, [c], fabric),
                                                      {**_selector(w), ROLE_LABEL: role}, wiring))
        for c, role in ((leader, "leader"), (worker, "worker")))
    for t in (leader_t, worker_t):
        if pod_annotations:
            t["metadata"].setdefault("annotations", {}).update(pod_annotations)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": meta(name_of(w), namespace_of(w.tenant), labels=wiring.labels,
                             annotations={**wiring.annotations, **top_annotations} or None),
            "spec": {"replicas": sv.min_replicas,
                     # workers start once the leader pod exists (they need its address)
                     "startupPolicy": "LeaderCreated",
                     # spelt out (the LWS webhook's defaults): a rollout replaces one group at a time and
                     # asks for no extra GPUs (maxSurge 0); one headless Service for all groups. Kueue's
                     # LWS webhook otherwise writes these back empty, which the API server refuses
                     # (seen with the real API server and Kueue, tests/test_kube_real.py)
                     "rolloutStrategy": {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0}},
                     "networkConfig": {"subdomainPolicy": "Shared"},
                     "leaderWorkerTemplate": {"size": sv.nodes_per_replica,
                                              # one lost pod breaks the group's collectives: restart it whole
                                              "restartPolicy": "RecreateGroupOnPodRestart",
                                              "leaderTemplate": leader_t, "workerTemplate": worker_t}}}


def _lws_topology(plan: Plan, w: WorkloadDecision) -> tuple[dict[str, str], dict[str, str]]:
    """(LeaderWorkerSet annotations, leader and worker template annotations) that keep a group on one
    leaf switch (or the provider's narrowest shared level) when it fits, as a training gang's
    (workloads._tas_annotations, ray.topology_wiring), on a pool whose nodes carry the topology:
    - Kueue: its LWS integration reads each template's `kueue.x-k8s.io/podset-preferred-topology`
      into the leader and worker pod sets' topology requests (kueue pkg/controller/jobs/
      leaderworkerset/leaderworkerset_reconciler.go, newPodSet);
    - KAI: its LWS grouper starts from the default grouper (pkg/podgrouper/podgrouper/plugins/
      leaderworkerset/lws_grouper.go), which takes `kai.scheduler/topology` and the preferred placement
      from the top owner's annotations (the RayCluster's rule, ray.py).
    Volcano's LWS PodGroup gets none (the LWS provider writes no networkTopology)."""
    labels, top, pod = ray.topology_wiring(plan, w)
    del labels  # KubeRay's Volcano label: a RayCluster's only
    return top, pod


def _serve_config(sv: ServingDecision) -> str:
    """Ray Serve LLM's OpenAI app (docs.ray.io, "Serving LLMs"): Serve's autoscaling_config bounds the
    replicas and targets ongoing requests per replica; one replica spans nodes_per_replica nodes
    through pipeline parallelism (Ray places its workers by placement group)."""
    source = _model_ref(sv, False) or sv.model
    tp, pp = parallel_sizes(sv)
    engine: dict[str, Any] = {"tensor_parallel_size": tp}
    if pp > 1:
        engine["pipeline_parallel_size"] = pp
    llm = {"model_loading_config": {"model_id": sv.model, "model_source": source},
           "engine_kwargs": engine,
           "deployment_config": {"autoscaling_config": {"min_replicas": sv.min_replicas,
                                                        "max_replicas": sv.max_replicas,
                                                        "target_ongoing_requests": sv.scale_target}}}
    app = {"name": "llm", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
           "args": {"llm_configs": [llm]}}
    return dump_yaml({"applications": [app]}).decode()


def _ray_pod(plan: Plan, w: WorkloadDecision, name: str, shape: PodShape, labels: dict[str, str],
             fabric: bool = False) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    c: dict[str, Any] = {"name": name, "image": sv.image,
                         "ports": [{"name": "serve", "containerPort": sv.port, "protocol": "TCP"},
                                   {"name": "dashboard-agent", "containerPort": RAY_AGENT_PORT, "protocol": "TCP"}],
                         "resources": resources(shape, limits_cpu_memory=True),
                         "readinessProbe": _probe(RAY_SERVE_HEALTH, sv.port, READINESS),
                         # no livenessProbe: KubeRay adds its own raylet health check to a Ray container
                         # without one, the form it keeps working under token auth (RAY_AUTH_OPTIONS)
                         "env": [{"name": "HOME", "value": "/tmp"}]}
    _secret_env(sv, c)  # Ray Serve LLM's vLLM engines run in these pods and download the model there
    _, mounts = _weights(sv)
    c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}, *mounts]
    spec = _pod_spec(plan, w, [c], fabric)
    return {"metadata": {"labels": {**_selector(w), **labels}}, "spec": spec}


def ray_autoscaling(plan: Plan) -> bool:
    """Whether KubeRay's autoscaler may resize a RayService's cluster under the plan's gang scheduler
    (ray.scheduler_resizes: under Kueue, as an elastic job, on a plane without a Topology)."""
    return ray.scheduler_resizes(plan)


def _ray_service(plan: Plan, w: WorkloadDecision) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    head = ray._head_shape(plan, w)  # noqa: SLF001 - the RayCluster's head sizing, shared
    workers = sv.nodes_per_replica
    elastic = ray_autoscaling(plan)
    # without KubeRay's autoscaler (the gang scheduler's record says why) the cluster holds the
    # workers of max_replicas, and Ray Serve scales its replicas within it
    low = sv.min_replicas if elastic else sv.max_replicas
    group = {"groupName": "gpu-workers" if sv.pod.gpus else "workers",
             "replicas": low * workers, "minReplicas": low * workers,
             "maxReplicas": sv.max_replicas * workers, "rayStartParams": {},
             # a replica over several nodes: its workers carry the collectives, on the fabric (the head
             # holds no GPU and gets none)
             "template": fabric_wiring.wire(plan, w, sv.pod,
                                            _ray_pod(plan, w, "ray-worker", sv.pod, {ROLE_LABEL: "worker"},
                                                     fabric_wiring.network_of(plan, w) is not None))}
    head_pod = _ray_pod(plan, w, "ray-head", head, {ROLE_LABEL: "head"})
    # the head holds no GPU: Serve's replicas go to the workers. The queue labels are the RayCluster's
    # (gang.for_raycluster): KubeRay copies a RayService's labels onto the RayCluster it makes
    # (rayservice_controller.go, constructRayClusterForRayService), whose scheduler plugin wires the pods
    return {"apiVersion": "ray.io/v1", "kind": "RayService",
            # Kueue's RayService integration sizes an elastic one's Workload from the RayCluster KubeRay made
            # for it (0.19.2 pkg/controller/jobs/rayservice PodSets, raycluster.UpdatePodSets)
            "metadata": meta(name_of(w), namespace_of(w.tenant), labels=gang.for_raycluster(plan, w.tenant),
                             annotations=ray.autoscaling_annotations(plan) if elastic else None),
            "spec": {"serveConfigV2": _serve_config(sv),
                     "rayClusterConfig": {"rayVersion": RAY_VERSION, "authOptions": dict(RAY_AUTH_OPTIONS),
                                          "enableInTreeAutoscaling": elastic,
                                          **({"autoscalerOptions": ray.autoscaler_options()} if elastic else {}),
                                          "headGroupSpec": {"rayStartParams": {"num-gpus": "0"},
                                                            "template": head_pod},
                                          "workerGroupSpecs": [group]}}}


# ---- around the server -----------------------------------------------------------------------

def _service(w: WorkloadDecision) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    sel = _selector(w)
    if sv.stack == "lws":
        sel = {**sel, ROLE_LABEL: "leader"}  # only the leader serves HTTP
    elif sv.stack == "rayservice":
        sel = {**sel, "ray.io/serve": "true"}  # KubeRay sets it on pods whose Serve proxy is ready
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name_of(w), namespace_of(w.tenant)),
            "spec": {"selector": sel,
                     "ports": [{"name": "http", "port": sv.port, "targetPort": sv.port, "protocol": "TCP"}]}}


def _pdb(w: WorkloadDecision) -> dict[str, Any]:
    sel = _selector(w)
    if w.serving is not None and w.serving.stack == "rayservice":
        sel = {**sel, ROLE_LABEL: "worker"}  # the head is a single pod: a drain must be able to move it
    # one pod at a time: a drain never takes more than one replica (or one multi-node group) down
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": meta(name_of(w), namespace_of(w.tenant)),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": sel}}}


def scale_target(w: WorkloadDecision) -> dict[str, str]:
    """The object KEDA scales: KServe's predictor Deployment, the Deployment, or the LeaderWorkerSet
    (its scale subresource counts groups)."""
    sv = w.serving
    assert sv is not None
    if sv.stack == "kserve":
        return {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"{name_of(w)}-predictor"}
    if sv.stack == "lws":
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": name_of(w)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name_of(w)}


def _query(w: WorkloadDecision) -> tuple[str, str]:
    """(PromQL, KEDA metricType). vLLM's gauges are summed over the server's pods and compared per
    replica (AverageValue divides by the replicas); DCGM's utilisation is averaged (Value). The GPU
    Operator's dcgm-exporter ServiceMonitor keeps honorLabels false, so the GPU's pod and namespace
    arrive as exported_pod / exported_namespace."""
    sv = w.serving
    assert sv is not None
    ns, pods = namespace_of(w.tenant), f"{scale_target(w)['name']}-.*"
    if sv.scale_on == "gpu_utilization":
        return f'avg(DCGM_FI_DEV_GPU_UTIL{{exported_namespace="{ns}",exported_pod=~"{pods}"}})', "Value"
    metric = "vllm:num_requests_waiting" if sv.scale_on == "queue_depth" else "vllm:num_requests_running"
    return f'sum({metric}{{namespace="{ns}",pod=~"{pods}"}})', "AverageValue"


def _scaled_object(plan: Plan, w: WorkloadDecision) -> dict[str, Any]:
    sv = w.serving
    assert sv is not None
    query, metric_type = _query(w)
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": meta(name_of(w), namespace_of(w.tenant)),
            "spec": {"scaleTargetRef": scale_target(w),
                     "minReplicaCount": sv.min_replicas, "maxReplicaCount": sv.max_replicas,
                     # a replica that took minutes to load is not dropped for a short lull (KEDA's
                     # default cooldown is 300 s; the HPA's scale-down window the same)
                     "cooldownPeriod": 300,
                     "triggers": [{"type": "prometheus", "metricType": metric_type,
                                   "metadata": {"serverAddress": prometheus_url(plan), "query": query,
                                                "threshold": str(sv.scale_target)}}]}}


def _exposure(w: WorkloadDecision) -> list[dict[str, Any]]:
    sv = w.serving
    assert sv is not None
    backend_port = sv.port
    if sv.expose == "ingress":
        rule: dict[str, Any] = {"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
            "service": {"name": name_of(w), "port": {"number": backend_port}}}}]}}
        if sv.host:
            rule["host"] = sv.host
        spec: dict[str, Any] = {"rules": [rule]}
        if sv.ingress_class:
            spec["ingressClassName"] = sv.ingress_class
        # no TLS here: the certificate is the site's (a Secret it names in spec.tls, or its controller's default)
        return [{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                 "metadata": meta(name_of(w), namespace_of(w.tenant)), "spec": spec}]
    if sv.expose == "gateway":
        assert sv.gateway
        gw_ns, _, gw = sv.gateway.rpartition("/")
        parent: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw}
        if gw_ns:
            parent["namespace"] = gw_ns
        route: dict[str, Any] = {
            "parentRefs": [parent],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                       "backendRefs": [{"group": "", "kind": "Service", "name": name_of(w), "port": backend_port,
                                        "weight": 1}]}]}
        if sv.host:
            route["hostnames"] = [sv.host]
        return [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                 "metadata": meta(name_of(w), namespace_of(w.tenant)), "spec": route}]
    return []


SERVERS = {"kserve": _inference_service, "plain": _deployment, "lws": _leader_worker_set,
           "rayservice": _ray_service}


def _pod_monitor(w: WorkloadDecision) -> dict[str, Any]:
    """Prometheus scrapes the server's pods: vLLM's OpenAI server answers /metrics on its own port
    (vLLM docs, "Production Metrics"), and the Prometheus Operator's PodMonitor targets carry the
    `namespace` and `pod` labels the ScaledObject's query selects by. kube-prometheus-stack selects
    every PodMonitor (metrics.values: podMonitorSelectorNilUsesHelmValues false). The LWS workers have
    no `http` port, so only the leader, which serves, is scraped."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": meta(name_of(w), namespace_of(w.tenant)),
            "spec": {"selector": {"matchLabels": _selector(w)},
                     "podMetricsEndpoints": [{"port": "http", "path": "/metrics"}]}}


def objects(plan: Plan, w: WorkloadDecision) -> list[dict[str, Any]]:
    """The workload's file: server, Service, PodDisruptionBudget, autoscaler (and the scrape its
    query needs), route."""
    sv = w.serving
    assert sv is not None
    out = [SERVERS[sv.stack](plan, w), _service(w), _pdb(w)]
    if sv.autoscaler == "keda":
        out.append(_scaled_object(plan, w))
        if sv.scale_on != "gpu_utilization" and metrics.installed(plan):  # DCGM's is scraped already
            out.append(_pod_monitor(w))
    out += _exposure(w)
    if _storage_secret(sv):
        # last, the server first (the file's order everywhere); the predictor's pods wait for it only the
        # moment `kubectl apply -f` takes to reach it (the ReplicaSet retries a pod refused for a missing
        # ServiceAccount)
        out.append(_storage_service_account(w))
    return out

