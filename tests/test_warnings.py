"""Honest demand: what the plan does that the input did not ask for, or cannot keep, is said.

Each warning is one stderr line `orchgen: warning: file:line: field: message` from `plan` and
`recommend`, is kept in plan.json's "warnings", and under `options.strict: true` refuses instead
(exit 2, one line, nothing written). Plus `recommend` on a fleet that cannot be planned.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from generator.decide.quotas import guarantee, largest_remainder

from .test_fleet_plan import plan_of


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def strict(text: str) -> str:
    return text + "options: {strict: true}\n"


def check_warning(tmp_path, orchgen, text: str, field: str, needle: str, message: str) -> dict:
    """The warning as printed, in plan.json, and as a refusal under options.strict. Returns plan.json."""
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    proc = orchgen("plan", path, "-o", out)
    assert proc.returncode == 0, proc.stderr
    where = f"{path}:{line_of(text, needle)}: {field}: "
    warned = [line for line in proc.stderr.splitlines() if line.startswith(f"orchgen: warning: {where}")]
    assert len(warned) == 1 and message in warned[0], proc.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert any(w.startswith(f"{field}: ") and message in w for w in plan["warnings"]), plan.get("warnings")
    rec = orchgen("recommend", path)
    assert rec.returncode == 0 and f"orchgen: warning: {where}" in rec.stderr

    path.write_text(strict(text))
    refused = orchgen("plan", path, "-o", tmp_path / "strict")
    assert refused.returncode == 2
    # the first warning refuses: the same line, as an error
    first = proc.stderr.splitlines()[0].removeprefix("orchgen: warning: ")
    assert refused.stderr.strip() == f"orchgen: {first} (options.strict: true refuses what would otherwise be a warning)"
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "strict").exists()
    return plan


# ---- a workload without a tenant ---------------------------------------------------------------

TENANTS = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: tenants}
fleet:
  fabric: {kind: ethernet, nodes_per_leaf: 8}
  pools:
    - {name: l40s, nodes: 8, gpu: {type: l40s, count: 4}, cpus: 64, memory_gib: 256}
tenants:
  - {name: search, share: 2}
  - {name: ads, share: 1}
workloads:
  - {name: ranker, long_lived_services: true, tenant: search, gpus: 8}
  - {name: nightly-batch, gpus: 4}
"""


def test_workload_without_a_tenant_warns_when_there_are_several(tmp_path, orchgen):
    plan = check_warning(tmp_path, orchgen, TENANTS, "workloads[1].tenant", "name: nightly-batch",
                         "nightly-batch names no tenant and none is marked `default: true`, so it goes to "
                         "'search', the first of 2 tenants")
    assert plan["workloads"][1]["tenant"] == "search"


def test_the_default_tenant_takes_it_without_a_word(tmp_path, orchgen):
    path = tmp_path / "fleet.yaml"
    path.write_text(TENANTS.replace("{name: ads, share: 1}", "{name: ads, share: 1, default: true}"))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["workloads"][1]["tenant"] == "ads" and "warnings" not in plan


def test_one_tenant_takes_it_without_a_word(tmp_path, orchgen):
    path = tmp_path / "fleet.yaml"
    path.write_text(TENANTS.replace("  - {name: ads, share: 1}\n", ""))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def test_two_default_tenants_are_refused(tmp_path, orchgen):
    text = TENANTS.replace("share: 2}", "share: 2, default: true}").replace("share: 1}", "share: 1, default: true}")
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"orchgen: {path}:10: tenants[1].default: a second default tenant ('search' "
                                  "is marked default: true already)"), proc.stderr


# ---- starters sharing a node -------------------------------------------------------------------

EDGE = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: edge}
fleet:
  edge_or_dev: true
  fabric: {kind: ethernet, nodes_per_leaf: 1}
  pools:
    - name: box
      nodes: 1
      gpu: {type: l4, count: 1}
      cpus: 16
      memory_gib: 64
workloads:
  - {name: vision-pipeline, python_native_pipeline: true, gpus: 1}
  - {name: ci, gpus: 1}
