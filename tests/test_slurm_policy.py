"""The Slurm policy of a planned bundle (issue 12), proven by what a real scheduler DOES with jobs:
slurmctld + slurmds + a real slurmdbd on a real MariaDB, on loopback (tests/slurmharness), booted
from the bundle's slurm/ (only the loopback overlay differs) and set up by the bundle's own
accounts.sh. Expectations come from the plan's Slurm model, never from the files' text.

A GPU + CPU fleet with two tenants, on Slurm 22.05 (host), 24.11 (trixie) and 26.05 (forky; the
bundle there uses StoragePassScript and topology.yaml):

* accounts.sh makes the associations: sshare's normalized share of each tenant is its share over
  its siblings'; users of `users` and of `unix_group` (members and primary-group users) get in; a
  second run changes nothing; a user taken off the input is removed, one an administrator added stays;
* a job with N GPUs is billed N x the GPU weight, and slurmdbd records it;
* `srun --gres=gpu:N` gets N x DefCpuPerGPU CPUs and N x DefMemPerGPU memory;
* a scavenger job on the nodes a normal job needs is requeued and the normal job starts;
* a CPU-only job (default partition, or `all`) lands on a CPU node;
* DefaultTime is what a job without --time gets; beyond MaxTime is refused at submission;
* tenants[].max_gpus caps the GPUs a tenant's running jobs hold (GrpTRES);
* a user from the input submits as themselves; a uid in no account is refused.

Backfill, on a 32-node GPU fleet (22.05 and 24.11, where the issue was seen): a 32-node job behind
running jobs gets an expected start bounded by their time limits (not a year), a later small job
that would delay it waits, and one that fits before it is backfilled.

The MariaDB settings snippet: a real MariaDB starts with it, and slurmdbd then has no complaint
about the database settings.
"""
from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from generator import bundle
from generator.decide import make_plan
from generator.render import render
from generator.render.slurm.model import model
from generator.spec import load
from tests.slurmharness import SlurmCluster, SlurmCommandError, expand_hostlist, require_slurm

pytestmark = pytest.mark.slurm

SUITES = [
    pytest.param(("bookworm", "22.05"), id="2205"),
    pytest.param(("trixie", "24.11"), id="2411", marks=pytest.mark.chroot),
    pytest.param(("forky", "26.05"), id="2605", marks=pytest.mark.chroot),
]
ALICE, BOB, CAROL, DAVE = 5001, 5002, 5003, 5004  # uids of the cluster's own Unix accounts
ML_GID = 6001
NLP_MAX_GPUS = 16


def policy_fleet(version: str, users: list[str] | None = None) -> dict:
    """4 H100 nodes (8 GPUs, 64 CPUs, 512 GiB) and 2 CPU nodes; nlp (users root and alice, at most
    16 GPUs) and vision (root, and Unix group ml); a 2-day training workload and a 12-hour CPU one."""
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "policy"},
        "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 4},
                  "pools": [{"name": "h100", "nodes": 4, "gpu": {"type": "h100", "count": 8}, "cpus": 64,
                             "memory_gib": 512},
                            {"name": "cpu", "nodes": 2, "cpus": 32, "memory_gib": 128}]},
        "tenants": [{"name": "nlp", "share": 3, "users": users if users is not None else ["root", "alice"],
                     "max_gpus": NLP_MAX_GPUS},
                    {"name": "vision", "share": 1, "users": ["root"], "unix_group": "ml"}],
        "workloads": [{"name": "train", "nodes": 4, "tightly_coupled": True, "pool": "h100", "tenant": "nlp",
                       "max_time": "2-00:00:00"},
                      {"name": "prep", "nodes": 2, "tightly_coupled": True, "pool": "cpu", "tenant": "vision",
                       "max_time": "12:00:00"}],
        # Debian forky's 26.05 is built without mpi/pmix, which `auto` picks from 23.11 (test_slurm_real.py)
        "options": {"slurm_version": version, **({"slurm": {"mpi": "pmi2"}} if version == "26.05" else {})},
    }


