"""checks/checks.json's Kubernetes gang (generator/render/kubernetes/gang_check.py) for every gang
scheduler of the goldens: the plan's own starter shape (Kueue: an Indexed Job in a tenant namespace;
Volcano: a Volcano Job whose minAvailable is the gang; KAI: a PodGroup whose minMember is the gang and its
pods), the pause image, one GPU per pod; a plan with no gang scheduler says why it runs no gang.
The check runs for real in tests/test_kube_checks_real.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"


def gang(case: str) -> dict:
    return json.loads((GOLDEN / case / "checks" / "checks.json").read_text())["kubernetes"]["gang"]


def pod_specs(objs: list[dict]) -> list[dict]:
    out = []
    for o in objs:
        if o["kind"] == "Pod":
            out.append(o["spec"])
        elif o["kind"] == "Job" and "tasks" in o["spec"]:
            out += [t["template"]["spec"] for t in o["spec"]["tasks"]]
        elif o["kind"] == "Job":
            out.append(o["spec"]["template"]["spec"])
    return out


@pytest.mark.parametrize(("case", "scheduler"), [("cloud-training", "kueue"), ("aks-inference", "volcano"),
                                                 ("oke-training-kai", "kai"), ("research-lab", "kueue")])
def test_the_gang_goes_through_the_plans_scheduler(case: str, scheduler: str) -> None:
    g = gang(case)
    assert g["scheduler"] == scheduler and g["pods"] == 2
    assert {o["metadata"].get("namespace") for o in g["objects"]} == {g["namespace"]}
    kinds = {o["kind"]: o for o in g["objects"]}
    if scheduler == "kueue":
        assert kinds["Job"]["spec"]["parallelism"] == kinds["Job"]["spec"]["completions"] == 2
    elif scheduler == "volcano":
        assert kinds["Job"]["spec"]["minAvailable"] == 2 and kinds["Job"]["spec"]["schedulerName"] == "volcano"
    else:
        assert kinds["PodGroup"]["spec"]["minMember"] == 2
        assert [o["kind"] for o in g["objects"]].count("Pod") == 2
    specs = pod_specs(g["objects"])
    assert specs
    for spec in specs:
        for c in spec["containers"]:
            assert c["image"] == "registry.k8s.io/pause:3.10" and "command" not in c
            gpus = {k: v for k, v in c["resources"]["limits"].items() if k.startswith("nvidia.com/")}
            assert len(gpus) == 1, c["resources"]
        assert spec.get("nodeSelector"), spec  # the pool's nodes


def test_no_gang_scheduler_no_gang() -> None:
    assert gang("dev-ci") == {"skip": "the plan has no gang scheduler on its Kubernetes plane "
                                      "(nothing to admit a gang whole)"}


def test_slurm_only_has_no_kubernetes_check() -> None:
    assert "kubernetes" not in json.loads((GOLDEN / "fsdp-pretraining" / "checks" / "checks.json").read_text())
