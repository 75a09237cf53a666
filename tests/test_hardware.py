"""Node hardware (issue 10), from the input to every file that states it, read back as its consumer
reads it (real Slurm: test_slurm_real.py's hardware tests):

* a `slurmd -C` line of each hardware shape (DGX H100, a GB200 NVL72 compute tray, a university A100
  server, an IBM POWER9 AC922, a GH200 node) gives the same node as the typed fields;
* `cpus` alone is one socket of `cpus` cores with one thread each, never `cpus` sockets;
* gres.conf's Cores= follow gpu.sockets in Slurm's abstract core numbering;
* RealMemory, CoreSpecCount and MemSpecLimit follow the stated rule;
* SlurmctldHost / AccountingStorageHost come from fleet.slurm;
* a MIG pool's GRES is the same string in slurm.conf, gres.conf, Slinky and Soperator values and
  Kubernetes quotas, and `orchgen validate` finds it when a place disagrees.
"""
from __future__ import annotations

import re
import functools
from pathlib import Path

import pytest
import yaml

from .support import plan_of_file

from generator import spec
from generator.decide import make_plan
from generator.render import render
from generator.render.slurm import slurm_config
from generator.render.slurm.model import PLACEHOLDER_CONTROLLER, model
from generator.spec import hostlist, mig
from generator.spec.hardware import node_hardware, parse_slurmd_c

# The line `slurmd -C` prints on one node of each shape (slurmd.c _print_config: NodeName, CPUs,
# Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory = MemTotal in MiB), with the
# typed fields that describe the same machine.
SHAPES = {
    # NVIDIA DGX H100: 2x Xeon Platinum 8480C (56 cores, HT), 2 TiB
    "dgx-h100": ("NodeName=dgx001 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 "
                 "RealMemory=2063937",
                 {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2}, 2048,
                 {"type": "h100", "count": 8, "sockets": [0, 0, 0, 0, 1, 1, 1, 1]}),
    # GB200 NVL72 compute tray: two GB200 superchips, a 72-core Grace (no SMT) each, 2x 480 GB LPDDR5X
    "gb200-tray": ("NodeName=gb200-r01-n01 CPUs=144 Boards=1 SocketsPerBoard=2 CoresPerSocket=72 ThreadsPerCore=1 "
                   "RealMemory=881362",
                   {"sockets": 2, "cores_per_socket": 72, "threads_per_core": 1}, 894,
                   {"type": "gb200", "count": 4, "sockets": [0, 0, 1, 1]}),
    # a university A100 server: 2x AMD EPYC 7543 (32 cores, SMT), 512 GiB, 4x A100 80GB
    "a100-server": ("NodeName=a100-01 CPUs=128 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 ThreadsPerCore=2 "
                    "RealMemory=515659",
                    {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2}, 512,
                    {"type": "a100", "count": 4, "sockets": [0, 0, 1, 1]}),
    # IBM POWER9 AC922: 2x 20-core POWER9 with SMT4, 512 GiB, 4x V100 (NVLink to the CPUs)
    "power9-ac922": ("NodeName=p9n001 CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=20 ThreadsPerCore=4 "
                     "RealMemory=519424",
                     {"sockets": 2, "cores_per_socket": 20, "threads_per_core": 4}, 512,
                     {"type": "v100", "count": 4, "sockets": [0, 0, 1, 1]}),
    # NVIDIA GH200 Grace Hopper: one 72-core Grace, 480 GB LPDDR5X
    "gh200": ("NodeName=gh001 CPUs=72 Boards=1 SocketsPerBoard=1 CoresPerSocket=72 ThreadsPerCore=1 "
              "RealMemory=470464",
              {"sockets": 1, "cores_per_socket": 72, "threads_per_core": 1}, 480,
              {"type": "gh200", "count": 1, "sockets": [0]}),
}


