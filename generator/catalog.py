"""The chart registry: every Helm chart a bundle may install, one record each.

A record says everything a maintainer must know about one chart, and every consumer reads it:
repository, chart, pinned version (overridable per fleet by `options.versions.<component>`),
namespace, the CRD groups it installs, the releases it waits for, when the planner installs it,
the GitOps modes it cannot use and why, its reference-data folder (../shared/reference: chart
defaults and CRDs, for the tests and `orchgen validate --chart-defaults`) and the README part that
describes it. Readers: render/kubernetes/helm.py (releases.yaml: crds, dependsOn, install order),
decide/planner._charts (`needed_when`), render/gitops/argocd.py (`gitops_unsupported`),
validate/helm_checks.py (`values_reference`), spec/checks.py (reserved namespaces) and the tests
(tests/test_registries.py holds every record to its reference data and a render test).

Adding a chart: one record here and one module with its `values(plan)` under
render/kubernetes/ (registered in helm.VALUES). See CONTRIBUTING.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Chart:
    """One Helm chart orchgen installs: where it comes from, its pinned version and its namespace."""

    component: str
    repo: str  # https Helm repository, or oci://registry/path (then `chart` is appended)
    chart: str
    version: str
    namespace: str
    # API groups of the CRDs the chart installs at the pinned version; a release that has any is
    # installed (and upgraded) before anything that uses its CRDs
    crd_groups: tuple[str, ...] = ()
    values_reference: str = ""  # where its upstream defaults sit under the reference dir (tests)
    depends_on: tuple[str, ...] = ()  # releases that must be running first (only those in the plan count)
    # the plan's needs (decide/planner._charts) any of which installs it: "gpu-stack:operator",
    # "network:<kind>", "gang:<scheduler>", "operator:<slinky|soperator>", "ray", "serving:<stack>"
    # (decide/serving.py), "autoscaler:keda", "notebooks" (a workload with interactive: true),
    # "nvlink:compute-domain" (a Kubernetes pool of multi-node NVLink domains: decide/platform.py)
    needed_when: tuple[str, ...] = ()
    crds_in_templates: bool = False  # its CRDs sit in templates/: `helm uninstall` would delete them
    gitops_unsupported: tuple[tuple[str, str], ...] = ()  # (GitOps mode, why it cannot install it)
    # (GitOps mode, the first chart version that mode can install): `gitops_unsupported` then holds
    # only for an older version (a fleet's options.versions override)
    gitops_supported_from: tuple[tuple[str, str], ...] = ()
    readme_part: str = ""  # the README part that describes it: templates/readme/<readme_part>.md.j2
    no_reference_why: str = ""  # why the reference data holds no defaults of it (then it sets no values)

    @property
    def installs_crds(self) -> bool:
        return bool(self.crd_groups)

    def unsupported_by(self, mode: str, version: str | None = None) -> str | None:
        """Why GitOps `mode` cannot install this chart at `version` (default: the pinned one); None
        when it can."""
        since = dict(self.gitops_supported_from).get(mode)
        if since and version_key(version or self.version) >= version_key(since):
            return None
        return dict(self.gitops_unsupported).get(mode)


def version_key(version: str) -> tuple[int, ...]:
    """A chart version's release numbers (v0.17.0 -> (0, 17, 0)); pre-release suffixes ignored."""
    import re

    return tuple(int(n) for n in re.findall(r"\d+", version.split("-")[0].split("+")[0])[:3])


