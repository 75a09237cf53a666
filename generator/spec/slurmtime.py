"""Slurm time strings (slurm.conf(5) MaxTime, sbatch(1) --time): parse to minutes, write back.

Slurm reads "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
"days-hours:minutes" and "days-hours:minutes:seconds"; its resolution is one minute and seconds
round up. orchgen takes the same forms and refuses "UNLIMITED"/"INFINITE": a limit without an end
gives backfill nothing to plan with (a big job's expected start then lands a year away, issue 12).
"""
from __future__ import annotations

import re

# bf_window's maximum (slurm.conf(5) SchedulerParameters): backfill looks at most 30 days ahead, so
# a longer limit could never be covered by the backfill window.
MAX_MINUTES = 43_200

_FORMS = (
    (re.compile(r"^(\d+)$"), ("m",)),
    (re.compile(r"^(\d+):(\d{1,2})$"), ("m", "s")),
    (re.compile(r"^(\d+):(\d{1,2}):(\d{1,2})$"), ("h", "m", "s")),
    (re.compile(r"^(\d+)-(\d{1,2})$"), ("d", "h")),
    (re.compile(r"^(\d+)-(\d{1,2}):(\d{1,2})$"), ("d", "h", "m")),
    (re.compile(r"^(\d+)-(\d{1,2}):(\d{1,2}):(\d{1,2})$"), ("d", "h", "m", "s")),
)
FORMS_HELP = ("MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (Slurm's time formats), "
              "e.g. \"04:00:00\" or \"7-00:00:00\"")


def minutes(text: str) -> int:
    """Minutes of a Slurm time string (seconds round up, as Slurm does); ValueError if malformed,
    unlimited, zero or longer than MAX_MINUTES."""
    if not isinstance(text, str) or len(text) > 20:
        raise ValueError(f"{text!r} is not a Slurm time: write {FORMS_HELP}")
    if text.strip().upper() in ("UNLIMITED", "INFINITE"):
        raise ValueError(f"{text!r} has no end: backfill cannot plan around a job without a time limit; "
                         f"write {FORMS_HELP}")
    for pattern, units in _FORMS:
        m = pattern.match(text)
        if not m:
            continue
        parts = dict(zip(units, (int(g) for g in m.groups())))
        leading = units[0]  # the first field may be any size; the others stay within their unit
        for unit, top in (("h", 24), ("m", 60), ("s", 60)):
            if unit in parts and unit != leading and parts[unit] >= top:
                raise ValueError(f"{text!r}: {unit_name(unit)} must be below {top}")
        total_s = (parts.get("d", 0) * 1440 + parts.get("h", 0) * 60 + parts.get("m", 0)) * 60 + parts.get("s", 0)
        mins = -(-total_s // 60)
        if mins < 1:
            raise ValueError(f"{text!r} is no time at all: a time limit is at least one minute")
        if mins > MAX_MINUTES:
            raise ValueError(f"{text!r} is longer than 30 days, the longest backfill window Slurm has "
                             f"(bf_window={MAX_MINUTES}): backfill could not plan around such jobs")
        return mins
    raise ValueError(f"{text!r} is not a Slurm time: write {FORMS_HELP}")


def unit_name(unit: str) -> str:
    return {"h": "hours", "m": "minutes", "s": "seconds"}[unit]


def format_minutes(mins: int) -> str:
    """Slurm's own way of printing a limit: "HH:MM:SS" under a day, else "D-HH:MM:SS"."""
    days, rest = divmod(mins, 1440)
    hours, minute = divmod(rest, 60)
    clock = f"{hours:02d}:{minute:02d}:00"
    return f"{days}-{clock}" if days else clock
