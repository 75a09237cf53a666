"""The bundle's Pulumi project (pulumi/), and its program run under Pulumi's own mocks.

The program (stacks/__main__.py, copied into bundles) is run with runpy as the Pulumi CLI runs it,
after `pulumi.runtime.set_mocks` (tests/pulumi_mocks.py): on the hand-made sample bundle in
tests/data/pulumi-sample/ and on the bundle `orchgen plan` writes for every example with a
Kubernetes plane. Expectations are read from the bundle's own files, independently of the program:
every release with its pinned chart, repository, namespace and values; every manifest object
declared once, as written; custom resources depending on the release that installs their CRD,
namespaced objects on their namespace, each manifest file on the one before; and every object
valid against its upstream schema (the validating mock).
"""
from __future__ import annotations

import ast
import json
import runpy
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import spec
from generator.decide import make_plan
from generator.render import pulumi as pulumi_render
from generator.render import render
from tests._consumers import crd_paths, REPO, require
from tests.conftest import all_examples, run_orchgen

SAMPLE = REPO / "tests" / "data" / "pulumi-sample"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONTEXT = {"kubernetes:context": "test-cluster"}

try:
    from tests import pulumi_mocks
except ImportError as missing:  # pulumi or pulumi-kubernetes not installed
    pulumi_mocks, MISSING = None, str(missing)


@pytest.fixture(autouse=True)
def _pulumi_installed() -> None:
    require(pulumi_mocks, f"Pulumi SDK not importable: {MISSING if pulumi_mocks is None else ''}")


def _plan(example: Path):
    return make_plan(spec.load(example), example)


def _kube_examples() -> list[Path]:
    return [e for e in all_examples() if _plan(e).kube_plane is not None]


@pytest.fixture(scope="module")
def crds():
    from generator.validate.crds import CRDRegistry

    return CRDRegistry.from_paths(crd_paths())


def _mocks(crds, kubernetes_version: str = "1.33"):
    return pulumi_mocks.ValidatingMocks(pulumi_mocks.object_validator(crds, kubernetes_version))


def _sample_bundle(tmp_path: Path) -> Path:
    """The sample's kubernetes/ beside the program as a bundle holds it (pulumi/__main__.py)."""
    bundle = tmp_path / "sample"
    shutil.copytree(SAMPLE / "kubernetes", bundle / "kubernetes")
    (bundle / "pulumi").mkdir()
    (bundle / "pulumi" / "__main__.py").write_bytes(pulumi_render.stack_file("__main__.py"))
    return bundle


def _program_globals() -> dict[str, Any]:
    """The program's functions and constants, without running main() (it is not __main__ here)."""
    return runpy.run_path(str(REPO / "stacks" / "__main__.py"), run_name="orchgen_stack_under_test")


# --- what the bundle expects, read from its own files ------------------------------------------


def _releases(bundle: Path) -> list[dict[str, Any]]:
    return yaml.safe_load((bundle / "kubernetes" / "helm" / "releases.yaml").read_text())["releases"]


def _manifest_files(bundle: Path, folder: str = "manifests") -> list[list[dict[str, Any]]]:
    files = sorted((bundle / "kubernetes" / folder).glob("*.yaml"), key=lambda p: p.name)
    return [docs for docs in ([d for d in yaml.safe_load_all(f.read_text()) if d] for f in files) if docs]


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _has_null(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null(v) for v in value)
    return value is None


