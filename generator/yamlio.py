"""Stable YAML and JSON output: sorted keys, no aliases, block strings, trailing newline."""
from __future__ import annotations

import json
import re
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # every object spelt out: no &id001 anchors
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)
# Go's YAML (kubectl, Helm, Flux, Argo CD: sigs.k8s.io/yaml) reads 1e5 or 3e36 as a float, PyYAML's YAML 1.1
# only with a dot and a signed exponent; and 0o17 as an int (Go's ParseInt prefixes), which YAML 1.1 reads as
# a string: a string of either shape must be quoted, or a Go tool reads a number. The float pattern is
# go-yaml's (resolve.go, yamlStyleFloat).
GO_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
GO_OCTAL = re.compile(r"^[-+]?0o[0-7_]+$")


def resolve_numbers_as_go(cls: type) -> None:
    """Make a PyYAML Dumper quote, or a Loader read as numbers, the number shapes only Go's YAML knows."""
    cls.add_implicit_resolver("tag:yaml.org,2002:float", GO_FLOAT, list("-+.0123456789"))
    cls.add_implicit_resolver("tag:yaml.org,2002:int", GO_OCTAL, list("-+0"))


resolve_numbers_as_go(_Dumper)
_Dumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))

# libyaml's emitter (PyYAML's CSafeDumper: the same representer and resolvers, only the emitter in C) writes a
# bundle ~10x faster than PyYAML's Python one, and the same bytes, except where the two emitters disagree:
# line breaks other than \n (\r, NEL, U+2028), control characters and non-ASCII text, empty or long (≥128)
# keys. Such a document (a site's value carried verbatim can be one) is written by the Python emitter, so
# the output does not depend on which emitter wrote it (tests/test_yamlio.py compares the two on random data).
_CDumper: type | None = None
if hasattr(yaml, "CSafeDumper"):
    class _CDumper(yaml.CSafeDumper):  # type: ignore[no-redef]
        def ignore_aliases(self, data: Any) -> bool:
            return True

    _CDumper.add_representer(str, _str)
    resolve_numbers_as_go(_CDumper)
    _CDumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))

_PLAIN_VALUE = re.compile(r"[\n -~]*")  # printable ASCII and \n
_PLAIN_KEY = re.compile(r"[ -~]{1,100}")


def _emits_alike(data: Any) -> bool:
    """Whether both emitters write `data` the same (see _CDumper): only str keys and plain ASCII text."""
    if isinstance(data, dict):
        return all(type(k) is str and _PLAIN_KEY.fullmatch(k) and _emits_alike(v) for k, v in data.items())
    if isinstance(data, (list, tuple)):
        return all(map(_emits_alike, data))
    if isinstance(data, str):
        return _PLAIN_VALUE.fullmatch(data) is not None
    return True


def _dumper(docs: list[Any]) -> type:
    """The emitter for these documents: a document that is a bare scalar gets an end marker (`...`)
    from the Python emitter only, so it is written by that one too."""
    alike = all(isinstance(doc, (dict, list, tuple)) for doc in docs) and _emits_alike(docs)
    return _CDumper if _CDumper is not None and alike else _Dumper


# --- the bundle's own emitter (issue 41) -------------------------------------------------------------------
# Even with libyaml's emitter, PyYAML spends most of a bundle's YAML time in Python: its representer builds a
# node per value and its serializer asks the resolver twice per scalar (~50,000 calls for a 2,048-node fleet).
# A bundle's documents are plain data (dicts with str keys, lists, str, int, float, bool, None) in block style,
# so the text is written here directly: the same decisions as PyYAML's Python emitter (yaml/emitter.py,
# whose output is the reference: analyze_scalar, choose_scalar_style, the writers), made once per distinct
# string. What this emitter does not cover (non-ASCII or control characters, keys not simple, text long
# enough to be folded at `width`, other types) raises _Unsupported and the document goes to PyYAML as before;
# tests/test_yamlio.py compares both on random documents, tests/test_golden.py on every bundle.
_WIDTH = 4096  # the `width` PyYAML is given: plain and quoted scalars are folded past that column
# PyYAML folds a plain or quoted scalar at a space past column `width`: a scalar of at most _FOLD_SAFE
# characters (twice that once quoted with escapes) after at most _MAX_INDENT columns and a key (< 128) never
# gets there. A literal block is never folded.
_FOLD_SAFE = 1_800
_MAX_INDENT = 200
_STR_TAG = "tag:yaml.org,2002:str"
_ASCII = re.compile(r"[\n -~]*")  # printable ASCII and \n: no special, unicode or other break characters


