"""Where the Kubernetes plane really runs: the provider and distribution, how each pool's nodes are
known, the topology labels the provider puts on them, who owns the GPU stack, the network tightly
coupled jobs use, and whether the plane fits in one cluster.

Bare metal (or generic machines whose every pool lists its hostnames): orchgen knows every node by
its real hostname and labels it (kubernetes/node-labels.sh), so selectors and topologies use
orchgen's own labels. Otherwise the node names in the plan are only for counting: objects select a
pool by the labels its provisioner sets (`node_labels`, or the provider's node-pool label) and
topologies use the labels the provider sets itself.

Every provider-specific fact below names its source.
"""
from __future__ import annotations

from .. import providers
from ..errors import OrchgenError
from ..spec import fabric as fabric_mod
from ..spec import hostlist
from ..spec.checks import pool_node_labels
from ..spec.models import Fleet
from .plan import Network, Plane, Platform, RdmaRail, Warning_, WorkloadDecision

# Kubernetes topology labels the providers put on GPU nodes, broadest level first (Kueue and KAI
# want that order; kubernetes.io/hostname is appended by the Topology builder), and the level a gang
# prefers to fit in: the provider table (generator/providers.py) holds them with their sources.
PROVIDER_TOPOLOGY: dict[str, tuple[str, ...]] = {
    p.name: p.topology_labels for p in providers.PROVIDERS.values() if p.topology_labels}
PREFERRED_LEVEL = {p.name: p.preferred_level for p in providers.PROVIDERS.values() if p.preferred_level}

RDMA_FABRICS = ("infiniband", "roce")
MANAGED = providers.MANAGED

# The RDMA shared device plugin's resource (Network Operator's NicClusterPolicy examples and
# k8s-rdma-shared-dev-plugin's default prefix `rdma`): one request gives a pod every HCA of the node.
RDMA_SHARED_RESOURCE = "rdma/rdma_shared_device_a"
FABRIC_NETWORK = "rdma-fabric"  # the NetworkAttachmentDefinition (and nv-ipam IPPool) name
# The first IPoIB interface as the kernel's IPoIB driver names it (Linux Documentation/infiniband/
# ipoib.rst: "ib0, ib1, ..."); a site whose udev renames it says so in fabric.rdma_network.interface.
IPOIB_DEFAULT = "ib0"
# Multus names a pod's first extra interface net1 (multus-cni docs: "net1" default for the first
# additional network); NCCL's bootstrap and socket fallback then use the fabric, and its IB
# transport every mlx5 HCA the shared device plugin exposed (NCCL env docs: NCCL_SOCKET_IFNAME,
# NCCL_IB_HCA, prefix match).
RDMA_ENV = (("NCCL_SOCKET_IFNAME", "net1"), ("NCCL_IB_HCA", "mlx5"))

EFA_RESOURCE = "vpc.amazonaws.com/efa"  # the EFA device plugin's resource (EKS device-management-efa)
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"  # well-known label the kubelet sets
# EFA interfaces per instance, only where the EKS user guide shows it: p5.48xlarge 32 (node-efa:
# the NCCL test worker "consumes all the resources of a p5.48xlarge" with vpc.amazonaws.com/efa: 32;
# device-management-efa: four EFA devices per GPU), p6-b200.48xlarge 8 (device-management-efa's
# launch template: 8 EFA-only interfaces).
EFA_PER_INSTANCE = {"p5.48xlarge": 32, "p6-b200.48xlarge": 8}
# libfabric picks its provider by FI_PROVIDER (fi_provider(7)); the aws-ofi-nccl plugin in the
# training image then runs NCCL over EFA. The pod's own interface with the VPC CNI is eth0.
EFA_ENV = (("FI_PROVIDER", "efa"), ("NCCL_SOCKET_IFNAME", "eth0"))

