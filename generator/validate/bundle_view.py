"""A bundle on disk as the checks see it: files, YAML documents with line numbers, plan.json, node labels.

`orchgen validate` reads bundles an operator may have edited by hand, so nothing here trusts the
layout: a missing file is None, a file that does not parse becomes a `Finding` (kept in
`Bundle.problems`) and the checks that need it see nothing. Line numbers are 1-based; 0 means "the
file as a whole".
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ..bundle import MARKER, LinkOutside, read_inside
from ..errors import fit_to_print
from ..spec.inputs import MAX_INPUT_BYTES, Refused
from ..contract import KUBE_PLANES, LABEL_PLANE

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_YAML_NODES = 1_000_000  # per document, aliases expanded: far beyond any bundle file, far below a bomb


def _expanded_size(root: yaml.Node) -> int:
    """How many nodes the document has once every alias is expanded, counted without expanding them
    (a node used N times counts N times); a cycle counts as too many. Stops past MAX_YAML_NODES."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), MAX_YAML_NODES + 1)
            continue
        if key in sizes:
            continue
        if key in on_path:
            return MAX_YAML_NODES + 1  # an alias inside its own anchor
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


_STR, _INT, _NULL, _BOOL, _FLOAT, _SEQ, _MAP = (f"tag:yaml.org,2002:{t}" for t in
                                                ("str", "int", "null", "bool", "float", "seq", "map"))
_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]{0,17})")  # int() of it is what construct_yaml_int gives
_SCALARS = {_INT: yaml.SafeLoader.construct_yaml_int, _FLOAT: yaml.SafeLoader.construct_yaml_float,
            _BOOL: yaml.SafeLoader.construct_yaml_bool, _NULL: yaml.SafeLoader.construct_yaml_null}
_FAST_DEPTH = 64  # deeper documents go the constructor's way (its recursion limit, its message)


class _Slow(Exception):
    """A node the fast constructor leaves to PyYAML's (a tag, a key or a depth it does not take)."""


def _construct(loader: Any, node: yaml.Node, seen: set[int], depth: int = 0) -> Any:
    """The data PyYAML's SafeConstructor builds from a document without merge keys, tags beyond str,
    int, float, bool, null, seq and map, or a mapping or sequence reached twice (an alias of one: PyYAML
    gives the same object twice, and an alias bomb is never walked), built in one walk
    (construct_document's generic dispatch and generators per node were half of parsing a bundle;
    cProfile, issue 41). Raises _Slow for anything else: the caller constructs it the usual way."""
    if depth > _FAST_DEPTH:
        raise _Slow
    tag = node.tag
    if isinstance(node, yaml.ScalarNode):
        if tag == _STR:
            return node.value
        if tag == _INT and _PLAIN_INT.fullmatch(node.value):
            return int(node.value)
        method = _SCALARS.get(tag)
        if method is None:
            raise _Slow
        return method(loader, node)  # SafeConstructor's own, for a scalar: no state kept
    if id(node) in seen:
        raise _Slow
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode) and tag == _MAP:
        out = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag not in (_STR, _INT, _BOOL, _NULL, _FLOAT):
                raise _Slow  # a merge key (<<), a collection as a key (PyYAML's error): its way
            out[_construct(loader, key, seen, depth + 1)] = _construct(loader, value, seen, depth + 1)
        return out
    if isinstance(node, yaml.SequenceNode) and tag == _SEQ:
        return [_construct(loader, item, seen, depth + 1) for item in node.value]
    raise _Slow


