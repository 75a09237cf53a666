"""Tenant access: each tenant's kubernetes_group can touch its own namespace's workloads and nothing
else (never a quota, a queue, RBAC, another namespace or a cluster-scoped object), and each tenant
namespace's Pod Security level admits the pods orchgen writes for it.

RBAC is read strictly, as the API server's RBAC authorizer does (k8s.io/kubernetes
plugin/pkg/auth/authorizer/rbac: a RoleBinding grants its Role's rules in the binding's namespace
only; a rule matches when its apiGroups, resources and verbs each hold the request's or `*`; a
ClusterRoleBinding would grant cluster-wide). No evaluator library: every grant in the bundle is
enumerated and each request below is decided from them. Pod Security is the "Pod Security
Standards" page's `restricted` and `baseline` controls that the starters could touch, read strictly.
"""
from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from generator.render import render
from tests.support import plan_of
from tests.test_taints import _docs, _load, _pods

GANGS = ("kueue", "volcano", "kai")


def _cases() -> dict[str, dict[str, Any]]:
    out = {}
    for gang in GANGS:
        for name in ("baremetal-k8s-training", "aks-inference"):
            d = _load(name)
            d.setdefault("options", {})["gang_scheduler"] = gang
            if gang == "kai" and d["options"].get("gitops") == "argocd":
                d["options"]["gitops"] = "flux"
            out[f"{name}+{gang}"] = d
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def bundles():
    out = {}
    for cid, data in CASES.items():
        plan = plan_of(copy.deepcopy(data), name=f"{cid}.yaml")
        files = render(plan)
        out[cid] = (plan, _docs(files, "kubernetes/manifests/"), _docs(files, "kubernetes/workloads/"))
    return out


