"""LeaderWorkerSet (chart lws v0.10.0): the values. The LeaderWorkerSets are serving.py's.

A LeaderWorkerSet group is one replica of a model over several nodes: it must start whole. Kueue
admits each group as one workload through its leaderworkerset.x-k8s.io/leaderworkerset integration
(on in kueue.py's frameworks); Volcano needs LWS to create a PodGroup per group
(`gangSchedulingManagement.schedulerProvider: volcano`, the chart's documented example), which the
gang scheduler's record asks for (`lws_gang_provider`)."""
from __future__ import annotations

from typing import Any

from ... import schedulers
from ...decide.plan import Plan


def values(plan: Plan) -> dict[str, Any]:
    s = schedulers.get(plan.gang_scheduler)
    provider = s.lws_gang_provider if s else None
    return {"gangSchedulingManagement": {"schedulerProvider": provider}} if provider else {}
