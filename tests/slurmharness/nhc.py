"""The NHC stand-in of the loopback (overlay.py, "Programs"): LBNL NHC is not packaged in Debian, so a
cluster booted with `health_check=True` runs this small sh script as its HealthCheckProgram.

It does with the shipped nhc.conf what NHC 1.4 does with the checks that test the bundle rather than
the machine: for each `TARGET || check_cmd_output ...` line whose TARGET matches the node (`*`, a
`{node,range[01-04]}` list, or a glob), it runs the command (paths under /etc/slurm/ point at the
copy in <work>/etc, and <work>/bin comes first on PATH, where a test puts a fake nvidia-smi); when a
line of its output matches a negated `-m '!/re/'`, or it exits with another status than `-r` (0), the
node is drained the way NHC's node-mark-offline helper does it,
`scontrol update State=DRAIN NodeName=<node> Reason="NHC: <check>:  <message>."`, and the checks stop
(NHC's default: the first failure). The other checks (check_fs_mount_rw, check_hw_ib ...) test the real
machine; the stand-in lists them as not run in <work>/log/nhc.log.
"""
from __future__ import annotations

import fnmatch
import shlex
from pathlib import Path

from .hostlist import expand, split_top

STANDIN = "nhc-standin.sh"


def matches(target: str, node: str) -> bool:
    """NHC's match of a TARGET against a host name (scripts/common.nhc, mcheck): {ranges} or a glob."""
    negate = target.startswith("!")
    target = target.lstrip("!")
    if target.startswith("{") and target.endswith("}"):
        hit = any(node in expand(group) for group in split_top(target[1:-1]))
    elif target.startswith("/") and target.endswith("/"):
        raise ValueError(f"regular-expression targets are not emulated: {target}")
    else:
        hit = fnmatch.fnmatchcase(node, target)
    return hit != negate


def _check_cmd_output(argv: list[str]) -> dict:
    """The options of one check_cmd_output line (lbnl_cmd.nhc's getopts ":C:M:O:e:m:r:t:")."""
    spec = {"name": "check_cmd_output", "ret": "0", "matches": [], "messages": [], "command": []}
    args = argv[1:]
    while args and args[0].startswith("-") and len(args[0]) == 2:
        opt, value, args = args[0][1], args[1], args[2:]
        if opt == "C":
            spec["name"] = value
        elif opt == "r":
            spec["ret"] = value
        elif opt == "m":
            spec["matches"].append(value)
        elif opt == "M":
            spec["messages"].append(value)
        elif opt == "e":
            spec["command"] = shlex.split(value)
    spec["command"] = spec["command"] or args
    return spec


def _sh_check(spec: dict, etc: str) -> str:
    """One emulated check as sh: run it, fail on a negated match or a bad exit status."""
    command = [a.replace("/etc/slurm/", f"{etc}/") for a in spec["command"]]
    cmd = shlex.join(command)
    lines = [f"out=$({cmd} 2>&1)", "rc=$?"]
    for i, pattern in enumerate(spec["matches"]):
        if not (pattern.startswith("!/") and pattern.endswith("/")):
            raise ValueError(f"only negated regular-expression matches are emulated: {pattern}")
        template = spec["messages"][i] if i < len(spec["messages"]) else "%m matched"
        pre, sep, post = template.replace("%m", pattern[1:]).partition("%L")
        message = shlex.quote(pre) + ('"$hit"' + shlex.quote(post) if sep else "")
        lines += [f"hit=$(printf '%s\\n' \"$out\" | grep -E -m 1 -e {shlex.quote(pattern[2:-1])} | tr -d '\"`$')",
                  f"[ -z \"$hit\" ] || drain {shlex.quote(spec['name'])} {message}"]
    lines.append(f"[ \"$rc\" = {spec['ret']} ] || drain {shlex.quote(spec['name'])} "
                 f"\"$rc (expected {spec['ret']}) returned by \\\"{cmd}\\\"\"")
    return "\n    ".join(lines)


def write_standin(etc_dir: Path, work: str, nodes: list[str]) -> str | None:
    """Write the stand-in beside the copied configs; returns its path as the daemons see it (None
    when the config dir ships no nhc.conf)."""
    conf = etc_dir / "nhc.conf"
    if not conf.is_file():
        return None
    etc = f"{work}/etc"
    per_node: dict[str, list[str]] = {n: [] for n in nodes}
    skipped: list[str] = []
    for raw in conf.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "||" not in line:
            continue
        target, check = (part.strip() for part in line.split("||", 1))
        argv = shlex.split(check)
        if argv[0] != "check_cmd_output":
            skipped.append(check)
            continue
        body = _sh_check(_check_cmd_output(argv), etc)
        for node in nodes:
            if matches(target, node):
                per_node[node].append(body)
    cases = "\n".join(f"{node})\n    {(chr(10) + '    ').join(bodies)}\n    ;;"
                      for node, bodies in per_node.items() if bodies)
    script = f"""#!/bin/sh
# NHC stand-in of the loopback harness (tests/slurmharness/nhc.py): the check_cmd_output lines of
# {etc}/nhc.conf for $SLURMD_NODENAME, draining like NHC's node-mark-offline helper.
PATH={work}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
SLURM_CONF={etc}/slurm.conf
export PATH SLURM_CONF
log={work}/log/nhc.log
echo "$(date +%T) $SLURMD_NODENAME: not run here: {'; '.join(skipped) or 'none'}" >>"$log"
drain() {{
    echo "$(date +%T) $SLURMD_NODENAME: NHC: $1:  $2." >>"$log"
    scontrol update State=DRAIN NodeName="$SLURMD_NODENAME" Reason="NHC: $1:  $2."
    exit 1
}}
case $SLURMD_NODENAME in
{cases}
esac
echo "$(date +%T) $SLURMD_NODENAME: healthy" >>"$log"
exit 0
"""
    path = etc_dir.parent / "nhc" / STANDIN
    path.parent.mkdir(exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
    return f"{work}/nhc/{STANDIN}"
