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
    kwargs.setdefault("width", width())  # the same width as the plain lines (wrap) of every command
    return Console(**kwargs)


def width() -> int:
    """The width output is fitted to: COLUMNS when set, else the terminal's, else 80 (not a terminal: logs,
    pipes, CI), as shutil.get_terminal_size reads them; never below 40, where nothing fits anyway."""
    import shutil

    return max(shutil.get_terminal_size((80, 24)).columns, 40)


def wrap(line: str, indent: int = 4, columns: int | None = None) -> list[str]:
    """`line` as lines of at most `columns` (default: width()), continuation lines indented by `indent` more
    than the line's own indent. Words are kept whole where they fit; a longer one (a path, a URL) is split,
    so that no line is wider than the terminal."""
    import textwrap

    columns = columns or width()
    if len(line) <= columns:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    return textwrap.wrap(line, columns, subsequent_indent=" " * min(lead + indent, columns // 2),
                         break_long_words=True, break_on_hyphens=False, drop_whitespace=True) or [line]


def echo(line: str = "", indent: int = 4, err: bool = False) -> None:
    """click.echo of `line` wrapped to the terminal (wrap), a line of its own per output line."""
    import click

    for part in line.split("\n"):
        for piece in wrap(part, indent):
            click.echo(piece, err=err)


def fit_diff(text: str, columns: int | None = None) -> list[str]:
    """`plan --diff`'s text fitted to the terminal: the summary and impact lines above the first file's diff
    wrapped (wrap); a diff line longer than the terminal cut into pieces, each continuation starting with the
    line's own marker (+, - or space) and "↪", so that a piece is never read as a line of its own. The
    unbroken diff is in --format json (files[].diff)."""
    columns = columns or width()
    out: list[str] = []
    in_diff = False
    for line in text.splitlines():
        in_diff = in_diff or line.startswith("--- ")
        if not in_diff:
            out += wrap(line, 4, columns)
        elif len(line) <= columns:
            out.append(line)
        else:
            marker, rest, step = line[:1], line[1:], columns - 2
            out.append(marker + rest[:columns - 1])
            rest = rest[columns - 1:]
            while rest:
                out.append(f"{marker}↪{rest[:step]}")
                rest = rest[step:]
    return out
