"""`orchgen validate` of a plane beyond one cluster: each clusters/<name>/ checked as a single-cluster bundle.

A multi-cluster bundle (plan.json `clusters`, contract.CLUSTERS_DIR) has no top-level kubernetes/ or
pulumi/: each cluster's sit under clusters/<name>/, laid out as a single cluster's are. So every
check that reads `kubernetes/...` runs once per cluster over a `ClusterView`: the cluster's folder
as the bundle root, with plan.json narrowed to that cluster (its nodes, its GPUs), and each finding's
path then put back under clusters/<name>/. `--against` compares cluster by cluster (`replan_lines`),
and a cluster that only one of the two bundles has is reported as created or deleted whole, with
what it held.

The cluster folders are the ones on disk (a hand-edited bundle may add or drop one); a cluster that
plan.json lists and the bundle lacks, or a folder that plan.json does not list, is a finding.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import replace
from functools import cached_property
from typing import Any

from ..contract import CLUSTERS_DIR, KUBE_DIR, cluster_dir
from .bundle_view import Bundle, Finding, NodeLabels, as_list, error, parse_node_labels

SCRIPT = f"{KUBE_DIR}/node-labels.sh"
NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # the cluster names decide/clusters.py writes


def planned(bundle: Bundle) -> list[dict[str, Any]]:
    """plan.json's `clusters` entries (dicts with a string name), [] for a single-cluster plan."""
    clusters = bundle.plan.get("clusters") if isinstance(bundle.plan, dict) else None
    return [c for c in as_list(clusters) if isinstance(c, dict) and isinstance(c.get("name"), str)]


def on_disk(bundle: Bundle) -> list[str]:
    """The cluster folders the bundle has: clusters/<name>/ holding at least one file."""
    return sorted({f.split("/")[1] for f in bundle.files if f.startswith(f"{CLUSTERS_DIR}/") and f.count("/") >= 2})


def is_multi(bundle: Bundle) -> bool:
    return bool(planned(bundle) or on_disk(bundle))


class ClusterView(Bundle):
    """clusters/<name>/ of `parent`, read as a bundle of its own (paths relative to the folder), with
    the parent's plan.json narrowed to the cluster. Findings name paths relative to the folder:
    `lift` puts them back under clusters/<name>/."""

    def __init__(self, parent: Bundle, name: str) -> None:
        self.parent, self.name = parent, name
        self.prefix = f"{cluster_dir(name)}/"
        super().__init__(parent.root / cluster_dir(name))

    @property
    def top(self):  # noqa: ANN201 - a link may lead to a sibling cluster's file, not out of the bundle
        return self.parent.top

    @cached_property
    def role(self) -> str | None:
        return next((c.get("role") for c in planned(self.parent) if c["name"] == self.name), None)

    @cached_property
    def plan(self) -> dict[str, Any]:
        if self.role == "manager":  # its queues admit against the whole plane's nodes, in the workers
            return {k: v for k, v in self.parent.plan.items() if k != "clusters"}
        return narrowed(self.parent.plan, self.name)

    @cached_property
    def node_labels(self) -> NodeLabels | None:
        """A worker's own script; the manager's nodes are every worker's (MultiKueue runs its jobs
        there, with the same flavors and node selectors), so it reads them all."""
        if self.role != "manager":
            return super().node_labels
        out, seen = NodeLabels(), False
        for name in on_disk(self.parent):
            text = self.parent.text(f"{cluster_dir(name)}/{SCRIPT}") if name != self.name else None
            if text is None:
                continue
            seen, got = True, parse_node_labels(text)
            out.labels.update(got.labels)
            for node, taints in got.taints.items():
                out.taints.setdefault(node, []).extend(taints)
            for node, line in got.line.items():
                out.line.setdefault(node, line)
            out.groups += got.groups
        return out if seen else None

    def lift(self, finding: Finding) -> Finding:
        return replace(finding, path=self.prefix + finding.path)


def narrowed(plan: dict[str, Any], name: str) -> dict[str, Any]:
    """plan.json as one cluster sees it: the Kubernetes planes hold only the cluster's nodes (none on
    the manager) and GPUs, so checks that compare the plan with node-labels.sh or with quotas read
    that cluster's share; `clusters` is left out (the view is one cluster)."""
    out = copy.deepcopy({k: v for k, v in plan.items() if k != "clusters"})
    entry = next((c for c in as_list(plan.get("clusters")) if isinstance(c, dict) and c.get("name") == name), None)
    if entry is None:  # a folder plan.json does not list (check_layout's finding): read against the whole plan
        return out
    pools = entry.get("pools") if isinstance(entry, dict) and isinstance(entry.get("pools"), dict) else {}
    planes = out.get("planes")
    for plane_name, plane in (planes.items() if isinstance(planes, dict) else ()):
        if plane_name == "slurm" or not isinstance(plane, dict):
            continue
        kept, gpus = [], 0
        for pool in as_list(plane.get("pools")):
            if not isinstance(pool, dict):
                continue
            mine = pools.get(pool.get("pool"))
            if not isinstance(mine, dict):
                continue
            count = mine.get("node_count") if isinstance(mine.get("node_count"), int) else 0
            per_node = (pool.get("gpu") or {}).get("count", 0) if isinstance(pool.get("gpu"), dict) else 0
            gpus += count * per_node if isinstance(per_node, int) else 0
            kept.append({**pool, "nodes": mine.get("nodes"), "node_count": count})
        plane.update(pools=kept, nodes=[p["nodes"] for p in kept if isinstance(p["nodes"], str)],
                     node_count=sum(p["node_count"] for p in kept), gpus=gpus)
    return out


def check_layout(bundle: Bundle, names: list[str]) -> Iterator[Finding]:
    """plan.json's clusters against the folders on disk, and no single-cluster kubernetes/ beside them."""
    listed = [c["name"] for c in planned(bundle)]
    for name in listed:
        if name not in names:
            yield error("plan.json", 0, f"cluster {name} has no folder {cluster_dir(name)}/ in the bundle: "
                        "its kubernetes/ and pulumi/ are missing (re-run orchgen plan)")
    for name in names:
        if listed and name not in listed:
            yield error(f"{cluster_dir(name)}/", 0, f"a cluster folder that plan.json does not list (its "
                        f"clusters: {', '.join(listed)}): left over or hand-made?")
        if not NAME.fullmatch(name):
            yield error(f"{cluster_dir(name)}/", 0, "not a cluster name orchgen writes (a DNS label)")
    if names and any(f.startswith(f"{KUBE_DIR}/") for f in bundle.files):
        yield error(f"{KUBE_DIR}/", 0, f"a multi-cluster bundle keeps each cluster's objects under "
                    f"{CLUSTERS_DIR}/<name>/kubernetes/; this top-level folder belongs to no cluster")


def views(bundle: Bundle) -> list[ClusterView]:
    return [ClusterView(bundle, name) for name in on_disk(bundle) if (bundle.root / cluster_dir(name)).is_dir()
            and not (bundle.root / cluster_dir(name)).is_symlink()]
