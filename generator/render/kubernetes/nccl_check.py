"""The Kubernetes production check's NCCL run (checks/checks.json `kubernetes.nccl`): two pods, each with
every GPU of its node, on two nodes of the pool the plan's tightly coupled workloads use, all_reduce
between them over the fabric the plan wired (issue 34).

It is made by the plan's own starter code, as a training job of that pool's tenant, with the fabric
wiring of the plan's fabric workloads: the device resources (`rdma/...`, `vpc.amazonaws.com/efa`),
IPC_LOCK, the secondary network and NCCL's variables. So it checks what a user's multi-node job gets,
not a hand-made pod. checks/run.py applies it, waits for it to finish, reads the pods' logs (NCCL_DEBUG=INFO)
and fails when an inter-node channel went over sockets where the plan wired RDMA or EFA, when the transport
the plan wired never appears, or when the bus bandwidth is under the floor. Then it deletes it.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...decide.plan import Plan, PodShape
from ...decide.nccl_floor import BUSBW_FLOOR_GBPS, BUSBW_RAIL_SHARE, MNNVL_OFF
from . import workloads
from .common import gpu_resource, namespace_of, slice_of, workloads as kube_workloads

NAME = "orchgen-check-nccl"
PODS = 2  # two nodes: the smallest run whose channels must cross the fabric
# Pulling the training image (~10 GB) and NCCL's setup take minutes on a cold node; the all_reduce
# itself takes seconds.
TIMEOUT_S = 1200
SIZE_BYTES = 1 << 30  # 1 GiB per all_reduce: the bandwidth plateau of nccl-tests' size sweep (doc/PERFORMANCE.md)
ITERS = 20
# What NCCL_DEBUG=INFO's channel lines say per fabric ("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0"):
# NCCL's own IB transport on InfiniBand and RoCE; aws-ofi-nccl's plugin on EFA, named "Libfabric" since 1.12,
# "AWS Libfabric" before it (and when NCCL_NET says so), "OFI" when NCCL_NET=OFI (aws-ofi-nccl
# src/nccl_ofi_interface_nvidia.c, nvidia_plugin_name_fixup); TCP sockets where nothing else is wired.
TRANSPORTS = {"rdma-shared": ["NET/IB"], "efa": ["NET/Libfabric", "NET/AWS Libfabric", "NET/OFI"],
              None: ["NET/Socket"]}
# Where the rails are not known: about half of one port's line rate (the Slurm check's defaults); EFA: half of
# one 100 Gb/s interface (p4d has 4 of them, p5 32: a healthy pair is far above this)
FLOOR_GBPS = {"rdma-shared": BUSBW_FLOOR_GBPS["infiniband"], "efa": 6.0, None: BUSBW_FLOOR_GBPS["ethernet"]}

# torchrun's workers: one all_reduce of SIZE_BYTES ITERS times after a warm-up, busbw as nccl-tests
# defines it for all_reduce (algbw x 2(n-1)/n, doc/PERFORMANCE.md), and a correctness check of one more
# all_reduce of ones (every element must be the world size). Rank 0 prints one line checks/run.py reads.
SCRIPT = f"""\
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
n = dist.get_world_size()
x = torch.ones({SIZE_BYTES} // 4, dtype=torch.float32, device="cuda")
for _ in range(5):
    dist.all_reduce(x)
torch.cuda.synchronize(); dist.barrier(); t = time.perf_counter()
for _ in range({ITERS}):
    dist.all_reduce(x)
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / {ITERS}
x.fill_(1); dist.all_reduce(x); torch.cuda.synchronize()
wrong = int((x != n).sum().item())
algbw = {SIZE_BYTES} / dt / 1e9
if dist.get_rank() == 0:
    print(f"orchgen-nccl ranks={{n}} bytes={SIZE_BYTES} algbw_gbps={{algbw:.2f}} "
          f"busbw_gbps={{algbw * 2 * (n - 1) / n:.2f}} wrong={{wrong}}", flush=True)
dist.destroy_process_group()
sys.exit(1 if wrong else 0)
"""


def _pod_specs(o: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of a starter object, whatever the gang scheduler made: a batch/v1 Job's template, a
    Volcano Job's tasks' templates, KAI's Pods (their PodGroup and the headless Service have none)."""
    spec = o.get("spec", {})
    if o["kind"] == "Pod":
        return [spec]
    return ([spec["template"]["spec"]] if "template" in spec else []) + \
        [t["template"]["spec"] for t in spec.get("tasks", [])]


def _pool(plan: Plan):
    """(pool slice, a workload there whose tenant and queue the run borrows): the fabric workloads' pool
    first, else any GPU pool of two or more whole-GPU nodes."""
    kube = [w for w in kube_workloads(plan) if w.serving is None and w.workload_class != "ray"]
    fabric = set(plan.platform.fabric_workloads)
    kube.sort(key=lambda w: (w.name not in fabric, not w.gang_scheduler_required))
    for w in kube:
        s = slice_of(plan, w.pool)
        if s is not None and s.gpus_per_node and len(s.nodes) >= PODS and gpu_resource(s)[1] == 1 \
                and not s.hardware.mig:
            return s, w
    return None, None


def floor(s, kind: str | None) -> tuple[float, str]:
    """(busbw floor GB/s, where it comes from) for the run on pool slice `s` over network `kind`."""
    rails = s.hardware.compute_rails if kind == "rdma-shared" else ()
    if rails:
        total = sum(n.rate_gbps for n in rails) / 8
        return (round(BUSBW_RAIL_SHARE * total, 1),
                f"{BUSBW_RAIL_SHARE:.0%} of pool {s.pool}'s {len(rails)} compute rails ({total:g} GB/s together): "
                "all_reduce busbw between two nodes is bounded by their rails (nccl-tests doc/PERFORMANCE.md)")
    return (FLOOR_GBPS[kind], f"the {kind or 'pod network'} default (the pool's rails are not known): about half of "
                              "one port's line rate (nccl-tests doc/PERFORMANCE.md defines busbw)")


def nccl(plan: Plan) -> dict[str, Any]:
    s, w = _pool(plan)
    if s is None:
        return {"skip": "no GPU pool of the Kubernetes plane has two or more nodes of whole GPUs (MIG slices and a "
                        "single node have no inter-node NCCL to check)"}
    net = plan.platform.network if w.name in plan.platform.fabric_workloads else None
    kind = net.kind if net is not None else None
    g = s.gpus_per_node
    # a few cores and GiB per GPU for torchrun's workers and NCCL's proxy threads, within what a node leaves
    shape = PodShape(PODS, g, max(1, min(s.cpus // 2, 4 * g)), max(1, min(s.memory_gib // 2, 16 * g)))
    test = replace(w, name=NAME, workload_class="training", gang_scheduler_required=True,
                   gpus=PODS * g, gpus_per_node=g, shape=shape, interactive=False, ray_head=None, serving=None)
    wired = replace(plan, platform=replace(plan.platform, fabric_workloads=(*plan.platform.fabric_workloads, NAME))) \
        if net is not None else plan
    objs = workloads.starter(wired, test)
    mnnvl = plan.fabric.domain_nodes(s.pool) > 1  # a multi-node NVLink domain (GB200 NVL72)
    for o in objs:
        if o["apiVersion"] == "batch/v1" and o["kind"] == "Job":
            o["spec"]["backoffLimit"] = 0  # one run: a failure is the verdict, not a retry
        elif o["kind"] == "Job":  # Volcano's
            o["spec"]["maxRetry"] = 0
        for ps in _pod_specs(o):
            for c in ps.get("containers", []):
                c["command"] = ["bash", "-c",
                                'cat > /tmp/orchgen_nccl.py <<"EOF"\n' + SCRIPT + "EOF\n"
                                f'exec torchrun --nnodes="$NNODES" --nproc-per-node={g} --node-rank="${{NODE_RANK:-$VC_TASK_INDEX}}" '
                                '--master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT" /tmp/orchgen_nccl.py']
                c.pop("args", None)
                # NCCL_DEBUG=INFO prints each channel's transport ("via NET/IB/0"), which the check reads
                c.setdefault("env", []).append({"name": "NCCL_DEBUG", "value": "INFO"})
                if mnnvl:  # over the rails, not the NVLink the pods' ComputeDomain channel opens (MNNVL_OFF)
                    c["env"].append({"name": MNNVL_OFF[0], "value": MNNVL_OFF[1]})
    value, source = floor(s, kind)
    return {"namespace": namespace_of(w.tenant), "tenant": w.tenant, "pool": s.pool, "pods": PODS,
            "scheduler": plan.gang_scheduler,
            "gpus_per_pod": g, "selector": f"orchgen.io/workload={NAME}", "timeout_s": TIMEOUT_S,
            "network": kind or "pod network", "transport": TRANSPORTS[kind],
            "busbw_floor_gbps": value, "busbw_floor_source": source, "objects": objs}
