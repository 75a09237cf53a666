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


MIN_WIDTH = 40  # below this, lines are wrapped at 40 anyway (a word per line helps no one)


def width() -> int:
    """The columns orchgen's text fits: COLUMNS when set (as rich and shutil honour it), else the terminal's
    width when stdout is one, else 80 (a pipe or a log: the same bytes wherever it runs)."""
    import shutil
    import sys

    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    try:
        if sys.stdout is not None and sys.stdout.isatty():
            return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)
    except (OSError, ValueError):
        pass
    return 80


def middle(text: str, room: int) -> str:
    """`text` cut to `room` characters in the middle with '…' (both ends of a path say the most)."""
    if len(text) <= room:
        return text
    if room < 3:
        return text[:room]
    head = (room - 1) // 2
    return text[:head] + "…" + text[len(text) - (room - 1 - head):]


def fold(line: str, room: int, indent: str = "", first_indent: str = "") -> list[str]:
    """`line` wrapped at word boundaries to `room` columns (continuations indented by `indent`); a word
    that alone is wider than a line (a long path) is cut in the middle with '…'."""
    import textwrap

    out = textwrap.wrap(line, room, initial_indent=first_indent, subsequent_indent=indent,
                        break_long_words=False, break_on_hyphens=False) or [first_indent.rstrip()]
    # a line still too wide holds a word wider than the room left after the indent (a long path): that
    # line without its indent where the path then fits whole, else the word cut in the middle
    return [part if len(part) <= room else part.lstrip(" ") if len(part.lstrip(" ")) <= room
            else _cut_words(part, room) for part in out]


def _cut_words(line: str, room: int) -> str:
    """A wrapped line still too wide (one long word): that word cut in the middle so the line fits."""
    lead = len(line) - len(line.lstrip(" "))
    words = line[lead:].split(" ")
    longest = max(range(len(words)), key=lambda i: len(words[i]))
    over = len(line) - room
    words[longest] = middle(words[longest], max(1, len(words[longest]) - over))
    return " " * lead + " ".join(words)
