#!/bin/sh
# gpu-health.sh COUNT TYPE, for cluster research-lab: does this node have COUNT GPUs whose product name
# contains TYPE (the pool's GRES type), as `nvidia-smi --query-gpu=name` lists them? Prints "ok: ..." and
# exits 0, or prints one "FAIL: ..." line and exits 1. Written by `orchgen plan workload.yaml` for fleet research-lab.
# NHC runs it from nhc.conf (installed as /etc/slurm/gpu-health.sh, mode 0755) and drains the node with the
# FAIL line as the reason. It also runs by hand: /etc/slurm/gpu-health.sh 8 h100
set -u

if [ $# -ne 2 ]; then
    echo "FAIL: usage: $0 COUNT TYPE" >&2
    exit 2
fi
want=$1
type=$2
# slurmd starts health checks with an almost empty environment: add the usual places of nvidia-smi.
PATH=${PATH:+$PATH:}/usr/bin:/bin:/usr/sbin:/sbin
export PATH

# A GPU in a bad state can hang nvidia-smi: bound it below NHC's own 30 s timeout.
if ! names=$(timeout 15 nvidia-smi --query-gpu=name --format=csv,noheader 2>&1); then
    echo "FAIL: nvidia-smi failed: $(printf '%s\n' "$names" | head -n 1)"
    exit 1
fi

# Compare without case, spaces or punctuation: GRES type h100 matches "NVIDIA H100 80GB HBM3".
squash() { tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9\n'; }
wanted=$(printf '%s' "$type" | squash)
# TYPE "gpu": an untyped GRES without a model name (gpu.typed: false, no gpu.type): the count alone is checked.
if [ "$type" = gpu ]; then
    wanted=
fi
have=$(printf '%s\n' "$names" | grep -c .)
others=$(printf '%s\n' "$names" | grep . | squash | grep -c -v -F "$wanted")
# "7x NVIDIA H100 80GB HBM3": what nvidia-smi lists, for the reason
listed=$(printf '%s\n' "$names" | grep . | sort | uniq -c | sed 's/^ *\([0-9]*\) /\1x /' | paste -s -d ';' -)

if [ "$have" -ne "$want" ] || [ "$others" -ne 0 ]; then
    echo "FAIL: expected ${want}x $type GPUs, nvidia-smi lists $have: ${listed:-none}"
    exit 1
fi
echo "ok: ${have}x $type GPUs: $listed"
