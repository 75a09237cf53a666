"""Slinky (SchedMD's slurm-operator 1.2): Helm values of the releases slurm-operator-crds,
slurm-operator and slurm, for a Plan whose Slurm plane runs on Kubernetes with operator `slinky`.

The Slurm configuration is `slurm.slurm_config(plan)`'s, the one the bare-metal renderer writes,
reshaped for how Slinky builds a cluster (every piece comes from that text or its model; nothing
about GRES, partitions or topology is decided here):

* slurm.conf is written by the operator (cluster name, controller host, auth, spool and log paths,
  accounting host). Every other line of ours goes to `controller.extraConfMap` (OWNED below lists
  what the operator writes itself).
* Nodes are dynamic: one NodeSet per Slurm pool slice, named after the pool, `replicas` = its node
  count, pinned by nodeSelector to that pool's Slurm nodes and tolerating their taint (both set by
  kubernetes/node-labels.sh). slurmd gets the pool's NodeName attributes (CPUs, RealMemory, Gres,
  Features) through `extraConfMap`, and the pod asks Kubernetes for as many GPUs as that Gres
  counts (Slinky #57, #101: the two must agree, or the node comes up `Gres=(null)`); with MIG the
  Gres is `gpu:<profile>:<n>` and the pod asks for n `nvidia.com/mig-<profile>`.
* Slurm names a NodeSet's nodes after its pods' hostnames, `<pool>-<ordinal>`, not after the
  Kubernetes nodes. So gres.conf's `NodeName=` lists become those names (the rest of each line is
  kept), and topology.yaml keeps its topologies, switches and blocks but no node lists: each Slurm
  node joins the switch and block of the Kubernetes node its pod runs on, which the operator reads
  from that node's annotation `topology.slinky.slurm.net/spec` (`node_topology` gives the values).
* Partitions: a pool's partition is its NodeSet's own (`nodesets.<pool>.partition`); any other
  is a `partitions.<name>` over the NodeSets of its pools (`ALL` for Nodes=ALL). Either way the
  rest of slurm.conf's PartitionName line is the `config`.
* Accounting: on exactly when slurm.conf has it (real tenants); the database password is a Secret
  reference, never a value.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from ...spec import fabric, hostlist
from ...errors import OrchgenError
from ...decide.plan import Plan
from ...yamlio import dump_yaml
from .common import GPU, SLURM_TAINT, pool_labels, tolerations
from ..slurm import slurm_config
from ..slurm.model import NodeGroup, Partition, SlurmModel, model

TOPOLOGY_ANNOTATION = "topology.slinky.slurm.net/spec"  # Slinky's docs/usage/topology.md

# slurm.conf keys the operator writes itself (Slinky 1.2 controller config builder): ours would
# point at hosts, users and paths that do not exist in its pods.
OWNED = frozenset({
    "ClusterName", "SlurmctldHost", "SlurmctldPort", "SlurmctldAddr", "SlurmUser", "SlurmdUser",
    "SlurmdPort", "AuthType", "CredType", "AuthAltTypes", "AuthAltParameters", "AuthInfo",
    "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile",
    "SlurmdLogFile", "SlurmSchedLogFile", "AccountingStorageType", "AccountingStorageHost",
    "AccountingStoragePort", "SlurmctldParameters",
})
# NodeName attributes that only make sense in slurm.conf (a dynamic node registers as it starts).
NODE_LINE_ONLY = frozenset({"NodeName", "State"})
# Slinky writes MaxNodeCount=1024 (its NodeSet nodes are dynamic): more Slurm nodes need more.
SLINKY_MAX_NODES = 1024
# slurmd runs in a container without systemd: the operator's own cgroup.conf says so, and ours
# replaces it, so it carries these two lines too.
CONTAINER_CGROUP = ("CgroupPlugin=cgroup/v2", "IgnoreSystemd=yes")
DB_PASSWORD_SECRET = {"name": "slurm-mariadb", "key": "password"}
LOGIN_SET = "login"
# The slurm chart 1.2.1 makes its slurm and JWT keys itself (templates/secrets/{slurmkey,jwtkey}.yaml:
# `lookup` of the existing Secret, else randAscii 1024, marked immutable). Argo CD renders with
# `helm template`, where `lookup` finds nothing, so every refresh would make new key data for an
# immutable Secret. The keys are Secrets the operator creates once (README), and the chart only
# references them (`create: false` + secretRef), the same way under Pulumi, Argo CD and Flux.
AUTH_KEYS = {"slurmKey": {"name": "slurm-auth-slurm", "key": "slurm.key"},
             "jwtKey": {"name": "slurm-auth-jwt", "key": "jwt.key"}}


def operated(plan: Plan) -> bool:
    plane = plan.slurm_plane
    return plane is not None and plane.host == "kubernetes" and plane.operator == "slinky"


# ------------------------------------------------------------------ slurm_config, reshaped


def conf_lines(text: str) -> list[list[str]]:
    """slurm.conf-style text as token lists, without comments or blank lines."""
    return [ln.split() for ln in (raw.split("#", 1)[0].strip() for raw in text.splitlines()) if ln]


def _pairs(tokens: list[str]) -> dict[str, str]:
    return dict(t.split("=", 1) for t in tokens)


def cluster_settings(conf: str) -> dict[str, str]:
    """The single-key lines of slurm.conf that Slinky takes as `controller.extraConfMap`."""
    out: dict[str, str] = {}
    for tokens in conf_lines(conf):
        key, _, value = tokens[0].partition("=")
        if len(tokens) == 1 and key not in OWNED:
            out[key] = value
    return out


def node_settings(conf: str, m: SlurmModel) -> dict[str, dict[str, str]]:
    """pool -> the NodeName line's attributes slurmd is started with (`--conf`)."""
    by_hosts = {g.hostlist: g.pool for g in m.groups}
    out: dict[str, dict[str, str]] = {}
    for tokens in conf_lines(conf):
        if tokens[0].startswith("NodeName="):
            attrs = _pairs(tokens)
            out[by_hosts[attrs["NodeName"]]] = {k: v for k, v in attrs.items() if k not in NODE_LINE_ONLY}
    return out


