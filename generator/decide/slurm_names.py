"""Fleet rules that depend on the decision: names Slurm cannot take, checked only when a workload
runs on Slurm (a Kubernetes-only fleet may name a pool `all`). Each rule yields (message, path),
like generator/spec/checks.py; the planner raises the first, and the CLI points it at its line.
"""
from __future__ import annotations

from collections.abc import Iterator

from ..spec.checks import Problem, pool_hostnames
from ..spec.models import Fleet
from .plan import WorkloadDecision

SLURM_CLUSTER_NAME_MAX = 40  # slurm.conf(5) ClusterName: the limit of MySQL/MariaDB table names
SLURM_RESERVED = {
    "default": "Slurm's keyword for default values (NodeName=DEFAULT, PartitionName=DEFAULT)",
    "all": "Slurm's keyword for every node (Nodes=ALL) and orchgen's default partition",
}


def problems(fleet: Fleet, decisions: list[WorkloadDecision]) -> Iterator[Problem]:
    """Names a slurmctld or slurmdbd rejects or misreads, when a workload runs on Slurm."""
    if not any(d.primary == "slurm" for d in decisions):
        return
    name = fleet.metadata.name
    if len(name) > SLURM_CLUSTER_NAME_MAX:
        yield (f"{name!r} has {len(name)} characters; it is the Slurm ClusterName, which takes at most "
               f"{SLURM_CLUSTER_NAME_MAX} (slurmdbd's table names)"), ("metadata", "name")
    for i, pool in enumerate(fleet.fleet.pools):
        if pool.name in SLURM_RESERVED:
            yield (f"pool name {pool.name!r} would be a Slurm partition name, and it is "
                   f"{SLURM_RESERVED[pool.name]}; rename the pool"), ("fleet", "pools", i, "name")
        bad = [n for n in pool_hostnames(pool) if n in SLURM_RESERVED]
        if bad:
            yield (f"hostname {bad[0]!r} is {SLURM_RESERVED[bad[0]]}; Slurm cannot take it as a node name"
                   ), ("fleet", "pools", i, "hostnames")
    for i, tenant in enumerate(fleet.tenants):
        if tenant.name == "root":
            yield ("tenant name 'root' is Slurm's root account, the parent of every tenant's account; "
                   "pick another tenant name"), ("tenants", i, "name")
