"""The bundle's bring-up (bringup/up.sh, bringup/apply.py) for real: bare Debian hosts made on this machine
(tests/bringupharness: debootstrap roots, own hostname, PID and mount namespaces, sshd on 127.0.0.N) go from a
bare OS to a highly available Slurm cluster (issue 38: slurmctld on ctl1 and its backup on ctl2 over a shared
StateSaveLocation, slurmdbd on each against the site's MariaDB on db1, two slurmd), pass the production checks
(the takeover check hands control to ctl2 and back with a job running), run a 2-node GPU job; the primary
slurmdbd fails and its backup keeps accounting; every host shares the one munge key (kept outside the bundle); a
second run changes nothing; a run after munged stopped and dpkg was cut short on one node repairs both; three
re-plans are applied with a job running through each, both controllers restarted where the impact table says.
The hosts start what their packages start at install (munged with its own key, MariaDB), as a fresh Debian does.
This is Debian 12 (Slurm 22.05); Debian 13 (Slurm 24.11, MariaDB 11.8) is brought up, and re-planned, by the real
`pulumi up` in tests/test_pulumi_up_real.py.

What the harness changes in the bundle to run here: tests/slurmharness/overlay.py, BRINGUP_CHANGES.
Every step is logged (with its timing) to <tmp>/bringup.log; the actions each re-plan used are printed.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests._consumers import require
from tests.bringupharness.hosts import SLURMD_RUNS, Hosts
from tests.bringupharness.run import Site, failure, plan, recap

FLEET = Path(__file__).parent / "data" / "bringup" / "fleet.yaml"
pytestmark = [pytest.mark.slurm, pytest.mark.chroot]
# The site's shared filesystem for StateSaveLocation (NFS on a real site; here one directory bind-mounted into
# both controllers, _state_save_shared)
STATE = "/shared/slurmctld"
# the bundle's hosts (db1, the site's database server, is not one: the bring-up never touches it)
SLURM_HOSTS = ("ctl1", "ctl2", "gpu01", "gpu02")


def _ha(text: str) -> str:
    """The bring-up fleet (its one controller and accounting host, shared with the other bring-up tests) as a site
    with paired controllers runs it: ctl1 and ctl2, StateSaveLocation on the filesystem both mount, and accounting
    on the site's database server db1 (options.slurm.accounting.storage_host), so that a backup slurmdbd runs on
    ctl2 beside the primary on ctl1 (DbdBackupHost)."""
    one = "controllers: [ctl1]\n    accounting: db1\n"
    assert one in text and "\noptions:\n" in text, text
    return text.replace(one, "controllers: [ctl1, ctl2]\n").replace(
        "\noptions:\n", f"\noptions:\n  slurm:\n    state_save_location: {STATE}\n"
                         "    accounting: {storage_host: db1}\n")


def _fleet(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _consumers() -> None:
    require(os.geteuid() == 0, "needs root (debootstrap, overlay mounts, namespaces)")
    require(shutil.which("debootstrap"), "debootstrap not installed (scripts/test.sh installs it)")
    require(shutil.which("ssh") and shutil.which("ssh-keygen"), "openssh-client not installed")
    require(shutil.which("ansible-playbook") or (Path(os.sys.executable).parent / "ansible-playbook").exists(),
            "ansible-core not installed (pip install -e '.[test]')")


def _running(hosts: Hosts, job: str) -> bool:
    out = hosts.ssh("ctl1", f"squeue -h -j {job} -o %T", check=False)
    return out.stdout.strip() == "RUNNING"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    _consumers()
    work = tmp_path_factory.mktemp("bringup-bookworm")
    with Hosts("bookworm", work / "hosts") as hosts:
        for name, gpus in [("ctl1", 0), ("ctl2", 0), ("db1", 0), ("gpu01", 2), ("gpu02", 2)]:
            hosts.boot(hosts.add(name, gpus=gpus))
            # the site's users, as its directory (LDAP) gives every host before Slurm comes: alice (tenant nlp)
            # and ops, an automation account (slurmctld maps accounting's user names to uids as it loads them)
            hosts.ssh(name, "useradd -m -u 5001 -s /bin/sh alice && useradd -m -u 5002 -s /bin/sh ops")
        site = Site(hosts, work, legacy=True)
        yield hosts, site
        print(f"bring-up log: {site.log}")


def _one_cluster_key(hosts: Hosts, site, bundle: Path) -> None:
    """The packages started munged with keys of their own at install; after the bring-up every host runs
    munged with the one cluster key, which lives at vars.yaml's ~/.config path (the operator's home), not in
    the bundle: a credential made on one host decodes on another."""
    key = site.home / ".config" / "orchgen" / "bringup-lab" / "munge.key"
    assert key.is_file() and key.stat().st_mode & 0o077 == 0, key
    assert not [p for p in bundle.rglob("*") if "munge.key" in p.name or p.name == "~"], "a key inside the bundle"
    sums = {h: hosts.ssh(h, "sha256sum /etc/munge/munge.key").stdout.split()[0] for h in SLURM_HOSTS}
    assert len(set(sums.values())) == 1, sums
    cred = hosts.ssh("ctl1", "munge -n").stdout.strip()
    for h in SLURM_HOSTS[1:]:
        assert "STATUS:          Success" in hosts.ssh(h, f"echo '{cred}' | unmunge").stdout, h


# A package whose first configure kills dpkg (SIGKILL to its parent, as a run cut short by Ctrl-C or a lost connection
# leaves it): dpkg's journal stays in /var/lib/dpkg/updates/ and the package half-configured, so apt refuses every
# install until `dpkg --configure -a`, which configures it (the second configure exits 0).
CUT_SHORT_CONTROL = """Package: orchgen-cut-short
Version: 1.0
Architecture: all
Maintainer: orchgen tests <tests@orchgen.invalid>
Description: a package whose first configure kills dpkg (a bring-up cut short)
"""
CUT_SHORT_POSTINST = """#!/bin/sh
[ -e /var/lib/orchgen-cut-short ] && exit 0
touch /var/lib/orchgen-cut-short
kill -KILL $PPID
sleep 5
"""


def _dpkg_cut_short(hosts: Hosts, name: str, work: Path) -> None:
    """dpkg killed half-way on host `name`: apt there says so and refuses to install (checked, so the damage is real)."""
    pkg = work / "cut-short"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(CUT_SHORT_CONTROL)
    (pkg / "DEBIAN" / "postinst").write_text(CUT_SHORT_POSTINST)
    (pkg / "DEBIAN" / "postinst").chmod(0o755)
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(hosts.hosts[name].root / "tmp" / "cut.deb")],
                   check=True, capture_output=True)
    assert hosts.ssh(name, "dpkg -i /tmp/cut.deb", check=False).returncode != 0  # killed
    said = hosts.ssh(name, "apt-get install -y -q hostname", check=False)
    assert said.returncode != 0 and "dpkg was interrupted" in said.stdout + said.stderr, said.stdout + said.stderr


def _host_down_then_back(hosts: Hosts, site, bundle: Path) -> None:
    """gpu02 powered off (issue 33: a run with a host down): the run reaches the other hosts, changes nothing there,
    says which host did not answer, and exits non-zero; the cluster keeps running jobs on the others. gpu02 then
    comes back with sshd alone (its munged and slurmd not started: `Hosts.power_off`), for the next run to repair."""
    hosts.power_off("gpu02")
    run = site.up(bundle, "--skip-tags", "checks")
    assert run.returncode != 0, run.stdout[-4000:]
    said = " ".join(run.stdout.split())
    assert "apply: gpu02 did not answer" in said, run.stdout[-6000:] + run.stderr[-2000:]
    rc = recap(run.stdout)
    assert rc["gpu02"]["unreachable"] > 0, rc
    assert {h: (r["changed"], r["failed"], r["unreachable"]) for h, r in rc.items() if h != "gpu02"} == \
        dict.fromkeys(("ctl1", "ctl2", "db1", "gpu01"), (0, 0, 0)), run.stdout[-6000:]
    assert hosts.ssh("ctl1", "srun -N1 -w gpu01 hostname").stdout.split() == ["gpu01"]
    hosts.boot(hosts.hosts["gpu02"])


def _munge_stopped_on_one_node_is_repaired(hosts: Hosts, site, bundle: Path, work: Path) -> None:
    """munged stopped on one node (killed: no init system here), and a dpkg run cut short there (issue 33: a run
    killed half-way); the next run finishes dpkg's work, starts munged again with the cluster key, and that node
    runs jobs. The same run starts ctl1's slurmdbd, which _slurmdbd_fails_over killed, and nothing else there: the
    primary slurmdbd then has control back from ctl2's."""
    # (after _host_down_then_back munged is already down there: the host came back without it; stopped by hand
    # while the host runs, the Debian 13 test's `pulumi up` repairs it)
    hosts.ssh("gpu02", "pid=$(cat /run/munge/munged.pid 2>/dev/null) || exit 0; "
                       "[ \"$(cat /proc/$pid/comm 2>/dev/null)\" = munged ] || exit 0; kill $pid; "
                       "for i in $(seq 50); do kill -0 $pid 2>/dev/null || exit 0; sleep 0.1; done; exit 1")
    assert hosts.ssh("gpu02", "munge -n", check=False).returncode != 0  # stopped indeed
    _dpkg_cut_short(hosts, "gpu02", work)
    run = site.up(bundle, "--skip-tags", "checks")
    assert run.returncode == 0, failure(run)
    changed = {h: r["changed"] for h, r in recap(run.stdout).items()}
    assert changed["gpu02"] > 0 and changed["gpu01"] == 0 and changed["ctl2"] == 0, changed
    assert changed["ctl1"] == 1 and "slurmdbd: started" in run.stdout, run.stdout[-6000:]  # the primary slurmdbd again
    assert "bringup-lab" in hosts.ssh("ctl1", "sacctmgr -n -P list cluster format=cluster").stdout.split()
    for _ in range(60):  # the backup gives control back once it sees the primary (slurmdbd's backup loop)
        log = hosts.ssh("ctl2", "cat /var/log/slurm/slurmdbd.log").stdout
        if "Backup has given up control" in log.split("Taking Control", 1)[-1]:
            break
        time.sleep(1)
    assert "Backup has given up control" in log.split("Taking Control", 1)[-1], log[-3000:]
    assert not hosts.ssh("gpu02", "dpkg --audit; ls /var/lib/dpkg/updates").stdout.strip()  # dpkg's work finished
    hosts.ssh("gpu02", "dpkg --purge orchgen-cut-short >/dev/null && rm /var/lib/orchgen-cut-short /tmp/cut.deb")
    cred = hosts.ssh("ctl1", "munge -n").stdout.strip()
    assert "STATUS:          Success" in hosts.ssh("gpu02", f"echo '{cred}' | unmunge").stdout
    job = hosts.ssh("ctl1", "srun -N2 -w gpu01,gpu02 hostname").stdout.split()
    assert sorted(job) == ["gpu01", "gpu02"], job