class _Unsupported(Exception):
    """A document the fast emitter leaves to PyYAML."""


def _implicit_tag(value: str) -> str:
    """The tag PyYAML's resolver (with this module's Go number shapes) reads a plain `value` as."""
    resolvers = _Dumper.yaml_implicit_resolvers
    for tag, regexp in resolvers.get(value[0] if value else "", []) + resolvers.get(None, []):
        if regexp.match(value):
            return tag
    return _STR_TAG


def _analysis(s: str) -> tuple[bool, bool, bool, bool]:
    """PyYAML's Emitter.analyze_scalar for printable ASCII and \n (no special characters):
    (multiline, allow_block_plain, allow_single_quoted, allow_block)."""
    if not s:
        return False, True, True, False
    block_indicators = s.startswith(("---", "..."))
    first, followed = s[0], len(s) == 1 or s[1] in " \n"
    if first in "#,[]{}&*!|>'\"%@`" or (first in "?:-" and followed):
        block_indicators = True
    if not block_indicators and (": " in s or s.endswith(":") or ":\n" in s
                                 or " #" in s or "\n#" in s):
        block_indicators = True
    multiline = "\n" in s
    leading = first in " \n"
    trailing_space, trailing_break = s[-1] == " ", s[-1] == "\n"
    break_space, space_break = "\n " in s, " \n" in s
    plain = not (leading or trailing_space or trailing_break or break_space or space_break or multiline
                 or block_indicators)
    single = not (break_space or space_break)
    block = not (trailing_space or space_break)
    return multiline, plain, single, block


# A name, path or version (a host name at 16,384 nodes, most of a bundle's distinct strings): no blank, no
# indicator anywhere, so plain wherever the resolver reads it as a string (_analysis's verdict, cheaper).
_NAME_LIKE = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9_./-]{0,1799}")


# A long list of host names (bringup/vars.yaml's, the inventory's hosts: 24,576 and 12,288 at 131,072 GPUs) is
# written in one join when every name is plain as it is, key or value: a letter, then up to 121 name characters
# (a simple key's most, _KEY_MAX), checked for the whole list by one regex over the names joined. A plain
# string that starts with a letter is read as anything but a string only by the bool and null resolvers
# (YAML 1.1's yes/no/on/off/true/false, null: 5 letters at most), so only a name that short asks the resolver.
_NAMES = re.compile(r"(?:[A-Za-z][A-Za-z0-9_./-]{0,121}\n)+")  # 122 at most: _KEY_MAX
_NAMES_MIN = 16  # below that, the per-item path is as quick


def _letter_resolvers_are_words() -> bool:
    """Whether the resolvers of plain scalars that start with a letter are PyYAML's bool and null (words of at
    most 5 letters) and nothing else: the premise of _plain_names (a resolver added later turns it off)."""
    resolvers = _Dumper.yaml_implicit_resolvers
    known = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"}
    return None not in resolvers and all(tag in known for key, pairs in resolvers.items()
                                         if key is not None and key.isalpha() for tag, _ in pairs)


_WORDS_ONLY = _letter_resolvers_are_words()


