"""Golden bundles (tests/golden/): each case's bundle, planned now, equals its stored copy byte for
byte. A failure prints the unified diff; after an intended change run
`.venv/bin/python -m tests.golden --update` and review `git diff tests/golden` like code."""
from __future__ import annotations

import pytest

from generator import providers as provider_table
from generator.bundle import MARKER
from generator.schedulers import SCHEDULERS

from .golden import CASES, GOLDEN, Case, differences, plan_of, stored

PLANES = {"slurm", "kubernetes", "k3s", "ray", "partitioned", "slinky", "soperator"}
PROVIDERS = set(provider_table.NAMES)  # a new provider needs a golden case too


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bundle_is_golden(case: Case):
    assert stored(case), f"no golden bundle for {case.name}: run `.venv/bin/python -m tests.golden --update`"
    lines = differences(case)
    assert not lines, (f"{case.name}: the bundle differs from tests/golden/{case.name} "
                       "(intended? `.venv/bin/python -m tests.golden --update`, then review the diff):\n"
                       + "\n".join(lines))


def test_golden_directories_are_the_cases():
    """No stale golden directory is left behind by a renamed or dropped case."""
    on_disk = {p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert on_disk == {c.name for c in CASES}
    assert not any((GOLDEN / c.name / MARKER).exists() for c in CASES)


def test_cases_cover_every_plane_provider_gitops_mode_and_scheduler():
    """The issue's promise: the cases together cover every plane, provider, delivery path and gang
    scheduler, read from the plans themselves (not from the case names)."""
    planes, providers, modes, schedulers = set(), set(), set(), set()
    for case in CASES:
        plan = plan_of(case)
        planes |= set(plan.planes) | {p.operator for p in plan.planes.values() if p.operator}
        planes |= {"ray" for w in plan.workloads if w.primary == "ray"} | ({plan.hybrid} - {None})
        providers.add(plan.platform.provider)
        modes.add(plan.gitops)
        schedulers.add(plan.gang_scheduler)
    assert PLANES <= planes, PLANES - planes
    assert PROVIDERS <= providers, PROVIDERS - providers
    assert {"none", "kustomize", "argocd", "flux"} <= modes
    assert set(SCHEDULERS) | {None} <= schedulers
