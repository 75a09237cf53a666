"""The GPU-node operations (options.slurm) proven by a real Slurm, booted by tests/slurmharness from
bundles the CLI wrote (the loopback overlay's changes are listed in tests/slurmharness/overlay.py):

* 22.05 (Debian 12, the host): every operations setting loads and reads back from `scontrol show
  config`; TaskProlog gives each task nccl.env's settings and keeps a job's own; KillOnBadExit ends a
  step when one rank fails; PrologFlags=Contain makes the extern step; slurmd reads plugstack.conf
  and its `optional` pyxis line (pyxis is not installed: logged and skipped); mpi/pmix of 22.05
  fails without libpmix.so, which is why `auto` gives none there;
* 24.11 (trixie chroot): MpiDefault=pmix, a 2-node job under PMIx; switch/nvidia_imex loaded, each
  running job with its own IMEX channel;
* 26.05 (forky chroot): the Debian build has no mpi/pmix, so the default fails every srun (what the
  README says); with pmi2 a 2-node job runs under PMI2, and a batch step gets its IMEX channel; slurmctld's own
  metrics (MetricsType=metrics/openmetrics) answer the bundle's scrape jobs in Prometheus text format, with every
  metric its alerts name; its count of pending jobs takes in a held one and one waiting on it (why the idle-GPU
  alert reads the bundle's exporter there too);
* health check: NHC's stand-in runs the bundle's nhc.conf line and gpu-health.sh against a fake
  nvidia-smi and dmesg (tests/fake_gpu.py): the nodes with one GPU fewer, an uncorrectable ECC error, a
  pending row remap or an Xid 79, and only they, are drained with the reason; correctable errors, a GPU
  without ECC and application Xids (13, 31, 43, 92) leave a node up;
* GB200 NVL72 trays (gpu-health.sh ... imex): a tray whose NVLink fabric registration is not done or
  failed, that is off the fabric, whose GPUs disagree on their clique, or whose IMEX daemon is not READY is
  drained with gpu-health.sh's line; the healthy trays stay up and run a job;
* two controllers with one StateSaveLocation: the bundle's production takeover check (checks/run.py: `scontrol
  takeover` and back with a job running, then `scontrol reconfigure` and one job with every GPU of every node)
  passes; on 22.05 the primary slurmdbd stops and its backup (DbdBackupHost, one database) answers sacctmgr, takes
  its writes and slurmctld's job records; then the primary is killed, the backup takes over, the running job
  carries on and a new job is scheduled (22.05 and 24.11).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest
import yaml

from tests import fake_gpu
from tests.slurmharness import SlurmCluster, require_slurm
from tests.test_slurm_real import EXAMPLES, Planned, bundle, check_clean_log, optional_plugins_absent, \
    with_slurm_options

pytestmark = pytest.mark.slurm
PYXIS = "/usr/local/lib/slurm/spank_pyxis.so"



def nodes_env(c: SlurmCluster, *srun: str, var: str) -> list[str]:
    out = c.job(*srun, "sh", "-c", f'echo "$SLURMD_NODENAME ${{{var}-unset}}"').stdout
    return sorted(line.split(" ", 1)[1] for line in out.splitlines() if line.strip())


def wait_for(what: str, ready, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def running_job(c: SlurmCluster, *sbatch: str) -> str:
    job = c.run("sbatch", "--parsable", f"--chdir={c.work}/jobs", "--output=/dev/null", *sbatch).stdout.strip()
    wait_for(f"job {job} to run", lambda: "RUNNING" in c.run("squeue", "-h", "-j", job, "-o", "%T").stdout)
    return job


# ------------------------------------------------------------------ 22.05: every setting loads


def test_operations_on_2205(tmp_path):
    require_slurm("bookworm")
    out = bundle(tmp_path, EXAMPLES / "fsdp-pretraining.yaml")
    p = Planned(out)
    with SlurmCluster(out / "slurm") as c:
        conf = c.config()
        assert set(conf["HealthCheckNodeState"].split(",")) == {"ANY", "CYCLE"}
        assert {k: conf[k] for k in ("HealthCheckInterval", "KillOnBadExit", "MpiDefault",
                                     "PrologFlags", "UnkillableStepTimeout", "TaskProlog")} == {
            "HealthCheckInterval": "300 sec", "KillOnBadExit": "1",
            "MpiDefault": "none", "PrologFlags": "Alloc,Contain", "UnkillableStepTimeout": "180 sec",
            "TaskProlog": f"{c.work}/etc/task-prolog.sh"}

        # TaskProlog: nccl.env's settings in every task, unless the job sets its own
        assert nodes_env(c, "-N", "2", var="NCCL_IB_HCA") == ["mlx5", "mlx5"]
        assert nodes_env(c, "-N", "2", "--export=ALL,NCCL_IB_HCA=mine", var="NCCL_IB_HCA") == ["mine", "mine"]

        # KillOnBadExit: rank 1 fails at once; rank 0 would sleep for a minute, and is ended instead
        start = time.monotonic()
        failed = c.run("srun", "-N", "2", "-n", "2", "sh", "-c", '[ "$SLURM_PROCID" = 1 ] && exit 3; sleep 60',
                       check=False, timeout=90)
        # ended well before its 60 s sleep: 45 s leaves room for CI's load (30.2 s seen under it)
        assert failed.returncode != 0 and time.monotonic() - start < 45, failed.stderr
        killed = re.search(r"\*\*\* STEP (\d+\.0) ON \S+ CANCELLED AT", failed.stderr)  # Slurm ended rank 0
        assert killed, failed.stderr

        # PrologFlags=Contain: the job has its extern step (what pam_slurm_adopt adopts ssh sessions into)
        job = running_job(c, "-N", "1", "--wrap", "sleep 60")
        steps = c.run("squeue", "-h", "-s", "-j", job, "-o", "%i").stdout.split()
        assert f"{job}.extern" in steps
        c.run("scancel", job)

        # plugstack.conf beside slurm.conf, its relative include, and pyxis's `optional` line: slurmd read
        # them, found no pyxis here, logged it and went on (the jobs above ran)
        assert optional_plugins_absent(c) == [PYXIS]
        assert f"dlopen({PYXIS})" in (c.workdir / "log" / f"slurmd.{p.nodes[0]}.log").read_text()

        # why `auto` gives 22.05 no MpiDefault=pmix: its mpi/pmix opens libpmix.so, absent here (no libpmix-dev)
        pmix = c.run("srun", "-N", "1", "--mpi=pmix", "true", check=False)
        assert pmix.returncode != 0 and "can not load PMIx library" in pmix.stderr
        # the step KillOnBadExit ended and the job scancel ended say so in slurmd's log
        check_clean_log(c, p, also=[re.compile(rf"\*\*\* (STEP {re.escape(killed.group(1))}|JOB {job}) ON \S+ "
                                               r"CANCELLED AT")])


# ------------------------------------------------------------------ 24.11: PMIx and IMEX


@pytest.mark.chroot
def test_pmix_and_imex_on_2411(tmp_path):
    require_slurm("trixie")
    out = bundle(tmp_path, EXAMPLES / "nvl72-blocks.yaml")
    p = Planned(out)
    with SlurmCluster(out / "slurm", suite="trixie") as c:
        conf = c.config()
        assert conf["MpiDefault"] == "pmix" and conf["SwitchType"] == "switch/nvidia_imex"
        assert conf["SwitchParameters"].startswith("imex_channel_count=2048,")  # + the overlay's imex_dev_major

        # a 2-node job under PMIx: by default, and asked for by name
        assert nodes_env(c, "-N", "2", var="PMIX_RANK") == ["0", "1"]
        assert nodes_env(c, "-N", "2", "--mpi=pmix", var="PMIX_RANK") == ["0", "1"]
        assert nodes_env(c, "-N", "2", var="NCCL_IB_HCA") == ["mlx5", "mlx5"]

        # IMEX: each running job has a channel of its own on its nodes, a character device of the
        # nvidia-caps-imex-channels major (the overlay's stand-in major: no GPU driver here)
        major = c.layout.imex_dev_major
        holder = running_job(c, "-N", "2", "-w", "gb200-[001-002]", "--wrap", "srun sleep 120")
        try:
            listing = c.job("-N", "2", "-w", "gb200-[003-004]", "sh", "-c",
                            "stat -c '%n %F %t' /dev/nvidia-caps-imex-channels/*").stdout.split("\n")
        finally:
            c.run("scancel", holder)
        want = f"/dev/nvidia-caps-imex-channels/channel2 character special file {major:x}"
        assert [ln for ln in listing if ln] == [want, want]  # channel 1 is the holder's
        # the holder's step, ended by scancel, may say so in slurmd's log (whether it does depends on timing):
        # "*** STEP 4.0 ON ... CANCELLED AT", and on 24.11 its stepd's end with SIGTERM's 15 read as an errno,
        # "[4.0] stepd_cleanup: done with step (rc[0xf]:Block device required, ...)"
        check_clean_log(c, p, also=[re.compile(rf"\*\*\* (STEP {holder}\.\d+|JOB {holder}) ON \S+ CANCELLED AT"),
                                    re.compile(rf"\[{holder}\.(\d+|batch|extern)\] stepd_cleanup: done with step \(rc\[0xf\]")])


# ------------------------------------------------------------------ 26.05: no mpi/pmix in Debian's build


@pytest.mark.chroot
def test_mpi_and_imex_on_2605(tmp_path):
    require_slurm("forky")
    (tmp_path / "default").mkdir()
    (tmp_path / "pmi2").mkdir()
    default = bundle(tmp_path / "default", EXAMPLES / "topology-yaml.yaml")
    with SlurmCluster(default / "slurm", suite="forky") as c:
        assert c.config()["MpiDefault"] == "pmix"
        failed = c.run("srun", "-N", "1", "true", check=False)
        assert failed.returncode != 0 and "Invalid MPI type 'pmix'" in failed.stderr  # as the README says
        assert "pmix" not in c.run("srun", "--mpi=list", check=False).stdout + c.run(
            "srun", "--mpi=list", check=False).stderr
    out = bundle(tmp_path / "pmi2", with_slurm_options("topology-yaml", mpi="pmi2"))
    p = Planned(out)
    with SlurmCluster(out / "slurm", suite="forky") as c:
        assert c.config()["MpiDefault"] == "pmi2"
        assert nodes_env(c, "-N", "2", "-p", "gb200", var="PMI_RANK") == ["0", "1"]
        # 26.05 gives the batch step the job's channel too (slurm.conf(5) imex_channel_count)
        text = c.batch_wait("ls /dev/nvidia-caps-imex-channels", "-p", "gb200", "-N", "1")
        assert re.fullmatch(r"channel\d+\n", text), text
        slurm_metrics_scraped(c, out)
        slurm_pending_counts_held_jobs(c)
        check_clean_log(c, p)


# One line of the Prometheus text format (https://prometheus.io/docs/instrumenting/exposition_formats/): a sample
# `name{label="value",...} value`, or a `# HELP name text` / `# TYPE name type` comment
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? '
                    r'([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|NaN|Inf))( -?[0-9]+)?')
META = re.compile(r"# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*)( .*)?")


def parse_prometheus_text(text: str) -> dict[str, str]:
    """Every sample's metric name -> its TYPE, failing on a line that is not the text format or a sample whose
    metric has no TYPE."""
    types, names = {}, set()
    for line in text.splitlines():
        if not line.strip():
            continue
        meta = META.fullmatch(line)
        if meta:
            if meta.group(1) == "TYPE":
                types[meta.group(2)] = (meta.group(3) or "").strip()
            continue
        sample = SAMPLE.fullmatch(line)
        assert sample, f"not Prometheus text format: {line!r}"
        names.add(sample.group(1))
    assert names and names <= set(types), sorted(names - set(types))
    return {n: types[n] for n in names}


def slurm_metrics_scraped(c: SlurmCluster, out) -> None:
    """slurmctld's own metrics (MetricsType=metrics/openmetrics, 25.11+) on its port, as the bundle's scrape jobs ask
    for them: each path answers, parses as Prometheus text, and every metric the bundle's alerts name is there
    (`up` is Prometheus's own)."""
    import urllib.request

    scrape = yaml.safe_load((out / "slurm" / "prometheus-slurm.yaml").read_text())["scrape_configs"]
    rules = yaml.safe_load((out / "slurm" / "prometheus-slurm-rules.yaml").read_text())["groups"][0]["rules"]
    assert c.config()["MetricsType"] == "metrics/openmetrics"
    served: dict[str, str] = {}
    for job in (j for j in scrape if j["job_name"] not in ("slurm-node-exporter", "slurm-dcgm-exporter")):
        url = f"http://127.0.0.1:{c.layout.ctld_port}{job['metrics_path']}"
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.status == 200, url
            served |= parse_prometheus_text(r.read().decode())
    named = {n for rule in rules for n in re.findall(r"\b(slurm_\w+|up)\b", rule["expr"])} - {"up"}
    assert named and named <= set(served), sorted(named - set(served))
    assert {served[n] for n in named} == {"gauge"}


def slurm_pending_counts_held_jobs(c: SlurmCluster) -> None:
    """Why the idle-GPU alert reads the bundle's exporter on 26.05 too (issue 38): slurmctld's own
    slurm_partition_jobs_pending counts a held job and one waiting on it (Dependency), which cannot start on idle GPUs;
    only the held one is counted apart (slurm_partition_jobs_hold)."""
    import urllib.request

    def submit(*args: str) -> str:
        return c.run("sbatch", "--parsable", *args, "-p", "gb200", "-N", "1", f"--chdir={c.work}/jobs",
                     "--output=/dev/null", "--wrap", "true").stdout.strip()

    held = submit("-H")
    dependent = submit(f"--dependency=afterok:{held}")
    want = {held: "JobHeldUser", dependent: "Dependency"}
    for _ in range(150):
        got = dict(line.split() for line in c.run("squeue", "-h", "-j", f"{held},{dependent}", "-o", "%i %r")
                   .stdout.splitlines())
        if got == want:
            break
        time.sleep(0.2)
    assert got == want, got
    url = f"http://127.0.0.1:{c.layout.ctld_port}/metrics/partitions"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    c.run("scancel", held, dependent)
    values = dict(re.findall(r'^(slurm_partition_jobs_(?:pending|hold))\{partition="gb200"\} (\d+)$', text, re.M))
    assert values == {"slurm_partition_jobs_pending": "2", "slurm_partition_jobs_hold": "1"}, values


# ------------------------------------------------------------------ health check drains a bad node

# nvidia-smi and the kernel log for the health check (tests/fake_gpu.py): 8 healthy H100s on every node
# but these. The drained ones, with the reason NHC gives (its check name, then gpu-health.sh's line):
SICK_GPUS = {
    "gpu003": {"count": 7},                                                     # a GPU lost
    "gpu004": {"gpu": 5, "ecc.errors.uncorrected.volatile.total": "2"},         # uncorrectable ECC
    "gpu005": {"gpu": 1, "remapped_rows.pending": "1"},                         # row remap needs a reset
    "gpu007": {"gpu": 2, "ecc.errors.corrected.volatile.total": "40",           # correctable only: up
               "remapped_rows.correctable": "2"},
    "gpu008": {"ecc.errors.uncorrected.volatile.total": "[N/A]"},               # no ECC: up
}
KERNEL_LOG = {
    "gpu006": [fake_gpu.xid(13), fake_gpu.xid(79, "PCI:0000:1b:00", "GPU has fallen off the bus.")],
    "gpu007": [fake_gpu.xid(13), fake_gpu.xid(31), fake_gpu.xid(43), fake_gpu.xid(92)],  # benign: up
}
DRAINED = {
    "gpu003": "FAIL: expected 8x h100 GPUs, nvidia-smi lists 7: 7x NVIDIA H100 80GB HBM3",
    "gpu004": "FAIL: GPU 5 (00000000:1D:00.0): 2 uncorrectable ECC errors",
    "gpu005": "FAIL: GPU 1 (00000000:19:00.0): row remapping pending, reset the GPU",
    "gpu006": "FAIL: Xid 79 (PCI:0000:1b:00) in the kernel log since boot",
}


def test_health_check_drains_the_nodes_with_broken_gpus_2205(tmp_path):
    require_slurm("bookworm")
    out = bundle(tmp_path, EXAMPLES / "fsdp-pretraining.yaml")
    p = Planned(out)
    assert "/etc/slurm/gpu-health.sh 8 h100" in (out / "slurm" / "nhc.conf").read_text()
    fakes = {"nvidia-smi": fake_gpu.nvidia_smi(SICK_GPUS), "dmesg": fake_gpu.dmesg(KERNEL_LOG)}
    with SlurmCluster(out / "slurm", health_check=True, wait_idle_s=0, bin_files=fakes) as c:
        reasons = {n: f"NHC: check_gpus:  {line}." for n, line in DRAINED.items()}

        def settled():
            nodes = c.nodes()
            done = len(nodes) == 16 and all(s["state"] in ("IDLE", "IDLE+DRAIN", "DRAIN") for s in nodes.values())
            return nodes if done and all("DRAIN" in nodes[n]["state"] for n in DRAINED) else None

        nodes = wait_for("the broken nodes to drain and the rest to be idle", settled)
        assert {n: s["state"] for n, s in nodes.items() if s["state"] != "IDLE"} == {n: "IDLE+DRAIN" for n in DRAINED}
        for node, reason in reasons.items():
            assert nodes[node]["reason"].startswith(reason), (node, nodes[node]["reason"])
        listed = c.run("sinfo", "-R", "-h", "-o", "%E").stdout
        assert all(reason in listed for reason in reasons.values()), listed
        conf = c.config()
        assert conf["HealthCheckProgram"].endswith("nhc-standin.sh") and conf["HealthCheckInterval"] == "300 sec"
        # the bundle's script ran on every node: healthy ones pass (gpu007 with correctable errors and
        # application Xids, gpu008 without ECC among them), the broken ones fail
        log = (c.workdir / "log" / "nhc.log").read_text()
        assert log.count("healthy") >= 12 and "gpu007: healthy" in log and "gpu008: healthy" in log
        assert all(f"{n}: {reason}" in log for n, reason in reasons.items())
        # 12 nodes are left for jobs, the drained ones not among them
        ran = set(c.job("-N", "12", "sh", "-c", 'echo "$SLURMD_NODENAME"').stdout.split())
        assert len(ran) == 12 and not ran & set(DRAINED) and {"gpu007", "gpu008"} <= ran
        # slurmd logs the failing check (NHC's exit status 1; its message is the drain reason)
        # (SlurmCluster.problems folds the same line of several nodes into "slurmd on N nodes: ...")
        check_clean_log(c, p, also=[re.compile(rf"^slurmd ({'|'.join(DRAINED)}|on [2-{len(DRAINED)}] nodes): "
                                               r"error: health_check failed: rc:1 output:")])


# ------------------------------------------------------------------ a GB200 tray off its NVLink fabric drains

# GB200 NVL72 trays in NVLink domains of two (tests/fake_gpu.py: nvidia-smi -q's Fabric block, nvidia-imex-ctl -q):
# healthy trays register with the rack's NVLink fabric (State Completed, Status Success, one ClusterUUID and
# CliqueId) and their IMEX daemon is READY. The drained ones, each with gpu-health.sh's line as the reason:
SICK_FABRIC = {
    "gb200-002": {"gpu": 2, "fabric.state": "In Progress", "fabric.status": "N/A"},    # registration not done
    "gb200-003": {"all.fabric.cluster_uuid": "N/A", "all.fabric.clique_id": "N/A"},    # the tray is off the fabric
    "gb200-005": {"gpu": 3, "fabric.clique_id": "7"},                                  # a GPU in another partition
    "gb200-006": {"gpu": 1, "fabric.status": "Failure"},                              # registration failed
}
SICK_IMEX = {"gb200-004": "WAITING_FOR_PEERS"}                                          # IMEX not joined its domain
FABRIC_DRAINED = {
    "gb200-002": "FAIL: GPU 2 (00000000:1A:00.0): NVLink fabric state In Progress, status N/A",
    "gb200-003": "FAIL: all 4 GPUs: in no NVLink cluster (ClusterUUID N/A)",
    "gb200-004": "FAIL: IMEX daemon not READY: WAITING_FOR_PEERS (nvidia-imex-ctl -N shows the domain)",
    "gb200-005": f"FAIL: GPUs in different NVLink cliques: {fake_gpu.FABRIC['fabric.cluster_uuid']} clique 32766,"
                 f"{fake_gpu.FABRIC['fabric.cluster_uuid']} clique 7",
    "gb200-006": "FAIL: GPU 1 (00000000:19:00.0): NVLink fabric state Completed, status Failure",
}
# nccl-tests' all_reduce_perf as NCCL behaves between two trays of one NVLink domain (there is no GPU here): it goes
# over multi-node NVLink ("via P2P/MNNVL", NCCL src/transport/p2p.cc) unless NCCL_MNNVL_ENABLE=0 (src/init.cc), and
# then over the rails ("via NET/IB/0"); rank 0 prints the channel line and a result row as all_reduce_perf does.
ALL_REDUCE_PERF = r"""#!/bin/sh
# stand-in for nccl-tests' all_reduce_perf (tests/test_slurm_ops_real.py)
[ "${SLURM_PROCID:-0}" = 0 ] || exit 0
if [ "${NCCL_MNNVL_ENABLE:-2}" = 0 ]; then via=NET/IB/0; else via=P2P/MNNVL; fi
echo "$(hostname):1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] [send] via $via"
echo "  4294967296    1073741824     float     sum      -1   11000.0  390.45  732.09      0   11000.0  390.45  732.09      0"
"""
GB200_FLEET = {
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "nvl-health"},
    "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 8},
              "pools": [{"name": "gb200", "nodes": 8, "gpu": {"type": "gb200", "count": 4, "sockets": [0, 0, 1, 1]},
                         "cpu": {"sockets": 2, "cores_per_socket": 4, "threads_per_core": 1}, "memory_gib": 8,
                         "nvlink_domain_nodes": 2}]},
    "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
    "options": {"slurm_version": "22.05"},
}


