"""The bundle's production checks (checks/run.py): the nccl-tests verdict on recorded all_reduce_perf runs
(one over InfiniBand that passes, one where NCCL fell back to sockets, which must fail), run as the bundle
ships them. The checks that need a cluster (GRES, whole allocation on the fewest leaves, NHC) run against a
real one in tests/test_bringup_real.py; their bounds (srun --immediate, the per-check bound, scancel on any exit),
the health job's per-node results and the NOT INSTALLED nccl-tests run against a cluster faked on PATH."""
from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import orchgen_argv


DATA = Path(__file__).parent / "data" / "bringup"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("checks") / "out"
    subprocess.run([*orchgen_argv(), "plan", str(DATA / "fleet.yaml"), "-o", str(out)],
                   check=True, capture_output=True, timeout=120)
    return out


def run_checks(bundle: Path, log: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, str(bundle / "checks/run.py"), "--only", "nccl", "--nccl-log",
                           str(DATA / log)], capture_output=True, text=True, timeout=60)
    return proc.returncode, json.loads(proc.stdout)


def test_checks_json_carries_the_plans_expectations(bundle):
    cfg = json.loads((bundle / "checks/checks.json").read_text())
    assert cfg["fabric"] == "infiniband" and cfg["nccl_transport"] == "NET/IB" and cfg["busbw_floor_gbps"] > 0
    assert cfg["nodes"] == {"gpu01": {"gpus": 2, "gpu_type": "a100"}, "gpu02": {"gpus": 2, "gpu_type": "a100"}}
    assert cfg["leaves"] == [{"name": "leaf1", "nodes": ["gpu01", "gpu02"]}]


def test_nccl_over_infiniband_passes(bundle):
    rc, out = run_checks(bundle, "nccl-ib-pass.log")
    assert rc == 0 and out["nccl"]["ok"] is True, out
    assert out["nccl"]["busbw_gbps"] == 75.81


def test_nccl_socket_fallback_fails(bundle):
    rc, out = run_checks(bundle, "nccl-socket-fallback.log")
    assert rc == 1 and out["nccl"]["ok"] is False, out
    detail = " ".join(out["nccl"]["detail"])
    assert "fell back to sockets" in detail and "no inter-node channel via NET/IB" in detail
    assert "below the 20.0 GB/s floor" in detail


def test_nccl_verdict_is_written_for_the_node_exporter(bundle, tmp_path):
    """`--textfile`: the verdicts as Prometheus text for the node exporter's textfile collector (the bundle's
    SlurmNCCLOnSockets alert reads orchgen_nccl_socket_fallback): 1 for the run that fell back to sockets, 0 for the
    one over InfiniBand. Served by a real node exporter in tests/test_bringup_real.py."""
    for log, fallback, ok in (("nccl-socket-fallback.log", 1, 0), ("nccl-ib-pass.log", 0, 1)):
        prom = tmp_path / "orchgen_checks.prom"
        subprocess.run([sys.executable, str(bundle / "checks/run.py"), "--only", "nccl", "--nccl-log", str(DATA / log),
                        "--textfile", str(prom)], capture_output=True, text=True, timeout=60)
        lines = [ln for ln in prom.read_text().splitlines() if not ln.startswith("#")]
        assert lines[:2] == [f'orchgen_check_ok{{check="nccl"}} {ok}', f"orchgen_nccl_socket_fallback {fallback}"], lines
        assert lines[2].startswith("orchgen_checks_timestamp_seconds ") and len(lines) == 3, lines
        assert not list(tmp_path.glob("*.tmp"))