def fleet_doc(pools: list[dict], name: str = "hw", *, slurm: dict | None = None, workloads: list[dict] | None = None,
              **options) -> dict:
    fleet: dict = {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 4}, "pools": pools}
    if slurm is not None:
        fleet["slurm"] = slurm
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": name}, "fleet": fleet,
            "workloads": workloads or [{"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"slurm_version": "22.05", **options}}


plan_of = functools.partial(plan_of_file, name=None)  # written as <metadata.name>.yaml


def node_lines(conf: str) -> dict[str, dict[str, str]]:
    """slurm.conf's NodeName lines: first node of the line -> {key: value}."""
    out = {}
    for raw in conf.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("NodeName="):
            rec = dict(t.split("=", 1) for t in line.split())
            out[hostlist.expand(rec["NodeName"])[0]] = rec
    return out


def layout(rec: dict[str, str]) -> tuple[int, int, int, int]:
    """(CPUs, sockets, cores per socket, threads per core) as Slurm reads a NodeName line."""
    sockets = int(rec["Boards"]) * int(rec["SocketsPerBoard"]) if "Boards" in rec else int(rec.get("Sockets", 1))
    return int(rec["CPUs"]), sockets, int(rec["CoresPerSocket"]), int(rec["ThreadsPerCore"])


# ------------------------------------------------------------------ slurmd -C against the typed fields


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_slurmd_c_line_gives_the_node_the_typed_fields_give(tmp_path, shape):
    line, cpu, memory, gpu = SHAPES[shape]
    c = parse_slurmd_c(line)
    assert (c.sockets, c.cores_per_socket, c.threads_per_core) == tuple(cpu.values())
    assert c.cpus == c.sockets * c.cores_per_socket * c.threads_per_core
    assert 0.85 * memory * 1024 <= c.real_memory <= memory * 1024  # what the kernel keeps, as checks.py allows
    base = {"nodes": 2, "gpu": gpu}
    typed = {"name": "typed", **base, "cpu": cpu, "memory_gib": memory}
    measured = {"name": "measured", **base, "slurmd_c": line}
    both = {"name": "both", **base, "cpu": cpu, "memory_gib": memory, "slurmd_c": line,
            "cpus": c.cpus}  # every way at once: they agree, so the pool is accepted
    plan = plan_of(tmp_path, fleet_doc([typed, measured, both], workloads=[
        {"name": f"train-{p}", "nodes": 2, "tightly_coupled": True, "pool": p} for p in ("typed", "measured", "both")]))
    hws = {s.pool: s.hardware for s in plan.slurm_plane.slices}
    assert {(h.sockets, h.cores_per_socket, h.threads_per_core, h.cpus) for h in hws.values()} == {
        (c.sockets, c.cores_per_socket, c.threads_per_core, c.cpus)}
    recs = node_lines(slurm_config(plan)["slurm.conf"])
    assert {layout(r) for r in recs.values()} == {(c.cpus, c.sockets, c.cores_per_socket, c.threads_per_core)}
    # slurm.conf says it the way each source did: Boards/SocketsPerBoard as slurmd -C prints them
    assert "Sockets" in recs["typed-001"] and "Boards" not in recs["typed-001"]
    assert (recs["measured-001"]["Boards"], recs["measured-001"]["SocketsPerBoard"]) == (str(c.boards), str(c.sockets_per_board))
    # the memory slurmd reported is the base of RealMemory, which never exceeds it
    assert int(recs["measured-001"]["RealMemory"]) <= c.real_memory
    assert int(recs["typed-001"]["RealMemory"]) <= memory * 1024
    # and the GPUs keep their sockets either way
    gres = [ln for ln in slurm_config(plan)["gres.conf"].splitlines() if ln.startswith("NodeName=")]
    assert sum("Cores=" in ln for ln in gres) == 3 * len(set(gpu["sockets"]))


def test_cpus_alone_is_one_socket_of_cores_never_sockets(tmp_path):
    plan = plan_of(tmp_path, fleet_doc([{"name": "old", "nodes": 2, "cpus": 96, "memory_gib": 512,
                                         "gpu": {"type": "a100", "count": 4}}]))
    rec = node_lines(slurm_config(plan)["slurm.conf"])["old-001"]
    assert layout(rec) == (96, 1, 96, 1) and rec["Sockets"] == "1"
    default = plan_of(tmp_path, fleet_doc([{"name": "bare", "nodes": 2}], name="bare"))
    assert layout(node_lines(slurm_config(default)["slurm.conf"])["bare-001"]) == (64, 1, 64, 1)
    conf = slurm_config(plan)["slurm.conf"]
    assert "`cpus` alone: one socket of 96 cores with one thread each" in conf


# ------------------------------------------------------------------ gres.conf Cores=


@pytest.mark.parametrize("sockets,want", [
    ([0, 0, 1, 1], ["/dev/nvidia[0-1] Cores=0-31", "/dev/nvidia[2-3] Cores=32-63"]),
    ([1, 1, 0, 0], ["/dev/nvidia[0-1] Cores=32-63", "/dev/nvidia[2-3] Cores=0-31"]),
    ([0, 1, 0, 1], ["/dev/nvidia0 Cores=0-31", "/dev/nvidia1 Cores=32-63", "/dev/nvidia2 Cores=0-31",
                    "/dev/nvidia3 Cores=32-63"]),
    ([0, 0, 0, 0], ["/dev/nvidia[0-3] Cores=0-31"]),
])
def test_gres_cores_are_the_sockets_cores_in_slurms_abstract_numbering(tmp_path, sockets, want):
    """gres.conf(5), Cores: core 0 is the first core of the first socket, core 1 the second; so socket
    s has cores s*32 .. s*32+31 on a 2x32 node, whatever CoreSpecCount reserves."""
    plan = plan_of(tmp_path, fleet_doc([{"name": "a100", "nodes": 2, "memory_gib": 512,
                                         "cpu": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2},
                                         "reserved": {"cores": 2, "memory_gib": 16},
                                         "gpu": {"type": "a100", "count": 4, "sockets": sockets}}]))
    lines = [ln for ln in slurm_config(plan)["gres.conf"].splitlines() if ln.startswith("NodeName=")]
    assert [ln.split("File=", 1)[1] for ln in lines] == want
    assert all(ln.startswith("NodeName=a100-[001-002] Name=gpu Type=a100 ") for ln in lines)


def test_autodetect_writes_a_node_specific_line(tmp_path):
    plan = plan_of(tmp_path, fleet_doc([{"name": "n", "nodes": 2, "gpu": {"type": "h100", "count": 8, "autodetect": "nvml"}},
                                        {"name": "f", "nodes": 2, "gpu": {"type": "l40s", "count": 2}}],
                                       workloads=[{"name": "t", "nodes": 2, "tightly_coupled": True, "pool": "n"},
                                                  {"name": "u", "nodes": 2, "tightly_coupled": True, "pool": "f"}]))
    lines = [ln for ln in slurm_config(plan)["gres.conf"].splitlines() if ln.startswith("NodeName=")]
    assert lines == ["NodeName=n-[001-002] AutoDetect=nvml",
                     "NodeName=f-[001-002] Name=gpu Type=l40s File=/dev/nvidia[0-1]"]


# ------------------------------------------------------------------ memory and reservations


@pytest.mark.parametrize("pool,real,memspec,corespec", [
    ({"memory_gib": 2048}, (2048 - 103) * 1024, None, None),  # the unchanged rule: minus max(4 GiB, 5%)
    ({"memory_gib": 2048, "reserved": {"cores": 4, "memory_gib": 64}}, (2048 - 62) * 1024, 65536, 4),  # less 3%
    ({"memory_gib": 64, "reserved": {"memory_gib": 8}}, (64 - 2) * 1024, 8192, None),
    ({"memory_gib": 16, "reserved": {"cores": 1, "memory_gib": 2}}, 15 * 1024, 2048, 1),  # at least 1 GiB
    ({"slurmd_c": SHAPES["dgx-h100"][0]}, 2063937 - 101 * 1024, None, None),  # slurmd -C, minus max(4 GiB, 5%)
    ({"slurmd_c": SHAPES["dgx-h100"][0], "reserved": {"cores": 4, "memory_gib": 64}},
     2063937 - 2063937 // 200, 65536, 4),  # slurmd -C less 0.5%
    ({"slurmd_c": "NodeName=n1 CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=31900",
      "reserved": {"memory_gib": 4}}, 31900 - 512, 4096, None),  # at least 512 MiB
])
def test_real_memory_and_spec_limits(tmp_path, pool, real, memspec, corespec):
    plan = plan_of(tmp_path, fleet_doc([{"name": "p", "nodes": 2, **pool}]))
    rec = node_lines(slurm_config(plan)["slurm.conf"])["p-001"]
    assert int(rec["RealMemory"]) == real
    assert rec.get("MemSpecLimit") == (str(memspec) if memspec else None)
    assert rec.get("CoreSpecCount") == (str(corespec) if corespec else None)
    g = model(plan).groups[0]
    parts = {p.name: p for p in model(plan).partitions}
    # a job that asks for no memory gets its share of what jobs can have: MemSpecLimit and the
    # specialised cores' CPUs taken out
    assert parts["p"].def_mem_per_cpu == (real - (memspec or 0)) // (g.cpus - (corespec or 0) * g.hw.threads_per_core)


def test_reservation_above_real_memory_is_refused(tmp_path):
    from generator.errors import OrchgenError

    # 40 GiB reserved of a 41 GiB node passes the input check but not Slurm's: RealMemory is 41 GiB
    # less what firmware and the kernel keep (max(1 GiB, 3%) rounded up: 2 GiB)
    with pytest.raises(OrchgenError, match=r"reserves 40960 MiB \(MemSpecLimit\) but RealMemory is 39936 MiB"):
        slurm_config(plan_of(tmp_path, fleet_doc([{"name": "p", "nodes": 2, "memory_gib": 41,
                                                   "reserved": {"memory_gib": 40}}])))


def test_kubernetes_quotas_leave_the_reservation_out(tmp_path):
    doc = fleet_doc([{"name": "k", "nodes": 4, "memory_gib": 512, "reserved": {"cores": 2, "memory_gib": 16},
                      "cpu": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2},
                      "gpu": {"type": "l40s", "count": 4}}],
                    workloads=[{"name": "api", "long_lived_services": True, "bare_metal": False}])
    doc["tenants"] = [{"name": "a", "share": 1}, {"name": "b", "share": 1}]
    plan = plan_of(tmp_path, doc)
    s = plan.kube_plane.slices[0]
    assert (s.cpus, s.memory_gib) == (128 - 4, 512 - 16)
    assert sum(t.quotas["k"].cpus for t in plan.tenants) == 124 * 4
    readme = render(plan)["README.md"].decode()
    assert 'systemReserved:\n  cpu: "4"\n  memory: 16Gi' in readme


# ------------------------------------------------------------------ controllers


def test_controllers_and_accounting_host(tmp_path):
    doc = fleet_doc([{"name": "p", "nodes": 4}], slurm={"controllers": ["head01", "head02"], "accounting": "dbd01"})
    doc["tenants"] = [{"name": "a", "share": 1}, {"name": "b", "share": 2}]
    conf = slurm_config(plan_of(tmp_path, doc))["slurm.conf"]
    assert re.findall(r"^SlurmctldHost=(\S+)$", conf, re.M) == ["head01", "head02"]
    assert re.findall(r"^AccountingStorageHost=(\S+)$", conf, re.M) == ["dbd01"]
    del doc["fleet"]["slurm"]["accounting"]
    conf = slurm_config(plan_of(tmp_path, doc))["slurm.conf"]
    assert re.findall(r"^AccountingStorageHost=(\S+)$", conf, re.M) == ["head01"]  # default: the primary
    del doc["fleet"]["slurm"]
    plan = plan_of(tmp_path, doc)
    conf = slurm_config(plan)["slurm.conf"]
    assert re.findall(r"^SlurmctldHost=(\S+)$", conf, re.M) == [PLACEHOLDER_CONTROLLER]
    assert [(w.field, w.bundle_only) for w in plan.warnings if w.field.startswith("fleet.slurm")] == [
        ("fleet.slurm.controllers", True)]


def test_slurm_on_kubernetes_needs_no_controllers(tmp_path):
    doc = fleet_doc([{"name": "p", "nodes": 4, "gpu": {"type": "h100", "count": 8}}], slurm_on_kubernetes="slinky")
    assert make_plan_warnings(tmp_path, doc) == []


def make_plan_warnings(tmp_path: Path, doc: dict) -> list[str]:
    return [str(w) for w in plan_of(tmp_path, doc).warnings]


def test_every_example_with_a_bare_metal_slurm_plane_names_its_controllers():
    for path in sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.yaml")):
        plan = make_plan(spec.load(path), path)
        if plan.slurm_plane and plan.slurm_plane.host == "bare-metal":
            # (topology-yaml.yaml plans 25.11 on purpose: its only warning is that no bring-up OS packages it)
            assert plan.slurm_controllers and not [w for w in plan.warnings if w.field != "options.slurm_version"], \
                path.name
            assert PLACEHOLDER_CONTROLLER not in slurm_config(plan)["slurm.conf"], path.name


# ------------------------------------------------------------------ MIG: one GRES everywhere


def test_mig_table_covers_the_gpus_the_issue_names():
    for gpu_type, profile, count in [("a100-40gb", "1g.5gb", 7), ("a100-80gb", "1g.10gb", 7), ("a30", "1g.6gb", 4),
                                     ("h100", "1g.10gb", 7), ("h100-94gb", "1g.12gb", 7), ("h200", "1g.18gb", 7),
                                     ("gh200", "1g.12gb", 7), ("gh200-144gb", "1g.18gb", 7), ("b200", "1g.23gb", 7),
                                     ("gb200", "1g.24gb", 7), ("a100", "3g.40gb", 2), ("h200", "7g.141gb", 1)]:
        assert mig.profiles_of(gpu_type)[profile] == count, gpu_type
    assert mig.profiles_of("l40s") is None and "1g.5gb" not in mig.profiles_of("h100")
    assert all(re.fullmatch(r"[1-7]g\.\d+gb", p) for table in mig.PROFILES.values() for p in table)


MIG_POOL = {"name": "mig", "nodes": 4, "cpu": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2},
            "memory_gib": 1024, "gpu": {"type": "h100", "count": 8, "mig": {"profile": "1g.10gb", "per_gpu": 7}}}


