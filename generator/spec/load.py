"""`load(path)`: read workload.yaml with the line of every key, validate it against the models and
the cross-field checks, and raise errors that name the file, the line and the field, e.g.
`fleet.yaml:12: fleet.pools[0].gpu.count: must be at least 1 (got 0)`.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import OrchgenError, cut, secret_in
from . import fabric, inputs
from .checks import check_fleet
from .models import Fleet, Path_, _short, format_path

MAX_FILE_BYTES = inputs.MAX_INPUT_BYTES  # checked before reading (spec.inputs.read_bounded)
MAX_YAML_NODES = 200_000  # after alias expansion: stops a "billion laughs" YAML bomb early
MAX_YAML_DEPTH = 40

class _Source:
    """The parsed document plus the line of every key and item, by path."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[Path_, int] = {}
        self._built = 0
        self._constructor = yaml.SafeLoader("")  # only its scalar constructors are used

    def error(self, message: str, path: Path_ = (), line: int | None = None) -> OrchgenError:
        return OrchgenError(message, self.file, line or self.line_of(path), format_path(path) or None)

    def line_of(self, path: Path_) -> int | None:
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

    def build(self, node: yaml.Node, path: Path_ = ()) -> Any:
        self._built += 1
        if self._built > MAX_YAML_NODES:
            raise self.error(f"document expands to more than {MAX_YAML_NODES} YAML nodes", path)
        if len(path) > MAX_YAML_DEPTH:
            raise self.error(f"nested deeper than {MAX_YAML_DEPTH} levels", path)
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self.build_key(key_node, path)
                if key in out:
                    raise self.error(f"duplicate key {key!r}", path + (key,), key_node.start_mark.line + 1)
                self.lines[path + (key,)] = key_node.start_mark.line + 1
                out[key] = self.build(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
        if node.tag not in _SCALAR_TAGS:
            raise self.error(f"unsupported YAML tag {_short(node.tag)}", path)
        if node.tag == _INT_TAG and len(str(node.value)) > inputs.MAX_INT_DIGITS:
            # int() of thousands of digits is slow, and refused by Python past 4,300 (ValueError)
            raise self.error(f"integer longer than {inputs.MAX_INT_DIGITS} digits", path)
        return self._constructor.construct_object(node, deep=True)

    def build_key(self, node: yaml.Node, path: Path_) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            raise self.error("mapping keys must be plain strings", path, node.start_mark.line + 1)
        return str(node.value)


_SCALAR_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null")}
_INT_TAG = "tag:yaml.org,2002:int"


# libyaml's composer (PyYAML's CSafeLoader: the same resolver, only the scanner, parser and composer in C)
# composes a plain workload.yaml ~10x faster than PyYAML's pure-Python one: that was 124M of a 2,048-node
# `plan`'s 2,158M instructions (callgrind, issue 41). It is used only where the two are known to agree: the
# same nodes, tags, values and lines, and the same refusals. Differential runs over every YAML file of the
# repository and thousands of mutations of them found them to disagree only on text holding a tab, a byte
# order mark, NEL/LS/PS line breaks, '?' (libyaml takes `ibp?2s0` in a flow mapping), a block scalar header
# (`|#`), a last line without its newline (the line of an empty document there), or refused by PyYAML's
# reader (non-printable characters); escapes, directives, tags, anchors and
# aliases are left to PyYAML too, as is a document libyaml refuses (PyYAML's error message is the one
# printed). libyaml composes recursively in C, with no depth limit: ~100,000 nested levels overflow the C
# stack (a segfault, where PyYAML raises RecursionError), so only a text that cannot nest deeper than
# _C_MAX_INDICATORS levels (each level needs one of [ { - ? :) is given to it.
_C_LOADER = getattr(yaml, "CSafeLoader", None)
_C_AVOID = frozenset("\t\r\ufeff\x85\u2028\u2029?|>%!&*\\")
_C_MAX_INDICATORS = 2_000


def _compose_c(text: str) -> list[yaml.Node | None] | None:
    """The documents of `text` as libyaml composes them, or None where PyYAML's composer must (see above)."""
    if _C_LOADER is None or not text.endswith("\n") or not _C_AVOID.isdisjoint(text) \
            or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return None
    if sum(map(text.count, "[{-?:")) > _C_MAX_INDICATORS:
        return None
    try:
        return list(yaml.compose_all(text, Loader=_C_LOADER))
    except yaml.YAMLError:  # PyYAML composes it again and says why, in its words
        return None


def _read(path: Path) -> tuple[_Source, Any]:
    src = _Source(str(path))
    try:  # a regular file only, its size checked before a byte is read (a FIFO, /dev/zero, a directory)
        raw = inputs.read_bounded(path, MAX_FILE_BYTES)
    except inputs.Refused as exc:
        raise src.error(("file " if "larger" in str(exc) else "") + str(exc)
                        + (" (give the workload.yaml file in it)" if "directory" in str(exc) else "")) from None
    except FileNotFoundError:
        raise src.error("no such file") from None
    except OSError as exc:
        raise src.error(f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise src.error(f"not UTF-8 text (byte {exc.start})") from None
    try:
        nodes = _compose_c(text)
        if nodes is None:
            nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except RecursionError:  # PyYAML composes recursively: `[[[[...` thousands deep overflows it
        raise src.error(f"malformed YAML: nested deeper than {MAX_YAML_DEPTH} levels") from None
    except yaml.reader.ReaderError as exc:  # a control character: it has a position, not a mark
        line = text.count("\n", 0, exc.position) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise src.error(f"malformed YAML: control character {char} is not allowed", line=line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        raise src.error(f"malformed YAML: {problem}", line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise src.error(f"malformed YAML: {exc}") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise src.error("file is empty: expected a Fleet document (apiVersion: orchgen/v1alpha1)")
    if len(nodes) > 1:
        raise src.error("holds several YAML documents; expected one Fleet", line=nodes[1].start_mark.line + 1)
    data = src.build(nodes[0])
    if not isinstance(data, dict):
        raise src.error("expected a mapping with apiVersion, kind, metadata, fleet, workloads", line=1)
    return src, data


# What people write for a value that orchgen spells otherwise: the cloud's name for its managed
# Kubernetes (`provider: aws` is EKS, not the 'aks' that spelling distance suggests).
ALIASES = {"aws": "eks", "amazon": "eks", "gcp": "gke", "google": "gke", "azure": "aks",
           "oci": "oke", "oracle": "oke", "onprem": "generic", "on-prem": "generic", "baremetal": "generic",
           "slinky-operator": "slinky", "argo": "argocd", "argo-cd": "argocd", "fluxcd": "flux"}


def _message(err: dict[str, Any], data: Any) -> str:
    kind, loc = err["type"], err["loc"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(data, loc[:-1])
        hint = difflib.get_close_matches(cut(str(loc[-1])), allowed, n=1)
        return "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else f"; allowed: {', '.join(allowed)}")
    if kind == "missing":
        return "required field is missing"
    msg = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    if kind == "literal_error" and isinstance(value, str):
        choices = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
        hint = [ALIASES[value.lower()]] if ALIASES.get(value.lower()) in choices else \
            difflib.get_close_matches(cut(value), choices, n=1)
        if hint:
            msg += f" (did you mean {hint[0]!r}?)"
    if kind in ("greater_than_equal", "less_than_equal", "too_short", "too_long"):
        msg += f" (got {_short(value)})" if not isinstance(value, (list, dict)) else ""
    if kind == "string_type" and isinstance(value, float) and loc and str(loc[-1]).endswith("version"):
        msg += f"; write the version in quotes, e.g. \"25.11\" (YAML read it as the number {value!r})"
    elif kind.endswith("_type") and not isinstance(value, (dict, list)):
        msg += f" (got {type(value).__name__} {_short(value)})"
    return msg


def _allowed_keys(data: Any, loc: tuple[Any, ...]) -> list[str]:
    model: Any = Fleet
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {f.alias or name: f for name, f in getattr(model, "model_fields", {}).items()}
        field = fields.get(part)
        if field is None:
            return []
        model = _model_of(field.annotation)
    return sorted(f.alias or name for name, f in getattr(model, "model_fields", {}).items())


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def load(path: str | Path, roots: tuple[str, ...] = ()) -> Fleet:
    """Parse and check a workload.yaml; raise OrchgenError naming file, line and field."""
    return load_located(path, roots)[0]


def load_located(path: str | Path, roots: tuple[str, ...] = ()
                 ) -> tuple[Fleet, Callable[[OrchgenError], OrchgenError]]:
    """`load`, plus a function that points a later error (the planner's or a renderer's, which
    name a field but know no file or line) at the file and line of that field. A file workload.yaml
    names is read only inside its folder or one of `roots` (--input-root; spec.inputs.confine)."""
    src, data = _read(Path(path))
    fields = {format_path(key): line for key, line in src.lines.items()}

    def locate(err: OrchgenError) -> OrchgenError:
        if err.field and err.line is None:
            field = err.field
            while field and field not in fields:  # fall back to the nearest enclosing key
                field = field[: max(field.rfind("."), field.rfind("["), 0)]
            err.file, err.line = src.file, fields.get(field)
        return err

    _refuse_secrets(src, data)
    try:
        fleet = Fleet.model_validate(data)
    except ValidationError as exc:
        errors = sorted(exc.errors(), key=lambda e: (src.line_of(_loc(e)) or 0, format_path(_loc(e))))
        first = errors[0]
        more = f" (and {len(errors) - 1} more error{'s' * (len(errors) > 2)})" if len(errors) > 1 else ""
        raise src.error(_message(first, data) + more, _loc(first)) from None
    if any(p.facts for p in fleet.fleet.pools):  # pool.facts: what discover read, for what the pool omits
        fleet = _with_facts(src, data, fleet, Path(path).parent, roots)
    for message, loc in check_fleet(fleet):
        raise src.error(message, loc)
    for message, loc in inputs.fleet_problems(fleet):
        raise src.error(message, loc)
    try:  # the fabric as cabled: imports are read here, their errors name the imported file's line
        imported = fabric.read_import(fleet, Path(path).parent, roots)
        fabric.resolve(fleet, None, imported)  # every cabling error now, with its line
        fleet.fleet.fabric._imported = imported
    except fabric.FabricProblem as p:
        if p.file:
            raise OrchgenError(p.message, p.file, p.line, p.field) from None
        raise src.error(p.message, p.path) from None
    repo = fleet.options.slurm.repository
    if repo is not None:  # the site's Slurm repository's signing key: read here, copied into the bundle
        repo._key = _repository_key(src, repo.key, Path(path).parent, roots)
    return fleet, locate


# An ASCII-armored OpenPGP public key (RFC 4880 section 6.2 armor headers), as `gpg --armor --export` writes it
# and apt's Signed-By takes in a .asc file (sources.list(5)); a secret key is refused: a bundle is committed.
_PUBKEY_BEGIN, _PUBKEY_END = b"-----BEGIN PGP PUBLIC KEY BLOCK-----", b"-----END PGP PUBLIC KEY BLOCK-----"
MAX_KEY_BYTES = 1 << 20


def _repository_key(src: _Source, rel: str, base: Path, roots: tuple[str, ...]) -> bytes:
    at = ("options", "slurm", "repository", "key")
    try:
        raw = inputs.read_bounded(inputs.confine(base, rel, roots), MAX_KEY_BYTES)
    except inputs.Refused as exc:
        raise src.error(f"the repository key {rel[:80]!r} {exc}", at) from None
    except OSError as exc:
        raise src.error(f"cannot read {rel[:80]!r} (relative to workload.yaml): {exc.strerror}", at) from None
    if b"PRIVATE KEY" in raw:
        raise src.error("is a private (secret) key: give the repository's public key (gpg --armor --export "
                        "KEYID), never the secret one", at)
    text = raw.strip()
    if not (text.startswith(_PUBKEY_BEGIN) and text.endswith(_PUBKEY_END)) or text.count(_PUBKEY_BEGIN) != 1:
        raise src.error("is not one ASCII-armored OpenPGP public key (-----BEGIN PGP PUBLIC KEY BLOCK----- ... "
                        "-----END PGP PUBLIC KEY BLOCK-----, as `gpg --armor --export KEYID` writes it)", at)
    try:
        text.decode("ascii")
    except UnicodeDecodeError:
        raise src.error("is not one ASCII-armored OpenPGP public key (not ASCII text)", at) from None
    return text + b"\n"


def _with_facts(src: _Source, data: Any, fleet: Fleet, base: Path, roots: tuple[str, ...]) -> Fleet:
    from . import facts
    from .checks import pool_hostnames

    pools = list(data["fleet"]["pools"])
    for i, pool in enumerate(fleet.fleet.pools):
        if not pool.facts:
            continue
        at = ("fleet", "pools", i, "facts")
        try:
            hosts = facts.read(base, pool.facts, roots, at)
            pools[i] = facts.fill(pools[i], pool_hostnames(pool), hosts, fleet.fleet.fabric.kind, at)
        except facts.FactsProblem as p:
            raise src.error(p.message, p.path) from None
    data = {**data, "fleet": {**data["fleet"], "pools": pools}}
    try:
        return Fleet.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise src.error(f"from its facts file: {_message(first, data)}", (*_loc(first)[:3], "facts")) from None


def _refuse_secrets(src: _Source, data: Any, path: Path_ = ()) -> None:
    """Refuse a credential anywhere in the document, keys included, before any check can repeat the
    value: workload.yaml, plan.json, the README and the manifests are committed and land in CI logs.
    The message says what it looks like (errors.secret_in), never the value."""
    if isinstance(data, dict):
        for key, value in data.items():
            _refuse_secrets(src, key, path + (key,))
            _refuse_secrets(src, value, path + (key,))
    elif isinstance(data, list):
        for i, item in enumerate(data):
            _refuse_secrets(src, item, path + (i,))
    elif isinstance(data, str):
        what = secret_in(data)
        if what:
            if tuple(path[:3]) == ("options", "slurm", "repository"):  # apt's own place for a repository's login
                where = ("remove it here and give apt the login on each host in /etc/apt/auth.conf.d/ (apt_auth.conf(5): "
                         "machine HOST login USER password PASSWORD, mode 0600), which the bundle never holds")
            else:
                where = ("remove it here and create a Kubernetes Secret in the tenant's namespace (kubectl create secret "
                         "generic NAME --from-literal=HF_TOKEN=...), then name it in serving.secret (a private "
                         "registry's: serving.image_pull_secret), or pass it as a Pulumi secret (pulumi config set "
                         "--secret)")
            raise src.error(f"holds what looks like a credential ({what}); a bundle is committed, so orchgen never "
                            f"writes one: {where}", path)


def _loc(err: dict[str, Any]) -> Path_:
    # pydantic inserts validator names into loc for constrained types; keep only real keys
    return tuple(p for p in err["loc"] if isinstance(p, int) or not str(p).startswith(("function-", "literal[")))
