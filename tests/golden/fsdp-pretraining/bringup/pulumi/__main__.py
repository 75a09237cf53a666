"""`pulumi up` for an orchgen bundle's bare-metal Slurm plane: runs the bundle's own bring-up (../up.sh,
Ansible) over SSH on every Slurm host of the plan, in dependency order, then the production checks.

orchgen copies this file verbatim into every bundle with a bare-metal Slurm plane, as
bringup/pulumi/__main__.py (with requirements.txt beside it); `pulumi stack init` there, then:

    pulumi config set --path 'orchgen:hosts.ctl1' 10.0.0.1     # every host of ../inventory.yaml: its address
    pulumi config set orchgen:sshUser root                     # optional, default root
    pulumi config set --secret orchgen:sshPrivateKey < ~/.ssh/id_ed25519
    pulumi config set orchgen:checkArgs -- '--skip nccl'           # optional: checks/run.py's options
    pulumi up

Resources, each a pulumi-command `local.Command`: first `impact`, ../up.sh --dry-run, which reads what the
hosts run now and decides each change's action by the bundle's impact table (apply.py); then ../up.sh for one
host (`--limit`) with that decision, each after the previous step: the database (MariaDB on the accounting
host), then slurmdbd, then the controllers (one step for a controller that is the accounting host too), then
the nodes, one step per leaf switch (`slurmd-<leaf>`: `--limit` with that leaf's nodes, run side by side; the nodes
under no leaf in one step `slurmd`), then `checks`: a full run that waits until every node is idle and runs checks/run.py;
its output is the stack output `checks`. The munge key is a pulumi-random RandomBytes (a secret in the stack's
state, never in the bundle) handed to the playbook in the environment, like the SSH key. A change to any file
of the bundle re-runs the steps (`triggers`): the playbook is idempotent, so only what changed is applied,
by the action `impact` chose (a node added on 22.05 restarts slurmctld and every slurmd, say); the last step
does what waits for every host's files (`scontrol reconfigure`, resuming drained nodes, stopping the slurmd of a
node the re-plan removed: keep that node in orchgen:hosts for that `pulumi up`, then remove it).
Needs pulumi, pulumi-command, pulumi-random, PyYAML and ansible-core (requirements.txt); no orchgen.
"""
from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_random as random
import yaml

PROJECT_DIR = Path(globals().get("__file__") or Path.cwd() / "__main__.py").resolve().parent
BRINGUP_DIR = PROJECT_DIR.parent


def groups(bringup_dir: Path) -> dict[str, list[str]]:
    """The Slurm hosts of the plan by role, from the bundle's inventory.yaml."""
    data = yaml.safe_load((bringup_dir / "inventory.yaml").read_text(encoding="utf-8"))
    children = data["all"]["children"]
    return {role: list((children.get(role) or {}).get("hosts") or {}) for role in ("slurmctld", "slurmdbd", "slurmd")}


def node_batches(bringup_dir: Path, nodes: list[str]) -> dict[str, list[str]]:
    """The nodes in batches by step name: `slurmd-<leaf>` per leaf switch of the plan's topology (checks/checks.json
    `leaves`, in its order), the nodes under no leaf last as `slurmd`: one Ansible run per batch (`--limit a,b,...`,
    up to ansible.cfg's forks hosts at once), not one per node, and a leaf's nodes come up together."""
    checks = bringup_dir.parent / "checks" / "checks.json"
    leaves = json.loads(checks.read_text(encoding="utf-8")).get("leaves", []) if checks.is_file() else []
    wanted, out, seen = set(nodes), {}, set()
    for leaf in leaves:
        batch = [n for n in leaf["nodes"] if n in wanted and n not in seen]
        if batch:
            out[f"slurmd-{leaf['name']}"] = batch
            seen.update(batch)
    rest = [n for n in nodes if n not in seen]
    if rest:
        out["slurmd"] = rest
    return out


def bundle_digest(bringup_dir: Path) -> str:
    """One hash of every file the hosts get (slurm/, bringup/, checks/): a change re-runs the steps."""
    h = hashlib.sha256()
    root = bringup_dir.parent
    for sub in ("slurm", "bringup", "checks"):
        for path in sorted((root / sub).rglob("*")):
            if path.is_file() and "pulumi" not in path.relative_to(root).parts:
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


# The operator's inventory, written by each step into a private temporary dir (mode 0700) and removed after:
# addresses from the stack config, the key from the secret, nothing of it in the bundle.
SCRIPT = """set -eu
umask 077
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf '%s\\n' "$ORCHGEN_SSH_KEY" > "$d/key"
printf '%s\\n' "$ORCHGEN_HOSTS" > "$d/hosts.yaml"
export ORCHGEN_SSH_KEY_FILE="$d/key"
sh "$ORCHGEN_BRINGUP/up.sh" "$d/hosts.yaml" {args}
"""


def hosts_yaml(addresses: dict[str, str], user: str) -> str:
    return json.dumps({"all": {
        "vars": {"ansible_user": user, "ansible_ssh_private_key_file": "{{ lookup('env', 'ORCHGEN_SSH_KEY_FILE') }}"},
        "hosts": {name: {"ansible_host": addr} for name, addr in sorted(addresses.items())}}})