def _plain_names(items: list | tuple) -> bool:
    """Whether every item is a str that both _key and _str_value write plain and as it is."""
    if not _WORDS_ONLY:
        return False
    try:
        joined = "\n".join(items)  # TypeError for an item that is not a str
    except TypeError:
        return False
    if not _NAMES.fullmatch(joined + "\n"):
        return False
    return all(_implicit_tag(item) == _STR_TAG for item in items if len(item) <= 5)


_KEYS: dict[str, str] = {}  # key -> its text and ':'
_KEY_MAX = 122  # characters of a simple key (_key)
_VALUES: dict[str, str | None] = {}  # str value -> ' ' and its text; None: a literal block (indent-dependent)
_LONG_PLAIN, _LONG_SINGLE = "plain", "single"  # a long one-line value, folded where PyYAML folds it (_folded)


def _quoted(s: str, single: bool) -> str:
    if single:
        return "'" + s.replace("'", "''") + "'"
    # double-quoted: of printable ASCII and \n only '"', '\\' and \n are escaped (write_double_quoted)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _key(k: Any) -> str:
    text = _KEYS.get(k)
    if text is None:
        # a simple key: not empty, one line, and shorter than 128 with its tag, which PyYAML's check_simple_key
        # counts even when it is implicit ("!!str", 5 more): at most 122 characters; else `? key`, left to PyYAML
        if type(k) is not str or not 0 < len(k) <= _KEY_MAX or not _ASCII.fullmatch(k) or "\n" in k:
            raise _Unsupported
        _, plain, single, _ = (False, True, True, True) if _NAME_LIKE.fullmatch(k) else _analysis(k)
        if plain and _implicit_tag(k) == _STR_TAG:
            text = k
        else:
            text = _quoted(k, single)
        text += ":"
        _KEYS[k] = text
    return text


def _str_value(s: str) -> str | None:
    text = _VALUES.get(s, False)
    if text is False:
        if _NAME_LIKE.fullmatch(s):
            text = " " + s if _implicit_tag(s) == _STR_TAG else " " + _quoted(s, True)
            _VALUES[s] = text
            return text
        if not _ASCII.fullmatch(s):
            raise _Unsupported
        multiline, plain, single, block = _analysis(s)
        if multiline and block:  # the representer asks for `|` (_str)
            text = None
        elif multiline:  # where a literal block can't hold it, PyYAML writes double quotes
            if len(s) > _FOLD_SAFE:
                raise _Unsupported
            text = " " + _quoted(s, False)
        elif plain and _implicit_tag(s) == _STR_TAG:
            text = " " + s if len(s) <= _FOLD_SAFE else _LONG_PLAIN
        else:
            text = " " + _quoted(s, single) if len(s) <= _FOLD_SAFE else _LONG_SINGLE
        _VALUES[s] = text
    return text  # type: ignore[return-value]


_SPACES = re.compile(r"( +)")


def _folded(s: str, single: bool, column: int, indent: int) -> str:
    """write_plain / write_single_quoted of a one-line `s` that starts after `column`: a lone space met past
    the width is a line break and `indent` spaces (a quoted scalar's first and last spaces never are)."""
    out = [" '" if single else " "]
    column += len(out[0])
    tokens = _SPACES.split(s.replace("'", "''") if single else s)
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        if i % 2 and token == " " and column > _WIDTH and 0 < i < last and tokens[i - 1] and tokens[i + 1]:
            out.append("\n" + " " * indent)
            column = indent
        else:
            out.append(token)
            column += len(token)
    if single:
        out.append("'")
    return "".join(out)


def _literal(s: str, indent: int) -> str:
    """write_literal at `indent`: the header's hints (determine_block_hints), then each line indented."""
    hints = "2" if s[0] == "\n" or s[0] == " " else ""
    if s[-1] != "\n":
        hints += "-"
    elif len(s) == 1 or s[-2] == "\n":
        hints += "+"
    pad = " " * indent
    lines = s.split("\n")
    if s[-1] == "\n":
        lines.pop()
    return f" |{hints}\n" + "".join(f"{pad}{line}\n" if line else "\n" for line in lines)


