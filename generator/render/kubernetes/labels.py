"""kubernetes/node-labels.sh: labels (and in hybrids, taints) the nodes with the fabric's label names.

Bare metal: the labels are fabric.node_labels(node) (plus the pool's node_labels), the same names
the ResourceFlavors, Kueue/KAI Topologies, workload node selectors and Slurm NodeSet selectors use,
set on the real hostnames of the fleet model. Nodes with identical labels (a leaf, or an NVLink
domain within it) are labelled in one kubectl call, so 16,384 nodes take a few hundred calls and the
script stays a few hundred kilobytes. Idempotent: --overwrite, and re-running changes nothing.

Off bare metal the plan's node names are invented (the plan counts nodes; the provider names them):
the script names no node. It checks that the provisioner's labels select as many nodes as the plan
has (`expect_nodes`), gives a MIG pool's nodes nvidia.com/mig.config by label selector and, in a
hybrid, gives each pool's nodes their plane by label selector: `label -l` for a pool one plane
owns, `assign_plane` (so many nodes to Slurm, the rest to Kubernetes, nodes already on Slurm
first) for a pool both planes share.
"""
from __future__ import annotations

import shlex
from itertools import groupby

from ...spec import fabric
from ...decide.plan import Plan
from .common import SLURM_TAINT
from .gpu_operator import MIG_CONFIG_LABEL, mig_layouts
from ...labels_script import CLOUD_HEADER, FOOTER, HEADER, UNTAINT  # noqa: F401  (the script's fixed text)

BATCH = 256  # node names per kubectl call: short command lines, few API round trips


def _node_labels(plan: Plan, node: str) -> dict[str, str]:
    labels = plan.fabric.node_labels(node)
    if plan.platform.topograph:  # Topograph labels the switches and NVLink domains itself
        labels = {k: v for k, v in labels.items() if k not in fabric.TOPOGRAPH_OF}
    return {**plan.platform.script_labels.get(labels[fabric.LABEL_POOL], {}), **labels}


def _labelled_nodes(plan: Plan) -> list[tuple[str, dict[str, str]]]:
    """(node, labels) for every Kubernetes node this plan knows, in fabric order (bare metal). Nodes of
    a MIG pool also get the GPU Operator's nvidia.com/mig.config: the MIG manager cuts their GPUs as it says."""
    kube, slurm = plan.kube_plane, plan.slurm_plane
    migs = mig_layouts(plan)
    out: list[tuple[str, dict[str, str]]] = []

    def with_mig(labels: dict[str, str]) -> dict[str, str]:
        layout = migs.get(labels.get(fabric.LABEL_POOL, ""))
        return {**labels, MIG_CONFIG_LABEL: layout.config_name} if layout else labels

    if kube:
        for node in kube.nodes:
            labels = _node_labels(plan, node)
            if plan.hybrid:
                labels[fabric.LABEL_PLANE] = "kubernetes"
            out.append((node, with_mig(labels)))
    if plan.hybrid and slurm and slurm.host == "kubernetes":
        for node in slurm.nodes:
            out.append((node, with_mig({**_node_labels(plan, node), fabric.LABEL_PLANE: "slurm"})))
    return out


def _lines(verb: str, nodes: list[str], args: list[str]) -> list[str]:
    return [" ".join([verb, *nodes[i:i + BATCH], *map(shlex.quote, args)])
            for i in range(0, len(nodes), BATCH)]


def _slinky_annotations(plan: Plan) -> list[str]:
    """Slinky reads each Slurm node's leaf and NVLink block from a node annotation: set it here,
    after the labels it selects on, so one script prepares every node."""
    if not (plan.slurm_plane and plan.slurm_plane.operator == "slinky"):
        return []
    from . import slinky  # the Slinky renderer owns the annotation's format

    out = ["", "# Slinky: each Slurm node's place in topology.yaml (the slurm chart's configFiles)"]
    for selector, value in slinky.annotation_groups(plan):
        sel = ",".join(f"{k}={v}" for k, v in selector.items())
        out.append(f"annotate -l {shlex.quote(sel)} {shlex.quote(f'{slinky.TOPOLOGY_ANNOTATION}={value}')}")
    return out


