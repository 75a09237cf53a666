"""References between Kubernetes objects of a bundle, and to the node labels it sets.

- every queue a workload names exists: a Kueue LocalQueue (label kueue.x-k8s.io/queue-name) in the
  workload's namespace, a Volcano Queue (label volcano.sh/queue-name, annotation
  scheduling.volcano.sh/queue-name, or spec.queue), a KAI leaf Queue (label kai.scheduler/queue);
  and down the chain: LocalQueue -> ClusterQueue -> ResourceFlavor -> Topology, KAI parent queues;
- every ResourceFlavor's nodeLabels, every topology level and every pod nodeSelector uses labels
  kubernetes/node-labels.sh sets (together, on at least one node). Labels Kubernetes or the GPU
  Operator set themselves (kubernetes.io/..., nvidia.com/...) are taken on trust.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..schedulers import KAI_QUEUE_LABEL as KAI_LABEL, KUEUE_QUEUE_LABEL as KUEUE_LABEL
from ..schedulers import RAY_VOLCANO_QUEUE_LABEL as VOLCANO_LABEL, VOLCANO_QUEUE_ANNOTATION as VOLCANO_ANNOTATION
from .bundle_view import Bundle, Doc, Finding, NodeLabels, error, as_list
from .kube_checks import group_of

# the queue labels and annotations: the gang-scheduler registry's (generator/schedulers.py)
VOLCANO_BUILTIN_QUEUES = {"default", "root"}  # Volcano creates these itself
SCRIPT = "kubernetes/node-labels.sh"


def _get(data: Any, *path: Any) -> Any:
    for part in path:
        if isinstance(part, int):
            data = data[part] if isinstance(data, list) and part < len(data) else None
        else:
            data = data.get(part) if isinstance(data, dict) else None
    return data


def pod_templates(doc: Doc) -> list[tuple[list[Any], dict[str, Any]]]:
    """(path, pod template) for every pod an object stands for; a Pod is its own template."""
    data, kind = doc.data, doc.kind
    cands: list[list[Any]] = []
    if kind == "Pod":
        cands = [[]]
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet") or (
            kind == "Job" and group_of(doc.api_version) == "batch"):
        cands = [["spec", "template"]]
    elif kind == "CronJob":
        cands = [["spec", "jobTemplate", "spec", "template"]]
    elif kind == "Job":  # Volcano
        cands = [["spec", "tasks", i, "template"] for i in range(len(as_list(_get(data, "spec", "tasks"))))]
    elif kind in ("RayCluster", "RayJob", "RayService"):
        base = {"RayCluster": ["spec"], "RayJob": ["spec", "rayClusterSpec"],
                "RayService": ["spec", "rayClusterConfig"]}[kind]
        workers = _get(data, *base, "workerGroupSpecs") or []
        cands = [[*base, "headGroupSpec", "template"]] + [
            [*base, "workerGroupSpecs", i, "template"] for i in range(len(workers))]
    elif kind == "LeaderWorkerSet":
        cands = [["spec", "leaderWorkerTemplate", "leaderTemplate"], ["spec", "leaderWorkerTemplate", "workerTemplate"]]
    elif kind == "InferenceService":
        # KServe's predictor is a PodSpec plus its own fields; its `labels` go onto the pods
        pred = _get(data, "spec", "predictor")
        return [(["spec", "predictor"], {"metadata": {"labels": pred.get("labels") or {}}, "spec": pred})] \
            if isinstance(pred, dict) else []
    elif kind == "JobSet":
        cands = [["spec", "replicatedJobs", i, "template", "spec", "template"]
                 for i in range(len(as_list(_get(data, "spec", "replicatedJobs"))))]
    return [(p, t) for p in cands if isinstance(t := _get(data, *p), dict)]


class Index:
    """Names of the queue-ish objects the bundle creates."""

    def __init__(self, docs: list[Doc]) -> None:
        self.by: dict[tuple[str, str], dict[tuple[str | None, str], Doc]] = defaultdict(dict)
        for doc in docs:
            self.by[(group_of(doc.api_version), doc.kind)][(doc.namespace, doc.name)] = doc

    def names(self, group: str, kind: str) -> set[str]:
        return {name for _, name in self.by[(group, kind)]}

    def has(self, group: str, kind: str, name: str, namespace: str | None = None) -> bool:
        if namespace is None:
            return name in self.names(group, kind)
        return (namespace, name) in self.by[(group, kind)]


def check_queues(docs: list[Doc]) -> Iterator[Finding]:
    docs = [d for d in docs if d.path.startswith("kubernetes/") and d.name]
    idx = Index(docs)
    kai = idx.by[("scheduling.run.ai", "Queue")]
    kai_parents = {_get(d.data, "spec", "parentQueue") for d in kai.values()}
    for doc in docs:
        holders = [([], doc.data)] + pod_templates(doc)
        for path, holder in holders:
            meta = holder.get("metadata") if isinstance(holder.get("metadata"), dict) else {}
            labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
            notes = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
            at = doc.line_of([*path, "metadata"])
            if KUEUE_LABEL in labels and not idx.has("kueue.x-k8s.io", "LocalQueue", str(labels[KUEUE_LABEL]),
                                                     doc.namespace or "default"):
                yield error(doc.path, at, f"{doc.label}: Kueue LocalQueue {labels[KUEUE_LABEL]} does not exist "
                                          f"in namespace {doc.namespace or 'default'}")
            volcano = VOLCANO_BUILTIN_QUEUES | idx.names("scheduling.volcano.sh", "Queue")
            for key, value in ((VOLCANO_LABEL, labels.get(VOLCANO_LABEL)),
                               (VOLCANO_ANNOTATION, notes.get(VOLCANO_ANNOTATION))):
                if value is not None and value not in volcano:
                    yield error(doc.path, at, f"{doc.label}: Volcano Queue {value} ({key}) does not exist")
            if KAI_LABEL in labels:
                yield from _kai_queue(doc, at, str(labels[KAI_LABEL]), kai, kai_parents)
        yield from _spec_refs(doc, idx, kai, kai_parents)


def _kai_queue(doc: Doc, at: int, name: str, kai: dict, parents: set) -> Iterator[Finding]:
    if not any(n == name for _, n in kai):
        yield error(doc.path, at, f"{doc.label}: KAI Queue {name} does not exist")
    elif name in parents:
        yield error(doc.path, at, f"{doc.label}: KAI Queue {name} is a parent queue; jobs go to leaf queues")


def _spec_refs(doc: Doc, idx: Index, kai: dict, kai_parents: set) -> Iterator[Finding]:
    group, spec = group_of(doc.api_version), doc.data.get("spec")
    if not isinstance(spec, dict):
        return

    def missing(path: list[Any], what: str, name: Any) -> Finding:
        return error(doc.path, doc.line_of(["spec", *path]), f"{doc.label}: {what} {name} does not exist")

    if group == "kueue.x-k8s.io" and doc.kind == "LocalQueue":
        cq = spec.get("clusterQueue")
        if cq is not None and not idx.has(group, "ClusterQueue", str(cq)):
            yield missing(["clusterQueue"], "ClusterQueue", cq)
    elif group == "kueue.x-k8s.io" and doc.kind == "ClusterQueue":
        for i, rg in enumerate(as_list(spec.get("resourceGroups"))):
            for j, fl in enumerate(as_list(_get(rg, "flavors"))):
                name = _get(fl, "name")
                if name is not None and not idx.has(group, "ResourceFlavor", str(name)):
                    yield missing(["resourceGroups", i, "flavors", j, "name"], "ResourceFlavor", name)
    elif group == "kueue.x-k8s.io" and doc.kind == "ResourceFlavor":
        topo = spec.get("topologyName")
        if topo is not None and not idx.has(group, "Topology", str(topo)):
            yield missing(["topologyName"], "Topology", topo)
    elif group in ("batch.volcano.sh", "scheduling.volcano.sh") and doc.kind in ("Job", "PodGroup") \
            and spec.get("queue") is not None:
        if spec["queue"] not in VOLCANO_BUILTIN_QUEUES | idx.names("scheduling.volcano.sh", "Queue"):
            yield missing(["queue"], "Volcano Queue", spec["queue"])
    elif group == "scheduling.run.ai" and doc.kind == "PodGroup" and spec.get("queue") is not None:
        yield from _kai_queue(doc, doc.line_of(["spec", "queue"]), str(spec["queue"]), kai, kai_parents)
    elif group == "scheduling.run.ai" and doc.kind == "Queue" and spec.get("parentQueue"):
        if not any(n == spec["parentQueue"] for _, n in kai):
            yield missing(["parentQueue"], "parent Queue", spec["parentQueue"])


# Topology labels cloud providers put on their nodes (generator/decide/platform.py has the sources).
PROVIDER_TOPOLOGY_PREFIXES = ("topology.k8s.aws/network-node-layer-", "cloud.google.com/gce-topology-",
                              "oci.oraclecloud.com/rdma.",
                              # NVIDIA Topograph's (fleet.fabric.topograph): it labels the nodes itself
                              "fabric.topograph.run/tier-", "accelerator.topograph.run/")


def set_elsewhere(key: str) -> bool:
    """Labels the kubelet, cloud providers or the GPU Operator (GFD, NFD) put on nodes themselves."""
    prefix = key.split("/", 1)[0] if "/" in key else ""
    return (prefix == "kubernetes.io" or prefix.endswith((".kubernetes.io", "k8s.io", "nvidia.com"))
            or key.startswith(PROVIDER_TOPOLOGY_PREFIXES))


def _unmatched(selector: dict[str, Any], labels: NodeLabels) -> dict[str, str] | None:
    """The part of `selector` no single node (or selector group of nodes) carries in full (None
    when some does)."""
    wanted = {str(k): str(v) for k, v in selector.items() if not set_elsewhere(str(k))}
    if not wanted or labels.count(wanted):
        return None
    return wanted


def check_node_labels(bundle: Bundle, docs: list[Doc]) -> Iterator[Finding]:
    labels = bundle.node_labels or NodeLabels()
    source = SCRIPT if bundle.node_labels is not None else f"{SCRIPT} (absent)"
    every_key = {k for lb, _, _ in labels.population() for k in lb}
    for doc in docs:
        if not doc.path.startswith("kubernetes/") or not isinstance(doc.data.get("spec"), dict):
            continue
        spec = doc.data["spec"]
        if doc.kind == "ResourceFlavor" and isinstance(spec.get("nodeLabels"), dict):
            bad = _unmatched(spec["nodeLabels"], labels)
            if bad:
                yield error(doc.path, doc.line_of(["spec", "nodeLabels"]),
                            f"{doc.label}: no node gets {_pairs(bad)} from {source}: nothing is admitted "
                            "to this flavor's nodes")
        if doc.kind == "Topology":
            for i, level in enumerate(as_list(spec.get("levels"))):
                key = _get(level, "nodeLabel")
                if isinstance(key, str) and not set_elsewhere(key) and key not in every_key:
                    yield error(doc.path, doc.line_of(["spec", "levels", i]),
                                f"{doc.label}: level label {key} is set on no node by {source}")
        for path, tmpl in pod_templates(doc):
            selector = _get(tmpl, "spec", "nodeSelector")
            bad = _unmatched(selector, labels) if isinstance(selector, dict) else None
            if bad:
                yield error(doc.path, doc.line_of([*path, "spec", "nodeSelector"]),
                            f"{doc.label}: nodeSelector {_pairs(bad)} matches no node {source} labels "
                            "(the pods would stay Pending)")


def _pairs(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