"""


def test_edge_box_starters_that_cannot_run_together(tmp_path, orchgen):
    check_warning(tmp_path, orchgen, EDGE, "fleet.pools[0].nodes", "      nodes: 1",
                  "the k3s plane's 1 node of pool box has 1 GPU, 16 CPUs, 64 GiB of memory, but the starters "
                  "of its workloads here ask for 2 GPUs, 26 CPUs, 110 GiB of memory together "
                  "(vision-pipeline 1 GPU, 14 CPUs, 59 GiB of memory; ci 1 GPU, 12 CPUs, 51 GiB of memory): "
                  "they cannot all run at once")


def test_the_warning_counts_what_the_manifests_ask_for(tmp_path):
    """The sizes in the warning are the Plan's, the ones the RayCluster and the Job are rendered with."""
    import yaml

    from generator.render import render

    path = tmp_path / "edge.yaml"
    path.write_text(EDGE)
    plan = plan_of(path)
    files = render(plan)
    cpus = gpus = 0
    for name in ("kubernetes/manifests/40-ray.yaml", "kubernetes/workloads/ci.yaml"):
        assert name in files, sorted(files)
        for doc in yaml.safe_load_all(files[name]):
            specs = ([doc["spec"]["headGroupSpec"]] + doc["spec"]["workerGroupSpecs"] if doc["kind"] == "RayCluster"
                     else [doc["spec"]])
            for spec in specs:
                # an autoscaling RayCluster's workers (issue 34) count at their most, as the warning counts them
                n = spec.get("maxReplicas", spec.get("replicas", spec.get("parallelism", 1)))
                for c in spec["template"]["spec"]["containers"]:
                    cpus += n * int(c["resources"]["requests"]["cpu"])
                    gpus += n * int(c["resources"]["requests"].get("nvidia.com/gpu", 0))
    assert (gpus, cpus) == (2, 26)


def test_edge_box_with_one_starter_is_quiet(tmp_path, orchgen):
    path = tmp_path / "fleet.yaml"
    path.write_text(EDGE.replace("  - {name: ci, gpus: 1}\n", ""))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


# ---- declared demand beyond the pool on Slurm ----------------------------------------------------

SLURM = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: batch}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 4}
  pools:
    - name: h100
      nodes: 4
      gpu: {type: h100, count: 8}
workloads:
  - {name: pretrain, nodes: 4, tightly_coupled: true, gpus: 32}
  - {name: sweep, nodes: 2, tightly_coupled: true, gpus: 16}
"""


def test_slurm_demand_beyond_the_pool(tmp_path, orchgen):
    check_warning(tmp_path, orchgen, SLURM, "fleet.pools[0].nodes", "      nodes: 4",
                  "the slurm plane's 4 nodes of pool h100 have 32 GPUs, but its workloads here declare 48 GPUs "
                  "together (pretrain 32, sweep 16): they queue behind one another")


# ---- services beyond their tenant's quota -------------------------------------------------------

def test_tenant_guarantee_follows_its_services_where_the_shares_allow(example):
    """inference-platform: assistant's chat-serving asks 32 GPUs, its share alone gives 24."""
    plan = plan_of(example("inference-platform"))
    quota = {t.name: t.quotas["l40s"].gpus for t in plan.tenants}
    assert quota == {"search": 48, "assistant": 32, "ads": 16}
    assert sum(quota.values()) == 96
    assert not plan.warnings
    (reason,) = [r for r in plan.reasons if r.startswith("tenant quotas on pool l40s")]
    assert reason.endswith("By its services' demand: search 48 (by share alone 48), assistant 32 (by share "
                           "alone 24); by share: ads 16")


SERVICES = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: services}
fleet:
  fabric: {kind: ethernet, nodes_per_leaf: 8}
  pools:
    - {name: l40s, nodes: 8, gpu: {type: l40s, count: 4}, cpus: 64, memory_gib: 256}
tenants:
  - {name: search, share: 1}
  - {name: chat, share: 1}
workloads:
  - {name: ranker, long_lived_services: true, tenant: search, gpus: 8}
  - name: chat-serving
    long_lived_services: true
    tenant: chat
    gpus: 28
"""


def test_services_beyond_the_pool_fall_back_to_shares_and_warn(tmp_path, orchgen):
    plan = check_warning(tmp_path, orchgen, SERVICES, "workloads[1].gpus", "    gpus: 28",
                         "tenant chat's services ask for 28 GPUs on pool l40s (chat-serving 28) but its nominal "
                         "quota there is 16: the services of all tenants ask for 36 of the pool's 32 GPUs, so "
                         "the shares alone size the quotas")
    assert [t["quotas"]["l40s"]["gpus"] for t in plan["tenants"]] == [16, 16]


def test_services_that_fit_get_their_demand(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(SERVICES.replace("gpus: 28", "gpus: 20"))
    plan = plan_of(path)
    assert [t.quotas["l40s"].gpus for t in plan.tenants] == [12, 20] and not plan.warnings


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2000), st.lists(st.tuples(st.integers(1, 1_000_000), st.integers(0, 500)), min_size=1,
                                      max_size=8))
def test_guarantee_adds_up_and_covers_the_floors_that_fit(total, tenants):
    shares, floors = [s for s, _ in tenants], [f for _, f in tenants]
    quotas, won = guarantee(total, shares, floors)
    assert sum(quotas) == total and min(quotas) >= 0
    if sum(floors) <= total:
        assert all(q >= f for q, f in zip(quotas, floors))
        # a tenant not held up by its floor gets no less than by share alone... of what is left
        assert all(q == f for q, f, w in zip(quotas, floors, won) if w)
    else:
        assert quotas == largest_remainder(total, shares) and not any(won)


# ---- recommend on a fleet that cannot be planned -------------------------------------------------

# Slurm's ClusterName takes at most 40 characters: a fleet error whatever the split.
INFEASIBLE = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: a-university-cluster-name-over-forty-chars}
fleet:
  bare_metal: true
  fabric: {kind: infiniband, nodes_per_leaf: 16}
  pools:
    - {name: a100, nodes: 8, gpu: {type: a100, count: 8}}
workloads:
  - {name: ddp-training, nodes: 2, tightly_coupled: true, pool: a100}
  - {name: notebooks, long_lived_services: true, pool: a100, gpus: 32, plane: kubernetes}
"""
# and one that only the split refuses (a named pool given wholly to the other plane) in test_placement.py


