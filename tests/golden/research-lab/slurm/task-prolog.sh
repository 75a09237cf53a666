#!/bin/sh
# task-prolog.sh of cluster research-lab: Slurm's TaskProlog. slurmstepd runs it as the job's user before each
# task, and every `export NAME=value` line it prints is set in that task's environment (slurm.conf(5) TaskProlog).
# It prints the NCCL settings of nccl.env (the file beside it), except those the job already sets: a job's own
# value wins. Written by `orchgen plan workload.yaml` for fleet research-lab. Install it as /etc/slurm/task-prolog.sh, mode 0755.
env_file=${0%/*}/nccl.env
[ -r "$env_file" ] || exit 0

while IFS= read -r line || [ -n "$line" ]; do
    case $line in
        '' | '#'*) continue ;;
    esac
    name=${line%%=*}
    case $name in
        '' | [0-9]* | *[!A-Za-z0-9_]*) continue ;;
    esac
    already=
    eval "already=\${$name+set}"
    [ -n "$already" ] || printf 'export %s\n' "$line"
done <"$env_file"
exit 0
