"""Starter manifests teams copy to submit their workload (kubernetes/workloads/<name>.yaml).

Each is valid and runnable as-is with a clearly named placeholder image and command; each sits in
its tenant's namespace, selects its pool's nodes, asks for its GPUs and joins its tenant's queue.

- ray: a RayJob submitting to the workload's RayCluster (manifests/40-ray.yaml) by clusterSelector;
  the cluster holds the gang, the RayJob only runs a small submitter pod.
- service: a Deployment.
- training / batch: Kueue or no scheduler: an Indexed batch/v1 Job; Volcano: a batch.volcano.sh Job
  (minAvailable = pods when the gang is required); KAI: when the gang is required, a PodGroup with
  minMember = pods and that many pods naming it (KAI's pod grouper gives a plain Job's pods
  minMember 1 each, and skips owner-less pods that already name a PodGroup); otherwise a Job.
- Multi-pod jobs get a headless Service, so rank 0 is reachable as <name>-0.<service>.
"""
from __future__ import annotations

from typing import Any

from ... import schedulers
from ...decide.plan import Plan, WorkloadDecision
from ...spec import fabric
from . import dra_driver, fabric_wiring, gang, pod_security, priority, ray, serving
from .common import (KAI_PODGROUP_ANNOTATION, KUEUE_PREFERRED_TOPOLOGY, KUEUE_REQUIRED_TOPOLOGY,
                     KUEUE_SLICE_REQUIRED_TOPOLOGY, KUEUE_SLICE_SIZE, TRAIN_IMAGE, PodShape,
                         dns1035, indexed_name, meta, namespace_of, node_selector, pool_has_topology,
                         preferred_level, queue_of, resources, shape, tolerations, topology_levels, topology_name)

JOB_SECONDS = 300  # the placeholder job prints, then holds its GPUs this long, then succeeds


def _command(w: WorkloadDecision, forever: bool) -> list[str]:
    hold = "sleep infinity" if forever else f"sleep {JOB_SECONDS}"
    return ["bash", "-c",
            f"echo 'orchgen placeholder for {w.name}: replace image and command'; "
            f"hostname; nvidia-smi -L || true; {hold}"]


def _container(w: WorkloadDecision, sh: PodShape, forever: bool, env: list[dict[str, Any]]) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": TRAIN_IMAGE, "command": _command(w, forever),
                         "resources": resources(sh)}
    if env:
        c["env"] = env
    if sh.gpus:
        c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]  # NCCL needs a big /dev/shm
    return c


def _pod_spec(plan: Plan, w: WorkloadDecision, sh: PodShape, *, forever: bool, restart: str,
              env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": restart, "priorityClassName": priority.class_of(plan, w),
                            "nodeSelector": node_selector(plan, w.pool),
                            "containers": [_container(w, sh, forever, env or [])]}
    if tols := tolerations(plan, w.pool):  # the pool's taints (workload.yaml, or the provider's default)
        spec["tolerations"] = tols
    if sh.gpus:
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if fabric_wiring.network_of(plan, w) is None:  # a fabric pod needs root for IPC_LOCK (pod_security.py)
        pod_security.harden(spec)
    return spec


def _rendezvous_env(sh: PodShape, master: str, rank_from: str | None) -> list[dict[str, Any]]:
    """torchrun-style variables: rank 0's stable DNS name, world size, this pod's rank."""
    if sh.pods < 2:
        return []
    env = [{"name": "MASTER_ADDR", "value": master},
           {"name": "MASTER_PORT", "value": "29500"},
           {"name": "NNODES", "value": str(sh.pods)}]
    if rank_from:
        env.append({"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": rank_from}}})
    return env


def _headless_service(w: WorkloadDecision, selector: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(dns1035(w.name), namespace_of(w.tenant)),
            "spec": {"clusterIP": "None", "selector": selector,
                     "ports": [{"name": "rendezvous", "port": 29500, "targetPort": 29500}]}}


def _template(plan: Plan, w: WorkloadDecision, spec: dict[str, Any], labels: dict[str, str],
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"labels": dict(labels)}
    if annotations:
        md["annotations"] = dict(annotations)
    return gang.apply({"metadata": md, "spec": spec}, gang.for_pods(plan, w.tenant))