def test_recommend_on_an_infeasible_fleet_shows_the_workloads_then_the_error(tmp_path, orchgen):
    path = tmp_path / "uni.yaml"
    path.write_text(INFEASIBLE)
    proc = orchgen("recommend", path)
    assert proc.returncode == 2
    for text in ("ddp-training", "notebooks", "coupled-multinode-bare-metal", "kubernetes (pinned)"):
        assert text in proc.stdout
    assert proc.stderr.startswith(f"orchgen: {path}:3: metadata.name: ")
    assert len(proc.stderr.strip().splitlines()) == 1

    proc = orchgen("recommend", path, "--format", "json")
    assert proc.returncode == 2 and "metadata.name" in proc.stderr
    data = json.loads(proc.stdout)
    assert data["fleet"] is None
    assert [(w["name"], w["primary"], w["plane"], w["pinned"]) for w in data["workloads"]] == [
        ("ddp-training", "slurm", "slurm", False), ("notebooks", "kubernetes", "kubernetes", True)]


def test_recommend_under_strict_shows_the_workloads_then_refuses(tmp_path, orchgen):
    path = tmp_path / "fleet.yaml"
    path.write_text(strict(TENANTS))
    proc = orchgen("recommend", path)
    assert proc.returncode == 2 and "nightly-batch" in proc.stdout
    assert proc.stderr.startswith(f"orchgen: {path}:13: workloads[1].tenant: ")


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_recommend_on_a_plannable_fleet_is_unchanged(orchgen, example, fmt):
    proc = orchgen("recommend", example("research-lab"), "--format", fmt)
    assert proc.returncode == 0 and not proc.stderr
    if fmt == "json":
        assert json.loads(proc.stdout)["fleet"]["hybrid"] == "partitioned"


# ---- a Slurm release no OS of the bring-up packages ------------------------------------------------

BRINGUP_OS = """\
apiVersion: orchgen/v1alpha1
kind: Fleet
metadata: {name: bringup-os}
fleet:
  bare_metal: true
  slurm: {controllers: [ctl1]}
  fabric: {kind: infiniband, nodes_per_leaf: 4}
  pools:
    - {name: h100, nodes: 4, gpu: {type: h100, count: 8}, cpus: 96, memory_gib: 1024}
workloads:
  - {name: pretrain, nodes: 4, tightly_coupled: true, gpus: 32}
options:
  slurm_version: "RELEASE"
"""
BRINGUP_OS_LINE = ("options.slurm_version: no OS of the bring-up packages Slurm 25.11 (debian-12: 22.05, debian-13: "
                   "24.11, ubuntu-24.04: 23.11); the bring-up refuses such hosts: set slurm_version to one of those "
                   "or install Slurm 25.11 packages yourself")


def test_plan_says_no_os_of_the_bringup_packages_the_release(tmp_path, orchgen):
    path = tmp_path / "fleet.yaml"
    path.write_text(BRINGUP_OS.replace("RELEASE", "25.11"))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr  # a warning, not an error: other releases are planned on purpose
    warned = [ln for ln in proc.stderr.splitlines() if "bring-up packages" in ln]
    assert warned == [f"orchgen: warning: {path}:{line_of(path.read_text(), 'slurm_version')}: {BRINGUP_OS_LINE}"]
    readme = (tmp_path / "out/README.md").read_text()
    assert f"**Warning:** {BRINGUP_OS_LINE.removeprefix('options.slurm_version: ')}." in readme


@pytest.mark.parametrize("release", ["22.05", "23.11", "24.11"])
def test_a_release_an_os_packages_plans_quietly(tmp_path, orchgen, release):
    path = tmp_path / "fleet.yaml"
    path.write_text(BRINGUP_OS.replace("RELEASE", release))
    proc = orchgen("plan", path, "-o", tmp_path / "out")
    assert proc.returncode == 0 and "bring-up packages" not in proc.stderr, proc.stderr
    assert "bring-up packages" not in (tmp_path / "out/README.md").read_text()
