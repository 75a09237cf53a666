"""An adopted site's Slurm policy (issue 22), proven in the real Slurm: a bundle planned with every
options.slurm field of an existing site (its partitions over two GPU generations and time tiers,
an upper-case and an untyped GRES, CPUs=cores on hyperthreaded nodes, its QOS set, priority
weights, SchedulerParameters, job-count limits, RebootProgram/ResumeTimeout, PropagateResourceLimits,
prolog/epilog, cluster name) booted once with a real slurmdbd, after its own accounts.sh ran, on
Slurm 22.05 (host) and 26.05 (forky chroot). Expectations come from the input, never the files' text.

* slurmctld boots; `scontrol show config` shows each setting as given;
* `scontrol show partition` shows the site's partitions (a hidden one only with -a), limits and access;
* `sacctmgr show qos` shows the site's QOS with their limits and preemption;
* jobs with the site's partition names, QOS and GRES strings (GV100GL, untyped gpu:8) run, and only
  the site's own rules refuse (AllowQos, a QOS limit with DenyOnLimit, MaxArraySize, CPUs=cores);
* the site's prolog runs for a job;
* accounts.sh joining an existing slurmdbd adds what is missing and changes nothing that exists, and
  refuses a cluster name the database does not have.
"""
from __future__ import annotations

import copy
import pytest

from tests.slurmharness import SlurmCluster, SlurmCommandError, expand_hostlist, require_slurm
from tests.test_slurm_policy import accounts_sh, planned

pytestmark = pytest.mark.slurm

SUITES = [
    pytest.param(("bookworm", "22.05"), id="2205"),
    pytest.param(("forky", "26.05"), id="2605", marks=pytest.mark.chroot),
]

PROLOG = '#!/bin/sh\n# the site\'s prolog stand-in: records the jobs it ran for\necho "$SLURM_JOB_ID" >>"$(dirname "$0")/../prolog.ran"\n'
EPILOG = "#!/bin/sh\nexit 0\n"
ALICE = 5001  # a user of the site, in no group of the hidden partition


def site_fleet(version: str) -> dict:
    """Two GPU generations (V100 as the site names its GRES type, GV100GL; A100 untyped), CPU nodes
    counted by cores, and the site's policy."""
    slurm = {
        "cluster_name": "site1",
        "accounting": {"database": "site_acct"},
        "partitions": [
            {"name": "gpu", "pools": ["v100", "a100"], "max_time": "2-00:00:00"},
            {"name": "short", "nodes": "gv[01-02],ga[01-02],c[01-02]", "max_time": "01:00:00",
             "default_time": "00:30:00", "priority_tier": 2},
            {"name": "long", "pools": ["v100", "a100"], "max_time": "7-00:00:00", "allow_qos": ["long", "normal"],
             "max_nodes": 2},
            {"name": "cpu", "pools": ["cpu"], "default": True, "oversubscribe": "NO"},
            {"name": "maint", "nodes": "ALL", "hidden": True, "allow_groups": ["root"]},
        ],
        "qos": [
            {"name": "normal", "priority": 10, "preempt": ["scavenger"]},
            {"name": "long", "priority": 5, "max_wall": "7-00:00:00", "max_jobs_per_user": 2},
            {"name": "debug", "priority": 100, "max_wall": "00:30:00", "max_tres_per_user": "gres/gpu=2",
             "flags": ["DenyOnLimit"]},
            {"name": "scavenger", "priority": 0, "usage_factor": 0.0, "preempt_mode": "requeue",
             "flags": ["NoReserve"]},
        ],
        "priority": {"weight_age": 500, "weight_fairshare": 20000, "weight_jobsize": 100, "weight_partition": 1000,
                     "weight_qos": 5000, "weight_tres": "GRES/gpu=1000", "decay_half_life": "14-0",
                     "max_age": "14-0", "favor_small": True, "calc_period": 5},
        "scheduler_parameters": ["bf_interval=60", "bf_max_job_test=500", "default_queue_depth=200"],
        "max_switch_wait": 3600, "max_job_count": 200000, "max_array_size": 50001,
        "reboot_program": "/etc/slurm/reboot-node.sh", "resume_timeout": 2400,
        "propagate_resource_limits_except": ["MEMLOCK", "STACK"],
        "prolog": "/etc/slurm/site-prolog.sh", "epilog": "/etc/slurm/site-epilog.sh",
    }
    if version == "26.05":
        slurm["mpi"] = "pmi2"  # Debian forky's 26.05 has no mpi/pmix (test_slurm_policy.py)
    return {
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "adopt"},
        "fleet": {"bare_metal": True, "slurm": {"controllers": ["head01"]},
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": 4},
                  "pools": [
                      {"name": "v100", "nodes": 2, "hostnames": "gv[01-02]",
                       "gpu": {"type": "GV100GL", "custom": True, "count": 4},  # the site's own GRES name
                       "cpu": {"sockets": 2, "cores_per_socket": 8, "threads_per_core": 1}, "memory_gib": 192},
                      {"name": "a100", "nodes": 2, "hostnames": "ga[01-02]", "gpu": {"typed": False, "count": 8},
                       "cpus": 32, "memory_gib": 512},
                      {"name": "cpu", "nodes": 2, "hostnames": "c[01-02]", "cpu_count": "cores",
                       "cpu": {"sockets": 2, "cores_per_socket": 8, "threads_per_core": 2}, "memory_gib": 128}]},
        "tenants": [{"name": "physics", "share": 2, "users": ["root"]}, {"name": "bio", "share": 1, "users": ["root"]}],
        "workloads": [
            {"name": "train", "nodes": 2, "tightly_coupled": True, "pool": "a100", "tenant": "physics", "plane": "slurm"},
            {"name": "sim", "nodes": 2, "tightly_coupled": True, "pool": "v100", "tenant": "bio", "plane": "slurm"},
            {"name": "prep", "nodes": 1, "pool": "cpu", "tenant": "bio", "plane": "slurm"}],
        "options": {"slurm_version": version, "slurm": slurm},
    }