def _float(x: float) -> str:
    """SafeRepresenter.represent_float."""
    if x != x:
        return ".nan"
    if x == float("inf"):
        return ".inf"
    if x == float("-inf"):
        return "-.inf"
    value = repr(x).lower()
    if "." not in value and "e" in value:
        value = value.replace("e", ".0e", 1)
    return value


_FLOAT_TAG = "tag:yaml.org,2002:float"


def _scalar(value: Any, indent: int, column: int, out: list[str]) -> bool:
    """Append ` value` (after `key:` or `-`, which end at `column`) and its line break; False if `value` is a
    collection."""
    kind = type(value)
    if kind is str:
        text = _str_value(value)
        if text is None:
            out.append(_literal(value, indent))
        elif text is _LONG_PLAIN or text is _LONG_SINGLE:
            out.append(_folded(value, text is _LONG_SINGLE, column, indent) + "\n")
        else:
            out.append(text + "\n")
    elif kind is bool:
        out.append(" true\n" if value else " false\n")
    elif kind is int:
        out.append(f" {value}\n")
    elif value is None:
        out.append(" null\n")
    elif kind is float:
        text = _float(value)
        if _implicit_tag(text) != _FLOAT_TAG:
            raise _Unsupported
        out.append(f" {text}\n")
    else:
        return False
    return True


def _mapping(data: dict, indent: int, lead: str, out: list[str], sort_keys: bool) -> None:
    """A non-empty block mapping whose keys sit at `indent`; `lead` is written before the first key."""
    if indent > _MAX_INDENT:
        raise _Unsupported
    pad = " " * indent
    try:
        keys = sorted(data) if sort_keys else data
    except TypeError:  # keys of several types: PyYAML keeps the dict's order, but such keys are not str anyway
        raise _Unsupported from None
    if (len(data) >= _NAMES_MIN and next(iter(data.values())) is None and all(v is None for v in data.values())
            and _plain_names(keys := list(keys))):  # hosts: {name: null, ...}
        out.append(lead + f": null\n{pad}".join(keys) + ": null\n")
        return
    for key in keys:
        key_text = _key(key)
        out.append(lead + key_text)
        lead = pad
        value = data[key]
        if _scalar(value, indent + 2, indent + len(key_text), out):
            continue
        kind = type(value)
        if kind is dict:
            if value:
                out.append("\n")
                _mapping(value, indent + 2, " " * (indent + 2), out, sort_keys)
            else:
                out.append(" {}\n")
        elif kind is list or kind is tuple:
            if value:  # a sequence in a mapping is not indented (PyYAML's indentless block sequence)
                out.append("\n")
                _sequence(value, indent, pad, out, sort_keys)
            else:
                out.append(" []\n")
        else:
            raise _Unsupported


def _sequence(data: list | tuple, indent: int, lead: str, out: list[str], sort_keys: bool) -> None:
    """A non-empty block sequence whose dashes sit at `indent`; `lead` is written before the first one."""
    if indent > _MAX_INDENT:
        raise _Unsupported
    pad = " " * indent
    if len(data) >= _NAMES_MIN and type(data[0]) is str and _plain_names(data):  # - name, one per line
        out.append(lead + "- " + f"\n{pad}- ".join(data) + "\n")
        return
    for item in data:
        out.append(lead + "-")
        lead = pad
        if _scalar(item, indent + 2, indent + 1, out):
            continue
        kind = type(item)
        if kind is dict:
            if item:
                _mapping(item, indent + 2, " ", out, sort_keys)
            else:
                out.append(" {}\n")
        elif kind is list or kind is tuple:
            if item:
                _sequence(item, indent + 2, " ", out, sort_keys)
            else:
                out.append(" []\n")
        else:
            raise _Unsupported


