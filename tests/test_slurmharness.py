"""Tests of the loopback Slurm harness itself (tests/slurmharness), on hand-written samples.

The samples in tests/data/slurm-sample/ are written the way an HPC admin drops configs into
/etc/slurm; the harness must boot them unchanged:

    lab-tree/   2 pools, 6 nodes, topology/tree (2 leaves + spine), fair share, slurmdbd: Slurm 22.05
    nvl-block/  2 NVL72 racks (36 nodes), topology/block, BlockSizes=18,36, AutoDetect=nvml: 24.11
    nvl-yaml/   the same racks in topology.yaml (a tree + a block topology): 26.05

Slurm ones are marked `slurm`, the newer suites also `chroot` (their first run builds a cached
debootstrap chroot, ~25 s each). The overlay and parser tests at the top need no Slurm.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.slurmharness import SlurmBootError, SlurmCluster, expand_hostlist, require_slurm
from tests.slurmharness import nhc, overlay, parse, procs

SAMPLES = Path(__file__).parent / "data" / "slurm-sample"
LAB = SAMPLES / "lab-tree"
H100 = [f"gpu-h100-00{i}" for i in range(1, 5)]
A100 = ["gpu-a100-001", "gpu-a100-002"]


def variant(tmp_path: Path, sample: Path, **edits) -> Path:
    """A copy of `sample` with files changed: variant(tmp, LAB, topology_conf=lambda text: ...)."""
    conf = tmp_path / "conf"
    shutil.copytree(sample, conf)
    for name, edit in edits.items():
        path = conf / name.replace("_", ".")
        path.write_text(edit(path.read_text()))
    return conf


# ------------------------------------------------------------------ no Slurm needed


def test_hostlist_expand():
    assert expand_hostlist("gpu-h100-[001-003],x") == ["gpu-h100-001", "gpu-h100-002", "gpu-h100-003", "x"]
    assert expand_hostlist("leaf[1-2,7]") == ["leaf1", "leaf2", "leaf7"]
    assert expand_hostlist("n[1-2]g[a,b]") == ["n1ga", "n1gb", "n2ga", "n2gb"]
    assert expand_hostlist("(null)") == []


def _layout(legacy: bool = True) -> overlay.Layout:
    return overlay.Layout(work="/w", host="box", ctld_port=20000, node_port_base=20001, legacy=legacy)


def test_overlay_replaces_only_site_specific_keys():
    text, found, _ = overlay.rewrite_slurm_conf((LAB / "slurm.conf").read_text(), _layout(), set())
    lines = text.splitlines()
    assert found.nodes == H100 + A100 and found.dropped_slurmdbd
    assert "SlurmctldHost=box(127.0.0.1)" in lines and "SlurmctldHost=slurmctl" not in lines
    for dropped in ("AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost", "AccountingStorageTRES",
                    "JobAcctGatherType=jobacct_gather/cgroup", "SlurmUser=slurm", "/var/spool", "/var/log"):
        assert dropped not in text
    # kept: what the generator decided
    for kept in ("PriorityType=priority/multifactor", "TopologyPlugin=topology/tree", "GresTypes=gpu",
                 "PartitionName=h100 Nodes=gpu-h100-[001-004] Default=YES MaxTime=INFINITE State=UP"):
        assert kept in lines
    assert ("NodeName=gpu-h100-[001-004] CPUs=224 RealMemory=2031616 Gres=gpu:h100:8 Features=h100,pool-h100 "
            "State=UNKNOWN NodeHostname=box NodeAddr=127.0.0.1 Port=[20001-20004]") in lines
    assert "Port=[20005-20006]" in lines[-3]
    assert "TaskPlugin=task/none" in lines and "SlurmdParameters=config_overrides" in lines


def test_overlay_drops_gres_weights_only_with_the_slurmdbd_it_removed():
    conf = ("AccountingStorageType=accounting_storage/slurmdbd\nPriorityWeightTRES=CPU=1000,GRES/gpu=3000\n"
            'PartitionName=p Nodes=n1 TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=1.0" State=UP\n')
    lines = overlay.rewrite_slurm_conf(conf, _layout(), set())[0].splitlines()
    assert "PriorityWeightTRES=CPU=1000" in lines
    assert 'PartitionName=p Nodes=n1 TRESBillingWeights="CPU=1.0,Mem=0.25G" State=UP' in lines
    # without slurmdbd in the input, GRES weights are a real (fatal) mistake: left for Slurm to report
    lines = overlay.rewrite_slurm_conf(conf.split("\n", 1)[1], _layout(), set())[0].splitlines()
    assert "PriorityWeightTRES=CPU=1000,GRES/gpu=3000" in lines


def test_overlay_newer_slurm_has_no_task_none_and_disables_cgroup_plugin():
    text, _, _ = overlay.rewrite_slurm_conf((LAB / "slurm.conf").read_text(), _layout(legacy=False), set())
    assert not any(ln.startswith("TaskPlugin") for ln in text.splitlines())
    cgroup = overlay.rewrite_cgroup_conf("CgroupPlugin=cgroup/v2\nConstrainCores=yes\n", _layout(legacy=False))
    assert cgroup == "CgroupPlugin=disabled\nConstrainCores=yes\n"
    assert overlay.rewrite_cgroup_conf("ConstrainCores=yes\n", _layout()) == "ConstrainCores=yes\n"


def test_overlay_fakes_gpu_device_files_and_autodetection():
    _, found, node_lines = overlay.rewrite_slurm_conf((LAB / "slurm.conf").read_text(), _layout(), set())
    gres = overlay.rewrite_gres_conf((LAB / "gres.conf").read_text(), _layout(), node_lines, found)
    assert "NodeName=gpu-h100-[001-004] Name=gpu Type=h100 File=/w/dev/nvidia[0-7]" in gres.splitlines()
    assert found.devices == {f"nvidia{i}" for i in range(8)}
    # AutoDetect=nvml for one pool: its GPUs are synthesised from slurm.conf's Gres=, the other pool's kept
    gres = overlay.rewrite_gres_conf("NodeName=gpu-a100-[001-002] AutoDetect=nvml\n"
                                     "NodeName=gpu-h100-[001-004] Name=gpu Type=h100 File=/dev/nvidia[0-7]\n",
                                     _layout(), node_lines, found)
    assert gres.splitlines() == ["NodeName=gpu-a100-[001-002] AutoDetect=off",
                                 "NodeName=gpu-h100-[001-004] Name=gpu Type=h100 File=/w/dev/nvidia[0-7]",
                                 "NodeName=gpu-a100-[001-002] Name=gpu Type=a100 File=/w/dev/nvidia[0-3]"]


def test_overlay_keeps_node_hardware_and_gpu_affinity():
    """Sockets, specialised cores and memory, and gres.conf's Cores= reach the booted Slurm unchanged;
    only task/cgroup goes (and the cluster then forgives slurmd's "Limited MemSpecLimit support")."""
    node = ("NodeName=dgx[01-02] CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 "
            "RealMemory=2053618 CoreSpecCount=4 MemSpecLimit=65536 Gres=gpu:h100:8 State=UNKNOWN")
    conf = f"TaskPlugin=task/cgroup,task/affinity\nGresTypes=gpu\n{node}\n"
    text, found, node_lines = overlay.rewrite_slurm_conf(conf, _layout(), set())
    assert found.dropped_task_cgroup
    assert f"{node} NodeHostname=box NodeAddr=127.0.0.1 Port=[20001-20002]" in text.splitlines()
    gres = overlay.rewrite_gres_conf("NodeName=dgx[01-02] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-55\n"
                                     "NodeName=dgx[01-02] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=56-111\n",
                                     _layout(), node_lines, found)
    assert gres.splitlines() == ["NodeName=dgx[01-02] Name=gpu Type=h100 File=/w/dev/nvidia[0-3] Cores=0-55",
                                 "NodeName=dgx[01-02] Name=gpu Type=h100 File=/w/dev/nvidia[4-7] Cores=56-111"]
    assert not overlay.rewrite_slurm_conf("TaskPlugin=task/affinity\n", _layout(), set())[1].dropped_task_cgroup


def test_overlay_defaults_includes_and_slurmd_parameters():
    conf = ("Include /etc/slurm/nodes.conf\nInclude /etc/slurm/missing.conf\n"
            "SlurmdParameters=l3cache_as_socket,config_overrides\n"
            "NodeName=DEFAULT Gres=gpu:l40s:2\nNodeName=n[1-2] CPUs=8\nNodeName=n3 CPUs=8 Gres=gpu:1\n")
    text, found, node_lines = overlay.rewrite_slurm_conf(conf, _layout(), {"nodes.conf"})
    lines = text.splitlines()
    assert "Include /w/etc/nodes.conf" in lines and "Include /etc/slurm/missing.conf" in lines
    assert found.notes == ["slurm.conf: 'Include /etc/slurm/missing.conf' names a file not in the config dir; left as is"]
    assert "SlurmdParameters=config_overrides,l3cache_as_socket" in lines
    assert "NodeName=n3 CPUs=8 Gres=gpu:1 NodeHostname=box NodeAddr=127.0.0.1 Port=20003" in lines
    gres = overlay.rewrite_gres_conf("AutoDetect=nvml\n", _layout(), node_lines, found)
    assert gres.splitlines() == ["AutoDetect=off", "NodeName=n[1-2] Name=gpu Type=l40s File=/w/dev/nvidia[0-1]",
                                 "NodeName=n3 Name=gpu File=/w/dev/nvidia0"]
    # count-only lines: given files beside AutoDetect, left alone (a real finding) without it
    gres = overlay.rewrite_gres_conf("AutoDetect=nvml\nNodeName=n[1-2] Name=gpu Type=l40s Count=2\n",
                                     _layout(), node_lines, found)
    assert gres.splitlines()[1:] == ["NodeName=n[1-2] Name=gpu Type=l40s Count=2 File=/w/dev/nvidia[0-1]",
                                     "NodeName=n3 Name=gpu File=/w/dev/nvidia0"]
    gres = overlay.rewrite_gres_conf("NodeName=n[1-2] Name=gpu Type=l40s Count=2\n", _layout(), node_lines, found)
    assert gres == "NodeName=n[1-2] Name=gpu Type=l40s Count=2\n"


def test_overlay_runs_shipped_programs_from_the_copy_and_drops_the_others():
    conf = ("TaskProlog=/etc/slurm/task-prolog.sh\nProlog=/etc/slurm/prolog.sh\nHealthCheckProgram=/usr/sbin/nhc\n"
            "HealthCheckInterval=300\nMpiDefault=pmix\nTmpFS=/scratch\nNodeName=n1 CPUs=8\n")
    text, found, _ = overlay.rewrite_slurm_conf(conf, _layout(), {"task-prolog.sh"})
    lines = text.splitlines()
    assert "TaskProlog=/w/etc/task-prolog.sh" in lines and not any(ln.startswith("Prolog=") for ln in lines)
    assert not any(ln.startswith("HealthCheckProgram") for ln in lines) and "HealthCheckInterval=300" in lines
    assert "MpiDefault=pmix" in lines  # kept: whether the packages' plugin loads is part of the proof
    assert "TmpFS=/w/tmp/%n" in lines and "TmpFS=/scratch" not in lines  # each node its own /tmp
    assert found.health_check == "/usr/sbin/nhc"
    lay = overlay.Layout(**{**vars(_layout()), "health_check": "/w/nhc/nhc-standin.sh"})
    assert "HealthCheckProgram=/w/nhc/nhc-standin.sh" in overlay.rewrite_slurm_conf(conf, lay, set())[0].splitlines()


def test_overlay_controller_pair_and_imex_major():
    conf = ("SlurmctldHost=ctl1\nSlurmctldHost=ctl2\nSlurmctldTimeout=120\nCommunicationParameters=block_null_hash\n"
            "SwitchType=switch/nvidia_imex\nSwitchParameters=imex_channel_count=2048\nNodeName=n1 CPUs=8\n")
    assert overlay.count_controllers(conf) == 2
    lay = overlay.Layout(**{**vars(_layout()), "controllers": 2, "failover_timeout_s": 10, "imex_dev_major": 4000})
    lines = overlay.rewrite_slurm_conf(conf, lay, set())[0].splitlines()
    assert [ln for ln in lines if ln.startswith(("SlurmctldHost", "SlurmctldTimeout", "CommunicationParameters",
                                                 "SwitchParameters"))] == [
        "SlurmctldHost=orchgen-ctld1(127.0.0.1)", "SlurmctldHost=orchgen-ctld2(127.0.0.2)",
        "SwitchParameters=imex_channel_count=2048,imex_dev_major=4000",
        "CommunicationParameters=block_null_hash,NoCtldInAddrAny", "SlurmctldTimeout=10"]
    hosts = overlay.hosts_file("127.0.0.1 localhost\n", 2).splitlines()
    assert hosts[-2:] == ["127.0.0.1 orchgen-ctld1", "127.0.0.2 orchgen-ctld2"]
    assert str(overlay.pick_free_major()) not in [ln.split()[0] for ln in Path("/proc/devices").read_text().splitlines()
                                                  if ln.strip() and ln.split()[0].isdigit()]


def test_nhc_standin_runs_nhc_conf_checks_and_drains_like_nhc(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "nhc.conf").write_text(
        "* || export NHC_RM=slurm\n* || check_fs_mount_rw -f /\n"
        "{n[01-02]} || check_cmd_output -C check_gpus -t 20 -m '!/^FAIL/' -M '%L' /etc/slurm/check.sh 8 h100\n")
    (etc / "check.sh").write_text('#!/bin/sh\n[ "$SLURMD_NODENAME" = n02 ] && { echo "FAIL: 7 of $1 $2"; exit 1; }\n'
                                  'echo ok\n')
    (etc / "check.sh").chmod(0o755)
    (tmp_path / "log").mkdir()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "scontrol").write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {tmp_path}/scontrol.log\n')
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    standin = nhc.write_standin(etc, str(tmp_path), ["n01", "n02", "n03"])
    run = lambda node: subprocess.run([standin], env={"SLURMD_NODENAME": node}, capture_output=True, text=True)
    assert [run(n).returncode for n in ("n01", "n02", "n03")] == [0, 1, 0]
    assert (tmp_path / "scontrol.log").read_text() == (
        "update|State=DRAIN|NodeName=n02|Reason=NHC: check_gpus:  FAIL: 7 of 8 h100.|")
    log = (tmp_path / "log" / "nhc.log").read_text()
    assert "not run here: export NHC_RM=slurm; check_fs_mount_rw -f /" in log
    assert nhc.matches("{n[01-02],x}", "x") and not nhc.matches("{n[01-02]}", "n03") and nhc.matches("*", "n03")