def test_mig_gres_on_bare_metal_slurm(tmp_path):
    plan = plan_of(tmp_path, fleet_doc([MIG_POOL], slurm={"controllers": ["ctl"]}))
    files = slurm_config(plan)
    rec = node_lines(files["slurm.conf"])["mig-001"]
    assert rec["Gres"] == "gpu:1g.10gb:56"  # a substring of NVML's MIG profile name (gres.html, MIG)
    assert [ln for ln in files["gres.conf"].splitlines() if ln.startswith("NodeName=")] == [
        "NodeName=mig-[001-004] AutoDetect=nvml"]
    assert node_hardware(spec.load(tmp_path / "hw.yaml").fleet.pools[0]).autodetect == "nvml"
    assert plan.to_json()["planes"]["slurm"]["pools"][0]["gpu"] == {
        "type": "h100", "count": 8, "mig": {"profile": "1g.10gb", "per_gpu": 7}}


@pytest.mark.parametrize("operator", ["slinky", "soperator"])
def test_mig_gres_is_one_string_on_slurm_on_kubernetes(tmp_path, operator):
    plan = plan_of(tmp_path, fleet_doc([MIG_POOL], slurm_on_kubernetes=operator))
    files = {k: v.decode() for k, v in render(plan).items()}
    if operator == "slinky":
        ns = yaml.safe_load(files["kubernetes/helm/slurm.values.yaml"])["nodesets"]["mig"]
        assert ns["extraConfMap"]["Gres"] == "gpu:1g.10gb:56"
        assert ns["slurmd"]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": 56}
        gres = yaml.safe_load(files["kubernetes/helm/slurm.values.yaml"])["configFiles"]["gres.conf"]
        assert "NodeName=mig-[0-3] AutoDetect=nvml" in gres.splitlines()
    else:
        ns = next(d for d in yaml.safe_load_all(files["kubernetes/manifests/50-soperator-nodesets.yaml"]))["spec"]
        assert "Gres=gpu:1g.10gb:56" in ns["nodeConfig"]["static"].split()
        assert ns["slurmd"]["resources"]["nvidia.com/mig-1g.10gb"] == 56 and "nvidia.com/gpu" not in ns["slurmd"]["resources"]
        assert ns["nodeConfig"]["gresConfig"] == ["AutoDetect=nvml"]
    values = yaml.safe_load(files["kubernetes/helm/gpu-operator.values.yaml"])
    assert values["mig"] == {"strategy": "mixed"}
    assert "nvidia.com/mig.config=all-1g.10gb-x7" in files["kubernetes/node-labels.sh"]


