"""Rules of workload.yaml that span fields: references, duplicates, hostnames, node hardware
(`hardware.problems`: sockets x cores x threads against cpus and slurmd -C, reservations, GPU
sockets, MIG profiles).

Each rule yields (message, path); `load` turns the first into an error with its line.
Everything here is something a real consumer would reject later (Slurm: a node defined twice, a
hostname it cannot take; Kubernetes: a node name that is no DNS label), caught before writing.
Rules that depend on the decision (names only Slurm rejects, checked only when Slurm is planned)
are the decision's: generator/decide/slurm_names.py.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from .. import catalog, providers
from . import hardware, hostlist, platforms
from .models import MAX_FLEET_NODES, Fleet, Path_, Pool, _dns_label, _short

# Namespaces a tenant cannot take: Kubernetes' own and the ones our releases install into.
RESERVED_NAMESPACES = set(catalog.PLATFORM_NAMESPACES) | {entry.namespace for entry in catalog.CATALOG.values()}

Problem = tuple[str, Path_]


def default_hostnames(pool: Pool) -> str:
    width = max(3, len(str(pool.nodes)))
    if pool.nodes == 1:
        return f"{pool.name}-{1:0{width}d}"
    return f"{pool.name}-[{1:0{width}d}-{pool.nodes:0{width}d}]"


def pool_hostnames(pool: Pool) -> list[str]:
    return hostlist.expand(pool.hostnames or default_hostnames(pool))


def check_fleet(fleet: Fleet) -> Iterator[Problem]:
    yield from _unique(fleet)
    yield from _pools(fleet)
    yield from _platform(fleet)
    yield from _workloads(fleet)
    yield from _slurm_policy(fleet)
    for name in sorted(fleet.options.versions):
        if name not in catalog.CATALOG:
            yield _unknown("component", name, list(catalog.CATALOG)), ("options", "versions", name)
    if fleet.options.metrics == "site" and fleet.options.prometheus_url is None:
        yield ("site needs options.prometheus_url: the site's Prometheus that scrapes the GPU metrics",
               ("options", "metrics"))
    if fleet.options.metrics == "install" and fleet.options.prometheus_url is not None:
        yield ("given with options.metrics install, where the bundle installs its own Prometheus: set "
               "options.metrics site to use the site's", ("options", "prometheus_url"))
    for i, tenant in enumerate(fleet.tenants):
        owner = catalog.reserved_namespace(tenant.name)
        if owner:
            yield (f"{tenant.name!r} is reserved ({owner}): a tenant's name becomes its namespace; "
                   "pick another tenant name", ("tenants", i, "name"))
    defaults = [t.name for t in fleet.tenants if t.default]
    if len(defaults) > 1:
        i = next(i for i, t in enumerate(fleet.tenants) if t.default and t.name == defaults[1])
        yield (f"a second default tenant ({defaults[0]!r} is marked default: true already); at most one "
               "tenant takes the workloads that name none", ("tenants", i, "default"))


def _unique(fleet: Fleet) -> Iterator[Problem]:
    for section, items in (("fleet.pools", fleet.fleet.pools), ("tenants", fleet.tenants),
                           ("workloads", fleet.workloads)):
        seen: set[str] = set()
        for i, item in enumerate(items):
            if item.name in seen:
                yield f"duplicate name {item.name!r}", (*section.split("."), i, "name")
            seen.add(item.name)


def _pools(fleet: Fleet) -> Iterator[Problem]:
    # the fleet's size first, from the counts alone: 256 pools of 65,536 hostnames each took minutes and
    # gigabytes to expand and check before this refusal came (issue 40, bounded input)
    total = sum(pool.nodes for pool in fleet.fleet.pools)
    if total > MAX_FLEET_NODES:
        yield f"the fleet has {total} nodes; orchgen plans at most {MAX_FLEET_NODES}", ("fleet", "pools")
        return
    owner: dict[str, str] = {}
    for i, pool in enumerate(fleet.fleet.pools):
        at: Path_ = ("fleet", "pools", i)
        try:
            if pool.hostnames is not None and hostlist.count(pool.hostnames) != pool.nodes:
                yield (f"hostlist {pool.hostnames!r} names {hostlist.count(pool.hostnames)} nodes "
                       f"but nodes is {pool.nodes}"), (*at, "hostnames")
                continue
            names = pool_hostnames(pool)
        except hostlist.HostlistError as exc:
            yield f"not a Slurm hostlist: {exc}", (*at, "hostnames")
            continue
        if _labels(names) and len(set(names)) == len(names) and owner.keys().isdisjoint(names):
            owner.update(dict.fromkeys(names, pool.name))  # what the loop below does when it finds nothing
            names_ok = True
        else:
            names_ok = False
        for name in () if names_ok else names:
            try:
                _dns_label(name)
            except ValueError as exc:
                yield f"hostname {exc} (Slurm node and Kubernetes node names must be)", (*at, "hostnames")
                break
            if name in owner:
                where = "twice in this pool" if owner[name] == pool.name else f"also in pool {owner[name]!r}"
                yield f"hostname {name!r} is {where}: a node can be defined once", (*at, "hostnames")
                break
            owner[name] = pool.name
        yield from _held(pool, names, at)
        for message, where in (*platforms.problems(pool), *platforms.nic_problems(pool)):
            yield message, (*at, *where)
            break
        else:
            for message, where in hardware.problems(pool, fleet.options.slurm_version):
                yield message, (*at, *where)
                break
        if pool.nvlink_domain_nodes > 1:
            if pool.gpu is None:
                yield "an NVLink domain needs GPUs: this pool has no gpu", (*at, "nvlink_domain_nodes")
            elif pool.nodes % pool.nvlink_domain_nodes:
                yield (f"{pool.nodes} nodes do not fill whole NVLink domains of "
                       f"{pool.nvlink_domain_nodes} nodes"), (*at, "nvlink_domain_nodes")


# Every name a DNS-1123 label (models._dns_label) at once: one regex over the names joined, not a call per node
# (16,384 at 131,072 GPUs); a name with a line break in it would pass for two, hence the count of lines.
_LABELS = re.compile(r"(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\n)*")


def _labels(names: list[str]) -> bool:
    joined = "\n".join(names) + "\n"
    return joined.count("\n") == len(names) and _LABELS.fullmatch(joined) is not None


def _held(pool: Pool, names: list[str], at: Path_) -> Iterator[Problem]:
    """pool.planes: hostlists of the pool's own nodes, no node under both planes."""
    seen: dict[str, str] = {}
    mine = set(names)
    for plane, expr in (pool.planes or {}).items():
        try:
            held = hostlist.expand(expr)
        except hostlist.HostlistError as exc:
            yield f"not a Slurm hostlist: {exc}", (*at, "planes", plane)
            return
        for name in held:
            if name not in mine:
                yield (f"{name!r} is not a node of pool {pool.name} ({hostlist.compress(names)}); a pool holds "
                       "only its own nodes to a plane"), (*at, "planes", plane)
                return
            if name in seen:
                yield (f"{name!r} is held to both {seen[name]} and {plane}: a node is in exactly one "
                       "plane"), (*at, "planes", plane)
                return
            seen[name] = plane