def test_adopt_never_takes_the_tests_own_namespace(tmp_path):
    ns = procs.MountNamespace([], tmp_path / "ns.log")
    try:
        ns.adopt(os.getpid(), timeout_s=0.2)  # a process still in the test's namespace is never adopted
        assert ns.nested == set()
        assert os.getpid() not in ns.members() and not [p for p in ns.members() if p != ns.holder.pid]
    finally:
        ns.sweep()


def test_parse_fields_with_spaces_in_values():
    rec = parse.fields("NodeName=n1 OS=Linux 6.1.0 #1 SMP State=IDLE Gres=gpu:h100:8 Reason=Low mem [root@x] CfgTRES=cpu=2,mem=1M")
    assert rec == {"NodeName": "n1", "OS": "Linux 6.1.0 #1 SMP", "State": "IDLE", "Gres": "gpu:h100:8",
                   "Reason": "Low mem [root@x]", "CfgTRES": "cpu=2,mem=1M"}


def test_overlay_with_accounting_keeps_the_policy_and_moves_slurmdbd_here():
    conf = ("ClusterName=Lab\nAccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=slurmdbd\n"
            "AccountingStoragePort=6819\nAccountingStoragePass=/run/munge/global.socket.2\n"
            "AccountingStorageTRES=gres/gpu\nAccountingStorageEnforce=associations,limits,qos\n"
            "JobAcctGatherType=jobacct_gather/cgroup\nJobAcctGatherFrequency=30\nAcctGatherEnergyType=acct_gather_energy/ipmi\n"
            "JobCompType=jobcomp/elasticsearch\nPriorityWeightTRES=CPU=1000,GRES/gpu=3000\n"
            'PartitionName=p Nodes=n1 TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=1.0" State=UP\n')
    lay = overlay.Layout(work="/w", host="box", ctld_port=20000, node_port_base=20002, legacy=True, dbd_port=20001)
    text, found, _ = overlay.rewrite_slurm_conf(conf, lay, set())
    lines = text.splitlines()
    assert found.cluster_name == "lab" and not found.dropped_slurmdbd
    for kept in ("AccountingStorageTRES=gres/gpu", "AccountingStorageEnforce=associations,limits,qos",
                 "JobAcctGatherFrequency=30", "PriorityWeightTRES=CPU=1000,GRES/gpu=3000",
                 'PartitionName=p Nodes=n1 TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=1.0" State=UP'):
        assert kept in lines
    for loopback in ("AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=box",
                     "AccountingStoragePort=20001", "AccountingStoragePass=/w/munge/munge.sock",
                     "JobAcctGatherType=jobacct_gather/linux", "JobCompType=jobcomp/none"):
        assert loopback in lines
    for gone in ("Host=slurmdbd", "6819", "global.socket", "jobacct_gather/cgroup", "ipmi", "elasticsearch"):
        assert gone not in text


