"""The Flux delivery path for real (issue 27's GitOps piece, issue 20's "every delivery path converges"):
Flux's own source-, kustomize- and helm-controller (tests/kubeenv/flux/build.sh) reconcile a bundle
from a Git repository served on loopback into the loopback control plane (tests/kubeenv), with
Kueue's real controller and GKE's limit on critical-priority pods reproduced by the API server's
admission configuration.

The site's part is only what the bundle README's "GitOps (Flux)" section has it do: commit the bundle
and `gitops/bootstrap/flux-kustomization.yaml` under `clusters/<name>/`, and `flux bootstrap` (Flux's
CRDs, its controllers, the `flux-system` GitRepository and Kustomization). Every other object reaches
the cluster through Flux. tests/kubeenv/overlay.py (rules 10 to 13) lists what differs on loopback.

The fleet is GKE's (gke-training's a3-mega pool, two nodes, and the CPU node pool every GKE cluster
has for its system pods), one training workload and its tenant, metrics brought by the site: the
bundle's releases are then the GPU Operator (whose system-node-critical pods GKE admits only under
a quota) and Kueue, and its Kustomizations are prerequisites -> releases -> manifests.
"""
from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.render.gitops.flux import helm_repository_name
from tests._consumers import require
from tests.kubeenv import bundle as kb
from tests.kubeenv import overlay
from tests.kubeenv.cluster import FLUX_CONTROLLERS, flux_bin_dir, free_port
from tests.kubeenv.fixture import kube_factory  # noqa: F401
from tests.kubeenv.gitops import GitServer, HelmRepoServer, OciRegistry, package
from tests.test_kube_real import GKE_ADMISSION, _critical_pod, _operator_refusals
from tests.support import orchgen_argv

REPO = Path(__file__).resolve().parent.parent
NAME = "gke-flux"

FLEET = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata:
  name: gke-flux
fleet:
  provider: gke
  fabric:
    kind: ethernet
    nodes_per_leaf: 16
  pools:
    - name: a3-mega
      nodes: 2
      gpu: {type: h100, count: 8}
      cpus: 208
      memory_gib: 1872
    - name: system
      nodes: 1
      cpus: 16
      memory_gib: 64
tenants:
%s
workloads:
  - name: pretrain
    nodes: 2
    tightly_coupled: true
    pool: a3-mega
    tenant: research
options:
  gitops: flux
  metrics: site
  prometheus_url: http://prometheus.monitoring:9090
