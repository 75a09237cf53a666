"""Checks across the two planes of a hybrid bundle, and of GPU counts across artifacts.

- no node is in both planes: slurm.conf's nodes (and plan.json's Slurm plane) against the nodes
  node-labels.sh gives to Kubernetes (and plan.json's Kubernetes plane); nodes that Kubernetes runs
  for Slurm (Slurm on Kubernetes) must carry a NoSchedule taint so ordinary pods stay off them;
- GRES for one pool is the same everywhere: slurm.conf's Gres=gpu:<type>:<n> for the pool's nodes,
  the Kubernetes plane's GPUs per node in plan.json, a Slinky NodeSet's extraConfMap.Gres and its
  slurmd `nvidia.com/gpu` limit (they disagree -> nodes come up with Gres=(null));
- no pod asks for more GPUs than a node of the pool it selects has;
- nodes known by name (bare metal): every flavor, pod and NodeSet selecting a pool selects exactly
  that pool's nodes on its plane as plan.json has them, by labels node-labels.sh sets;
- nodes known by their node group's labels (a cloud, plan.json `platform.node_selectors`): nothing
  selects a node by `kubernetes.io/hostname` or names one, and no node name of the plan (invented
  there, for counting only) appears anywhere under kubernetes/ or gitops/.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..spec import hostlist
from ..spec.fabric import LABEL_HOSTNAME, LABEL_PLANE, LABEL_POOL
from ..decide.plan import KUBE_PLANES
from .bundle_view import Bundle, Doc, Finding, error, as_list
from .kube_refs import SCRIPT, pod_templates, set_elsewhere
from .slinky_checks import nodeset_gres, slurm_values
from .slurm_checks import CONF, load_conf

GPU = "nvidia.com/gpu"
PLAN = "plan.json"


def _expand_all(exprs: Any) -> list[str]:
    out: list[str] = []
    for expr in exprs if isinstance(exprs, list) else [exprs] if isinstance(exprs, str) else []:
        try:
            out += hostlist.expand(expr)
        except (hostlist.HostlistError, TypeError):
            continue
    return out


def _planes(bundle: Bundle) -> dict[str, dict[str, Any]]:
    planes = bundle.plan.get("planes")
    return {k: v for k, v in planes.items() if isinstance(v, dict)} if isinstance(planes, dict) else {}


def _short(nodes: set[str] | list[str]) -> str:
    text = hostlist.compress(sorted(nodes))
    return text if len(text) <= 120 else text[:117] + "..."


def check(bundle: Bundle, kube_docs: list[Doc]) -> Iterator[Finding]:
    yield from _one_plane_per_node(bundle)
    yield from _gres_per_pool(bundle)
    yield from _nodeset_gres(bundle)
    yield from _pods_fit(bundle, kube_docs)
    if _cloud_selectors(bundle):
        yield from _no_node_names(bundle, kube_docs)
    else:
        yield from _selectors_cover_their_pool(bundle, kube_docs)


def _one_plane_per_node(bundle: Bundle) -> Iterator[Finding]:
    conf = load_conf(bundle)
    labels = bundle.node_labels
    slurm = conf.node_names if conf else set()
    kube = labels.plane_nodes(kube=True) if labels else set()
    both = slurm & kube
    if both:
        first = min(both, key=lambda n: labels.line[n])  # type: ignore[union-attr]
        yield error(SCRIPT, labels.line[first],  # type: ignore[union-attr]
                    f"nodes in both planes: {_short(both)} are Slurm nodes (slurm/slurm.conf:"
                    f"{conf.node_line[first]}) and this script gives them to Kubernetes")  # type: ignore[union-attr]
    planes = _planes(bundle)
    plan_slurm = set(_expand_all(planes.get("slurm", {}).get("nodes")))
    for name in KUBE_PLANES:
        overlap = plan_slurm & set(_expand_all(planes.get(name, {}).get("nodes")))
        if overlap:
            yield error(PLAN, 0, f"nodes in both planes: {_short(overlap)} are in planes.slurm and planes.{name}")
    if labels:
        for node, node_labels in labels.labels.items():
            if node_labels.get(LABEL_PLANE) == "slurm" and not any(
                    t.endswith((":NoSchedule", ":NoExecute")) for t in labels.taints.get(node, [])):
                yield error(SCRIPT, labels.line[node], f"node {node} is labelled {LABEL_PLANE}=slurm but not "
                                                       "tainted NoSchedule: Kubernetes pods would land on Slurm's node")
                break
        for group in labels.groups:
            if group.labels.get(LABEL_PLANE) == "slurm" and not any(
                    t.endswith((":NoSchedule", ":NoExecute")) for t in group.taints):
                yield error(SCRIPT, group.line, f"nodes with {_pairs(group.labels)} are labelled {LABEL_PLANE}=slurm "
                                                "but not tainted NoSchedule: Kubernetes pods would land on Slurm's nodes")


def _pool_of(bundle: Bundle) -> dict[str, str]:
    """node -> pool, from plan.json's fabric (else from the pool labels of node-labels.sh)."""
    out: dict[str, str] = {}
    fabric = bundle.plan.get("fabric")
    for leaf in (fabric.get("leaves") if isinstance(fabric, dict) else None) or []:
        if isinstance(leaf, dict) and isinstance(leaf.get("pool"), str):
            for node in _expand_all(leaf.get("nodes")):
                out[node] = leaf["pool"]
    if not out and bundle.node_labels:
        out = {n: lb[LABEL_POOL] for n, lb in bundle.node_labels.labels.items() if LABEL_POOL in lb}
    return out