def test_mig_quotas_count_instances(tmp_path):
    doc = fleet_doc([MIG_POOL, {"name": "l40s", "nodes": 4, "gpu": {"type": "l40s", "count": 4}}],
                    workloads=[{"name": "api", "long_lived_services": True, "multi_tenant": True, "bare_metal": False,
                                "pool": "mig", "gpus": 1, "tenant": "a"},
                               {"name": "batch", "multi_tenant": True, "bare_metal": False, "pool": "l40s", "tenant": "b"}],
                    gang_scheduler="kueue")
    doc["tenants"] = [{"name": "a", "share": 1}, {"name": "b", "share": 1}]
    plan = plan_of(tmp_path, doc)
    files = {k: v.decode() for k, v in render(plan).items()}
    # under Kueue the ClusterQueues are the quota, MIG instances included; no ResourceQuota
    assert "kubernetes/manifests/10-quotas.yaml" not in files
    queues = [d for d in yaml.safe_load_all(files["kubernetes/manifests/20-kueue.yaml"]) if d["kind"] == "ClusterQueue"]
    for q in queues:
        group = q["spec"]["resourceGroups"][0]
        assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]
        # flavors are named <pool>-<hash of their spec> (content-named: the CRD freezes the spec)
        flavors = {f["name"].rsplit("-", 1)[0]: {r["name"]: int(r["nominalQuota"]) if r["nominalQuota"].isdigit() else r["nominalQuota"] for r in f["resources"]}
                   for f in group["flavors"]}
        assert flavors["mig"]["nvidia.com/gpu"] == 0 and flavors["mig"]["nvidia.com/mig-1g.10gb"] == 16 * 7
        assert flavors["l40s"]["nvidia.com/mig-1g.10gb"] == 0 and flavors["l40s"]["nvidia.com/gpu"] == 8
    # under Volcano, borrowing is on: each namespace's ResourceQuota may ask for the whole plane, per resource
    doc["options"]["gang_scheduler"] = "volcano"
    volcano = {k: v.decode() for k, v in render(plan_of(tmp_path, doc)).items()}
    quotas = list(yaml.safe_load_all(volcano["kubernetes/manifests/10-quotas.yaml"]))
    assert {q["metadata"]["namespace"]: q["spec"]["hard"] for q in quotas} == {
        t: {"requests.nvidia.com/gpu": "16", "requests.nvidia.com/mig-1g.10gb": str(4 * 8 * 7)} for t in ("a", "b")}
    # the long-lived service is served by KServe (issue 21): its predictor asks for MIG instances only
    [api] = [d for d in yaml.safe_load_all(files["kubernetes/workloads/api.yaml"]) if d["kind"] == "InferenceService"]
    limits = api["spec"]["predictor"]["containers"][0]["resources"]["limits"]
    gpu_limits = {k: v for k, v in limits.items() if k.startswith("nvidia.com/")}
    assert gpu_limits == {"nvidia.com/mig-1g.10gb": "1"}  # a MIG endpoint's replica: one instance (CUDA uses one)