# Charts whose CRDs sit in templates/ (not crds/) with no values key for `helm.sh/resource-policy:
# keep` at the pinned version, so a `helm uninstall` deletes them: kueue 0.19.2
# (charts/kueue/templates/crd/), volcano 1.15.1 (templates/*_v1*.yaml load crd/bases/ through
# tpl), slurm-operator-crds 1.2.1 (templates/; its values.yaml is empty). cert-manager's have
# crds.keep; gpu-operator's, KAI's, KubeRay's and Soperator's are in crds/, which Helm never
# deletes. The delivery paths never uninstall a CRD owner (README, "Nothing deleted by accident").
#
# GitOps: KAI v0.13.0's chart creates its Config (kai.scheduler/v1) in a pre-install Helm hook,
# which Argo CD runs as a PreSync hook, before it applies the chart's crds/: the first sync fails
# on a kind the cluster does not know yet. From v0.17.0 on, the chart renders the Config as a plain
# resource instead (kaiConfig.render=true with kaiConfigDeployer.enabled=false, its values.yaml:
# "For GitOps/ArgoCD installs disable this and set kaiConfig.render=true"), which orchgen sets, so
# Argo CD is refused only for an options.versions override older than v0.17.0. Helm itself
# (Pulumi, Flux) installs crds/ before any hook.
KAI_ARGOCD = ("KAI Scheduler's chart before v0.17.0 creates its Config in a pre-install Helm hook, "
              "which Argo CD runs as PreSync before the chart's CRDs exist, so the first sync fails; "
              "use KAI v0.17.0 or later, options.gitops flux or kustomize (Pulumi installs the "
              "releases), or options.gang_scheduler kueue or volcano")
# KAI moved from NVIDIA's GitHub organisation to its own (kai-scheduler/KAI-Scheduler); v0.17.0
# is its newest valid release there, published as oci://ghcr.io/kai-scheduler/kai-scheduler/
# kai-scheduler (.github/workflows/push-artifacts.yaml at v0.17.0; ../shared/charts/PROVENANCE.tsv).
# Releases before the move stay at their old home (oci://ghcr.io/nvidia/kai-scheduler): an
# options.versions override older than the move is fetched there (`chart`).
KAI_HOME = "oci://ghcr.io/kai-scheduler/kai-scheduler"
KAI_OLD_HOME = ("v0.17.0", "oci://ghcr.io/nvidia/kai-scheduler")  # (first release at KAI_HOME, old home)


