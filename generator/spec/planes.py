"""The planes of a bundle's plan.json: which plane each node is on (issue 36).

`orchgen plan -o DIR` reads DIR/plan.json (cli.py, through bundle.read_inside: a link out of the
folder, a FIFO or a huge file is not read), when DIR holds this fleet's bundle, so that a node keeps
its plane across re-plans (decide/partition._stable); impact/bundle.py compares two bundles' with it.
A plan.json that is another fleet's, or not orchgen's shape, gives nothing: the split is the fresh one.
"""
from __future__ import annotations

from . import hostlist


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
