"""The registries hold to CONTRIBUTING.md's recipe: one record per chart (generator/catalog.py), per
gang scheduler (generator/schedulers.py) and per provider (generator/providers.py), and one bundle
contract (generator/contract.py), each read by its consumers rather than restated.

- every chart has reference data (chart defaults under ../shared/reference) or says why not, a
  values builder, a render test (a golden bundle installs it), a README part, and dependencies and
  needs that name real components and schedulers;
- every scheduler's chart is in the catalog and installed by its `gang:<name>` need, its module
  is registered, and no module outside the registry compares a scheduler's name;
- every provider is accepted by workload.yaml and its GPU Operator profile has a source; the
  managed providers' names are written out only in the provider table;
- the Pulumi program's copy of the releases.yaml contract equals the contract; plan.json's schema
  (`orchgen schema --plan`) accepts every golden plan.json and refuses a broken one.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from generator import catalog, contract, providers, schedulers
from generator.render.kubernetes import gpu_operator, helm, manifests, slinky, soperator

from ._consumers import REPO, reference_dir
from .conftest import run_orchgen
from .golden import CASES, GOLDEN, plan_of

GENERATOR = REPO / "generator"
BUILDERS = {**helm.VALUES, **slinky.VALUES, **soperator.VALUES}


def golden_releases() -> dict[str, set[str]]:
    """Chart component -> the golden cases whose releases.yaml installs it."""
    import yaml

    out: dict[str, set[str]] = {}
    for case in CASES:
        path = GOLDEN / case.name / contract.RELEASES_FILE
        if path.is_file():
            for rel in yaml.safe_load(path.read_text())["releases"]:
                out.setdefault(rel["name"], set()).add(case.name)
    return out


# ------------------------------------------------------------------ charts


@pytest.mark.parametrize("component", sorted(catalog.CATALOG))
def test_every_chart_has_reference_data_a_builder_and_a_render_test(component):
    chart = catalog.CATALOG[component]
    assert component in BUILDERS, f"{component}: no values builder (render/kubernetes/<module>.values in helm.VALUES)"
    ref = reference_dir() / chart.values_reference
    if chart.no_reference_why:
        assert not (ref / "values.yaml").exists(), f"{component}: has reference data now; drop no_reference_why"
    else:
        assert ref.is_dir() and any(ref.iterdir()), f"{component}: no reference data at {ref}"
    assert component in golden_releases(), (
        f"{component}: no golden bundle installs it; add a case to tests/golden/__init__.py (render test)")
    part = REPO / "templates" / "readme" / f"{chart.readme_part}.md.j2"
    assert part.is_file(), f"{component}: its README part {part} does not exist"
    text = part.read_text().lower()
    names = {chart.chart, component, component.replace("-", " "), component.split("-")[0]}
    assert any(n.lower() in text for n in names), f"{component}: {part.name} never names it"


def test_chart_records_name_real_components_needs_and_modes():
    schedulers_by_gang = {f"gang:{s.name}" for s in schedulers.SCHEDULERS.values()}
    for chart in catalog.CATALOG.values():
        assert set(chart.depends_on) <= set(catalog.CATALOG), chart.component
        assert chart.needed_when, f"{chart.component}: nothing installs it"
        for need in chart.needed_when:
            kind, _, value = need.partition(":")
            assert kind in {"gpu-stack", "network", "gang", "operator", "ray", "serving", "autoscaler", "notebooks", "metrics", "nvlink"}, need
            if kind == "serving":  # the stacks of decide/serving.py
                from generator.decide.serving import STACKS
                assert value in STACKS, need
            if kind == "gang":
                assert need in schedulers_by_gang, need
        assert {mode for mode, _ in chart.gitops_unsupported} <= {"kustomize", "argocd", "flux"}
        assert all(why for _, why in chart.gitops_unsupported)
        assert not chart.crds_in_templates or chart.crd_groups, chart.component


def test_planner_installs_a_chart_only_through_its_record():
    """A plan's charts are exactly the catalog entries its needs select, in catalog order."""
    for case in CASES:
        plan = plan_of(case)
        order = list(catalog.CATALOG)
        assert list(plan.charts) == sorted(plan.charts, key=order.index), case.name


