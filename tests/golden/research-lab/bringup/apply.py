#!/usr/bin/env python3
"""Apply a re-plan to a running cluster by its impact: the least disruptive action Slurm allows per change.

    python3 bringup/apply.py HOSTS.yaml --changes changes.json [ansible-playbook options]
    python3 bringup/apply.py HOSTS.yaml --old OLD_BUNDLE [...]    # where orchgen is installed: the impact
                                                                    # table (generator.impact.slurm) computes them

`changes.json` is the impact table's list of changes (generator.impact.slurm.slurm_impact: SlurmChange
fields file, key, old, new, action, nodes, reason, cite). Actions, from least to most disruptive:
none; sacctmgr (accounts, shares, QOS: accounts.sh, which the playbook runs every time); reconfigure
(`scontrol reconfigure`); restart_slurmctld; restart_slurmd (the nodes listed, or every node); drain_restart
(drain the nodes, wait for their jobs, restart their slurmd, resume them); impossible (refused: exit 2,
nothing done). Each change is logged with the action used, then site.yml runs once with `orchgen_apply`
(restart_slurmctld, restart_slurmd, drain, reconfigure), which also installs the new files and brings up
hosts the re-plan added. Standard library only.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict, is_dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ACTIONS = ("none", "sacctmgr", "reconfigure", "restart_slurmctld", "restart_slurmd", "drain_restart", "impossible")


def load_changes(args: argparse.Namespace) -> list[dict]:
    if args.changes:
        data = json.loads(Path(args.changes).read_text())
        return [dict(c) for c in data]
    from generator.impact.slurm import slurm_impact  # orchgen's one impact table (needs orchgen installed)

    release = next(line.split(":", 1)[1].strip().strip('"') for line in (HERE / "vars.yaml").read_text().splitlines()
                   if line.startswith("orchgen_slurm_release:"))
    out = slurm_impact(Path(args.old) / "slurm", HERE.parent / "slurm", release)
    return [asdict(c) if is_dataclass(c) else dict(c) for c in out]


def plan_actions(changes: list[dict], all_nodes: list[str]) -> tuple[dict, list[str]]:
    """The playbook's `orchgen_apply` for these changes, and one log line per change."""
    apply = {"restart_slurmctld": False, "restart_slurmd": [], "drain": [], "reconfigure": False}
    log = []
    for c in changes:
        action = c["action"]
        if action not in ACTIONS:
            raise ValueError(f"{c.get('file')}: {c.get('key')}: unknown action {action!r}")
        nodes = list(c.get("nodes") or ())
        if action == "reconfigure":
            apply["reconfigure"] = True
        elif action == "restart_slurmctld":
            apply["restart_slurmctld"] = True
        elif action == "restart_slurmd":  # the table's actions include every lesser one: slurmctld first
            apply["restart_slurmctld"] = True
            apply["restart_slurmd"] += nodes or all_nodes
        elif action == "drain_restart":
            apply["restart_slurmctld"] = True
            apply["drain"] += nodes or all_nodes
            apply["restart_slurmd"] += nodes or all_nodes
        log.append(f"apply: {c.get('file')}: {c.get('key')}: {c.get('old')!r} -> {c.get('new')!r}: {action}"
                   + (f" on {','.join(nodes)}" if nodes else "") + (f" ({c['reason']})" if c.get("reason") else ""))
    apply["restart_slurmd"] = sorted(set(apply["restart_slurmd"]))
    apply["drain"] = sorted(set(apply["drain"]))
    return apply, log


def nodes_of_inventory() -> list[str]:
    """The slurmd hosts of the bundle's inventory.yaml (PyYAML comes with ansible-core)."""
    import yaml

    data = yaml.safe_load((HERE / "inventory.yaml").read_text())
    return list(((data["all"]["children"].get("slurmd") or {}).get("hosts") or {}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="apply a re-plan by its impact")
    ap.add_argument("hosts")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--changes", help="JSON list of the impact table's changes")
    src.add_argument("--old", help="the bundle the cluster runs now (orchgen computes the changes)")
    ap.add_argument("--dry-run", action="store_true", help="log the actions, run nothing")
    args, rest = ap.parse_known_args(argv)
    changes = load_changes(args)
    refused = [c for c in changes if c["action"] == "impossible"]
    for c in refused:
        print(f"apply: refused: {c.get('file')}: {c.get('key')}: {c.get('reason')} ({c.get('cite')})", file=sys.stderr)
    if refused:
        return 2
    try:
        apply, log = plan_actions(changes, nodes_of_inventory())
    except (ValueError, KeyError) as e:
        print(f"apply: {args.changes or args.old}: {e}", file=sys.stderr)
        return 2
    for line in log:
        print(line, flush=True)
    print("apply: orchgen_apply=" + json.dumps(apply, sort_keys=True), flush=True)
    if args.dry_run:
        return 0
    env = {**os.environ, "ANSIBLE_CONFIG": str(HERE / "ansible.cfg")}
    cmd = ["ansible-playbook", "-i", str(HERE / "inventory.yaml"), "-i", args.hosts, str(HERE / "site.yml"),
           "-e", json.dumps({"orchgen_apply": apply}), *rest]
    return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
