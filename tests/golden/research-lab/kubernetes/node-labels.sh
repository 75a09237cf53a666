#!/usr/bin/env bash
# Label the nodes of fleet research-lab with the labels its Kubernetes objects select on:
# orchgen.io/pool, orchgen.io/leaf, orchgen.io/spine, orchgen.io/plane.
# Written by `orchgen plan workload.yaml` for fleet research-lab; do not edit: re-plan instead.
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

# 16 node(s): leaf leaf005, plane kubernetes, pool l40s, spine spine02
label l40s-001 l40s-002 l40s-003 l40s-004 l40s-005 l40s-006 l40s-007 l40s-008 l40s-009 l40s-010 l40s-011 l40s-012 l40s-013 l40s-014 l40s-015 l40s-016 orchgen.io/leaf=leaf005 orchgen.io/plane=kubernetes orchgen.io/pool=l40s orchgen.io/spine=spine02

if [[ "$failed" != 0 ]]; then
  echo "node-labels.sh: some nodes could not be labelled (see above); fix and re-run" >&2
  exit 1
fi
