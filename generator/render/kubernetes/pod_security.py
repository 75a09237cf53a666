"""Pod Security Admission for the tenant namespaces, and the securityContext that lets orchgen's
own pods in.

Each tenant namespace enforces `restricted` (Kubernetes "Pod Security Standards"), except where
the tenant runs a tightly coupled workload on an RDMA fabric: those pods add IPC_LOCK (registering
GPU/NIC memory, fabric_wiring.py), which neither `restricted` (only NET_BIND_SERVICE may be added)
nor `baseline` allows (its list: AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD,
NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT), so that namespace enforces
`privileged`. Every namespace warns and audits at `restricted`, so a pod that would fail it shows.
The level is pinned to the plane's Kubernetes minor (`enforce-version`), so an upgrade cannot
tighten it unseen.

A pod that is not on the fabric gets what `restricted` asks: runAsNonRoot with a non-root uid (the
placeholder images run as uid 1000: Ray's `ray` user; the PyTorch image's commands need no root),
seccomp RuntimeDefault, no privilege escalation, every capability dropped. A fabric pod keeps root:
an added capability reaches a non-root process's effective set only through ambient capabilities,
which Kubernetes does not set.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan

PSA = "pod-security.kubernetes.io"
RESTRICTED, PRIVILEGED = "restricted", "privileged"
NON_ROOT_UID = 1000


def level(plan: Plan, tenant: str) -> str:
    kube = plan.kube_plane
    fabric = set(plan.platform.fabric_workloads) if plan.platform.network is not None else set()
    on_fabric = any(w.tenant == tenant and w.name in fabric for w in (plan.workloads_on(kube.name) if kube else []))
    return PRIVILEGED if on_fabric else RESTRICTED


def labels(plan: Plan, tenant: str) -> dict[str, str]:
    version = f"v{plan.kubernetes_version}"
    out: dict[str, str] = {}
    for mode, lv in (("enforce", level(plan, tenant)), ("warn", RESTRICTED), ("audit", RESTRICTED)):
        out[f"{PSA}/{mode}"] = lv
        out[f"{PSA}/{mode}-version"] = version
    return out


def harden(spec: dict[str, Any]) -> dict[str, Any]:
    """Make a PodSpec meet `restricted` (in place; returns it)."""
    spec["securityContext"] = {"runAsNonRoot": True, "runAsUser": NON_ROOT_UID,
                               "seccompProfile": {"type": "RuntimeDefault"}}
    for c in spec.get("containers", []):
        c["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return spec
