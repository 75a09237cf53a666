"""Kueue (kueue.x-k8s.io/v1beta2): ResourceFlavors per pool, one Cohort, a ClusterQueue per tenant
and the LocalQueue `default` in each tenant namespace, and a Topology from the fabric model.
Flavors and the Topology are named after the fields the API server freezes (common.content_name).

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
from ...schedulers import KUEUE_ELASTIC_GATE
from ...yamlio import dump_yaml
from ...spec.fabric import LABEL_HOSTNAME
from .common import (KUEUE_DEFAULT_LOCAL_QUEUE, clique_topology_levels, clique_topology_name, content_name, devices,
                     gpu_resources, has_topology,
                     level_topology, meta, namespace_of, node_selector, pool_has_topology, queue_of, slices,
                     slice_of, tenant_namespaces, tolerations, topology_name, unique, workloads as kube_workloads)
from .ray import ray_planned, resized

API = "kueue.x-k8s.io/v1beta2"
RELEASE_METRICS = "kube-prometheus-stack"
COVERED = ("cpu", "memory")  # then common.gpu_resources: the order every flavor's resources must follow
MAX_FLAVORS = 64  # ClusterQueue resourceGroups[].flavors maxItems


def cohort_name(plan: Plan) -> str:
    """Named after the fleet; a ClusterQueue may not share it (the implicit tenant has that name)."""
    taken = {t.name for t in plan.tenants}
    return plan.name if plan.name not in taken else unique(f"{plan.name}-cohort", taken)


# The Topology of the pools whose nodes do not carry the fabric's levels, when another pool's do: its
# one level is the node. Kueue 0.19.2 refuses a topology flavor to every pod set that asks for no
# topology ("Flavor %q supports only TopologyAwareScheduling", pkg/scheduler/flavorassigner/
# tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS) unless every flavor of the ClusterQueue names
# a Topology: then a pod set without a TAS annotation is placed as if it had
# `podset-unconstrained-topology` (KEP 2724 "Implicit defaulting of TAS annotations"; isTASImplied,
# ClusterQueueSnapshot.IsTASOnly). So a mixed queue makes every flavor a topology one, and plain Jobs,
# Deployments and model servers need no annotation on any pool.
HOSTS_LEVELS = ({"nodeLabel": LABEL_HOSTNAME},)


def hosts_topology_name(plan: Plan) -> str:
    return content_name(f"{plan.name}-hosts", list(HOSTS_LEVELS))


def flavor_topology(plan: Plan, pool: str) -> str | None:
    """The Topology a pool's flavor names: the fabric's where its nodes carry the levels; the
    one-level hosts Topology where they do not but another pool's do (so every ClusterQueue, which
    holds every pool, is topology-only); none on a plane without topology."""
    if pool_has_topology(plan, pool):
        return clique_topology_name(plan) if pool in plan.platform.compute_domains else topology_name(plan)
    return hosts_topology_name(plan) if has_topology(plan) else None


def flavor_spec(plan: Plan, pool: str) -> dict[str, Any]:
    """The pool's nodes by the labels they carry (the provider's off bare metal), and its Topology
    (flavor_topology)."""
    spec: dict[str, Any] = {"nodeLabels": node_selector(plan, pool)}
    if tols := tolerations(plan, pool):
        # Kueue adds a flavor's tolerations to the pods it admits to it, and its topology-aware
        # admission counts only nodes whose taints the pod template plus the flavor tolerate
        # (cluster-toolkit's GKE TAS blueprints put nvidia.com/gpu on the flavor for this reason)
        spec["tolerations"] = tols
    if topo := flavor_topology(plan, pool):
        spec["topologyName"] = topo
    return spec


def flavor_name(plan: Plan, pool: str) -> str:
    """`<pool>-<hash of the flavor's spec>`: once topologyName is set, the CRD freezes nodeLabels,
    tolerations and topologyName ("nodeLabels are immutable when topologyName is set"), and a
    hybrid turn adds `orchgen.io/plane` to nodeLabels, so the name follows the spec
    (`common.content_name`). ClusterQueues name the flavor by this name."""
    return content_name(pool, flavor_spec(plan, pool))


def flavors(plan: Plan) -> list[dict[str, Any]]:
    return [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": meta(flavor_name(plan, s.pool)),
             "spec": flavor_spec(plan, s.pool)} for s in slices(plan)]


# The quota'd resource Kueue counts a ComputeDomain's IMEX channel claims as. Kueue 0.19.2 (its DRA
# integration, beta and on) turns every device a pod's ResourceClaimTemplate requests into a resource
# through Configuration.resources.deviceClassMappings and holds a workload whose DeviceClass has no
# mapping inadmissible ("DeviceClass %s is not mapped in DRA configuration", pkg/dra/claims.go); the
# mapped resource is counted after excludeResourcePrefixes (pkg/workload/workload.go), so it needs quota.
CHANNEL_RESOURCE = "compute-domain.nvidia.com/channel"


def covered(plan: Plan) -> list[str]:
    """cpu, memory, nvidia.com/gpu and each MIG pool's nvidia.com/mig-<profile>: one resource group
    covers them all (cpu is in every flavor), and a flavor whose nodes lack one quotas it at 0. With
    ComputeDomains, their channel (CHANNEL_RESOURCE) too."""
    return [*COVERED, *gpu_resources(plan), *([CHANNEL_RESOURCE] if plan.platform.compute_domains else [])]


def _channels(plan: Plan, pool: str, gpus: int) -> int:
    """IMEX channels in a quota of `gpus` GPUs of `pool`: one per node's worth (a ComputeDomain job's
    pod is one node's GPUs and claims one channel); 0 off the NVLink pools."""
    s = slice_of(plan, pool)
    if pool not in plan.platform.compute_domains or s is None or not s.gpus_per_node:
        return 0
    return gpus // s.gpus_per_node