# ------------------------------------------------------------------ gang schedulers


def test_every_scheduler_has_its_chart_module_and_option():
    from typing import get_args

    from generator.spec.models import Options

    accepted = set(get_args(Options.model_fields["gang_scheduler"].annotation)) - {"auto"}
    assert accepted == set(schedulers.SCHEDULERS)
    assert sum(s.auto for s in schedulers.SCHEDULERS.values()) == 1
    for s in schedulers.SCHEDULERS.values():
        assert f"gang:{s.name}" in catalog.CATALOG[s.chart].needed_when, s.name
        assert s.module in manifests.MODULES, s.name
        assert s.pod_wiring in {"namespace", "pod"} and (s.pod_wiring == "namespace") == (s.pod_queue_label is None)
        assert s.readme_part and s.webhooks
        part = REPO / "templates" / "readme" / f"{s.readme_part}.md.j2"
        assert s.name in part.read_text().lower(), f"{s.name}: its README part {part.name} never names it"


def _scheduler_name_comparisons(path: Path) -> list[str]:
    """`x == "kai"`, `x in ("kueue", ...)` and `{"volcano": ...}` dispatch in one module."""
    names = set(schedulers.SCHEDULERS)
    tree = ast.parse(path.read_text(), str(path))
    # VALUES maps chart components (whose names kueue and volcano share with their schedulers)
    components = {id(n.value) for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                  and any(isinstance(t, ast.Name) and t.id == "VALUES"
                          for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))}
    hits = []
    for node in ast.walk(tree):
        if id(node) in components:
            continue
        consts: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            consts = [node.left, *node.comparators]
            consts += [e for c in node.comparators if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
        elif isinstance(node, ast.Dict):
            consts = [k for k in node.keys if k is not None]
        for c in consts:
            if isinstance(c, ast.Constant) and c.value in names:
                hits.append(f"{path.relative_to(REPO)}:{node.lineno}: {c.value!r}")
    return hits


def test_no_scheduler_name_is_compared_outside_the_registry():
    hits = [h for p in sorted(GENERATOR.rglob("*.py")) if p.name not in ("schedulers.py", "catalog.py")
            for h in _scheduler_name_comparisons(p)]
    assert hits == []
    # the walker finds what it looks for
    probe = GENERATOR.parent / "tests" / "data" / "registry_probe.py"
    assert len(_scheduler_name_comparisons(probe)) == 3


# ------------------------------------------------------------------ providers


def test_every_provider_is_accepted_and_has_its_profile_source():
    from typing import get_args

    from generator.spec.models import FleetSpec

    assert get_args(FleetSpec.model_fields["provider"].annotation) == providers.NAMES
    for p in providers.PROVIDERS.values():
        assert p.gpu_operator_profile is None or p.gpu_operator_profile in gpu_operator.PROFILE_SOURCES, p.name
        assert f"gpu-stack:{p.gpu_stack}" in catalog.CATALOG["gpu-operator"].needed_when or p.gpu_stack == "provider"
        assert p.rdma in {"efa", "network-operator", "not-configured"} and p.rdma_doc, p.name
        assert not p.topology_labels or p.preferred_level in p.topology_labels, p.name
        assert p.managed == (p.pool_label is not None), p.name


def test_the_managed_providers_are_written_out_once():
    pattern = re.compile(r'"eks",\s*"gke",\s*"aks",\s*"oke"')
    hits = [p.relative_to(REPO).as_posix() for p in sorted(GENERATOR.rglob("*.py")) if pattern.search(p.read_text())]
    assert hits == []  # providers.py writes each record once; MANAGED is derived
    assert providers.MANAGED == ("eks", "gke", "aks", "oke")


# ------------------------------------------------------------------ the bundle contract


def test_the_pulumi_programs_release_keys_are_the_contracts():
    tree = ast.parse((REPO / "stacks" / "__main__.py").read_text())
    found = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "RELEASE_KEYS" for t in n.targets))
    copy = {k.value: v.id for k, v in zip(found.keys, found.values)}  # type: ignore[union-attr]
    assert copy == {k: t.__name__ for k, t in contract.RELEASE_KEYS.items()}
    # and it finds releases.yaml where the contract puts it (pulumi/ beside kubernetes/)
    helm_dir, releases = contract.RELEASES_FILE.split("/")[1:]
    assert f'kube_dir / "{helm_dir}" / "{releases}"' in (REPO / "stacks" / "__main__.py").read_text()
    assert contract.KUBE_DIR == "kubernetes" and 'PROJECT_DIR.parent / "kubernetes"' in \
        (REPO / "stacks" / "__main__.py").read_text()


