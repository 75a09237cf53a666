"""Stable YAML and JSON output: sorted keys, no aliases, block strings, trailing newline."""
from __future__ import annotations

import json
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # every object spelt out: no &id001 anchors
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))


def dump_yaml(data: Any, sort_keys: bool = True) -> bytes:
    """`sort_keys=False` keeps the dicts' own (fixed) order, for a format whose readers care about it."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=sort_keys, default_flow_style=False,
                     allow_unicode=True, width=4096).encode()


def dump_yaml_all(docs: list[Any]) -> bytes:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=True, default_flow_style=False,
                         allow_unicode=True, width=4096, explicit_start=True).encode()


def dump_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