@pytest.fixture(scope="module", params=SUITES)
def cluster(request, slurm_db, tmp_path_factory):
    suite, version = request.param
    require_slurm(suite, accounting=True)
    tmp = tmp_path_factory.mktemp(f"site-{version}")
    fleet = site_fleet(version)
    out, m = planned(tmp, fleet)
    conf = out / "slurm"
    for name, text in (("site-prolog.sh", PROLOG), ("site-epilog.sh", EPILOG), ("reboot-node.sh", EPILOG)):
        (conf / name).write_text(text)
        (conf / name).chmod(0o755)
    # accounts.sh of the same site joining its running slurmdbd: one more QOS and tenant, a changed QOS
    joining = copy.deepcopy(fleet)
    joining["options"]["slurm"]["accounting"]["existing"] = True
    joining["options"]["slurm"]["qos"].append({"name": "extra", "priority": 7})
    joining["options"]["slurm"]["qos"][2]["priority"] = 1  # debug: exists, so it keeps 100
    joining["tenants"].append({"name": "chem", "users": ["root"]})
    (conf / "accounts-existing.sh").write_bytes((planned(tmp, joining, "existing")[0] / "slurm/accounts.sh").read_bytes())
    joining["options"]["slurm"]["cluster_name"] = "nosuch"
    (conf / "accounts-nosuch.sh").write_bytes((planned(tmp, joining, "nosuch")[0] / "slurm/accounts.sh").read_bytes())
    logs = []
    # accounts.sh before slurmctld, as the README's bring-up order has it: AllowQos=long names a QOS that
    # slurmdbd must already have (26.05 refuses to start otherwise; 22.05 ignores the value)
    with SlurmCluster(conf, suite=suite, database=slurm_db, unix_users={"alice": ALICE},
                      before_slurmctld=lambda c: logs.append(accounts_sh(c))) as c:
        assert c.version.startswith(version)
        assert "warning" not in logs[0]
        # slurmctld has registered gres/gpu: the second run sets the GPU limits (README: bring-up order)
        assert "waits for slurmctld's first start" in logs[0]
        assert "warning" not in accounts_sh(c)
        c.wait_for(lambda: {"physics", "bio"} <= set(c.shares()), 30, "the tenants in sshare")
        c.model = m
        yield c


