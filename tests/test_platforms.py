"""Platform profiles (issue 35): the catalog (generator/spec/platforms.py), a pool that names one,
and the Slurm files its facts make (the real slurmctld/slurmd read them in test_platforms_real.py):

* every record names its source and holds together (a socket per GPU, unique ports, rails);
* `platform: dgx-h100` gives the NodeName line the DGX's real layout (the `slurmd -C` a DGX H100
  prints), gres.conf a Cores= per GPU, nhc.conf eight `check_hw_ib 400 mlx5_N:1`, nccl.env the eight
  compute HCAs exactly, and checks.json a bus-bandwidth floor of 80% of the rails, with its source;
* a pool's own `nics` do the same for any machine; RoCE gets NCCL_IB_TC/SL from fleet.fabric;
* an unknown platform, a fact that contradicts one, or a RoCE key on InfiniBand: one line, exit 2,
  file:line:field, nothing written;
* a GPU pool of a bare-metal Slurm plane whose nodes nobody describes: a warning saying what is guessed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from generator.spec import platforms
from generator.spec.hardware import parse_slurmd_c

# the line `slurmd -C` prints on a DGX H100 (tests/test_hardware.py SHAPES)
DGX_C = "NodeName=dgx001 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2063937"
STORAGE = ("mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8")


def doc(pool: dict, kind: str = "infiniband", fabric: dict | None = None, **options) -> dict:
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "plat"},
            "fleet": {"bare_metal": True, "slurm": {"controllers": ["head01"]},
                      "fabric": {"kind": kind, "nodes_per_leaf": 2, **(fabric or {})},
                      "pools": [{"name": "gpu", "nodes": 2, **pool}]},
            "workloads": [{"name": "train", "nodes": 2, "tightly_coupled": True}],
            "options": {"slurm_version": "24.11", **options}}


def plan(tmp_path: Path, orchgen, d: dict) -> tuple[Path, object]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "plat.yaml"
    src.write_text(yaml.safe_dump(d, sort_keys=False))
    out = tmp_path / "out"
    proc = orchgen("plan", src, "-o", out)
    return out, proc


def active(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


# ------------------------------------------------------------------ the catalog


@pytest.mark.parametrize("name", sorted(platforms.PLATFORMS))
def test_every_record_names_its_source_and_holds_together(name):
    p = platforms.PLATFORMS[name]
    assert p.name == name and p.source and p.title
    assert len(p.gpu_sockets) == p.gpu_count and all(0 <= s < p.sockets for s in p.gpu_sockets)
    assert set(p.guessed) <= {"cpu", "memory", "gpu_sockets"}
    if p.nics is not None:
        hcas = [n.hca for n in p.nics]
        assert len(hcas) == len(set(hcas)) and p.compute
        assert all(n.gpu is None or n.gpu < p.gpu_count for n in p.nics)


def test_the_issue_platforms_are_there():
    want = {"dgx-h100", "dgx-h200", "dgx-b200", "dell-xe9680-h100", "supermicro-sys-821ge-h100", "gb200-nvl72",
            "dell-r760xa-l40s", "dell-r760xa-l4"}
    assert want <= set(platforms.PLATFORMS)
    assert platforms.PLATFORMS["gb200-nvl72"].nvlink_domain_nodes == 18
    # a DGX H100's compute rails: one per GPU, GPU i beside its own HCA (the user guide's table), storage apart
    dgx = platforms.PLATFORMS["dgx-h100"]
    assert [n.gpu for n in dgx.compute] == list(range(8)) and all(n.rate_gbps == 400 for n in dgx.compute)
    assert {n.device for n in dgx.nics if n.role == "storage"} == set(STORAGE)
    assert [n.netdev for n in dgx.compute][0] == "ibp24s0"


def test_the_dgx_profile_is_the_layout_slurmd_reports():
    c = parse_slurmd_c(DGX_C)
    dgx = platforms.PLATFORMS["dgx-h100"]
    assert (dgx.sockets, dgx.cores_per_socket, dgx.threads_per_core) == (c.sockets, c.cores_per_socket,
                                                                         c.threads_per_core)


# ------------------------------------------------------------------ Slurm from the facts


def test_dgx_h100_pool_gives_the_real_node(tmp_path, orchgen):
    out, proc = plan(tmp_path, orchgen, doc({"platform": "dgx-h100"}))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # described: nothing guessed
    conf = (out / "slurm/slurm.conf").read_text()
    node = next(ln for ln in conf.splitlines() if ln.startswith("NodeName=gpu"))
    assert "Sockets=2 CoresPerSocket=56 ThreadsPerCore=2" in node and "Gres=gpu:h100:8" in node
    gres = [ln for ln in active((out / "slurm/gres.conf").read_text()) if "Name=gpu" in ln]
    cores = {}
    for ln in gres:  # every GPU on a line with its socket's cores
        files = re.search(r"File=/dev/nvidia\[(\d+)-(\d+)\]", ln)
        for i in range(int(files.group(1)), int(files.group(2)) + 1):
            cores[i] = re.search(r"Cores=(\S+)", ln).group(1)
    assert cores == {i: "0-55" if i < 4 else "56-111" for i in range(8)}
    nhc = (out / "slurm/nhc.conf").read_text()
    ib = re.findall(r"^\S+ \|\| check_hw_ib 400 (mlx5_\d+):1$", nhc, re.M)
    assert sorted(ib) == sorted(n.device for n in platforms.PLATFORMS["dgx-h100"].compute) and len(ib) == 8
    assert "|| check_hw_ib\n" not in nhc  # no "any one port" check left
    env = dict(ln.split("=", 1) for ln in active((out / "slurm/nccl.env").read_text()))
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"
    assert not {h.split(":")[0] for h in env["NCCL_IB_HCA"].lstrip("=").split(",")} & set(STORAGE)
    checks = json.loads((out / "checks/checks.json").read_text())
    assert checks["busbw_expected_gbps"] == 400.0 and checks["busbw_floor_gbps"] == 320.0
    assert "8 x 400 Gb/s" in checks["busbw_floor_source"] and "nccl-tests" in checks["busbw_floor_source"]
    # every tuned value carries its why and its documentation
    text = (out / "slurm/nccl.env").read_text()
    assert "# exactly the compute rails" in text and "env.html#nccl-ib-hca" in text


def test_own_nics_and_roce_traffic_class(tmp_path, orchgen):
    nics = [{"device": "mlx5_0", "rate_gbps": 200, "netdev": "ens1f0np0"},
            {"device": "mlx5_1", "rate_gbps": 200, "netdev": "ens2f0np0"},
            {"device": "mlx5_2", "rate_gbps": 100, "role": "storage"}]
    pool = {"gpu": {"type": "l40s", "count": 4, "sockets": [0, 0, 1, 1]}, "nics": nics,
            "cpu": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2}}
    out, proc = plan(tmp_path, orchgen, doc(pool, "roce", {"traffic_class": 106, "service_level": 5}))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    env = dict(ln.split("=", 1) for ln in active((out / "slurm/nccl.env").read_text()))
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    assert (env["NCCL_IB_TC"], env["NCCL_IB_SL"]) == ("106", "5")
    assert "DSCP 26 x 4" in (out / "slurm/nccl.env").read_text()  # 106 = DSCP 26 with the ECN bits
    nhc = (out / "slurm/nhc.conf").read_text()
    assert re.findall(r"check_hw_ib (\d+) (\S+)$", nhc, re.M) == [("200", "mlx5_0:1"), ("200", "mlx5_1:1")]
    checks = json.loads((out / "checks/checks.json").read_text())
    assert checks["busbw_floor_gbps"] == 40.0  # 80% of 2 x 200 Gb/s = 50 GB/s
    # the default class: DSCP 26 at priority 3
    out2, proc = plan(tmp_path / "d", orchgen, doc(pool, "roce"))
    env = dict(ln.split("=", 1) for ln in active((out2 / "slurm/nccl.env").read_text()))
    assert (env["NCCL_IB_TC"], env["NCCL_IB_SL"]) == ("104", "3")


def test_unknown_rails_keep_the_prefix_and_warn(tmp_path, orchgen):
    out, proc = plan(tmp_path, orchgen, doc({"gpu": {"type": "h100", "count": 8}, "cpus": 224}))
    assert proc.returncode == 0
    warned = [ln for ln in proc.stderr.splitlines() if "fleet.pools[0].gpu: pool gpu: the plan guesses" in ln]
    assert len(warned) == 1, proc.stderr
    for what in ("the CPU layout (1 socket x 224 cores", "the GPUs' CPU affinity", "the RDMA rails"):
        assert what in warned[0]
    assert re.match(r"orchgen: warning: \S+plat\.yaml:\d+: ", warned[0])
    env = dict(ln.split("=", 1) for ln in active((out / "slurm/nccl.env").read_text()))
    assert env["NCCL_IB_HCA"] == "mlx5"
    assert "* || check_hw_ib" in (out / "slurm/nhc.conf").read_text()
    # an OEM board: its CPU SKU and adapters are the buyer's, so the plan says it guessed them
    out, proc = plan(tmp_path / "oem", orchgen, doc({"platform": "dell-xe9680-h100"}))
    assert proc.returncode == 0 and "fleet.pools[0].platform: pool gpu: the plan guesses the CPU layout (2 sockets " \
        "x 48 cores x 2 threads, reference configuration 2x Xeon Platinum 8468" in proc.stderr, proc.stderr


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize("pool, field, needle, message", [
    ({"platform": "dgx-h10"}, "fleet.pools[0].platform", "platform", "unknown platform 'dgx-h10' (did you mean 'dgx-h100'?)"),
    ({"platform": "dgx-h100", "gpu": {"type": "h100", "count": 4}}, "fleet.pools[0].gpu.count", "gpu",
     "platform dgx-h100 (NVIDIA DGX H100) has 8 GPUs, not 4"),
    ({"platform": "dgx-h100", "cpu": {"sockets": 2, "cores_per_socket": 48, "threads_per_core": 2}},
     "fleet.pools[0].cpu", "cpu", "has 2 sockets x 56 cores, not 2 x 48"),
    ({"platform": "gb200-nvl72", "nvlink_domain_nodes": 2}, "fleet.pools[0].nvlink_domain_nodes", "nvlink",
     "NVLink domains of 18 nodes, not 2"),
    ({"gpu": {"type": "h100", "count": 8}, "nics": [{"device": "mlx5_0", "rate_gbps": 400},
                                                     {"device": "mlx5_0", "rate_gbps": 400}]},
     "fleet.pools[0].nics[1].device", "nics", "mlx5_0:1 is listed twice"),
    ({"gpu": {"type": "h100", "count": 8}, "nics": [{"device": "mlx5-0", "rate_gbps": 400}]},
     "fleet.pools[0].nics[0].device", "nics", "is not an RDMA device name"),
])
def test_bad_platform_input_is_one_line(tmp_path, orchgen, pool, field, needle, message):
    d = doc(pool)
    src = tmp_path / "plat.yaml"
    src.write_text(yaml.safe_dump(d, sort_keys=False))
    proc = orchgen("plan", src, "-o", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert re.match(rf"orchgen: {re.escape(str(src))}:\d+: {re.escape(field)}: ", lines[0]), lines[0]
    assert message in lines[0]
    assert not (tmp_path / "out").exists()


def test_roce_keys_on_infiniband_are_refused(tmp_path, orchgen):
    src = tmp_path / "plat.yaml"
    src.write_text(yaml.safe_dump(doc({"platform": "dgx-h100"}, fabric={"traffic_class": 104}), sort_keys=False))
    proc = orchgen("plan", src, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "fleet.fabric.traffic_class: " in proc.stderr and "roce" in proc.stderr


# ------------------------------------------------------------------ Kubernetes from the facts


def kube_doc(pool: dict, kind: str = "infiniband") -> dict:
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "kplat"},
            "fleet": {"bare_metal": True, "fabric": {"kind": kind, "nodes_per_leaf": 2,
                                                     "rdma_network": {"subnet": "172.20.0.0/16"}},
                      "pools": [{"name": "gpu", "nodes": 4, "hostnames": "dgx-[01-04]", **pool}]},
            "tenants": [{"name": "llm"}],
            "workloads": [{"name": "pretrain", "nodes": 2, "tightly_coupled": True, "bare_metal": False,
                           "tenant": "llm"}]}


def rail_objects(out: Path) -> tuple[list[dict], list[dict], list[dict]]:
    net = list(yaml.safe_load_all((out / "kubernetes/manifests/35-network.yaml").read_text()))
    pools = list(yaml.safe_load_all((out / "kubernetes/operator-resources/35-network.yaml").read_text()))
    pods = []
    for doc_ in yaml.safe_load_all((out / "kubernetes/workloads/pretrain.yaml").read_text()):
        text = json.dumps(doc_)
        if doc_ and "k8s.v1.cni.cncf.io/networks" in text:
            pods.append(doc_)
    return net, pools, pods


def templates(obj: dict) -> list[dict]:
    """Every pod template under an object (a Job's, a JobSet's replicated jobs', ...)."""
    out = []
    if isinstance(obj, dict):
        if "spec" in obj and isinstance(obj["spec"], dict) and "containers" in obj["spec"]:
            out.append(obj)
        for v in obj.values():
            out += templates(v)
    elif isinstance(obj, list):
        for v in obj:
            out += templates(v)
    return out


def test_kubernetes_gets_one_network_and_resource_per_rail(tmp_path, orchgen):
    from tests._consumers import reference_dir

    out, proc = plan(tmp_path, orchgen, kube_doc({"platform": "dgx-h100"}))
    assert proc.returncode == 0, proc.stderr
    net, pools, pods = rail_objects(out)
    dgx = platforms.PLATFORMS["dgx-h100"].compute
    nads = [o for o in net if o["kind"] == "NetworkAttachmentDefinition"]
    configs = {o["metadata"]["name"]: json.loads(o["spec"]["config"]) for o in nads}
    assert {o["metadata"]["namespace"] for o in nads} == {"llm"}
    # each rail's network has its master: the port's netdev from the DGX user guide (ibp24s0, ...), not ib0
    assert [(c["name"], c["master"], c["type"]) for c in configs.values()] == [
        (f"rdma-rail-{i}", n.netdev, "ipoib") for i, n in enumerate(dgx)]
    (policy,) = [o for o in net if o["kind"] == "NicClusterPolicy"]
    plugin = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"]
    assert [(c["resourceName"], c["selectors"]["ifNames"]) for c in plugin] == [
        (f"rdma_rail_{i}", [n.netdev]) for i, n in enumerate(dgx)]
    assert [p["spec"]["subnet"] for p in pools] == [f"172.20.{32 * i}.0/19" for i in range(8)]
    assert [p["metadata"]["name"] for p in pools] == [f"rdma-rail-{i}" for i in range(8)]
    # the training pods ask for every rail, attach every rail's network, and NCCL takes exactly those HCAs
    tmpls = [t for o in pods for t in templates(o)]
    assert tmpls
    for t in tmpls:
        assert t["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == ",".join(configs)
        for c in t["spec"]["containers"]:
            assert {k: v for k, v in c["resources"]["limits"].items() if k.startswith("rdma/")} == {
                f"rdma/rdma_rail_{i}": "1" for i in range(8)}
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            assert env["NCCL_IB_HCA"] == "=" + ",".join(n.hca for n in dgx)
    # the NADs and the policy pass their CRDs (shared/reference), as `orchgen validate` checks them
    proc = orchgen("validate", out, "--crds", reference_dir(), "--chart-defaults", reference_dir())
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_roce_rails_need_their_ethernet_netdevs(tmp_path, orchgen):
    # the DGX guide names its ports in InfiniBand mode: on RoCE they are not known, so one shared network stays
    out, proc = plan(tmp_path, orchgen, kube_doc({"platform": "dgx-h100"}, "roce"))
    assert proc.returncode == 0, proc.stderr
    net, _, _ = rail_objects(out)
    assert [o["metadata"]["name"] for o in net if o["kind"] == "NetworkAttachmentDefinition"] == ["rdma-fabric"]
    # the site's own nics with their netdevs: one macvlan per rail, each with its master
    nics = [{"device": f"mlx5_{i}", "rate_gbps": 400, "netdev": f"enp{i}s0np0"} for i in range(2)]
    out, proc = plan(tmp_path / "own", orchgen, kube_doc({"platform": "dgx-h100", "nics": nics}, "roce"))
    assert proc.returncode == 0, proc.stderr
    net, _, _ = rail_objects(out)
    configs = [json.loads(o["spec"]["config"]) for o in net if o["kind"] == "NetworkAttachmentDefinition"]
    assert [(c["name"], c["type"], c["master"], c["mode"]) for c in configs] == [
        ("rdma-rail-0", "macvlan", "enp0s0np0", "bridge"), ("rdma-rail-1", "macvlan", "enp1s0np0", "bridge")]


# --- NVL72 on Kubernetes: ComputeDomains and the clique level ----------------------------------------------
# (the real API server and Kueue: tests/test_kube_real.py test_kueue_tas_..._nvlink_job_in_one_clique)

def nvl_doc(**options) -> dict:
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "nvl"},
            # the site names its IPoIB interface: the trays' rail netdevs are not in the catalog (without it, a
            # warning: test_rails_without_netdevs_warn_what_kubernetes_guesses)
            "fleet": {"bare_metal": True, "fabric": {"kind": "infiniband", "nodes_per_leaf": 18,
                                                     "rdma_network": {"interface": "ib0"}},
                      "pools": [{"name": "gb", "platform": "gb200-nvl72", "nodes": 36},
                                {"name": "h", "platform": "dgx-h100", "nodes": 4}]},
            "workloads": [{"name": "rack", "plane": "kubernetes", "pool": "gb", "nodes": 12, "tightly_coupled": True},
                          {"name": "wide", "plane": "kubernetes", "pool": "gb", "nodes": 20, "tightly_coupled": True},
                          {"name": "solo", "plane": "kubernetes", "pool": "gb", "nodes": 1},
                          {"name": "dgx", "plane": "kubernetes", "pool": "h", "nodes": 2, "tightly_coupled": True}],
            "options": {"kubernetes_version": "1.34", **options}}


