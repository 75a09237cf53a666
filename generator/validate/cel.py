"""Evaluate the CEL rules (`x-kubernetes-validations`) of a CRD version on custom resources, as the API
server does.

Owns: finding the rules in an openAPIV3Schema, compiling them with cel-python (`celpy`, imported here
and only when a rule is first compiled), preparing an object the way the API server sees it, and
walking schema and object together so that each rule's `self` is the value at the rule's node:
object rules on the object, list rules on the list, `items` rules on each item, `additionalProperties`
rules on each map value. Preparing means: unknown fields pruned where the schema does not preserve
them, null values of non-nullable fields dropped, then every `default:` applied (defaults inside
defaults too); at the root only apiVersion, kind and metadata.name/generateName stay visible.

Transition rules (those naming `oldSelf`) run only on UPDATE, and only where the old object has a
value at the same place: object fields and map values correlate by key, items of a
`x-kubernetes-list-type: map` list by their map keys, other list items not at all. Create-time rules
run on CREATE; an UPDATE here checks only the transition rules (the create-time ones are the same
check as for a new object). A rule whose node holds a value of the wrong JSON type is skipped: the
schema check reports the type, and the API server also skips CEL on such objects.

Not modelled: `optionalOldSelf` (a rule that sets it does not compile here), the cost budget,
order-insensitive equality of set/map lists, and conversion between CRD versions (an old object is
read with the new object's schema). A rule that calls a function celpy lacks does not compile, like on
the API server, so the test that compiles every rule of the reference CRDs notices a new one.
"""
from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .paths import format_path

__all__ = ["CelSchema", "Outcome", "Rule", "Violation"]

_ABSENT = object()  # no value at this place (distinct from an explicit null)
_MACROS = frozenset({"has", "dyn", "all", "exists", "exists_one", "map", "filter"})
# How the API server words each `reason`; FieldValueInvalid (the default) adds nothing to the message.
_REASONS = {"FieldValueForbidden": "Forbidden: ", "FieldValueRequired": "Required value: ",
            "FieldValueDuplicate": "Duplicate value: "}
_FIELD_PATH = re.compile(r"\.([A-Za-z_$][\w$-]*)|\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]")
_ENV: Any = None


def _environment() -> Any:
    global _ENV
    if _ENV is None:
        import celpy

        # celpy raises the interpreter's recursion limit for good on construction; the rules here are
        # shallow, and other checks rely on the default limit to refuse absurdly nested input.
        limit = sys.getrecursionlimit()
        _ENV = _with_cached_grammar(celpy.Environment)
        sys.setrecursionlimit(limit)
    return _ENV


def _with_cached_grammar(make: Any) -> Any:
    """make(), with celpy's Lark parser built from Lark's own cache of the analysed CEL grammar (Lark's
    `cache` option: a file checked against a digest of the grammar, the options and the Lark and Python
    versions; rebuilt when it does not match or does not load). Building the LALR tables was ~15% of a
    `validate --crds` (cProfile). Without a writable cache folder, celpy builds them as before."""
    import functools

    import lark
    from celpy import celparser

    if celparser.CELParser.CEL_PARSER is not None:
        return make()
    try:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orchgen" / "cel"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        writable = os.access(folder, os.W_OK)
    except (OSError, RuntimeError, KeyError):  # no home folder, or none that can be written
        writable = False
    if not writable:
        return make()
    real = celparser.Lark
    celparser.Lark = functools.partial(real, cache=str(folder / f"cel-grammar-lark-{lark.__version__}.pickle"))
    try:
        return make()
    finally:
        celparser.Lark = real


@dataclass(frozen=True)
class Violation:
    path: tuple[Any, ...]  # in the object: ("spec", "levels") or ("spec", "tolerations", 0)
    message: str
    transition: bool = False

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}"


@dataclass
class Outcome:
    violations: list[Violation] = field(default_factory=list)
    evaluated: int = 0  # rules evaluated (a rule counts once per value it ran on)