def _quota_entry(plan: Plan, tenant: Tenant, pool: str) -> dict[str, Any]:
    q = tenant.quotas[pool]
    quantities: dict[str, Any] = {"cpu": q.cpus, "memory": f"{q.memory_gib}Gi", **devices(plan, {pool: q.gpus}),
                                  CHANNEL_RESOURCE: _channels(plan, pool, q.gpus)}
    # quantities as strings, as the API server returns them (resource.Quantity): an integer here reads back
    # as "16", and `pulumi up` would report every ClusterQueue changed on every run (issue 33)
    return {"name": flavor_name(plan, pool),
            "resources": [{"name": r, "nominalQuota": str(quantities[r])} for r in covered(plan)]}


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
        "fairSharing": {"weight": str(tenant.share)},  # a resource.Quantity: a string, as read back
        "resourceGroups": [],
    }
    if pools:
        spec["resourceGroups"] = [{"coveredResources": covered(plan),
                                   "flavors": [_quota_entry(plan, tenant, p) for p in pools]}]
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": meta(queue_of(tenant.name)), "spec": spec}


def objects(plan: Plan) -> list[dict[str, Any]]:
    """20-kueue.yaml: flavors first (ClusterQueues name them), then the cohort, then the queues."""
    out = flavors(plan)
    out.append({"apiVersion": API, "kind": "Cohort", "metadata": meta(cohort_name(plan)), "spec": {}})
    out += [cluster_queue(plan, t) for t in plan.tenants]
    # Named `default`: Kueue's default LocalQueue takes every job of the namespace that names no
    # queue. spec.clusterQueue is immutable (`self == oldSelf`), and stays the tenant's name.
    out += [{"apiVersion": API, "kind": "LocalQueue",
             "metadata": meta(KUEUE_DEFAULT_LOCAL_QUEUE, namespace_of(t.name)),
             "spec": {"clusterQueue": queue_of(t.name)}}
            for t in plan.tenants]
    return out


def topology_comment(plan: Plan) -> str:
    """18-topology.yaml's first line where the hosts Topology is written: why it is there."""
    if not any(flavor_topology(plan, s.pool) == hosts_topology_name(plan) for s in slices(plan)):
        return ""
    return (f"# {hosts_topology_name(plan)}: every flavor names a Topology, so Kueue 0.19.2 admits pods without TAS "
            "annotations on every pool (KEP 2724 \"Implicit defaulting of TAS annotations\"; "
            "pkg/scheduler/flavorassigner/tas_flavorassigner.go isTASImplied)\n")