def test_health_check_drains_the_trays_off_their_nvlink_fabric_2205(tmp_path):
    require_slurm("bookworm")
    out = bundle(tmp_path, GB200_FLEET)
    p = Planned(out)
    assert "/etc/slurm/gpu-health.sh 4 gb200 imex" in (out / "slurm" / "nhc.conf").read_text()
    fakes = {"nvidia-smi": fake_gpu.nvidia_smi(SICK_FABRIC, count=4, name="NVIDIA GB200", fabric=fake_gpu.FABRIC),
             "dmesg": fake_gpu.dmesg(), "nvidia-imex-ctl": fake_gpu.imex_ctl(SICK_IMEX),
             "all_reduce_perf": ALL_REDUCE_PERF}
    with SlurmCluster(out / "slurm", health_check=True, wait_idle_s=0, bin_files=fakes) as c:
        reasons = {n: f"NHC: check_gpus:  {line}." for n, line in FABRIC_DRAINED.items()}

        def settled():
            nodes = c.nodes()
            done = len(nodes) == 8 and all(s["state"] in ("IDLE", "IDLE+DRAIN", "DRAIN") for s in nodes.values())
            return nodes if done and all("DRAIN" in nodes[n]["state"] for n in FABRIC_DRAINED) else None

        nodes = wait_for("the trays off their fabric to drain and the rest to be idle", settled)
        assert {n: s["state"] for n, s in nodes.items() if s["state"] != "IDLE"} == \
            {n: "IDLE+DRAIN" for n in FABRIC_DRAINED}
        for node, reason in reasons.items():
            assert nodes[node]["reason"].startswith(reason), (node, nodes[node]["reason"])
        log = (c.workdir / "log" / "nhc.log").read_text()
        assert "gb200-001: healthy" in log and "gb200-007: healthy" in log and "gb200-008: healthy" in log
        # the healthy trays of a domain still run a 2-node job
        ran = c.job("-N", "2", "-w", "gb200-[007-008]", "sh", "-c", 'echo "$SLURMD_NODENAME"').stdout.split()
        assert sorted(ran) == ["gb200-007", "gb200-008"], ran
        # the production NCCL check runs its two trays with NCCL_MNNVL_ENABLE=0 (checks.json nccl_env), so they talk
        # over the rails it checks; without it NCCL would take the rack's NVLink, and the check says so
        bin_ = c.client_bin(tmp_path / "client-bin")
        cfg = json.loads((out / "checks" / "checks.json").read_text())
        assert cfg["nccl_env"] == {"NCCL_MNNVL_ENABLE": "0"}
        plain = tmp_path / "checks-without-env.json"
        plain.write_text(json.dumps({k: v for k, v in cfg.items() if k != "nccl_env"}))
        verdicts = []
        for config in (out / "checks" / "checks.json", plain):
            proc = subprocess.run([sys.executable, str(out / "checks" / "run.py"), "--config", str(config), "--only",
                                   "nccl", "--nccl-tests", str(c.workdir / "bin" / "all_reduce_perf")],
                                  capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "PATH": f"{bin_}:/usr/bin:/bin"})
            verdicts.append(json.loads(proc.stdout)["nccl"])
        assert verdicts[0]["ok"] is True and "via NET/IB" in verdicts[0]["detail"], verdicts
        assert verdicts[1]["ok"] is False and "no inter-node channel via NET/IB" in " ".join(verdicts[1]["detail"]), \
            verdicts
        check_clean_log(c, p, also=[re.compile(r"^slurmd (gb200-00[2-6]|on [2-5] nodes): "
                                               r"error: health_check failed: rc:1 output:")])


