"""The gang-scheduler registry: one record per scheduler a Kubernetes plane may run.

A record says how a workload is wired to its tenant's queue, which objects its module writes,
its webhooks, its chart and its README part. The planner and the renderers read these fields;
nothing outside this module compares a scheduler's name. The objects themselves (queues,
topologies, flavors) are written by the scheduler's module under render/kubernetes/ (`module`),
whose `objects(plan)` and `topology(plan)` render/kubernetes/manifests.py calls.

Adding a scheduler: one record here, one module under render/kubernetes/ (registered in
manifests.MODULES), its chart in catalog.py (`needed_when=("gang:<name>",)`), and the name in
spec/models.py's `options.gang_scheduler`. See CONTRIBUTING.md.
"""
from __future__ import annotations

from dataclasses import dataclass

QUEUE = "{queue}"  # stands for the tenant's queue name in a label or annotation value


@dataclass(frozen=True)
class GangScheduler:
    """A gang scheduler the Kubernetes plane can run, and how `gang_scheduler: auto` treats it."""

    name: str  # options.gang_scheduler and plan.json's gang_scheduler
    title: str
    chart: str  # its component in catalog.py
    module: str  # its module under render/kubernetes/
    auto: bool  # what `gang_scheduler: auto` picks when gangs or tenants need one
    # How pods, Jobs and Deployments reach the queue: "namespace" (the tenant namespace's label or
    # annotation and the scheduler's own webhook do it) or "pod" (each pod carries the labels and
    # schedulerName below)
    pod_wiring: str
    pod_queue_label: str | None  # the pod label naming the queue ("pod" wiring)
    pod_scheduler_name: str | None  # pod spec schedulerName ("pod" wiring)
    namespace_queue_annotation: str | None  # the tenant namespace's annotation naming its queue
    raycluster_labels: tuple[tuple[str, str], ...]  # RayCluster labels; QUEUE is the tenant's queue
    kuberay_batch_scheduler: str | None  # kuberay-operator's batchScheduler.name (KubeRay 1.7)
    # How a gang prefers one leaf switch: "podset-annotation" (Kueue TAS on the pod template),
    # "raycluster-annotations" (KAI topology on the RayCluster), "network-topology" (Volcano
    # HyperNodes, networkTopology mode on the RayCluster/Job), or None
    topology_wiring: str | None
    topology_object: bool  # its module writes a Topology object the README names
    flavors: bool  # its module writes ResourceFlavors the README names (Kueue)
    # The starter Job for a multi-pod workload: "indexed-job" (a batch/v1 Indexed Job),
    # "volcano-job" (batch.volcano.sh Job), "podgroup" (a KAI PodGroup with its pods, when the
    # workload needs a gang; an Indexed Job otherwise)
    starter: str
    rayjob_submission_mode: str | None  # RayJob spec.submissionMode it needs (None: KubeRay's default)
    # What the tenant admission policy checks ("" none: the queue is namespaced, a tenant cannot
    # name another's): "pods-and-podgroups" (schedulerName, queue label, PodGroup queue),
    # "podgroups" (the PodGroup's queue, after the scheduler's mutating webhook)
    admission: str
    webhooks: tuple[str, ...]  # what its admission webhooks do to a tenant's objects (README, docs)
    # Where it reads a workload's PriorityClass (render/kubernetes/priority.py): "pod" (the pod
    # template's priorityClassName only) or "group" (also the gang object's spec.priorityClassName:
    # Volcano's Job, KAI's PodGroup)
    priority_wiring: str
    # What a tenant's group may do in its own namespace with the scheduler's namespaced objects
    # (tenancy.access): (API group, resources, "write" | "read"). Queues and quotas are never written.
    tenant_rbac: tuple[tuple[str, tuple[str, ...], str], ...]
    readme_part: str  # the README part that describes it: templates/readme/<readme_part>.md.j2
    # The gang-stuck alert (render/kubernetes/metrics.py): a PromQL expression of the gangs waiting
    # per queue, in a metric the scheduler exports, and the label naming the queue ("": none scraped)
    stuck_pending: str = ""
    stuck_pending_queue: str = ""
    # Its metrics Service when its chart renders no ServiceMonitor of its own: the Service's labels
    # and port name, which kube-prometheus-stack's additionalServiceMonitors select (() : none needed)
    metrics_service: tuple[tuple[str, str], ...] = ()
    metrics_port: str = ""
    # LeaderWorkerSet's gangSchedulingManagement.schedulerProvider (lws chart v0.10.0): LWS makes a
    # PodGroup per group for this scheduler; None: the scheduler gangs a group itself (Kueue's LWS
    # integration) or this is not known to work
    lws_gang_provider: str | None = None
    # What a RayCluster (or a RayService) must carry for this scheduler to admit it while KubeRay's
    # autoscaler resizes it. Kueue 0.19 admits one only as an elastic job: its webhooks refuse
    # `enableInTreeAutoscaling: true` unless the ElasticJobsViaWorkloadSlices gate is on and the object is
    # annotated kueue.x-k8s.io/elastic-job: "true" (0.19.2 pkg/controller/jobs/raycluster/raycluster_webhook.go
    # validateCreate, pkg/workloadslicing/workloadslicing.go Enabled; RayService: raycluster/common.go
    # ValidateCreate), and then gate every pod template themselves (ElasticJobSchedulingGate, Default).
    # A resize becomes a new Workload slice that replaces the admitted one (scale up) or shrinks it in
    # place (scale down): workloadslicing.EnsureWorkloadSlices; asked of the real Kueue in
    # tests/test_kube_real.py test_kueue_resizes_an_elastic_raycluster_within_quota
    ray_autoscaling_annotations: tuple[tuple[str, str], ...] = ()
    # Whether it resizes a cluster whose pods it places by topology. Kueue 0.19 does not: an elastic
    # slice keeps its running pods' topology domains only behind the alpha, default-off gate
    # ElasticJobsViaWorkloadSlicesWithTAS, which then refuses any preferred or required topology
    # (pkg/scheduler/flavorassigner/tas_flavorassigner.go "Only unconstrained topology is supported with
    # elastic workload slices"; pkg/features/kube_features.go), and on a plane with a Topology every
    # flavor is a topology one (render/kubernetes/kueue.py flavor_topology)
    ray_autoscaling_with_topology: bool = True
    # Whether it dispatches queued jobs across clusters, for a plane beyond one cluster
    # (decide/clusters.py): Kueue's MultiKueue (kueue.sigs.k8s.io/docs/concepts/multikueue)
    multicluster: bool = False
    # Whether a tenant namespace's ResourceQuota caps its GPUs (render/kubernetes/common.py
    # resource_quota_gpus). False where the scheduler's queue is the quota and it gates pods before
    # admitting them: the API server counts a scheduling-gated pod against a ResourceQuota at creation
    # (Kubernetes docs "Resource Quotas"), so a cap would refuse the pods the queue would hold (Kueue)
    namespace_gpu_quota: bool = True

    def raycluster(self, queue: str) -> dict[str, str]:
        return {k: v.replace(QUEUE, queue) for k, v in self.raycluster_labels}


KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_DEFAULT_LOCAL_QUEUE = "default"
# an elastic job's annotation (0.19.2 pkg/constants/constants.go ElasticJobAnnotation, value "true")
KUEUE_ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
# the Kueue feature gate elastic jobs need: beta and on by default since 0.18 (alpha, off, in 0.13-0.17;
# 0.19.2 pkg/features/kube_features.go)
KUEUE_ELASTIC_GATE = "ElasticJobsViaWorkloadSlices"
VOLCANO_SCHEDULER = "volcano"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # plain pods / Deployments / Jobs
RAY_SCHEDULER_LABEL = "ray.io/scheduler-name"  # KubeRay: RayCluster -> scheduler plugin
RAY_VOLCANO_QUEUE_LABEL = "volcano.sh/queue-name"  # KubeRay copies it into Volcano's PodGroup
KAI_SCHEDULER = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"  # the chart's global.queueLabelKey default

SCHEDULERS: dict[str, GangScheduler] = {
    s.name: s
    for s in (
        GangScheduler(
            "kueue", "Kueue", chart="kueue", module="kueue", auto=True,
            pod_wiring="namespace", pod_queue_label=None, pod_scheduler_name=None,
            namespace_queue_annotation=None,
            raycluster_labels=((KUEUE_QUEUE_LABEL, KUEUE_DEFAULT_LOCAL_QUEUE),),
            kuberay_batch_scheduler=None,  # Kueue needs none: its queue label does it
            topology_wiring="podset-annotation", topology_object=True, flavors=True,
            starter="indexed-job", rayjob_submission_mode=None, admission="",
            webhooks=("the kueue-system webhook suspends a labelled Job, RayCluster or pod group until "
                      "its ClusterQueue admits it (waitForPodsReady: all or nothing)",),
            priority_wiring="pod",
            # a LocalQueue is the tenant's door to its ClusterQueue: read only
            tenant_rbac=(("kueue.x-k8s.io", ("workloads", "localqueues"), "read"),),
            readme_part="kubernetes_queues",
            # kubernetes-sigs/kueue v0.19.2 pkg/metrics/metrics.go: kueue_pending_workloads{cluster_queue,
            # status}; "inadmissible": a failed admission attempt, not retried until the cluster changes.
            # Scraped through its chart's own ServiceMonitor (enablePrometheus, render/kubernetes/kueue.py)
            stuck_pending='max by (cluster_queue) (kueue_pending_workloads{status="inadmissible"})',
            stuck_pending_queue="cluster_queue", multicluster=True,
            ray_autoscaling_annotations=((KUEUE_ELASTIC_JOB, "true"),), ray_autoscaling_with_topology=False,
            namespace_gpu_quota=False),
        GangScheduler(
            "volcano", "Volcano", chart="volcano", module="volcano", auto=False,
            pod_wiring="namespace", pod_queue_label=None, pod_scheduler_name=None,
            namespace_queue_annotation=VOLCANO_QUEUE_ANNOTATION,
            raycluster_labels=((RAY_SCHEDULER_LABEL, VOLCANO_SCHEDULER), (RAY_VOLCANO_QUEUE_LABEL, QUEUE)),
            kuberay_batch_scheduler="volcano",
            topology_wiring="network-topology", topology_object=False, flavors=False,
            starter="volcano-job", rayjob_submission_mode=None, admission="podgroups",
            webhooks=("/podgroups/mutate puts a `default` PodGroup in the namespace's queue",),
            priority_wiring="group",
            tenant_rbac=(("batch.volcano.sh", ("jobs",), "write"), ("scheduling.volcano.sh", ("podgroups",), "read")),
            readme_part="kubernetes_queues",
            # volcano-sh/volcano pkg/scheduler/metrics/queue.go: volcano_queue_pod_group_pending_count{queue_name}
            stuck_pending="max by (queue_name) (volcano_queue_pod_group_pending_count)",
            stuck_pending_queue="queue_name",
            # the chart's scheduler Service (templates/scheduler.yaml): label app=volcano-scheduler, port
            # `metrics` 8080, with prometheus.io/scrape annotations the Prometheus Operator ignores
            metrics_service=(("app", "volcano-scheduler"),), metrics_port="metrics", lws_gang_provider="volcano"),
        GangScheduler(
            "kai", "KAI Scheduler", chart="kai-scheduler", module="kai", auto=False,
            pod_wiring="pod", pod_queue_label=KAI_QUEUE_LABEL, pod_scheduler_name=KAI_SCHEDULER,
            namespace_queue_annotation=None,
            raycluster_labels=((KAI_QUEUE_LABEL, QUEUE),),
            kuberay_batch_scheduler="kai-scheduler",
            topology_wiring="raycluster-annotations", topology_object=True, flavors=False,
            # KubeRay 1.7's KAI plugin refuses every RayJob in K8sJobMode, the default
            # (batchscheduler/kai-scheduler/kai_scheduler.go, DoBatchSchedulingOnSubmission);
            # HTTPMode submits through the cluster's dashboard with no submitter pod
            starter="podgroup", rayjob_submission_mode="HTTPMode", admission="pods-and-podgroups",
            webhooks=("KAI's pod grouper groups a workload's pods into one PodGroup; KAI v0.13 "
                      "cannot default schedulerName",),
            priority_wiring="group",
            # the gang starter creates its PodGroup; the admission policy keeps it in the tenant's queue
            tenant_rbac=(("scheduling.run.ai", ("podgroups",), "write"),),
            readme_part="kubernetes_queues"),
    )
}

AUTO = next(s for s in SCHEDULERS.values() if s.auto)


def get(name: str | None) -> GangScheduler | None:
    """The record of plan.gang_scheduler (None without one)."""
    return SCHEDULERS[name] if name else None
