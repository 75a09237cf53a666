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
there a ValidatingAdmissionPolicy (tenancy.pod_security_guard, Kubernetes 1.30+) enforces every control
of `baseline` (guard_validations: the same checks as Pod Security Admission's, over containers, init
containers and ephemeral containers, the last also when added through the pods/ephemeralcontainers
subresource) with one exception: IPC_LOCK, only in a container that requests the fabric's device.

Why not `baseline` itself, or no IPC_LOCK: Pod Security Admission has no per-capability exemption (its
only exemptions, by user, RuntimeClass or namespace, are the API server's own configuration, which a
managed control plane does not expose). Without IPC_LOCK an RDMA registration is bounded by the
container's RLIMIT_MEMLOCK, which Kubernetes cannot set (the pod API has no rlimits) and which the
container inherits from the runtime's service: containerd's own unit sets no LimitMEMLOCK
(github.com/containerd/containerd containerd.service), so it is the init system's default (the kernel's
MLOCK_LIMIT, 8 MiB since Linux 5.16 and 64 KiB before, unless DefaultLimitMEMLOCK raises it), far below
the GPU and host buffers NCCL registers. A node image that runs containerd
with LimitMEMLOCK=infinity makes IPC_LOCK unneeded, but orchgen does not build the node image, so it
cannot count on it.

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


# --- the guard of a privileged (RDMA) tenant namespace: Pod Security `baseline`, every control, in CEL ---
# https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline, as k8s.io/pod-security-admission
# implements it (policy/check_*.go): each control below is one of its checks, over every container kind
# (visitContainers: containers, initContainers, ephemeralContainers), at the plan's Kubernetes minor.

