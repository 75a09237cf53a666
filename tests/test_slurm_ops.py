"""The GPU-node operations of bare-metal Slurm (options.slurm, issue 13), without a Slurm: which settings
and files each option gives, on which Slurm versions, and the scripts run for real (gpu-health.sh
against a fake nvidia-smi, task-prolog.sh as Slurm runs it, enroot.conf as enroot reads it, nhc.conf's
node ranges as NHC matches them). test_slurm_ops_real.py boots them in a real Slurm.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from generator import spec
from generator.decide import make_plan
from generator.render.slurm import slurm_config
from generator.render.slurm.ops import NCCL, nhc_targets
from generator.spec import hostlist
from tests import fake_gpu
from tests._consumers import require
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
OPS_FILES = ["nhc.conf", "gpu-health.sh", "plugstack.conf", "plugstack.conf.d/pyxis.conf", "enroot.conf",
             "nccl.env", "task-prolog.sh", "prolog.d/50-orchgen-dcgm.sh", "epilog.d/50-orchgen-hygiene.sh"]


def doc(name: str = "ops", *, pools: list[dict] | None = None, fabric: str = "infiniband", version: str = "24.11",
        slurm: dict | None = None, controllers: list[str] | None = None, **options) -> dict:
    fleet = {"bare_metal": True, "fabric": {"kind": fabric, "nodes_per_leaf": 18},
             "pools": pools or [{"name": "gb200", "nodes": 36, "gpu": {"type": "gb200", "count": 4},
                                 "cpus": 144, "memory_gib": 880, "nvlink_domain_nodes": 18}]}
    if controllers:
        fleet["slurm"] = {"controllers": controllers}
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": name}, "fleet": fleet,
            "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"slurm_version": version, **({"slurm": slurm} if slurm is not None else {}), **options}}


def files_of(tmp_path: Path, d: dict) -> dict[str, str]:
    path = tmp_path / f"{d['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return slurm_config(make_plan(spec.load(path), path))


def settings_of(conf: str) -> dict[str, str]:
    """slurm.conf's single-key lines (what the operations add are all such lines)."""
    out = {}
    for raw in conf.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and len(line.split()) == 1 and "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
    return out


def orchgen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), *args], capture_output=True, text=True, cwd=REPO)


# ------------------------------------------------------------------ what each option gives


def test_a_gpu_site_gets_every_operation_by_default(tmp_path):
    files = files_of(tmp_path, doc())
    assert [f for f in files if f in OPS_FILES] == OPS_FILES
    conf = settings_of(files["slurm.conf"])
    assert {k: conf[k] for k in ("HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "PrologFlags",
                                 "KillOnBadExit", "UnkillableStepTimeout", "SwitchType", "SwitchParameters",
                                 "TaskProlog", "MpiDefault", "StateSaveLocation", "SlurmctldTimeout", "Prolog",
                                 "Epilog")} == {
        "HealthCheckProgram": "/usr/sbin/nhc", "HealthCheckInterval": "300", "HealthCheckNodeState": "ANY,CYCLE",
        "PrologFlags": "Contain", "KillOnBadExit": "1", "UnkillableStepTimeout": "180",
        "SwitchType": "switch/nvidia_imex", "SwitchParameters": "imex_channel_count=2048",
        "TaskProlog": "/etc/slurm/task-prolog.sh", "MpiDefault": "pmix", "StateSaveLocation": "/var/spool/slurmctld",
        "SlurmctldTimeout": "120", "Prolog": "/etc/slurm/prolog.d/*", "Epilog": "/etc/slurm/epilog.d/*"}
    assert "PlugStackConfig" not in conf  # plugstack.conf is read from beside slurm.conf
    assert files["plugstack.conf"].splitlines()[-1] == "include plugstack.conf.d/*.conf"
    assert files["plugstack.conf.d/pyxis.conf"].splitlines()[-1] == "optional /usr/local/lib/slurm/spank_pyxis.so"


