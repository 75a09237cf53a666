#!/usr/bin/env bash
# Fleet serving-platform runs on eks nodes, which the provisioner names and labels: this script names
# no node. It checks that each pool's labels select as many nodes as the plan has.
# Written by `orchgen plan workload.yaml` for fleet serving-platform; do not edit: re-plan instead.
# Idempotent: run it again after nodes join or are replaced.
#   KUBECTL=/path/to/kubectl bash node-labels.sh   # another kubectl or context wrapper
#   DRY_RUN=1 bash node-labels.sh                  # print what it would do
set -uo pipefail
KUBECTL="${KUBECTL:-kubectl}"
PLANE=orchgen.io/plane
failed=0
run() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then echo "$*"; return; fi
  "$@" || failed=1
}
label() { run "$KUBECTL" label node --overwrite "$@"; }
taint() { run "$KUBECTL" taint node --overwrite "$@"; }
nodes_of() { "$KUBECTL" get nodes -l "$1" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort; }
# expect_nodes SELECTOR COUNT: the provisioner labels COUNT nodes with SELECTOR (warns otherwise)
expect_nodes() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then echo "# expect $2 node(s) with $1"; return; fi
  local have
  have=$(nodes_of "$1" | grep -c .)
  if [[ "$have" != "$2" ]]; then
    echo "node-labels.sh: $have node(s) carry $1; the plan has $2 (check the node group's size and labels)" >&2
  fi
}
# assign_plane SELECTOR SLURM KUBERNETES: of the nodes SELECTOR selects, SLURM go to the Slurm plane
# (label and taint), the rest to Kubernetes; nodes already on Slurm stay there first.
assign_plane() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    echo "# $2 node(s) with $1 -> $PLANE=slurm (tainted), $3 -> $PLANE=kubernetes"; return
  fi
  local nodes=() n
  while read -r n; do [[ -n "$n" ]] && nodes+=("$n"); done < <(nodes_of "$1,$PLANE=slurm"; nodes_of "$1,$PLANE!=slurm")
  if (( ${#nodes[@]} != $2 + $3 )); then
    echo "node-labels.sh: ${#nodes[@]} node(s) carry $1; the plan has $(($2 + $3))" >&2
  fi
  for n in "${nodes[@]:0:$2}"; do
    label "$n" "$PLANE=slurm"
    taint "$n" "$PLANE=slurm:NoSchedule"
  done
  for n in "${nodes[@]:$2}"; do label "$n" "$PLANE=kubernetes"; done
}

# pool h100: 8 node(s)
expect_nodes node.kubernetes.io/instance-type=p5.48xlarge 8
# pool l40s: 8 node(s)
expect_nodes eks.amazonaws.com/nodegroup=l40s 8
# pool cpu: 4 node(s)
expect_nodes eks.amazonaws.com/nodegroup=cpu 4

if [[ "$failed" != 0 ]]; then
  echo "node-labels.sh: some nodes could not be labelled (see above); fix and re-run" >&2
  exit 1
fi
