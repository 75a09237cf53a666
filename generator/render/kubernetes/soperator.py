"""Soperator (Nebius, 4.1.7): Helm values of the releases soperator and soperator-slurm-cluster,
and one NodeSet (slurm.nebius.ai/v1alpha1) per Slurm pool slice in
kubernetes/manifests/50-soperator-nodesets.yaml, for a Plan whose Slurm plane runs on Kubernetes
with operator `soperator`.

As for Slinky, the Slurm side is `slurm.slurm_config(plan)` and its model, reshaped:

* Partitions: `partitionConfiguration` of type `structured`, one entry per PartitionName line
  (`isAll` for Nodes=ALL, else the NodeSets of its pools), the rest of the line as `config` (less
  `Topology=`, which names a topology.yaml topology: Soperator's topology is topology.conf).
* Nodes: a NodeSet per pool (named after it) with `replicas` = its node count, pinned to the pool's
  Slurm nodes by nodeSelector and tolerating their taint; `nodeConfig.static` carries slurm.conf's
  Gres and RealMemory, `nodeConfig.features` its Features, `nodeConfig.gresConfig` the pool's
  gres.conf line (Soperator prefixes it with the node's name), and the pod asks for the same GPUs.
* Soperator writes slurm.conf and topology.conf itself. It builds the topology from the Kubernetes
  nodes' labels `topology.nebius.com/tier-N` (`topology_groups`); the plugin is the one the
  Slurm model picks: topology/block when one NVLink block topology covers every Slurm pool
  (blockSize = its domain size), else the fabric tree.

A worker pod cannot have a whole node (kubelet and the system daemons need some of it), so unlike
bare metal the pod and the node Slurm sees get the node less a reserve: memory is slurm.conf's
RealMemory (the node less its OS headroom), CPUs are the node's less max(1, 5%) (the same
fraction) and less munge's core, and Slurm is told those CPUs, so it never hands out a core the pod
does not have.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from ...contract import MANIFESTS_DIR
from ...spec import fabric
from ...decide.plan import Plan
from ...yamlio import dump_yaml_all
from .common import GPU, MANAGED, SLURM_TAINT, pool_labels, tolerations
from .helm import monitoring_installed
from .slinky import conf_lines, gpu_resource, node_settings
from ..slurm import slurm_config
from ..slurm.model import Partition, SlurmModel, model

NODESETS_FILE = f"{MANIFESTS_DIR}/50-soperator-nodesets.yaml"
API_VERSION = "slurm.nebius.ai/v1alpha1"
SLURM_OF_IMAGES = "25.11.3"  # the helm-nodesets 4.1.7 image tags: 4.1.7-slurm25.11.3
IMAGE_REGISTRY = "cr.eu-north1.nebius.cloud/soperator"
TOPOLOGY_LABEL_PREFIX = "topology.nebius.com"  # the soperator chart's manager env default
CPU_RESERVE = 0.05
MUNGE = {"cpu": "1", "memory": "1Gi"}  # the munge sidecar of each worker pod (the chart's munge default)
# k8sNodeFilters the chart's defaults refer to: populateJail and the checks use "gpu", the
# controller, login, exporter, REST and accounting pods "no-gpu", sconfigcontroller "system".
SLURM_NODES_FILTER, SERVICE_FILTER, SYSTEM_FILTER = "gpu", "no-gpu", "system"
JAIL_CLAIM = "jail-pvc"  # the slurm-cluster chart's default jail volume source: shared storage you provide
DB_PASSWORD_SECRET = {"name": "slurm-mariadb", "key": "password"}


def operated(plan: Plan) -> bool:
    plane = plan.slurm_plane
    return plane is not None and plane.host == "kubernetes" and plane.operator == "soperator"


def namespace(plan: Plan) -> str:
    return plan.charts["soperator-slurm-cluster"].namespace


def _toleration() -> dict[str, str]:
    return {**SLURM_TAINT, "operator": "Equal"}


def _selector(pool: str | None = None, plan: Plan | None = None) -> dict[str, str]:
    out = {fabric.LABEL_PLANE: SLURM_TAINT["value"]}
    if pool:  # the pool's labels: orchgen's on bare metal, the provisioner's on a cloud
        out.update(pool_labels(plan, pool) if plan is not None else {fabric.LABEL_POOL: pool})
    return out


# ------------------------------------------------------------------ slurm-cluster values


# Partition options that name a topology.yaml topology: Soperator writes topology.conf (one
# plugin for the whole cluster), where a partition has no topology of its own.
TOPOLOGY_OPTION = "Topology="


def _partition(p: Partition) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name}
    if p.nodes == "ALL":
        out["isAll"] = True
    else:
        out["nodeSetRefs"] = list(p.pools)
    options = p.line.split()[2:]  # after PartitionName= and Nodes=, which Soperator writes
    out["config"] = " ".join(o for o in options if not o.startswith(TOPOLOGY_OPTION))
    return out


def topology_settings(m: SlurmModel) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(slurmConfig keys, `topology` value or None): block only where blocks cover every pool."""
    pools = [g.pool for g in m.groups]
    covering = [t for t in m.topology.blocks if set(pools) <= set(t.pools)]
    if covering:
        return {"topologyPlugin": "topology/block"}, {"blockSize": covering[0].size}
    return {"topologyPlugin": "topology/tree"}, None


