"""The ordering graph of every delivery path, checked against the API's rules (issue 20).

Paths (tests/kube_order.py): the README's Helm/kubectl steps (parsed from the bundle's README),
Pulumi (the program's dependency graph under Pulumi's mocks), Argo CD (sync waves of the
Applications) and Flux (Kustomizations' and HelmReleases' dependsOn, health checks). Rules:
- the provider's prerequisites (kubernetes/prerequisites/) are applied before every release;
- a custom resource comes after the release whose chart really installs its CRD (real
  `helm template --include-crds` of ../shared/charts at the pinned version and values);
- an object an admission webhook intercepts comes after the release that renders that webhook
  (the same real render: Validating/MutatingWebhookConfiguration rules with their namespace and
  object selectors, a namespace's labels being the bundle's Namespace object's, or only
  `kubernetes.io/metadata.name` for a namespace Helm creates); a release whose chart objects another release's webhook
  intercepts is ordered with it, never installed alongside (a webhook registered but not yet
  serving refuses them);
- an object another names (a Topology its flavors, a flavor its ClusterQueues, a ClusterQueue its
  LocalQueues, a parent queue, a namespace) is never created after its namer; and under Pulumi,
  which waits for each delete, a Topology is a dependency of every flavor naming it.
Bundles: every example with a Kubernetes plane, each under Argo CD and Flux (Argo CD only where it
can install the releases), and the GKE example whose quota is a prerequisite.
"""
from __future__ import annotations

import copy
import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.render import render
from tests import kube_order as ko
from tests._consumers import REPO, charts_dir, helm_objects, require, tool
from tests.support import plan_of as support_plan_of

EXAMPLES = REPO / "examples"
CONTEXT = {"kubernetes:context": "test-cluster"}

try:
    from tests import pulumi_mocks
except ImportError as missing:  # pulumi or pulumi-kubernetes not installed
    pulumi_mocks, MISSING = None, str(missing)


def _plan(data: dict[str, Any]):
    return support_plan_of(data, name="ordering.yaml")


def _kube_examples() -> list[str]:
    out = []
    for p in sorted(EXAMPLES.glob("*.yaml")):
        if _plan(yaml.safe_load(p.read_text())).kube_plane:
            out.append(p.stem)
    return out


KUBE = _kube_examples()


@functools.cache
def _bundle(example: str, mode: str, root: str, gang: str | None = None) -> Path:
    data = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())
    data = copy.deepcopy(data)
    data.setdefault("options", {})["gitops"] = mode
    if gang:
        data["options"]["gang_scheduler"] = gang
    out = Path(root) / (example + (f"+{gang}" if gang else ""))
    for rel, blob in render(_plan(data)).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(blob)
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    roots: dict[str, Path] = {}

    def get(example: str, mode: str, gang: str | None = None) -> Path:
        if mode not in roots:
            roots[mode] = tmp_path_factory.mktemp(mode)
        try:
            return _bundle(example, mode, str(roots[mode]), gang)
        except Exception as e:  # Argo CD refuses some releases (catalog gitops_unsupported)
            if "gitops argocd cannot install" in str(e):
                pytest.skip(f"{example}: {e}")
            raise
    return get


