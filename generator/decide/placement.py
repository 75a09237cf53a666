"""Where each workload runs, and whether the split left room for it: pools, tenants, demand.

- `pool:` is a constraint. A workload that names a pool runs on it, on its own plane's nodes of it,
  or the plan is refused naming `workloads[i].pool`. The planner never moves such a workload.
- A workload that names no pool gets one picked for it (`default_pools`), before the split, so the
  demand the split reads is where it will run. Should the split still give that pool wholly to the
  other plane, the workload moves to its plane's first pool with GPUs (first pool, if it asks for
  none), and its reasons say so; with no such pool it is refused.
- A workload that names no tenant goes to the tenant marked `default: true`, else to the first
  tenant, with a warning when there were several to choose from.
- Demand is checked after the split: a job that needs all its nodes at once (a Slurm allocation, a
  gang) and spans more than its plane owns of its pool is refused; declared demand beyond what a
  plane owns of a pool, and starters that cannot run together on their nodes, are warnings.

Hard constraints behind the refusals (they hold for pinned and unpinned workloads alike):
1. a plane runs a workload only on nodes it owns, and a named pool is the only pool it may use;
2. a job whose nodes must start together (Slurm, or tightly coupled multi-node on Kubernetes,
   which is gang-scheduled) cannot span more nodes than its plane owns of its pool;
3. Slurm's names (generator/decide/slurm_names.py) hold whenever a workload, pinned or not, runs
   on Slurm.
A gang scheduler is never missing: every one orchgen installs (kueue, volcano, kai) gangs every
starter it writes, and `auto` picks Kueue as soon as one workload needs a gang.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..errors import OrchgenError
from ..spec.models import Fleet, Pool
from ..spec.hardware import node_hardware
from . import sizing
from .plan import KUBE_PLANES, PoolSlice, Tenant, Warning_, WorkloadDecision


def default_pools(fleet: Fleet, decisions: list[WorkloadDecision], slurm: str | None,
                  kube: str | None) -> dict[bool, str]:
    """Pool of a workload that names none: {on Slurm?: pool}. One plane alone: the first GPU pool.
    Both planes: each takes the first GPU pool that its own workloads name and the other plane's do
    not, else the first the other plane does not claim, else one its own workloads share with the
    other plane, else the first GPU pool; so a default competes with the other plane's pools only
    where every GPU pool is theirs (Slurm chooses first; Kubernetes then avoids Slurm's choice too)."""
    gpu_pools = [p.name for p in fleet.fleet.pools if p.gpu] or [p.name for p in fleet.fleet.pools]
    if not (slurm and kube):
        return {True: gpu_pools[0], False: gpu_pools[0]}
    on_slurm = [d.primary == "slurm" for d in decisions]
    named = {side: {w.pool for s, w in zip(on_slurm, fleet.workloads) if s == side and w.pool}
             for side in (True, False)}
    slurm_pool = _first(gpu_pools, named[True], named[False])
    claimed = named[True] | ({slurm_pool} if any(s and not w.pool for s, w in zip(on_slurm, fleet.workloads))
                             else set())
    return {True: slurm_pool, False: _first(gpu_pools, named[False], claimed)}


def picked_pools(fleet: Fleet, decisions: list[WorkloadDecision], slurm: str | None,
                 kube: str | None) -> list[tuple[str, str]]:
    """Per workload: (its pool, why it was picked, "" where the plain default stands). A workload
    that names its pool keeps it; otherwise its side's default (`default_pools`), except on a
    serving pool: one a service or notebooks run on (named or by default) and no Slurm job, nor a
    tightly coupled multi-node job that names it, does. There pools are split by demand before
    another GPU type is borrowed: training-like batch (multi-node, tightly coupled or a Ray
    pipeline) goes to the first pool serving no one that has room for it, else to one where its
    largest job still fits beside the others' (to be split by demand); other batch leaves the
    serving pool only where it would oversubscribe it. Room: the pool's nodes less the demand on it
    (max(nodes, ceil(gpus / GPUs per node)) x jobs_at_once per workload, as the split sizes it): the
    named workloads first, then the picked ones in input order, Slurm's side first."""
    default = default_pools(fleet, decisions, slurm, kube)
    pools = {p.name: p for p in fleet.fleet.pools}
    gpu_pools = [p.name for p in fleet.fleet.pools if p.gpu]
    base = [w.pool or default[d.primary == "slurm"] for d, w in zip(decisions, fleet.workloads)]
    serves = [w.long_lived_services or w.interactive for w in fleet.workloads]
    # the jobs that make a pool a training pool: Slurm's, and tightly coupled multi-node ones that name it
    trains = [d.primary == "slurm" or (bool(w.pool) and d.facts.tightly_coupled and d.facts.nodes > 1)
              for d, w in zip(decisions, fleet.workloads)]
    serving = {p for p, s in zip(base, serves) if s} - {p for p, t in zip(base, trains) if t}

    def need(w, pool: str) -> int:
        per = pools[pool].gpu.count if pools[pool].gpu else 0
        span = max(w.nodes, -(-w.gpus // per)) if per and w.gpus else w.nodes
        return span * (w.jobs_at_once or 1)

    used = {p: 0 for p in pools}
    biggest = {p: 0 for p in pools}  # the largest job there that starts all its nodes at once

    def at_once(i: int) -> bool:
        return decisions[i].primary == "slurm" or decisions[i].gang_scheduler_required

    for i, w in enumerate(fleet.workloads):
        if w.pool:
            used[w.pool] += need(w, w.pool)
            if at_once(i):
                biggest[w.pool] = max(biggest[w.pool], need(w, w.pool) // (w.jobs_at_once or 1))
    order = sorted(range(len(decisions)), key=lambda i: (decisions[i].primary != "slurm", i))
    # training-like: what wants the training GPUs (gang-started, several nodes, or a Ray pipeline); other
    # batch leaves a serving pool only where it would oversubscribe it
    trains_like = [d.facts.tightly_coupled or d.facts.nodes > 1 or d.facts.python_native_pipeline for d in decisions]

    def over_base(i: int) -> bool:
        w = fleet.workloads[i]
        return used[base[i]] + need(w, base[i]) > pools[base[i]].nodes

    out = [(b, "") for b in base]
    for i in order:
        w = fleet.workloads[i]
        if w.pool:
            continue
        pick, why = base[i], ""
        if not serves[i] and base[i] in serving and (trains_like[i] or over_base(i)):
            # a pool with room; else one both planes' largest jobs still fit, to be split by demand
            room = [p for p in gpu_pools if p not in serving and used[p] + need(w, p) <= pools[p].nodes]
            others = [p for p in gpu_pools if p not in serving
                      and biggest[p] + need(w, p) // (w.jobs_at_once or 1) <= pools[p].nodes]
            on_base = used[base[i]] + need(w, base[i])
            over = on_base > pools[base[i]].nodes
            if room or (over and others):
                pick = (room or others)[0]
                has = (f"it needs {need(w, pick)} nodes; {pick} has {pools[pick].nodes}, {used[pick]} wanted by "
                       "the others")
                why = (f"pool {pick}: it names none, and batch goes to a pool no service runs on "
                       + (f"while one has room ({has})" if room else f"to be split by demand there ({has})")
                       + f", not the serving pool {base[i]}"
                       + (f", which it would oversubscribe ({on_base} nodes wanted of {pools[base[i]].nodes})"
                          if over else ""))
        used[pick] += need(w, pick)
        if at_once(i):
            biggest[pick] = max(biggest[pick], need(w, pick) // (w.jobs_at_once or 1))
        out[i] = (pick, why)
    return out


def _first(pools: list[str], mine: set[str], theirs: set[str]) -> str:
    """The first of `pools` that only this plane uses, else that the other does not, else that this
    plane uses too, else the very first."""
    for keep in (lambda p: p in mine and p not in theirs, lambda p: p not in theirs, lambda p: p in mine):
        found = [p for p in pools if keep(p)]
        if found:
            return found[0]
    return pools[0]


def tenants_of(fleet: Fleet) -> tuple[list[Tenant], str]:
    """The plan's tenants and the one a workload that names none goes to."""
    if not fleet.tenants:
        return [Tenant(fleet.metadata.name, 1, True)], fleet.metadata.name
    default = next((t.name for t in fleet.tenants if t.default), fleet.tenants[0].name)
    return [Tenant(t.name, t.share, False, users=tuple(t.users), unix_group=t.unix_group, max_gpus=t.max_gpus,
                   slurm_qos=tuple(t.slurm_qos or ()), slurm_default_qos=t.slurm_default_qos,
                   kubernetes_group=t.kubernetes_group)
            for t in fleet.tenants], default


# Words that say a workload is for people at a keyboard (notebooks), in its name or description
_INTERACTIVE_WORDS = re.compile(r"(?<![a-z])(jupyter[a-z]*|notebooks?|interactive|ipython)(?![a-z])", re.I)


def intent_warnings(fleet: Fleet) -> list[Warning_]:
    """A long-lived workload whose name or description says notebooks, but not `interactive`: it is
    planned as a model server (vLLM behind an autoscaler), not JupyterHub. An explicit
    `interactive: false` says the flags are meant."""
    out = []
    for i, w in enumerate(fleet.workloads):
        if not w.long_lived_services or "interactive" in w.model_fields_set:
            continue
        found = _INTERACTIVE_WORDS.search(w.name.replace("-", " ")) or _INTERACTIVE_WORDS.search(w.description or "")
        if found:
            where = "name" if _INTERACTIVE_WORDS.search(w.name.replace("-", " ")) else "description"
            out.append(Warning_(
                f"{w.name} looks interactive (its {where} says {found.group(0)!r}) but is planned as a long-lived "
                "service, a model server with an autoscaler; set interactive: true for notebooks (JupyterHub on "
                "its tenant's queue), or interactive: false to keep it a service", f"workloads[{i}].interactive"))
    return out


def tenant_warnings(fleet: Fleet, default: str) -> list[Warning_]:
    """A workload given a tenant it did not name, where there were several to choose from."""
    if len(fleet.tenants) < 2 or any(t.default for t in fleet.tenants):
        return []
    return [Warning_(f"{w.name} names no tenant and none is marked `default: true`, so it goes to "
                     f"{default!r}, the first of {len(fleet.tenants)} tenants: name its tenant, or mark "
                     "the default one", f"workloads[{i}].tenant")
            for i, w in enumerate(fleet.workloads) if w.tenant is None]


def settle(fleet: Fleet, placed: list[WorkloadDecision], slices: dict[str, tuple[PoolSlice, ...]],
           demand: dict[str, dict[str, int]], file: str, kept: frozenset[str] = frozenset()) -> list[WorkloadDecision]:
    """Hold every workload to a pool its plane owns nodes of: refuse a named pool the split gave
    away, move a picked one (saying so), and refuse a job longer than its plane's part of the pool."""
    pools = {p.name: p for p in fleet.fleet.pools}
    out = []
    for i, (d, w) in enumerate(zip(placed, fleet.workloads)):
        mine = slices.get(d.plane, ())
        if mine and not any(s.pool == d.pool for s in mine):
            if w.pool is not None:
                raise OrchgenError(_lost(d, pools[d.pool], slices, demand), file, None, f"workloads[{i}].pool")
            d = _move(d, w.gpus, mine, slices, i, file)
        _check_span(d, i, mine, slices, file, d.pool in kept)
        out.append(d)
    return out


def _other(plane: str, slices: dict[str, tuple[PoolSlice, ...]]) -> str:
    return next((p for p in slices if p != plane), "the other plane")


def _lost(d: WorkloadDecision, pool: Pool, slices: dict[str, tuple[PoolSlice, ...]],
          demand: dict[str, dict[str, int]]) -> str:
    other = _other(d.plane, slices)
    how = "pinned there by its `plane:`" if d.pinned else "placed there by the rules"
    wants = ", ".join(f"{plane} {need.get(pool.name, 0)}" for plane, need in sorted(demand.items()))
    return (f"{d.name} runs on {d.plane} ({how}) and names pool {pool.name}, but the split gave all "
            f"{pool.nodes} nodes of {pool.name} to {other} (demand there in nodes: {wants}); a plane runs "
            f"workloads only on nodes it owns, and orchgen never moves a workload off the pool it names. "
            f"Give {pool.name} to one plane (move the other plane's workloads to another pool), or give "
            f"{pool.name} more leaves")


def _move(d: WorkloadDecision, gpus: int | None, mine: tuple[PoolSlice, ...],
          slices: dict[str, tuple[PoolSlice, ...]], i: int, file: str) -> WorkloadDecision:
    wants_gpus = gpus != 0 and d.gpus_per_node > 0
    target = next((s for s in mine if s.gpus_per_node or not wants_gpus), None)
    if target is None:
        raise OrchgenError(
            f"{d.name} names no pool; the one picked for it, {d.pool}, went wholly to "
            f"{_other(d.plane, slices)}, and the {d.plane} plane has no other pool with GPUs: name the "
            "pool it should run on (`pool:`)", file, None, f"workloads[{i}]")
    moved = gpus if gpus is not None else d.facts.nodes * target.gpus_per_node
    why = (f"pool {target.pool}: it names none, and {d.pool} (the planner's pick) went wholly to "
           f"{_other(d.plane, slices)}")
    return replace(d, pool=target.pool, gpus_per_node=target.gpus_per_node, gpus=moved,
                   reasons=d.reasons + (why,))


def _check_span(d: WorkloadDecision, i: int, mine: tuple[PoolSlice, ...],
                slices: dict[str, tuple[PoolSlice, ...]], file: str, kept: bool = False) -> None:
    at_once = d.plane == "slurm" or d.gang_scheduler_required
    part = next((s for s in mine if s.pool == d.pool), None)
    if not at_once or part is None or d.facts.nodes <= len(part.nodes):
        return
    how = "a Slurm allocation starts" if d.plane == "slurm" else "a gang starts"
    raise OrchgenError(
        f"{d.name} spans {d.facts.nodes} nodes, which {how} all at once, but the {d.plane} plane owns "
        f"{_n(len(part.nodes), 'node')} of pool {d.pool}{_rest(d, part, slices)}: lower `nodes`, or give "
        f"{d.pool} more nodes" + (f", or move nodes of it to {d.plane} (its nodes keep their planes across "
                                  f"re-plans; the pool's `planes:` moves them)" if kept else ""),
        file, None, f"workloads[{i}].nodes")


def _rest(d: WorkloadDecision, part: PoolSlice, slices: dict[str, tuple[PoolSlice, ...]]) -> str:
    theirs = sum(len(s.nodes) for plane, ss in slices.items() if plane != d.plane for s in ss if s.pool == d.pool)
    return f" (the split gave {_other(d.plane, slices)} the other {theirs})" if theirs else ""


def sized(d: WorkloadDecision, pool: Pool) -> WorkloadDecision:
    """The starter's pods, for a workload on a Kubernetes plane (Slurm jobs have none)."""
    if d.plane not in KUBE_PLANES:
        return d
    per_node = pool.gpu.count if pool.gpu else 0
    hw = node_hardware(pool)  # what pods can have: the node less what `reserved` keeps for the OS
    mig = (hw.mig.resource, hw.mig.per_gpu) if hw.mig else ()
    shape = sizing.pod_shape(d.facts.nodes, d.gpus, per_node, hw.allocatable_cpus, hw.allocatable_memory_gib,
                             *mig)
    head = (sizing.ray_head(hw.allocatable_cpus, hw.allocatable_memory_gib)
            if d.workload_class == "ray" else None)
    return replace(d, shape=shape, ray_head=head)


def capacity_warnings(fleet: Fleet, placed: list[WorkloadDecision],
                      slices: dict[str, tuple[PoolSlice, ...]]) -> list[Warning_]:
    """Declared demand beyond what a plane owns of a pool: on Slurm the workloads' GPUs (nodes on a
    CPU pool), which then queue behind one another; on Kubernetes the starters' pods, which cannot
    all run at once (GPUs, CPUs or memory: the sum of their requests against the nodes')."""
    index = {p.name: j for j, p in enumerate(fleet.fleet.pools)}
    by: dict[tuple[str, str], list[WorkloadDecision]] = {}
    for d in placed:
        by.setdefault((d.plane, d.pool), []).append(d)
    out = []
    for plane, ss in slices.items():
        for s in ss:
            here = by.get((plane, s.pool), [])
            text = (_kube_overflow(plane, s, here) if plane in KUBE_PLANES else _slurm_overflow(plane, s, here))
            if here and text:
                out.append(Warning_(text, f"fleet.pools[{index[s.pool]}].nodes"))
    return out


def _slurm_overflow(plane: str, s: PoolSlice, here: list[WorkloadDecision]) -> str | None:
    n = len(s.nodes)
    unit, have = ("GPU", s.gpus) if s.gpus_per_node else ("node", n)
    asks = [(d.name, (d.gpus if s.gpus_per_node else d.facts.nodes) * d.jobs_at_once) for d in here]
    total = sum(a for _, a in asks)
    if total <= have:
        return None
    return (f"the {plane} plane's {_n(n, 'node')} of pool {s.pool} {'has' if n == 1 else 'have'} "
            f"{_n(have, unit)}, but its workloads here declare {_n(total, unit)} together "
            f"({', '.join(f'{name} {a}' for name, a in asks)}): they queue behind one another")


def _kube_overflow(plane: str, s: PoolSlice, here: list[WorkloadDecision]) -> str | None:
    n = len(s.nodes)
    have = (s.gpus, s.cpus * n, s.memory_gib * n)
    each = [(d.name, tuple(x * d.jobs_at_once for x in sizing.totals(d.shape, d.ray_head))) for d in here]
    need = tuple(sum(t[k] for _, t in each) for k in range(3))
    over = [k for k in range(3) if need[k] > have[k]]
    if not over:
        return None
    units = ("GPU", "CPU", "GiB of memory")

    def amount(values: tuple[int, ...]) -> str:
        return ", ".join(_n(values[k], units[k]) for k in over)

    parts = "; ".join(f"{name} {amount(t)}" for name, t in each)
    return (f"the {plane} plane's {_n(n, 'node')} of pool {s.pool} {'has' if n == 1 else 'have'} "
            f"{amount(have)}, but the starters of its workloads here ask for {amount(need)} together "
            f"({parts}): they cannot all run at once")


def _n(count: int, unit: str) -> str:
    plural = count != 1 and not unit.startswith("GiB")
    return f"{count} {unit}{'s' * plural}"
