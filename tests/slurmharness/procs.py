"""Processes of one test cluster, grouped by a private mount namespace.

Every process of a cluster (munged, slurmctld, the slurmds, and whatever they fork: slurmstepd,
job tasks, srun) is started with `nsenter` into one mount namespace that a small "holder" process
owns. That gives two things:

* an exact teardown sweep: "every process whose /proc/PID/ns/mnt is ours" finds the forked
  slurmstepd and job leftovers of *this* cluster only, never those of a second cluster running
  from the same cached chroot (a sweep by /proc/PID/root, as in the bash reference, cannot tell
  them apart);
* mounts that cannot leak: the chroot's /proc, its private /tmp, and the bind mount of
  the work dir exist only in the namespace, and vanish with its last process, even after a crash.

`nsenter --mount` and the `chroot` command both exec (no fork), so the PID of the Popen object is
the daemon's own PID.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path


def _ns_of(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:  # gone, a zombie, or not ours to read
        return None


def _comm(pid: int | str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class MountNamespace:
    """A private mount namespace kept alive by a `sleep` holder, with `mounts` done inside it.

    `mounts` are argument lists for mount(8), e.g. ["-t", "proc", "proc", "/x/proc"]; they are
    made before the holder reports ready, so every process entered later sees them.
    """

    def __init__(self, mounts: list[list[str]], log: Path):
        script = "".join(f"mount {shlex.join(m)} && " for m in mounts) + "echo ready && exec sleep infinity"
        with open(log, "ab") as err:
            self.holder = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
            )
        line = self.holder.stdout.readline().strip() if self.holder.stdout else ""
        if line != "ready":
            self.holder.wait(timeout=10)
            raise RuntimeError(f"could not set up the private mount namespace: {log.read_text(errors='replace')[-2000:]}")
        self.ns = _ns_of(self.holder.pid)
        self.nested: set[str] = set()  # mount namespaces made inside this one (see adopt)

    def adopt(self, pid: int, timeout_s: float = 5.0) -> None:
        """Count the mount namespace that process `pid` unshares inside this one (a backup
        slurmctld with its own /run) as ours, so that members() and sweep() see its processes."""
        # `pid` starts in the test's own namespace, enters ours (nsenter), then unshares its own:
        # only a namespace that is neither of the first two is the nested one
        outside = _ns_of("self")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ns = _ns_of(pid)
            if ns is None:
                return
            if ns not in (self.ns, outside):
                self.nested.add(ns)
                return
            time.sleep(0.02)

    def enter(self) -> list[str]:
        """Command prefix that runs a program inside the namespace."""
        return ["nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--"]

    def members(self, name: str | None = None) -> list[int]:
        """PIDs of every live process in this namespace (the holder included), or those called `name`."""
        pids = []
        ours = {self.ns, *self.nested} - {_ns_of("self")}  # never the namespace this test itself runs in
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid() and _ns_of(entry) in ours:
                if name is None or _comm(entry) == name:
                    pids.append(int(entry))
        return pids

    def sweep(self, grace_s: float = 3.0) -> list[int]:
        """TERM, then KILL, every process left in the namespace; returns the PIDs that needed it."""
        swept: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGKILL):
            left = [p for p in self.members() if p != self.holder.pid]
            if not left:
                break
            swept += [p for p in left if p not in swept]
            for pid in left:
                _signal(pid, sig)
            wait_gone(left, grace_s)
        _signal(self.holder.pid, signal.SIGKILL)  # last: the namespace dies with it
        self.holder.wait(timeout=10)
        if self.holder.stdout:
            self.holder.stdout.close()
        return swept


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_gone(pids: list[int], timeout_s: float) -> bool:
    """Wait until none of `pids` is alive; True if that happened in time."""
    deadline = time.monotonic() + timeout_s
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stop(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """Give a daemon `timeout_s` to exit on its own, then TERM, then KILL; always reap it."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            _signal(proc.pid, sig)
        try:
            proc.wait(timeout=timeout_s if sig is None else 3)
            return
        except subprocess.TimeoutExpired:
            continue
