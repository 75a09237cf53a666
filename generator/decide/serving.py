"""The serving decision: what a long-lived workload on the Kubernetes plane becomes (issue 21).

Each serving workload gets one stack, with its reason (plan.json `workloads[].serving.why`, and the
README's Serving section):
- rayservice: a Python-native service (or `stack: ray`): Ray Serve in a RayService, autoscaled by
  Ray Serve (ongoing requests per replica) and KubeRay's in-tree autoscaler, which adds workers;
- lws: a replica over several nodes (`nodes_per_replica` > 1): a LeaderWorkerSet, one leader and
  nodes-1 workers per replica, each replica admitted whole by the gang scheduler;
- kserve: a model server: a KServe InferenceService in Standard (raw Deployment) mode, no Knative;
- plain: `stack: plain`, or auto on a k3s edge/dev plane (no KServe controller, no cert-manager):
  a Deployment.
kserve, plain and lws scale on a Prometheus query through a KEDA ScaledObject, bounded by
min/max_replicas; the tenant's guaranteed quota that cannot hold max_replicas is a warning.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import OrchgenError
from ..spec.models import Fleet, Serving
from . import sizing, vllm
from .plan import ServingDecision, Tenant, Warning_, WorkloadDecision

# vLLM's OpenAI-compatible server: /health answers once the model is loaded, /metrics carries
# vllm:num_requests_running / vllm:num_requests_waiting (docs.vllm.ai, "Production Metrics").
VLLM_IMAGE = "vllm/vllm-openai:v0.11.0"
# Ray Serve LLM (ray.serve.llm:build_openai_app) ships in Ray's LLM image of the KubeRay release's Ray
RAY_LLM_IMAGE = "rayproject/ray-llm:2.52.0-py311-cu128"
# a small public model whose heads split over every GPU count orchgen writes (decide/vllm.py): replace with yours
PLACEHOLDER_MODEL = vllm.PLACEHOLDER_MODEL
DEFAULT_TARGET = {"requests_in_flight": 16, "gpu_utilization": 80, "queue_depth": 4}

STACKS = ("rayservice", "kserve", "plain", "lws")
# weights only KServe's storage initializer fetches (vLLM streams s3:// and gs://, and reads hf:// ids)
KSERVE_ONLY_WEIGHTS = ("https://", "oci://", "pvc://")


def _stack(w: WorkloadDecision, sv: Serving, nodes: int, fleet_choice: str, k3s: bool) -> tuple[str, str]:
    python = w.facts.python_native_pipeline
    # the workload's own stack first; then a Python-native service is Ray's; then the fleet's option
    asked = sv.stack if sv.stack != "auto" else ("auto" if python else fleet_choice)
    where = "workloads[].serving.stack" if sv.stack != "auto" else "options.serving"
    if asked == "ray" or (asked == "auto" and python):
        why = (f"{where}=ray" if asked == "ray" else "a Python-native service")
        return "rayservice", (f"{why}: Ray Serve in a RayService (KubeRay), its replicas autoscaled by Ray Serve "
                              "on ongoing requests per replica")
    if nodes > 1:
        return "lws", (f"a replica spans {nodes} nodes: a LeaderWorkerSet starts each replica as one "
                       "leader and its workers, created, admitted and restarted as a group"
                       + (f" ({where}={asked} serves one pod per replica)" if asked != "auto" else ""))
    if asked == "plain" or (asked == "auto" and k3s):
        why = f"{where}=plain" if asked == "plain" else "an edge/dev k3s plane (no KServe controller or cert-manager)"
        return "plain", f"{why}: a Deployment, a Service and a KEDA ScaledObject (which drives an HPA)"
    why = f"{where}=kserve" if asked == "kserve" else "a model server"
    return "kserve", (f"{why}: a KServe InferenceService in Standard (raw Deployment) mode, no Knative needed; "
                      "orchgen's KEDA ScaledObject scales its predictor (autoscalerClass external)")


def decide(fleet: Fleet, placed: list[WorkloadDecision], kube: str | None, tenants: list[Tenant],
           file: str, warnings: list[Warning_]) -> list[WorkloadDecision]:
    """The placed decisions with `serving` set on every long-lived service of the Kubernetes plane,
    and `interactive` from the input."""
    by_name = {w.name: (i, w) for i, w in enumerate(fleet.workloads)}
    out = []
    for d in placed:
        i, w = by_name[d.name]
        d = replace(d, interactive=w.interactive)
        # notebooks are JupyterHub's (render/kubernetes/jupyterhub.py), not a serving platform
        if d.plane == kube and kube and d.facts.long_lived_services and d.shape is not None and not w.interactive:
            d = replace(d, serving=_serving(fleet, d, w.serving or Serving(), kube == "k3s", i, file,
                                            tenants, warnings))
        out.append(d)
    return out


def _serving(fleet: Fleet, d: WorkloadDecision, sv: Serving, k3s: bool, i: int, file: str,
             tenants: list[Tenant], warnings: list[Warning_]) -> ServingDecision:
    at = f"workloads[{i}].serving"
    pool = next(p for p in fleet.fleet.pools if p.name == d.pool)
    per_node = pool.gpu.count if pool.gpu else 0
    sh = d.shape
    assert sh is not None
    from ..spec.hardware import node_hardware

    hw = node_hardware(pool)
    nodes, nodes_field = _nodes(d, sv, i, hw.mig is not None)
    stack, why = _stack(d, sv, nodes, fleet.options.serving, k3s)
    if nodes_field != f"{at}.nodes_per_replica":
        why += (f" (a tightly coupled service of {nodes} nodes: one replica spans them, with the gang and "
                "topology rules of a training job)")
    if nodes > pool.nodes:
        raise OrchgenError(f"a replica spans {nodes} nodes but pool {pool.name!r} has {pool.nodes}", file, None,
                           nodes_field)
    if hw.mig is not None:
        return _mig_serving(fleet, d, sv, pool, hw, stack, why, i, file, tenants, warnings)
    gpus = sv.gpus_per_replica if sv.gpus_per_replica is not None else (
        nodes * per_node if nodes > 1 else min(sh.gpus, per_node) if per_node else 0)
    if per_node and (gpus > nodes * per_node or (nodes > 1 and gpus % nodes)):
        raise OrchgenError(f"{gpus} GPUs per replica do not fit {nodes} node(s) of {per_node} GPUs evenly",
                           file, None, f"{at}.gpus_per_replica")
    if gpus and not per_node:
        raise OrchgenError(f"asks for {gpus} GPUs per replica but pool {pool.name!r} has no GPUs", file, None,
                           f"{at}.gpus_per_replica")
    per_pod = gpus // nodes
    # one pod of a replica: the node share its GPUs stand for (sizing's rule), all of a node's when it
    # takes every GPU of it
    pod = sizing.pod_shape(1, per_pod, per_node, hw.allocatable_cpus, hw.allocatable_memory_gib)
    # the replicas `gpus` holds (the service's declared demand is all its replicas' GPUs)
    held = max(1, d.gpus // gpus) if gpus else sh.pods
    return _decision(d, sv, stack, why, gpus, nodes, pod, held, at, file, tenants, warnings)


def _nodes(d: WorkloadDecision, sv: Serving, i: int, mig: bool) -> tuple[int, str]:
    """(nodes one replica spans, the field that says so). serving.nodes_per_replica where given; else a
    tightly coupled service of several nodes (`nodes` > 1: planned as a gang) is one replica over them,
    unless serving.gpus_per_replica sizes its replicas otherwise. A MIG pool's replica is one instance."""
    if "nodes_per_replica" in sv.model_fields_set or sv.gpus_per_replica is not None or mig:
        return sv.nodes_per_replica, f"workloads[{i}].serving.nodes_per_replica"
    if d.facts.tightly_coupled and d.facts.nodes > 1:
        return d.facts.nodes, f"workloads[{i}].nodes"
    return sv.nodes_per_replica, f"workloads[{i}].serving.nodes_per_replica"


