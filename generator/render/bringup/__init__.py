"""bringup/ and checks/: bring a bare-metal Slurm plane up from a bare OS, and prove it with the checks.

Only for a plan with a bare-metal Slurm plane. Ansible (ansible-core) runs it: HPC sites know it, it is
idempotent by construction (a second run reports `changed=0`), and its inventory is where each site's own
host addresses, SSH user and key live, outside the bundle. The files:

- bringup/site.yml, imex.yml, running.yml, daemon.yml, upgrade.yml, ansible.cfg, up.sh, apply.py, requirements.txt,
  fetch_nhc.sh, nccl_tests.yml:
  copied byte for byte from templates/bringup (the playbook, its one command, apply.py, which reads what the cluster runs
  and applies the difference by its impact); bringup/slurm_impact.py and hostlist.py: generator/impact/slurm.py,
  the one impact table, and generator/spec/hostlist.py, byte for byte (apply.py imports them; standard
  library only);
- bringup/inventory.yaml: the plan's Slurm hosts in the groups slurmctld, slurmdbd, slurmd, by name only
  (no address, user or key: the operator's inventory or the Pulumi stack's config gives those);
- bringup/vars.yaml: what the playbook installs where: the Slurm release, the packages of each role, every
  file of slurm/ with its destination, owner and mode, the directories slurm.conf names, nccl-tests' build;
- bringup/slurm-repo/ (options.slurm.repository): the site's Slurm repository's public key, deb822 source and pin;
- bringup/pulumi/: the Pulumi project (stacks/slurm_bringup.py as __main__.py) that runs up.sh per host
  over SSH in dependency order; hosts' addresses, SSH user and key are its stack config (the key a secret);
- checks/run.py (copied): the production checks, run as the bring-up's last step and on their own;
- checks/checks.json: what they expect of this plan (nodes, GPUs, leaves, fabric, bandwidth floor).

A plan with a Kubernetes plane gets checks/ too (with or without Slurm): checks.json's `kubernetes.gang`
is the gang test job the check submits (kubernetes/gang_check.py); the Kubernetes Pulumi program
(pulumi/) runs `checks/run.py --plane kubernetes` as its last step.
"""
from __future__ import annotations

from functools import cache
from importlib import resources

from ...decide.plan import Plan
from ...yamlio import dump_json, dump_yaml
from ..kubernetes import gang_check, nccl_check
from ...decide.nccl_floor import BUSBW_FLOOR_GBPS, BUSBW_RAIL_SHARE, MNNVL_OFF  # both planes' NCCL checks
from .manual import nccl_tests, not_installed
from ..slurm.model import STORAGE_PASS_FILE, TEXTFILE_DIR, model
from ..slurm.ops import ETC
from ...spec.hostlist import expand
from ...impact.slurm import UPGRADE_GUIDE, upgrade_window

STATIC = ("site.yml", "imex.yml", "running.yml", "daemon.yml", "upgrade.yml", "ansible.cfg", "up.sh", "apply.py",
          "requirements.txt", "fetch_nhc.sh", "nccl_tests.yml", "slurm_metrics.py")

# The transport NCCL must log for the inter-node ring (NCCL_DEBUG=INFO "via NET/<name>"): IB verbs on
# InfiniBand and RoCE (both are NET/IB in NCCL), sockets only on plain Ethernet.
TRANSPORT = {"infiniband": "NET/IB", "roce": "NET/IB", "ethernet": "NET/Socket"}


@cache
def impact_table() -> tuple[bytes, bytes]:
    """generator/impact/slurm.py and the hostlist reader it uses, byte for byte: apply.py's impact table, so
    that a re-plan is applied by the same table `plan --diff` prints, with no orchgen where the bring-up runs."""
    return (resources.files("generator.impact").joinpath("slurm.py").read_bytes(),
            resources.files("generator.spec").joinpath("hostlist.py").read_bytes())


@cache
def static(name: str) -> bytes:
    return resources.files("generator.templates").joinpath("bringup", name).read_bytes()


