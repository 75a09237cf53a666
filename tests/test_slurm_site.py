"""options.slurm's site policy and green-field defaults (issue 22), as files: what each field writes,
and each bad input refused with one line naming file, line and field (exit 2, nothing written).
The real Slurm's word on the same fields: tests/test_slurm_site_real.py."""
from __future__ import annotations

import copy
import re

import pytest
import yaml

from generator.render import render
from generator.render.slurm.model import model
from tests.conftest import REPO
from tests.support import plan_of
from tests.test_slurm_site_real import site_fleet


def files(fleet: dict) -> dict[str, str]:
    return {path: content.decode() for path, content in render(plan_of(fleet)).items() if path.startswith("slurm/")}


def keys(conf: str) -> dict[str, str]:
    """slurm.conf's single-key lines (comments and node/partition lines left out)."""
    out = {}
    for line in conf.splitlines():
        if line and not line.startswith(("#", "NodeName=", "PartitionName=")) and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


def green(**slurm) -> dict:
    """A small green-field fleet: one H100 pool, one tenant."""
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "lab"},
            "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband"},
                      "pools": [{"name": "h100", "nodes": 2, "gpu": {"type": "h100", "count": 8}}]},
            "tenants": [{"name": "nlp"}],
            "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True, "pool": "h100"}],
            "options": {"slurm": slurm}}


def test_green_field_defaults_are_written_with_their_reasons():
    conf = files(green())["slurm/slurm.conf"]
    k = keys(conf)
    assert k["MaxJobCount"] == "100000" and k["MaxArraySize"] == "10001"
    assert k["SchedulerParameters"].endswith(",max_switch_wait=86400")
    assert k["RebootProgram"] == "/usr/sbin/reboot" and k["ResumeTimeout"] == "1800"
    assert k["PropagateResourceLimitsExcept"] == "MEMLOCK" and "PropagateResourceLimits" not in k
    assert k["ClusterName"] == "lab"
    # the job hygiene of issue 38: every script of prolog.d/epilog.d, in name order (slurm.conf(5) Prolog)
    assert k["Prolog"] == "/etc/slurm/prolog.d/*" and k["Epilog"] == "/etc/slurm/epilog.d/*"
    for cite in ("faq.html#memlock", "slurm.conf(5) MaxArraySize", "slurm.conf(5) max_switch_wait",
                 "slurm.conf(5) RebootProgram"):
        assert cite in conf


def test_site_choices_replace_the_defaults():
    k = keys(files(green(propagate_resource_limits="NONE", reboot_program=None, resume_timeout=900,
                         cluster_name="prod"))["slurm/slurm.conf"])
    assert k["PropagateResourceLimits"] == "NONE" and "PropagateResourceLimitsExcept" not in k
    assert "RebootProgram" not in k and k["ResumeTimeout"] == "900" and k["ClusterName"] == "prod"
    k = keys(files(green(propagate_resource_limits=["CORE", "NOFILE"]))["slurm/slurm.conf"])
    assert k["PropagateResourceLimits"] == "CORE,NOFILE"


def test_the_sites_fleet_writes_its_names_gres_and_policy():
    out = files(site_fleet("22.05"))
    conf, gres = out["slurm/slurm.conf"], out["slurm/gres.conf"]
    assert "Gres=gpu:GV100GL:4 " in conf and "Gres=gpu:8 " in conf  # untyped: not gpu:gpu:8
    assert "NodeName=ga[01-02] Name=gpu File=/dev/nvidia[0-7]" in gres  # no Type=
    assert "NodeName=gv[01-02] Name=gpu Type=GV100GL File=" in gres
    assert "NodeName=c[01-02] CPUs=16 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2 " in conf  # CPUs=cores
    parts = re.findall(r"^PartitionName=(\S+)", conf, re.M)
    assert parts == ["gpu", "short", "long", "cpu", "maint"]  # no all, no per-pool ones
    assert "StorageLoc=site_acct" in out["slurm/slurmdbd.conf"]
    sh = out["slurm/accounts.sh"]
    assert "cluster=site1\n" in sh and "existing=0\n" in sh
    assert "\nqos_set long 'Priority=5 MaxWall=10080 MaxJobsPerUser=2'\n" in sh
    assert "\nqos_set debug 'Priority=100 MaxWall=30 Flags=DenyOnLimit' 'MaxTRESPerUser=gres/gpu=2'\n" in sh
    assert "set qos+=normal,long,debug,scavenger" in sh and "set defaultqos=normal" in sh


def test_cpu_count_cores_takes_a_slurm_conf_style_node_line():
    fleet = green()
    pool = fleet["fleet"]["pools"][0]
    pool["slurmd_c"] = ("NodeName=h100-001 CPUs=112 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 "
                        "RealMemory=2063937")
    pool["cpu_count"] = "cores"
    m = model(plan_of(fleet))
    assert m.groups[0].cpus == 112 and "CPUs=112 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2" \
        in m.groups[0].node_line
    assert m.groups[0].cpus_per_gpu == 14  # cores per GPU


