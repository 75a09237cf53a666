"""`orchgen import slurm` (issue 22) without a Slurm daemon: what it reports for each line of a site's
files, bad input (one line each, exit 2, nothing written), determinism, and the round trip
import(plan(W)) for every example with a bare-metal Slurm plane. tests/test_import_slurm_real.py
boots the real slurmctld on the imported sites."""
from __future__ import annotations

import json

import os
import re
from pathlib import Path

import pytest
import yaml

from generator.spec import slurmconf

from .conftest import run_orchgen

SITES = Path(__file__).parent / "data" / "sites"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

MINIMAL = """ClusterName=lab
SlurmctldHost=ctl
GresTypes=gpu
NodeName=gpu[01-04] CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=500000 Gres=gpu:h100:8
PartitionName=batch Nodes=ALL Default=YES MaxTime=2-00:00:00 State=UP
"""


def _import(tmp_path: Path, conf: str | Path, *extra: str, out: str = "workload.yaml"):
    if isinstance(conf, str):
        path = tmp_path / "site" / "slurm.conf"
        path.parent.mkdir(exist_ok=True)
        path.write_text(conf)
        conf = path
    return run_orchgen("import", "slurm", conf, "-o", tmp_path / out, *extra)


def _one_line_refusal(done, tmp_path: Path, *words: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "workload.yaml").exists()
    lines = done.stderr.strip().splitlines()
    assert lines and all(line.startswith("orchgen: ") for line in lines), done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    return done.stderr


def test_every_line_of_a_site_is_modelled_carried_or_refused_by_its_file_and_line(tmp_path):
    done = _import(tmp_path, SITES / "slac" / "slurm.conf", "--slurm-version", "22.05")
    assert done.returncode == 0, done.stderr
    said = done.stdout
    for name in ("slurm.conf", "slac.conf", "gres.conf", "cgroup.conf"):
        path = SITES / "slac" / name
        for record in slurmconf.parse(path.read_text(), str(path)):
            if record.kind != "include":
                assert f"{path}:{record.line}:" in said, f"{name}:{record.line} ({record.text[:40]}) is not reported"
    # what Slurm 22.05 refuses or ignores is named, with the reason
    assert re.search(r"refused .*slurm.conf:88: FastSchedule: obsolete", said)
    assert re.search(r"carried .*slurm.conf:117: AccountingStoreJobComment written as AccountingStoreFlags=job_comment",
                     said)
    doc = yaml.safe_load((tmp_path / "workload.yaml").read_text())
    assert doc["metadata"]["name"] == "slac" and "cluster_name" not in doc["options"]["slurm"]
    assert [p["name"] for p in doc["options"]["slurm"]["partitions"]] == \
        ["shared", "ml", "neutrino", "cryoem", "atlas", "lcls"]
    assert {p["gpu"]["type"] for p in doc["fleet"]["pools"]} == {"v100", "geforce_gtx_1080_ti", "geforce_rtx_2080_ti"}
    keys = {k["key"]: k for k in doc["site"]["slurm_conf"]["keys"]}
    assert keys["SlurmdTimeout"]["value"] == "3600" and keys["SlurmdTimeout"]["from"] == "slurm.conf:70"
    assert all(k["reason"] for k in doc["site"]["slurm_conf"]["keys"])
    assert doc["site"]["files"]["job_submit.lua"].startswith("\nfunction slurm_job_submit")


