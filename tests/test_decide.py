"""The per-workload decision against a plainly written oracle, over the whole input space.

The oracle restates the decision guide's matrix in its own words (not orchgen's code), with the
one deliberate difference orchgen makes: a tightly coupled multi-node Ray job on k3s requires a
gang scheduler too, as the guide's invariant says.
"""
from __future__ import annotations

import itertools
import json
import subprocess

import pytest

from generator.decide import decide_workload
from generator.decide.plan import Facts
from tests.support import orchgen_argv

FACTS = ("tightly_coupled", "bare_metal", "long_lived_services", "multi_tenant",
         "python_native_pipeline", "edge_or_dev")


def oracle(nodes, tightly_coupled, bare_metal, long_lived_services, multi_tenant,
           python_native_pipeline, edge_or_dev):
    spans_nodes = nodes >= 2
    if tightly_coupled and spans_nodes and bare_metal:
        primary, host = "slurm", None
    elif python_native_pipeline:
        primary, host = "ray", ("k3s" if edge_or_dev else "kubernetes")
    elif edge_or_dev:
        primary, host = "k3s", None
    else:
        primary, host = "kubernetes", None
    # every plane but Slurm is a Kubernetes scheduler (Ray is hosted by KubeRay on k8s or k3s)
    gang = primary != "slurm" and tightly_coupled and spans_nodes
    hybrid = primary == "slurm" and long_lived_services
    return primary, host, gang, hybrid


CASES = [
    (n, *bools) for bools in itertools.product((False, True), repeat=6) for n in (1, 2, 8, 16)
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n%d-" % c[0] + "".join("1" if b else "0" for b in c[1:]))
def test_matches_oracle(case):
    nodes, *bools = case
    facts = Facts(nodes, *bools)
    d = decide_workload("w", facts)
    assert (d.primary, d.ray_host, d.gang_scheduler_required, d.hybrid) == oracle(nodes, *bools)
    assert d.reasons and all(isinstance(r, str) and r for r in d.reasons)
    assert ("gang-scheduler" in d.addons) == d.gang_scheduler_required


def test_all_combinations_covered():
    assert len(CASES) == 256


def test_the_one_difference_from_the_guide_code():
    # the guide's code leaves this without a gang scheduler; its invariant (and orchgen) do not
    d = decide_workload("w", Facts(4, True, False, False, False, True, True))
    assert (d.primary, d.ray_host, d.gang_scheduler_required) == ("ray", "k3s", True)


def test_guide_cases():
    fsdp = decide_workload("w", Facts(8, True, True, False, False, False, False))
    assert fsdp.primary == "slurm" and not fsdp.gang_scheduler_required
    infer = decide_workload("w", Facts(1, False, False, True, True, False, False))
    assert infer.primary == "kubernetes" and not infer.hybrid
    grpo = decide_workload("w", Facts(4, True, False, False, True, True, False))
    assert (grpo.primary, grpo.ray_host, grpo.gang_scheduler_required) == ("ray", "kubernetes", True)
    dev = decide_workload("w", Facts(1, False, False, False, False, False, True))
    assert dev.primary == "k3s"
    edge6 = decide_workload("w", Facts(1, True, True, False, False, False, True))
    assert edge6.primary == "k3s"


def test_reasons_name_the_rule_and_facts():
    d = decide_workload("w", Facts(8, True, True, True, False, False, False))
    assert "coupled-multinode-bare-metal" in d.reasons[0] and "nodes=8" in d.reasons[0]
    assert any("hybrid" in r for r in d.reasons)


def test_recommend_json_shape_and_order(tmp_path, example):
    out = subprocess.run([*orchgen_argv(), "recommend", str(example("research-lab")),
                          "--format", "json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert set(data) == {"fleet", "workloads"}
    names = [w["name"] for w in data["workloads"]]
    assert names == ["pretrain-70b", "vision-sweeps", "model-api", "eval-batch"]
    for w in data["workloads"]:
        assert set(w) == {"name", "primary", "ray_host", "gang_scheduler_required", "hybrid", "addons", "reasons",
                          "plane", "pinned"}
        assert w["plane"] in {"slurm", "kubernetes", "k3s"}
        assert w["pinned"] is (w["name"] == "eval-batch")  # pinned to kubernetes beside the model API (issue 36)
        assert w["primary"] in {"slurm", "kubernetes", "k3s", "ray"}
        assert w["ray_host"] in {"kubernetes", "k3s", None}
