#!/bin/sh
# gpu-health.sh COUNT TYPE, for cluster fsdp-pretraining: are this node's GPUs fit for work? Written by
# `orchgen plan workload.yaml` for fleet fsdp-pretraining. It fails the node when
#  1. nvidia-smi does not list COUNT GPUs whose product name contains TYPE (the pool's GRES type);
#  2. a GPU has uncorrectable ECC errors since the driver loaded (ecc.errors.uncorrected.volatile.total);
#  3. a GPU has a row remapping pending (it needs a GPU reset) or a failed one (remapped_rows.pending,
#     remapped_rows.failure), or, on GPUs before Ampere, pages pending retirement (retired_pages.pending);
#  4. the kernel log since boot holds an NVRM Xid that NVIDIA's catalog says needs a GPU reset or a
#     reboot (FATAL_XIDS below); the Xids of application faults (13, 31, 43 ...) do not fail it;
#  5. with a third argument, `fabric` or `imex` (a node of an NVLink domain that spans nodes, GB200 NVL72):
#     a GPU whose NVLink fabric registration is not done and successful, or that is in no NVLink cluster, or
#     whose GPUs disagree on their clique; with `imex`, also the node's IMEX daemon not READY.
# Prints "ok: ..." and exits 0, or prints one "FAIL: ..." line naming every problem and exits 1.
# NHC runs it from nhc.conf (installed as /etc/slurm/gpu-health.sh, mode 0755) and drains the node with the
# FAIL line as the reason; on Kubernetes gpu-quarantine.py runs it and cordons + taints the node.
# It also runs by hand: /etc/slurm/gpu-health.sh 8 h100 (a GB200 NVL72 tray: /etc/slurm/gpu-health.sh 4 gb200 imex)
set -u

if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != fabric ] && [ "$3" != imex ]; }; then
    echo "FAIL: usage: $0 COUNT TYPE [fabric|imex]" >&2
    exit 2
fi
want=$1
type=$2
fabric=${3:-}
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

# ---- memory errors. Field names: `nvidia-smi --help-query-gpu` and `--help-query-remapped-rows`;
# what they mean: NVIDIA GPU Memory Error Management,
# https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html
# (row remapping, Ampere and later) and Dynamic Page Retirement,
# https://docs.nvidia.com/deploy/dynamic-page-retirement/ (the GPUs before it). A field a GPU does not
# have reads "[N/A]" or "[Not Supported]" (no ECC, MIG with active instances ...): not a failure.
if ! ecc=$(timeout 15 nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending \
        --format=csv,noheader 2>&1); then
    echo "FAIL: nvidia-smi failed: $(printf '%s\n' "$ecc" | head -n 1)"
    exit 1
fi
# Row remapping has its own query; a driver or GPU without it fails or answers N/A: then the page
# retirement flag above is the one that counts.
remap=$(timeout 15 nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure \
        --format=csv,noheader 2>/dev/null) || remap=
