"""Every Helm chart a bundle may install: repository, chart, pinned version, namespace.

One place for versions (the ones checked against ../shared/reference), overridable per fleet by
`options.versions.<component>`. Adding a component is adding an entry here.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chart:
    component: str
    repo: str  # https Helm repository, or oci://registry/path (then `chart` is appended)
    chart: str
    version: str
    namespace: str
    installs_crds: bool  # install (and upgrade) before anything that uses its CRDs
    values_reference: str  # where its upstream defaults sit under the reference dir (tests)


CATALOG: dict[str, Chart] = {
    c.component: c
    for c in (
        # cert-manager's own install docs at the pinned release publish the chart as OCI
        # (oci://quay.io/jetstack/charts/cert-manager, tag = the version with its `v`).
        Chart("cert-manager", "oci://quay.io/jetstack/charts", "cert-manager", "v1.21.1",
              "cert-manager", True, "cert-manager"),
        Chart("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0",
              "gpu-operator", True, "gpu-operator"),
        # Mellanox/network-operator v26.4.1: the chart's Chart.yaml is 26.4.1, published in NVIDIA's
        # NGC Helm repository beside the GPU Operator (its README: `helm repo add nvidia
        # https://helm.ngc.nvidia.com/nvidia`, namespace network-operator).
        Chart("network-operator", "https://helm.ngc.nvidia.com/nvidia", "network-operator", "26.4.1",
              "network-operator", True, "network-operator"),
        # aws/eks-charts stable/aws-efa-k8s-device-plugin (Chart.yaml v0.5.30, image v0.5.20), installed
        # into kube-system as the EKS user guide does (`helm install efa eks/aws-efa-k8s-device-plugin
        # -n kube-system`). Its defaults are not in the reference data: the bundle sets no values.
        Chart("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "aws-efa-k8s-device-plugin",
              "v0.5.30", "kube-system", False, "aws-efa-k8s-device-plugin"),
        Chart("kueue", "oci://registry.k8s.io/kueue/charts", "kueue", "0.19.2",
              "kueue-system", True, "kueue"),
        Chart("volcano", "https://volcano-sh.github.io/helm-charts", "volcano", "1.15.1",
              "volcano-system", True, "volcano"),
        Chart("kai-scheduler", "oci://ghcr.io/nvidia/kai-scheduler", "kai-scheduler", "v0.13.0",
              "kai-scheduler", True, "kai-scheduler"),
        Chart("kuberay-operator", "https://ray-project.github.io/kuberay-helm/", "kuberay-operator",
              "1.7.0", "kuberay-system", True, "kuberay/kuberay-operator"),
        Chart("slurm-operator-crds", "oci://ghcr.io/slinkyproject/charts", "slurm-operator-crds",
              "1.2.1", "slinky", True, "slurm-operator/slurm-operator-crds"),
        Chart("slurm-operator", "oci://ghcr.io/slinkyproject/charts", "slurm-operator", "1.2.1",
              "slinky", False, "slurm-operator/slurm-operator"),
        Chart("slurm", "oci://ghcr.io/slinkyproject/charts", "slurm", "1.2.1",
              "slurm", False, "slurm-operator/slurm"),
        Chart("soperator", "oci://cr.eu-north1.nebius.cloud/soperator", "helm-soperator", "4.1.7",
              "soperator-system", True, "soperator/soperator"),
        Chart("soperator-slurm-cluster", "oci://cr.eu-north1.nebius.cloud/soperator",
              "helm-slurm-cluster", "4.1.7", "soperator", False, "soperator/slurm-cluster"),
    )
}


def chart(component: str, overrides: dict[str, str] | None = None) -> Chart:
    """The catalog entry with the fleet's version override applied."""
    entry = CATALOG[component]
    version = (overrides or {}).get(component)
    if version:
        from dataclasses import replace

        entry = replace(entry, version=version)
    return entry


# Namespaces a tenant may not take (issue 19): a tenant's name becomes a Kueue-managed namespace
# with quotas and, under KAI, a deny policy, so it must not be one a platform component runs in.
# Kubernetes' own (`default` and every kube-*: kube-system, kube-public, kube-node-lease), the GitOps
# tools' (Argo CD's install manifests: argocd; `flux install`: flux-system) and each chart's above.
PLATFORM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "argocd", "flux-system")
PLATFORM_NAMESPACE_PREFIXES = ("kube-",)


def reserved_namespace(name: str) -> str | None:
    """Who owns namespace `name` (None: no platform component), from the chart records above."""
    if name in PLATFORM_NAMESPACES or name.startswith(PLATFORM_NAMESPACE_PREFIXES):
        return {"argocd": "Argo CD's namespace", "flux-system": "Flux's namespace",
                "default": "Kubernetes' default namespace"}.get(name, "a Kubernetes system namespace")
    owners = [c.component for c in CATALOG.values() if c.namespace == name]
    if owners:
        return f"the {', '.join(owners)} chart" + ("s' namespace" if len(owners) > 1 else "'s namespace")
    return None


def known_versions(component: str) -> frozenset[str]:
    """The chart versions of `component` orchgen knows (the pinned one); empty for an unknown component."""
    entry = CATALOG.get(component)
    return frozenset({entry.version}) if entry else frozenset()