def _dest(name: str, site_database: bool) -> dict[str, object]:
    """Where a file of slurm/ goes, who owns it, its mode, and on which roles."""
    nodes_and_ctld = ["slurmctld", "slurmd"]
    if name == "slurmdbd.conf":  # slurmdbd refuses a file others can read (it may hold the password)
        return {"dest": f"{ETC}/slurmdbd.conf", "owner": "slurm", "mode": "0600", "on": ["slurmdbd"]}
    if name == "mariadb-slurm.cnf":  # read after Debian's 50-server.cnf; the site's own database server: none here
        return {"dest": "/etc/mysql/mariadb.conf.d/60-slurm.cnf", "owner": "root", "mode": "0644",
                "on": [] if site_database else ["slurmdbd"]}
    if name == "accounts.sh":
        return {"dest": f"{ETC}/accounts.sh", "owner": "root", "mode": "0755", "on": ["slurmctld"]}
    if name == "nhc.conf":
        return {"dest": "/etc/nhc/nhc.conf", "owner": "root", "mode": "0644", "on": ["slurmd"]}
    if name == "enroot.conf":
        return {"dest": "/etc/enroot/enroot.conf", "owner": "root", "mode": "0644", "on": ["slurmd"]}
    if name.startswith(("prometheus-", "grafana-")):  # the site's Prometheus loads them; no Slurm host reads them
        return {"dest": f"{ETC}/{name}", "owner": "root", "mode": "0644", "on": []}
    mode = "0755" if name.endswith(".sh") else "0644"
    return {"dest": f"{ETC}/{name}", "owner": "root", "mode": mode, "on": nodes_and_ctld}