def test_overlay_of_slurmdbd_conf_replaces_only_where_and_who():
    from tests.slurmharness.mariadb import Database

    lay = overlay.Layout(work="/w", host="box", ctld_port=20000, node_port_base=20002, legacy=True, dbd_port=20001)
    db = Database(name="slurm_acct_1", user="u1", password="pw1", host="127.0.0.1", port=23306)
    text, secrets = overlay.rewrite_slurmdbd_conf(
        "DbdHost=slurmdbd\nStorageHost=mariadb\nStoragePass=REPLACE_ME\nStorageLoc=slurm_acct_db\n"
        "SlurmUser=slurm\nLogFile=/var/log/slurm/slurmdbd.log\nStorageParameters=SSL_CA=/etc/ssl/ca.pem\n"
        "PurgeJobAfter=12months\nArchiveDir=/var/archive\nArchiveScript=/usr/sbin/archive\nTrackWCKey=yes\n", lay, db)
    assert secrets == []
    lines = text.splitlines()
    for loopback in ("DbdHost=box", "DbdAddr=127.0.0.1", "DbdPort=20001", "SlurmUser=root", "AuthType=auth/munge",
                     "AuthInfo=socket=/w/munge/munge.sock", "StorageHost=127.0.0.1", "StoragePort=23306",
                     "StorageUser=u1", "StoragePass=pw1", "StorageLoc=slurm_acct_1", "LogFile=/w/log/slurmdbd.log",
                     "PurgeJobAfter=12months", "ArchiveDir=/w/archive", "TrackWCKey=yes"):
        assert loopback in lines
    for gone in ("Host=slurmdbd", "mariadb", "REPLACE_ME", "slurm_acct_db", "/var/", "SSL_CA", "ArchiveScript"):
        assert gone not in text
    # without a slurmdbd.conf in the config dir: the same loopback values, nothing else
    assert overlay.rewrite_slurmdbd_conf(None, lay, db)[0].splitlines()[1:-1] == lines[1:16]


