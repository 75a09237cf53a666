"""Apply an orchgen bundle to a `cluster.Cluster` the way its README's Helm/kubectl path does.

Order (the bundle README, "Kubernetes: Helm releases" and "node labels, tenants, queues and workloads"):
1. the fleet's nodes join (KWOK), carrying what their provisioner gives them: the pool's node labels
   off bare metal (`node_labels`, else the provider's node-pool label), nothing on bare metal;
   capacity from the pool's hardware (allocatable CPUs and memory, `nvidia.com/gpu`, the fabric's
   RDMA resource);
2. `kubernetes/node-labels.sh`, run by bash against this cluster (the README's step 1, "before
   `pulumi up`": the Slurm side's taint must be there before anything schedules);
3. each Helm release of `kubernetes/helm/releases.yaml` in file order (the install order the README
   gives: CRD owners first, each after its `dependsOn`): `helm template` of the real chart of
   ../shared/charts with the release's values and `--include-crds`, CRDs applied and Established first,
   then the rest; Kueue's controller starts once its release is in (LWS's and Volcano's likewise where
   the cluster runs them);
4. `kubernetes/` kustomization (manifests, in its fifo order), then `kubernetes/workloads/*.yaml`.
Every apply is `kubectl apply --server-side`. tests/kubeenv/overlay.py lists what is left out.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from generator.decide.platform import pool_taints
from generator.spec import hardware
from generator.spec import load as load_fleet  # the function: importing the submodule generator.spec.load would shadow it (generator/spec/__init__.py)
from generator.spec.checks import pool_hostnames, pool_node_labels

from tests._consumers import helm_objects
from tests._consumers import load_all as _load_all

from . import overlay
from .cluster import REPO, Cluster, shared_lock, shared_read, shared_write

# k8s-rdma-shared-dev-plugin's rdmaHcaMax as the bundle sets it (generator/render/kubernetes/network_operator.py)
RDMA_SHARED = ("rdma/rdma_shared_device_a", "63")


def charts_dir() -> Path:
    return Path(os.environ.get("ORCHGEN_CHARTS", REPO.parent / "shared" / "charts"))


def fleet_nodes(workload: Path, bundle: Path, planes: tuple[str, ...] = ("kubernetes",)) -> list[dict[str, Any]]:
    """The fake nodes for a fleet: every node of the planes' pools (plan.json), as its provisioner
    registers it."""
    fleet = load_fleet(workload)
    plan = json.loads((bundle / "plan.json").read_text())
    bare = bool(fleet.fleet.bare_metal)
    net = ((plan.get("platform") or {}).get("network") or {})
    wanted: set[str] = set()
    for plane in planes:
        p = plan["planes"].get(plane)
        if p and (plane in ("kubernetes", "k3s") or p.get("host") == "kubernetes"):
            from generator.spec import hostlist

            for expr in p["nodes"]:
                wanted.update(hostlist.expand(expr))
    nodes = []
    for pool in fleet.fleet.pools:
        hw = hardware.node_hardware(pool)
        cap = {"cpu": str(hw.allocatable_cpus), "memory": f"{hw.allocatable_memory_gib}Gi", "pods": "110"}
        if pool.gpu is not None:
            # the device plugin's resource: whole GPUs, or on a MIG pool (the GPU Operator's `mixed`
            # strategy) nvidia.com/mig-<profile>, per_gpu instances of each GPU
            mig = pool.gpu.mig
            resource = f"nvidia.com/mig-{mig.profile}" if mig is not None else "nvidia.com/gpu"
            cap[resource] = str(pool.gpu.count * (mig.per_gpu if mig is not None else 1))
            if net.get("kind") == "rdma-shared" and net.get("rails"):
                # one resource per compute rail (issue 35), each its own port's (network_operator.py)
                cap.update({rail["resource"]: RDMA_SHARED[1] for rail in net["rails"]})
            elif net.get("kind") == "rdma-shared":
                cap[RDMA_SHARED[0]] = RDMA_SHARED[1]
            elif net.get("kind") == "efa" and (net.get("per_node") or {}).get(pool.name):
                # the EFA device plugin advertises the instance type's interfaces (plan.json's per_node)
                cap[net["resource"]] = str(net["per_node"][pool.name])
        labels = {} if bare else pool_node_labels(fleet, pool)
        if not bare:
            # a cloud provider's own network-topology labels (EKS: topology.k8s.aws/network-node-layer-N
            # on p5 and the like), which Kueue's Topology of the plan names: one network node per level
            # here, as a placement group of one spine would report it
            # (orchgen.io/ levels are the plan's own: node-labels.sh sets them, as on a real site)
            for i, level in enumerate((plan.get("platform") or {}).get("topology") or []):
                if level != "kubernetes.io/hostname" and not level.startswith("orchgen.io/"):
                    labels.setdefault(level, f"{pool.name}-{i}")
        # the taints the provisioner registers the pool's nodes with: the pool's `taints`, else the
        # provider's default GPU-pool taint (EKS nvidia.com/gpu=true, GKE nvidia.com/gpu=present, AKS
        # sku=gpu; generator/providers.py cites each), so a pod that does not tolerate them stays off
        taints = [{"key": k, **({"value": v} if v else {}), "effect": e} for k, v, e in pool_taints(fleet).get(pool.name, ())]
        for name in pool_hostnames(pool):
            if name in wanted:
                nodes.append({"name": name, "labels": dict(labels), "taints": [dict(t) for t in taints],
                              "capacity": dict(cap)})
    return nodes




def helm_template(cluster: Cluster, rel: dict[str, Any], bundle: Path, kube_version: str) -> list[dict[str, Any]]:
    chart = charts_dir() / rel["chart"] / rel["version"]
    assert chart.is_dir(), f"chart {rel['chart']} {rel['version']} not in {charts_dir()}"
    env = {**cluster.env(), **{k: str(cluster.dir / "helm" / k.lower()) for k in
                               ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}}
    values = bundle / "kubernetes" / "helm" / rel["values"]
    args = [str(cluster.bin / "helm"), "template", rel["name"], str(chart), "-n", rel["namespace"],
            "--include-crds", "--kube-version", kube_version]
    if values.is_file():
        args += ["-f", str(values)]
    if rel["chart"] in DISCOVERED_RESOURCE_API:
        args += ["--set", f"resourceApiVersion={resource_api_version(cluster)}"]
    # the same chart, release and values render the same (`helm template` reads no cluster): rendered once
    # per test run, by the first worker to need it (cluster.SHARED), and taken from there after (issue 32,
    # CI time: kube-prometheus-stack and kserve-crd cost seconds of CPU each, and most examples install them)
    import hashlib

    key = hashlib.sha256(json.dumps([[a if a != str(values) else "VALUES" for a in args[1:]],
                                     values.read_text() if values.is_file() else None,
                                     str(cluster.bin)]).encode()).hexdigest()[:32]
    text = _RENDERED.get(key)
    if text is None:
        with shared_lock(f"helm-{key}"):
            text = shared_read(f"helm-{key}.yaml")
            if text is None:
                r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
                assert r.returncode == 0, f"helm template {rel['name']}: {r.stderr[-3000:]}"
                text = r.stdout
                shared_write(f"helm-{key}.yaml", text)
        _RENDERED[key] = text
    return helm_objects(text)


# `helm template` output this process has: key of the command and the values' text -> output
_RENDERED: dict[str, str] = {}


# Charts that pick the resource.k8s.io version from the cluster (.Capabilities.APIVersions: `helm install`
# reads the API server's discovery). `helm template` knows only its built-in list, which has 1.34's
# resource.k8s.io/v1 whatever --kube-version says, so the version the cluster serves is set as the chart's
# own override would (dra-driver-nvidia-gpu v0.4.1 values.yaml `resourceApiVersion`: "auto-detects the
# highest supported version from the cluster ... (v1 > v1beta2 > v1beta1)").
DISCOVERED_RESOURCE_API = {"dra-driver-nvidia-gpu"}


def resource_api_version(cluster: Cluster) -> str:
    """The newest resource.k8s.io version the API server serves, as the DRA driver's chart would detect it."""
    served = set(cluster.kubectl("api-versions").stdout.split())
    for version in ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1"):
        if version in served:
            return version
    raise AssertionError("the API server serves no resource.k8s.io version (Cluster(dra=True) serves it)")