def planned(tmp_path: Path, fleet: dict, name: str = "bundle"):
    """make_plan + render of `fleet`, written under tmp_path/name; returns (bundle dir, Slurm model)."""
    source = tmp_path / f"{fleet['metadata']['name']}.yaml"
    source.write_text(yaml.safe_dump(fleet, sort_keys=False))
    plan = make_plan(load(source), source.name)
    out = tmp_path / name
    bundle.write(render(plan), out)  # as `orchgen plan` writes it: scripts (task-prolog.sh, accounts.sh) executable
    return out, model(plan)


def accounts_sh(c: SlurmCluster, script: str = "accounts.sh") -> str:
    """Run a bundle's accounts.sh in the cluster (its record of what it added in the work dir)."""
    result = c.run("env", f"ORCHGEN_ACCOUNTS_STATE={c.work}/accounts.state", "sh", f"{c.work}/etc/{script}")
    return result.stderr


def associations(c: SlurmCluster) -> set[tuple[str, str]]:
    return {(a["Account"], a["User"]) for a in c.associations()}


def running(c: SlurmCluster, job: str) -> bool:
    return c.job_record(job).get("JobState") == "RUNNING"


def nodes_of(c: SlurmCluster, job: str) -> set[str]:
    return set(expand_hostlist(c.job_record(job)["NodeList"]))


def mib(value: str) -> int:
    """scontrol's memory ("4000M", "2G") in MiB."""
    m = re.fullmatch(r"([\d.]+)([MGT]?)", value)
    return round(float(m.group(1)) * {"": 1, "M": 1, "G": 1024, "T": 1024 ** 2}[m.group(2)])


@pytest.fixture(scope="module", params=SUITES)
def cluster(request, slurm_db, tmp_path_factory):
    """The policy fleet's bundle booted with accounting, after its accounts.sh ran."""
    suite, version = request.param
    require_slurm(suite, accounting=True)
    tmp = tmp_path_factory.mktemp(f"policy-{version}")
    out, m = planned(tmp, policy_fleet(version))
    # the input without alice, for the removal test: its accounts.sh goes beside the bundle's
    (out / "slurm" / "accounts-without-alice.sh").write_bytes(
        (planned(tmp, policy_fleet(version, users=["root"]), "without-alice")[0] / "slurm/accounts.sh").read_bytes())
    users = {"alice": ALICE, "bob": BOB, "carol": (CAROL, ML_GID), "dave": DAVE}
    with SlurmCluster(out / "slurm", suite=suite, database=slurm_db, unix_users=users,
                      unix_groups={"ml": (ML_GID, ["bob"])}) as c:
        assert c.version.startswith(version)
        c.accounts_log = accounts_sh(c)
        c.wait_for(lambda: {"nlp", "vision"} <= set(c.shares()), 30, "the tenants in sshare")
        c.model = m
        yield c


# ------------------------------------------------------------------ accounts, users, QOS


def test_accounts_sh_gives_each_tenant_its_share(cluster):
    rows = cluster.sshare()
    tenants = {r["account"]: r for r in rows if not r["user"] and r["level"] == 1}
    siblings = [r for r in rows if r["level"] == 1]  # nlp, vision and root's own user association
    total = sum(r["raw_shares"] for r in siblings)
    for a in cluster.model.accounts:
        assert tenants[a.name]["raw_shares"] == a.share
        assert tenants[a.name]["norm_shares"] == pytest.approx(a.share / total, abs=1e-6)
    assert total == 3 + 1 + 1  # root's user association, which `sacctmgr add cluster` makes, has 1


def test_users_of_the_list_and_of_the_unix_group_get_in(cluster):
    assocs = associations(cluster)
    assert {("nlp", "root"), ("nlp", "alice")} <= assocs
    # bob is listed in group ml, carol has it as her primary group; dave is in neither
    assert {("vision", "bob"), ("vision", "carol")} <= assocs
    assert not {a for a in assocs if a[1] == "dave"}
    by_account = {a["Account"]: a for a in cluster.associations() if not a["User"]}
    for tenant in ("nlp", "vision"):
        assert set(by_account[tenant]["QOS"].split(",")) == {"normal", "scavenger"}
        assert by_account[tenant]["Def QOS"] == "normal"
    assert by_account["nlp"]["GrpTRES"] == f"gres/gpu={NLP_MAX_GPUS}"
    assert by_account["vision"]["GrpTRES"] == ""


