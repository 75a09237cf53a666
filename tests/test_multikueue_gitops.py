"""GitOps for a plane beyond one cluster (issue 20, "Beyond one cluster"): options.gitops flux / argocd /
kustomize, refused for multi-cluster plans before, now writes each cluster's own tree under
clusters/<name>/gitops/, wrapped as a single cluster's is, with one controller per cluster reading
only its own folder (Flux: a bootstrap path per cluster; Argo CD: an Argo CD per cluster, the README
says why). Proven with the real consumers: `kubectl kustomize` builds every cluster's trees, every Argo
CD and Flux object passes its upstream CRD's schema and CEL rules (reference_dir()), and no kubeconfig
Secret is in any tree (MultiKueue's are named only; the README tells the site how to create them).
Orders per cluster: tests/test_ordering.py::test_each_cluster_of_a_multi_cluster_plan_orders_by_the_rules.
"""
from __future__ import annotations

import subprocess
from functools import cache
from typing import Any

import pytest
import yaml

from generator.decide import make_plan
from generator.decide.plan import Plan
from generator.render import render
from generator.spec.models import Fleet
from generator.validate.crds import CRDRegistry
from tests._consumers import REPO, crd_paths, tool

EXAMPLE = REPO / "examples" / "multicluster" / "kubernetes-128k.yaml"
NAME = "kubernetes-128k"


@cache
def planned(mode: str, repo: str | None = None) -> tuple[Plan, dict[str, bytes]]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["options"]["gitops"] = mode
    if repo:
        doc["options"]["gitops_repo"] = repo
    plan = make_plan(Fleet.model_validate(doc), "kubernetes-128k.yaml")
    return plan, render(plan)


@cache
def registry() -> CRDRegistry:
    return CRDRegistry.from_paths(crd_paths())


def docs(blob: bytes) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(blob) if isinstance(d, dict)]