def test_the_imported_bundle_carries_the_site_in_place_with_reasons(tmp_path):
    assert _import(tmp_path, SITES / "nvidia-dgx" / "slurm.conf", "--slurm-version", "22.05").returncode == 0
    doc = yaml.safe_load((tmp_path / "workload.yaml").read_text())
    assert doc["fleet"]["pools"][0]["gpu"] == {"typed": False, "count": 8}  # Gres=gpu:8 stays untyped
    run_orchgen("plan", tmp_path / "workload.yaml", "-o", tmp_path / "out", "-q", check=True)
    conf = (tmp_path / "out" / "slurm" / "slurm.conf").read_text()
    lines = conf.splitlines()
    # a key orchgen writes takes the site's value on orchgen's own line, its reason above it
    at = lines.index("ReturnToService=1")
    assert lines[at - 1].startswith("# site (from slurm.conf:33):")
    assert "ReturnToService=2" not in lines
    assert "Prolog=/etc/slurm/prolog.d/*" in lines  # the site's glob: no HostPath, carried verbatim
    assert re.search(r"^NodeName=linux1 .*Gres=gpu:8 .*Weight=1 ", conf, re.M)
    assert "PartitionName=debug Nodes=ALL Default=YES" in conf
    gres = (tmp_path / "out" / "slurm" / "gres.conf").read_text()
    assert gres.count("Name=gpu File=/dev/nvidia") == 8 and "CPUs=0-19,40-59" in gres
    records = slurmconf.read(tmp_path / "out" / "slurm" / "slurm.conf")
    assert records.problems == []
    kinds = [r.kind for r in records.records if len(r.pairs) == 1]
    assert len(kinds) == len(set(kinds)), "a key written twice"


def test_import_is_deterministic(tmp_path):
    for out in ("a.yaml", "b.yaml"):
        assert _import(tmp_path, SITES / "slac" / "slurm.conf", out=out).returncode == 0
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()


def test_comments_and_continuation_lines_are_read_as_slurm_reads_them(tmp_path):
    conf = MINIMAL.replace("NodeName=gpu[01-04] CPUs=64", "# the GPU nodes\nNodeName=gpu[01-04] \\\n  CPUs=64") \
        + "SlurmdTimeout=600 # ten minutes\n"
    done = _import(tmp_path, conf)
    assert done.returncode == 0, done.stderr
    assert "slurm.conf:5: NodeName=gpu[01-04] -> fleet.pools gpu (4 nodes)" in done.stdout
    assert "slurm.conf:8: SlurmdTimeout: not modelled by orchgen" in done.stdout
    doc = yaml.safe_load((tmp_path / "workload.yaml").read_text())
    assert {"key": "SlurmdTimeout", "value": "600", "reason": "not modelled by orchgen",
            "from": "slurm.conf:8"} in doc["site"]["slurm_conf"]["keys"]


@pytest.mark.parametrize("conf, words", [
    (MINIMAL + "SchedulerParamters=bf_continue\n", ["slurm.conf:6:", "SchedulerParamters", "not a slurm.conf key"]),
    (MINIMAL + "NodeName=gpu04 CPUs=8\n", ["slurm.conf:6:", "gpu04", "already defined at", "slurm.conf:4"]),
    (MINIMAL + "Include loop.conf\n", ["loop.conf:1:", "Include loop"]),
    (MINIMAL + "this is not a key\n", ["slurm.conf:6:", "not Key=Value"]),
    (MINIMAL + "Include missing.conf\n", ["slurm.conf:6:", "no such file"]),
])
def test_bad_input_is_one_line_each_exit_2_nothing_written(tmp_path, conf, words):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "loop.conf").write_text("Include slurm.conf\n")
    _one_line_refusal(_import(tmp_path, conf), tmp_path, *words)


@pytest.mark.parametrize("name, text", [("gres.conf", "NodeName=gpu[01-04] Name=gpu Typo=h100 File=/dev/nvidia0\n"),
                                         ("cgroup.conf", "ConstrainCores=yes\nConstrainGPUs=yes\n")])
def test_an_unknown_key_in_gres_or_cgroup_conf_is_refused(tmp_path, name, text):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / name).write_text(text)
    _one_line_refusal(_import(tmp_path, MINIMAL), tmp_path, f"{name}:", "not a " + name + " key")


def test_several_problems_get_a_line_each(tmp_path):
    err = _one_line_refusal(_import(tmp_path, MINIMAL + "Foo=1\nBar=2\n"), tmp_path, "Foo", "Bar")
    assert len(err.strip().splitlines()) == 2


def test_a_fifo_is_refused_before_it_is_read(tmp_path):
    fifo = tmp_path / "slurm.conf"
    os.mkfifo(fifo)
    _one_line_refusal(run_orchgen("import", "slurm", fifo, "-o", tmp_path / "workload.yaml"), tmp_path, "FIFO")


