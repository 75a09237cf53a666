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
  there, for counting only) appears anywhere under kubernetes/ or gitops/;
- the fabric is plan.json's everywhere: each leaf switch of the Slurm tree lists only nodes that
  plan.json's fabric cables to that leaf (a leaf split between the planes lists a part of them), each
  spine only leaves cabled to it, each block is one of plan.json's NVLink domains, and
  node-labels.sh gives each node the leaf, spine and NVLink domain plan.json gives it.
- a pool's GPU GRES is written the same everywhere it appears (`_gres_names`): plan.json's
  `gpu: {type, count, mig}` gives `gpu:<type>:<count>`, or with MIG `gpu:<profile>:<count x per_gpu>`
  and the Kubernetes resource `nvidia.com/mig-<profile>`; slurm.conf's Gres, gres.conf (AutoDetect=nvml
  for MIG nodes, typed lines of that type), Slinky NodeSets' Gres and slurmd limits, Soperator
  NodeSets' static Gres and slurmd resources, and every `nvidia.com/mig-*` a quota, queue, flavor or
  pod names must say the same.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..spec import hostlist
from ..contract import LABEL_HOSTNAME, LABEL_LEAF, LABEL_NVLINK, LABEL_PLANE, LABEL_POOL, LABEL_SPINE, TOPOGRAPH_TIER
from ..contract import KUBE_PLANES
from .bundle_view import Bundle, Doc, Finding, error, as_list
from .kube_refs import SCRIPT, pod_templates, set_elsewhere
from .slinky_checks import nodeset_gres, slurm_values
from .slurm_checks import CONF, GRES, TOPO_CONF, TOPO_YAML, load_conf
from .slurm_conf import Topology, format_gres, parse_gres, parse_gres_conf, parse_topology_conf, parse_topology_yaml

MIG_PREFIX = "nvidia.com/mig-"

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
    yield from _fabric(bundle)
    yield from _gres_names(bundle, kube_docs)


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
    """node -> pool, from plan.json's planes (else from the pool labels of node-labels.sh)."""
    out: dict[str, str] = {}
    for plane in _planes(bundle).values():
        for pool in as_list(plane.get("pools")):
            if isinstance(pool, dict) and isinstance(pool.get("pool"), str):
                for node in _expand_all(pool.get("nodes")):
                    out[node] = pool["pool"]
    if not out and bundle.node_labels:
        out = {n: lb[LABEL_POOL] for n, lb in bundle.node_labels.labels.items() if LABEL_POOL in lb}
    return out


def _kube_gpus(bundle: Bundle) -> dict[str, tuple[str | None, int]]:
    """pool -> (GRES type, GPU devices per node) on the Kubernetes plane, from plan.json: with MIG the
    profile and count x per_gpu, as slurm.conf and the device plugin count them."""
    out = {}
    for name in KUBE_PLANES:
        for pool in _planes(bundle).get(name, {}).get("pools") or []:
            if isinstance(pool, dict) and isinstance(pool.get("pool"), str):
                want = _expected(pool.get("gpu"))
                out[pool["pool"]] = (want.type, want.count) if want else (None, 0)
    return out


class _Gres:
    """A pool's GPUs as every place must write them."""

    def __init__(self, gtype: str, count: int, mig: bool, typed: bool = True):
        self.type, self.count, self.mig, self.typed = gtype, count, mig, typed

    @property
    def text(self) -> str:
        return f"gpu:{self.type}:{self.count}" if self.typed else f"gpu:{self.count}"

    @property
    def resource(self) -> str:
        return f"{MIG_PREFIX}{self.type}" if self.mig else GPU


def _expected(gpu: Any) -> _Gres | None:
    """plan.json's `gpu` of a pool as its GRES: gpu:<type>:<count>, with MIG gpu:<profile>:<count x per_gpu>."""
    if not isinstance(gpu, dict) or not isinstance(gpu.get("type"), str):
        return None
    try:
        count = int(gpu.get("count") or 0)
        mig = gpu.get("mig") if isinstance(gpu.get("mig"), dict) else None
        if mig is not None:
            return _Gres(str(mig.get("profile")), count * int(mig.get("per_gpu") or 0), True)
    except (TypeError, ValueError):
        return None
    return _Gres(gpu["type"], count, False, gpu.get("typed") is not False)