# ------------------------------------------------------------------ a controller pair


def ha_fleet(version: str) -> dict:
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "ha"},
            "fleet": {"bare_metal": True, "slurm": {"controllers": ["ctl1", "ctl2"]},
                      "fabric": {"kind": "infiniband", "nodes_per_leaf": 4},
                      "pools": [{"name": "h100", "nodes": 4, "gpu": {"type": "h100", "count": 8}, "cpus": 16}]},
            "tenants": [{"name": "nlp", "share": 1}],
            "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"slurm_version": version, "slurm": {
                "state_save_location": "/shared/slurm/state",
                # the site's database server, which both slurmdbd use: a backup slurmdbd on ctl2 (issue 38)
                "accounting": {"storage_host": "db.example.org"}}}}


# What a takeover logs, each for a reason: the backup says it takes over; the primary, killed seconds
# after boot, never wrote a partition state (there was no change to save); 22.05's backup restarts its
# agent thread on takeover
TAKEOVER = [re.compile(p) for p in (r"ControlMachine \S+ not responding, BackupController1 \S+ taking over",
                                    r"NOTE: Trying backup partition state save file",
                                    r"agent_init: thread already running")]


# What a hand-over and back logs: while one controller has control, the other, in standby, refuses what reaches it
# (clients and slurmds try each SlurmctldHost in turn)
HANDOVER = [re.compile(p) for p in (
    r"Invalid RPC received \S+ while in standby mode",
    # 24.11: the backup answers the restarted primary's REQUEST_CONTROL only once its wait for its own shutdown
    # (slurmctld's CONTROL_TIMEOUT, 30 s) ran out, and says so; the job's state is checked after it (checks/run.py)
    r"_slurm_rpc_request_control: REQUEST_CONTROL reply but backup not completely done relinquishing control",
    # meanwhile the clients polling `scontrol ping` and squeue give up on the primary (their own timeout), which
    # then answers a closed socket, and a slurmd registering with the relinquishing backup is cut off; its
    # registration's reply (24.11: RESPONSE_NODE_REGISTRATION) finds the slurmd gone likewise, once it gave up and
    # turned to the other controller (seen once in 24.11's kill-the-primary part, session 16)
    r"slurm_bufs_sendto\(msg_type=RESPONSE_(SLURM_RC|NODE_REGISTRATION)\) failed: Unexpected missing socket error",
    r"Unable to register: (Connection reset by peer|Zero Bytes were transmitted or received)",
    # 24.11: the check's cancelled job's slurmd reports its epilog while the backup is handing control back
    r"Unable to send epilog complete message: (Socket timed out on send/recv operation|Zero Bytes were transmitted"
    r" or received)",
    # the check's new job's prolog completion, sent while control moves: a slurmd keeps sending to the controller it
    # last reached (slurm_protocol_api.c, since 16.05), which is giving control up or standing by (seen in CI under
    # load, 24.11); what the check asserts is the job's state after the hand-back
    r"Error sending prolog completion notification: (Connection reset by peer|Socket timed out on send/recv "
    r"operation)",
    # 24.11: a standing-by controller reads the other's heartbeat file in StateSaveLocation, which the controller
    # taking control writes anew, so it can be missing for a moment
    r"get_last_heartbeat: heartbeat open attempt failed from \S+/heartbeat",
    r"Waiting for heartbeat file to exist",
    # a job that ended while control moved: its node's registration reports the ended step to the controller that
    # recovered the job from the state saved before
    r"Registered JobId=\d+ StepId=\d+\.extern in state COMPLETED on node",
    # with accounting: the controller taking control registers with slurmdbd while the connection of the one that
    # gave it up is still open; slurmdbd keeps the new one
    r"A new registration for cluster \S+ CONN:\d+ just came in, but I am already talking to that cluster")]
