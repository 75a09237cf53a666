"""Check Helm values we generate against a chart's default values.yaml.

Most charts ship no values.schema.json, so the default values are the only machine-readable list
of the keys a chart reads. A key the defaults do not contain is almost always a typo or a key from
another chart version: Helm would silently ignore it. Commented-out keys in values.yaml do not exist
for this check, on purpose.

Rules of `unknown_keys`:
- recurse through dicts; a key missing from the defaults' dict is unknown;
- defaults of `{}` or null at a key mean a free-form map (nodeSelector, annotations, env maps ...):
  anything below is accepted; so is anything below a list default (tolerations, env, args);
- below a key named in `free_form` (default: Kubernetes-typed fields such as `resources`,
  `nodeSelector`, `affinity`), anything is accepted even when the defaults fill it in, because
  `resources.limits["nvidia.com/gpu"]` or an extra nodeSelector label are legitimate additions;
- a null value is always accepted (in Helm it deletes the default);
- type mismatches are reported: a dict where the default is a scalar or list, and a scalar or list
  where the default is a dict.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from .parsed import load_yaml

__all__ = ["unknown_keys", "load_defaults", "FREE_FORM_KEYS"]

# Keys whose contents are Kubernetes API structures or label maps, never chart-specific settings.
FREE_FORM_KEYS = frozenset({
    "nodeSelector", "affinity", "resources", "annotations", "labels", "podAnnotations", "podLabels",
    "securityContext", "podSecurityContext", "containerSecurityContext",
})


def load_defaults(path: str | Path) -> dict[str, Any]:
    """A chart's default values.yaml as a dict ({} for an empty file)."""
    data = load_yaml(Path(path).read_text(encoding="utf-8"))  # parsed once per content (validate.parsed)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: values must be a mapping, got {type(data).__name__}")
    return _with_subcharts(data, Path(path).resolve().parent / "charts")


def _with_subcharts(data: dict[str, Any], charts: Path) -> dict[str, Any]:
    """Helm's view of a parent chart's values: each subchart under charts/<name>/ reads the key
    <name>, its own defaults overridden by the parent's (kube-prometheus-stack's `grafana.dashboards`
    is a key of its grafana subchart, not of its own values.yaml)."""
    if not charts.is_dir():
        return data
    for sub in sorted(charts.iterdir()):
        values = sub / "values.yaml"
        if not values.is_file() or (sub.name in data and not isinstance(data[sub.name], dict)):
            continue
        data[sub.name] = _merge(load_defaults(values), data.get(sub.name) or {})
    return data


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _key(path: str, key: Any) -> str:
    key = str(key)
    if re.fullmatch(r"[A-Za-z0-9_$@-]+", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"  # e.g. nodeSelector["kubernetes.io/os"]


def _kind(value: Any) -> str:
    return "dict" if isinstance(value, dict) else "list" if isinstance(value, list) else "scalar"


def unknown_keys(values: dict[str, Any], defaults: dict[str, Any],
                 free_form: Iterable[str] = FREE_FORM_KEYS) -> list[str]:
    """Sorted `path: message` strings for every key in `values` that the chart defaults do not have."""
    free = frozenset(free_form)
    errors: list[tuple[str, str]] = []  # (path, message), sorted by path at the end

    def walk(value: dict[str, Any], default: dict[str, Any], path: str) -> None:
        for key, sub in value.items():
            where = _key(path, key)
            if key not in default:
                errors.append((where, "unknown key"))
                continue
            expected = default[key]
            if sub is None or expected is None:
                continue  # null deletes a default in Helm; a null default is a free-form slot
            if isinstance(expected, dict):
                if not isinstance(sub, dict):
                    errors.append((where, f"type mismatch: expected dict, got {_kind(sub)}"))
                elif expected and str(key) not in free:
                    walk(sub, expected, where)
            elif isinstance(sub, dict):
                errors.append((where, f"type mismatch: expected {_kind(expected)}, got dict"))
            # a list default accepts any list; a scalar default any scalar (or list: charts use ""
            # as a placeholder for things templates also accept as lists)

    walk(values, defaults, "")
    return [f"{path}: {message}" for path, message in sorted(errors)]
