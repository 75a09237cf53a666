"""Kueue (kueue.x-k8s.io/v1beta2): ResourceFlavors per pool, one Cohort, a ClusterQueue and a
LocalQueue per tenant, and a Topology from the fabric model.

Quotas are Tenant.quotas as the planner computed them (per pool they add up to the pool's capacity,
no more). Borrowing is on: every ClusterQueue is in the one cohort with no borrowingLimit, so idle
nominal quota of one tenant can be used by another, and `reclaimWithinCohort: Any` lets the owner
take it back by preemption.
"""
from __future__ import annotations

from typing import Any

import yaml

from ...errors import OrchgenError
from ...decide.plan import Plan, Tenant
from ...yamlio import dump_yaml
from .common import (GPU, level_topology, meta, namespace_of, node_selector, pool_has_topology, queue_of,
                     slices, topology_name, unique)
from .ray import ray_planned

API = "kueue.x-k8s.io/v1beta2"
COVERED = ("cpu", "memory", GPU)  # the order every flavor's resources must follow
MAX_FLAVORS = 64  # ClusterQueue resourceGroups[].flavors maxItems


def cohort_name(plan: Plan) -> str:
    """Named after the fleet; a ClusterQueue may not share it (the implicit tenant has that name)."""
    taken = {t.name for t in plan.tenants}
    return plan.name if plan.name not in taken else unique(f"{plan.name}-cohort", taken)


def flavors(plan: Plan) -> list[dict[str, Any]]:
    out = []
    for s in slices(plan):
        spec: dict[str, Any] = {"nodeLabels": node_selector(plan, s.pool)}
        if pool_has_topology(plan, s.pool):
            spec["topologyName"] = topology_name(plan)
        out.append({"apiVersion": API, "kind": "ResourceFlavor", "metadata": meta(s.pool), "spec": spec})
    return out


def _quota_entry(tenant: Tenant, pool: str) -> dict[str, Any]:
    q = tenant.quotas[pool]
    quantities = (q.cpus, f"{q.memory_gib}Gi", q.gpus)
    return {"name": pool,
            "resources": [{"name": r, "nominalQuota": v} for r, v in zip(COVERED, quantities)]}


def cluster_queue(plan: Plan, tenant: Tenant) -> dict[str, Any]:
    pools = [s.pool for s in slices(plan)]
    if len(pools) > MAX_FLAVORS:
        raise OrchgenError(f"the Kubernetes plane has {len(pools)} pools; a Kueue ClusterQueue takes "
                           f"at most {MAX_FLAVORS} flavors in one resource group")
    spec: dict[str, Any] = {
        "cohortName": cohort_name(plan),
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace_of(tenant.name)}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        # with fair sharing on (kueue values), quota lent through the cohort goes by share
        "fairSharing": {"weight": tenant.share},
        "resourceGroups": [],
    }
    if pools:
        spec["resourceGroups"] = [{"coveredResources": list(COVERED),
                                   "flavors": [_quota_entry(tenant, p) for p in pools]}]
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": meta(queue_of(tenant.name)), "spec": spec}


def objects(plan: Plan) -> list[dict[str, Any]]:
    """20-kueue.yaml: flavors first (ClusterQueues name them), then the cohort, then the queues."""
    out = flavors(plan)
    out.append({"apiVersion": API, "kind": "Cohort", "metadata": meta(cohort_name(plan)), "spec": {}})
    out += [cluster_queue(plan, t) for t in plan.tenants]
    out += [{"apiVersion": API, "kind": "LocalQueue",
             "metadata": meta(queue_of(t.name), namespace_of(t.name)),
             "spec": {"clusterQueue": queue_of(t.name)}}
            for t in plan.tenants]
    return out


def topology(plan: Plan) -> list[dict[str, Any]]:
    return level_topology(plan, API)


# --- the kueue release's values --------------------------------------------------------------

# managerConfig.controllerManagerConfigYaml of kueue 0.19.2's values.yaml, comments dropped (a test
# compares it with the reference copy). The chart reads its ports, leader election id and
# concurrency from here, so we change this as data instead of writing a Configuration from scratch.
KUEUE_DEFAULT_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "ray.io/rayjob"
  - "ray.io/rayservice"
  - "ray.io/raycluster"
  - "jobset.x-k8s.io/jobset"
  - "workload.codeflare.dev/appwrapper"
  - "trainer.kubeflow.org/trainjob"
  - "pod"
  - "deployment"
  - "statefulset"
  - "leaderworkerset.x-k8s.io/leaderworkerset"
"""

RAY_FRAMEWORKS = ("ray.io/rayjob", "ray.io/raycluster")

# v1beta2 has no `enable` under waitForPodsReady or fairSharing: the block being present turns the
# feature on (v1beta1's `enable: true` converts to exactly this). timeout: long enough for a cold
# node to pull a multi-GB image and load a model, short enough that a half-placed gang gives its
# GPUs back within a quarter hour. blockAdmission stays false: true serialises admission across
# every ClusterQueue, so one tenant's slow start would stall all tenants; quotas add up to the
# capacity, so the deadlock it guards against needs a lost node, and timeout + requeue clear that.
WAIT_FOR_PODS_READY = {"timeout": "15m", "blockAdmission": False}
FAIR_SHARING = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def kueue_config(plan: Plan) -> dict[str, Any]:
    config = yaml.safe_load(KUEUE_DEFAULT_CONFIG)
    frameworks = list(config["integrations"]["frameworks"])
    if ray_planned(plan):
        frameworks += [f for f in RAY_FRAMEWORKS if f not in frameworks]
    else:  # no KubeRay installed: Kueue would only poll for the missing Ray APIs
        frameworks = [f for f in frameworks if not f.startswith("ray.io/")]
    if "batch/job" not in frameworks:  # the starter Jobs of gang workloads rely on it
        frameworks.insert(0, "batch/job")
    config["integrations"]["frameworks"] = frameworks
    config["waitForPodsReady"] = dict(WAIT_FOR_PODS_READY)
    if len(plan.tenants) > 1:  # ClusterQueues' fairSharing.weight only counts with this on
        config["fairSharing"] = {k: list(v) for k, v in FAIR_SHARING.items()}
    return config


def values(plan: Plan) -> dict[str, Any]:
    return {"managerConfig": {"controllerManagerConfigYaml": dump_yaml(kueue_config(plan)).decode()}}