def node_names(pool: str, count: int) -> list[str]:
    """Slurm's names for a NodeSet's nodes: its pods' hostnames (`<nodeset>-<ordinal>`, unpadded)."""
    return [f"{pool}-{i}" for i in range(count)]


def renamed_nodes(m: SlurmModel) -> dict[str, str]:
    """Each fleet hostname of a Slurm pool -> the Slurm node name Slinky gives the same slot."""
    return {host: name for g in m.groups for host, name in zip(g.nodes, node_names(g.pool, len(g.nodes)))}


def gres_conf(text: str, m: SlurmModel) -> str:
    """slurm_config's gres.conf with each line's NodeName= hostlist in Slinky's node names."""
    names = renamed_nodes(m)
    out = []
    for line in text.splitlines(keepends=True):
        head, sep, rest = line.partition("NodeName=")
        if head.strip() or not sep:  # a comment, a blank line or a line for every node: as is
            out.append(line)
            continue
        hosts, space, tail = rest.partition(" ")
        out.append(f"NodeName={hostlist.compress(names[h] for h in hostlist.expand(hosts))}{space}{tail}")
    return "".join(out)


def cgroup_conf(text: str) -> str:
    return text + "".join(f"{line}\n" for line in CONTAINER_CGROUP if line not in text.splitlines())


def _topology_parts(text: str) -> tuple[str, list[dict[str, Any]]]:
    header = "".join(ln for ln in text.splitlines(keepends=True) if ln.startswith("#"))
    return header, yaml.safe_load(text)


def topology_yaml(text: str) -> str:
    """slurm_config's topology.yaml without node lists (Slurm nodes join from node annotations)."""
    header, data = _topology_parts(text)
    for topo in data:
        for entry in topo.get("tree", {}).get("switches", []) + topo.get("block", {}).get("blocks", []):
            if "nodes" in entry:
                entry["nodes"] = ""
    note = (f"# Slinky: no node lists here. Each Slurm node joins the switch and block named by the\n"
            f"# {TOPOLOGY_ANNOTATION} annotation of the Kubernetes node its pod runs on.\n")
    return header + note + dump_yaml(data).decode()


def node_topology(plan: Plan) -> dict[str, str]:
    """Kubernetes node -> `topology.slinky.slurm.net/spec`: for each topology of topology.yaml, in
    file order, `<topology>:<leaf switch or block>` that lists the node."""
    files = slurm_config(plan)
    if "topology.yaml" not in files:
        return {}
    parts: dict[str, list[str]] = {}
    for topo in _topology_parts(files["topology.yaml"])[1]:
        entries = [(s["switch"], s["nodes"]) for s in topo.get("tree", {}).get("switches", []) if "nodes" in s]
        entries += [(b["block"], b["nodes"]) for b in topo.get("block", {}).get("blocks", [])]
        for name, hosts in entries:
            for node in hostlist.expand(hosts):
                parts.setdefault(node, []).append(f"{topo['topology']}:{name}")
    return {node: ",".join(p) for node, p in parts.items()}