def _without_nulls(value: Any) -> Any:
    """What reaches the provider: Pulumi's Python SDK drops None map values (null = absent in the API)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def check_releases(bundle: Path, run) -> None:
    releases = _releases(bundle)
    declared = run.of_type(RELEASE)
    assert sorted(r.name for r in declared) == sorted(r["name"] for r in releases)
    by_name = {r.name: r for r in declared}
    for i, rel in enumerate(releases):
        got = by_name[rel["name"]]
        text = (bundle / "kubernetes" / "helm" / rel["values"]).read_text()
        values = yaml.safe_load(text) or {}
        inputs = got.inputs
        assert inputs["name"] == rel["name"]  # no random suffix on the Helm release name
        assert inputs["namespace"] == rel["namespace"]
        assert inputs["version"] == rel["version"]
        if _has_null(values):  # Helm must see the nulls: the file itself goes, not a mapping
            assert [a.text for a in inputs["valueYamlFiles"]] == [text] and "values" not in inputs
        else:
            assert inputs.get("values", {}) == values and "valueYamlFiles" not in inputs
        if rel["repo"].startswith("oci://"):
            assert inputs["chart"] == f"{rel['repo'].rstrip('/')}/{rel['chart']}"
            assert "repositoryOpts" not in inputs
        else:
            assert inputs["chart"] == rel["chart"]
            assert inputs["repositoryOpts"] == {"repo": rel["repo"]}
        # releases.yaml is the install order: each release waits for the one before and its dependsOn
        waits_for = rel["dependsOn"] + [r["name"] for r in releases[max(i - 1, 0):i]]
        assert {by_name[d].urn for d in waits_for} <= set(got.dependencies), rel["name"]
        # ... and for every prerequisite object (what the provider needs before any release)
        objects = {_key(o.inputs): o.urn for o in run.objects}
        before = [objects[_key(o)] for docs in _manifest_files(bundle, "prerequisites") for o in docs]
        assert set(before) <= set(got.dependencies), rel["name"]


def check_objects(bundle: Path, run) -> None:
    """Every manifest object declared exactly once, with exactly the fields the file holds."""
    expected = [obj for folder in ("prerequisites", "manifests", "operator-resources")
                for docs in _manifest_files(bundle, folder)
                for obj in docs]
    declared = run.objects
    assert sorted(_key(o.inputs) for o in declared) == sorted(_key(o) for o in expected)
    by_key = {_key(o.inputs): o for o in declared}
    for obj in expected:
        assert by_key[_key(obj)].inputs == _without_nulls(obj), _key(obj)


def check_dependencies(bundle: Path, run) -> None:
    releases = _releases(bundle)
    release_urn = {r.name: r.urn for r in run.of_type(RELEASE)}
    owners = {g: [release_urn[r["name"]] for r in releases if g in r["crds"]]
              for r in releases for g in r["crds"]}
    by_key = {_key(o.inputs): o for o in run.objects}
    # the operator resources come after every manifest, the last file's objects included
    files = _manifest_files(bundle) + _manifest_files(bundle, "operator-resources")
    namespaces = {o["metadata"]["name"]: by_key[_key(o)].urn
                  for docs in _manifest_files(bundle, "prerequisites") + files for o in docs
                  if (o["apiVersion"], o["kind"]) == ("v1", "Namespace")}
    for rel in releases:  # a release whose namespace a manifest declares waits for it
        if rel["namespace"] in namespaces:
            assert namespaces[rel["namespace"]] in run.named(RELEASE, rel["name"]).dependencies
        namespaces.setdefault(rel["namespace"], release_urn[rel["name"]])
    previous: list[str] = []
    for docs in files:
        for obj in docs:
            got = by_key[_key(obj)]
            deps = set(got.dependencies)
            for owner in owners.get(_group(obj["apiVersion"]), []):
                assert owner in deps, f"{_key(obj)} does not wait for the release installing its CRD"
            namespace = obj["metadata"].get("namespace")
            if namespace in namespaces:
                assert namespaces[namespace] in deps, f"{_key(obj)} does not wait for its namespace"
            if obj["kind"] != "Namespace":
                assert set(previous) <= deps, f"{_key(obj)} does not wait for the previous manifest file"
        previous = [by_key[_key(o)].urn for o in docs]


def check_options(bundle: Path, run) -> None:
    """What a re-plan must not delete is retained: Namespaces and the releases that install CRDs
    (`retain_on_delete`); nothing else is, so a removed object really goes. Nothing is `protect`ed
    (that would stop every `pulumi up` that removes it) and nothing relies on replace options:
    objects with frozen fields get new names from orchgen instead (tests/test_replan.py)."""
    releases = {r["name"]: r for r in _releases(bundle)}
    for r in run.resources:
        if not r.typ.startswith("kubernetes:"):
            continue
        if r.typ == RELEASE:
            keep = bool(releases[r.name]["crds"])
        else:
            keep = r.is_object and (r.inputs["apiVersion"], r.inputs["kind"]) == ("v1", "Namespace")
        assert r.options["retainOnDelete"] == keep, (r.typ, r.name, r.options)
        assert not r.options["protect"] and not r.options["deleteBeforeReplace"], (r.typ, r.name)
        assert not r.options["replaceOnChanges"], (r.typ, r.name)


def check_run(bundle: Path, run) -> None:
    run.mocks.check()  # every object valid against its upstream schema
    assert run.mocks.calls == []  # no provider functions: nothing is looked up at preview
    providers = run.of_type("pulumi:providers:kubernetes")
    assert len(providers) == 1 and providers[0].inputs["context"] == CONTEXT["kubernetes:context"]
    for r in run.resources:
        if r.typ.startswith("kubernetes:"):
            assert r.provider.startswith(providers[0].urn + "::"), f"{r.typ} {r.name} ignores the provider"
    check_releases(bundle, run)
    check_objects(bundle, run)
    check_dependencies(bundle, run)
    check_options(bundle, run)


# --- the renderer ---------------------------------------------------------------------------------


@pytest.mark.parametrize("example", all_examples(), ids=lambda p: p.stem)
def test_pulumi_project_only_with_a_kube_plane(example: Path) -> None:
    plan = _plan(example)
    files = pulumi_render.render(plan)
    if plan.kube_plane is None:
        assert files == {}
        assert not any(p.startswith("pulumi/") for p in render(plan))
        return
    assert sorted(files) == sorted(["pulumi/Pulumi.yaml", f"pulumi/Pulumi.{plan.name}.yaml",
                                    "pulumi/requirements.txt", "pulumi/__main__.py"])
    project = yaml.safe_load(files["pulumi/Pulumi.yaml"])
    assert project["name"] == plan.name
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip"}}
    stack = yaml.safe_load(files[f"pulumi/Pulumi.{plan.name}.yaml"])
    assert stack == {"config": {"kubernetes:context": pulumi_render.PLACEHOLDER_CONTEXT}}
    assert files["pulumi/__main__.py"] == (REPO / "stacks" / "__main__.py").read_bytes()
    assert files["pulumi/requirements.txt"] == (REPO / "stacks" / "requirements.txt").read_bytes()
    readme = render(plan)["README.md"].decode()
    for step in (f"pulumi stack init {plan.name}", "pulumi config set kubernetes:context",
                 "pip install -r pulumi/requirements.txt", "pulumi up"):
        assert step in readme


def test_generated_program_compiles_and_imports_no_orchgen() -> None:
    source = pulumi_render.stack_file("__main__.py").decode()
    tree = compile(source, "pulumi/__main__.py", "exec", flags=ast.PyCF_ONLY_AST)
    compile(tree, "pulumi/__main__.py", "exec")
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names)
    assert third_party == {"pulumi", "pulumi_command", "pulumi_kubernetes", "yaml"}  # what requirements.txt pins


def test_requirements_pin_the_installed_versions() -> None:
    lines = [ln.strip() for ln in pulumi_render.stack_file("requirements.txt").decode().splitlines()]
    pins = dict(ln.split("==") for ln in lines if ln and not ln.startswith("#"))
    assert set(pins) == {"pulumi", "pulumi-command", "pulumi-kubernetes", "PyYAML"}
    assert {name: metadata.version(name) for name in pins} == pins


def test_renderer_and_program_agree_on_the_placeholder_context() -> None:
    assert _program_globals()["PLACEHOLDER_CONTEXT"] == pulumi_render.PLACEHOLDER_CONTEXT


# --- the program under mocks: the hand-made sample -------------------------------------------------


def test_sample_bundle_installs_under_mocks(tmp_path: Path, crds) -> None:
    bundle = _sample_bundle(tmp_path)
    run = pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", _mocks(crds), CONTEXT)
    check_run(bundle, run)
    # What the sample was built to exercise, spelt out:
    kueue = run.named(RELEASE, "kueue")
    assert kueue.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert run.named(RELEASE, "kuberay-operator").urn in kueue.dependencies
    ray = run.named("kubernetes:ray.io/v1:RayCluster", "nlp/rl")
    assert run.named(RELEASE, "kuberay-operator").urn in ray.dependencies
    account = run.named("kubernetes:core/v1:ServiceAccount", "kuberay-system/ray-operator-reader")
    assert run.named(RELEASE, "kuberay-operator").urn in account.dependencies  # the namespace's creator
    assert run.named("kubernetes:core/v1:ResourceQuota", "nlp/gpus").inputs["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "48"}


def test_a_site_chart_mirror_and_post_renderer_reach_every_release(tmp_path: Path, crds) -> None:
    """orchgen:chartRepository (an OCI mirror here; the real `pulumi up` of tests/test_pulumi_kube_real.py fetches
    from an index.yaml mirror) and orchgen:helmPostRenderer: every release, chart names and versions unchanged."""
    bundle = _sample_bundle(tmp_path)
    site = {**CONTEXT, "orchgen:chartRepository": "oci://harbor.example.internal/charts/",
            "orchgen:helmPostRenderer": "/usr/local/bin/site-post-render"}
    run = pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", _mocks(crds), site)
    run.mocks.check()  # check_run's check_releases expects the public sources
    check_objects(bundle, run)
    for rel in yaml.safe_load((bundle / "kubernetes/helm/releases.yaml").read_text())["releases"]:
        got = run.named(RELEASE, rel["name"]).inputs
        assert got["chart"] == f"oci://harbor.example.internal/charts/{rel['chart']}" and "repositoryOpts" not in got
        assert (got["version"], got["postrender"]) == (rel["version"], "/usr/local/bin/site-post-render")


def test_options_check_fails_when_the_program_retains_nothing(tmp_path: Path, crds) -> None:
    """check_options has teeth: the program with retain_on_delete switched off fails it."""
    bundle = _sample_bundle(tmp_path)
    program = bundle / "pulumi" / "__main__.py"
    text = program.read_text()
    assert text.count("retain_on_delete=") == 2
    program.write_text(text.replace("retain_on_delete=True", "retain_on_delete=False")
                       .replace('retain_on_delete=bool(rel["crds"])', "retain_on_delete=False"))
    run = pulumi_mocks.run_program(program, _mocks(crds), CONTEXT)
    with pytest.raises(AssertionError):
        check_options(bundle, run)


def test_placeholder_context_stops_the_program(tmp_path: Path, crds) -> None:
    import pulumi

    bundle = _sample_bundle(tmp_path)
    placeholder = {"kubernetes:context": pulumi_render.PLACEHOLDER_CONTEXT}
    with pytest.raises(pulumi.RunError, match="pulumi config set kubernetes:context"):
        pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", _mocks(crds), placeholder)


def test_manifest_namespace_of_a_release_is_not_created_twice(tmp_path: Path, crds) -> None:
    bundle = _sample_bundle(tmp_path)
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": "gpu-operator", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    (bundle / "kubernetes" / "manifests" / "00-namespaces.yaml").open("a").write("---\n" + yaml.safe_dump(ns))
    run = pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", _mocks(crds), CONTEXT)
    check_run(bundle, run)
    operator = run.named(RELEASE, "gpu-operator")
    assert operator.inputs.get("createNamespace") is not True
    assert run.named("kubernetes:core/v1:Namespace", "gpu-operator").urn in operator.dependencies


def test_values_with_nulls_reach_helm_as_a_file(tmp_path: Path, crds) -> None:
    bundle = _sample_bundle(tmp_path)
    values = bundle / "kubernetes" / "helm" / "gpu-operator.values.yaml"
    values.write_text(values.read_text() + "nfd:\n  enabled: null\n")  # null deletes a chart default
    run = pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", _mocks(crds), CONTEXT)
    check_run(bundle, run)
    assert "valueYamlFiles" in run.named(RELEASE, "gpu-operator").inputs
    assert run.named(RELEASE, "kueue").inputs["values"]["managerConfig"]


def _break(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_validating_mock_fails_on_broken_objects(tmp_path: Path, crds) -> None:
    bundle = _sample_bundle(tmp_path)
    manifests = bundle / "kubernetes" / "manifests"
    _break(manifests / "20-kueue.yaml", "  cohortName: sample", "  cohrt: sample")
    _break(manifests / "20-kueue.yaml", "nominalQuota: 48", "nominalQuota: lots")
    _break(manifests / "10-quotas.yaml", "  hard:", "  hrad:")
    mocks = _mocks(crds)
    pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", mocks, CONTEXT)
    text = "\n".join(mocks.errors)
    assert "ClusterQueue nlp: spec.cohrt: unknown field" in text
    assert "nominalQuota: 'lots' does not match" in text
    assert "ResourceQuota nlp/gpus: spec.hrad: unknown field" in text
    with pytest.raises(AssertionError, match="invalid Kubernetes objects"):
        mocks.check()


def test_validating_mock_checks_type_token_and_name(crds) -> None:
    mocks = _mocks(crds)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    assert mocks.check_object("kubernetes:core/v1:Namespace", namespace) == []
    assert mocks.check_object("kubernetes:v1:Namespace", namespace) == [
        "(type): declared as kubernetes:v1:Namespace, expected kubernetes:core/v1:Namespace"]
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"namespace": "a"}, "spec": {"clusterQueue": "q"}}
    errors = mocks.check_object("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", queue)
    assert errors[0].startswith("metadata.name: required")


def test_program_rejects_a_malformed_releases_file(tmp_path: Path) -> None:
    program = _program_globals()
    kube = _sample_bundle(tmp_path) / "kubernetes"
    releases = kube / "helm" / "releases.yaml"
    _break(releases, "version: 0.19.2", "version: 0.19")  # a float once parsed
    with pytest.raises(ValueError, match=r"releases\[2\]\.version must be a str"):
        program["load_releases"](kube)


def test_builtin_kinds_and_custom_resources_are_told_apart() -> None:
    builtin_class = _program_globals()["builtin_class"]
    assert builtin_class("v1", "Namespace").__name__ == "Namespace"
    assert builtin_class("rbac.authorization.k8s.io/v1", "ClusterRole").__name__ == "ClusterRole"
    assert builtin_class("scheduling.k8s.io/v1", "PriorityClass").__name__ == "PriorityClass"
    # CRD groups whose first label is also a built-in module name must not resolve to it
    assert builtin_class("scheduling.volcano.sh/v1beta1", "Queue") is None
    assert builtin_class("batch.volcano.sh/v1alpha1", "Job") is None
    assert builtin_class("kueue.x-k8s.io/v1beta2", "ClusterQueue") is None


# --- the program under mocks: every example's real bundle ------------------------------------------


@pytest.mark.parametrize("example", _kube_examples(), ids=lambda p: p.stem)
def test_example_bundle_installs_under_mocks(example: Path, tmp_path: Path, crds) -> None:
    bundle = tmp_path / "bundle"
    run_orchgen("plan", example, "-o", bundle, check=True)
    require((bundle / "kubernetes" / "helm" / "releases.yaml").is_file(),
            "this tree's renderers write no kubernetes/helm/releases.yaml yet")
    version = json.loads((bundle / "plan.json").read_text())["versions"]["kubernetes"]
    plan = _plan(example)
    stack_config = yaml.safe_load((bundle / "pulumi" / f"Pulumi.{plan.name}.yaml").read_text())["config"]
    config = {**stack_config, **CONTEXT}  # what `pulumi config set kubernetes:context` leaves
    run = pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", _mocks(crds, version), config,
                                   project=plan.name, stack=plan.name)
    check_run(bundle, run)
    pinned = {(c.repo, c.chart): c.version for c in plan.charts.values()}
    for rel in _releases(bundle):  # the plan's pinned versions (catalog + options.versions) reach Pulumi
        assert run.named(RELEASE, rel["name"]).inputs["version"] == pinned[(rel["repo"], rel["chart"])]


@pytest.mark.parametrize("gang", ["volcano", "kai"])
def test_scheduler_variants_install_under_mocks(gang: str, tmp_path: Path, crds) -> None:
    """The examples run Kueue; under Volcano and KAI the bundle also holds the tenant namespaces'
    ValidatingAdmissionPolicy: a built-in kind the program must declare typed, and valid."""
    data = yaml.safe_load((REPO / "examples" / "research-lab.yaml").read_text())
    data["options"]["gang_scheduler"] = gang
    src = tmp_path / "research-lab.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    bundle = tmp_path / "bundle"
    run_orchgen("plan", src, "-o", bundle, check=True)
    run = pulumi_mocks.run_program(bundle / "pulumi" / "__main__.py", _mocks(crds), CONTEXT,
                                   project="research-lab", stack="research-lab")
    check_run(bundle, run)
    policy = run.named("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                       "research-lab-tenant-queues")
    assert policy.inputs["spec"]["matchConstraints"]["namespaceSelector"]
