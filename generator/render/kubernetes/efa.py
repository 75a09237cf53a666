"""The aws-efa-k8s-device-plugin release's values: the EFA device plugin daemonset on EKS.

Its defaults fit but one: `tolerations: []` (chart v0.5.30 values.yaml). Its nodeAffinity already
lists the EFA instance types, which are the GPU node groups, and those are tainted (nvidia.com/gpu
on EKS's GPU node groups, providers.py): without their tolerations the plugin never runs there, no
node advertises vpc.amazonaws.com/efa and no EFA job starts. So it gets the GPU pools' taints, and
the chart's commented-out aws.amazon.com/efa toleration (EKS taints EFA nodes so in some blueprints).
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from .gpu_operator import gpu_pool_tolerations

EFA_TOLERATION = {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"}


def values(plan: Plan) -> dict[str, Any]:
    tols = gpu_pool_tolerations(plan, [])
    if not tols:
        return {}
    return {"tolerations": [*tols, dict(EFA_TOLERATION)]}