def test_accounts_sh_is_idempotent_and_removes_only_what_it_added(cluster):
    before = associations(cluster)
    assert accounts_sh(cluster) == ""  # nothing to add, nothing to say
    assert associations(cluster) == before
    # an administrator's own association, and alice dropped from the input: only alice goes
    cluster.sacctmgr("add", "user", "dave", "account=nlp", f"cluster={cluster.cluster_name}")
    log = accounts_sh(cluster, "accounts-without-alice.sh")
    assert "removed user alice from account nlp" in log
    assert associations(cluster) == (before - {("nlp", "alice")}) | {("nlp", "dave")}
    # bob leaves group ml: the next run removes him; carol (primary group) stays
    group = cluster.workdir / "nss" / "group"
    group.write_text(group.read_text().replace(f"ml:x:{ML_GID}:bob", f"ml:x:{ML_GID}:"))
    assert "removed user bob from account vision" in accounts_sh(cluster)
    assocs = associations(cluster)
    assert ("vision", "bob") not in assocs and ("vision", "carol") in assocs
    assert ("nlp", "alice") in assocs  # the full input again: alice is back
    # put things back for the other tests
    group.write_text(group.read_text().replace(f"ml:x:{ML_GID}:", f"ml:x:{ML_GID}:bob"))
    accounts_sh(cluster)
    cluster.sacctmgr("remove", "user", "where", "name=dave", "account=nlp", f"cluster={cluster.cluster_name}")
    cluster.wait_for(lambda: {("vision", "bob"), ("nlp", "alice")} <= {(r["account"], r["user"]) for r in
                                                                       cluster.sshare()}, 30, "slurmctld to see bob")


def test_a_user_of_the_input_submits_as_themselves(cluster):
    job = cluster.submit("true", "-A", "nlp", "-p", "cpu", "--output=/dev/null", "--chdir=/tmp", user=ALICE)
    record = cluster.wait_job(job)
    assert record["JobState"] == "COMPLETED" and record["UserId"].startswith("alice(")
    job = cluster.submit("true", "-A", "vision", "--output=/dev/null", "--chdir=/tmp", user=CAROL)
    assert cluster.wait_job(job)["JobState"] == "COMPLETED"
    with pytest.raises(SlurmCommandError) as refused:  # dave belongs to no tenant
        cluster.submit("true", "--output=/dev/null", "--chdir=/tmp", user=DAVE)
    assert "Invalid account or account/partition combination" in refused.value.result.stderr


# ------------------------------------------------------------------ billing


def test_gpu_job_is_billed_by_its_gpus(cluster):
    h100 = next(p for p in cluster.model.partitions if p.name == "h100")
    for gpus in (1, 3):
        job = cluster.submit("true", "-A", "nlp", "-p", "h100", f"--gres=gpu:{gpus}")
        assert cluster.wait_job(job)["JobState"] == "COMPLETED"
        assert cluster.job_tres(job)["gres/gpu"] == str(gpus)
        assert cluster.billing(job) == pytest.approx(gpus * h100.billing.gpu)
        row = cluster.sacct_job(job)  # what slurmdbd recorded
        assert float(row["alloc_tres"]["billing"]) == pytest.approx(gpus * h100.billing.gpu)
        assert row["alloc_tres"]["gres/gpu"] == str(gpus)


def test_cpu_job_on_a_gpu_node_is_billed_by_its_cpus(cluster):
    job = cluster.submit("true", "-A", "nlp", "-p", "h100", "-c", "8")
    cluster.wait_job(job)
    tres = cluster.job_tres(job)
    assert tres["cpu"] == "8" and "gres/gpu" not in tres
    assert cluster.billing(job) == 8  # CPU=1.0 dominates its memory (DefMemPerCPU x 8 x the Mem weight)


# ------------------------------------------------------------------ GPU defaults, time limits, placement