def kustomize(root, folder: str) -> list[dict[str, Any]]:
    r = subprocess.run([tool("kubectl"), "kustomize", str(root / folder)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (folder, r.stderr)
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def write(files: dict[str, bytes], root) -> None:
    for rel, blob in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)


@pytest.mark.parametrize("mode", ["argocd", "flux", "kustomize"])
def test_each_cluster_gets_its_own_tree_that_kubectl_kustomize_builds(mode, tmp_path):
    plan, files = planned(mode)
    write(files, tmp_path)
    assert not any(p.startswith("gitops/") for p in files)  # nothing at the top: every tree is a cluster's
    for c in plan.clusters:
        root = f"clusters/{c.name}"
        manifests = sorted(p for p in files if p.startswith(f"{root}/kubernetes/manifests/"))
        expected = [d for p in manifests for d in docs(files[p])]
        assert kustomize(tmp_path, f"{root}/kubernetes") == expected, c.name  # the manifests, in file order
        built = kustomize(tmp_path, f"{root}/gitops")
        if mode == "kustomize":
            assert built == expected
            continue
        kinds = {d["kind"] for d in built}
        assert kinds <= {"Application", "Kustomization", "HelmRelease", "HelmRepository", "OCIRepository"}, kinds
        releases = [r["name"] for r in yaml.safe_load(files[f"{root}/kubernetes/helm/releases.yaml"])["releases"]]
        if mode == "argocd":
            apps = {d["metadata"]["name"]: d for d in built}
            assert {f"{NAME}-{c.name}-{r}" for r in releases} <= set(apps), (c.name, sorted(apps))
            for app in apps.values():  # each cluster's Argo CD deploys to its own cluster only
                assert app["spec"]["destination"]["server"] == "https://kubernetes.default.svc"
                path = app["spec"]["source"].get("path")
                if "chart" not in app["spec"]["source"] and not app["spec"]["source"]["repoURL"].startswith("oci://"):
                    assert path.startswith(f"{NAME}/{root}/"), (c.name, path)
            root_app = yaml.safe_load(files[f"{root}/gitops/bootstrap/root-app.yaml"])
            assert root_app["spec"]["source"]["path"] == f"{NAME}/{root}/gitops"
        else:
            ks = [d for d in built if d["kind"] == "Kustomization"]
            assert {d["metadata"]["name"] for d in ks} >= {f"{NAME}-{c.name}-releases", f"{NAME}-{c.name}-manifests"}
            assert all(d["spec"]["path"].startswith(f"./{NAME}/{root}/") for d in ks), c.name
            hrs = kustomize(tmp_path, f"{root}/gitops/releases")  # what `<fleet>-<cluster>-releases` applies
            assert sorted(d["metadata"]["name"] for d in hrs if d["kind"] == "HelmRelease") == sorted(releases)
            boot = yaml.safe_load(files[f"{root}/gitops/bootstrap/flux-kustomization.yaml"])
            assert boot["spec"]["path"] == f"./{NAME}/{root}/gitops"


@pytest.mark.parametrize("mode", ["argocd", "flux"])
def test_every_gitops_object_passes_its_crd(mode):
    """Every Argo CD / Flux object of every cluster (bootstrap files included) against the upstream
    CRDs' schemas and CEL rules; a broken one is caught (the check has teeth)."""
    _, files = planned(mode)
    reg = registry()
    checked = 0
    for path, blob in files.items():
        if "/gitops/" not in path or not path.endswith(".yaml"):
            continue
        for obj in docs(blob):
            if obj["apiVersion"].startswith("kustomize.config.k8s.io/"):
                continue
            crd = reg.get(obj["apiVersion"], obj["kind"])
            assert crd is not None, (path, obj["apiVersion"], obj["kind"])
            assert not reg.validate(obj), (path, reg.validate(obj))
            assert not crd.cel.check_create(obj).violations, (path, obj["kind"])
            checked += 1
    assert checked >= 5 * 3
    broken = docs(files["clusters/worker-01/gitops/bootstrap/" + (
        "root-app.yaml" if mode == "argocd" else "flux-kustomization.yaml")])[0]
    broken["spec"]["project" if mode == "argocd" else "prune"] = 5  # a string / a boolean in the CRD
    assert reg.validate(broken)


@pytest.mark.parametrize("mode", ["argocd", "flux"])
def test_no_kubeconfig_is_in_a_tree_and_the_readme_says_how_to_make_them(mode):
    plan, files = planned(mode, "https://git.example.org/platform/fleet.git")
    workers = [c.name for c in plan.clusters if c.role == "worker"]
    for path, blob in files.items():
        if path.endswith((".yaml", ".yml")):
            for obj in docs(blob):
                # only the workers' empty token Secrets, which each worker's token controller fills
                assert obj.get("kind") != "Secret" or (obj["type"] == "kubernetes.io/service-account-token"
                                                       and not {"data", "stringData"} & set(obj)), path
        if path.startswith("clusters/"):
            assert b"kubeconfig:" not in blob or path.endswith("19-multikueue.yaml"), path
    # the manager names each worker's Secret, synced by its own controller with its manifests
    mk = docs(files["clusters/manager/kubernetes/manifests/19-multikueue.yaml"])
    assert sorted(o["spec"]["clusterSource"]["kubeConfig"]["location"] for o in mk if o["kind"] == "MultiKueueCluster") \
        == [f"{w}-kubeconfig" for w in workers]
    assert "manifests/19-multikueue.yaml" in yaml.safe_load(files["clusters/manager/kubernetes/kustomization.yaml"])["resources"]
    readme = files["README.md"].decode()
    for w in workers:
        assert f"clusters/manager/kubernetes/connect-worker.sh {w} <manager> <{w}>" in readme
    assert "they are **not** in any cluster's tree" in readme
    if mode == "flux":
        assert "one Flux per cluster" in readme and "fluxcd.io/flux/guides/repository-structure" in readme
        for c in plan.clusters:
            assert (f"flux bootstrap git --context=<{c.name}> --url=https://git.example.org/platform/fleet.git "
                    f"--branch=main --path=clusters/{NAME}-{c.name}") in readme
    else:
        assert "one Argo CD in each cluster" in readme and "declarative setup" in readme
        for c in plan.clusters:
            assert f"kubectl --context <{c.name}> apply -n argocd -f {NAME}/clusters/{c.name}/gitops/bootstrap/root-app.yaml" \
                in readme
        apps = docs(files["clusters/worker-02/gitops/apps/manifests.yaml"])
        assert apps[0]["spec"]["source"]["repoURL"] == "https://git.example.org/platform/fleet.git"
    assert "\n## GitOps" not in readme  # the single-cluster section would name paths this bundle lacks
