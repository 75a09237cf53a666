"""The walls between tenants, checked on the real API server after a bundle is applied (issue 34); called by
tests/test_kube_real.py for every example, on the cluster that test already booted.

- NetworkPolicy: the policies the API server stored, with the namespaces' real labels, evaluated by a
  policy engine that is not orchgen's: Cyclonus's matcher (github.com/mattfenwick/cyclonus pkg/matcher,
  built from Go modules by tests/kubeenv/netpol/build.sh), the NetworkPolicy model SIG Network's
  conformance probing compares CNIs against (ingress and egress, pod, namespace and ipBlock peers,
  ports and port ranges, policies adding up). A pod of every tenant (an intruder) probes every pod
  template of every other tenant and its own on the ports an intruder would try: allowed only in its
  own namespace and to a server's own port. KWOK pods have no network, so these are the engine's
  verdicts on the stored objects, not packets through a CNI.
- RBAC: `kubectl auth can-i` as each tenant's group and as the GPU checker's service account.
- Pod Security: a privileged pod is refused in every tenant namespace (server-side dry run: admission
  runs, nothing is stored); in a namespace at `privileged` for RDMA's IPC_LOCK, a pod breaking any one
  baseline control is refused, and so is such an ephemeral container added to a running pod.
- The GPU checker's admission policy: with a token bound to one of its pods (so carrying that pod's
  node), it may set that node's GPU health condition and nothing else (the controller alone patches
  nodes: `can-i`).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator


from tests._consumers import load_all as _load_all
from tests._consumers import require
from tests.kubeenv.cluster import netpol_binary

TENANT_LABEL = "orchgen.io/tenant"
NS_NAME = "kubernetes.io/metadata.name"
# ports an intruder would try on another tenant's pods: Ray's dashboard / Jobs API, Ray Client, GCS,
# torchrun's rendezvous, a model server
PROBE_PORTS = (8265, 10001, 6379, 29500, 8000)


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in _load_all(path.read_text()) if d] if path.is_file() else []


def _templates(obj: Any) -> Iterator[dict[str, Any]]:
    """Every pod template's labels inside an object (Jobs, LWS, RayClusters, RayServices ...)."""
    if isinstance(obj, dict):
        md = obj.get("metadata")
        if isinstance(md, dict) and "spec" in obj and isinstance(obj["spec"], dict) and "containers" in obj["spec"]:
            yield dict(md.get("labels") or {})
        for v in obj.values():
            yield from _templates(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _templates(v)


def verdicts(policies: list[dict[str, Any]], ns_labels: dict[str, dict[str, str]],
             probes: list[tuple[tuple[str, dict[str, str]], tuple[str, dict[str, str]], int]]) -> list[bool]:
    """Whether each TCP connection (src=(namespace, labels), dst, port) is allowed by the policies, in
    Cyclonus's NetworkPolicy engine (tests/kubeenv/netpol: ingress and egress, every peer form), one
    process for all of them."""
    require(os.access(netpol_binary(), os.X_OK),
            f"the NetworkPolicy engine is not built ({netpol_binary()} missing): run tests/kubeenv/netpol/build.sh")
    doc = {"policies": policies, "namespaces": ns_labels,
           "probes": [{"src": {"namespace": s[0], "labels": s[1]}, "dst": {"namespace": d[0], "labels": d[1]},
                       "port": port} for s, d, port in probes]}
    r = subprocess.run([str(netpol_binary())], input=json.dumps(doc), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert len(got) == len(probes)
    return got


def check(kube, bundle: Path) -> dict[str, int]:
    """Every wall of the applied bundle; returns what was checked (counts)."""
    man = bundle / "kubernetes" / "manifests"
    tenants = {o["metadata"]["name"]: o for o in _docs(man / "00-namespaces.yaml")
               if o["kind"] == "Namespace" and TENANT_LABEL in o["metadata"].get("labels", {})}
    counts = {"pairs": 0, "can_i": 0, "psa": 0, "gpu_health": 0}
    if not tenants:
        return counts
    # --- NetworkPolicy: as stored by the API server, with the namespaces' real labels
    written = _docs(man / "05-network-policies.yaml")
    assert {o["metadata"]["namespace"] for o in written} == set(tenants), "a tenant namespace without policies"
    policies = [kube.read(o) for o in written]
    ns_labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in kube.get("namespaces")["items"]}
    served: dict[str, list[tuple[dict[str, str], int]]] = {ns: [] for ns in tenants}
    pods: dict[str, list[dict[str, str]]] = {ns: [{}] for ns in tenants}
    for f in sorted((bundle / "kubernetes" / "workloads").glob("*.yaml")) + sorted(man.glob("*.yaml")):
        for o in _docs(f):
            ns = o.get("metadata", {}).get("namespace")
            if ns not in tenants:
                continue
            for labels in _templates(o.get("spec")):
                # KubeRay labels a cluster's head pod so; the dashboard and client listen there
                pods[ns].append({**labels, "ray.io/node-type": "head"} if o["kind"].startswith("Ray") else labels)
    plan = json.loads((bundle / "plan.json").read_text())
    for w in plan.get("workloads", []):
        sv = w.get("serving")
        if sv and w.get("tenant") in served:
            served[w["tenant"]].append(({"orchgen.io/workload": w["name"]}, sv["port"]))
    probes, want = [], []
    for a in tenants:
        for b in tenants:
            for dst in pods[b]:
                for port in PROBE_PORTS:
                    probes.append(((a, {"orchgen.io/workload": "intruder"}), (b, dst), port))
                    exposed = any(p == port and all(dst.get(k) == v for k, v in sel.items()) for sel, p in served[b])
                    want.append(a == b or exposed)
    # the platform's callers: Prometheus (where the bundle installs it) reaches every tenant pod
    if (bundle / "kubernetes" / "helm").is_dir() and "monitoring" in ns_labels and any(
            "kube-prometheus-stack" in line for line in (bundle / "kubernetes" / "helm" / "releases.yaml").read_text()
            .splitlines()):
        for b in tenants:
            probes.append((("monitoring", {}), (b, pods[b][-1]), 8000))
            want.append(True)
    got = verdicts(policies, ns_labels, probes)
    wrong = [(src, dst, port, g) for (src, dst, port), g, w in zip(probes, got, want) if g != w]
    assert not wrong, f"{len(wrong)} connections the walls get wrong (source, destination, port, allowed): {wrong[:5]}"
    counts["pairs"] = len(probes)
    # --- RBAC: a tenant's group works in its namespace only, and cannot take its own walls down
    for t, ns_obj in tenants.items():
        for role in _docs(man / "15-access.yaml"):
            if role["kind"] != "RoleBinding" or role["metadata"]["namespace"] != t:
                continue
            group = role["subjects"][0]["name"]
            as_group = ["--as", f"{group}-member", "--as-group", group]
            for verb, res, ns, want in (("create", "pods", t, "yes"), ("delete", "networkpolicies", t, "no"),
                                        ("patch", "namespaces", None, "no"), ("patch", "nodes", None, "no")):
                args = ["auth", "can-i", verb, res, *as_group] + (["-n", ns] if ns else [])
                got = kube.kubectl(*args, check=False).stdout.strip()
                assert got == want, (t, verb, res, got)
                counts["can_i"] += 1
            for other in tenants:
                if other != t:
                    got = kube.kubectl("auth", "can-i", "create", "pods", *as_group, "-n", other, check=False).stdout.strip()
                    assert got == "no", (t, other, got)
                    counts["can_i"] += 1
    # --- Pod Security: a privileged pod is refused in every tenant namespace: by Pod Security Admission,
    # or, in a namespace enforcing `privileged` for RDMA pods' IPC_LOCK, by the guard policy, which must
    # refuse whatever baseline refuses (_baseline_guard)
    guarded = False
    for t, ns_obj in tenants.items():
        enforce = ns_obj["metadata"]["labels"].get("pod-security.kubernetes.io/enforce")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wall-privileged", "namespace": t},
               "spec": {"containers": [{"name": "c", "image": "busybox",
                                        "securityContext": {"privileged": True}}]}}
        r = kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
        why = "violates PodSecurity" if enforce != "privileged" else "Privileged Containers"
        assert r.returncode != 0 and why in r.stderr, (t, enforce, r.stderr[-500:])
        counts["psa"] += 1
        # every baseline control, in one such namespace: the guard is one policy over all of them (the
        # privileged pod above proves its namespace selector in each)
        if enforce == "privileged" and not guarded:
            counts["psa"] += _baseline_guard(kube, bundle, t)
            guarded = True
    counts["gpu_health"] = _gpu_health(kube, bundle)
    return counts