CATALOG: dict[str, Chart] = {
    c.component: c
    for c in (
        # cert-manager's own install docs at the pinned release publish the chart as OCI
        # (oci://quay.io/jetstack/charts/cert-manager, tag = the version with its `v`).
        Chart("cert-manager", "oci://quay.io/jetstack/charts", "cert-manager", "v1.21.1", "cert-manager",
              crd_groups=("acme.cert-manager.io", "cert-manager.io"), values_reference="cert-manager",
              # both Slurm operators' webhooks take their certificates from it, and KServe's
              # (kserve-resources renders a cert-manager Issuer and Certificate for its webhook)
              needed_when=("operator:slinky", "operator:soperator", "serving:kserve"), readme_part="kubernetes_helm"),
        # gpu-operator's CRD groups include its node-feature-discovery subchart's (nfd.enabled stays true)
        Chart("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0", "gpu-operator",
              crd_groups=("nfd.k8s-sigs.io", "nvidia.com", "resource.nvidia.com"), values_reference="gpu-operator",
              needed_when=("gpu-stack:operator",), readme_part="kubernetes_nodes"),
        # Mellanox/network-operator v26.4.1: the chart's Chart.yaml is 26.4.1, published in NVIDIA's
        # NGC Helm repository beside the GPU Operator (its README: `helm repo add nvidia
        # https://helm.ngc.nvidia.com/nvidia`, namespace network-operator). CRD groups: the chart's
        # crds/ (NicClusterPolicy and friends, Multus' NetworkAttachmentDefinition); the nv-ipam
        # IPPool CRD comes from the operator itself once the NicClusterPolicy deploys nv-ipam, so an
        # IPPool waits for this release too. It waits for the GPU Operator: its NFD labels
        # (pci-15b3.present) come from the GPU Operator's NFD (nfd.enabled: false here).
        Chart("network-operator", "https://helm.ngc.nvidia.com/nvidia", "network-operator", "26.4.1",
              "network-operator", crd_groups=("k8s.cni.cncf.io", "mellanox.com", "nv-ipam.nvidia.com"),
              values_reference="network-operator", depends_on=("gpu-operator",),
              needed_when=("network:rdma-shared",), readme_part="kubernetes_fabric"),
        # The DRA driver for NVIDIA GPUs (kubernetes-sigs/dra-driver-nvidia-gpu, formerly
        # NVIDIA/k8s-dra-driver-gpu) v0.4.1, its newest release: ComputeDomains, i.e. multi-node NVLink
        # (IMEX daemons and channels) for the pods of one job on GB200-class racks. Its install docs at
        # v0.4.1 (docs/install.md): `helm install dra-driver-nvidia-gpu
        # oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu --namespace
        # dra-driver-nvidia-gpu`. CRDs in crds/ (ComputeDomain, ComputeDomainClique); the GPU Operator
        # v26.7.0's crds/ carry the same group, and Helm skips a CRD that exists, so the GPU Operator's
        # copy is the one a cluster keeps. It waits for the GPU Operator: the GPU driver it runs on, and
        # the clique labels of GFD. Neither ../shared/reference nor ../shared/charts holds it (and the Go
        # module proxy refuses its module); the chart at the repository's tag v0.4.1 (commit 764900e7,
        # deployments/helm/dra-driver-nvidia-gpu, Chart.yaml version 0.4.1) passes `helm lint` with the
        # bundle's values, and `helm template` of them renders the controller, a kubelet plugin of
        # compute-domains alone with NVIDIA_DRIVER_ROOT=/run/nvidia/driver, and the two compute-domain
        # DeviceClasses (tests/kubeenv/bundle.NO_CHART says how the tests take it where it is at hand).
        Chart("dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts", "dra-driver-nvidia-gpu",
              "0.4.1", "dra-driver-nvidia-gpu", crd_groups=("resource.nvidia.com",), depends_on=("gpu-operator",),
              values_reference="dra-driver-nvidia-gpu",
              needed_when=("nvlink:compute-domain",), readme_part="kubernetes_nodes",
              no_reference_why="not in the reference data: the three values it sets are checked against "
                               "v0.4.1's values.yaml (render/kubernetes/dra_driver.py)"),
        # aws/eks-charts stable/aws-efa-k8s-device-plugin (Chart.yaml v0.5.30, image v0.5.20), installed
        # into kube-system as the EKS user guide does (`helm install efa eks/aws-efa-k8s-device-plugin
        # -n kube-system`). Its defaults are not in the reference data, but the pinned chart is in
        # ../shared/charts (its values.yaml is what the tests check our one key against).
        Chart("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "aws-efa-k8s-device-plugin",
              "v0.5.30", "kube-system", values_reference="aws-efa-k8s-device-plugin",
              needed_when=("network:efa",), readme_part="kubernetes_fabric",
              no_reference_why="its defaults fit but `tolerations: []` (its nodeAffinity lists the EFA instance "
                               "types): only tolerations are set, checked against the pinned chart's values.yaml"),
        # prometheus-community/helm-charts kube-prometheus-stack 88.5.3 (its README: `helm repo add
        # prometheus-community https://prometheus-community.github.io/helm-charts`): the Prometheus
        # Operator and its CRDs (crds/ subchart: monitoring.coreos.com), Prometheus, Alertmanager,
        # Grafana, node-exporter and kube-state-metrics. Installed unless options.metrics says the site
        # runs its own; release `kube-prometheus-stack` in `monitoring`, so its Prometheus answers at
        # kube-prometheus-stack-prometheus.monitoring.svc:9090 (render/kubernetes/metrics.py).
        Chart("kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts",
              "kube-prometheus-stack", "88.5.3", "monitoring", crd_groups=("monitoring.coreos.com",),
              values_reference="kube-prometheus-stack", needed_when=("metrics:install",),
              readme_part="kubernetes_metrics"),
        Chart("kueue", "oci://registry.k8s.io/kueue/charts", "kueue", "0.19.2", "kueue-system",
              crd_groups=("kueue.x-k8s.io",), values_reference="kueue", needed_when=("gang:kueue",),
              depends_on=("kube-prometheus-stack",),  # its ServiceMonitor (enablePrometheus) needs the CRD
              crds_in_templates=True, readme_part="kubernetes_queues"),
        # volcano's CRD groups include some it ships but this bundle does not use (bus, config,
        # flow, nodeinfo, shard)
        Chart("volcano", "https://volcano-sh.github.io/helm-charts", "volcano", "1.15.1", "volcano-system",
              crd_groups=("batch.volcano.sh", "bus.volcano.sh", "config.volcano.sh", "flow.volcano.sh",
                          "nodeinfo.volcano.sh", "scheduling.volcano.sh", "shard.volcano.sh",
                          "topology.volcano.sh"),
              values_reference="volcano", needed_when=("gang:volcano",), crds_in_templates=True,
              readme_part="kubernetes_queues"),
        Chart("kai-scheduler", KAI_HOME, "kai-scheduler", "v0.17.0", "kai-scheduler",
              crd_groups=("kai.scheduler", "scheduling.run.ai"), values_reference="kai-scheduler/v0.17.0",
              needed_when=("gang:kai",), gitops_unsupported=(("argocd", KAI_ARGOCD),),
              gitops_supported_from=(("argocd", "v0.17.0"),),
              readme_part="kubernetes_queues"),
        # KubeRay's Volcano integration owns PodGroups: the operator does not start without their
        # CRD. KAI's integration only labels pods, but a RayCluster before KAI's webhooks would go
        # unqueued.
        Chart("kuberay-operator", "https://ray-project.github.io/kuberay-helm/", "kuberay-operator", "1.7.0",
              "kuberay-system", crd_groups=("ray.io",), values_reference="kuberay/kuberay-operator",
              depends_on=("volcano", "kai-scheduler"), needed_when=("ray", "serving:rayservice"),
              readme_part="kubernetes_workloads"),
        Chart("slurm-operator-crds", "oci://ghcr.io/slinkyproject/charts", "slurm-operator-crds", "1.2.1",
              "slinky", crd_groups=("slinky.slurm.net",), values_reference="slurm-operator/slurm-operator-crds",
              needed_when=("operator:slinky",), crds_in_templates=True, readme_part="slinky"),
        # Slinky's webhook certificates come from cert-manager; its CRDs are their own release.
        Chart("slurm-operator", "oci://ghcr.io/slinkyproject/charts", "slurm-operator", "1.2.1", "slinky",
              values_reference="slurm-operator/slurm-operator", depends_on=("slurm-operator-crds", "cert-manager"),
              needed_when=("operator:slinky",), readme_part="slinky"),
        # slurmd pods request nvidia.com/gpu: the device plugin must be there before NodeSets scale up.
        Chart("slurm", "oci://ghcr.io/slinkyproject/charts", "slurm", "1.2.1", "slurm",
              values_reference="slurm-operator/slurm", depends_on=("slurm-operator", "gpu-operator"),
              needed_when=("operator:slinky",), readme_part="slinky"),
        Chart("soperator", "oci://cr.eu-north1.nebius.cloud/soperator", "helm-soperator", "4.1.7",
              "soperator-system", crd_groups=("slurm.nebius.ai",), values_reference="soperator/soperator",
              # certManager.enabled defaults to true in its chart; its ServiceMonitor (on where a release
              # installs the monitoring CRDs, render/kubernetes/soperator.py) needs kube-prometheus-stack's
              depends_on=("cert-manager", "kube-prometheus-stack"),
              needed_when=("operator:soperator",), readme_part="soperator"),
        Chart("soperator-slurm-cluster", "oci://cr.eu-north1.nebius.cloud/soperator", "helm-slurm-cluster",
              "4.1.7", "soperator", values_reference="soperator/slurm-cluster",
              depends_on=("soperator", "gpu-operator"), needed_when=("operator:soperator",),
              readme_part="soperator"),
        # --- the serving platform (issue 21; decide/serving.py picks the stack per workload) ---
        # KServe v0.20.0 publishes its charts as OCI (kserve .github/workflows/helm-publish.yml:
        # oci://ghcr.io/kserve/charts); its CRDs are their own chart, in templates/ (a `lookup`
        # guard skips them where they exist), so `helm uninstall` would delete them.
        Chart("kserve-crd", "oci://ghcr.io/kserve/charts", "kserve-crd", "v0.20.0", "kserve",
              crd_groups=("serving.kserve.io",), values_reference="kserve/kserve-crd",
              needed_when=("serving:kserve",), crds_in_templates=True, readme_part="kubernetes_serving"),
        # the controller's webhook certificate is a cert-manager Certificate (kserve-resources
        # files/kserve/resources.yaml), so cert-manager is installed first
        Chart("kserve-resources", "oci://ghcr.io/kserve/charts", "kserve-resources", "v0.20.0", "kserve",
              values_reference="kserve/kserve-resources", depends_on=("kserve-crd", "cert-manager"),
              needed_when=("serving:kserve",), readme_part="kubernetes_serving"),
        # LeaderWorkerSet (registry.k8s.io/lws/charts, hack/push-chart.sh); CRDs in crds/; its webhook
        # certificates are its own (enableCertManager: false by default)
        Chart("lws", "oci://registry.k8s.io/lws/charts", "lws", "v0.10.0", "lws-system",
              crd_groups=("disaggregatedset.x-k8s.io", "leaderworkerset.x-k8s.io"), values_reference="lws",
              needed_when=("serving:lws",), readme_part="kubernetes_serving"),
        # zero-to-jupyterhub (https://hub.jupyter.org/helm-chart/, the project's install docs):
        # notebooks for `interactive: true` workloads (render/kubernetes/jupyterhub.py)
        Chart("jupyterhub", "https://hub.jupyter.org/helm-chart/", "jupyterhub", "4.4.0", "jupyterhub",
              values_reference="jupyterhub", needed_when=("notebooks",), readme_part="kubernetes_serving"),
        # KEDA (kedacore/charts, https://kedacore.github.io/charts): ScaledObjects on Prometheus
        # queries; its CRDs sit in templates/crds/
        Chart("keda", "https://kedacore.github.io/charts", "keda", "2.20.2", "keda",
              crd_groups=("eventing.keda.sh", "keda.sh"), values_reference="keda",
              needed_when=("autoscaler:keda",), crds_in_templates=True, readme_part="kubernetes_serving"),
    )
}