def test_overlay_fills_the_password_file_or_script_the_input_names():
    """orchgen's slurmdbd.conf keeps the password out of itself: an Include of a file the operator
    writes (Slurm < 25.11) or StoragePassScript (25.11+). The overlay fills that place, not the header."""
    from tests.slurmharness.mariadb import Database

    lay = overlay.Layout(work="/w", host="box", ctld_port=20000, node_port_base=20002, legacy=True, dbd_port=20001)
    db = Database(name="slurm_acct_1", user="u1", password="pw1", host="127.0.0.1", port=23306)
    text, secrets = overlay.rewrite_slurmdbd_conf("StorageUser=slurm\nInclude /etc/slurm/pass.conf\n", lay, db)
    assert "Include /w/etc/pass.conf" in text.splitlines() and "pw1" not in text
    assert [(f.name, f.text, f.mode) for f in secrets] == [("pass.conf", "StoragePass=pw1\n", 0o600)]
    text, secrets = overlay.rewrite_slurmdbd_conf("StoragePassScript=/etc/slurm/pass.sh\n", lay, db)
    assert "StoragePassScript=/w/etc/pass.sh" in text.splitlines() and "pw1" not in text
    assert [(f.name, f.text, f.mode) for f in secrets] == [("pass.sh", "#!/bin/sh\necho TOKEN=pw1\n", 0o700)]
    # an Include of a file the config dir ships points at the copy and is not overwritten
    text, secrets = overlay.rewrite_slurmdbd_conf("Include /etc/slurm/extra.conf\n", lay, db, frozenset({"extra.conf"}))
    assert "Include /w/etc/extra.conf" in text.splitlines() and "StoragePass=pw1" in text and secrets == []