@dataclass
class Rule:
    """One entry of `x-kubernetes-validations`, compiled. `error` says why it cannot be evaluated."""

    location: str  # the schema node, e.g. `spec.resourceGroups[*]`, `spec.nodeLabels{*}` (CelSchema.rules() sets it)
    rule: str
    message: str | None = None
    message_expression: str | None = None
    reason: str = "FieldValueInvalid"
    field_path: str = ""
    transition: bool = False
    error: str | None = None
    _program: Any = field(default=None, repr=False)
    _message_program: Any = field(default=None, repr=False)
    # verdicts by the values' repr (celtypes' repr is exact and names each value's type): a rule is a pure
    # function of self (and oldSelf), and many objects of one bundle give a rule the same value (issue 41:
    # 64 ClusterQueues, 264 evaluations of 78 distinct values; celpy's evaluation was most of check_rules)
    _verdicts: dict[Any, str | None] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def compile(cls, location: str, spec: dict[str, Any]) -> "Rule":
        rule = cls(location, str(spec.get("rule", "")), spec.get("message"), spec.get("messageExpression"),
                   str(spec.get("reason") or "FieldValueInvalid"), str(spec.get("fieldPath") or ""))
        if spec.get("optionalOldSelf"):
            rule.error = "optionalOldSelf is not supported"
            return rule
        try:
            ast = _compile(rule.rule)
            rule.transition = _names_old_self(ast)
            rule._program = _environment().program(ast, functions=_extensions())
            if rule.message_expression:
                rule._message_program = _environment().program(_compile(rule.message_expression),
                                                               functions=_extensions())
        except ValueError as exc:
            rule.error = str(exc)
        return rule

    def check(self, value: Any, old: Any, path: tuple[Any, ...]) -> Violation | None:
        """None when the rule holds for `value` (and `old`, for a transition rule)."""
        where = path + _parse_field_path(self.field_path)
        if self.error is not None:
            return Violation(where, f"rule `{self.rule}` cannot be evaluated: {self.error}", self.transition)
        key = repr(value) if old is _ABSENT else (repr(value), repr(old))
        if key not in self._verdicts:
            self._verdicts[key] = self._verdict(value, old)
        message = self._verdicts[key]
        return None if message is None else Violation(where, message, self.transition)

    def _verdict(self, value: Any, old: Any) -> str | None:
        """The violation's message, None when the rule holds."""
        activation = {"self": value} if old is _ABSENT else {"self": value, "oldSelf": old}
        result, problem = _run(self._program, activation)
        if problem is None and isinstance(result, _bool_type()):
            if result:
                return None
            return _REASONS.get(self.reason, "") + self._message(activation)
        problem = problem or f"the rule gave {type(result).__name__}, not a bool"
        return f"{problem} evaluating rule: {self._message(activation)}"

    def _message(self, activation: dict[str, Any]) -> str:
        if self._message_program is not None:
            text, problem = _run(self._message_program, activation)
            # the API server falls back to `message` when the expression fails or gives no one-line text
            if problem is None and isinstance(text, str) and text.strip() and "\n" not in text:
                return str(text)
        return self.message or f"failed rule: {self.rule}"


def _compile(text: str) -> Any:
    from celpy import CELParseError

    try:
        ast = _environment().compile(text)
    except CELParseError as exc:
        raise ValueError(f"does not parse: {' '.join(str(exc).split())}") from None
    missing = sorted(_functions_called(ast) - _known_functions())
    if missing:
        raise ValueError(f"undeclared function {', '.join(missing)} (cel-python lacks it)")
    return ast


def _functions_called(ast: Any) -> set[str]:
    """Names of the functions and methods an expression calls (macros included)."""
    names = set()
    for tree in ast.iter_subtrees():
        if tree.data == "ident_arg":
            names.add(str(tree.children[0]))
        elif tree.data == "member_dot_arg":
            names.add(str(tree.children[1]))
    return names


def _known_functions() -> set[str]:
    from celpy.evaluation import base_functions

    return set(base_functions) | _MACROS | set(_extensions())


# ------------------------------------------------------------------ Kubernetes' CEL extension libraries
# The API server's CEL environment adds libraries cel-python lacks; these are the ones the pinned CRDs
# call (Gateway API's HTTPRoute, Gateway, ListenerSet ...), with the API server's semantics:
# - split, substring: cel-go's ext.Strings (k8s.io/apiserver/pkg/cel/library, "strings" v2):
#   `s.split(sep)`, `s.split(sep, n)` (n < 0: all parts, 0: none, n > 0: at most n, the last holding
#   the rest); `s.substring(start[, end])` over code points, an error out of range;
# - isIP: Kubernetes' IP library (k8s.io/apiserver/pkg/cel/library/ip.go): an IPv4 or IPv6 address,
#   not an IPv4-mapped IPv6 one and without a zone.


