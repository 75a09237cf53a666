"""`orchgen discover` against real hosts: bare Debian 12 hosts of the bring-up harness (tests/bringupharness:
sshd on 127.0.0.N, reached over SSH with the operator's inventory as the bring-up is), no Slurm.

Each host answers with its real lscpu (the machine's CPU, which the fleet below declares), tests/fake_gpu.py's
nvidia-smi (GB200 GPUs with their NVLink "Fabric" block) and an RDMA tree in sysfs laid out as the kernel's
/sys/class/infiniband (ports/N/state "4: ACTIVE", phys_state "5: LinkUp", rate "400 Gb/sec (4X NDR)",
link_layer, device/net/<netdev>/dev_port; Documentation/ABI/stable/sysfs-class-infiniband), mounted over
the host's own /sys/class in its mount namespace. `nvidia-smi topo -m` answers with a recorded DGX H100 matrix
(tests/data/topo/dgx-h100.mooncake-2039.txt, its source in its header): the pool's rails are two of its compute
HCAs, mlx5_0 beside GPU 0 and mlx5_4 beside GPU 2, as the DGX H100 User Guide pairs them. Deliberate
differences: gb200-002 has a GPU fewer and its rails' NICs swapped (mlx5_0 beside GPU 2, mlx5_4 beside GPU 0),
gb200-003 a compute rail down and GPUs in another NVLink clique than the rest of their domain, gb200-004
does not answer. discover writes every host's facts and reports those differences, and only those.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import fake_gpu
from tests._consumers import require
from tests.bringupharness.hosts import Hosts
from tests.support import run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.chroot]

NICS = [{"device": "mlx5_0", "netdev": "ibp24s0", "rate_gbps": 400, "gpu": 0},
        {"device": "mlx5_4", "netdev": "ibp79s0", "rate_gbps": 400, "gpu": 2},
        {"device": "mlx5_2", "netdev": "enp3s0f0np0", "rate_gbps": 200, "role": "storage"}]
TOPO = fake_gpu.recorded_topo("dgx-h100.mooncake-2039")


def _sysfs(down: str | None = None) -> str:
    """sh that mounts an RDMA tree over /sys/class (in the host's own mount namespace): NICS's ports."""
    lines = ["set -e", "mount -t tmpfs tmpfs /sys/class", "cd /sys/class"]
    for n in NICS:
        port = f"infiniband/{n['device']}/ports/1"
        up = n["device"] != down
        ib = n.get("role") != "storage"
        lines += [f"mkdir -p {port} infiniband/{n['device']}/device/net/{n['netdev']}",
                  f"echo '{'4: ACTIVE' if up else '1: DOWN'}' > {port}/state",
                  f"echo '{'5: LinkUp' if up else '2: Polling'}' > {port}/phys_state",
                  f"echo '{n['rate_gbps']} Gb/sec ({'4X NDR' if n['rate_gbps'] == 400 else '2X NDR'})' > {port}/rate",
                  f"echo '{'InfiniBand' if ib else 'Ethernet'}' > {port}/link_layer",
                  f"echo 0 > infiniband/{n['device']}/device/net/{n['netdev']}/dev_port"]
    return "\n".join(lines)


def _local_cpu() -> dict:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}).stdout
    kv = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in out.splitlines())}
    return {"sockets": int(kv["Socket(s)"]), "cores_per_socket": int(kv["Core(s) per socket"]),
            "threads_per_core": int(kv["Thread(s) per core"])}


def test_discover_writes_the_facts_and_reports_the_differences(tmp_path):
    require(os.geteuid() == 0, "needs root (debootstrap, overlay mounts, namespaces)")
    require(shutil.which("debootstrap"), "debootstrap not installed (scripts/test.sh installs it)")
    require(shutil.which("ssh"), "openssh-client not installed")
    cpu = _local_cpu()
    fleet = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "discover-lab"},
             "fleet": {"bare_metal": True, "slurm": {"controllers": ["ctl1"]},
                       "fabric": {"kind": "infiniband", "nodes_per_leaf": 4},
                       "pools": [{"name": "gb200", "nodes": 4, "cpu": cpu, "memory_gib": 8,
                                  "gpu": {"type": "gb200", "count": 4, "sockets": [0, 0, 0, 0]},
                                  "nvlink_domain_nodes": 4, "nics": NICS}]},
             "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
             "options": {"slurm_version": "22.05"}}
    src = tmp_path / "discover-lab.yaml"
    src.write_text(yaml.safe_dump(fleet, sort_keys=False))
    fabric = fake_gpu.FABRIC
    with Hosts("bookworm", tmp_path / "hosts", next_octet=210) as hosts:
        swapped = fake_gpu.swap_nics(TOPO, "mlx5_0", "mlx5_4")
        for name, count, clique, down, topo in [("gb200-001", 4, None, None, TOPO),
                                                ("gb200-002", 3, None, None, swapped),
                                                ("gb200-003", 4, "7", "mlx5_4", TOPO)]:
            host = hosts.add(name)
            hosts.boot(host)
            smi = fake_gpu.nvidia_smi(count=count, name="NVIDIA GB200", topo=topo,
                                      fabric={**fabric, "fabric.clique_id": clique} if clique else fabric)
            (host.root / "usr/bin/nvidia-smi").write_text(smi)
            (host.root / "usr/bin/nvidia-smi").chmod(0o755)
            hosts.ssh(name, _sysfs(down))
        hosts.add("gb200-004")  # in the inventory, never booted: nothing listens on its address
        inventory = hosts.inventory(tmp_path / "hosts.yaml")
        facts_path = tmp_path / "facts.yaml"
        run = run_cli(["discover", src, inventory, "-o", facts_path, "--timeout", "30"], capture_output=True,
                      text=True, timeout=180)
        assert run.returncode == 1, (run.stdout, run.stderr)
        uuid = fabric["fabric.cluster_uuid"]
        drift = [ln for ln in run.stdout.splitlines() if ln.startswith("drift: ")]
        assert drift[:5] == [
            "drift: gb200-002: 3 GPUs, the model has 4 (pool gb200)",
            "drift: gb200-002: compute rail mlx5_0:1 is NODE to GPU 0, not PIX/PXB; it sits beside GPU 2 "
            "(nvidia-smi topo -m): the model pairs it with GPU 0 (pool gb200)",
            "drift: gb200-002: compute rail mlx5_4:1 is NODE to GPU 2, not PIX/PXB; it sits beside GPU 0 "
            "(nvidia-smi topo -m): the model pairs it with GPU 2 (pool gb200)",
            "drift: gb200-003: compute rail mlx5_4:1 is DOWN/Polling, not ACTIVE/LinkUp",
        ] + [drift[4]] and drift[4].startswith("drift: gb200-004: not read: ssh exit 255: "), drift
        assert drift[5:] == [f"drift: gb200-003: NVLink clique {uuid}/7, not the one of the rest of domain "
                             f"nvl001 (2 nodes)"], drift
        assert run.stdout.splitlines()[-1] == \
            f"discover-lab: read 3 of 4 hosts; 6 differences from the model; facts in {facts_path}"
        # no secret, no key path in what it prints
        assert str(hosts.key) not in run.stdout + run.stderr and "PRIVATE KEY" not in run.stdout

        facts = yaml.safe_load(facts_path.read_text())
        assert facts["kind"] == "Facts" and sorted(facts["hosts"]) == [f"gb200-00{i}" for i in range(1, 5)]
        one = facts["hosts"]["gb200-001"]
        assert one["cpu"] == cpu and "slurmd_c" not in one  # lscpu: no slurmd on these hosts
        assert [g["name"] for g in one["gpus"]] == ["NVIDIA GB200"] * 4
        assert one["gpus"][0] == {"index": 0, "name": "NVIDIA GB200", "bus": "00000000:18:00.0",
                                  "fabric": {"state": "Completed", "status": "Success", "clique_id": "32766",
                                             "cluster_uuid": uuid}}
        assert one["nics"] == [
            {"device": "mlx5_0", "port": 1, "netdev": "ibp24s0", "rate_gbps": 400, "state": "ACTIVE",
             "phys_state": "LinkUp", "link_layer": "InfiniBand"},
            {"device": "mlx5_2", "port": 1, "netdev": "enp3s0f0np0", "rate_gbps": 200, "state": "ACTIVE",
             "phys_state": "LinkUp", "link_layer": "Ethernet"},
            {"device": "mlx5_4", "port": 1, "netdev": "ibp79s0", "rate_gbps": 400, "state": "ACTIVE",
             "phys_state": "LinkUp", "link_layer": "InfiniBand"}]
        # nvidia-smi topo -m as recorded: eight GPUs (the fake's GPU count is the query's), twelve NICs named
        # by the NIC Legend, GPU 0 on NUMA node 0 beside mlx5_0 (and the storage ports mlx5_1, mlx5_2)
        topo = one["topo"]
        assert topo["named"] is True and topo["notes"] == [] and [g["index"] for g in topo["gpus"]] == list(range(8))
        assert topo["gpus"][0] == {
            "index": 0, "numa": 0, "cpu_affinity": "4,6,8,10,12", "gpu_numa_id": None,
            "nics": {f"mlx5_{i}": link for i, link in enumerate(["PIX"] * 3 + ["NODE"] * 3 + ["SYS"] * 6)}}
        assert [g["numa"] for g in topo["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
        assert facts["hosts"]["gb200-002"]["topo"]["gpus"][2]["nics"]["mlx5_0"] == "PIX"
        assert len(facts["hosts"]["gb200-002"]["gpus"]) == 3
        assert facts["hosts"]["gb200-003"]["nics"][2]["state"] == "DOWN"
        assert set(facts["hosts"]["gb200-004"]) == {"error"}
        assert facts["drift"] == [ln[len("drift: "):] for ln in drift]

        # repaired: the rail back up, the GPU back, its NICs in place, the clique right, the dead host out of the
        # model and the inventory: no difference, exit 0
        hosts.ssh("gb200-003", "umount /sys/class")
        hosts.ssh("gb200-003", _sysfs())
        (hosts.hosts["gb200-003"].root / "usr/bin/nvidia-smi").write_text(
            fake_gpu.nvidia_smi(count=4, name="NVIDIA GB200", fabric=fabric, topo=TOPO))
        (hosts.hosts["gb200-002"].root / "usr/bin/nvidia-smi").write_text(
            fake_gpu.nvidia_smi(count=4, name="NVIDIA GB200", fabric=fabric, topo=TOPO))
        del hosts.hosts["gb200-004"]
        fleet["fleet"]["pools"][0].update(nodes=3, nvlink_domain_nodes=3)
        src.write_text(yaml.safe_dump(fleet, sort_keys=False))
        inventory = hosts.inventory(tmp_path / "hosts.yaml")
        ok = run_cli(["discover", src, inventory, "-o", facts_path, "--format", "json"], capture_output=True,
                     text=True, timeout=180)
        assert ok.returncode == 0, (ok.stdout, ok.stderr)
        assert json.loads(ok.stdout) == {"fleet": "discover-lab", "facts": str(facts_path), "hosts": 3,
                                         "unread": [], "drift": []}

    # plan reads them: a pool that gives no CPU layout and no nics takes the hosts' (pool.facts)
    pool = fleet["fleet"]["pools"][0]
    del pool["cpu"], pool["nics"]
    pool["facts"] = "facts.yaml"
    src.write_text(yaml.safe_dump(fleet, sort_keys=False))
    out = tmp_path / "bundle"
    planned = run_cli(["plan", src, "-o", out], capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0, planned.stderr
    conf = (out / "slurm/slurm.conf").read_text()
    assert (f"Sockets={cpu['sockets']} CoresPerSocket={cpu['cores_per_socket']} "
            f"ThreadsPerCore={cpu['threads_per_core']}") in conf, conf
    nhc = (out / "slurm/nhc.conf").read_text()
    assert "check_hw_ib 400 mlx5_0:1" in nhc and "check_hw_ib 400 mlx5_4:1" in nhc and "mlx5_2" not in nhc, nhc
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_4:1" in (out / "slurm/nccl.env").read_text()
    # a facts file outside the folder of workload.yaml is refused, with the line of `facts`
    pool["facts"] = "../elsewhere/facts.yaml"
    src.write_text(yaml.safe_dump(fleet, sort_keys=False))
    refused = run_cli(["plan", src, "-o", tmp_path / "refused"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "fleet.pools[0].facts" in refused.stderr and \
        f"{src}:" in refused.stderr, refused.stderr
    assert not (tmp_path / "refused").exists()


def test_discover_refuses_a_bad_inventory(tmp_path):
    src = tmp_path / "f.yaml"
    src.write_text(yaml.safe_dump({
        "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "d"},
        "fleet": {"bare_metal": True, "slurm": {"controllers": ["ctl1"]}, "fabric": {"kind": "infiniband"},
                  "pools": [{"name": "h100", "nodes": 2, "gpu": {"type": "h100", "count": 8}}]},
        "workloads": [{"name": "t", "nodes": 2, "tightly_coupled": True}]}, sort_keys=False))
    for text, want in [("all:\n  hosts:\n    n1: {ansible_host: '-oProxyCommand=x'}\n", "hosts.n1.ansible_host"),
                       ("all:\n  hosts:\n    n1: {ansible_port: 99999}\n", "hosts.n1.ansible_port"),
                       ("- a list\n", "all"), ("all: [\n", "not YAML")]:
        inv = tmp_path / "hosts.yaml"
        inv.write_text(text)
        out = tmp_path / "facts.yaml"
        run = run_cli(["discover", src, inv, "-o", out], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and want in run.stderr, (text, run.stderr)
        assert str(inv) in run.stderr and "Traceback" not in run.stderr and not out.exists()