def _conf(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line and not line.lower().startswith(("nodename", "partitionname")):
            k, v = line.split("=", 1)
            out.setdefault(k.strip().lower(), v.strip())
    return out


def vars_data(plan: Plan, slurm_files: dict[str, bytes]) -> dict[str, object]:
    m = model(plan)
    conf = _conf(slurm_files["slurm.conf"].decode())
    site_db = bool(m.site and m.site.storage_host)
    files = [{"src": name, **_dest(name, site_db)} for name in sorted(slurm_files)]
    logdirs = sorted({v.rsplit("/", 1)[0] for k, v in conf.items() if k.endswith("logfile")})
    dirs = [{"path": conf.get("statesavelocation", "/var/spool/slurmctld"), "owner": "slurm", "on": ["slurmctld"]},
            {"path": conf.get("slurmdspooldir", "/var/spool/slurmd"), "owner": "root", "on": ["slurmd"]}]
    dirs += [{"path": d, "owner": "slurm", "on": ["slurmctld", "slurmdbd", "slurmd"]} for d in logdirs]
    parents: dict[str, list[str]] = {}  # the directories the files go to (the packages make only /etc/slurm)
    for f in files:
        parent = str(f["dest"]).rsplit("/", 1)[0]
        parents[parent] = sorted(set(parents.get(parent, [])) | set(f["on"]))  # type: ignore[arg-type]
    dirs += [{"path": d, "owner": "root", "on": on} for d, on in sorted(parents.items())]
    ops = m.ops
    repo = plan.slurm_options.repository
    packaging = repo.packaging if repo is not None else "debian"
    names = SLURM_NAMES[packaging]
    node_pkgs = [names["slurmd"], names["client"]]
    if ops and ops.containment:
        node_pkgs.append(names["pam"])  # pam_slurm_adopt (PrologFlags=Contain): both packagings build it
    return {
        "orchgen_cluster": m.cluster,
        # the release the plan's files are written for; the play refuses hosts whose OS packages another
        "orchgen_slurm_release": m.version,
        # whose package names Slurm comes under (options.slurm.repository.packaging): debian (slurm-wlm's) or schedmd
        # (SchedMD's debian/ packaging, slurm-smd-*: it makes no slurm user, so the bring-up makes one)
        "orchgen_slurm_packaging": packaging,
        # the packages besides Slurm's, of every host (common) and of each role
        "orchgen_packages": {
            # Debian's node exporter on every host (issue 38: the Slurm plane's telemetry; prometheus-slurm.yaml)
            "common": ["munge"] + (["prometheus-node-exporter"] if m.telemetry else []),
            "slurmctld": [],
            # the site's database server (options.slurm.accounting.storage_host): none here
            "slurmdbd": [] if site_db or not m.accounting else ["mariadb-server", "mariadb-client"],
            # 22.05's mpi/pmix dlopens the unversioned libpmix.so
            "slurmd": ["libpmix-dev"] if ops and ops.mpi == "pmix" and ops.legacy_pmix else [],
        },
        # Slurm's packages of each role, under the packaging's names: installed together on a fresh host; a host
        # that runs another release or packaging is upgraded role by role, slurmdbd, then slurmctld, then slurmd
        # (SchedMD's upgrade guide, https://slurm.schedmd.com/upgrades.html; site.yml's upgrade.yml)
        "orchgen_slurm_packages": {
            "slurmctld": [names["slurmctld"], names["client"]],
            "slurmdbd": [names["slurmdbd"]] if m.accounting else [],
            "slurmd": node_pkgs,
        },
        # Slurm's compatibility window (generator/impact/slurm.py upgrade_window, the table apply.py refuses by;
        # https://slurm.schedmd.com/upgrades.html): the releases a host may run for upgrade.yml to upgrade it in place
        # to orchgen_slurm_release, and why each other one may not (the release to go through first, or a downgrade).
        # upgrade.yml asserts it on every host before any package or file changes, for a plain `ansible-playbook`
        "orchgen_slurm_upgrade_from": upgrade_window(m.version)[0],
        "orchgen_slurm_upgrade_refused": upgrade_window(m.version)[1],
        "orchgen_slurm_upgrade_guide": UPGRADE_GUIDE,
        # each role's daemon package, whose version is the release a host runs (both packagings' names: a host
        # with the other's is upgraded to this one's)
        "orchgen_slurm_daemon_package": {role: {k: SLURM_NAMES[k][role] for k in SLURM_NAMES}
                                         for role in ("slurmctld", "slurmdbd", "slurmd")},
        "orchgen_files": files,
        # the files of slurm/ the Slurm daemons read (slurm.conf and its includes, slurmdbd.conf, topology.yaml):
        # a plain run restarts a daemon when one of them changed on its host (site.yml's handlers)
        "orchgen_daemon_conf": f"^{ETC}/[^/]+\\.(conf|yaml)$",
        "orchgen_dirs": dirs,
        # slurm.conf's StateSaveLocation: with two controllers the bring-up proves it is one filesystem on both
        "orchgen_state_save": conf.get("statesavelocation", "/var/spool/slurmctld"),
        "orchgen_accounting": m.accounting,
        "orchgen_storage_pass_file": STORAGE_PASS_FILE,
        "orchgen_storage_user": conf.get("accountingstorageuser", "slurm"),
        "orchgen_storage_loc": m.site.database if m.site else "slurm_acct_db",
        # the site's database server both slurmdbd hosts use (empty: MariaDB on the slurmdbd host, set up here)
        "orchgen_storage_host": m.site.storage_host if site_db else "",
        "orchgen_nodes": [n for g in m.groups for n in g.nodes],
        # NHC from its 1.4.3 source tree on the machine that runs Ansible (it is not packaged by Debian);
        # empty: up.sh downloads the tag's archive from GitHub
        "orchgen_nhc": bool(ops and ops.health),
        "orchgen_nhc_source": "",
        "orchgen_containment": bool(ops and ops.containment),
        # pam_access lets this group past pam_slurm_adopt (options.slurm.admin_group; the SSH account the bring-up
        # runs as, when not root, is put in it so that the next run is not locked out of nodes without jobs)
        "orchgen_admin_group": ops.admin_group if ops else "slurm-admins",
        "orchgen_pyxis": bool(ops and ops.containers == "pyxis"),
        # what the plan turns on that the bring-up cannot install: why, and the steps (manual.py; the README too)
        "orchgen_not_installed": not_installed(plan),
        # IMEX (imex.yml): the nodes of each NVLink domain that spans nodes, one IMEX domain each (empty: none)
        "orchgen_imex": imex_vars(ops),
        # standalone runs keep the munge key here, outside the bundle (Pulumi passes its own secret)
        "orchgen_munge_key_file": f"~/.config/orchgen/{m.cluster}/munge.key",
        "orchgen_service_manager": "systemd",
        # the node exporter (issue 38): on every host when true; its ARGS in /etc/default/prometheus-node-exporter
        # (empty: Debian's defaults, :9100 and the textfile directory below; add e.g. --web.listen-address=ADDR:9100
        # to serve one interface only)
        "orchgen_node_exporter": m.telemetry,
        "orchgen_node_exporter_args": "",
        "orchgen_textfile_dir": TEXTFILE_DIR,
        # the bundle's Slurm exporter (bringup/slurm_metrics.py) on the controllers: releases before 25.11 serve no
        # metrics of their own, 25.11 none of GPUs (26.05's NEWS: "Add gpu statistics to metrics endpoints"), and none
        # counts the pending jobs that wait on resources or priority apart (the idle-GPU alert's); Debian packages no
        # Slurm exporter for bookworm or trixie
        "orchgen_slurm_exporter": m.exporter,
        "orchgen_idle_timeout_s": 300,
        # the site's Slurm repository (options.slurm.repository; empty: the OS's archive): bringup/slurm-repo/'s
        # files go to these places on every Slurm host before Slurm is installed (site.yml, tag slurm_repo)
        "orchgen_slurm_repo": slurm_repo_vars(plan),
        # nccl-tests for the check `nccl` (nccl_tests.yml, manual.nccl_tests): built on these GPU nodes where CUDA and
        # NCCL are installed, NOT INSTALLED with the steps where they are not
        "orchgen_nccl_tests": nccl_tests(gpu_nodes(m)),
    }


def gpu_nodes(m) -> list[str]:
    return [n for g in m.groups if g.gpus for n in g.nodes]


# Where the site's repository's files go on each host: the key where apt's documentation keeps keys that are
# not trusted for every source (/etc/apt/keyrings, sources.list(5) Signed-By), the deb822 source, the pin.
REPO_NAME = "orchgen-slurm"
REPO_DEST = {f"{REPO_NAME}.asc": "/etc/apt/keyrings", f"{REPO_NAME}.sources": "/etc/apt/sources.list.d",
             f"{REPO_NAME}.pref": "/etc/apt/preferences.d"}
# Debian's binary packages of slurm-wlm (packages.debian.org/source/bookworm/slurm-wlm): slurmd, slurmctld,
# slurmdbd, slurmrestd, slurm-client, slurm-wlm-*, libslurm*, libpam-slurm(-adopt), libpmi0/libpmi2-0, libnss-slurm,
# sview. Only these are pinned: a site repository that is a whole Debian mirror moves nothing else.
SLURM_PACKAGES = "slurm* libslurm* libpam-slurm* libpmi0* libpmi2-0* libnss-slurm sview"


# Slurm's package names under each packaging. Debian's slurm-wlm (packages.debian.org/source/bookworm/slurm-wlm);
# SchedMD's debian/control (github.com/SchedMD/slurm, debian/ from slurm-23-11-0-1): slurm-smd holds the libraries
# and every plugin (it Conflicts with slurm-wlm-basic-plugins), each daemon its own package with the same systemd
# unit name as Debian's (debian/rules: dh_installsystemd --name=slurmd ...), configuration in /etc/slurm
# (--sysconfdir=/etc/slurm) as Debian's; its maintainer scripts make no slurm user.
SLURM_NAMES = {
    "debian": {"slurmctld": "slurmctld", "slurmdbd": "slurmdbd", "slurmd": "slurmd", "client": "slurm-client",
               "pam": "libpam-slurm-adopt"},
    "schedmd": {"slurmctld": "slurm-smd-slurmctld", "slurmdbd": "slurm-smd-slurmdbd", "slurmd": "slurm-smd-slurmd",
                "client": "slurm-smd-client", "pam": "slurm-smd-libpam-slurm-adopt"},
}


def slurm_repo_vars(plan: Plan) -> dict[str, object]:
    repo = plan.slurm_options.repository
    if repo is None:
        return {}
    return {"url": repo.url, "suite": repo.suite,
            "files": [{"src": name, "dest": f"{d}/{name}"} for name, d in REPO_DEST.items()]}


def slurm_repo_files(plan: Plan) -> dict[str, bytes]:
    """bringup/slurm-repo/: the site repository's public key (a copy of options.slurm.repository.key), its
    deb822 source and its apt pin, byte for byte what each Slurm host gets."""
    repo = plan.slurm_options.repository
    if repo is None:
        return {}
    if repo._key is None:  # a Fleet not read by spec.load (the key file is read there)
        raise ValueError("options.slurm.repository.key was not read: load workload.yaml with spec.load")
    host = repo.url.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]  # apt's origin: the host, no port
    source = (f"# orchgen: the site's Slurm repository (options.slurm.repository), deb822 (sources.list(5));\n"
              f"# Signed-By: apt trusts this key for this source only, and this source only with it\n"
              f"Types: deb\nURIs: {repo.url}\nSuites: {repo.suite}\nComponents: {' '.join(repo.components)}\n"
              f"Signed-By: {REPO_DEST[REPO_NAME + '.asc']}/{REPO_NAME}.asc\n")
    # apt_preferences(5): "P >= 1000 causes a version to be installed even if this constitutes a downgrade",
    # so a host whose OS packages a newer Slurm still gets the site's release; the origin is the URL's host without
    # its port (as `apt-cache policy` shows it: `origin HOST`), so only this repository's Slurm packages are pinned
    pref = (f"# orchgen: Slurm's packages from the site's repository (options.slurm.repository), above the OS's\n"
            f"# archive (500): apt_preferences(5), a priority over 1000 installs its version even as a downgrade\n"
            f"Package: {SLURM_PACKAGES}\nPin: origin \"{host}\"\nPin-Priority: 1001\n")
    d = "bringup/slurm-repo"
    return {f"{d}/{REPO_NAME}.asc": repo._key, f"{d}/{REPO_NAME}.sources": source.encode(),
            f"{d}/{REPO_NAME}.pref": pref.encode()}