class _Syslog:
    """A syslog socket at a host's /dev/log (the roots run no syslog daemon), read by a thread as a syslog daemon
    reads it (a socket no one reads blocks its writers, sshd's PAM modules among them): what PAM modules log
    there (pam_slurm_adopt's "Process PID adopted into job JOB") is kept for the test."""

    def __init__(self, hosts: Hosts, name: str) -> None:
        self.path = hosts.hosts[name].root / "dev" / "log"
        self.path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.path.chmod(0o666)
        self.sock.settimeout(0.2)
        self.lines: list[str] = []
        self.open = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while self.open:
            try:
                self.lines.append(self.sock.recv(65536).decode(errors="replace"))
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return

    def take(self) -> str:
        """What was logged since the last take (after a moment for the datagrams in flight)."""
        time.sleep(0.3)
        out, self.lines[:] = "\n".join(self.lines), []
        return out

    def close(self) -> None:
        self.open = False
        self.thread.join(timeout=5)
        self.sock.close()
        self.path.unlink(missing_ok=True)


def _containment_and_hygiene(hosts: Hosts) -> None:
    """Containment whole and the job epilog, on gpu01 as the bring-up left it (issue 38).

    The site's users (made on every host before the bring-up, see `cluster`): alice (tenant nlp) and ops.
    - ssh as alice without a job there: refused by pam_slurm_adopt; ops too, until it is in the admin group
      (options.slurm.admin_group, default slurm-admins, which the bring-up made), then let in by pam_access;
    - alice's job running there: her ssh is let in and adopted into that job's extern step, as pam_slurm_adopt
      itself logs it, by the sshd process that is her session's ancestor. The job's cgroup cannot be shown:
      these hosts run proctrack/linuxproc and no cgroup plugin (BRINGUP_CHANGES: cgroup writes fail here), so
      /proc/PID/cgroup names the host's cgroup, and is only printed;
    - pam_systemd is on in no file sshd includes (the roots have no libpam-systemd: nothing to turn off here);
    - her job leaves a file in /dev/shm; once it ends the epilog (Epilog=/etc/slurm/epilog.d/*) has removed it."""
    t = time.monotonic()
    key = hosts.key.with_suffix(".pub").read_text().strip()
    for u in ("alice", "ops"):
        hosts.ssh("gpu01", f"install -d -o {u} -m 0700 /home/{u}/.ssh && echo '{key}' >/home/{u}/.ssh/authorized_keys "
                           f"&& chown {u} /home/{u}/.ssh/authorized_keys")
    stack = hosts.ssh("gpu01", "cat /etc/pam.d/sshd").stdout
    assert "account sufficient pam_access.so accessfile=/etc/security/access-slurm-adopt.conf\n" \
           "account required pam_slurm_adopt.so" in stack, stack
    assert hosts.ssh("gpu01", "grep -En '^[[:space:]]*-?session.*pam_systemd' /etc/pam.d/sshd "
                              "/etc/pam.d/common-session", check=False).returncode == 1
    log = _Syslog(hosts, "gpu01")
    try:
        # LogLevel INFO: ssh shows what the server's PAM said (a banner), as a user's ssh does
        no_job = hosts.ssh("gpu01", "true", user="alice", check=False, log_level="INFO")
        assert no_job.returncode == 255, (no_job.returncode, no_job.stderr)
        assert "Access denied by pam_slurm_adopt: you have no active jobs on this node" in no_job.stderr, no_job.stderr
        assert hosts.ssh("gpu01", "true", user="ops", check=False).returncode == 255  # not an admin yet
        hosts.ssh("gpu01", "gpasswd -a ops slurm-admins")
        assert hosts.ssh("gpu01", "id -nG", user="ops").stdout.split()[-1] == "slurm-admins"  # in, with no job

        job = hosts.ssh("ctl1", "runuser -u alice -- sbatch --parsable -N1 -w gpu01 -t 5 -D /tmp -o /dev/null "
                                "--wrap 'echo left >/dev/shm/orchgen-left-$SLURM_JOB_ID; sleep 600'").stdout.strip()
        for _ in range(100):
            if _running(hosts, job) and hosts.ssh("gpu01", f"test -f /dev/shm/orchgen-left-{job}",
                                                  check=False).returncode == 0:
                break
            time.sleep(0.2)
        assert hosts.ssh("gpu01", f"stat -c %U /dev/shm/orchgen-left-{job}").stdout.strip() == "alice"
        log.take()
        inside = hosts.ssh("gpu01", "p=$$; while [ \"$p\" -gt 1 ]; do echo $p; p=$(cut -d' ' -f4 /proc/$p/stat); done; "
                                    "cat /proc/self/cgroup", user="alice")
        ancestors = {int(x) for x in inside.stdout.split() if x.isdigit()}
        adopted = re.findall(r"Process (\d+) adopted into job (\d+)", log.take())
        assert adopted and adopted[-1][1] == job and int(adopted[-1][0]) in ancestors, (adopted, inside.stdout)
        print(f"alice's ssh with job {job}: adopted (pid {adopted[-1][0]}); its /proc/self/cgroup here: "
              f"{inside.stdout.split()[-1]}")
    finally:
        log.close()

    hosts.ssh("ctl1", f"scancel {job}")
    for _ in range(150):
        if not hosts.ssh("ctl1", f"squeue -h -j {job}", check=False).stdout.strip():
            break
        time.sleep(0.2)
    assert hosts.ssh("gpu01", f"ls /dev/shm/orchgen-left-{job}", check=False).returncode != 0, "the epilog left it"
    print(f"containment and epilog checks: {time.monotonic() - t:.1f} s")