@functools.cache
def _template(component: str, version: str, namespace: str, values: bytes, kube: str) -> tuple[dict, ...]:
    chart = charts_dir() / component / version
    from tests.kubeenv.bundle import NO_CHART

    if component in NO_CHART and not chart.is_dir():  # known, not a missing consumer: say it, never pass it
        pytest.skip(f"chart {component} {version}: {NO_CHART[component]}")
    require(chart.is_dir(), f"chart {component} {version} not in {charts_dir()}")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "values.yaml").write_bytes(values)
        env = {**os.environ, **{k: str(t / k.lower()) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}}
        out = subprocess.run([tool("helm"), "template", component, str(chart), "-n", namespace, "-f",
                              str(t / "values.yaml"), "--kube-version", kube, "--include-crds"],
                             capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return tuple(helm_objects(out.stdout))


def _plural(kind: str) -> str:
    k = kind.lower()
    return k + "es" if k.endswith("s") else k[:-1] + "ies" if k.endswith("y") else k + "s"


class Charts:
    """What each release's chart really renders: the CRD groups and kinds (with plurals), the
    webhooks' rules, and its other objects."""

    def __init__(self, bundle: Path) -> None:
        self.releases = yaml.safe_load((bundle / "kubernetes/helm/releases.yaml").read_text())["releases"]
        kube = yaml.safe_load((bundle / "plan.json").read_text())["versions"]["kubernetes"]
        self.rendered = {r["name"]: _template(r["chart"] if (charts_dir() / r["chart"]).is_dir() else r["name"],
                                              r["version"], r["namespace"],
                                              (bundle / "kubernetes/helm" / r["values"]).read_bytes(), kube)
                         for r in self.releases}
        self.crd_owner: dict[str, str] = {}
        self.plurals: dict[tuple[str, str], str] = {}
        self.cluster_kinds: set[tuple[str, str]] = set(CLUSTER_SCOPED)
        self.ns_labels: dict[str, dict[str, str]] = {}
        for folder in ("prerequisites", "manifests"):
            for o in ko.load_dir(bundle / "kubernetes" / folder):
                if (o["apiVersion"], o["kind"]) == ("v1", "Namespace"):
                    self.ns_labels[o["metadata"]["name"]] = dict(o["metadata"].get("labels") or {})
        self.home = {r["name"]: r["namespace"] for r in self.releases}
        for rel, objs in self.rendered.items():
            for o in objs:
                if o["kind"] == "CustomResourceDefinition":
                    self.crd_owner.setdefault(o["spec"]["group"], rel)
                    self.plurals[(o["spec"]["group"], o["spec"]["names"]["kind"])] = o["spec"]["names"]["plural"]
                    if o["spec"].get("scope") == "Cluster":
                        self.cluster_kinds.add((o["spec"]["group"], o["spec"]["names"]["kind"]))

    def plural(self, group: str, kind: str) -> str:
        return self.plurals.get((group, kind)) or _plural(kind)

    def webhooks(self) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        return [(rel, w, rule) for rel, objs in self.rendered.items() for o in objs
                if o["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
                for w in o.get("webhooks") or [] for rule in w.get("rules") or []]

    def intercepted(self, obj: dict[str, Any], release: str | None = None) -> list[str]:
        """Releases whose webhooks intercept creating `obj` (of `release`'s chart, or the bundle's)."""
        group = obj["apiVersion"].rpartition("/")[0]
        res = self.plural(group, obj["kind"])
        cluster = (group, obj["kind"]) in self.cluster_kinds
        ns = None if cluster else obj["metadata"].get("namespace") or (self.home[release] if release else "default")
        ns_labels = {**self.ns_labels.get(ns, {}), "kubernetes.io/metadata.name": ns} if ns else {}
        out = []
        for rel, hook, rule in self.webhooks():
            if not set(rule.get("operations", [])) & {"CREATE", "*"}:
                continue
            if not (set(rule.get("apiGroups", [])) & {group, "*"} and set(rule.get("resources", [])) & {res, "*"}):
                continue
            if ns and not selects(hook.get("namespaceSelector"), ns_labels):
                continue
            if not selects(hook.get("objectSelector"), obj["metadata"].get("labels") or {}):
                continue
            out.append(rel)
        return sorted(set(out))


# Built-in cluster-scoped kinds (a webhook's namespaceSelector does not apply to them)
CLUSTER_SCOPED = {(g, k) for g, ks in {
    "": ("Namespace", "Node", "PersistentVolume"),
    "rbac.authorization.k8s.io": ("ClusterRole", "ClusterRoleBinding"),
    "apiextensions.k8s.io": ("CustomResourceDefinition",),
    "scheduling.k8s.io": ("PriorityClass",),
    "admissionregistration.k8s.io": ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"),
    "storage.k8s.io": ("StorageClass", "CSIDriver"), "node.k8s.io": ("RuntimeClass",),
    "apiregistration.k8s.io": ("APIService",), "networking.k8s.io": ("IngressClass",),
}.items() for k in ks}


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions) against `labels`; none selects all."""
    if not selector:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        have, op, vals = e["key"] in labels, e["operator"], e.get("values") or []
        ok = {"In": have and labels.get(e["key"]) in vals, "NotIn": not have or labels.get(e["key"]) not in vals,
              "Exists": have, "DoesNotExist": not have}[op]
        if not ok:
            return False
    return True


# CRDs no chart renders: an operator applies them at run time (../shared/charts/README.md).
# nv-ipam's IPPool/CIDRPool: the Network Operator applies them when a NicClusterPolicy enables
# nv-ipam. group -> (the release of the operator, the kind of the object it reconciles, the folder
# of ../shared/charts/_extra-crds holding the CRDs it applies).
OPERATOR_CRDS = {"nv-ipam.nvidia.com": ("network-operator", ("mellanox.com", "NicClusterPolicy"), "nv-ipam")}


def operator_crd_names(group: str) -> dict[str, str]:
    """kind -> the real CRD's name (plural.group) of an operator-applied group."""
    folder = charts_dir() / "_extra-crds" / OPERATOR_CRDS[group][2]
    require(folder.is_dir(), f"{folder} missing")
    return {d["spec"]["names"]["kind"]: d["metadata"]["name"] for f in sorted(folder.glob("*.yaml"))
            for d in yaml.safe_load_all(f.read_text()) if d}


def violations(path: ko.Path_, bundle: Path, charts: Charts) -> list[str]:
    pre = ko.load_dir(bundle / "kubernetes/prerequisites")
    objs = pre + ko.load_dir(bundle / "kubernetes/manifests") + ko.load_dir(bundle / "kubernetes/operator-resources")
    rels = [r["name"] for r in charts.releases]
    out: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            out.append(f"{path.name}: {what}")

    for p in pre:
        for r in rels:
            need(path.precedes(("object", ko.identity(p)), ("release", r)),
                 f"prerequisite {p['kind']} {p['metadata']['name']} not before release {r}")
    by_id = {ko.identity(o): o for o in objs}
    for o in objs:
        node = ("object", ko.identity(o))
        group = o["apiVersion"].rpartition("/")[0]
        if group in OPERATOR_CRDS:
            # after its operator's release, after the object that operator reconciles, and after a
            # step that waits until the operator has created the CRD, itself after that object
            release, (pgroup, pkind), _ = OPERATOR_CRDS[group]
            crd = ("crd", operator_crd_names(group)[o["kind"]])
            need(crd[1] == ko.crd_name(o), f"{o['kind']}: CRD {crd[1]}, not {ko.crd_name(o)}")
            need(path.precedes(("release", release), node), f"{o['kind']} {o['metadata']['name']} not after {release}")
            producers = [("object", ko.identity(p)) for p in objs
                         if p["apiVersion"].startswith(pgroup + "/") and p["kind"] == pkind]
            need(bool(producers), f"{o['kind']} {o['metadata']['name']}: no {pkind} makes its operator create {crd[1]}")
            for p in producers:
                need(path.precedes(p, node), f"{o['kind']} {o['metadata']['name']} not after {pkind} {p[1][3]}")
            need(crd in path.rank or (path.after is not None and crd in path.after),
                 f"{o['kind']} {o['metadata']['name']}: nothing waits for {crd[1]}")
            if crd in path.rank or (path.after is not None and crd in path.after):
                need(path.precedes(crd, node), f"{o['kind']} {o['metadata']['name']} not after the wait for {crd[1]}")
                for p in producers:
                    need(path.precedes(p, crd), f"the wait for {crd[1]} not after {pkind} {p[1][3]}")
        elif "." in group and not group.endswith(".k8s.io"):
            owner = charts.crd_owner.get(group)
            need(owner is not None, f"{o['kind']} {o['metadata']['name']}: no release renders a CRD of {group}")
            if owner:
                need(path.precedes(("release", owner), node), f"{o['kind']} {o['metadata']['name']} not after {owner} (its CRD)")
        for rel in charts.intercepted(o):
            need(path.precedes(("release", rel), node),
                 f"{o['kind']} {o['metadata']['name']} not after {rel}, whose webhook intercepts it")
        for named in ko.names(o):
            if named in by_id:
                need(path.not_after(("object", named), node),
                     f"{named[1]} {named[3]} created after {o['kind']} {o['metadata']['name']}, which names it")
    for rel, rendered in charts.rendered.items():
        for o in rendered:
            for hook_owner in charts.intercepted(o, rel):
                if hook_owner != rel:
                    a, b = ("release", hook_owner), ("release", rel)
                    need(path.precedes(a, b) or path.precedes(b, a),
                         f"release {rel}'s {o['kind']} {o['metadata'].get('name')} is intercepted by {hook_owner}'s "
                         "webhook, and the two may install together")
    return out


# every example as it is, and under KAI (v0.17.0: Argo CD installs it) and Volcano
CASES = [(e, m, None) for e in KUBE for m in ("argocd", "flux")] + [
    ("oke-training", m, g) for g in ("kai", "volcano") for m in ("argocd", "flux")]


@pytest.mark.parametrize(("example", "mode", "gang"), CASES,
                         ids=[f"{e}{'+' + g if g else ''}-{m}" for e, m, g in CASES])
def test_every_delivery_path_orders_by_the_rules(example, mode, gang, bundle):
    b = bundle(example, mode, gang)
    charts = Charts(b)
    paths = [ko.kubectl_path(b), ko.argocd_path(b) if mode == "argocd" else ko.flux_path(b)]
    found = [v for p in paths for v in violations(p, b, charts)]
    assert found == []


@functools.cache
def _multicluster(mode: str, root: str) -> tuple[Path, ...]:
    """examples/multicluster/kubernetes-128k.yaml under `mode`, each cluster's folder laid out as a bundle
    of its own for the path readers: clusters/<name>/ as it is, and a plan.json whose name is the
    folder's path in the GitOps repository (`<fleet>/clusters/<name>`, what its Applications and
    Kustomizations read) with the fleet's versions."""
    data = yaml.safe_load((EXAMPLES / "multicluster" / "kubernetes-128k.yaml").read_text())
    data.setdefault("options", {})["gitops"] = mode
    plan = _plan(data)
    assert len(plan.clusters) == 5
    files = render(plan)
    versions = yaml.safe_load(files["plan.json"])["versions"]
    out = []
    for c in plan.clusters:
        folder = Path(root) / mode / c.name
        prefix = f"clusters/{c.name}/"
        for rel, blob in files.items():
            if rel.startswith(prefix):
                (folder / rel[len(prefix):]).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel[len(prefix):]).write_bytes(blob)
        (folder / "plan.json").write_text(yaml.safe_dump({"name": f"{plan.name}/{prefix.rstrip('/')}",
                                                          "versions": versions}))
        out.append(folder)
    return tuple(out)