# The node-pool label each managed provider puts on its nodes, and the names it allows for a pool
# (so that the default selector `<label>=<pool name>` can match): the provider table
# (generator/providers.py) holds them with their sources.
PROVIDER_POOL_LABEL = {p.name: p.pool_label for p in providers.PROVIDERS.values() if p.pool_label}
_POOL_NAME = {p.name: p.pool_name for p in providers.PROVIDERS.values() if p.pool_name}
MANAGED_PROVIDERS = providers.MANAGED
# Label prefixes a pool's node_labels may not use: orchgen's own (node-labels.sh sets them) and a
# node's name, which is exactly what a cloud pool must not be selected by.
_RESERVED_LABELS = ("orchgen.io/", "kubernetes.io/hostname")


def default_node_labels(provider: str, pool: str) -> dict[str, str]:
    """How a cloud pool's nodes are selected when the input gives no node_labels. `generic`: the
    orchgen pool label, which the provisioner sets (kubelet --node-labels)."""
    return {PROVIDER_POOL_LABEL.get(provider, "orchgen.io/pool"): pool}


def pool_node_labels(fleet: Fleet, pool: Pool) -> dict[str, str]:
    return dict(pool.node_labels) if pool.node_labels else default_node_labels(fleet.fleet.provider, pool.name)


