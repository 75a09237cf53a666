#!/usr/bin/env bash
# Label the nodes of fleet dev-ci with the labels its Kubernetes objects select on:
# orchgen.io/pool, orchgen.io/leaf.
# Written by `orchgen plan workload.yaml` for fleet dev-ci; do not edit: re-plan instead.
# Idempotent (--overwrite): run it again after nodes join or are re-imaged.
#   KUBECTL=/path/to/kubectl bash node-labels.sh   # another kubectl or context wrapper
#   DRY_RUN=1 bash node-labels.sh                  # print the commands instead of running them
set -uo pipefail
KUBECTL="${KUBECTL:-kubectl}"
failed=0
run() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then echo "$*"; return; fi
  "$@" || failed=1  # keep going: one missing node must not leave the rest unlabelled
}
label() { run "$KUBECTL" label node --overwrite "$@"; }
taint() { run "$KUBECTL" taint node --overwrite "$@"; }
annotate() { run "$KUBECTL" annotate node --overwrite "$@"; }

# 1 node(s): leaf leaf001, pool workstation
label devbox01 orchgen.io/leaf=leaf001 orchgen.io/pool=workstation

if [[ "$failed" != 0 ]]; then
  echo "node-labels.sh: some nodes could not be labelled (see above); fix and re-run" >&2
  exit 1
fi
