"""The Plan: everything the renderers need, decided once (serialises to plan.json).

Renderers read only the Plan. If a renderer needs a fact the Plan lacks, the Plan grows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..spec import hostlist
from ..catalog import Chart
from ..spec.fabric import FabricModel
from ..spec import slurmtime
from ..spec.hardware import NodeHardware
from ..spec.models import SlurmOptions
from ..spec.site import Site
from ..contract import KUBE_PLANES  # noqa: F401  (the bundle contract's; re-exported)

PLANES = ("slurm", "kubernetes", "k3s")


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
class PodShape:
    """How a Kubernetes workload maps onto pods: one pod per node's worth of GPUs (sizing.py)."""

    pods: int
    gpus: int  # per pod, whole GPUs
    cpu: int  # cores requested per pod
    memory_gib: int  # requested per pod
    gpu_resource: str = "nvidia.com/gpu"  # what the pod asks for: nvidia.com/gpu, or a MIG pool's instances
    gpus_per_device: int = 1  # devices of gpu_resource per whole GPU (MIG: per_gpu)

    @property
    def gpu_devices(self) -> int:
        return self.gpus * self.gpus_per_device


@dataclass(frozen=True)
class ServingDecision:
    """How a long-lived workload serves (decide/serving.py): the stack, with its reason, and what the
    renderer (render/kubernetes/serving.py) turns into objects."""

    stack: str  # rayservice | kserve | plain | lws
    why: str
    image: str
    model: str | None
    port: int
    gpus_per_replica: int
    nodes_per_replica: int
    min_replicas: int
    max_replicas: int
    scale_on: str  # requests_in_flight | gpu_utilization | queue_depth
    scale_target: int
    autoscaler: str  # keda (a ScaledObject on a Prometheus query) | ray-serve (Ray Serve's own)
    expose: str  # cluster | ingress | gateway
    ingress_class: str | None
    gateway: str | None
    host: str | None
    weights: str  # baked | pvc:NAME | a URI
    pod: PodShape  # one pod of a replica (a multi-node replica has nodes_per_replica of them)
    # Secrets the server's pods reference by name (workload.yaml serving.secret / image_pull_secret);
    # plan.json carries them only when set, as secret_name: a bare `"secret": ...` reads as a literal
    # value to secret scanners (validate's, tests/test_no_secrets.py)
    secret_name: str | None = None
    image_pull_secret: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items()
               if k != "pod" and not (k in ("secret_name", "image_pull_secret") and v is None)}
        out["pod"] = {"gpus": self.pod.gpus, "cpu": self.pod.cpu, "memory_gib": self.pod.memory_gib}
        return out


@dataclass(frozen=True)
class WorkloadDecision:
    """Where one workload runs and why: the facts it was judged on, its plane and the add-ons it needs."""

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
    pinned: bool = False  # workloads[].plane pins it (the rules did not choose its plane)
    # demand (README "Demand"): jobs of this span running at once, and a typical job's runtime and the
    # arrivals per day where the workload gives them (`orchgen simulate` replays them)
    jobs_at_once: int = 1
    runtime: int | None = None  # minutes
    jobs_per_day: float | None = None
    # the pods its starter asks for on a Kubernetes plane (None elsewhere); a RayCluster's head too
    shape: PodShape | None = None
    ray_head: PodShape | None = None
    serving: ServingDecision | None = None  # a long-lived service on the Kubernetes plane
    interactive: bool = False  # workloads[].interactive: notebooks (JupyterHub on Kubernetes)
    rule: str = ""  # the rule that chose its plane (decide/rules.py), or "pinned" (workloads[].plane)

    def demand_json(self) -> dict[str, Any]:
        """The declared demand, only where the workload declares one (plan.json of a fleet without
        demand fields is what it was)."""
        out: dict[str, Any] = {}
        if self.jobs_at_once != 1 or self.jobs_per_day is not None:
            out["jobs_at_once"] = self.jobs_at_once
        if self.jobs_per_day is not None:
            out["jobs_per_day"] = self.jobs_per_day
        if self.runtime is not None:
            out["runtime_minutes"] = self.runtime
        return out

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
            "plane": self.plane,
            "pinned": self.pinned,
        }


# The GPU model of a pool whose GRES is untyped and which names no gpu.type: the GPUs are just
# "gpu" (node Feature; the health check counts them without matching a model).
UNTYPED_GPU = "gpu"