def test_a_credential_is_never_carried(tmp_path):
    done = _import(tmp_path, MINIMAL + "AccountingStoragePass=s3cret\n")
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout + done.stderr + (tmp_path / "workload.yaml").read_text()
    assert "refused" in done.stdout and "AccountingStoragePass: a credential" in done.stdout


def _outside_file(tmp_path: Path) -> Path:
    """A file of Key=Value lines outside the site's folder, as a secret another file could be."""
    secret = tmp_path / "elsewhere" / "secret.conf"
    secret.parent.mkdir()
    secret.write_text("SlurmctldParameters=s3cret-token\nNodeName=leak[1-2] CPUs=8\n")
    return secret


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_an_include_outside_the_folder_is_not_read(tmp_path, how):
    secret = _outside_file(tmp_path)
    (tmp_path / "site").mkdir()
    name = {"absolute": str(secret), "dotdot": "../elsewhere/secret.conf", "symlink": "linked.conf"}[how]
    if how == "symlink":
        (tmp_path / "site" / "linked.conf").symlink_to(secret)
    err = _one_line_refusal(_import(tmp_path, MINIMAL + f"Include {name}\n"), tmp_path, "outside the folder")
    assert len(err.strip().splitlines()) == 1
    assert "s3cret" not in err and "leak" not in err and str(secret) not in err.replace(name, "")


def test_input_root_lets_an_include_read_another_folder(tmp_path):
    secret = _outside_file(tmp_path)
    done = _import(tmp_path, MINIMAL + f"Include {secret}\n", "--input-root", str(secret.parent))
    assert done.returncode == 0, done.stderr
    assert "leak[1-2]" in (tmp_path / "workload.yaml").read_text()