def annotation_groups(plan: Plan) -> list[tuple[dict[str, str], str]]:
    """(node-labels.sh labels that select a group of Slurm nodes, their annotation value), in
    fabric order: nodes of one leaf (and NVLink domain) share one value, so one `kubectl annotate
    -l` per group covers the plane."""
    if plan.platform.cloud:  # the plan's node names are invented there: no per-leaf group to select
        return []
    groups: dict[tuple[tuple[str, str], ...], str] = {}
    for node, spec in node_topology(plan).items():
        labels = plan.fabric.node_labels(node)
        selector = {fabric.LABEL_PLANE: "slurm", fabric.LABEL_LEAF: labels[fabric.LABEL_LEAF]}
        if fabric.LABEL_NVLINK in labels:
            selector[fabric.LABEL_NVLINK] = labels[fabric.LABEL_NVLINK]
        key = tuple(selector.items())
        if groups.setdefault(key, spec) != spec:
            raise OrchgenError(f"Slurm nodes labelled {dict(key)} sit in different topology.yaml switches")
    return [(dict(k), spec) for k, spec in groups.items()]


def annotate_commands(plan: Plan) -> list[str]:
    """kubectl commands giving every Slurm node its topology annotation, one per group."""
    return [f"kubectl annotate node --overwrite -l {','.join(f'{k}={v}' for k, v in sel.items())} "
            f"{TOPOLOGY_ANNOTATION}={spec}" for sel, spec in annotation_groups(plan)]


# ------------------------------------------------------------------ values of the `slurm` release


def gpu_resource(g: NodeGroup) -> str:
    """What a NodeSet's slurmd pod asks Kubernetes for: the GPUs, or a MIG pool's instances."""
    return g.mig.resource if g.mig else GPU


