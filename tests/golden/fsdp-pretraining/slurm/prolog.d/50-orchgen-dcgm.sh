#!/bin/sh
# prolog.d/50-orchgen-dcgm.sh of cluster fsdp-pretraining: run by slurmd as root on each node of a job at its allocation
# (Prolog=/etc/slurm/prolog.d/*, slurm.conf(5) Prolog; Slurm's prolog_epilog.html: no PATH is set, so it sets one).
# Where DCGM is installed (dcgmi, with nv-hostengine running), DCGM starts recording the job's GPU statistics
# (`dcgmi stats --enable`, then `--jstart JOB`; NVIDIA's dcgmi-stats reference); epilog.d/50-orchgen-hygiene.sh
# stops and keeps them. It never fails a job: a Prolog that exits non-zero drains the node.
# Written by `orchgen plan workload.yaml` for fleet fsdp-pretraining. Install it as /etc/slurm/prolog.d/50-orchgen-dcgm.sh, mode 0755.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
job=${SLURM_JOB_ID:-}
[ -n "$job" ] || exit 0
command -v dcgmi >/dev/null 2>&1 || exit 0
timeout 10 dcgmi stats --enable >/dev/null 2>&1 || true
timeout 10 dcgmi stats --jstart "$job" >/dev/null 2>&1 || true
exit 0
