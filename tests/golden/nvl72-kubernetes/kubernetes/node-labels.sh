#!/usr/bin/env bash
# Label the nodes of fleet nvl72-kubernetes with the labels its Kubernetes objects select on:
# orchgen.io/pool, orchgen.io/leaf, orchgen.io/spine, orchgen.io/nvlink-domain.
# Written by `orchgen plan workload.yaml` for fleet nvl72-kubernetes; do not edit: re-plan instead.
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

# 18 node(s): leaf leaf001, nvlink-domain nvl001, pool gb200, spine spine
label gb200-001 gb200-002 gb200-003 gb200-004 gb200-005 gb200-006 gb200-007 gb200-008 gb200-009 gb200-010 gb200-011 gb200-012 gb200-013 gb200-014 gb200-015 gb200-016 gb200-017 gb200-018 orchgen.io/leaf=leaf001 orchgen.io/nvlink-domain=nvl001 orchgen.io/pool=gb200 orchgen.io/spine=spine
# 18 node(s): leaf leaf002, nvlink-domain nvl002, pool gb200, spine spine
label gb200-019 gb200-020 gb200-021 gb200-022 gb200-023 gb200-024 gb200-025 gb200-026 gb200-027 gb200-028 gb200-029 gb200-030 gb200-031 gb200-032 gb200-033 gb200-034 gb200-035 gb200-036 orchgen.io/leaf=leaf002 orchgen.io/nvlink-domain=nvl002 orchgen.io/pool=gb200 orchgen.io/spine=spine

if [[ "$failed" != 0 ]]; then
  echo "node-labels.sh: some nodes could not be labelled (see above); fix and re-run" >&2
  exit 1
fi