def imex_vars(ops) -> dict[str, object]:
    """imex.yml's map: each NVLink domain's nodes (its nodes_config.cfg) and each node's domain."""
    if not ops or not ops.imex:
        return {}
    domains = {name: expand(nodes) for name, nodes in ops.imex.domains}
    return {"domains": domains, "node_domain": {n: name for name, nodes in domains.items() for n in nodes}}


def inventory(plan: Plan) -> dict[str, object]:
    """The groups' hosts in the plan's order, written unsorted (`render` dumps it with sort_keys=False): site.yml takes
    a group's first host for the primary (groups['slurmctld'][0]: the first SlurmctldHost; groups['slurmdbd'][0]:
    DbdHost, before DbdBackupHost), and Ansible keeps a group's hosts in the inventory file's order."""
    m = model(plan)
    nodes = [n for g in m.groups for n in g.nodes]
    groups = {"slurmctld": {"hosts": {c: None for c in m.controllers}}}
    groups["slurmd"] = {"hosts": {n: None for n in nodes}}
    if m.accounting:  # the primary slurmdbd (DbdHost) first, then the backup (DbdBackupHost)
        groups["slurmdbd"] = {"hosts": {h: None for h in (m.accounting_host, m.dbd_backup_host) if h}}
    return {"all": {"children": groups}}


