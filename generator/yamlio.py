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


def dump_yaml(data: Any, sort_keys: bool = True) -> bytes:
    """`sort_keys=False` keeps the dicts' own (fixed) order, for a format whose readers care about it."""
    return yaml.dump(data, Dumper=_dumper([data]), sort_keys=sort_keys, default_flow_style=False,
                     allow_unicode=True, width=4096).encode()


def dump_yaml_all(docs: list[Any]) -> bytes:
    return yaml.dump_all(docs, Dumper=_dumper(docs), sort_keys=True, default_flow_style=False,
                         allow_unicode=True, width=4096, explicit_start=True).encode()


def dump_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