def test_plan_schema_is_published_and_accepts_every_golden_plan():
    import jsonschema

    proc = run_orchgen("schema", "--plan", check=True)
    schema = json.loads(proc.stdout)
    assert schema == json.loads(json.dumps(contract.PLAN_SCHEMA))
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for case in CASES:
        plan = json.loads((GOLDEN / case.name / contract.PLAN_FILE).read_text())
        assert list(validator.iter_errors(plan)) == [], case.name
    broken = json.loads((GOLDEN / CASES[0].name / contract.PLAN_FILE).read_text())
    broken["gitops"] = "helmfile"
    broken["surprise"] = 1
    assert len(list(validator.iter_errors(broken))) == 2


def test_contributing_names_every_registry():
    text = (REPO / "CONTRIBUTING.md").read_text()
    for where in ("generator/catalog.py", "generator/schedulers.py", "generator/providers.py",
                  "generator/contract.py", "generator/spec/slurmconf.py", "generator/validate/",
                  "python -m tests.golden --update"):
        assert where in text, where


# ------------------------------------------------------------------ a new chart: one record, one builder


def test_a_new_chart_is_one_record_and_one_values_builder(monkeypatch, tmp_path):
    """KEDA (the serving issue's next chart, pinned as ../shared/reference/keda) added the way
    CONTRIBUTING.md says, for this test only: its record and its values builder are all it takes
    for the planner to install it, releases.yaml to carry its CRD groups and dependsOn in install
    order, Argo CD to refuse it with the record's reason, and validate to check its values
    against its reference defaults."""
    import dataclasses

    import yaml

    from generator import bundle
    from generator.errors import OrchgenError
    from generator.render import render
    from generator.validate import helm_checks
    from generator.validate.bundle_view import Bundle

    from .support import plan_of as plan_of_path

    keda = catalog.Chart("keda", "https://kedacore.github.io/charts", "keda", "2.20.2", "keda",
                         crd_groups=("eventing.keda.sh", "keda.sh"), values_reference="keda",
                         depends_on=("kuberay-operator",), needed_when=("ray",),
                         gitops_unsupported=(("argocd", "the trial record says so"),), readme_part="keda")
    monkeypatch.setitem(catalog.CATALOG, "keda", keda)
    values = {"operator": {"replicaCount": 2}}
    monkeypatch.setitem(helm.VALUES, "keda", lambda plan: values)

    example = REPO / "examples" / "grpo-rl.yaml"
    plan = plan_of_path(example)
    assert list(plan.charts)[-1] == "keda"
    files = render(plan)
    rels = yaml.safe_load(files[contract.RELEASES_FILE])["releases"]
    names = [r["name"] for r in rels]
    rel = rels[names.index("keda")]
    assert rel["crds"] == ["eventing.keda.sh", "keda.sh"] and rel["dependsOn"] == ["kuberay-operator"]
    assert names.index("kuberay-operator") < names.index("keda") and rel["version"] == "2.20.2"
    with pytest.raises(OrchgenError, match="cannot install keda 2.20.2: the trial record says so"):
        render(dataclasses.replace(plan, gitops="argocd"))

    bundle.write(files, tmp_path / "ok")
    notices: list[str] = []
    findings = list(helm_checks.check_values(Bundle(tmp_path / "ok"), reference_dir(), notices))
    assert [f for f in findings if "keda" in str(f)] == [] and not [n for n in notices if "keda" in n]
    values["operator"] = {"replicaCont": 2}  # a typo the chart's defaults do not have
    bundle.write(render(plan), tmp_path / "typo")
    findings = list(helm_checks.check_values(Bundle(tmp_path / "typo"), reference_dir(), []))
    assert any("keda.values.yaml" in str(f) and "replicaCont" in str(f) for f in findings), findings