def test_slurmctld_takes_the_site_settings(cluster):
    assert cluster.problems() == []
    cfg = cluster.config()
    assert cfg["ClusterName"] == "site1"
    assert cfg["MaxJobCount"] == "200000" and cfg["MaxArraySize"] == "50001"
    items = cfg["SchedulerParameters"].split(",")
    assert {"bf_interval=60", "bf_max_job_test=500", "default_queue_depth=200", "max_switch_wait=3600",
            "bf_continue"} <= set(items)
    assert "bf_max_job_test=1000" not in items  # the site's replaced orchgen's
    assert cfg["PropagateResourceLimitsExcept"] == "MEMLOCK,STACK"
    assert cfg["ResumeTimeout"] == "2400 sec"
    assert cfg["RebootProgram"].endswith("/etc/reboot-node.sh")
    # 26.05 lists Prolog/Epilog as Prolog[0]...: several may be given
    assert cfg.get("Prolog", cfg.get("Prolog[0]")).endswith("/etc/site-prolog.sh")
    assert cfg.get("Epilog", cfg.get("Epilog[0]")).endswith("/etc/site-epilog.sh")
    assert cfg["PriorityWeightAge"] == "500" and cfg["PriorityWeightFairShare"] == "20000"
    assert cfg["PriorityWeightJobSize"] == "100" and cfg["PriorityWeightPartition"] == "1000"
    assert cfg["PriorityWeightQOS"] == "5000" and cfg["PriorityWeightTRES"] == "GRES/gpu=1000"
    assert cfg["PriorityDecayHalfLife"] == "14-00:00:00" and cfg["PriorityMaxAge"] == "14-00:00:00"
    assert cfg["PriorityFavorSmall"].lower() == "yes" and cfg["PriorityCalcPeriod"] == "00:05:00"


def test_partitions_are_the_sites(cluster):
    parts = cluster.partitions()
    assert set(parts) == {"gpu", "short", "long", "cpu", "maint"}  # root sees the hidden one
    listed = cluster.run("scontrol", "-o", "show", "partition", user=ALICE).stdout
    assert "PartitionName=gpu " in listed and "PartitionName=maint " not in listed  # a user does not
    hidden = cluster.run("scontrol", "-a", "-o", "show", "partition", "maint").stdout
    assert "Hidden=YES" in hidden and "AllowGroups=root" in hidden and "Nodes=ALL" in hidden
    gpu_nodes = {"gv01", "gv02", "ga01", "ga02"}
    assert set(expand_hostlist(parts["gpu"]["nodes"])) == gpu_nodes
    assert set(expand_hostlist(parts["short"]["nodes"])) == gpu_nodes | {"c01", "c02"}
    assert parts["cpu"]["default"] and not parts["gpu"]["default"]
    assert parts["short"]["max_time"] == "01:00:00" and parts["long"]["max_time"] == "7-00:00:00"
    raw = {name: p["raw"] for name, p in parts.items()}
    assert raw["short"]["DefaultTime"] == "00:30:00" and raw["short"]["PriorityTier"] == "2"
    assert raw["long"]["AllowQos"] == "long,normal" and raw["long"]["MaxNodes"] == "2"
    assert raw["cpu"]["OverSubscribe"] == "NO"


def test_nodes_keep_the_sites_gres_and_cpu_count(cluster):
    nodes = cluster.nodes()
    assert nodes["gv01"]["gres"] == "gpu:GV100GL:4"
    assert nodes["ga01"]["gres"] == "gpu:8"  # untyped, not gpu:gpu:8
    assert nodes["c01"]["cpus"] == 16  # CPUs=cores of 2 x 8 x 2 threads
    assert all(n["state"].startswith("IDLE") for n in nodes.values()), nodes