def manager_configuration(objs: list[dict[str, Any]], chart: str) -> dict[str, Any]:
    """The controller manager's Configuration from the release's ConfigMap (Kueue's and LWS's charts
    both mount it as controller_manager_config.yaml)."""
    for o in objs:
        if o.get("kind") == "ConfigMap" and "controller_manager_config.yaml" in o.get("data", {}):
            return yaml.safe_load(o["data"]["controller_manager_config.yaml"])
    raise AssertionError(f"the {chart} release renders no manager ConfigMap")


def kueue_configuration(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return manager_configuration(objs, "kueue")


def namespaced(o: dict[str, Any], ns: str, cluster_kinds: set[str]) -> dict[str, Any]:
    """What `helm install -n NS` does to a namespaced object that names no namespace."""
    if o.get("kind") in cluster_kinds or o.get("metadata", {}).get("namespace"):
        return o
    return {**o, "metadata": {**o["metadata"], "namespace": ns}}


def apply_release(cluster: Cluster, rel: dict[str, Any], bundle: Path, kube_version: str,
                  kueue: bool = True) -> list[str]:
    """One release as `helm install` would put it in; returns what the overlay left out."""
    objs = helm_template(cluster, rel, bundle, kube_version)
    # overlay rule 1: the webhooks of the controllers that run here (LWS's only when asked for)
    loopback = ("kueue",) + (("lws",) if cluster.with_lws else ()) + (("volcano",) if cluster.with_volcano else ())
    keep, hooks, dropped = overlay.split(objs, loopback)
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": rel["namespace"]}}])
    crds = [o for o in keep if o["kind"] == "CustomResourceDefinition"]
    if crds:
        cluster.apply_crds(crds)
    kinds = cluster.cluster_scoped_kinds()
    rest = [namespaced(o, rel["namespace"], kinds) for o in keep if o["kind"] != "CustomResourceDefinition"]
    if rest:
        cluster.apply(rest)
    if rel["chart"] == "kueue" and kueue:
        cluster.start_kueue(kueue_configuration(objs))
        cluster.apply(overlay.kueue_webhooks(hooks, cluster.webhook_port, cluster.ca_bundle()))
    if rel["chart"] == "lws" and cluster.with_lws:
        cluster.start_lws(manager_configuration(objs, "lws"))
        cluster.apply(overlay.loopback_webhooks(hooks, cluster.lws_webhook_port, cluster.ca_bundle()))
    if rel["chart"] == "volcano" and cluster.with_volcano:
        cluster.start_volcano(objs, hooks)
    return dropped


def releases(bundle: Path) -> list[dict[str, Any]]:
    path = bundle / "kubernetes" / "helm" / "releases.yaml"
    return yaml.safe_load(path.read_text())["releases"] if path.is_file() else []


def run_node_labels(cluster: Cluster, bundle: Path) -> subprocess.CompletedProcess:
    script = bundle / "kubernetes" / "node-labels.sh"
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=600,
                       env={**cluster.env(), "KUBECTL": cluster.kubectl_bin})
    assert r.returncode == 0, f"node-labels.sh failed ({r.returncode}): {r.stderr[-3000:]}"
    return r


