"""GPU health on the Kubernetes plane (manifests/38-gpu-health.yaml; options.gpu_health).

What upstream offers, and why this: NVIDIA NVSentinel (health monitors, fault quarantine that
cordons and taints, node drainer) is the complete answer, but it ships as a Helm chart that neither
../shared/charts nor this project's tests can render, so a site that runs it sets
`options.gpu_health: site` and gets none of this. The GPU Operator's own health feature (the device
plugin's XID watch) only marks a GPU unhealthy in the node's allocatable; it never cordons or taints.
node-problem-detector's custom plugins report a node condition and leave remediation to another
controller (NPD README, "Remedy Systems"). orchgen writes that split, smallest, on the check Slurm's
NHC already runs: checkers that only report, and one controller that only quarantines, so the rights
to change a node's spec sit in one pod off the GPU nodes instead of in a root pod on each of them.

- the checker: a DaemonSet `gpu-health-<pool>` per GPU pool, on that pool's nodes (its taints and
  the health taint tolerated: it keeps reporting on a quarantined node, which is how a person sees
  the repair worked). Each pod runs `gpu-health.py report` (templates/kubernetes/gpu-health.py.j2)
  every options.slurm.health_check_interval seconds (NHC's interval on Slurm), which runs
  gpu-health.sh COUNT TYPE (templates/slurm/gpu-health.sh.j2, the very script nhc.conf runs: one
  source of truth for the check: GPU count and type, uncorrectable ECC errors, row remapping pending
  or failed, pages pending retirement, and the kernel log's Xids, which is why the pod keeps
  CAP_SYSLOG, below) and sets its node's condition CONDITION (True, or False with the FAIL line as
  its message) through `nodes/status`. Its ServiceAccount may get and patch `nodes/status` and
  nothing else, and the admission policy `_checker_policy` holds it to its own node and its own
  condition (RBAC cannot name the caller's node nor a field);
- the controller: a Deployment `gpu-quarantine` of one replica, on a pool without GPUs where the plane
  has one (controller_pool), running `gpu-health.py quarantine`: it watches the nodes and cordons a
  node whose CONDITION is False and taints it nvidia.com/gpu-health=failed:NoSchedule, the line kept
  in the annotation orchgen.io/gpu-health. It never uncordons (a person does, after the repair: the README says how).
  Its ServiceAccount alone may patch nodes cluster-wide, and `_quarantine_policy` holds that to
  quarantining a node its checker reports unhealthy. No leader election: a second replica alive for
  a moment (a Deployment's pod on a partitioned node) writes the same cordon under optimistic
  concurrency (the resourceVersion read) and finds the work done, so a Lease would add rights and
  no safety;
- the one privilege the check needs: reading the kernel log (dmesg: syslog(2), which the kernel allows
  only with CAP_SYSLOG under kernel.dmesg_restrict=1, the default on Debian and Ubuntu), so the
  checker runs as root with every capability dropped but SYSLOG, no privilege escalation and a
  read-only root. Pod Security `baseline` does not allow adding SYSLOG, so the namespace is
  `privileged`, holding these two workloads only (the controller runs as nobody, nothing added).
No pod orchgen writes but the checker tolerates the health taint (tests/test_gpu_health.py holds every
pod template of the bundle to that), so a broken GPU node takes no new work until someone clears it.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from ..templating import render_template
from .common import meta, node_selector, slices, toleration, tolerations
from .tenancy import NO_PRUNE

NAMESPACE = "orchgen-gpu-health"  # catalog.ORCHGEN_NAMESPACE_PREFIX: no tenant may take it
NAME = "gpu-health"
# The quarantine taint: NVIDIA's nvidia.com/ domain as NVSentinel's and the GPU Operator's taints
# use it, NoSchedule so running pods finish or fail on their own (a NoExecute taint would evict
# every pod, including the DaemonSets that keep the node observable).
TAINT = {"key": "nvidia.com/gpu-health", "value": "failed", "effect": "NoSchedule"}
ANNOTATION = "orchgen.io/gpu-health"  # the FAIL line that quarantined the node
# The checker's node condition: a type of orchgen's own domain (condition types are "CamelCase or
# foo.example.com/CamelCase", https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/
# condition-v1-meta/), so it cannot clash with a site's node-problem-detector conditions; True = healthy
CONDITION = "orchgen.io/GPUHealthy"
CONTROLLER = "gpu-quarantine"  # the controller's Deployment and ServiceAccount
# Debian (glibc), so the nvidia-smi the NVIDIA Container Toolkit injects runs in it (an Alpine image
# cannot run it); gpu-quarantine.py needs Python's standard library and sh only. Docker Official Image
# tag, https://hub.docker.com/_/python (public Dockerfiles pin this tag by digest). dmesg comes from
# util-linux, Essential in Debian trixie (checked in a trixie debootstrap root), so the slim image has it.
IMAGE = "docker.io/library/python:3.13.9-slim-trixie"


def gpu_pools(plan: Plan) -> list[Any]:
    """The plane's pools with GPUs, when orchgen installs the health check."""
    if plan.kube_plane is None or plan.gpu_health != "install":
        return []
    return [s for s in slices(plan) if s.gpu_type and s.gpus_per_node]