def test_parse_sshare_tree_tables_and_tres():
    text = ("Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins\n"
            "root|||0.000000|0||1.000000||||cpu=0\n"
            " root|root|1|0.200000|0|0.000000|0.000000|1.000000|inf||cpu=0\n"
            " nlp||3|0.600000|0||0.000000||0.000000||cpu=0\n"
            "  nlp|alice|parent|1.000000|0||0.000000|0.000000|0.000000||cpu=0\n")
    rows = parse.sshare(text)
    assert [(r["account"], r["user"], r["level"], r["parent"]) for r in rows] == [
        ("root", "", 0, ""), ("root", "root", 1, "root"), ("nlp", "", 1, "root"), ("nlp", "alice", 2, "nlp")]
    assert rows[2]["raw_shares"] == 3 and rows[2]["norm_shares"] == 0.6 and rows[1]["level_fs"] == float("inf")
    assert rows[3]["raw_shares"] is None and rows[3]["raw"]["RawShares"] == "parent"
    assert parse.table("A|B\n1|\n") == [{"A": "1", "B": ""}] and parse.table("") == []
    assert parse.tres("billing=32,cpu=1,gres/gpu=2,mem=4000M") == {"billing": "32", "cpu": "1", "gres/gpu": "2",
                                                                    "mem": "4000M"}