def test_srun_gres_gpu_gets_the_cpus_and_memory_per_gpu(cluster):
    h100 = next(p for p in cluster.model.partitions if p.name == "h100")
    assert h100.cpu_per_gpu == 64 // 8 and h100.mem_per_gpu == cluster.model.groups[0].real_memory // 8
    for gpus in (1, 2):
        out = cluster.job("-A", "nlp", "-p", "h100", f"--gres=gpu:{gpus}", "sh", "-c",
                          'echo "$SLURM_JOB_ID $SLURM_CPUS_ON_NODE"').stdout.split()
        job, cpus = out[0], int(out[1])
        tres = cluster.job_tres(job)
        assert cpus == int(tres["cpu"]) == gpus * h100.cpu_per_gpu
        assert mib(tres["mem"]) == gpus * h100.mem_per_gpu
    # a job without GPUs on the same partition: DefMemPerCPU per CPU
    out = cluster.job("-A", "nlp", "-p", "h100", "-c", "2", "sh", "-c", 'echo "$SLURM_JOB_ID"').stdout.split()
    assert mib(cluster.job_tres(out[0])["mem"]) == 2 * h100.def_mem_per_cpu


def test_time_limits_are_the_partitions(cluster):
    parts = cluster.partitions()
    for p in cluster.model.partitions:
        assert parts[p.name]["raw"]["MaxTime"] == p.max_time_str
        assert parts[p.name]["raw"]["DefaultTime"] == p.default_time_str
    h100 = next(p for p in cluster.model.partitions if p.name == "h100")
    job = cluster.submit("true", "-A", "nlp", "-p", "h100")
    assert cluster.wait_job(job)["TimeLimit"] == h100.default_time_str  # no --time: DefaultTime
    with pytest.raises(SlurmCommandError) as refused:  # 3 days on a 2-day partition: refused at once
        cluster.submit("true", "-A", "nlp", "-p", "h100", "-t", "3-00:00:00")
    assert "Requested time limit is invalid" in refused.value.result.stderr
    config = cluster.run("scontrol", "show", "config").stdout
    assert re.search(rf"SchedulerParameters\s*=\s*{re.escape(cluster.model.backfill.value)}\b", config)


def test_cpu_only_job_lands_on_a_cpu_node(cluster):
    cpu_nodes = set(cluster.model.groups[1].nodes)
    assert cluster.model.default_partition.name == "cpu"
    job = cluster.submit("true", "-A", "nlp")  # no partition: the default, CPU-only
    cluster.wait_job(job)
    assert cluster.job_record(job)["Partition"] == "cpu" and nodes_of(cluster, job) <= cpu_nodes
    job = cluster.submit("true", "-A", "nlp", "-p", "all", "-n", "4")  # every node: Weight decides
    cluster.wait_job(job)
    assert nodes_of(cluster, job) <= cpu_nodes


# ------------------------------------------------------------------ QOS: preemption, GPU cap


def test_scavenger_job_is_requeued_for_a_normal_one(cluster):
    h100 = cluster.model.groups[0].nodes
    # vision soaks up every idle GPU node with scavenger work (vision has no GPU cap: a capped tenant's
    # scavenger jobs count against its own cap, and Slurm preempts for nodes, not for limits)
    scavenger = cluster.submit("sleep 300", "-A", "vision", "-p", "h100", "--qos=scavenger", "-N", str(len(h100)),
                               "--exclusive")
    try:
        cluster.wait_for(lambda: running(cluster, scavenger), 30, "the scavenger job on every GPU node")
        normal = cluster.submit("sleep 300", "-A", "nlp", "-p", "h100", "-N", "1", "--exclusive")
        cluster.wait_for(lambda: running(cluster, normal), 60, "the normal job to start")
        # the requeued job is COMPLETING while its other nodes tear down (with PrologFlags=Contain, its
        # extern step too) before it is PENDING again
        record = cluster.wait_for(lambda: (r := cluster.job_record(scavenger))["JobState"] != "COMPLETING" and r,
                                  30, "the preempted job to finish completing")
        assert record["JobState"] in ("PENDING", "REQUEUED", "CONFIGURING", "RUNNING") and int(record["Restarts"]) >= 1
        assert nodes_of(cluster, normal) <= set(h100)
        states = cluster.wait_for(lambda: [r["State"] for r in cluster.sacct("-j", scavenger, "-D", "-X")
                                           if r["State"].startswith(("PREEMPTED", "REQUEUED"))], 30,
                                  "slurmdbd's record of the preemption")
        assert states
    finally:
        cluster.run("scancel", scavenger, check=False)
        cluster.run("scancel", "--user=root", check=False)
        cluster.wait_for(lambda: not cluster.run("squeue", "-h").stdout.strip(), 60, "an empty queue")


