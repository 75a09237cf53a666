"""Slurm accounting proven by what the real scheduler does (issue 12): slurmctld behind a real
slurmdbd and MariaDB on loopback (tests/slurmharness, `SlurmCluster(..., accounting=True)`).

The sample tests/data/slurm-sample/acct-gpu/ is written as an admin would: slurmdbd accounting
with `AccountingStorageEnforce=associations,limits,qos`, `AccountingStorageTRES=gres/gpu`,
priority/multifactor with `PriorityFlags=MAX_TRES`, `PriorityWeightTRES=GRES/gpu=2000`, and a GPU
partition (2 nodes x 4 GPUs) whose `TRESBillingWeights` make GPUs dominant (GRES/gpu=16, CPU=1,
Mem=0.25G), plus its own slurmdbd.conf. On each of Slurm 22.05 (the host), 24.11 (trixie chroot)
and 26.05 (forky chroot), against one MariaDB shared by the session:

* the controller runs with the accounting the file asks for (`scontrol show config`);
* accounts created with sacctmgr get `normalized share = share / sum of siblings' shares` in sshare;
* a `--gres=gpu:2` job is billed 2 x the GPU weight, and slurmdbd records that billing and the GPUs;
* a pending GPU job's priority has the GPU TRES term: weight x requested / partition GPUs;
* a user without an association, or an unknown account, is refused at submission.

And a bundle planned by orchgen (tenants, so accounting) boots with accounting on, its own
accounts.sh gives each tenant its share, and a GPU job is billed by its GPUs (22.05, with a MariaDB
of its own; tests/test_slurm_policy.py proves the rest of the bundle's policy).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator import bundle
from generator.decide import make_plan
from generator.render import render
from generator.spec import load
from tests.slurmharness import SlurmCluster, SlurmCommandError, require_slurm

pytestmark = pytest.mark.slurm

SAMPLE = Path(__file__).parent / "data" / "slurm-sample" / "acct-gpu"
GPU_WEIGHT = 16.0  # TRESBillingWeights GRES/gpu of the sample's partition
PRIORITY_GPU_WEIGHT = 2000  # PriorityWeightTRES=GRES/gpu=2000
PARTITION_GPUS = 8  # 2 nodes x 4
SHARES = {"nlp": 3, "vision": 1}
NOBODY = 65534  # nobody:nogroup, a uid with no association

SUITES = [
    pytest.param(("bookworm", "22.05"), id="2205"),
    pytest.param(("trixie", "24.11"), id="2411", marks=pytest.mark.chroot),
    pytest.param(("forky", "26.05"), id="2605", marks=pytest.mark.chroot),
]


@pytest.fixture(scope="module", params=SUITES)
def acct(request, slurm_db):
    """The sample booted with accounting on one suite, with accounts nlp (3) and vision (1), root in both."""
    suite, version = request.param
    require_slurm(suite, accounting=True)
    with SlurmCluster(SAMPLE, suite=suite, database=slurm_db) as c:
        assert c.version.startswith(version)
        c.add_accounts(SHARES)
        yield c


def test_controller_runs_the_accounting_the_config_asks_for(acct):
    conf = acct.config()
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStorageEnforce"] == "associations,limits,qos"
    assert "gres/gpu" in conf["AccountingStorageTRES"].split(",")
    assert conf["PriorityType"] == "priority/multifactor"
    assert conf["PriorityFlags"] == "MAX_TRES"
    assert conf["PriorityWeightTRES"] == "GRES/gpu=2000"
    weights = acct.partitions()["gpu"]["raw"]["TRESBillingWeights"]
    assert weights == "CPU=1.0,Mem=0.25G,GRES/gpu=16.0"
    # the cluster slurmdbd knows is slurm.conf's, and it is the one the controller registered
    clusters = acct.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster,controlport").stdout.split()
    assert clusters == [f"acct|{conf['SlurmctldPort']}"]


def test_sshare_normalizes_each_share_by_its_siblings(acct):
    rows = acct.sshare()
    for row in rows:
        if row["level"] == 0:
            continue  # the root account: no share of its own
        siblings = [r for r in rows if r["level"] == row["level"] and r["parent"] == row["parent"]]
        total = sum(r["raw_shares"] for r in siblings)
        assert row["norm_shares"] == pytest.approx(row["raw_shares"] / total, abs=1e-6), row["raw"]
    # under root: nlp 3, vision 1 and root's own user association, 1 (sacctmgr add cluster makes it)
    shares = acct.shares()
    assert shares["nlp"]["norm_shares"] == pytest.approx(3 / 5, abs=1e-6)
    assert shares["vision"]["norm_shares"] == pytest.approx(1 / 5, abs=1e-6)
    assert {a["Account"]: a["Share"] for a in acct.associations() if not a["User"]} == {
        "root": "1", "nlp": "3", "vision": "1"}


def test_gpu_job_is_billed_by_the_gpu_weight_and_recorded(acct):
    job = acct.submit("true", "-A", "nlp", "-p", "gpu", "--gres=gpu:2")
    assert acct.wait_job(job)["JobState"] == "COMPLETED"
    tres = acct.job_tres(job)
    assert tres["gres/gpu"] == "2" and tres["cpu"] == "1"
    # MAX_TRES: the largest weighted TRES of the node, here GPUs: 2 x 16 (CPU 1 x 1.0, Mem ~1)
    assert acct.billing(job) == 2 * GPU_WEIGHT
    row = acct.sacct_job(job)  # what slurmdbd stored, read back through sacct
    assert row["Account"] == "nlp" and row["State"] == "COMPLETED"
    assert row["alloc_tres"]["billing"] == "32" and row["alloc_tres"]["gres/gpu"] == "2"


def test_cpu_job_is_billed_by_its_largest_weighted_tres(acct):
    job = acct.submit("true", "-A", "vision", "-p", "gpu", "-c", "4")
    acct.wait_job(job)
    tres = acct.job_tres(job)
    assert tres["cpu"] == "4" and tres["mem"] == "16000M" and "gres/gpu" not in tres
    # max(4 CPUs x 1.0, 15.6 GiB x 0.25 = 3.9): the CPUs
    assert acct.billing(job) == 4


def test_pending_gpu_job_priority_has_the_gpu_tres_term(acct):
    holders = [acct.submit("sleep 60", "-A", "vision", "-p", "gpu", "--exclusive") for _ in range(2)]
    try:
        acct.wait_for(lambda: all(acct.job_record(j).get("JobState") == "RUNNING" for j in holders), 30,
                      "both nodes busy")
        job = acct.submit("true", "-A", "nlp", "-p", "gpu", "--gres=gpu:2")
        # sprio: the TRES term is weight x (requested / the partition's), 2000 x 2/8
        line = acct.wait_for(lambda: acct.run("sprio", "-h", "-j", job, "-o", "%i|%T").stdout.strip(), 15,
                             f"sprio to list job {job}")
        assert line == f"{job}|gres/gpu={PRIORITY_GPU_WEIGHT * 2 // PARTITION_GPUS}"
    finally:
        acct.run("scancel", *holders, check=False)
        for holder in holders:
            acct.sacct_job(holder)  # until slurmdbd has their end, which the log test relies on


def test_user_without_association_is_refused(acct):
    with pytest.raises(SlurmCommandError) as refused:
        acct.submit("true", "-p", "gpu", user=NOBODY)
    assert "Invalid account or account/partition combination" in refused.value.result.stderr
    with pytest.raises(SlurmCommandError) as refused:
        acct.submit("true", "-A", "nosuch", "-p", "gpu")
    assert "Invalid account or account/partition combination" in refused.value.result.stderr


def test_logs_are_clean(acct):
    # the jobs the priority test cancelled log their end ("*** JOB 4 ON gpu002 CANCELLED AT", and on
    # 24.11 "[4.batch] stepd_cleanup: done with step (rc[0xf]...No error)"): slurmdbd knows which
    # slurmdbd learns a job's end a moment after slurmd logs it, so the unexplained lines are asked again
    # until slurmdbd has caught up (at most 120 s); a line no cancelled job explains still fails the test
    def unexplained() -> list[str]:
        cancelled = {row["JobID"] for row in acct.sacct("-X") if row["State"].startswith("CANCELLED")}
        expected = [f"slurmctld: error: User {NOBODY} not found"]  # the refused submission of a uid with no name
        expected += [f"[{job}.batch] " for job in cancelled]
        return [p for p in acct.problems() if not any(e in p for e in expected)]

    acct.wait_for(lambda: not unexplained(), 120, "slurmdbd to record the cancelled jobs")  # 30 s ran out once in CI at load 12+
    assert unexplained() == []


# ------------------------------------------------------------------ a bundle planned by orchgen

TENANTS = {  # one GPU pool, two tenants: the planner turns on fair share over slurmdbd
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "tenants"},
    "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 4, "leaves_per_spine": 2},
              "pools": [{"name": "h100", "nodes": 4, "gpu": {"type": "h100", "count": 8}, "cpus": 64,
                         "memory_gib": 512}]},
    "tenants": [{"name": "nlp", "share": 3}, {"name": "vision", "share": 1}],
    "workloads": [{"name": "train", "nodes": 4, "tightly_coupled": True, "pool": "h100", "tenant": "nlp"}],
    "options": {"slurm_version": "22.05"},
}


def planned_bundle(tmp_path: Path, fleet: dict) -> Path:
    """generator.planner.make_plan + generator.render.render, written out; returns the bundle dir."""
    source = tmp_path / f"{fleet['metadata']['name']}.yaml"
    source.write_text(yaml.safe_dump(fleet, sort_keys=False))
    out = tmp_path / "bundle"
    # as `orchgen plan` writes it: scripts (task-prolog.sh, accounts.sh) executable
    bundle.write(render(make_plan(load(source), source.name)), out)
    return out


def test_planned_tenants_get_their_shares_from_accounts_sh_2205(tmp_path):
    require_slurm("bookworm", accounting=True)
    out = planned_bundle(tmp_path, TENANTS)
    with SlurmCluster(out / "slurm", accounting=True) as c:  # a MariaDB of its own
        assert c.cluster_name == "tenants"
        # as written into the bundle, and again (it says it is safe to rerun); its record of the users
        # it added goes to the work dir, not to the machine's /var/lib
        state = f"ORCHGEN_ACCOUNTS_STATE={c.work}/accounts.state"
        c.run("env", state, "sh", f"{c.work}/etc/accounts.sh")
        c.run("env", state, "sh", f"{c.work}/etc/accounts.sh")
        c.sacctmgr("add", "user", "root", "account=nlp,vision")
        c.wait_for(lambda: {"nlp", "vision"} <= set(c.shares()), 30, "the tenants in sshare")
        shares = c.shares()
        assert shares["nlp"]["raw_shares"] == 3 and shares["vision"]["raw_shares"] == 1
        assert shares["nlp"]["norm_shares"] == pytest.approx(3 / 5, abs=1e-6)
        job = c.submit("true", "-A", "nlp", "--gres=gpu:8")
        assert c.wait_job(job)["JobState"] == "COMPLETED"
        # the generated TRESBillingWeights bill GPUs: a GPU weighs the node's CPUs per GPU (64 / 8)
        assert c.billing(job) == 8 * (64 / 8)
        assert c.sacct_job(job)["alloc_tres"]["gres/gpu"] == "8"
        assert c.problems() == []
