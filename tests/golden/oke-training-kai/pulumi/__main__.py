"""Install an orchgen bundle's Kubernetes side with Pulumi: Helm releases first, then manifests.

orchgen copies this file verbatim into every bundle with a Kubernetes plane (as pulumi/__main__.py).
It reads the bundle's own files at run time and nothing else:

- ../kubernetes/prerequisites/*.yaml (where the bundle has them): what the provider needs before any
  release (GKE: the GPU Operator's namespace and the quota that admits its critical pods); every
  release depends on them;
- ../kubernetes/helm/releases.yaml and the <release>.values.yaml files it names: one Helm release
  each, installed one after another in file order (and after the releases in its `dependsOn`);
- ../kubernetes/manifests/*.yaml, by file name, documents in order: one Pulumi resource per object,
  then ../kubernetes/operator-resources/*.yaml the same way (custom resources whose CRD an operator
  creates at run time, after the manifest its operator reconciles; that manifest's
  `pulumi.com/waitFor` annotation makes Pulumi wait for the operator first).
  Objects wait for the objects of the previous file (the bundle's apply order), for their
  namespace (a manifest Namespace, else the release that creates it), and custom resources for
  the release that installs their CRD (its `crds` list). Namespaces are declared first of all.
  The file order follows the API's references (18-topology.yaml before the flavors of 20-kueue.yaml
  that name it), so a replaced object is deleted only after what names it: Pulumi deletes
  dependents first, and Kueue's finalizer holds a Topology while a flavor names it.

What a re-plan must not take with it is kept in the cluster when it leaves the bundle
(`retain_on_delete`: Pulumi forgets it and deletes nothing): the manifests' Namespaces (a renamed or
removed tenant's workloads and data stay until someone deletes them on purpose), and the releases
that install CRDs (an uninstall would delete the CRDs the Kueue and Volcano charts keep in their
templates, and with them every queue and workload). Objects whose frozen fields change come with a
new name from orchgen, so they are a create plus a delete, never an update the API server refuses.

The last step is the production check of the Kubernetes plane (../checks/run.py --plane kubernetes,
a pulumi-command `local.Command` after every release and object): a gang test job admitted whole or
not at all. Its JSON result is the stack output `checks`; a failed check fails `pulumi up`, as the
Slurm bring-up's checks do (bringup/pulumi/). It re-runs when checks/ changes.

The stack's config file (Pulumi.<stack>.yaml) is the operator's: this program reads only
`kubernetes:context` from it, and the site's optional `orchgen:chartRepository` (a chart mirror) and
`orchgen:helmPostRenderer` (site_release_options), and orchgen never rewrites it once it exists.

It needs only pulumi, pulumi-kubernetes, pulumi-command and PyYAML (pulumi/requirements.txt), and
kubectl for the check: no orchgen, and no network until the Kubernetes provider talks to the cluster
named by `kubernetes:context`.
"""
from __future__ import annotations

import hashlib
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s
import yaml

# Pulumi.<stack>.yaml ships with this value so that nobody installs into whatever context happens
# to be current: the operator must name the cluster (`pulumi config set kubernetes:context ...`).
PLACEHOLDER_CONTEXT = "REPLACE-WITH-YOUR-KUBECONFIG-CONTEXT"

# The Pulumi CLI runs the project directory's __main__.py; fall back to the working directory
# (the project directory too) when run without a file name.
PROJECT_DIR = Path(globals().get("__file__") or Path.cwd() / "__main__.py").resolve().parent
KUBE_DIR = PROJECT_DIR.parent / "kubernetes"

# The releases.yaml entry of the bundle contract: a copy of generator/contract.py's RELEASE_KEYS
# (this program runs without orchgen; tests/test_registries.py holds the two equal).
RELEASE_KEYS = {"name": str, "namespace": str, "repo": str, "chart": str, "version": str,
                "values": str, "crds": list, "dependsOn": list}
CUSTOM_RESOURCE_FIELDS = {"apiVersion", "kind", "metadata", "spec"}


