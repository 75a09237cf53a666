#!/usr/bin/env python3
"""Bring the bundle's Slurm hosts up, or apply a re-plan to the running cluster by its impact: the least
disruptive action Slurm allows per change. up.sh runs this; so does the Pulumi program (the same path).

    python3 bringup/apply.py HOSTS.yaml [ansible-playbook options]   # what the cluster runs now, read from it
    python3 bringup/apply.py HOSTS.yaml --old OLD_BUNDLE [...]       # the cluster runs OLD_BUNDLE's slurm/
    python3 bringup/apply.py HOSTS.yaml --changes changes.json [...] # changes given explicitly
    python3 bringup/apply.py HOSTS.yaml --dry-run                    # say what it would do; run nothing
    ORCHGEN_APPLY_PLAN="$(... --dry-run)" python3 bringup/apply.py HOSTS.yaml --limit HOST   # that decision

By default the cluster's own files are read first (running.yml: every host is asked; each file of slurm/ as
installed on the first host that answered of its roles, and the Slurm release of every host; a host that does not
answer is named, and the decision is from those that did). None there (bare hosts): a first bring-up. Otherwise each difference from this
bundle's slurm/ is a change, and slurm_impact.py (a copy of orchgen's one impact table,
generator/impact/slurm.py, shipped in the bundle: this file needs only the Python standard library and
Ansible, whose PyYAML reads vars.yaml) gives its action for the plan's Slurm release. Actions, least to most disruptive: none; sacctmgr
(accounts.sh, which the playbook runs every time); reconfigure (`scontrol reconfigure`); restart_slurmctld;
restart_slurmd (the nodes listed, or every node); drain_restart (drain the nodes, wait for their jobs,
restart their slurmd, resume the ones still in the plan, stop and disable slurmd on those it removed); upgrade (Slurm's
packages change: site.yml upgrades them slurmdbd hosts first, then slurmctld's, then slurmd's, upgrade.yml);
impossible (refused: exit 2, nothing done). Each
change is logged with its action, then site.yml runs once with `orchgen_apply`, which also installs the
new files and brings up hosts the re-plan added.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import slurm_impact  # noqa: E402  (the bundle's copy of orchgen's impact table: standard library only)

ACTIONS = slurm_impact.ACTIONS


@functools.lru_cache(maxsize=None)
def ansible_python() -> str:
    """The Python that runs ansible-playbook, as `ansible-playbook --version` names it ("" when it names none)."""
    try:
        version = subprocess.run(["ansible-playbook", "--version"], capture_output=True, text=True).stdout
    except OSError:  # not installed: the playbook could not run either
        return ""
    line = next((ln for ln in version.splitlines() if "python version" in ln), "")
    return line.rsplit("(", 1)[-1].rstrip(")").strip() if line.endswith(")") else ""


@functools.lru_cache(maxsize=None)
def load_yaml(path: Path):
    """A YAML file, parsed by PyYAML, which ansible-core requires (its setup's install_requires): this python3's,
    else the one of the Python that runs ansible-playbook (`ansible-playbook --version` names it), for an Ansible
    installed apart (pipx, a distribution package) from the python3 that runs this file."""
    try:
        import yaml
    except ImportError:
        python = ansible_python()
        if not python:
            raise ValueError(f"{path}: no PyYAML here, and `ansible-playbook --version` names no Python")
        proc = subprocess.run([python, "-c", "import json, sys, yaml; "
                               "print(json.dumps(yaml.safe_load(open(sys.argv[1]))))", str(path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ValueError(f"{path}: {(proc.stderr.strip().splitlines() or ['unreadable'])[-1]}")
        return json.loads(proc.stdout)
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: {' '.join(str(e).split())}") from None


def bundle_vars(bundle: Path = HERE.parent) -> dict:
    """`bundle`'s bringup/vars.yaml, as Ansible reads it."""
    path = bundle / "bringup" / "vars.yaml"
    data = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("orchgen_files"), list):
        raise ValueError(f"{path}: not a bring-up's vars (no orchgen_files list)")
    return data


def release() -> str:
    return str(bundle_vars()["orchgen_slurm_release"])