"""
TENANTS_V1 = ["research", "product"]
TENANTS_V2 = ["research", "vision"]  # the re-plan: product leaves, vision joins


def plan(tenants: list[str], d: Path) -> tuple[Path, Path]:
    d.mkdir(parents=True, exist_ok=True)
    workload = d / "workload.yaml"
    workload.write_text(FLEET % "\n".join(f"  - {{name: {t}, share: 1}}" for t in tenants))
    out = d / NAME
    r = subprocess.run([*orchgen_argv(), "plan", str(workload), "-o", str(out)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return workload, out


def flux_crds() -> list[Path]:
    """The CRDs `flux install` applies: each built controller's config/crd/bases/ at its version, from
    the Go module cache (../shared/reference/flux holds five of the eight kinds: no HelmChart, Bucket
    or ExternalArtifact, which source-controller needs to start)."""
    files: list[Path] = []
    for c in ("source", "kustomize", "helm"):
        r = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", f"github.com/fluxcd/{c}-controller"],
                           cwd=REPO / "tests" / "kubeenv" / "flux" / c, capture_output=True, text=True, timeout=120)
        require(r.returncode == 0 and r.stdout.strip(), f"github.com/fluxcd/{c}-controller not in the Go "
                "module cache: run tests/kubeenv/flux/build.sh")
        files += sorted((Path(r.stdout.strip()) / "config" / "crd" / "bases").glob("*.yaml"))
    return files


def require_flux() -> None:
    d = flux_bin_dir()
    missing = [b for b in (*FLUX_CONTROLLERS, "oci-registry") if not (d / b).is_file()]
    require(not missing, f"Flux's controllers not built ({', '.join(missing)} missing in {d}): run "
                         "tests/kubeenv/flux/build.sh")
    require(shutil.which("git"), "git not installed (the loopback GitOps repository)")
    require(shutil.which("go"), "go not installed (Flux's CRDs are read from the Go module cache)")


class Site:
    """The loopback GitOps repository and chart sources, and the tree committed to it (overlay 10-12)."""

    def __init__(self, cluster, root: Path):
        self.cluster = cluster
        self.root = root
        self.helm = cluster.bin / "helm"
        self.helm_home = root / "helm"
        self.git = GitServer(root / "git")
        self.charts = HelmRepoServer(root / "helm-repo")
        self.oci = OciRegistry(flux_bin_dir() / "oci-registry", cluster.dir)
        self.kueue_port = free_port()
        self.repo_urls: dict[str, str] = {}
        self.pushed: set[tuple[str, str]] = set()

    def serve_charts(self, bundle: Path) -> None:
        for rel in kb.releases(bundle):
            chart = kb.charts_dir() / rel["chart"] / rel["version"]
            if rel["repo"].startswith("oci://"):
                if (rel["chart"], rel["version"]) not in self.pushed:
                    tgz = package(self.helm, chart, self.root / "oci-charts", self.helm_home)
                    path = rel["repo"].removeprefix("oci://").split("/", 1)[1]  # the chart lands at <path>/<chart>
                    self.oci.push(self.helm, tgz, path, self.helm_home)
                    self.pushed.add((rel["chart"], rel["version"]))
            else:
                self.repo_urls[rel["repo"]] = self.charts.add(
                    self.helm, helm_repository_name(rel["repo"]), [chart], self.helm_home)

    def tree(self, bundle: Path) -> Path:
        """The bundle as committed, with overlay rules 11 and 12 applied to the copy."""
        tree = self.root / "tree" / bundle.parent.name
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(bundle, tree / NAME)
        rel_dir = tree / NAME / "gitops" / "releases"
        by_url = {u.rstrip("/"): v for u, v in self.repo_urls.items()}
        src = rel_dir / "sources.yaml"
        objs = [o for o in yaml.safe_load_all(src.read_text()) if o]
        src.write_text(yaml.safe_dump_all(overlay.flux_sources(
            objs, lambda u: by_url[u.rstrip("/")], self.oci.host)))
        for rel in kb.releases(bundle):
            f = rel_dir / f"{rel['name']}.yaml"
            hr = yaml.safe_load(f.read_text())
            rendered = kb.helm_template(self.cluster, rel, bundle, "1.33")
            post = overlay.flux_post_renderers(rendered, self.kueue_port, self.cluster.ca_bundle())
            if post:
                hr["spec"]["postRenderers"] = post
            f.write_text(yaml.safe_dump(hr))
        return tree

    def commit(self, bundle: Path, message: str) -> str:
        self.serve_charts(bundle)
        tree = self.tree(bundle)
        return self.git.commit({NAME: tree / NAME, f"clusters/{NAME}/{NAME}.yaml":
                                bundle / "gitops" / "bootstrap" / "flux-kustomization.yaml"}, message)

    def stop(self) -> None:
        self.git.stop()
        self.charts.stop()
        self.oci.stop()


def ready(obj: dict[str, Any]) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return c if c["status"] == "True" else None
    return None


def ready_at(obj: dict[str, Any]) -> dt.datetime:
    c = ready(obj)
    assert c, obj["metadata"]["name"]
    return dt.datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))


def flux_objects(cluster, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in cluster.get(kind, "-n", "flux-system")["items"]}


def reconcile_now(cluster, kind: str, name: str) -> None:
    """What `flux reconcile` does: the requestedAt annotation (instead of waiting out the interval)."""
    cluster.kubectl("annotate", "--overwrite", "-n", "flux-system", kind, name,
                    f"reconcile.fluxcd.io/requestedAt={dt.datetime.now(dt.timezone.utc).isoformat()}")


def diagnose(cluster) -> str:
    out = []
    for kind in ("gitrepositories", "ocirepositories", "helmrepositories", "kustomizations", "helmreleases"):
        for name, o in flux_objects(cluster, kind).items():
            conds = [(c["type"], c["status"], c.get("message", "")[:300])
                     for c in (o.get("status") or {}).get("conditions") or []]
            out.append(f"{kind}/{name}: {conds}")
    for p in ("source-controller", "kustomize-controller", "helm-controller", "kueue"):
        out.append(f"--- {p}:\n{cluster.log(p, 1500)}")
    return "\n".join(out)


@pytest.fixture
def flux(tmp_path: Path, kube_factory):
    require_flux()
    cluster = kube_factory(admission_config=GKE_ADMISSION)
    # the GKE limit is real here: a critical pod where no quota covers the scope is refused
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "probe"}}])
    r = cluster.apply([_critical_pod("probe")], check=False)
    assert r.returncode != 0 and "insufficient quota" in r.stderr, r.stderr
    workload, bundle = plan(TENANTS_V1, tmp_path / "v1")
    # the README's first step, before any delivery path: the nodes join, node-labels.sh
    cluster.add_nodes(kb.fleet_nodes(workload, bundle))
    kb.run_node_labels(cluster, bundle)
    site = Site(cluster, tmp_path / "site")
    try:
        site.commit(bundle, "gke-flux: first plan")
        # `flux bootstrap`: Flux's CRDs, its controllers, the GitRepository and Kustomization (rule 10)
        crds = [o for f in flux_crds() for o in yaml.safe_load_all(f.read_text()) if o]
        cluster.apply(crds)
        cluster.wait_established([o["metadata"]["name"] for o in crds])
        cluster.start_flux()
        cluster.apply(overlay.flux_bootstrap(site.git.url, f"clusters/{NAME}"))
        yield cluster, site, bundle
    finally:
        site.stop()


def start_kueue_when_installed(cluster, port: int) -> bool:
    """Once helm-controller has installed Kueue's release, run its manager with the Configuration of
    the ConfigMap it installed (the bundle's values), as the chart's Deployment would."""
    if "kueue" in cluster.procs:
        return True
    hr = flux_objects(cluster, "helmreleases").get("kueue")
    if not hr or not ready(hr):
        return False
    cms = cluster.get("configmaps", "-n", "kueue-system")["items"]
    cfg = next(yaml.safe_load(c["data"]["controller_manager_config.yaml"]) for c in cms
               if "controller_manager_config.yaml" in (c.get("data") or {}))
    cluster.start_kueue(cfg, port=port)
    # what Kueue's webhooks admit (the manifests' queues and flavors) may have been refused while its
    # pod was only faked: retry now rather than after the Kustomization's retryInterval
    for k, o in flux_objects(cluster, "kustomizations").items():
        if not ready(o):
            reconcile_now(cluster, "kustomization", k)
    return True


def converged(cluster, site, names: set[str], first_ready: dict[tuple[str, str], dt.datetime]) -> bool:
    """Also records when each object was first seen Ready (its Ready condition's transition time):
    a later reconcile (a requested one, a retry) moves that time, never the first one."""
    start_kueue_when_installed(cluster, site.kueue_port)
    ks = flux_objects(cluster, "kustomizations")
    hrs = flux_objects(cluster, "helmreleases")
    for o in [*ks.values(), *hrs.values()]:
        if ready(o):
            first_ready.setdefault((o["kind"], o["metadata"]["name"]), ready_at(o))
    return names <= set(ks) and all(ready(o) for o in ks.values()) and hrs and all(ready(o) for o in hrs.values())


def test_flux_delivers_the_gke_bundle_in_order_and_a_replan_converges(flux) -> None:
    cluster, site, bundle = flux
    names = {"flux-system", NAME, f"{NAME}-prerequisites", f"{NAME}-releases", f"{NAME}-manifests"}
    first_ready: dict[tuple[str, str], dt.datetime] = {}
    try:
        cluster.wait_for("every Kustomization and HelmRelease Ready",
                         lambda: converged(cluster, site, names, first_ready), timeout=420, every=2)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{diagnose(cluster)}") from None
    ks = flux_objects(cluster, "kustomizations")
    hrs = flux_objects(cluster, "helmreleases")
    assert set(hrs) == {r["name"] for r in kb.releases(bundle)}
    # the order each dependsOn asks for, as the controllers reached it
    for o in [*ks.values(), *hrs.values()]:
        for dep in o["spec"].get("dependsOn", []):
            first = first_ready[(o["kind"], o["metadata"]["name"])]
            assert first_ready[(o["kind"], dep["name"])] <= first, \
                f"{o['metadata']['name']} Ready before {dep['name']}"
    # the releases' Kustomization waited for the CRD-installing HelmReleases it health-checks
    for check in ks[f"{NAME}-releases"]["spec"].get("healthChecks", []):
        assert first_ready[("HelmRelease", check["name"])] <= first_ready[("Kustomization", f"{NAME}-releases")]
    # GKE's quota came first: it exists, the GPU Operator's system-node-critical pods were admitted,
    # and none was ever refused (issue 20)
    quota = cluster.get("resourcequota", "-n", "gpu-operator")["items"]
    assert quota, "no ResourceQuota in gpu-operator"
    # ... and not by luck of timing: the Kustomization that applied the quota is one the
    # Kustomization that created the GPU Operator's HelmRelease depends on, and was Ready before it was
    owner = {e["id"]: k for k, o in ks.items()
             for e in ((o.get("status") or {}).get("inventory") or {}).get("entries", [])}
    q = owner[f"gpu-operator_{quota[0]['metadata']['name']}__ResourceQuota"]
    r = owner["flux-system_gpu-operator_helm.toolkit.fluxcd.io_HelmRelease"]

    def deps(name: str) -> set[str]:
        direct = {d["name"] for d in ks[name]["spec"].get("dependsOn", [])}
        return direct.union(*(deps(d) for d in direct)) if direct else set()

    assert q in deps(r), f"{r} (the GPU Operator's HelmRelease) does not wait for {q} (GKE's quota)"
    created = dt.datetime.fromisoformat(hrs["gpu-operator"]["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert first_ready[("Kustomization", q)] <= created
    critical = cluster.wait_for("the GPU Operator's critical pods", lambda: [
        p for p in cluster.get("pods", "-n", "gpu-operator")["items"]
        if p["spec"].get("priorityClassName") == "system-node-critical"], timeout=120, every=2)
    assert critical and _operator_refusals(cluster) == []
    # the manifests are in, through Kueue's real webhooks: each tenant's namespace and ClusterQueue
    for t in TENANTS_V1:
        cluster.get("namespace", t)
        cluster.get("clusterqueue", t)

    # a re-plan committed to the repository: vision joins, product leaves
    _, bundle2 = plan(TENANTS_V2, bundle.parent.parent / "v2")
    rev = site.commit(bundle2, "gke-flux: vision joins, product leaves")
    reconcile_now(cluster, "gitrepository", "flux-system")

    def replanned() -> bool:
        ks = flux_objects(cluster, "kustomizations")
        cqs = {o["metadata"]["name"] for o in cluster.get("clusterqueues")["items"]}
        return (all(rev in ((o.get("status") or {}).get("lastAppliedRevision") or "") and ready(o)
                    for o in ks.values()) and "vision" in cqs and "product" not in cqs)

    try:
        cluster.wait_for("the re-plan applied and pruned", replanned, timeout=240, every=3)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{diagnose(cluster)}") from None
    cluster.get("namespace", "vision")
    lq = cluster.get("localqueues", "-n", "vision")["items"]
    assert lq, "vision has no LocalQueue"
    # a tenant namespace is never pruned (the bundle's no-prune annotation; README "Nothing deleted")
    ns = cluster.get("namespace", "product")
    assert ns["metadata"].get("deletionTimestamp") is None
    assert all(ready(o) for o in flux_objects(cluster, "helmreleases").values())