# What slurmdbd's failover logs: slurmctld's messages in flight to the stopping primary slurmdbd fail (refused, or
# EAGAIN: "Resource temporarily unavailable"; slurmctld keeps them and sends them to the backup), the stopping
# primary's connection threads end (24.11), and the backup controller, taking over later, tries the stopped
# primary slurmdbd first
DBD_FAILOVER = [re.compile(p) for p in (r"Failure sending message: \d+: Connection refused",
                                        r"Sending message type DBD_\w+: 11: Resource temporarily unavailable",
                                        r"DBD_\w+ failure: Resource temporarily unavailable",
                                        r"slurm_persist_conn_recv_server_fini: pthread_join\(\): Invalid argument",
                                        r"slurm_persist_conn_open: No response to persist_init",
                                        r"Sending PersistInit msg: Resource temporarily unavailable")]


def production_takeover(c: SlurmCluster, out, tmp_path, nodelist_file: bool = False) -> dict:
    """The bundle's production takeover check (checks/run.py --only takeover) against this cluster: run by the
    host's python3 through wrappers of the client commands (the chroots have no python3). Its --start-controller
    asks this test to start the primary again (SlurmCluster.start_controller, under its own name, as its host's
    systemd would), which the check waits for.

    `nodelist_file`: the bundle's own run.py with NODELIST_ARG_MAX 0, so its GPU job gives the real srun every node
    in a file (`-w FILE`, as on a plane of ~9,000 nodes and more, where one argument would be over Linux's 128 KiB);
    only where srun runs on the host's filesystem (not in a chroot, which would not see the host's temporary file)."""
    request = tmp_path / "start-primary"
    done = threading.Event()

    def starter():
        while not done.is_set():
            if request.exists():
                c.start_controller(0)
                request.unlink()
            time.sleep(0.1)

    thread = threading.Thread(target=starter, daemon=True)
    thread.start()
    bin_ = c.client_bin(tmp_path / "client-bin")
    start = f"touch {request} && while [ -e {request} ]; do sleep 0.1; done"
    try:
        argv = ["--only", "takeover", "--start-controller", start]
        program = [str(out / "checks" / "run.py")] if not nodelist_file else [
            "-c", "import sys; sys.path.insert(0, sys.argv[1]); import run; run.NODELIST_ARG_MAX = 0; "
                  "sys.exit(run.main(sys.argv[2:]))", str(out / "checks")]
        proc = subprocess.run([sys.executable, *program, *argv], capture_output=True, text=True, timeout=400,
                              env={**os.environ, "PATH": f"{bin_}:/usr/bin:/bin"})
    finally:
        done.set()
        thread.join(timeout=70)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["takeover"]