def test_every_site_tunable_setting_says_why_with_its_source(tmp_path):
    conf = files_of(tmp_path, doc())["slurm.conf"].splitlines()
    block = conf[conf.index(next(ln for ln in conf if ln.startswith("# --- GPU-node operations"))):]
    for i, line in enumerate(block):
        if line and not line.startswith("#") and line.split("=")[0] in (
                "HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "PrologFlags", "KillOnBadExit",
                "UnkillableStepTimeout", "SwitchType", "SwitchParameters", "TaskProlog"):
            comment = []
            for prev in reversed(block[:i]):
                if not prev.startswith("#"):
                    break
                comment.insert(0, prev)
            assert comment and re.search(r"\((slurm\.conf\(5\)|Slurm |NVIDIA|NHC).*\)", " ".join(comment)), line


def test_each_operation_turns_off(tmp_path):
    off = {"health_check": False, "containers": "none", "mpi": "none", "containment": False,
           "kill_on_bad_exit": False, "imex": False, "nccl": False, "job_hygiene": False}
    files = files_of(tmp_path, doc(slurm=off))
    assert not [f for f in files if f in OPS_FILES]
    conf = settings_of(files["slurm.conf"])
    for key in ("HealthCheckProgram", "PrologFlags", "KillOnBadExit", "SwitchType", "TaskProlog", "Prolog", "Epilog"):
        assert key not in conf, key
    assert conf["MpiDefault"] == "none" and conf["UnkillableStepTimeout"] == "180"


def test_containers_follow_the_gpus(tmp_path):
    cpu = doc(pools=[{"name": "cpu", "nodes": 4, "cpus": 64}])
    files = files_of(tmp_path, cpu)
    assert "plugstack.conf" not in files and "enroot.conf" not in files and "gpu-health.sh" not in files
    assert "nhc.conf" in files and "check_gpus" not in files["nhc.conf"]
    cpu["options"]["slurm"] = {"containers": "pyxis"}
    assert "plugstack.conf" in files_of(tmp_path, cpu)


@pytest.mark.parametrize("version, mpi", [("22.05", "none"), ("23.02", "none"), ("23.11", "pmix"),
                                          ("24.11", "pmix"), ("26.05", "pmix")])
def test_mpi_default_by_version(tmp_path, version, mpi):
    conf = files_of(tmp_path, doc(version=version, slurm={"imex": False}))["slurm.conf"]
    assert settings_of(conf)["MpiDefault"] == mpi
    assert ("libpmix-dev" in conf) == (mpi == "none")  # the reason 22.05/23.02 get none


def test_mpi_asked_for_is_kept_with_its_warning(tmp_path):
    conf = files_of(tmp_path, doc(version="22.05", slurm={"mpi": "pmix", "imex": False}))["slurm.conf"]
    assert settings_of(conf)["MpiDefault"] == "pmix" and "apt install libpmix-dev" in conf
    conf = files_of(tmp_path, doc(version="26.05", slurm={"mpi": "pmi2"}))["slurm.conf"]
    assert settings_of(conf)["MpiDefault"] == "pmi2"


@pytest.mark.parametrize("version, plugin", [("23.11", False), ("24.05", True), ("25.11", True)])
def test_imex_where_the_plugin_exists(tmp_path, version, plugin):
    files = files_of(tmp_path, doc(version=version))
    conf = settings_of(files["slurm.conf"])
    assert ("SwitchType" in conf) is plugin
    assert ("has no switch/nvidia_imex" in files["slurm.conf"]) is not plugin


def test_no_imex_without_multi_node_nvlink(tmp_path):
    single = doc(pools=[{"name": "h100", "nodes": 4, "gpu": {"type": "h100", "count": 8}}])
    assert "SwitchType" not in settings_of(files_of(tmp_path, single)["slurm.conf"])