def main(bringup_dir: Path = BRINGUP_DIR) -> None:
    roles = groups(bringup_dir)
    cfg = pulumi.Config("orchgen")
    addresses: dict[str, str] = cfg.require_object("hosts")
    wanted = sorted({h for hosts in roles.values() for h in hosts})
    missing = [h for h in wanted if h not in (addresses or {})]
    if missing:
        raise pulumi.RunError(f"no address for {', '.join(missing)}: pulumi config set --path 'orchgen:hosts.{missing[0]}' ADDRESS")
    # A host the plan does not have: a node a re-plan removed (its slurmd is stopped and disabled by this run, when
    # `impact` finds it drained away: site.yml's play "Nodes the re-plan removed"), or a name given by mistake,
    # which no step touches. Kept in the inventory, and said.
    gone = sorted(set(addresses) - set(wanted))
    if gone:
        pulumi.log.warn(f"orchgen:hosts names hosts the plan does not have: {', '.join(gone)}: a node the re-plan "
                        f"removed has its slurmd stopped and disabled by this `pulumi up`; afterwards `pulumi config "
                        f"rm --path 'orchgen:hosts.{gone[0]}'`")
    user = cfg.get("sshUser") or "root"
    # checks/run.py's options for the last step (up.sh's `-e orchgen_check_args=...`), e.g. `--skip nccl` where
    # nccl-tests is not installed
    check_args = cfg.get("checkArgs") or ""
    key = cfg.require_secret("sshPrivateKey")
    # munge.key: 512 random bytes, hex (munged reads the file's bytes; mungekey(8) makes 1024 by default)
    munge = random.RandomBytes("munge-key", length=512)
    env = pulumi.Output.secret(pulumi.Output.all(key, munge.hex).apply(lambda kv: {
        "ORCHGEN_SSH_KEY": kv[0], "ORCHGEN_MUNGE_KEY_HEX": kv[1],
        "ORCHGEN_HOSTS": hosts_yaml(addresses, user), "ORCHGEN_BRINGUP": str(bringup_dir)}))
    triggers = [bundle_digest(bringup_dir), json.dumps(addresses, sort_keys=True), user]

    # The re-plan's actions, decided once before any host changes (apply.py --dry-run: what the hosts run now
    # against this bundle, through the bundle's impact table; "a first bring-up" on bare hosts). Every step
    # below applies that decision (ORCHGEN_APPLY_PLAN), as `up.sh` does in one run.
    impact = command.local.Command("impact", create=SCRIPT.format(args="--dry-run"),
                                   update=SCRIPT.format(args="--dry-run"), environment=env, triggers=triggers)
    # The per-host steps leave drained nodes drained (ORCHGEN_APPLY_PART=hosts); the last step brings them back
    # once every host's step is done (finish), then waits until every node is idle and runs the checks.
    def decided(part: str) -> pulumi.Output:
        return pulumi.Output.secret(pulumi.Output.all(env, impact.stdout).apply(
            lambda ed: {**ed[0], "ORCHGEN_APPLY_PLAN": ed[1], "ORCHGEN_APPLY_PART": part}))

    def extra(**values: Any) -> str:
        """Ansible extra vars as one JSON `-e`: typed (ansible-core 2.19 refuses the string 'false' that
        `-e key=false` gives in a `when:`) and whole (key=value splits a value at its spaces)."""
        return f"-e {shlex.quote(json.dumps(values))}"

    def step(name: str, args: str, after: list[pulumi.Resource], part: str = "hosts") -> command.local.Command:
        return command.local.Command(name, create=SCRIPT.format(args=args), update=SCRIPT.format(args=args),
                                     environment=decided(part), triggers=triggers,
                                     opts=pulumi.ResourceOptions(depends_on=[impact, *after]))

    def controller(c: str, after: list[pulumi.Resource]) -> command.local.Command:
        return step(f"slurmctld-{c}", f"--limit {c} --skip-tags checks {extra(orchgen_wait_idle=False)}", after)

    previous: list[pulumi.Resource] = []
    merged: dict[str, command.local.Command] = {}
    for db in roles["slurmdbd"]:  # the database before slurmdbd, both before the controllers
        if db in roles["slurmctld"]:
            # accounting on a controller: one step, the playbook's own order on that host (database, slurmdbd,
            # accounts.sh, slurmctld). A `--limit` run plays every play of the host's groups, so a database-only
            # step would reach the controller's accounts.sh before slurmdbd runs, and fail.
            merged[db] = controller(db, previous)
            previous = [merged[db]]
            continue
        database = step(f"database-{db}", f"--limit {db} --skip-tags checks {extra(orchgen_start_slurmdbd=False)}",
                        previous)
        previous = [step(f"slurmdbd-{db}", f"--limit {db} --skip-tags checks", [database])]
    controllers = [merged.get(c) or controller(c, previous) for c in roles["slurmctld"]]
    nodes = [step(name, f"--limit {','.join(batch)} --skip-tags checks", controllers)
             for name, batch in node_batches(bringup_dir, roles["slurmd"]).items()]
    checks = step("checks", extra(orchgen_check_args=check_args) if check_args else "",
                  controllers + nodes, "finish")  # every host: resumes drained nodes, waits for idle, runs the checks
    pulumi.export("hosts", wanted)
    pulumi.export("checks", checks.stdout)


if __name__ == "__main__":
    main()
