"""What the objects of a bundle name, and the order each delivery path gives the bundle (issue 20).

`names(obj)`: the objects whose deletion Kueue, KAI or Volcano hold (finalizers) while `obj`
exists, and its namespace. `Path` models: the README's kubectl/helm steps (parsed from the bundle's
README), Argo CD's sync waves and Flux's dependsOn (read from the bundle's gitops/ files), and
Pulumi's dependency graph (from the program run under Pulumi's mocks, tests/test_pulumi_replan.py).
A node is ("release", name), ("object", identity) or ("crd", plural.group): a CRD an operator creates
at run time, as a step that waits until it exists (the README's `kubectl wait --for=create`, a Flux
health check, Argo CD's retry of a later wave, Pulumi's `pulumi.com/waitFor` on the object its
operator reconciles); `precedes(a, b)`: `a` is done (applied, a
release ready) before `b` starts; `not_after(a, b)`: `a` is never created after `b` (same batch
allowed).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Ident = tuple[str, str, str, str]
Node = tuple[str, Any]


def identity(obj: dict[str, Any]) -> Ident:
    meta = obj["metadata"]
    return obj["apiVersion"].rpartition("/")[0], obj["kind"], meta.get("namespace", ""), meta["name"]


def names(obj: dict[str, Any]) -> list[Ident]:
    """The objects `obj` names whose deletion Kueue, KAI or Volcano hold while `obj` exists (their
    finalizers), and its namespace."""
    group = obj["apiVersion"].rpartition("/")[0]
    spec = obj.get("spec") or {}
    out: list[Ident] = []
    ns = obj["metadata"].get("namespace")
    if ns:
        out.append(("", "Namespace", "", ns))
    if group == "kueue.x-k8s.io":
        if obj["kind"] == "ResourceFlavor" and spec.get("topologyName"):
            out.append((group, "Topology", "", spec["topologyName"]))
        elif obj["kind"] == "ClusterQueue":
            out += [(group, "ResourceFlavor", "", f["name"])
                    for rg in spec.get("resourceGroups", []) for f in rg.get("flavors", [])]
            if spec.get("cohort") or spec.get("cohortName"):
                out.append((group, "Cohort", "", spec.get("cohortName") or spec.get("cohort")))
        elif obj["kind"] == "LocalQueue":
            out.append((group, "ClusterQueue", "", spec["clusterQueue"]))
        elif obj["kind"] == "Cohort" and (spec.get("parentName") or spec.get("parent")):
            out.append((group, "Cohort", "", spec.get("parentName") or spec.get("parent")))
    elif group in ("scheduling.run.ai", "scheduling.volcano.sh") and obj["kind"] == "Queue":
        parent = spec.get("parentQueue") or spec.get("parent")
        if parent:
            out.append((group, "Queue", "", parent))
    elif group == "topology.volcano.sh" and obj["kind"] == "HyperNode":
        out += [(group, "HyperNode", "", m["selector"]["exactMatch"]["name"])
                for m in spec.get("members", []) if m.get("type") == "HyperNode"
                and "exactMatch" in (m.get("selector") or {})]
    return out


def load_dir(folder: Path) -> list[dict[str, Any]]:
    """The objects of folder/*.yaml in file-name order (none where there is no such folder)."""
    out: list[dict[str, Any]] = []
    for f in sorted(folder.glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return out


@dataclass
class Path_:
    """One delivery path's order. `rank[node]` is a step; `precedes` compares steps strictly unless
    `edges` (Flux, Pulumi) give the order instead."""

    name: str
    rank: dict[Node, tuple[int, ...]] = field(default_factory=dict)
    batch: dict[Node, int] = field(default_factory=dict)  # the step a node's batch waits on (first key)
    after: dict[Node, set[Node]] | None = None  # transitive predecessors, where a graph gives the order

    def precedes(self, a: Node, b: Node) -> bool:
        if self.after is not None:
            return a in self.after.get(b, set())
        return self.rank[a][0] < self.rank[b][0]

    def not_after(self, a: Node, b: Node) -> bool:
        if self.after is not None:
            return b not in self.after.get(a, set())
        return self.rank[a] <= self.rank[b]


def _closure(direct: dict[Node, set[Node]]) -> dict[Node, set[Node]]:
    out: dict[Node, set[Node]] = {}

    def reach(n: Node, seen: tuple[Node, ...] = ()) -> set[Node]:
        if n not in out:
            assert n not in seen, f"dependency cycle through {n}"
            got: set[Node] = set()
            for d in direct.get(n, ()):
                got |= {d} | reach(d, seen + (n,))
            out[n] = got
        return out[n]

    for n in list(direct):
        reach(n)
    return out


README_STEP = re.compile(r"^\s*(kubectl apply --server-side -f kubernetes/(prerequisites|manifests|operator-resources)/|"
                         r"helm install (\S+) |kubectl wait --for=create --timeout=\S+ crd/(\S+))")


def kubectl_path(bundle: Path) -> Path_:
    """The README's Helm/kubectl steps, in the order the README lists them: prerequisites, each
    release with --wait, the manifests (one `kubectl apply -f` of the folder, files and documents
    in order)."""
    path = Path_("kubectl")
    step = 0
    for line in (bundle / "README.md").read_text().splitlines():
        m = README_STEP.match(line)
        if not m:
            continue
        step += 1
        if m.group(4):
            path.rank[("crd", m.group(4))] = (step,)
            continue
        if m.group(3):
            assert "--wait" in line or line.rstrip().endswith("\\"), line
            path.rank[("release", m.group(3))] = (step,)
            continue
        for f_i, f in enumerate(sorted((bundle / "kubernetes" / m.group(2)).glob("*.yaml"))):
            for d_i, obj in enumerate(d for d in yaml.safe_load_all(f.read_text()) if d):
                path.rank[("object", identity(obj))] = (step, f_i, d_i)
    return path


def argocd_path(bundle: Path) -> Path_:
    """Sync waves of the Applications; each object takes the wave of the Application that syncs it
    (one wave waits for the previous one's health: the README's Application health check)."""
    path = Path_("argocd")
    name = yaml.safe_load((bundle / "plan.json").read_text())["name"]
    apps = {}
    for f in sorted((bundle / "gitops" / "apps").glob("*.yaml")):
        app = yaml.safe_load(f.read_text())
        apps[f.stem] = int(app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
        helm = app["spec"]["source"].get("helm")
        if helm:
            path.rank[("release", helm["releaseName"])] = (apps[f.stem],)
    for folder in ("prerequisites", "manifests", "operator-resources"):
        if folder in apps:
            spec = yaml.safe_load((bundle / "gitops" / "apps" / f"{folder}.yaml").read_text())["spec"]
            assert spec["source"]["path"].startswith(f"{name}/kubernetes"), spec["source"]
            for obj in load_dir(bundle / "kubernetes" / folder):
                path.rank[("object", identity(obj))] = (apps[folder],)
            # Argo CD cannot wait for a CRD git does not hold: an Application that skips the dry run
            # of a missing kind and retries waits for it in effect, after the earlier waves
            sync = spec["syncPolicy"]
            if folder == "operator-resources" and "SkipDryRunOnMissingResource=true" in sync["syncOptions"] \
                    and sync.get("retry"):
                for obj in load_dir(bundle / "kubernetes" / folder):
                    path.rank[("crd", crd_name(obj))] = (apps[folder] - 0.5,)
    return path


def flux_path(bundle: Path) -> Path_:
    """Flux: Kustomizations ordered by dependsOn (a Kustomization is Ready once applied, and once its
    healthChecks are Ready), HelmReleases by their dependsOn inside the releases' Kustomization."""
    ks = {k["metadata"]["name"]: k for k in yaml.safe_load_all((bundle / "gitops" / "kustomizations.yaml").read_text())}
    repo = yaml.safe_load((bundle / "plan.json").read_text())["name"]
    direct: dict[Node, set[Node]] = {}
    members: dict[str, list[Node]] = {}
    hrs = {}
    for f in sorted((bundle / "gitops" / "releases").glob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if d and d["kind"] == "HelmRelease":
                hrs[d["metadata"]["name"]] = d
    for name, k in ks.items():
        p = k["spec"]["path"]
        node: Node = ("kustomization", name)
        direct[node] = {("kustomization", d["name"]) for d in k["spec"].get("dependsOn", [])}
        # Ready waits for the health checks: those HelmReleases precede the Kustomization's readiness
        ready: Node = ("ready", name)
        checks = k["spec"].get("healthChecks", [])
        direct[ready] = {node} | {("release", c["name"]) for c in checks if c["kind"] == "HelmRelease"}
        for c in checks:  # a CRD health check: Ready once the CRD exists, after this one applied
            if c["kind"] == "CustomResourceDefinition":
                direct[ready].add(("crd", c["name"]))
                direct.setdefault(("crd", c["name"]), set()).add(node)
        if p.endswith("/gitops/releases"):
            members[name] = [("release", r) for r in hrs]
        else:
            # the path in the GitOps repository, less the bundle's folder there (plan.json's name; for
            # one cluster of a multi-cluster plan, `<fleet>/clusters/<cluster>`)
            folder = bundle / p.removeprefix(f"./{repo}/")
            objs = load_dir(folder / "manifests") if (folder / "kustomization.yaml").is_file() else load_dir(folder)
            members[name] = [("object", identity(o)) for o in objs]
    # dependsOn on a Kustomization waits for its readiness
    for name, k in ks.items():
        direct[("kustomization", name)] = {("ready", d["name"]) for d in k["spec"].get("dependsOn", [])}
    for name, nodes in members.items():
        for n in nodes:
            direct.setdefault(n, set()).add(("kustomization", name))
            if n[0] == "object":  # applied before the Kustomization is Ready, and before its checks pass
                direct[("ready", name)].add(n)
                for c in ks[name]["spec"].get("healthChecks", []):
                    if c["kind"] == "CustomResourceDefinition":
                        direct[("crd", c["name"])].add(n)
    for r, hr in hrs.items():
        direct[("release", r)] |= {("release", d["name"]) for d in hr["spec"].get("dependsOn", [])}
    path = Path_("flux", after=_closure(direct))
    return path


def crd_name(obj: dict[str, Any]) -> str:
    """plural.group of a custom resource's CRD: the kind in lower case plus "s" (the kubebuilder
    default nv-ipam's CRDs keep; tests/test_ordering.py holds it to the real CRD files)."""
    return f"{obj['kind'].lower()}s.{obj['apiVersion'].rpartition('/')[0]}"


def pulumi_path(deps: dict[str, set[str]], nodes: dict[str, Node],
                waits: dict[str, list[str]] | None = None) -> Path_:
    """Pulumi's graph: URN -> direct dependency URNs, and the node each URN stands for. `waits`:
    URN -> the CRDs its operator has created once Pulumi's `pulumi.com/waitFor` on it is met; what
    depends on that URN then comes after those CRDs."""
    direct: dict[Node, set[Node]] = {}
    crds_of = {nodes[u]: [("crd", c) for c in cs] for u, cs in (waits or {}).items()}
    for node, crds in crds_of.items():
        for c in crds:
            direct.setdefault(c, set()).add(node)
    for urn, node in nodes.items():
        direct[node] = {nodes[d] for d in deps.get(urn, ()) if d in nodes}
        direct[node] |= {c for d in list(direct[node]) for c in crds_of.get(d, ())}
    # dependencies through resources that are neither (the provider) do not order anything
    return Path_("pulumi", after=_closure(direct))