DB_USER = "slurm"


def _accounting() -> dict[str, Any]:
    # Soperator runs slurmdbd; the database is yours (or mariadb-operator's): its password is a
    # Secret you create, named here, never written. No `user`: no template of helm-slurm-cluster
    # 4.1.7 reads slurmNodes.accounting.externalDB.user (templates/slurm-cluster-cr.yaml passes
    # enabled, host, port, passwordSecretKeyRef, tls and storageParameters only), while the
    # operator refuses an empty one ("external DB user is empty", internal/render/accounting/
    # secret.go). The SlurmCluster CRD has the field, so the README's post-install step sets it
    # with a merge patch (`db_user_patch`), which Helm's and Argo CD's three-way merges keep.
    return {"enabled": True, "externalDB": {"enabled": True, "host": "mariadb", "port": 3306,
                                            "passwordSecretKeyRef": dict(DB_PASSWORD_SECRET)}}


def db_user_patch(plan: Plan) -> str:
    """The post-install command that gives the SlurmCluster its external DB user."""
    patch = '{"spec":{"slurmNodes":{"accounting":{"externalDB":{"user":"%s"}}}}}' % DB_USER
    return f"kubectl -n {namespace(plan)} patch slurmcluster {model(plan).cluster} --type merge -p '{patch}'"


def cluster_values(plan: Plan) -> dict[str, Any]:
    m = model(plan)
    slurm_config_keys, topo = topology_settings(m)
    values: dict[str, Any] = {
        "clusterName": m.cluster,
        "partitionConfiguration": {"configType": "structured",
                                   "partitions": [_partition(p) for p in m.partitions]},
        "k8sNodeFilters": [
            {"name": SLURM_NODES_FILTER, "nodeSelector": _selector(), "tolerations": [_toleration()]},
            {"name": SERVICE_FILTER},  # any untainted node: the Kubernetes plane's, or a system pool
            {"name": SYSTEM_FILTER},
        ],
        "slurmConfig": slurm_config_keys,
        # The chart renders a monitoring.coreos.com ServiceMonitor for sconfigcontroller by
        # default (templates/sconfigcontroller-servicemonitor.yaml): off unless the plan installs
        # the Prometheus Operator's CRDs, or the release fails to install.
        "sConfigController": {"serviceMonitor": {"enabled": monitoring_installed(plan)}},
    }
    if topo:
        values["topology"] = topo
    if m.accounting:
        values["slurmNodes"] = {"accounting": _accounting()}
    return values


