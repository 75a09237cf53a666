"""A private MariaDB server for slurmdbd: its own datadir, unix socket and 127.0.0.1 port.

The host's MariaDB (Debian 12: 10.11, package mariadb-server) serves every suite: a slurmdbd in a
trixie or forky chroot shares the host's network namespace, so it reaches 127.0.0.1:<port> like
the host's own slurmdbd does, and the chroots need no database server of their own.

Nothing of the system's MariaDB is used or touched: `--no-defaults` skips /etc/mysql, the datadir
is made by `mariadb-install-db` under our directory, the server listens on 127.0.0.1 only, on a
free port, and is stopped by PID. Root reaches it only through the unix socket (unix_socket auth,
as root); slurmdbd logs in over TCP as a user with a password, granted its own database only
(`new_database`), so one server can hold the databases of many clusters (one per test session).

    with MariaDB(tmp / "db") as db:
        acct = db.new_database()        # Database(name, user, password, host, port)
"""
from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .net import free_port_block
from .procs import stop

# Server settings. Why each:
_SERVER_OPTIONS = [
    "--bind-address=127.0.0.1",   # never reachable from outside this machine
    "--skip-name-resolve",        # users are 'name'@'127.0.0.1': no DNS lookups on connect
    "--skip-log-bin",
    # slurmdbd checks these at start and logs an error below its recommended values
    # ("Database settings not recommended values: innodb_buffer_pool_size": 22.05 at 128M, 24.11 at 1G)
    "--innodb-buffer-pool-size=2G",  # reserved, not touched: RSS stays ~150 MB
    "--innodb-log-file-size=64M",
    "--innodb-lock-wait-timeout=900",
    "--innodb-flush-log-at-trx-commit=0",  # a throw-away database: do not fsync each commit
    "--max-connections=500",
]
BINARIES = ("mariadbd", "mariadb-install-db", "mariadb")


@dataclass
class Database:
    """What slurmdbd.conf needs to reach one database (StorageHost/Port/User/Pass/Loc)."""

    name: str
    user: str
    password: str
    host: str
    port: int


class MariaDB:
    """One mariadbd process. `with MariaDB(dir) as db:` starts it (~1 s) and stops it by PID."""

    def __init__(self, directory: Path, defaults_file: Path | None = None):
        """`defaults_file`: an option file (e.g. a bundle's mariadb-slurm.cnf) the server reads
        instead of none; its settings replace the harness's own of the same names."""
        self.defaults_file = Path(defaults_file) if defaults_file else None
        self.dir = Path(directory)
        self.datadir = self.dir / "data"
        self.socket = self.dir / "mysqld.sock"
        self.log = self.dir / "mysqld.log"
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.databases: list[Database] = []
        self.timings: dict[str, float] = {}

    def __enter__(self) -> "MariaDB":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        t = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        # root over the socket only (unix_socket auth, the default); no test database
        init = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}", "--user=root",
                               "--auth-root-authentication-method=socket", "--skip-test-db",
                               "--innodb-log-file-size=64M"],
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if init.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed ({init.returncode}):\n{init.stdout}{init.stderr}")
        self.timings["install_db"] = round(time.monotonic() - t, 3)
        self.port = free_port_block(1)
        defaults, options = "--no-defaults", list(_SERVER_OPTIONS)
        if self.defaults_file is not None:
            defaults = f"--defaults-file={self.defaults_file}"
            given = set(_option_names(self.defaults_file.read_text()))
            options = [o for o in options if _option_names(o.lstrip("-"))[0] not in given]
        argv = ["mariadbd", defaults, f"--datadir={self.datadir}", "--user=root", f"--socket={self.socket}",
                f"--port={self.port}", f"--pid-file={self.dir}/mysqld.pid", f"--log-error={self.log}",
                f"--tmpdir={self.dir}", *options]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited with code {self.proc.returncode}:\n{self._log_tail()}")
            if self.socket.exists() and self._client("SELECT 1", check=False).returncode == 0:
                self.timings["start"] = round(time.monotonic() - t, 3)
                return
            time.sleep(0.1)
        raise RuntimeError(f"mariadbd did not answer within 60 s:\n{self._log_tail()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()  # mariadbd shuts down cleanly on SIGTERM
            stop(self.proc, timeout_s=20)
            self.proc = None

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "".join(self.log.read_text(errors="replace").splitlines(True)[-lines:])
        except OSError:
            return f"({self.log} missing)"

    def _client(self, sql: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(["mariadb", "--no-defaults", f"--socket={self.socket}", "--user=root",
                                 "--batch", "--skip-column-names", "-e", sql],
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            raise RuntimeError(f"SQL failed: {sql}\n{result.stderr}")
        return result

    def sql(self, statement: str) -> list[list[str]]:
        """Run SQL as root; returns the rows (tab-separated columns split)."""
        out = self._client(statement).stdout
        return [line.split("\t") for line in out.splitlines()]

    def new_database(self, prefix: str = "slurm") -> Database:
        """An empty database and a user with a random password, allowed that database only."""
        n = len(self.databases) + 1
        name = f"{prefix}_acct_{n}_{secrets.token_hex(3)}"
        db = Database(name=name, user=f"{prefix}_{n}_{secrets.token_hex(3)}", password=secrets.token_hex(16),
                      host="127.0.0.1", port=self.port)
        self.sql(f"CREATE DATABASE `{db.name}`; "
                 f"CREATE USER '{db.user}'@'127.0.0.1' IDENTIFIED BY '{db.password}'; "
                 f"GRANT ALL PRIVILEGES ON `{db.name}`.* TO '{db.user}'@'127.0.0.1'")
        self.databases.append(db)
        return db

    def drop_database(self, db: Database) -> None:
        """Free a cluster's database on a shared server once the cluster is gone."""
        self.sql(f"DROP DATABASE IF EXISTS `{db.name}`; DROP USER IF EXISTS '{db.user}'@'127.0.0.1'")


def _option_names(text: str) -> list[str]:
    """Option names of an option file's lines (or of one `name=value`), normalised: `-` as `_`,
    without MariaDB's `loose-` prefix."""
    names = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("["):
            name = line.split("=", 1)[0].strip().replace("-", "_")
            names.append(name[len("loose_"):] if name.startswith("loose_") else name)
    return names


def installed() -> str | None:
    """None if MariaDB's server and tools are here, else what is missing."""
    missing = [b for b in BINARIES if not shutil.which(b, path="/usr/sbin:/usr/bin:/sbin:/bin")]
    return f"{', '.join(missing)} not installed (package mariadb-server)" if missing else None
