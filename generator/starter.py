"""`orchgen init`: a first workload.yaml from a few answers, every line commented.

The text is built here (not dumped from the models) so that each field carries the comment a new
user needs; cli.py checks that what it writes plans before it writes it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .catalog import GPU_TYPES, gpu_type_hint, gpu_type_known
from .contract import BRINGUP_OS_SLURM
from .providers import NAMES as PROVIDERS

DEFAULT_OS = "debian-13"
# Slurm on Kubernetes, or no bare-metal Slurm: the release orchgen writes by default (options.slurm_version)
DEFAULT_SLURM = "25.11"
PROVIDER_NAMES = {"generic": "your own machines (or a cloud without a managed Kubernetes here)",
                  "eks": "Amazon EKS", "gke": "Google GKE", "aks": "Azure AKS", "oke": "Oracle OKE"}


@dataclass(frozen=True)
class Answers:
    """The answers of `orchgen init`, with the defaults a question left unanswered takes."""

    name: str = "my-fleet"
    provider: str = "generic"
    bare_metal: bool = True
    nodes: int = 4
    gpu_type: str = "h100"
    gpus_per_node: int = 8
    fabric: str = "infiniband"
    training_nodes: int = 2  # nodes one training job spans; 0: no training workload
    service: bool = True  # a long-lived inference service
    controller: str | None = None  # the Slurm controller's short hostname (bare metal)
    os: str = DEFAULT_OS  # bare metal: the hosts' OS, whose packaged Slurm the bring-up installs


def workload_yaml(a: Answers) -> str:
    bare = a.bare_metal and a.provider == "generic"
    lines = [
        "# workload.yaml written by `orchgen init`: the fleet, then what runs on it.",
        "# Next: `orchgen recommend workload.yaml` (the decision and why), then",
        "# `orchgen plan workload.yaml -o out/` (the bundle); `orchgen schema` documents every field.",
        "apiVersion: orchgen/v1alpha1",
        "kind: Fleet",
        "metadata:",
        f"  name: {a.name}                 # DNS-1123 label: names the Slurm cluster, namespaces, the Pulumi stack",
        "fleet:",
        f"  provider: {a.provider}              # {PROVIDER_NAMES[a.provider]}: generic | eks | gke | aks | oke",
        f"  bare_metal: {'true' if bare else 'false'}            # machines you own and cable; true picks Slurm for"
        " multi-node tightly coupled jobs",
    ]
    if bare:
        if a.controller:
            lines += ["  slurm:",
                      f"    controllers: [{a.controller}]   # SlurmctldHost: the short hostname (`hostname -s`)"
                      " of the controller (not a GPU node)"]
        else:
            lines += ["  # slurm:                       # where slurmctld runs; without it the bundle gets a placeholder",
                      "  #   controllers: [head01]      #   and `plan` warns: set it before installing Slurm"]
    lines += [
        "  fabric:",
        (f"    kind: {a.fabric}            # EFA is EKS's RDMA (the EFA device plugin, set up for provider eks); "
         "EC2 has no InfiniBand or RoCE" if a.provider == "eks" else
         f"    kind: {a.fabric}            # infiniband | roce | ethernet: the GPU nodes' interconnect"),
        f"    nodes_per_leaf: {max(1, min(a.nodes, 32))}            # nodes per leaf switch, by position; or list"
        " `leaves:` as cabled",
        "  pools:",
        "    - name: gpu",
        f"      nodes: {a.nodes}                    # machines in this pool",
        f"      # hostnames: gpu-[001-{a.nodes:03d}]   # optional Slurm hostlist of their real names"
        " (default gpu-[001-NNN])",
        "      cpu: {sockets: 2, cores_per_socket: 32, threads_per_core: 2}   # or slurmd_c: the line"
        " `slurmd -C` prints",
        "      memory_gib: 1024               # installed memory per node",
        (f"      gpu: {{type: {a.gpu_type}, count: {a.gpus_per_node}}}      # GRES type and GPUs per node"
         if gpu_type_known(a.gpu_type) else
         f"      gpu: {{type: {a.gpu_type}, custom: true, count: {a.gpus_per_node}}}   # the site's own GRES type "
         "(custom: not a model orchgen knows) and GPUs per node"),
        *(["      node_labels:                   # how EKS marks the nodes: the instance type gives the EFA count",
           "        node.kubernetes.io/instance-type: p5.48xlarge"]
          if a.provider == "eks" and (a.gpu_type, a.gpus_per_node) == ("h100", 8) else []),
        "tenants:                            # teams sharing the GPUs (Slurm accounts, Kubernetes quotas)",
        "  - {name: research, share: 1, default: true}",
        "workloads:",
    ]
    if a.training_nodes:
        lines += [
            "  - name: training",
            f"    nodes: {a.training_nodes}                     # nodes one job spans",
            "    tightly_coupled: true            # ranks talk every step (NCCL all-reduce): needs a gang and"
            " the fabric",
            f"    gpus: {a.training_nodes * a.gpus_per_node}                     # demand, for sizing the split and"
            " quotas",
            "    max_time: \"2-00:00:00\"           # Slurm: longest run of one job (D-HH:MM:SS)",
        ]
    if a.service or not a.training_nodes:
        lines += [
            "  - name: inference",
            "    long_lived_services: true        # a model server that runs until stopped",
            "    bare_metal: false                # containerised: Kubernetes, even on a bare-metal fleet",
            f"    gpus: {a.gpus_per_node}",
        ]
    lines += [
        "options:",
        "  gang_scheduler: auto                # auto | kueue | volcano | kai",
        "  gitops: none                        # none | kustomize | argocd | flux",
        *([f"  slurm_version: \"{BRINGUP_OS_SLURM[a.os]}\"              # quote it: the Slurm {a.os} packages,"
           " which bringup/ installs (another release needs its own package repository on the hosts)"]
          if bare else [f"  slurm_version: \"{DEFAULT_SLURM}\"              # quote it: a MAJOR.MINOR Slurm release"]),
        "  kubernetes_version: \"1.33\"",
    ]
    return "\n".join(lines) + "\n"


# GPU models as GRES types: the catalog's (generator/catalog.py GPU_TYPES). A GRES type is free-form
# (AutoDetect names such as GV100GL are types too), so `init` accepts a name it does not know, unless it
# is one typo away from one it does (h1000, a10o), and writes it with `custom: true`.
KNOWN_GPU_TYPES: tuple[str, ...] = GPU_TYPES


def check_name(value: str) -> str | None:
    """Why `value` cannot be metadata.name (a DNS-1123 label), or None."""
    from .spec.models import _dns_label

    try:
        _dns_label(value)
    except ValueError as exc:
        return str(exc)
    return None


def check_gpu_type(value: str) -> str | None:
    """Why `value` cannot be the pool's GPU type: not a GRES name, or a near miss of a known GPU."""
    from .spec.models import _gpu_type

    try:
        _gpu_type(value)
    except ValueError as exc:
        return str(exc)
    if gpu_type_known(value):
        return None
    close = gpu_type_hint(value)
    if close:
        return f"unknown GPU type {value!r} (did you mean {close!r}?)"
    return None


def check_hostname(value: str) -> str | None:
    """Why `value` cannot be a short hostname (SlurmctldHost: a DNS-1123 label), or None."""
    return check_name(value)
