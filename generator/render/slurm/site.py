"""A site's Slurm policy (options.slurm, issue 22), resolved once for slurm.conf, slurmdbd.conf and
accounts.sh: what an adopted site keeps (its QOS set, priority weights, SchedulerParameters,
prolog/epilog, cluster name and accounting database) and what a green-field plan gets by default
(RebootProgram with a GPU-sized ResumeTimeout, PropagateResourceLimitsExcept=MEMLOCK,
max_switch_wait, MaxJobCount/MaxArraySize sized for sweeps). Each value's reason is in the
template's comment beside it; this module only resolves them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import OrchgenError
from ...spec import slurmtime
from ...spec.models import SlurmOptions

# orchgen's priority/multifactor values when the site gives none (slurm.conf.j2 says why each)
PRIORITY_DEFAULTS = {"weight_fairshare": 10_000, "weight_qos": 2_000, "weight_age": 1_000,
                     "decay_half_life": "7-0", "max_age": "7-0"}
GPU_TRES_WEIGHT = "GRES/gpu=2000"


@dataclass(frozen=True)
class Qos:
    """One QOS as accounts.sh sets it: `sacctmgr modify qos where name=NAME set ATTRS`."""

    name: str
    attrs: tuple[str, ...]  # KEY=VALUE for sacctmgr, in sacctmgr(1)'s spelling
    gres_attrs: tuple[str, ...] = ()  # those naming a gres/ TRES: set once slurmdbd knows it (accounts.sh)

    @property
    def attrs_word(self) -> str:
        """attrs as one quoted shell word (accounts.sh's qos_set splits it; no value has a space or quote)."""
        return "'" + " ".join(self.attrs) + "'"

    @property
    def gres_word(self) -> str:
        return "'" + " ".join(self.gres_attrs) + "'"


@dataclass(frozen=True)
class Priority:
    """slurm.conf's priority/multifactor keys: (key, value, site's?) in the order written."""

    lines: tuple[tuple[str, str, bool], ...]


@dataclass(frozen=True)
class SitePolicy:
    """The site's scheduling policy for slurm.conf, from its own settings or orchgen's defaults."""

    scheduler_items: tuple[str, ...]  # the site's SchedulerParameters items, as given
    max_switch_wait: int
    max_job_count: int
    max_array_size: int
    reboot_program: str | None
    resume_timeout: int
    propagate: tuple[str, str]  # (slurm.conf key, value)
    prolog: str | None
    epilog: str | None
    qos: tuple[Qos, ...] | None  # None: orchgen's normal + scavenger
    priority: Priority
    database: str
    existing_accounting: bool
    storage_host: str | None = None  # options.slurm.accounting.storage_host: the site's database server

    @property
    def default_qos(self) -> str | None:
        """The QOS accounts get as DefaultQOS with the site's set: `normal` if it has one, else its first."""
        if not self.qos:
            return None
        names = [q.name for q in self.qos]
        return "normal" if "normal" in names else names[0]

    @property
    def qos_names(self) -> str:
        return ",".join(q.name for q in self.qos or ())


def _qos(q) -> Qos:
    attrs = []
    if q.priority is not None:
        attrs.append(f"Priority={q.priority}")
    if q.preempt:  # Preempt= (not +=): the site's list is the whole list
        attrs.append(f"Preempt={','.join(q.preempt)}")
    if q.preempt_mode:
        attrs.append(f"PreemptMode={q.preempt_mode}")
    if q.max_wall:
        attrs.append(f"MaxWall={slurmtime.minutes(q.max_wall)}")  # minutes: sacctmgr's plain form
    if q.grp_tres:
        attrs.append(f"GrpTRES={q.grp_tres}")
    if q.max_tres_per_user:
        attrs.append(f"MaxTRESPerUser={q.max_tres_per_user}")
    if q.max_jobs_per_user is not None:
        attrs.append(f"MaxJobsPerUser={q.max_jobs_per_user}")
    if q.max_submit_jobs_per_user is not None:
        attrs.append(f"MaxSubmitJobsPerUser={q.max_submit_jobs_per_user}")
    if q.usage_factor is not None:
        attrs.append(f"UsageFactor={q.usage_factor:g}")
    if q.flags:
        attrs.append(f"Flags={','.join(q.flags)}")
    return Qos(q.name, tuple(a for a in attrs if "gres/" not in a), tuple(a for a in attrs if "gres/" in a))


def _priority(o: SlurmOptions, has_gpus: bool) -> Priority:
    p = o.priority
    given = {k: v for k, v in (p.model_dump().items() if p else ()) if v is not None}
    values = dict(PRIORITY_DEFAULTS)
    if has_gpus:
        values["weight_tres"] = GPU_TRES_WEIGHT
    values["flags"] = ["MAX_TRES"]
    values.update(given)
    keys = (("flags", "PriorityFlags"), ("decay_half_life", "PriorityDecayHalfLife"), ("max_age", "PriorityMaxAge"),
            ("calc_period", "PriorityCalcPeriod"), ("favor_small", "PriorityFavorSmall"),
            ("weight_fairshare", "PriorityWeightFairshare"), ("weight_qos", "PriorityWeightQOS"),
            ("weight_tres", "PriorityWeightTRES"), ("weight_age", "PriorityWeightAge"),
            ("weight_jobsize", "PriorityWeightJobSize"), ("weight_partition", "PriorityWeightPartition"))
    lines = []
    for field, key in keys:
        if field not in values:
            continue
        value = values[field]
        if isinstance(value, bool):
            value = "YES" if value else "NO"
        elif isinstance(value, list):
            value = ",".join(value)
        lines.append((key, str(value), field in given))
    return Priority(tuple(lines))


def policy(o: SlurmOptions, has_gpus: bool, accounting: bool, source: str) -> SitePolicy:
    if not accounting:
        for name in ("qos", "priority", "accounting"):
            if getattr(o, name) is not None:
                raise OrchgenError(f"options.slurm.{name} needs Slurm accounting, which orchgen sets up for "
                                   "tenants: add the site's accounts as tenants", source, None, f"options.slurm.{name}")
    if o.propagate_resource_limits == "ALL" and o.propagate_resource_limits_except:
        propagate = ("PropagateResourceLimitsExcept", ",".join(o.propagate_resource_limits_except))
    elif isinstance(o.propagate_resource_limits, list):
        propagate = ("PropagateResourceLimits", ",".join(o.propagate_resource_limits) or "NONE")
    else:
        propagate = ("PropagateResourceLimits", o.propagate_resource_limits)
    acct = o.accounting
    return SitePolicy(
        scheduler_items=tuple(o.scheduler_parameters), max_switch_wait=o.max_switch_wait,
        max_job_count=o.max_job_count, max_array_size=o.max_array_size, reboot_program=o.reboot_program,
        resume_timeout=o.resume_timeout, propagate=propagate, prolog=o.prolog, epilog=o.epilog,
        qos=tuple(_qos(q) for q in o.qos) if o.qos is not None else None,
        priority=_priority(o, has_gpus),
        database=acct.database if acct else "slurm_acct_db",
        existing_accounting=bool(acct and acct.existing),
        storage_host=acct.storage_host if acct else None)


def scheduler_parameters(orchgen_items: list[str], p: SitePolicy) -> str:
    """orchgen's items, each replaced by the site's item of the same key; then the site's others;
    then max_switch_wait."""
    site = {item.split("=", 1)[0]: item for item in p.scheduler_items}
    out = [site.pop(item.split("=", 1)[0], item) for item in orchgen_items]
    out += list(site.values())
    out.append(f"max_switch_wait={p.max_switch_wait}")
    return ",".join(out)