def manifests(cluster: Cluster, bundle: Path) -> list[dict[str, Any]]:
    """kubernetes/manifests/ in its kustomization's order where the bundle has one, else by file
    name (`kubectl apply -f kubernetes/manifests/`)."""
    kust = bundle / "kubernetes"
    if (kust / "kustomization.yaml").is_file():
        out = cluster.kubectl("kustomize", str(kust)).stdout
        return [o for o in _load_all(out) if o]
    objs: list[dict[str, Any]] = []
    for f in sorted((kust / "manifests").glob("*.yaml")):
        objs += [o for o in _load_all(f.read_text()) if o]
    return objs


def prerequisites(bundle: Path) -> list[dict[str, Any]]:
    """kubernetes/prerequisites/ by file name (`kubectl apply -f kubernetes/prerequisites/`): what the
    provider needs before any release; [] where the bundle has none."""
    objs: list[dict[str, Any]] = []
    for f in sorted((bundle / "kubernetes" / "prerequisites").glob("*.yaml")):
        objs += [o for o in _load_all(f.read_text()) if o]
    return objs


def operator_resources(bundle: Path) -> list[dict[str, Any]]:
    """kubernetes/operator-resources/ by file name: custom resources whose CRD an operator creates."""
    objs: list[dict[str, Any]] = []
    for f in sorted((bundle / "kubernetes" / "operator-resources").glob("*.yaml")):
        objs += [o for o in _load_all(f.read_text()) if o]
    return objs