problems=$({ printf '%s\n' "$ecc" | sed 's/^/E, /'; printf '%s\n' "$remap" | sed 's/^/R, /'; } | awk -F', *' '
    function set(v) { return v == "1" || v == "Yes" || v == "yes" }
    $1 == "E" && NF >= 5 {
        gpu[$3] = $2
        # uncorrectable ECC errors since the driver loaded: the GPU returned bad data to a job
        if ($4 ~ /^[0-9]+$/ && $4 > 0) print "GPU " $2 " (" $3 "): " $4 " uncorrectable ECC errors"
        # pre-Ampere: a page waits for retirement, which needs a reboot (Dynamic Page Retirement)
        if (set($5)) print "GPU " $2 " (" $3 "): retired pages pending, reboot the node"
    }
    $1 == "R" && NF >= 4 {
        id = ($2 in gpu) ? "GPU " gpu[$2] " (" $2 ")" : "GPU " $2
        # pending: a row is marked for remapping and it happens only at the next GPU reset
        if (set($3)) print id ": row remapping pending, reset the GPU"
        # failure: no spare row was left, the GPU goes back to the vendor (RMA thresholds)
        if (set($4)) print id ": row remapping failed, the GPU needs service"
    }')

# ---- Xid errors in the kernel log since boot (NVIDIA, "Xid Errors", Analyzing Xid Errors with the Xid
# Catalog: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html). The driver logs
# "NVRM: Xid (PCI:0000:1b:00): 79, pid=..., GPU has fallen off the bus.".
# Site-tunable: the Xids whose Immediate Action in that catalog is RESET_GPU or RESTART_BM (reboot),
# plus 48 (double bit ECC) and 74 (NVLink) whose workflows need a GPU reset or a reboot. Left out on
# purpose: 13/31/43/45 (application faults: restart the app), 63 (a row marked for remapping: the
# remapped_rows.pending flag above fails the node until the reset), 92 (high single-bit rate: IGNORE),
# 94 (contained error: restart the app). Override without editing this file with the environment
# variable GPU_HEALTH_FATAL_XIDS (on Slurm a `* || export GPU_HEALTH_FATAL_XIDS="..."` line in nhc.conf).
FATAL_XIDS=${GPU_HEALTH_FATAL_XIDS:-"46 48 62 64 74 79 95 109 110 119 120 136 140 143 155 156 158"}
# dmesg reads the kernel's ring buffer, which holds this boot's messages on every node, without
# journald or a persistent journal (journalctl -k needs both, and as a user without the journal group
# it answers nothing rather than failing). NHC runs as root; where the buffer may not be read (a
# container without CAP_SYSLOG, kernel.dmesg_restrict=1) the Xids are reported as not checked and the
# other checks still decide. A clean bill needs the reboot (or the GPU reset plus `dmesg --clear`) that
# these Xids call for anyway; a very busy kernel log can wrap the buffer and lose an old line.
xidnote=
if klog=$(timeout 15 dmesg 2>&1); then
    xids=$(printf '%s\n' "$klog" | sed -n 's/.*NVRM: Xid (\([^)]*\)): \([0-9][0-9]*\).*/\2 \1/p' | sort -u)
    for x in $FATAL_XIDS; do
        hit=$(printf '%s\n' "$xids" | awk -v x="$x" '$1 == x { printf "%s%s", sep, $2; sep = "," }')
        if [ -n "$hit" ]; then
            problems="${problems:+$problems
}Xid $x ($hit) in the kernel log since boot"
        fi
    done
else
    xidnote="; Xids not checked: $(printf '%s\n' "$klog" | head -n 1)"
fi