def test_nvl72_on_kubernetes_gets_compute_domains_and_the_clique_level():
    from generator.render import render
    from tests.support import plan_of

    p = plan_of(nvl_doc())
    assert p.platform.compute_domains == ("gb",) and not p.warnings
    files = render(p)
    rels = {r["name"]: r for r in yaml.safe_load(files["kubernetes/helm/releases.yaml"])["releases"]}
    assert rels["dra-driver-nvidia-gpu"]["dependsOn"] == ["gpu-operator"]
    assert yaml.safe_load(files["kubernetes/helm/dra-driver-nvidia-gpu.values.yaml"]) == {
        "nvidiaDriverRoot": "/run/nvidia/driver",
        "resources": {"computeDomains": {"enabled": True}, "gpus": {"enabled": False}}}

    def starter(name: str) -> list[dict]:
        return list(yaml.safe_load_all(files[f"kubernetes/workloads/{name}.yaml"]))

    # one rack's worth: all pods in one clique, the pods claim the ComputeDomain's channel
    cd, *_, job = starter("rack")
    assert cd["kind"] == "ComputeDomain" and cd["spec"] == {
        "numNodes": 12, "channel": {"resourceClaimTemplate": {"name": "rack-imex-channel"}}}
    tmpl = job["spec"]["template"]
    assert tmpl["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == "nvidia.com/gpu.clique"
    assert tmpl["spec"]["resourceClaims"] == [
        {"name": "imex-channel", "resourceClaimTemplateName": "rack-imex-channel"}]
    assert tmpl["spec"]["containers"][0]["resources"]["claims"] == [{"name": "imex-channel"}]
    # more than a rack: slices of whole cliques that cover the job (20 pods: 2 slices of 10), under one leaf if it fits
    ann = starter("wide")[-1]["spec"]["template"]["metadata"]["annotations"]
    assert (ann["kueue.x-k8s.io/podset-slice-required-topology"], ann["kueue.x-k8s.io/podset-slice-size"],
            ann["kueue.x-k8s.io/podset-preferred-topology"]) == ("nvidia.com/gpu.clique", "10", "orchgen.io/leaf")
    assert "kueue.x-k8s.io/podset-required-topology" not in ann
    # a one-node job and a job off the NVLink pool: no ComputeDomain, no claim, no clique
    for name in ("solo", "dgx"):
        objs = starter(name)
        assert all(o["kind"] != "ComputeDomain" for o in objs)
        assert "resourceClaims" not in objs[-1]["spec"]["template"]["spec"]
    assert "nvidia.com/gpu.clique" not in files["kubernetes/workloads/dgx.yaml"].decode()

    # Kueue: the NVLink pool's flavor names the clique Topology, the DGX pool's the fabric's; the channel is
    # a mapped, quota'd resource (one per node's worth of GPUs in the quota; none on the DGX pool)
    kueue = list(yaml.safe_load_all(files["kubernetes/manifests/20-kueue.yaml"]))
    topologies = {t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]]
                  for t in yaml.safe_load_all(files["kubernetes/manifests/18-topology.yaml"])}
    flavors = {f["spec"]["nodeLabels"]["orchgen.io/pool"]: f for f in kueue if f["kind"] == "ResourceFlavor"}
    assert topologies[flavors["gb"]["spec"]["topologyName"]][-2:] == ["nvidia.com/gpu.clique", "kubernetes.io/hostname"]
    assert "nvidia.com/gpu.clique" not in topologies[flavors["h"]["spec"]["topologyName"]]
    (cq,) = [o for o in kueue if o["kind"] == "ClusterQueue"]
    quota = {f["name"]: {r["name"]: int(r["nominalQuota"]) if r["nominalQuota"].isdigit() else r["nominalQuota"] for r in f["resources"]}
             for f in cq["spec"]["resourceGroups"][0]["flavors"]}
    assert quota[flavors["gb"]["metadata"]["name"]]["compute-domain.nvidia.com/channel"] == 36
    assert quota[flavors["h"]["metadata"]["name"]]["compute-domain.nvidia.com/channel"] == 0
    config = yaml.safe_load(yaml.safe_load(files["kubernetes/helm/kueue.values.yaml"])["managerConfig"][
        "controllerManagerConfigYaml"])
    assert config["resources"]["deviceClassMappings"] == [
        {"name": "compute-domain.nvidia.com/channel",
         "deviceClassNames": ["compute-domain-default-channel.nvidia.com"]}]


