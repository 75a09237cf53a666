"""The one error type of orchgen's core.

The core never prints and never exits: it raises `OrchgenError` carrying where the problem is
(file, line, field) and what it is. Only `generator.cli` turns it into one line on stderr and an
exit code.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    DIFF = 1  # --check found differences; validate found errors
    ERROR = 2  # bad input or refused operation


@dataclass
class OrchgenError(Exception):
    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        # one line, always: a multi-line message would break `file:line: message` tooling
        return " ".join(f"{where}{field}{self.message}".split("\n"))