BAD = [
    # (change to the site fleet, field named, words of the message)
    (lambda f: f["options"]["slurm"]["partitions"][0].update(nodes="gv01"), "options.slurm.partitions[0]",
     "exactly one of pools"),
    (lambda f: f["options"]["slurm"]["partitions"][0].update(pools=["v101"]), "options.slurm.partitions[0].pools[0]",
     "unknown pool 'v101'"),
    (lambda f: f["options"]["slurm"]["partitions"][1].update(name="gpu"), "options.slurm.partitions[1].name",
     "duplicate partition"),
    (lambda f: f["options"]["slurm"]["partitions"][1].update(name="DEFAULT"), "options.slurm.partitions[1].name",
     "Slurm keyword"),
    (lambda f: f["options"]["slurm"]["partitions"][0].update(default=True), "options.slurm.partitions",
     "mark one"),
    (lambda f: f["options"]["slurm"]["partitions"][1].update(default_time="02:00:00"),
     "options.slurm.partitions[1].default_time", "longer than max_time"),
    (lambda f: f["options"]["slurm"]["partitions"][1].update(nodes="gv[01-03]"), "options.slurm.partitions[1].nodes",
     "not a Slurm node"),
    (lambda f: f["options"]["slurm"]["partitions"][2].update(allow_qos=["lnog"]),
     "options.slurm.partitions[2].allow_qos[0]", "unknown QOS 'lnog'"),
    (lambda f: f["options"]["slurm"]["qos"][0].update(preempt=["scavanger"]), "options.slurm.qos[0].preempt[0]",
     "did you mean 'scavenger'"),
    (lambda f: f["options"]["slurm"]["qos"][0].update(name="Normal"), "options.slurm.qos[0].name",
     "lower-case"),
    (lambda f: f["options"]["slurm"]["qos"][0].update(max_tres_per_user="gpu 2"),
     "options.slurm.qos[0].max_tres_per_user", "not a TRES limit"),
    (lambda f: f["options"]["slurm"].update(scheduler_parameters=["max_switch_wait=60"]),
     "options.slurm.scheduler_parameters[0]", "options.slurm.max_switch_wait"),
    (lambda f: f["options"]["slurm"].update(scheduler_parameters=["bf_window 10"]),
     "options.slurm.scheduler_parameters[0]", "not a SchedulerParameters item"),
    (lambda f: f["options"]["slurm"].update(propagate_resource_limits="NONE"),
     "options.slurm.propagate_resource_limits_except", "goes with propagate_resource_limits: ALL"),
    (lambda f: f["fleet"]["pools"][0]["gpu"].pop("type"), "fleet.pools[0].gpu.type", "typed: false"),
    (lambda f: f["fleet"]["pools"][0]["gpu"].update(type="gv100 gl"), "fleet.pools[0].gpu.type", "not a GRES type"),
    (lambda f: [f.pop("tenants")] + [w.pop("tenant") for w in f["workloads"]], "options.slurm.qos",
     "needs Slurm accounting"),
    (lambda f: f["fleet"]["pools"][2].update(cpu_count="cores", cpus=20), "fleet.pools[2].cpus", "cpus is 20"),
]


@pytest.mark.parametrize("change,field,words", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_site_policy_is_one_line_naming_the_field(orchgen, tmp_path, change, field, words):
    fleet = copy.deepcopy(site_fleet("22.05"))
    change(fleet)
    src = tmp_path / "site.yaml"
    src.write_text(yaml.safe_dump(fleet, sort_keys=False))
    result = orchgen("plan", src, "-o", tmp_path / "out")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    errors = [ln for ln in lines if "warning" not in ln]
    # the field as the error line names it (a long one is cut with "...")
    assert len(errors) == 1 and errors[0].startswith(f"orchgen: {src}:") and words in errors[0], lines
    assert field in errors[0] or field[:24] in errors[0], lines
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_orchgen_validate_accepts_the_sites_bundle(orchgen, tmp_path):
    """The bundle's own checks agree with what the site's fields write (untyped GRES in slurm.conf,
    gres.conf, nhc.conf and plan.json; accounts.sh's QOS lines)."""
    src = tmp_path / "site.yaml"
    src.write_text(yaml.safe_dump(site_fleet("22.05"), sort_keys=False))
    orchgen("plan", src, "-o", tmp_path / "out", check=True)
    result = orchgen("validate", tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr


def test_slurm_on_kubernetes_takes_site_partitions_of_whole_pools(orchgen, tmp_path):
    """Slinky builds partitions from NodeSets (whole pools): a partition of part of a pool is refused,
    one of its pools is written."""
    doc = yaml.safe_load((REPO / "examples/cloud-training.yaml").read_text())
    doc.setdefault("options", {}).setdefault("slurm", {})["partitions"] = [
        {"name": "gpu", "pools": ["h100"], "default": True}, {"name": "half", "nodes": "h100-[001-015]"}]
    src = tmp_path / "w.yaml"
    src.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = orchgen("plan", src, "-o", tmp_path / "out")
    assert result.returncode == 2 and "options.slurm.partitions[1].nodes" in result.stderr
    assert "whole pools" in result.stderr and not (tmp_path / "out").exists()
    doc["options"]["slurm"]["partitions"].pop()
    src.write_text(yaml.safe_dump(doc, sort_keys=False))
    orchgen("plan", src, "-o", tmp_path / "out", check=True)
    values = (tmp_path / "out/kubernetes/helm/slurm.values.yaml").read_text()
    assert "Default=YES" in values and "PartitionName=all" not in values


def test_simulate_schedules_with_the_sites_weights_and_scheduler_parameters():
    from generator.simulate.slurm import policy_of

    p = policy_of(plan_of(site_fleet("22.05")))
    assert (p.weight_fairshare, p.weight_gpu, p.weight_age) == (20_000, 1_000, 500)
    assert p.age_max == p.half_life == 14 * 86_400 and p.calc_period == 300
    assert (p.bf_interval, p.bf_max_job_test, p.default_queue_depth, p.max_switch_wait) == (60, 500, 200, 3600)
    green_policy = policy_of(plan_of(green()))
    assert (green_policy.weight_fairshare, green_policy.max_switch_wait, green_policy.bf_max_job_test) == (10_000, 86_400, 1000)
