"""Validate custom resources against the CustomResourceDefinitions that define them.

A `CRDRegistry` is loaded from CRD YAML files the caller names (it never looks for reference data
itself). It maps (apiVersion, kind) to a `CRDVersion` holding the scope, the `served` flag and the
version's `openAPIV3Schema`, converted to a JSON Schema (draft 7) that behaves like the API server's
structural-schema checks:

- `x-kubernetes-int-or-string: true` -> integer or string;
- `nullable: true` -> null is allowed too;
- wherever `properties` are listed and neither `additionalProperties` nor
  `x-kubernetes-preserve-unknown-fields: true` is given, `additionalProperties: false` is added, so a
  misspelt field is an error (the API server would silently prune it, which is worse);
- Go regexes with an inline flag after `^` (`^(?i)...`) are rewritten for Python's `re`;
- the root `metadata` (`{type: object}` in every CRD) gets a loose ObjectMeta schema;
- `x-kubernetes-*` keys are dropped and `format` is left as an annotation (validators are built
  without a format checker). CEL rules (`x-kubernetes-validations`) are evaluated separately, by
  `CRDVersion.cel` (generator.validate.cel).

Converted schemas and validators are built lazily per (apiVersion, kind) and cached, because some
CRDs are large (Soperator's SlurmCluster, KubeRay) and a caller usually needs only a few kinds. For
the same reason loading reads each CRD document without its `openAPIV3Schema` blocks (~99% of the
text: group, kind, scope and versions are all outside them) and parses a document in full only when
one of its versions' schemas is first needed (`CRDLoadError` if that part turns out not to be YAML).
"""
from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import yaml

from .parsed import code_digest, derived, load_yaml
from .paths import format_path

if TYPE_CHECKING:  # jsonschema and celpy are imported when a validator is first built
    from jsonschema import Draft7Validator

    from .cel import CelSchema

__all__ = ["CRDLoadError", "CRDRegistry", "CRDVersion", "convert_schema", "format_path"]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the big CRDs load ~10x faster

# The fields of ObjectMeta a client may send. CRD schemas only say `metadata: {type: object}` (the API
# server checks ObjectMeta itself), so this stands in for that check; unknown keys are typos.
_OBJECT_META = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object"}},
        # Server-populated fields: harmless in a manifest, so accepted without checking them.
        **{k: {} for k in ("uid", "resourceVersion", "generation", "creationTimestamp", "selfLink",
                           "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields")},
    },
    "additionalProperties": False,
}

_INLINE_FLAGS = re.compile(r"\(\?([imsU]+)\)")


def _python_pattern(pattern: str) -> str:
    """Go (RE2) allows inline flags anywhere, e.g. `^(?i)[a-z]`; Python only at the very start.

    Moving a flag group to the front is equivalent when it follows only anchors, which is how CRDs use it.
    """
    flags = "".join(_INLINE_FLAGS.findall(pattern)).replace("U", "")
    if not flags or _INLINE_FLAGS.match(pattern):
        return pattern
    return f"(?{''.join(sorted(set(flags)))})" + _INLINE_FLAGS.sub("", pattern)


def convert_schema(schema: dict[str, Any], *, root: bool = True) -> dict[str, Any]:
    """Convert one openAPIV3Schema node (and everything below it) into a draft-7 JSON Schema."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue  # handled below or not understood by jsonschema
        if key in ("properties", "patternProperties"):
            out[key] = {name: convert_schema(sub, root=False) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = convert_schema(value, root=False)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [convert_schema(sub, root=False) for sub in value]
        elif key == "pattern":
            out[key] = _python_pattern(value)
        else:
            out[key] = value  # description, type, enum, default, format, min/max...: copied as is

    if schema.get("x-kubernetes-int-or-string"):
        # controller-gen also writes anyOf [{type: integer}, {type: string}]; one `type` gives one error.
        out.pop("anyOf", None)
        out["type"] = ["integer", "string"]
    if schema.get("nullable"):
        if "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*types, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    if root:
        out.setdefault("properties", {})["metadata"] = copy.deepcopy(_OBJECT_META)
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "integer", float: "number"}.get(
        type(value), type(value).__name__)


def _messages(error: Any) -> list[tuple[list[Any], str]]:
    """Turn one jsonschema error into (path, message) pairs; short messages, no repr of big values."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = [k for k in error.instance if k not in known
                 and not any(re.search(p, k) for p in patterns)]
        return [(path + [k], "unknown field") for k in sorted(extra, key=str)]
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        return [(path + [name], "required field is missing") for name in missing]
    if error.validator == "type":
        want = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return [(path, f"expected {' or '.join(want)}, got {_json_type(error.instance)}")]
    if error.validator == "pattern":
        return [(path, f"{error.instance!r} does not match pattern {error.validator_value}")]
    message = error.message if len(error.message) <= 200 else error.message[:197] + "..."
    return [(path, message)]