def needed(needs: set[str]) -> list[str]:
    """The components the plan's needs install, in catalog order (the plan's release order)."""
    return [c.component for c in CATALOG.values() if needs & set(c.needed_when)]


def chart(component: str, overrides: dict[str, str] | None = None) -> Chart:
    """The catalog entry with the fleet's version override applied."""
    entry = CATALOG[component]
    version = (overrides or {}).get(component)
    if not version:
        return entry
    if entry.repo == KAI_HOME and version_key(version) < version_key(KAI_OLD_HOME[0]):
        return replace(entry, version=version, repo=KAI_OLD_HOME[1])  # published before the move
    return replace(entry, version=version)


# Namespaces a tenant may not take (issue 19): a tenant's name becomes a Kueue-managed namespace
# with quotas and, under KAI, a deny policy, so it must not be one a platform component runs in.
# Kubernetes' own (`default` and every kube-*: kube-system, kube-public, kube-node-lease), the GitOps
# tools' (Argo CD's install manifests: argocd; `flux install`: flux-system) and each chart's above.
PLATFORM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "argocd", "flux-system")
PLATFORM_NAMESPACE_PREFIXES = ("kube-",)
# orchgen's own namespaces (render/kubernetes/gpu_health.py's orchgen-gpu-health ...): the prefix is
# orchgen's, now and for any namespace a later release adds
ORCHGEN_NAMESPACE_PREFIX = "orchgen-"