def _split(text: Any, sep: Any, limit: Any = None) -> Any:
    from celpy import celtypes

    s, d = str(text), str(sep)
    n = -1 if limit is None else int(limit)
    if n == 0:
        return celtypes.ListType([])
    parts = (list(s) if d == "" else s.split(d)) if n < 0 else (
        (list(s[:n - 1]) + ([s[n - 1:]] if s[n - 1:] else [])) if d == "" else s.split(d, n - 1))
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(text: Any, start: Any, end: Any = None) -> Any:
    from celpy import CELEvalError, celtypes

    s = str(text)
    a, b = int(start), len(s) if end is None else int(end)
    if not 0 <= a <= b <= len(s):
        return CELEvalError(f"substring: index out of range: {a}, {b} (length {len(s)})")
    return celtypes.StringType(s[a:b])


def _is_ip(text: Any) -> Any:
    import ipaddress

    from celpy import celtypes

    s = str(text)
    if "%" in s:  # a zone
        return celtypes.BoolType(False)
    try:
        addr = ipaddress.ip_address(s)
    except ValueError:
        return celtypes.BoolType(False)
    mapped = isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None
    return celtypes.BoolType(not mapped)


def _extensions() -> dict[str, Any]:
    return {"split": _split, "substring": _substring, "isIP": _is_ip}


def _names_old_self(ast: Any) -> bool:
    """Whether the expression refers to the variable oldSelf (a field named so does not count)."""
    return any(t.data == "ident" and str(t.children[0]) == "oldSelf" for t in ast.iter_subtrees())


def _run(program: Any, activation: dict[str, Any]) -> tuple[Any, str | None]:
    """(result, None) or (None, why it failed). celpy both raises and returns its evaluation errors."""
    from celpy import CELEvalError

    try:
        result = program.evaluate(activation)
    except Exception as exc:  # whatever celpy trips on is this rule's failure, never a crash of validate
        return None, _why(exc)
    if isinstance(result, CELEvalError):
        return None, _why(result)
    return result, None


def _why(exc: BaseException) -> str:
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text.split(" (in activation", 1)[0]  # celpy appends the whole activation's repr


def _parse_field_path(text: str) -> tuple[Any, ...]:
    """`.spec.a['b.c']` -> ("spec", "a", "b.c"), relative to the rule's node (fieldPath)."""
    parts: list[Any] = []
    pos = 0
    while pos < len(text):
        m = _FIELD_PATH.match(text, pos)
        if not m:
            return tuple(parts)  # the API server refuses such a CRD; point at what was understood
        name, quoted, index = m.groups()
        parts.append(name if name is not None else int(index) if index is not None else quoted)
        pos = m.end()
    return tuple(parts)


# ------------------------------------------------------------------ the object as the API server sees it

_PRESERVE = {"x-kubernetes-preserve-unknown-fields": True}
_EMBEDDED_KEYS = ("apiVersion", "kind", "metadata")


def _prepare(node: dict[str, Any], value: Any) -> Any:
    """`value` pruned and defaulted along `node`, converted to CEL values."""
    from celpy import celtypes

    if isinstance(value, dict):
        return celtypes.MapType(
            {celtypes.StringType(k): _prepare(sub, v) for k, (sub, v) in _fields(node, value).items()})
    if isinstance(value, list):
        items = node.get("items") if isinstance(node.get("items"), dict) else _PRESERVE
        return celtypes.ListType(_prepare(items, v) for v in value)
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if -2**63 <= value < 2**63:
            return celtypes.IntType(value)
        return celtypes.DoubleType(float(value))  # beyond CEL's int64: a JSON number, as a float
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if value is None:
        return None
    return celtypes.StringType(value if isinstance(value, str) else str(value))  # YAML dates and such