def load_releases(kube_dir: Path) -> list[dict[str, Any]]:
    """The releases of helm/releases.yaml, checked for the keys and types of the bundle contract."""
    path = kube_dir / "helm" / "releases.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, list):
        raise ValueError(f"{path}: expected a mapping with a `releases` list")
    for i, rel in enumerate(releases):
        for key, typ in RELEASE_KEYS.items():
            if not isinstance(rel, dict) or not isinstance(rel.get(key), typ):
                # A version such as 1.10 unquoted would arrive as the float 1.1: refuse, never guess.
                raise ValueError(f"{path}: releases[{i}].{key} must be a {typ.__name__}")
    return releases


def values_args(kube_dir: Path, rel: dict[str, Any]) -> dict[str, Any]:
    """Release arguments carrying the values file: as a mapping, or as the file itself when it holds
    a null. Pulumi's Python SDK drops None from inputs (pulumi/pulumi#12178), which would keep the
    chart default that Helm's null is written to delete; a values file reaches Helm with its nulls
    (pulumi-kubernetes >= 4.30, pulumi/pulumi-kubernetes#4293)."""
    path = kube_dir / "helm" / rel["values"]
    text = path.read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    if values is None:
        return {"values": {}}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: Helm values must be a mapping")
    if not has_null(values):
        return {"values": values}
    return {"value_yaml_files": [pulumi.StringAsset(text)]}