def _nodeset(pool: str, count: int, attrs: dict[str, str], resource: str = GPU,
             selector: dict[str, str] | None = None,
             pool_tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    conf = dict(attrs)
    # the operator always gives a NodeSet's nodes the feature of its name (the pool): not twice
    features = [f for f in conf.pop("Features", "").split(",") if f and f != pool]
    if features:
        conf["Features"] = ",".join(features)
    out: dict[str, Any] = {
        "replicas": count,
        "extraConfMap": conf,
        "podSpec": {
            # the pool's labels (orchgen's on bare metal, the provisioner's on a cloud) and the Slurm plane
            "nodeSelector": {**(selector or {fabric.LABEL_POOL: pool}), fabric.LABEL_PLANE: SLURM_TAINT["value"]},
            # the plane's taint, then the pool's own (workload.yaml `taints`, or the provider's default)
            "tolerations": [{**SLURM_TAINT, "operator": "Equal"}, *(pool_tolerations or [])],
        },
    }
    gres = attrs.get("Gres", "")
    if gres:  # gpu:<type>:<n>, as slurm.conf writes it: the pod takes exactly those n GPUs (or MIG instances)
        out["slurmd"] = {"resources": {"limits": {resource: int(gres.rsplit(":", 1)[1])}}}
    return out


def partition_options(p: Partition) -> str:
    """slurm.conf's partition line after PartitionName= and Nodes=, which the chart writes."""
    return " ".join(p.line.split()[2:])


def own_partition(p: Partition) -> bool:
    """A pool's partition is its NodeSet's own (`nodesets.<pool>.partition`): Slinky names it
    after the NodeSet and gives it exactly the NodeSet's nodes, as slurm.conf does."""
    return p.nodes != "ALL" and p.pools == (p.name,)


def _partition(p: Partition) -> dict[str, Any]:
    # `config` (the raw options) rather than `configMap`: the line as slurm.conf has it, and the
    # chart's default `all` entry's configMap (Default, MaxTime) does not merge into it
    return {"enabled": True, "nodesets": ["ALL"] if p.nodes == "ALL" else list(p.pools),
            "config": partition_options(p)}


def _check_names(m: SlurmModel) -> None:
    for g in m.groups:
        longest = f"{g.pool}-{len(g.nodes) - 1}"
        if len(longest) > 63:  # a pod's hostname is a DNS label
            raise OrchgenError(f"pool {g.pool!r}: Slinky names its Slurm nodes <pool>-<n>, and "
                               f"{longest!r} is longer than a hostname may be (63); shorten the pool name")


def config_files(m: SlurmModel, files: dict[str, str]) -> dict[str, str]:
    """`configFiles` of the slurm release: slurm_config's files Slinky mounts beside its slurm.conf."""
    out = {"gres.conf": gres_conf(files["gres.conf"], m), "cgroup.conf": cgroup_conf(files["cgroup.conf"])}
    topo = m.topology.file
    out[topo] = topology_yaml(files[topo]) if topo == "topology.yaml" else files[topo]
    if "accounts.sh" in files:  # mounted in the controller pod, where sacctmgr reaches slurmdbd
        out["accounts.sh"] = files["accounts.sh"]
    return out


def slurm_values(plan: Plan) -> dict[str, Any]:
    m = model(plan)
    _check_names(m)
    files = slurm_config(plan)
    conf = files["slurm.conf"]
    settings = cluster_settings(conf)
    if m.node_count > SLINKY_MAX_NODES:
        settings["MaxNodeCount"] = str(m.node_count)
    nodes = node_settings(conf, m)
    values: dict[str, Any] = {
        "clusterName": m.cluster,
        "configFiles": config_files(m, files),
        "controller": {"extraConfMap": settings},
        "nodesets": {g.pool: _nodeset(g.pool, len(g.nodes), nodes[g.pool], gpu_resource(g),
                                      pool_labels(plan, g.pool), tolerations(plan, g.pool))
                     for g in m.groups},
        "partitions": {p.name: _partition(p) for p in m.partitions if not own_partition(p)},
        # somewhere to run sbatch from: kubectl exec into it (no load balancer for SSH by default)
        "loginsets": {LOGIN_SET: {"enabled": True, "replicas": 1, "service": {"spec": {"type": "ClusterIP"}}}},
        **{value: {"create": False, "secretRef": dict(ref)} for value, ref in AUTH_KEYS.items()},
    }
    for p in filter(own_partition, m.partitions):
        values["nodesets"][p.name]["partition"] = {"enabled": True, "config": partition_options(p)}
    if m.accounting:
        values["accounting"] = {"enabled": True,
                                "storageConfig": {"passwordKeyRef": dict(DB_PASSWORD_SECRET)}}
    return values


def operator_values(plan: Plan) -> dict[str, Any]:
    # CRDs come from their own release (installed, and upgraded, first); the webhook's certificate
    # from the cert-manager release.
    return {"crds": {"enabled": False}, "certManager": {"enabled": True}}


def crds_values(plan: Plan) -> dict[str, Any]:
    return {}  # the chart has no values


def chart_defaults(defaults: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The slurm chart's defaults as `validate.values.unknown_keys` should see them for `values`:
    the chart reads each `nodesets.<name>` like `nodesetDefaults`, each `loginsets.<name>` like
    `loginsetDefaults` and each `partitions.<name>` like its example `partitions.all` (whose
    `configMap` is a free-form map), so every key of ours is checked against those."""
    out = dict(defaults)
    template = {**defaults["partitions"]["all"], "configMap": {}}
    out["nodesets"] = {k: defaults["nodesetDefaults"] for k in values.get("nodesets", {})}
    out["loginsets"] = {k: defaults["loginsetDefaults"] for k in values.get("loginsets", {})}
    out["partitions"] = {k: template for k in values.get("partitions", {})}
    return out


def readme(plan: Plan) -> dict[str, Any]:
    """What the README's Slurm-on-Kubernetes section says for Slinky."""
    m = model(plan)
    values = slurm_values(plan)
    partitions = [{"name": p.name, "where": f"NodeSet {p.name}" if own_partition(p) else
                   ("all NodeSets" if p.nodes == "ALL" else "NodeSets " + ", ".join(p.pools))}
                  for p in m.partitions]
    return {"values": values, "annotate_commands": annotate_commands(plan), "partitions": partitions,
            "namespace": plan.charts["slurm"].namespace, "secret": DB_PASSWORD_SECRET,
            "auth_keys": list(AUTH_KEYS.values()),
            "names": {pool: hostlist.compress(node_names(pool, ns["replicas"]))
                      for pool, ns in values["nodesets"].items()}}


VALUES: dict[str, Callable[[Plan], dict[str, Any]]] = {
    "slurm-operator-crds": crds_values,
    "slurm-operator": operator_values,
    "slurm": slurm_values,
}
