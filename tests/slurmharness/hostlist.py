"""A tiny Slurm hostlist expander, private to the test harness.

The harness must not depend on the code it tests (generator/hostlist.py), so it carries its own
small expander: enough for `gpu-h100-[001-004]`, `leaf[001-002],spine`, `nvidia[0-7]` and
`n[1-3,7]x[a,b]`-style products. Zero padding of the lower bound is kept, as Slurm does.
"""
from __future__ import annotations

import itertools
import re

_BRACKET = re.compile(r"(\[[^\]]*\])")


def split_top(expr: str, sep: str = ",") -> list[str]:
    """Split `expr` on `sep` outside [...] brackets: "a[1-2],b" -> ["a[1-2]", "b"]."""
    parts, depth, current = [], 0, ""
    for ch in expr:
        depth += (ch == "[") - (ch == "]")
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current:
        parts.append(current)
    return parts


def _bracket_values(body: str) -> list[str]:
    """Values of one bracket body: "001-003,7" -> ["001", "002", "003", "7"]."""
    values: list[str] = []
    for item in body.split(","):
        if "-" in item:
            low, high = item.split("-", 1)
            width = len(low)
            values += [str(i).zfill(width) for i in range(int(low), int(high) + 1)]
        else:
            values.append(item)
    return values


def expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into names, in order ("(null)" and "" give [])."""
    expr = expr.strip()
    if expr in ("", "(null)"):
        return []
    names: list[str] = []
    for part in split_top(expr):
        choices = [
            _bracket_values(piece[1:-1]) if piece.startswith("[") else [piece]
            for piece in _BRACKET.split(part)
            if piece
        ]
        names += ["".join(combo) for combo in itertools.product(*choices)]
    return names