@dataclass(frozen=True)
class PoolSlice:
    """The part of a pool that one plane owns: its nodes in fabric order, and the leaves they sit on
    (a leaf split by node, or shared with another pool, is listed by both planes)."""

    pool: str
    plane: str
    nodes: tuple[str, ...]
    leaves: tuple[str, ...]
    gpu_type: str | None
    gpus_per_node: int
    cpus: int  # logical CPUs a node leaves to jobs and pods: the reserved cores' threads taken out
    memory_gib: int  # GiB a node leaves to jobs and pods: the reserved memory taken out
    nvlink_domain_nodes: int
    hardware: NodeHardware  # each node as the site has it: sockets, cores, memory, GPU affinity, MIG
    gres_typed: bool = True  # gpu.typed: false writes the GRES untyped (gpu:N)
    arch: str = "x86_64"  # the nodes' CPU architecture (`uname -m`; catalog.arch_of): what their images are built for

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * len(self.nodes)

    @property
    def hostlist(self) -> str:
        return hostlist.compress(self.nodes)


@dataclass(frozen=True)
class PoolSplit:
    """How one pool was divided between the planes: `how` is whole (one plane), leaf or node."""

    pool: str
    how: str
    nodes: dict[str, int]  # plane -> nodes it got
    demand: dict[str, int]  # plane -> nodes its workloads want
    why: str


@dataclass(frozen=True)
class SharedLeaf:
    """A leaf switch with nodes on both planes: it carries both planes' traffic."""

    leaf: str
    nodes: dict[str, str]  # plane -> its nodes on this leaf, as a hostlist
    cost: str


@dataclass(frozen=True)
class Plane:
    """One control plane of the plan: the pool slices it runs on, its workloads and why it is there."""

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
    """A tenant's nominal share of one pool, in GPUs, cores and memory."""

    gpus: int
    cpus: int
    memory_gib: int


@dataclass(frozen=True)
class Tenant:
    """A tenant of the fleet: its fair share, quotas per pool, and how each plane knows its users."""

    name: str
    share: int
    implicit: bool  # no tenants in the input: one tenant named after the fleet
    quotas: dict[str, Quota] = field(default_factory=dict)  # Kubernetes-plane pool -> nominal quota
    users: tuple[str, ...] = ()  # Slurm: users of the tenant's account
    unix_group: str | None = None  # Slurm: a Unix group whose members join the tenant's account
    max_gpus: int | None = None  # Slurm: GrpTRES=gres/gpu cap of the tenant's account
    slurm_qos: tuple[str, ...] = ()  # Slurm: the account's own QOS list (empty: the whole set)
    slurm_default_qos: str | None = None  # Slurm: the account's own DefaultQOS
    kubernetes_group: str | None = None  # Kubernetes: the group given a Role on the tenant's namespace


@dataclass(frozen=True)
class Warning_:
    """Something the plan does that the user did not ask for, or cannot keep: printed by `plan` and
    `recommend` (file:line: field: message), kept in plan.json, and an error under options.strict."""

    message: str
    field: str  # the workload.yaml field it is about, e.g. "workloads[2].tenant"
    # about what `plan` writes (a placeholder in the bundle): `recommend`, which writes nothing, skips it
    bundle_only: bool = False

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class RdmaRail:
    """One compute rail as a Kubernetes network: its NetworkAttachmentDefinition and nv-ipam pool
    (`name`), the RDMA shared device plugin resource over its HCA alone, its master netdev."""

    name: str  # rdma-rail-N
    resource: str  # rdma/rdma_rail_N
    hca: str  # device:port, as NCCL_IB_HCA names it
    netdev: str  # the port's network interface on the nodes (the CNI's master)
    subnet: str  # its nv-ipam pool


