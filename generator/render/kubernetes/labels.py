"""kubernetes/node-labels.sh: labels (and in hybrids, taints) the nodes with the fabric's label names.

The labels are fabric.node_labels(node), the same names the ResourceFlavors, Kueue/KAI Topologies,
workload node selectors and Slurm NodeSet selectors use. Nodes with identical labels (a leaf, or an
NVLink domain within it) are labelled in one kubectl call, so 16,384 nodes take a few hundred calls
and the script stays a few hundred kilobytes. Idempotent: --overwrite, and re-running changes nothing.
"""
from __future__ import annotations

import shlex
from itertools import groupby

from ...spec import fabric
from ...decide.plan import Plan
from .common import SLURM_TAINT
from .gpu_operator import MIG_CONFIG_LABEL, mig_layouts

BATCH = 256  # node names per kubectl call: short command lines, few API round trips

HEADER = """#!/usr/bin/env bash
# Label{taint_word} the nodes of fleet {name} with the labels its Kubernetes objects select on:
# {labels}.
# Written by `orchgen plan {source}`; do not edit: re-run orchgen instead.
# Idempotent (--overwrite): run it again after nodes join or are re-imaged.
#   KUBECTL=/path/to/kubectl bash node-labels.sh   # another kubectl or context wrapper
#   DRY_RUN=1 bash node-labels.sh                  # print the commands instead of running them
set -uo pipefail
KUBECTL="${{KUBECTL:-kubectl}}"
failed=0
run() {{
  if [[ "${{DRY_RUN:-0}}" == 1 ]]; then echo "$*"; return; fi
  "$@" || failed=1  # keep going: one missing node must not leave the rest unlabelled
}}
label() {{ run "$KUBECTL" label node --overwrite "$@"; }}
taint() {{ run "$KUBECTL" taint node --overwrite "$@"; }}
annotate() {{ run "$KUBECTL" annotate node --overwrite "$@"; }}
"""

# Slurm on Kubernetes: a leaf moved from the Slurm plane to the Kubernetes plane must lose the
# Slurm taint. Only nodes that carry it are untainted: kubectl stops at the first node of a list
# that lacks the taint, and asking node by node would take minutes on a large fleet.
UNTAINT = """
# A leaf moved from the Slurm plane keeps no Slurm taint on the Kubernetes plane's nodes.
if [[ "${{DRY_RUN:-0}}" == 1 ]]; then
  echo "$KUBECTL taint node <Kubernetes-plane nodes that carry {key}> {key}:{effect}-"
else
  moved=$("$KUBECTL" get nodes -l {key}=kubernetes \\
    -o jsonpath='{{range .items[*]}}{{.metadata.name}}{{" "}}{{.spec.taints[*].key}}{{"\\n"}}{{end}}' |
    awk '{{for (i = 2; i <= NF; i++) if ($i == "{key}") print $1}}') || failed=1
  if [[ -n "$moved" ]]; then
    # shellcheck disable=SC2086  # one node name per word
    run "$KUBECTL" taint node $moved {key}:{effect}-
  fi
fi
"""

FOOTER = """
if [[ "$failed" != 0 ]]; then
  echo "node-labels.sh: some nodes could not be labelled (see above); fix and re-run" >&2
  exit 1
fi
"""


def _labelled_nodes(plan: Plan) -> list[tuple[str, dict[str, str]]]:
    """(node, labels) for every Kubernetes node this plan knows, in fabric order. Nodes of a MIG pool
    also get the GPU Operator's nvidia.com/mig.config: the MIG manager cuts their GPUs as it says."""
    kube, slurm = plan.kube_plane, plan.slurm_plane
    migs = mig_layouts(plan)
    out: list[tuple[str, dict[str, str]]] = []

    def with_mig(labels: dict[str, str]) -> dict[str, str]:
        layout = migs.get(labels.get(fabric.LABEL_POOL, ""))
        return {**labels, MIG_CONFIG_LABEL: layout.config_name} if layout else labels

    if kube:
        for node in kube.nodes:
            labels = plan.fabric.node_labels(node)
            if plan.hybrid:
                labels[fabric.LABEL_PLANE] = "kubernetes"
            out.append((node, with_mig(labels)))
    if plan.hybrid and slurm and slurm.host == "kubernetes":
        for node in slurm.nodes:
            out.append((node, with_mig({**plan.fabric.node_labels(node), fabric.LABEL_PLANE: "slurm"})))
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
    pairs = _labelled_nodes(plan)
    taints = plan.hybrid is not None and any(lb.get(fabric.LABEL_PLANE) == "slurm" for _, lb in pairs)
    used = {k for _, lb in pairs for k in lb}
    names = [n for n in (fabric.LABEL_POOL, fabric.LABEL_LEAF, fabric.LABEL_SPINE, fabric.LABEL_NVLINK,
                         fabric.LABEL_PLANE, MIG_CONFIG_LABEL) if n in used]
    out = [HEADER.format(taint_word=" and taint" if taints else "", name=plan.name, source=plan.source,
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
