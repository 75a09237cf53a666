"""A cached debootstrap chroot of a newer Debian suite, for a newer Slurm than the host's.

Debian 12 ships Slurm 22.05, which knows neither topology/block nor topology.yaml. trixie ships
24.11 and forky 26.05; they run here from a `debootstrap --variant=minbase` chroot with
`slurmctld slurmd slurm-client munge slurmdbd` installed (~280 MB, ~20-30 s to make, then reused).
No database server is installed in it: a chroot'd slurmdbd shares the host's network namespace
and uses the host's MariaDB on 127.0.0.1 (mariadb.py).

Cache: `$ORCHGEN_SLURM_CHROOT_CACHE/slurm-<suite>` (default parent `/var/cache/orchgen`). A chroot
is built as `slurm-<suite>.partial-<pid>` and renamed into place with a `.ready` marker only when
complete, under an exclusive lock on `slurm-<suite>.lock`, so concurrent test processes wait for one
build instead of racing. debootstrap and apt run inside a private mount namespace, so the /proc
and /sys they mount never outlive them.

The marker lists the packages installed (`packages slurmctld ...`; a marker without that line is
from before slurmdbd was added and means the first four). A cached chroot that lacks packages of
PACKAGES gets them installed in place, under the same lock, at the version of its slurmctld, so a
newer mirror does not upgrade Slurm under a cluster that may be running from it.
"""
from __future__ import annotations

import fcntl
import glob
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

DEFAULT_CACHE = Path("/var/cache/orchgen")
PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge", "slurmdbd"]
# what a marker without a `packages` line stands for (chroots cached before slurmdbd was added)
_FIRST_PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
WORK_MOUNT = "/orchgen"  # where a cluster's work dir is bind-mounted inside the chroot


def cache_root(suite: str) -> Path:
    """Where the prepared chroot of `suite` lives (whether or not it exists yet)."""
    parent = Path(os.environ.get("ORCHGEN_SLURM_CHROOT_CACHE", DEFAULT_CACHE))
    return parent / f"slurm-{suite}"


def is_ready(root: Path) -> bool:
    """The chroot was built completely (it may still lack packages added since: `missing`)."""
    return (root / ".ready").is_file()


def installed_packages(root: Path) -> list[str]:
    """The packages the chroot's .ready marker says were installed."""
    for line in (root / ".ready").read_text().splitlines():
        if line.startswith("packages "):
            return line.split()[1:]
    return list(_FIRST_PACKAGES)


def missing(root: Path) -> list[str]:
    """PACKAGES that a ready chroot lacks (installed by the next `ensure_chroot`)."""
    have = installed_packages(root)
    return [p for p in PACKAGES if p not in have]


def _write_marker(root: Path, suite: str, packages: list[str]) -> None:
    tmp = root / f".ready.{os.getpid()}"
    tmp.write_text(f"{suite} {time.ctime()}\npackages {' '.join(packages)}\n")
    os.replace(tmp, root / ".ready")  # atomic: a reader sees the old or the new marker


def debian_mirror() -> str:
    """The Debian mirror this machine's apt already uses (deb822 sources first, then sources.list)."""
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for m in re.finditer(r"^URIs:\s*(\S+/debian)/?\s*$", Path(path).read_text(), re.M):
            return m.group(1)
    lists = ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]
    for path in lists:
        if os.path.exists(path):
            for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+/debian)/?\s", Path(path).read_text(), re.M):
                return m.group(1)
    return "http://deb.debian.org/debian"


def ensure_chroot(suite: str) -> Path:
    """Return the ready chroot of `suite`, building it first if no one has yet."""
    root = cache_root(suite)
    if is_ready(root) and not missing(root):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"slurm-{suite}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
        if not is_ready(root):
            _build(suite, root)
        elif missing(root):
            _add_packages(suite, root, missing(root))
    return root


def _run_logged(argv: list[str], log: Path, what: str, timeout_s: float = 900) -> None:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout_s, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-30:])
        raise RuntimeError(f"{what} failed (exit {proc.returncode}); last lines of {log}:\n{tail}")