def gpu_type(s: Any) -> str:
    """The TYPE gpu-health.sh compares with nvidia-smi's names: the pool's GPU type, or `gpu` (count
    only) for an untyped GPU, as nhc.conf passes it."""
    return s.gpu_type if s.gres_typed else "gpu"


def scripts(plan: Plan) -> dict[str, str]:
    class _M:  # gpu-health.sh's template reads m.cluster only
        cluster = plan.name
    return {"gpu-health.sh": render_template("slurm/gpu-health.sh.j2", m=_M).decode(),
            "gpu-health.py": render_template("kubernetes/gpu-health.py.j2", cluster=plan.name,
                                             namespace=NAMESPACE, taint=TAINT, annotation=ANNOTATION,
                                             condition=CONDITION).decode()}


def daemonset(plan: Plan, s: Any) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": NAME, "orchgen.io/pool": s.pool}
    # CAP_SYSLOG alone: dmesg's syslog(2) under kernel.dmesg_restrict=1 (syslog(2), "EPERM"); capabilities
    # a pod adds take effect for root only (https://kubernetes.io/docs/tasks/configure-pod-container/
    # security-context/#set-capabilities-for-a-container), and the runtime's default seccomp profile
    # allows syslog(2) to a process holding CAP_SYSLOG
    narrow = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["SYSLOG"]},
              "readOnlyRootFilesystem": True, "runAsNonRoot": False, "runAsUser": 0}
    env = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "GPU_COUNT", "value": str(s.gpus_per_node)},
        {"name": "GPU_TYPE", "value": gpu_type(s)},
        # NHC's HealthCheckInterval on Slurm (options.slurm.health_check_interval, default 300 s)
        {"name": "CHECK_INTERVAL", "value": str(plan.slurm_options.health_check_interval)},
        # the NVIDIA Container Toolkit (the GPU Operator makes it containerd's default runtime) mounts
        # nvidia-smi and every GPU's device for `utility` without a GPU request, as for dcgm-exporter:
        # https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # read-only root filesystem
    ]
    spec: dict[str, Any] = {
        "serviceAccountName": NAME,
        "nodeSelector": node_selector(plan, s.pool),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "check", "image": IMAGE,
            "command": ["python3", "/opt/gpu-health/gpu-health.py", "report"], "env": env,
            # one nvidia-smi every few minutes: a sliver of CPU; memory for Python and nvidia-smi
            "resources": {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"memory": "128Mi"}},
            "securityContext": narrow,
            "volumeMounts": [{"name": "scripts", "mountPath": "/opt/gpu-health", "readOnly": True}]}],
        "volumes": [{"name": "scripts", "configMap": {"name": NAME, "defaultMode": 0o555}}],
    }
    # the pool's taints, and the health taint: the checker must keep reporting on a quarantined node (a
    # DaemonSet places no new pod on a node whose NoSchedule taint it does not tolerate, as after a
    # rollout), so that the condition turns True after the repair
    spec["tolerations"] = [*tolerations(plan, s.pool), toleration(TAINT)]
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": meta(f"{NAME}-{s.pool}", NAMESPACE, labels),
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": {**labels}}, "spec": spec}}}


def controller_pool(plan: Plan, pools: list[Any]) -> str:
    """Where the controller runs: the plane's first pool without GPUs (a CPU or system pool), so it never
    sits on a node it may quarantine; else the first GPU pool (the plan has no other node; a controller
    on a quarantined node keeps running, NoSchedule evicts nothing)."""
    gpu = {s.pool for s in pools}
    return next((s.pool for s in slices(plan) if s.pool not in gpu), pools[0].pool)