@pytest.mark.parametrize("kind", ["infiniband", "roce", "ethernet"])
def test_nccl_settings_come_from_the_one_table(tmp_path, kind):
    files = files_of(tmp_path, doc(fabric=kind))
    env = files["nccl.env"]
    set_lines = [ln for ln in env.splitlines() if ln and not ln.startswith("#")]
    assert set_lines == [f"{v.name}={v.value}" for v in NCCL[kind] if not v.site]
    for v in NCCL[kind]:
        assert f"({v.doc})" in env and v.doc.startswith("https://docs.nvidia.com/deeplearning/nccl/")
        if v.site:
            assert f"#{v.name}={v.value}" in env.splitlines()
    assert ("NCCL_IB_GID_INDEX=3" in set_lines) is (kind == "roce")
    assert ("NCCL_IB_DISABLE=1" in set_lines) is (kind == "ethernet")
    assert ("check_hw_ib" in files["nhc.conf"]) is (kind != "ethernet")


def test_health_checks_per_pool_and_site_mounts(tmp_path):
    pools = [{"name": "h100", "nodes": 16, "hostnames": "gpu[001-016]", "gpu": {"type": "h100", "count": 8}},
             {"name": "l40s", "nodes": 4, "gpu": {"type": "l40s", "count": 2}},
             {"name": "cpu", "nodes": 2, "cpus": 32}]
    files = files_of(tmp_path, doc(pools=pools, slurm={"health_check_mounts": ["/home", "/scratch"],
                                                       "health_check_interval": 120}))
    lines = [ln for ln in files["nhc.conf"].splitlines() if ln and not ln.startswith("#")]
    assert lines == [
        "* || export NHC_RM=slurm",
        "* || check_fs_mount_rw -f /",
        "* || check_fs_mount_rw -f /home",
        "* || check_fs_mount_rw -f /scratch",
        "* || check_fs_free /tmp 10%",
        "* || check_fs_free /home 5%",
        "* || check_fs_free /scratch 5%",
        "* || check_hw_ib",
        "{gpu[001-016]} || check_cmd_output -C check_gpus -t 20 -m '!/^FAIL/' -M '%L' /etc/slurm/gpu-health.sh 8 h100",
        "{l40s-[001-004]} || check_cmd_output -C check_gpus -t 20 -m '!/^FAIL/' -M '%L' /etc/slurm/gpu-health.sh 2 l40s",
    ]
    assert settings_of(files["slurm.conf"])["HealthCheckInterval"] == "120"


@pytest.mark.parametrize("path", ["home", "/home/", "/a b", "/x/../etc", "/$(id)", "/a;b"])
def test_mount_paths_are_plain_absolute_paths(tmp_path, path):
    src = tmp_path / "bad.yaml"
    src.write_text(yaml.safe_dump(doc(slurm={"health_check_mounts": [path]}), sort_keys=False))
    result = orchgen("plan", str(src), "-o", str(tmp_path / "out"))
    assert result.returncode == 2 and "options.slurm.health_check_mounts" in result.stderr, result.stderr


def test_a_backup_controller_needs_a_shared_state_save_location(tmp_path):
    src = tmp_path / "ha.yaml"
    src.write_text(yaml.safe_dump(doc(controllers=["ctl1", "ctl2"]), sort_keys=False))
    result = orchgen("plan", str(src), "-o", str(tmp_path / "out"))
    assert result.returncode == 0
    assert re.search(r"ha\.yaml:\d+: options\.slurm\.state_save_location: 2 Slurm controllers \(ctl1, ctl2\) need",
                     result.stderr), result.stderr
    strict = doc(controllers=["ctl1", "ctl2"], strict=True)
    src.write_text(yaml.safe_dump(strict, sort_keys=False))
    assert orchgen("plan", str(src), "-o", str(tmp_path / "out2")).returncode == 2
    shared = doc(controllers=["ctl1", "ctl2"], slurm={"state_save_location": "/shared/slurm/state"})
    src.write_text(yaml.safe_dump(shared, sort_keys=False))
    result = orchgen("plan", str(src), "-o", str(tmp_path / "out3"))
    # no word on the state any more (its GPU pool's guessed CPU layout and rails still warn: issue 35)
    assert result.returncode == 0 and "state_save_location" not in result.stderr, result.stderr
    conf = (tmp_path / "out3" / "slurm" / "slurm.conf").read_text()
    assert "StateSaveLocation=/shared/slurm/state" in conf.splitlines()
    assert "The 2 controllers keep one state" in conf


