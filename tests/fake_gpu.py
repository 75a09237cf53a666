"""Fake nvidia-smi and dmesg for the GPU health check (templates/slurm/gpu-health.sh.j2), per node.

`nvidia_smi(...)` writes an sh script that answers `--query-gpu=F1,F2,...` and
`--query-remapped-rows=F1,...` (`--format=csv,noheader`) field by field, one line per GPU, as
nvidia-smi does: values joined by ", ", "[N/A]" where a GPU lacks the feature, and an unknown field
refused with exit 2 (`Field "x" is not a valid field to query.`), so a misspelt field in the script
fails its test. The field names are those of `nvidia-smi --help-query-gpu` and
`--help-query-remapped-rows`. SMI_COUNT and SMI_NAME in the environment change the defaults. Each node (`$SLURMD_NODENAME` under slurmd, or `$node_var`) may change
the GPU count, the product name, or any field of one GPU (`gpu`: its index, default 0).
`nvidia-smi -q` prints each GPU's block in the layout of nvidia-smi's documented `-q` output (a
header "GPU 00000000:18:00.0", sections at 4 spaces, fields at 8, "Name  : value"), trimmed to a few
sections around "Fabric" (State, Status, CliqueId, ClusterUUID, Health), the block NVLink Switch
systems (GB200 NVL72) fill in; the `fabric.*` keys of a node set them (FABRIC: a GPU registered with
its NVLink domain; NO_FABRIC: what a GPU without NVLink Switch shows, all N/A).
`nvidia-smi topo -m` prints a recorded matrix (`topo=`: recorded_topo(NAME), one of tests/data/topo/, each
with the public source it was recorded from in its header; swap_nics() swaps two NICs of it, a host whose rails
sit beside other GPUs than its platform says); without one, it fails as a driver without topology support would.
`dmesg(...)` writes a script printing the kernel-log lines given per node (none by default).
`imex_ctl(...)` writes an nvidia-imex-ctl answering `-q` with READY, or a node's own answer.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

TOPO_DIR = Path(__file__).parent / "data" / "topo"

H100 = "NVIDIA H100 80GB HBM3"
# a healthy Hopper GPU: ECC on and clean, row remapping (so no page retirement: [N/A])
HEALTHY = {
    "ecc.errors.uncorrected.volatile.total": "0",
    "ecc.errors.corrected.volatile.total": "0",
    "retired_pages.pending": "[N/A]",
    "remapped_rows.correctable": "0",
    "remapped_rows.uncorrectable": "0",
    "remapped_rows.pending": "0",
    "remapped_rows.failure": "0",
}


# The Fabric block of a GPU of a GB200 NVL72 tray whose NVLink registration completed (nvidia-smi -q;
# CliqueId and ClusterUUID are the rack's NVLink partition, the same on every GPU of its 18 trays).
FABRIC = {
    "fabric.state": "Completed",
    "fabric.status": "Success",
    "fabric.clique_id": "32766",
    "fabric.cluster_uuid": "5c3a9f86-8a1e-4c5e-9f3b-2d7a4e6b1c09",
}
# ... and of a GPU without an NVLink fabric (an HGX H100 board: NVSwitches inside the node only)
NO_FABRIC = {k: "N/A" for k in FABRIC}
DRIVER = "570.133.20"


def _var(field: str) -> str:
    return "f_" + field.replace(".", "_")


def recorded_topo(name: str) -> str:
    """A recorded `nvidia-smi topo -m` (tests/data/topo/NAME.txt) as nvidia-smi prints it: without the file's
    "# " header, which names its source."""
    text = (TOPO_DIR / f"{name}.txt").read_text()
    return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("# "))


def swap_nics(topo: str, a: str, b: str) -> str:
    """`topo` with devices a and b trading places in the NIC Legend: each now sits where the other did."""
    swapped = re.sub(rf"(?m)^(\s*NIC\d+: )({re.escape(a)}|{re.escape(b)})$",
                     lambda m: m.group(1) + (b if m.group(2) == a else a), topo)
    assert swapped.count(f": {a}\n") == 1 and swapped.count(f": {b}\n") == 1 and swapped != topo, (a, b)
    return swapped


def nvidia_smi(nodes: dict[str, dict] | None = None, *, count: int = 8, name: str = H100,
               node_var: str = "SLURMD_NODENAME", fail_var: str = "SMI_FAIL", fabric: dict | None = None,
               topo: str | None = None) -> str:
    """The fake's text. nodes: {node: {"count": 7, "name": ..., "gpu": 5, "<field>": "value"}}; a
    `fabric.*` field there applies to GPU `gpu` only, `all.fabric.*` to every GPU of the node.
    fabric: every GPU's Fabric block (default NO_FABRIC). topo: what `topo -m` prints (recorded_topo())."""
    lines = ["#!/bin/sh", "# fake nvidia-smi (tests/fake_gpu.py)",
             f'if [ -n "${{{fail_var}:-}}" ]; then',
             '    echo "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error" >&2',
             "    exit 15", "fi",
             'if [ "${1:-}" = topo ]; then',
             '    case "${2:-}" in -m|--matrix) ;; *) echo "fake nvidia-smi: only topo -m" >&2; exit 2 ;; esac']
    if topo is None:
        lines += ['    echo "Topology not supported on this system (fake nvidia-smi: none recorded)" >&2', "    exit 3"]
    else:
        assert "__TOPO__" not in topo
        lines += ["    cat <<'__TOPO__'", topo.rstrip("\n"), "__TOPO__", "    exit 0"]
    lines += ["fi",
             f"count=${{SMI_COUNT:-{count}}}", f"name=${{SMI_NAME:-{shlex.quote(name)}}}", "bad=0"]
    fields_all = {**HEALTHY, **(fabric or NO_FABRIC), "driver_version": DRIVER}
    lines += [f"{_var(f)}={shlex.quote(v)}; b_{_var(f)}={shlex.quote(v)}" for f, v in fields_all.items()]
    cases = []
    for node, o in (nodes or {}).items():
        sets = [f"count={int(o['count'])}"] if "count" in o else []
        sets += [f"name={shlex.quote(o['name'])}"] if "name" in o else []
        sets += [f"bad={int(o.get('gpu', 0))}"]
        for field, value in o.items():
            if field.startswith("all."):
                assert field[4:] in fields_all, field
                sets.append(f"{_var(field[4:])}={shlex.quote(value)}; b_{_var(field[4:])}={shlex.quote(value)}")
            elif field not in ("count", "name", "gpu"):
                assert field in fields_all, field
                sets.append(f"b_{_var(field)}={shlex.quote(value)}")
        cases.append(f"    {node}) {'; '.join(sets)} ;;")
    if cases:
        lines += [f'case "${{{node_var}:-}}" in', *cases, "esac"]
    fields = "\n".join(f'            {f}) if [ $i = "$bad" ]; then v=$b_{_var(f)}; else v=${_var(f)}; fi ;;'
                       for f in fields_all if not f.startswith("fabric."))  # Fabric: `-q` only
    at = 'if [ $i = "$bad" ]; then eval "v=\\$b_f_fabric_$1"; else eval "v=\\$f_fabric_$1"; fi; echo "$v"'

    lines.append(f"""query=
for arg in "$@"; do
    case $arg in
        --query-gpu=*|--query-remapped-rows=*) query=${{arg#*=}} ;;
        -L) query=list ;;
        -q|--query) query=full ;;
    esac
done
fab() {{ {at}; }}
[ -n "$query" ] || {{ echo "fake nvidia-smi: $count x $name"; exit 0; }}
i=0
while [ $i -lt "$count" ]; do
    if [ "$query" = list ]; then echo "GPU $i: $name (UUID: GPU-fake-$i)"; i=$((i + 1)); continue; fi
    if [ "$query" = full ]; then
        if [ $i = 0 ]; then
            printf '\n==============NVSMI LOG==============\n\n'
            printf '%-42s: %s\n' "Timestamp" "Sat Nov 28 10:00:00 2026" "Driver Version" "$f_driver_version" \
                "CUDA Version" "12.8" "" "" "Attached GPUs" "$count" | sed 's/^ *: $//'
        fi
        printf 'GPU 00000000:%02X:00.0\n' $((i + 24))
        printf '    %-38s: %s\n' "Product Name" "$name" "Product Brand" "NVIDIA" "Persistence Mode" "Enabled"
        printf '    %s\n' "Inforom Version"
        printf '        %-34s: %s\n' "Image Version" "G548.0201.00.03" "OEM Object" "2.1"
        printf '    %s\n' "GPU Operation Mode"
        printf '        %-34s: %s\n' "Current" "N/A" "Pending" "N/A"
        printf '    %s\n' "Fabric"
        printf '        %-34s: %s\n' "State" "$(fab state)" "Status" "$(fab status)" \
            "CliqueId" "$(fab clique_id)" "ClusterUUID" "$(fab cluster_uuid)"
        printf '        %s\n' "Health"
        printf '            %-30s: %s\n' "Bandwidth" "Full" "Route Recovery in progress" "False" \
            "Route Unhealthy" "False" "Access Timeout Recovery" "False"
        printf '    %s\n' "Clocks Event Reasons"
        printf '        %-34s: %s\n' "Idle" "Active" "HW Slowdown" "Not Active"
        printf '    %-38s: %s\n' "Processes" "None"
        echo
        i=$((i + 1)); continue
    fi
    out=
    for f in $(echo "$query" | tr , ' '); do
        case $f in
            name|gpu_name) v=$name ;;
            index) v=$i ;;
            pci.bus_id|gpu_bus_id) v=$(printf '00000000:%02X:00.0' $((i + 24))) ;;
{fields}
            *) echo "Field \\"$f\\" is not a valid field to query." >&2; exit 2 ;;
        esac
        out="${{out:+$out, }}$v"
    done
    echo "$out"
    i=$((i + 1))
done""")
    return "\n".join(lines) + "\n"