@pytest.mark.parametrize("suite, version", [("bookworm", "22.05"), pytest.param("trixie", "24.11",
                                                                               marks=pytest.mark.chroot)])
def test_backup_controller_takes_over(tmp_path, suite, version, request):
    # the slurmdbd pair on 22.05 only (CI time: its failover is the same code on 24.11, ~20 s more there)
    dbd = suite == "bookworm"
    require_slurm(suite, accounting=dbd)
    slurm_db = request.getfixturevalue("slurm_db") if dbd else None
    out = bundle(tmp_path, ha_fleet(version))
    p = Planned(out)
    conf_text = (out / "slurm" / "slurm.conf").read_text()
    assert "StateSaveLocation=/shared/slurm/state" in conf_text and "SlurmctldTimeout=120" in conf_text
    dbd_text = (out / "slurm" / "slurmdbd.conf").read_text()
    assert {"DbdHost=ctl1", "DbdBackupHost=ctl2", "StorageHost=db.example.org"} <= set(dbd_text.splitlines())
    assert {"AccountingStorageHost=ctl1", "AccountingStorageBackupHost=ctl2"} <= set(conf_text.splitlines())
    # Two controllers: the generated file names one SlurmctldHost (its lines come from the fleet model's
    # controllers separately), so the harness is told; the overlay gives both this host under their own names
    # bf_interval_s: the primary that took control back starts the check's new job from its backfill pass (22.05:
    # 30 s by default, a wait the check allows but CI need not spend)
    # accounting: slurmdbd and its backup (the overlay runs it under orchgen-ctld2) on one database of the session's
    # MariaDB, standing in for the site's db.example.org
    with SlurmCluster(out / "slurm", suite=suite, controllers=2, failover_timeout_s=10, bf_interval_s=2,
                      accounting=dbd, database=slurm_db) as c:
        ping = c.run("scontrol", "ping").stdout
        assert "Slurmctld(primary) at orchgen-ctld1 is UP" in ping and "Slurmctld(backup) at orchgen-ctld2 is UP" in ping

        # 22.05 on the host's filesystem: the GPU job's nodes reach the real srun in a file (production_takeover)
        takeover = production_takeover(c, out, tmp_path, nodelist_file=not c.in_chroot)
        assert takeover["ok"] is True, takeover
        # and after the hand-back (`scontrol reconfigure`: every slurmd registers with the primary) one job has every
        # GPU of every node (issue 38: GPU jobs broke after a hand-back that passed)
        held = re.fullmatch(r"job (\d+) \(RUNNING \S+\) survived takeover by orchgen-ctld2 in \d+ s, then back to "
                            r"orchgen-ctld1 in \d+ s; each ran a new job; all 4 nodes registered with orchgen-ctld1, "
                            r"with their GRES, \d+ s after `scontrol reconfigure`, and job \d+ had every GPU of each "
                            r"\(gpu:8 on 4 nodes\)", takeover["detail"])
        assert held, takeover
        # the check cancels its job once done, which slurmd logs
        # (24.11 logs its batch step's end with the signal's number or the shell's 143 read as an errno, as in
        # test_pmix_and_imex_on_2411: "rc[0xf]:Block device required", "rc[0x8f00]:Unknown error 36608")
        handed_over = [*HANDOVER, re.compile(rf"\*\*\* JOB {held.group(1)} ON \S+ CANCELLED AT"),
                       re.compile(rf"\[{held.group(1)}\.batch\] stepd_cleanup: done with step \(rc\[0x(f|8f00)\]")]

        # slurmdbd HA: the primary slurmdbd stops; its backup takes over on the same database, so sacctmgr still
        # answers and writes, and slurmctld's job records reach it (sacct)
        if dbd:
            c.stop_slurmdbd()
            listed = lambda: c.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster",  # noqa: E731
                                   check=False, timeout=30).stdout.split()
            assert wait_for("the backup slurmdbd to answer", lambda: c.cluster_name in listed(), 90)
            c.sacctmgr("add", "account", "failover", f"cluster={c.cluster_name}")
            assert "failover" in c.run("sacctmgr", "-n", "-P", "list", "account", "format=account").stdout.split()
            c.batch_wait("true")
            assert c.sacct_job(c.last_job_id, wait_s=90)["State"] == "COMPLETED"

        job = running_job(c, "-N", "2", "--wrap", "srun sleep 300")
        started = time.time()
        nodes = c.run("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
        sleepers = wait_for("the job's tasks", lambda: c.ns.members("sleep") if len(c.ns.members("sleep")) >= 3 else [])
        # slurmctld writes its state at most every 5 s: wait until the job's start is on disk
        state = c.workdir / "state" / "job_state"
        wait_for("the job state saved", lambda: state.exists() and state.stat().st_mtime > started, 20)

        c.kill_controller(0)  # SIGKILL: nothing saved on the way out
        wait_for("the backup to take over",
                 lambda: "Running as primary controller" in c.controller_log(1).split("taking over", 1)[-1], 60)

        record = wait_for("the backup to answer", lambda: c.run("squeue", "-h", "-j", job, "-o", "%T %N",
                                                                check=False).stdout.strip())
        assert record == f"RUNNING {nodes}"  # the running job carried on
        assert all(pid in c.ns.members("sleep") for pid in sleepers)  # its processes too
        assert len(c.job("-N", "2", "hostname").stdout.split()) == 2  # and the backup schedules new ones
        assert "Slurmctld(backup) at orchgen-ctld2 is UP" in c.run("scontrol", "ping", check=False).stdout
        check_clean_log(c, p, also=TAKEOVER + handed_over + DBD_FAILOVER)
