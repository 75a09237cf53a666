"""Slurm on Kubernetes with Slinky: the Slurm configuration that lives in the `slurm` chart's values.

The same rules as for slurm/ on bare metal, where Slinky puts each fact:
- GresTypes (controller.extraConfMap) lists every GRES a NodeSet's extraConfMap.Gres uses;
- AccountingStorageTRES only with accounting.enabled (slurmdbd);
- configFiles["gres.conf"] gives each NodeSet pod (`<nodeset>-<ordinal>`) the GRES its NodeSet declares;
- every partition's `nodesets` names NodeSets that exist (or ALL);
- a NodeSet's pods can land: enough nodes carry its nodeSelector labels (node-labels.sh), and it
  tolerates the taints of those nodes.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..spec import hostlist
from .bundle_view import Bundle, Doc, Finding, error, as_list
from .helm_checks import HELM, component_of, load_releases
from .kube_refs import set_elsewhere
from .slurm_conf import format_gres, parse_gres, parse_gres_conf


def slurm_values(bundle: Bundle) -> Doc | None:
    """The values file of the release of Slinky's `slurm` chart, if the bundle has one."""
    for rel in load_releases(bundle)[0]:
        entry = component_of(str(rel.get("chart")), str(rel.get("repo", "")))
        if entry is not None and entry.component == "slurm":
            doc = bundle.doc(f"{HELM}/{rel.get('values')}")
            return doc if doc is not None and isinstance(doc.data, dict) else None
    return None


def _map(data: Any, *path: str) -> dict[str, Any]:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def nodeset_gres(nodeset: dict[str, Any]) -> tuple[str | None, dict]:
    """(the Gres text, {(name, type): count}) of a NodeSet's extraConfMap.Gres (a string or a list)."""
    raw = _map(nodeset, "extraConfMap").get("Gres")
    text = ",".join(map(str, raw)) if isinstance(raw, list) else (str(raw) if raw else None)
    return text, (parse_gres(text) or {}) if text else {}


def check(bundle: Bundle) -> Iterator[Finding]:
    doc = slurm_values(bundle)
    if doc is None:
        return
    nodesets = {k: v for k, v in _map(doc.data, "nodesets").items() if isinstance(v, dict)}
    yield from _gres_types(doc, nodesets)
    yield from _accounting(doc)
    yield from _gres_conf(doc, nodesets)
    yield from _partitions(doc, nodesets)
    yield from _placement(bundle, doc, nodesets)


def _gres_types(doc: Doc, nodesets: dict[str, dict]) -> Iterator[Finding]:
    conf = _map(doc.data, "controller", "extraConfMap")
    declared = {t.strip() for t in str(conf.get("GresTypes") or "").split(",") if t.strip()}
    for name, ns in nodesets.items():
        text, gres = nodeset_gres(ns)
        missing = sorted({n for n, _ in gres} - declared)
        if missing:
            yield error(doc.path, doc.line_of(["nodesets", name, "extraConfMap", "Gres"]),
                        f"NodeSet {name}: Gres={text} but controller.extraConfMap.GresTypes does not list "
                        f"{', '.join(missing)} (slurmctld refuses the nodes)")


def _accounting(doc: Doc) -> Iterator[Finding]:
    conf = _map(doc.data, "controller", "extraConfMap")
    if conf.get("AccountingStorageTRES") and not _map(doc.data, "accounting").get("enabled"):
        yield error(doc.path, doc.line_of(["controller", "extraConfMap", "AccountingStorageTRES"]),
                    "AccountingStorageTRES needs accounting.enabled (slurmdbd records TRES)")


def pod_names(name: str, nodeset: dict[str, Any]) -> list[str]:
    replicas = nodeset.get("replicas")
    pad = nodeset.get("ordinalPadding") or 0
    if not isinstance(replicas, int) or not isinstance(pad, int):
        return []
    return [f"{name}-{i:0{pad}d}" for i in range(replicas)]


def _gres_conf(doc: Doc, nodesets: dict[str, dict]) -> Iterator[Finding]:
    text = _map(doc.data, "configFiles").get("gres.conf")
    if not isinstance(text, str):
        return
    at = doc.line_of(["configFiles", "gres.conf"])
    problems: list[Finding] = []
    gconf = parse_gres_conf(doc.path, text, problems)
    yield from (error(doc.path, at, f"configFiles gres.conf: {p.message}") for p in problems)
    for name, ns in nodesets.items():
        want_text, want = nodeset_gres(ns)
        wrong = [n for n in pod_names(name, ns)
                 if (want or gconf.per_node.get(n)) and not gconf.autodetect
                 and {**gconf.everywhere, **gconf.per_node.get(n, {})} != want]
        if wrong:
            have = format_gres({**gconf.everywhere, **gconf.per_node.get(wrong[0], {})})
            yield error(doc.path, at, f"configFiles gres.conf gives {hostlist.compress(wrong)} {have}, but NodeSet "
                                      f"{name} says Gres={want_text or 'none'}")


def _partitions(doc: Doc, nodesets: dict[str, dict]) -> Iterator[Finding]:
    for part, spec in _map(doc.data, "partitions").items():
        if not isinstance(spec, dict) or spec.get("enabled") is False:
            continue
        for i, ref in enumerate(as_list(spec.get("nodesets"))):
            if ref != "ALL" and ref not in nodesets:
                yield error(doc.path, doc.line_of(["partitions", part, "nodesets", i]),
                            f"partition {part} names NodeSet {ref}, which does not exist")


def _placement(bundle: Bundle, doc: Doc, nodesets: dict[str, dict]) -> Iterator[Finding]:
    labels = bundle.node_labels
    if labels is None:
        return
    for name, ns in nodesets.items():
        spec = _map(ns, "podSpec")
        wanted = {str(k): str(v) for k, v in _map(spec, "nodeSelector").items() if not set_elsewhere(str(k))}
        if not wanted:
            continue
        hits = [(lb, taints) for lb, taints, n in labels.population() if n and all(lb.get(k) == v for k, v in wanted.items())]
        count = labels.count(wanted)
        at = doc.line_of(["nodesets", name, "podSpec", "nodeSelector"])
        replicas = ns.get("replicas") if isinstance(ns.get("replicas"), int) else 0
        if count < replicas:
            yield error(doc.path, at, f"NodeSet {name}: {replicas} replicas but only {count} nodes carry "
                                      f"its nodeSelector in node-labels.sh: the rest stay Pending")
        # (key, value, effect); None matches anything (operator Exists, or no effect given)
        tolerated = {(t.get("key"), t.get("value") if t.get("operator") != "Exists" else None, t.get("effect"))
                     for t in spec.get("tolerations") or [] if isinstance(t, dict)}
        for _, node_taints in hits[:1]:
            for taint in node_taints:
                key, _, rest = taint.partition("=")
                value, _, effect = rest.partition(":")
                if not any(k in (None, key) and v in (None, value) and e in (None, effect) for k, v, e in tolerated):
                    yield error(doc.path, at, f"NodeSet {name}: its nodes are tainted {taint} and it does not "
                                              "tolerate that: no slurmd pod would start")