def test_slurm_on_kubernetes_gets_none_of_it(tmp_path):
    path = EXAMPLES / "cloud-training.yaml"
    files = slurm_config(make_plan(spec.load(path), path))
    assert not [f for f in files if f in OPS_FILES]
    assert "HealthCheckProgram" not in files["slurm.conf"] and "TaskProlog" not in files["slurm.conf"]


# ------------------------------------------------------------------ NHC's node ranges


def nhc_range_match(node: str, rangelist: str) -> bool:
    """NHC 1.4.3's mcheck_range (scripts/common.nhc), ported: comma-separated single names or
    `prefix[start-end]suffix`, numbers compared by value and width."""
    single = re.compile(r"^[-a-zA-Z0-9_]+[0-9]+[-.a-zA-Z0-9]*$")
    ranged = re.compile(r"^([-a-zA-Z0-9_]+)\[([0-9]+)-([0-9]+)\]([-.a-zA-Z0-9]*)$")
    for group in rangelist.split(","):
        if single.match(group):
            if node == group:
                return True
        elif m := ranged.match(group):
            prefix, start, end, suffix = m.groups()
            width = max(len(start), len(end))
            if not node.startswith(prefix) or not node.endswith(suffix):
                continue
            middle = node[len(prefix):len(node) - len(suffix)] if suffix else node[len(prefix):]
            if middle.isdigit() and int(start) <= int(middle) <= int(end) and len(middle) == width:
                return True
        else:
            return False  # NHC: "Range not in pdsh syntax", and the target matches nothing
    return False


def nhc_matches(node: str, target: str) -> bool:
    if target.startswith("{"):
        return nhc_range_match(node, target[1:-1])
    return node == target  # our globs are plain names


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gpu", "gpu-h100-", "n", "rack1-node", "x"]),
                          st.integers(0, 1200), st.sampled_from([0, 1, 3, 4]), st.sampled_from(["", ".ib"])),
                min_size=1, max_size=40, unique=True))
def test_nhc_targets_match_exactly_the_pool(names):
    nodes = sorted({f"{p}{str(n).zfill(w)}{s}" for p, n, w, s in names})
    outsiders = [f"{p}{str(n + 1).zfill(w)}{s}" for p, n, w, s in names] + [f"{p}{n}{s}" for p, n, w, s in names]
    targets = nhc_targets(nodes)
    for node in nodes:
        assert any(nhc_matches(node, t) for t in targets), (node, targets)
    for node in set(outsiders) - set(nodes):
        assert not any(nhc_matches(node, t) for t in targets), (node, targets)


def test_nhc_targets_stay_short_for_big_pools():
    nodes = hostlist.expand("gb200-[0001-4032]")
    assert nhc_targets(nodes) == ("{gb200-[0001-4032]}",)
    assert nhc_targets(["login", "gpu1", "gpu2", "gpu10"]) == ("{gpu[1-2],gpu10}", "login")


# ------------------------------------------------------------------ the scripts, run for real


