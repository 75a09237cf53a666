"""The Kubernetes impact of a re-plan: per object of kubernetes/manifests/ and kubernetes/workloads/,
created / changed in place / replaced (a content-named object whose content moved: a new name, the
old one pruned) / deleted; per custom resource, whether its change recreates pods; per Helm release
of kubernetes/helm/releases.yaml, whether it is upgraded and which of its workloads roll.

Which workloads a release's new values roll is read off the real chart: both values files are
rendered with `helm template` (the chart unpacked at <charts>/<chart>/<version>, ORCHGEN_CHARTS or
`plan --charts`), and the pod templates of its DaemonSets, Deployments and StatefulSets (and a
Slinky NodeSet's) are compared; a DaemonSet rolls on every node its selector matches. Without helm
or the chart, the output says so instead of guessing. A GPU Operator ClusterPolicy whose spec
changes makes the operator roll the DaemonSets of the changed components on every GPU node.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KUBE_ACTIONS = ("unchanged", "created", "changed", "upgraded", "replaced", "deleted", "rollout", "recreates_pods",
                "drain", "refused")
DISRUPTIVE = {"replaced", "deleted", "rollout", "recreates_pods", "drain", "refused"}
OBJECT_DIRS = ("kubernetes/manifests/", "kubernetes/workloads/")
RELEASES = "kubernetes/helm/releases.yaml"
POD_OWNERS = {"DaemonSet", "Deployment", "StatefulSet", "NodeSet"}
HASH = re.compile(r"-[0-9a-f]{8}$")  # generator/render/kubernetes/common.py content_name's suffix

# Where the facts come from
RAY_CITE = "https://docs.ray.io/en/latest/cluster/kubernetes/getting-started.html"  # "Ray doesn't natively support
# rolling upgrades; thus, you'll need to manually shut down and create a new RayCluster"
NODESET_CITE = "slurm-operator-crds 1.2.1 slinky.slurm.net_nodesets.yaml: updateStrategy, default RollingUpdate"
CLUSTERPOLICY_CITE = ("GPU Operator: the operator owns one DaemonSet per ClusterPolicy component (driver, "
                      "toolkit, devicePlugin, dcgmExporter, ...) on the GPU nodes and updates it from the policy")
# A Kueue Workload's admission names its flavor (status.admission.podSetAssignments[].flavors), and a
# ClusterQueue counts usage only of the flavors it lists: once the queues name a new flavor, workloads
# admitted on the old one keep running but drop out of their tenant's usage (quota, borrowing and
# fair sharing undercount). The old flavor's finalizer kueue.x-k8s.io/resource-in-use waits only for
# the ClusterQueues that list it, not for its workloads (Kueue 0.19.2 pkg/controller/core/
# resourceflavor_controller.go), so the prune deletes it under them.
FLAVOR_CITE = "https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/"
ROLL_CITE = ("Kubernetes: a change to a DaemonSet's or Deployment's .spec.template triggers a rollout "
             "(https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#updating-a-deployment)")


@dataclass(frozen=True)
class KubeChange:
    file: str
    object: str  # "Kind namespace/name", or "release <name>"
    action: str  # one of KUBE_ACTIONS
    detail: str = ""


def _docs(text: str) -> list[dict[str, Any]]:
    try:
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind")]
    except yaml.YAMLError:
        return []


def _ident(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    group = str(doc.get("apiVersion", "")).rpartition("/")[0]
    return group, str(doc["kind"]), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _label(key: tuple[str, str, str, str]) -> str:
    return f"{key[1]} {key[2]}/{key[3]}" if key[2] else f"{key[1]} {key[3]}"


def _objects(files: dict[str, str]) -> dict[tuple[str, str, str, str], tuple[str, dict[str, Any]]]:
    out = {}
    for path in sorted(files):
        if path.startswith(OBJECT_DIRS) and path.endswith((".yaml", ".yml")):
            for doc in _docs(files[path]):
                out.setdefault(_ident(doc), (path, doc))
    return out


def _templates(doc: dict[str, Any]) -> Any:
    """The pod templates a custom resource's operator makes pods from."""
    spec = doc.get("spec") or {}
    if doc["kind"] == "RayCluster":
        return [(spec.get("headGroupSpec") or {}).get("template"),
                [(g or {}).get("template") for g in spec.get("workerGroupSpecs") or []],
                spec.get("rayVersion")]
    if doc["kind"] in POD_OWNERS:
        return spec.get("template")
    return None


