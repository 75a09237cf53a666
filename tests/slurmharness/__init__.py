"""Boot a REAL Slurm (slurmctld + one slurmd per node) on 127.0.0.1 from a production config dir.

    from tests.slurmharness import SlurmCluster, require_slurm

    require_slurm("bookworm")                      # skip, or fail under ORCHGEN_STRICT=1
    with SlurmCluster(bundle / "slurm") as c:      # boots; tears down by PID + sweep on exit
        assert all(n["state"] == "IDLE" for n in c.nodes().values())
        assert c.problems() == []

    require_slurm("bookworm", accounting=True)     # also slurmdbd and MariaDB
    with SlurmCluster(conf, accounting=True) as c:  # + a private MariaDB and a slurmdbd
        c.add_accounts({"nlp": 3, "vision": 1})    # sacctmgr, then wait until slurmctld knows them
        assert c.shares()["nlp"]["norm_shares"] == 0.6   # sshare: 3 / (3 + 1 + root's own 1)
        job = c.submit("true", "-A", "nlp", "--gres=gpu:2")
        c.wait_job(job)
        assert c.billing(job) == 32                 # scontrol show job: billing=32 (TRESBillingWeights)
        assert c.sacct_job(job)["alloc_tres"]["gres/gpu"] == "2"   # what slurmdbd recorded

A test session can share one MariaDB between its clusters: the `slurm_db` fixture of
tests/conftest.py, passed as `SlurmCluster(conf, database=slurm_db)` (each cluster still gets a
database and a database user of its own). `MariaDB(dir, defaults_file=cnf)` starts one that reads
an option file, such as a bundle's mariadb-slurm.cnf.

Users and groups that exist only for one cluster (a site's LDAP, say), for accounts.sh's
`getent group` and for jobs submitted as those users:

    with SlurmCluster(conf, accounting=True, unix_users={"alice": 5001, "carol": (5003, 6001)},
                      unix_groups={"ml": (6001, ["bob"])}) as c:
        c.submit("true", "-A", "nlp", "--output=/dev/null", "--chdir=/tmp", user=5001)

(the namespace's /etc/passwd and /etc/group are copies with these added; the machine's are not
touched).

Options (overlay.py says what each changes): `controllers=2` boots a backup slurmctld beside the
primary (both on this host, under their own names, one shared StateSaveLocation) and
`kill_controller(0)` crashes the primary, `start_controller(0)` starts it again (after `scontrol takeover`
stopped it); with `accounting=True` and a DbdBackupHost in the input's slurmdbd.conf, a backup slurmdbd
runs too, and `stop_slurmdbd()` stops the primary; `client_bin(dir)` writes wrappers of the client commands
for a program of the host's (checks/run.py) to reach the cluster; `failover_timeout_s` shortens SlurmctldTimeout;
`health_check=True` runs the bundle's nhc.conf checks through an NHC stand-in (nhc.py), with
`bin_files` (a fake nvidia-smi, say) first on its PATH.

Suites: "bookworm" runs the host's Slurm 22.05; "trixie" (24.11, topology/block) and "forky"
(26.05, topology.yaml) run from a debootstrap chroot cached in
`$ORCHGEN_SLURM_CHROOT_CACHE/slurm-<suite>` (default parent /var/cache/orchgen), built on first use
from the Debian mirror the host's apt uses (~25 s and ~270 MB each; later boots reuse it).

Host packages (Debian 12), as root:

    apt-get update
    apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge slurmdbd \
        mariadb-server debootstrap

(slurmctld slurmd slurm-client munge for bookworm; slurmdbd and mariadb-server for accounting,
whose MariaDB also serves the chroots' slurmdbd; debootstrap only to build the chroots, which
also uses util-linux's unshare/nsenter and coreutils' chroot, both always present. Do NOT install
slurm-wlm-emulator: it takes over /usr/sbin/slurmctld through alternatives. The packages' own
services are never used: the harness starts private instances.)

Env knobs: ORCHGEN_SLURM_CHROOT_CACHE (parent dir of the chroots), ORCHGEN_SLURM_KEEP=1 (keep the
temporary work dir after a clean run; it is always kept after a failure).
"""
from __future__ import annotations

import os
import shutil
import subprocess

from . import chroot, mariadb
from .cluster import HOST_SUITE, SlurmBootError, SlurmCluster, SlurmCommandError
from .hostlist import expand as expand_hostlist
from .mariadb import MariaDB

__all__ = ["SlurmCluster", "SlurmBootError", "SlurmCommandError", "require_slurm", "expand_hostlist", "MariaDB",
           "HOST_PACKAGES", "CHROOT_HOST_PACKAGES"]

HOST_PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge", "slurmdbd", "mariadb-server"]
CHROOT_HOST_PACKAGES = ["debootstrap"]
_SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
_INSTALL = "apt-get install -y --no-install-recommends " + " ".join(HOST_PACKAGES + CHROOT_HOST_PACKAGES)


def _which(name: str) -> str | None:
    return shutil.which(name, path=_SBIN_PATH)


def require_slurm(suite: str = HOST_SUITE, accounting: bool = False) -> None:
    """require() what booting `suite` needs: skip the test, or fail it under ORCHGEN_STRICT=1.

    `accounting`: also what SlurmCluster(accounting=True) needs (the host's MariaDB for every
    suite; the host's slurmdbd for bookworm; the chroots get theirs when built or refreshed).
    """
    from .._consumers import require

    require(os.geteuid() == 0, "booting Slurm on loopback needs root (private munged, chroot, mounts)")
    for tool in ("unshare", "nsenter", "mount"):
        require(_which(tool), f"{tool} (util-linux) not installed")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    require(probe.returncode == 0, f"cannot create a mount namespace here (unshare --mount): {probe.stderr.strip()}")
    if accounting:
        problem = mariadb.installed()
        require(problem is None, f"{problem}; run: {_INSTALL}")
    if suite == HOST_SUITE:
        binaries = ["slurmctld", "slurmd", "scontrol", "srun", "sbatch", "munged", "mungekey"]
        binaries += ["slurmdbd", "sacctmgr", "sshare", "sacct"] if accounting else []
        for binary in binaries:
            require(_which(binary), f"{binary} not installed; run: {_INSTALL}")
        ctld = os.path.realpath(_which("slurmctld") or "")
        require("emulator" not in ctld, f"{ctld} is slurm-wlm-emulator's; run: apt-get remove -y slurm-wlm-emulator")
        return
    ready = chroot.is_ready(chroot.cache_root(suite))
    require(ready or _which("debootstrap"),
            f"no cached {suite} chroot at {chroot.cache_root(suite)} and debootstrap not installed; run: {_INSTALL}")