@pytest.mark.parametrize("mode", ["argocd", "flux"])
def test_each_cluster_of_a_multi_cluster_plan_orders_by_the_rules(mode, tmp_path_factory):
    """A plane beyond one cluster (issue 20): every cluster's own GitOps tree (the MultiKueue manager's
    and each worker's) keeps the rules a single cluster's does, against the charts it installs."""
    root = tmp_path_factory.mktemp("multicluster")
    seen = []
    for folder in _multicluster(mode, str(root)):
        path = ko.argocd_path(folder) if mode == "argocd" else ko.flux_path(folder)
        assert violations(path, folder, Charts(folder)) == [], folder.name
        releases = {n[1] for n in (path.rank if mode == "argocd" else path.after or {}) if n[0] == "release"}
        seen.append((folder.name, sorted(releases)))
    assert seen[0] == ("manager", ["kueue"])
    assert all(name.startswith("worker-") and {"gpu-operator", "network-operator", "kueue"} <= set(rels)
               for name, rels in seen[1:]), seen
    # teeth: a worker whose manifests no longer wait for the releases breaks the CRD rule
    worker = _multicluster(mode, str(root))[1]
    if mode == "argocd":
        f = worker / "gitops" / "apps" / "manifests.yaml"
        app = yaml.safe_load(f.read_text())
        app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] = "0"
        f.write_text(yaml.safe_dump(app))
        path = ko.argocd_path(worker)
    else:
        f = worker / "gitops" / "kustomizations.yaml"
        ks = list(yaml.safe_load_all(f.read_text()))
        for k in ks:
            k["spec"].pop("dependsOn", None)
        f.write_text(yaml.safe_dump_all(ks))
        path = ko.flux_path(worker)
    assert any("(its CRD)" in v for v in violations(path, worker, Charts(worker)))


