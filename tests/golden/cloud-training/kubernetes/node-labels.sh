#!/usr/bin/env bash
# Fleet cloud-training runs on generic nodes, which the provisioner names and labels: this script names
# no node. It checks that each pool's labels select as many nodes as the plan has and gives them their plane (and the Slurm nodes its taint).
# Written by `orchgen plan workload.yaml` for fleet cloud-training; do not edit: re-plan instead.
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

# pool h100: 32 node(s), 30 for Slurm and 2 for Kubernetes
expect_nodes orchgen.io/pool=h100 32
assign_plane orchgen.io/pool=h100 30 2
# pool l4: 8 node(s), 0 for Slurm and 8 for Kubernetes
expect_nodes orchgen.io/pool=l4 8
label -l orchgen.io/pool=l4 orchgen.io/plane=kubernetes

# Slurm's topology on a cloud: which VM sits under which switch is the provider's to say;
# orchgen sets no per-node topology annotation or tier label here (see README.md).

# A leaf moved from the Slurm plane keeps no Slurm taint on the Kubernetes plane's nodes.
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  echo "$KUBECTL taint node <Kubernetes-plane nodes that carry orchgen.io/plane> orchgen.io/plane:NoSchedule-"
else
  moved=$("$KUBECTL" get nodes -l orchgen.io/plane=kubernetes \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.taints[*].key}{"\n"}{end}' |
    awk '{for (i = 2; i <= NF; i++) if ($i == "orchgen.io/plane") print $1}') || failed=1
  if [[ -n "$moved" ]]; then
    # shellcheck disable=SC2086  # one node name per word
    run "$KUBECTL" taint node $moved orchgen.io/plane:NoSchedule-
  fi
fi


if [[ "$failed" != 0 ]]; then
  echo "node-labels.sh: some nodes could not be labelled (see above); fix and re-run" >&2
  exit 1
fi