# baseline's "Capabilities": what may be added (IPC_LOCK is not among them, so RDMA pods fail baseline)
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# baseline's "Sysctls" (check_sysctls.go: the 1.0 set, + 1.27, + 1.29, + 1.32)
_SYSCTLS = ((0, ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                 "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start")),
            (27, ("net.ipv4.ip_local_reserved_ports",)),
            (29, ("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                  "net.ipv4.tcp_keepalive_probes")),
            (32, ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")))
# baseline's "SELinux" types (check_seLinuxOptions.go; container_engine_t from 1.31)
_SELINUX_TYPES = ((0, ("", "container_t", "container_init_t", "container_kvm_t")), (31, ("container_engine_t",)))
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _minor(plan: Plan) -> int:
    return int(plan.kubernetes_version.split(".")[1])


def _since(table: tuple[tuple[int, tuple[str, ...]], ...], minor: int) -> list[str]:
    return [x for since, names in table if minor >= since for x in names]


def _cel_list(xs) -> str:
    return "[" + ", ".join(repr(x) for x in xs) + "]"


def _each_container(pred: str) -> str:
    """`pred` (over `c`) for every container of every kind. One list at a time: the three are different
    OpenAPI types (Container, EphemeralContainer), which CEL will not concatenate."""
    return " && ".join(f"(!has(object.spec.{f}) || object.spec.{f}.all(c, {pred}))" for f in CONTAINER_LISTS)


def _unset_or(expr: str, ok: str) -> str:
    return f"(!has({expr}) || {ok.replace('@', expr)})"


def _csc(field: str, ok: str) -> str:
    """The field of a container's securityContext is unset or `ok` (with @ for the field)."""
    return f"(!has(c.securityContext) || !has(c.securityContext.{field}) || {ok.replace('@', 'c.securityContext.' + field)})"


def _psc(field: str, ok: str) -> str:
    """The field of the pod's securityContext is unset or `ok` (with @ for the field)."""
    f = "object.spec.securityContext"
    return f"(!has({f}) || !has({f}.{field}) || {ok.replace('@', f + '.' + field)})"


def guard_validations(plan: Plan) -> list[tuple[str, str]]:
    """(CEL expression, message) per baseline control, for a namespace whose Pod Security level must be
    `privileged` because its RDMA pods add IPC_LOCK. The one thing allowed beyond baseline: IPC_LOCK, in a
    container that requests the fabric's device resource (fabric_wiring.wire adds both together), so a
    pod off the fabric, an init container without the device, or an ephemeral container never gets it."""
    minor = _minor(plan)
    net = plan.platform.network
    devices = sorted({r.resource for r in net.rails} | {net.resource}) if net is not None else []
    ipc_lock = (f"(a == 'IPC_LOCK' && has(c.resources) && has(c.resources.limits) "
                f"&& c.resources.limits.exists(k, k in {_cel_list(devices)}))") if devices else "false"
    selinux_ok = (f"(!has(@.type) || @.type in {_cel_list(_since(_SELINUX_TYPES, minor))}) "
                  "&& (!has(@.user) || @.user == '') && (!has(@.role) || @.role == '')")
    out = [
        (_psc("windowsOptions", "!(has(@.hostProcess) && @.hostProcess)")
         + " && " + _each_container(_csc("windowsOptions", "!(has(@.hostProcess) && @.hostProcess)")),
         "Pod Security baseline, HostProcess: no Windows HostProcess container"),
        (" && ".join(f"!(has(object.spec.{f}) && object.spec.{f})" for f in ("hostNetwork", "hostPID", "hostIPC")),
         "Pod Security baseline, Host Namespaces: no host network, PID or IPC namespace"),
        (_each_container(_csc("privileged", "!@")),
         "Pod Security baseline, Privileged Containers: no privileged container"),
        (_each_container(_csc("capabilities", _unset_or(
            "@.add", f"@.all(a, a in {_cel_list(BASELINE_CAPABILITIES)} || {ipc_lock})"))),
         "Pod Security baseline, Capabilities: only baseline's, and IPC_LOCK in a container with the fabric's device"),
        ("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
         "Pod Security baseline, HostPath Volumes: no hostPath volume"),
        (_each_container("!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)"),
         "Pod Security baseline, Host Ports: no host port"),
        (_psc("appArmorProfile", "@.type != 'Unconfined'")
         + " && " + _each_container(_csc("appArmorProfile", "@.type != 'Unconfined'"))
         + f" && (!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
           f"!k.startsWith('{APPARMOR_ANNOTATION}') || object.metadata.annotations[k] == 'runtime/default' "
           f"|| object.metadata.annotations[k].startsWith('localhost/')))",
         "Pod Security baseline, AppArmor: RuntimeDefault or Localhost profiles only, never Unconfined"),
        (_psc("seLinuxOptions", selinux_ok) + " && " + _each_container(_csc("seLinuxOptions", selinux_ok)),
         "Pod Security baseline, SELinux: a container type only, and no SELinux user or role"),
        # check_procMount.go: from 1.35, any value in a user namespace (hostUsers: false)
        (("(has(object.spec.hostUsers) && !object.spec.hostUsers) || " if minor >= 35 else "")
         + _each_container(_csc("procMount", "@ == 'Default'")),
         "Pod Security baseline, /proc Mount Type: the default /proc masks"),
        (_psc("seccompProfile", "@.type != 'Unconfined'")
         + " && " + _each_container(_csc("seccompProfile", "@.type != 'Unconfined'")),
         "Pod Security baseline, Seccomp: never Unconfined"),
        (_psc("sysctls", f"@.all(s, s.name in {_cel_list(_since(_SYSCTLS, minor))})"),
         "Pod Security baseline, Sysctls: only the safe, namespaced ones"),
    ]
    if minor >= 34:  # check_hostProbesAndHostLifecycle.go (1.34+): no probe or hook aimed at another host
        handlers = [f"c.{p}" for p in ("livenessProbe", "readinessProbe", "startupProbe")] + \
                   [f"c.lifecycle.{h}" for h in ("postStart", "preStop")]
        checks = []
        for h in handlers:
            parent = h.rsplit(".", 1)[0]
            guard = f"has({parent}) && has({h})" if parent != "c" else f"has({h})"
            checks.append(f"!({guard}) || ((!has({h}.httpGet) || !has({h}.httpGet.host) || {h}.httpGet.host == '') "
                          f"&& (!has({h}.tcpSocket) || !has({h}.tcpSocket.host) || {h}.tcpSocket.host == ''))")
        out.append((_each_container(" && ".join(f"({x})" for x in checks)),
                    "Pod Security baseline, Host Probes / Lifecycle Hooks: no host field"))
    return out
