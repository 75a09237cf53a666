"""KEDA (chart keda 2.20.2): the values. The ScaledObjects are serving.py's."""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan


def values(plan: Plan) -> dict[str, Any]:
    del plan
    # the chart's defaults: one operator and one metrics API server, which serve the HPAs that
    # KEDA makes from each ScaledObject (external.metrics.k8s.io)
    return {}