def dmesg(nodes: dict[str, list[str]] | None = None, *, node_var: str = "SLURMD_NODENAME") -> str:
    """A dmesg printing a boot line and the given kernel-log lines of the node it runs on."""
    lines = ["#!/bin/sh", "# fake dmesg (tests/fake_gpu.py)",
             "echo '[    0.000000] Linux version 6.1.0-fake (fake dmesg)'"]
    if nodes:
        lines.append(f'case "${{{node_var}:-}}" in')
        for node, log in nodes.items():
            body = "; ".join(f"echo {shlex.quote(line)}" for line in log)
            lines.append(f"    {node}) {body} ;;")
        lines.append("esac")
    return "\n".join(lines) + "\n"


def xid(number: int, bus: str = "PCI:0000:1b:00", text: str = "pid=4242, name=python3") -> str:
    """One NVRM Xid line as the driver writes it to the kernel log."""
    return f"[ 8123.456789] NVRM: Xid ({bus}): {number}, {text}"


def imex_ctl(nodes: dict[str, str] | None = None, *, node_var: str = "SLURMD_NODENAME") -> str:
    """An nvidia-imex-ctl whose `-q` prints READY (the daemon joined its domain; IMEX guide, "The
    nvidia-imex-ctl Tool"), or per node another state (e.g. WAITING_FOR_PEERS) or an error line."""
    lines = ["#!/bin/sh", "# fake nvidia-imex-ctl (tests/fake_gpu.py)", "answer=READY"]
    if nodes:
        lines.append(f'case "${{{node_var}:-}}" in')
        lines += [f"    {node}) answer={shlex.quote(a)} ;;" for node, a in nodes.items()]
        lines.append("esac")
    lines += ['case " $* " in', '    *" -q "*) echo "$answer" ;;',
              '    *) echo "fake nvidia-imex-ctl: only -q" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines) + "\n"