def _planned_gres(bundle: Bundle) -> dict[str, tuple[str, _Gres]]:
    """pool -> (plane, its GRES) for every GPU pool of every plane in plan.json."""
    out = {}
    for plane, spec in _planes(bundle).items():
        for pool in spec.get("pools") or []:
            if isinstance(pool, dict) and isinstance(pool.get("pool"), str):
                want = _expected(pool.get("gpu"))
                if want is not None:
                    out[pool["pool"]] = (plane, want)
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
        gpu_limits = {str(k): v for k, v in limits.items() if str(k) == GPU or str(k).startswith(MIG_PREFIX)}
        limit = sum(int(v) for v in gpu_limits.values() if str(v).isdigit())
        at = doc.line_of(["nodesets", name])  # type: ignore[union-attr]
        if sum(gres.values()) != limit:
            shown = ", ".join(f"{k}={v}" for k, v in gpu_limits.items()) or f"{GPU}=unset"
            yield error(doc.path, at, f"NodeSet {name}: extraConfMap.Gres={gres_text or 'unset'} but slurmd "  # type: ignore[union-attr]
                                      f"limits {shown}: they must agree or the nodes come up with Gres=(null)")
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
                for key, value in limits.items():  # GPUs, or a MIG pool's instances
                    if (str(key) == GPU or str(key).startswith(MIG_PREFIX)) and str(value).isdigit():
                        per_pod[i] += int(value)
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
    labels = spec.get("nodeLabels")
    if doc.kind == "ResourceFlavor" and isinstance(labels, dict) and LABEL_HOSTNAME in labels:
        yield ["spec", "nodeLabels", LABEL_HOSTNAME], None
    if doc.kind == "HyperNode":
        for i, m in enumerate(as_list(spec.get("members"))):
            if isinstance(m, dict) and m.get("type") == "Node" and isinstance(m.get("selector"), dict) \
                    and ("exactMatch" in m["selector"] or "regexMatch" in m["selector"]):
                yield ["spec", "members", i], None
    for path, tmpl in pod_templates(doc):
        pod = tmpl.get("spec") if isinstance(tmpl.get("spec"), dict) else {}
        sel = pod.get("nodeSelector")
        if (isinstance(sel, dict) and LABEL_HOSTNAME in sel) or pod.get("nodeName"):
            yield [*path, "spec"], None


# ------------------------------------------------------------------ the fabric, as plan.json has it