def reserved_namespace(name: str) -> str | None:
    """Who owns namespace `name` (None: no platform component), from the chart records above."""
    if name in PLATFORM_NAMESPACES or name.startswith(PLATFORM_NAMESPACE_PREFIXES):
        return {"argocd": "Argo CD's namespace", "flux-system": "Flux's namespace",
                "default": "Kubernetes' default namespace"}.get(name, "a Kubernetes system namespace")
    if name.startswith(ORCHGEN_NAMESPACE_PREFIX):
        return f"orchgen's own namespaces are named {ORCHGEN_NAMESPACE_PREFIX}*"
    owners = [c.component for c in CATALOG.values() if c.namespace == name]
    if owners:
        return f"the {', '.join(owners)} chart" + ("s' namespace" if len(owners) > 1 else "'s namespace")
    return None


def known_versions(component: str) -> frozenset[str]:
    """The chart versions of `component` orchgen knows (the pinned one); empty for an unknown component."""
    entry = CATALOG.get(component)
    return frozenset({entry.version}) if entry else frozenset()


# --- GPU models as GRES types (issue 36: a typo in `gpu.type` is refused, not planned) ---------------------
# The names a site writes as the GRES type of a GPU (gres.conf(5) Type=, lower case here; Slurm keeps the
# case a site writes, and `_` and `-` count alike). Sources: the MIG table's keys (spec/mig.py: NVIDIA's
# MIG user guide), NVIDIA's data-centre and workstation GPUs without MIG (nvidia.com/en-us/data-center/),
# AMD Instinct (amd.com/en/products/accelerators/instinct) and Intel Gaudi. A Type with AutoDetect is
# matched as a substring of the name NVML reports (gres.conf(5) Type: "nvidia_h100_80gb_hbm3" holds
# h100), so a name is known when one of its `-`/`_`-separated runs is (gpu_type_problem). Any other name is
# the site's own: the pool says so with `gpu.custom: true`.
GPU_TYPES: tuple[str, ...] = tuple(sorted({
    # spec/mig.py PROFILES (tests/test_registries.py holds the two lists together)
    "a30", "a100-40gb", "a100-80gb", "a100", "h100-80gb", "h100-94gb", "h100-nvl", "h100-96gb", "h100", "h200",
    "gh200-96gb", "gh200-144gb", "gh200", "b200", "gb200",
    # NVIDIA without MIG
    "p100", "v100", "v100s", "t4", "a2", "a10", "a10g", "a16", "a40", "a800", "h800", "h20", "l4", "l20", "l40",
    "l40s", "b100", "b300", "gb300", "rtx6000", "rtx8000", "a6000", "rtx-a6000", "rtx-pro-6000", "rtx4090",
    "rtx5090",
    # AMD Instinct, Intel Gaudi
    "mi210", "mi250", "mi250x", "mi300a", "mi300x", "mi325x", "mi355x", "gaudi2", "gaudi3"}))