# Upstream's per-cluster envelope ("Considerations for large clusters",
# kubernetes.io/docs/setup/best-practices/cluster-large): no more than 5,000 nodes, 150,000 pods in
# total, 110 pods per node, 300,000 containers.
MAX_NODES = 5_000
MAX_PODS = 150_000
# Daemon pods on every GPU node: the GPU Operator's operands (driver or validator, toolkit, device
# plugin, GFD, DCGM exporter, MIG manager), NFD's worker, kube-proxy and the CNI.
DAEMON_PODS_PER_NODE = 10


def pods(d: WorkloadDecision) -> int:
    """Pods of a workload: the planner's PodShape (decide.sizing), else one per node's worth of GPUs."""
    if d.shape is not None:
        return d.shape.pods
    per_node = d.gpus_per_node
    return max(d.facts.nodes, -(-d.gpus // per_node)) if per_node and d.gpus else d.facts.nodes


def needs_fabric(d: WorkloadDecision, kube: str) -> bool:
    """Tightly coupled across pods on the Kubernetes plane: the jobs NCCL must not run over TCP, and
    the serving replicas that span nodes (a LeaderWorkerSet's group, a RayService's multi-node
    replica: vLLM's pipeline-parallel stages pass activations over NCCL between the nodes)."""
    if d.plane != kube:
        return False
    if d.serving is not None:
        return d.serving.nodes_per_replica > 1
    return d.facts.tightly_coupled and d.workload_class != "service" and pods(d) > 1


def known_by_name(fleet: Fleet) -> bool:
    """Whether the plan's node names are the nodes' real names: on bare metal (the fleet model's
    hostnames), or on generic machines whose every pool lists its hostnames (workstations, on-prem
    VMs). Otherwise the provider names the nodes and the plan's names only count them."""
    spec = fleet.fleet
    return spec.bare_metal or (spec.provider == "generic"
                               and all(p.hostnames is not None and not p.node_labels for p in spec.pools))


def kube_distribution(fleet: Fleet, kube: str) -> str:
    return "k3s" if kube == "k3s" else fleet.fleet.kubernetes_distribution


def decide(fleet: Fleet, kube: Plane | None, placed: list[WorkloadDecision], fab: fabric_mod.FabricModel,
           reasons: list[str], warnings: list[Warning_], file: str | None = None) -> Platform:
    spec = fleet.fleet
    if kube is None:
        return Platform(spec.provider, spec.kubernetes_distribution)
    dist = kube_distribution(fleet, kube.name)
    fabric_wl = tuple(d.name for d in placed if needs_fabric(d, kube.name))
    pools = {s.pool for s in kube.slices}
    if known_by_name(fleet):
        selectors: dict[str, dict[str, str]] = {}
        script = {p.name: dict(p.node_labels) for p in spec.pools if p.node_labels}
        topology, preferred = tuple(fab.levels), fabric_mod.LABEL_LEAF
        topo_pools = tuple(s.pool for s in kube.slices)
        if spec.fabric.topograph:  # Topograph labels the switch tiers; the same levels, its keys
            topology = tuple(fabric_mod.TOPOGRAPH_OF[lv] for lv in topology)
            preferred = fabric_mod.TOPOGRAPH_OF[preferred]
            reasons.append("fabric.topograph: the topology levels are Topograph's node labels ("
                           + ", ".join(topology) + "), which it sets; node-labels.sh writes no switch labels")
    else:
        selectors = {p.name: pool_node_labels(fleet, p) for p in spec.pools}
        script = {}
        topology = PROVIDER_TOPOLOGY.get(spec.provider, ())
        preferred = PREFERRED_LEVEL.get(spec.provider)
        # the provider labels only some instance types: topology only where a gang needs it
        gang_pools = {d.pool for d in placed if d.name in fabric_wl}
        topo_pools = tuple(s.pool for s in kube.slices if s.pool in gang_pools) if topology else ()
        if not topology:
            preferred = None
        reasons.append(_cloud_reason(spec.provider, selectors, pools))
    gpu_stack = providers.PROVIDERS[spec.provider].gpu_stack
    if gpu_stack == "provider":
        reasons.append("no GPU Operator release on oke: Oracle's GPU node images carry the NVIDIA driver and "
                       "container toolkit and OKE's NvidiaGpuPlugin add-on advertises nvidia.com/gpu (NVIDIA "
                       "AI Cluster Runtime, \"OKE GPU Setup\"); orchgen has no Helm profile for them")
    network = _network(fleet, kube, placed, fabric_wl, dist, reasons, warnings, file)
    if fleet.options.kubernetes_clusters == "one":  # auto: decide/clusters.py plans it as several clusters
        _scale(kube, fab, reasons, warnings)
    domains = _compute_domains(fleet, kube, fab, gpu_stack, reasons, warnings)
    return Platform(spec.provider, dist, selectors, script, topology if topo_pools else (),
                    preferred if topo_pools else None, topo_pools, gpu_stack, network,
                    fabric_wl if network else (), pool_taints(fleet),
                    topograph=bool(spec.fabric.topograph and known_by_name(fleet)), compute_domains=domains)


# The NVIDIA DRA driver's prerequisites (dra-driver-nvidia-gpu v0.4.1 docs/prerequisites.md: "Kubernetes
# v1.34.2 or later"); its ComputeDomain controller writes the channel ResourceClaimTemplate as
# resource.k8s.io/v1 (cmd/compute-domain-controller/resourceclaimtemplate.go), and Kueue 0.19.2 reads
# claim templates and DeviceClasses only as resource.k8s.io/v1 (pkg/dra/claims.go), which Kubernetes
# serves from 1.34.
COMPUTE_DOMAIN_MIN_KUBERNETES = (1, 34)
# A pod's spec.resourceClaims[].resourceClaimTemplateName, the field a ComputeDomain job claims its channel with, is
# 1.31's (KEP-4381 moved it out of the removed `source`); below that no claim is written at all
POD_CLAIM_MIN_KUBERNETES = (1, 31)


def _compute_domains(fleet: Fleet, kube: Plane, fab: fabric_mod.FabricModel, gpu_stack: str,
                     reasons: list[str], warnings: list[Warning_]) -> tuple[str, ...]:
    """The Kubernetes plane's pools of multi-node NVLink domains (GB200 NVL72 racks) that get
    ComputeDomains: on bare metal under the GPU Operator, whose GPU Feature Discovery labels each
    tray's clique (fabric.LABEL_CLIQUE) and whose driver the DRA driver uses."""
    pools = tuple(s.pool for s in kube.slices if fab.domain_nodes(s.pool) > 1)
    if not pools:
        return ()
    if not known_by_name(fleet) or gpu_stack != "operator":
        reasons.append(f"NVLink domains of {', '.join(pools)} on Kubernetes: no ComputeDomains, since "
                       "the nodes are the provider's (its own NVLink and IMEX set-up applies)")
        return ()
    version = tuple(int(n) for n in fleet.options.kubernetes_version.split(".")[:2])
    if version < POD_CLAIM_MIN_KUBERNETES:
        # no ComputeDomain, claim or DRA driver release where the plane's API has no pod field to claim with: the
        # bundle would not apply (orchgen validate refuses it against that version's schema)
        reasons.append(f"NVLink domains of {', '.join(pools)} on Kubernetes {fleet.options.kubernetes_version}: no "
                       "ComputeDomains (they need 1.34.2 or later), so multi-node jobs there reach each other over "
                       "the RDMA fabric, not NVLink")
        warnings.append(Warning_(
            f"ComputeDomains (the NVIDIA DRA driver, multi-node NVLink on {', '.join(pools)}) need Kubernetes "
            f"1.34.2 or later (the driver's prerequisites): on {fleet.options.kubernetes_version} the bundle has "
            "none (a pod cannot claim a template there), and multi-node jobs there use the RDMA fabric, not NVLink; "
            "set options.kubernetes_version to 1.34 or later for them",
            "options.kubernetes_version"))
        return ()
    reasons.append(
        f"{', '.join(pools)}: multi-node NVLink domains on Kubernetes, so the NVIDIA DRA driver (ComputeDomains) is "
        f"installed, each multi-node job there gets a ComputeDomain and claims its IMEX channel, and Kueue "
        f"places a job inside one NVLink clique ({fabric_mod.LABEL_CLIQUE}, set by the GPU Operator's GFD)")
    if version < COMPUTE_DOMAIN_MIN_KUBERNETES:
        warnings.append(Warning_(
            f"ComputeDomains (the NVIDIA DRA driver, multi-node NVLink on {', '.join(pools)}) need Kubernetes "
            f"1.34.2 or later (the driver's prerequisites; it and Kueue 0.19.2 use resource.k8s.io/v1): "
            f"on {fleet.options.kubernetes_version} the multi-node jobs there never start; set options.kubernetes_version",
            "options.kubernetes_version"))
    return pools


def pool_taints(fleet: Fleet) -> dict[str, tuple[tuple[str, str | None, str], ...]]:
    """pool -> its nodes' taints: the pool's `taints` where given, else the provider's default taints
    of a GPU node pool (providers.py cites each; none on bare metal and for a CPU pool)."""
    spec = fleet.fleet
    default = tuple(providers.parse_taint(t) for t in providers.PROVIDERS[spec.provider].default_taints)
    out: dict[str, tuple[tuple[str, str | None, str], ...]] = {}
    for p in spec.pools:
        if p.taints is not None:
            taints = tuple((t.key, t.value, t.effect) for t in p.taints)
        else:
            taints = default if p.gpu is not None and not spec.bare_metal else ()
        if taints:
            out[p.name] = taints
    return out


def _cloud_reason(provider: str, selectors: dict[str, dict[str, str]], pools: set[str]) -> str:
    shown = "; ".join(f"{p}: {', '.join(f'{k}={v}' for k, v in sorted(selectors[p].items()))}"
                      for p in sorted(pools))
    return (f"nodes known by their labels, not by name (provider {provider}, not bare metal): objects select "
            f"each pool by {shown or 'its labels'}")


def _network(fleet: Fleet, kube: Plane, placed: list[WorkloadDecision], fabric_wl: tuple[str, ...], dist: str,
             reasons: list[str], warnings: list[Warning_], file: str | None) -> Network | None:
    spec = fleet.fleet
    if not fabric_wl:
        return None
    names = ", ".join(fabric_wl)
    provider = providers.PROVIDERS[spec.provider]
    if provider.rdma == "efa":
        return _efa(fleet, kube, placed, fabric_wl, reasons, warnings)
    if provider.rdma == "not-configured":
        doc = provider.rdma_doc
        warnings.append(Warning_(
            f"orchgen does not configure {spec.provider}'s GPU networking: {names} would run NCCL over the pod "
            f"network; set up {doc} and add its resources to the starter manifests", "fleet.provider"))
        return None
    if spec.fabric.kind not in RDMA_FABRICS:
        return None
    if dist == "rke2":
        raise OrchgenError(
            "no Network Operator profile for rke2: RKE2 deploys its own Multus (cni: [multus, canal], docs.rke2.io "
            "networking/multus_sriov) and documents no CNI directories for the Network Operator's; orchgen will not "
            f"guess them for {names}. Use upstream or k3s, or attach the RDMA network yourself",
            file, None, "fleet.kubernetes_distribution")
    ib = spec.fabric.kind == "infiniband"
    net = spec.fabric.rdma_network
    iface = net.interface if net and net.interface else (IPOIB_DEFAULT if ib else None)
    subnet = net.subnet if net else "172.16.0.0/16"
    reasons.append(
        f"{spec.fabric.kind} for {names}: the NVIDIA Network Operator's RDMA shared device plugin ({RDMA_SHARED_RESOURCE}) "
        f"and a secondary {'IPoIB' if ib else 'macvlan'} network {FABRIC_NETWORK} on "
        f"{iface or 'the default-route interface'} ({subnet}), so NCCL uses the fabric, not the pod network")
    rails = _rails(kube, spec.fabric.kind, subnet) if not (net and net.interface) else ()
    if rails:
        reasons[-1] = (
            f"{spec.fabric.kind} for {names}: one {'IPoIB' if ib else 'macvlan'} network and one RDMA shared device "
            f"plugin resource per compute rail ({len(rails)}: {', '.join(r.netdev for r in rails)}, from the pools' "
            f"platform or nics), each pod of those asking for every rail, so NCCL uses all of them")
        env = (("NCCL_SOCKET_IFNAME", "net1"), ("NCCL_IB_HCA", "=" + ",".join(r.hca for r in rails)))
        return Network("rdma-shared", RAIL_RESOURCE_PREFIX, {s.pool: 1 for s in kube.slices}, env,
                       ",".join(r.name for r in rails), "ipoib" if ib else "macvlan", None, subnet, rails)
    if not (net and net.interface):
        _warn_unnamed_rails(fleet, kube, iface, warnings)
    return Network("rdma-shared", RDMA_SHARED_RESOURCE, {s.pool: 1 for s in kube.slices}, RDMA_ENV,
                   FABRIC_NETWORK, "ipoib" if ib else "macvlan", iface, subnet)


def _warn_unnamed_rails(fleet: Fleet, kube: Plane, iface: str | None, warnings: list[Warning_]) -> None:
    """A GPU pool whose compute rails are known (its platform or nics) but not their netdevs: one shared
    network on a guessed interface takes the place of a network per rail; say so, and what to give."""
    kind = fleet.fleet.fabric.kind
    index = {p.name: i for i, p in enumerate(fleet.fleet.pools)}
    for s in kube.slices:
        ports = s.hardware.compute_rails if s.gpu_type else ()
        unnamed = [n.device for n in ports if n.netdev_on(kind) is None]
        if not unnamed:
            continue
        pool = fleet.fleet.pools[index[s.pool]]
        warnings.append(Warning_(
            f"pool {s.pool}: {len(ports)} compute rails ({', '.join(n.device for n in ports)}), but "
            f"{'their netdevs' if len(unnamed) == len(ports) else 'the netdev of ' + ', '.join(unnamed)} on {kind} "
            f"{'are' if len(unnamed) == len(ports) else 'is'} not known, so its pods get one network on "
            f"{iface or 'the default-route interface'} and one RDMA resource for every HCA, not one per rail; "
            f"give the pool's nics with their netdev (`orchgen discover` reads them) or "
            f"fleet.fabric.rdma_network.interface",
            f"fleet.pools[{index[s.pool]}].{'nics' if pool.nics else 'platform' if pool.platform else 'gpu'}"))


# Per-rail networks (issue 35): rdma-rail-N, each over one compute HCA (k8s-rdma-shared-dev-plugin
# selects a resource's devices by `ifNames`), its nv-ipam pool a slice of fabric.rdma_network.subnet.
RAIL_NETWORK = "rdma-rail-{}"
RAIL_RESOURCE_PREFIX = "rdma/rdma_rail_"


def _rails(kube: Plane, kind: str, subnet: str) -> tuple[RdmaRail, ...]:
    """The compute rails every GPU node of the plane shares, as networks; () where any GPU pool's
    rails, or a rail's netdev on this fabric, are not known (then one shared network over every HCA)."""
    import ipaddress
    import math

    sets = {tuple((n.hca, n.netdev_on(kind)) for n in s.hardware.compute_rails) for s in kube.slices if s.gpu_type}
    if len(sets) != 1:
        return ()
    ports = sets.pop()
    if not ports or any(netdev is None for _, netdev in ports):
        return ()
    net = ipaddress.ip_network(subnet)
    prefix = net.prefixlen + math.ceil(math.log2(len(ports))) if len(ports) > 1 else net.prefixlen
    if prefix > 28:  # too few addresses to give each rail a pool: one shared network
        return ()
    blocks = list(net.subnets(new_prefix=prefix))
    return tuple(RdmaRail(RAIL_NETWORK.format(i), f"{RAIL_RESOURCE_PREFIX}{i}", hca, netdev, str(blocks[i]))
                 for i, (hca, netdev) in enumerate(ports))


def _efa(fleet: Fleet, kube: Plane, placed: list[WorkloadDecision], fabric_wl: tuple[str, ...],
         reasons: list[str], warnings: list[Warning_]) -> Network:
    by_pool = {p.name: p for p in fleet.fleet.pools}
    per_node: dict[str, int] = {}
    for s in kube.slices:
        itype = (by_pool[s.pool].node_labels or {}).get(INSTANCE_TYPE_LABEL)
        per_node[s.pool] = EFA_PER_INSTANCE.get(itype or "", 1)
    for pool in sorted({d.pool for d in placed if d.name in fabric_wl}):
        itype = (by_pool[pool].node_labels or {}).get(INSTANCE_TYPE_LABEL)
        if itype not in EFA_PER_INSTANCE:
            i = list(by_pool).index(pool)
            what = f"instance type {itype}" if itype else "no instance type"
            warnings.append(Warning_(
                f"pool {pool} has {what} orchgen knows the EFA count of ({', '.join(sorted(EFA_PER_INSTANCE))}): "
                f"its multi-node pods ask for 1 {EFA_RESOURCE} each, a fraction of the fabric; give node_labels "
                f"{INSTANCE_TYPE_LABEL} of a known type or edit the count", f"fleet.pools[{i}].node_labels"))
    reasons.append(f"EFA for {', '.join(fabric_wl)}: the EFA device plugin release and {EFA_RESOURCE} requests "
                   "(EKS device-management-efa), so NCCL runs over EFA, not the pod network")
    return Network("efa", EFA_RESOURCE, per_node, EFA_ENV)


def _scale(kube: Plane, fab: fabric_mod.FabricModel, reasons: list[str], warnings: list[Warning_]) -> None:
    nodes = len(kube.nodes)
    gpus = sum(s.gpus for s in kube.slices)
    pods_ = gpus + DAEMON_PODS_PER_NODE * nodes
    if nodes <= MAX_NODES and pods_ <= MAX_PODS:
        return
    over = (f"{nodes:,} nodes (at most {MAX_NODES:,})" if nodes > MAX_NODES
            else f"up to {pods_:,} pods (at most {MAX_PODS:,})")
    warnings.append(Warning_(
        f"the {kube.name} plane has {over}: beyond upstream Kubernetes' per-cluster envelope (5,000 nodes, "
        "150,000 pods, 110 pods per node: kubernetes.io/docs/setup/best-practices/cluster-large); "
        f"split it into {_split(kube, fab)}", "fleet.pools"))


def _split(kube: Plane, fab: fabric_mod.FabricModel, limit: int = MAX_NODES) -> str:
    """Clusters of whole spines (or, under a spine too big for one cluster, whole leaves), in fabric
    order, each at most `limit` nodes: the fabric's own boundaries, so no cluster's jobs cross a core."""
    mine = set(kube.nodes)
    # this plane's nodes per leaf (a leaf split between the planes counts only its part here)
    count = {leaf.name: sum(1 for n in leaf.nodes if n in mine) for leaf in fab.leaves}
    leaves = [leaf for leaf in fab.leaves if count[leaf.name]]
    units: list[tuple[str, int]] = []
    for spine in fab.spines or ():
        below = [leaf for leaf in leaves if leaf.spine == spine.name]
        size = sum(count[leaf.name] for leaf in below)
        if below and size <= limit:
            units.append((spine.name, size))
        else:
            units += [(leaf.name, count[leaf.name]) for leaf in below]
    if not fab.spines:
        units = [(leaf.name, count[leaf.name]) for leaf in leaves]
    clusters: list[list[tuple[str, int]]] = [[]]
    for name, size in units:
        if clusters[-1] and sum(n for _, n in clusters[-1]) + size > limit:
            clusters.append([])
        clusters[-1].append((name, size))
    parts = [f"{hostlist.compress([n for n, _ in c])} ({sum(n for _, n in c):,} nodes)" for c in clusters]
    shown = "; ".join(parts[:6]) + (f"; ... ({len(parts) - 6} more)" if len(parts) > 6 else "")
    return f"{len(clusters)} clusters of at most {limit:,} nodes along the fabric: {shown}"