def object_changes(old: dict[str, str], new: dict[str, str]) -> list[KubeChange]:
    a, b = _objects(old), _objects(new)
    out: list[KubeChange] = []
    gone, came = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    replaced: set = set()
    for g in gone:
        if not HASH.search(g[3]):
            continue
        for c in came:
            if c[:3] == g[:3] and HASH.sub("", c[3]) == HASH.sub("", g[3]) and c not in replaced:
                replaced |= {g, c}
                out.append(KubeChange(b[c][0], _label(c), "replaced",
                                      f"content-named: {g[3]} -> {c[3]} (created, then the old one pruned)"))
                break
    for g in gone:
        if g not in replaced:
            out.append(KubeChange(a[g][0], _label(g), "deleted", "pruned by the next sync"))
        if g[:2] == ("kueue.x-k8s.io", "ResourceFlavor"):
            new_name = next((c[3] for c in came if c[:3] == g[:3] and HASH.sub("", c[3]) == HASH.sub("", g[3])), None)
            instead = f"the ClusterQueues name {new_name} instead" if new_name else "no ClusterQueue names it any more"
            out.append(KubeChange(a[g][0], _label(g), "drain",
                                  f"{instead}: workloads Kueue admitted on {g[3]} keep running but leave their tenant's "
                                  f"quota usage (a ClusterQueue counts only the flavors it lists). Before applying, "
                                  f"drain them: `kubectl get workloads -A -o wide` shows each one's flavor; delete or "
                                  f"let finish the ones on {g[3]} (a Job is requeued on the new flavor when re-created) "
                                  f"({FLAVOR_CITE})"))
    for c in came:
        if c not in replaced:
            out.append(KubeChange(b[c][0], _label(c), "created"))
    for key in sorted(a.keys() & b.keys()):
        (pa, da), (pb, db) = a[key], b[key]
        if da == db:
            continue
        ta, tb = _templates(da), _templates(db)
        if ta != tb and key[1] == "RayCluster":
            out.append(KubeChange(pb, _label(key), "recreates_pods",
                                  f"its pod templates changed; KubeRay does not roll a RayCluster: delete and "
                                  f"recreate it to apply ({RAY_CITE})"))
        elif ta != tb and key[1] in POD_OWNERS:
            out.append(KubeChange(pb, _label(key), "rollout", f"pod template changed: {_where(db)} ({ROLL_CITE})"))
        else:
            out.append(KubeChange(pb, _label(key), "changed", "updated in place"))
    return out


def _where(doc: dict[str, Any], gpu_nodes: int | None = None) -> str:
    """Which pods roll: a DaemonSet's on every node its selector matches."""
    spec = doc.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    if doc["kind"] == "DaemonSet":
        sel = pod.get("nodeSelector") or {}
        aff = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        what = ", ".join(f"{k}={v}" for k, v in sorted(sel.items())) or ("its node affinity" if aff else "")
        gpu = any("nvidia.com/gpu" in str(x) for x in (sel, aff))
        count = f" ({gpu_nodes} GPU nodes in this plan)" if gpu and gpu_nodes else ""
        return f"rolls on every node {'matching ' + what if what else '(no node selector)'}{count}"
    if doc["kind"] == "NodeSet":
        return f"its {spec.get('replicas', '?')} slurmd pods roll ({NODESET_CITE})"
    return f"its {spec.get('replicas', 1)} replica(s) roll"


# ---- Helm ------------------------------------------------------------------------------------------


def helm_binary() -> str | None:
    return shutil.which("helm") or shutil.which("helm", path=str(Path(sys.executable).parent))


def charts_dir(explicit: str | Path | None = None) -> Path | None:
    where = explicit or os.environ.get("ORCHGEN_CHARTS")
    return Path(where) if where and Path(where).is_dir() else None


def _chart_dir(charts: Path | None, release: dict[str, Any]) -> Path | None:
    """<charts>/<chart>/<version> of a release; None where the bundle's name or version is a path
    (`../..`): a bundle never picks a folder outside the user's charts."""
    names = [release.get("chart"), release.get("version")]
    if charts is None or any(not isinstance(n, str) or not n or n in (".", "..") or "/" in n or "\\" in n
                             or "\0" in n for n in names):
        return None
    return charts / names[0] / names[1]


def render_chart(helm: str, chart: Path, name: str, namespace: str, values: str) -> list[dict[str, Any]] | str:
    """The objects `helm template` renders, or the error line."""
    with tempfile.TemporaryDirectory(prefix="orchgen-helm-") as tmp:
        vals = Path(tmp) / "values.yaml"
        vals.write_text(values)
        env = {**os.environ, "HELM_CACHE_HOME": tmp, "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp}
        proc = subprocess.run([helm, "template", name, str(chart), "-n", namespace, "-f", str(vals),
                               "--kube-version", "1.33"], capture_output=True, text=True, errors="replace", env=env,
                               timeout=120)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["helm template failed"])[-1]
    return _docs(proc.stdout)


def _releases(files: dict[str, str]) -> dict[tuple[str, str], dict[str, Any]]:
    try:
        data = yaml.safe_load(files.get(RELEASES, "")) or {}
    except yaml.YAMLError:
        return {}
    return {(str(r.get("name")), str(r.get("namespace"))): r for r in data.get("releases") or []
            if isinstance(r, dict)}


def _values(files: dict[str, str], rel: dict[str, Any]) -> str:
    return files.get(f"kubernetes/helm/{rel.get('values')}", "") if rel.get("values") else ""