def _kube_gpus(bundle: Bundle) -> dict[str, tuple[str | None, int]]:
    """pool -> (GPU type, GPUs per node) on the Kubernetes plane, from plan.json."""
    out = {}
    for name in KUBE_PLANES:
        for pool in _planes(bundle).get(name, {}).get("pools") or []:
            if isinstance(pool, dict) and isinstance(pool.get("pool"), str):
                gpu = pool.get("gpu") if isinstance(pool.get("gpu"), dict) else {}
                out[pool["pool"]] = (gpu.get("type"), int(gpu.get("count") or 0))
    return out


def _gres_per_pool(bundle: Bundle) -> Iterator[Finding]:
    conf = load_conf(bundle)
    kube = _kube_gpus(bundle)
    if conf is None or not kube:
        return
    pool_of = _pool_of(bundle)
    reported: set[str] = set()
    for node_line in conf.nodes:
        gpus = {t: c for (n, t), c in node_line.gres.items() if n == "gpu"}
        for pool in sorted({pool_of[n] for n in node_line.names if n in pool_of} & set(kube) - reported):
            ktype, kcount = kube[pool]
            scount = sum(gpus.values())
            stypes = {t for t in gpus if t}
            if scount != kcount or (stypes and ktype and stypes != {ktype}):
                reported.add(pool)
                slurm = ",".join(f"gpu:{t}:{c}" if t else f"gpu:{c}" for t, c in gpus.items()) or "no GPUs"
                yield error(CONF, node_line.line, f"pool {pool}: Slurm has Gres={slurm} per node but the "
                                                  f"Kubernetes plane has {kcount}x {ktype or 'GPU'} per node "
                                                  "(plan.json): the same pool must have the same GRES")


def _nodeset_gres(bundle: Bundle) -> Iterator[Finding]:
    """Slinky: nodesets.<n>.extraConfMap.Gres and slurmd.resources.limits[nvidia.com/gpu] agree,
    with each other and with the pool's GPUs on the Kubernetes plane."""
    doc = slurm_values(bundle)
    nodesets = doc.data.get("nodesets") if doc is not None else None
    if not isinstance(nodesets, dict):
        return
    kube = _kube_gpus(bundle)
    for name, ns in nodesets.items():
        if not isinstance(ns, dict):
            continue
        gres_text, all_gres = nodeset_gres(ns)
        gres = {t: c for (n, t), c in all_gres.items() if n == "gpu"}
        limits = ((ns.get("slurmd") or {}).get("resources") or {}).get("limits") or {} \
            if isinstance(ns.get("slurmd"), dict) else {}
        limit = int(limits.get(GPU, 0) or 0) if str(limits.get(GPU, 0)).isdigit() else None
        at = doc.line_of(["nodesets", name])  # type: ignore[union-attr]
        if sum(gres.values()) != (limit or 0):
            yield error(doc.path, at, f"NodeSet {name}: extraConfMap.Gres={gres_text or 'unset'} but slurmd "  # type: ignore[union-attr]
                                      f"limits {GPU}={limits.get(GPU, 'unset')}: they must agree or the "
                                      "nodes come up with Gres=(null)")
            continue
        pool = _get_pool(ns)
        if pool in kube and gres and (sum(gres.values()) != kube[pool][1]
                                      or {t for t in gres if t} - {kube[pool][0]}):
            yield error(doc.path, at, f"NodeSet {name}: Gres={gres_text} but pool {pool} has "  # type: ignore[union-attr]
                                      f"{kube[pool][1]}x {kube[pool][0]} per node (plan.json)")


