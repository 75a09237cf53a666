"""Provider and distribution profiles (issue 15): each profile's GPU Operator settings pinned to the
documentation they cite, the refusals of profiles orchgen cannot fill, how each provider's pools
are selected, the provider topology labels, the scale envelope, and a fleet per provider that plans,
validates and builds with `kubectl kustomize`.

The expected settings are written out here from the docs (quoted in DOCS), not read from the
renderer, so a change in either shows up as a difference.
"""
from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest
import yaml

from generator.render import render
from generator.render.kubernetes import gpu_operator
from generator.validate.bundle_checks import load_crds, validate_bundle
from tests._consumers import REPO, crd_paths, reference_dir, tool
from tests.conftest import run_orchgen

# profile -> (the document and what it says, the values it asks for). Paths are in
# NVIDIA/cloud-native-docs (gpu-operator/), awsdocs/amazon-eks-user-guide, rancher/rke2-docs, k3s-io/docs.
DOCS: dict[str, tuple[str, dict[str, Any]]] = {
    "bare-metal-driver": ("gpu-operator/getting-started.rst: driver.enabled defaults to true",
                          {"driver": {"enabled": True}}),
    "preinstalled-driver": ("gpu-operator/getting-started.rst \"Pre-Installed NVIDIA GPU Drivers\": "
                            "--set driver.enabled=false", {"driver": {"enabled": False}}),
    "eks": ("latest/ug/ml/ml-eks-optimized-ami.adoc: \"When using the NVIDIA GPU operator with the EKS-optimized "
            "AL2023 NVIDIA AMIs, you must disable the operator installation of the driver and toolkit\"",
            {"driver": {"enabled": False}, "toolkit": {"enabled": False}}),
    "eks-efa": ("latest/ug/ml/device-management-efa.adoc: the NVIDIA device plugin's --mofed-enabled mounts all "
                "/dev/infiniband/uverbs* devices, which conflicts with the EFA device plugin: disable MOFED",
                {"devicePlugin": {"env": [{"name": "MOFED_ENABLED", "value": "false"}]}}),
    "gke": ("gpu-operator/google-gke.rst \"Using the Google Driver Installer\": --set "
            "hostPaths.driverInstallDir=/home/kubernetes/bin/nvidia --set toolkit.installDir=/home/kubernetes/bin/nvidia "
            "--set cdi.enabled=true --set driver.enabled=false",
            {"hostPaths": {"driverInstallDir": "/home/kubernetes/bin/nvidia"},
             "toolkit": {"installDir": "/home/kubernetes/bin/nvidia"}, "cdi": {"enabled": True},
             "driver": {"enabled": False}}),
    "gke-1.33": ("gpu-operator/google-gke.rst: \"When installing NVIDIA GPU Operator on GKE 1.33+ ... set the "
                 "RUNTIME_CONFIG_SOURCE=file environment variable in the toolkit container\"",
                 {"toolkit": {"env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]}}),
    "aks": ("gpu-operator/microsoft-aks.rst: --set driver.enabled=false --set toolkit.enabled=false --set "
            "operator.runtimeClass=nvidia-container-runtime",
            {"driver": {"enabled": False}, "toolkit": {"enabled": False},
             "operator": {"runtimeClass": "nvidia-container-runtime"}}),
    "k3s": ("k3s-io/docs docs/advanced.md: k3s generates its containerd config at "
            "/var/lib/rancher/k3s/agent/etc/containerd/config.toml; socket /run/k3s/containerd/containerd.sock",
            {"toolkit": {"env": [{"name": "CONTAINERD_CONFIG", "value": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
                                 {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}]}}),
    "rke2": ("rancher/rke2-docs docs/add-ons/gpu_operators.md, v26.3.x: toolkit.env CONTAINERD_SOCKET="
             "/run/k3s/containerd/containerd.sock",
             {"toolkit": {"env": [{"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}]}}),
    "dma-buf": ("gpu-operator/gpu-operator-rdma.rst: \"To use DMA-BUF and network device drivers that are installed on "
                "the host: --set driver.rdma.useHostMofed=true\"; driver.rdma.enabled=true only for legacy nvidia-peermem",
                {"driver": {"rdma": {"useHostMofed": True}}}),
}

TRAIN = {"name": "train", "nodes": 2, "tightly_coupled": True, "multi_tenant": True, "bare_metal": False}
SERVE = {"name": "api", "long_lived_services": True, "multi_tenant": True, "bare_metal": False}


def fleet(provider: str = "generic", *, bare_metal: bool = False, distribution: str = "upstream",
          fabric: str = "infiniband", k8s: str = "1.33", nodes: int = 8, node_labels: dict | None = None,
          gpu: str = "h100", workloads: list[dict] | None = None, **options: Any) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "h100", "nodes": nodes, "gpu": {"type": gpu, "count": 8},
                            "cpus": 192, "memory_gib": 2048}
    if node_labels:
        pool["node_labels"] = node_labels
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": f"{provider}-fleet"},
            "fleet": {"provider": provider, "bare_metal": bare_metal, "kubernetes_distribution": distribution,
                      "fabric": {"kind": fabric, "nodes_per_leaf": 4}, "pools": [pool]},
            "workloads": workloads or [dict(TRAIN), dict(SERVE)],
            "options": {"kubernetes_version": k8s, **options}}


from .support import plan_of  # noqa: E402  (Fleet data, as fleet.yaml)


def gpu_values(data: dict[str, Any]) -> dict[str, Any]:
    return gpu_operator.values(plan_of(data))


def contains(values: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Every key of `expected` in `values` with that value (dicts compared key by key)."""
    for key, want in expected.items():
        if isinstance(want, dict):
            if not isinstance(values.get(key), dict) or not contains(values[key], want):
                return False
        elif isinstance(want, list):
            if not all(item in values.get(key, []) for item in want):
                return False
        elif values.get(key) != want:
            return False
    return True


PROFILES: dict[str, dict[str, Any]] = {
    "bare-metal-driver": fleet(bare_metal=True, fabric="ethernet"),
    "preinstalled-driver": fleet(fabric="ethernet"),
    "eks": fleet("eks", fabric="ethernet", workloads=[dict(SERVE)]),
    "eks-efa": fleet("eks", node_labels={"node.kubernetes.io/instance-type": "p5.48xlarge"}),
    "gke": fleet("gke", k8s="1.32", fabric="ethernet", workloads=[dict(SERVE)]),
    "gke-1.33": fleet("gke", fabric="ethernet", workloads=[dict(SERVE)]),
    "aks": fleet("aks", fabric="ethernet", workloads=[dict(SERVE)]),
    "k3s": fleet(bare_metal=True, distribution="k3s", fabric="ethernet"),
    "rke2": fleet(bare_metal=True, distribution="rke2", fabric="ethernet"),
    "dma-buf": fleet(bare_metal=True),
}


@pytest.mark.parametrize("profile", sorted(DOCS))
def test_each_profile_carries_the_settings_its_document_asks_for(profile):
    doc, expected = DOCS[profile]
    plan = plan_of(PROFILES[profile])
    values = gpu_operator.values(plan)
    assert profile in gpu_operator.profile(plan)
    assert contains(values, expected), f"{profile}: {doc}\nvalues: {values}"
    # the renderer cites the same document for the profile
    source = gpu_operator.PROFILE_SOURCES[profile]
    assert any(part in source for part in (doc.split(":")[0], doc.split(" ")[0])), (profile, source)


def test_profiles_do_not_leak_into_each_other():
    """A setting of one profile is absent where its document does not apply."""
    gke_old = gpu_values(PROFILES["gke"])
    assert "env" not in gke_old.get("toolkit", {}), "RUNTIME_CONFIG_SOURCE only from GKE 1.33"
    for name in ("bare-metal-driver", "preinstalled-driver", "aks", "eks"):
        values = gpu_values(PROFILES[name])
        assert "hostPaths" not in values and "cdi" not in values and "devicePlugin" not in values, name
    assert gpu_values(PROFILES["preinstalled-driver"]).get("toolkit") is None  # the operator's toolkit
    assert "operator" not in gpu_values(PROFILES["eks"])
    assert "rdma" not in gpu_values(PROFILES["bare-metal-driver"])["driver"]  # Ethernet: no GPUDirect


def test_legacy_peermem_only_where_dma_buf_cannot_work():
    """DMA-BUF needs the open kernel modules: Turing or newer, and GPU Operator v25.3.0+ (open modules
    by default from R570); otherwise the documented legacy path, driver.rdma.enabled=true."""
    assert gpu_values(fleet(bare_metal=True))["driver"]["rdma"] == {"useHostMofed": True}
    assert gpu_values(fleet(bare_metal=True, gpu="v100"))["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
    older = fleet(bare_metal=True, versions={"gpu-operator": "v24.9.2"})
    assert gpu_values(older)["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
    # no multi-node job on Kubernetes: nothing needs GPUDirect from it
    assert "rdma" not in gpu_values(fleet(bare_metal=True, workloads=[dict(SERVE)]))["driver"]


def test_oke_runs_no_gpu_operator():
    """OKE's GPU node images carry driver and toolkit and its NvidiaGpuPlugin add-on advertises the
    GPUs (NVIDIA AI Cluster Runtime, "OKE GPU Setup"): no chart to fill, and the README says so."""
    plan = plan_of(fleet("oke", fabric="ethernet"))
    assert "gpu-operator" not in plan.charts and plan.platform.gpu_stack == "provider"
    assert any("NvidiaGpuPlugin" in r for r in plan.reasons)
    assert "no GPU Operator release" in render(plan)["README.md"].decode()


# ---- refusals: a profile orchgen cannot fill is refused with the reason, not guessed --------------


REFUSALS = [
    ({"bare_metal": True, "provider": "eks"}, "fleet.provider", r"bare_metal: true means the site's own machines"),
    ({"provider": "gke", "kubernetes_distribution": "k3s"}, "fleet.kubernetes_distribution",
     r"gke runs its own Kubernetes, not k3s"),
    ({"provider": "generic", "bare_metal": True, "kubernetes_distribution": "rke2"},
     "fleet.kubernetes_distribution", r"no Network Operator profile for rke2"),
    ({"provider": "aks", "pool_name": "h100-big"}, "fleet.pools[0].name", r"aks node pool names are lower-case letters"),
]


@pytest.mark.parametrize(("change", "field", "message"), REFUSALS, ids=[r[1] + "-" + r[2][:12] for r in REFUSALS])
def test_unfillable_profiles_are_refused_with_file_line_and_reason(change, field, message, tmp_path):
    data = fleet()
    name = change.pop("pool_name", None)
    if name:
        data["fleet"]["pools"][0]["name"] = name
    data["fleet"].update(change)
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"orchgen: {path}:") and f": {field}: " in line, line
    assert re.search(message, line), line
    number = int(line.split(f"{path}:")[1].split(":")[0])
    key = field.split(".")[-1].split("[")[0]
    assert key in path.read_text().splitlines()[number - 1], (number, line)


def test_rke2_without_an_rdma_job_is_planned():
    """RKE2 is refused only where its Network Operator profile would be needed."""
    plan = plan_of(fleet(bare_metal=True, distribution="rke2", workloads=[dict(SERVE)]))
    assert plan.platform.distribution == "rke2" and plan.platform.network is None


def test_managed_providers_without_node_networking_warn():
    """GKE, AKS and OKE: orchgen sets up no GPUDirect/RDMA there, and says so for each multi-node job."""
    for provider in ("gke", "aks", "oke"):
        plan = plan_of(fleet(provider))
        assert plan.platform.network is None and "train" not in plan.platform.fabric_workloads
        (warning,) = [w for w in plan.warnings if w.field == "fleet.provider"]
        assert "train would run NCCL over the pod network" in warning.message
        readme = render(plan)["README.md"].decode()
        assert "The fabric for multi-node jobs (not configured)" in readme
    assert "GPUDirect-TCPX" in render(plan_of(fleet("gke")))["README.md"].decode()


def test_strict_refuses_the_networking_warning(tmp_path):
    data = fleet("gke", strict=True)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "fleet.provider" in proc.stderr and "options.strict" in proc.stderr


# ---- node identity and topology per provider ------------------------------------------------------


SELECTORS = {
    "eks": {"eks.amazonaws.com/nodegroup": "h100"},
    "gke": {"cloud.google.com/gke-nodepool": "h100"},
    "aks": {"kubernetes.azure.com/agentpool": "h100"},
    "oke": {"oke.oraclecloud.com/pool.name": "h100"},
    "generic": {"orchgen.io/pool": "h100"},
}
TOPOLOGY = {
    "eks": ["topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
            "topology.k8s.aws/network-node-layer-3"],
    "gke": ["cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
            "cloud.google.com/gce-topology-host"],
    "oke": ["oci.oraclecloud.com/rdma.hpc_island_id", "oci.oraclecloud.com/rdma.network_block_id",
            "oci.oraclecloud.com/rdma.local_block_id"],
    "aks": [], "generic": [],
}


@pytest.mark.parametrize("provider", sorted(SELECTORS))
def test_each_provider_selects_pools_by_its_node_pool_label_and_topology_by_its_own(provider):
    plan = plan_of(fleet(provider, gang_scheduler="kueue"))
    assert plan.platform.selectors == {"h100": SELECTORS[provider]}
    files = render(plan)
    flavors = [d for d in yaml.safe_load_all(files["kubernetes/manifests/20-kueue.yaml"]) if d["kind"] == "ResourceFlavor"]
    assert [f["spec"]["nodeLabels"] for f in flavors] == [SELECTORS[provider]]
    topo = files.get("kubernetes/manifests/18-topology.yaml")
    if TOPOLOGY[provider]:
        (t,) = yaml.safe_load_all(topo)
        assert [lv["nodeLabel"] for lv in t["spec"]["levels"]] == TOPOLOGY[provider] + ["kubernetes.io/hostname"]
        assert flavors[0]["spec"]["topologyName"] == t["metadata"]["name"]
        job = next(d for d in yaml.safe_load_all(files["kubernetes/workloads/train.yaml"]) if d["kind"] == "Job")
        level = job["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"]
        assert level in TOPOLOGY[provider] and level != TOPOLOGY[provider][0]
    else:
        assert topo is None and "topologyName" not in flavors[0]["spec"]


def test_explicit_node_labels_win_over_the_provider_default():
    labels = {"eks.amazonaws.com/nodegroup": "p5-ng", "example.com/team": "llm"}
    plan = plan_of(fleet("eks", node_labels=labels))
    assert plan.platform.selectors == {"h100": labels}


def test_volcano_discovers_provider_hypernodes_by_label():
    """Volcano v1.15.1's HyperNode auto-discovery, label source: the provider's levels, hostname last."""
    from generator.render.kubernetes import volcano

    plan = plan_of(fleet("gke", gang_scheduler="volcano"))
    values = volcano.values(plan)
    conf = values["custom"]["controller_config_override"]
    (source,) = conf["networkTopologyDiscovery"]
    assert source["source"] == "label" and source["enabled"] is True
    assert [lv["nodeLabel"] for lv in source["config"]["networkTopologyTypes"]["gke"]] == \
        TOPOLOGY["gke"] + ["kubernetes.io/hostname"]
    assert volcano.topology(plan) == []  # no HyperNode lists names the plan invented
    assert "controller_config_override" not in volcano.values(plan_of(fleet("aks", gang_scheduler="volcano")))["custom"]


def test_an_edge_fleet_on_a_managed_provider_gets_its_kubernetes_not_k3s():
    data = fleet("eks", workloads=[{"name": "notebook", "gpus": 1, "edge_or_dev": True}])
    plan = plan_of(data)
    assert plan.kube_plane.name == "kubernetes" and plan.platform.distribution == "upstream"
    assert any("not k3s" in r for r in plan.reasons)


# ---- scale envelope -----------------------------------------------------------------------------


def test_a_plane_beyond_5000_nodes_warns_with_a_split_along_the_fabric():
    data = fleet(bare_metal=True, nodes=12_288, fabric="infiniband", workloads=[dict(SERVE, bare_metal=False)])
    data["fleet"]["fabric"] = {"kind": "infiniband", "nodes_per_leaf": 32, "leaves_per_spine": 32}
    plan = plan_of(data)
    (warning,) = [w for w in plan.warnings if w.field == "fleet.pools"]
    assert "12,288 nodes (at most 5,000)" in warning.message
    assert "split it into 3 clusters of at most 5,000 nodes" in warning.message
    assert "spine[01-04] (4,096 nodes)" in warning.message  # whole spines of 1,024 nodes
    assert str(warning) in plan.to_json()["warnings"]


def test_a_plane_within_the_envelope_does_not_warn():
    data = fleet(bare_metal=True, nodes=4_096, workloads=[dict(SERVE, bare_metal=False)])
    data["fleet"]["fabric"]["nodes_per_leaf"] = 32
    assert not plan_of(data).warnings


def test_recommend_and_plan_print_the_scale_warning_and_strict_refuses(tmp_path):
    data = fleet(bare_metal=True, nodes=6_000, workloads=[dict(SERVE, bare_metal=False)])
    data["fleet"]["fabric"] = {"kind": "ethernet", "nodes_per_leaf": 40}
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    for command in (["recommend", path], ["plan", path, "-o", tmp_path / "out"]):
        proc = run_orchgen(*command)
        assert proc.returncode == 0, proc.stderr
        assert f"orchgen: warning: {path}:" in proc.stderr and "fleet.pools: the kubernetes plane has 6,000 nodes" in proc.stderr
    data["options"]["strict"] = True
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_orchgen("plan", path, "-o", tmp_path / "out2")
    assert proc.returncode == 2 and "split it into 2 clusters" in proc.stderr


# ---- a fleet per provider plans, validates and builds ---------------------------------------------


PROVIDER_EXAMPLES = ["eks-training", "gke-training", "aks-inference", "oke-training", "baremetal-k8s-training"]


@pytest.mark.parametrize("name", PROVIDER_EXAMPLES)
def test_each_provider_example_plans_validates_and_builds(name, tmp_path):
    path = REPO / "examples" / f"{name}.yaml"
    out = tmp_path / "out"
    proc = run_orchgen("plan", path, "-o", out)
    assert proc.returncode == 0, proc.stderr
    report = validate_bundle(out, load_crds(crd_paths()), reference_dir())
    assert not report.errors, "\n".join(map(str, report.errors))
    for directory in ("kubernetes", "gitops"):
        if (out / directory / "kustomization.yaml").is_file():
            built = subprocess.run([tool("kubectl"), "kustomize", str(out / directory)], capture_output=True, text=True)
            assert built.returncode == 0, built.stderr
            assert list(yaml.safe_load_all(built.stdout))


def test_the_provider_examples_cover_every_provider():
    from generator import spec

    providers = {spec.load(REPO / "examples" / f"{n}.yaml").fleet.provider for n in PROVIDER_EXAMPLES}
    assert providers == {"generic", "eks", "gke", "aks", "oke"}
    assert all(spec.load(REPO / "examples" / f"{n}.yaml").options.gitops != "none" for n in PROVIDER_EXAMPLES)


def test_gke_gets_the_operator_quota_its_guide_asks_for():
    """google-gke.rst: "Create a file, such as gpu-operator-quota.yaml" (manifests/input/google-gke-gpu-
    operator-quota.yaml): pods: 100 for PriorityClass system-node-critical and system-cluster-critical,
    in the operator's namespace, before the operator's pods."""
    files = render(plan_of(PROFILES["gke-1.33"]))
    ns, quota = yaml.safe_load_all(files["kubernetes/prerequisites/gpu-operator.yaml"])
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "gpu-operator"
    assert quota["metadata"]["namespace"] == "gpu-operator" and quota["spec"]["hard"] == {"pods": "100"}
    (expr,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert expr == {"operator": "In", "scopeName": "PriorityClass",
                    "values": ["system-node-critical", "system-cluster-critical"]}
    for name in ("eks", "aks", "preinstalled-driver"):
        assert "kubernetes/prerequisites/gpu-operator.yaml" not in render(plan_of(PROFILES[name]))