def release_changes(old: dict[str, str], new: dict[str, str], charts: Path | None = None,
                    gpu_nodes: int | None = None) -> list[KubeChange]:
    a, b = _releases(old), _releases(new)
    out: list[KubeChange] = []
    for key in sorted(a.keys() - b.keys()):
        crds = ", ".join(map(str, a[key].get("crds") or [])) or "none"
        out.append(KubeChange(RELEASES, f"release {key[0]}", "deleted",
                              f"uninstalled ({key[1]}); its CRDs ({crds}) and their objects stay behind"))
    for key in sorted(b.keys() - a.keys()):
        out.append(KubeChange(RELEASES, f"release {key[0]}", "created", f"installed in {key[1]}"))
    helm = helm_binary()
    for key in sorted(a.keys() & b.keys()):
        ra, rb = a[key], b[key]
        va, vb = _values(old, ra), _values(new, rb)
        if ra == rb and va == vb:
            continue
        label, vfile = f"release {key[0]}", f"kubernetes/helm/{rb.get('values') or 'releases.yaml'}"
        version = "" if ra.get("version") == rb.get("version") else f" {ra.get('version')} -> {rb.get('version')}"
        out.append(KubeChange(vfile, label, "upgraded", f"helm upgrade{version}"))
        if helm is None:
            out.append(KubeChange(vfile, label, "upgraded", "helm is not installed: which of its workloads roll "
                                  "was not computed (install helm and set ORCHGEN_CHARTS to see it)"))
            continue
        dirs = [_chart_dir(charts, r) for r in (ra, rb)]
        if not all(d and d.is_dir() for d in dirs):
            out.append(KubeChange(vfile, label, "upgraded", f"chart {rb.get('chart')} {rb.get('version')} not found "
                                  "under ORCHGEN_CHARTS (or --charts): which of its workloads roll was not computed"))
            continue
        before = render_chart(helm, dirs[0], key[0], key[1], va)
        after = render_chart(helm, dirs[1], key[0], key[1], vb)
        if isinstance(before, str) or isinstance(after, str):
            out.append(KubeChange(vfile, label, "upgraded", f"helm template failed: {before if isinstance(before, str) else after}"))
            continue
        out += _rendered(vfile, label, before, after, gpu_nodes)
    return out


def _rendered(vfile: str, label: str, before: list[dict], after: list[dict], gpu_nodes: int | None) -> list[KubeChange]:
    ba, bb = {_ident(d): d for d in before}, {_ident(d): d for d in after}
    out: list[KubeChange] = []
    for key in sorted(ba.keys() & bb.keys()):
        da, db = ba[key], bb[key]
        if key[1] in POD_OWNERS and _templates(da) != _templates(db):
            action = "recreates_pods" if key[1] == "NodeSet" else "rollout"
            out.append(KubeChange(vfile, f"{label}: {_label(key)}", action, f"pod template changed: {_where(db, gpu_nodes)}"))
        elif key[1] == "ClusterPolicy" and da.get("spec") != db.get("spec"):
            sa, sb = da.get("spec") or {}, db.get("spec") or {}
            parts = sorted(k for k in sa.keys() | sb.keys() if _pod_side(sa.get(k)) != _pod_side(sb.get(k)))
            if not parts:  # only objects beside the pods (a ServiceMonitor) change
                out.append(KubeChange(vfile, f"{label}: {_label(key)}", "changed",
                                      "changed in place: no component's pods change (ServiceMonitor settings only)"))
                continue
            count = f" ({gpu_nodes} GPU nodes in this plan)" if gpu_nodes else ""
            out.append(KubeChange(vfile, f"{label}: {_label(key)}", "rollout",
                                  f"spec.{', spec.'.join(parts)} changed: the operator rolls the DaemonSets of "
                                  f"{'every component' if 'daemonsets' in parts else ', '.join(parts)} on every GPU "
                                  f"node{count} ({CLUSTERPOLICY_CITE})"))
    gone, came = sorted(ba.keys() - bb.keys()), sorted(bb.keys() - ba.keys())
    out += [KubeChange(vfile, f"{label}: {_label(k)}", "deleted", "no longer rendered") for k in gone]
    out += [KubeChange(vfile, f"{label}: {_label(k)}", "created", "newly rendered") for k in came]
    if not out:
        same = all(ba[k] == bb[k] for k in ba.keys() & bb.keys())
        out.append(KubeChange(vfile, label, "changed", "changed in place: no pod template of the rendered chart changes"
                              if not same else "the rendered chart is unchanged"))
    return out


# ClusterPolicy component settings that configure objects beside the component's DaemonSet, not its pods
NOT_POD_SIDE = ("serviceMonitor",)


def _pod_side(component: Any) -> Any:
    if isinstance(component, dict):
        return {k: v for k, v in component.items() if k not in NOT_POD_SIDE}
    return component


def kube_impact(old: dict[str, str], new: dict[str, str], charts: Path | None = None,
                gpu_nodes: int | None = None) -> list[KubeChange]:
    """Every Kubernetes-side change from bundle files `old` to `new` ({bundle path: text})."""
    out = object_changes(old, new) + release_changes(old, new, charts, gpu_nodes)
    return sorted(out, key=lambda c: (-KUBE_ACTIONS.index(c.action), c.file, c.object, c.detail))