@dataclass(frozen=True, order=True)
class Finding:
    path: str  # relative to the bundle, posix
    line: int
    message: str
    severity: str = "error"  # error | warning

    def __str__(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        return fit_to_print(f"{self.path}:{self.line}: {prefix}{self.message}")  # a bundle's content is no one's terminal


def as_list(value: Any) -> list[Any]:
    """A list field of a bundle that may have been edited into anything: its items, or none."""
    return value if isinstance(value, list) else []


def _one_line(message: str) -> str:
    return " ".join(message.split())  # `path:line: message` tools read one finding per line


def error(path: str, line: int, message: str) -> Finding:
    return Finding(path, line, _one_line(message), "error")


def warning(path: str, line: int, message: str) -> Finding:
    return Finding(path, line, _one_line(message), "warning")


_PATH_TOKEN = re.compile(r'\.?([A-Za-z0-9_$@-]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def split_message(text: str) -> tuple[list[Any], str]:
    """`spec.a[0]["x/y"]: message` (the validators' format) -> (["spec", "a", 0, "x/y"], "message")."""
    if text.startswith("(root): "):
        return [], text[len("(root): "):]
    parts: list[Any] = []
    pos = 0
    while pos < len(text) and not text.startswith(": ", pos):
        m = _PATH_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            return [], text
        name, index, quoted = m.groups()
        parts.append(name if name is not None else int(index) if index is not None else json.loads(quoted))
        pos = m.end()
    return parts, text[pos + 2:]


@dataclass
class Doc:
    """One YAML document: its data, the line it starts on, and its node tree for finer lines."""

    path: str
    data: Any
    node: yaml.Node = field(repr=False)

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def line_of(self, parts: list[Any]) -> int:
        """The line of the deepest existing key or item along `parts` (the document start if none)."""
        node, line = self.node, self.line
        for part in parts:
            if isinstance(node, yaml.MappingNode) and not isinstance(part, int):
                hit = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)
                            and k.value == str(part)), None)
                if hit is None:
                    break
                line, node = hit[0].start_mark.line + 1, hit[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", "")) if isinstance(self.data, dict) else ""

    @property
    def api_version(self) -> str:
        return str(self.data.get("apiVersion", "")) if isinstance(self.data, dict) else ""

    @property
    def metadata(self) -> dict[str, Any]:
        meta = self.data.get("metadata") if isinstance(self.data, dict) else None
        return meta if isinstance(meta, dict) else {}

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str | None:
        ns = self.metadata.get("namespace")
        return str(ns) if ns is not None else None

    @property
    def label(self) -> str:
        """How messages name the object: `ClusterQueue nlp`."""
        return f"{self.kind or '(no kind)'} {self.name or '(no name)'}"


@dataclass
class NodeGroup:
    """Nodes the script knows by a label selector, not by name (a cloud pool): how many the
    provisioner gives (`expect_nodes`), the labels they carry (the selector's and what the script
    adds by selector) and the taints it puts on them."""

    labels: dict[str, str]
    count: int
    line: int
    taints: list[str] = field(default_factory=list)


@dataclass
class NodeLabels:
    """What kubernetes/node-labels.sh does: node -> labels, node -> taints, and the line of each;
    and the node groups it knows by selector only (`groups`)."""

    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    taints: dict[str, list[str]] = field(default_factory=dict)
    line: dict[str, int] = field(default_factory=dict)  # first line that labels the node
    groups: list[NodeGroup] = field(default_factory=list)

    def population(self) -> list[tuple[dict[str, str], list[str], int]]:
        """(labels, taints, node count) of every named node (count 1) and every selector group."""
        return ([(lb, self.taints.get(n, []), 1) for n, lb in self.labels.items()]
                + [(g.labels, g.taints, g.count) for g in self.groups])

    def count(self, wanted: dict[str, str]) -> int:
        """Nodes that carry every label of `wanted`."""
        return sum(n for lb, _, n in self.population() if all(lb.get(k) == v for k, v in wanted.items()))

    def plane_nodes(self, kube: bool) -> set[str]:
        """Nodes the script gives to a Kubernetes plane (kube) or to Slurm; unmarked nodes count as
        Kubernetes nodes, because nothing keeps Kubernetes pods off them."""
        out = set()
        for node, labels in self.labels.items():
            plane = labels.get(LABEL_PLANE)
            if kube == (plane is None or plane in KUBE_PLANES):
                out.add(node)
        return out


def parse_node_labels(text: str) -> NodeLabels:
    """Read the `label NODE... KEY=VALUE...` / `taint NODE... KEY=VALUE:EFFECT` lines of the script
    (and plain `kubectl label node ...` lines, for hand-written scripts)."""
    out = NodeLabels()
    for number, raw in enumerate(text.splitlines(), 1):
        words = [w.strip("'\"") for w in raw.split("#", 1)[0].split()]
        if not words:
            continue
        if _selector_line(out, words, number):
            continue
        if words[0] in ("label", "taint"):
            verb, args = words[0], words[1:]
        elif len(words) > 2 and words[0].strip('"').endswith(("kubectl", "KUBECTL}", "$KUBECTL")) \
                and words[1] in ("label", "taint") and words[2] in ("node", "nodes", "no"):
            verb, args = words[1], words[3:]
        else:
            continue
        args = [a for a in (w.strip("'\"") for w in args) if a and not a.startswith(("-", "$"))]
        nodes = [a for a in args if "=" not in a and not a.endswith("-")]
        pairs = [a for a in args if "=" in a]
        for node in nodes:
            out.line.setdefault(node, number)
            if verb == "label":
                out.labels.setdefault(node, {}).update(p.split("=", 1) for p in pairs)
            else:
                out.taints.setdefault(node, []).extend(pairs)
    return out


def _pairs_of(text: str) -> dict[str, str] | None:
    try:
        return dict(p.split("=", 1) for p in text.split(",") if p)
    except ValueError:
        return None


def _selector_line(out: NodeLabels, words: list[str], number: int) -> bool:
    """The script's lines about nodes known by selector: `expect_nodes SEL N`, `assign_plane SEL S K`,
    `label -l SEL k=v...`, `taint -l SEL k=v:Effect`. True when the line was one of them."""
    verb, args = words[0], words[1:]
    if verb == "expect_nodes" and len(args) == 2 and args[1].isdigit():
        sel = _pairs_of(args[0])
        if sel is not None:
            out.groups.append(NodeGroup(sel, int(args[1]), number))
        return True
    if verb == "assign_plane" and len(args) == 3 and args[1].isdigit() and args[2].isdigit():
        sel = _pairs_of(args[0])
        if sel is None:
            return True
        out.groups = [g for g in out.groups if g.labels != sel]
        out.groups += [NodeGroup({**sel, LABEL_PLANE: "slurm"}, int(args[1]), number,
                                 [f"{LABEL_PLANE}=slurm:NoSchedule"]),
                       NodeGroup({**sel, LABEL_PLANE: "kubernetes"}, int(args[2]), number)]
        return True
    if verb in ("label", "taint") and len(args) >= 3 and args[0] == "-l":
        sel = _pairs_of(args[1])
        for group in out.groups if sel is not None else []:
            if all(group.labels.get(k) == v for k, v in sel.items()):
                if verb == "label":
                    group.labels.update(p.split("=", 1) for p in args[2:] if "=" in p)
                else:
                    group.taints += [a for a in args[2:] if "=" in a or ":" in a]
        return True
    return False


def dropping(rel: str) -> bool:
    """A file that tools leave beside the bundle's own: byte code, editor backups and swap files."""
    parts = rel.split("/")
    name = parts[-1]
    return ("__pycache__" in parts or name.endswith(("~", ".pyc", ".swp", ".swo", ".swx"))
            or (name.startswith(".#")) or (name.startswith("#") and name.endswith("#")) or name == ".DS_Store")


class Bundle:
    """Read-only, lazily parsed view of a bundle directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[Finding] = []  # files that could not be read or parsed
        self._docs: dict[str, list[Doc]] = {}
        self._text: dict[str, str | None] = {}
        self.memo: dict[str, Any] = {}  # parsed files shared between checks (slurm.conf ...)
        every = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                       if p.is_file() and p.name != MARKER and ".git" not in p.relative_to(root).parts)
        # Python's byte code (`python -m py_compile pulumi/__main__.py`) and editors' backups and
        # swap files are nobody's artifact: skipped with a notice, not read as bundle files.
        self.ignored: list[str] = [f for f in every if dropping(f)]
        self.files: list[str] = [f for f in every if not dropping(f)]

    def has(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def under(self, prefix: str, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> list[str]:
        return [f for f in self.files if f.startswith(prefix) and f.endswith(suffixes)]

    def text(self, rel: str) -> str | None:
        if rel not in self._text:
            self._text[rel] = None
            if self.has(rel) or (self.root / rel).is_symlink():
                try:  # the limits `plan` reads workload.yaml with: a regular file, at most 16 MiB; links confined
                    self._text[rel] = read_inside(self.root, rel, MAX_INPUT_BYTES, self.top).decode("utf-8")
                except LinkOutside:
                    self.problems.append(error(rel, 0, "is a symbolic link leading outside the bundle: not read "
                                                       "(a bundle is committed and applied as it is)"))
                except UnicodeDecodeError as exc:
                    self.problems.append(error(rel, 0, f"not UTF-8 text (byte {exc.start})"))
                except Refused as exc:
                    self.problems.append(error(rel, 0, f"not read: it {exc}"))
                except OSError as exc:
                    self.problems.append(error(rel, 0, f"cannot read: {exc.strerror}"))
        return self._text[rel]

    @property
    def top(self) -> Path:
        """The folder links may lead within (a cluster's view: its whole bundle)."""
        return self.root

    def docs(self, rel: str) -> list[Doc]:
        """The file's non-empty YAML documents ([] if absent or unparsable; the latter is a problem)."""
        if rel not in self._docs:
            self._docs[rel] = self._parse(rel)
        return self._docs[rel]

    def doc(self, rel: str) -> Doc | None:
        docs = self.docs(rel)
        return docs[0] if docs else None

    def _parse(self, rel: str) -> list[Doc]:
        text = self.text(rel)
        if text is None:
            return []
        loader = _Loader(text)
        out = []
        # Without an anchor (`&`) no node is used twice, and a node takes at least two thirds of a character
        # (`[?,?]`: 7 nodes), so a short text without one cannot expand past the limit: counting its nodes
        # was 10% of a 16,384-GPU bundle's `validate` (issue 41). Nor can a document _construct takes
        # (it reaches no mapping or sequence twice), though its text has an `&` (a shell `&&`).
        big = 2 * len(text) > MAX_YAML_NODES
        count = "&" in text or big
        try:
            while loader.check_node():
                node = loader.get_node()
                data: Any = _Slow
                if not big:
                    try:
                        data = _construct(loader, node, set())
                    except Exception:  # noqa: BLE001 (_Slow, or an error: PyYAML's way gives its own, in its order)
                        data = _Slow
                if data is _Slow:
                    if count and _expanded_size(node) > MAX_YAML_NODES:  # a "billion laughs" alias bomb: never walked
                        self.problems.append(error(rel, node.start_mark.line + 1, f"a YAML document that "
                                                   f"expands to more than {MAX_YAML_NODES} nodes (aliases "
                                                   "counted as often as they are used): not read"))
                        return []
                    data = loader.construct_document(node)
                if data is not None:
                    out.append(Doc(rel, data, node))
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            self.problems.append(error(rel, mark.line + 1 if mark else 0,
                                       f"not valid YAML: {exc.problem or exc.context}"))
            return []
        except yaml.reader.ReaderError as exc:  # a control character: a position, not a mark
            self.problems.append(error(rel, text.count("\n", 0, exc.position) + 1,
                                       f"not valid YAML: {exc.reason} (character {exc.character!r})"))
            return []
        except (yaml.YAMLError, RecursionError) as exc:
            self.problems.append(error(rel, 0, f"not valid YAML: {exc}"))
            return []
        except ValueError as exc:  # int("9" * 5000): Python's limit on integer digits
            self.problems.append(error(rel, 0, f"not valid YAML: {str(exc)[:120]}"))
            return []
        finally:
            loader.dispose()
        return out

    @cached_property
    def plan(self) -> dict[str, Any]:
        """plan.json, or {} when absent or broken (broken is a problem)."""
        text = self.text("plan.json")
        if text is None:
            return {}
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.problems.append(error("plan.json", getattr(exc, "lineno", 0), f"not valid JSON: {exc}"))
            return {}
        if not isinstance(data, dict):
            self.problems.append(error("plan.json", 1, "expected a JSON object"))
            return {}
        return data

    def plan_version(self, key: str) -> str | None:
        versions = self.plan.get("versions")
        value = versions.get(key) if isinstance(versions, dict) else None
        return str(value) if value else None

    @cached_property
    def node_labels(self) -> NodeLabels | None:
        text = self.text("kubernetes/node-labels.sh")
        return parse_node_labels(text) if text is not None else None
