"""The decision: per workload (the decision guide's rules), then per fleet (-> Plan).

Per workload, the first rule that matches picks the primary plane; the gang invariant and the
hybrid rule are then applied on top. One deliberate difference from the guide's own labeller:
a tightly coupled multi-node Ray job hosted on k3s requires a gang scheduler too, because the
guide's invariant says anything tightly coupled and multi-node on a Kubernetes scheduler does.

Then one fleet-level rule (`fleet_rules`, issue 36): on a bare-metal fleet whose Slurm plane exists anyway,
batch the rules send to Kubernetes stays on Slurm (`slurm-site-batch`), so no second plane is carved out
for it. It reads the fleet, so it never changes what `decide_workload` says of one workload's facts.

A pin (`workloads[].plane`) overrides the rules and stays the first reason, naming the rule it
overrode: `slurm` takes the Slurm rule whatever the facts; `kubernetes` skips it, so the facts still
choose between Ray (on KubeRay), k3s and Kubernetes, and the gang invariant still holds. Whether the
pinned plane can run the workload at all is the fleet's question (generator/decide/placement.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .plan import Facts, WorkloadDecision
from ..spec.models import Fleet, Workload


@dataclass(frozen=True)
class Rule:
    """A rule of the decision guide: when it matches a workload's facts, and the plane it picks."""

    name: str
    primary: str
    matches: Callable[[Facts], bool]
    why: str


RULES: tuple[Rule, ...] = (
    Rule("coupled-multinode-bare-metal", "slurm",
         lambda f: f.tightly_coupled and f.nodes > 1 and f.bare_metal,
         "tightly coupled across {nodes} nodes on bare metal: Slurm grants the whole allocation at "
         "once and places it by topology"),
    Rule("python-native-pipeline", "ray", lambda f: f.python_native_pipeline,
         "Python-native pipeline: Ray, hosted by KubeRay on {ray_host}"),
    Rule("edge-or-dev", "k3s", lambda f: f.edge_or_dev,
         "edge/dev/small: k3s (same API, smaller footprint)"),
    Rule("kubernetes-default", "kubernetes", lambda f: True,
         "services, multi-tenancy or containerised batch: Kubernetes"),
)


def facts_of(w: Workload, fleet: Fleet) -> Facts:
    return Facts(
        nodes=w.nodes,
        tightly_coupled=w.tightly_coupled,
        bare_metal=fleet.fleet.bare_metal if w.bare_metal is None else w.bare_metal,
        long_lived_services=w.long_lived_services,
        multi_tenant=w.multi_tenant,
        python_native_pipeline=w.python_native_pipeline,
        edge_or_dev=fleet.fleet.edge_or_dev if w.edge_or_dev is None else w.edge_or_dev,
    )


def _fmt(f: Facts, *names: str) -> str:
    return ", ".join(f"{n}={str(getattr(f, n)).lower()}" for n in names)


def _pick(f: Facts, pin: str) -> tuple[Rule, Rule]:
    """(the rule that decides, the rule the facts match). A `kubernetes` pin skips the one Slurm
    rule (the first match of the others decides between Ray, k3s and Kubernetes); a `slurm` pin
    takes the Slurm rule whatever the facts."""
    natural = next(r for r in RULES if r.matches(f))
    if pin == "slurm":
        return RULES[0], natural
    if pin == "kubernetes":
        return next(r for r in RULES if r.primary != "slurm" and r.matches(f)), natural
    return natural, natural


def _pin_reason(pin: str, rule: Rule, natural: Rule, f: Facts) -> str:
    if rule is natural:
        return f"pinned by the input (plane: {pin}); rule {natural.name} agrees"
    why = natural.why.format(nodes=f.nodes, ray_host="k3s" if f.edge_or_dev else "kubernetes")
    return f"pinned by the input (plane: {pin}), overriding rule {natural.name}: {why}"