@dataclass(frozen=True)
class Network:
    """The fabric tightly coupled multi-node pods use, and what a pod asks for to get it."""

    kind: str  # rdma-shared (NVIDIA Network Operator, bare metal IB/RoCE) | efa (EKS)
    resource: str  # the extended resource a pod requests
    per_node: dict[str, int]  # pool -> devices of one node (a pod taking part of a node gets its share)
    env: tuple[tuple[str, str], ...]  # NCCL / libfabric variables
    attachment: str | None = None  # NetworkAttachmentDefinition the pods attach
    cni: str | None = None  # ipoib | macvlan
    interface: str | None = None  # the parent netdev (None: macvlan's default-route interface)
    subnet: str | None = None  # the nv-ipam pool
    # one network and one device resource per compute rail, where every fabric node's rails are known
    # (their platform or pool.nics); then `resource` is the rails' common prefix and `attachment` lists them
    rails: tuple[RdmaRail, ...] = ()

    def devices(self, pool: str, gpus: int, gpus_per_node: int) -> int:
        """What a pod with `gpus` of a node's `gpus_per_node` requests: its share, at least one."""
        per_node = self.per_node.get(pool, 1)
        if self.kind != "efa" or not gpus_per_node:
            return 1
        return max(1, per_node * gpus // gpus_per_node)


@dataclass(frozen=True)
class Platform:
    """Where the Kubernetes plane runs: provider, distribution, and the labels and taints of its pools."""

    provider: str = "generic"
    distribution: str = "upstream"  # the Kubernetes plane's: an edge/dev plane is k3s
    # pool -> the labels objects select it by; {} on bare metal (orchgen.io/pool, set by node-labels.sh)
    selectors: dict[str, dict[str, str]] = field(default_factory=dict)
    # pool -> labels node-labels.sh adds on bare metal (the pool's node_labels)
    script_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    topology: tuple[str, ...] = ()  # level labels, broadest first, hostname excluded
    preferred_level: str | None = None
    topology_pools: tuple[str, ...] = ()  # pools whose nodes all carry the levels (flavors get them)
    gpu_stack: str = "operator"  # operator: the GPU Operator release | provider: the provider's add-ons
    network: Network | None = None
    fabric_workloads: tuple[str, ...] = ()  # tightly coupled multi-pod workloads on the fabric
    # pool -> the taints its nodes carry, (key, value or None, effect): the pool's `taints`, or the
    # provider's default for a GPU pool (generator/providers.py)
    taints: dict[str, tuple[tuple[str, str | None, str], ...]] = field(default_factory=dict)
    # the site runs Topograph (fleet.fabric.topograph): topology levels are its labels, which it sets
    topograph: bool = False
    # pools whose multi-node jobs get a ComputeDomain (multi-node NVLink through the NVIDIA DRA driver)
    # and whose Kueue Topology has the NVLink clique as its lowest level (decide/platform.py)
    compute_domains: tuple[str, ...] = ()

    @property
    def cloud(self) -> bool:
        return bool(self.selectors)

    def to_json(self) -> dict[str, Any]:
        net = self.network
        return {
            "provider": self.provider, "distribution": self.distribution,
            "node_selectors": self.selectors, "topology": list(self.topology),
            "gpu_stack": self.gpu_stack,
            "network": None if net is None else {
                "kind": net.kind, "resource": net.resource, "per_node": net.per_node,
                "attachment": net.attachment, "interface": net.interface, "subnet": net.subnet,
                "workloads": list(self.fabric_workloads),
                **({"rails": [{"name": r.name, "resource": r.resource, "hca": r.hca, "netdev": r.netdev,
                               "subnet": r.subnet} for r in net.rails]} if net.rails else {})},
        }


@dataclass(frozen=True)
class KubeCluster:
    """One Kubernetes cluster of a plane beyond upstream's per-cluster envelope (decide/clusters.py):
    a MultiKueue worker holding whole fabric units (spines, or leaves under a spine too big for one
    cluster), or the manager (no GPU nodes) that queues every tenant's jobs and dispatches them."""
    name: str  # DNS-1123: the MultiKueueCluster's name, and clusters/<name>/ in the bundle
    role: str  # manager | worker
    units: tuple[str, ...] = ()  # the spines or leaves it holds, in fabric order
    leaves: tuple[str, ...] = ()
    nodes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pool -> its nodes here
    quotas: dict[str, dict[str, Quota]] = field(default_factory=dict)  # tenant -> pool -> nominal quota here
    why: str = ""

    @property
    def node_count(self) -> int:
        return sum(len(n) for n in self.nodes.values())

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "units": list(self.units), "leaves": list(self.leaves),
                "node_count": self.node_count,
                "pools": {p: {"nodes": hostlist.compress(n), "node_count": len(n)} for p, n in self.nodes.items()},
                "quotas": {t: {p: vars(q) for p, q in by.items()} for t, by in self.quotas.items()},
                "why": self.why}