# ---- the NVLink fabric of a multi-node NVLink domain (GB200 NVL72). Each GPU registers with the NVLink
# fabric (NVLink Switch trays and their fabric manager) at driver load; `nvidia-smi -q` shows per GPU a
# "Fabric" block: State (Not Started, In Progress, Completed), Status (Success once completed, else the
# error), ClusterUUID and CliqueId (the NVLink partition the GPU belongs to; GPUs of one clique reach each
# other over NVLink). A tray whose registration failed still runs single-node jobs, but NCCL falls back to
# InfiniBand across the rack and CUDA's multi-node NVLink memory (cuMemImportFromShareableHandle) fails, so
# the tray must leave its block. Sources: NVIDIA, "NVIDIA Multi-Node NVLink Systems" and the IMEX guide
# (https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/), nvidia-smi(1) "Fabric"; the same fields
# NVIDIA's topograph reads to find a node's NVLink domain (ClusterUUID + CliqueId).
fabricnote=
if [ -n "$fabric" ]; then
    if ! q=$(timeout 20 nvidia-smi -q 2>&1); then
        problems="${problems:+$problems
}nvidia-smi -q failed: $(printf '%s\n' "$q" | head -n 1)"
    else
        # GPU header lines ("GPU 00000000:1B:00.0"), then its sections at 4 spaces and their fields at 8.
        fab=$(printf '%s\n' "$q" | awk '
            /^GPU [0-9A-Fa-f]+:/ { bus = $2; n++; sec = ""; next }
            /^    [^ ]/ { sec = $0; sub(/^ +/, "", sec); sub(/ *:.*$/, "", sec); next }
            sec == "Fabric" && /^        [^ ]/ {
                k = $0; sub(/^ +/, "", k); sub(/ *:.*$/, "", k)
                v = $0; if (!sub(/^[^:]*: */, "", v)) v = ""
                f[bus, k] = v; if (!(bus in seen)) { seen[bus] = 1; order[++m] = bus }
            }
            END {
                bad = 0
                for (i = 1; i <= m; i++) {
                    b = order[i]; st = f[b, "State"]; ss = f[b, "Status"]
                    u = f[b, "ClusterUUID"]; c = f[b, "CliqueId"]; p[i] = ""
                    if (st != "Completed" || ss != "Success")
                        p[i] = "NVLink fabric state " (st == "" ? "none" : st) ", status " (ss == "" ? "none" : ss)
                    else if (u == "" || u == "N/A" || u ~ /^[0-]+$/)
                        p[i] = "in no NVLink cluster (ClusterUUID " (u == "" ? "none" : u) ")"
                    else print "D " u " " c
                    if (p[i] != "") bad++
                    same = (i == 1 || p[i] == p[1])
                    if (!same) differ = 1
                }
                # one line when every GPU says the same (the tray, not a GPU, is off the fabric)
                if (m > 1 && bad == m && !differ) print "P all " m " GPUs: " p[1]
                else for (i = 1; i <= m; i++) if (p[i] != "") print "P GPU " (i - 1) " (" order[i] "): " p[i]
                if (n && !m) print "P nvidia-smi -q shows no NVLink fabric (driver before R550, or not an NVLink Switch system)"
            }')
        problems="${problems:+$problems
}$(printf '%s\n' "$fab" | sed -n 's/^P //p')"
        problems=$(printf '%s\n' "$problems" | grep . || true)
        # every GPU of the tray in one NVLink domain: one ClusterUUID and one CliqueId
        domains=$(printf '%s\n' "$fab" | sed -n 's/^D //p' | sort -u)
        if [ "$(printf '%s\n' "$domains" | grep -c .)" -gt 1 ]; then
            problems="${problems:+$problems
}GPUs in different NVLink cliques: $(printf '%s\n' "$domains" | sed 's/ / clique /' | paste -s -d ',' -)"
        elif [ -n "$domains" ]; then
            fabricnote="; NVLink fabric: cluster ${domains% *} clique ${domains##* }"
        fi
    fi
fi
# ---- IMEX (`imex`): the IMEX daemon of the node's NVLink domain must answer READY to its command service
# (IMEX guide, "IMEX Service Command Service": `nvidia-imex-ctl -q` prints READY once the daemon has joined
# its domain; it needs IMEX_CMD_ENABLED=1 in /etc/nvidia-imex/config.cfg, which the bring-up sets). Without
# it CUDA cannot import memory from another tray and Slurm's switch/nvidia_imex channels lead nowhere.
if [ "$fabric" = imex ]; then
    if ! command -v nvidia-imex-ctl >/dev/null 2>&1; then
        problems="${problems:+$problems
}nvidia-imex-ctl not found: nvidia-imex is not installed (the bring-up says NOT INSTALLED with the steps)"
    else
        imex=$(timeout 10 nvidia-imex-ctl -q 2>&1 | tr -d '\r' | grep . | tail -n 1)
        if [ "$imex" != READY ]; then
            problems="${problems:+$problems
}IMEX daemon not READY: ${imex:-no answer} (nvidia-imex-ctl -N shows the domain)"
        else
            fabricnote="$fabricnote, IMEX READY"
        fi
    fi
fi

if [ -n "$problems" ]; then
    echo "FAIL: $(printf '%s\n' "$problems" | paste -s -d ';' - | sed 's/;/; /g')"
    exit 1
fi
echo "ok: ${have}x $type GPUs: $listed$fabricnote$xidnote"
