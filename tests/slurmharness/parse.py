"""Parsers for what Slurm's client commands print: `scontrol -o show ...` and `scontrol show
topology` (Key=Value records), and the `-P` (parsable, `|`-separated) tables of sacctmgr, sshare
and sacct, plus TRES strings (`cpu=2,mem=1G,billing=64,gres/gpu=2`)."""
from __future__ import annotations

import re

from .hostlist import expand

# a key starts a new field only after a space: values such as `OS=Linux 6.1.0 #1 SMP` or
# `Reason=Low RealMemory [root@...]` contain spaces but no " Key=" inside
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w/.:]*)=(.*?)(?=\s+[A-Za-z][\w/.:]*=|\s*$)")


def fields(record: str) -> dict[str, str]:
    """`A=1 B=x y C=` -> {"A": "1", "B": "x y", "C": ""}."""
    return {m.group(1): m.group(2) for m in _FIELD.finditer(record.strip())}


def records(text: str) -> list[dict[str, str]]:
    return [fields(line) for line in text.splitlines() if "=" in line]


def _nullable(value: str | None) -> str:
    return "" if value in (None, "(null)", "N/A") else value


def nodes(text: str) -> dict[str, dict]:
    """`scontrol -o show nodes` -> name -> {state, gres, partitions, features, cpus, real_memory, reason, raw}."""
    result = {}
    for rec in records(text):
        result[rec["NodeName"]] = {
            "state": rec.get("State", ""),
            "gres": _nullable(rec.get("Gres")),
            "partitions": [p for p in _nullable(rec.get("Partitions")).split(",") if p],
            "features": [f for f in _nullable(rec.get("AvailableFeatures")).split(",") if f],
            "cpus": int(rec.get("CPUTot", 0) or 0),
            "real_memory": int(rec.get("RealMemory", 0) or 0),
            "reason": _nullable(rec.get("Reason")),
            "raw": rec,
        }
    return result


def partitions(text: str) -> dict[str, dict]:
    """`scontrol -o show partition` -> name -> {nodes, default, state, max_time, topology, raw}."""
    result = {}
    for rec in records(text):
        result[rec["PartitionName"]] = {
            "nodes": _nullable(rec.get("Nodes")),
            "default": rec.get("Default") == "YES",
            "state": rec.get("State", ""),
            "max_time": rec.get("MaxTime", ""),
            "topology": _nullable(rec.get("Topology")),  # 25.05+, partitions bound to topology.yaml
            "raw": rec,
        }
    return result


def switches(text: str) -> dict[str, dict]:
    """Tree topology lines (`SwitchName=leaf001 Level=0 LinkSpeed=1 Nodes=... Switches=...`)."""
    result = {}
    for rec in records(text):
        if "SwitchName" not in rec:
            continue
        result[rec["SwitchName"]] = {
            "level": int(rec.get("Level", 0)),
            "nodes": set(expand(_nullable(rec.get("Nodes")))),
            "switches": set(expand(_nullable(rec.get("Switches")))),
        }
    return result


def blocks(text: str) -> dict[str, dict]:
    """Block topology lines (`BlockName=b1 BlockIndex=0 Nodes=... BlockSize=18`), aggregated ones included."""
    result = {}
    for rec in records(text):
        name = rec.get("BlockName") or rec.get("AggregatedBlock")
        if not name:
            continue
        result[name] = {
            "nodes": set(expand(_nullable(rec.get("Nodes")))),
            "size": int(rec.get("BlockSize", 0) or 0),
            "aggregated": "AggregatedBlock" in rec,
        }
    return result


# ---------------------------------------------------------------- -P tables and TRES


def table(text: str) -> list[dict[str, str]]:
    """A `-P` table with its header line (sacctmgr -P, sshare -P, sacct -P) -> one dict per row."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0].split("|")
    return [dict(zip(header, ln.split("|"))) for ln in lines[1:]]


def tres(text: str) -> dict[str, str]:
    """`cpu=2,mem=1G,node=1,billing=64,gres/gpu=2` -> {"cpu": "2", ..., "gres/gpu": "2"}."""
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def _number(value: str) -> int | float | None:
    value = value.strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return None


_SSHARE_NUMBERS = {"RawShares": "raw_shares", "NormShares": "norm_shares", "RawUsage": "raw_usage",
                   "NormUsage": "norm_usage", "EffectvUsage": "effective_usage", "FairShare": "fairshare",
                   "LevelFS": "level_fs"}


def sshare(text: str) -> list[dict]:
    """`sshare -a -l -P` -> one dict per association, in tree order.

    sshare indents the Account column by tree depth (one space per level, in -P output too):
    `root` (level 0), ` nlp` (an account under root), `  nlp|alice` (a user of nlp). Each row gets
    account, user ("" for an account's own row), level, parent (the enclosing account; for a
    user row, its account), the numeric columns as int/float (None where empty; LevelFS may be
    inf), and raw, the row as printed.
    """
    rows: list[dict] = []
    accounts_at: dict[int, str] = {}  # level -> the account row last seen at that level
    for rec in table(text):
        printed = rec.get("Account", "")
        level = len(printed) - len(printed.lstrip(" "))
        account, user = printed.strip(), rec.get("User", "").strip()
        if user:
            parent = account
        else:
            accounts_at[level] = account
            parent = accounts_at.get(level - 1, "") if level else ""
        row = {"account": account, "user": user, "level": level, "parent": parent}
        row |= {key: _number(rec.get(column, "")) for column, key in _SSHARE_NUMBERS.items()}
        row["raw"] = rec
        rows.append(row)
    return rows