def _mig_serving(fleet: Fleet, d: WorkloadDecision, sv: Serving, pool, hw, stack: str, why: str, i: int,
                 file: str, tenants: list[Tenant], warnings: list[Warning_]) -> ServingDecision:
    """On a MIG pool a replica is one MIG instance: a CUDA process enumerates a single MIG device, however
    many a container is given (NVIDIA MIG User Guide, "CUDA Device Enumeration":
    https://docs.nvidia.com/datacenter/tesla/mig-user-guide/), so vLLM runs with TP 1 on one slice."""
    at = f"workloads[{i}].serving"
    if sv.nodes_per_replica > 1:
        raise OrchgenError(f"pool {pool.name!r} is cut into MIG instances and a replica is one instance: "
                           "nodes_per_replica must be 1", file, None, f"{at}.nodes_per_replica")
    if sv.gpus_per_replica is not None and sv.gpus_per_replica != 1:
        raise OrchgenError(f"pool {pool.name!r} is cut into MIG instances and a replica is one instance (a CUDA "
                           f"process uses one MIG device): gpus_per_replica must be 1, not {sv.gpus_per_replica}",
                           file, None, f"{at}.gpus_per_replica")
    per_node = pool.gpu.count * hw.mig.per_gpu  # instances of a node
    # one instance's share of the node (sizing's rule: less 20 % for the node's own daemons)
    pod = sizing.pod_shape(1, 1, per_node, hw.allocatable_cpus, hw.allocatable_memory_gib, hw.mig.resource, 1)
    held = max(1, d.gpus * hw.mig.per_gpu)  # the instances the service's `gpus` (whole GPUs) hold
    why += f"; one {hw.mig.profile} MIG instance per replica (a CUDA process uses a single MIG device)"
    return _decision(d, sv, stack, why, 1, 1, pod, held, at, file, tenants, warnings,
                     quota_scale=hw.mig.per_gpu)