def controller(plan: Plan, pools: list[Any]) -> dict[str, Any]:
    """The one quarantine controller: a Deployment of one replica (controller_pool)."""
    labels = {"app.kubernetes.io/name": CONTROLLER}
    pool = controller_pool(plan, pools)
    # Pod Security `restricted` in all but the namespace's label: nobody, nothing added
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                  "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534}
    spec = {
        "serviceAccountName": CONTROLLER,
        # every pod orchgen writes sits on a pool of the plan (tests/test_k8s_manifests.py)
        "nodeSelector": node_selector(plan, pool),
        **({"tolerations": tolerations(plan, pool)} if tolerations(plan, pool) else {}),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "quarantine", "image": IMAGE,
            "command": ["python3", "/opt/gpu-health/gpu-health.py", "quarantine"],
            "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],  # read-only root filesystem
            # one watch on the nodes: idle but for a GPU failure; memory for a page of 500 nodes (gpu-health.py)
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            "securityContext": restricted,
            "volumeMounts": [{"name": "scripts", "mountPath": "/opt/gpu-health", "readOnly": True}]}],
        "volumes": [{"name": "scripts", "configMap": {"name": NAME, "defaultMode": 0o555}}],
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(CONTROLLER, NAMESPACE, labels),
            # one replica, replaced only after the old one is gone (Recreate): see the module's docstring
            # on why no leader election
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": {**labels}}, "spec": spec}}}


# What a bound service account token tells the API server about its pod's node: with the feature
# ServiceAccountTokenPodNodeInfo (alpha 1.29, beta and on by default since 1.30: pkg/features/
# kube_features.go), a token bound to a pod carries the pod's spec.nodeName, which the API server
# gives as this user-info extra (https://kubernetes.io/docs/reference/access-authn-authz/
# service-accounts-admin/#additional-metadata-in-pod-bound-tokens; k8s.io/apiserver
# pkg/authentication/serviceaccount NodeNameKey)
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# The NodeStatus fields besides conditions that exist since 1.30 (the policies' floor), which the
# checker may not change: a node's capacity and allocatable are what the scheduler places by, its
# addresses and kubelet endpoint where the API server sends exec and logs
# (https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/#NodeStatus)
STATUS_FIELDS = ("capacity", "allocatable", "addresses", "daemonEndpoints", "nodeInfo")


def _same(field: str) -> str:
    """CEL: the field (a path under object/oldObject) is unchanged, set or not."""
    return (f"has(object.{field}) == has(oldObject.{field}) && "
            f"(!has(object.{field}) || object.{field} == oldObject.{field})")


def _policy(name: str, resources: list[str], user: str, validations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from .tenancy import ADMISSION_API

    return [
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": meta(name),
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["UPDATE"], "resources": resources}]},
                  "matchConditions": [{"name": "caller", "expression": f"request.userInfo.username == '{user}'"}],
                  "validations": [{**v, "reason": "Forbidden"} for v in validations]}},
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": meta(name),
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def _checker_policy() -> list[dict[str, Any]]:
    """RBAC cannot say "your own node" nor "your own condition" (a ClusterRole names resources, never
    the caller's node or a field), so the checker's `patch nodes/status` is held by a
    ValidatingAdmissionPolicy: its service account may change only the node its pod runs on (the
    token's node-name extra), and there only its own condition: no other condition, no label or
    annotation (a status update may change metadata), no other status field. The API server drops a
    status update's spec changes itself (the nodes/status strategy keeps the old spec)."""
    extra = f"request.userInfo.extra['{NODE_NAME_EXTRA}']"
    conds = "(has({o}.status.conditions) ? {o}.status.conditions : [])"
    new_c, old_c = conds.format(o="object"), conds.format(o="oldObject")
    others = f"filter(c, c.type != '{CONDITION}')"
    return _policy(f"orchgen-{NAME}-own-node", ["nodes/status"], f"system:serviceaccount:{NAMESPACE}:{NAME}", [
        {"expression": f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && size({extra}) == 1 && "
                       f"{extra}[0] == object.metadata.name",
         "message": "the GPU health check may change only the node its own pod runs on"},
        {"expression": f"{new_c}.{others}.all(c, c in {old_c}) && {old_c}.{others}.all(c, c in {new_c})",
         "message": f"the GPU health check may set only the {CONDITION} condition"},
        {"expression": " && ".join([_same("metadata.labels"), _same("metadata.annotations"), "object.spec == oldObject.spec",
                                    *(_same(f"status.{f}") for f in STATUS_FIELDS)]),
         "message": f"the GPU health check may change nothing but its {CONDITION} condition"},
    ])


