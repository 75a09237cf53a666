"""One reader of Slurm's configuration syntax (slurm.conf, gres.conf, topology.conf, cgroup.conf ...),
following Slurm's own parser, src/common/parse_config.c (SchedMD/slurm, unchanged in these rules
from 22.05 to 26.05):

- Lines: `_get_next_line` cuts each physical line at the first `#` preceded by an even number of
  backslashes (`_strip_comments`: `\\#` is a literal `#`), then joins it to the next one when it
  ends in an odd number of backslashes, trailing blanks ignored (`_strip_continuation`). The last
  backslash is dropped and NOTHING is put in its place: `Nodes=a[1-4],\\` + `b[1-2]` reads
  `Nodes=a[1-4],b[1-2]`. Only then are escapes removed from the joined line (`_strip_escapes`:
  `\\x` -> `x`, `\\\\` -> `\\`). A record's line number is its first physical line, as Slurm's
  "Parse error in file %s line %d" counts it.
- Pairs: `keyvalue_pattern`, `Key[op]=Value` with the key `[[:alnum:]_.]+`, blanks allowed around
  `=`, an optional operator `+ - * /` before it, and the value either `"quoted, with blanks"` or a
  run of non-blanks. Keys are case-insensitive (`_conf_hashtbl_lookup` uses strcasecmp); a record
  keeps each key as written and answers lookups in any case. Whatever the pattern cannot read is
  the record's `leftover`: Slurm reports it as "Parse error in file F line N".
- Repeated keys: a one-value key given twice keeps the last value ("specified more than once,
  latest value used", `_handle_common`); line keys (NodeName=, PartitionName=, SwitchName= ...)
  add one record each. `Config.last` and `Config.every` answer both ways.
- Include (`_parse_include_directive`): a line that starts, in column one, with `include` in any
  case and a blank; the file name runs to the next blank, `%c` in it is the ClusterName read so far
  (lower-cased); a relative name is resolved against the directory of the main file (slurm.conf),
  not of the including file (`get_extra_conf_path`); a name with `*` is not read: "Slurm does not
  support glob parsing" (26.05; 22.05 tries to stat the literal name for a minute). Slurm does not
  detect an Include loop; this reader refuses one.
- Bounds (not Slurm's, which has none): a site's files are input nobody reviewed, and a file that
  includes the next one twice, 20 levels deep, is a million reads. At most MAX_INCLUDED_FILES files
  are read, MAX_INCLUDE_DEPTH deep, MAX_TOTAL_LINES lines in all; past a bound, one problem says
  which, and nothing more is read.

Errors are values here (`Config.problems`, each with file and line): the importers turn them into
an OrchgenError, `orchgen validate` into findings.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

# parse_config.c keyvalue_pattern, with Python's [^\S] for [[:space:]]; tried quoted-first, as
# Slurm reads pmatch[5] (the quoted value) before pmatch[6] (the bare one).
_PAIR = re.compile(r'\s*([A-Za-z0-9_.]+)\s*([-*+/]?)=\s*(?:"([^"]*)"|(\S+))(?=\s|$)')
_INCLUDE = re.compile(r"include(?=\s)", re.IGNORECASE)
MAX_INCLUDED_FILES = 256  # files read through Include, each time it is read (a diamond reads one twice)
MAX_INCLUDE_DEPTH = 16  # Include inside Include ...: sites nest two or three deep
MAX_TOTAL_LINES = 250_000  # physical lines of the main file and its includes together


@dataclass(frozen=True)
class Pair:
    """One key=value of a Slurm configuration line, as written."""

    key: str  # as written
    value: str  # quotes removed
    op: str = ""  # "", "+", "-", "*" or "/" (the operator before `=`, e.g. `Features+=x`)


@dataclass(frozen=True)
class Record:
    """One logical line: its pairs, in order, and where it came from."""

    file: str
    line: int  # first physical line (1-based), as Slurm's error messages count
    lines: int  # physical lines it was joined from
    text: str  # the logical line: comments cut, continuations joined, escapes removed
    pairs: tuple[Pair, ...]
    leftover: str = ""  # what is not Key=Value (Slurm: "Parse error"); empty when the line is clean

    @property
    def kind(self) -> str:
        """The first key, lower-cased (`nodename`, `switchname`, `slurmctldhost` ...); "" if none."""
        return self.pairs[0].key.lower() if self.pairs else ""

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of `key` in any case; the last one when the line repeats it."""
        found = default
        for pair in self.pairs:
            if pair.key.lower() == key.lower():
                found = pair.value
        return found

    def params(self) -> dict[str, str]:
        """Lower-cased key -> value (the last of a repeated key)."""
        return {p.key.lower(): p.value for p in self.pairs}

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Problem:
    """Something wrong in an imported Slurm configuration file, at its line."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass
class Config:
    """Every record of a file and of the files it includes, in the order Slurm reads them."""

    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the main file, then each included one, as read

    def last(self, key: str) -> Record | None:
        """The record whose value of a one-value key Slurm keeps (the last one given)."""
        found = None
        for record in self.records:
            if record.kind == key.lower():
                found = record
        return found

    def every(self, key: str) -> list[Record]:
        """Each record that starts with `key` (NodeName, PartitionName, SlurmctldHost ...)."""
        return [r for r in self.records if r.kind == key.lower()]


def logical_lines(text: str) -> Iterator[tuple[int, int, str]]:
    """(first line, physical lines, logical line) of a file's text, as `_get_next_line` joins them.

    Blank logical lines are kept (Slurm skips them later); a continuation on the last line ends
    the record there, as fgets() running out does."""
    physical = text.splitlines(keepends=True)
    i = 0
    while i < len(physical):
        start, buf = i + 1, ""
        while i < len(physical):
            line = _strip_comment(physical[i])
            i += 1
            body, continued = _strip_continuation(line)
            buf += body
            if not continued:
                break
        yield start, i + 1 - start, _strip_escapes(buf)


def _strip_comment(line: str) -> str:
    """Cut at the first `#` preceded by an even number of backslashes (`_strip_comments`)."""
    backslashes = 0
    for i, ch in enumerate(line):
        if ch == "#" and backslashes % 2 == 0:
            return line[:i]
        backslashes = backslashes + 1 if ch == "\\" else 0
    return line


def _strip_continuation(line: str) -> tuple[str, bool]:
    """(the line without its continuing backslash, True) if it ends in an odd number of backslashes
    followed only by blanks (`_strip_continuation`); else (line, False)."""
    stripped = line.rstrip(" \t\r\n\v\f")
    count = len(stripped) - len(stripped.rstrip("\\"))
    if count % 2 == 1:
        return stripped[:-1], True
    return line, False


def _strip_escapes(line: str) -> str:
    """`\\x` -> `x` and `\\\\` -> `\\` (`_strip_escapes`); a lone final backslash is dropped."""
    return re.sub(r"\\(.?)", r"\1", line, flags=re.DOTALL)


def pairs_of(text: str) -> tuple[tuple[Pair, ...], str]:
    """The Key=Value pairs at the start of a logical line, and what is left (stripped) after them."""
    out, at = [], 0
    while m := _PAIR.match(text, at):
        quoted, bare = m.group(3), m.group(4)
        out.append(Pair(m.group(1), quoted if quoted is not None else bare, m.group(2)))
        at = m.end()
    return tuple(out), text[at:].strip()


def parse(text: str, file: str = "<text>") -> list[Record]:
    """The records of one file's text, Include lines kept as records (kind "include", the file name
    as the value of key `Include`); nothing is read from disk."""
    out = []
    for line, count, logical in logical_lines(text):
        if not logical.strip():
            continue
        include = _INCLUDE.match(logical)
        if include:
            name, _, rest = logical[include.end():].strip().partition(" ")
            out.append(Record(file, line, count, logical.rstrip("\r\n"), (Pair("Include", name),), rest.strip()))
            continue
        pairs, rest = pairs_of(logical)
        out.append(Record(file, line, count, logical.rstrip("\r\n"), pairs, rest))
    return out


def read(path: str | Path, text: str | None = None, follow_includes: bool = True,
         roots: Sequence[str | Path] | None = None) -> Config:
    """A file and (with follow_includes) every file it includes, read as slurmctld reads them.

    `text` stands for the main file's content when given (the file need not exist then). Problems
    (a missing or unreadable include, a glob, an Include loop, a line that is not Key=Value) are
    collected with their file and line; the records around them are still read. With `roots`
    (input someone else wrote: `orchgen import slurm`), an Include is read only when it resolves,
    symbolic links followed, inside the main file's folder or one of `roots`; one leading elsewhere
    (`Include /etc/shadow`) is a problem and is not read, so nothing of it reaches the output."""
    config = Config()
    main = Path(path)
    allowed = None if roots is None else [os.path.realpath(main.parent), *(os.path.realpath(r) for r in roots)]
    _read_into(config, main, text, main.parent, follow_includes, [],
               {"cluster": None, "allowed": allowed, "included": 0, "lines": 0, "stopped": False})
    return config


def _stop(config: Config, state: dict, file: str, line: int, message: str) -> None:
    """One problem for a bound crossed, and nothing more read."""
    config.problems.append(Problem(file, line, message))
    state["stopped"] = True


def _inside(path: Path, allowed: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == top or real.startswith(top.rstrip(os.sep) + os.sep) for top in allowed)


def _read_into(config: Config, path: Path, text: str | None, base: Path, follow: bool,
               stack: list[Path], state: dict) -> None:
    name = str(path)
    if text is None:
        from .inputs import Refused, read_bounded  # a FIFO or /dev/zero named by Include must not hang

        try:
            text = read_bounded(path).decode("utf-8", errors="replace")
        except OSError as exc:
            config.problems.append(Problem(str(stack[-1]) if stack else name, 0,
                                           f"cannot read {name}: {exc.strerror or exc}"))
            return
        except Refused as exc:
            config.problems.append(Problem(str(stack[-1]) if stack else name, 0, f"{name} {exc}"))
            return
    state["lines"] = state.get("lines", 0) + text.count("\n") + 1
    if state["lines"] > MAX_TOTAL_LINES:
        _stop(config, state, str(stack[-1]) if stack else name, 0,
              f"{name}: more than {MAX_TOTAL_LINES:,} lines in all with the files it is included with; not read")
        return
    config.files.append(name)
    here = [*stack, path.resolve() if path.exists() else path]
    for record in parse(text, name):
        if state.get("stopped"):
            return
        if record.leftover or not record.pairs:
            config.problems.append(Problem(name, record.line, "not Key=Value: Slurm's parse error (the line's text is not quoted: it may hold anything)"))
        if record.kind == "clustername":
            state["cluster"] = record.get("ClusterName")
        if record.kind != "include":
            config.records.append(record)
            continue
        if not follow:
            config.records.append(record)
            continue
        target = _include_path(config, record, base, state)
        if target is None:
            continue
        resolved = target.resolve() if target.exists() else target
        if resolved in here:
            chain = " -> ".join(p.name for p in [*here[here.index(resolved):], resolved])
            config.problems.append(Problem(name, record.line, f"Include loop: {chain}"))
            continue
        if state["allowed"] is not None and not _inside(target, state["allowed"]):
            # named as written, never where its links lead
            config.problems.append(Problem(name, record.line, f"Include {record.get('Include')}: outside the folder "
                                           "of the main file, not read (--input-root DIR allows another folder)"))
            continue
        if not target.exists():
            config.problems.append(Problem(name, record.line, f"Include: no such file {target}"))
            continue
        if len(here) > MAX_INCLUDE_DEPTH:
            _stop(config, state, name, record.line, f"Include {record.get('Include')}: nested deeper than "
                  f"{MAX_INCLUDE_DEPTH} files; not read")
            return
        state["included"] += 1
        if state["included"] > MAX_INCLUDED_FILES:
            _stop(config, state, name, record.line, f"Include {record.get('Include')}: more than "
                  f"{MAX_INCLUDED_FILES} files read through Include (a file included twice counts twice); not read")
            return
        _read_into(config, target, None, base, follow, here, state)


def _include_path(config: Config, record: Record, base: Path, state: dict) -> Path | None:
    raw = record.get("Include") or ""
    if not raw:
        config.problems.append(Problem(record.file, record.line, "Include without a file name"))
        return None
    if "%c" in raw:
        if not state["cluster"]:
            config.problems.append(Problem(record.file, record.line,
                                           "Include uses %c before any ClusterName line"))
            return None
        raw = raw.replace("%c", state["cluster"].lower())
    if "*" in raw:
        config.problems.append(Problem(record.file, record.line,
                                       f"Include {raw}: Slurm does not support glob parsing (the file is skipped)"))
        return None
    target = Path(raw)
    return target if target.is_absolute() else base / target