def _grants(objs: list[dict[str, Any]], group: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace or None for cluster-wide, rule) for every rule bound to `group`."""
    roles = {(o["metadata"].get("namespace"), o["kind"], o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    out = []
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "Group" and s["name"] == group for s in b.get("subjects", [])):
            continue
        ns = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
        ref = b["roleRef"]
        role = roles.get((ns if ref["kind"] == "Role" else None, ref["kind"], ref["name"]))
        assert role is not None, f"{b['kind']} {b['metadata']['name']} names a missing {ref['kind']} {ref['name']}"
        out += [(ns, r) for r in role.get("rules", [])]
    return out


def allowed(grants, verb: str, group: str, resource: str, namespace: str | None) -> bool:
    for ns, rule in grants:
        if ns is not None and ns != namespace:
            continue
        if not any(g in ("*", group) for g in rule.get("apiGroups", [])):
            continue
        if not any(r in ("*", resource) for r in rule.get("resources", [])):
            continue
        if any(v in ("*", verb) for v in rule.get("verbs", [])):
            return True
    return False


WRITES = ("create", "update", "patch", "delete", "deletecollection")
WORKLOADS = (("", "pods"), ("batch", "jobs"), ("apps", "deployments"), ("ray.io", "rayclusters"), ("ray.io", "rayjobs"))
NEVER_WRITE = (("", "resourcequotas"), ("", "limitranges"), ("", "namespaces"), ("kueue.x-k8s.io", "localqueues"),
               ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "resourceflavors"),
               ("kueue.x-k8s.io", "workloads"), ("scheduling.volcano.sh", "queues"),
               ("scheduling.volcano.sh", "podgroups"), ("scheduling.run.ai", "queues"),
               ("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings"),
               ("rbac.authorization.k8s.io", "clusterroles"), ("rbac.authorization.k8s.io", "clusterrolebindings"),
               ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
               ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
               ("scheduling.k8s.io", "priorityclasses"), ("", "nodes"))


@pytest.mark.parametrize("cid", sorted(CASES))
def test_a_tenant_group_touches_only_its_own_namespaces_workloads(cid, bundles):
    plan, objs, _ = bundles[cid]
    tenants = [t for t in plan.tenants if t.kubernetes_group]
    assert len(tenants) >= 2
    for t in tenants:
        grants = _grants(objs, t.kubernetes_group)
        assert grants and all(ns == t.name for ns, _ in grants), "only Roles in its own namespace"
        for group, resource in WORKLOADS:
            for verb in ("get", "list", "create", "delete"):
                assert allowed(grants, verb, group, resource, t.name), (t.name, verb, group, resource)
        for other in plan.tenants:
            if other.name != t.name:
                for group, resource in WORKLOADS:
                    assert not any(allowed(grants, v, group, resource, other.name) for v in ("get", *WRITES))
        for group, resource in NEVER_WRITE:
            for ns in (t.name, None):
                assert not any(allowed(grants, v, group, resource, ns) for v in WRITES), (t.name, group, resource)
        for ns, rule in grants:  # no wildcard, no escalation verbs
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
    # under KAI the gang starter creates a PodGroup: the group may (the admission policy keeps its queue)
    if plan.gang_scheduler == "kai":
        t = tenants[0]
        assert allowed(_grants(objs, t.kubernetes_group), "create", "scheduling.run.ai", "podgroups", t.name)


def test_a_tenant_without_a_group_gets_no_access(bundles):
    data = _load("research-lab")
    plan = plan_of(data, name="research-lab.yaml")
    assert not any(o["kind"] in ("Role", "RoleBinding") for o in _docs(render(plan), "kubernetes/manifests/"))


# --- Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards) -----

BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def violations(pod: dict[str, Any], level: str) -> list[str]:
    if level == "privileged":
        return []
    out = []
    containers = pod.get("containers", []) + pod.get("initContainers", [])
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(f):
            out.append(f)
    for v in pod.get("volumes", []):
        if "hostPath" in v:
            out.append("hostPath")
        if level == "restricted" and not set(v) - {"name"} <= RESTRICTED_VOLUMES:
            out.append(f"volume {v}")
    psc = pod.get("securityContext", {})
    for c in containers:
        sc = c.get("securityContext", {})
        caps = sc.get("capabilities", {})
        if sc.get("privileged"):
            out.append("privileged")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append("hostPort")
        allowed_caps = {"NET_BIND_SERVICE"} if level == "restricted" else BASELINE_CAPS
        if set(caps.get("add", [])) - allowed_caps:
            out.append(f"capabilities {caps['add']}")
        if level == "restricted":
            if sc.get("allowPrivilegeEscalation") is not False:
                out.append("allowPrivilegeEscalation")
            if "ALL" not in caps.get("drop", []):
                out.append("drop ALL")
            if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
                out.append("runAsNonRoot")
            if sc.get("runAsUser", psc.get("runAsUser")) == 0:
                out.append("runAsUser 0")
            seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {})).get("type")
            if seccomp not in ("RuntimeDefault", "Localhost"):
                out.append("seccompProfile")
    return out


@pytest.mark.parametrize("cid", sorted(CASES))
def test_every_tenant_pod_is_admitted_by_its_namespaces_pod_security_level(cid, bundles):
    plan, objs, starters = bundles[cid]
    levels = {o["metadata"]["name"]: o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
              for o in objs if o["kind"] == "Namespace" and "orchgen.io/tenant" in o["metadata"]["labels"]}
    assert set(levels) == {t.name for t in plan.tenants}
    # and orchgen's own namespaces with a level (the GPU health check's: privileged, for CAP_SYSLOG)
    enforced = {o["metadata"]["name"]: o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
                for o in objs if o["kind"] == "Namespace"
                and "pod-security.kubernetes.io/enforce" in o["metadata"].get("labels", {})}
    checked = 0
    for o in starters + objs:
        for pod in _pods(o):
            ns = o["metadata"]["namespace"]
            assert not violations(pod, enforced[ns]), (o["kind"], o["metadata"]["name"], violations(pod, enforced[ns]))
            checked += 1
    assert checked
    # privileged only where a tenant's pods need IPC_LOCK (RDMA), restricted everywhere else
    for ns, level in levels.items():
        pods = [p for o in starters + objs if o["metadata"].get("namespace") == ns for p in _pods(o)]
        ipc = any("IPC_LOCK" in c.get("securityContext", {}).get("capabilities", {}).get("add", [])
                  for p in pods for c in p["containers"])
        assert level == ("privileged" if ipc else "restricted"), (ns, level)
        # and baseline would not do: IPC_LOCK is not among its capabilities
        assert not ipc or any(violations(p, "baseline") for p in pods)


def test_the_checker_refuses_what_the_levels_refuse():
    root = {"containers": [{"name": "c", "image": "i"}]}
    assert violations(root, "restricted") and not violations(root, "baseline")
    ipc = {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}]}
    assert violations(ipc, "baseline")
    assert violations({"hostNetwork": True, "containers": []}, "baseline")


# --- the guard on privileged (RDMA) tenant namespaces, evaluated with cel-python --------------

def _cel_admits(policy: dict[str, Any], pod_obj: dict[str, Any]) -> list[str]:
    """The messages of the validations that refuse `pod_obj` (a Pod), as the API server evaluates
    the policy: its variables first, then each validation with `object` and `variables`."""
    import celpy

    env = celpy.Environment()
    obj = celpy.json_to_cel(pod_obj)
    variables = {}
    for v in policy["spec"].get("variables", []):
        prog = env.program(env.compile(v["expression"]))
        variables[v["name"]] = prog.evaluate({"object": obj, "variables": celpy.json_to_cel(variables)})
    act = {"object": obj, "variables": celpy.celtypes.MapType(
        {celpy.celtypes.StringType(k): val for k, val in variables.items()})}
    refused = []
    for v in policy["spec"]["validations"]:
        result = env.program(env.compile(v["expression"])).evaluate(act)
        assert isinstance(result, celpy.celtypes.BoolType), (v["expression"], result)
        if not result:
            refused.append(v["message"])
    return refused


@pytest.mark.parametrize("cid", [c for c in sorted(CASES) if c.startswith("baremetal")])
def test_the_guard_admits_the_rdma_pods_and_refuses_a_node_takeover(cid, bundles):
    from tests._consumers import require

    try:
        import celpy  # noqa: F401
    except ImportError:
        require(False, "cel-python not installed")
    plan, objs, starters = bundles[cid]
    # the tenants' privileged namespaces, which the guard selects (orchgen's own, the GPU health
    # checker's, is privileged for its CAP_SYSLOG and has no tenant, so no tenant Role either)
    privileged = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"
                  and "orchgen.io/tenant" in o["metadata"]["labels"]
                  and o["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "privileged"}
    assert privileged, "the bare-metal RDMA tenants' namespaces are privileged"
    [policy] = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"
                and o["metadata"]["name"].endswith("-tenant-pod-security")]
    [binding] = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"
                 and o["spec"]["policyName"] == policy["metadata"]["name"]]
    assert binding["spec"]["validationActions"] == ["Deny"]
    sel = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert {"key": "pod-security.kubernetes.io/enforce", "operator": "In", "values": ["privileged"]} in sel
    pods = [p for o in starters + objs if o["metadata"].get("namespace") in privileged for p in _pods(o)]
    assert pods
    for p in pods:
        assert _cel_admits(policy, {"apiVersion": "v1", "kind": "Pod", "spec": p}) == []
    base = copy.deepcopy(pods[0])
    for mutate in (lambda s: s["containers"][0].setdefault("securityContext", {}).update(privileged=True),
                   lambda s: s.update(hostNetwork=True),
                   lambda s: s.setdefault("volumes", []).append({"name": "h", "hostPath": {"path": "/"}}),
                   lambda s: s["containers"][0].setdefault("securityContext", {}).setdefault(
                       "capabilities", {}).setdefault("add", []).append("SYS_ADMIN"),
                   lambda s: s["containers"][0].setdefault("ports", []).append({"containerPort": 1, "hostPort": 22})):
        bad = copy.deepcopy(base)
        mutate(bad)
        assert _cel_admits(policy, {"apiVersion": "v1", "kind": "Pod", "spec": bad}), bad
    # every baseline control (the pods tests/tenant_walls.py sends to the real API server), and in an
    # ephemeral container of a bundle pod: once (the guard's validations do not depend on the scheduler;
    # cel-python is slow)
    if not cid.endswith("+kueue"):
        return
    from tests.tenant_walls import BASELINE_BREAKS

    for name, control, mutate in BASELINE_BREAKS:
        bad = {"containers": [{"name": "c", "image": "busybox"}]}
        mutate(bad)
        refused = _cel_admits(policy, {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": bad})
        assert any(f"baseline, {control}" in m for m in refused), (name, refused)
    for ec in ({"name": "d", "securityContext": {"privileged": True}},
               {"name": "d", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}},
               {"name": "d", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}):
        bad = {**copy.deepcopy(base), "ephemeralContainers": [ec]}
        assert _cel_admits(policy, {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": bad}), ec


def test_no_guard_where_every_tenant_namespace_is_restricted(bundles):
    for cid in CASES:
        plan, objs, _ = bundles[cid]
        levels = [o["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") for o in objs
                  if o["kind"] == "Namespace" and "orchgen.io/tenant" in o["metadata"]["labels"]]
        has_guard = any(o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-pod-security")
                        for o in objs)
        assert has_guard == ("privileged" in levels), cid