def _platform(fleet: Fleet) -> Iterator[Problem]:
    spec = fleet.fleet
    if spec.bare_metal and spec.provider != "generic":
        yield (f"bare_metal: true means the site's own machines (provider generic), not {spec.provider}'s; "
               "drop one of the two"), ("fleet", "provider")
    if spec.provider in MANAGED_PROVIDERS and spec.kubernetes_distribution != "upstream":
        yield (f"{spec.provider} runs its own Kubernetes, not {spec.kubernetes_distribution}: leave "
               "kubernetes_distribution at upstream"), ("fleet", "kubernetes_distribution")
    for key in ("traffic_class", "service_level"):
        if getattr(spec.fabric, key) is not None and spec.fabric.kind != "roce":
            yield (f"{key} marks NCCL's RoCE packets for the switches' lossless class: it has no meaning on "
                   f"{spec.fabric.kind}; drop it or set fabric.kind to roce"), ("fleet", "fabric", key)
    if spec.bare_metal and "kind" not in spec.fabric.model_fields_set and fleet.options.slurm.nccl:
        # The default, ethernet, gives Slurm jobs NCCL_IB_DISABLE=1: on an InfiniBand cluster NCCL would
        # fall back to TCP sockets unnoticed. The site's own machines are cabled one way: say which. (With
        # options.slurm.nccl: false no NCCL setting is written: an adopted site whose fabric is not known yet.)
        yield ("a bare-metal fleet states its interconnect: set fleet.fabric.kind to infiniband, roce or ethernet "
               "(ethernet gives NCCL no RDMA: NCCL_IB_DISABLE=1)"), ("fleet", "fabric", "kind")
    net = spec.fabric.rdma_network
    if net is not None and spec.fabric.kind == "ethernet":
        yield ("an Ethernet fabric without RDMA has no RDMA network: set fabric.kind to infiniband or roce, "
               "or drop rdma_network"), ("fleet", "fabric", "rdma_network")
    for i, pool in enumerate(spec.pools):
        at: Path_ = ("fleet", "pools", i)
        for key in pool.node_labels or {}:
            if key.startswith(_RESERVED_LABELS):
                yield (f"{key} cannot select a pool: orchgen.io/ labels are node-labels.sh's, and a node's "
                       "name is not how a pool is known"), (*at, "node_labels")
        if pool.node_labels or spec.bare_metal or spec.provider not in _POOL_NAME:
            continue
        pattern, rule = _POOL_NAME[spec.provider]
        if not pattern.match(pool.name):
            yield (f"{spec.provider} node pool names are {rule}, so no {spec.provider} pool can be named "
                   f"{pool.name!r}: give node_labels ({PROVIDER_POOL_LABEL[spec.provider]}: <your pool's "
                   "name>)"), (*at, "name")


def _workloads(fleet: Fleet) -> Iterator[Problem]:
    pools = {p.name: p for p in fleet.fleet.pools}
    tenants = [t.name for t in fleet.tenants]
    for i, w in enumerate(fleet.workloads):
        at: Path_ = ("workloads", i)
        if w.pool is not None and w.pool not in pools:
            yield _unknown("pool", w.pool, list(pools)), (*at, "pool")
        if w.tenant is not None and w.tenant not in tenants:
            yield _unknown("tenant", w.tenant, tenants), (*at, "tenant")
        pool = pools.get(w.pool or "")
        if pool is not None and w.nodes > pool.nodes:
            yield f"spans {w.nodes} nodes but pool {pool.name!r} has {pool.nodes}", (*at, "nodes")
        if pool is not None and pool.gpu is None and w.gpus:
            yield f"asks for {w.gpus} GPUs but pool {pool.name!r} has no GPUs", (*at, "gpus")
        if pool is None and w.nodes > sum(p.nodes for p in pools.values()):
            yield f"spans {w.nodes} nodes but the fleet has {sum(p.nodes for p in pools.values())}", (*at, "nodes")
        yield from ((m, (*at, f)) for m, f in demand_problems(w, pool.gpu.count if pool and pool.gpu else None))
        yield from ((m, (*at, "serving", f)) for m, f in serving_problems(w, pool))


