"""Issue 23: what a re-plan does to a running site, before it is written.

- the bundle does not depend on the input's path or file name;
- `orchgen plan -o out/ --diff` (text and JSON) and `orchgen validate NEW --against OLD` give the
  content diff and the impact class of every change on both planes;
- the Slurm classes come from generator/impact/slurm.py's table (applied to a real Slurm in
  tests/test_replan_impact_real.py); the Kubernetes ones render the real charts with `helm template`.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.conftest import EXAMPLES


def _bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_content_from_two_paths_and_two_names_gives_the_same_bundle(orchgen, tmp_path):
    for example in ("research-lab", "soperator-lab", "cloud-training"):
        (tmp_path / "a" / "deep").mkdir(parents=True, exist_ok=True)
        (tmp_path / "b").mkdir(exist_ok=True)
        first, second = tmp_path / "a" / "deep" / "workload.yaml", tmp_path / "b" / f"{example}-zq9x.yml"
        shutil.copy(EXAMPLES / f"{example}.yaml", first)
        shutil.copy(EXAMPLES / f"{example}.yaml", second)
        orchgen("plan", first, "-o", tmp_path / f"{example}-1", check=True)
        orchgen("plan", second.name, "-o", tmp_path / f"{example}-2", cwd=second.parent, check=True)
        one, two = _bytes(tmp_path / f"{example}-1"), _bytes(tmp_path / f"{example}-2")
        assert one == two, [p for p in one if one[p] != two.get(p)]
        text = b"".join(one.values()).decode()
        assert "zq9x" not in text and "/deep/" not in text
        # the header names the fleet and says to re-plan from its workload.yaml
        name = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())["metadata"]["name"]
        for path, data in one.items():
            if path.startswith("slurm/") and path.endswith(".conf") and b"Written by" in data:
                assert f"`orchgen plan workload.yaml` for fleet {name}".encode() in data, path
        assert "source" not in json.loads(one["plan.json"])