@functools.lru_cache(maxsize=None)
def _this_code() -> str:
    """This module's digest: a conversion kept by an older convert_schema is not this one's."""
    return code_digest(__file__)


class CRDLoadError(ValueError):
    """A CRD file turned out unreadable only when its schema was first needed."""


_SEPARATOR = re.compile(r"^---[ \t]*(?:#.*)?$", re.M)
# The same separator after its newline: a pattern that starts with a literal is searched for as one, where
# `^` in MULTILINE tries every position (cProfile, issue 41: splitting 19 MB of reference CRDs was half
# of loading them).
_AFTER_NEWLINE = re.compile(r"\n(---[ \t]*(?:#[^\n]*)?)(?=\n|\Z)")
_AT_START = re.compile(r"---[ \t]*(?:#[^\n]*)?(?=\n|\Z)")


def _split_documents(text: str) -> list[str]:
    """_SEPARATOR.split(text), faster."""
    out, start = [], 0
    first = _AT_START.match(text)
    if first:
        out.append("")
        start = first.end()
    for m in _AFTER_NEWLINE.finditer(text, max(start - 1, 0)):
        if m.start(1) < start:
            continue
        out.append(text[start:m.start(1)])
        start = m.end(1)
    out.append(text[start:])
    return out
_SCHEMA_KEY = re.compile(r"( *)openAPIV3Schema:[ \t]*(?:#.*)?")


@dataclass
class _Document:
    """One document of a CRD file: its text, parsed in full on first use (or at once, see _documents)."""

    text: str
    source: str
    _data: Any = field(default=None, repr=False)

    def data(self) -> Any:
        if self._data is None:
            try:
                self._data = load_yaml(self.text)  # parsed once per content, then from the cache
            except yaml.YAMLError as e:
                raise CRDLoadError(f"{self.source}: not valid YAML: {e}") from e
        return self._data


def _without_schemas(text: str) -> str:
    """The text less the block under each `openAPIV3Schema:` key (which then reads as null).

    A block-style mapping's content is every following line indented deeper than its key; blank and
    comment lines inside it belong to it too. Anything else (flow style, anchors) is left as it is.
    """
    out, depth = [], -1
    for line in text.splitlines(keepends=True):
        if depth >= 0:
            body = line.lstrip(" ")
            if not body.strip() or body.startswith("#") or len(line) - len(body) > depth:
                continue
            depth = -1
        m = _SCHEMA_KEY.fullmatch(line.rstrip("\r\n"))
        if m:
            depth = len(m.group(1))
        out.append(line)
    return "".join(out)


def _documents(text: str, source: str) -> Iterator[tuple[Any, _Document]]:
    """(what the document says outside its schemas, the document) for each CRD document of a file."""
    for chunk in _split_documents(text):
        if "CustomResourceDefinition" not in chunk:
            continue  # not a CRD: Helm templates and such are not parsed at all (they may not be YAML)
        try:
            # cut and parsed once per content (validate.parsed): cutting was ~10% of `validate --crds`
            yield load_yaml(chunk, _without_schemas, "crd-outside-schemas"), _Document(chunk, source)
            continue
        except yaml.YAMLError:
            pass  # a separator with content after it, an alias into a schema ...: parse it all now
        try:
            docs = list(yaml.load_all(chunk, Loader=_Loader))
        except yaml.YAMLError as e:
            raise ValueError(f"{source}: not valid YAML: {e}") from e
        for doc in docs:
            yield doc, _Document(chunk, source, doc)