def files_of(root: Path) -> dict[str, str]:
    """{path under `root`: text} of its regular files (plugstack.conf.d/pyxis.conf too); links are left out."""
    out = {}
    for path in sorted(root.rglob("*")) if root.is_dir() else ():
        if path.is_file() and not path.is_symlink():
            out[path.relative_to(root).as_posix()] = path.read_text(errors="replace")
    return out


def installed(bundle: Path = HERE.parent) -> set[str]:
    """The files of slurm/ that `bundle` installs on hosts (its bringup/vars.yaml's orchgen_files with a role in `on`;
    one with none, the Prometheus files, is the site's monitoring host's: no host runs it, nothing to apply)."""
    return {f["src"] for f in bundle_vars(bundle)["orchgen_files"] if isinstance(f, dict) and "src" in f and f.get("on")}


UNREACHABLE = "(unreachable)"


def printable(text: str, limit: int) -> str:
    """`text` as one line a terminal shows as it is: whitespace runs made one space, every other character that
    is not printable (an escape sequence's ESC, a bell) a `?`, cut at `limit` characters. Ansible's message about
    an unreachable host quotes what ssh and the host said."""
    return "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))[:limit]


def running_files(hosts: str) -> dict[str, str] | None:
    """What the cluster runs now (running.yml: every host asked; `(packages)/ROLE/HOST` per host and role,
    `(unreachable)/HOST` per host that did not answer), or None when it runs nothing yet (a first bring-up). Hosts
    that did not answer are reported; when none of the cluster's hosts answered, nothing is decided (RuntimeError)."""
    with tempfile.TemporaryDirectory(prefix="orchgen-running-") as tmp:
        env = {**os.environ, "ANSIBLE_CONFIG": str(HERE / "ansible.cfg")}
        proc = subprocess.run(["ansible-playbook", "-i", str(HERE / "inventory.yaml"), "-i", hosts,
                               str(HERE / "running.yml"), "-e", json.dumps({"orchgen_running_dir": tmp})],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stdout.write(proc.stdout[-6000:])
            sys.stderr.write(proc.stderr[-2000:])
            raise RuntimeError("could not read what the cluster runs now (running.yml above)")
        found = files_of(Path(tmp))
    silent = {k.split("/", 1)[1]: v for k, v in found.items() if k.startswith(UNREACHABLE + "/")}
    for host, why in sorted(silent.items()):
        print(f"apply: {printable(host, 100)} did not answer ({printable(why, 200)}): what it runs is not read; the "
              "decision is from the hosts that answered, and the playbook cannot reach it either (run again once it "
              "is up)", flush=True)
    if silent and set(silent) >= {h for hosts in inventory_groups().values() for h in hosts}:
        raise RuntimeError(f"no host of the cluster answered ({', '.join(sorted(silent))}): nothing is decided")
    return found if "slurm.conf" in found else None


def inventory_groups(bundle: Path = HERE.parent) -> dict[str, set[str]]:
    """{role: its hosts} of the bundle's bringup/inventory.yaml (the groups slurmctld, slurmdbd, slurmd)."""
    groups = (load_yaml(bundle / "bringup" / "inventory.yaml") or {}).get("all", {}).get("children", {})
    return {role: set((g or {}).get("hosts") or {}) for role, g in groups.items()}


def unread_files(silent: set[str]) -> list[str]:
    """The files of slurm/ no host that answered installs: every host of each of their roles is in `silent` (did not
    answer). What they hold now is unknown, not absent: the decision leaves them out (the next run reads them)."""
    groups = inventory_groups()
    return sorted(f["src"] for f in bundle_vars()["orchgen_files"]
                  if f.get("on") and {h for role in f["on"] for h in groups.get(role, ())} <= silent)


def packages_run(ran: dict[str, str], want: str, new: str) -> str:
    """The `(packages)` the decision starts from, of every host that answered (`ran`: {"(packages)/ROLE/HOST": text}):
    the release and packaging whose change to `new` is the most disruptive (refused past the compatibility window on
    any host, else an upgrade where any host runs another, else what they all run). Hosts that run different ones (a
    run cut short during an upgrade, a host replaced) are reported, a line naming each release's hosts."""
    by_text: dict[str, list[str]] = {}
    for key in sorted(ran):
        role, _, host = key[len(slurm_impact.PACKAGES) + 1:].partition("/")
        by_text.setdefault(ran[key], []).append(f"{host} ({role})" if host else role)
    if len(by_text) > 1:
        def said(text: str) -> str:
            f = dict(ln.split(" ", 1) for ln in text.splitlines() if " " in ln)
            return f"Slurm {f.get('release')} ({f.get('packaging')} packages)"
        print("apply: the hosts run different Slurm releases or packagings: " + "; ".join(
            f"{said(t)} on {', '.join(hosts)}" for t, hosts in sorted(by_text.items())) + f" (the plan: {said(want)})",
            flush=True)

    def weight(text: str) -> tuple[int, bool]:
        changes = slurm_impact.impact_of_files({slurm_impact.PACKAGES: text}, {slurm_impact.PACKAGES: new}, release())
        return max((ACTIONS.index(c.action) for c in changes), default=-1), text != want

    return max(sorted(by_text), key=weight)


def load_changes(args: argparse.Namespace, hosts: str) -> list[dict] | None:
    """The re-plan's changes, or None for a first bring-up (nothing runs yet)."""
    if args.changes:
        data = json.loads(Path(args.changes).read_text())
        return [dict(c) for c in data]
    ours = installed()
    new = {k: v for k, v in files_of(HERE.parent / "slurm").items() if k in ours}
    # Slurm's packages (the impact table's pseudo file `(packages)`): the release and packaging the hosts run, against
    # vars.yaml's; another one is an upgrade, which site.yml makes role by role (upgrade.yml: SchedMD's order)
    new[slurm_impact.PACKAGES] = slurm_impact.packages_of_vars(bundle_vars())
    if args.old:
        theirs = installed(Path(args.old))
        old = {k: v for k, v in files_of(Path(args.old) / "slurm").items() if k in theirs}
        old[slurm_impact.PACKAGES] = slurm_impact.packages_of_vars(bundle_vars(Path(args.old)))
    else:
        old = running_files(hosts)
        if old is None:
            return None
        silent = {k.split("/", 1)[1] for k in old if k.startswith(UNREACHABLE + "/")}
        for key in [k for k in old if k.startswith(UNREACHABLE + "/")]:
            old.pop(key)
        for src in unread_files(silent) if silent else ():
            old.pop(src, None)
            new.pop(src, None)
            print(f"apply: {src}: not read (no host that installs it answered): left out of this decision", flush=True)
        ran = {k: old.pop(k) for k in sorted(old) if k.startswith(slurm_impact.PACKAGES + "/")}
        want = new[slurm_impact.PACKAGES].split("\nsource ", 1)[0] + "\n"
        if ran:  # every host that answered: the most disruptive change of any (packages_run)
            old[slurm_impact.PACKAGES] = packages_run(ran, want, new[slurm_impact.PACKAGES])
        else:
            new.pop(slurm_impact.PACKAGES)
    return [asdict(c) for c in slurm_impact.impact_of_files(old, new, release())]


def plan_actions(changes: list[dict], all_nodes: list[str]) -> tuple[dict, list[str]]:
    """The playbook's `orchgen_apply` for these changes, and one log line per change. `all_nodes`: the nodes
    of this bundle; a drained node that is not among them (the re-plan removed it) is not resumed."""
    apply = {"restart_slurmctld": False, "restart_slurmd": [], "drain": [], "reconfigure": False, "resume": [],
             "stop_slurmd": []}
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
    apply["restart_slurmd"] = sorted(set(apply["restart_slurmd"]) & set(all_nodes))
    apply["drain"] = sorted(set(apply["drain"]))
    apply["resume"] = [n for n in apply["drain"] if n in all_nodes]
    # a node the re-plan removed: its slurmd is stopped and disabled on the host (site.yml's play "Nodes the
    # re-plan removed"), where the operator's inventory still names it; it is never resumed
    apply["stop_slurmd"] = sorted(set(apply["drain"]) - set(all_nodes))
    for gone in apply["stop_slurmd"]:
        log.append(f"apply: {gone}: removed by the re-plan: drained (its jobs end first), then slurmctld restarts "
                   f"without it, then its slurmd is stopped and disabled (keep {gone} in your hosts.yaml, or "
                   f"orchgen:hosts, for this run; without its address: systemctl disable --now slurmd there)")
    return apply, log


def nodes_of_bundle() -> list[str]:
    """The nodes of this bundle's slurm.conf."""
    return slurm_impact.conf_nodes((HERE.parent / "slurm" / "slurm.conf").read_text())


def run_decided(decided: str, hosts: str, rest: list[str]) -> int:
    """site.yml with the actions a `--dry-run` of this file printed before (ORCHGEN_APPLY_PLAN: its output).
    The Pulumi program decides once, before its first step changes a host, and runs every per-host step with
    that decision: read afterwards, the controller's files would already be the new ones. ORCHGEN_APPLY_PART:
    `hosts` (a per-host step: installs the files, drains, restarts; drained nodes stay drained) or `finish`
    (after them all: `scontrol reconfigure` once every host has the new files, the resumes, and the slurmd of
    nodes the re-plan removed stopped). A reconfigure in the controller's step would run before the nodes' steps
    install their files: the slurmds would re-read the old ones (a node added unknown to them)."""
    lines = [ln for ln in decided.splitlines() if ln.startswith("apply: orchgen_apply=")]
    if not lines and "a first bring-up" not in decided:
        print("apply: ORCHGEN_APPLY_PLAN holds no decision of `apply.py --dry-run`", file=sys.stderr)
        return 2
    apply = json.loads(lines[-1].split("=", 1)[1]) if lines else None
    part = os.environ.get("ORCHGEN_APPLY_PART", "all")
    last = ("reconfigure", "resume", "stop_slurmd")  # what waits until every host's step is done
    if apply is not None and part == "hosts":  # a per-host step: everything but the last part
        apply = {**apply, "reconfigure": False, "resume": [], "stop_slurmd": []}
    elif apply is not None and part == "finish":  # the last step, after every host's: only the last part
        apply = {**{k: ([] if isinstance(v, list) else False) for k, v in apply.items()},
                 **{k: apply.get(k, [] if k != "reconfigure" else False) for k in last}}
    extra = ["-e", json.dumps({"orchgen_apply": apply})] if apply is not None else []
    env = {**os.environ, "ANSIBLE_CONFIG": str(HERE / "ansible.cfg")}
    cmd = ["ansible-playbook", "-i", str(HERE / "inventory.yaml"), "-i", hosts, str(HERE / "site.yml"), *extra, *rest]
    return subprocess.run(cmd, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="bring the Slurm hosts up, or apply a re-plan by its impact")
    ap.add_argument("hosts")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--changes", help="JSON list of the impact table's changes (instead of reading the cluster)")
    src.add_argument("--old", help="the bundle the cluster runs now (instead of reading the cluster)")
    ap.add_argument("--dry-run", action="store_true", help="log the actions, run nothing")
    args, rest = ap.parse_known_args(argv)
    decided = os.environ.get("ORCHGEN_APPLY_PLAN")
    if decided is not None and not args.dry_run:
        return run_decided(decided, args.hosts, rest)
    try:
        changes = load_changes(args, args.hosts)
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        print(f"apply: {e}", file=sys.stderr)
        return 2
    extra: list[str] = []
    if changes is None:
        print("apply: no slurm.conf on the cluster's hosts yet: a first bring-up", flush=True)
    else:
        refused = [c for c in changes if c["action"] == "impossible"]
        for c in refused:
            print(f"apply: refused: {c.get('file')}: {c.get('key')}: {c.get('reason')} ({c.get('cite')})",
                  file=sys.stderr)
        if refused:
            return 2
        try:
            apply, log = plan_actions(changes, nodes_of_bundle())
        except (ValueError, KeyError) as e:
            print(f"apply: {args.changes or args.old or 'the running cluster'}: {e}", file=sys.stderr)
            return 2
        if not changes:
            print("apply: the cluster runs this bundle's files already", flush=True)
        for line in log:
            print(line, flush=True)
        print("apply: orchgen_apply=" + json.dumps(apply, sort_keys=True), flush=True)
        extra = ["-e", json.dumps({"orchgen_apply": apply})]
    if args.dry_run:
        return 0
    env = {**os.environ, "ANSIBLE_CONFIG": str(HERE / "ansible.cfg")}
    cmd = ["ansible-playbook", "-i", str(HERE / "inventory.yaml"), "-i", args.hosts, str(HERE / "site.yml"),
           *extra, *rest]
    sys.stdout.flush()
    return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