def serving_problems(w: Any, pool: Any) -> Iterator[tuple[str, str]]:
    """workloads[].serving read with its workload and pool (decide/serving.py sizes the rest). Yields
    (message, field under serving)."""
    sv = w.serving
    if sv is None:
        return
    if not w.long_lived_services:
        yield "serving describes a long-lived service: set long_lived_services: true, or drop serving", "stack"
    if sv.min_replicas is not None and sv.max_replicas is not None and sv.min_replicas > sv.max_replicas:
        yield f"min_replicas {sv.min_replicas} is above max_replicas {sv.max_replicas}", "min_replicas"
    if sv.expose == "gateway" and sv.gateway is None:
        yield "expose: gateway needs `gateway`, the [namespace/]name of the Gateway the HTTPRoute attaches to", "gateway"
    if sv.gateway is not None and sv.expose != "gateway":
        yield "gateway is read only with expose: gateway", "gateway"
    if sv.ingress_class is not None and sv.expose != "ingress":
        yield "ingress_class is read only with expose: ingress", "ingress_class"
    if pool is not None and sv.nodes_per_replica > pool.nodes:
        yield f"a replica spans {sv.nodes_per_replica} nodes but pool {pool.name!r} has {pool.nodes}", "nodes_per_replica"
    per_node = pool.gpu.count if pool is not None and pool.gpu else None
    if per_node and sv.gpus_per_replica is not None:
        if sv.gpus_per_replica > sv.nodes_per_replica * per_node:
            yield (f"{sv.gpus_per_replica} GPUs do not fit {sv.nodes_per_replica} node(s) of {per_node} GPUs: "
                   "raise nodes_per_replica"), "gpus_per_replica"
        elif sv.nodes_per_replica > 1 and sv.gpus_per_replica % sv.nodes_per_replica:
            yield (f"{sv.gpus_per_replica} GPUs do not divide evenly over {sv.nodes_per_replica} nodes (each node "
                   "of a replica runs one pod with the same GPUs)"), "gpus_per_replica"
    if pool is not None and pool.gpu is None and sv.gpus_per_replica:
        yield f"asks for {sv.gpus_per_replica} GPUs per replica but pool {pool.name!r} has no GPUs", "gpus_per_replica"


def demand_problems(w: Any, per_node: int | None) -> Iterator[tuple[str, str]]:
    """workloads[].gpus, jobs_at_once, jobs_per_day and runtime read together (README "Demand"): one
    job's span is `nodes` (or its GPUs), the demand is how many such jobs run at once. `per_node`:
    the GPUs per node of the workload's pool, None where that is not known yet (the planner asks
    again once it has picked the pool). Yields (message, field)."""
    if w.jobs_per_day is not None and w.jobs_at_once is not None:
        yield ("give jobs_at_once or jobs_per_day, not both: jobs_per_day x runtime is the jobs at once "
               "(Little's law), so the two can disagree"), "jobs_per_day"
    elif w.jobs_per_day is not None and w.runtime is None:
        yield ("jobs_per_day needs runtime (a typical job's, e.g. runtime: \"02:00:00\"): the jobs at once "
               "are jobs_per_day x runtime"), "jobs_per_day"
    if w.long_lived_services and (w.jobs_per_day is not None or w.runtime is not None):
        yield ("a long-lived service runs continuously: it has no jobs_per_day or runtime (its `gpus` are "
               "all its replicas'); drop them, or make it a batch workload"), (
                   "jobs_per_day" if w.jobs_per_day is not None else "runtime")
    if per_node and w.gpus and not w.long_lived_services and w.gpus > w.nodes * per_node:
        jobs, rest = divmod(w.gpus, w.nodes * per_node)
        hint = (f"; for {jobs} such jobs at once write gpus: {w.nodes * per_node} and jobs_at_once: {jobs}"
                if not rest and jobs > 1 else
                f"; a job of {w.gpus} GPUs spans {-(-w.gpus // per_node)} nodes: write that as `nodes`")
        yield (f"{w.gpus} GPUs is not one job of nodes: {w.nodes} on {per_node}-GPU nodes (at most "
               f"{w.nodes} x {per_node} = {w.nodes * per_node}): `gpus` is one job's GPUs, and the jobs at "
               f"once are jobs_at_once{hint}"), "gpus"


def _unknown(what: str, name: str, known: list[str]) -> str:
    hint = difflib.get_close_matches(name, known, n=1)
    if hint:
        return f"unknown {what} {name!r} (did you mean {hint[0]!r}?)"
    return f"unknown {what} {name!r}; known: {', '.join(known) or 'none defined'}"