def test_qos_are_the_sites(cluster):
    rows = {r["Name"]: r for r in cluster_qos(cluster)}
    assert {"normal", "long", "debug", "scavenger"} <= set(rows)
    assert rows["normal"]["Priority"] == "10" and rows["normal"]["Preempt"] == "scavenger"
    assert rows["long"]["MaxWall"] == "7-00:00:00" and rows["long"]["MaxJobsPU"] == "2"
    assert rows["debug"]["MaxWall"] == "00:30:00" and rows["debug"]["MaxTRESPU"] == "gres/gpu=2"
    assert "DenyOnLimit" in rows["debug"]["Flags"]
    assert rows["scavenger"]["PreemptMode"] == "requeue" and "NoReserve" in rows["scavenger"]["Flags"]
    assert float(rows["scavenger"]["UsageFactor"]) == 0
    by_account = {a["Account"]: a for a in cluster.associations() if not a["User"]}
    assert set(by_account["physics"]["QOS"].split(",")) == {"normal", "long", "debug", "scavenger"}
    assert by_account["physics"]["Def QOS"] == "normal"


def cluster_qos(c) -> list[dict[str, str]]:
    from tests.slurmharness import parse

    return parse.table(c.run("sacctmgr", "-P", "show", "qos", "format=Name,Priority,Preempt,PreemptMode,MaxWall,"
                             "MaxTRESPU,MaxJobsPU,UsageFactor,Flags").stdout)


def test_users_scripts_run_as_they_did(cluster):
    c = cluster
    job = c.submit("true", "-A", "physics", "-p", "gpu", "--gres=gpu:GV100GL:2")
    record = c.wait_job(job)
    assert record["JobState"] == "COMPLETED" and set(expand_hostlist(record["NodeList"])) <= {"gv01", "gv02"}
    job = c.submit("true", "-A", "physics", "-p", "gpu", "--gres=gpu:8")  # only the untyped A100 nodes have 8
    record = c.wait_job(job)
    assert record["JobState"] == "COMPLETED" and set(expand_hostlist(record["NodeList"])) <= {"ga01", "ga02"}
    for args in (("-p", "short", "--qos=debug", "--gres=gpu:1", "-t", "10"),
                 ("-p", "long", "--qos=long", "-t", "3-0", "-N", "2"),
                 ("-c", "16")):  # the default partition, cpu: a whole node's 16 cores
        record = c.wait_job(c.submit("true", "-A", "bio", *args))
        assert record["JobState"] == "COMPLETED", (args, record)
    assert set(expand_hostlist(record["NodeList"])) <= {"c01", "c02"} and record["NumCPUs"] == "16"
    # the site's prolog ran for these jobs
    assert job in (c.workdir / "prolog.ran").read_text().split()
    # an array as big as MaxArraySize allows, held (its tasks are not run), then cancelled
    array = c.submit("true", "-A", "bio", "--hold", "--array=0-50000")
    c.run("scancel", array)
    # only the site's own rules refuse
    for args, why in ((("-p", "long", "--qos=debug"), "Invalid qos specification"),  # AllowQos
                      (("-p", "short", "--qos=debug", "--gres=gpu:4"),  # debug's MaxTRESPerUser, DenyOnLimit
                       "Job violates accounting/QOS policy"),
                      (("--array=0-50001",), "Invalid job array specification"),  # MaxArraySize
                      (("-c", "17"), "Requested node configuration is not available")):  # 16 cores a node
        with pytest.raises(SlurmCommandError) as refused:
            c.submit("true", "-A", "bio", *args)
        assert why in refused.value.result.stderr, args


def test_accounts_sh_joins_an_existing_slurmdbd(cluster):
    assert accounts_sh(cluster, "accounts-existing.sh") == "accounts.sh: added user root to account chem\n"
    rows = {r["Name"]: r for r in cluster_qos(cluster)}
    assert rows["extra"]["Priority"] == "7"  # missing: added with its settings
    assert rows["debug"]["Priority"] == "100"  # existing: kept as the site has it
    accounts = {a["Account"] for a in cluster.associations() if not a["User"]}
    assert "chem" in accounts
    result = cluster.run("env", f"ORCHGEN_ACCOUNTS_STATE={cluster.work}/accounts.state", "sh",
                         f"{cluster.work}/etc/accounts-nosuch.sh", check=False)
    assert result.returncode == 1
    assert "cluster nosuch is not in the existing slurmdbd" in result.stderr
    assert "nosuch" not in cluster.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster").stdout.split()

