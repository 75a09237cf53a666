"""PriorityClasses of the Kubernetes plane (manifests/01-priorities.yaml): services outrank batch,
and preemptible work (run on quota borrowed from other tenants) ranks below both.

Every starter's pods name one (`class_of`), and the gang scheduler reads it where its record says
(generator/schedulers.py `priority_wiring`):
- "pod": Kueue takes a Workload's priority from its pod template's priorityClassName when no
  kueue.x-k8s.io/priority-class label names a WorkloadPriorityClass (Kueue docs, "Workload Priority"),
  so `withinClusterQueue: LowerPriority` has values to compare;
- "group": the gang object carries it too: Volcano's Job spec.priorityClassName (the PodGroup's
  priority for its queue order and preemption), KAI's PodGroup spec.priorityClassName
  (scheduling.run.ai/v2alpha2 CRD: "indicates the PodGroup's priority").

Values: KAI treats a workload whose priority is below 100 as preemptible and 100 or above as
non-preemptible (KAI docs "Workload Priority": its own train=50, build=100, inference=125 classes),
so batch sits below 100 (a training gang may run on borrowed quota and be reclaimed) and services
above (a model server is never preempted for a batch job). Kueue and Volcano compare values only.
No class is globalDefault: pods the site runs elsewhere keep priority 0.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan, WorkloadDecision
from .common import borrowing, meta, queues_enabled

# (suffix, value, what it is for)
SERVICES = ("services", 1000, "long-lived services (model servers): outrank batch, never preempted for it")
BATCH = ("batch", 50, "batch and training jobs, Ray clusters: below services; preemptible under KAI (< 100)")
PREEMPTIBLE = ("preemptible", 10, "work that may be preempted for any other (e.g. on borrowed quota)")


def name(plan: Plan, cls: tuple[str, int, str]) -> str:
    return f"{plan.name}-{cls[0]}"


def classes(plan: Plan) -> list[tuple[str, int, str]]:
    """Services and batch always on a Kubernetes plane; preemptible where tenants borrow quota."""
    if plan.kube_plane is None:
        return []
    return [SERVICES, BATCH, *([PREEMPTIBLE] if queues_enabled(plan) and borrowing(plan) and len(plan.tenants) > 1
                              else [])]


def class_of(plan: Plan, w: WorkloadDecision) -> str:
    """The PriorityClass a workload's pods name."""
    # a serving platform (a Ray service's RayService too) is a service
    return name(plan, SERVICES if w.workload_class == "service" or w.serving is not None else BATCH)


def objects(plan: Plan) -> list[dict[str, Any]]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": meta(name(plan, c)),
             "value": value, "globalDefault": False, "description": f"orchgen: {why}"}
            for c in classes(plan) for (_, value, why) in [c]]