# One line of the Prometheus text format (https://prometheus.io/docs/instrumenting/exposition_formats/): a sample
# `name{label="value",...} value [timestamp]`, or a `# HELP`/`# TYPE` comment; any other `#` line is a comment
_SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? '
                     r'([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|NaN|Inf))(?: -?[0-9]+)?')
_TYPE = re.compile(r"# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)")


def _prometheus_samples(text: str) -> dict[str, dict[tuple, float]]:
    """{metric name: {sorted label pairs: value}}, strictly: a line that is not the text format fails, and so does
    a sample whose metric (or, for a histogram or summary, its base name) has no TYPE line."""
    types, out = {}, {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            if (m := _TYPE.fullmatch(line)):
                types[m.group(1)] = m.group(2)
            continue
        m = _SAMPLE.fullmatch(line)
        assert m, f"not Prometheus text format: {line!r}"
        name = m.group(1)
        base = re.sub(r"_(sum|count|bucket)$", "", name)
        assert name in types or types.get(base) in ("histogram", "summary"), f"{name}: no TYPE"
        labels = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
        out.setdefault(name, {})[labels] = float(m.group(3))
    return out


def _telemetry(hosts: Hosts, bundle: Path) -> None:
    """The Slurm plane's telemetry as the bring-up left it (issue 38), scraped as the bundle's prometheus-slurm.yaml
    asks: Debian's node exporter answers on every host (on its own address: BRINGUP_CHANGES) and its text parses;
    on ctl1 its textfile collector serves the bundle's Slurm exporter (Slurm 22.05 serves no metrics of its own),
    which reports the two idle nodes and the partitions' four GPUs from the real sinfo, the jobs pending on resources
    (and not the held or dependent ones beside them) from the real squeue, and the production checks' results of the
    bring-up's run. A recorded NCCL run that fell back to sockets, judged by the checks as installed
    on ctl1, is then served as orchgen_nccl_socket_fallback 1 (what the SlurmNCCLOnSockets alert reads). Every
    slurm_*/orchgen_* metric the alert rules name is served."""
    import json
    import shlex
    import urllib.request

    import yaml

    t = time.monotonic()
    scrape = yaml.safe_load((bundle / "slurm" / "prometheus-slurm.yaml").read_text())["scrape_configs"]
    rules = yaml.safe_load((bundle / "slurm" / "prometheus-slurm-rules.yaml").read_text())["groups"][0]["rules"]
    node_job = next(j for j in scrape if j["job_name"] == "slurm-node-exporter")
    targets = node_job["static_configs"][0]["targets"]
    assert sorted(targets) == [f"{h}:9100" for h in SLURM_HOSTS], targets
    assert {j["job_name"] for j in scrape} == {"slurm-node-exporter", "slurm-dcgm-exporter"}  # 22.05: no slurmctld's

    def scraped(name: str) -> dict[str, dict[tuple, float]]:
        port = targets[0].split(":")[1]
        with urllib.request.urlopen(f"http://{hosts.hosts[name].address}:{port}/metrics", timeout=10) as r:
            assert r.status == 200
            return _prometheus_samples(r.read().decode())

    for name in SLURM_HOSTS[1:]:
        got = scraped(name)
        assert "node_exporter_build_info" in got and "node_memory_MemAvailable_bytes" in got, (name, sorted(got)[:20])
    ctl = scraped("ctl1")
    assert ctl["orchgen_slurm_nodes"] == {(("state", "idle"),): 2.0}, ctl["orchgen_slurm_nodes"]
    assert ctl["slurm_nodes_drain"] == {(): 0.0} and ctl["orchgen_slurm_controllers_up"] == {(): 2.0}
    assert ctl["slurm_partition_gpus"] == {(("partition", "a100"),): 4.0, (("partition", "all"),): 4.0}
    assert set(ctl["slurm_partition_jobs_pending"].values()) == {0.0}
    assert {k[0][1]: v for k, v in ctl["orchgen_check_ok"].items()} == \
        {"allocation": 1.0, "gres": 1.0, "health": 1.0, "takeover": 1.0}, ctl["orchgen_check_ok"]
    assert "orchgen_nccl_socket_fallback" not in ctl  # the bring-up's run skipped nccl (no GPUs, no fabric here)

    # SlurmGPUsPendingWhileIdle's inputs from a real queue: one GPU of gpu01 taken, a job for 2 GPUs on each of two
    # nodes pending, so 3 GPUs idle while it waits (the exporter run again, as its timer does)
    # one after the other: the 1-GPU job running first (submitted together, the scheduler may start the 2-node job
    # first when gpu01's allocation is a pass late), then the 2-node job pending on Resources
    def submit(args: str) -> str:
        return hosts.ssh("ctl1", f"sbatch --parsable {args} -t 5 -D /tmp -o /dev/null --wrap 'sleep 300'").stdout.strip()

    jobs = [submit("-N1 -w gpu01 --gres=gpu:1")]
    for _ in range(150):
        if _running(hosts, jobs[0]):
            break
        time.sleep(0.2)
    assert _running(hosts, jobs[0]), hosts.ssh("ctl1", f"squeue -j {jobs[0]}").stdout
    jobs.append(submit("-N2 --gres=gpu:2"))
    for _ in range(150):
        if hosts.ssh("ctl1", f"squeue -h -j {jobs[1]} -o '%T %r'").stdout.split() == ["PENDING", "Resources"]:
            break
        time.sleep(0.2)
    assert hosts.ssh("ctl1", f"squeue -h -j {jobs[1]} -o '%T %r'").stdout.split() == ["PENDING", "Resources"]
    # beside it two jobs that cannot start on the idle GPUs: one held (sbatch -H: JobHeldUser) and one waiting on the
    # running job (Dependency); Slurm counts them pending, the alert's count of jobs pending on resources or priority
    # does not (squeue(1) JOB REASON CODES)
    jobs.append(submit("-H -N1 --gres=gpu:1"))
    jobs.append(submit(f"-d afterok:{jobs[0]} -N1 --gres=gpu:1"))
    reasons = lambda: hosts.ssh("ctl1", f"squeue -h -j {','.join(jobs[1:])} -O JobID:12,State:10,Reason:20").stdout  # noqa: E731
    want = {jobs[1]: ["PENDING", "Resources"], jobs[2]: ["PENDING", "JobHeldUser"], jobs[3]: ["PENDING", "Dependency"]}
    for _ in range(150):
        if {r.split()[0]: r.split()[1:] for r in reasons().splitlines()} == want:
            break
        time.sleep(0.2)
    assert {r.split()[0]: r.split()[1:] for r in reasons().splitlines()} == want, reasons()
    hosts.ssh("ctl1", "/usr/local/sbin/orchgen-slurm-metrics")
    ctl = scraped("ctl1")
    hosts.ssh("ctl1", f"scancel {' '.join(jobs)}")
    per = {m: {k[0][1]: v for k, v in ctl[m].items()}
           for m in ("slurm_partition_gpus", "slurm_partition_jobs_gpus_alloc", "slurm_partition_jobs_pending",
                     "orchgen_slurm_partition_jobs_pending_resources")}
    assert per == {"slurm_partition_gpus": {"a100": 4.0, "all": 4.0},
                   "slurm_partition_jobs_gpus_alloc": {"a100": 0.0, "all": 1.0},
                   "slurm_partition_jobs_pending": {"a100": 0.0, "all": 3.0},
                   "orchgen_slurm_partition_jobs_pending_resources": {"a100": 0.0, "all": 1.0}}, per
    # gpu01 runs the 1-GPU job (mix); gpu02 is free, and shown as sinfo shows it: "idle", or "plnd" once the backfill
    # scheduler has planned it for the pending 2-node job (PLANNED, Slurm 22.05+: sinfo(1) NODE STATE CODES)
    nodes = ctl["orchgen_slurm_nodes"]
    assert nodes in ({(("state", "idle"),): 1.0, (("state", "mix"),): 1.0},
                     {(("state", "plnd"),): 1.0, (("state", "mix"),): 1.0}), nodes
    for _ in range(150):
        if not hosts.ssh("ctl1", f"squeue -h -j {','.join(jobs)}", check=False).stdout.strip():
            break
        time.sleep(0.2)

    log = (Path(__file__).parent / "data" / "bringup" / "nccl-socket-fallback.log").read_text()
    judged = hosts.ssh("ctl1", f"printf %s {shlex.quote(log)} >/tmp/nccl-socket.log && python3 "
                               "/usr/local/libexec/orchgen-checks/run.py --only nccl --nccl-log /tmp/nccl-socket.log "
                               "--textfile /var/lib/prometheus/node-exporter/orchgen_checks.prom", check=False)
    assert judged.returncode == 1 and "fell back to sockets" in judged.stdout, judged.stdout + judged.stderr
    ctl = scraped("ctl1")
    assert ctl["orchgen_nccl_socket_fallback"] == {(): 1.0} and ctl["orchgen_check_ok"] == {(("check", "nccl"),): 0.0}
    named = {n for r in rules for n in re.findall(r"\b((?:slurm|orchgen)_\w+)", r["expr"])}
    assert named and named <= set(ctl), sorted(named - set(ctl))
    # the dashboard's panels: every metric but the DCGM exporter's (NOT INSTALLED here: no DCGM) is served
    board = json.loads((bundle / "slurm" / "grafana-slurm.json").read_text())
    exprs = [tgt["expr"] for p in board["panels"] for tgt in p["targets"]]
    shown = {n for e in exprs for n in re.findall(r"\b((?:slurm|orchgen|node)_\w+)", e)}
    assert shown and shown <= set(ctl), sorted(shown - set(ctl))
    assert {n for e in exprs for n in re.findall(r"\bDCGM_\w+", e)} == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"}
    print(f"telemetry checks: {time.monotonic() - t:.1f} s")


def _site_database(hosts: Hosts, bundle: Path) -> None:
    """The site's part before the bring-up, as the README's NOT INSTALLED steps for options.slurm.accounting.
    storage_host say: MariaDB on db1 (the site's database server, which the bring-up never touches) with the
    settings of slurm/mariadb-slurm.cnf, a database user for each slurmdbd host (ctl1, ctl2) made by the README's
    own lines, and the password in the file slurmdbd.conf includes, on ctl1 and ctl2 (written as root: no slurm user
    exists yet; the bring-up makes it slurm's). Here every connection between the hosts comes from 127.0.0.1 (one
    network namespace), which MariaDB names localhost: the same grant for it too (HOST_CHANGES)."""
    import secrets
    import shlex

    t = time.monotonic()
    password = secrets.token_hex(16)
    readme = (bundle / "README.md").read_text()
    grants = re.findall(r"^\s*(CREATE USER 'slurm'@'(\w+)' IDENTIFIED BY '<password>'; GRANT ALL ON "
                        r"slurm_acct_db\.\* TO 'slurm'@'\2';)$", readme, re.M)
    assert sorted(h for _, h in grants) == ["ctl1", "ctl2"], grants
    sql = " ".join(g.replace("<password>", password) for g, _ in grants)
    sql += (f" CREATE USER 'slurm'@'localhost' IDENTIFIED BY '{password}';"
            " GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';")
    cnf = (bundle / "slurm" / "mariadb-slurm.cnf").read_text()
    hosts.ssh("db1", "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && "
                     "apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null", timeout=600)
    hosts.ssh("db1", f"printf %s {shlex.quote(cnf)} >/etc/mysql/mariadb.conf.d/60-slurm.cnf && "
                     "/etc/init.d/mariadb restart >/dev/null && mariadb -e " + shlex.quote(sql), timeout=400)
    for name in ("ctl1", "ctl2"):
        line = shlex.quote(f"StoragePass={password}")
        hosts.ssh(name, "install -D -m 0600 /dev/null /etc/slurm/slurmdbd-storage-pass.conf && "
                        f"echo {line} > /etc/slurm/slurmdbd-storage-pass.conf")
    print(f"the site's database on db1: {time.monotonic() - t:.1f} s")


def _state_save_shared(hosts: Hosts, site, bundle: Path) -> None:
    """The site's shared filesystem for StateSaveLocation, and the bring-up's proof that both controllers mount it
    (issue 38). A directory outside every host's root stands for the NFS export; it is bind-mounted at
    /shared/slurmctld in a host's own mount namespace, where NFS would be mounted. First on ctl1 only: the playbook's
    statesave step, run on its own (`--tags statesave`), stops with the line that says ctl2 has nothing there. Then
    on ctl2 too: the step passes, and the bring-up that follows runs it again."""
    t = time.monotonic()
    export = site.work / "nfs-slurmctld"
    export.mkdir(exist_ok=True)

    def mount(name: str) -> None:
        host = hosts.hosts[name]
        target = host.root / STATE.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["nsenter", "-t", str(host.proc.pid), "-m", "mount", "--bind", str(export), str(target)],
                       check=True)

    mount("ctl1")
    argv = ["sh", str(bundle / "bringup" / "up.sh"), str(hosts.inventory(site.work / "hosts.yaml")),
            "--tags", "statesave", "--limit", "ctl1,ctl2"]
    local = site._run(argv, "statesave, ctl2 without the shared filesystem", 300)
    said = " ".join(local.stdout.split())
    assert local.returncode != 0 and f"StateSaveLocation={STATE} on ctl2 is not the filesystem ctl1 wrote its " \
        "sentinel to (ctl2 has nothing mounted there): mount the one shared filesystem at " \
        f"{STATE} on every controller, then run the bring-up again" in said, failure(local)
    mount("ctl2")
    shared = site._run(argv, "statesave, both controllers on the shared filesystem", 300)
    assert shared.returncode == 0, failure(shared)
    print(f"StateSaveLocation checks (ctl2 without it, then shared): {time.monotonic() - t:.1f} s")