def test_compute_domains_before_kubernetes_1_34_warn():
    from tests.support import plan_of

    p = plan_of(nvl_doc(kubernetes_version="1.33"))
    (w,) = p.warnings
    assert w.field == "options.kubernetes_version" and "1.34.2" in w.message and "gb" in w.message


def test_no_compute_domains_where_a_pod_cannot_claim_a_template():
    """Below 1.31 a pod has no resourceClaims[].resourceClaimTemplateName: no ComputeDomain, claim or clique level
    is written (the bundle would not apply; test_hostile's random fleets found it), and the warning says the jobs
    use the RDMA fabric there."""
    from generator.render import render
    from tests.support import plan_of

    for version, domains in (("1.30", False), ("1.31", True)):
        p = plan_of(nvl_doc(kubernetes_version=version))
        (w,) = p.warnings
        assert w.field == "options.kubernetes_version" and "1.34.2" in w.message, w.message
        assert bool(p.platform.compute_domains) is domains, version
        assert ("RDMA fabric, not NVLink" in w.message) is not domains, w.message
        files = {k: v.decode() if isinstance(v, bytes) else v for k, v in render(p).items()}
        kinds = {o.get("kind") for k, v in files.items() if k.startswith("kubernetes/") and k.endswith(".yaml")
                 for o in yaml.safe_load_all(v) if isinstance(o, dict)}
        assert ("ComputeDomain" in kinds) is domains, (version, kinds)
        assert any("resourceClaimTemplateName" in v for v in files.values()) is domains, version
        assert ("kubernetes/helm/dra-driver-nvidia-gpu.values.yaml" in files) is domains, version


