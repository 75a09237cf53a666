"""The one way orchgen builds a rich Console: NO_COLOR (https://no-color.org) honoured everywhere.

With NO_COLOR set and not empty, a console writes no ANSI styling at all (no colour, and no bold or
italic either: `color_system=None`), whatever the terminal; without it, rich decides as it does."""
from __future__ import annotations

import os


def no_color() -> bool:
    return os.environ.get("NO_COLOR", "") != ""


def console(**kwargs):
    from rich.console import Console

    if no_color():
        kwargs.update(no_color=True, color_system=None)
    return Console(**kwargs)