def _quarantine_policy() -> list[dict[str, Any]]:
    """The controller's `patch nodes` (cluster-wide: it must reach every GPU node) held to quarantining
    a node its checker reports unhealthy: cordon it (never uncordon), add the health taint (never
    remove or change another), set the health annotation (no other annotation or label)."""
    ann = "(has({o}.metadata.annotations) ? {o}.metadata.annotations : {{}})"
    new_ann, old_ann = ann.format(o="object"), ann.format(o="oldObject")
    taints = "(has({o}.spec.taints) ? {o}.spec.taints : [])"
    new_t, old_t = taints.format(o="object"), taints.format(o="oldObject")
    return _policy(f"orchgen-{CONTROLLER}", ["nodes"], f"system:serviceaccount:{NAMESPACE}:{CONTROLLER}", [
        {"expression": f"has(oldObject.status.conditions) && oldObject.status.conditions.exists(c, "
                       f"c.type == '{CONDITION}' && c.status == 'False')",
         "message": f"the GPU quarantine may change only a node whose {CONDITION} condition is False"},
        {"expression": _same("metadata.labels"), "message": "the GPU quarantine may not change a node's labels"},
        {"expression": f"{new_ann}.all(k, k == '{ANNOTATION}' || (k in {old_ann} && {old_ann}[k] == {new_ann}[k])) "
                       f"&& {old_ann}.all(k, k == '{ANNOTATION}' || k in {new_ann})",
         "message": f"the GPU quarantine may set only the {ANNOTATION} annotation"},
        {"expression": f"{old_t}.all(t, t in {new_t}) && {new_t}.all(t, t in {old_t} || "
                       f"(t.key == '{TAINT['key']}' && t.effect == '{TAINT['effect']}'))",
         "message": f"the GPU quarantine may only add the {TAINT['key']} taint"},
        {"expression": "!(has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable) || "
                       "(has(object.spec.unschedulable) && object.spec.unschedulable)",
         "message": "the GPU quarantine may cordon a node, never uncordon it"},
    ])


def _policies(plan: Plan) -> list[dict[str, Any]]:
    """[] before Kubernetes 1.30 (no v1 policy API, no node claim in the token)."""
    from .tenancy import policies_available

    return [*_checker_policy(), *_quarantine_policy()] if policies_available(plan) else []


def _rbac(name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    role = f"orchgen-{name}"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, NAMESPACE)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(role), "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(role),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]},
    ]


def objects(plan: Plan) -> list[dict[str, Any]]:
    pools = gpu_pools(plan)
    if not pools:
        return []
    # Pod Security `privileged`: baseline refuses the checker's added SYSLOG capability (Pod Security
    # Standards, "Capabilities"); the namespace holds the checker and the controller only, and tenants
    # have no Role in it. Never pruned, as every namespace orchgen writes (tenancy.NO_PRUNE)
    ns = meta(NAMESPACE, labels={"pod-security.kubernetes.io/enforce": "privileged"}, annotations=dict(NO_PRUNE))
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": ns},
        # the checker: get and patch its node's status (the condition), nothing else, no list, no other
        # resource (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources:
        # a subresource is named apart); which node and which field: _checker_policy
        *_rbac(NAME, [{"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["get", "patch"]}]),
        # the controller: list and watch the nodes (their conditions), get and patch them (cordon, taint,
        # annotate); what it may change: _quarantine_policy
        *_rbac(CONTROLLER, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]}]),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(NAME, NAMESPACE), "data": scripts(plan)},
        *[daemonset(plan, s) for s in pools],
        controller(plan, pools),
        *_policies(plan),
    ]


def readme(plan: Plan) -> dict[str, Any] | None:
    pools = gpu_pools(plan)
    if not pools:
        return None
    return {"namespace": NAMESPACE, "taint": TAINT, "annotation": ANNOTATION, "condition": CONDITION,
            "controller": CONTROLLER, "controller_pool": controller_pool(plan, pools), "interval": plan.slurm_options.health_check_interval,
            "pools": [(s.pool, s.gpus_per_node, gpu_type(s)) for s in pools]}
