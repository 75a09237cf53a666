"""`orchgen discover`'s reading of what a host prints (generator/discover.py), in-process: `nvidia-smi topo -m`
as drivers print it (the recordings of tests/data/topo/, each with its public source in its header), and
`slurmd -C`; and the drift lines they give against a DGX H100 pool's model. The real hosts' run is
tests/test_discover_real.py; a real slurmd -C's line through the same parser is tests/test_platforms_real.py.
"""
from __future__ import annotations

import random
import re

import pytest
import yaml

from generator.decide import make_plan
from generator.discover import drift, parse, parse_topo
from generator.spec import load_located, platforms
from tests import fake_gpu

SAMPLES = ["dgx-h100.mooncake-2039", "hgx-h100.nccl-1264", "gb200.sglang-11208", "a800.nccl-933",
           "dgx2.nccl-tests-78"]
DGX = fake_gpu.recorded_topo("dgx-h100.mooncake-2039")
# slurmd -C on a DGX H100 (2x Xeon 8480C, 2 TB): the line tests/test_bad_input.py's DGX_C holds
DGX_C = ("NodeName=dgx-001 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 "
         "RealMemory=2063937")


def topo(text: str) -> dict:
    return parse_topo(text.splitlines())


def test_every_recorded_layout_is_read():
    """Spaces or tabs, with or without GPU NUMA ID, NUMA Affinity as a list, NIC columns named by a legend or
    by the device: each sample's GPUs, NUMA nodes and the NIC each GPU is PIX to, as the recording shows."""
    got = {name: topo(fake_gpu.recorded_topo(name)) for name in SAMPLES}
    dgx = got["dgx-h100.mooncake-2039"]
    assert dgx["named"] and dgx["notes"] == []
    assert [g["numa"] for g in dgx["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    # each GPU's PIX compute HCA: the DGX H100 User Guide's pairing (generator/spec/platforms.py _DGX_H_COMPUTE)
    pix = [sorted(d for d, link in g["nics"].items() if link == "PIX") for g in dgx["gpus"]]
    assert pix == [["mlx5_0", "mlx5_1", "mlx5_2"], ["mlx5_3"], ["mlx5_4"], ["mlx5_5"],
                   ["mlx5_6", "mlx5_7", "mlx5_8"], ["mlx5_9"], ["mlx5_10"], ["mlx5_11"]]
    assert dgx["gpus"][4]["cpu_affinity"] == "1,3,5,7,9,11" and dgx["gpus"][4]["gpu_numa_id"] is None

    hgx = got["hgx-h100.nccl-1264"]  # tabs; no legend in the copy held
    assert not hgx["named"] and hgx["notes"] == ["no NIC Legend: the NIC columns are not named by device"]
    assert [(g["numa"], g["cpu_affinity"]) for g in hgx["gpus"]] == [(0, "0-55,112-167")] * 4 + [
        (1, "56-111,168-223")] * 4
    assert [next(n for n, link in g["nics"].items() if link == "PIX") for g in hgx["gpus"]] == \
        ["NIC0", "NIC1", "NIC2", "NIC5", "NIC6", "NIC7", "NIC8", "NIC9"]

    gb = got["gb200.sglang-11208"]  # NUMA Affinity a list, GPU NUMA ID a number, every GPU-NIC cell SYS
    assert [(g["index"], g["numa"], g["gpu_numa_id"]) for g in gb["gpus"]] == [(0, 0, 2), (1, 0, 10), (2, 1, 18)]
    assert set(gb["gpus"][0]["nics"].values()) == {"SYS"}

    a800 = got["a800.nccl-933"]  # no GPU NUMA ID column
    assert [g["numa"] for g in a800["gpus"]] == [0, 0, 0, 0, 1, 1, 1]
    assert all(g["gpu_numa_id"] is None for g in a800["gpus"]) and a800["gpus"][0]["nics"]["NIC2"] == "PIX"

    old = got["dgx2.nccl-tests-78"]  # NIC columns named by device; only CPU Affinity
    assert old["named"] and [g["numa"] for g in old["gpus"]] == [None] * 4
    assert old["gpus"][2]["nics"]["mlx5_1"] == "PIX" and old["gpus"][0]["cpu_affinity"] == "0-23,48-71"
    assert len(old["gpus"][0]["nics"]) == 10


def test_what_is_not_a_matrix_is_noted():
    assert parse_topo([]) is None and parse_topo(["", "  "]) is None
    failed = topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    assert failed["gpus"] == [] and failed["notes"][0].startswith("no GPU matrix: NVIDIA-SMI has failed")
    # a line before the matrix (nvidia-smi on a host with more NICs than it shows) is kept as a note
    many = topo("76 NICs found in the topology, only displaying 56 in the matrix.\n" + DGX)
    assert many["notes"] == ["76 NICs found in the topology, only displaying 56 in the matrix."]
    assert len(many["gpus"]) == 8
    # a row whose cells ran together (a copy's glitch: "PIXNODE") is left out, the others read
    glued = topo(DGX.replace("PIX     NODE    NODE    SYS     SYS     SYS     SYS     SYS     SYS     4,6",
                             "PIXNODE    NODE    SYS     SYS     SYS     SYS     SYS     SYS     4,6", 1))
    assert [g["index"] for g in glued["gpus"]] == [0, 2, 3, 4, 5, 6, 7]
    assert glued["notes"] == ["row GPU1: not 20 link cells; left out"]


@pytest.mark.parametrize("seed", range(3))
def test_hostile_output_is_bounded_and_printable(seed):
    rnd = random.Random(seed)
    junk = [
        "".join(chr(rnd.randrange(0, 0x3000)) for _ in range(rnd.randrange(0, 3000))) for _ in range(40)]
    cases = [
        junk,
        ["        GPU0 " + " ".join(f"NIC{i}" for i in range(20000)) + " CPU Affinity", "GPU0 X " + "PIX " * 20000],
        ["\x1b]0;owned\x07        GPU0    NIC0    CPU Affinity", "GPU0     X      PIX     0-3\x1b[2J",
         "NIC Legend:", "  NIC0: \x1b[31mmlx5_0", "  NIC0: mlx5_0"],
        DGX.splitlines() * 40,
        ["        GPU0    GPU0    NIC0", "GPU0 X X PIX", "GPU0 X X SYS", "GPU99999999999 X X PIX"],
        [rnd.choice(["GPU0", "NIC Legend:", "Legend:", "\t", "X", "NV18", "  NIC0: mlx5_0", "GPU1 X"]) * rnd.randrange(
            1, 50) for _ in range(2000)],
    ]
    for lines in cases:
        got = parse_topo(lines)
        if got is None:
            continue
        text = repr(got)
        assert len(yaml.safe_dump(got)) < 4_000_000 and len(got["notes"]) <= 16
        assert all(n.isprintable() and len(n) < 200 for n in got["notes"]), got["notes"]
        for g in got["gpus"]:
            assert all(k.isprintable() and len(k) <= 80 for k in g["nics"])
            assert g["cpu_affinity"] is None or g["cpu_affinity"].isprintable()
        assert "\x1b" not in text


@pytest.fixture(scope="module")
def dgx_plan(tmp_path_factory):
    d = tmp_path_factory.mktemp("dgx")
    src = d / "dgx.yaml"
    src.write_text(yaml.safe_dump({
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "dgxd"},
        "fleet": {"bare_metal": True, "slurm": {"controllers": ["head01"]},
                  "fabric": {"kind": "infiniband", "nodes_per_leaf": 2},
                  "pools": [{"name": "dgx", "nodes": 2, "platform": "dgx-h100"}]},
        "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}]}, sort_keys=False))
    fleet, _ = load_located(src)
    return make_plan(fleet, src), None


def _facts(topo_text: str = DGX, numa: str = "", slurmd: str = "") -> dict:
    return parse(f"@@ slurmd\n{slurmd}\n@@ lscpu\n@@ gpus\n@@ fabric\n@@ rdma\n@@ topo\n{topo_text}\n"
                 f"@@ numa\n{numa}\n@@ end\n")


def _lines(plan, facts: dict, key: str) -> list[str]:
    from generator.render.slurm.model import model

    node = model(plan).groups[0].nodes[0]
    return [ln.split(": ", 1)[1] for ln in drift(plan, {node: facts}) if key in ln]


def test_the_recorded_dgx_h100_matches_its_platform(dgx_plan):
    plan, _ = dgx_plan
    assert _lines(plan, _facts(), "topo -m") == []


def test_swapped_rails_and_a_gpu_on_the_other_socket_are_reported(dgx_plan):
    plan, _ = dgx_plan
    swapped = fake_gpu.swap_nics(DGX, "mlx5_0", "mlx5_3")
    assert _lines(plan, _facts(swapped), "topo -m") == [
        "compute rail mlx5_0:1 is NODE to GPU 0, not PIX/PXB; it sits beside GPU 1 (nvidia-smi topo -m): the model "
        "pairs it with GPU 0 (pool dgx)",
        "compute rail mlx5_3:1 is NODE to GPU 1, not PIX/PXB; it sits beside GPU 0 (nvidia-smi topo -m): the model "
        "pairs it with GPU 1 (pool dgx)"]
    # a rail's NIC across the socket: SYS, beside no GPU of the pairing
    gone = re.sub(r"(?m)^(\s*NIC11: )mlx5_11$", r"\1mlx5_99", DGX)
    assert _lines(plan, _facts(gone), "topo -m") == ["compute rail mlx5_11:1 is not in nvidia-smi topo -m (pool dgx)"]
    # GPU 4 on NUMA node 0 (the DGX H100 has it on socket 1): gres.conf's Cores= for it are the wrong socket's
    moved = DGX.replace("1,3,5,7,9,11     1  ", "1,3,5,7,9,11     0  ", 1)
    assert _lines(plan, _facts(moved, numa="0|0\n1|1"), "topo -m") == [
        "nvidia-smi topo -m puts GPU 4 on socket 0 (NUMA node 0), not 1: gres.conf's Cores= bind those GPUs to "
        "the other "
        "socket's cores (pool dgx)"]


def test_numa_nodes_are_mapped_to_their_sockets(dgx_plan):
    """Two NUMA nodes per socket (Intel SNC2, AMD NPS2): GPUs 4-7 on nodes 2 and 3, both on socket 1."""
    plan, _ = dgx_plan
    snc = DGX
    for gpu, node in ((2, 1), (3, 1), (4, 2), (5, 2), (6, 3), (7, 3)):
        snc = re.sub(rf"(?m)^(GPU{gpu} .*?\S+\s+)\d(\s+N/A)$", rf"\g<1>{node}\2", snc)
    assert [g["numa"] for g in topo(snc)["gpus"]] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert _lines(plan, _facts(snc, numa="0|0\n1|0\n2|1\n3|1"), "topo -m") == []
    # without the host's node -> socket map no socket is guessed from a NUMA number (nodes 1-3 would read as
    # sockets 1-3 here): nothing is reported, as the map that places only nodes 0 and 1 reports nothing of 2, 3
    assert _lines(plan, _facts(snc), "topo -m") == []
    assert _lines(plan, _facts(snc, numa="0|0\n1|1"), "topo -m") == [
        "nvidia-smi topo -m puts GPU 2 on socket 1 (NUMA node 1), not 0; GPU 3 on socket 1 (NUMA node 1), not 0: "
        "gres.conf's Cores= bind those GPUs to the other socket's cores (pool dgx)"]
    # with a map, a GPU off its socket names both
    assert _lines(plan, _facts(snc, numa="0|0\n1|0\n2|0\n3|1"), "topo -m") == [
        "nvidia-smi topo -m puts GPU 4 on socket 0 (NUMA node 2), not 1; GPU 5 on socket 0 (NUMA node 2), not 1: "
        "gres.conf's Cores= bind those GPUs to the other socket's cores (pool dgx)"]


def test_unnamed_nic_columns_check_no_rail(dgx_plan):
    plan, _ = dgx_plan
    assert _lines(plan, _facts(fake_gpu.recorded_topo("hgx-h100.nccl-1264")), "topo -m") == []


def test_slurmd_c_is_held_to_the_node_line(dgx_plan):
    """slurmd -C's CPUs and RealMemory against the NodeName line the bundle wrote: the DGX H100's own line
    agrees; a node with half the memory would be drained; one with SMT off has the CPUs of half the threads."""
    plan, _ = dgx_plan
    facts = _facts(slurmd=DGX_C)
    assert (facts["cpus"], facts["real_memory_mib"]) == (224, 2063937)
    assert _lines(plan, facts, "slurmd -C") == [] and _lines(plan, facts, "CPU") == []
    half = _facts(slurmd=DGX_C.replace("RealMemory=2063937", "RealMemory=1031937"))
    assert _lines(plan, half, "slurmd -C") == [
        "slurmd -C says RealMemory=1031937 MiB, below slurm.conf's RealMemory=1991680: slurmctld drains the node "
        "(Low RealMemory; pool dgx)"]
    smt_off = _facts(slurmd=DGX_C.replace("CPUs=224", "CPUs=112").replace("ThreadsPerCore=2", "ThreadsPerCore=1"))
    assert _lines(plan, smt_off, "CPU") == [
        "CPU 2x56x1 (sockets x cores x threads), the model has 2x56x2 (pool dgx)",
        "slurmd -C says CPUs=112, slurm.conf has CPUs=224 (pool dgx)"]


def test_plan_takes_the_gpus_sockets_from_the_facts(tmp_path, orchgen):
    """A pool with `facts:` and no gpu.sockets (none given, or a platform that leaves them to the buyer) takes each
    GPU's socket from its hosts' `nvidia-smi topo -m`, so gres.conf gets Cores= per GPU and the plan guesses nothing
    of it; hosts that disagree are refused with the line of `facts`."""
    host = _facts(numa="0|0\n1|1")
    moved = _facts(DGX.replace("1,3,5,7,9,11     1  ", "1,3,5,7,9,11     0  ", 1), numa="0|0\n1|1")

    def plan_with(pool: dict, second: dict, name: str):
        d = tmp_path / name
        d.mkdir()
        (d / "facts.yaml").write_text(yaml.safe_dump({"apiVersion": "orchgen/v1alpha1", "kind": "Facts",
                                                      "hosts": {"h01": host, "h02": second}}))
        src = d / "f.yaml"
        src.write_text(yaml.safe_dump({
            "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": name},
            "fleet": {"bare_metal": True, "slurm": {"controllers": ["head01"]},
                      "fabric": {"kind": "ethernet", "nodes_per_leaf": 2},
                      "pools": [{"name": "h", "nodes": 2, "hostnames": "h[01-02]", "facts": "facts.yaml", **pool}]},
            "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}]}, sort_keys=False))
        return src, d / "out", orchgen("plan", src, "-o", d / "out")

    for name, pool in (("own", {"gpu": {"type": "h100", "count": 8},
                                "cpu": {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2}}),
                       ("oem", {"platform": "dell-xe9680-h100", "memory_gib": 2048,
                                "cpu": {"sockets": 2, "cores_per_socket": 48, "threads_per_core": 2}})):
        src, out, proc = plan_with(pool, host, name)
        assert proc.returncode == 0 and "sockets" not in proc.stderr and "affinity" not in proc.stderr, proc.stderr
        cores = 56 if name == "own" else 48
        gres = [ln for ln in (out / "slurm/gres.conf").read_text().splitlines() if ln.startswith("NodeName=")]
        assert [ln.split("File=", 1)[1] for ln in gres] == [f"/dev/nvidia[0-3] Cores=0-{cores - 1}",
                                                            f"/dev/nvidia[4-7] Cores={cores}-{2 * cores - 1}"], gres
    # hosts whose NUMA-to-socket map lacks the GPUs' NUMA nodes tell no sockets (several NUMA nodes may share one
    # socket): nothing guessed, no Cores=, and the plan still says it guesses the affinity
    host = _facts(numa="")
    src, out, proc = plan_with({"gpu": {"type": "h100", "count": 8},
                                "cpu": {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2}}, host, "no-map")
    assert proc.returncode == 0 and "affinity" in proc.stderr, proc.stderr
    assert [ln.split("File=", 1)[1] for ln in (out / "slurm/gres.conf").read_text().splitlines()
            if ln.startswith("NodeName=")] == ["/dev/nvidia[0-7]"]
    host = _facts(numa="0|0\n1|1")
    src, out, proc = plan_with({"gpu": {"type": "h100", "count": 8}}, moved, "differ")
    assert proc.returncode == 2 and not out.exists() and proc.stderr.count("\n") == 1, proc.stderr
    assert re.match(rf"orchgen: {re.escape(str(src))}:\d+: fleet\.pools\[0\]\.facts: hosts h01 and h02 have their "
                    r"GPUs on different sockets \(\[0, 0, 0, 0, 1, 1, 1, 1\] and \[0, 0, 0, 0, 0, 1, 1, 1\]", proc.stderr)


def test_a_platforms_storage_ports_are_held_only_to_being_there(dgx_plan):
    """A DGX H100's compute rails must be Active at 400 Gb/s; its four storage / in-band ports are cabled as the
    site chooses (BasePOD: port 2 of each storage card bonded Ethernet, the InfiniBand storage port 1 optional), so a
    port down or at an Ethernet rate is no drift, an adapter missing is."""
    plan, _ = dgx_plan

    def rdma(*, skip=(), **ports) -> dict:
        lines = []
        for n in platforms.PLATFORMS["dgx-h100"].nics:
            if n.device in skip:
                continue
            state, rate, layer = ports.get(n.device, ("4: ACTIVE|5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand"))
            lines.append(f"{n.device}|1|{state}|{rate}|{layer}|")
        return parse("@@ rdma\n" + "\n".join(lines) + "\n@@ end\n")

    assert _lines(plan, rdma(), "rail") == []
    unused = rdma(mlx5_1=("1: DOWN|3: Disabled", "400 Gb/sec (4X NDR)", "InfiniBand"),
                  mlx5_2=("4: ACTIVE|5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet"))
    assert _lines(plan, unused, "rail") == []
    assert _lines(plan, rdma(skip=("mlx5_7",), mlx5_3=("4: ACTIVE|5: LinkUp", "200 Gb/sec (2X NDR)", "InfiniBand")),
                  "rail") == ["compute rail mlx5_3:1 at 200 Gb/s, the model has 400", "storage rail mlx5_7:1 missing (pool dgx)"]