def _gpu_health(kube, bundle: Path) -> int:
    """The checker's service account: get/patch nodes/status by RBAC (no node itself: the controller
    alone patches nodes), and by admission only its own node's status, only its own condition."""
    objs = _docs(bundle / "kubernetes" / "manifests" / "38-gpu-health.yaml")
    if not any(o["kind"] == "ValidatingAdmissionPolicy" for o in objs):
        return 0
    ns = next(o["metadata"]["name"] for o in objs if o["kind"] == "Namespace")
    checker, controller = f"system:serviceaccount:{ns}:gpu-health", f"system:serviceaccount:{ns}:gpu-quarantine"
    for who, args, want in ((checker, ("patch", "nodes", "--subresource=status"), "yes"),
                            (checker, ("patch", "nodes"), "no"), (controller, ("patch", "nodes"), "yes")):
        got = kube.kubectl("auth", "can-i", *args, "--as", who, check=False).stdout.strip()
        assert got == want, (who, args, got)
    pods = kube.wait_for("a GPU checker pod bound to a node", lambda: [
        p for p in kube.get("pods", "-n", ns)["items"]
        if p["spec"].get("nodeName") and p["metadata"]["name"].startswith("gpu-health-")], timeout=60)
    pod = pods[0]
    own = pod["spec"]["nodeName"]
    others = [n["metadata"]["name"] for n in kube.get("nodes")["items"] if n["metadata"]["name"] != own]
    token = kube.kubectl("create", "token", "gpu-health", "-n", ns, "--bound-object-kind", "Pod",
                         "--bound-object-name", pod["metadata"]["name"]).stdout.strip()

    def patch(node: str, body: dict[str, Any]):
        return kube.kubectl("--token", token, "patch", "node", node, "--subresource=status", "--type", "strategic",
                            "--dry-run=server", "-p", json.dumps(body), check=False)

    def condition(type_: str) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": type_, "status": "False", "reason": "GPUCheckFailed",
                                           "message": "FAIL test"}]}}
    r = patch(own, condition("orchgen.io/GPUHealthy"))
    assert r.returncode == 0, r.stderr
    checked = 1
    if others:
        r = patch(others[0], condition("orchgen.io/GPUHealthy"))
        assert r.returncode != 0 and "only the node its own pod runs on" in r.stderr, r.stderr
        checked += 1
    r = patch(own, condition("Ready"))
    assert r.returncode != 0 and "may set only the orchgen.io/GPUHealthy condition" in r.stderr, r.stderr
    return checked + 1