@dataclass
class CRDVersion:
    """One served-or-not version of one CRD; the schema, `validator` and `cel` are built on first use."""

    group: str
    version: str
    kind: str
    scope: str  # "Namespaced" or "Cluster"
    served: bool
    storage: bool
    source: str  # file the CRD came from, for messages
    _document: _Document = field(repr=False, compare=False)
    _index: int = field(repr=False, compare=False)  # in the document's spec.versions
    _schema: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    _validator: "Draft7Validator | None" = field(default=None, init=False, repr=False, compare=False)
    _cel: "CelSchema | None" = field(default=None, init=False, repr=False, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def openapi_schema(self) -> dict[str, Any]:
        if self._schema is None:
            try:
                version = self._document.data()["spec"]["versions"][self._index]
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
            except (KeyError, IndexError, TypeError, AttributeError) as e:  # the full text disagrees
                raise CRDLoadError(f"{self.source}: {self.kind} {self.version}: no schema ({e!r})") from None
            # A v1 CRD must have a schema; be lenient and accept anything if one is missing.
            self._schema = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return self._schema

    def same_definition(self, other: "CRDVersion") -> bool:
        if (self.scope, self.served) != (other.scope, other.served):
            return False
        if (self._document.text, self._index) == (other._document.text, other._index):
            return True  # the same file twice: no need to parse it
        return self.openapi_schema == other.openapi_schema

    @property
    def schema(self) -> dict[str, Any]:
        return self.validator.schema

    @property
    def validator(self) -> "Draft7Validator":
        if self._validator is None:
            from jsonschema import Draft7Validator

            # converted once per CRD text (validate.parsed): converting every node of the schemas an
            # object needs was a tenth of `validate --crds` (cProfile, issue 41: 24,779 calls)
            schema = derived(self._document.text, f"draft7:{self._index}:{_this_code()}",
                             lambda: convert_schema(self.openapi_schema))
            self._validator = Draft7Validator(schema)
        return self._validator

    @property
    def cel(self) -> "CelSchema":
        """The version's CEL rules, compiled on first use."""
        if self._cel is None:
            from .cel import CelSchema

            self._cel = CelSchema(self.openapi_schema)
        return self._cel

    def errors(self, obj: dict[str, Any]) -> list[str]:
        """Schema errors only, sorted by path then message."""
        return [f"{path}: {message}" for path, message in self._errors(obj)]

    def _errors(self, obj: dict[str, Any]) -> list[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        for error in self.validator.iter_errors(obj):
            for path, message in _messages(error):
                found.add((format_path(path), message))
        return sorted(found)


def _versions_of(doc: dict[str, Any], document: _Document) -> list[CRDVersion]:
    source = document.source
    if doc.get("apiVersion") != "apiextensions.k8s.io/v1":
        raise ValueError(f"{source}: only apiextensions.k8s.io/v1 CRDs are supported, not {doc.get('apiVersion')}")
    spec = doc["spec"]
    return [
        CRDVersion(
            group=spec["group"], version=v["name"], kind=spec["names"]["kind"],
            scope=spec.get("scope", "Namespaced"), served=bool(v.get("served", False)),
            storage=bool(v.get("storage", False)), source=source, _document=document, _index=i,
        )
        for i, v in enumerate(spec.get("versions", []))
    ]


class CRDRegistry:
    """(apiVersion, kind) -> CRDVersion, loaded from CRD YAML files."""

    def __init__(self, versions: Iterable[CRDVersion] = ()) -> None:
        self._versions: dict[tuple[str, str], CRDVersion] = {}
        for crd_version in versions:
            self.add(crd_version)

    def add(self, crd_version: CRDVersion) -> None:
        key = (crd_version.api_version, crd_version.kind)
        old = self._versions.get(key)
        # The same CRD loaded twice is fine; two different definitions of one kind would make the
        # result depend on load order, so refuse.
        if old is not None and not old.same_definition(crd_version):
            raise ValueError(f"conflicting CRDs for {key[0]} {key[1]}: {old.source} and {crd_version.source}")
        self._versions[key] = crd_version

    @classmethod
    def from_paths(cls, paths: Iterable[str | Path]) -> "CRDRegistry":
        """Load CRD files; a directory means every *.yaml/*.yml below it. Non-CRD documents are skipped."""
        files: list[Path] = []
        for path in map(Path, paths):
            if path.is_dir():
                files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
            elif path.is_file():
                files.append(path)
            else:
                raise FileNotFoundError(path)
        registry = cls()
        for file in files:
            text = file.read_text(encoding="utf-8")
            if "CustomResourceDefinition" not in text:
                continue  # values.yaml and such: not read any further
            for doc, document in _documents(text, str(file)):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    for crd_version in _versions_of(doc, document):
                        registry.add(crd_version)
        return registry

    @classmethod
    def from_dir(cls, path: str | Path) -> "CRDRegistry":
        if not Path(path).is_dir():
            raise NotADirectoryError(path)
        return cls.from_paths([path])

    def __len__(self) -> int:
        return len(self._versions)

    def __iter__(self):
        return iter(sorted(self._versions.values(), key=lambda v: (v.group, v.kind, v.version)))

    def get(self, api_version: str, kind: str) -> CRDVersion | None:
        return self._versions.get((api_version, kind))

    def knows(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in self._versions

    def validate(self, obj: dict[str, Any]) -> list[str]:
        """All problems with one custom resource object, as `path: message` strings (empty = valid)."""
        if not isinstance(obj, dict):
            return [f"(root): expected object, got {_json_type(obj)}"]
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        crd = self.get(api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None
        if crd is None:
            return [f"(root): no CRD for {api_version} {kind}"]
        errors = set(crd._errors(obj))
        if not crd.served:
            errors.add(("apiVersion", f"{api_version} of {kind} is not served"))
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        if not meta.get("name"):
            errors.add(("metadata.name", "required field is missing"))
        if crd.scope == "Cluster" and "namespace" in meta:
            errors.add(("metadata.namespace", f"cluster-scoped {kind} must not have a namespace"))
        elif crd.scope == "Namespaced" and not meta.get("namespace"):
            errors.add(("metadata.namespace", f"namespaced {kind} has no metadata.namespace"))
        return [f"{path}: {message}" for path, message in sorted(errors)]
