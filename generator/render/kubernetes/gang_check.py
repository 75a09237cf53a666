"""The Kubernetes production check's gang (checks/checks.json `kubernetes.gang`): a small test job made
by the plan's own starter code, so it goes through the plan's own gang-scheduler wiring (the tenant
namespace's queue, the priority class, the pool's selector and tolerations, the scheduler's labels).

checks/run.py applies it, waits, and passes only when every pod runs; a gang that ends split between
Running and Pending, or never admitted, fails with what the scheduler said. Then it deletes it.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...decide.plan import Plan
from ...decide.sizing import PodShape
from . import workloads
from .common import gpu_resource, namespace_of, queues_enabled, slice_of, workloads as kube_workloads

NAME = "orchgen-check-gang"
# Two pods of one GPU each: the smallest gang whose admission can be split, small enough to fit any GPU
# pool with two GPUs between short jobs of the site.
PODS = 2
# How long the check waits for the whole gang to run: Kueue admits in seconds when the quota is free;
# the image is the pause container (no pull of a training image), so this is scheduling time, not pulls.
TIMEOUT_S = 180
# The pause container: it runs until deleted and pulls in a second (registry.k8s.io, Kubernetes' own).
IMAGE = "registry.k8s.io/pause:3.10"


def _base(plan: Plan):
    """A workload of the Kubernetes plane on a GPU pool whose tenant and pool the gang borrows (the test job
    is a training Job whatever that workload is)."""
    cands = [w for w in kube_workloads(plan)
             if (s := slice_of(plan, w.pool)) is not None and s.gpus_per_node > 0 and s.nodes]
    # a gang first, then a training/batch job, then any (a Ray or serving tenant's pool and queue)
    cands.sort(key=lambda w: (not w.gang_scheduler_required,
                              w.serving is not None or w.workload_class not in ("training", "batch")))
    return cands[0] if cands else None


def _pause(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for o in objs:
        spec = o.get("spec", {})
        templates = [spec] if o["kind"] == "Pod" else \
            [spec.get("template", {}).get("spec", {})] + [t["template"]["spec"] for t in spec.get("tasks", [])]
        for ps in templates:
            for c in ps.get("containers", []):
                c["image"] = IMAGE
                c.pop("command", None)
                c.pop("args", None)
    return objs


def gang(plan: Plan) -> dict[str, Any]:
    if not queues_enabled(plan):
        return {"skip": "the plan has no gang scheduler on its Kubernetes plane (nothing to admit a gang whole)"}
    w = _base(plan)
    if w is None:
        return {"skip": "no workload of the Kubernetes plane runs on a GPU pool"}
    s = slice_of(plan, w.pool)
    resource, per_gpu = gpu_resource(s)
    pods = min(PODS, len(s.nodes) * s.gpus_per_node)
    shape = PodShape(pods, 1, 1, 1, resource, per_gpu)
    test = replace(w, name=NAME, workload_class="training", gang_scheduler_required=True, gpus=pods,
                   gpus_per_node=1, shape=shape, interactive=False, ray_head=None, serving=None)
    return {"namespace": namespace_of(w.tenant), "tenant": w.tenant, "pool": w.pool, "pods": pods,
            "scheduler": plan.gang_scheduler, "selector": f"orchgen.io/workload={NAME}",
            "timeout_s": TIMEOUT_S, "objects": _pause(workloads.starter(plan, test))}
