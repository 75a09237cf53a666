"""Fake nvidia-smi and dmesg for the GPU health check (templates/slurm/gpu-health.sh.j2), per node.

`nvidia_smi(...)` writes an sh script that answers `--query-gpu=F1,F2,...` and
`--query-remapped-rows=F1,...` (`--format=csv,noheader`) field by field, one line per GPU, as
nvidia-smi does: values joined by ", ", "[N/A]" where a GPU lacks the feature, and an unknown field
refused with exit 2 (`Field "x" is not a valid field to query.`), so a misspelt field in the script
fails its test. The field names are those of `nvidia-smi --help-query-gpu` and
`--help-query-remapped-rows`. SMI_COUNT and SMI_NAME in the environment change the defaults. Each node (`$SLURMD_NODENAME` under slurmd, or `$node_var`) may change
the GPU count, the product name, or any field of one GPU (`gpu`: its index, default 0).
`dmesg(...)` writes a script printing the kernel-log lines given per node (none by default).
"""
from __future__ import annotations

import shlex

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


def _var(field: str) -> str:
    return "f_" + field.replace(".", "_")


def nvidia_smi(nodes: dict[str, dict] | None = None, *, count: int = 8, name: str = H100,
               node_var: str = "SLURMD_NODENAME", fail_var: str = "SMI_FAIL") -> str:
    """The fake's text. nodes: {node: {"count": 7, "name": ..., "gpu": 5, "<field>": "value"}}."""
    lines = ["#!/bin/sh", "# fake nvidia-smi (tests/fake_gpu.py)",
             f'if [ -n "${{{fail_var}:-}}" ]; then',
             '    echo "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error" >&2',
             "    exit 15", "fi",
             f"count=${{SMI_COUNT:-{count}}}", f"name=${{SMI_NAME:-{shlex.quote(name)}}}", "bad=0"]
    lines += [f"{_var(f)}={shlex.quote(v)}; b_{_var(f)}={shlex.quote(v)}" for f, v in HEALTHY.items()]
    cases = []
    for node, o in (nodes or {}).items():
        sets = [f"count={int(o['count'])}"] if "count" in o else []
        sets += [f"name={shlex.quote(o['name'])}"] if "name" in o else []
        sets += [f"bad={int(o.get('gpu', 0))}"]
        for field, value in o.items():
            if field not in ("count", "name", "gpu"):
                assert field in HEALTHY, field
                sets.append(f"b_{_var(field)}={shlex.quote(value)}")
        cases.append(f"    {node}) {'; '.join(sets)} ;;")
    if cases:
        lines += [f'case "${{{node_var}:-}}" in', *cases, "esac"]
    fields = "\n".join(f'            {f}) if [ $i = "$bad" ]; then v=$b_{_var(f)}; else v=${_var(f)}; fi ;;'
                       for f in HEALTHY)
    lines.append(f"""query=
for arg in "$@"; do
    case $arg in
        --query-gpu=*|--query-remapped-rows=*) query=${{arg#*=}} ;;
        -L) query=list ;;
    esac
done
[ -n "$query" ] || {{ echo "fake nvidia-smi: $count x $name"; exit 0; }}
i=0
while [ $i -lt "$count" ]; do
    if [ "$query" = list ]; then echo "GPU $i: $name (UUID: GPU-fake-$i)"; i=$((i + 1)); continue; fi
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
