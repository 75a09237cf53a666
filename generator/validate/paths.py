"""How a finding names a place inside an object: `spec.resourceGroups[0].flavors`. Shared by the
CRD schema, CEL and built-in checks so their findings read alike; imports nothing of orchgen."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any


def format_path(parts: Iterable[Any]) -> str:
    """`["spec", "resourceGroups", 0, "flavors"]` -> `spec.resourceGroups[0].flavors`."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_$@-]+", str(part)):
            text += f".{part}" if text else str(part)
        else:  # keys such as `nvidia.com/gpu` would be ambiguous after a dot
            text += f"[{json.dumps(str(part))}]"
    return text or "(root)"