def test_chroot_marker_tells_which_packages_a_cached_chroot_lacks(tmp_path):
    from tests.slurmharness import chroot

    (tmp_path / ".ready").write_text("trixie Sun Nov 22 20:05:55 2026\n")  # before slurmdbd was added
    assert chroot.is_ready(tmp_path) and chroot.missing(tmp_path) == ["slurmdbd"]
    chroot._write_marker(tmp_path, "trixie", chroot.PACKAGES)
    assert chroot.missing(tmp_path) == [] and chroot.installed_packages(tmp_path) == chroot.PACKAGES


# ------------------------------------------------------------------ Slurm 22.05 on the host


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_slurm("bookworm")
    with SlurmCluster(LAB, workdir=tmp_path_factory.mktemp("lab")) as cluster:
        yield cluster


@pytest.mark.slurm
def test_lab_nodes_idle_with_their_gres(lab):
    nodes = lab.nodes()
    assert sorted(nodes) == sorted(H100 + A100)
    assert {n: v["state"] for n, v in nodes.items()} == {n: "IDLE" for n in nodes}
    assert {n: nodes[n]["gres"] for n in H100} == {n: "gpu:h100:8" for n in H100}
    assert {n: nodes[n]["gres"] for n in A100} == {n: "gpu:a100:4" for n in A100}
    assert nodes["gpu-h100-001"]["partitions"] == ["h100"] and nodes["gpu-a100-002"]["partitions"] == ["a100"]
    assert nodes["gpu-h100-001"]["cpus"] == 224  # config_overrides: the config, not this machine