def _get_pool(nodeset: dict[str, Any]) -> str | None:
    sel = (nodeset.get("podSpec") or {}).get("nodeSelector") if isinstance(nodeset.get("podSpec"), dict) else None
    pool = sel.get(LABEL_POOL) if isinstance(sel, dict) else None
    return pool if isinstance(pool, str) else None


def _pods_fit(bundle: Bundle, docs: list[Doc]) -> Iterator[Finding]:
    kube = _kube_gpus(bundle)
    if not kube:
        return
    for doc in docs:
        if not doc.path.startswith("kubernetes/"):
            continue
        for path, tmpl in pod_templates(doc):
            spec = tmpl.get("spec") if isinstance(tmpl.get("spec"), dict) else {}
            sel = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else {}
            pool = sel.get(LABEL_POOL)
            if not isinstance(pool, str) or pool not in kube:  # a hand-edited bundle may hold anything
                continue
            per_pod: dict[int, int] = defaultdict(int)
            for i, c in enumerate(as_list(spec.get("containers"))):
                res = c.get("resources") if isinstance(c, dict) and isinstance(c.get("resources"), dict) else {}
                limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
                if str(limits.get(GPU, "")).isdigit():
                    per_pod[i] = int(limits[GPU])
            if sum(per_pod.values()) > kube[pool][1]:
                yield error(doc.path, doc.line_of([*path, "spec", "containers"]),
                            f"{doc.label}: a pod asks for {sum(per_pod.values())} GPUs but nodes of pool {pool} "
                            f"have {kube[pool][1]} (it would never schedule)")