def _slurmdbd_fails_over(hosts: Hosts) -> None:
    """slurmdbd HA on the bring-up's hosts (issue 38): the primary slurmdbd (ctl1, DbdHost) dies; its backup on ctl2
    (DbdBackupHost), standing by against the same database on db1, takes over: sacctmgr still answers and writes,
    and slurmctld's record of a job that ran meanwhile reaches the database (sacct). The next bring-up run starts the
    primary again (a daemon found stopped is started), which takes control back."""
    t = time.monotonic()
    hosts.ssh("ctl1", "pid=$(cat /run/slurmdbd.pid); kill -KILL $pid; "
                      "for i in $(seq 50); do kill -0 $pid 2>/dev/null || exit 0; sleep 0.1; done; exit 1")
    listed = lambda: hosts.ssh("ctl1", "timeout 30 sacctmgr -n -P list cluster format=cluster",  # noqa: E731
                               check=False).stdout.split()
    for _ in range(90):
        if "bringup-lab" in listed():
            break
        time.sleep(1)
    log = hosts.ssh("ctl2", "cat /var/log/slurm/slurmdbd.log").stdout
    assert "bringup-lab" in listed() and "Taking Control" in log, log[-3000:]  # ctl2's slurmdbd answers
    hosts.ssh("ctl1", "sacctmgr -i add account failover cluster=bringup-lab")
    assert "failover" in hosts.ssh("ctl1", "sacctmgr -n -P list account format=account").stdout.split()
    job = hosts.ssh("ctl1", "sbatch --parsable -N1 -t 1 -D /tmp -o /dev/null --wait --wrap true").stdout.strip()
    for _ in range(90):
        state = hosts.ssh("ctl1", f"sacct -n -X -P -j {job} -o State", check=False).stdout.split()
        if state == ["COMPLETED"]:
            break
        time.sleep(1)
    assert state == ["COMPLETED"], state
    print(f"slurmdbd failover to ctl2: {time.monotonic() - t:.1f} s")