def test_validate_finds_a_mig_gres_that_differs(tmp_path):
    from generator import bundle
    from generator.validate.bundle_checks import validate_bundle

    plan = plan_of(tmp_path, fleet_doc([MIG_POOL], slurm_on_kubernetes="slinky"))
    out = tmp_path / "b"
    bundle.write(render(plan), out)
    assert not validate_bundle(out).errors
    values = out / "kubernetes/helm/slurm.values.yaml"
    text = values.read_text()
    values.write_text(text.replace("nvidia.com/mig-1g.10gb: 56", "nvidia.com/gpu: 56"))
    errors = [str(e) for e in validate_bundle(out).errors]
    assert any("NodeSet mig: the slurmd pod asks for nvidia.com/gpu=56 but its Gres=gpu:1g.10gb:56 needs "
               "nvidia.com/mig-1g.10gb=56" in e for e in errors), errors
    values.write_text(text.replace("Gres: gpu:1g.10gb:56", "Gres: gpu:h100_1g.10gb:56"))
    errors = [str(e) for e in validate_bundle(out).errors]
    assert any("NodeSet mig: Gres=gpu:h100_1g.10gb:56 but plan.json's GPUs make it gpu:1g.10gb:56" in e
               for e in errors), errors
    values.write_text(text.replace("AutoDetect=nvml", "AutoDetect=off"))
    errors = [str(e) for e in validate_bundle(out).errors]
    assert any("configFiles gres.conf gives mig-[0-3] none, but NodeSet mig says Gres=gpu:1g.10gb:56" in e
               for e in errors), errors