@pytest.mark.slurm
def test_lab_partitions_as_written(lab):
    parts = lab.partitions()
    assert {name: (p["nodes"], p["default"], p["state"]) for name, p in parts.items()} == {
        "h100": ("gpu-h100-[001-004]", True, "UP"),
        "a100": ("gpu-a100-[001-002]", False, "UP"),
    }


@pytest.mark.slurm
def test_lab_switches_match_topology_conf(lab):
    assert lab.switches() == {
        "leaf001": {"level": 0, "nodes": set(H100), "switches": set()},
        "leaf002": {"level": 0, "nodes": set(A100), "switches": set()},
        "spine": {"level": 1, "nodes": set(H100 + A100), "switches": {"leaf001", "leaf002"}},
    }


@pytest.mark.slurm
def test_lab_srun_gets_all_eight_gpus_on_four_nodes(lab):
    out = lab.job("-N", "4", "-p", "h100", "--gres=gpu:8",
                  "sh", "-c", 'echo "$SLURMD_NODENAME CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"').stdout
    assert sorted(out.splitlines()) == [f"{n} CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" for n in H100]


@pytest.mark.slurm
def test_lab_batch_job_on_one_switch_completes(lab):
    out = lab.batch_wait("srun printenv SLURMD_NODENAME", "--switches=1", "-N", "2")
    nodes = set(out.split())
    assert len(nodes) == 2
    assert any(nodes <= sw["nodes"] for sw in lab.switches().values() if sw["level"] == 0)


@pytest.mark.slurm
def test_lab_logs_have_no_problems(lab):
    # runs after the jobs above (file order), so job-time slurmd messages are covered too;
    # PriorityWeightFairshare's "can only be used with SlurmDBD" is expected: the overlay removed slurmdbd
    assert "PriorityWeightFairshare can only be used with SlurmDBD" in lab.log()
    assert lab.problems() == []


@pytest.mark.slurm
def test_two_clusters_at_once_and_nothing_left_behind(tmp_path):
    require_slurm("bookworm")
    with SlurmCluster(LAB, workdir=tmp_path / "a") as a, SlurmCluster(LAB, workdir=tmp_path / "b") as b:
        assert len(a.nodes()) == len(b.nodes()) == 6  # distinct ports, distinct munged, no clash
        pids = [p.pid for c in (a, b) for p in c._daemons.values()] + [c.ns.holder.pid for c in (a, b)]
    assert not any(procs.alive(p) for p in pids)


@pytest.mark.slurm
def test_topology_naming_an_undefined_node_is_a_warning(tmp_path):
    require_slurm("bookworm")
    conf = variant(tmp_path, LAB, topology_conf=lambda t: t.replace("gpu-a100-[001-002]", "gpu-a100-[001-003]"))
    with SlurmCluster(conf, workdir=tmp_path / "work") as cluster:
        problems = cluster.problems()
        assert "slurmctld: error: WARNING: Invalid hostnames in switch configuration: gpu-a100-003" in problems
        assert "slurmd on 6 nodes: error: WARNING: Invalid hostnames in switch configuration: gpu-a100-003" in problems
        # scontrol echoes the configured leaf, unknown node included: only the log tells
        assert cluster.switches()["leaf002"]["nodes"] == {"gpu-a100-001", "gpu-a100-002", "gpu-a100-003"}