@pytest.mark.parametrize("example", KUBE)
def test_pulumi_orders_by_the_rules(example, bundle):
    require(pulumi_mocks, f"Pulumi SDK not importable: {MISSING if pulumi_mocks is None else ''}")
    b = bundle(example, "flux")
    mocks = pulumi_mocks.ValidatingMocks(lambda obj: [])
    run = pulumi_mocks.run_program(b / "pulumi" / "__main__.py", mocks, CONTEXT)
    nodes = {r.urn: ("object", ko.identity(r.inputs)) for r in run.objects}
    nodes.update({r.urn: ("release", r.inputs["name"]) for r in run.of_type("kubernetes:helm.sh/v3:Release")})
    waits = {r.urn: [n for g in OPERATOR_CRDS for n in operator_crd_names(g).values()
                     if OPERATOR_CRDS[g][1] == (r.inputs["apiVersion"].rpartition("/")[0], r.inputs["kind"])]
             for r in run.objects
             if (r.inputs.get("metadata") or {}).get("annotations", {}).get("pulumi.com/waitFor")}
    path = ko.pulumi_path({r.urn: set(r.dependencies) for r in run.resources}, nodes, waits)
    assert violations(path, b, Charts(b)) == []
    # Pulumi waits for each delete: a flavor must depend on its Topology, so it goes first
    for r in run.objects:
        if r.inputs["kind"] == "ResourceFlavor" and r.inputs["spec"].get("topologyName"):
            topo = ("object", ("kueue.x-k8s.io", "Topology", "", r.inputs["spec"]["topologyName"]))
            assert path.precedes(topo, nodes[r.urn]), r.name