def _fields(node: dict[str, Any], value: dict[str, Any]) -> dict[str, tuple[dict[str, Any], Any]]:
    """key -> (its schema, its value) after pruning and defaulting."""
    props = node.get("properties") or {}
    extra = node.get("additionalProperties")
    keep = bool(node.get("x-kubernetes-preserve-unknown-fields")) or extra is True
    embedded = bool(node.get("x-kubernetes-embedded-resource"))
    out: dict[str, tuple[dict[str, Any], Any]] = {}
    for key, item in value.items():
        sub = props.get(key)
        if sub is None:
            if isinstance(extra, dict):
                sub = extra
            elif keep or (embedded and key in _EMBEDDED_KEYS):
                sub = _PRESERVE
            else:
                continue  # pruned
        if item is None and not sub.get("nullable"):
            continue  # the API server drops such nulls before defaulting
        out[str(key)] = (sub, item)
    for key, sub in props.items():
        if key not in out and "default" in sub:
            out[key] = (sub, sub["default"])  # _prepare copies it and applies the defaults inside it
    return out


def _prepare_root(schema: dict[str, Any], obj: dict[str, Any]) -> Any:
    from celpy import celtypes

    body = {k: v for k, v in obj.items() if k != "metadata"}
    out = _prepare({**schema, "properties": {**(schema.get("properties") or {}),
                                             "apiVersion": {"type": "string"}, "kind": {"type": "string"}}},
                   body)
    meta = obj.get("metadata")
    if isinstance(meta, dict):  # CEL sees only these two fields of ObjectMeta
        out[celtypes.StringType("metadata")] = _prepare(
            _PRESERVE, {k: meta[k] for k in ("name", "generateName") if isinstance(meta.get(k), str)})
    return out


def _bool_type() -> type:
    from celpy.celtypes import BoolType

    return BoolType


_JSON_TYPES = {"object": dict, "array": list, "string": str}


def _fits(node: dict[str, Any], value: Any) -> bool:
    """Whether a prepared (CEL) value has the JSON type the node declares (none declared: anything)."""
    if value is None:
        return bool(node.get("nullable"))
    is_bool = isinstance(value, _bool_type())  # CEL's bool is an int subclass
    if node.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not is_bool)
    want = node.get("type")
    if want in ("integer", "number"):
        return isinstance(value, (int,) if want == "integer" else (int, float)) and not is_bool
    if want == "boolean":
        return is_bool
    return want not in _JSON_TYPES or isinstance(value, _JSON_TYPES[want])


# ------------------------------------------------------------------ the walk