def test_validate_mig_on_bare_metal_and_in_quotas(tmp_path):
    from generator import bundle
    from generator.validate.bundle_checks import validate_bundle

    doc = fleet_doc([MIG_POOL, {**MIG_POOL, "name": "kmig", "nodes": 4}], slurm={"controllers": ["ctl"]},
                    workloads=[{"name": "train", "nodes": 2, "tightly_coupled": True, "pool": "mig"},
                               {"name": "api", "long_lived_services": True, "bare_metal": False, "pool": "kmig",
                                "multi_tenant": True}])
    plan = plan_of(tmp_path, doc)
    out = tmp_path / "b"
    bundle.write(render(plan), out)
    assert not validate_bundle(out).errors, validate_bundle(out).errors
    gres = out / "slurm/gres.conf"
    gres.write_text(gres.read_text().replace("AutoDetect=nvml", "AutoDetect=off"))
    errors = [str(e) for e in validate_bundle(out).errors]
    assert any(e.startswith("slurm/gres.conf:") and "pool mig runs MIG (gpu:1g.10gb:56) but its nodes have "
               "AutoDetect=off" in e for e in errors), errors
    gres.write_text(gres.read_text().replace("AutoDetect=off", "AutoDetect=nvml"))
    conf = out / "slurm/slurm.conf"
    conf.write_text(conf.read_text().replace("Gres=gpu:1g.10gb:56", "Gres=gpu:h100:8"))
    errors = [str(e) for e in validate_bundle(out).errors]
    assert any(e.startswith("slurm/slurm.conf:") and "pool mig: Gres=gpu:h100:8 but plan.json's GPUs make it "
               "gpu:1g.10gb:56 (MIG)" in e for e in errors), errors
    conf.write_text(conf.read_text().replace("Gres=gpu:h100:8", "Gres=gpu:1g.10gb:56"))
    quotas = out / "kubernetes/manifests/10-quotas.yaml"
    quotas.write_text(quotas.read_text().replace("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"))
    errors = [str(e) for e in validate_bundle(out).errors]
    assert any(e.startswith("kubernetes/manifests/10-quotas.yaml:") and "nvidia.com/mig-2g.20gb is no pool's MIG "
               "resource (nvidia.com/mig-1g.10gb)" in e for e in errors), errors


