"""Helpers the test files share (one definition each): plans from an example, from Fleet data, or
from a workload.yaml written to a temporary directory, with options or a GitOps mode set on top.

Fixtures live in conftest.py; plain functions that tests import live here."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml


def _with_options(fleet, options: dict[str, Any]):
    if not options:
        return fleet
    return fleet.model_copy(update={"options": fleet.options.model_copy(update=options)})


def plan_of(source: Path | str | dict[str, Any], gitops: str | None = None, *, name: str = "fleet.yaml",
            **options: Any):
    """The Plan of a workload.yaml path (as `orchgen plan` loads it), or of Fleet data given as a dict
    (validated in memory, `name` standing for its file name). `options` are set on top of the file's
    `options:` (e.g. gang_scheduler="kai"); `gitops` replaces the plan's GitOps mode."""
    from generator import spec
    from generator.decide import make_plan
    from generator.spec.models import Fleet

    if isinstance(source, dict):
        plan = make_plan(_with_options(Fleet.model_validate(source), options), name)
    else:
        plan = make_plan(_with_options(spec.load(source), options), source)
    return dataclasses.replace(plan, gitops=gitops) if gitops else plan


def plan_of_file(tmp_path: Path, doc: dict[str, Any], name: str | None = "fleet.yaml"):
    """The Plan of `doc` written as tmp_path/<name> (None: <metadata.name>.yaml) and loaded from
    there, so that relative paths in it (fabric.from) resolve as a user's would."""
    path = tmp_path / (name or f"{doc['metadata']['name']}.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return plan_of(path)