_GPU_KNOWN = frozenset(GPU_TYPES)


def _gpu_norm(name: str) -> str:
    return name.lower().replace("_", "-")


def gpu_type_known(name: str) -> bool:
    """Whether GRES type `name` names a GPU model of GPU_TYPES, whole or as a run of its `-`/`_`/`.`
    separated parts (nvidia_h100_80gb_hbm3, tesla_v100-sxm2-16gb: as Slurm's NVML AutoDetect names them)."""
    import re

    norm = _gpu_norm(name)
    if norm in _GPU_KNOWN:
        return True
    parts = [p for p in re.split(r"[-.]", norm) if p]
    return any("-".join(parts[i:j]) in _GPU_KNOWN for i in range(len(parts)) for j in range(i + 1, len(parts) + 1))


def gpu_type_hint(name: str) -> str | None:
    """The known GPU type `name` is most likely a typo of (h1000 -> h100; nvidia_h1000_80gb ->
    nvidia_h100_80gb), or None."""
    import difflib
    import re

    norm = _gpu_norm(name)
    close = difflib.get_close_matches(norm, GPU_TYPES, n=1, cutoff=0.75)
    if close:
        return close[0]
    pieces = re.split(r"([-_.])", name)  # a typo in one part of a longer name: that part replaced
    for i in range(0, len(pieces), 2):
        close = difflib.get_close_matches(pieces[i].lower(), GPU_TYPES, n=1, cutoff=0.75)
        if close and len(pieces[i]) >= 2:
            return "".join(pieces[:i] + [close[0]] + pieces[i + 1:])
    return None