@pytest.mark.parametrize("variant", ["slinky", "soperator", "kueue", "volcano", "kai"])
def test_mig_bundles_pass_crds_chart_defaults_and_builtin_schemas(tmp_path, variant):
    """The MIG side of every plane, through `orchgen validate` with the upstream CRDs and chart
    defaults (custom resources, Helm values keys, built-in objects by kubernetes-validate)."""
    from generator import bundle
    from generator.validate.bundle_checks import load_crds, validate_bundle
    from tests._consumers import reference_dir

    ref = reference_dir()
    pools = [MIG_POOL, {"name": "l40s", "nodes": 4, "gpu": {"type": "l40s", "count": 4}}]
    workloads = [{"name": "api", "long_lived_services": True, "multi_tenant": True, "bare_metal": False,
                  "pool": "mig", "gpus": 1, "tenant": "a"},
                 {"name": "train", "nodes": 2, "tightly_coupled": True, "multi_tenant": True, "bare_metal": False,
                  "pool": "l40s", "tenant": "b"}]
    if variant in ("slinky", "soperator"):
        doc = fleet_doc(pools, slurm_on_kubernetes=variant, workloads=[
            {"name": "train", "nodes": 2, "tightly_coupled": True, "pool": "mig", "tenant": "a"},
            {"name": "api", "long_lived_services": True, "pool": "l40s", "tenant": "b"}])
        doc["fleet"]["bare_metal"] = False
    else:
        doc = fleet_doc(pools, workloads=workloads, gang_scheduler=variant)
    doc["tenants"] = [{"name": "a", "share": 2}, {"name": "b", "share": 1}]
    plan = plan_of(tmp_path, doc)
    out = tmp_path / "b"
    bundle.write(render(plan), out)
    text = "\n".join(p.read_text() for p in out.rglob("*.yaml"))
    assert "nvidia.com/mig-1g.10gb" in text
    report = validate_bundle(out, load_crds(ref), ref)
    assert not report.errors, "\n".join(map(str, report.errors))