def _in_private_ns(shell: str) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", shell]


def _build(suite: str, root: Path) -> None:
    """debootstrap `suite`, install Slurm and munge into it, then publish it atomically."""
    _remove_stale_partials(root)
    partial = root.with_name(f"{root.name}.partial-{os.getpid()}")
    log = root.with_name(f"{root.name}.build.log")
    log.write_text(f"building {root} at {time.ctime()}\n")
    # bookworm's debootstrap has no script for forky: sid's works for every newer suite
    script = Path(f"/usr/share/debootstrap/scripts/{suite}")
    if not script.exists():
        script = Path("/usr/share/debootstrap/scripts/sid")
    _run_logged(_in_private_ns(f"debootstrap --variant=minbase {suite} {partial} {debian_mirror()} {script}"),
                log, f"debootstrap {suite}")
    policy = partial / "usr/sbin/policy-rc.d"  # packages must not start their own daemons
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    # testing/unstable Release files can look expired to a machine whose clock or mirror lags
    apt = "apt-get -o Acquire::Check-Valid-Until=false"
    _run_logged(_in_private_ns(
        f"mount -t proc proc {partial}/proc\n"
        f"chroot {partial} {apt} update -qq\n"
        f"chroot {partial} {apt} install -y -qq --no-install-recommends {' '.join(PACKAGES)}\n"
        f"chroot {partial} apt-get clean"), log, f"installing {' '.join(PACKAGES)} into the {suite} chroot")
    (partial / WORK_MOUNT.lstrip("/")).mkdir(exist_ok=True)
    _write_marker(partial, suite, PACKAGES)
    os.rename(partial, root)


def _add_packages(suite: str, root: Path, packages: list[str]) -> None:
    """Install `packages` into a cached chroot that predates them, then update its marker.

    Slurm packages are pinned to the version of the chroot's slurmctld (a moving suite such as
    forky may have a newer Slurm by now); if the mirror no longer has that version, apt installs
    the current one and upgrades the rest of Slurm with it.
    """
    log = root.with_name(f"{root.name}.build.log")
    apt = "apt-get -o Acquire::Check-Valid-Until=false"
    pinned = " ".join(f"{p}=$v" if p.startswith("slurm") else p for p in packages)
    _run_logged(_in_private_ns(
        f"mount -t proc proc {root}/proc\n"
        f"v=$(chroot {root} dpkg-query -W -f='${{Version}}' slurmctld)\n"
        f"chroot {root} {apt} update -qq\n"
        f"chroot {root} {apt} install -y -qq --no-install-recommends {pinned} || "
        f"chroot {root} {apt} install -y -qq --no-install-recommends {' '.join(packages)}\n"
        f"chroot {root} apt-get clean"), log, f"adding {' '.join(packages)} to the cached {suite} chroot")
    _write_marker(root, suite, installed_packages(root) + packages)


def _remove_stale_partials(root: Path) -> None:
    """Delete half-built chroots of crashed builds (we hold the lock, so none is in progress)."""
    mounts = Path("/proc/self/mountinfo").read_text()
    for stale in root.parent.glob(f"{root.name}.partial-*"):
        if str(stale) in mounts:  # never rm -rf through a live mount
            raise RuntimeError(f"{stale} still has something mounted; unmount it and remove it by hand")
        shutil.rmtree(stale, ignore_errors=True)
    if root.exists() and not is_ready(root):  # e.g. made by hand without the marker
        raise RuntimeError(f"{root} exists but has no .ready marker; remove it or finish it by hand")


def refresh(root: Path) -> None:
    """Before each boot: the work dir's mount point exists, and /etc/hosts is the host's."""
    (root / WORK_MOUNT.lstrip("/")).mkdir(exist_ok=True)
    hosts = Path("/etc/hosts").read_bytes()
    target = root / "etc/hosts"
    if not target.exists() or target.read_bytes() != hosts:
        tmp = target.with_name(f"hosts.{os.getpid()}")
        tmp.write_bytes(hosts)
        os.replace(tmp, target)  # atomic: a concurrent cluster never reads half a file