# The CPU architectures (`uname -m`) each Kubernetes component publishes images for (issue 36), where orchgen
# has looked it up in the project's own release build (the platforms its images are pushed for); a component
# not listed is not checked. `uname -m` names: x86_64 = linux/amd64, aarch64 = linux/arm64, ppc64le.
# - gpu-operator (its driver, device plugin, dcgm-exporter DaemonSets): linux/amd64 and linux/arm64
#   (NVIDIA/gpu-operator multi-arch.mk, DOCKER_BUILD_PLATFORM_OPTIONS, commit 17c53a2bd67216e7c9e86db64c5fd04784cb943c)
# - network-operator (the operator and its OFED / RDMA DaemonSets): BUILD_ARCH= amd64 arm64 (Mellanox/network-
#   operator Makefile, image-build-multiarch, commit 0039f1560f0af7f4f30774ccd57a80a62a3b5a02)
# - kube-prometheus-stack: Prometheus, Alertmanager and node-exporter (a DaemonSet) build DOCKER_ARCHS ?= amd64
#   armv7 arm64 ppc64le s390x (prometheus/prometheus Makefile, the Makefile.common they share, commit
#   000fa45acaee5cccf4496abb3f469c1fdd411f5f); Grafana's platforms are not looked up
# - kueue: PLATFORMS ?= linux/amd64,linux/arm64,linux/s390x,linux/ppc64le (kubernetes-sigs/kueue Makefile,
#   commit 004680ed535ab993e93fc1155281f6d6057370ee)
# - volcano: the release pushes DOCKER_PLATFORMS="linux/amd64,linux/arm64" (volcano-sh/volcano
#   .github/workflows/release.yaml, commit 05cd74f69e5c476c8adc608c215be4cc9be3c9c1)
# - kai-scheduler: DOCKER_BUILD_PLATFORM=linux/amd64,linux/arm64 (kai-scheduler/KAI-Scheduler
#   .github/workflows/push-artifacts.yaml, commit 08bf84b81338c428a513018cef285bf3b6bfc0a8)
# - kuberay-operator: platforms: linux/amd64,linux/arm64 (ray-project/kuberay .github/workflows/image-release.yaml,
#   commit 03f1a2e6939791abe896788a59f8171b6ad0b02b)
# - cert-manager: oci_platforms ?= linux/amd64,linux/arm/v7,linux/arm64,linux/ppc64le (cert-manager/cert-manager
#   make/_shared/oci-build/00_mod.mk, commit 5e425fc4d033ee2fb3e37753cf19adcf94a7ead5)
# - slurm (Slinky's slurmctld/slurmd/login images): platforms = ["linux/amd64", "linux/arm64"]
#   (SlinkyProject/containers schedmd/slurm/master/docker-bake.hcl, commit 4194e1c181a8dab8aa692dbf037c48508726f07b)
# - soperator, soperator-slurm-cluster: the operator's and Slurm's images are built in a matrix of linux/amd64 and
#   linux/arm64 (nebius/soperator .github/workflows/one_job.yml, commit 002c5e60565621458289d579f48c11e9f4ca0ef7)
# - kserve-resources: the controller is pushed for linux/amd64,linux/arm/v7,linux/arm64/v8,linux/ppc64le,linux/s390x
#   (kserve/kserve .github/workflows/kserve-controller-docker-publish.yml,
#   commit 00bd5d0669bef52785a0d4f945a741d91fd59066)
# - lws: PLATFORMS ?= linux/arm64,linux/amd64,linux/s390x,linux/ppc64le (kubernetes-sigs/lws Makefile,
#   commit 02039b4e213fa8f7f6f71c9d9b93eba5b260afc3)
# - keda: BUILD_PLATFORMS ?= linux/amd64,linux/arm64 (kedacore/keda Makefile,
#   commit 005f1dc26df475e366d7f3ea559bed0ca74a4fcf)
# Not listed (not checked): the CRD-only charts (kserve-crd, slurm-operator-crds); slurm-operator, whose operator
# image's platforms orchgen found no build file for; jupyterhub, whose chartpress platforms are set outside the
# files looked at (publish.yml sets up QEMU for a multi-arch build); aws-efa-k8s-device-plugin, an EKS image
# published to Amazon ECR only.
IMAGE_ARCHES: dict[str, tuple[str, ...]] = {
    "cert-manager": ("x86_64", "aarch64", "ppc64le"),
    "gpu-operator": ("x86_64", "aarch64"),
    "network-operator": ("x86_64", "aarch64"),
    "kube-prometheus-stack": ("x86_64", "aarch64", "ppc64le"),
    "kueue": ("x86_64", "aarch64", "ppc64le"),
    "volcano": ("x86_64", "aarch64"),
    "kai-scheduler": ("x86_64", "aarch64"),
    "kuberay-operator": ("x86_64", "aarch64"),
    "slurm": ("x86_64", "aarch64"),
    "soperator": ("x86_64", "aarch64"),
    "soperator-slurm-cluster": ("x86_64", "aarch64"),
    "kserve-resources": ("x86_64", "aarch64", "ppc64le"),
    "lws": ("x86_64", "aarch64", "ppc64le"),
    "keda": ("x86_64", "aarch64"),
}
# The components whose pods run on every node of the Kubernetes plane (DaemonSets, or Slurm's own daemons as
# pods on the Slurm nodes): a pool of an architecture they lack cannot be on the plane at all. The others run a
# few controller pods (Deployments) that can be placed on the nodes of another architecture.
NODE_COMPONENTS = frozenset({"gpu-operator", "network-operator", "kube-prometheus-stack", "slurm",
                             "soperator-slurm-cluster"})

