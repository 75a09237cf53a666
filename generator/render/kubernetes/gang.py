"""How an object joins its tenant's queue under each gang scheduler, in one place.

The tenant namespace does most of it (tenancy.py): starter workloads carry only what the
namespace cannot give them.
- Kueue: nothing on Jobs and Deployments: the namespace's LocalQueue `default` takes them
  (manageJobsWithoutQueueName over the tenant namespaces). Kueue admits the whole object at once,
  and waitForPodsReady (the kueue release's values) makes the start all-or-nothing. RayClusters in
  manifests/ name `default` explicitly, so that GitOps sees no label added by Kueue's webhook.
- Volcano: nothing on Deployments: Volcano's pod webhook sets `schedulerName: volcano` in tenant
  namespaces and its PodGroup webhook takes the queue from the namespace annotation. A Volcano Job
  names its queue in spec.queue (its own API); RayClusters use KubeRay's labels.
- KAI: pods get `schedulerName: kai-scheduler` and the `kai.scheduler/queue` label (on the top
  object too: KAI's pod grouper reads it there first); v0.13 cannot default them, so the tenant
  namespaces' admission policy refuses a pod without them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ... import schedulers
from ...decide.plan import Plan
from .common import queue_of, queues_enabled


@dataclass(frozen=True)
class Wiring:
    """How a workload's objects join its gang scheduler: labels, annotations and schedulerName."""

    labels: dict[str, str] = field(default_factory=dict)  # on the top object
    annotations: dict[str, str] = field(default_factory=dict)  # on the top object
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None  # pod spec schedulerName


def for_pods(plan: Plan, tenant: str) -> Wiring:
    """Jobs, Deployments and bare pods."""
    if not queues_enabled(plan):
        return Wiring()
    q = queue_of(tenant)
    s = scheduler(plan)
    if s.pod_wiring == "namespace":
        return Wiring()  # the tenant namespace wires them (module docstring)
    assert s.pod_queue_label, s.name
    return Wiring(labels={s.pod_queue_label: q}, pod_labels={s.pod_queue_label: q},
                  scheduler_name=s.pod_scheduler_name)


def for_lws(plan: Plan, tenant: str) -> Wiring:
    """A LeaderWorkerSet: each of its groups (one replica: a leader and size-1 workers) is one gang.
    - Kueue: its LWS integration admits a group as one workload (the namespace wires it, as pods);
    - Volcano: the LWS controller (gangSchedulingManagement.schedulerProvider volcano, lws.values)
      makes a PodGroup per group with minMember = size under startupPolicy LeaderCreated, its queue
      from the LWS's `scheduling.volcano.sh/queue-name` annotation, and the pods must name the
      `volcano` scheduler (LWS docs/examples/sample/gang-scheduling: lws-sample-volcano.yaml;
      pkg/schedulerprovider/volcano_provider.go);
    - KAI (v0.13 and later): its pod grouper's LWS plugin makes a PodGroup `<lws>-group-<index>` per
      group with minAvailable = leaderWorkerTemplate.size under LeaderCreated, in the queue of the
      `kai.scheduler/queue` label it reads on the LWS (the top owner) (NVIDIA/KAI-Scheduler
      pkg/podgrouper/podgrouper/plugins/leaderworkerset/lws_grouper.go); pods name `kai-scheduler`."""
    w = for_pods(plan, tenant)
    if not queues_enabled(plan):
        return w
    s = scheduler(plan)
    if s.lws_gang_provider == schedulers.VOLCANO_SCHEDULER:
        return Wiring(labels=w.labels, annotations={schedulers.VOLCANO_QUEUE_ANNOTATION: queue_of(tenant)},
                      pod_labels=w.pod_labels, pod_annotations=w.pod_annotations,
                      scheduler_name=schedulers.VOLCANO_SCHEDULER)
    return w


def scheduler(plan: Plan) -> schedulers.GangScheduler:
    """The plan's gang scheduler's record (only called where queues are enabled)."""
    s = schedulers.get(plan.gang_scheduler)
    if s is None:
        raise ValueError("no gang scheduler in this plan")
    return s


def for_raycluster(plan: Plan, tenant: str) -> dict[str, str]:
    """RayCluster labels. KubeRay (batchScheduler.name in the operator's values) then sets the
    scheduler name on every pod and, for Volcano, creates a PodGroup with minMember = head + workers;
    for KAI, KAI's pod grouper groups all the cluster's pods into one gang."""
    if not queues_enabled(plan):
        return {}
    return scheduler(plan).raycluster(queue_of(tenant))


def apply(template: dict[str, Any], wiring: Wiring) -> dict[str, Any]:
    """Add the pod-level wiring to a PodTemplateSpec (in place) and return it."""
    md = template.setdefault("metadata", {})
    if wiring.pod_labels:
        md.setdefault("labels", {}).update(wiring.pod_labels)
    if wiring.pod_annotations:
        md.setdefault("annotations", {}).update(wiring.pod_annotations)
    if wiring.scheduler_name:
        template["spec"]["schedulerName"] = wiring.scheduler_name
    return template
