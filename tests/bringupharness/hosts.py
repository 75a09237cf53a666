"""Bare Debian hosts on this machine: one per Slurm host of a plan, each reachable over SSH as a real host.

Each host is an overlayfs over the cached bare root of its suite (roots.py: debootstrap minbase plus an
SSH server, nothing else), booted by `unshare` in namespaces of its own: UTS (its own hostname, which
slurmctld, slurmdbd and slurmd compare with SlurmctldHost/DbdHost/NodeName), mount (its own /proc, /run,
/dev/pts) and PID (its daemons see only their own processes: pidfiles and `pgrep` mean what they mean on a
host). Its sshd is PID 1 and listens on the host's own loopback address 127.0.0.<N>; the hosts share this
machine's network namespace so that apt reaches the Debian mirror with no NAT, which is why the bundle's
daemons get distinct ports (the one list of such changes: tests/slurmharness/overlay.py, BRINGUP_CHANGES for
the bundle's copy, HOST_CHANGES for the hosts).

Teardown kills each host's PID 1 (the kernel then kills every process of its PID namespace) and unmounts
its overlay; nothing is left running or mounted.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import roots

# A fake nvidia-smi for nodes without GPUs: answers the queries the bundle's checks and gpu-health.sh
# make (`--query-gpu=name`, `-L`; the memory-error queries, answered as by healthy GPUs: no
# uncorrectable ECC error, no page retirement, no row remapping pending or failed) for
# ORCHGEN_FAKE_GPUS GPUs of ORCHGEN_FAKE_GPU_NAME.
FAKE_NVIDIA_SMI = """#!/bin/sh
n=$(cat /etc/orchgen-fake-gpus 2>/dev/null || echo 0)
name=$(cat /etc/orchgen-fake-gpu-name 2>/dev/null || echo "NVIDIA A100-SXM4-80GB")
i=0
case "$*" in
  *--query-gpu=name*) while [ $i -lt $n ]; do echo "$name"; i=$((i+1)); done ;;
  *--query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending*)
    while [ $i -lt $n ]; do echo "$i, 00000000:$(printf %02X $((i+24))):00.0, 0, [N/A]"; i=$((i+1)); done ;;
  *--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure*)
    while [ $i -lt $n ]; do echo "00000000:$(printf %02X $((i+24))):00.0, 0, 0"; i=$((i+1)); done ;;
  *-L*) while [ $i -lt $n ]; do echo "GPU $i: $name (UUID: GPU-fake-$i)"; i=$((i+1)); done ;;
  *) echo "fake nvidia-smi: $n x $name" ;;