def test_a_binary_file_is_refused_in_a_few_lines(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_bytes(bytes(range(256)) * 40)
    err = _one_line_refusal(run_orchgen("import", "slurm", conf, "-o", tmp_path / "workload.yaml"), tmp_path,
                            "not Key=Value", "more problems like these")
    assert len(err.strip().splitlines()) <= 22


# ------------------------------------------------------------------------------------------------ round trip

# Examples whose bundle does not import back, with the reason (a follow-up, not a pass)
ROUND_TRIP_KNOWN: dict[str, str] = {}


def _bare_metal_slurm_examples() -> list[str]:
    """The examples whose plan writes slurm/ (a bare-metal Slurm plane), less ROUND_TRIP_KNOWN."""
    from .support import plan_of

    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        plane = plan_of(path).slurm_plane
        if plane is not None and plane.host == "bare-metal" and path.stem not in ROUND_TRIP_KNOWN:
            out.append(path.stem)
    return out


def _dump(doc: dict) -> str:
    """The `sacctmgr dump` a site running W would print: W's tenants as accounts under root."""
    lines = [f"Cluster - '{doc['metadata']['name']}'", "Parent - 'root'"]
    tenants = doc.get("tenants", [])
    lines += [f"Account - '{t['name']}':Description='{t['name']}':Fairshare={t.get('share', 1)}" for t in tenants]
    for t in tenants:
        if t.get("users"):
            lines.append(f"Parent - '{t['name']}'")
            lines += [f"User - '{u}':DefaultAccount='{t['name']}':Fairshare=1" for u in t["users"]]
    return "\n".join(lines) + "\n"


def _records(path: Path) -> list:
    return sorted(((r.pairs[0].key.lower(), r.pairs[0].value, frozenset((p.key.lower(), p.value) for p in r.pairs))
                   for r in slurmconf.parse(path.read_text(), path.name) if r.pairs), key=str)


@pytest.mark.parametrize("example", _bare_metal_slurm_examples())
def test_round_trip_import_of_a_plan_plans_the_same_slurm_configuration(tmp_path, example):
    source = EXAMPLES / f"{example}.yaml"
    first = tmp_path / "first"
    run_orchgen("plan", source, "-o", first, "-q", check=True)
    conf = first / "slurm" / "slurm.conf"
    version = re.search(r"for Slurm (\S+):", conf.read_text()).group(1)
    doc = yaml.safe_load(source.read_text())
    dump = tmp_path / "dump.txt"
    dump.write_text(_dump(doc))
    args = ["--slurm-version", version, "--sacctmgr-dump", dump]
    if (first / "slurm" / "topology.yaml").exists():
        args += ["--topology", first / "slurm" / "topology.yaml"]
    (tmp_path / "w").mkdir()
    done = run_orchgen("import", "slurm", conf, "-o", tmp_path / "w" / "workload.yaml", *args)
    assert done.returncode == 0, done.stderr
    run_orchgen("plan", tmp_path / "w" / "workload.yaml", "-o", tmp_path / "second", "-q", check=True)
    for name in ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf", "slurmdbd.conf"):
        a, b = first / "slurm" / name, tmp_path / "second" / "slurm" / name
        assert a.exists() == b.exists(), name
        if a.exists():
            assert _records(a) == _records(b), name
    # the accounting the tenants become (accounts.sh) and the plan's decisions for the Slurm plane too
    a, b = first / "slurm" / "accounts.sh", tmp_path / "second" / "slurm" / "accounts.sh"
    assert a.exists() == b.exists() and (not a.exists() or a.read_text() == b.read_text()), "accounts.sh"
    plans = [json.loads((d / "plan.json").read_text()) for d in (first, tmp_path / "second")]
    # (pool names are not in Slurm's files, so the import names pools its own way; which leaf a pool's nodes
    # hang under is the fabric's, compared as topology.conf/topology.yaml above; ray-on-slurm comes from a Ray
    # workload, which a site's Slurm files do not show)
    decided = [({k: v for k, v in p["planes"]["slurm"].items() if k not in ("workloads", "reasons", "pools", "addons")},
                [a for a in p["planes"]["slurm"]["addons"] if a != "ray-on-slurm"],
                sorted((q["nodes"], q["node_count"], json.dumps(q["gpu"])) for q in p["planes"]["slurm"]["pools"]))
               for p in plans]
    assert decided[0] == decided[1], "plan.json: the Slurm plane's decisions"


# --- issue 37: NodeSets, values as Slurm reads them, nothing changed silently ---------------------------------

NODESETS = """ClusterName=cloud
SlurmctldHost=head
GresTypes=gpu
NodeName=gpu-st-p4d-[1-2] CPUs=96 Sockets=2 CoresPerSocket=24 ThreadsPerCore=2 RealMemory=1100000 Feature=static,p4d Gres=gpu:a100:8
NodeName=rack[1-2]cpu[01-02] CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=30000 Feature=cpu
NodeSet=gpu_nodes Nodes=gpu-st-p4d-[1-2]
NodeSet=cpu_nodes Feature=cpu
NodeSet=every Nodes=ALL
PartitionName=gpu Nodes=gpu_nodes Default=YES MaxTime=INFINITE State=UP
PartitionName=cpu Nodes=cpu_nodes MaxTime=INFINITE State=UP
PartitionName=mixed Nodes=gpu_nodes,rack[1-2]cpu[01-02] MaxTime=INFINITE State=UP
PartitionName=all Nodes=ALL MaxTime=INFINITE State=UP
PartitionName=also Nodes=every MaxTime=INFINITE State=UP
"""


def _plan(tmp_path: Path) -> Path:
    run_orchgen("plan", tmp_path / "workload.yaml", "-o", tmp_path / "out", "-q", check=True)
    return tmp_path / "out"


def test_partitions_over_nodesets_all_and_multi_bracket_hostlists_import_plan_and_validate(tmp_path):
    done = _import(tmp_path, NODESETS)
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load((tmp_path / "workload.yaml").read_text())
    nodes = {p["name"]: p["nodes"] for p in doc["options"]["slurm"]["partitions"]}
    # each partition's Nodes= resolved as slurmctld does: NodeSet Nodes=, NodeSet Feature=, a mix, ALL
    assert nodes == {"gpu": "gpu-st-p4d-[1-2]", "cpu": "rack1cpu[01-02],rack2cpu[01-02]",
                     "mixed": "gpu-st-p4d-[1-2],rack1cpu[01-02],rack2cpu[01-02]", "all": "ALL",
                     "also": "gpu-st-p4d-[1-2],rack1cpu[01-02],rack2cpu[01-02]"}
    out = _plan(tmp_path)
    conf = slurmconf.read(out / "slurm" / "slurm.conf")
    kinds = [r.kind for r in conf.records if r.kind in ("nodeset", "partitionname")]
    # the site's NodeSet lines, before the partitions that name them (slurmctld reads them in order)
    assert kinds[:3] == ["nodeset"] * 3 and "nodeset" not in kinds[3:]
    assert [r.get("Nodes") for r in conf.every("PartitionName")] == \
        ["gpu_nodes", "cpu_nodes", "gpu_nodes,rack[1-2]cpu[01-02]", "ALL", "every"]
    # Feature= is Slurm's other spelling of Features=: the site's replaces orchgen's, never beside it
    line = next(r for r in conf.every("NodeName") if r.pairs[0].value.startswith("gpu"))
    assert [p.key.lower() for p in line.pairs].count("features") + [p.key.lower() for p in line.pairs].count(
        "feature") == 1 and line.get("Features") == "static,p4d"
    done = run_orchgen("validate", out)
    assert done.returncode == 0 and "partition " not in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("partition, words", [
    ("PartitionName=x Nodes=nosuch_set", ["slurm.conf:9:", "PartitionName=x", "nosuch_set", "no NodeName line"]),
    ("PartitionName=x Nodes=gpu[01-0", ["slurm.conf:9:", "PartitionName=x", "never closed"]),
    ("PartitionName=x Nodes=loop", ["slurm.conf:9:", "NodeSet loop names itself"]),
])
def test_a_partition_slurm_cannot_resolve_names_the_sites_file_and_line(tmp_path, partition, words):
    conf = MINIMAL + "NodeSet=loop Nodes=loop2\nNodeSet=loop2 Nodes=loop\nNodeSet=s Nodes=gpu[01-02]\n" + partition + "\n"
    err = _one_line_refusal(_import(tmp_path, conf), tmp_path, *words)
    assert ".orchgen-import" not in err


def test_a_planning_refusal_names_the_sites_line_never_a_temporary_file(tmp_path):
    # a partition name Slurm takes but orchgen's model refuses: found while planning the import
    err = _one_line_refusal(_import(tmp_path, MINIMAL + "PartitionName=bad/name Nodes=ALL\n"), tmp_path,
                            "slurm.conf:6:", "options.slurm.partitions[1]")
    assert ".orchgen-import" not in err and ".yaml" not in err.split("slurm.conf:6:")[0]


def test_values_with_spaces_are_written_back_quoted_as_slurm_reads_them(tmp_path):
    site = MINIMAL + 'RebootProgram="/bin/systemctl reboot"\nPartitionName=maint Nodes=gpu01 Hidden=YES ' \
        'State=DOWN Reason="disk swap"\n'
    assert _import(tmp_path, site).returncode == 0
    out = _plan(tmp_path)
    text = (out / "slurm" / "slurm.conf").read_text()
    assert 'RebootProgram="/bin/systemctl reboot"' in text.splitlines()
    assert 'Reason="disk swap"' in text
    # the one lexer that follows Slurm's parse_config.c reads back the site's value whole
    conf = slurmconf.read(out / "slurm" / "slurm.conf")
    assert conf.problems == [] and all(not r.leftover for r in conf.records)
    assert conf.last("RebootProgram").pairs[0].value == "/bin/systemctl reboot"
    assert run_orchgen("validate", out).returncode == 0


def test_controller_names_keep_their_case_and_address_in_order(tmp_path):
    site = MINIMAL.replace("SlurmctldHost=ctl", "SlurmctldHost=VM(10.1.2.3)\nSlurmctldHost=vm-backup")
    done = _import(tmp_path, site)
    assert done.returncode == 0, done.stderr
    assert "SlurmctldHost=VM(10.1.2.3) as written" in done.stdout
    assert not re.search(r"^refused .*SlurmctldHost", done.stdout, re.M)
    conf = slurmconf.read(_plan(tmp_path) / "slurm" / "slurm.conf")
    assert [r.pairs[0].value for r in conf.every("SlurmctldHost")] == ["VM(10.1.2.3)", "vm-backup"]


def test_a_lower_case_controller_without_address_is_modelled_not_carried(tmp_path):
    assert _import(tmp_path, MINIMAL).returncode == 0
    doc = yaml.safe_load((tmp_path / "workload.yaml").read_text())
    assert doc["fleet"]["slurm"]["controllers"] == ["ctl"]
    assert not [k for k in doc.get("site", {}).get("slurm_conf", {}).get("keys", []) if k["key"] == "SlurmctldHost"]


def test_nothing_changes_silently(tmp_path):
    # a site relying on Slurm's defaults: no RealMemory, CPUs alone, no SlurmUser, no cgroup.conf, no fabric
    site = "ClusterName=lab\nSlurmctldHost=ctl\nGresTypes=gpu\nNodeName=gpu[01-02] CPUs=32 Gres=gpu:a100:4\n" \
           "PartitionName=batch Nodes=ALL Default=YES MaxTime=1-00:00:00 State=UP\n"
    done = _import(tmp_path, site)
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert re.search(r"carried .*NodeName RealMemory=1: .*Slurm's default RealMemory", said)
    assert re.search(r"carried .*NodeName Sockets=32: .*Slurm reads CPUs=32 alone as 32 sockets", said)
    assert re.search(r"carried .*SlurmUser=root: Slurm's default SlurmUser", said)
    assert re.search(r"carried .*PartitionName=batch: the line verbatim \(orchgen would add DefaultTime=", said)
    assert re.search(r"carried .*cgroup.conf: ConstrainRAMSpace=no: ", said)
    assert re.search(r"added .*cgroup.conf: ConstrainDevices=yes: ", said)
    assert "asks      fabric: unknown — NCCL settings left out; give fleet.fabric" in said
    # every `added` line has its reason from the one table, none the catch-all
    assert "orchgen's choice where the site relied on Slurm's default" not in said
    out = _plan(tmp_path)
    conf = slurmconf.read(out / "slurm" / "slurm.conf")
    node = conf.every("NodeName")[0]
    assert (node.get("RealMemory"), node.get("Sockets"), node.get("CoresPerSocket"), node.get("ThreadsPerCore")) \
        == ("1", "32", "1", "1")
    assert conf.last("SlurmUser").pairs[0].value == "root"
    part = conf.every("PartitionName")[0]
    assert part.get("DefMemPerCPU") is None and part.get("DefaultTime") is None
    # no fabric assumed: no NCCL settings at all (NCCL_IB_DISABLE=1 would force TCP on InfiniBand)
    assert conf.last("TaskProlog") is None and not (out / "slurm" / "nccl.env").exists()
    assert "NCCL_IB_DISABLE" not in "".join(p.read_text() for p in (out / "slurm").rglob("*") if p.is_file())
    cgroup = slurmconf.read(out / "slurm" / "cgroup.conf")
    assert cgroup.last("ConstrainRAMSpace").pairs[0].value == "no"


def test_the_documented_list_of_improvements_is_the_table(tmp_path):
    from generator.spec.site import orchgen_better_markdown

    readme = (Path(__file__).resolve().parents[1] / "docs" / "slurm-admins.md").read_text()
    block = readme.split("<!-- orchgen-better:begin -->\n", 1)[1].split("<!-- orchgen-better:end -->", 1)[0]
    assert block == orchgen_better_markdown()


@pytest.mark.parametrize("value, kept", [("cred_expire=70", True), ("socket=/run/munge/munge.socket.2,ttl=60", True),
                                         ("jwt_key=/etc/slurm/jwt.key", False)])
def test_authinfo_lifetimes_are_kept_other_options_refused(tmp_path, value, kept):
    done = _import(tmp_path, MINIMAL + f"AuthInfo={value}\n")
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load((tmp_path / "workload.yaml").read_text())
    keys = {k["key"]: k["value"] for k in doc.get("site", {}).get("slurm_conf", {}).get("keys", [])}
    assert (keys.get("AuthInfo") == value) is kept
    if not kept:
        assert "refused" in done.stdout and "jwt_key is not one orchgen knows holds no secret" in done.stdout
    else:
        conf = slurmconf.read(_plan(tmp_path) / "slurm" / "slurm.conf")
        assert conf.last("AuthInfo").pairs[0].value == value


def test_validate_reads_partition_default_as_slurmctld_does(tmp_path):
    # Nodes= given once on PartitionName=DEFAULT applies to the partitions after it (slurm.conf(5))
    site = MINIMAL.replace("PartitionName=batch Nodes=ALL Default=YES MaxTime=2-00:00:00 State=UP",
                           "PartitionName=DEFAULT Nodes=ALL State=UP\nPartitionName=batch Default=YES "
                           "MaxTime=2-00:00:00\nPartitionName=short MaxTime=04:00:00\n"
                           "NodeSet=tagged Feature=fast\nPartitionName=fast Nodes=tagged MaxTime=04:00:00")
    site = site.replace("Gres=gpu:h100:8", "Gres=gpu:h100:8 Features=fast")
    done = _import(tmp_path, site)
    assert done.returncode == 0, done.stderr
    done = run_orchgen("validate", _plan(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_validate_accepts_the_sites_own_task_prolog(tmp_path):
    done = _import(tmp_path, MINIMAL + "TaskProlog=/etc/slurm/site-taskprolog.sh\n")
    assert done.returncode == 0, done.stderr
    done = run_orchgen("validate", _plan(tmp_path))
    assert done.returncode == 0 and "TaskProlog" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_a_node_name_orchgen_refuses_names_the_sites_node_line(tmp_path):
    # ParallelCluster's older queue names hold '_': Slurm takes the node name, fleet.pools[].hostnames does not
    site = MINIMAL + "NodeName=multiple_spot-st-c4-[1-2] CPUs=2\n"
    err = _one_line_refusal(_import(tmp_path, site), tmp_path, "slurm.conf:6:", "fleet.pools[1].hostnames")
    assert ".orchgen-import" not in err


def test_the_sites_plugstack_is_read_merged_with_pyxis_and_its_other_plugins_kept(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "plugstack.conf").write_text(
        "# the site's SPANK plugins\n"
        "required /usr/lib64/slurm/private-tmpdir.so base=/tmp/slurm mount=/var/tmp mount=/tmp\n"
        "optional /usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so\n"
        "include /etc/slurm/plugstack.conf.d/*\n"
        "not a spank line\n")
    done = _import(tmp_path, MINIMAL + "PlugStackConfig=/etc/slurm/plugstack.conf\n")
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert re.search(r"carried .*plugstack.conf:2: plugstack.conf: required /usr/lib64/slurm/private-tmpdir.so", said)
    assert re.search(r"modelled .*plugstack.conf:3: pyxis: orchgen's plugstack.conf.d/pyxis.conf loads it", said)
    assert re.search(r"modelled .*plugstack.conf:4: include /etc/slurm/plugstack.conf.d/\*", said)
    assert re.search(r"refused .*plugstack.conf:5: not a SPANK line", said)
    out = _plan(tmp_path)
    text = (out / "slurm" / "plugstack.conf").read_text()
    body = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    # orchgen's pyxis (one include of its folder) and the site's private-tmpdir, each once
    assert body == ["include plugstack.conf.d/*.conf",
                    "required /usr/lib64/slurm/private-tmpdir.so base=/tmp/slurm mount=/var/tmp mount=/tmp"]
    assert "spank_pyxis.so" in (out / "slurm" / "plugstack.conf.d" / "pyxis.conf").read_text()
    # slurm.conf names no other PlugStackConfig: Slurm reads this one, beside it
    assert slurmconf.read(out / "slurm" / "slurm.conf").last("PlugStackConfig") is None
    done = run_orchgen("validate", out)
    assert done.returncode == 0 and "plugstack.conf" not in done.stdout, done.stdout


def test_a_site_without_plugstack_is_told_that_pyxis_is_added(tmp_path):
    done = _import(tmp_path, MINIMAL)
    assert done.returncode == 0 and re.search(r"^added +plugstack.conf: pyxis: ", done.stdout, re.M), done.stdout


def test_the_old_controlmachine_and_controladdr_become_one_slurmctldhost_line(tmp_path):
    site = MINIMAL.replace("SlurmctldHost=ctl", "ControlMachine=head1\nControlAddr=10.0.0.5")
    done = _import(tmp_path, site)
    assert done.returncode == 0, done.stderr
    assert re.search(r"modelled .*slurm.conf:3: ControlAddr: the controller's address", done.stdout)
    conf = slurmconf.read(_plan(tmp_path) / "slurm" / "slurm.conf")
    assert [r.pairs[0].value for r in conf.every("SlurmctldHost")] == ["head1(10.0.0.5)"]
    assert conf.last("ControlAddr") is None and conf.last("ControlMachine") is None


def test_the_sites_other_files_each_get_a_line(tmp_path):
    # prolog/epilog scripts and globs, a cgroup.conf key Slurm no longer uses, a topology.conf Slurm does not read,
    # and empty items in a node list (Slurm skips them)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "cgroup.conf").write_text("ConstrainCores=yes\nAllowedDevicesFile=/etc/slurm/allowed.conf\n"
                                                   "CgroupReleaseAgentDir=/etc/slurm/cgroup\n")
    (tmp_path / "site" / "topology.conf").write_text("SwitchName=s0 Nodes=gpu[01-04]\n")
    site = MINIMAL.replace("Nodes=ALL", "Nodes=gpu[01-02],,gpu[03-04]") + \
        "Prolog=/etc/slurm/prolog.d/*\nPrologSlurmctld=/opt/slurm/ctld-prolog.sh\nTaskEpilog=/etc/slurm/te.sh\n"
    done = _import(tmp_path, site)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Prolog=/etc/slurm/prolog.d/*: each script the glob matches runs, in name order, on every node" in out
    assert "PrologSlurmctld=/opt/slurm/ctld-prolog.sh: the site's program, run on the controller" in out
    assert "TaskEpilog=/etc/slurm/te.sh: the site's program, run on every node, after each task" in out
    assert re.search(r"refused .*cgroup.conf:2: AllowedDevicesFile: .*not written", out), out
    assert re.search(r"refused .*cgroup.conf:3: CgroupReleaseAgentDir: .*fatal to 24.11", out), out
    assert re.search(r"refused .*topology.conf: topology.conf: not read, as Slurm does not read it without", out), out
    text = (tmp_path / "workload.yaml").read_text()
    assert "AllowedDevicesFile" not in text and "CgroupReleaseAgentDir" not in text
    assert run_orchgen("validate", _plan(tmp_path)).returncode == 0


def test_topology_yaml_beside_slurm_conf_is_read_only_by_releases_that_read_it(tmp_path):
    """A topology.yaml beside slurm.conf is the site's cabling where its release reads one (25.05+,
    topology.yaml(5)); for an older release it is refused with a line, as that slurmctld ignores it."""
    bundle = tmp_path / "bundle"
    run_orchgen("plan", EXAMPLES / "topology-yaml.yaml", "-o", bundle, "-q", check=True)
    site = tmp_path / "site"
    site.mkdir()
    for name in ("slurm.conf", "topology.yaml"):
        (site / name).write_bytes((bundle / "slurm" / name).read_bytes())
    new = run_orchgen("import", "slurm", site / "slurm.conf", "--slurm-version", "25.11", "-o", tmp_path / "new.yaml")
    assert new.returncode == 0, new.stderr
    assert yaml.safe_load((tmp_path / "new.yaml").read_text())["fleet"]["fabric"]["from"] == {
        "topology_yaml": "site/topology.yaml"}
    old = run_orchgen("import", "slurm", site / "slurm.conf", "--slurm-version", "24.11", "-o", tmp_path / "old.yaml")
    assert old.returncode == 0, old.stderr
    assert "from" not in yaml.safe_load((tmp_path / "old.yaml").read_text())["fleet"]["fabric"]
    assert re.search(r"refused\s+\S*/site/topology\.yaml: topology\.yaml: not read, as Slurm 24\.11 does not read it",
                     old.stdout), old.stdout
