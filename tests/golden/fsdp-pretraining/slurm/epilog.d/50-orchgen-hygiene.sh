#!/bin/sh
# epilog.d/50-orchgen-hygiene.sh of cluster fsdp-pretraining: run by slurmd as root on each node of a job when it ends
# (Epilog=/etc/slurm/epilog.d/*, slurm.conf(5) Epilog; Slurm's prolog_epilog.html: no PATH is set, so it sets one).
# What the job's user leaves behind goes before the next job lands here:
# - DCGM's statistics of the job (where dcgmi is installed): stopped and kept in /var/log/slurm/dcgm-stats/JOB.txt;
# - when no other job of that user still runs on this node: their files in /dev/shm (NCCL's and PyTorch's shared
#   memory segments survive a crashed rank), their enroot containers and runtime state (enroot.conf's
#   ENROOT_DATA_PATH and ENROOT_RUNTIME_PATH; the image cache, ENROOT_CACHE_PATH, stays for the next job), and
#   their processes still holding a GPU (nvidia-smi --query-compute-apps).
# A GPU process that survives SIGKILL for 10 s fails the epilog, and Slurm drains the node ("Epilog error"):
# its GPU memory is not free for the next job. Other jobs of the user on the node are found with `scontrol listpids`
# (local: it asks this node's slurmstepds, not slurmctld; Slurm's pam_slurm_adopt guide uses it the same way).
# Written by `orchgen plan workload.yaml` for fleet fsdp-pretraining. Install it as /etc/slurm/epilog.d/50-orchgen-hygiene.sh, mode 0755.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
job=${SLURM_JOB_ID:-}
uid=${SLURM_JOB_UID:-}
[ -n "$job" ] && [ -n "$uid" ] || exit 0

if command -v dcgmi >/dev/null 2>&1; then
    mkdir -p /var/log/slurm/dcgm-stats
    timeout 10 dcgmi stats --jstop "$job" >/dev/null 2>&1 &&
        timeout 20 dcgmi stats --job "$job" --verbose >"/var/log/slurm/dcgm-stats/$job.txt" 2>&1
    timeout 10 dcgmi stats --jremove "$job" >/dev/null 2>&1 || true
fi

[ "$uid" -eq 0 ] && exit 0  # root's jobs: nothing of root's is removed
for pid in $(scontrol listpids 2>/dev/null | awk -v j="$job" 'NR > 1 && $2 != j && $2 ~ /^[0-9]+$/ { print $1 }'); do
    if [ "$(stat -c %u "/proc/$pid" 2>/dev/null)" = "$uid" ]; then
        exit 0  # another job of this user still runs here: its files and processes stay
    fi
done

find /dev/shm -xdev -mindepth 1 -depth -user "$uid" -delete 2>/dev/null
rm -rf "/tmp/enroot-data/user-$uid" "/run/enroot/user-$uid"

command -v nvidia-smi >/dev/null 2>&1 || exit 0
gpu_pids() {
    for p in $(timeout 20 nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' '); do
        case $p in '' | *[!0-9]*) continue ;; esac
        [ "$(stat -c %u "/proc/$p" 2>/dev/null)" = "$uid" ] && echo "$p"
    done
}
left=$(gpu_pids)
[ -n "$left" ] || exit 0
# shellcheck disable=SC2086 # one PID per word
kill -9 $left 2>/dev/null
i=0
while [ $i -lt 10 ]; do
    left=$(gpu_pids)
    [ -n "$left" ] || exit 0
    sleep 1
    i=$((i + 1))
done
echo "orchgen epilog: job $job: processes of uid $uid still hold a GPU after SIGKILL: $left" >&2
exit 1