def test_nccl_without_debug_lines_fails(bundle, tmp_path):
    quiet = tmp_path / "quiet.log"
    quiet.write_text("".join(ln for ln in (DATA / "nccl-ib-pass.log").read_text().splitlines(True) if "NCCL INFO" not in ln))
    proc = subprocess.run([sys.executable, str(bundle / "checks/run.py"), "--only", "nccl", "--nccl-log", str(quiet)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "is NCCL_DEBUG=INFO set?" in proc.stdout


def kube_checks(tmp_path: Path, nccl: dict, log: str) -> tuple[int, dict]:
    """checks/run.py's Kubernetes NCCL verdict on recorded pod logs (`--kube-nccl-log`), as shipped."""
    cfg = tmp_path / "checks.json"
    cfg.write_text(json.dumps({"kubernetes": {"gang": {"skip": "not this test"}, "nccl": nccl}}))
    proc = subprocess.run([sys.executable, str(REPO / "templates/bringup/checks.py"), "--config", str(cfg),
                           "--only", "kube-nccl", "--kube-nccl-log", str(DATA / log)],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, json.loads(proc.stdout)


def _kube_nccl(example: str) -> dict:
    from generator.render.bringup import kube_checks as checks_of
    from tests.support import plan_of

    return checks_of(plan_of(REPO / "examples" / example))["nccl"]


def test_kube_nccl_over_efa_passes(tmp_path):
    n = _kube_nccl("eks-training.yaml")  # p5 pool, EFA wired: the plugin's names, the EFA floor
    assert n["network"] == "efa" and "NET/Libfabric" in n["transport"] and n["gpus_per_pod"] == 8
    job = next(o for o in n["objects"] if o["kind"] == "Job")
    res = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert res["vpc.amazonaws.com/efa"] == "32" and res["nvidia.com/gpu"] == "8"  # the fabric wiring of training
    rc, out = kube_checks(tmp_path, n, "kube-nccl-efa-pass.log")
    assert rc == 0 and out["kube-nccl"]["ok"] is True, out
    assert out["kube-nccl"]["busbw_gbps"] == 342.02


def test_kube_nccl_socket_fallback_on_rdma_fails(tmp_path):
    n = _kube_nccl("baremetal-k8s-training.yaml")
    assert n["network"] == "rdma-shared" and n["transport"] == ["NET/IB"]
    rc, out = kube_checks(tmp_path, n, "kube-nccl-socket-fallback.log")
    detail = " ".join(out["kube-nccl"]["detail"])
    assert rc == 1 and "fell back to sockets" in detail and "no inter-node channel via NET/IB" in detail, out
    assert f"below the {n['busbw_floor_gbps']} GB/s floor" in detail


def test_kube_nccl_on_an_nvlink_domain_goes_over_the_rails():
    """GB200 NVL72: the check's pods claim their ComputeDomain's channel (so they start only once its IMEX domain is
    up), and run with NCCL_MNNVL_ENABLE=0, so their all_reduce crosses the rails (NET/IB) the check and its floor
    are about, not the rack's NVLink ("via P2P/MNNVL"); a DGX pool's run sets nothing of the kind."""
    def env_of(n: dict) -> list[dict]:
        job = next(o for o in n["objects"] if o["kind"] == "Job")
        return job["spec"]["template"]["spec"]["containers"][0]["env"]

    n = _kube_nccl("nvl72-kubernetes.yaml")
    assert n["transport"] == ["NET/IB"] and any(o["kind"] == "ComputeDomain" for o in n["objects"])
    assert {"name": "NCCL_MNNVL_ENABLE", "value": "0"} in env_of(n)
    assert all(e["name"] != "NCCL_MNNVL_ENABLE" for e in env_of(_kube_nccl("baremetal-k8s-training.yaml")))


def test_kube_nccl_without_a_result_line_fails(tmp_path):
    n = _kube_nccl("eks-training.yaml")
    quiet = tmp_path / "cut.log"
    quiet.write_text("".join(ln for ln in (DATA / "kube-nccl-efa-pass.log").read_text().splitlines(True)
                             if "orchgen-nccl ranks" not in ln))
    cfg = tmp_path / "checks.json"
    cfg.write_text(json.dumps({"kubernetes": {"nccl": n}}))
    proc = subprocess.run([sys.executable, str(REPO / "templates/bringup/checks.py"), "--config", str(cfg),
                           "--only", "kube-nccl", "--kube-nccl-log", str(quiet)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "no result line from rank 0" in proc.stdout


def test_fewest_leaves(bundle):
    sys.path.insert(0, str(bundle / "checks"))
    try:
        import run as checks  # the bundle's own file
    finally:
        sys.path.pop(0)
    leaves = [{"nodes": ["a", "b"]}, {"nodes": ["c", "d", "e", "f"]}, {"nodes": ["g"]}]
    assert [checks.fewest_leaves(leaves, k) for k in (1, 4, 5, 6, 7)] == [1, 1, 2, 2, 3]


# A cluster faked on PATH (srun, squeue, sinfo, scancel, scontrol, sbatch), so that the bounds, the cancelling, the
# health job's per-node results and the takeover check's steps are seen without one: FAKE_SRUN says what srun does.
FAKE_SRUN = r'''
import os, sys, time
d, mode, args = os.environ["FAKE_DIR"], os.environ["FAKE_SRUN"], sys.argv[1:]
with open(os.path.join(d, "srun.log"), "a") as f:
    f.write(" ".join(args) + "\n")
opts, i = {}, 0
while i < len(args) and args[i].startswith("-"):
    if args[i] in ("-N", "-t", "-J", "-w", "-p"):
        opts[args[i]] = args[i + 1]
        i += 1
    i += 1
if mode == "never":  # a busy partition, and an srun that never gives up (until its job is cancelled)
    with open(os.path.join(d, "srun-4242.pid"), "w") as f:
        f.write(str(os.getpid()))
    print("srun: job 4242 queued and waiting for resources", file=sys.stderr, flush=True)
    time.sleep(600)
if mode == "busy":  # what srun --immediate says when the nodes stay busy
    print("srun: job 4243 queued and waiting for resources", file=sys.stderr)
    print("srun: error: Unable to allocate resources: Requested nodes are busy", file=sys.stderr)
    sys.exit(1)
if mode == "refused":  # srun refused the job outright (here a node slurm.conf does not name): not busy
    print("srun: error: Unable to allocate resources: Invalid node name specified", file=sys.stderr)
    sys.exit(1)
if mode == "nodes":  # one task per node of -w (--ntasks-per-node=1; else one, on gpu01), each with its
    import subprocess  # SLURMD_NODENAME and the GPUs of --gres=gpu:N, here; FAKE_SEEN: node=GPUs its task sees
    gres = next((int(a.split(":")[-1]) for a in args[:i] if a.startswith("--gres=gpu:")), 0)
    seen = dict(kv.split("=") for kv in os.environ.get("FAKE_SEEN", "").split() if "=" in kv)
    listed = opts.get("-w", "gpu01")  # srun(1): a -w value with a "/" is a file of node names
    for node in (open(listed).read().split() if "/" in listed else listed.split(",")):
        gpus = seen.get(node, ",".join(map(str, range(gres))))
        subprocess.run(args[i:], env={**os.environ, "SLURMD_NODENAME": node, "SLURM_JOB_ID": "4250",
                                      **({"CUDA_VISIBLE_DEVICES": gpus} if gpus else {})}, check=True)
    sys.exit(0)
os.execvp(args[i], args[i:])  # local: run the command here
'''
FAKE_SQUEUE = r'''
import sys
if "-u" in sys.argv:  # the user's jobs, under the names srun was given (-J); only the checks' own are theirs
    import os
    log = os.path.join(os.environ["FAKE_DIR"], "srun.log")
    args = [a for line in open(log) for a in line.split()] if os.path.exists(log) else []
    for name in sorted({args[i + 1] for i, a in enumerate(args) if a == "-J"}):
        print(4242 if "allocation" in name else 4243, name)
    print("4100 train-llm")
    print("4300 orchgen-check-health-1")  # an earlier run's, not this one's
elif "-j" in sys.argv:  # the takeover check's job (sbatch's 4201): running throughout
    print("RUNNING gpu01")
elif "-n" in sys.argv:  # the jobs under the check's name still listed (FAKE_DIR/check-jobs, "%i|%T|%N" rows)
    import os
    path = os.path.join(os.environ["FAKE_DIR"], "check-jobs")
    print(open(path).read() if os.path.exists(path) else "", end="")
else:
    print("4242 bob PENDING 2 (Resources)")
    print("4100 carol RUNNING 2 gpu[01-02]")
'''
FAKE_SINFO = r'''
import os, sys
d = os.environ["FAKE_DIR"]
if "%N|%t|%G|%v" in sys.argv:  # each node in two partitions, as sinfo -N lists it: FAKE_DIR/sinfo-before, then
    # sinfo-after once `scontrol reconfigure` ran, where there (else every node as planned, registered)
    path = os.path.join(d, "sinfo-after" if os.path.exists(os.path.join(d, "reconfigured")) else "sinfo-before")
    rows = (open(path).read().split() if os.path.exists(path)
            else [f"gpu0{i}|idle|gpu:a100:2|22.05.8" for i in (1, 2, 3)])
    print("\n".join(r for r in rows for _ in range(2)))
else:
    print("gpu*" if "%P" in sys.argv else "")
'''
# Two controllers, ctl1 and ctl2: FAKE_DIR/ctl says which has control (none answers `scontrol ping` before the
# takeover check writes it: `scontrol takeover` gives it to ctl2, the check's --start-controller back to ctl1)
FAKE_SCONTROL = r'''
import os, sys
d, args = os.environ["FAKE_DIR"], sys.argv[1:]
with open(os.path.join(d, "scontrol.log"), "a") as f:
    f.write(" ".join(args) + "\n")
ctl = os.path.join(d, "ctl")
if args == ["takeover"]:
    open(ctl, "w").write("ctl2")
elif args == ["reconfigure"]:
    open(os.path.join(d, "reconfigured"), "w").close()
elif args == ["ping"] and os.path.exists(ctl):
    print(f"Slurmctld(primary) at ctl1 is {'UP' if open(ctl).read() == 'ctl1' else 'DOWN'}")
    print("Slurmctld(backup) at ctl2 is UP")
else:
    sys.exit(1)
'''
FAKE_SBATCH = r'''
print("4201")
'''
FAKE_SCANCEL = r'''
import os, signal, sys
d = os.environ["FAKE_DIR"]
with open(os.path.join(d, "scancel.log"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
for job in sys.argv[1:]:  # as on a real cluster, the cancelled job's srun ends (no sleeper left behind)
    pidfile = os.path.join(d, f"srun-{job}.pid")
    if os.path.exists(pidfile):
        try:
            os.kill(int(open(pidfile).read()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass
'''


@pytest.fixture
def cluster(tmp_path, bundle):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("squeue", FAKE_SQUEUE), ("sinfo", FAKE_SINFO), ("scancel", FAKE_SCANCEL),
                       ("scontrol", FAKE_SCONTROL), ("sbatch", FAKE_SBATCH)):
        (bin_ / name).write_text(f"#!{sys.executable}\n{text}")
        (bin_ / name).chmod(0o755)
    cfg = json.loads((bundle / "checks/checks.json").read_text())
    cfg["nodes"] = {f"gpu0{i}": {"gpus": 2, "gpu_type": "a100"} for i in (3, 1, 2)}
    cfg["health_program"] = "/usr/sbin/nhc"
    (tmp_path / "checks.json").write_text(json.dumps(cfg))

    def run(mode: str, *args: str, popen: bool = False, **fake: str):
        env = {**os.environ, "PATH": f"{bin_}:/usr/bin:/bin", "FAKE_DIR": str(tmp_path), "FAKE_SRUN": mode,
               "FAKE_NODES": "3", **fake}
        argv = [sys.executable, str(bundle / "checks/run.py"), "--config", str(tmp_path / "checks.json"), *args]
        if popen:
            return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    return run, tmp_path


def test_a_busy_partition_fails_bounded_with_what_squeue_shows_and_cancels(cluster):
    run, d = cluster
    start = time.monotonic()
    proc = run("never", "--only", "allocation", "--immediate", "1", "--check-timeout", "3")
    assert time.monotonic() - start < 20
    assert proc.returncode == 1, proc.stderr
    res = json.loads(proc.stdout)["allocation"]
    assert res["ok"] is False and res["status"] == "BUSY"
    assert "partition gpu busy: 2 nodes with gpu:2 still waiting after the check's bound of 3 s" in res["detail"]
    assert "4242 bob PENDING 2 (Resources)" in res["detail"] and "job 4242, cancelled" in res["detail"]
    assert "check allocation failed: allocation: partition gpu busy" in proc.stderr
    assert "--immediate=1 " in (d / "srun.log").read_text()
    assert set((d / "scancel.log").read_text().split()) == {"4242"}


def test_srun_immediate_refusal_is_one_clear_line(cluster):
    run, d = cluster
    proc = run("busy", "--only", "health", "--immediate", "2")
    assert proc.returncode == 1, proc.stderr
    detail = json.loads(proc.stdout)["health"]["detail"]
    assert len(detail) == 1 and "partition gpu busy: 3 nodes not free within 2 s (srun --immediate" in detail[0]
    assert "Requested nodes are busy" in detail[0] and "4100 carol RUNNING" in detail[0]
    assert set((d / "scancel.log").read_text().split()) == {"4243"}  # not 4300, an earlier run's


def test_srun_refusal_is_a_failure_not_busy(cluster):
    """"Unable to allocate resources" prefixes every refusal; only srun's busy wording makes a check BUSY: a job
    refused for an invalid node name fails the check with srun's own words (an operator's fix, not a wait)."""
    run, d = cluster
    proc = run("refused", "--only", "health", "--immediate", "2")
    assert proc.returncode == 1, proc.stderr
    res = json.loads(proc.stdout)["health"]
    assert res["ok"] is False and res.get("status") != "BUSY", res
    assert "Invalid node name specified" in json.dumps(res["detail"]) and "busy" not in json.dumps(res["detail"]), res


def test_sigterm_cancels_the_jobs_started(cluster):
    run, d = cluster
    proc = run("never", "--only", "allocation", popen=True)
    end = time.monotonic() + 20
    while not (d / "srun.log").exists() and time.monotonic() < end:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "4242" in (d / "scancel.log").read_text().split()


def test_health_is_one_job_over_every_node_with_a_result_per_node(cluster):
    """One srun -N<all> --ntasks-per-node=1 --immediate (issue 38: one job per node does not scale), bounded, and
    each node's NHC result read back from its task's line: the failing node is named with NHC's own message."""
    run, d = cluster
    nhc = d / "nhc"
    nhc.write_text('#!/bin/sh\n[ "$SLURMD_NODENAME" = gpu02 ] || exit 0\n'
                   'echo "ERROR:  nhc:  Health check failed:  check_fs_free:  /tmp has 2% free"; exit 1\n')
    nhc.chmod(0o755)
    cfg = json.loads((d / "checks.json").read_text())
    (d / "checks.json").write_text(json.dumps({**cfg, "health_program": str(nhc)}))
    proc = run("nodes", "--only", "health", "--immediate", "7")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["health"]["detail"] == [
        f"gpu02: {nhc} exit 1: ERROR:  nhc:  Health check failed:  check_fs_free:  /tmp has 2% free"]
    (line,) = (d / "srun.log").read_text().splitlines()  # one job
    assert line.startswith("--immediate=7 -J orchgen-check-health-") and \
        " -N 3 -w gpu01,gpu02,gpu03 --ntasks-per-node=1 -t 5 " in line, line
    nhc.write_text("#!/bin/sh\nexit 0\n")
    proc = run("nodes", "--only", "health")
    assert json.loads(proc.stdout)["health"] == {"ok": True, "detail": f"{nhc} passed on 3 nodes"}


def test_a_node_list_too_long_for_one_argument_goes_in_a_file(bundle):
    """srun -w of every node (health, the takeover's GPU job): past NODELIST_ARG_MAX the names go in a file, which
    srun reads where the value holds a "/" (srun(1) --nodelist); Linux refuses one argument over 128 KiB (E2BIG), which
    a plane of about 9,000 nodes' names reach. The file is removed afterwards."""
    sys.path.insert(0, str(bundle / "checks"))
    try:
        import run as checks  # the bundle's own file
    finally:
        sys.path.pop(0)
    few = ["gpu01", "gpu02"]
    with checks.nodelist(few) as listed:
        assert listed == "gpu01,gpu02"
    many = [f"gpu-node-{i:05d}" for i in range(10_000)]  # 159,999 characters joined: over 128 KiB
    assert len(",".join(many)) > 128 * 1024 > checks.NODELIST_ARG_MAX
    with checks.nodelist(many) as listed:
        assert "/" in listed and "," not in listed
        assert Path(listed).read_text().split() == many
    assert not Path(listed).exists()
    # one argument of that size is what execve refuses
    with pytest.raises(OSError) as e:
        subprocess.run(["true", ",".join(many)])
    assert e.value.errno == errno.E2BIG


def test_nccl_tests_not_installed_says_how_to_build_them(cluster):
    run, d = cluster
    proc = run("local", "--only", "nccl")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    res = json.loads(proc.stdout)["nccl"]
    assert res["ok"] is False and res["status"] == "NOT INSTALLED"
    # where the bring-up builds it (checks.json nccl_tests.binary), then PATH: neither here
    assert res["detail"][0].startswith("NOT INSTALLED: nccl-tests' /opt/nccl-tests-2.19.6/all_reduce_perf is not on ")
    # the steps are the bring-up's record (manual.nccl_tests), which the README prints too
    assert res["detail"][1:] == json.loads((d / "checks.json").read_text())["nccl_tests"]["steps"]
    steps = "\n".join(res["detail"])
    assert "/usr/local/cuda/bin/nvcc" in steps and "make -C /usr/local/src/nccl-tests-2.19.6" in steps
    assert "MPI=1" in steps and "BUILDDIR=/opt/nccl-tests-2.19.6" in steps
    assert "--nccl-tests PATH" in steps and "--skip nccl" in steps
    assert "check nccl failed: NOT INSTALLED" in proc.stderr


def test_nccl_tests_path_is_taken_from_the_flag(cluster):
    run, d = cluster
    fake = d / "all_reduce_perf"
    fake.write_text(f"#!/bin/sh\ncat {DATA / 'nccl-ib-pass.log'}\n")
    fake.chmod(0o755)
    proc = run("local", "--only", "nccl", "--nccl-tests", str(fake))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["nccl"]["busbw_gbps"] == 75.81


def test_nccl_tests_default_is_where_the_bring_up_builds_them(cluster):
    """Without --nccl-tests the check runs checks.json's nccl_tests.binary (bringup/nccl_tests.yml's prefix)."""
    run, d = cluster
    fake = d / "prefix" / "all_reduce_perf"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ncat {DATA / 'nccl-ib-pass.log'}\n")
    fake.chmod(0o755)
    cfg = json.loads((d / "checks.json").read_text())
    cfg["nccl_tests"]["binary"] = str(fake)
    (d / "checks.json").write_text(json.dumps(cfg))
    proc = run("local", "--only", "nccl")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["nccl"]["busbw_gbps"] == 75.81


def test_takeover_needs_two_controllers_up(cluster):
    """The takeover check (issue 38; proven against a real controller pair in test_slurm_ops_real.py) has nothing
    to try with one controller, and refuses to start a takeover unless `scontrol ping` shows both UP."""
    run, d = cluster
    proc = run("nodes", "--only", "takeover")
    assert json.loads(proc.stdout)["takeover"] == {"ok": True, "detail": "one controller (ctl1): no takeover to try"}
    cfg = json.loads((d / "checks.json").read_text())
    (d / "checks.json").write_text(json.dumps({**cfg, "controllers": ["ctl1", "ctl2"]}))
    proc = run("nodes", "--only", "takeover")  # no controller answers `scontrol ping`
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["takeover"] == {
        "ok": False, "detail": "planned controllers ['ctl1', 'ctl2']; scontrol ping shows none: both must be UP "
                               "before a takeover"}
    assert not (d / "srun.log").exists()  # no job was started


def takeover(cluster, *args: str, **fake: str):
    """The takeover check against the faked pair: ctl1 has control, --start-controller gives it back."""
    run, d = cluster
    cfg = json.loads((d / "checks.json").read_text())
    (d / "checks.json").write_text(json.dumps({**cfg, "controllers": ["ctl1", "ctl2"]}))
    (d / "ctl").write_text("ctl1")
    proc = run("nodes", "--only", "takeover", "--start-controller", f"printf ctl1 > {d / 'ctl'}", *args, **fake)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["takeover"]


def test_takeover_reregisters_every_node_then_uses_every_gpu(cluster):
    """Issue 38: after the hand-back a slurmd keeps sending to the backup, now standing by, so a node can be
    unregistered under the primary (gpu02 here: no slurmd version, though idle with its GRES) until `scontrol
    reconfigure` makes it register again; only then, and once no job of the check is left, one job over every node
    asks every GPU of each."""
    run, d = cluster
    (d / "sinfo-before").write_text("gpu01|idle|gpu:a100:2|22.05.8 gpu02|idle|gpu:a100:2|N/A "
                                    "gpu03|idle|gpu:a100:2|22.05.8")
    res = takeover(cluster)
    assert res["ok"] is True, res
    assert re.fullmatch(r"job 4201 \(RUNNING gpu01\) survived takeover by ctl2 in \d+ s, then back to ctl1 in \d+ s; "
                        r"each ran a new job; all 3 nodes registered with ctl1, with their GRES, \d+ s after "
                        r"`scontrol reconfigure`, and job 4250 had every GPU of each \(gpu:2 on 3 nodes\)", res["detail"]), res
    assert (d / "scontrol.log").read_text().split("\n").count("reconfigure") == 1
    under_backup, gpus = (d / "srun.log").read_text().splitlines()  # the primary's new job is the GPU job
    assert " -N1 -n1 -t 2 true" in under_backup
    assert " -N 3 -w gpu01,gpu02,gpu03 --ntasks-per-node=1 -t 2 --gres=gpu:2 sh -c " in gpus, gpus
    assert "4201" in (d / "scancel.log").read_text().split()  # its job, cancelled before the GPU job


def test_takeover_names_each_node_not_ready_after_the_hand_back(cluster):
    """A node not registered with the primary after `scontrol reconfigure`, one without its GRES and not responding,
    and a job of the check's still completing (its node's slurmd sent its end to the backup) each make one line,
    within the check's bound; no GPU job is tried."""
    run, d = cluster
    (d / "sinfo-after").write_text("gpu01|idle|gpu:a100:2|N/A gpu02|idle*|(null)|22.05.8 gpu03|mix|gpu:a100:2|22.05.8")
    (d / "check-jobs").write_text("4202|COMPLETING|gpu01\n")
    start = time.monotonic()
    res = takeover(cluster, "--check-timeout", "4")
    assert time.monotonic() - start < 20
    assert res["ok"] is False
    assert re.fullmatch(r"not ready under ctl1 \d s after `scontrol reconfigure` \(each node registered, idle, mix "
                        r"or alloc, with its GRES; no job of the check left\):", res["detail"][0]), res
    assert res["detail"][1:] == [
        "gpu01: not registered with ctl1 (slurmd version N/A: its slurmd still sends to the backup, or is down)",
        "gpu02: state idle*, GRES (null), planned gpu:a100:2", "job 4202 of the check still COMPLETING on gpu01"]
    assert len((d / "srun.log").read_text().splitlines()) == 1  # the backup's job only


def test_takeover_names_a_node_whose_task_lacks_its_gpus(cluster):
    run, d = cluster
    res = takeover(cluster, FAKE_SEEN="gpu03=0")
    assert res == {"ok": False, "detail": ["gpu03: its task saw GPUs '0' of the gpu:2 it asked"]}
