"""The bundle contract: the paths of a bundle, the releases.yaml entry, and plan.json's JSON Schema.

Tools, tests and GitOps repositories rely on these; render (helm.py, gitops/), validate
(helm_checks.py, kube_checks.py) and the tests read them from here. The Pulumi program
(stacks/__main__.py) ships inside the bundle and runs without orchgen installed, so it keeps a
copy of RELEASE_KEYS; tests/test_registries.py holds the copy equal to this one.
`orchgen schema --plan` prints PLAN_SCHEMA.
"""
from __future__ import annotations

from typing import Any

PLAN_FILE = "plan.json"
README_FILE = "README.md"
SLURM_DIR = "slurm"
KUBE_DIR = "kubernetes"
HELM_DIR = f"{KUBE_DIR}/helm"
MANIFESTS_DIR = f"{KUBE_DIR}/manifests"
# Objects a provider needs before any Helm release installs (GKE: the GPU Operator's namespace and
# the ResourceQuota that admits its system-node-critical pods). Every delivery path applies them
# first: the README's kubectl step, Pulumi (every release depends on them), Argo CD (the wave before
# the releases), Flux (the Kustomization the releases' Kustomization depends on).
PREREQUISITES_DIR = f"{KUBE_DIR}/prerequisites"
# Custom resources whose CRD an operator creates at run time, not its chart (nv-ipam's IPPool: the
# Network Operator applies the CRD once it reconciles the NicClusterPolicy of manifests/). Every
# delivery path applies them after the manifests, once that CRD exists: the README waits for it
# (`kubectl wait --for=create`), Flux's manifests Kustomization health-checks it before the one that
# applies these, Argo CD syncs them a wave later and retries until it exists, Pulumi waits for the
# NicClusterPolicy to be ready (its `pulumi.com/waitFor`) before them. RUNTIME_CRDS_FILE names them.
OPERATOR_RESOURCES_DIR = f"{KUBE_DIR}/operator-resources"
WORKLOADS_DIR = f"{KUBE_DIR}/workloads"
RELEASES_FILE = f"{HELM_DIR}/releases.yaml"
PULUMI_DIR = "pulumi"
GITOPS_DIR = "gitops"
# A Kubernetes plane beyond one cluster (plan.json `clusters`): each cluster's own kubernetes/ and
# pulumi/ under clusters/<name>/ (the MultiKueue manager's and every worker's), laid out as a
# single-cluster bundle's are; the bundle has no top-level kubernetes/ or pulumi/ then.
CLUSTERS_DIR = "clusters"


def cluster_dir(name: str) -> str:
    """The folder of one cluster of a multi-cluster plane: its kubernetes/ and pulumi/ sit in it."""
    return f"{CLUSTERS_DIR}/{name}"

# One entry of releases.yaml: key -> type. Install order is the file's order; `crds` are the API
# groups whose CRDs the release installs (custom resources of those groups wait for it);
# `dependsOn` names only earlier releases; `values` is a file beside releases.yaml.
RELEASE_KEYS: dict[str, type] = {"name": str, "namespace": str, "repo": str, "chart": str, "version": str,
                                 "values": str, "crds": list, "dependsOn": list}


def values_path(values_file: str) -> str:
    """Where a release's values file sits in the bundle."""
    return f"{HELM_DIR}/{values_file}"


_STR = {"type": "string"}
_STRS = {"type": "array", "items": _STR}
_INT = {"type": "integer", "minimum": 0}
_OPT_STR = {"type": ["string", "null"]}


def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None, closed: bool = True) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required), "properties": {**required, **(optional or {})},
            **({"additionalProperties": False} if closed else {})}


