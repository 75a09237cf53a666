"""Cached bare Debian roots (debootstrap minbase + openssh-server) that the bring-up tests boot as hosts.

A bare OS as an installer leaves it: Debian's base system and an SSH server, nothing else (no Python,
no Slurm, no munge, no MariaDB): the bring-up installs all of that itself. Cached as
`$ORCHGEN_SLURM_CHROOT_CACHE/bare-<suite>` (default /var/cache/orchgen) under an exclusive flock, built as
`.partial-<pid>` and renamed into place with a `.ready` marker, like tests/slurmharness/chroot.py, so CI and
concurrent test processes reuse one build. Each host boots an overlayfs over it (hosts.py): the cached
root itself is never written after it is built.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from tests.slurmharness.chroot import _in_private_ns, _remove_stale_partials, _run_logged, debian_mirror

DEFAULT_CACHE = Path("/var/cache/orchgen")
# the bare OS: an SSH server (how every driver reaches a host) and what debootstrap's minbase has
PACKAGES = ["openssh-server"]


def cache_root(suite: str) -> Path:
    parent = Path(os.environ.get("ORCHGEN_SLURM_CHROOT_CACHE", DEFAULT_CACHE))
    return parent / f"bare-{suite}"


def apt_archive(suite: str) -> Path:
    """A .deb cache shared by the hosts of one suite (bind-mounted at /var/cache/apt/archives), so the
    second host and the second test run download nothing."""
    path = cache_root(suite).with_name(f"bare-{suite}.apt")
    (path / "partial").mkdir(parents=True, exist_ok=True)
    return path


def ensure_root(suite: str) -> Path:
    root = cache_root(suite)
    if (root / ".ready").is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"bare-{suite}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".ready").is_file():
            _build(suite, root)
    return root


def _build(suite: str, root: Path) -> None:
    _remove_stale_partials(root)
    partial = root.with_name(f"{root.name}.partial-{os.getpid()}")
    log = root.with_name(f"{root.name}.build.log")
    log.write_text(f"building {root} at {time.ctime()}\n")
    script = Path(f"/usr/share/debootstrap/scripts/{suite}")
    if not script.exists():
        script = Path("/usr/share/debootstrap/scripts/sid")
    _run_logged(_in_private_ns(f"debootstrap --variant=minbase --include={','.join(PACKAGES)} "
                               f"{suite} {partial} {debian_mirror()} {script}"), log, f"debootstrap {suite}")
    _run_logged(_in_private_ns(f"chroot {partial} apt-get clean"), log, "apt-get clean")
    (partial / ".ready").write_text(f"{suite} {time.ctime()}\npackages {' '.join(PACKAGES)}\n")
    os.rename(partial, root)


if __name__ == "__main__":
    import sys
    for s in sys.argv[1:]:
        print(ensure_root(s))