def test_rails_without_netdevs_warn_what_kubernetes_guesses(tmp_path, orchgen):
    # a GB200 tray's four compute HCAs are in the catalog, their netdev names are not (gb200-nvl72's source)
    trays = {"platform": "gb200-nvl72", "nodes": 18, "hostnames": "gb-[01-18]"}  # one NVLink domain
    out, proc = plan(tmp_path / "a", orchgen, kube_doc(trays))
    assert proc.returncode == 0, proc.stderr
    warned = [ln for ln in proc.stderr.splitlines() if "compute rails" in ln]
    assert len(warned) == 1 and "fleet.pools[0].platform: pool gpu: 4 compute rails (mlx5_0, mlx5_1, mlx5_4, " \
        "mlx5_5), but their netdevs on infiniband are not known, so its pods get one network on ib0 and one RDMA " \
        "resource for every HCA, not one per rail" in warned[0], proc.stderr
    net, _, _ = rail_objects(out)
    assert [o["metadata"]["name"] for o in net if o["kind"] == "NetworkAttachmentDefinition"] == ["rdma-fabric"]
    # the same trays with their netdevs given: a network per rail, and no warning
    nics = [{"device": d, "netdev": f"ibp{i}s0", "rate_gbps": 400, "gpu": i}
            for i, d in enumerate(("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"))]
    out, proc = plan(tmp_path / "b", orchgen, kube_doc({**trays, "nics": nics}))
    assert proc.returncode == 0, proc.stderr
    assert "compute rails" not in proc.stderr, proc.stderr
    net, _, _ = rail_objects(out)
    assert [o["metadata"]["name"] for o in net if o["kind"] == "NetworkAttachmentDefinition"] == [
        f"rdma-rail-{i}" for i in range(4)]