def _decision(d: WorkloadDecision, sv: Serving, stack: str, why: str, gpus: int, nodes: int, pod, held: int,
              at: str, file: str, tenants: list[Tenant], warnings: list[Warning_],
              quota_scale: int = 1) -> ServingDecision:
    lo = sv.min_replicas or 1
    hi = sv.max_replicas or max(lo, held)
    if lo > hi:
        raise OrchgenError(f"min_replicas {lo} is above max_replicas {hi} (the replicas `gpus` holds)", file,
                           None, f"{at}.min_replicas")
    _quota_warning(d, tenants, gpus, hi, at, warnings, quota_scale)
    if stack != "kserve" and sv.weights.startswith(KSERVE_ONLY_WEIGHTS):
        raise OrchgenError(f"weights {sv.weights.split('://')[0]}:// are fetched by KServe's storage initializer, "
                           f"and this service is a {stack}: use pvc:NAME, hf://, s3://, gs:// or baked, or stack: "
                           "kserve", file, None, f"{at}.weights")
    ray = stack == "rayservice"
    image = sv.image or (RAY_LLM_IMAGE if ray else VLLM_IMAGE)
    if ray and sv.scale_on != "requests_in_flight":
        why += (f"; scale_on {sv.scale_on} is not a Ray Serve autoscaling signal, so it scales on ongoing "
                "requests per replica")
    return ServingDecision(
        # Ray Serve LLM's config needs a model id; a server image of your own may load its own model
        stack=stack, why=why, image=image,
        model=sv.model or (None if sv.image and not ray else PLACEHOLDER_MODEL),
        port=sv.port, gpus_per_replica=gpus, nodes_per_replica=nodes, min_replicas=lo, max_replicas=hi,
        scale_on="requests_in_flight" if ray else sv.scale_on,
        scale_target=sv.scale_target or DEFAULT_TARGET["requests_in_flight" if ray else sv.scale_on],
        autoscaler="ray-serve" if ray else "keda", expose=sv.expose, ingress_class=sv.ingress_class,
        gateway=sv.gateway, host=sv.host, weights=sv.weights, pod=pod, secret_name=sv.secret,
        image_pull_secret=sv.image_pull_secret)


def _quota_warning(d: WorkloadDecision, tenants: list[Tenant], gpus: int, hi: int, at: str,
                   warnings: list[Warning_], scale: int = 1) -> None:
    """max_replicas beyond the tenant's guaranteed GPUs on the pool: the replicas above it run on
    quota borrowed from other tenants (reclaimable) or stay pending."""
    tenant = next((t for t in tenants if t.name == d.tenant), None)
    quota = tenant.quotas.get(d.pool) if tenant else None
    # scale: devices per whole GPU (a MIG pool's replica is one instance, its quota whole GPUs)
    if quota is None or not gpus or hi * gpus <= quota.gpus * scale:
        return
    fits = quota.gpus * scale // gpus
    unit = "GPUs" if scale == 1 else "MIG instances"
    warnings.append(Warning_(
        f"max_replicas {hi} x {gpus} {unit} = {hi * gpus} is above tenant {d.tenant}'s guaranteed "
        f"{quota.gpus * scale} {unit} on pool {d.pool}: {fits} replica(s) fit its quota, the rest run only on GPUs borrowed from other "
        "tenants (and are reclaimed when they need them) or stay pending; lower max_replicas or raise the "
        "tenant's share or `gpus`", f"{at}.max_replicas"))