def _document(data: Any, start: str, out: list[str], sort_keys: bool) -> None:
    kind = type(data)
    if kind is dict:
        if not data:
            out.append(start + ("{}\n" if not start else " {}\n"))
            return
        out.append(start and start + "\n")
        _mapping(data, 0, "", out, sort_keys)
    elif kind is list or kind is tuple:
        if not data:
            out.append(start + ("[]\n" if not start else " []\n"))
            return
        out.append(start and start + "\n")
        _sequence(data, 0, "", out, sort_keys)
    else:
        raise _Unsupported  # a bare scalar document (PyYAML ends it with `...`)


_CACHED = 200_000  # distinct keys and values kept (a 131,072-GPU bundle has ~30,000): a long-lived process's
# caches (a test run's) are cleared past it


def _emit(docs: list[Any], start: str, sort_keys: bool) -> str:
    if len(_VALUES) > _CACHED or len(_KEYS) > _CACHED:
        _VALUES.clear()
        _KEYS.clear()
    out: list[str] = []
    for doc in docs:
        _document(doc, start, out, sort_keys)
    # a literal block kept with `|+` as the stream's last scalar leaves it open-ended: PyYAML closes it
    if out and out[-1].startswith(" |") and "+" in out[-1].split("\n", 1)[0]:
        out.append("...\n")
    return "".join(out)


def dump_yaml(data: Any, sort_keys: bool = True) -> bytes:
    """`sort_keys=False` keeps the dicts' own (fixed) order, for a format whose readers care about it."""
    try:
        return _emit([data], "", sort_keys).encode()
    except _Unsupported:
        pass
    return yaml.dump(data, Dumper=_dumper([data]), sort_keys=sort_keys, default_flow_style=False,
                     allow_unicode=True, width=_WIDTH).encode()


def dump_yaml_all(docs: list[Any]) -> bytes:
    if docs:
        try:
            return _emit(docs, "---", True).encode()
        except _Unsupported:
            pass
    return yaml.dump_all(docs, Dumper=_dumper(docs), sort_keys=True, default_flow_style=False,
                         allow_unicode=True, width=_WIDTH, explicit_start=True).encode()


# json.dumps with an indent runs the json module's Python encoder, a generator per container and a yield per
# token: 0.1 s of a 131,072-GPU plan's checks.json and plan.json (1.4 MB). The same text built directly, for
# plain data (str keys; str, int, float, bool, None, lists, tuples), in the json module's format (indent=2,
# sort_keys, ensure_ascii=False: its C encode_basestring for strings); anything else goes to json.dumps.
_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _json_scalar(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value:
            return "NaN"
        if value == float("inf"):
            return "Infinity"
        if value == float("-inf"):
            return "-Infinity"
        return float.__repr__(value)
    raise _Unsupported


def _json(value: Any, level: int) -> str:
    kind = type(value)
    if kind is dict:
        if not value:
            return "{}"
        sep = ",\n" + "  " * (level + 1)
        parts = []
        shared: dict[int, str] = {}  # id -> text of a dict that is the value of several keys, written once
        for key in sorted(value):
            if type(key) is not str:
                raise _Unsupported
            item = value[key]
            kind = type(item)
            if kind is dict:  # alive in `value` while it is written, so its id stays its own
                text = shared.get(id(item))
                if text is None:
                    text = shared[id(item)] = _json(item, level + 1)
            else:
                text = (_encode_str(item) if kind is str else _json(item, level + 1) if kind is list or kind is tuple
                        else _json_scalar(item))
            parts.append(_encode_str(key) + ": " + text)
        return "{" + sep[1:] + sep.join(parts) + sep[1:-2] + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        sep = ",\n" + "  " * (level + 1)
        parts = [_encode_str(item) if type(item) is str else _json(item, level + 1) for item in value]
        return "[" + sep[1:] + sep.join(parts) + sep[1:-2] + "]"
    return _json_scalar(value)


def dump_json(data: Any) -> bytes:
    try:
        text = _json(data, 0)
    except (_Unsupported, TypeError, RecursionError):  # keys not all str, other types, a cycle: json's own
        return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    return (text + "\n").encode()
