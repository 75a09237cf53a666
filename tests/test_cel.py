"""The CRDs' CEL rules (`x-kubernetes-validations`), evaluated as the API server does
(generator.validate.cel), in `orchgen validate` and in `orchgen validate --against OLD`.

(a) every rule of every reference CRD compiles and evaluates; (b) every custom resource of every
example bundle passes every create-time rule, and rules really ran; (c) for each family of rules a
valid object, broken in one way, gets that rule's message; (d) transition rules on re-plans, through
the CLI. CRDs come from tests._consumers.reference_dir(), as --crds would name them.
"""
from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import bundle, spec
from generator.decide import make_plan
from generator.render import render
from generator.validate import kube_checks
from generator.validate.bundle_checks import open_bundle, validate_bundle
from generator.validate.cel import CelSchema
from generator.validate.crds import CRDRegistry
from tests._consumers import REPO, reference_dir
from tests.conftest import all_examples
from tests.support import orchgen_argv

@cache
def registry() -> CRDRegistry:
    return CRDRegistry.from_dir(reference_dir())


def fleet_of(example: str, **options: Any) -> spec.Fleet:
    fleet = spec.load(REPO / "examples" / f"{example}.yaml")
    return fleet.model_copy(update={"options": fleet.options.model_copy(update=options)}) if options else fleet


def write_bundle(fleet: spec.Fleet, dest: Path, name: str = "x.yaml") -> Path:
    bundle.write(render(make_plan(fleet, name)), dest)
    return dest


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Callable[..., Path]:
    """(example, **options) -> its bundle, written once per module."""
    root = tmp_path_factory.mktemp("planned")
    made: dict[str, Path] = {}

    def get(example: str, **options: Any) -> Path:
        key = example + "".join(f"-{k}={v}" for k, v in sorted(options.items()))
        if key not in made:
            made[key] = write_bundle(fleet_of(example, **options), root / key)
        return made[key]

    return get


def custom_resources(root: Path) -> list[Any]:
    return [d for d in kube_checks.objects(open_bundle(root))
            if isinstance(d.data, dict) and registry().knows(d.api_version, d.kind)]


def crd_of(obj: dict[str, Any]):
    crd = registry().get(obj["apiVersion"], obj["kind"])
    assert crd is not None, (obj["apiVersion"], obj["kind"])
    return crd


def create_messages(obj: dict[str, Any]) -> list[str]:
    return [str(v) for v in crd_of(obj).cel.check_create(obj).violations]