class _Fabric:
    """plan.json's fabric: node -> leaf, leaf -> spines, NVLink domain -> nodes (all as read)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.leaf_of: dict[str, str] = {}
        self.spines_of: dict[str, list[str]] = {}
        for leaf in as_list(data.get("leaves")):
            if isinstance(leaf, dict) and isinstance(leaf.get("name"), str):
                for node in _expand_all(leaf.get("nodes")):
                    self.leaf_of[node] = leaf["name"]
                self.spines_of[leaf["name"]] = [s for s in as_list(leaf.get("spines")) if isinstance(s, str)]
        self.spines = {s["name"]: set(as_list(s.get("leaves"))) for s in as_list(data.get("spines"))
                       if isinstance(s, dict) and isinstance(s.get("name"), str)}
        self.core = data.get("core") if isinstance(data.get("core"), str) else None
        self.domains = {d["name"]: set(_expand_all(d.get("nodes"))) for d in as_list(data.get("nvlink_domains"))
                        if isinstance(d, dict) and isinstance(d.get("name"), str)}
        self.domain_of = {n: name for name, nodes in self.domains.items() for n in nodes}


def _fabric(bundle: Bundle) -> Iterator[Finding]:
    data = bundle.plan.get("fabric")
    if not isinstance(data, dict) or not isinstance(data.get("leaves"), list):
        return
    fab = _Fabric(data)
    for topo in _slurm_topologies(bundle):
        yield from _topology_follows(topo, fab)
    if bundle.node_labels:
        yield from _labels_follow(bundle, fab)


def _slurm_topologies(bundle: Bundle) -> list[Topology]:
    ignored: list[Finding] = []  # unreadable files are slurm_checks' findings
    out = parse_topology_conf(TOPO_CONF, bundle.text(TOPO_CONF) or "", ignored) if bundle.has(TOPO_CONF) else []
    if bundle.has(TOPO_YAML):
        out += parse_topology_yaml(bundle.doc(TOPO_YAML), ignored)
    return out


def _topology_follows(topo: Topology, fab: _Fabric) -> Iterator[Finding]:
    where = f"topology {topo.name}: " if topo.path.endswith(".yaml") else ""
    if topo.kind == "block":
        for name, (nodes, line) in topo.leaves.items():
            if name not in fab.domains:
                yield error(topo.path, line, f"{where}block {name} is no NVLink domain of plan.json's fabric")
            elif set(nodes) != fab.domains[name]:
                yield error(topo.path, line, f"{where}block {name} lists {_short(nodes)} but plan.json's NVLink "
                                             f"domain {name} is {_short(fab.domains[name])}")
        return
    for name, (nodes, line) in topo.leaves.items():
        if name not in fab.spines_of:
            yield error(topo.path, line, f"{where}leaf switch {name} is no leaf of plan.json's fabric")
            continue
        elsewhere = [n for n in nodes if fab.leaf_of.get(n) != name]
        if elsewhere:
            yield error(topo.path, line, f"{where}leaf switch {name} lists {_short(elsewhere)}, which plan.json's "
                                         "fabric does not cable to it")
    for name, (children, line) in topo.children.items():
        allowed = set(fab.spines) if name == fab.core else fab.spines.get(name)
        if allowed is None:
            yield error(topo.path, line, f"{where}switch {name} is no spine or core of plan.json's fabric")
            continue
        stray = [c for c in children if c not in allowed]
        if stray:
            yield error(topo.path, line, f"{where}switch {name} lists {_short(stray)}, which plan.json's fabric "
                                         "does not cable to it")


def _labels_follow(bundle: Bundle, fab: _Fabric) -> Iterator[Finding]:
    labels = bundle.node_labels
    assert labels is not None
    # fleet.fabric.topograph: Topograph labels the switches (plan.json's topology levels are its
    # keys), so node-labels.sh must write none of orchgen's switch labels
    levels = ((bundle.plan or {}).get("platform") or {}).get("topology") or []
    topograph = any(str(lv).startswith(TOPOGRAPH_TIER.format("")) for lv in levels)
    for node, got in labels.labels.items():
        leaf = fab.leaf_of.get(node)
        if leaf is None:
            continue  # a node plan.json does not know: the plane checks' business
        spines = fab.spines_of.get(leaf) or []
        want = {LABEL_LEAF: leaf, LABEL_SPINE: spines[0] if spines else None, LABEL_NVLINK: fab.domain_of.get(node)}
        if topograph:
            want = dict.fromkeys(want)
        for key, value in want.items():
            if got.get(key) != value and (key in got or value is not None):
                yield error(SCRIPT, labels.line[node], f"node {node} is labelled {key}={got.get(key) or '(none)'} "
                                                       f"but plan.json's fabric says {value or '(none)'}")
                break


def _gres_names(bundle: Bundle, docs: list[Doc]) -> Iterator[Finding]:
    """The GRES string (and, with MIG, the Kubernetes resource) of each pool, identical everywhere."""
    planned = _planned_gres(bundle)
    if not planned:
        return
    yield from _slurm_gres_names(bundle, planned)
    yield from _nodeset_gres_names(bundle, docs, planned)
    yield from _kube_mig_names(bundle, docs, planned)


def _gpu_part(gres: dict) -> dict:
    return {k: v for k, v in gres.items() if k[0] == "gpu"}


def _slurm_gres_names(bundle: Bundle, planned: dict[str, tuple[str, _Gres]]) -> Iterator[Finding]:
    conf = load_conf(bundle)
    if conf is None:
        return
    pool_of = _pool_of(bundle)
    for node_line in conf.nodes:
        pools = sorted({pool_of[n] for n in node_line.names if n in pool_of} & set(planned))
        for pool in pools:
            want = planned[pool][1]
            have = format_gres(_gpu_part(node_line.gres))
            # orchgen models one GPU type per pool: more types on the line are the site's own, carried by `orchgen
            # import slurm` (a node with A100s and a T4): the pool's type and count must still be there
            planned_gpus = parse_gres(want.text) or {}
            extra_types = _gpu_part(node_line.gres).keys() - planned_gpus.keys()
            if extra_types and not want.mig and all(node_line.gres.get(k) == n for k, n in planned_gpus.items()):
                continue
            if have != want.text:
                yield error(CONF, node_line.line, f"pool {pool}: Gres={have} but plan.json's GPUs make it "
                                                  f"{want.text}{' (MIG)' if want.mig else ''}: the same GRES "
                                                  "must appear in slurm.conf, gres.conf, NodeSets and quotas")
    text = bundle.text(GRES)
    if text is None:
        return
    gconf = parse_gres_conf(GRES, text, [])
    defined = conf.node_names  # a set built per access: once, not once per node
    for pool, (plane, want) in planned.items():
        nodes = [n for n, p in pool_of.items() if p == pool and n in defined]
        if not nodes:
            continue
        node = nodes[0]  # typed lines against slurm.conf: slurm_checks._gres_agree
        if want.mig and gconf.autodetect_of(node) != "nvml":
            yield error(GRES, gconf.node_line.get(node, gconf.first_line),
                        f"pool {pool} runs MIG ({want.text}) but its nodes have AutoDetect={gconf.autodetect_of(node)}: "
                        "Slurm finds MIG devices through NVML only (gres.html, MIG Management)")


def _nodeset_gres_names(bundle: Bundle, docs: list[Doc], planned: dict[str, tuple[str, _Gres]]) -> Iterator[Finding]:
    """Slinky values' nodesets and Soperator's NodeSet objects: Gres and the pod's GPU resource."""
    doc = slurm_values(bundle)
    nodesets = doc.data.get("nodesets") if doc is not None else None
    for name, ns in (nodesets.items() if isinstance(nodesets, dict) else []):
        if not isinstance(ns, dict) or name not in planned:
            continue
        want = planned[name][1]
        text, _ = nodeset_gres(ns)
        limits = ((ns.get("slurmd") or {}).get("resources") or {}).get("limits") \
            if isinstance(ns.get("slurmd"), dict) else None
        yield from _pod_gres(doc.path, doc.line_of(["nodesets", name]), f"NodeSet {name}",  # type: ignore[union-attr]
                             text, limits, want)
    for d in docs:
        if d.kind != "NodeSet" or not d.api_version.startswith("slurm.nebius.ai/") or d.name not in planned:
            continue
        spec = d.data.get("spec") if isinstance(d.data.get("spec"), dict) else {}
        static = ((spec.get("nodeConfig") or {}).get("static") or "") if isinstance(spec.get("nodeConfig"), dict) else ""
        text = next((t.split("=", 1)[1] for t in str(static).split() if t.startswith("Gres=")), None)
        slurmd = spec.get("slurmd") if isinstance(spec.get("slurmd"), dict) else {}
        yield from _pod_gres(d.path, d.line, f"NodeSet {d.name}", text, slurmd.get("resources"), planned[d.name][1])


