"""What orchgen keeps in $XDG_CACHE_HOME/orchgen (compiled templates, parsed CRDs and chart defaults,
the CEL grammar) only saves time: a cold cache, a warm one and one that cannot be written give the same
bundle, the same findings and no extra output."""
from __future__ import annotations

import os
from pathlib import Path

from tests._consumers import reference_dir
from tests.support import run_cli


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_plan_and_validate_are_the_same_with_any_cache(tmp_path, example):
    unwritable = tmp_path / "not-a-folder"
    unwritable.write_text("a file where the cache folder would be\n")
    ref = str(reference_dir())
    runs = []
    for n, cache in enumerate([tmp_path / "cache", tmp_path / "cache", unwritable]):
        out = tmp_path / f"out{n}"
        env = {"XDG_CACHE_HOME": str(cache)}
        plan = run_cli(["plan", example("research-lab"), "-o", out, "-q"], env=env, capture_output=True, text=True)
        assert plan.returncode == 0, plan.stderr
        check = run_cli(["validate", out, "--crds", ref, "--chart-defaults", ref], env=env,
                        capture_output=True, text=True)
        runs.append((_tree(out), plan.stdout.replace(str(out), "OUT"), plan.stderr,
                     check.returncode, check.stdout.replace(str(out), "OUT"), check.stderr))
    assert runs[0] == runs[1] == runs[2]
    assert os.listdir(tmp_path / "cache" / "orchgen")  # the first run filled it