# slurmNodes.accounting.externalDB keys the chart's defaults carry only as comments, while its
# SlurmCluster template `required`s them when externalDB is enabled (CRD: spec.slurmNodes.accounting.externalDB).
# Not `user`, which the defaults also show commented out: no template reads it.
EXTERNAL_DB_KEYS = {"host": "", "passwordSecretKeyRef": {"name": "", "key": ""}}


def chart_defaults(defaults: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The slurm-cluster chart's defaults as `validate.values.unknown_keys` should see them: with
    the externalDB keys its template reads but its values.yaml only shows commented out."""
    out = copy.deepcopy(defaults)
    out["slurmNodes"]["accounting"]["externalDB"].update(copy.deepcopy(EXTERNAL_DB_KEYS))
    return out


def operator_values(plan: Plan) -> dict[str, Any]:
    # Workers and login nodes are OpenKruise Advanced StatefulSets, and the topology ConfigMap is
    # spread by Kruise's ResourceDistribution: the chart installs Kruise when asked. The webhook's
    # certificate comes from the cert-manager release.
    monitoring = monitoring_installed(plan)
    return {
        "certManager": {"enabled": True}, "kruise": {"installOperator": True},
        # templates/servicemonitor.yaml renders a ServiceMonitor by default; the operator itself
        # creates PodMonitors/ServiceMonitors only when IS_PROMETHEUS_CRD_INSTALLED is "true"
        # (internal/check/installed_crd.go). Both follow whether the plan installs the CRDs.
        "serviceMonitor": {"enabled": monitoring},
        "controllerManager": {"manager": {"env": {"isPrometheusCrdInstalled": str(monitoring).lower()}}},
    }


# ------------------------------------------------------------------ NodeSets


def gres_lines(text: str, pool_hosts: str) -> list[str]:
    """The pool's gres.conf lines without their NodeName= (Soperator adds each node's own)."""
    out = []
    for tokens in conf_lines(text):
        if tokens[0] == f"NodeName={pool_hosts}":
            out.append(" ".join(tokens[1:]))
    return out


def pod_cpus(cpus: int) -> int:
    """slurmd's CPUs: the node's less the reserve and munge's core."""
    return max(1, cpus - max(1, math.ceil(cpus * CPU_RESERVE)) - int(MUNGE["cpu"]))


def _image(name: str, plan: Plan) -> dict[str, str]:
    return {"repository": f"{IMAGE_REGISTRY}/{name}",
            "tag": f"{plan.charts['soperator'].version}-slurm{SLURM_OF_IMAGES}"}


def nodeset(plan: Plan, pool: str, count: int, attrs: dict[str, str], gres: list[str],
            resource: str = GPU) -> dict[str, Any]:
    cpus = pod_cpus(int(attrs["CPUs"]))
    static = [f"CPUs={cpus}", f"RealMemory={attrs['RealMemory']}"]
    resources: dict[str, Any] = {"cpu": str(cpus), "memory": f"{attrs['RealMemory']}Mi"}
    if attrs.get("Gres"):
        static.append(f"Gres={attrs['Gres']}")
        resources[resource] = int(attrs["Gres"].rsplit(":", 1)[1])  # GPUs, or a MIG pool's instances
    spec: dict[str, Any] = {
        "replicas": count,
        "nodeSelector": _selector(pool, plan),
        # the plane's taint, then the pool's own (workload.yaml `taints`, or the provider's default)
        "tolerations": [_toleration(), *tolerations(plan, pool)],
        "gpu": {"enabled": True, "nvidia": {}} if attrs.get("Gres") else {"enabled": False},
        "nodeConfig": {"features": attrs.get("Features", pool).split(","), "static": " ".join(static),
                       **({"gresConfig": gres} if gres else {})},
        "slurmd": {"image": _image("worker_slurmd", plan), "resources": resources,
                   "volumes": {"spool": {"emptyDir": {}},
                               "jail": {"persistentVolumeClaim": {"claimName": JAIL_CLAIM}}}},
        "munge": {"image": _image("munge", plan),
                  "resources": dict(MUNGE)},
    }
    return {"apiVersion": API_VERSION, "kind": "NodeSet",
            "metadata": {"name": pool, "namespace": namespace(plan), "labels": dict(MANAGED)}, "spec": spec}