def decide_workload(name: str, f: Facts, pin: str = "auto") -> WorkloadDecision:
    """The guide's rules for one workload; every choice carries the rule and the facts it read.
    `pin` (workloads[].plane): auto, or the plane the input pins it to, which overrides the rules."""
    rule, natural = _pick(f, pin)
    ray_host = ("k3s" if f.edge_or_dev else "kubernetes") if rule.primary == "ray" else None
    reasons = [f"rule {rule.name}: {rule.why.format(nodes=f.nodes, ray_host=ray_host)}"]
    addons: list[str] = []
    coupled_multinode = f.tightly_coupled and f.nodes > 1
    if rule.primary == "slurm" and not rule.matches(f):
        reasons = []  # pinned to Slurm against the rules: the pin is the reason (inserted below)
    elif rule.primary == "slurm":
        reasons[0] += f" ({_fmt(f, 'tightly_coupled', 'nodes', 'bare_metal')})"
    if rule.primary == "slurm":
        addons.append("slurm-topology")
        if f.python_native_pipeline:
            addons.append("ray-on-slurm")
            reasons.append("python_native_pipeline=true on Slurm: Ray runs inside the Slurm "
                           "allocation (ray-cluster.sbatch), not as a second control plane")
    elif rule.primary == "ray":
        addons.append(f"kuberay-on-{ray_host}")
        reasons[0] += f" ({_fmt(f, 'python_native_pipeline', 'edge_or_dev')})"
    elif rule.primary == "k3s":
        reasons[0] += f" ({_fmt(f, 'edge_or_dev')})"
    else:
        reasons[0] += f" ({_fmt(f, 'long_lived_services', 'multi_tenant', 'bare_metal')})"
    on_kube = rule.primary != "slurm"  # Ray is always hosted by KubeRay on Kubernetes or k3s
    gang = on_kube and coupled_multinode
    if gang:
        addons.insert(0, "gang-scheduler")
        reasons.append(f"gang scheduler REQUIRED: tightly coupled across {f.nodes} nodes on a "
                       "Kubernetes scheduler, which would otherwise place pods one by one and can deadlock")
    elif on_kube and f.tightly_coupled:
        reasons.append("no gang scheduler needed: a single-node job has nothing to co-allocate")
    if on_kube:
        addons.append("gpu-operator")
    hybrid = rule.primary == "slurm" and f.long_lived_services
    if hybrid:
        addons.append("kubernetes-services")
        reasons.append("hybrid: Slurm-primary with long-lived services, which get a Kubernetes pool")
    if pin != "auto":
        reasons.insert(0, _pin_reason(pin, rule, natural, f))
    return WorkloadDecision(
        name=name,
        facts=f,
        primary=rule.primary,
        ray_host=ray_host,
        gang_scheduler_required=gang,
        hybrid=hybrid,
        addons=tuple(addons),
        reasons=tuple(reasons),
        pinned=pin != "auto",
        rule="pinned" if pin != "auto" else rule.name,
    )


# The fleet-level rule (issue 36): a second plane costs its control plane, its operators (GPU Operator,
# Kueue, Prometheus) and its operators' time. On a bare-metal fleet whose Slurm plane exists anyway, batch
# that the per-workload rules would send to Kubernetes stays on Slurm: Slurm schedules it as well, and its
# containers run through pyxis/enroot (options.slurm.containers, NVIDIA's SPANK plugin for srun
# --container-image). Services, notebooks, Ray pipelines, edge/dev, pins and tightly coupled multi-node
# gangs keep their rules' plane.
SLURM_SITE_BATCH = Rule(
    "slurm-site-batch", "slurm", lambda f: False,
    "batch on a bare-metal fleet that runs Slurm already ({slurm}): Slurm schedules it, its containers run "
    "through pyxis/enroot, and no second control plane is carved out for it")


def _slurm_site_batch(w: Workload, d: WorkloadDecision) -> bool:
    f = d.facts
    return (not d.pinned and d.rule == "kubernetes-default" and not f.long_lived_services and not w.interactive
            and not (f.tightly_coupled and f.nodes > 1))


def fleet_rules(fleet: Fleet, decisions: list[WorkloadDecision]) -> list[WorkloadDecision]:
    """The per-workload decisions with the fleet-level rule applied (SLURM_SITE_BATCH): the per-workload
    rules (the guide's, and the seed labeller's cases) are left as they are."""
    bare_slurm = [d.name for d in decisions if d.primary == "slurm"]
    if not (fleet.fleet.bare_metal and bare_slurm) or fleet.options.slurm_on_kubernetes in ("slinky", "soperator"):
        return decisions
    out = []
    for w, d in zip(fleet.workloads, decisions):
        f = d.facts
        why = SLURM_SITE_BATCH.why.format(slurm=", ".join(bare_slurm))
        if fleet.options.slurm.containers == "none":
            why = why.replace("its containers run through pyxis/enroot", "(options.slurm.containers none: no "
                              "pyxis, so it runs on the hosts' software)")
        if w.plane == "kubernetes" and _slurm_site_batch(w, decide_workload(w.name, f)):
            # pinned where the fleet rule would keep it on Slurm: the pin's reason names that rule
            first = f"pinned by the input (plane: kubernetes), overriding rule {SLURM_SITE_BATCH.name}: {why}"
            out.append(replace(d, reasons=(first, *d.reasons[1:])))
            continue
        if not _slurm_site_batch(w, d):
            out.append(d)
            continue
        out.append(WorkloadDecision(
            name=d.name, facts=f, primary="slurm", ray_host=None, gang_scheduler_required=False, hybrid=False,
            addons=("slurm-topology",) + (("pyxis",) if fleet.options.slurm.containers != "none" else ()),
            reasons=(f"rule {SLURM_SITE_BATCH.name}: {why} ({_fmt(f, 'long_lived_services', 'multi_tenant', 'nodes')})",
                     f"not rule kubernetes-default: {_KUBE_DEFAULT_WHY}, which a fleet without Slurm would get; "
                     "plane: kubernetes pins it there"),
            rule=SLURM_SITE_BATCH.name))
    return out


_KUBE_DEFAULT_WHY = RULES[-1].why


def recommend(fleet: Fleet) -> list[WorkloadDecision]:
    return fleet_rules(fleet, [decide_workload(w.name, facts_of(w, fleet), w.plane) for w in fleet.workloads])