def test_the_rules_have_teeth(bundle):
    """The GKE bundle as orchgen wrote it before issue 20 (the quota among the manifests, after the
    releases) breaks the prerequisites rule on the kubectl path."""
    b = bundle("gke-training", "flux")
    charts = Charts(b)
    path = ko.kubectl_path(b)
    quota = next(k for k in path.rank if k[0] == "object" and k[1][1] == "ResourceQuota"
                 and k[1][2] == "gpu-operator")
    path.rank[quota] = (99,)  # applied with the manifests, after every release
    assert any("prerequisite ResourceQuota gpu-operator-quota not before release gpu-operator" in v
               for v in violations(path, b, charts))


def test_operator_applied_crds_precede_their_resources(bundle):
    """nv-ipam's IPPool (kubernetes/operator-resources/) comes after the NicClusterPolicy and after a
    step that waits for the CRD the Network Operator then creates, in every path; the rule has teeth:
    the pool back among the manifests (as before issue 20) breaks it on kubectl's path."""
    flux, argocd = bundle("cloud-training", "flux"), bundle("cloud-training", "argocd")
    charts = Charts(flux)
    pool = [o for o in ko.load_dir(flux / "kubernetes/operator-resources") if o["kind"] == "IPPool"]
    assert pool and not [o for o in ko.load_dir(flux / "kubernetes/manifests") if o["kind"] == "IPPool"]
    paths = [(ko.kubectl_path(flux), flux), (ko.flux_path(flux), flux), (ko.argocd_path(argocd), argocd)]
    assert [v for p, b in paths for v in violations(p, b, charts)] == []
    kubectl = ko.kubectl_path(flux)
    node = ("object", ko.identity(pool[0]))
    policy = next(n for n in kubectl.rank if n[0] == "object" and n[1][1] == "NicClusterPolicy")
    kubectl.rank[node] = kubectl.rank[policy]  # in 35-network.yaml beside the policy
    assert any("not after the wait for ippools.nv-ipam.nvidia.com" in v for v in violations(kubectl, flux, charts))


def test_the_crd_and_webhook_rules_have_teeth(bundle):
    """Argo CD's manifests Application in the wave of Kueue's release: its custom resources would
    come before their CRD and before the webhook that admits them."""
    b = bundle("gke-training", "argocd")
    charts = Charts(b)
    path = ko.argocd_path(b)
    kueue = path.rank[("release", "kueue")]
    for node in [n for n in path.rank if n[0] == "object"]:
        path.rank[node] = kueue
    found = violations(path, b, charts)
    assert any("not after kueue (its CRD)" in v for v in found), found
    assert any("not after kueue, whose webhook intercepts it" in v for v in found), found