def _pairs(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _cloud_selectors(bundle: Bundle) -> dict[str, Any]:
    platform = bundle.plan.get("platform")
    selectors = platform.get("node_selectors") if isinstance(platform, dict) else None
    return selectors if isinstance(selectors, dict) else {}


def _selections(bundle: Bundle, docs: list[Doc]) -> Iterator[tuple[Doc, list[Any], dict[str, Any]]]:
    """(document, path, node selector) of everything that picks nodes by label: ResourceFlavors, pod
    templates, Soperator NodeSets and Slinky's NodeSets (the slurm release's values)."""
    for doc in docs:
        if not doc.path.startswith("kubernetes/") or not isinstance(doc.data.get("spec"), dict):
            continue
        spec = doc.data["spec"]
        if doc.kind == "ResourceFlavor" and isinstance(spec.get("nodeLabels"), dict):
            yield doc, ["spec", "nodeLabels"], spec["nodeLabels"]
        if doc.kind == "NodeSet" and isinstance(spec.get("nodeSelector"), dict):
            yield doc, ["spec", "nodeSelector"], spec["nodeSelector"]
        for path, tmpl in pod_templates(doc):
            sel = tmpl.get("spec", {}).get("nodeSelector") if isinstance(tmpl.get("spec"), dict) else None
            if isinstance(sel, dict):
                yield doc, [*path, "spec", "nodeSelector"], sel
    values = slurm_values(bundle)
    nodesets = values.data.get("nodesets") if values is not None else None
    for name, ns in (nodesets or {}).items() if isinstance(nodesets, dict) else ():
        pod = ns.get("podSpec") if isinstance(ns, dict) else None
        sel = pod.get("nodeSelector") if isinstance(pod, dict) else None
        if isinstance(sel, dict):
            yield values, ["nodesets", name, "podSpec", "nodeSelector"], sel  # type: ignore[misc]


def _plane_pool_nodes(bundle: Bundle) -> dict[tuple[str, str], set[str]]:
    """(plane, pool) -> that pool's nodes on that plane, from plan.json ('kubernetes' covers k3s)."""
    out: dict[tuple[str, str], set[str]] = {}
    for name, plane in _planes(bundle).items():
        key = "slurm" if name == "slurm" else "kubernetes"
        for pool in as_list(plane.get("pools")):
            if isinstance(pool, dict) and isinstance(pool.get("pool"), str):
                out.setdefault((key, pool["pool"]), set()).update(_expand_all(pool.get("nodes")))
    return out


def _selectors_cover_their_pool(bundle: Bundle, docs: list[Doc]) -> Iterator[Finding]:
    labels = bundle.node_labels
    expected = _plane_pool_nodes(bundle)
    if labels is None or not expected:
        return
    for doc, path, selector in _selections(bundle, docs):
        pool = selector.get(LABEL_POOL)
        plane = str(selector.get(LABEL_PLANE, "kubernetes"))
        want = expected.get((plane, str(pool)))
        if not isinstance(pool, str) or want is None:
            continue
        wanted = {str(k): str(v) for k, v in selector.items() if not set_elsewhere(str(k))}
        got = {n for n, lb in labels.labels.items() if all(lb.get(k) == v for k, v in wanted.items())}
        if got != want:
            extra, missing = sorted(got - want), sorted(want - got)
            detail = "; ".join(x for x in (f"also {_short(extra)}" if extra else "",
                                           f"not {_short(missing)}" if missing else "") if x)
            yield error(doc.path, doc.line_of(path),
                        f"{doc.label}: selects {len(got)} node(s) by {_pairs(wanted)} in {SCRIPT}, but pool {pool} "
                        f"has {len(want)} on the {plane} plane (plan.json): {detail}")


_TOKEN = re.compile(r"[A-Za-z0-9][-A-Za-z0-9.]*[A-Za-z0-9]|[A-Za-z0-9]")


def _no_node_names(bundle: Bundle, docs: list[Doc]) -> Iterator[Finding]:
    for doc in docs:
        if not doc.path.startswith(("kubernetes/", "gitops/")):
            continue
        for path, _ in _hostname_selections(doc):
            yield error(doc.path, doc.line_of(path), f"{doc.label}: selects a node by name ({LABEL_HOSTNAME}) "
                                                     "although the provider names the nodes: select its pool's labels")
    invented: set[str] = set()
    for plane in _planes(bundle).values():
        invented.update(_expand_all(plane.get("nodes")))
    if not invented:
        return
    for path in bundle.files:
        if not path.startswith(("kubernetes/", "gitops/")):
            continue
        text = bundle.text(path) or ""
        hits = sorted(set(_TOKEN.findall(text)) & invented)
        if hits:
            line = next(i for i, ln in enumerate(text.splitlines(), 1) if hits[0] in _TOKEN.findall(ln))
            yield error(path, line, f"names node(s) {_short(hits)}, which only count nodes in plan.json: the "
                                    "provider names the nodes, select them by their pool's labels")


def _hostname_selections(doc: Doc) -> Iterator[tuple[list[Any], Any]]:
    spec = doc.data.get("spec") if isinstance(doc.data.get("spec"), dict) else {}
    if doc.kind == "ResourceFlavor" and LABEL_HOSTNAME in (spec.get("nodeLabels") or {}):
        yield ["spec", "nodeLabels", LABEL_HOSTNAME], None
    if doc.kind == "HyperNode":
        for i, m in enumerate(as_list(spec.get("members"))):
            if isinstance(m, dict) and m.get("type") == "Node" and isinstance(m.get("selector"), dict) \
                    and ("exactMatch" in m["selector"] or "regexMatch" in m["selector"]):
                yield ["spec", "members", i], None
    for path, tmpl in pod_templates(doc):
        pod = tmpl.get("spec") if isinstance(tmpl.get("spec"), dict) else {}
        if LABEL_HOSTNAME in (pod.get("nodeSelector") or {}) or pod.get("nodeName"):
            yield [*path, "spec"], None
