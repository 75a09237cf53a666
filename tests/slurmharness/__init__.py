"""Boot a REAL Slurm (slurmctld + one slurmd per node) on 127.0.0.1 from a production config dir.

    from tests.slurmharness import SlurmCluster, require_slurm

    require_slurm("bookworm")                      # skip, or fail under ORCHGEN_STRICT=1
    with SlurmCluster(bundle / "slurm") as c:      # boots; tears down by PID + sweep on exit
        assert all(n["state"] == "IDLE" for n in c.nodes().values())
        assert c.problems() == []

Options (overlay.py says what each changes): `controllers=2` boots a backup slurmctld beside the
primary (both on this host, under their own names, one shared StateSaveLocation) and
`kill_controller(0)` crashes the primary; `failover_timeout_s` shortens SlurmctldTimeout;
`health_check=True` runs the bundle's nhc.conf checks through an NHC stand-in (nhc.py), with
`bin_files` (a fake nvidia-smi, say) first on its PATH.

Suites: "bookworm" runs the host's Slurm 22.05; "trixie" (24.11, topology/block) and "forky"
(26.05, topology.yaml) run from a debootstrap chroot cached in
`$ORCHGEN_SLURM_CHROOT_CACHE/slurm-<suite>` (default parent /var/cache/orchgen), built on first use
from the Debian mirror the host's apt uses (~25 s and ~270 MB each; later boots reuse it).

Host packages (Debian 12), as root:

    apt-get update
    apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge debootstrap

(slurmctld slurmd slurm-client munge for bookworm; debootstrap only to build the chroots, which
also uses util-linux's unshare/nsenter and coreutils' chroot, both always present. Do NOT install
slurm-wlm-emulator: it takes over /usr/sbin/slurmctld through alternatives.)

Env knobs: ORCHGEN_SLURM_CHROOT_CACHE (parent dir of the chroots), ORCHGEN_SLURM_KEEP=1 (keep the
temporary work dir after a clean run; it is always kept after a failure).
"""
from __future__ import annotations

import os
import shutil
import subprocess

from . import chroot
from .cluster import HOST_SUITE, SlurmBootError, SlurmCluster, SlurmCommandError
from .hostlist import expand as expand_hostlist

__all__ = ["SlurmCluster", "SlurmBootError", "SlurmCommandError", "require_slurm", "expand_hostlist",
           "HOST_PACKAGES", "CHROOT_HOST_PACKAGES"]

HOST_PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
CHROOT_HOST_PACKAGES = ["debootstrap"]
_SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
_INSTALL = "apt-get install -y --no-install-recommends " + " ".join(HOST_PACKAGES + CHROOT_HOST_PACKAGES)


def _which(name: str) -> str | None:
    return shutil.which(name, path=_SBIN_PATH)


def require_slurm(suite: str = HOST_SUITE) -> None:
    """require() what booting `suite` needs: skip the test, or fail it under ORCHGEN_STRICT=1."""
    from .._consumers import require

    require(os.geteuid() == 0, "booting Slurm on loopback needs root (private munged, chroot, mounts)")
    for tool in ("unshare", "nsenter", "mount"):
        require(_which(tool), f"{tool} (util-linux) not installed")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    require(probe.returncode == 0, f"cannot create a mount namespace here (unshare --mount): {probe.stderr.strip()}")
    if suite == HOST_SUITE:
        for binary in ("slurmctld", "slurmd", "scontrol", "srun", "sbatch", "munged", "mungekey"):
            require(_which(binary), f"{binary} not installed; run: {_INSTALL}")
        ctld = os.path.realpath(_which("slurmctld") or "")
        require("emulator" not in ctld, f"{ctld} is slurm-wlm-emulator's; run: apt-get remove -y slurm-wlm-emulator")
        return
    ready = chroot.is_ready(chroot.cache_root(suite))
    require(ready or _which("debootstrap"),
            f"no cached {suite} chroot at {chroot.cache_root(suite)} and debootstrap not installed; run: {_INSTALL}")
