"""The fixed text of kubernetes/node-labels.sh: its headers (bare metal, cloud), the block that untaints
nodes moved off the Slurm plane, and its footer (str.format templates).

Shared by the renderer (render/kubernetes/labels.py) and by `validate`'s check that the script is the
one orchgen writes (validate/consumer_checks.py). Kept outside generator/render, whose package imports
the planner and its models (~0.15 s): `validate` reads these strings without them (issue 41).
"""

HEADER = """#!/usr/bin/env bash
# Label{taint_word} the nodes of fleet {name} with the labels its Kubernetes objects select on:
# {labels}.
# Written by `orchgen plan workload.yaml` for fleet {name}; do not edit: re-plan instead.
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


CLOUD_HEADER = """#!/usr/bin/env bash
# Fleet {name} runs on {provider} nodes, which the provisioner names and labels: this script names
# no node. It checks that each pool's labels select as many nodes as the plan has{plane_words}.
# Written by `orchgen plan workload.yaml` for fleet {name}; do not edit: re-plan instead.
# Idempotent: run it again after nodes join or are replaced.
#   KUBECTL=/path/to/kubectl bash node-labels.sh   # another kubectl or context wrapper
#   DRY_RUN=1 bash node-labels.sh                  # print what it would do
set -uo pipefail
KUBECTL="${{KUBECTL:-kubectl}}"
PLANE={plane}
failed=0
run() {{
  if [[ "${{DRY_RUN:-0}}" == 1 ]]; then echo "$*"; return; fi
  "$@" || failed=1
}}
label() {{ run "$KUBECTL" label node --overwrite "$@"; }}
taint() {{ run "$KUBECTL" taint node --overwrite "$@"; }}
nodes_of() {{ "$KUBECTL" get nodes -l "$1" -o jsonpath='{{range .items[*]}}{{.metadata.name}}{{"\\n"}}{{end}}' | sort; }}
# expect_nodes SELECTOR COUNT: the provisioner labels COUNT nodes with SELECTOR (warns otherwise)
expect_nodes() {{
  if [[ "${{DRY_RUN:-0}}" == 1 ]]; then echo "# expect $2 node(s) with $1"; return; fi
  local have
  have=$(nodes_of "$1" | grep -c .)
  if [[ "$have" != "$2" ]]; then
    echo "node-labels.sh: $have node(s) carry $1; the plan has $2 (check the node group's size and labels)" >&2
  fi
}}
# assign_plane SELECTOR SLURM KUBERNETES: of the nodes SELECTOR selects, SLURM go to the Slurm plane
# (label and taint), the rest to Kubernetes; nodes already on Slurm stay there first.
assign_plane() {{
  if [[ "${{DRY_RUN:-0}}" == 1 ]]; then
    echo "# $2 node(s) with $1 -> $PLANE=slurm (tainted), $3 -> $PLANE=kubernetes"; return
  fi
  local nodes=() n
  while read -r n; do [[ -n "$n" ]] && nodes+=("$n"); done < <(nodes_of "$1,$PLANE=slurm"; nodes_of "$1,$PLANE!=slurm")
  if (( ${{#nodes[@]}} != $2 + $3 )); then
    echo "node-labels.sh: ${{#nodes[@]}} node(s) carry $1; the plan has $(($2 + $3))" >&2
  fi
  for n in "${{nodes[@]:0:$2}}"; do
    label "$n" "$PLANE=slurm"
    taint "$n" "$PLANE=slurm:NoSchedule"
  done
  for n in "${{nodes[@]:$2}}"; do label "$n" "$PLANE=kubernetes"; done
}}
"""