def has_null(value: Any) -> bool:
    if isinstance(value, dict):
        return any(has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(has_null(v) for v in value)
    return value is None


def chart_source(rel: dict[str, Any], mirror: str | None = None) -> dict[str, Any]:
    """Release arguments naming the chart: OCI charts are a full reference, https ones a repo + name.

    `mirror` (config `orchgen:chartRepository`) is the site's own chart repository, which serves every
    chart of releases.yaml under its chart name at the same version (an air-gapped site's Harbor,
    Artifactory or ChartMuseum that mirrors the public ones): an oci:// mirror gives the reference
    <mirror>/<chart>, any other a classic Helm repository (index.yaml) that the chart is looked up in.
    Chart names and versions stay the bundle's; only where Helm fetches them changes."""
    repo = mirror or rel["repo"]
    if repo.startswith("oci://"):
        return {"chart": f"{repo.rstrip('/')}/{rel['chart']}"}
    return {"chart": rel["chart"], "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=repo)}


def site_release_options() -> dict[str, Any]:
    """What the site's config adds to every release (both optional, unset by default):
    - `orchgen:chartRepository`: its chart mirror (chart_source);
    - `orchgen:helmPostRenderer`: the path of a Helm post-renderer (an executable that reads the
      rendered manifests on stdin and writes them on stdout, `helm install --post-renderer`), for
      what a site changes in every chart (its image registry, its labels), run by each release."""
    config = pulumi.Config("orchgen")
    post = config.get("helmPostRenderer")
    return {"mirror": config.get("chartRepository"), **({"postrender": post} if post else {})}


def install_releases(releases: list[dict[str, Any]], kube_dir: Path, provider: k8s.Provider,
                     namespaces: dict[str, pulumi.Resource],
                     prerequisites: list[pulumi.Resource] = ()) -> dict[str, k8s.helm.v3.Release]:
    """One Helm release each, one after another in file order (releases.yaml is the install order, so
    an ordering need nobody wrote into `dependsOn` cannot turn into a race), after its `dependsOn`,
    and after its namespace when a manifest declares it (then Helm must not create it too: the
    second creator would fail with AlreadyExists), and after every prerequisite object."""
    installed: dict[str, k8s.helm.v3.Release] = {}
    site = site_release_options()
    mirror = site.pop("mirror")
    for rel in releases:
        missing = [d for d in rel["dependsOn"] if d not in installed]
        if missing:
            raise ValueError(f"release {rel['name']} depends on {missing}, which releases.yaml does not "
                             "list before it")
        previous = list(installed.values())[-1:]
        deps = list(dict.fromkeys(list(prerequisites) + previous + [installed[d] for d in rel["dependsOn"]]))
        own_namespace = namespaces.get(rel["namespace"])
        installed[rel["name"]] = k8s.helm.v3.Release(
            rel["name"],
            name=rel["name"],  # the Helm release name; without it Pulumi appends a random suffix
            namespace=rel["namespace"],
            create_namespace=own_namespace is None,
            version=rel["version"],
            **values_args(kube_dir, rel),
            **chart_source(rel, mirror),
            **site,
            opts=pulumi.ResourceOptions(provider=provider,
                                        depends_on=deps + ([own_namespace] if own_namespace else []),
                                        # a release that installs CRDs is never uninstalled by Pulumi
                                        retain_on_delete=bool(rel["crds"])),
        )
    return installed


def load_manifests(kube_dir: Path, folder: str = "manifests") -> list[tuple[str, list[dict[str, Any]]]]:
    """(file name, objects) per <folder>/*.yaml, sorted by file name; empty documents skipped
    (none where the bundle has no such folder)."""
    out = []
    for path in sorted((kube_dir / folder).glob("*.yaml"), key=lambda p: p.name):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
                raise ValueError(f"{path}: document {i + 1} is not a Kubernetes object")
            if not (doc.get("metadata") or {}).get("name"):
                raise ValueError(f"{path}: document {i + 1} has no metadata.name")
        out.append((path.name, docs))
    return out


def api_group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def builtin_class(api_version: str, kind: str) -> type | None:
    """The typed pulumi-kubernetes class of a built-in kind, or None (then it is a custom resource).

    Built-in groups are the core group, dotless ones (apps, batch, policy ...) and *.k8s.io; the
    module is the group's first label (rbac.authorization.k8s.io -> rbac). Other groups
    (kueue.x-k8s.io, scheduling.volcano.sh) are never looked up, so a CRD group whose first label
    matches a built-in module (scheduling) cannot be mistaken for it.
    """
    group, _, version = api_version.rpartition("/")
    if "." in group and not group.endswith(".k8s.io"):
        return None
    module = group.split(".")[0] if group else "core"
    try:
        cls = getattr(importlib.import_module(f"pulumi_kubernetes.{module}.{version}"), kind, None)
    except ImportError:
        return None
    return cls if isinstance(cls, type) and issubclass(cls, pulumi.CustomResource) else None


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def resource_name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def declare(obj: dict[str, Any], custom: bool, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One Kubernetes object as one Pulumi resource, every field passed as written in the bundle."""
    name = resource_name(obj)
    if custom:
        extra = sorted(set(obj) - CUSTOM_RESOURCE_FIELDS)
        if extra:  # CustomResource carries metadata and spec only: refuse to drop fields silently
            raise ValueError(f"{obj['apiVersion']} {obj['kind']} {name}: unsupported top-level "
                             f"fields {extra}")
        return k8s.apiextensions.CustomResource(name, api_version=obj["apiVersion"], kind=obj["kind"],
                                                metadata=obj["metadata"], spec=obj.get("spec"),
                                                opts=opts)
    cls = builtin_class(obj["apiVersion"], obj["kind"])
    # Typed classes take top-level fields in snake case (roleRef -> role_ref); nested dicts are
    # sent to the provider as they are, in the API's own camelCase.
    fields = {_snake(k): v for k, v in obj.items()}
    return cls(name, opts=opts, **fields)


def is_namespace(obj: dict[str, Any]) -> bool:
    return obj["apiVersion"] == "v1" and obj["kind"] == "Namespace"


def declare_namespaces(files: list[tuple[str, list[dict[str, Any]]]],
                       provider: k8s.Provider) -> dict[str, pulumi.Resource]:
    """The manifests' Namespaces, declared before anything else whatever file holds them: releases
    and namespaced objects wait for their own."""
    # retain_on_delete: a tenant that leaves the bundle keeps its namespace (and what runs in it)
    return {obj["metadata"]["name"]: declare(obj, False, pulumi.ResourceOptions(provider=provider,
                                                                                 retain_on_delete=True))
            for _, objs in files for obj in objs if is_namespace(obj)}


class Manifests:
    """Declares the manifest objects with the dependencies that make them apply in order."""

    def __init__(self, releases: list[dict[str, Any]], installed: dict[str, k8s.helm.v3.Release],
                 namespaces: dict[str, pulumi.Resource], provider: k8s.Provider) -> None:
        self.provider = provider
        self.crd_owners: dict[str, list[pulumi.Resource]] = {}
        self.namespaces = dict(namespaces)
        for rel in releases:
            for group in rel["crds"]:
                self.crd_owners.setdefault(group, []).append(installed[rel["name"]])
            # A namespace no manifest declares is created by its release (create_namespace).
            self.namespaces.setdefault(rel["namespace"], installed[rel["name"]])

    def is_custom(self, obj: dict[str, Any]) -> bool:
        return (api_group(obj["apiVersion"]) in self.crd_owners
                or builtin_class(obj["apiVersion"], obj["kind"]) is None)

    def dependencies(self, obj: dict[str, Any], custom: bool,
                     previous: list[pulumi.Resource]) -> list[pulumi.Resource]:
        deps = list(previous)
        if custom:
            deps += self.crd_owners.get(api_group(obj["apiVersion"]), [])
        namespace = obj["metadata"].get("namespace")
        if namespace in self.namespaces:
            deps.append(self.namespaces[namespace])
        return list(dict.fromkeys(deps))

    def apply(self, files: list[tuple[str, list[dict[str, Any]]]]) -> list[pulumi.Resource]:
        """Every object but the Namespaces (declared already); each file's objects wait for the
        previous file's, which is the bundle's apply order (file name order)."""
        declared: list[pulumi.Resource] = []
        previous: list[pulumi.Resource] = []
        for _, objs in files:
            current = []
            for obj in objs:
                if is_namespace(obj):
                    current.append(self.namespaces[obj["metadata"]["name"]])
                    continue
                custom = self.is_custom(obj)
                opts = pulumi.ResourceOptions(provider=self.provider,
                                              depends_on=self.dependencies(obj, custom, previous))
                current.append(declare(obj, custom, opts))
            declared += current
            previous = current or previous
        return declared


def kube_provider() -> k8s.Provider:
    context = pulumi.Config("kubernetes").get("context")
    if not context or context == PLACEHOLDER_CONTEXT:
        raise pulumi.RunError("set the cluster to install into: "
                              "pulumi config set kubernetes:context <a context of your kubeconfig>")
    return k8s.Provider("kubernetes", context=context)


def gang_check(checks_dir: Path, after: list[pulumi.Resource]) -> command.local.Command | None:
    """checks/run.py --plane kubernetes with the provider's context, after everything is installed."""
    run = checks_dir / "run.py"
    if not run.is_file():
        return None
    digest = hashlib.sha256(run.read_bytes() + b"\0" + (checks_dir / "checks.json").read_bytes()).hexdigest()
    argv = f"python3 {shlex.quote(str(run))} --plane kubernetes"
    return command.local.Command(
        "checks", create=argv, update=argv, triggers=[digest],
        environment={"ORCHGEN_KUBE_CONTEXT": pulumi.Config("kubernetes").require("context")},
        opts=pulumi.ResourceOptions(depends_on=after))


def main(kube_dir: Path = KUBE_DIR) -> None:
    releases = load_releases(kube_dir)
    before = load_manifests(kube_dir, "prerequisites")
    files = load_manifests(kube_dir)
    provider = kube_provider()
    namespaces = declare_namespaces(before + files, provider)
    # built-in kinds only: no release installs anything they need
    prerequisites = Manifests([], {}, namespaces, provider).apply(before)
    installed = install_releases(releases, kube_dir, provider, namespaces, prerequisites)
    # kubernetes/operator-resources/ after every manifest, so after the object whose operator creates
    # their CRD; that object (the NicClusterPolicy) carries pulumi.com/waitFor, so Pulumi waits for
    # its operator's `ready` first
    later = load_manifests(kube_dir, "operator-resources")
    objects = Manifests(releases, installed, namespaces, provider).apply(files + later)
    pulumi.export("releases", {r["name"]: r["version"] for r in releases})
    check = gang_check(kube_dir.parent / "checks", [*prerequisites, *installed.values(), *objects])
    if check is not None:
        pulumi.export("checks", check.stdout)


if __name__ == "__main__":
    main()