def checks(plan: Plan) -> dict[str, object]:
    m = model(plan)
    ops = m.ops
    fabric = ops.fabric if ops else "ethernet"
    leaves = [{"name": sw.name, "nodes": list(sw.nodes)} for sw in m.topology.tree if sw.nodes]
    return {
        "cluster": m.cluster,
        # one dict per node group, shared by its nodes: dump_json writes it once per group (131,072 GPUs: 12,288 nodes)
        "nodes": {n: shape for g in m.groups
                  for shape in ({"gpus": g.gpus, "gpu_type": g.gpu_type if g.gres_typed else None},)  # untyped: gpu:N
                  for n in g.nodes},
        "leaves": leaves,
        "fabric": fabric,
        "nccl_transport": TRANSPORT[fabric],
        **busbw_floor(m.groups, fabric),
        # nodes of multi-node NVLink domains: the run goes over the rails, not NVLink (nccl_floor.MNNVL_OFF)
        **({"nccl_env": dict([MNNVL_OFF])} if any(g.gpu_type and g.nvlink_domain_nodes > 1 for g in m.groups) else {}),
        "accounts": [a.name for a in m.accounts],
        "health_program": ops.nhc_program if ops and ops.health else None,
        # SlurmctldHost, primary first: with two or more the takeover check hands control to the backup and back
        "controllers": [] if m.placeholder_controller else list(m.controllers),
        # where the bring-up builds nccl-tests' all_reduce_perf, and the steps where it could not (manual.nccl_tests)
        "nccl_tests": {k: v for k, v in nccl_tests(gpu_nodes(m)).items() if k in ("version", "binary", "steps")},
    }


