"""What a planner refusal must say: shared by the property tests over random fleets."""
from __future__ import annotations

import re
from typing import Any

from generator.errors import OrchgenError


def check_refusal(exc: OrchgenError, data: dict[str, Any]) -> str:
    """A refusal names what it refuses: the workload's pool, its nodes or the workload itself (a
    picked pool that could not be kept), or, from the split, a plane left with no node. Returns its
    kind."""
    if exc.field == "options.kubernetes_min_nodes":  # issue 36: no small Kubernetes island beside Slurm
        assert "fewer than options.kubernetes_min_nodes" in exc.message, exc
        return "a Kubernetes plane below its minimum"
    if exc.field == "workloads":  # the split's own refusal (generator/decide/partition.py)
        assert "gets no nodes" in exc.message, exc
        return "split: a plane gets no nodes"
    m = re.fullmatch(r"workloads\[(\d+)\](\.pool|\.nodes)?", exc.field or "")
    assert m, exc
    w = data["workloads"][int(m[1])]
    assert exc.message.startswith(f"{w['name']} "), exc
    if m[2] == ".pool":
        assert w.get("pool") and f"names pool {w['pool']}, but the split gave all" in exc.message, exc
        return "named pool given away"
    if m[2] == ".nodes":
        assert f"spans {w['nodes']} nodes" in exc.message, exc
        return "job longer than its plane's part of the pool"
    assert "pool" not in w and "names no pool" in exc.message, exc
    return "picked pool given away, no other GPU pool"