def update_messages(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    return [str(v) for v in crd_of(new).cel.check_update(new, old).violations]


# ---- (a) every rule of every reference CRD compiles and evaluates ---------------------------------


def _raw_rules(node: Any) -> list[dict[str, Any]]:
    """Every x-kubernetes-validations entry anywhere under a schema (allOf and friends included)."""
    if isinstance(node, list):
        return [r for item in node for r in _raw_rules(item)]
    if not isinstance(node, dict):
        return []
    own = [r for r in node.get("x-kubernetes-validations") or [] if isinstance(r, dict)]
    return own + [r for k, v in node.items() if k != "x-kubernetes-validations" for r in _raw_rules(v)]


def test_every_rule_of_every_reference_crd_compiles():
    total = transition = 0
    for crd in registry():
        rules = crd.cel.rules()
        raw = _raw_rules(crd.openapi_schema)
        # the walk reaches every rule the schema holds (none hides where values cannot sit)
        assert sorted(r.rule for r in rules) == sorted(str(r["rule"]) for r in raw), crd
        for rule in rules:
            assert rule.error is None, f"{crd.api_version} {crd.kind} {rule.location}: {rule.rule}: {rule.error}"
            assert rule.transition == ("oldSelf" in rule.rule), rule
        total += len(rules)
        transition += sum(r.transition for r in rules)
    assert total > 0 and 0 < transition < total, (total, transition)


def _sample(node: dict[str, Any]) -> Any:
    """A value for every property of a schema node: defaults and enums where given, one item per list."""
    if "default" in node:
        return copy.deepcopy(node["default"])
    if node.get("enum"):
        return node["enum"][0]
    if node.get("x-kubernetes-int-or-string"):
        return 1
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        out = {k: _sample(sub) for k, sub in (node.get("properties") or {}).items()}
        if isinstance(node.get("additionalProperties"), dict):
            out["key"] = _sample(node["additionalProperties"])
        return out
    if kind == "array":
        return [_sample(node["items"])] if isinstance(node.get("items"), dict) else []
    if kind in ("integer", "number"):
        return max(1, node.get("minimum", 1))
    if kind == "boolean":
        return False
    if node.get("format") == "date-time":
        return "2026-01-01T00:00:00Z"
    return "x"


def test_every_rule_evaluates_on_a_full_object():
    """An object with every field set reaches every rule; each must give true or false, not an
    evaluation error (a missing overload, a function celpy lacks at run time ...)."""
    for crd in registry():
        rules = crd.cel.rules()
        if not rules:
            continue
        obj = {**_sample(crd.openapi_schema), "apiVersion": crd.api_version, "kind": crd.kind,
               "metadata": {"name": "gpu-cluster"}}
        created, updated = crd.cel.check_create(obj), crd.cel.check_update(obj, obj)
        assert created.evaluated == sum(not r.transition for r in rules), crd
        assert updated.evaluated == sum(r.transition for r in rules), crd
        errors = [str(v) for v in created.violations + updated.violations if "evaluating rule" in v.message]
        assert not errors, (crd, errors)
        assert not updated.violations, crd  # staying the same never breaks a transition rule


# ---- how the walk follows the API server (synthetic schemas) --------------------------------------


def _schema(spec_schema: dict[str, Any]) -> CelSchema:
    return CelSchema({"type": "object", "properties": {"spec": spec_schema}})


def _obj(spec_value: Any) -> dict[str, Any]:
    return {"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec_value}


def test_self_is_the_value_where_the_rule_sits():
    schema = _schema({"type": "object", "properties": {
        "items": {"type": "array", "x-kubernetes-validations": [{"rule": "size(self) <= 2", "message": "list"}],
                  "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'bad'",
                                                                          "message": "item"}]}},
        "labels": {"type": "object", "additionalProperties": {
            "type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('v')", "message": "value"}]}}}})
    out = schema.check_create(_obj({"items": ["a", "bad", "c"], "labels": {"a": "v1", "b": "x"}}))
    assert sorted(map(str, out.violations)) == ["spec.items: list", "spec.items[1]: item", 'spec.labels.b: value']
    assert out.evaluated == 1 + 3 + 2


def test_defaults_apply_and_unknown_fields_are_pruned_before_rules():
    schema = _schema({"type": "object", "x-kubernetes-validations": [
        {"rule": "self.mode == 'fast'", "message": "mode"}, {"rule": "!has(self.extra)", "message": "extra"}],
        "properties": {"mode": {"type": "string", "default": "fast"}, "n": {"type": "integer"}}})
    assert schema.check_create(_obj({"n": 1, "extra": True})).violations == []
    assert [str(v) for v in schema.check_create(_obj({"mode": "slow"})).violations] == ["spec: mode"]
    kept = _schema({"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                    "x-kubernetes-validations": [{"rule": "!has(self.extra)", "message": "extra"}]})
    assert [str(v) for v in kept.check_create(_obj({"extra": 1})).violations] == ["spec: extra"]


def test_message_expression_reason_and_field_path():
    schema = _schema({"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "integer"}}}}, "x-kubernetes-validations": [
        {"rule": "self.a.b < 3", "messageExpression": "'b is ' + string(self.a.b)", "message": "static",
         "reason": "FieldValueForbidden", "fieldPath": ".a.b"},
        {"rule": "self.a.b < 2", "messageExpression": "self.a.b", "message": "fallback"},
        {"rule": "self.a.b < 1"}]})
    assert [str(v) for v in schema.check_create(_obj({"a": {"b": 5}})).violations] == [
        "spec.a.b: Forbidden: b is 5", "spec: fallback", "spec: failed rule: self.a.b < 1"]


def test_an_evaluation_error_is_a_violation_with_the_rule_message():
    schema = _schema({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {
        "type": "string"}}, "t": {"type": "string"}}, "x-kubernetes-validations": [
        {"rule": "!has(self.t) || self.m.size() >= 1", "message": "m needed"}]})
    [violation] = schema.check_create(_obj({"t": "x"})).violations
    assert violation.message.endswith("evaluating rule: m needed") and "no such" in violation.message