class CelSchema:
    """The CEL rules of one CRD version's openAPIV3Schema; rules are compiled on first use."""

    def __init__(self, openapi_schema: dict[str, Any]) -> None:
        self.schema = openapi_schema
        self._compiled: dict[int, list[Rule]] = {}
        self._below: dict[tuple[int, bool], bool] = {}

    def rules(self) -> list[Rule]:
        """Every rule of the schema, compiled, in schema order, each with its location."""
        out = []
        for node, where in _nodes(self.schema, ""):
            for rule in self._rules_at(node):
                rule.location = where or "(root)"  # a node reached twice (a YAML alias): the last place
                out.append(rule)
        return out

    def check_create(self, obj: dict[str, Any]) -> Outcome:
        """The create-time rules (no oldSelf) on a new object."""
        out = Outcome()
        if isinstance(obj, dict) and self._mentions_rules and self._has_rules(self.schema, False):
            self._walk(self.schema, _prepare_root(self.schema, obj), _ABSENT, (), False, out)
        return out

    def check_update(self, new: dict[str, Any], old: dict[str, Any]) -> Outcome:
        """The transition rules on an update of `old` to `new` (same object identity)."""
        out = Outcome()
        if isinstance(new, dict) and isinstance(old, dict) and self._mentions_rules \
                and self._has_rules(self.schema, True):
            self._walk(self.schema, _prepare_root(self.schema, new), _prepare_root(self.schema, old),
                       (), True, out)
        return out

    @functools.cached_property
    def _mentions_rules(self) -> bool:
        """False when the schema's text never says x-kubernetes-validations: no rule anywhere, known
        from one C-speed json.dumps instead of a walk of every node (a KServe InferenceService schema,
        ~700 KB without a rule, took 0.08 s to walk; issue 41). A schema JSON cannot write: True."""
        try:
            return "x-kubernetes-validations" in json.dumps(self.schema, default=str)
        except (TypeError, ValueError, RecursionError):
            return True

    def _walk(self, node: dict[str, Any], value: Any, old: Any, path: tuple[Any, ...], update: bool,
              out: Outcome) -> None:
        if not _fits(node, value) or (update and (old is _ABSENT or not _fits(node, old))):
            return
        for rule in self._rules_at(node):
            if rule.transition == update:
                out.evaluated += 1
                violation = rule.check(value, old if update else _ABSENT, path)
                if violation is not None:
                    out.violations.append(violation)
        for sub, key, child, old_child in _children(node, value, old):
            if self._has_rules(sub, update):
                self._walk(sub, child, old_child, path + (key,), update, out)

    def _rules_at(self, node: dict[str, Any]) -> list[Rule]:
        key = id(node)  # schema dicts live as long as this object (it holds the root)
        if key not in self._compiled:
            # located by rules(), which walks every node: the checks need no location, and mapping every
            # node of a big schema to one for the first rule compiled was 86,563 generator steps (issue 41)
            self._compiled[key] = [Rule.compile("", spec)
                                   for spec in node.get("x-kubernetes-validations") or []
                                   if isinstance(spec, dict)]
        return self._compiled[key]

    def _has_rules(self, node: dict[str, Any], transition: bool) -> bool:
        """Whether the node or a node below it has a rule of that kind (compiles them: the AST
        decides what is a transition rule)."""
        key = (id(node), transition)
        below = self._below
        found = below.get(key)
        if found is not None:
            return found
        below[key] = False  # a schema that refers to itself must not loop
        # the first call walks the whole schema (a big CRD's ~10,000 nodes): plain loops (properties, then
        # items and additionalProperties), not a generator per node (cProfile, issue 41: a tenth of `validate --crds`)
        found = self._has_rules_here(node, transition)
        if not found:
            for sub in (node.get("properties") or {}).values():
                if isinstance(sub, dict) and self._has_rules(sub, transition):
                    found = True
                    break
            else:
                for name in ("items", "additionalProperties"):
                    sub = node.get(name)
                    if isinstance(sub, dict) and self._has_rules(sub, transition):
                        found = True
                        break
        below[key] = found
        return found

    def _has_rules_here(self, node: dict[str, Any], transition: bool) -> bool:
        """Whether the node has a rule of that kind. A rule whose text never says `oldSelf` is a create-time
        rule without compiling it (a transition rule names oldSelf; a rule that does not compile counts as
        a create-time one too); only a rule that says it is compiled to tell. So the walk compiles the
        rules of the nodes an object reaches, not every rule of the CRD (cProfile: compiling them all
        was a third of `validate --crds`)."""
        specs = node.get("x-kubernetes-validations")
        if not specs:
            return False
        specs = [spec for spec in specs if isinstance(spec, dict)]
        if not specs:
            return False
        if not transition and any("oldSelf" not in str(spec.get("rule", "")) for spec in specs):
            return True
        if transition and all("oldSelf" not in str(spec.get("rule", "")) for spec in specs):
            return False
        return any(r.transition == transition for r in self._rules_at(node))


def _nodes(node: dict[str, Any], where: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every schema node below `node` (itself first) where a value can sit, with its location."""
    yield node, where
    for key, sub in (node.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from _nodes(sub, f"{where}.{key}" if where else key)
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{where}[*]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{where}{{*}}")


def _children(node: dict[str, Any], value: Any, old: Any) -> Iterator[tuple[dict[str, Any], Any, Any, Any]]:
    """(schema, key, value, old value or _ABSENT) of each child value that has a schema node."""
    old_map = old if isinstance(old, dict) else {}
    if isinstance(value, dict):
        props = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield sub, str(key), child, old_map.get(key, _ABSENT)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        olds = _correlate(node, value, old)
        for i, child in enumerate(value):
            yield node["items"], i, child, olds[i]


def _correlate(node: dict[str, Any], items: list[Any], old: Any) -> list[Any]:
    """The old item of each new item: by map keys for `x-kubernetes-list-type: map`, else none."""
    keys = node.get("x-kubernetes-list-map-keys") or []
    if node.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(old, list):
        return [_ABSENT] * len(items)

    def ident(item: Any) -> Any:
        return tuple(item.get(k) for k in keys) if isinstance(item, dict) else None

    by_key = {ident(o): o for o in old if ident(o) is not None}
    return [by_key.get(ident(item), _ABSENT) for item in items]