def _tas_annotations(plan: Plan, w: WorkloadDecision, sh: PodShape) -> dict[str, str]:
    """Kueue topology-aware scheduling: keep a gang on one leaf switch (or the provider's narrowest
    shared level) when it fits (preferred). Only on a pool whose flavor has the topology: Kueue
    cannot admit a TAS workload to a flavor without one."""
    s = schedulers.get(plan.gang_scheduler)
    if not (s and s.topology_wiring == "podset-annotation" and pool_has_topology(plan, w.pool) and sh.pods > 1):
        return {}
    if dra_driver.applies(plan, w, sh):  # multi-node NVLink reaches only within one clique
        size = dra_driver.domain_size(plan, w.pool)
        if sh.pods <= size:
            return {KUEUE_REQUIRED_TOPOLOGY: fabric.LABEL_CLIQUE}
        # bigger than a rack: slices of whole cliques (the largest divisor of the pods that fits one,
        # so that the slices cover the job exactly), the job as a whole under one leaf where it fits
        slice_pods = max(d for d in range(1, size + 1) if sh.pods % d == 0)
        return {KUEUE_PREFERRED_TOPOLOGY: preferred_level(plan),
                KUEUE_SLICE_REQUIRED_TOPOLOGY: fabric.LABEL_CLIQUE, KUEUE_SLICE_SIZE: str(slice_pods)}
    return {KUEUE_PREFERRED_TOPOLOGY: preferred_level(plan)}


def _domain(plan: Plan, w: WorkloadDecision, sh: PodShape) -> list[dict[str, Any]]:
    """The job's ComputeDomain, first (its pods' channel template comes from it), on a pool of NVLink domains."""
    return [dra_driver.compute_domain(plan, w, sh)] if dra_driver.applies(plan, w, sh) else []


def _nvlink(plan: Plan, w: WorkloadDecision, sh: PodShape, template: dict[str, Any]) -> dict[str, Any]:
    """The pod template claiming the job's IMEX channel (dra_driver.claim) where it has a ComputeDomain."""
    return dra_driver.claim(w, template) if dra_driver.applies(plan, w, sh) else template


def _group_priority(plan: Plan) -> bool:
    """The scheduler reads the gang object's spec.priorityClassName (its record's priority_wiring)."""
    s = schedulers.get(plan.gang_scheduler)
    return s is not None and s.priority_wiring == "group"


def indexed_job(plan: Plan, w: WorkloadDecision) -> list[dict[str, Any]]:
    sh = shape(plan, w)
    name = indexed_name(w.name, sh.pods)
    sel = {"orchgen.io/workload": w.name}
    env = _rendezvous_env(sh, f"{name}-0.{dns1035(w.name)}",
                          "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    spec = _pod_spec(plan, w, sh, forever=False, restart="Never", env=env)
    if sh.pods > 1:
        spec["subdomain"] = dns1035(w.name)
    wiring = gang.for_pods(plan, w.tenant)
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": meta(name, namespace_of(w.tenant), labels=wiring.labels),
           "spec": {"completionMode": "Indexed", "completions": sh.pods, "parallelism": sh.pods,
                    # a gang is restarted as a whole, not pod by pod
                    "backoffLimit": 0 if w.gang_scheduler_required else 3,
                    "template": _nvlink(plan, w, sh, fabric_wiring.wire(plan, w, sh, _template(
                        plan, w, spec, sel, _tas_annotations(plan, w, sh))))}}
    return _domain(plan, w, sh) + ([_headless_service(w, sel)] if sh.pods > 1 else []) + [job]


def volcano_job(plan: Plan, w: WorkloadDecision) -> list[dict[str, Any]]:
    sh = shape(plan, w)
    # Volcano's svc plugin names pods (and hostnames) <job>-<task>-<index> under a headless Service
    # named after the job, hence a DNS-1035 name; its env plugin gives each pod its rank as VC_TASK_INDEX.
    name = indexed_name(dns1035(w.name), sh.pods, "-worker")
    env = _rendezvous_env(sh, f"{name}-worker-0.{name}", None)
    spec = _pod_spec(plan, w, sh, forever=False, restart="Never", env=env)
    gang = sh.pods if w.gang_scheduler_required else 1
    job_spec: dict[str, Any] = {
        "schedulerName": "volcano", "queue": queue_of(w.tenant), "minAvailable": gang, "maxRetry": 3,
        "tasks": [{"name": "worker", "replicas": sh.pods, "minAvailable": gang,
                   "template": _nvlink(plan, w, sh, fabric_wiring.wire(
                       plan, w, sh, {"metadata": {"labels": {"orchgen.io/workload": w.name}}, "spec": spec}))}],
    }
    if _group_priority(plan):
        job_spec["priorityClassName"] = priority.class_of(plan, w)
    if sh.pods > 1:
        job_spec["plugins"] = {"svc": [], "env": []}
    if w.gang_scheduler_required:
        # a gang is restarted whole: a lost member leaves the others waiting on a collective
        job_spec["policies"] = [{"event": "PodEvicted", "action": "RestartJob"},
                                {"event": "PodFailed", "action": "RestartJob"}]
        if topology_levels(plan):  # HyperNodes exist (listed on bare metal, discovered by label on a cloud)
            job_spec["networkTopology"] = {"mode": "soft"}  # prefer the fewest HyperNode tiers
    return _domain(plan, w, sh) + [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                    "metadata": meta(name, namespace_of(w.tenant)), "spec": job_spec}]


