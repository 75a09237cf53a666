"""The planes of the bundle a re-plan replaces: which plane each node was on (issue 36).

`orchgen plan -o DIR` reads DIR/plan.json, when DIR holds this fleet's bundle, so that a node keeps
its plane across re-plans (partition._stable). Only the planes' node lists are read, through
bundle.read_inside (a link out of the folder, a FIFO or a huge file is not read); a plan.json that
is missing, another fleet's, or not orchgen's shape gives nothing, and the split is the fresh one.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..spec import hostlist


def planes_of_bundle(root: str | Path, fleet: str) -> dict[str, str]:
    """node -> plane, from the plan.json of the bundle in `root` ({} when there is none of `fleet`)."""
    from ..bundle import read_inside

    try:
        doc = json.loads(read_inside(root, "plan.json"))
    except Exception:  # noqa: BLE001 - absent, unreadable or not JSON: no previous bundle to keep
        return {}
    return planes_of_document(doc, fleet)


def planes_of_document(doc: object, fleet: str | None = None) -> dict[str, str]:
    """node -> plane from a parsed plan.json ({} for another fleet's, or another shape)."""
    if not isinstance(doc, dict) or (fleet is not None and doc.get("name") != fleet):
        return {}
    out: dict[str, str] = {}
    planes = doc.get("planes")
    if not isinstance(planes, dict):
        return {}
    for plane, body in sorted(planes.items()):
        if not isinstance(body, dict) or body.get("operator"):
            continue  # Slurm on Kubernetes: its nodes are Kubernetes nodes running slurmd pods
        for pool in body.get("pools") or ():
            expr = pool.get("nodes") if isinstance(pool, dict) else None
            if not isinstance(expr, str):
                continue
            try:
                names = hostlist.expand(expr)
            except Exception:  # noqa: BLE001 - not a hostlist: not ours to keep
                continue
            for name in names:
                out.setdefault(name, str(plane))
    return out
