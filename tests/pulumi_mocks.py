"""Run a bundle's Pulumi program under Pulumi's own mocks, recording and validating what it declares.

- `ValidatingMocks` answers every resource registration (no CLI, no cluster, no provider plugin)
  and checks each `kubernetes:*` object it is given: built-in kinds with kubernetes-validate in
  strict mode (generator.validate.builtin), custom resources against their upstream CRD
  (generator.validate.crds, unknown fields rejected), plus what neither library checks here: a
  metadata.name (auto-naming would append a random suffix) and a type token that matches the
  object (a built-in sent as a custom resource would reach the provider under the wrong type).
- `RecordingMonitor` is Pulumi's MockMonitor that also keeps each registration's dependency URNs
  and resource options (protect, retainOnDelete, deleteBeforeReplace, replaceOnChanges; Pulumi's
  own drops them), so tests can see `depends_on` and the options as the engine would.
- `run_program` executes a bundle's pulumi/__main__.py with runpy (as the Pulumi CLI does: as
  __main__, with its own file name) after the mocks are installed.

The mock wire turns integers into floats (64 -> 64.0); integral floats are turned back before
validating and in the recorded inputs, so tests compare with the YAML files directly.
"""
from __future__ import annotations

import runpy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs

from generator.validate.builtin import is_builtin, validate_builtin
from generator.validate.crds import CRDRegistry

Validator = Callable[[dict[str, Any]], list[str]]


def restore_ints(value: Any) -> Any:
    """Undo the mock wire's int -> float conversion (only integral floats)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: restore_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_ints(v) for v in value]
    return value


def builtin_token(api_version: str, kind: str) -> str:
    """The type token pulumi-kubernetes gives a built-in kind (core kinds are `core/v1`)."""
    return f"kubernetes:{api_version if '/' in api_version else 'core/' + api_version}:{kind}"


def object_validator(crds: CRDRegistry, kubernetes_version: str) -> Validator:
    """Errors for one Kubernetes object: strict built-in schema, or its CRD's schema."""

    def validate(obj: dict[str, Any]) -> list[str]:
        if is_builtin(obj["apiVersion"], obj["kind"], kubernetes_version):
            return validate_builtin(obj, kubernetes_version)
        return crds.validate(obj)

    return validate


@dataclass
class Declared:
    """One resource as the mocks saw it."""

    urn: str
    typ: str
    name: str
    inputs: dict[str, Any]
    dependencies: tuple[str, ...] = ()  # URNs, explicit depends_on and input dependencies alike
    provider: str = ""  # provider reference ("<urn>::<id>"), "" for the default provider
    options: dict[str, Any] = field(default_factory=dict)  # protect, retainOnDelete, ... as registered

    @property
    def is_object(self) -> bool:
        """A Kubernetes object (typed built-in or custom resource), not a release or provider."""
        return self.typ.startswith("kubernetes:") and "apiVersion" in self.inputs and "kind" in self.inputs


class ValidatingMocks(pulumi.runtime.Mocks):
    """Records every registration; `errors` lists each invalid Kubernetes object, `calls` every invoke."""

    def __init__(self, validate: Validator) -> None:
        self.validate = validate
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}  # (type, name) -> inputs
        self.errors: list[str] = []
        self.calls: list[str] = []

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        inputs = restore_ints(dict(args.inputs))
        self.inputs[(args.typ, args.name)] = inputs
        if args.typ.startswith("kubernetes:") and "apiVersion" in inputs and "kind" in inputs:
            self.errors += [f"{args.typ} {args.name}: {e}" for e in self.check_object(args.typ, inputs)]
        meta = inputs.get("metadata") or {}
        ident = "/".join(p for p in (meta.get("namespace"), meta.get("name") or args.name) if p)
        return ident, inputs

    def check_object(self, typ: str, obj: dict[str, Any]) -> list[str]:
        errors = []
        if not (obj.get("metadata") or {}).get("name"):
            errors.append("metadata.name: required (Pulumi would auto-name it with a random suffix)")
        builtin = is_builtin(obj["apiVersion"], obj["kind"])
        expected = builtin_token(obj["apiVersion"], obj["kind"]) if builtin \
            else f"kubernetes:{obj['apiVersion']}:{obj['kind']}"
        if typ != expected:
            errors.append(f"(type): declared as {typ}, expected {expected}")
        return errors + self.validate(obj)

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], None]:
        self.calls.append(args.token)  # the program is meant to make none (no network at preview)
        return {}, None

    def check(self) -> None:
        """Raise AssertionError listing every invalid object (the test's verdict)."""
        if self.errors:
            raise AssertionError("invalid Kubernetes objects:\n  " + "\n  ".join(self.errors))


class RecordingMonitor(MockMonitor):
    """MockMonitor that keeps each registration's dependencies and provider."""

    def __init__(self, mocks: ValidatingMocks) -> None:
        super().__init__(mocks)
        self.registrations: dict[str, tuple[str, str, tuple[str, ...], str, dict[str, Any]]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (Pulumi's gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            options = {"protect": bool(request.protect), "retainOnDelete": bool(request.retainOnDelete),
                       "deleteBeforeReplace": bool(request.deleteBeforeReplace),
                       "replaceOnChanges": tuple(request.replaceOnChanges)}
            self.registrations[response.urn] = (request.type, request.name, tuple(request.dependencies),
                                                request.provider, options)
        return response


@dataclass
class Run:
    """What one program run declared, in registration order."""

    mocks: ValidatingMocks
    resources: list[Declared] = field(default_factory=list)

    def of_type(self, typ: str) -> list[Declared]:
        return [r for r in self.resources if r.typ == typ]

    def named(self, typ: str, name: str) -> Declared:
        found = [r for r in self.resources if r.typ == typ and r.name == name]
        assert len(found) == 1, f"{typ} {name}: declared {len(found)} times"
        return found[0]

    @property
    def objects(self) -> list[Declared]:
        return [r for r in self.resources if r.is_object]


def run_program(program: Path, mocks: ValidatingMocks, config: dict[str, str],
                project: str = "project", stack: str = "stack") -> Run:
    """Run `program` (a bundle's pulumi/__main__.py) under `mocks`; exceptions propagate."""
    monitor = RecordingMonitor(mocks)
    pulumi_settings.ROOT.set(None)  # a fresh Stack per run, so runs in one process do not mix
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(dict(config))

    @pulumi.runtime.test
    def execute() -> None:
        runpy.run_path(str(program), run_name="__main__")

    execute()
    run = Run(mocks)
    for urn, (typ, name, deps, provider, options) in monitor.registrations.items():
        run.resources.append(Declared(urn, typ, name, mocks.inputs.get((typ, name), {}), deps, provider, options))
    return run