def test_bare_os_to_cluster_then_idempotent_then_replans(cluster, tmp_path):
    hosts, site = cluster
    t0 = time.monotonic()
    bundle = site.install(plan(_fleet(tmp_path / "ha.yaml", _ha(FLEET.read_text())), tmp_path / "plan1", "22.05"))
    _site_database(hosts, bundle)
    _state_save_shared(hosts, site, bundle)
    t1 = time.monotonic()
    first = site.up(bundle, "-e", '{"orchgen_check_args": "--skip nccl"}')
    assert first.returncode == 0, failure(first)
    rc = recap(first.stdout)
    # db1, the site's database server, is in the operator's inventory and in none of the bundle's groups: untouched
    assert set(rc) == {*SLURM_HOSTS, "db1"} and (rc["db1"]["ok"], rc["db1"]["changed"]) == (0, 0), rc
    assert all(rc[h]["changed"] > 0 for h in SLURM_HOSTS), rc
    # the template warning a guard-only include of upgrade.yml once gave on every run
    assert "template error" not in first.stdout + first.stderr, first.stderr[-2000:]
    # the production checks ran as the last step and passed (nccl needs GPUs and a fabric: test_checks.py)
    assert '"allocation"' in first.stdout and "under leaves ['leaf1'] (fewest: 1)" in first.stdout
    assert "/usr/sbin/nhc passed on 2 nodes" in first.stdout
    # the takeover check (issue 38): control handed to ctl2 and back with its job running, then every node registered
    # with ctl1 again and one job had every GPU
    said = " ".join(first.stdout.split())
    assert re.search(r"job \d+ \(RUNNING \S+\) survived takeover by ctl2 in \d+ s, then back to ctl1 in \d+ s; each "
                     r"ran a new job; all 2 nodes registered with ctl1, with their GRES, \d+ s after `scontrol "
                     r"reconfigure`, and job \d+ had every GPU of each \(gpu:2 on 2 nodes\)", said), first.stdout[-6000:]
    # what the plan turns on (containers: auto -> pyxis on GPU pools) that the bring-up cannot install: said, with why
    # (Ansible's YAML result format wraps long lines: `said` joins them)
    assert "NOT INSTALLED: enroot on every GPU node: not in Debian" in said
    assert "NOT INSTALLED: pyxis on every node and login host: not packaged anywhere" in said
    assert "git clone --depth 1 https://github.com/NVIDIA/pyxis /usr/local/src/pyxis" in said
    assert "NOT INSTALLED: the accounting database on db1, dcgm-exporter, enroot, pyxis: see the README" in said
    print(f"bring-up from bare OS: {time.monotonic() - t1:.0f} s")

    job = hosts.ssh("ctl1", "srun -N2 --gres=gpu:2 sh -c 'echo $SLURM_JOB_ID $(hostname) $CUDA_VISIBLE_DEVICES'")
    rows = sorted(line.split() for line in job.stdout.splitlines())
    assert [r[1:] for r in rows] == [["gpu01", "0,1"], ["gpu02", "0,1"]] and rows[0][0] == rows[1][0], rows
    assoc = hosts.ssh("ctl1", "sacctmgr -n -P show assoc format=account,user,fairshare").stdout.split()
    assert {"nlp||3", "nlp|alice|1", "vision||1"} <= set(assoc), assoc

    _one_cluster_key(hosts, site, bundle)
    _containment_and_hygiene(hosts)
    _telemetry(hosts, bundle)

    t = time.monotonic()
    second = site.up(bundle, "--skip-tags", "checks")
    assert second.returncode == 0, failure(second)
    assert {h: r["changed"] for h, r in recap(second.stdout).items()} == dict.fromkeys(rc, 0), second.stdout[-4000:]
    print(f"second run, nothing changed: {time.monotonic() - t:.0f} s")

    t = time.monotonic()
    _host_down_then_back(hosts, site, bundle)
    print(f"run with gpu02 powered off: {time.monotonic() - t:.0f} s")
    _slurmdbd_fails_over(hosts)
    t = time.monotonic()
    _munge_stopped_on_one_node_is_repaired(hosts, site, bundle, tmp_path)
    print(f"run after gpu02 came back, munged stopped and dpkg cut short there, repaired: {time.monotonic() - t:.0f} s")

    running = hosts.ssh("ctl1", "sbatch --parsable -N1 -w gpu01 -t 60 --wrap 'sleep 3000'").stdout.strip()
    for _ in range(100):
        if _running(hosts, running):
            break
        time.sleep(0.2)
    assert _running(hosts, running)

    def replan(name: str, fleet_edit, expected: list[str], nodes: int | None = None) -> str:
        """Re-plan, then the documented command alone (`up.sh`: apply.py reads what the hosts run and applies
        the difference by the bundle's impact table; no changes.json): `expected` are the apply lines it must
        log (`<file>: <key>...: <action>`), the running job survives."""
        src = tmp_path / f"{name}.yaml"
        text = _ha(FLEET.read_text())
        src.write_text(fleet_edit(text))
        new = site.install(plan(src, tmp_path / name, "22.05", pool_nodes=nodes))
        t = time.monotonic()
        out = site.up(new, "--skip-tags", "checks")
        assert out.returncode == 0, failure(out)
        actions = [line for line in out.stdout.splitlines() if line.startswith("apply: ")]
        print(f"re-plan {name} ({time.monotonic() - t:.0f} s):", *actions, sep="\n  ")
        for want in expected:
            assert any(re.search(want, line) for line in actions), (want, actions)
        assert _running(hosts, running), f"job {running} did not survive re-plan {name}"
        return out.stdout

    # the actions are the impact table's own (generator/impact/slurm.py, shipped as bringup/slurm_impact.py)
    share = lambda t: t.replace("{name: nlp, share: 3", "{name: nlp, share: 5")  # noqa: E731
    maxtime = lambda t: share(t).replace('max_time: "1-00:00:00"', 'max_time: "2-00:00:00"')  # noqa: E731
    # a share and a partition's MaxTime in one re-plan (one run: CI time), each applied by its own class
    replan("maxtime", maxtime, [r"^apply: accounts\.sh: .*nlp.*: sacctmgr",
                                r"(?i)^apply: slurm\.conf: PartitionName=a100 maxtime: .*: reconfigure"])
    assert "nlp||5" in hosts.ssh("ctl1", "sacctmgr -n -P show assoc format=account,user,fairshare").stdout.split()
    assert "MaxTime=2-00:00:00" in hosts.ssh("ctl1", "scontrol show partition a100").stdout

    # a node added: on 22.05 slurmctld and every slurmd restart (a reconfigure would make slurmctld exit)
    hosts.boot(hosts.add("gpu03", gpus=2))
    out = replan("node", maxtime, [r"^apply: slurm\.conf: NodeName.*gpu03.*: restart_slurm"], nodes=3)
    assert '"restart_slurmctld": true, "restart_slurmd": ["gpu01", "gpu02", "gpu03"]' in out, out[-3000:]
    assert out.count("slurmd: restarted") == 2 and "slurmd: started" in out and "slurmctld: restarted" in out
    states = hosts.ssh("ctl1", "sinfo -h -N -o '%N %t'").stdout.split("\n")
    assert "gpu03 idle" in states, states
    three = hosts.ssh("ctl1", "srun -N2 -w gpu02,gpu03 --gres=gpu:2 hostname").stdout.split()
    assert sorted(three) == ["gpu02", "gpu03"]

    # the node removed again: drained while slurmctld still knows it, then gone; never resumed
    out = replan("unnode", maxtime, [r"^apply: slurm\.conf: NodeName.*gpu03.*: drain_restart",
                                     r"^apply: gpu03: removed by the re-plan"], nodes=2)
    assert '"resume": []' in out and '"drain": ["gpu03"]' in out, out[-3000:]
    nodes = hosts.ssh("ctl1", "sinfo -h -N -o '%N %t'").stdout.split("\n")
    assert not [n for n in nodes if n.startswith("gpu03")] and "gpu02 idle" in nodes, nodes
    # the run stopped gpu03's slurmd (it is still in the operator's hosts.yaml: apply.py's stop_slurmd)
    assert '"stop_slurmd": ["gpu03"]' in out and "slurmd: stopped on gpu03" in out, out[-3000:]
    assert hosts.ssh("gpu03", SLURMD_RUNS, check=False).returncode == 1, "gpu03's slurmd still runs"
    assert sorted(hosts.ssh("ctl1", "srun -N1 -w gpu02 --gres=gpu:2 hostname").stdout.split()) == ["gpu02"]
    print(f"total: {time.monotonic() - t0:.0f} s")