def busbw_floor(groups, fabric: str) -> dict[str, object]:
    """checks.json's bus-bandwidth floor, with what it was computed from (busbw_floor_source)."""
    gpu_groups = [g for g in groups if g.gpu_type]
    rails = [g.hw.compute_rails for g in gpu_groups]
    if fabric in ("infiniband", "roce") and gpu_groups and all(rails):
        expected = min(sum(n.rate_gbps for n in r) / 8 for r in rails)  # the slowest GPU node's rails
        worst = min(gpu_groups, key=lambda g: sum(n.rate_gbps for n in g.hw.compute_rails))
        ports = worst.hw.compute_rails
        return {"busbw_floor_gbps": round(BUSBW_RAIL_SHARE * expected, 1),
                "busbw_expected_gbps": expected,
                "busbw_floor_source": (f"{BUSBW_RAIL_SHARE:.0%} of pool {worst.pool}'s {len(ports)} compute rails "
                                       f"({_rates(ports)} = {expected:g} GB/s): "
                                       "all_reduce busbw between two nodes is bounded by their rails together "
                                       "(nccl-tests doc/PERFORMANCE.md)")}
    return {"busbw_floor_gbps": BUSBW_FLOOR_GBPS[fabric],
            "busbw_floor_source": (f"the {fabric} default (no platform or nics gives every GPU node's rails): about half "
                                   "of one port's line rate (nccl-tests doc/PERFORMANCE.md defines busbw)")}


def _rates(ports) -> str:
    rates = sorted({n.rate_gbps for n in ports})
    return f"{len(ports)} x {rates[0]} Gb/s" if len(rates) == 1 else "+".join(str(n.rate_gbps) for n in ports) + " Gb/s"


def kube_checks(plan: Plan) -> dict[str, object]:
    return {"gang": gang_check.gang(plan), "nccl": nccl_check.nccl(plan)}


def render(plan: Plan, files: dict[str, bytes]) -> dict[str, bytes]:
    plane = plan.slurm_plane
    kube = {"kubernetes": kube_checks(plan)} if plan.kube_plane is not None else {}
    if plane is None or plane.host != "bare-metal":
        if not kube:
            return {}
        return {"checks/run.py": static("checks.py"), "checks/checks.json": dump_json(kube)}
    slurm_files = {p.removeprefix("slurm/"): data for p, data in files.items() if p.startswith("slurm/")}
    out = {f"bringup/{name}": static(name) for name in STATIC}
    out["bringup/slurm_impact.py"], out["bringup/hostlist.py"] = impact_table()
    out["bringup/inventory.yaml"] = dump_yaml(inventory(plan), sort_keys=False)
    out["bringup/vars.yaml"] = dump_yaml(vars_data(plan, slurm_files))
    out.update(slurm_repo_files(plan))
    # the Pulumi program that runs the bring-up over SSH (stacks/slurm_bringup.py), its own project
    out["bringup/pulumi/Pulumi.yaml"] = dump_yaml({
        "name": f"{plan.name}-slurm",
        "description": f"Brings up the bare-metal Slurm hosts of the orchgen bundle {plan.name} with ../up.sh over SSH",
        "runtime": {"name": "python", "options": {"toolchain": "pip"}}})
    out["bringup/pulumi/__main__.py"] = resources.files("generator.stacks").joinpath("slurm_bringup.py").read_bytes()
    out["bringup/pulumi/requirements.txt"] = resources.files("generator.stacks").joinpath(
        "bringup-requirements.txt").read_bytes()
    out["checks/run.py"] = static("checks.py")
    out["checks/checks.json"] = dump_json({**checks(plan), **kube})
    return out