@pytest.mark.slurm
def test_partition_naming_an_unknown_node_fails_with_the_log_tail(tmp_path):
    require_slurm("bookworm")
    conf = variant(tmp_path, LAB, slurm_conf=lambda t: t.replace("Nodes=gpu-a100-[001-002]", "Nodes=gpu-a100-[001-003]"))
    cluster = SlurmCluster(conf, workdir=tmp_path / "work")
    with pytest.raises(SlurmBootError) as err:
        with cluster:
            pass
    assert "slurmctld" in str(err.value) and "last lines of" in str(err.value)
    assert "fatal: Invalid node names in partition a100" in str(err.value)
    assert not any(procs.alive(p.pid) for p in cluster._daemons.values())


@pytest.mark.slurm
def test_gres_type_differing_from_slurm_conf_fails_fast_with_the_node_reason(tmp_path):
    require_slurm("bookworm")
    conf = variant(tmp_path, LAB, gres_conf=lambda t: t.replace("Type=a100", "Type=a800"))
    # both nodes register invalid; the harness stops at the first, and which registers first is a race
    with pytest.raises(SlurmBootError, match=r"gpu-a100-00[12]: \S*INVALID_REG gres/gpu count reported lower"):
        with SlurmCluster(conf, workdir=tmp_path / "work"):
            pass


# ------------------------------------------------------------------ newer Slurm from a chroot


@pytest.mark.slurm
@pytest.mark.chroot
def test_trixie_block_topology_segment_lands_in_one_block(tmp_path):
    require_slurm("trixie")
    with SlurmCluster(SAMPLES / "nvl-block", suite="trixie", workdir=tmp_path) as cluster:
        assert cluster.version.startswith("24.11")
        assert len(cluster.nodes()) == 36
        blocks = cluster.blocks()
        assert {n: (b["size"], len(b["nodes"])) for n, b in blocks.items()} == {
            "nvl001": (18, 18), "nvl002": (18, 18), "nvl[001-002]": (36, 36)}
        # every slurmd reports the same hostname here, so ask each task for its node name
        out = cluster.job("-N", "18", "--segment=18", "printenv", "SLURMD_NODENAME").stdout
        assert set(out.split()) in (blocks["nvl001"]["nodes"], blocks["nvl002"]["nodes"])
        # AutoDetect=nvml became File= lines built from Gres=gpu:gb200:4
        out = cluster.job("-N", "2", "--gres=gpu:4", "printenv", "CUDA_VISIBLE_DEVICES").stdout
        assert out.split() == ["0,1,2,3", "0,1,2,3"]
        assert cluster.problems() == []


@pytest.mark.slurm
@pytest.mark.chroot
def test_forky_topology_yaml_tree_and_block(tmp_path):
    require_slurm("forky")
    with SlurmCluster(SAMPLES / "nvl-yaml", suite="forky", workdir=tmp_path) as cluster:
        assert tuple(map(int, cluster.version.split(".")[:2])) >= (25, 5)  # forky moves; 26.05 when written
        assert cluster.partitions()["nvl"]["topology"] == "nvl_block"
        assert set(cluster.switches()) == {"spine", "leaf1", "leaf2"}  # cluster_default: the tree
        assert "SwitchName=leaf1 Level=0" in cluster.topology("ib_tree", "switch=leaf1")
        blocks = cluster.blocks("nvl_block")
        assert {n: b["size"] for n, b in blocks.items()} == {"nvl1": 18, "nvl2": 18, "nvl[1-2]": 36}
        out = cluster.batch_wait("srun printenv SLURMD_NODENAME", "-p", "nvl", "-N", "18", "--segment=18")
        assert set(out.split()) in (blocks["nvl1"]["nodes"], blocks["nvl2"]["nodes"])
        assert cluster.problems() == []
