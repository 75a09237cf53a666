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

A `privileged` namespace would let the tenant's group run a privileged pod and own the node, so
there a ValidatingAdmissionPolicy (tenancy.pod_security_guard, Kubernetes 1.30+) holds its pods to `baseline` plus
IPC_LOCK: no privileged container, no host namespaces, ports or hostPath volumes, and no added
capability beyond baseline's list and IPC_LOCK.

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


# Pod Security Standards' baseline capabilities, plus what RDMA needs
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
FABRIC_CAPABILITIES = (*BASELINE_CAPABILITIES, "IPC_LOCK")
CONTAINERS = "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"


def _host_false(field: str) -> str:
    return f"!(has(object.spec.{field}) && object.spec.{field})"


GUARD_VALIDATIONS = (
    (" && ".join(_host_false(f) for f in ("hostNetwork", "hostPID", "hostIPC")),
     "no host network, PID or IPC namespace (Pod Security baseline)"),
    ("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
     "no hostPath volume (Pod Security baseline)"),
    ("variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) "
     "|| !c.securityContext.privileged)", "no privileged container (Pod Security baseline)"),
    ("variables.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
     "no host port (Pod Security baseline)"),
    ("variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.capabilities) "
     "|| !has(c.securityContext.capabilities.add) || c.securityContext.capabilities.add.all(a, a in "
     f"[{', '.join(repr(x) for x in FABRIC_CAPABILITIES)}]))",
     "only baseline's capabilities and IPC_LOCK may be added"),
)