# One pod per Pod Security `baseline` control (https://kubernetes.io/docs/concepts/security/pod-security-standards/
# #baseline), each breaking only that control, with the words of the guard's message that names it. The
# spec mutations apply to a baseline-clean pod.
def _sc(**kw: Any):
    return lambda s: s["containers"][0].setdefault("securityContext", {}).update(kw)


BASELINE_BREAKS: tuple[tuple[str, str, Any], ...] = (
    ("host-network", "Host Namespaces", lambda s: s.update(hostNetwork=True)),
    ("host-pid", "Host Namespaces", lambda s: s.update(hostPID=True)),
    ("host-ipc", "Host Namespaces", lambda s: s.update(hostIPC=True)),
    ("privileged", "Privileged Containers", _sc(privileged=True)),
    ("privileged-init", "Privileged Containers", lambda s: s.setdefault("initContainers", []).append(
        {"name": "i", "image": "busybox", "securityContext": {"privileged": True}})),
    ("cap-sys-admin", "Capabilities", _sc(capabilities={"add": ["SYS_ADMIN"]})),
    ("cap-ipc-lock-off-fabric", "Capabilities", _sc(capabilities={"add": ["IPC_LOCK"]})),
    ("host-path", "HostPath Volumes", lambda s: s.setdefault("volumes", []).append(
        {"name": "h", "hostPath": {"path": "/"}})),
    ("host-port", "Host Ports", lambda s: s["containers"][0].update(ports=[{"containerPort": 22, "hostPort": 22}])),
    ("apparmor-pod", "AppArmor", lambda s: s.setdefault("securityContext", {}).update(
        appArmorProfile={"type": "Unconfined"})),
    ("apparmor-container", "AppArmor", _sc(appArmorProfile={"type": "Unconfined"})),
    ("selinux-type", "SELinux", _sc(seLinuxOptions={"type": "spc_t"})),
    ("selinux-user", "SELinux", lambda s: s.setdefault("securityContext", {}).update(
        seLinuxOptions={"user": "system_u"})),
    ("proc-mount", "/proc Mount Type", lambda s: (s.update(hostUsers=False), _sc(procMount="Unmasked")(s))),
    ("seccomp-pod", "Seccomp", lambda s: s.setdefault("securityContext", {}).update(
        seccompProfile={"type": "Unconfined"})),
    ("seccomp-container", "Seccomp", _sc(seccompProfile={"type": "Unconfined"})),
    ("sysctl", "Sysctls", lambda s: s.setdefault("securityContext", {}).update(
        sysctls=[{"name": "kernel.msgmax", "value": "65536"}])),
)