def test_tenant_gpu_cap_holds_jobs_back(cluster):
    jobs = [cluster.submit("sleep 300", "-A", "nlp", "-p", "h100", "--gres=gpu:8") for _ in range(3)]
    try:
        cluster.wait_for(lambda: sum(running(cluster, j) for j in jobs) == NLP_MAX_GPUS // 8, 30,
                         "two 8-GPU jobs running")
        time.sleep(2)  # and the third stays pending: the tenant holds its 16 GPUs
        pending = [j for j in jobs if not running(cluster, j)]
        assert len(pending) == 1
        reason = cluster.wait_for(lambda: cluster.job_record(pending[0]).get("Reason") not in (None, "None"), 30,
                                  "a pending reason") and cluster.job_record(pending[0])["Reason"]
        assert reason == "AssocGrpGRES", cluster.job_record(pending[0])
    finally:
        cluster.run("scancel", *jobs, check=False)
        cluster.wait_for(lambda: not cluster.run("squeue", "-h").stdout.strip(), 60, "an empty queue")


def test_slurmdbd_reads_the_password_where_the_bundle_puts_it(cluster):
    """slurmdbd.conf holds no password: the overlay fills the file or script it names, as the
    operator would, and slurmdbd (serving every test above) got its password from there."""
    kind, path = cluster.model.storage_pass
    dbd_conf = (cluster.config_dir / "slurmdbd.conf").read_text()
    assert not re.search(r"^StoragePass\s*=", dbd_conf, re.M | re.I)
    assert cluster.overlay_result.secret_files == [Path(path).name]
    if kind == "script":  # Slurm 25.11+: StoragePassScript, run by slurmdbd for a TOKEN=
        assert f"StoragePassScript={path}" in dbd_conf
        assert "storage token refreshed" in (cluster.workdir / "log" / "slurmdbd.log").read_text()
    else:
        assert f"Include {path}" in dbd_conf


def test_logs_are_clean(cluster):
    # expected: dave's refused submission, and the end of the jobs the tests cancelled or preempted. slurmd
    # logs a cancel at once; slurmdbd records the job's end when slurmctld sends it, which on a loaded host
    # (the suite's workers beside it) can come seconds later: sacct is asked again for up to 30 s
    deadline = time.monotonic() + 30
    while True:
        ended = [row["JobID"] for row in cluster.sacct("-X", "-D")
                 if row["State"].startswith(("CANCELLED", "PREEMPTED", "REQUEUED"))]
        marks = [m for j in ended for m in (f"[{j}.", f"JobId={j} ", f"JOB {j} ")]
        unexpected = [p for p in cluster.problems()
                      if f"User {DAVE} not found" not in p and not any(m in p for m in marks)]
        if not unexpected or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert unexpected == []
    assert "does not resolve" not in cluster.accounts_log


# ------------------------------------------------------------------ backfill on a 32-node GPU fleet


def backfill_fleet(version: str) -> dict:
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "bf"},
        "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 8, "leaves_per_spine": 4},
                  "pools": [{"name": "h100", "nodes": 32, "gpu": {"type": "h100", "count": 8}, "cpus": 64,
                             "memory_gib": 512},
                            {"name": "cpu", "nodes": 2, "cpus": 32, "memory_gib": 128}]},
        "tenants": [{"name": "nlp", "share": 1, "users": ["root"]}],
        "workloads": [{"name": "pretrain", "nodes": 32, "tightly_coupled": True, "pool": "h100", "tenant": "nlp",
                       "max_time": "7-00:00:00"}],
        "options": {"slurm_version": version},
    }


def start_time(c: SlurmCluster, job: str) -> datetime | None:
    value = c.job_record(job).get("StartTime", "")
    return datetime.fromisoformat(value) if re.match(r"\d{4}-", value) else None