def kai_gang(plan: Plan, w: WorkloadDecision) -> list[dict[str, Any]]:
    sh = shape(plan, w)
    pg_name = w.name
    pg_spec: dict[str, Any] = {"minMember": sh.pods, "queue": queue_of(w.tenant)}
    if _group_priority(plan):
        pg_spec["priorityClassName"] = priority.class_of(plan, w)
    if pool_has_topology(plan, w.pool):
        pg_spec["topologyConstraint"] = {"topology": topology_name(plan),
                                         "preferredTopologyLevel": preferred_level(plan)}
    out: list[dict[str, Any]] = _domain(plan, w, sh) + [{"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                                  "metadata": meta(pg_name, namespace_of(w.tenant),
                                                   labels=gang.for_pods(plan, w.tenant).labels),
                                  "spec": pg_spec}]
    sel = {"orchgen.io/workload": w.name}
    if sh.pods > 1:
        out.append(_headless_service(w, sel))
    stem = indexed_name(w.name, sh.pods)
    for rank in range(sh.pods):
        env = _rendezvous_env(sh, f"{stem}-0.{dns1035(w.name)}", None)
        if env:
            env.append({"name": "NODE_RANK", "value": str(rank)})
        spec = _pod_spec(plan, w, sh, forever=False, restart="Never", env=env)
        spec.update({"hostname": f"{stem}-{rank}", "subdomain": dns1035(w.name)} if sh.pods > 1 else {})
        template = _nvlink(plan, w, sh, fabric_wiring.wire(
            plan, w, sh, _template(plan, w, spec, sel, {KAI_PODGROUP_ANNOTATION: pg_name})))
        md = meta(f"{w.name}-{rank}", namespace_of(w.tenant), labels=template["metadata"]["labels"],
                  annotations=template["metadata"]["annotations"])
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": template["spec"]})
    return out


def deployment(plan: Plan, w: WorkloadDecision) -> list[dict[str, Any]]:
    sh = shape(plan, w)
    sel = {"orchgen.io/workload": w.name}
    wiring = gang.for_pods(plan, w.tenant)
    spec = _pod_spec(plan, w, sh, forever=True, restart="Always")
    return [{"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": meta(w.name, namespace_of(w.tenant), labels=wiring.labels),
             "spec": {"replicas": sh.pods, "selector": {"matchLabels": sel},
                      "template": _template(plan, w, spec, sel)}}]


def rayjob(plan: Plan, w: WorkloadDecision) -> list[dict[str, Any]]:
    # No queue label: Kueue refuses to manage a RayJob that uses an existing cluster, and the
    # cluster it submits to is already admitted as one gang.
    spec: dict[str, Any] = {"clusterSelector": {"ray.io/cluster": ray.cluster_name(w)},
                            "entrypoint": "python -c \"import ray; ray.init(); print(ray.cluster_resources())\"",
                            "shutdownAfterJobFinishes": False}
    s = schedulers.get(plan.gang_scheduler)
    if s and s.rayjob_submission_mode:  # KAI: HTTPMode (its record says why)
        spec["submissionMode"] = s.rayjob_submission_mode
    return [{"apiVersion": "ray.io/v1", "kind": "RayJob",
             # KubeRay rejects RayJob names that are no DNS-1035 label of at most 47 characters
             "metadata": meta(f"{dns1035(w.name, 43)}-job", namespace_of(w.tenant)), "spec": spec}]


def starter(plan: Plan, w: WorkloadDecision) -> list[dict[str, Any]]:
    if w.serving is not None:  # a long-lived service: its serving platform (serving.py)
        return serving.objects(plan, w)
    if w.workload_class == "ray":
        return rayjob(plan, w)
    if w.workload_class == "service":
        return deployment(plan, w)
    how = s.starter if (s := schedulers.get(plan.gang_scheduler)) else "indexed-job"
    if how == "volcano-job":
        return volcano_job(plan, w)
    if how == "podgroup" and w.gang_scheduler_required:
        return kai_gang(plan, w)
    return indexed_job(plan, w)