def _baseline_guard(kube, bundle: Path, ns: str) -> int:
    """In a tenant namespace at Pod Security `privileged` (its RDMA pods add IPC_LOCK): a baseline-clean
    pod and one adding IPC_LOCK with the fabric's device are admitted; a pod breaking any one baseline
    control is refused with the control's name; so is an AppArmor Unconfined annotation, and an
    ephemeral container breaking one, added to a running pod through pods/ephemeralcontainers (what
    `kubectl debug` does). Server-side dry runs, one kubectl for all; the ephemeral one needs a stored pod."""
    import copy

    plan = json.loads((bundle / "plan.json").read_text())
    net = (plan.get("platform") or {}).get("network") or {}
    device = next(iter([r["resource"] for r in net.get("rails") or []] or [net.get("resource")]))
    assert device, "a privileged tenant namespace without a fabric device"
    clean = {"containers": [{"name": "c", "image": "busybox"}]}

    def pod(name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
        md: dict[str, Any] = {"name": f"wall-{name}", "namespace": ns}
        if annotations:
            md["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}

    fabric = copy.deepcopy(clean)
    fabric["containers"][0].update(resources={"requests": {device: "1"}, "limits": {device: "1"}},
                                   securityContext={"capabilities": {"add": ["IPC_LOCK"]}})
    admitted = [pod("clean", clean), pod("fabric", fabric)]
    refused: dict[str, str] = {}
    for name, control, mutate in BASELINE_BREAKS:
        spec = copy.deepcopy(clean)
        mutate(spec)
        admitted_or_not = pod(name, spec)
        refused[admitted_or_not["metadata"]["name"]] = control
        admitted.append(admitted_or_not)
    refused["wall-apparmor-annotation"] = "AppArmor"
    admitted.append(pod("apparmor-annotation", copy.deepcopy(clean),
                        {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}))
    # one YAML stream of Pods, not a `kind: List`: kubectl checks each object's kind against the server's
    # OpenAPI before sending it, a Pod against /openapi/v3/api/v1, a v1 List against the whole /openapi/v2,
    # which the API server builds on first request from every CRD of the bundle (10-20 s of its CPU per
    # cluster on CI's machine: issue 32, CI time). The same requests, the same answers.
    r = kube.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-",
                     input="\n---\n".join(json.dumps(o) for o in admitted), check=False)
    created = {line.split("/", 1)[1] for line in r.stdout.split() if "/" in line}
    assert created == {"wall-clean", "wall-fabric"}, (ns, created, r.stderr[-3000:])
    for name, control in refused.items():
        line = next((ln for ln in r.stderr.splitlines() if f'"{name}"' in ln), "")
        assert "denied request" in line and f"baseline, {control}" in line, (ns, name, control, r.stderr[-3000:])
    # an ephemeral container: on a stored, clean pod, through the subresource
    running = pod("debug-target", copy.deepcopy(clean))
    kube.kubectl("create", "-f", "-", input=json.dumps(running))
    try:
        for ec, ok in (({"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}, False),
                       ({"name": "debug", "image": "busybox"}, True)):
            r = kube.kubectl("patch", "pod", "wall-debug-target", "-n", ns, "--subresource", "ephemeralcontainers",
                             "--type", "merge", "--dry-run=server", "-p",
                             json.dumps({"spec": {"ephemeralContainers": [ec]}}), check=False)
            assert (r.returncode == 0) == ok, (ns, ec, r.stderr[-1000:])
            assert ok or "denied request" in r.stderr and "Pod Security baseline" in r.stderr, r.stderr[-1000:]
    finally:
        kube.kubectl("delete", "pod", "wall-debug-target", "-n", ns, "--wait=false", check=False)
    return len(refused) + 2 + 2