@pytest.fixture
def fake_smi(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    set_gpus(bin_dir)
    return bin_dir


def set_gpus(bin_dir: Path, gpus: dict | None = None, klog: list[str] | None = None, *, dmesg: str = "") -> None:
    """The fake nvidia-smi and dmesg of one GPU node "n" (tests/fake_gpu.py): healthy GPUs and a kernel
    log without Xids, unless told otherwise."""
    (bin_dir / "nvidia-smi").write_text(fake_gpu.nvidia_smi({"n": gpus} if gpus else None, node_var="NODE"))
    (bin_dir / "dmesg").write_text(dmesg or fake_gpu.dmesg({"n": klog} if klog else None, node_var="NODE"))
    for f in bin_dir.iterdir():
        f.chmod(0o755)


def gpu_health(tmp_path, fake_smi, count, name, *args, fail=False, env=None):
    script = tmp_path / "gpu-health.sh"
    script.write_text(files_of(tmp_path, doc())["gpu-health.sh"])
    env = {"PATH": f"{fake_smi}:/usr/bin:/bin", "SMI_COUNT": str(count), "SMI_NAME": name, "NODE": "n",
           **(env or {})}
    if fail:
        env["SMI_FAIL"] = "1"
    return subprocess.run(["sh", str(script), *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("count, name, rc, out", [
    (4, "NVIDIA GB200", 0, "ok: 4x gb200 GPUs: 4x NVIDIA GB200"),
    (3, "NVIDIA GB200", 1, "FAIL: expected 4x gb200 GPUs, nvidia-smi lists 3: 3x NVIDIA GB200"),
    (5, "NVIDIA GB200", 1, "FAIL: expected 4x gb200 GPUs, nvidia-smi lists 5: 5x NVIDIA GB200"),
    (4, "NVIDIA H100 80GB HBM3", 1, "FAIL: expected 4x gb200 GPUs, nvidia-smi lists 4: 4x NVIDIA H100 80GB HBM3"),
    (0, "NVIDIA GB200", 1, "FAIL: expected 4x gb200 GPUs, nvidia-smi lists 0: none"),
])
def test_gpu_health_against_a_fake_nvidia_smi(tmp_path, fake_smi, count, name, rc, out):
    result = gpu_health(tmp_path, fake_smi, count, name, "4", "gb200")
    assert (result.returncode, result.stdout.strip()) == (rc, out)


def test_gpu_health_names_match_without_case_or_punctuation(tmp_path, fake_smi):
    assert gpu_health(tmp_path, fake_smi, 8, "NVIDIA H100 80GB HBM3", "8", "h100-80gb").returncode == 0
    assert gpu_health(tmp_path, fake_smi, 2, "NVIDIA L40S", "2", "l40s").returncode == 0


def test_gpu_health_reports_nvidia_smi_failing(tmp_path, fake_smi):
    result = gpu_health(tmp_path, fake_smi, 4, "x", "4", "gb200", fail=True)
    assert result.returncode == 1
    assert result.stdout.strip() == ("FAIL: nvidia-smi failed: Unable to determine the device handle for "
                                     "GPU0000:1B:00.0: Unknown Error")


BUS = "00000000:1B:00.0"  # GPU 3's bus id in the fake
ECC = "ecc.errors.uncorrected.volatile.total"


@pytest.mark.parametrize("gpus, klog, rc, out", [
    # healthy: correctable errors, remapped rows (correctable) and application Xids do not fail it
    ({"gpu": 3, "ecc.errors.corrected.volatile.total": "12", "remapped_rows.correctable": "3"},
     [fake_gpu.xid(13), fake_gpu.xid(31), fake_gpu.xid(43), fake_gpu.xid(45), fake_gpu.xid(63), fake_gpu.xid(92),
      fake_gpu.xid(94), "[ 9.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15"],
     0, "ok: 4x gb200 GPUs: 4x NVIDIA GB200"),
    # a GPU without ECC (or with ECC off) answers N/A: not a failure
    ({"gpu": 3, ECC: "[N/A]"}, None, 0, "ok: 4x gb200 GPUs: 4x NVIDIA GB200"),
    ({"gpu": 3, ECC: "2"}, None, 1, f"FAIL: GPU 3 ({BUS}): 2 uncorrectable ECC errors"),
    ({"gpu": 3, "remapped_rows.pending": "1"}, None, 1, f"FAIL: GPU 3 ({BUS}): row remapping pending, reset the GPU"),
    ({"gpu": 3, "remapped_rows.pending": "Yes"}, None, 1,
     f"FAIL: GPU 3 ({BUS}): row remapping pending, reset the GPU"),
    ({"gpu": 3, "remapped_rows.failure": "1"}, None, 1,
     f"FAIL: GPU 3 ({BUS}): row remapping failed, the GPU needs service"),
    # before Ampere: no row remapping, page retirement instead
    ({"gpu": 3, "remapped_rows.pending": "[N/A]", "remapped_rows.failure": "[N/A]", "retired_pages.pending": "Yes"},
     None, 1, f"FAIL: GPU 3 ({BUS}): retired pages pending, reboot the node"),
    ({"gpu": 3, "remapped_rows.pending": "[N/A]", "remapped_rows.failure": "[N/A]", "retired_pages.pending": "No"},
     None, 0, "ok: 4x gb200 GPUs: 4x NVIDIA GB200"),
    (None, [fake_gpu.xid(13), fake_gpu.xid(79, "PCI:0000:1d:00", "GPU has fallen off the bus.")], 1,
     "FAIL: Xid 79 (PCI:0000:1d:00) in the kernel log since boot"),
    # every problem in the one line, the Xids of two GPUs named
    ({"gpu": 3, ECC: "1"}, [fake_gpu.xid(48, "PCI:0000:1d:00"), fake_gpu.xid(119, "PCI:0000:18:00"),
                            fake_gpu.xid(119, "PCI:0000:1d:00")], 1,
     f"FAIL: GPU 3 ({BUS}): 1 uncorrectable ECC errors; Xid 48 (PCI:0000:1d:00) in the kernel log since boot; "
     "Xid 119 (PCI:0000:18:00,PCI:0000:1d:00) in the kernel log since boot"),
    # drivers before PCI: in the tag
    (None, ["NVRM: Xid (0000:01:00): 95, pid=77, Uncontained: FBHUB"], 1,
     "FAIL: Xid 95 (0000:01:00) in the kernel log since boot"),
])
def test_gpu_health_memory_errors_and_xids(tmp_path, fake_smi, gpus, klog, rc, out):
    set_gpus(fake_smi, gpus, klog)
    result = gpu_health(tmp_path, fake_smi, 4, "NVIDIA GB200", "4", "gb200")
    assert (result.returncode, result.stdout.strip()) == (rc, out), result.stderr


def test_gpu_health_fatal_xids_are_the_sites_to_tune(tmp_path, fake_smi):
    set_gpus(fake_smi, None, [fake_gpu.xid(13), fake_gpu.xid(79)])
    assert gpu_health(tmp_path, fake_smi, 4, "NVIDIA GB200", "4", "gb200").returncode == 1
    tuned = gpu_health(tmp_path, fake_smi, 4, "NVIDIA GB200", "4", "gb200", env={"GPU_HEALTH_FATAL_XIDS": "13 48"})
    assert (tuned.returncode, tuned.stdout.strip()) == (1, "FAIL: Xid 13 (PCI:0000:1b:00) in the kernel log since boot")
    none = gpu_health(tmp_path, fake_smi, 4, "NVIDIA GB200", "4", "gb200", env={"GPU_HEALTH_FATAL_XIDS": "48"})
    assert none.returncode == 0


def test_gpu_health_without_the_kernel_log_still_checks_the_rest(tmp_path, fake_smi):
    """dmesg refused (a container without CAP_SYSLOG, dmesg_restrict): said in the ok line, not a failure;
    the counters still fail the node."""
    refused = "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n"
    set_gpus(fake_smi, None, dmesg=refused)
    result = gpu_health(tmp_path, fake_smi, 4, "NVIDIA GB200", "4", "gb200")
    assert (result.returncode, result.stdout.strip()) == (
        0, "ok: 4x gb200 GPUs: 4x NVIDIA GB200; Xids not checked: dmesg: read kernel buffer failed: "
           "Operation not permitted")
    set_gpus(fake_smi, {"gpu": 3, ECC: "3"}, dmesg=refused)
    assert gpu_health(tmp_path, fake_smi, 4, "NVIDIA GB200", "4", "gb200").stdout.strip() == (
        f"FAIL: GPU 3 ({BUS}): 3 uncorrectable ECC errors")


@pytest.mark.parametrize("kind", ["infiniband", "roce", "ethernet"])
def test_task_prolog_prints_exports_and_keeps_what_the_job_set(tmp_path, kind):
    files = files_of(tmp_path, doc(fabric=kind))
    (tmp_path / "task-prolog.sh").write_text(files["task-prolog.sh"])
    (tmp_path / "nccl.env").write_text(files["nccl.env"])
    want = [f"export {v.name}={v.value}" for v in NCCL[kind] if not v.site]
    run = lambda env: subprocess.run(["sh", str(tmp_path / "task-prolog.sh")], capture_output=True, text=True,
                                     env={"PATH": "/usr/bin:/bin", **env})
    result = run({})
    assert result.returncode == 0 and result.stdout.splitlines() == want
    mine = NCCL[kind][0].name
    assert run({mine: "mine"}).stdout.splitlines() == want[1:]  # the job's own value wins
    (tmp_path / "nccl.env").unlink()
    assert run({}).stdout == "" and run({}).returncode == 0  # nothing to give: still no failure


def test_enroot_conf_reads_the_way_enroot_reads_it(tmp_path):
    text = files_of(tmp_path, doc())["enroot.conf"]
    (tmp_path / "enroot.conf").write_text(text)
    # enroot refuses a file `bash -n` rejects, then reads `KEY value` lines and keeps the keys it knows
    # (enroot.in, config::load)
    assert subprocess.run(["bash", "-n", str(tmp_path / "enroot.conf")]).returncode == 0
    known = re.compile(r"^ENROOT_[A-Z_]+$|^(MELLANOX_|NVIDIA_)|^SSL_CERT_(DIR|FILE)$|^(all|no|http|https)_proxy$")
    pairs = [ln.split(None, 1) for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert pairs and all(known.match(key) for key, _ in pairs)
    values = dict(pairs)
    expanded = subprocess.run(["bash", "-c", f"eval echo {values['ENROOT_DATA_PATH']}"], capture_output=True,
                              text=True).stdout.strip()
    assert expanded == f"/tmp/enroot-data/user-{os.getuid()}"


def test_generated_scripts_pass_shellcheck(tmp_path):
    for kind in ("infiniband", "roce", "ethernet"):
        files = files_of(tmp_path, doc(fabric=kind, version="22.05"))
        for name in ("gpu-health.sh", "task-prolog.sh", "prolog.d/50-orchgen-dcgm.sh",
                     "epilog.d/50-orchgen-hygiene.sh"):
            script = tmp_path / f"{kind}-{name.replace('/', '-')}"
            script.write_text(files[name])
            assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    checker = shutil.which("shellcheck")
    require(checker, "shellcheck not installed (apt-get install shellcheck)")
    result = subprocess.run([checker, *map(str, sorted(tmp_path.glob("*-*.sh")))], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_a_sites_own_prolog_and_epilog_replace_the_hygiene_globs_and_say_so(tmp_path):
    files = files_of(tmp_path, doc(slurm={"prolog": "/opt/site/prolog.sh", "epilog": "/opt/site/epilog.sh"}))
    conf = settings_of(files["slurm.conf"])
    assert conf["Prolog"] == "/opt/site/prolog.sh" and conf["Epilog"] == "/opt/site/epilog.sh"
    assert "It replaces orchgen's Epilog=/etc/slurm/epilog.d/*: call those scripts from it" in files["slurm.conf"]
    assert "epilog.d/50-orchgen-hygiene.sh" in files  # still shipped, for the site's epilog to call


def test_nhc_checks_free_space_where_jobs_write(tmp_path):
    nhc = files_of(tmp_path, doc(slurm={"health_check_mounts": ["/scratch"]}))["nhc.conf"].splitlines()
    assert "* || check_fs_free /tmp 10%" in nhc and "* || check_fs_free /scratch 5%" in nhc


def test_the_admin_group_reaches_the_bring_up_and_a_bad_name_is_refused(tmp_path):
    d = doc(slurm={"admin_group": "hpc-ops"})
    src = tmp_path / "admins.yaml"
    src.write_text(yaml.safe_dump(d, sort_keys=False))
    out = tmp_path / "out"
    assert orchgen("plan", str(src), "-o", str(out)).returncode == 0
    assert yaml.safe_load((out / "bringup/vars.yaml").read_text())["orchgen_admin_group"] == "hpc-ops"
    assert "`hpc-ops`" in (out / "README.md").read_text()
    d["options"]["slurm"]["admin_group"] = "Bad Group"
    src.write_text(yaml.safe_dump(d, sort_keys=False))
    bad = orchgen("plan", str(src), "-o", str(tmp_path / "bad"))
    assert bad.returncode == 2 and not (tmp_path / "bad").exists()
    assert len(bad.stderr.strip().splitlines()) == 1 and "admin_group" in bad.stderr, bad.stderr


def test_paired_controllers_get_a_backup_slurmdbd_only_against_the_sites_database(tmp_path):
    """slurmdbd HA (issue 38): with two controllers and the site's database server (options.slurm.accounting.
    storage_host) the other controller runs a backup slurmdbd (DbdBackupHost, AccountingStorageBackupHost) and the
    bring-up installs slurmdbd there, no MariaDB, and says what the site does on its server; without that server,
    one slurmdbd and the trade-off said in slurmdbd.conf (test_slurm_ops_real.py fails the primary over for real)."""
    from generator.render.bringup import inventory, vars_data

    def planned(name: str, accounting: dict | None):
        d = doc(name, controllers=["ctl1", "ctl2"], version="22.05",
                slurm={"state_save_location": "/shared/slurm/state",
                       **({"accounting": accounting} if accounting else {})})
        d["tenants"] = [{"name": "nlp", "share": 1}]
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(d, sort_keys=False))
        plan = make_plan(spec.load(path), path)
        files = slurm_config(plan)
        return plan, files

    plan, files = planned("pair", {"storage_host": "db.example.org"})
    dbd = files["slurmdbd.conf"].splitlines()
    assert {"DbdHost=ctl1", "DbdBackupHost=ctl2", "StorageHost=db.example.org"} <= set(dbd)
    assert "StorageHost=localhost" not in dbd
    assert settings_of(files["slurm.conf"])["AccountingStorageBackupHost"] == "ctl2"
    assert list(inventory(plan)["all"]["children"]["slurmdbd"]["hosts"]) == ["ctl1", "ctl2"]
    v = vars_data(plan, {k: v.encode() for k, v in files.items()})
    assert v["orchgen_packages"]["slurmdbd"] == [] and v["orchgen_slurm_packages"]["slurmdbd"] == ["slurmdbd"]
    assert v["orchgen_storage_host"] == "db.example.org"
    assert next(f for f in v["orchgen_files"] if f["src"] == "mariadb-slurm.cnf")["on"] == []
    site = next(r for r in v["orchgen_not_installed"] if r["name"] == "the accounting database on db.example.org")
    assert "CREATE USER 'slurm'@'ctl2' IDENTIFIED BY '<password>'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'ctl2';" \
        in site["steps"]

    plan, files = planned("one", None)
    dbd = files["slurmdbd.conf"]
    assert "DbdBackupHost" not in settings_of(dbd) and "StorageHost=localhost" in dbd.splitlines()
    assert "# One slurmdbd, though the controllers are paired" in dbd
    assert "AccountingStorageBackupHost" not in settings_of(files["slurm.conf"])
    assert list(inventory(plan)["all"]["children"]["slurmdbd"]["hosts"]) == ["ctl1"]


def test_the_written_inventory_names_each_primary_first(tmp_path):
    """site.yml takes a group's first host for the primary (groups['slurmdbd'][0]: the slurmdbd that must listen;
    groups['slurmctld'][0]: the controller the checks and accounts.sh run on), so bringup/inventory.yaml keeps the
    plan's order, not the names' (accounting on db1 with its backup on ctl1: sorted, ctl1 came first)."""
    d = doc("pair", controllers=["db1", "ctl1"], version="22.05",
            slurm={"state_save_location": "/shared/slurm/state", "accounting": {"storage_host": "dbs"}})
    d["fleet"]["slurm"]["accounting"] = "db1"
    d["tenants"] = [{"name": "nlp", "share": 1}]
    path = tmp_path / "pair.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    proc = orchgen("plan", str(path), "-o", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "DbdBackupHost=ctl1" in (tmp_path / "out" / "slurm" / "slurmdbd.conf").read_text().splitlines()
    groups = yaml.safe_load((tmp_path / "out" / "bringup" / "inventory.yaml").read_text())["all"]["children"]
    assert list(groups["slurmctld"]["hosts"]) == ["db1", "ctl1"]
    assert list(groups["slurmdbd"]["hosts"]) == ["db1", "ctl1"]