def topology(plan: Plan) -> list[dict[str, Any]]:
    """The fabric's Topology, and the hosts Topology where a pool's nodes lack its levels."""
    out = level_topology(plan, API)
    if out and any(pool_has_topology(plan, p) for p in plan.platform.compute_domains):
        out.append({"apiVersion": API, "kind": "Topology", "metadata": meta(clique_topology_name(plan)),
                    "spec": {"levels": clique_topology_levels(plan)}})
    if any(flavor_topology(plan, s.pool) == hosts_topology_name(plan) for s in slices(plan)):
        out.append({"apiVersion": API, "kind": "Topology", "metadata": meta(hosts_topology_name(plan)),
                    "spec": {"levels": [dict(lv) for lv in HOSTS_LEVELS]}})
    return out


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
# feature on (v1beta1's `enable: true` converts to exactly this). In 0.19 it is on even when absent
# (apis/config/v1beta2/defaults.go fills in a 30m timeout), for every workload: there is no
# per-workload exemption, only the cluster-wide DisableWaitForPodsReady gate
# (pkg/util/waitforpodsready), so a model server is evicted and requeued like a gang if its pods
# are not Ready in time. The timeout is therefore sized for the slowest start the plane runs:
# - gangs only (GANG_START): a cold node pulling a multi-GB training image; short, so a half-placed
#   gang gives its GPUs back within a quarter hour;
# - with services on the plane (SERVICE_START): a cold node pulling a 10-20 GB serving image
#   (~5-10 min), then loading up to ~1 TB of weights from shared storage at 1-2 GB/s (~10-15 min)
#   and warming up (compilation, CUDA graphs: ~5 min) before the readiness probe passes.
# recoveryTimeout defaults to the timeout, which also covers a restarted replica reloading its model.
# blockAdmission stays false: true serialises admission across every ClusterQueue, so one tenant's
# slow start would stall all tenants; quotas add up to the capacity, so the deadlock it guards
# against needs a lost node, and timeout + requeue clear that.
GANG_START = "15m"
SERVICE_START = "45m"


def wait_for_pods_ready(plan: Plan) -> dict[str, Any]:
    services = any(w.workload_class == "service" or w.serving is not None for w in kube_workloads(plan))
    return {"timeout": SERVICE_START if services else GANG_START, "blockAdmission": False}
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
    # Kueue manages the tenant namespaces and nothing else: its webhooks (failurePolicy Fail) get
    # this selector as their namespaceSelector (charts/kueue/templates/webhook/manifests.yaml), so
    # an outage of Kueue cannot block pods in gpu-operator, slurm, argocd ... and there every job
    # is Kueue's, queue label or not (configuration_types.go: ManagedJobsNamespaceSelector,
    # ManageJobsWithoutQueueName; both in config.kueue.x-k8s.io/v1beta2 at 0.19.2).
    config["manageJobsWithoutQueueName"] = True
    config["managedJobsNamespaceSelector"] = tenant_namespaces()
    config["waitForPodsReady"] = wait_for_pods_ready(plan)
    net = plan.platform.network
    if net is not None:
        # The fabric's device resource (rdma/rdma_shared_device_a, vpc.amazonaws.com/efa) that multi-node
        # pods request is no tenant's quota: each node's device plugin bounds it and the GPUs it goes
        # with are in quota. Kueue's default quotaCheckStrategy BlockUndeclared otherwise refuses every
        # such pod ("resource vpc.amazonaws.com/efa unavailable in ClusterQueue", seen with the real
        # Kueue in tests/test_lws_real.py); configuration_types.go Resources.ExcludeResourcePrefixes
        config["resources"] = {"excludeResourcePrefixes": [net.resource]}
    if plan.platform.compute_domains:  # the IMEX channel claims as a quota'd resource (CHANNEL_RESOURCE)
        from .dra_driver import CHANNEL_DEVICE_CLASS

        config.setdefault("resources", {})["deviceClassMappings"] = [
            {"name": CHANNEL_RESOURCE, "deviceClassNames": [CHANNEL_DEVICE_CLASS]}]
    if len(plan.tenants) > 1:  # ClusterQueues' fairSharing.weight only counts with this on
        config["fairSharing"] = {k: list(v) for k, v in FAIR_SHARING.items()}
    return config


def values(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {"managerConfig": {"controllerManagerConfigYaml": dump_yaml(kueue_config(plan)).decode()}}
    if RELEASE_METRICS in plan.charts:
        # the chart's ServiceMonitor of Kueue's metrics (kueue_pending_workloads: the stuck-gang alert,
        # render/kubernetes/metrics.py); the release waits for kube-prometheus-stack's CRDs
        out["enablePrometheus"] = True
    if resized(plan):
        # the bundle's autoscaling Ray clusters are Kueue elastic jobs, which need this gate (beta, on by
        # default since 0.18: pkg/features/kube_features.go at v0.19.2; kueue.sigs.k8s.io/docs/concepts/
        # elastic_workload); written so that turning it off shows what it breaks (Kueue then refuses them)
        out["controllerManager"] = {"featureGates": [{"name": KUEUE_ELASTIC_GATE, "enabled": True}]}
    return out