def test_a_rule_that_does_not_compile_is_reported_not_raised():
    schema = _schema({"type": "object", "x-kubernetes-validations": [
        {"rule": "self.a ==", "message": "m"}, {"rule": "self.lowerAscii() == 'a'", "message": "n"}]})
    messages = [v.message for v in schema.check_create(_obj({})).violations]
    assert len(messages) == 2 and "does not parse" in messages[0] and "lowerAscii" in messages[1]


def test_transition_rules_need_an_old_value_at_the_same_place():
    rule = [{"rule": "self == oldSelf", "message": "immutable"}]
    schema = _schema({"type": "object", "properties": {
        "fixed": {"type": "string", "x-kubernetes-validations": rule},
        "byName": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                   "items": {"type": "object", "properties": {
                       "name": {"type": "string"},
                       "size": {"type": "integer", "x-kubernetes-validations": rule}}}},
        "ordered": {"type": "array", "items": {"type": "object", "properties": {
            "size": {"type": "integer", "x-kubernetes-validations": rule}}}}}})
    old = _obj({"byName": [{"name": "a", "size": 1}, {"name": "b", "size": 2}], "ordered": [{"size": 1}]})
    assert schema.check_create(old).evaluated == 0  # CREATE runs no transition rule
    moved = _obj({"fixed": "new", "byName": [{"name": "b", "size": 2}, {"name": "c", "size": 9},
                                              {"name": "a", "size": 1}], "ordered": [{"size": 5}]})
    out = schema.check_update(moved, old)
    assert out.violations == [] and out.evaluated == 2  # fixed and c have no old value; lists match by key
    grown = _obj({"fixed": "x", "byName": [{"name": "a", "size": 3}]})
    assert [str(v) for v in schema.check_update(grown, {**old, "spec": {**old["spec"], "fixed": "y"}}).violations] \
        == ["spec.fixed: immutable", "spec.byName[0].size: immutable"]


# ---- (b) every example bundle passes every create-time rule ---------------------------------------


def _present(obj: Any, location: str) -> bool:
    """Whether a plain location (`spec.levels`, no [*] or {*}) has a value in the object."""
    if "[*]" in location or "{*}" in location:
        return False
    node = obj
    for part in [] if location == "(root)" else location.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("gitops", [None, "flux", "argocd"])
@pytest.mark.parametrize("example", [p.stem for p in all_examples()])
def test_every_custom_resource_of_every_example_passes_its_rules(example, gitops, tmp_path):
    fleet = fleet_of(example, **({"gitops": gitops} if gitops else {}))
    root = write_bundle(fleet, tmp_path / "b")
    evaluated = expected = 0
    for doc in custom_resources(root):
        crd = crd_of(doc.data)
        outcome = crd.cel.check_create(doc.data)
        assert not outcome.violations, f"{doc.path}: {doc.label}: {list(map(str, outcome.violations))}"
        evaluated += outcome.evaluated
        # a rule at a plain location whose value is in the object must have run
        expected += sum(1 for r in crd.cel.rules() if not r.transition and _present(doc.data, r.location))
    assert evaluated >= expected
    if expected:
        assert evaluated > 0