def nodesets(plan: Plan) -> list[dict[str, Any]]:
    m = model(plan)
    files = slurm_config(plan)
    attrs = node_settings(files["slurm.conf"], m)
    return [nodeset(plan, g.pool, len(g.nodes), attrs[g.pool], gres_lines(files["gres.conf"], g.hostlist),
                    gpu_resource(g)) for g in m.groups]


def topology_groups(plan: Plan) -> list[tuple[dict[str, str], dict[str, str]]]:
    """(node-labels.sh labels selecting Slurm nodes, the `topology.nebius.com/tier-N` labels they
    need): tier-0 the NVLink domain, tier-1 the leaf, tier-2 the spine, per Soperator's topology
    controller. One group per leaf (and NVLink domain), in fabric order."""
    plane = plan.slurm_plane
    out: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    if plan.platform.cloud:  # the plan's node names are invented there: no per-leaf group to select
        return []
    for node in plane.nodes if plane else []:
        labels = plan.fabric.node_labels(node)
        tiers = {f"{TOPOLOGY_LABEL_PREFIX}/tier-1": labels[fabric.LABEL_LEAF]}
        selector = {fabric.LABEL_PLANE: SLURM_TAINT["value"], fabric.LABEL_LEAF: labels[fabric.LABEL_LEAF]}
        if fabric.LABEL_SPINE in labels:
            tiers[f"{TOPOLOGY_LABEL_PREFIX}/tier-2"] = labels[fabric.LABEL_SPINE]
        if fabric.LABEL_NVLINK in labels:
            tiers[f"{TOPOLOGY_LABEL_PREFIX}/tier-0"] = labels[fabric.LABEL_NVLINK]
            selector[fabric.LABEL_NVLINK] = labels[fabric.LABEL_NVLINK]
        out.setdefault(tuple(selector.items()), dict(sorted(tiers.items())))
    return [(dict(k), v) for k, v in out.items()]


def label_commands(plan: Plan) -> list[str]:
    """kubectl commands giving the Slurm nodes the tier labels Soperator builds topology.conf from."""
    return [f"kubectl label node --overwrite -l {_selector_text(sel)} "
            + " ".join(f"{k}={v}" for k, v in tiers.items()) for sel, tiers in topology_groups(plan)]


def _selector_text(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in selector.items())


def readme(plan: Plan) -> dict[str, Any]:
    """What the README's Slurm-on-Kubernetes section says for Soperator."""
    m = model(plan)
    plugin, topo = topology_settings(m)
    return {"nodesets": nodesets(plan), "label_commands": label_commands(plan),
            "topology_plugin": plugin["topologyPlugin"], "block_size": (topo or {}).get("blockSize"),
            "namespace": namespace(plan), "accounting": m.accounting, "secret": DB_PASSWORD_SECRET,
            "db_user": DB_USER, "db_user_patch": db_user_patch(plan),
            "jail_claim": JAIL_CLAIM, "file": NODESETS_FILE}


def render(plan: Plan) -> dict[str, bytes]:
    """The NodeSets (the Helm values go through the Helm renderer's seam, VALUES)."""
    if not operated(plan):
        return {}
    return {NODESETS_FILE: dump_yaml_all(nodesets(plan))}


VALUES: dict[str, Callable[[Plan], dict[str, Any]]] = {
    "soperator": operator_values,
    "soperator-slurm-cluster": cluster_values,
}
