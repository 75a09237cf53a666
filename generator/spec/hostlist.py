"""Slurm hostlist expressions: expand, compress and count.

A hostlist is a comma-separated list of host names and patterns ``prefix[ranges]suffix`` whose
ranges are ``N`` or ``N-M``; several brackets form a Cartesian product in Slurm's order (its
hostlist.c, checked with `scontrol show hostnames` on 22.05, 24.11 and 26.05): with two brackets the
first varies slowest (``r[1-2]n[1-2]`` -> r1n1,r1n2,r2n1,r2n2); with more, the last varies fastest,
then the first, the second ... and the one before the last slowest (``a[1-2]b[1-2]c[1-2]`` ->
a1b1c1,a1b1c2,a2b1c1,a2b1c2,a1b2c1,...), which is the order slurmctld defines the nodes of a
NodeName line in. As in Slurm, padding is the lower bound's width:
``[001-010]`` -> 001..010, ``[8-10]`` -> 8,9,10, ``[001-5]`` (accepted) -> 001..005. Order and
duplicates are kept. Where Slurm would guess, `expand` raises `HostlistError` with the 0-based
position (empty items, stray commas, whitespace, unbalanced brackets, bad or reversed ranges, more
than `MAX_HOSTS` names). Nested brackets are refused too: Slurm has no nesting; 22.05 refuses
``n[1-2,[3-4]]`` and 24.11+ expand only the innermost bracket into names that keep the outer one
(n[1-2,3], n[1-2,4]), which no node can be named. `count` checks alike, builds nothing and has no limit.

`compress` writes only what Slurm 22.05 (src/common/hostlist.c) reads back, and never sorts:
``expand(compress(names)) == names`` for any valid names (no whitespace, commas or brackets;
``compress([])`` is ``""``). Names split at their LAST digits (``a100n07`` = ``a100n`` + ``07``);
consecutive numbers with one prefix and padding form runs, adjacent runs share a bracket
(``gpu[001-004,009-012]``), a lone host stays plain (``gpu005``). Slurm 22.05 rejects text after
``]``, so unlike `expand` it keeps names with text after their digits plain (``gpu1-ib``); runs stop
at its MAX_RANGE (65,536 hosts), brackets at its MAX_RANGES, numbers at 19 digits (strtoul).
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from reprlib import repr as _short  # quotes a long range or name as '1-9999...9999'

__all__ = ["MAX_HOSTS", "HostlistError", "compress", "count", "expand"]

MAX_HOSTS = 1_000_000
_SLURM_MAX_RANGE = 64 * 1024  # hosts in one N-M range: Slurm 22.05 rejects more
_SLURM_MAX_RANGES = 256 * 1024  # ranges in one bracket: Slurm 22.05 aborts (fatal) on more
_MAX_DIGITS = 19  # in brackets: Slurm reads numbers with strtoul, and any 19 digits fit 64 bits

_SPACE = re.compile(r"\s")
_BRACKET = re.compile(r"[\[\]]")
_GROUP = re.compile(r"\[([^\]]*)\]")
_RANGE = re.compile(rf"[0-9]{{1,{_MAX_DIGITS}}}(?:-[0-9]{{1,{_MAX_DIGITS}}})?")  # not \d: int() takes "٣"
_BODY = re.compile(rf"{_RANGE.pattern}(?:,{_RANGE.pattern})*")
_NAME = re.compile(r"[^\s,\[\]]+")
_NOT_IN_NAME = re.compile(r"[\s\[\]]")  # commas are found by counting them
_DIGITS = "0123456789"


class HostlistError(ValueError):
    """A malformed hostlist expression or host name; the message says what and where."""


def _error(expr: str, pos: int, what: str) -> HostlistError:
    window = expr[max(0, pos - 30) : pos + 30]  # not all of it: hostlists can be megabytes long
    more = "..." * (pos > 30), "..." * (pos + 30 < len(expr))
    return HostlistError(f"{what} at position {pos} in hostlist {more[0]}{window!r}{more[1]}")


def _split(expr: str) -> list[str]:
    """The items of `expr` (split at commas outside brackets), once its shape is checked."""
    if not expr:
        raise HostlistError("empty hostlist expression")
    if m := _SPACE.search(expr):
        raise _error(expr, m.start(), "whitespace")
    open_at = -1
    for m in _BRACKET.finditer(expr):
        if m[0] == "]" and open_at < 0:
            raise _error(expr, m.start(), "']' without a matching '['")
        if m[0] == "[" and open_at >= 0:
            raise _error(expr, m.start(), f"nested '[' (the '[' at position {open_at} is still open; Slurm has "
                         "no nested brackets: 24.11+ would read names with a '[' in them, 22.05 refuses it)")
        open_at = m.start() if m[0] == "[" else -1
    if open_at >= 0:
        raise _error(expr, open_at, "'[' is never closed")
    if expr[0] == "," or expr[-1] == ",":
        at = 0 if expr[0] == "," else len(expr) - 1
        raise _error(expr, at, f"comma at the {'start' if at == 0 else 'end'}")
    # Brackets are balanced and flat, so top-level commas all lie between groups: split those
    # stretches with str.split (fast on 100k-name lists) and glue the groups back on.
    items, current = [], ""
    for i, piece in enumerate(re.split(r"(\[[^\]]*\])", expr)):
        if i % 2:  # a "[...]" group
            current += piece
            continue
        first, *rest = piece.split(",")
        current += first
        if rest:
            items += [current, *rest[:-1]]
            current = rest[-1]
    items.append(current)
    if "" in items:
        at = sum(len(item) + 1 for item in items[: items.index("")])
        raise _error(expr, at, "empty item (two commas in a row)")
    return items


def _ranges(expr: str, body: str, pos: int) -> list[str]:
    """Check a bracket body such as "001-004,9" (at `pos` in `expr`); return its ranges."""
    ranges = body.split(",")
    if "-" not in body and _BODY.fullmatch(body):
        return ranges  # lone numbers only (how compress writes scattered hosts): nothing to compare
    for part in ranges:
        if not _RANGE.fullmatch(part):
            what = f"invalid range {_short(part)} (expected N or N-M, 1-{_MAX_DIGITS} digits 0-9)" if part else "empty range"
            raise _error(expr, pos, what)
        lo, _, hi = part.partition("-")
        if hi and int(hi) < int(lo):
            raise _error(expr, pos, f"reversed range {_short(part)} ({int(lo)} > {int(hi)})")
        pos += len(part) + 1
    return ranges


def _walk(expr: str) -> Iterator[tuple[int, str, list[str], list[list[str]]]]:
    """Yield (position, item, texts, groups) per item; the texts surround its bracket groups."""
    pos = 0
    for item in _split(expr):
        texts, groups, last = [], [], 0
        for m in _GROUP.finditer(item) if "[" in item else ():  # plain names skip the regex
            texts.append(item[last : m.start()])
            groups.append(_ranges(expr, m[1], pos + m.start(1)))
            last = m.end()
        texts.append(item[last:])
        yield pos, item, texts, groups
        pos += len(item) + 1


def _size(group: list[str]) -> int:
    spans = (part.partition("-") for part in group if "-" in part)
    return len(group) + sum(int(hi) - int(lo) for lo, _, hi in spans)  # "N-M" adds M-N to its 1


def _numbers(group: list[str]) -> list[str]:
    numbers: list[str] = []
    for part in group:
        lo, dash, hi = part.partition("-")
        if not dash:
            numbers.append(part)  # a lone number renders as written: "007" stays "007"
        else:  # padded to the lower bound's width, as Slurm's "%0*lu"
            numbers += map(f"%0{len(lo)}d".__mod__, range(int(lo), int(hi) + 1))
    return numbers


def expand(expr: str) -> list[str]:
    """All host names of `expr`, in order, duplicates kept: "gpu-[001-002],cpu1" -> 3 names."""
    names: list[str] = []
    for pos, item, texts, groups in _walk(expr):
        size = math.prod(map(_size, groups)) if groups else 1  # arithmetic only
        if len(names) + size > MAX_HOSTS:  # before building anything: "n[0-999999999999]"
            raise _error(expr, pos, f"more than MAX_HOSTS={MAX_HOSTS:,} names ({len(names):,} "
                         f"before this item, which names {size:,})")
        if not groups:
            names.append(item)
            continue
        if len(groups) < 3:
            expanded = [texts[0]]
            for group, text in zip(groups, texts[1:]):
                numbers = _numbers(group)
                expanded = [head + number + text for head in expanded for number in numbers]
            names += expanded
            continue
        # Slurm's order for 3+ brackets: the one before the last slowest, down to the first, the last fastest
        order = [*range(len(groups) - 2, -1, -1), len(groups) - 1]
        numbers_ = [_numbers(g) for g in groups]
        for combo in itertools.product(*(numbers_[i] for i in order)):
            at = dict(zip(order, combo))
            names.append(texts[0] + "".join(at[i] + texts[i + 1] for i in range(len(groups))))
    return names


def count(expr: str) -> int:
    """len(expand(expr)) without building the names; checks alike but applies no MAX_HOSTS."""
    return sum(math.prod(map(_size, groups)) for _, _, _, groups in _walk(expr))


def _check_names(names: list[str]) -> None:
    # A few passes in C over all names (join, search, count), not one regex call per name.
    joined = ",".join(names)  # TypeError for a non-str
    if names and ("" in names or _NOT_IN_NAME.search(joined) or joined.count(",") != len(names) - 1):
        bad = next(name for name in names if not _NAME.fullmatch(name))
        raise HostlistError(f"invalid host name {_short(bad)} at index {names.index(bad)}: "
                            "a name is non-empty and has no whitespace, commas or brackets")


def _run(first: str, lo: int, hi: int) -> str:
    # The upper bound is padded like the lower one, though Slurm reads only the lower's width.
    return first if lo == hi else f"{first}-{str(hi).zfill(len(first))}"


def _group(stem: str, runs: list[str], first: str, lo: int, hi: int) -> str:
    """Write a group from its finished runs and its open last run (first, lo, hi)."""
    if not runs and lo == hi:
        return stem + first  # a lone host stays plain: "gpu005", not "gpu[005]"
    return f"{stem}[{','.join([*runs, _run(first, lo, hi)])}]"


def compress(names: Iterable[str]) -> str:
    """The hostlist Slurm 22.05 (and `expand`) reads back as exactly `names`, in their order."""
    return _compress(tuple(names))


@lru_cache(maxsize=256)
def _compress(names_: tuple[str, ...]) -> str:
    """compress, once per list of names: a plan's renderers ask for the same pools' and planes' hostlists
    many times (cProfile, 16,384 nodes: 1,862 calls, ~8% of `plan`)."""
    names = list(names_)
    _check_names(names)
    out: list[str] = []
    # The open group: its prefix (None: none open) and its finished runs. Runs are kept as
    # strings: 100k small lists or tuples would wake the cyclic GC over and over.
    stem: str | None = None
    runs: list[str] = []
    first, lo, hi, stop = "", 0, 0, 0  # the open run: its lower bound as written, its bounds, its limit
    wmin = wmax = 0  # the zero-padding widths that render every number of the open group
    expect = None  # the name that extends the open run, once it has two names
    for name in names:
        if name == expect:  # fast path: real host lists are mostly long consecutive runs
            hi += 1
            expect = stem + str(hi + 1).zfill(len(first)) if hi < stop else None
            continue
        head = name.rstrip(_DIGITS)
        digits = name[len(head) :]
        ndigits = len(digits)
        if not 0 < ndigits <= _MAX_DIGITS:  # no trailing number (or text after it): write it plainly
            if stem is not None:
                out.append(_group(stem, runs, first, lo, hi))
            out.append(name)
            stem = expect = None
            continue
        n = int(digits)
        # "007" renders only at width 3, "42" at widths 1-2. A group keeps the widths that render all
        # of its numbers, so "n[01-05,10]" is one group but "n5,n007" are two.
        low = ndigits if digits[0] == "0" and ndigits > 1 else 1
        if head == stem and wmin <= ndigits and low <= wmax and len(runs) < _SLURM_MAX_RANGES - 1:
            wmin = low if low > wmin else wmin  # not max()/min(): this line runs per scattered host
            wmax = ndigits if ndigits < wmax else wmax
            # A width shared with the run renders n as the run would, so n == hi + 1 extends it.
            if n == hi + 1 and n - lo < _SLURM_MAX_RANGE:
                hi = n
                stop = min(lo + _SLURM_MAX_RANGE, 10**_MAX_DIGITS) - 1  # where Slurm's limits end it
                expect = stem + str(n + 1).zfill(len(first)) if n < stop else None
                continue
            runs.append(first if lo == hi else _run(first, lo, hi))
        else:
            if stem is not None:
                out.append(_group(stem, runs, first, lo, hi))
            stem, runs, wmin, wmax = head, [], low, ndigits
        first, lo, hi = digits, n, n
        expect = None  # built once the run grows: most lone numbers stay lone
    if stem is not None:
        out.append(_group(stem, runs, first, lo, hi))
    return ",".join(out)