def _pod_gres(path: str, line: int, what: str, text: str | None, resources: Any, want: _Gres) -> Iterator[Finding]:
    have = format_gres(_gpu_part(parse_gres(text) or {})) if text else "none"
    if have != want.text:
        yield error(path, line, f"{what}: Gres={have} but plan.json's GPUs make it {want.text}")
        return
    res = resources if isinstance(resources, dict) else {}
    gpu_keys = {k: v for k, v in res.items() if str(k) == GPU or str(k).startswith(MIG_PREFIX)}
    if gpu_keys and gpu_keys != {want.resource: want.count}:
        asked = ", ".join(f"{k}={v}" for k, v in gpu_keys.items())
        yield error(path, line, f"{what}: the slurmd pod asks for {asked} but its Gres={want.text} needs "
                                f"{want.resource}={want.count}")


def _kube_mig_names(bundle: Bundle, docs: list[Doc], planned: dict[str, tuple[str, _Gres]]) -> Iterator[Finding]:
    """Every nvidia.com/mig-<profile> the Kubernetes objects name is a planned pool's MIG resource."""
    known = {g.resource for _, g in planned.values() if g.mig}
    for d in docs:
        if not d.path.startswith("kubernetes/"):
            continue
        for path, name in _mig_names(d.data, []):
            if name not in known:
                have = ", ".join(sorted(known)) or "no pool runs MIG"
                yield error(d.path, d.line_of(path), f"{d.label}: {name} is no pool's MIG resource ({have}): "
                                                     "the device plugin would never advertise it")
                break


def _mig_names(data: Any, path: list[Any]) -> Iterator[tuple[list[Any], str]]:
    """(path, resource) of every nvidia.com/mig-* key or string value in a document."""
    if isinstance(data, dict):
        for k, v in data.items():
            key = str(k).removeprefix("requests.").removeprefix("limits.")
            if key.startswith(MIG_PREFIX):
                yield [*path, k], key
            yield from _mig_names(v, [*path, k])
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _mig_names(v, [*path, i])
    elif isinstance(data, str) and data.startswith(MIG_PREFIX):
        yield path, data