def render_script(plan: Plan) -> str:
    if plan.platform.cloud:
        return _cloud_script(plan)
    pairs = _labelled_nodes(plan)
    taints = plan.hybrid is not None and any(lb.get(fabric.LABEL_PLANE) == "slurm" for _, lb in pairs)
    used = {k for _, lb in pairs for k in lb}
    names = [n for n in (fabric.LABEL_POOL, fabric.LABEL_LEAF, fabric.LABEL_SPINE, fabric.LABEL_NVLINK,
                         fabric.LABEL_PLANE, MIG_CONFIG_LABEL) if n in used]
    out = [HEADER.format(taint_word=" and taint" if taints else "", name=plan.name,
                         labels=", ".join(names))]
    untaint = taints and plan.slurm_plane is not None and plan.slurm_plane.host == "kubernetes"
    for labels, group in groupby(pairs, key=lambda p: tuple(sorted(p[1].items()))):
        nodes = [n for n, _ in group]
        out.append(f"# {len(nodes)} node(s): " + ", ".join(f"{k.split('/')[-1]} {v}" for k, v in labels))
        out += _lines("label", nodes, [f"{k}={v}" for k, v in labels])
        if dict(labels).get(fabric.LABEL_PLANE) == "slurm":
            t = SLURM_TAINT
            out += _lines("taint", nodes, [f"{t['key']}={t['value']}:{t['effect']}"])
    out += _slinky_annotations(plan)
    if untaint:
        out.append(UNTAINT.format(key=SLURM_TAINT["key"], effect=SLURM_TAINT["effect"]))
    out.append(FOOTER)
    return "\n".join(out)


def _selector_text(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _cloud_pools(plan: Plan) -> list[tuple[str, int, int]]:
    """(pool, nodes on the Slurm plane, nodes on the Kubernetes plane) for every pool Kubernetes runs."""
    kube, slurm = plan.kube_plane, plan.slurm_plane
    counts: dict[str, list[int]] = {}
    if slurm is not None and slurm.host == "kubernetes":
        for s in slurm.slices:
            counts.setdefault(s.pool, [0, 0])[0] += len(s.nodes)
    for s in kube.slices if kube else ():
        counts.setdefault(s.pool, [0, 0])[1] += len(s.nodes)
    order = [p for leaf in plan.fabric.leaves for p in leaf.pools]  # a leaf may hold several pools
    return [(p, *counts[p]) for p in sorted(counts, key=order.index)]


def _cloud_script(plan: Plan) -> str:
    hybrid = plan.hybrid is not None
    out = [CLOUD_HEADER.format(name=plan.name, provider=plan.platform.provider,
                               plane=fabric.LABEL_PLANE,
                               plane_words=" and gives them their plane (and the Slurm nodes its taint)" if hybrid else "")]
    taint = f"{SLURM_TAINT['key']}={SLURM_TAINT['value']}:{SLURM_TAINT['effect']}"
    migs = mig_layouts(plan)
    for pool, on_slurm, on_kube in _cloud_pools(plan):
        sel = shlex.quote(_selector_text(plan.platform.selectors[pool]))
        out.append(f"# pool {pool}: {on_slurm + on_kube} node(s)"
                   + (f", {on_slurm} for Slurm and {on_kube} for Kubernetes" if hybrid else ""))
        out.append(f"expect_nodes {sel} {on_slurm + on_kube}")
        if hybrid and on_slurm and on_kube:
            out.append(f"assign_plane {sel} {on_slurm} {on_kube}")
        elif hybrid and on_slurm:
            out.append(f"label -l {sel} {fabric.LABEL_PLANE}=slurm")
            out.append(f"taint -l {sel} {taint}")
        elif hybrid:
            out.append(f"label -l {sel} {fabric.LABEL_PLANE}=kubernetes")
        if pool in migs:  # the MIG manager cuts the pool's GPUs (on both planes) as this label says
            out.append(f"label -l {sel} {shlex.quote(f'{MIG_CONFIG_LABEL}={migs[pool].config_name}')}")
    if plan.slurm_plane is not None and plan.slurm_plane.host == "kubernetes":
        out.append("\n# Slurm's topology on a cloud: which VM sits under which switch is the provider's to say;")
        out.append("# orchgen sets no per-node topology annotation or tier label here (see README.md).")
        out.append(UNTAINT.format(key=SLURM_TAINT["key"], effect=SLURM_TAINT["effect"]))
    out.append(FOOTER)
    return "\n".join(out)