esac
"""


# A command for Hosts.ssh: exit 0 when a slurmd process runs on the host (its own PID namespace: its own /proc),
# 1 when none does (a minbase root has no pgrep)
SLURMD_RUNS = "for c in /proc/[0-9]*/comm; do [ \"$(cat $c 2>/dev/null)\" = slurmd ] && exit 0; done; exit 1"


def _test_built(deb: Path) -> bool:
    """A package a test built and served from its own repository (its version carries "orchgen":
    test_slurm_repo_real's slurmd and slurm-smd-*), kept out of the suite's shared .deb cache: a later build of the
    same name and version with other content would otherwise be taken from the cache (apt reuses a cached file of
    the index's size), as a CI run did (slurm-smd-slurmctld with an earlier build's /usr/sbin/slurmctld-wlm)."""
    return "orchgen" in deb.name


@dataclass
class Host:
    name: str
    address: str
    suite: str
    dir: Path
    gpus: int = 0
    proc: subprocess.Popen | None = None

    @property
    def root(self) -> Path:
        return self.dir / "merged"


@dataclass
class Hosts:
    """Bare hosts of one suite under `work`, booted on enter, torn down on exit."""

    suite: str
    work: Path
    hosts: dict[str, Host] = field(default_factory=dict)
    next_octet: int = 0

    def __post_init__(self) -> None:
        # each suite its own range of 127.0.0.N, so a Debian 12 and a Debian 13 cluster can run side by side
        self.next_octet = self.next_octet or {"bookworm": 20, "trixie": 60}.get(self.suite, 100)
        self.work.mkdir(parents=True, exist_ok=True)
        self.key = self.work / "id_ed25519"
        if not self.key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)

    def __enter__(self) -> "Hosts":
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def add(self, name: str, gpus: int = 0) -> Host:
        octet = self.next_octet
        self.next_octet += 1
        host = Host(name, f"127.0.0.{octet}", self.suite, self.work / name, gpus)
        self.hosts[name] = host
        return host

    def etc_hosts(self) -> str:
        lines = ["127.0.0.1 localhost"] + [f"{h.address} {h.name}" for h in self.hosts.values()]
        return "\n".join(lines) + "\n"

    def boot(self, host: Host) -> None:
        with socket.socket() as s:  # another harness's host on this address would answer in our place
            s.settimeout(0.5)
            if s.connect_ex((host.address, 22)) == 0:
                raise RuntimeError(f"{host.address}:22 is taken: another bring-up harness runs on this machine")
        base = roots.ensure_root(self.suite)
        for sub in ("upper", "ovl", "merged"):
            (host.dir / sub).mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={base},upperdir={host.dir}/upper,workdir={host.dir}/ovl", str(host.root)],
                       check=True)
        r = host.root
        # apt's .deb cache: the suite's shared one, hard-linked into a per-host dir (apt locks its archive dir,
        # and the hosts install at the same time); what a host downloads is linked back at teardown
        shared, own = roots.apt_archive(self.suite), host.dir / "apt"
        (own / "partial").mkdir(parents=True, exist_ok=True)
        for deb in shared.glob("*.deb"):
            if not (own / deb.name).exists() and not _test_built(deb):
                os.link(deb, own / deb.name)
        subprocess.run(["mount", "--bind", str(own), str(r / "var/cache/apt/archives")], check=True)
        (r / "etc/hostname").write_text(host.name + "\n")
        for h in self.hosts.values():  # every host knows every other by name, as DNS would tell it
            (h.root / "etc/hosts").write_text(self.etc_hosts()) if h.root.is_dir() else None
        (r / "etc/hosts").write_text(self.etc_hosts())
        ssh = r / "root/.ssh"
        ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copy(self.key.with_suffix(".pub"), ssh / "authorized_keys")
        (r / "etc/ssh/sshd_config.d").mkdir(exist_ok=True)
        (r / "etc/ssh/sshd_config.d/orchgen-harness.conf").write_text(
            f"ListenAddress {host.address}\nUseDNS no\nPermitRootLogin prohibit-password\n")
        # Packages start their daemons at install, as on a fresh Debian (munged with the key its postinst made,
        # MariaDB with Debian's configuration; slurmd, slurmctld and slurmdbd not before their .conf exists: the
        # units' ConditionPathExists, their init scripts' check). No init runs here, so invoke-rc.d starts them from
        # /etc/init.d when (1) `runlevel` says multi-user runlevel 2, whose rc2.d links say what is enabled, and (2)
        # policy-rc.d allows it: without /sbin/init invoke-rc.d blocks everything unless a policy-rc.d answers, so
        # this one answers as a booted host: run what is enabled (exit 0), not what is not (the action then comes
        # in parentheses: exit 101). The bundle must cope with daemons the packages started.
        runlevel = r / "sbin/runlevel"
        runlevel.write_text("#!/bin/sh\n# tests/bringupharness: a booted host in multi-user runlevel 2\necho N 2\n")
        runlevel.chmod(0o755)
        policy = r / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\n# tests/bringupharness: what a booted Debian host runs at package install\n"
                          "for a; do case \"$a\" in \"(\"*\")\") exit 101 ;; esac; done\n"
                          "# HOST_CHANGES: the node exporter starts on the host's own address from the bring-up\n"
                          "for a; do case \"$a\" in prometheus-node-exporter) exit 101 ;; esac; done\nexit 0\n")
        policy.chmod(0o755)
        # MariaDB on the host's own address (HOST_CHANGES): Debian's 50-server.cnf binds 127.0.0.1:3306, which
        # every host of every bring-up running at the same time would share
        cnf = r / "etc/mysql/mariadb.conf.d"
        cnf.mkdir(parents=True, exist_ok=True)
        (cnf / "99-orchgen-harness.cnf").write_text("# tests/slurmharness/overlay.py HOST_CHANGES: this host's own "
                                                    f"address\n[mysqld]\nbind-address = {host.address}\n")
        # MariaDB's init script waits 30 s for the server, mariadb.service 900 s; here 300 s (HOST_CHANGES)
        (r / "etc/default/mariadb").write_text("# tests/slurmharness/overlay.py HOST_CHANGES: a bounded wait "
                                               "for MariaDB's first start\nMYSQLD_STARTUP_TIMEOUT=300\n")
        # apt keeps what it downloads (the archive dir is shared by the suite's hosts and runs)
        (r / "etc/apt/apt.conf.d/99orchgen-keep").write_text('Binary::apt::APT::Keep-Downloaded-Packages "true";\n')
        if host.gpus:
            for i in range(host.gpus):  # the GPU device files gres.conf names: character devices like /dev/null
                dev = r / f"dev/nvidia{i}"
                if not dev.exists():
                    os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
            smi = r / "usr/bin/nvidia-smi"
            smi.write_text(FAKE_NVIDIA_SMI)
            smi.chmod(0o755)
            (r / "etc/orchgen-fake-gpus").write_text(f"{host.gpus}\n")
        boot = (f"hostname {host.name}\n"
                f"mount -t proc proc {r}/proc\n"
                f"mount --rbind /sys {r}/sys\n"
                f"mkdir -p {r}/dev/pts {r}/dev/shm {r}/run/sshd\n"
                f"mount -t devpts -o newinstance,ptmxmode=0666 devpts {r}/dev/pts\n"
                f"mount -t tmpfs tmpfs {r}/dev/shm\n"
                f"exec chroot {r} /usr/sbin/sshd -D -e")
        log = open(host.dir / "sshd.log", "ab")
        host.proc = subprocess.Popen(["unshare", "--uts", "--mount", "--propagation", "private", "--pid", "--fork",
                                      "--kill-child", "--", "sh", "-ec", boot],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if host.proc.poll() is not None:
                raise RuntimeError(f"{host.name}: sshd exited: {(host.dir / 'sshd.log').read_text()[-2000:]}")
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((host.address, 22)) == 0:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{host.name}: sshd did not listen on {host.address}:22")

    def inventory(self, path: Path) -> Path:
        """The operator's side of the inventory: each host's address, SSH user and key (never in the bundle)."""
        lines = ["all:", "  vars:", "    ansible_user: root", f"    ansible_ssh_private_key_file: {self.key}",
                 "    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                 "  hosts:"]
        for h in self.hosts.values():
            lines.append(f"    {h.name}: {{ansible_host: {h.address}}}")
        path.write_text("\n".join(lines) + "\n")
        return path

    def ssh(self, name: str, command: str, timeout: float = 120, check: bool = True,
            user: str = "root", log_level: str = "ERROR") -> subprocess.CompletedProcess:
        """`command` on host `name` over SSH as `user` (root, or an account the test made with this key)."""
        h = self.hosts[name]
        proc = subprocess.run(["ssh", "-i", str(self.key), "-o", "StrictHostKeyChecking=no", "-o",
                               "UserKnownHostsFile=/dev/null", "-o", f"LogLevel={log_level}", "-o", "BatchMode=yes",
                               f"{user}@{h.address}", command], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{name}: `{command}` exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def power_off(self, name: str) -> None:
        """Host `name` loses power: every process in its PID namespace (sshd, munged, slurmd, ...) killed at once, its
        disk (the overlay's upper dir) kept. `boot` starts it again with sshd alone: no init runs here to start the
        daemons it had enabled, so it comes back harsher than a booted host, and the next bring-up must start them."""
        h = self.hosts[name]
        if h.proc is not None and h.proc.poll() is None:
            os.killpg(h.proc.pid, signal.SIGKILL)
            h.proc.wait(timeout=30)
        for mnt in ("var/cache/apt/archives", ""):
            subprocess.run(["umount", "-l", str(h.root / mnt if mnt else h.root)], capture_output=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # its address stops answering (sshd gone)
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((h.address, 22)) != 0:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{name}: {h.address}:22 still answers after the power-off")

    def down(self) -> None:
        for h in self.hosts.values():
            if h.proc is not None and h.proc.poll() is None:
                try:
                    os.killpg(h.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                h.proc.wait(timeout=30)
        time.sleep(0.2)
        shared = roots.apt_archive(self.suite)
        for h in self.hosts.values():
            for deb in (h.dir / "apt").glob("*.deb"):
                if not (shared / deb.name).exists() and not _test_built(deb):
                    try:
                        os.link(deb, shared / deb.name)
                    except FileExistsError:
                        pass
            for mnt in ("var/cache/apt/archives", ""):
                target = h.root / mnt if mnt else h.root
                subprocess.run(["umount", "-l", str(target)], capture_output=True)
