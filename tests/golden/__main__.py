"""`python -m tests.golden [--update | --diff] [CASE ...]`: regenerate or compare the golden bundles.

Without a flag (or with --diff) it prints the unified diff of every case that differs and exits 1;
with --update it rewrites tests/golden/<case>/ from what `orchgen plan` writes now (stale files
removed) and lists what changed. Run from the repository root.
"""
from __future__ import annotations

import argparse
import sys

from . import CASES, differences, update


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the golden bundles")
    parser.add_argument("--diff", action="store_true", help="print the full diff (the default)")
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    args = parser.parse_args(argv)
    known = {c.name: c for c in CASES}
    unknown = [n for n in args.cases if n not in known]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(known)}")
    cases = [known[n] for n in args.cases] if args.cases else list(CASES)
    status = 0
    for case in cases:
        if args.update:
            for line in update(case):
                print(line)
            continue
        lines = differences(case, limit=10**9)
        if lines:
            status = 1
            print("\n".join(lines))
    if args.update:
        print(f"golden bundles up to date: {', '.join(c.name for c in cases)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