_PLANE = _obj({"host": _STR, "operator": _OPT_STR, "nodes": _STRS, "node_count": _INT, "gpus": _INT,
               "pools": {"type": "array", "items": {"type": "object"}}, "workloads": _STRS, "addons": _STRS,
               "reasons": _STRS}, closed=False)

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://orchgen.invalid/schemas/plan.json",
    "title": "orchgen plan.json: the decision, pools and reasons of a bundle",
    **_obj({
        "apiVersion": {"const": "orchgen/v1alpha1"},
        "kind": {"const": "Plan"},
        "name": _STR,
        "hybrid": {"enum": [None, "partitioned", "slurm-on-kubernetes"]},
        "gang_scheduler": _OPT_STR,
        "gitops": {"enum": ["none", "kustomize", "argocd", "flux"]},
        "gitops_repo": _OPT_STR,
        "versions": _obj({"slurm": _STR, "kubernetes": _STR,
                          "charts": {"type": "object", "additionalProperties": _STR}}),
        "reasons": _STRS,
        "platform": _obj({"provider": _STR, "distribution": _STR, "gpu_stack": _STR}, closed=False),
        "planes": {"type": "object", "propertyNames": {"enum": ["slurm", "kubernetes", "k3s"]},
                   "additionalProperties": _PLANE},
        "split": _obj({"mode": _STR, "pools": {"type": "array"}, "shared_leaves": {"type": "array"}}, closed=False),
        "fabric": _obj({"kind": _STR, "source": _STR, "leaves": {"type": "array"}, "spines": {"type": "array"},
                        "nvlink_domains": {"type": "array"}}, closed=False),
        "tenants": {"type": "array", "items": _obj(
            {"name": _STR, "share": _INT, "implicit": {"type": "boolean"}, "quotas": {"type": "object"}},
            {"users": _STRS, "unix_group": _STR, "max_gpus": _INT})},
        "workloads": {"type": "array", "items": _obj(
            {"name": _STR, "primary": _STR, "plane": _STR, "class": _STR, "tenant": _STR, "pool": _STR,
             "gpus": _INT, "reasons": _STRS}, closed=False)},
    }, {"warnings": _STRS,
        "clusters": {"type": "array", "items": _obj(
            {"name": _STR, "role": {"enum": ["manager", "worker"]}, "units": _STRS, "leaves": _STRS,
             "node_count": _INT, "pools": {"type": "object"}, "quotas": {"type": "object"}, "why": _STR})}}),
}

# The OSes the bring-up (bringup/site.yml) installs Slurm on, from their own packages, and the Slurm release
# each packages (packages.debian.org slurm-wlm: bookworm 22.05, trixie 24.11; packages.ubuntu.com noble 23.11):
# a bare-metal fleet's slurm_version is the hosts' OS's, or the bring-up refuses the hosts.
BRINGUP_OS_SLURM = {"debian-13": "24.11", "debian-12": "22.05", "ubuntu-24.04": "23.11"}


def bringup_os_line(release: str) -> str | None:
    """The one line that says no OS of the bring-up packages `release` (None when one does)."""
    if release in BRINGUP_OS_SLURM.values():
        return None
    oses = ", ".join(f"{os_}: {r}" for os_, r in sorted(BRINGUP_OS_SLURM.items()))
    return (f"no OS of the bring-up packages Slurm {release} ({oses}); the bring-up refuses such hosts: set "
            f"slurm_version to one of those or install Slurm {release} packages yourself")

# Node labels: the same names in the labelling script, flavors, topologies and NodeSet selectors (kept
# here, not in spec/fabric.py, so that `validate` reads them without importing the planner's models).
LABEL_POOL = "orchgen.io/pool"
LABEL_PLANE = "orchgen.io/plane"
LABEL_LEAF = "orchgen.io/leaf"
LABEL_SPINE = "orchgen.io/spine"
LABEL_NVLINK = "orchgen.io/nvlink-domain"
LABEL_HOSTNAME = "kubernetes.io/hostname"
# The NVLink clique a GB200-class node's GPUs belong to, as GPU Feature Discovery (the GPU Operator's
# GFD) labels it: `<ClusterUUID>.<CliqueId>` from the fabric manager, the same on every tray of one
# NVLink domain (dra-driver-nvidia-gpu v0.4.1 docs/install.md, "Validate clique node labels";
# docs/prerequisites.md: "GFD generates the `nvidia.com/gpu.clique` node labels required by
# ComputeDomains"). orchgen never writes it: its value is the fabric's own, read from the hardware.
LABEL_CLIQUE = "nvidia.com/gpu.clique"
# NVIDIA Topograph 1.0's label contract (its docs, "Kubernetes engine": `fabric.topograph.run/tier-N`,
# "Tier 0 is the switch closest to the node; each higher tier is the next switch tier outward";
# `accelerator.topograph.run/domain`, the accelerator-interconnect (NVLink) domain). Its values are
# the switch identifiers Topograph discovers, which orchgen does not know: only the keys are used.
TOPOGRAPH_TIER = "fabric.topograph.run/tier-{}"
# The planes that are Kubernetes clusters (plan.json `planes`).
KUBE_PLANES = ("kubernetes", "k3s")
# SlurmctldHost when fleet.slurm is not given: a name no machine has, so that slurmctld refuses to start
# ("This host (...) not a valid controller") until the site sets fleet.slurm.controllers.
PLACEHOLDER_CONTROLLER = "set-fleet-slurm-controllers"
