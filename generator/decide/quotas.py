"""Tenants' nominal quotas on each pool of the Kubernetes plane: what each tenant is guaranteed.

Rule, per pool and per resource (GPUs, CPUs, memory): a tenant's services (long-lived, and so
hurt when borrowed capacity is reclaimed from their replicas) are guaranteed what their pods ask
for; the rest of the pool is divided by share. Precisely: each tenant gets max(its services'
requests, λ × its share), λ chosen so that the quotas add up to the pool exactly (integers by
largest remainder). Where the services of all tenants together ask for more than the pool has,
no such λ exists: the shares alone decide, and every tenant whose services then get less than they
ask for is warned about. With no services on a pool the shares alone decide, as they always did.
"""
from __future__ import annotations

from dataclasses import replace

from . import sizing
from .plan import PoolSlice, Quota, Tenant, Warning_, WorkloadDecision


def largest_remainder(total: int, shares: list[int]) -> list[int]:
    """Split `total` by `shares` into integers that add up to `total` exactly."""
    weight = sum(shares)
    exact = [total * s / weight for s in shares]
    out = [int(x) for x in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def guarantee(total: int, shares: list[int], floors: list[int]) -> tuple[list[int], list[bool]]:
    """Quotas adding up to `total`: each at least its floor where the floors fit, the rest by
    share. Returns the quotas and, per tenant, whether its floor (its demand) decided it."""
    n = len(shares)
    if not any(floors) or sum(floors) > total:
        return largest_remainder(total, shares), [False] * n
    fixed = _water_level(total, shares, floors)
    while True:  # integers: a tenant rounded below its floor is held at it too (rarely a second pass)
        free = [i for i in range(n) if i not in fixed]
        rest = total - sum(floors[i] for i in fixed)
        split = dict(zip(free, largest_remainder(rest, [shares[i] for i in free])))
        below = {i for i in free if split[i] < floors[i]}
        if not below:  # at least one tenant stays free: the floors fit, so not all can be below
            return [floors[i] if i in fixed else split[i] for i in range(n)], [i in fixed for i in range(n)]
        fixed |= below


def _water_level(total: int, shares: list[int], floors: list[int]) -> set[int]:
    """The tenants held at their floors in exact arithmetic: those with floor / share above the
    level λ that the others' shares then divide the rest at (highest ratio first; O(n log n))."""
    order = sorted((i for i in range(len(shares)) if floors[i]), key=lambda i: (-floors[i] / shares[i], i))
    fixed: set[int] = set()
    rest, weight = total, sum(shares)
    for i in order:
        if floors[i] * weight <= rest * shares[i]:  # floor / share <= rest / weight: by share from here
            break
        fixed.add(i)
        rest, weight = rest - floors[i], weight - shares[i]
    return fixed


def is_service(d: WorkloadDecision, kube: str | None) -> bool:
    """A long-lived service whose replicas the quotas guarantee: a `service` workload, or a Python-native
    one on the Kubernetes plane (class `ray`), which serving.decide makes a RayService (Ray Serve)."""
    if d.shape is None:
        return False
    if d.workload_class == "service":
        return True
    return (d.workload_class == "ray" and kube is not None and d.plane == kube
            and d.facts.long_lived_services)


def quotas(tenants: list[Tenant], slices: tuple[PoolSlice, ...], placed: list[WorkloadDecision],
           kube: str | None = None) -> tuple[list[Tenant], list[str], list[Warning_]]:
    """The tenants with their quotas per pool, the reasons (which rule won, where demand did), and
    the warnings (services promised more than their tenant's quota). `kube` names the Kubernetes
    plane, whose long-lived Ray workloads are services (RayServices) too."""
    shares = [t.share for t in tenants]
    per: list[dict[str, Quota]] = [{} for _ in tenants]
    reasons: list[str] = []
    warnings: list[Warning_] = []
    by: dict[tuple[str, str], list[tuple[int, WorkloadDecision]]] = {}
    for i, d in enumerate(placed):
        if is_service(d, kube):
            by.setdefault((d.tenant, d.pool), []).append((i, d))
    index = {t.name: i for i, t in enumerate(tenants)}
    for s in slices:
        n = len(s.nodes)
        services = {index[t]: mine for (t, pool), mine in by.items() if pool == s.pool}
        asks = [(0, 0, 0)] * len(tenants)
        for i, mine in services.items():
            asks[i] = sizing.totals(*(d.shape for _, d in mine))
        columns = [guarantee(total, shares, [a[k] for a in asks])
                   for k, total in enumerate((s.gpus, s.cpus * n, s.memory_gib * n))]
        (gpus, won), cpus, mems = columns[0], columns[1][0], columns[2][0]
        for i, (g, c, m) in enumerate(zip(gpus, cpus, mems)):
            per[i][s.pool] = Quota(g, c, m)
        if any(won):
            reasons.append(_reason(s, tenants, gpus, won))
        everyone = sum(a[0] for a in asks)
        for i in sorted(services):
            if asks[i][0] > gpus[i]:
                warnings.append(_short(s, tenants[i], services[i], asks[i][0], gpus[i], everyone))
    return [replace(t, quotas=q) for t, q in zip(tenants, per)], reasons, warnings


def _reason(s: PoolSlice, tenants: list[Tenant], gpus: list[int], won: list[bool]) -> str:
    by_share = largest_remainder(s.gpus, [t.share for t in tenants])
    sized = [f"{t.name} {g} (by share alone {b})" for t, g, w, b in zip(tenants, gpus, won, by_share) if w]
    rest = [f"{t.name} {g}" for t, g, w in zip(tenants, gpus, won) if not w]
    others = (f"; by share: {', '.join(rest)}" if len(rest) <= 8 else f"; the other {len(rest)} tenants by share"
              ) if rest else ""
    return (f"tenant quotas on pool {s.pool} ({s.gpus} GPUs): a tenant's services are guaranteed the GPUs, "
            f"CPUs and memory their pods ask for, the rest is divided by share. By its services' demand: "
            f"{', '.join(sized)}{others}")


def _short(s: PoolSlice, t: Tenant, mine: list[tuple[int, WorkloadDecision]], ask: int, got: int,
           everyone: int) -> Warning_:
    first = mine[0][0]
    names = ", ".join(f"{d.name} {d.shape.pods * d.shape.gpus if d.shape else 0}" for _, d in mine)
    return Warning_(
        f"tenant {t.name}'s services ask for {ask} GPUs on pool {s.pool} ({names}) but its nominal quota "
        f"there is {got}: the services of all tenants ask for {everyone} of the pool's {s.gpus} GPUs, so the "
        "shares alone size the quotas, and GPUs a service borrows beyond its quota are reclaimed from its "
        "replicas when their owner needs them", f"workloads[{first}].gpus")