def apply_operator_resources(cluster: Cluster, bundle: Path) -> list[dict[str, Any]]:
    """After the manifests: the operators' part (overlay rule 7: the CRDs their faked pods would
    create), then the README's own `kubectl wait` lines for those CRDs, run as written, then
    kubernetes/operator-resources/. Returns what it applied."""
    later = operator_resources(bundle)
    if not later:
        return []
    for rel in releases(bundle):
        extra = overlay.RUNTIME_CRDS.get(rel["chart"])
        if extra:
            cluster.apply([o for f in sorted((charts_dir() / "_extra-crds" / extra).glob("*.yaml"))
                           for o in _load_all(f.read_text()) if o])
    waits = [ln.split("#")[0].split() for ln in (bundle / "README.md").read_text().splitlines()
             if ln.strip().startswith("kubectl wait ") and " crd/" in ln]
    assert waits, "the README waits for no CRD before kubernetes/operator-resources/"
    for argv in waits:
        cluster.kubectl(*argv[1:], timeout=90)
    cluster.apply(later)
    return later


def workloads(bundle: Path) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for f in sorted((bundle / "kubernetes" / "workloads").glob("*.yaml")):
        objs += [o for o in _load_all(f.read_text()) if o]
    return objs


# Releases whose chart may be missing here, and why: the test plane applies the others, and these too
# where charts_dir() holds them (ORCHGEN_CHARTS naming a folder with <chart>/<version>/). The DRA driver's
# chart is not in ../shared/charts, and no source CI reaches has it: the Go module proxy answers 403 for
# github.com/NVIDIA/k8s-dra-driver-gpu and sigs.k8s.io/dra-driver-nvidia-gpu; it is in the GitHub
# repository kubernetes-sigs/dra-driver-nvidia-gpu, tag v0.4.1, deployments/helm/dra-driver-nvidia-gpu/,
# which a developer may put there by hand (never into the project). Its CRDs are the GPU Operator
# release's too (resource.nvidia.com, in gpu-operator v26.7.0's crds/), which is applied.
NO_CHART = {"dra-driver-nvidia-gpu": "chart not available offline; its ComputeDomain CRD comes with gpu-operator"}


def chart_missing(rel: dict[str, Any]) -> bool:
    return rel["chart"] in NO_CHART and not (charts_dir() / rel["chart"] / rel["version"]).is_dir()


def apply_bundle(cluster: Cluster, workload: Path, bundle: Path, kube_version: str = "1.33",
                 with_workloads: bool = True) -> dict[str, Any]:
    """The whole Helm/kubectl path; returns {dropped: [...], node_labels: stderr}."""
    plan = json.loads((bundle / "plan.json").read_text())
    planes = tuple(plan["planes"])
    cluster.add_nodes(fleet_nodes(workload, bundle, planes))
    # node-labels.sh before anything schedules (README: "1. The nodes ... (before `pulumi up`)"): a
    # Slurm node's NoSchedule taint does not move pods already bound there
    labels = run_node_labels(cluster, bundle) if (bundle / "kubernetes" / "node-labels.sh").is_file() else None
    # the README's install order: the provider's prerequisites, the releases, the manifests
    before = prerequisites(bundle)
    if before:
        cluster.apply(before)
    dropped: list[str] = []
    for rel in releases(bundle):
        if chart_missing(rel):
            dropped.append(f"release {rel['name']}: {NO_CHART[rel['chart']]}")
            continue
        dropped += apply_release(cluster, rel, bundle, kube_version)
    cluster.apply(manifests(cluster, bundle))
    apply_operator_resources(cluster, bundle)
    if cluster.with_volcano and "vc-scheduler" in cluster.procs:
        cluster.wait_volcano()
    if with_workloads:
        apply_workloads(cluster, bundle)
    return {"dropped": dropped, "node_labels": labels.stderr if labels else ""}


def apply_workloads(cluster: Cluster, bundle: Path) -> list[dict[str, Any]]:
    """`kubectl apply -f kubernetes/workloads/` (the README's last step); returns what it applied."""
    w = workloads(bundle)
    groups = {o["apiVersion"].rsplit("/", 1)[0] for o in w if "/" in o["apiVersion"]}
    for group in sorted(groups & set(overlay.SITE_CRDS)):  # overlay rule 8
        crds = [o for f in sorted((charts_dir() / "_extra-crds" / overlay.SITE_CRDS[group]).rglob("*.yaml"))
                for o in _load_all(f.read_text()) if o and o.get("kind") == "CustomResourceDefinition"]
        cluster.apply_crds(crds)
    if w:
        cluster.apply(w)
    return w
