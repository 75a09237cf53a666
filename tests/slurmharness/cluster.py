"""SlurmCluster: a real slurmctld + one slurmd per node on 127.0.0.1, booted from a config dir.

Lifecycle (`with SlurmCluster(dir) as c:`):

1. the root: `/` for bookworm (the host's Slurm 22.05), else a cached chroot (`chroot.py`);
2. a private mount namespace for every process of this cluster (`procs.py`);
3. the config dir is copied into `<workdir>/etc` and overlaid for loopback (`overlay.py`);
4. a private munged with a throw-away key;
5. with `accounting=True`: a database on a private MariaDB (`mariadb.py`; the cluster's own, or one
   shared by a test session), `slurmdbd -D`, and the cluster registered (`sacctmgr add cluster`);
6. `slurmctld -D`, then `slurmd -D -N <node>` each (with `controllers=N`, N > 1: a backup slurmctld
   per extra SlurmctldHost, each under its own hostname in a UTS namespace, all sharing one
   StateSaveLocation; see overlay.py);
7. wait until every node is IDLE (failing fast, with the log tail, if a daemon dies);
8. on exit, even after a failed boot: `scontrol shutdown`, then each daemon by PID (slurmdbd after
   slurmctld, so the controller's last records reach it), then a sweep of whatever is left in the
   namespace, then the cluster's own MariaDB (by PID).
"""
from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from . import chroot, mariadb, nhc, overlay, parse, procs
from .net import free_port_block

HOST_SUITE = "bookworm"  # the suite whose Slurm the host itself runs
SPARE_NODE_PORTS = 4  # slurmd ports kept free for nodes a re-plan adds to the last NodeName line
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Log lines that are known to be harmless here; keep this list short, and say why for each.
HARMLESS = [
    # slurmdbd's side of a client that closed its persistent connection without the protocol's goodbye
    # (sacctmgr or slurmctld giving up on its own timeout when the machine is loaded: seen once in CI at load
    # 12+); slurmdbd drops that connection and serves the next (src/common/persist_conn.c `_conn_readable`)
    re.compile(r"_conn_readable: persistent connection for fd \d+ experienced error\[104\]: Connection reset by peer"),
    # slurmctld times 1000 clock reads at startup and logs this when the machine is busy (a loaded CI
    # host running other tests); it says nothing of the configuration under test
    re.compile(r"High latency for 1000 calls to gettimeofday\(\)"),
    # 22.05 probes the PMIx MPI plugin at startup, and its mpi/pmix opens libpmix.so, which Debian 12 has
    # only with libpmix-dev (not installed): harmless while the bundle's MpiDefault is not pmix, and a
    # bundle that makes it so fails every srun, which a test then sees.
    re.compile(r"mpi/pmix_v4: init: .*can not load PMIx library|Couldn't load specified plugin name for mpi/pmix"
               r"|MPI: Cannot create context for mpi/pmix(_v4)?$"),
    # a fresh, empty StateSaveLocation on every boot: slurmctld looks for backups of state it never had
    re.compile(r"NOTE: Trying backup state save file|No \w+ state file .* to recover|Could not open \w+ state file"),
    # a multi-node step whose tasks end at once: a child node's completion message, sent up the
    # message tree, can reach a slurmd before its own slurmstepd has opened its socket. Seen on
    # 26.05 with 18 slurmds on 2 CPUs; Slurm retries and the step completes normally.
    re.compile(r"stepd_connect to StepId=\S+ failed: (No such file or directory|Connection refused)"),
    # slurmctld tells srun that its job ended, but srun already saw its step end and exited
    re.compile(r"slurm_bufs_sendto\(msg_type=SRUN_JOB_COMPLETE\) failed"),
    # slurmctld fans its first pings out down the message tree (TreeWidth) while the slurmds start one by
    # one: a slurmd can forward to a sibling that is not listening yet. Seen at boot with the suite's
    # workers running beside it (load 10+ on 2 CPUs); the sibling registers by itself once up, and a node
    # that never does fails the boot (SlurmCluster waits for every node IDLE), not this line.
    re.compile(r"_forward_thread: failed to \S+ \(127\.0\.0\.1:\d+\): Connection refused"),
    # slurmstepd's request thread closes each accepted connection after its request loop (slurmstepd/req.c
    # _handle_accept: `if (close(fd) == -1) error("Closing accepted fd: %m")`); when the step is tearing
    # down, the fd can already be closed. Seen once on 26.05 ([1.0], a finished step) in a loaded CI run whose
    # job answered correctly; the test checks the step's own result, not this line.
    re.compile(r"\[\d+\.\d+\] error: Closing accepted fd: Bad file descriptor"),
    # the same close in its error path (`error("Closing accepted fd after error: %m")`), seen on 26.05's
    # gb200 step [1.0] in a loaded CI run (stop 44) whose job answered correctly
    re.compile(r"\[\d+\.\d+\] error: Closing accepted fd after error: Bad file descriptor"),
    # slurmctld's return code (msg_type 8001, RESPONSE_SLURM_RC) to a client that had already closed its connection
    # (a command's own timeout under load; seen once in the 22.05 takeover test of a loaded CI run, the client an
    # `scontrol` during the hand-over, whose own result the test checks): the reply has no one to go to
    re.compile(r"slurm_msg_sendto: address:port=127\.0\.0\.1:\d+ msg_type=8001: Unexpected missing socket error"),
]
# Harmless only because the overlay removed the slurmdbd the input config uses
WITHOUT_SLURMDBD = [
    re.compile(r"can only be used with SlurmDBD"),  # PriorityWeightFairshare & co: ignored without it
]
# slurmdbd's own log, on loopback
WITH_SLURMDBD = [
    # 24.11, once, when a new cluster is added (by sacctmgr or by slurmctld registering): the root
    # user's association is added together with the cluster's root account association (id 1),
    # before that parent is in slurmdbd's cache, so the lookup of the parent (for its coordinator
    # flags) fails. Not seen on 22.05 or 26.05; accounts and users added later do not log it.
    re.compile(r"We can't find assoc 1 on cluster"),
]
# Harmless only because the overlay removed the task/cgroup plugin the input config uses: nothing then
# confines slurmd to the memory MemSpecLimit keeps for it (slurm.conf(5), MemSpecLimit)
WITHOUT_TASK_CGROUP = [
    re.compile(r"Resource spec: Limited MemSpecLimit support\. Slurmd daemon not memory constrained"),
]
# Harmless with a backup controller: the primary starts first, as an operator starts them, and tells the
# backups it is up before they listen
WITH_BACKUP = [
    re.compile(r"_shutdown_bu_thread:send/recv \S+: Connection refused"),
]
# Harmless only because the overlay replaced proctrack/cgroup (the sandbox cannot write cgroups):
# PrologFlags=Contain still makes the extern step; pam_slurm_adopt, which needs the cgroup, is not here
WITHOUT_CGROUP = [
    re.compile(r"If using PrologFlags=Contain for pam_slurm_adopt, (either )?proctrack/cgroup"),
]
_JOB_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
              "DEADLINE", "OUT_OF_MEMORY"}
