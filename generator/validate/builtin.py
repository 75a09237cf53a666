"""Validate built-in Kubernetes objects (Namespace, Deployment, ResourceQuota ...) offline.

Uses the PyPI package `kubernetes-validate`, which bundles the JSON schemas of a range of Kubernetes
minors (1.25-1.37 in 1.37.0). It is imported lazily so the generator itself does not depend on it.
Library behaviour this module works around:

- it stops at the first error (`ValidationError`, a jsonschema error), so at most one error comes back;
- an unknown kind or apiVersion raises `SchemaNotFoundError` (its CLI only warns about it);
- a minor newer than the newest bundled one raises `VersionNotSupportedError`; an older one fails
  with IndexError; and it compares versions as strings. So the requested version is mapped here to a
  bundled one first: the newest bundled minor <= requested, else the oldest bundled;
- `kubernetes_validate.validate` reads the kind's schema and the version's whole `_definitions.json`
  (~1.4 MB) again for every object (~8 ms each). So this module builds the same validator the library
  builds (same files, same registry, Draft 2020-12) once per (version, apiVersion, kind) and keeps it.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Any

from .paths import format_path  # same path style as CRD errors

__all__ = ["validate_builtin", "is_builtin", "bundled_versions", "schema_version"]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:3])


@functools.lru_cache(maxsize=None)
def bundled_versions() -> tuple[str, ...]:
    """Kubernetes versions whose schemas kubernetes-validate bundles, oldest first ("1.25.0", ...)."""
    from kubernetes_validate.utils import all_versions

    # all_versions() lists each version twice (the -local and -local-strict schema dirs).
    return tuple(sorted(set(all_versions()), key=_version_key))


@functools.lru_cache(maxsize=None)
def schema_version(kubernetes_version: str) -> str:
    """The bundled version used for `kubernetes_version` ("v1.33.2" -> "1.33.0"); kept per version (is_builtin
    asks it for every object: cProfile, issue 41: 1,220 calls, 17,093 version keys, ~10% of `validate`)."""
    wanted = _version_key(kubernetes_version)[:2]
    if len(wanted) < 2:
        raise ValueError(f"not a Kubernetes version: {kubernetes_version!r}")
    versions = bundled_versions()
    older = [v for v in versions if _version_key(v)[:2] <= wanted]
    return older[-1] if older else versions[0]


def validate_builtin(obj: dict[str, Any], kubernetes_version: str) -> list[str]:
    """Errors for one built-in object in strict mode (unknown fields rejected); [] when valid.

    kubernetes-validate reports only the first schema error, so the list has at most one of those.
    """
    import jsonschema
    import kubernetes_validate as kv
    from kubernetes_validate.utils import VersionNotSupportedError

    if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
        return ["(root): apiVersion and kind are required"]
    version = schema_version(kubernetes_version)
    if not is_builtin(obj["apiVersion"], obj["kind"], version):
        # Checked first because the library's lookup ignores the group's domain (see is_builtin).
        return [f"(root): no built-in schema for {obj['apiVersion']} {obj['kind']}"]
    try:
        _validator(version, obj["apiVersion"], obj["kind"]).validate(obj)
    except jsonschema.ValidationError as e:
        if e.validator == "additionalProperties" and e.validator_value is False:
            # Name the unknown key in the path, as the CRD validator does.
            known = e.schema.get("properties", {})
            extra = sorted((k for k in e.instance if k not in known), key=str)
            return [f"{format_path([*e.absolute_path, k])}: unknown field" for k in extra]
        message = e.message if len(e.message) <= 200 else e.message[:197] + "..."
        return [f"{format_path(e.absolute_path)}: {message}"]
    except kv.SchemaNotFoundError:
        return [f"(root): no built-in schema for {obj['apiVersion']} {obj['kind']}"]
    except (kv.InvalidSchemaError, VersionNotSupportedError) as e:  # a broken install, not the object
        return [f"(root): kubernetes-validate failed: {e.message}"]
    return []


@functools.lru_cache(maxsize=None)
def _validator(version: str, api_version: str, kind: str) -> Any:
    """What `kubernetes_validate.validate(obj, version, strict=True)` builds for this kind, built once.

    `version` is a bundled one (schema_version), so the library's own version lookup is the identity.
    """
    import jsonschema
    from kubernetes_validate.utils import SchemaNotFoundError, schema_contents
    from referencing import Registry, Resource

    # The library's file naming: the group's domain dropped, "/" -> "-" (rbac.authorization.k8s.io/v1 -> rbac-v1).
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = schema_contents(f"kubernetes-json-schema/v{version}-local-strict/{kind.lower()}-{group_version}.json",
                                 version)
    except FileNotFoundError:
        raise SchemaNotFoundError(version=version, kind=kind, api_version=api_version) from None
    registry = _definitions(version) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.lru_cache(maxsize=None)
def _definitions_json(version: str) -> dict[str, Any]:
    """The version's strict `_definitions.json` (~1.4 MB), read once for both the validators and the kinds."""
    from kubernetes_validate.utils import schema_contents

    return schema_contents(f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version)


@functools.lru_cache(maxsize=None)
def _definitions(version: str) -> Any:
    from referencing import Resource

    return Resource.from_contents(_definitions_json(version))


@functools.lru_cache(maxsize=None)
def _known_kinds(version: str) -> frozenset[tuple[str, str]]:
    """(apiVersion, kind) pairs of the bundled definitions, from their x-kubernetes-group-version-kind."""
    # the strict definitions carry the same x-kubernetes-group-version-kind as the -local ones
    definitions = _definitions_json(version)["$defs"]
    kinds = set()
    for definition in definitions.values():
        gvks = definition.get("x-kubernetes-group-version-kind", [])
        if len(gvks) != 1:  # DeleteOptions/WatchEvent are listed under every group: not objects
            continue
        group, ver, kind = gvks[0]["group"], gvks[0]["version"], gvks[0]["kind"]
        kinds.add((f"{group}/{ver}" if group else ver, kind))
    return frozenset(kinds)


def is_builtin(api_version: str, kind: str, kubernetes_version: str | None = None) -> bool:
    """Whether kubernetes-validate has a schema for this built-in kind (newest bundled version by default).

    Matches the full group ("apps/v1", "rbac.authorization.k8s.io/v1"), unlike the library's own file
    lookup, which drops the domain and would take e.g. "batch.volcano.sh/v1" for "batch/v1".
    """
    version = schema_version(kubernetes_version) if kubernetes_version else bundled_versions()[-1]
    return (api_version, kind) in _known_kinds(version)
