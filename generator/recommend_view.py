"""`orchgen recommend`'s table, fitted to the terminal: a bordered table with the reasons wrapped in
their cell where the terminal is wide enough, else one block per workload (rich wraps both to the
console's width, so no line is longer than the terminal)."""
from __future__ import annotations

import textwrap

from rich.console import Group
from rich.table import Table
from rich.text import Text

# Below this width six bordered columns leave the reasons a column too narrow to read.
TABLE_MIN_WIDTH = 110


def _cells(w) -> tuple[str, str, str, str, str]:
    primary = w.primary + (f" on {w.ray_host}" if w.ray_host else "") + (" (hybrid)" if w.hybrid else "")
    plane = w.plane + (" (pinned)" if w.pinned else "")
    return w.name, primary, plane, "REQUIRED" if w.gang_scheduler_required else "-", ", ".join(w.addons) or "-"


def workloads_view(workloads, name: str, width: int):
    if width >= TABLE_MIN_WIDTH:
        table = Table(title=f"{name}: per workload", show_lines=True)
        for col in ("workload", "primary", "plane", "gang", "add-ons"):
            table.add_column(col, overflow="fold")
        table.add_column("why", overflow="fold", ratio=1)
        for w in workloads:
            table.add_row(*_cells(w), "\n".join(w.reasons))
        return table
    parts: list = [Text(f"{name}: per workload", style="bold")]
    for w in workloads:
        wname, primary, plane, gang, addons = _cells(w)
        parts.append(Text(""))
        parts.append(Text.assemble((wname, "bold"), f": {primary}; plane {plane}; gang scheduler "
                                   f"{'REQUIRED' if gang == 'REQUIRED' else 'not needed'}"))
        parts.append(Text(hanging(f"  add-ons: {addons}", width, 4)))
        for reason in w.reasons:
            parts.append(Text(hanging(f"  - {reason}", width, 4)))
    parts.append(Text(""))
    return Group(*parts)


def hanging(line: str, width: int, indent: int) -> str:
    """`line` wrapped to `width`, its continuation lines indented by `indent` (a hostlist or a long
    label is split only where nothing else fits)."""
    return "\n".join(textwrap.wrap(line, max(width, indent + 20), subsequent_indent=" " * indent,
                                   break_on_hyphens=False)) or line
