"""The `orchgen` command's entry point (pyproject's [project.scripts]): signals are trapped before the
CLI's modules are imported, so a Ctrl-C, a CI runner's SIGTERM or a closed terminal's SIGHUP at any
moment ends orchgen the one way every other failure does: each cleanup on the way out runs (a staged
bundle, a temporary file), then one line on stderr and exit 2 (issue 40). Before, SIGTERM and SIGHUP
killed it without a word, and a Ctrl-C while Python imported the CLI printed a traceback.

Kept free of imports beyond a few of the standard library's: it runs before everything."""
from __future__ import annotations

from .signals import Stopped, stopped, trap


def main() -> None:
    trap()
    try:
        from .cli import main as cli_main  # the CLI's imports happen here, signals trapped
    except Stopped as exc:
        stopped(exc)
    try:
        cli_main()
    except Stopped as exc:  # a signal inside cli.main's own handling of one
        stopped(exc)