# What a bare-metal Slurm plane's bring-up installs on each node, and the architectures it is had for (issue 36):
# - slurm-wlm (slurmd, slurmctld) and munge: Debian's and Ubuntu's own packages. Both source packages build
#   `Architecture: any` binaries, which Debian builds on every release architecture (bookworm and trixie:
#   amd64, arm64, ppc64el, s390x, ...; https://www.debian.org/releases/bookworm/ "Supported architectures") and
#   Ubuntu on its ports (arm64, ppc64el, s390x): every architecture orchgen knows;
# - NHC: shell scripts installed from the 1.4.3 source (fetch_nhc.sh), architecture-independent;
# - enroot (pyxis' runtime, a manual step the bring-up prints): NVIDIA's .deb releases are named
#   enroot_<v>-1_<dpkg arch>.deb and published for amd64 and arm64 (NVIDIA/enroot doc/installation.md; the arm64
#   .deb: NVIDIA/enroot issue #121); no ppc64el .deb was found, so a ppc64le node builds it from source
#   (doc/installation.md "From source"). pyxis itself is built from source on the node.
SLURM_PACKAGE_ARCHES: dict[str, tuple[str, ...]] = {
    "slurm-wlm": ("x86_64", "aarch64", "ppc64le"),
    "munge": ("x86_64", "aarch64", "ppc64le"),
    "nhc": ("x86_64", "aarch64", "ppc64le"),
    "enroot": ("x86_64", "aarch64"),
}
# the packages the bring-up installs itself (a missing architecture refuses the plan); the others are the
# operator's manual steps (a missing architecture is a warning with the way around it)
SLURM_BRINGUP_PACKAGES = frozenset({"slurm-wlm", "munge", "nhc"})
# Grace CPUs: the GPUs that come on an Arm (aarch64) host, and the platforms built on them
_GRACE_GPUS = ("gh200", "gb200", "gb300")
_GRACE_PLATFORMS = ("gb200-nvl72",)


def arch_of(pool) -> str:
    """A pool's CPU architecture: `arch`, else aarch64 for a Grace GPU or platform, else x86_64."""
    if pool.arch:
        return pool.arch
    gpu = (pool.gpu.type or "").lower() if pool.gpu else ""
    if pool.platform in _GRACE_PLATFORMS or any(gpu.startswith(g) for g in _GRACE_GPUS):
        return "aarch64"
    return "x86_64"
