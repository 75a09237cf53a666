"""The Plan: everything the renderers need, decided once (serialises to plan.json).

Renderers read only the Plan. If a renderer needs a fact the Plan lacks, the Plan grows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..spec import hostlist
from ..catalog import Chart
from ..spec.fabric import FabricModel
from ..spec.models import SlurmHosts

PLANES = ("slurm", "kubernetes", "k3s")
KUBE_PLANES = ("kubernetes", "k3s")


@dataclass(frozen=True)
class Facts:
    """The seven facts of the decision guide, with defaults resolved from the fleet."""

    nodes: int
    tightly_coupled: bool
    bare_metal: bool
    long_lived_services: bool
    multi_tenant: bool
    python_native_pipeline: bool
    edge_or_dev: bool


@dataclass(frozen=True)
class WorkloadDecision:
    name: str
    facts: Facts
    primary: str  # slurm | kubernetes | k3s | ray
    ray_host: str | None  # kubernetes | k3s | None
    gang_scheduler_required: bool
    hybrid: bool
    addons: tuple[str, ...]
    reasons: tuple[str, ...]
    # where the fleet plan puts it
    plane: str = ""  # slurm | kubernetes | k3s
    workload_class: str = ""  # training | service | ray | batch
    tenant: str = ""
    pool: str = ""
    gpus: int = 0  # demand: total GPUs (0 on a CPU pool)
    gpus_per_node: int = 0
    max_time: int | None = None  # minutes (workloads[].max_time); None: the site's options.slurm.max_time

    def recommendation(self) -> dict[str, Any]:
        """The stable `recommend --format json` shape."""
        return {
            "name": self.name,
            "primary": self.primary,
            "ray_host": self.ray_host,
            "gang_scheduler_required": self.gang_scheduler_required,
            "hybrid": self.hybrid,
            "addons": list(self.addons),
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True)
class PoolSlice:
    """The part of a pool (whole leaves) that one plane owns."""

    pool: str
    plane: str
    nodes: tuple[str, ...]
    leaves: tuple[str, ...]
    gpu_type: str | None
    gpus_per_node: int
    cpus: int
    memory_gib: int
    nvlink_domain_nodes: int

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * len(self.nodes)

    @property
    def hostlist(self) -> str:
        return hostlist.compress(self.nodes)


@dataclass(frozen=True)
class Plane:
    name: str  # slurm | kubernetes | k3s
    host: str  # bare-metal | kubernetes (Slurm run as pods by an operator)
    operator: str | None  # slinky | soperator (Slurm on Kubernetes)
    slices: tuple[PoolSlice, ...]
    workloads: tuple[str, ...]
    addons: tuple[str, ...]
    reasons: tuple[str, ...]

    @property
    def nodes(self) -> list[str]:
        return [n for s in self.slices for n in s.nodes]


@dataclass(frozen=True)
class Quota:
    gpus: int
    cpus: int
    memory_gib: int


@dataclass(frozen=True)
class Tenant:
    name: str
    share: int
    implicit: bool  # no tenants in the input: one tenant named after the fleet
    quotas: dict[str, Quota] = field(default_factory=dict)  # Kubernetes-plane pool -> nominal quota
    users: tuple[str, ...] = ()  # Slurm: users of the tenant's account
    unix_group: str | None = None  # Slurm: a Unix group whose members join the tenant's account
    max_gpus: int | None = None  # Slurm: GrpTRES=gres/gpu cap of the tenant's account


@dataclass(frozen=True)
class Warning_:
    """Something the plan does that the user did not ask for, or cannot keep: printed by `plan` and
    `recommend` (file:line: field: message), kept in plan.json, and an error under options.strict."""

    message: str
    field: str  # the workload.yaml field it is about, e.g. "workloads[2].tenant"

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class Plan:
    name: str
    source: str  # file name of the input (no directory: bundles must not depend on where they ran)
    workloads: tuple[WorkloadDecision, ...]
    planes: dict[str, Plane]
    hybrid: str | None  # None | partitioned | slurm-on-kubernetes
    fabric: FabricModel
    tenants: tuple[Tenant, ...]
    gang_scheduler: str | None  # kueue | volcano | kai | None
    gitops: str
    slurm_version: str
    kubernetes_version: str
    bare_metal: bool
    charts: dict[str, Chart]  # component -> pinned chart, version overrides applied
    reasons: tuple[str, ...]  # fleet-level decisions, in the order they were taken
    # The GitOps repository's clone URL (options.gitops_repo); None: Argo CD gets a placeholder.
    gitops_repo: str | None = None
    warnings: tuple[Warning_, ...] = ()
    strict: bool = False  # options.strict: a warning refuses the plan
    # Slurm site policy (options.slurm), in minutes: a job's default time limit, and the MaxTime of a
    # partition none of whose workloads sets max_time
    slurm_default_time: int = 240
    slurm_max_time: int = 10_080
    slurm_hosts: SlurmHosts | None = None  # fleet.slurm: controllers and the accounting host

    @property
    def kube_plane(self) -> Plane | None:
        for name in KUBE_PLANES:
            if name in self.planes:
                return self.planes[name]
        return None

    @property
    def slurm_plane(self) -> Plane | None:
        return self.planes.get("slurm")

    def workloads_on(self, plane: str) -> list[WorkloadDecision]:
        return [w for w in self.workloads if w.plane == plane]

    def to_json(self) -> dict[str, Any]:
        return {
            "apiVersion": "orchgen/v1alpha1",
            "kind": "Plan",
            "name": self.name,
            "source": self.source,
            "hybrid": self.hybrid,
            "gang_scheduler": self.gang_scheduler,
            "gitops": self.gitops,
            "gitops_repo": self.gitops_repo,
            "versions": {
                "slurm": self.slurm_version,
                "kubernetes": self.kubernetes_version,
                "charts": {c: ch.version for c, ch in sorted(self.charts.items())},
            },
            "reasons": list(self.reasons),
            **({"warnings": [str(w) for w in self.warnings]} if self.warnings else {}),
            "planes": {name: _plane_json(p) for name, p in self.planes.items()},
            "fabric": _fabric_json(self.fabric),
            "tenants": [
                {
                    "name": t.name,
                    "share": t.share,
                    "implicit": t.implicit,
                    "quotas": {pool: vars(q) for pool, q in t.quotas.items()},
                    **({"users": list(t.users)} if t.users else {}),
                    **({"unix_group": t.unix_group} if t.unix_group else {}),
                    **({"max_gpus": t.max_gpus} if t.max_gpus else {}),
                }
                for t in self.tenants
            ],
            "workloads": [
                {
                    **w.recommendation(),
                    "plane": w.plane,
                    "class": w.workload_class,
                    "tenant": w.tenant,
                    "pool": w.pool,
                    "gpus": w.gpus,
                    **({"max_time_minutes": w.max_time} if w.max_time else {}),
                    "facts": vars(w.facts),
                }
                for w in self.workloads
            ],
        }


def _plane_json(p: Plane) -> dict[str, Any]:
    return {
        "host": p.host,
        "operator": p.operator,
        "nodes": split_hostlist(hostlist.compress(p.nodes)) if p.nodes else [],
        "node_count": len(p.nodes),
        "gpus": sum(s.gpus for s in p.slices),
        "pools": [
            {
                "pool": s.pool,
                "nodes": s.hostlist,
                "node_count": len(s.nodes),
                "leaves": s.leaves,
                "gpu": {"type": s.gpu_type, "count": s.gpus_per_node} if s.gpu_type else None,
            }
            for s in p.slices
        ],
        "workloads": list(p.workloads),
        "addons": list(p.addons),
        "reasons": list(p.reasons),
    }


def _fabric_json(f: FabricModel) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "nodes_per_leaf": f.nodes_per_leaf,
        "core": f.core,
        "spines": [{"name": s.name, "leaves": list(s.leaves)} for s in f.spines],
        "leaves": [
            {"name": leaf.name, "pool": leaf.pool, "spine": leaf.spine, "nodes": hostlist.compress(leaf.nodes)}
            for leaf in f.leaves
        ],
        "nvlink_domains": [
            {"name": d.name, "pool": d.pool, "nodes": hostlist.compress(d.nodes)} for d in f.domains
        ],
    }


def split_hostlist(expr: str) -> list[str]:
    """Split a hostlist at its top-level commas: "a[1-2,5],b" -> ["a[1-2,5]", "b"]."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(expr[start:i])
            start = i + 1
    out.append(expr[start:])
    return out
