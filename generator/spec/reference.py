"""docs/workload-yaml-reference.md, written from the JSON Schema `orchgen schema` prints (the pydantic models of
spec/models.py with schema_doc's descriptions), so that the reference cannot drift from what the loader
accepts: `orchgen schema --markdown > docs/workload-yaml-reference.md`, and tests/test_schema_reference.py
fails when the committed file differs from a fresh one.

One section per object, in the order a reader meets them from the top of workload.yaml, each a table of
its fields: the YAML path, type, default (or "required"), allowed values (enums, ranges, lengths, formats)
and the description."""
from __future__ import annotations

import json
from typing import Any

from .models import json_schema

HEAD = """# workload.yaml reference

*Generated from orchgen's schema by `orchgen schema --markdown`; do not edit (tests/test_schema_reference.py
holds it to the code).* The guide with examples: [workload-yaml.md](workload-yaml.md). Editors can check a
file as it is typed with `orchgen schema > workload.schema.json`. Back to the [README](../README.md).

`orchgen plan` checks more than a schema can (a pool or tenant that must exist, a hostlist's length against
`nodes`, contradictions between fields), each refusal one line naming file:line: field.
"""


def _ref(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: Any) -> str:
    return f"`{json.dumps(value)}`" if not isinstance(value, str) else f"`{value}`"


def _type(schema: dict[str, Any]) -> str:
    """The field's type in words, an object linked to its section."""
    if _ref(schema):
        return f"[{_ref(schema)}](#{_ref(schema).lower()})"
    if "anyOf" in schema:
        kinds = [_type(s) for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = any(s.get("type") == "null" for s in schema["anyOf"])
        return " or ".join(dict.fromkeys(kinds)) + (" or null" if nullable else "")
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object":
        values = schema.get("additionalProperties")
        return f"map of string to {_type(values)}" if isinstance(values, dict) else "map"
    return {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}.get(kind, "any")


def _allowed(schema: dict[str, Any]) -> str:
    """Enums, constants, ranges, lengths and formats, of the field or of a list's items."""
    parts = []
    for s in [schema, *schema.get("anyOf", ()), schema.get("items", {})]:
        if not isinstance(s, dict):
            continue
        if "const" in s:
            parts.append(_code(s["const"]))
        if "enum" in s:
            parts.append(" | ".join(_code(v) for v in s["enum"]))
        for key, word in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
            if key in s:
                parts.append(f"{word} {s[key]}")
        for key, word in (("minLength", "length >="), ("maxLength", "length <="), ("minItems", "items >="),
                          ("maxItems", "items <=")):
            if key in s:
                parts.append(f"{word} {s[key]}")
        if "pattern" in s:
            parts.append(f"pattern `{s['pattern']}`")
    return "; ".join(dict.fromkeys(parts))


def _default(schema: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" not in schema:
        return "optional"
    value = schema["default"]
    if isinstance(value, dict) and value:
        return "its fields' defaults"
    return _code(value)


def _walk(schema: dict[str, Any], defs: dict[str, Any]) -> list[tuple[str, str]]:
    """(definition, YAML path) in the order a reader meets them, each definition once."""
    order: list[tuple[str, str]] = []
    seen: set[str] = set()

    def refs(s: dict[str, Any]):
        if _ref(s):
            yield _ref(s), ""
        for sub in s.get("anyOf", ()):
            yield from refs(sub)
        if isinstance(s.get("items"), dict):
            yield from ((name, "[]" + tail) for name, tail in refs(s["items"]))
        if isinstance(s.get("additionalProperties"), dict):
            yield from ((name, ".<name>" + tail) for name, tail in refs(s["additionalProperties"]))

    queue = [("Fleet", "", schema)]
    while queue:
        name, path, s = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        order.append((name, path))
        for field, sub in s.get("properties", {}).items():
            for ref, tail in refs(sub):
                if ref not in seen:
                    queue.append((ref, f"{path}.{field}{tail}" if path else f"{field}{tail}", defs[ref]))
    return order


def markdown() -> str:
    schema = json_schema()
    defs = schema.get("$defs", {})
    out = [HEAD]
    for name, path in _walk(schema, defs):
        s = schema if name == "Fleet" else defs[name]
        out.append(f"## {name}\n")
        where = "the top of the file" if not path else f"`{path}`"
        out.append(f"At {where}." + (f" {_cell(s['description'])}" if s.get("description") else "") + "\n")
        out.append("| field | type | default | allowed | description |")
        out.append("|---|---|---|---|---|")
        required = set(s.get("required", ()))
        for field, sub in s.get("properties", {}).items():
            out.append(f"| `{field}` | {_cell(_type(sub))} | {_cell(_default(sub, field in required))} | "
                       f"{_cell(_allowed(sub))} | {_cell(sub.get('description', ''))} |")
        out.append("")
    return "\n".join(out)