_PROBLEM = re.compile(r"\b(error|fatal|warning)\b", re.I)
_TIMESTAMP = re.compile(r"^\[[^\]]*\]\s*")


class SlurmBootError(RuntimeError):
    """The cluster did not come up: a daemon died, or nodes never got IDLE. Carries the log tail."""


class SlurmCommandError(RuntimeError):
    """A Slurm client command or job failed. `.result` is the CompletedProcess (if any)."""

    def __init__(self, message: str, result: subprocess.CompletedProcess | None = None):
        super().__init__(message)
        self.result = result


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} missing)"
    return "".join(text.splitlines(True)[-lines:]) or f"({path} empty)"


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


class SlurmCluster:
    """A real Slurm on loopback, booted from a directory of production-style configs.

    After `__enter__`: `version` ("22.05.8"), `workdir` (host path: etc/ holds the overlaid
    configs, log/ the daemons' logs), `nodes_started`, `overlay_result` (what the overlay changed),
    `timings` (seconds per phase). Queries: run, log, problems, nodes, partitions, topology,
    switches, blocks; jobs: job (srun), batch_wait (sbatch), submit + wait_job, job_record,
    job_tres, billing. Failures raise SlurmBootError or SlurmCommandError with the relevant log
    tail in the message.

    With `accounting=True` a real slurmdbd records everything: `cluster_name`, `database` (where
    its data lives); sacctmgr, add_accounts, associations, sshare, shares, sacct; wait_for polls.
    """

    def __init__(self, config_dir: Path, *, suite: str = HOST_SUITE, workdir: Path | None = None,
                 wait_idle_s: float = 90, accounting: bool = False, database: mariadb.MariaDB | None = None,
                 controllers: int | None = None, failover_timeout_s: int | None = None,
                 health_check: bool = False, bin_files: dict[str, str] | None = None,
                 unix_users: dict[str, int | tuple[int, int]] | None = None,
                 unix_groups: dict[str, tuple[int, list[str]]] | None = None,
                 bf_interval_s: int | None = None, before_slurmctld=None):
        """`wait_idle_s=0` starts the daemons without waiting for IDLE (to inspect broken nodes).

        `before_slurmctld(cluster)`: called once slurmdbd runs and before slurmctld starts, as a new
        cluster's bring-up runs accounts.sh (README): e.g. a partition's AllowQos must name QOS that
        slurmdbd already has (fatal from Slurm 26.05 otherwise). `run` and `sacctmgr` work there.

        `unix_users` ({name: uid} or {name: (uid, primary gid)}) and `unix_groups` ({name: (gid,
        [members])}): accounts that exist for this cluster only, as a site's LDAP would provide them:
        the namespace sees copies of /etc/passwd and /etc/group with these added (a user given only a
        uid gets a group of its own, gid = uid),
        so `getent`, sacctmgr, slurmctld and `run(..., user=UID)` all resolve them; the machine's own
        files are never touched.

        `accounting=True` runs slurmdbd (the config dir's slurmdbd.conf, overlaid, or a minimal
        one) and keeps slurm.conf's accounting and TRES weights. Its database lives on `database`
        (a running MariaDB shared by several clusters, e.g. the `slurm_db` session fixture), or,
        if None, on a MariaDB of this cluster's own under the work dir (~1 s more per boot).

        `controllers`: how many slurmctld to run (default: one per SlurmctldHost line of the input);
        `failover_timeout_s` replaces SlurmctldTimeout; `health_check=True` runs the NHC stand-in as
        HealthCheckProgram (see overlay.py for all three); `bin_files` ({name: text}) are written to
        <work>/bin, executable, before any daemon starts (a fake nvidia-smi, for one).
        `bf_interval_s` sets backfill's interval (overlay.py: for scheduling-order tests).
        """
        self.config_dir = Path(config_dir)
        self.suite = suite
        self.unix_users = dict(unix_users or {})
        self.unix_groups = dict(unix_groups or {})
        self.wait_idle_s = wait_idle_s
        self.accounting = accounting or database is not None
        self._shared_db = database
        self._own_db: mariadb.MariaDB | None = None
        self.database: mariadb.Database | None = None  # this cluster's database (accounting only)
        self.controllers = controllers or overlay.count_controllers((self.config_dir / "slurm.conf").read_text())
        self.failover_timeout_s = failover_timeout_s
        self.bf_interval_s = bf_interval_s
        self._before_slurmctld = before_slurmctld
        self.health_check = health_check
        self.bin_files = dict(bin_files or {})
        self.layout: overlay.Layout | None = None
        self.workdir = Path(workdir) if workdir else None
        self._own_workdir = workdir is None
        self.version = ""
        self.root = Path("/")
        self.ns: procs.MountNamespace | None = None
        self.nodes_started: list[str] = []
        self.overlay_result = overlay.Overlaid()
        self._daemons: dict[str, subprocess.Popen] = {}  # "munged", "slurmdbd", "slurmctld", "slurmd:<node>"
        self._jobs = itertools.count(1)
        self._outputs: dict[int, Path] = {}
        self._job_numbers: dict[str, int] = {}  # job id -> n of jobs/job<n>.sh
        self.last_job_id = ""
        self.timings: dict[str, float] = {}  # seconds per boot phase and teardown, for reports
        self.swept: list[int] = []  # PIDs the final sweep had to kill (left over after shutdown)

    # ------------------------------------------------------------------ paths

    @property
    def in_chroot(self) -> bool:
        return self.suite != HOST_SUITE

    @property
    def work(self) -> str:
        """The work dir as the daemons see it (inside the chroot: its bind mount)."""
        return chroot.WORK_MOUNT if self.in_chroot else str(self.workdir)

    @property
    def slurm_conf(self) -> str:
        return f"{self.work}/etc/slurm.conf"

    @property
    def cluster_name(self) -> str:
        """slurm.conf's ClusterName, lower-cased as Slurm stores it."""
        return self.overlay_result.cluster_name

    # ------------------------------------------------------------------ boot / teardown

    def __enter__(self) -> "SlurmCluster":
        try:
            self._boot()
        except BaseException:
            self._teardown(keep_workdir=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._teardown(keep_workdir=exc_type is not None)

    def _lap(self, name: str, start: float) -> float:
        now = time.monotonic()
        self.timings[name] = round(now - start, 3)
        return now

    def _boot(self) -> None:
        t = time.monotonic()
        if self.in_chroot:
            self.root = chroot.ensure_chroot(self.suite)
            chroot.refresh(self.root)
            t = self._lap("chroot", t)
        self._make_workdir()
        self.ns = procs.MountNamespace(self._mounts(), self.workdir / "log" / "namespace.log")
        self.version = self._read_version()
        if self.accounting:
            self._open_database()
            t = self._lap("mariadb", t)
        self._write_configs()
        t = self._lap("configs", t)
        self._start_munged()
        if self.accounting:
            self._start_slurmdbd()
            t = self._lap("slurmdbd", t)
        if self._before_slurmctld is not None:
            self._before_slurmctld(self)
        self._start_slurmctld()
        t = self._lap("slurmctld", t)
        self._start_slurmds()
        if self.wait_idle_s:
            self._wait_idle()
        self._start_backups()
        self._lap("nodes", t)

    def _make_workdir(self) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"orchgen-slurm-{self.suite}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        if any(self.workdir.iterdir()):
            raise ValueError(f"workdir {self.workdir} is not empty")
        for sub in ("state", "spool", "log", "run", "munge", "jobs"):
            (self.workdir / sub).mkdir()
        # Another uid (`run(user=...)`) may traverse the work dir and reach the munge socket, no more:
        # the key and slurmdbd.conf (the database password) stay readable by root only.
        self.workdir.chmod(0o711)
        (self.workdir / "munge").chmod(0o711)
        if self.controllers > 1:  # bind-mounted over /etc/hosts when the namespace is made
            (self.workdir / "hosts").write_text(overlay.hosts_file(Path("/etc/hosts").read_text(), self.controllers))

    def _mounts(self) -> list[list[str]]:
        """Mounts of the namespace: for a chroot, the root itself (a mount point, as / is on a real
        machine: switch/nvidia_imex's steps make / a slave mount), /proc, a private /tmp and the
        work dir; with more than one controller, the work dir's hosts file over /etc/hosts; with
        `unix_users`/`unix_groups`, /etc/passwd and /etc/group (of the root) with them added."""
        hosts = [["--bind", str(self.workdir / "hosts"), f"{self.root if self.in_chroot else ''}/etc/hosts"]] \
            if self.controllers > 1 else []
        mounts: list[list[str]] = []
        if self.in_chroot:
            r = self.root
            mounts = [["--bind", str(r), str(r)],
                      ["-t", "proc", "proc", f"{r}/proc"],
                      ["-t", "tmpfs", "tmpfs", f"{r}/tmp"],  # job files never pollute the cached chroot
                      ["--bind", str(self.workdir), f"{r}{chroot.WORK_MOUNT}"]]
        mounts += hosts
        if self.unix_users or self.unix_groups:
            nss = self.workdir / "nss"
            nss.mkdir()
            root = str(self.root).rstrip("/")
            passwd = Path(f"{root}/etc/passwd").read_text()
            group = Path(f"{root}/etc/group").read_text()
            ids = {name: v if isinstance(v, tuple) else (v, v) for name, v in self.unix_users.items()}
            passwd += "".join(f"{name}:x:{uid}:{gid}:{name}:/nonexistent:/usr/sbin/nologin\n"
                              for name, (uid, gid) in ids.items())
            group += "".join(f"{name}:x:{uid}:\n" for name, (uid, gid) in ids.items() if uid == gid)
            group += "".join(f"{name}:x:{gid}:{','.join(members)}\n"
                             for name, (gid, members) in self.unix_groups.items())
            for name, text in (("passwd", passwd), ("group", group)):
                (nss / name).write_text(text)
                (nss / name).chmod(0o644)
                mounts.append(["--bind", str(nss / name), f"{root}/etc/{name}"])
        return mounts

    def _argv(self, argv: list[str], user: int | None = None, *, hostname: str | None = None,
              own_run: str | None = None) -> list[str]:
        """`argv` inside the cluster's namespace (and chroot); with `user`, as that uid; with
        `hostname`, in a UTS namespace of its own under that name, and with `own_run` (a dir of the
        work dir) in a mount namespace of its own where that dir is <work>/run: a backup controller on
        this one host (see overlay.py)."""
        assert self.ns is not None
        host = []
        if own_run:
            run = f"{self.root if self.in_chroot else ''}{self.work}/run"
            host = ["unshare", "--uts", "--mount", "--propagation", "private", "--", "sh", "-c",
                    'hostname "$0" && mount --bind "$1" "$2" && shift 2 && exec "$@"', hostname,
                    str(self.workdir / own_run), run]
        elif hostname:
            host = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', hostname]
        if user is not None:  # coreutils' chroot switches uid:gid after entering the root (/ on the host)
            return self.ns.enter() + host + ["chroot", f"--userspec={user}:{user}", f"--groups={user}",
                                             str(self.root)] + argv
        return self.ns.enter() + host + (["chroot", str(self.root)] if self.in_chroot else []) + argv

    def _env(self) -> dict[str, str]:
        # a clean environment: no SLURM_* of an outer job or shell leaks into ours
        return {"PATH": _PATH, "SLURM_CONF": self.slurm_conf, "HOME": "/root", "LANG": "C"}

    def _read_version(self) -> str:
        out = subprocess.run(self._argv(["slurmctld", "-V"]), capture_output=True, text=True,
                             env=self._env(), timeout=30)
        m = re.search(r"(\d+\.\d+\.\d+)", out.stdout + out.stderr)
        if not m:
            raise SlurmBootError(f"cannot tell the Slurm version from `slurmctld -V`: {out.stdout}{out.stderr}")
        return m.group(1)

    def _open_database(self) -> None:
        """This cluster's database: on the shared MariaDB, or on a private one started now."""
        server = self._shared_db
        if server is None:
            self._own_db = server = mariadb.MariaDB(self.workdir / "mariadb")
            server.start()
        self.database = server.new_database()

    def _write_configs(self) -> None:
        node_count = overlay.count_nodes((self.config_dir / "slurm.conf").read_text())
        # slurmctld, slurmdbd, then one per slurmd, and SPARE_NODE_PORTS for nodes a re-plan adds (apply_config)
        base = free_port_block(node_count + 2 + SPARE_NODE_PORTS)
        layout = overlay.Layout(work=self.work, host=socket.gethostname().split(".")[0],
                                ctld_port=base, node_port_base=base + 2,
                                legacy=_version_tuple(self.version) < (23, 2),
                                dbd_port=base + 1 if self.accounting else 0, controllers=self.controllers,
                                failover_timeout_s=self.failover_timeout_s, bf_interval_s=self.bf_interval_s,
                                health_check=f"{self.work}/nhc/{nhc.STANDIN}" if self.health_check else None,
                                imex_dev_major=overlay.pick_free_major(),
                                dbd_backup=self.accounting and self.controllers > 1 and self._input_dbd_backup())
        self.layout = layout
        result = overlay.apply(self.config_dir, self.workdir, layout, self.database)
        for name, text in self.bin_files.items():
            (self.workdir / "bin" / name).write_text(text)
            (self.workdir / "bin" / name).chmod(0o755)
        self.overlay_result = result
        self.nodes_started = result.nodes
        for node in result.nodes:
            (self.workdir / "spool" / node).mkdir()
            (self.workdir / "tmp" / node).mkdir(parents=True)
            (self.workdir / "tmp" / node).chmod(0o1777)
        # readable by another uid (`run(user=...)`), except slurmdbd.conf and its password file (0600)
        etc = self.workdir / "etc"
        for path in [etc, *etc.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
            elif path.is_file() and path.name not in ("slurmdbd.conf", *result.secret_files):
                path.chmod(path.stat().st_mode | 0o444)
        if self.accounting and not result.cluster_name:
            raise SlurmBootError("accounting needs ClusterName in slurm.conf (the cluster slurmdbd records)")

    def _input_dbd_backup(self) -> bool:
        """The input's slurmdbd.conf names a backup slurmdbd (DbdBackupHost)."""
        path = self.config_dir / "slurmdbd.conf"
        return path.is_file() and any(line.split("=", 1)[0].strip().lower() == "dbdbackuphost"
                                      for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))

    def _spawn(self, name: str, argv: list[str], hostname: str | None = None,
               own_run: str | None = None) -> subprocess.Popen:
        out = open(self.workdir / "log" / f"{name.replace(':', '.')}.stdout", "wb")
        proc = subprocess.Popen(self._argv(argv, hostname=hostname, own_run=own_run), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=self._env(),
                                start_new_session=True)  # no terminal Ctrl-C races the teardown
        out.close()
        self._daemons[name] = proc
        return proc

    def _start_munged(self) -> None:
        m = f"{self.work}/munge"
        key = subprocess.run(self._argv(["mungekey", "-c", "-k", f"{m}/munge.key", "-b", "1024"]),
                             capture_output=True, text=True, env=self._env(), timeout=30)
        if key.returncode != 0:
            raise SlurmBootError(f"mungekey failed: {key.stderr}")
        # -F: stay in the foreground, so the PID is munged's; -f: let root run it with our paths
        self._spawn("munged", ["munged", "-F", "-f", f"--key-file={m}/munge.key", f"--socket={m}/munge.sock",
                               f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed",
                               f"--log-file={m}/munged.log"])
        sock = self.workdir / "munge" / "munge.sock"
        if not self._until(lambda: sock.exists(), 10, "munged"):
            raise SlurmBootError(f"munged did not create its socket:\n{_tail(self.workdir / 'munge/munged.log')}")

    def _until(self, ready, timeout_s: float, daemon: str) -> bool:
        """Poll `ready()` until true; raise at once if `daemon` exits meanwhile."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return True
            self._check_alive(daemon)
            time.sleep(0.1)
        return bool(ready())

    def _check_alive(self, name: str) -> None:
        proc = self._daemons[name]
        if proc.poll() is None or proc.returncode == -signal.SIGKILL:  # -9: killed by kill_controller
            return
        path = self._log_of(name)
        raise SlurmBootError(f"{name} (Slurm {self.version}, suite {self.suite}) exited with code {proc.returncode}; "
                             f"last lines of {path}:\n{_tail(path)}")

    def log_tail(self, daemon: str, lines: int = 20) -> str:
        """The last lines of a daemon's log ("slurmctld", "slurmd:<node>", ...), for a test's failure message."""
        return _tail(self._log_of(daemon), lines)

    def _log_of(self, daemon: str) -> Path:
        """The daemon's log file, or its captured stdout if it died before opening that."""
        logs = {"slurmctld": "slurmctld.log", "slurmdbd": "slurmdbd.log", "slurmdbd2": "slurmdbd.log",
                "munged": "../munge/munged.log"}
        logs.update({f"slurmctld{i + 1}": f"slurmctld{i + 1}.log" for i in range(1, self.controllers)})
        if daemon.startswith("slurmd:"):
            logs[daemon] = f"slurmd.{daemon.split(':', 1)[1]}.log"
        path = self.workdir / "log" / logs[daemon]
        if path.exists() and path.stat().st_size:
            return path
        return self.workdir / "log" / f"{daemon.replace(':', '.')}.stdout"

    def _start_slurmdbd(self) -> None:
        """slurmdbd, then the cluster registered in it before slurmctld starts.

        slurmctld registers an unknown cluster itself when it first connects (22.05, 24.11 and
        26.05 all do, creating the same `root` account and root user association), but 22.05's
        slurmdbd then pushes the new associations to a controller that is not listening yet and
        logs "error: update cluster: Connection refused". With the cluster added first, slurmctld
        finds its cluster and associations on its first connection, on every version.
        """
        # -D: foreground, so we own the PID; with a backup slurmdbd, under controller 1's name (see overlay.py)
        self._spawn("slurmdbd", ["slurmdbd", "-D"], self.layout.dbd_host if self.layout.dbd_backup else None)
        last: list[subprocess.CompletedProcess] = []

        def listed() -> bool:
            last[:] = [self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", check=False, timeout=10)]
            return last[0].returncode == 0

        if not self._until(listed, 30, "slurmdbd"):
            raise SlurmBootError(f"slurmdbd (Slurm {self.version}, suite {self.suite}) does not answer "
                                 f"`sacctmgr list cluster`:\n{last[0].stderr}\n"
                                 f"last lines of {self._log_of('slurmdbd')}:\n{_tail(self._log_of('slurmdbd'))}")
        if self.cluster_name not in last[0].stdout.split():
            self.sacctmgr("add", "cluster", self.cluster_name)
        if self.layout is not None and self.layout.dbd_backup:
            # the backup slurmdbd, under its own name (slurmdbd takes the DbdBackupHost line naming its hostname) and
            # with its own /run (PidFile): it stands by while the primary answers (slurmdbd.conf(5) DbdBackupHost)
            (self.workdir / "run-slurmdbd2").mkdir()
            proc = self._spawn("slurmdbd2", ["slurmdbd", "-D"], self.layout.controller(1)[0], "run-slurmdbd2")
            self.ns.adopt(proc.pid)

    def stop_slurmdbd(self) -> None:
        """Stop the primary slurmdbd (SIGTERM, as `systemctl stop` does): a backup slurmdbd then takes over."""
        procs.stop(self._daemons.pop("slurmdbd"), timeout_s=10)

    def _start_slurmctld(self) -> None:
        # -D: foreground, so we own the PID; -i: ignore unreadable state files
        assert self.layout is not None and self.ns is not None
        primary = self.layout.controller(0)[0] if self.controllers > 1 else None
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"], primary)
        # a missing topology.conf retries 60 s
        if not self._until(lambda: "is UP" in self._ping(), max(self.wait_idle_s, 90), "slurmctld"):
            raise SlurmBootError(f"slurmctld does not answer `scontrol ping`:\n{_tail(self._log_of('slurmctld'))}")

    def _start_backups(self) -> None:
        """Backup controllers, once the nodes are up: the slurmds then start as soon after the primary
        as with one controller (seen otherwise: the primary's first ping of every node reaches a slurmd
        not listening yet, and its forward fails)."""
        assert self.layout is not None and self.ns is not None
        for i in range(1, self.controllers):
            # -L: its own log file (SlurmctldLogFile is the primary's); its own /run, as on a host of its
            # own: a slurmctld that finds a live one in its SlurmctldPidFile kills it ("killing old slurmctld")
            name, host = f"slurmctld{i + 1}", self.layout.controller(i)[0]
            (self.workdir / f"run-{name}").mkdir()
            proc = self._spawn(name, ["slurmctld", "-D", "-L", f"{self.work}/log/{name}.log"], host, f"run-{name}")
            self.ns.adopt(proc.pid)
            if not self._until(lambda: f"at {host} is UP" in self._ping(), 30, name):
                raise SlurmBootError(f"{name} ({host}) does not answer `scontrol ping`:\n{_tail(self._log_of(name))}")

    def _ping(self) -> str:
        """`scontrol ping`'s output; "" while it hangs (a controller that is starting can)."""
        try:
            return self.run("scontrol", "ping", check=False, timeout=10).stdout
        except subprocess.TimeoutExpired:
            return ""

    def kill_controller(self, index: int = 0) -> None:
        """SIGKILL controller `index` (0: the primary), as a crash would: no state saved on the way out."""
        proc = self._daemons["slurmctld" if index == 0 else f"slurmctld{index + 1}"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def start_controller(self, index: int = 0) -> None:
        """Start controller `index` again after it exited (a takeover stops the primary, scontrol(1)), as its host
        would, under its own name; waits until `scontrol ping` shows it UP."""
        assert self.layout is not None
        name, host = ("slurmctld" if index == 0 else f"slurmctld{index + 1}"), self.layout.controller(index)[0]
        if index == 0:
            self._spawn(name, ["slurmctld", "-D", "-i"], host)
        else:
            proc = self._spawn(name, ["slurmctld", "-D", "-L", f"{self.work}/log/{name}.log"], host, f"run-{name}")
            self.ns.adopt(proc.pid)
        if not self._until(lambda: f"at {host} is UP" in self._ping(), 60, name):
            raise SlurmBootError(f"{name} ({host}) does not answer `scontrol ping`:\n{_tail(self._log_of(name))}")

    def client_bin(self, directory: Path, commands=("scontrol", "squeue", "sbatch", "srun", "scancel", "sinfo",
                                                    "sacctmgr")) -> Path:
        """A directory of wrappers, one per Slurm client command, that run it in this cluster's namespace (and
        chroot) with its SLURM_CONF: for a program of the host's (the bundle's checks/run.py under the host's
        python3, which the chroots lack) to reach this cluster through PATH."""
        directory.mkdir(parents=True, exist_ok=True)
        env = " ".join(f"{k}={v}" for k, v in self._env().items())
        for cmd in commands:
            prefix = " ".join(shlex.quote(a) for a in self._argv([cmd]))
            (directory / cmd).write_text(f'#!/bin/sh\nexec env -i {env} {prefix} "$@"\n')
            (directory / cmd).chmod(0o755)
        return directory

    def controller_log(self, index: int) -> str:
        name = "slurmctld" if index == 0 else f"slurmctld{index + 1}"
        return self._log_of(name).read_text(errors="replace")

    def _start_slurmds(self) -> None:
        for node in self.nodes_started:
            self._spawn(f"slurmd:{node}", ["slurmd", "-D", "-N", node])

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + self.wait_idle_s
        states: dict[str, dict] = {}
        while time.monotonic() < deadline:
            for name in self._daemons:
                self._check_alive(name)
            states = self.nodes()
            bad = {n: s for n, s in states.items() if "INVAL" in s["state"]}
            if bad:  # an invalid registration never heals by itself
                raise SlurmBootError(self._not_idle_report("registered as INVALID", bad))
            # IDLE+CLOUD: a CLOUD node (State=CLOUD, ParallelCluster's and slurm-gcp's nodes) whose slurmd
            # registered is as idle as any other
            if states and all(s["state"] in ("IDLE", "IDLE+CLOUD") for s in states.values()):
                return
            time.sleep(0.2)
        waiting = {n: s for n, s in states.items() if s["state"] not in ("IDLE", "IDLE+CLOUD")}
        raise SlurmBootError(self._not_idle_report(f"not IDLE after {self.wait_idle_s}s", waiting))

    def _not_idle_report(self, what: str, nodes: dict[str, dict]) -> str:
        lines = [f"{len(nodes)} node(s) {what} (Slurm {self.version}, suite {self.suite}):"]
        lines += [f"  {n}: {s['state']} {s['reason']}".rstrip() for n, s in nodes.items()]
        lines += ["problems:", *(f"  {p}" for p in self.problems())]
        lines += [f"last lines of slurmctld.log:\n{_tail(self.workdir / 'log/slurmctld.log', 20)}"]
        return "\n".join(lines)

    def _teardown(self, keep_workdir: bool) -> None:
        t = time.monotonic()
        try:
            self._stop_daemons()
        finally:
            if self.ns is not None:
                self.swept = self.ns.sweep()
                self.ns = None
            self._close_database()
            self._lap("teardown", t)
            if self._own_workdir and self.workdir and not keep_workdir and not os.environ.get("ORCHGEN_SLURM_KEEP"):
                shutil.rmtree(self.workdir, ignore_errors=True)

    def _stop_daemons(self) -> None:
        ctlds = [p for n, p in self._daemons.items() if n.startswith("slurmctld")]
        if any(p.poll() is None for p in ctlds):  # the primary, or a backup that took over
            self._quiet_run("scancel", "--quiet", "--user=root")
            self._wait_quiet(10)
            # graceful: the controller tells every registered slurmd to exit, then exits itself
            self._quiet_run("scontrol", "shutdown")
        slurmds = [p for n, p in self._daemons.items() if n.startswith("slurmd:")]
        procs.wait_gone([p.pid for p in slurmds], 10)
        for name, proc in self._daemons.items():
            if name not in ("munged", "slurmdbd", "slurmdbd2"):
                procs.stop(proc, timeout_s=0 if name.startswith("slurmd:") else 10)
        # slurmdbd after slurmctld (which sends it its last records), munged after both
        for name in ("slurmdbd", "slurmdbd2", "munged"):
            if name in self._daemons:
                procs.stop(self._daemons[name], timeout_s=0)

    def _close_database(self) -> None:
        if self._own_db is not None:
            self._own_db.stop()
            self._own_db = None

    def _wait_quiet(self, timeout_s: float) -> None:
        """Wait until no job is left (not even COMPLETING) and no slurmstepd runs.

        After srun returns, the slurmstepds still report the step's end and each slurmd still
        sends "epilog complete" to slurmctld. Shut the controller down under them and they retry
        for ~10 s (or for good) while their slurmd waits: seen as 10-25 s teardowns.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                jobs = self.run("squeue", "--noheader", check=False, timeout=5).stdout.strip()
            except subprocess.TimeoutExpired:
                return
            if not jobs and not (self.ns and self.ns.members("slurmstepd")):
                return
            time.sleep(0.1)

    def _quiet_run(self, *argv: str) -> None:
        """Run a client command during teardown: its failure must not stop the teardown."""
        try:
            self.run(*argv, check=False, timeout=10)
        except subprocess.TimeoutExpired:
            pass

    # ------------------------------------------------------------------ re-plans (issue 23)

    def apply_config(self, config_dir: Path) -> list[str]:
        """Install a re-planned config dir over the running cluster's etc/, overlaid with the same
        layout (same ports: nodes keep theirs as long as the re-plan changes only the last NodeName
        line's tail; a new node gets one of SPARE_NODE_PORTS). Tells no daemon: the caller applies it
        the way the impact class says (`reconfigure`, `restart_slurmctld`, `restart_slurmd`,
        `start_slurmd`, `stop_slurmd`). slurmdbd.conf stays as booted. Returns the nodes it adds."""
        assert self.layout is not None and self.workdir is not None
        stage = Path(tempfile.mkdtemp(prefix="replan-", dir=self.workdir))
        result = overlay.apply(Path(config_dir), stage, self.layout, self.database)
        etc = self.workdir / "etc"
        for path in sorted((stage / "etc").rglob("*")):
            rel = path.relative_to(stage / "etc")
            if path.is_dir() or rel.as_posix() in ("slurmdbd.conf", *result.secret_files):
                continue
            (etc / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, etc / rel)
            (etc / rel).chmod((etc / rel).stat().st_mode | 0o444)
        for name in sorted(result.devices):
            if not (self.workdir / "dev" / name).is_symlink():
                os.symlink("/dev/null", self.workdir / "dev" / name)
        shutil.rmtree(stage)
        added = [n for n in result.nodes if n not in self.nodes_started]
        for node in added:
            (self.workdir / "spool" / node).mkdir(exist_ok=True)
            (self.workdir / "tmp" / node).mkdir(parents=True, exist_ok=True)
            (self.workdir / "tmp" / node).chmod(0o1777)
        self.overlay_result = result
        self.nodes_started = list(result.nodes)
        return added

    def reconfigure(self) -> subprocess.CompletedProcess:
        """`scontrol reconfigure`, then wait until slurmctld answers again (from 23.11 it re-executes)."""
        # from 23.11 the re-executed slurmctld logs "Running as primary controller" once it has read its state
        # again; the old process answers pings until then, and a next reconfigure that lands in between was seen to
        # leave slurmctld silent (24.11, two reconfigures 0.4 s apart in a loaded CI run): wait for that line too
        log = self._log_of("slurmctld")
        primary = lambda: log.read_text(errors="replace").count("Running as primary controller")  # noqa: E731
        before = primary() if log.exists() and _version_tuple(self.version) >= (23, 11) else None
        result = self.run("scontrol", "reconfigure", check=False)
        if before is not None:
            self._until(lambda: primary() > before and "is UP" in self._ping(), 60, "slurmctld")
        if not self._until(lambda: "is UP" in self._ping(), 60, "slurmctld"):
            raise SlurmBootError(f"slurmctld does not answer after reconfigure:\n{_tail(self._log_of('slurmctld'))}")
        return result

    def restart_slurmctld(self) -> None:
        """Stop slurmctld (SIGTERM: it saves its state) and start it again on the same StateSaveLocation."""
        procs.stop(self._daemons["slurmctld"], timeout_s=0)
        self._start_slurmctld()

    def stop_slurmd(self, node: str) -> None:
        procs.stop(self._daemons.pop(f"slurmd:{node}"), timeout_s=0)

    def start_slurmd(self, node: str) -> None:
        self._spawn(f"slurmd:{node}", ["slurmd", "-D", "-N", node])

    def restart_slurmd(self, nodes: list[str]) -> None:
        """Restart slurmd on `nodes` (their jobs' slurmstepd processes run on meanwhile)."""
        for node in nodes:
            if f"slurmd:{node}" in self._daemons:
                self.stop_slurmd(node)
            self.start_slurmd(node)

    # ------------------------------------------------------------------ client commands

    def run(self, *argv: str, timeout: float = 60, check: bool = True,
            user: int | None = None) -> subprocess.CompletedProcess:
        """Run a Slurm client command (inside the chroot for newer suites) with SLURM_CONF set.

        `user`: a uid to run it as (its gid the same number, e.g. 65534, nobody:nogroup), for
        what a user other than root may do. Needs the default work dir (under /tmp) or one whose
        parents that uid can traverse.
        """
        result = subprocess.run(self._argv(list(argv), user), capture_output=True, text=True, env=self._env(),
                                timeout=timeout, stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            raise SlurmCommandError(self._command_report(argv, result), result)
        return result

    def _command_report(self, argv, result: subprocess.CompletedProcess) -> str:
        return (f"`{' '.join(argv)}` exited with {result.returncode} (Slurm {self.version}, suite {self.suite})\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\n"
                f"last lines of slurmctld.log:\n{_tail(self.workdir / 'log/slurmctld.log', 20)}")

    def log(self) -> str:
        """The slurmctld log so far."""
        return (self.workdir / "log" / "slurmctld.log").read_text(errors="replace")

    def optional_plugins_absent(self) -> list[str]:
        """The `optional` SPANK plugins of the booted plugstack.conf.d that this root lacks (pyxis is built
        by a site, never packaged): for those Slurm logs its failed dlopen and goes on, as on a node
        where the site has not installed it yet."""
        out = []
        for conf in sorted((self.workdir / "etc" / "plugstack.conf.d").glob("*.conf")):
            for line in conf.read_text().splitlines():
                words = line.split()
                if words[:1] == ["optional"] and len(words) > 1 and not (self.root / words[1].lstrip("/")).exists():
                    out.append(words[1])
        return out

    def problems(self) -> list[str]:
        """WARNING/error/fatal lines of slurmctld, slurmdbd and the slurmds, minus HARMLESS, each once.

        Each entry is "slurmctld: <message>", "slurmdbd: <message>", "slurmd <node>: <message>",
        or, for a message that several slurmds logged alike, "slurmd on <n> nodes: <message>".
        """
        harmless = HARMLESS + WITHOUT_CGROUP + (WITHOUT_SLURMDBD if self.overlay_result.dropped_slurmdbd else []) \
            + (WITHOUT_TASK_CGROUP if self.overlay_result.dropped_task_cgroup else []) \
            + (WITH_BACKUP if self.controllers > 1 else []) + absent_plugin_lines(self.optional_plugins_absent())
        ctld = self._problem_lines(self.workdir / "log" / "slurmctld.log", harmless)
        for i in range(1, self.controllers):
            ctld += [m for m in self._problem_lines(self.workdir / "log" / f"slurmctld{i + 1}.log", harmless)
                     if m not in ctld]
        dbd = self._problem_lines(self.workdir / "log" / "slurmdbd.log", harmless + WITH_SLURMDBD)
        by_message: dict[str, list[str]] = {}  # slurmd message -> nodes that logged it, in order
        for node in self.nodes_started:
            for message in self._problem_lines(self.workdir / "log" / f"slurmd.{node}.log", harmless):
                by_message.setdefault(message, []).append(node)
        found = [f"slurmctld: {m}" for m in ctld] + [f"slurmdbd: {m}" for m in dbd]
        for message, nodes in by_message.items():
            who = f"slurmd {nodes[0]}" if len(nodes) == 1 else f"slurmd on {len(nodes)} nodes"
            found.append(f"{who}: {message}")
        return found

    @staticmethod
    def _problem_lines(path: Path, harmless: list[re.Pattern]) -> list[str]:
        """Distinct problem messages of one log file, timestamps stripped, in order."""
        if not path.exists():
            return []
        found: list[str] = []
        for line in path.read_text(errors="replace").splitlines():
            message = _TIMESTAMP.sub("", line)
            if _PROBLEM.search(message) and not any(h.search(message) for h in harmless) and message not in found:
                found.append(message)
        return found

    def nodes(self) -> dict[str, dict]:
        """name -> {"state", "gres", "partitions", "features", "cpus", "real_memory", "reason", "raw"}."""
        return parse.nodes(self.run("scontrol", "-o", "show", "nodes").stdout)

    def partitions(self) -> dict[str, dict]:
        """name -> {"nodes", "default", "state", "max_time", "topology", "raw"}."""
        return parse.partitions(self.run("scontrol", "-o", "show", "partition").stdout)

    def topology(self, *args: str) -> str:
        """stdout of `scontrol show topology [args]`."""
        return self.run("scontrol", "show", "topology", *args).stdout

    def switches(self) -> dict[str, dict]:
        """Tree topology: name -> {"level": int, "nodes": set (expanded), "switches": set}."""
        return parse.switches(self.topology())

    def blocks(self, *args: str) -> dict[str, dict]:
        """Block topology: name -> {"nodes": set, "size": int, "aggregated": bool}."""
        return parse.blocks(self.topology(*args))

    def job(self, *srun_args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """`srun ARGS...`; raises SlurmCommandError (with the log tail) unless it exits 0."""
        result = self.run("srun", *srun_args, timeout=timeout, check=False)
        if result.returncode != 0:
            raise SlurmCommandError(self._command_report(("srun", *srun_args), result), result)
        return result

    def submit(self, script: str, *sbatch_args: str, user: int | None = None) -> str:
        """`sbatch ARGS script` (output in the work dir's jobs/); returns the job id at once.

        Raises SlurmCommandError (its `.result` holds sbatch's stderr) if the submission is refused.
        """
        n = next(self._jobs)
        if not script.startswith("#!"):
            script = "#!/bin/sh\n" + script
        path = self.workdir / "jobs" / f"job{n}.sh"
        path.write_text(script)
        path.chmod(0o755)  # readable by `user`, too
        jobs = f"{self.work}/jobs"
        argv = ("sbatch", "--parsable", f"--chdir={jobs}", f"--output={jobs}/job{n}.out", *sbatch_args,
                f"{jobs}/job{n}.sh")
        self._outputs[n] = self.workdir / "jobs" / f"job{n}.out"
        job_id = self.run(*argv, user=user).stdout.strip().split(";")[0]
        self._job_numbers[job_id] = n
        return job_id

    def batch_wait(self, script: str, *sbatch_args: str, timeout: float = 60) -> str:
        """Submit `script` with `sbatch ARGS`, wait for it to end, return its output file's text.

        Like `sbatch --wait`, but polls every 0.1 s: sbatch's own --wait polls with growing sleeps
        and costs ~10 s per job. Raises SlurmCommandError unless the job COMPLETED with exit 0.
        The job's id is `last_job_id` afterwards.
        """
        job_id = self.last_job_id = self.submit(script, *sbatch_args)
        record = self.wait_job(job_id, timeout)
        output = self._outputs[self._job_numbers[job_id]]
        text = output.read_text(errors="replace") if output.exists() else ""
        if record.get("JobState") != "COMPLETED" or record.get("ExitCode") != "0:0":
            state = f"{record.get('JobState', 'still running')} ExitCode={record.get('ExitCode')} Reason={record.get('Reason')}"
            raise SlurmCommandError(f"batch job {job_id} (sbatch {' '.join(sbatch_args)}) ended {state}\n"
                                    f"job output:\n{text}\n"
                                    f"last lines of slurmctld.log:\n{_tail(self.workdir / 'log/slurmctld.log', 20)}")
        return text

    def wait_job(self, job_id: str, timeout: float = 60) -> dict[str, str]:
        """The job's `scontrol show job` record once it has ended ({} and cancelled on timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            record = self.job_record(job_id)
            if record.get("JobState") in _JOB_ENDED:
                return record
            time.sleep(0.1)
        self.run("scancel", job_id, check=False)
        return {}

    def job_record(self, job_id: str) -> dict[str, str]:
        """`scontrol -o show job ID` as a dict ({} once the controller has forgotten the job)."""
        found = parse.records(self.run("scontrol", "-o", "show", "job", job_id, check=False).stdout)
        return found[0] if found else {}

    def job_tres(self, job_id: str) -> dict[str, str]:
        """The TRES the controller allocated to the job: {"cpu": "1", "mem": "4000M", "node": "1",
        "billing": "32", "gres/gpu": "2"}; empty while it is pending. scontrol prints them as
        `TRES=` on 22.05 and as `AllocTRES=` (beside `ReqTRES=`) from 23.x on."""
        record = self.job_record(job_id)
        return parse.tres(record.get("AllocTRES", record.get("TRES", "")))

    def billing(self, job_id: str) -> float:
        """The billing TRES the controller computed for the job (TRESBillingWeights applied)."""
        tres = self.job_tres(job_id)
        if "billing" not in tres:
            raise SlurmCommandError(f"job {job_id} has no billing TRES yet: {self.job_record(job_id)}")
        return float(tres["billing"])

    def wait_for(self, probe, timeout: float = 30, what: str = "condition"):
        """Poll `probe()` every 0.1 s until it returns something truthy, and return that.

        For what the daemons do asynchronously: slurmdbd pushes sacctmgr's changes to slurmctld,
        and slurmctld sends job records to slurmdbd, each a moment later.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if not value:
            raise SlurmCommandError(f"timed out after {timeout} s waiting for {what} (Slurm {self.version}, "
                                    f"suite {self.suite})\nproblems: {self.problems()}")
        return value

    # ------------------------------------------------------------------ accounting (accounting=True)

    def _need_accounting(self) -> None:
        if not self.accounting:
            raise RuntimeError("this cluster runs without slurmdbd: boot it with SlurmCluster(..., accounting=True)")

    def sacctmgr(self, *args: str, user: int | None = None) -> str:
        """`sacctmgr -i ARGS` (no confirmation prompt); returns stdout, raises on failure."""
        self._need_accounting()
        return self.run("sacctmgr", "-i", *args, user=user).stdout

    def add_accounts(self, shares: dict[str, int], users: tuple[str, ...] = ("root",),
                     parent: str = "root", wait_s: float = 30) -> None:
        """Accounts with their fair-share shares under `parent`, `users` in each; waits until
        slurmctld (sshare) knows them all, so the next job can use them.

            c.add_accounts({"nlp": 3, "vision": 1})   # root may then submit with -A nlp or -A vision
        """
        for account, share in shares.items():
            self.sacctmgr("add", "account", account, f"cluster={self.cluster_name}", f"parent={parent}",
                          f"fairshare={share}")
        for user in users:
            self.sacctmgr("add", "user", user, f"account={','.join(shares)}", f"cluster={self.cluster_name}")
        want = {(a, u) for a in shares for u in users} | {(a, "") for a in shares}
        self.wait_for(lambda: want <= {(r["account"], r["user"]) for r in self.sshare()}, wait_s,
                      f"slurmctld to learn accounts {sorted(shares)} with users {list(users)}")

    def associations(self, *where: str) -> list[dict[str, str]]:
        """`sacctmgr list associations [WHERE...]`, one dict per association, keyed by sacctmgr's
        column names: Cluster, Account, User, Partition, Share, ParentName, QOS, Def QOS, GrpTRES, MaxTRES."""
        self._need_accounting()
        out = self.run("sacctmgr", "-P", "list", "associations", *where,
                       "format=Cluster,Account,User,Partition,Share,ParentName,QOS,DefaultQOS,GrpTRES,MaxTRES").stdout
        return parse.table(out)

    def config(self) -> dict[str, str]:
        """`scontrol show config` as key -> value: what the running slurmctld took from slurm.conf."""
        out = {}
        for line in self.run("scontrol", "show", "config").stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
        return out

    def sshare(self, *args: str) -> list[dict]:
        """`sshare -a -l -P [ARGS]` as slurmctld computes it, one dict per association, in tree order:
        account, user ("" for an account's own row), parent, level, raw_shares, norm_shares,
        raw_usage, norm_usage, effective_usage, fairshare, level_fs (numbers as int/float; None
        where sshare prints nothing), raw (the row as printed)."""
        self._need_accounting()
        return parse.sshare(self.run("sshare", "-a", "-l", "-P", *args).stdout)

    def shares(self) -> dict[str, dict]:
        """sshare's account rows by account name (the `root` account included)."""
        return {r["account"]: r for r in self.sshare() if not r["user"]}

    def sacct(self, *args: str, fields: str = "JobID,JobName,Account,User,Partition,State,ExitCode,AllocTRES,"
                                               "ReqTRES,Elapsed") -> list[dict[str, str]]:
        """`sacct -a -P -o FIELDS [ARGS]` (what slurmdbd recorded), one dict per job or step, keyed by
        sacct's column names. E.g. c.sacct("-j", job_id, "-X") for the job's own allocation row.

        Unless ARGS give a start time, every job since 2000 is listed: sacct's own default (since
        midnight) would lose a test's early jobs when it runs across midnight.
        """
        self._need_accounting()
        if not any(a.startswith(("-S", "--starttime")) for a in args):
            args = ("--starttime=2000-01-01", *args)
        return parse.table(self.run("sacct", "-a", "-P", "-o", fields, *args).stdout)

    def sacct_job(self, job_id: str, wait_s: float = 30, ended: bool = True) -> dict:
        """The job's allocation row in slurmdbd (`sacct -X -j ID`), waiting until it is there (and,
        with `ended`, until slurmdbd has its end too); AllocTRES parsed into `alloc_tres`."""
        def probe():
            rows = self.sacct("-X", "-j", job_id)
            if rows and (not ended or rows[0]["State"].split()[0] in _JOB_ENDED):
                return rows[0]
            return None
        row = dict(self.wait_for(probe, wait_s, f"slurmdbd's record of job {job_id}"))
        row["alloc_tres"] = parse.tres(row.get("AllocTRES", ""))
        return row


def absent_plugin_lines(plugins: list[str]) -> list[re.Pattern]:
    """What Slurm logs, and only that, for an `optional` SPANK plugin it cannot load."""
    return [re.compile(rf"(error: plugin_load_from_file: dlopen\({re.escape(p)}\): {re.escape(p)}: cannot open "
                       rf"shared object file: No such file or directory|error: spank: {re.escape(p)}: Dlopen of "
                       rf"plugin file failed)$") for p in plugins]
