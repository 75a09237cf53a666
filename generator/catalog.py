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
