"""GPU health on the Kubernetes plane (manifests/38-gpu-health.yaml; options.gpu_health).

What upstream offers, and why this: NVIDIA NVSentinel (health monitors, fault quarantine that
cordons and taints, node drainer) is the complete answer, but it ships as a Helm chart that neither
../shared/charts nor this project's tests can render, so a site that runs it sets
`options.gpu_health: site` and gets none of this. The GPU Operator's own health feature (the device
plugin's XID watch) only marks a GPU unhealthy in the node's allocatable; it never cordons or taints.
node-problem-detector's custom plugins report a node condition and also leave the node schedulable
(remediation is left to another controller: NPD README, "Remedy Systems"). So orchgen writes the
smallest thing that does the remediation itself, on the check Slurm's NHC already runs:

- a DaemonSet `gpu-health-<pool>` per GPU pool, on that pool's nodes (its taints tolerated, the
  health taint not: a quarantined node gets no new checker either, the node waits for a person);
- each pod runs gpu-quarantine.py (templates/kubernetes/gpu-quarantine.py.j2) every
  options.slurm.health_check_interval seconds (NHC's interval on Slurm), which runs gpu-health.sh
  COUNT TYPE (templates/slurm/gpu-health.sh.j2, the very script nhc.conf runs: one source of truth
  for the check: GPU count and type, uncorrectable ECC errors, row remapping pending or failed, pages
  pending retirement, and the kernel log's Xids, which is why the pod keeps CAP_SYSLOG, below) and,
  on its first FAIL line, cordons its own node and taints it
  nvidia.com/gpu-health=failed:NoSchedule, the line kept in the annotation orchgen.io/gpu-health;
- a ServiceAccount whose ClusterRole allows `get` and `patch` on nodes and nothing else, and a
  ValidatingAdmissionPolicy that holds that `patch` to the pod's own node and to quarantining it
  (`_own_node_policy`: RBAC cannot name the caller's node);
- the one privilege the check needs: reading the kernel log (dmesg: syslog(2), which the kernel allows
  only with CAP_SYSLOG under kernel.dmesg_restrict=1, the default on Debian and Ubuntu), so the
  container runs as root with every capability dropped but SYSLOG, no privilege escalation and a
  read-only root. Pod Security `baseline` does not allow adding SYSLOG, so the namespace is
  `privileged`, holding this DaemonSet only.
No pod orchgen writes tolerates the health taint (tests/test_gpu_health.py holds every pod template
of the bundle to that), so a broken GPU node takes no new work until someone clears it.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from ..templating import render_template
from .common import meta, node_selector, slices, tolerations
from .tenancy import NO_PRUNE

NAMESPACE = "orchgen-gpu-health"  # catalog.ORCHGEN_NAMESPACE_PREFIX: no tenant may take it
NAME = "gpu-health"
# The quarantine taint: NVIDIA's nvidia.com/ domain as NVSentinel's and the GPU Operator's taints
# use it, NoSchedule so running pods finish or fail on their own (a NoExecute taint would evict
# every pod, including the DaemonSets that keep the node observable).
TAINT = {"key": "nvidia.com/gpu-health", "value": "failed", "effect": "NoSchedule"}
ANNOTATION = "orchgen.io/gpu-health"  # the FAIL line that quarantined the node
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
            "gpu-quarantine.py": render_template("kubernetes/gpu-quarantine.py.j2", cluster=plan.name,
                                                 namespace=NAMESPACE, taint=TAINT,
                                                 annotation=ANNOTATION).decode()}


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
            "command": ["python3", "/opt/gpu-health/gpu-quarantine.py"], "env": env,
            # one nvidia-smi every few minutes: a sliver of CPU; memory for Python and nvidia-smi
            "resources": {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"memory": "128Mi"}},
            "securityContext": narrow,
            "volumeMounts": [{"name": "scripts", "mountPath": "/opt/gpu-health", "readOnly": True}]}],
        "volumes": [{"name": "scripts", "configMap": {"name": NAME, "defaultMode": 0o555}}],
    }
    tols = tolerations(plan, s.pool)
    if tols:
        spec["tolerations"] = tols
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": meta(f"{NAME}-{s.pool}", NAMESPACE, labels),
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": {**labels}}, "spec": spec}}}


# What a bound service account token tells the API server about its pod's node (Kubernetes 1.30+,
# ServiceAccountTokenPodNodeInfo: the token's node claim becomes this user-info extra;
# https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-tokens)
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


def _own_node_policy(plan: Plan) -> list[dict[str, Any]]:
    """RBAC cannot say "your own node" (a ClusterRole names resources, never the caller's node), so the
    checker's `patch nodes` is held by a ValidatingAdmissionPolicy: its service account may change only
    the node its pod runs on (the token's node-name extra), and only to quarantine it: cordon it (never
    uncordon), add the health taint (never remove or change another), set the health annotation (no other
    annotation or label). [] before Kubernetes 1.30 (no v1 policy API, no node claim in the token)."""
    from .tenancy import ADMISSION_API, policies_available

    if not policies_available(plan):
        return []
    name = f"orchgen-{NAME}-own-node"
    user = f"system:serviceaccount:{NAMESPACE}:{NAME}"
    extra = f"request.userInfo.extra['{NODE_NAME_EXTRA}']"
    ann = "(has({o}.metadata.annotations) ? {o}.metadata.annotations : {{}})"
    new_ann, old_ann = ann.format(o="object"), ann.format(o="oldObject")
    lab = "(has({o}.metadata.labels) ? {o}.metadata.labels : {{}})"
    taints = "(has({o}.spec.taints) ? {o}.spec.taints : [])"
    new_t, old_t = taints.format(o="object"), taints.format(o="oldObject")
    validations = [
        {"expression": f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && size({extra}) == 1 && "
                       f"{extra}[0] == object.metadata.name",
         "message": "the GPU health check may change only the node its own pod runs on", "reason": "Forbidden"},
        {"expression": f"{lab.format(o='object')} == {lab.format(o='oldObject')}",
         "message": "the GPU health check may not change a node's labels", "reason": "Forbidden"},
        {"expression": f"{new_ann}.all(k, k == '{ANNOTATION}' || (k in {old_ann} && {old_ann}[k] == {new_ann}[k])) "
                       f"&& {old_ann}.all(k, k == '{ANNOTATION}' || k in {new_ann})",
         "message": f"the GPU health check may set only the {ANNOTATION} annotation", "reason": "Forbidden"},
        {"expression": f"{old_t}.all(t, t in {new_t}) && {new_t}.all(t, t in {old_t} || "
                       f"(t.key == '{TAINT['key']}' && t.effect == '{TAINT['effect']}'))",
         "message": f"the GPU health check may only add the {TAINT['key']} taint", "reason": "Forbidden"},
        {"expression": "!(has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable) || "
                       "(has(object.spec.unschedulable) && object.spec.unschedulable)",
         "message": "the GPU health check may cordon a node, never uncordon it", "reason": "Forbidden"},
    ]
    return [
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": meta(name),
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["UPDATE"], "resources": ["nodes"]}]},
                  "matchConditions": [{"name": "gpu-health-checker",
                                       "expression": f"request.userInfo.username == '{user}'"}],
                  "validations": validations}},
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": meta(name),
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def objects(plan: Plan) -> list[dict[str, Any]]:
    pools = gpu_pools(plan)
    if not pools:
        return []
    # Pod Security `privileged`: baseline refuses the added SYSLOG capability (Pod Security Standards,
    # "Capabilities"); the namespace holds the checker only, and tenants have no Role in it. Never
    # pruned, as every namespace orchgen writes (tenancy.NO_PRUNE)
    ns = meta(NAMESPACE, labels={"pod-security.kubernetes.io/enforce": "privileged"}, annotations=dict(NO_PRUNE))
    role = f"orchgen-{NAME}"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": ns},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME, NAMESPACE)},
        # get: read its node's taints; patch: cordon, taint and annotate it. Nothing else (no list,
        # no other resource): https://kubernetes.io/docs/reference/access-authn-authz/rbac/. Which node
        # and which change: the admission policy below (_own_node_policy)
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(role),
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(role),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(NAME, NAMESPACE), "data": scripts(plan)},
        *[daemonset(plan, s) for s in pools],
        *_own_node_policy(plan),
    ]


def readme(plan: Plan) -> dict[str, Any] | None:
    pools = gpu_pools(plan)
    if not pools:
        return None
    return {"namespace": NAMESPACE, "taint": TAINT, "annotation": ANNOTATION,
            "interval": plan.slurm_options.health_check_interval,
            "pools": [(s.pool, s.gpus_per_node, gpu_type(s)) for s in pools]}