@dataclass(frozen=True)
class Plan:
    """The whole decision for one fleet: every workload's placement, the planes, tenants and warnings."""

    name: str
    source: str  # file name of the input, for error messages only: no bundle file names it (issue 23)
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
    # How the pools both planes want were split (options.split), and the leaves with both planes' nodes
    split_mode: str = "auto"
    pool_splits: tuple[PoolSplit, ...] = ()
    shared_leaves: tuple[SharedLeaf, ...] = ()
    # fleet.slurm: SlurmctldHost lines (primary first) and AccountingStorageHost; () = not given
    slurm_controllers: tuple[str, ...] = ()
    slurm_accounting: str | None = None
    # options.slurm as written (render/slurm/ops.py resolves its `auto`s) 
    slurm_options: SlurmOptions = field(default_factory=SlurmOptions)
    # where the Kubernetes plane runs and how its nodes are known (generator.decide.platform)
    platform: Platform = field(default_factory=Platform)
    # workload.yaml's site: (spec/site.py): an adopted site's unmodelled Slurm settings, emitted in place
    site: Site | None = None
    # options.metrics (install: kube-prometheus-stack; site: the site's own) and options.prometheus_url
    # (render/kubernetes/metrics.prometheus_url gives the address either way)
    metrics: str = "install"
    site_prometheus_url: str | None = None
    # a Kubernetes plane beyond one cluster (decide/clusters.py): the MultiKueue manager first, then
    # the workers; () for a plane that fits one cluster (every bundle's layout is then unchanged)
    clusters: tuple[KubeCluster, ...] = ()
    # options.gpu_health (install: render/kubernetes/gpu_health.py's DaemonSets; site: the site's own)
    gpu_health: str = "install"
    # Where this plan's bundle folder sits in the GitOps repository; None: `<name>/` at its root
    # (render/gitops/common.repo_dir). A cluster of a multi-cluster plan: `<fleet>/clusters/<cluster>`.
    gitops_path: str | None = None

    @property
    def slurm_default_time(self) -> int:
        """options.slurm.default_time in minutes: a job's default time limit (partitions' DefaultTime)."""
        return slurmtime.minutes(self.slurm_options.default_time)

    @property
    def slurm_max_time(self) -> int:
        """options.slurm.max_time in minutes: MaxTime of a partition none of whose workloads sets max_time."""
        return slurmtime.minutes(self.slurm_options.max_time)

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
            "platform": self.platform.to_json(),
            "planes": {name: _plane_json(p) for name, p in self.planes.items()},
            "split": self._split_json(),
            **({"clusters": [c.to_json() for c in self.clusters]} if self.clusters else {}),
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
                    **({"slurm_qos": list(t.slurm_qos)} if t.slurm_qos else {}),
                    **({"slurm_default_qos": t.slurm_default_qos} if t.slurm_default_qos else {}),
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
                    **({"demand": w.demand_json()} if w.demand_json() else {}),
                    **({"serving": w.serving.to_json()} if w.serving else {}),
                    **({"interactive": True} if w.interactive else {}),
                    "facts": vars(w.facts),
                }
                for w in self.workloads
            ],
        }


    def _split_json(self) -> dict[str, Any]:
        return {
            "mode": self.split_mode,
            "pools": [{"pool": s.pool, "how": s.how, "nodes": s.nodes, "demand": s.demand, "why": s.why}
                      for s in self.pool_splits],
            "shared_leaves": [{"leaf": s.leaf, "nodes": s.nodes, "cost": s.cost} for s in self.shared_leaves],
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
                "arch": s.arch,
                "gpu": _gpu_json(s),
            }
            for s in p.slices
        ],
        "workloads": list(p.workloads),
        "addons": list(p.addons),
        "reasons": list(p.reasons),
    }


def _gpu_json(s: PoolSlice) -> dict[str, Any] | None:
    if not s.gpu_type:
        return None
    out: dict[str, Any] = {"type": s.gpu_type, "count": s.gpus_per_node}
    if not s.gres_typed:  # gpu.typed: false: every place writes the GRES as gpu:<count>
        out["typed"] = False
    mig = s.hardware.mig
    if mig is not None:  # the MIG layout every place its GRES appears must agree on (orchgen validate)
        out["mig"] = {"profile": mig.profile, "per_gpu": mig.per_gpu}
    return out


def _fabric_json(f: FabricModel) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "source": f.source,  # shorthand | leaves | topology_conf | topology_yaml | ibnetdiscover
        **({"file": f.source_file} if f.source_file else {}),
        "nodes_per_leaf": f.nodes_per_leaf,
        "core": f.core,
        "spines": [{"name": s.name, "leaves": list(s.leaves)} for s in f.spines],
        "leaves": [
            {"name": leaf.name, "pools": list(leaf.pools), "spines": list(leaf.spines),
             "nodes": leaf.hostlist}
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