@pytest.mark.parametrize("suite", [
    pytest.param(("bookworm", "22.05"), id="2205"),
    pytest.param(("trixie", "24.11"), id="2411", marks=pytest.mark.chroot),
])
def test_backfill_keeps_the_big_job_s_place(tmp_path, slurm_db, suite):
    suite, version = suite
    require_slurm(suite, accounting=True)
    out, m = planned(tmp_path, backfill_fleet(version))
    h100 = next(p for p in m.partitions if p.name == "h100")
    assert m.backfill.window >= max(p.max_time for p in m.partitions)
    with SlurmCluster(out / "slurm", suite=suite, database=slurm_db) as c:
        accounts_sh(c)
        c.wait_for(lambda: "nlp" in c.shares(), 30, "the tenant in sshare")
        busy_nodes = m.groups[0].nodes[:16]
        # half of the GPU nodes run jobs that gave no --time: they end at DefaultTime at the latest
        running_jobs = [c.submit("sleep 600", "-A", "nlp", "-p", "h100", "-w", node, "--exclusive",
                                 "--gres=gpu:8") for node in busy_nodes]
        c.wait_for(lambda: all(running(c, j) for j in running_jobs), 60, "16 running jobs")
        ends = [datetime.fromisoformat(c.job_record(j)["EndTime"]) for j in running_jobs]
        assert {c.job_record(j)["TimeLimit"] for j in running_jobs} == {h100.default_time_str}
        big = c.submit("sleep 60", "-A", "nlp", "-p", "h100", "-N", "32", "--exclusive", "--gres=gpu:8")
        # backfill (every 30 s, Slurm's bf_interval) plans the big job and gives it an expected start
        expected = c.wait_for(lambda: start_time(c, big), 100, "backfill to plan the big job")
        # bounded by the running jobs' limits (one bf_resolution step of slack), not "a year away"
        slack = m.backfill.resolution + 60
        assert max(ends).timestamp() - 60 <= expected.timestamp() <= max(ends).timestamp() + slack, (expected, ends)
        # a later 1-node job that would still run at that start (DefaultTime) must wait for the big job
        would_delay = c.submit("sleep 60", "-A", "nlp", "-p", "h100", "-N", "1", "--exclusive")
        # one that ends well before it (30 minutes) fits in the hole: backfill starts it
        fits = c.submit("sleep 60", "-A", "nlp", "-p", "h100", "-N", "1", "--exclusive", "-t", "30")
        # the cycle that starts `fits` has looked at `would_delay` first (older, same priority otherwise)
        c.wait_for(lambda: running(c, fits), 100, "backfill to start the job that fits")
        assert not set(nodes_of(c, fits)) & set(busy_nodes)
        record = c.job_record(would_delay)
        assert record["JobState"] == "PENDING", record
        later = start_time(c, would_delay)
        assert later is None or later >= expected, (later, expected)
        assert c.job_record(big)["JobState"] == "PENDING" and start_time(c, big) <= expected
        c.run("scancel", "--user=root")


# ------------------------------------------------------------------ the MariaDB settings


def test_mariadb_settings_satisfy_slurmdbd_2205(tmp_path):
    """The snippet is read by a real MariaDB, and slurmdbd, which checks these settings at start,
    finds nothing below what it recommends."""
    from tests.slurmharness import mariadb

    require_slurm("bookworm", accounting=True)
    out, _ = planned(tmp_path, policy_fleet("22.05"))
    snippet = out / "slurm" / "mariadb-slurm.cnf"
    with mariadb.MariaDB(tmp_path / "db", defaults_file=snippet) as db:
        values = dict(db.sql("SHOW VARIABLES WHERE Variable_name IN ('innodb_buffer_pool_size', "
                             "'innodb_log_file_size', 'innodb_lock_wait_timeout', 'max_allowed_packet', "
                             "'innodb_snapshot_isolation')"))
        assert int(values["innodb_buffer_pool_size"]) == 4096 * 1024 ** 2
        assert int(values["innodb_log_file_size"]) == 1024 * 1024 ** 2
        assert values["innodb_lock_wait_timeout"] == "900"
        assert int(values["max_allowed_packet"]) == 16 * 1024 ** 2
        assert values.get("innodb_snapshot_isolation", "OFF") == "OFF"
        with SlurmCluster(out / "slurm", database=db) as c:
            log = (c.workdir / "log" / "slurmdbd.log").read_text()
            assert "not recommended" not in log
            assert [p for p in c.problems() if p.startswith("slurmdbd")] == []
