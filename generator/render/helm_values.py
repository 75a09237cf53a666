"""Helm values of the releases the Kubernetes side owns, one builder per chart: Plan -> dict.

Only keys that exist in the chart's upstream default values.yaml are emitted (tests check each
against the reference copy), and only where the Plan calls for something other than the default.
Helm replaces lists wholesale, so a list we extend (tolerations) repeats the upstream entries.
Config files embedded as strings (Kueue's Configuration, Volcano's scheduler conf) are built as data
and dumped, never templated.
"""
from __future__ import annotations

from typing import Any, Callable

import yaml

from ..fabric import LABEL_PLANE
from ..plan import Plan
from ..yamlio import dump_yaml

# --- GPU Operator --------------------------------------------------------------------------------

RDMA_FABRICS = ("infiniband", "roce")

# k3s runs its own containerd: the toolkit must edit k3s's generated config.toml (not the .tmpl,
# which holds Go template syntax the toolkit cannot parse, gpu-operator #473) and use its socket.
K3S_TOOLKIT_ENV = (
    {"name": "CONTAINERD_CONFIG", "value": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
    {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
)

# The plane taint the node-labels script puts on Slurm nodes in a hybrid (value `slurm`). Exists,
# not Equal: GPU Operator must run on every GPU node Kubernetes manages, whichever plane owns it
# (Slinky's slurmd pods need its driver, toolkit and device plugin too).
PLANE_TOLERATION = {"key": LABEL_PLANE, "operator": "Exists", "effect": "NoSchedule"}

# Upstream defaults (gpu-operator v26.7.0 values.yaml) of the lists the hybrid case extends.
_GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
_CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal",
                             "value": "", "effect": "NoSchedule"}


def gpudirect_rdma(plan: Plan) -> bool:
    """GPUDirect RDMA needs the operator's driver (bare metal) and an RDMA fabric; never on k3s."""
    kube = plan.kube_plane
    return (plan.bare_metal and plan.fabric.kind in RDMA_FABRICS
            and kube is not None and kube.name != "k3s")


def gpu_operator(plan: Plan) -> dict[str, Any]:
    # Bare metal: the operator owns the driver (kernel-matched, upgraded node by node). Elsewhere
    # the cloud image ships one, and a second driver container would fight it.
    driver: dict[str, Any] = {"enabled": plan.bare_metal}
    if gpudirect_rdma(plan):
        # useHostMofed: this bundle installs no NVIDIA Network Operator, so the IB/RoCE stack
        # (DOCA-OFED / MLNX_OFED) is the host's, as it is for the Slurm side of a hybrid.
        driver["rdma"] = {"enabled": True, "useHostMofed": True}
    values: dict[str, Any] = {
        "driver": driver,
        "mig": {"strategy": "single"},
        # The ServiceMonitor is created only where the Prometheus Operator's CRD exists.
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
    }
    if plan.kube_plane is not None and plan.kube_plane.name == "k3s":
        values["toolkit"] = {"env": [dict(e) for e in K3S_TOOLKIT_ENV]}
    if plan.hybrid:
        values["daemonsets"] = {"tolerations": [dict(_GPU_TOLERATION), dict(PLANE_TOLERATION)]}
        # NFD's worker labels the GPU nodes the operator's daemonsets select: it must reach them too.
        values["node-feature-discovery"] = {"worker": {"tolerations": [
            dict(_CONTROL_PLANE_TOLERATION), dict(_GPU_TOLERATION), dict(PLANE_TOLERATION)]}}
    return values


# --- Kueue ---------------------------------------------------------------------------------------

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


def ray_planned(plan: Plan) -> bool:
    kube = plan.kube_plane
    return kube is not None and any(w.primary == "ray" and w.plane == kube.name for w in plan.workloads)


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


def kueue(plan: Plan) -> dict[str, Any]:
    return {"managerConfig": {"controllerManagerConfigYaml": dump_yaml(kueue_config(plan)).decode()}}


# --- Volcano -------------------------------------------------------------------------------------

def volcano_scheduler_conf(plan: Plan) -> dict[str, Any]:
    """The chart's default scheduler conf (gang in the first tier), plus topology-aware scoring."""
    scoring: list[dict[str, Any]] = [
        {"name": "overcommit"}, {"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
        {"name": "proportion"}, {"name": "nodeorder"}, {"name": "binpack"},
    ]
    if plan.fabric.levels:
        # Weight 10 (upstream's example) so HyperNode locality outweighs plain node scores.
        scoring.append({"name": "network-topology-aware", "arguments": {"weight": 10}})
    return {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False},
                         {"name": "conformance"}]},
            {"plugins": scoring},
        ],
    }


def volcano(plan: Plan) -> dict[str, Any]:
    return {"custom": {"scheduler_config_override": dump_yaml(volcano_scheduler_conf(plan)).decode()}}


# --- KAI Scheduler -------------------------------------------------------------------------------

def kai_scheduler(plan: Plan) -> dict[str, Any]:
    chart = plan.charts["kai-scheduler"]
    return {
        # The chart in git points at registry/local/kai-scheduler; the release workflow rewrites it
        # to the registry it publishes to, which is where the chart itself comes from.
        "global": {"registry": chart.repo.removeprefix("oci://").rstrip("/")},
        # Tenants' Queues come from kubernetes/manifests; an unlimited default queue would let
        # unlabelled work bypass their quotas.
        "defaultQueue": {"createDefaultQueue": False},
        # A pre-install hook that copies Kueue Topologies into KAI ones: no Kueue here, and hooks
        # that read the live cluster make GitOps renders differ from installs.
        "topologyMigration": {"enabled": False},
    }


# --- KubeRay, cert-manager -----------------------------------------------------------------------

# KubeRay 1.7's accepted batchScheduler.name strings. Kueue needs none: its queue label does it.
KUBERAY_SCHEDULER = {"volcano": "volcano", "kai": "kai-scheduler"}


def kuberay_operator(plan: Plan) -> dict[str, Any]:
    name = KUBERAY_SCHEDULER.get(plan.gang_scheduler or "")
    # Never batchScheduler.enabled: deprecated (means volcano) and an error together with `name`.
    return {"batchScheduler": {"name": name}} if name else {}


def cert_manager(plan: Plan) -> dict[str, Any]:
    # v1.21: crds.enabled (installCRDs is deprecated); crds.keep stays true so an uninstall does
    # not delete every Certificate in the cluster.
    return {"crds": {"enabled": True}}


VALUES: dict[str, Callable[[Plan], dict[str, Any]]] = {
    "cert-manager": cert_manager,
    "gpu-operator": gpu_operator,
    "kueue": kueue,
    "volcano": volcano,
    "kai-scheduler": kai_scheduler,
    "kuberay-operator": kuberay_operator,
}
