"""What `orchgen schema` adds to the models' JSON Schema for editors: a description and examples for
every field, and the formats the loader checks in Python (names, Slurm times, hostlists, versions)
as JSON Schema patterns, so that an editor flags them as the user types.

The patterns accept a superset of what the loader accepts where the rule needs arithmetic (a
reversed hostlist range, minutes >= 60, a pool or tenant that must exist): the description says
so, and `orchgen plan` still decides. Every example in examples/ validates against the result
(tests/test_cli.py).
"""
from __future__ import annotations

from typing import Any

from .. import providers

DNS_LABEL = {"pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
# Slurm's six time forms (slurmtime._FORMS); "UNLIMITED" is refused by the pattern too
_M = r"[0-5]?[0-9]"  # minutes and seconds after the leading field: below 60
_H = r"([01]?[0-9]|2[0-3])"  # hours after days: below 24
SLURM_TIME = {"pattern": rf"^([0-9]+|[0-9]+:{_M}|[0-9]+:{_M}:{_M}|[0-9]+-{_H}|[0-9]+-{_H}:{_M}"
                         rf"|[0-9]+-{_H}:{_M}:{_M})$", "maxLength": 20}
# A Slurm hostlist: names, each with bracketed ranges of digits, comma-separated (hostlist.py)
_RANGE = r"[0-9]+(-[0-9]+)?"
_HOST = rf"[^\s,\[\]]*(\[{_RANGE}(,{_RANGE})*\][^\s,\[\]]*)*"
HOSTLIST = {"pattern": rf"^{_HOST}(,{_HOST})*$", "minLength": 1}
VERSION = {"pattern": r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"}  # MAJOR.MINOR, or with a patch release (spec/inputs)
UNIX_NAME = {"pattern": r"^[a-z_][a-z0-9_.-]*$", "maxLength": 32}
GPU_TYPE = {"pattern": r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$", "maxLength": 32}  # Slurm keeps the case
SLURM_NAME = {"pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"}
QOS_NAME = {"pattern": r"^[a-z0-9_][a-z0-9_.-]{0,63}$"}
IFNAME = {"pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,14}$"}
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
CIDR4 = {"pattern": rf"^{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}/([89]|[12][0-9]|30)$"}
# Kubernetes label keys and values (apimachinery), as models._node_labels checks them
LABEL_KEY = {"pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", "maxLength": 316}
LABEL_VALUE = {"type": "string", "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", "maxLength": 63}
MIG_PROFILE = {"pattern": r"^[1-8]g\.[0-9]{1,4}gb$"}

REF_NOTE = " (JSON Schema cannot check that it exists; `orchgen plan` does, with a 'did you mean')"

# (definition, property) -> description, examples and format. A description given on the model's
# Field is kept; the one here is used where the model has none.
DOCS: dict[tuple[str, str], dict[str, Any]] = {
    ("Fleet", "apiVersion"): {"description": "always orchgen/v1alpha1", "examples": ["orchgen/v1alpha1"]},
    ("Fleet", "kind"): {"description": "always Fleet", "examples": ["Fleet"]},
    ("Fleet", "metadata"): {"description": "the fleet's name"},
    ("Fleet", "fleet"): {"description": "the machines: provider, Slurm hosts, fabric and pools of nodes"},
    ("Fleet", "tenants"): {"description": "teams sharing the GPUs: a Slurm account each, a Kubernetes "
                           "namespace, queue and quota each; absent: one tenant named after the fleet"},
    ("Fleet", "workloads"): {"description": "what runs on the fleet; its facts decide the control plane"},
    ("Fleet", "options"): {"description": "choices the facts do not decide: schedulers, GitOps, versions, policy"},
    ("Metadata", "name"): {"description": "the fleet's name (DNS-1123 label): the Slurm ClusterName, the "
                           "Pulumi stack, the GitOps directory", "examples": ["research-lab"], **DNS_LABEL},
    ("FleetSpec", "bare_metal"): {"description": "the site's own machines and cabling: a tightly coupled "
                                  "multi-node workload then runs on Slurm; default of every workload's bare_metal",
                                  "examples": [True]},
    ("FleetSpec", "edge_or_dev"): {"description": "an edge or development fleet: the Kubernetes plane is k3s; "
                                   "default of every workload's edge_or_dev", "examples": [False]},
    ("FleetSpec", "fabric"): {"description": "the interconnect and its switches: leaves/spines as cabled, "
                              "`from` a topology file, or the nodes_per_leaf shorthand"},
    ("FleetSpec", "pools"): {"description": "groups of identical nodes (one hardware type each)"},
    ("Fabric", "kind"): {"description": "the GPU nodes' interconnect: infiniband | roce | ethernet",
                         "examples": ["infiniband"]},
    ("FabricSpine", "name"): {"description": "the spine switch's name (Slurm SwitchName, the "
                              "orchgen.io/spine label)", "examples": ["spine1"], **DNS_LABEL},
    ("FabricLeaf", "name"): {"examples": ["leaf1"], **DNS_LABEL},
    ("FabricLeaf", "nodes"): {"examples": ["gpu-h100-[001-032]"], **HOSTLIST},
    ("Fabric", "core"): {"examples": ["core1"]},
    ("Pool", "name"): {"description": "the pool's name (DNS-1123 label): a Slurm partition and node feature, a "
                       "Kubernetes flavor and node-pool label", "examples": ["h100"], **DNS_LABEL},
    ("Pool", "nodes"): {"description": "how many nodes the pool has", "examples": [64]},
    ("Pool", "hostnames"): {"description": "Slurm hostlist of the pool's nodes, as many names as `nodes` "
                            "(a reversed range is refused by `orchgen plan`); default <pool>-[001-NNN]",
                            "examples": ["gpu-h100-[001-064]"], **HOSTLIST},
    ("Pool", "slurmd_c"): {"examples": ["NodeName=gpu-h100-001 CPUs=224 Boards=1 SocketsPerBoard=2 "
                                        "CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2063937"]},
    ("Pool", "memory_gib"): {"examples": [2048]},
    ("Pool", "cpus"): {"examples": [64]},
    ("Cpu", "sockets"): {"description": "CPU sockets per node (slurmd -C: Boards x SocketsPerBoard)", "examples": [2]},
    ("Cpu", "cores_per_socket"): {"description": "physical cores per socket", "examples": [56]},
    ("Cpu", "threads_per_core"): {"description": "hardware threads per core (2 with SMT/hyperthreading)",
                                  "examples": [2]},
    ("Gpu", "type"): {"examples": ["h100", "GV100GL"], **GPU_TYPE},
    ("SlurmPartition", "name"): {"examples": ["gpu", "short"], **SLURM_NAME},
    ("SlurmPartition", "nodes"): {"examples": ["gpu-[001-016]"], **HOSTLIST},
    ("SlurmQos", "name"): {"examples": ["normal", "long"], **QOS_NAME},
    ("SlurmOptions", "cluster_name"): {"examples": ["cluster"], **QOS_NAME},
    ("SlurmOptions", "scheduler_parameters"): {"examples": [["bf_interval=60", "bf_busy_nodes"]]},
    ("Gpu", "count"): {"examples": [8]},
    ("Gpu", "sockets"): {"examples": [[0, 0, 0, 0, 1, 1, 1, 1]]},
    ("Mig", "profile"): {"examples": ["1g.10gb"], **MIG_PROFILE},
    ("RdmaNetwork", "interface"): {"examples": ["ib0"], **IFNAME},
    ("RdmaNetwork", "subnet"): {"examples": ["172.16.0.0/16"], **CIDR4},
    ("SlurmHosts", "accounting"): {"examples": ["head01"], **DNS_LABEL},
    ("Tenant", "name"): {"description": "the tenant's name (DNS-1123 label): a Slurm account, a Kubernetes "
                         "namespace and queue", "examples": ["nlp"], **DNS_LABEL},
    ("Tenant", "share"): {"description": "fair-share weight (Slurm Fairshare; Kubernetes: its part of each "
                          "pool's quota)", "examples": [3]},
    ("Tenant", "unix_group"): {"examples": ["nlp-users"], **UNIX_NAME},
    ("Workload", "name"): {"description": "the workload's name (DNS-1123 label)", "examples": ["pretrain-70b"],
                           **DNS_LABEL},
    ("Workload", "tightly_coupled"): {"description": "its ranks exchange data every step (NCCL all-reduce, MPI): "
                                      "across nodes it needs all its nodes at once (a gang) and the fabric; with "
                                      "bare_metal and nodes > 1 it decides Slurm (rule 1)", "examples": [True]},
    ("Workload", "long_lived_services"): {"description": "runs until stopped (model servers, notebooks): "
                                          "Kubernetes; on a Slurm fleet it makes a hybrid", "examples": [False]},
    ("Workload", "multi_tenant"): {"description": "several teams submit it or share its GPUs: quotas and "
                                   "queues per tenant", "examples": [True]},
    ("Workload", "python_native_pipeline"): {"description": "a Python-native pipeline (Ray: RL rollouts, data "
                                             "processing): Ray on KubeRay (rule 2), or on Slurm when pinned there",
                                             "examples": [False]},
    ("Workload", "tenant"): {"description": "the tenant (tenants[].name) it belongs to; absent: the tenant "
                             "marked default, else the first" + REF_NOTE, "examples": ["nlp"]},
    ("Workload", "pool"): {"description": "the pool (fleet.pools[].name) it must run on; absent: one is "
                           "picked" + REF_NOTE, "examples": ["h100"]},
    ("Workload", "gpus"): {"description": "GPUs it asks for in all (demand: sizes the split and quotas); "
                           "absent: nodes x the pool's GPUs per node", "examples": [64]},
    ("Workload", "max_time"): {"examples": ["2-00:00:00"], **SLURM_TIME},
    ("SlurmOptions", "default_time"): {"examples": ["04:00:00"], **SLURM_TIME},
    ("SlurmOptions", "max_time"): {"examples": ["7-00:00:00"], **SLURM_TIME},
    ("SlurmOptions", "state_save_location"): {"examples": ["/shared/slurm/statesave"]},
    ("SlurmOptions", "health_check_mounts"): {"examples": [["/home", "/scratch"]]},
    ("Options", "gang_scheduler"): {"description": "the Kubernetes gang scheduler / quota manager: auto "
                                    "(Kueue as soon as a workload needs a gang or tenants share GPUs) | kueue | "
                                    "volcano | kai (not with gitops: argocd)", "examples": ["auto"]},
    ("Options", "slurm_on_kubernetes"): {"description": "how Slurm runs off bare metal: auto (Slinky) | slinky | "
                                         "soperator | none", "examples": ["auto"]},
    ("Options", "gitops"): {"description": "none (Pulumi installs) | kustomize | argocd | flux: writes gitops/ "
                            "for that controller; argocd refuses gang_scheduler: kai", "examples": ["none"]},
    ("Options", "slurm_version"): {"description": "the Slurm release, MAJOR.MINOR in quotes (YAML reads 25.10 "
                                   "as a number): decides slurm.conf's syntax (< 25.05: topology.conf, else "
                                   "topology.yaml)", "examples": ["25.11"], **VERSION},
    ("Options", "kubernetes_version"): {"description": "the cluster's Kubernetes minor version, in quotes: "
                                        "the built-in kinds' schemas validate checks against",
                                        "examples": ["1.33"], **VERSION},
    ("Options", "versions"): {"examples": [{"gpu-operator": "v26.7.0"}]},
    ("Options", "gitops_repo"): {"examples": ["https://github.com/example/fleet-gitops.git"]},
    ("Options", "metrics"): {"examples": ["install"]},
    ("Options", "gpu_health"): {"examples": ["install"]},
    ("Options", "prometheus_url"): {"examples": ["http://prometheus-operated.monitoring.svc:9090"]},
}

# Items of list fields that hold names (their properties are arrays)
ITEMS = {
    ("FabricSpine", "leaves"): {"examples": [["leaf1", "leaf2"]], "items": DNS_LABEL},
    ("SlurmHosts", "controllers"): {"examples": [["head01", "head02"]], "items": DNS_LABEL},
    ("Tenant", "users"): {"examples": [["alice", "bob"]], "items": UNIX_NAME},
}


def _string_branch(prop: dict[str, Any]) -> dict[str, Any]:
    """The schema that holds a string value: the property itself, or its string branch of an anyOf
    (an optional field is anyOf [string, null])."""
    for branch in prop.get("anyOf", []):
        if branch.get("type") == "string":
            return branch
    return prop


def document(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.setdefault("$defs", {})
    places = {"Fleet": schema, **defs}
    for (model, field), extra in DOCS.items():
        prop = places[model]["properties"][field]
        for key, value in extra.items():
            if key == "description":
                prop.setdefault("description", value)
            elif key == "examples":
                prop[key] = value
            else:
                target = _string_branch(prop)
                if "$ref" in target:
                    continue
                target[key] = value
    for (model, field), extra in ITEMS.items():
        prop = places[model]["properties"][field]
        prop["examples"] = extra["examples"]
        branch = next((b for b in prop.get("anyOf", []) if b.get("type") == "array"), prop)
        branch.setdefault("items", {}).update(extra["items"])
    labels = places["Pool"]["properties"]["node_labels"]
    branch = next((b for b in labels.get("anyOf", []) if b.get("type") == "object"), labels)
    branch["propertyNames"] = LABEL_KEY
    branch["additionalProperties"] = LABEL_VALUE
    labels["examples"] = [{"eks.amazonaws.com/nodegroup": "h100-ng"}]
    # Cross-field rules JSON Schema can say: bare metal is the site's own machines (generic), and a
    # managed provider runs its own Kubernetes (upstream)
    places["FleetSpec"]["allOf"] = [
        {"if": {"properties": {"bare_metal": {"const": True}}, "required": ["bare_metal"]},
         "then": {"properties": {"provider": {"const": "generic"}}}},
        {"if": {"properties": {"provider": {"enum": list(providers.MANAGED)}}, "required": ["provider"]},
         "then": {"properties": {"kubernetes_distribution": {"const": "upstream"}}}},
    ]
    # Fabric.core is Name | None, FabricLeaf.name a Name: the DNS pattern on each
    for model, field in (("Fabric", "core"),):
        _string_branch(places[model]["properties"][field]).update(DNS_LABEL)
    return schema