def _slurm_policy(fleet: Fleet) -> Iterator[Problem]:
    """options.slurm's site policy (issue 22) and the GRES type rules: what slurmctld or sacctmgr would
    refuse or mis-read, caught before writing. Which nodes a partition may name is the plan's
    (only the Slurm plane's nodes are Slurm nodes): render/slurm/model.py checks that."""
    for i, pool in enumerate(fleet.fleet.pools):
        gpu, at = pool.gpu, ("fleet", "pools", i, "gpu")
        if gpu is not None and gpu.type is None and gpu.typed:
            yield ("needs a type (the GRES type, e.g. h100 or GV100GL), or typed: false for an untyped GRES "
                   "(gpu:N)"), (*at, "type")
        if gpu is not None and gpu.type is not None and not gpu.custom and not catalog.gpu_type_known(gpu.type):
            yield gpu_type_problem(gpu.type), (*at, "type")
        if gpu is not None and not gpu.typed and gpu.mig is not None:
            yield ("MIG instances are typed GRES (the profile is the type, gres.html MIG Management): drop "
                   "typed: false or mig"), (*at, "typed")
    o = fleet.options.slurm
    at = ("options", "slurm")
    pools = [p.name for p in fleet.fleet.pools]
    seen: set[str] = set()
    for i, part in enumerate(o.partitions or ()):
        here = (*at, "partitions", i)
        if part.name.lower() in ("default", "all") and part.name != "all":
            yield f"{part.name!r} is a Slurm keyword (PartitionName=DEFAULT sets defaults)", (*here, "name")
        if part.name in seen:
            yield f"duplicate partition {part.name!r}", (*here, "name")
        seen.add(part.name)
        if (part.pools is None) == (part.nodes is None):
            yield "give exactly one of pools (pool names) or nodes (a Slurm hostlist, or ALL)", here
        for j, name in enumerate(part.pools or ()):
            if name not in pools:
                yield _unknown("pool", name, pools), (*here, "pools", j)
        if part.nodes is not None and part.nodes != "ALL":
            try:
                hostlist.expand(part.nodes)
            except ValueError as exc:
                yield f"not a Slurm hostlist: {exc}", (*here, "nodes")
        if part.default_time and part.max_time and _minutes(part.default_time) > _minutes(part.max_time):
            yield (f"default_time {part.default_time} is longer than max_time {part.max_time}: slurmctld "
                   "would cut every job that names no time to MaxTime"), (*here, "default_time")
    defaults = [p.name for p in o.partitions or () if p.default]
    if len(defaults) > 1:
        yield (f"{len(defaults)} partitions are the default ({', '.join(defaults)}); Slurm takes the last "
               "Default=YES: mark one"), (*at, "partitions")
    qos = [q.name for q in o.qos or ()]
    for i, q in enumerate(o.qos or ()):
        here = (*at, "qos", i)
        if qos.count(q.name) > 1 and qos.index(q.name) != i:
            yield f"duplicate QOS {q.name!r}", (*here, "name")
        for j, name in enumerate(q.preempt):
            if name not in qos:
                yield _unknown("QOS", name, qos), (*here, "preempt", j)
            elif name == q.name:
                yield "a QOS cannot preempt itself", (*here, "preempt", j)
    known = qos if o.qos is not None else ["normal", "scavenger"]  # orchgen's pair (render/slurm/model.py)
    for i, tenant in enumerate(fleet.tenants):
        for j, name in enumerate(tenant.slurm_qos or ()):
            if name not in known:
                yield _unknown("QOS", name, known), ("tenants", i, "slurm_qos", j)
        own = tenant.slurm_qos or known
        if tenant.slurm_default_qos is not None and tenant.slurm_default_qos not in own:
            yield (f"DefaultQOS {tenant.slurm_default_qos!r} is not one the account may use "
                   f"({', '.join(own)}); sacctmgr refuses it"), ("tenants", i, "slurm_default_qos")
    for i, part in enumerate(o.partitions or ()):
        for j, name in enumerate(part.allow_qos or ()):
            if o.qos is not None and name not in qos:
                yield _unknown("QOS", name, qos), (*at, "partitions", i, "allow_qos", j)
    if o.propagate_resource_limits != "ALL" and "propagate_resource_limits_except" in o.model_fields_set \
            and o.propagate_resource_limits_except:
        yield ("propagate_resource_limits_except goes with propagate_resource_limits: ALL (Slurm reads one "
               "of PropagateResourceLimits and PropagateResourceLimitsExcept)"), (*at, "propagate_resource_limits_except")
    keys = [item.split("=", 1)[0] for item in o.scheduler_parameters]
    for i, key in enumerate(keys):
        if keys.index(key) != i:
            yield f"SchedulerParameters item {key!r} given twice", (*at, "scheduler_parameters", i)
        if key == "max_switch_wait":
            yield "give it as options.slurm.max_switch_wait", (*at, "scheduler_parameters", i)


def gpu_type_problem(name: str) -> str:
    """Why GRES type `name` is refused: a GPU model orchgen does not know, with the likeliest one."""
    hint = catalog.gpu_type_hint(name)
    said = (f"did you mean {hint!r}?" if hint else
            f"orchgen knows {', '.join(catalog.GPU_TYPES[:12])} ... (generator/catalog.py GPU_TYPES)")
    return (f"unknown GPU type {_short(name)} ({said}): the GRES type is what jobs ask for and what the GPU health "
            "check looks for, so a typo drains every node; if it is the site's own name, add custom: true")


def _minutes(text: str) -> int:
    from . import slurmtime

    return slurmtime.minutes(text)
