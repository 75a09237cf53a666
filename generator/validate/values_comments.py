"""Chart defaults plus the keys they document only as comments.

Charts list optional keys as commented-out YAML under their parent (Soperator's
`externalDB: {enabled: false}` followed by `# host: ""`, `# passwordSecretKeyRef:` ...); the chart's
templates read them. `values.unknown_keys` ignores comments on purpose (a test of our renderers
wants the strict list), but `orchgen validate` checks bundles for users, and flagging a key the
chart documents would be a false alarm. So here the commented keys are added to the defaults as
free-form (null) slots, nested by their indentation.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from .values import load_defaults

_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.\-/]+|\"[^\"]+\"):(\s|$)")
_COMMENTED = re.compile(r"^(\s*)#( ?)(\s*)([A-Za-z0-9_.\-/]+):(\s|$)")
_ITEM = re.compile(r"^(\s*)-(\s|$)")


def commented_paths(text: str) -> list[tuple[str, ...]]:
    """Paths of keys that appear only as `# key:` lines, placed by indentation among the real keys."""
    stack: list[tuple[int, str | None]] = []  # (indent, key); None marks a list item
    out = []
    for line in text.splitlines():
        m = _COMMENTED.match(line)
        if m:
            indent, key, real = len(m.group(1)) + len(m.group(3)), m.group(4), False
        elif (m := _ITEM.match(line)) is not None:
            _pop(stack, len(m.group(1)))
            stack.append((len(m.group(1)), None))
            continue
        elif (m := _KEY.match(line)) is not None:
            indent, key, real = len(m.group(1)), m.group(2).strip('"'), True
        else:
            continue
        _pop(stack, indent)
        path = tuple(k for _, k in stack)
        if not real and None not in path:
            out.append((*path, key))  # type: ignore[arg-type]
        stack.append((indent, key))
    return out


def _pop(stack: list[tuple[int, str | None]], indent: int) -> None:
    while stack and stack[-1][0] >= indent:
        stack.pop()


def load_defaults_with_comments(path: str | Path) -> dict[str, Any]:
    """`values.load_defaults(path)` with every commented key added as a null (free-form) slot."""
    original = load_defaults(path)
    defaults = copy.deepcopy(original)
    for keys in commented_paths(Path(path).read_text(encoding="utf-8")):
        node: Any = defaults
        before: Any = original
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
            before = before.get(key) if isinstance(before, dict) else None
        # An empty map in the defaults is already free-form: commented examples below it must not
        # turn it into a closed list of keys.
        if isinstance(node, dict) and before and keys[-1] not in node:
            node[keys[-1]] = None
    return defaults