def test_the_examples_exercise_the_rules_of_each_scheduler(planned):
    """Kueue (every example with it), KAI, KubeRay and Flux objects of real bundles run their rules."""
    seen: dict[str, int] = {}
    for example, options in [("research-lab", {}), ("research-lab", {"gang_scheduler": "kai"}),
                             ("grpo-rl", {}), ("soperator-lab", {})]:
        for doc in custom_resources(planned(example, **options)):
            seen[doc.kind] = seen.get(doc.kind, 0) + crd_of(doc.data).cel.check_create(doc.data).evaluated
    assert {k for k, v in seen.items() if v} >= {"ClusterQueue", "ResourceFlavor", "Topology",
                                                            "HelmRelease"}


# ---- (c) one broken object per rule ---------------------------------------------------------------


def _doc_of(root: Path, kind: str, api_group: str = "") -> dict[str, Any]:
    for doc in custom_resources(root):
        if doc.kind == kind and doc.api_version.startswith(api_group):
            return copy.deepcopy(doc.data)
    raise AssertionError(f"no {kind} in {root}")


HAND_WRITTEN: dict[str, dict[str, Any]] = {
    "HyperNode": {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s0"},
                  "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]}},
    "Controller": {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller",
                   "metadata": {"name": "slurm", "namespace": "slurm"},
                   "spec": {"slurmKeyRef": {"name": "slurm-key", "key": "slurm.key"},
                            "jwtHs256KeyRef": {"name": "jwt", "key": "jwt.key"}}},
    "Accounting": {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Accounting",
                   "metadata": {"name": "acct", "namespace": "slurm"},
                   "spec": {"external": True, "externalConfig": {"host": "db.example", "port": 6819}}},
    "NodeSet": {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                "metadata": {"name": "h100", "namespace": "slurm"},
                "spec": {"controllerRef": {"name": "slurm"},
                         "updateStrategy": {"type": "ScheduledUpdate",
                                            "scheduledUpdate": {"startTime": "2026-01-01T00:00:00Z"}}}},
    "Token": {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Token", "metadata": {"name": "t", "namespace": "s"},
              "spec": {"username": "slurm", "jwtHs256KeyRef": {"name": "jwt", "key": "jwt.key"}}},
    "SlurmCluster": {"apiVersion": "slurm.nebius.ai/v1", "kind": "SlurmCluster",
                     "metadata": {"name": "soperator", "namespace": "soperator"},
                     "spec": {"partitionConfiguration": {"configType": "structured",
                                                         "partitions": [{"name": "main"}]},
                              "sConfigController": {"reconfigureWaitTimeout": "2m",
                                                    "reconfigurePollInterval": "30s"}}},
    "GitRepository": {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                      "metadata": {"name": "fleet", "namespace": "flux-system"},
                      "spec": {"url": "https://git.example/fleet.git", "interval": "5m", "provider": "aws",
                               "serviceAccountName": "fleet"}},
    "GPUCluster": {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"},
                   "spec": {}},
    "NVIDIADriver": {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "default"},
                     "spec": {"default": True}},
}


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation: set a dotted path (list indices as numbers) to `value`; `...` deletes it."""
    def apply(obj: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = obj
        for part in parents:
            node = node[part] if isinstance(part, int) else node.setdefault(part, {})
        if value is ...:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)
    return apply


def _reverse_levels(obj: dict[str, Any]) -> None:
    obj["spec"]["levels"].reverse()  # the hostname level first


def _both(*mutations: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(obj)
    return apply


KUEUE, KAI, RAY, FLUX = ("research-lab", {}), ("research-lab", {"gang_scheduler": "kai"}), ("grpo-rl", {}), \
    ("soperator-lab", {})
BROKEN = [
    # (case id, where the valid object comes from, kind, mutation, expected "path: message")
    ("kueue-cq-resources", KUEUE, "ClusterQueue", _set("spec.resourceGroups.0.flavors.0.resources.2", ...),
     "spec.resourceGroups[0]: flavors must have the same number of resources as the coveredResources"),
    ("kueue-cq-borrowing", KUEUE, "ClusterQueue",
     _both(_set("spec.cohortName", ...), _set("spec.resourceGroups.0.flavors.0.resources.0.borrowingLimit", 1)),
     "spec: borrowingLimit must be nil when cohort is empty"),
    ("kueue-cq-preemption", KUEUE, "ClusterQueue",
     _set("spec.preemption", {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
     "spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"),
    ("kueue-cq-fungibility", KUEUE, "ClusterQueue",
     _set("spec.flavorFungibility", {"whenCanBorrow": "MayStopSearch", "preference": "BorrowingOverPreemption"}),
     "spec.flavorFungibility: preference can only be set when both whenCanBorrow and whenCanPreempt are "
     "TryNextFlavor"),
    ("kueue-cohort-resources", KUEUE, "Cohort",
     _set("spec.resourceGroups", [{"coveredResources": ["cpu", "memory"],
                                   "flavors": [{"name": "l40s", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]),
     "spec.resourceGroups[0]: flavors must have the same number of resources as the coveredResources"),
    ("kueue-flavor-labels", KUEUE, "ResourceFlavor", _set("spec.nodeLabels", {}),
     "spec: at least one nodeLabel is required when topology is set"),
    ("kueue-flavor-toleration-value", KUEUE, "ResourceFlavor",
     _set("spec.tolerations", [{"key": "k", "operator": "Exists", "value": "v"}]),
     "spec.tolerations: a value must be empty when 'operator' is 'Exists'"),
    ("kueue-flavor-toleration-seconds", KUEUE, "ResourceFlavor",
     _set("spec.tolerations", [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
     "spec.tolerations: effect must be 'NoExecute' when 'tolerationSeconds' is set"),
    ("kueue-flavor-taint-effect", KUEUE, "ResourceFlavor",
     _set("spec.nodeTaints", [{"key": "k", "value": "v", "effect": "Sometimes"}]),
     "spec.nodeTaints: supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"),
    ("kueue-topology-unique", KUEUE, "Topology", _set("spec.levels.1", {"nodeLabel": "orchgen.io/spine"}),
     "spec.levels: must be unique"),
    ("kueue-topology-hostname", KUEUE, "Topology", _reverse_levels,
     "spec.levels: the kubernetes.io/hostname label can only be used at the lowest level of topology"),
    ("kai-topology-unique", KAI, "Topology", _set("spec.levels.1", {"nodeLabel": "orchgen.io/spine"}),
     "spec.levels: must be unique"),
    ("kai-topology-hostname", KAI, "Topology", _reverse_levels,
     "spec.levels: the kubernetes.io/hostname label can only be used at the lowest level of topology"),
    ("ray-cluster-managed-by", RAY, "RayCluster", _set("spec.managedBy", "someone-else"),
     "spec.managedBy: the managedBy field value must be either 'ray.io/kuberay-operator' or "
     "'kueue.x-k8s.io/multikueue'"),
    ("ray-job-deletion", RAY, "RayJob", _set("spec.deletionStrategy", {"onSuccess": {"policy": "DeleteCluster"}}),
     "spec.deletionStrategy: deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules "
     "field (cannot be empty)"),
    ("ray-job-deletion-condition", RAY, "RayJob",
     _set("spec.deletionStrategy", {"deletionRules": [{"policy": "DeleteCluster", "condition": {
         "jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Failed"}}]}),
     "spec.deletionStrategy.deletionRules[0].condition: JobStatus and JobDeploymentStatus cannot be used together "
     "within the same deletion condition."),
    ("flux-helmrelease-chart", FLUX, "HelmRelease",
     _both(_set("spec.chart", {"spec": {"chart": "kueue"}}), _set("spec.chartRef", {"kind": "OCIRepository",
                                                                                    "name": "kueue"})),
     "spec: either chart or chartRef must be set"),
    ("flux-helmrelease-retry", FLUX, "HelmRelease",
     _set("spec.upgrade.strategy", {"name": "RemediateOnFailure", "retryInterval": "1m"}),
     "spec.upgrade.strategy: .retryInterval can only be set when .name is 'RetryOnFailure'"),
    ("flux-gitrepository-sa", None, "GitRepository", _set("spec.provider", "generic"),
     "spec: serviceAccountName can only be set when provider is 'azure' or 'aws'"),
    ("volcano-hypernode-none", None, "HyperNode", _set("spec.members.0.selector", {}),
     "spec.members[0].selector: Either ExactMatch or RegexMatch or LabelMatch must be specified"),
    ("volcano-hypernode-two", None, "HyperNode",
     _set("spec.members.0.selector.regexMatch", {"pattern": "n.*"}),
     "spec.members[0].selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"),
    ("slinky-controller-key", None, "Controller", _set("spec.slurmKeyRef", ...),
     "spec: slurmKeyRef must be set when external is false"),
    ("slinky-accounting-external", None, "Accounting", _set("spec.externalConfig", ...),
     "spec: externalConfig must be set when external is true"),
    ("slinky-nodeset-schedule", None, "NodeSet", _set("spec.updateStrategy.scheduledUpdate.startTime", ...),
     "spec.updateStrategy: scheduledUpdate.startTime and scheduledUpdate.duration are required when type is "
     "ScheduledUpdate"),
    ("slinky-token-keys", None, "Token", _set("spec.jwtHs256KeyRef", ...),
     "spec: jwtKeyRef or jwtHs256KeyRef must be set"),
    ("soperator-partitions", None, "SlurmCluster", _set("spec.partitionConfiguration.partitions", []),
     "spec.partitionConfiguration: Structured partition configuration requires at least one partition"),
    ("soperator-reconfigure", None, "SlurmCluster", _set("spec.sConfigController.reconfigureWaitTimeout", "10s"),
     "spec.sConfigController: ReconfigureWaitTimeout must be greater than ReconfigurePollInterval"),
    ("gpu-cluster-singleton", None, "GPUCluster", _set("metadata.name", "other"),
     "(root): GPUCluster is a singleton, metadata.name must be 'gpu-cluster'"),
    ("gpu-driver-default", None, "NVIDIADriver", _set("spec.nodeSelector", {"pool": "h100"}),
     "spec: default NVIDIADriver must not use nodeSelector"),
]


@pytest.mark.parametrize("case,source,kind,mutate,expected", BROKEN, ids=[c[0] for c in BROKEN])
def test_a_broken_object_gets_the_message_of_its_rule(case, source, kind, mutate, expected, planned):
    obj = _doc_of(planned(source[0], **source[1]), kind) if source else copy.deepcopy(HAND_WRITTEN[kind])
    assert create_messages(obj) == [], f"{case}: the valid object already fails"
    mutate(obj)
    assert expected in create_messages(obj), create_messages(obj)


def test_broken_rules_are_findings_at_their_line(planned, tmp_path):
    """Through validate_bundle: `path:line: Kind name: path: message`, like the CRD schema findings."""
    root = tmp_path / "b"
    shutil.copytree(planned("research-lab"), root)
    topo = root / "kubernetes/manifests/18-topology.yaml"
    topo.write_text(topo.read_text().replace("nodeLabel: orchgen.io/leaf", "nodeLabel: orchgen.io/spine"))
    kueue = root / "kubernetes/manifests/20-kueue.yaml"
    kueue.write_text(kueue.read_text().replace("  nodeLabels:\n    orchgen.io/plane: kubernetes\n"
                                               "    orchgen.io/pool: l40s\n", "  nodeLabels: {}\n"))
    errors = [str(f) for f in validate_bundle(root, registry()).errors]
    levels = topo.read_text().splitlines().index("  levels:") + 1
    spec_line = kueue.read_text().splitlines().index("  nodeLabels: {}")  # `spec:` is the line above
    # content-named objects (common.content_name): the names the files give them
    topology = next(d["metadata"]["name"] for d in yaml.safe_load_all(topo.read_text()) if d["kind"] == "Topology")
    flavor = next(d["metadata"]["name"] for d in yaml.safe_load_all(kueue.read_text())
                  if d and d["kind"] == "ResourceFlavor" and d["spec"]["nodeLabels"] == {})
    assert re.fullmatch(r"research-lab-fabric-[0-9a-f]{8}", topology) and re.fullmatch(r"l40s-[0-9a-f]{8}", flavor)
    assert f"kubernetes/manifests/18-topology.yaml:{levels}: Topology {topology}: spec.levels: " \
           "must be unique" in errors, errors
    assert f"kubernetes/manifests/20-kueue.yaml:{spec_line}: ResourceFlavor {flavor}: spec: at least one nodeLabel " \
           "is required when topology is set" in errors, errors


# ---- (d) transition rules: `orchgen validate --against` ------------------------------------------


def validate_cli(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), "validate", *map(str, args)],
                          capture_output=True, text=True)


def against(new: Path, old: Path) -> subprocess.CompletedProcess:
    return validate_cli(new, "--against", old, "--crds", reference_dir(), "--no-fetch")


def _refabric(example: str, **fabric: Any) -> Callable[..., spec.Fleet]:
    """(**options) -> the example with its fabric changed (and those options)."""
    def make(**options: Any) -> spec.Fleet:
        fleet = fleet_of(example, **options)
        changed = fleet.fleet.fabric.model_copy(update=fabric)
        return fleet.model_copy(update={"fleet": fleet.fleet.model_copy(update={"fabric": changed})})
    return make


def _named(text: str, kind: str) -> str:
    """The content-named object of `kind` in a manifest file: `<name>-<8 hex>`."""
    return re.search(rf"kind: {kind}\nmetadata:\n(?:  .*\n)*?  name: (\S+-[0-9a-f]{{8}})\n", text).group(1)


@pytest.mark.parametrize("scheduler", ["kueue", "kai"])
def test_replan_that_changes_topology_levels_is_rejected(scheduler, planned, tmp_path):
    """A bare-metal fleet's nodes under one big leaf instead of several: no spine level any more.
    (Bare metal: off it, issue 15 takes the levels from the provider's labels, and grpo-rl, on a
    generic cloud, has none.)"""
    old = planned("baremetal-k8s-training", gang_scheduler=scheduler)
    new = write_bundle(_refabric("baremetal-k8s-training", nodes_per_leaf=4096)(gang_scheduler=scheduler),
                       tmp_path / "new")
    path = "kubernetes/manifests/18-topology.yaml"
    old_name = next(d["metadata"]["name"] for d in yaml.safe_load_all((old / path).read_text()))
    new_name = next(d["metadata"]["name"] for d in yaml.safe_load_all((new / path).read_text()))
    # As planned, the Topology is named after its levels (common.content_name): a new one beside
    # the old, which every delivery path deletes, and no update for the API server to refuse.
    assert new_name != old_name and new_name.startswith("baremetal-k8s-training-fabric-")
    proc = against(new, old)
    assert f"  created: Topology {new_name}" in proc.stdout.splitlines(), proc.stdout
    assert f"  deleted: Topology {old_name}" in proc.stdout.splitlines(), proc.stdout
    assert "field is immutable" not in proc.stdout, proc.stdout
    # A bundle that kept the old name (hand-edited, or an older orchgen) is the update the rule refuses.
    (new / path).write_text((new / path).read_text().replace(new_name, old_name))
    proc = against(new, old)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = (new / path).read_text().splitlines().index("  levels:") + 1
    assert f"{path}:{line}: Topology {old_name}: the API server would reject this update: " \
           "spec.levels: field is immutable" in proc.stdout.splitlines(), proc.stdout
    assert f"  changed: Topology {old_name}" in proc.stdout.splitlines(), proc.stdout


def test_flavor_with_topology_whose_node_labels_change_is_rejected(planned, tmp_path):
    old, new = planned("research-lab"), tmp_path / "new"
    shutil.copytree(old, new)
    kueue = new / "kubernetes/manifests/20-kueue.yaml"
    kueue.write_text(kueue.read_text().replace("    orchgen.io/pool: l40s\n", "    orchgen.io/pool: l40s\n"
                                                                             "    gpu: l40s\n", 1))
    proc = against(new, old)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # a hand edit keeps the content name (common.content_name) that the planner would have changed
    assert re.search(r"^kubernetes/manifests/20-kueue\.yaml:\d+: ResourceFlavor l40s-[0-9a-f]{8}: the API server would "
                     r"reject this update: spec: nodeLabels are immutable when topologyName is set$", proc.stdout, re.M), \
        proc.stdout
    assert any(re.fullmatch(r"  changed: ResourceFlavor l40s-[0-9a-f]{8}", ln) for ln in proc.stdout.splitlines())


def test_unchanged_replan_passes(planned, tmp_path):
    old = planned("research-lab")
    new = write_bundle(fleet_of("research-lab"), tmp_path / "new")
    proc = validate_cli(new, "--against", old, "--crds", reference_dir(), "--chart-defaults", reference_dir())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == \
        f"re-plan from {old}: 0 created, 0 changed, 0 deleted; 0 Helm release(s) removed"
    assert proc.stdout.splitlines()[-1].startswith(f"{new}: ok ")


def test_replan_summary_names_objects_and_removed_releases(planned, tmp_path):
    """Kueue -> Volcano: the Kueue objects go, Volcano queues come, the kueue release is removed."""
    old = planned("research-lab")
    new = write_bundle(fleet_of("research-lab", gang_scheduler="volcano"), tmp_path / "new")
    proc = against(new, old)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    # each tenant namespace's LocalQueue is Kueue's `default` (common.KUEUE_DEFAULT_LOCAL_QUEUE)
    assert "  deleted: ClusterQueue nlp" in lines and "  deleted: LocalQueue nlp/default" in lines
    assert "  created: Queue nlp" in lines
    assert "  release removed: kueue (kueue-system), owner of the CRDs of kueue.x-k8s.io" in lines
    summary = lines[:next(i for i, ln in enumerate(lines) if ln.startswith("impact: "))]  # impact classes follow
    created = sum(ln.startswith("  created: ") for ln in summary)
    assert re.match(rf"re-plan from {re.escape(str(old))}: {created} created, \d+ changed, \d+ deleted; "
                    r"1 Helm release\(s\) removed$", lines[0]), lines[0]


def test_transition_rules_on_optional_fields_and_queues():
    """managedBy may be set where it was absent (no oldSelf), not changed; a LocalQueue keeps its queue."""
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r", "namespace": "n"},
           "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}}
    managed = copy.deepcopy(ray)
    managed["spec"]["managedBy"] = "ray.io/kuberay-operator"
    assert update_messages(managed, ray) == []
    moved = copy.deepcopy(managed)
    moved["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert update_messages(moved, managed) == ["spec.managedBy: the managedBy field is immutable"]
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "q", "namespace": "n"}, "spec": {"clusterQueue": "a"}}
    requeued = copy.deepcopy(queue)
    requeued["spec"]["clusterQueue"] = "b"
    assert update_messages(requeued, queue) == ["spec.clusterQueue: field is immutable"]
    assert update_messages(queue, queue) == []


def test_against_without_crds_summarizes_and_says_what_it_skipped(planned):
    proc = validate_cli(planned("research-lab"), "--against", planned("research-lab"), "--no-fetch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "notice: no --crds: updates not checked against the CRDs' transition rules" in proc.stdout.splitlines()


def test_against_a_directory_that_is_no_bundle_is_a_usage_error(planned, tmp_path):
    proc = validate_cli(planned("research-lab"), "--against", tmp_path / "nothing", "--no-fetch")
    assert proc.returncode == 2 and proc.stderr.strip() == \
        f"orchgen: {tmp_path / 'nothing'}: --against: no such bundle directory", proc.stderr
