"""`orchgen validate`: passes every bundle the examples produce, and catches each way a bundle can be broken.

Each broken case starts from a real `orchgen plan` output (an example, or an example with one option
changed) and edits exactly one thing, then expects its own message at the right `path:line`. CRDs
and chart defaults come from tests._consumers.reference_dir(), passed in as the user would pass
--crds / --chart-defaults.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from generator import bundle, spec
from generator.decide import make_plan
from generator.render import render
from generator.validate.bundle_checks import Report, load_crds, validate_bundle
from tests._consumers import REPO, crd_paths, reference_dir
from tests.conftest import all_examples
from tests.support import orchgen_argv

GITOPS = ("none", "kustomize", "argocd", "flux")


@cache
def registry():
    return load_crds(crd_paths())


def _variant(example: str, **changes) -> spec.Fleet:
    """An example with options or one workload's pool changed (`pool_of={"model-api": "h100"}`)."""
    fleet = spec.load(REPO / "examples" / f"{example}.yaml")
    pools = changes.pop("pool_of", {})
    if pools:
        fleet = fleet.model_copy(update={"workloads": [
            w.model_copy(update={"pool": pools[w.name]}) if w.name in pools else w for w in fleet.workloads]})
    if changes:
        fleet = fleet.model_copy(update={"options": fleet.options.model_copy(update=changes)})
    return fleet


VARIANTS: dict[str, Callable[[], spec.Fleet]] = {
    "research-lab-volcano": lambda: _variant("research-lab", gang_scheduler="volcano"),
    "research-lab-kai": lambda: _variant("research-lab", gang_scheduler="kai"),
    "grpo-rl-volcano": lambda: _variant("grpo-rl", gang_scheduler="volcano"),
    "research-lab-split": lambda: _variant("research-lab", pool_of={"model-api": "h100"}),
    # The Argo CD Applications with the GitOps repository's URL instead of the placeholder.
    "cloud-training-gitops-repo": lambda: _variant(
        "cloud-training", gitops_repo="https://git.example.org/platform/fleet-gitops.git"),
    # Slinky on the site's own machines: node-labels.sh labels, taints and annotates real hostnames.
    "slinky-bare-metal": lambda: _variant("fsdp-pretraining", slurm_on_kubernetes="slinky"),
    "research-lab-slinky-split": lambda: _variant("research-lab", slurm_on_kubernetes="slinky",
                                                  pool_of={"model-api": "h100"}),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Callable[[str], Path]:
    """name -> a freshly written bundle of that example or variant (written once per module)."""
    root = tmp_path_factory.mktemp("bundles")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            fleet = VARIANTS[name]() if name in VARIANTS else spec.load(REPO / "examples" / f"{name}.yaml")
            made[name] = root / name
            bundle.write(render(make_plan(fleet, f"{name}.yaml")), made[name])
        return made[name]

    return get


def check(path: Path) -> Report:
    return validate_bundle(path, registry(), reference_dir())


class Broken:
    """A copy of a pristine bundle to edit one thing in."""

    def __init__(self, src: Path, dest: Path) -> None:
        shutil.copytree(src, dest)
        self.root = dest

    def edit(self, rel: str, old: str, new: str) -> int:
        """Replace the first `old` by `new`; returns the line `new` starts on."""
        path = self.root / rel
        text = path.read_text()
        assert old in text, f"{old!r} not in {rel}"
        text = text.replace(old, new, 1)
        path.write_text(text)
        return text[: text.index(new)].count("\n") + 1 if new else 0

    def line_of(self, rel: str, needle: str) -> int:
        text = (self.root / rel).read_text()
        assert needle in text, f"{needle!r} not in {rel}"
        return text[: text.index(needle)].count("\n") + 1

    def errors(self) -> list[str]:
        return [str(f) for f in check(self.root).errors]


@pytest.fixture
def broken(pristine, tmp_path) -> Callable[[str], Broken]:
    return lambda name: Broken(pristine(name), tmp_path / "b")


def expect(b: Broken, path: str, line: int | None, pattern: str) -> None:
    """One error at `path:line` (any line when None) whose message matches `pattern`."""
    errors = b.errors()
    prefix = re.escape(f"{path}:{line}: ") if line is not None else re.escape(f"{path}:") + r"\d+: "
    assert any(re.match(prefix, e) and re.search(pattern, e) for e in errors), \
        f"expected {path}:{line}: /{pattern}/ in:\n" + "\n".join(errors)


# ---- every bundle the examples produce is clean --------------------------------------------------


@pytest.mark.parametrize("gitops", GITOPS)
@pytest.mark.parametrize("example", [p.stem for p in all_examples()])
def test_every_example_bundle_validates(example, gitops, tmp_path):
    fleet = _variant(example, gitops=gitops)
    bundle.write(render(make_plan(fleet, f"{example}.yaml")), tmp_path / "b")
    report = check(tmp_path / "b")
    assert not report.errors, "\n".join(map(str, report.errors))
    assert not report.warnings, "\n".join(map(str, report.warnings))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_bundles_validate(name, pristine):
    report = check(pristine(name))
    assert not report.errors and not report.warnings, "\n".join(map(str, report.findings))


# ---- Slurm ---------------------------------------------------------------------------------------

TOPO = "slurm/topology.conf"
CONF = "slurm/slurm.conf"
GRES = "slurm/gres.conf"


def test_topology_node_not_defined(broken):
    b = broken("research-lab")
    line = b.edit(TOPO, "Nodes=gpu-h100-[001-016]", "Nodes=gpu-h100-[001-016],ghost7")
    expect(b, TOPO, line, r"leaf switch leaf001 names nodes slurm.conf does not define: ghost7")


def test_topology_node_under_two_leaves(broken):
    b = broken("research-lab")
    line = b.edit(TOPO, "SwitchName=leaf002 Nodes=gpu-h100-[017-032]", "SwitchName=leaf002 Nodes=gpu-h100-[016-032]")
    expect(b, TOPO, line, r"leaf002 repeats nodes already under leaf001: gpu-h100-016")


def test_topology_node_under_no_leaf(broken):
    b = broken("research-lab")
    b.edit(TOPO, "Nodes=gpu-h100-[049-064]", "Nodes=gpu-h100-[049-063]")
    expect(b, TOPO, None, r"nodes under no leaf switch .*: gpu-h100-064")


def test_topology_switch_names_undefined_switch(broken):
    b = broken("research-lab")
    line = b.edit(TOPO, "Switches=leaf[001-004]", "Switches=leaf[001-005]")
    expect(b, TOPO, line, r"switch spine01 names undefined switches: leaf005")


def test_block_node_in_two_blocks(broken):
    b = broken("nvl72-blocks")
    line = b.edit(TOPO, "BlockName=nvl002 Nodes=gb200-[019-036]", "BlockName=nvl002 Nodes=gb200-[018-036]")
    expect(b, TOPO, line, r"block nvl002 repeats nodes already under nvl001: gb200-018")


def test_topology_yaml_node_not_defined(broken):
    b = broken("topology-yaml")
    b.edit("slurm/topology.yaml", "nodes: h100-[001-016]", "nodes: h100-[001-017]")
    # the switch's line: `switch:` comes first in its entry (as `topology` does in a topology's)
    expect(b, "slurm/topology.yaml", b.line_of("slurm/topology.yaml", "switch: leaf003"),
           r"topology fabric: leaf switch leaf003 names nodes .*: h100-017")


def test_partition_names_undefined_nodes(broken):
    b = broken("research-lab")
    line = b.edit(CONF, "PartitionName=h100 Nodes=gpu-h100-[001-064]", "PartitionName=h100 Nodes=gpu-h100-[001-066]")
    expect(b, CONF, line, r"partition h100 names nodes slurm.conf does not define: gpu-h100-\[065-066\]")


def test_partition_names_unknown_topology(broken):
    b = broken("topology-yaml")
    line = b.edit(CONF, "Topology=nvlink18", "Topology=nvlink99")
    expect(b, CONF, line, r"partition gb200: Topology=nvlink99 is not a topology of slurm/topology.yaml")


def test_gres_type_disagrees(broken):
    b = broken("research-lab")
    line = b.edit(GRES, "Type=h100", "Type=a100")
    expect(b, GRES, line, r"gpu-h100-\[001-064\]: gres.conf has gpu:a100:8 but slurm.conf:\d+ says Gres=gpu:h100:8")


def test_gres_count_disagrees(broken):
    b = broken("research-lab")
    line = b.edit(GRES, "File=/dev/nvidia[0-7]", "File=/dev/nvidia[0-3]")
    expect(b, GRES, line, r"gres.conf has gpu:h100:4 but slurm.conf:\d+ says Gres=gpu:h100:8")


def test_gres_beyond_slurm_conf_is_a_warning(broken):
    """More GRES in gres.conf than slurm.conf configures: slurmctld keeps the configured count and ignores the
    rest (gres.c "Ignoring excess count"), so the node registers; fewer drains it (the test above)."""
    b = broken("research-lab")
    line = b.edit(GRES, "File=/dev/nvidia[0-7]", "File=/dev/nvidia[0-9]")
    assert not [e for e in b.errors() if "gres.conf has" in e], b.errors()
    assert any(w.startswith(f"{GRES}:{line}: warning: ") and "gres.conf has gpu:h100:10 but" in w
               and "slurmctld ignores the GRES beyond slurm.conf's" in w for w in warnings_of(b)), warnings_of(b)


def test_gres_conf_misses_nodes(broken):
    b = broken("topology-yaml")
    b.edit(GRES, "NodeName=h100-[001-016] Name=gpu Type=h100 File=/dev/nvidia[0-7]\n", "")
    expect(b, GRES, None, r"no GRES lines for h100-\[001-016\], but slurm.conf:\d+ gives them Gres=gpu:h100:8")


def test_gres_conf_missing(broken):
    b = broken("fsdp-pretraining")
    (b.root / GRES).unlink()
    expect(b, CONF, b.line_of(CONF, "NodeName="), r"Gres=gpu:h100:8 but the bundle has no slurm/gres.conf")


def test_gres_types_missing(broken):
    b = broken("fsdp-pretraining")
    b.edit(CONF, "GresTypes=gpu\n", "")
    expect(b, CONF, b.line_of(CONF, "NodeName="), r"GresTypes is missing, but nodes have Gres=gpu")


def test_accounting_tres_without_slurmdbd(broken):
    b = broken("research-lab")
    b.edit(CONF, "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageType=accounting_storage/none")
    expect(b, CONF, b.line_of(CONF, "AccountingStorageTRES="),
           r"AccountingStorageTRES=gres/gpu needs AccountingStorageType=accounting_storage/slurmdbd")


def _set_slurm_version(b: Broken, version: str) -> None:
    plan = json.loads((b.root / "plan.json").read_text())
    plan["versions"]["slurm"] = version
    (b.root / "plan.json").write_text(json.dumps(plan, indent=2))


def test_topology_yaml_needs_25_05(broken):
    b = broken("topology-yaml")
    _set_slurm_version(b, "24.11")
    expect(b, "slurm/topology.yaml", 1, r"topology.yaml needs Slurm 25.05 or newer; this bundle is for Slurm 24.11")


def test_topology_yaml_with_topology_plugin_line(broken):
    # another plugin than the YAML's cluster default: an error; the same one (a site's line that `orchgen import
    # slurm` carries, which 26.05 boots with) only a warning
    b = broken("topology-yaml")
    line = b.edit(CONF, "GresTypes=gpu\n", "GresTypes=gpu\nTopologyPlugin=topology/block\n") + 1
    expect(b, CONF, line, r"TopologyPlugin=topology/block with slurm/topology.yaml: .* remove this line")
    b.edit(CONF, "TopologyPlugin=topology/block\n", "TopologyPlugin=topology/tree\n")
    assert not [e for e in b.errors() if "TopologyPlugin" in e], b.errors()
    warnings = [str(f) for f in check(b.root).warnings]
    assert any(f"{CONF}:{line}: warning: TopologyPlugin=topology/tree with slurm/topology.yaml" in w
               for w in warnings), warnings


def test_topology_plugin_does_not_match_file(broken):
    b = broken("research-lab")
    line = b.edit(CONF, "TopologyPlugin=topology/tree", "TopologyPlugin=topology/block")
    expect(b, CONF, line, r"TopologyPlugin=topology/block, but slurm/topology.conf holds SwitchName lines")


def test_topology_conf_without_plugin(broken):
    b = broken("research-lab")
    b.edit(CONF, "TopologyPlugin=topology/tree\n", "")
    expect(b, CONF, 0, r"no TopologyPlugin, but the bundle has slurm/topology.conf")


def test_topology_plugin_without_file(broken):
    b = broken("research-lab")
    (b.root / TOPO).unlink()
    expect(b, CONF, b.line_of(CONF, "TopologyPlugin="),
           r"TopologyPlugin=topology/tree, but the bundle has no slurm/topology.conf")


def test_block_topology_needs_23_11(broken):
    b = broken("nvl72-blocks")
    _set_slurm_version(b, "23.02")
    expect(b, CONF, b.line_of(CONF, "TopologyPlugin="), r"topology/block needs Slurm 23.11 or newer; .* Slurm 23.02")


def test_batch_script_names_unknown_partition(broken):
    b = broken("topology-yaml")
    line = b.edit("slurm/ray-rl-pipeline.sbatch", "#SBATCH --partition=ray", "#SBATCH --partition=rays")
    expect(b, "slurm/ray-rl-pipeline.sbatch", line, r"partition rays is not defined in slurm.conf")


def test_slurm_conf_line_that_is_not_key_value(broken):
    b = broken("fsdp-pretraining")
    line = b.edit(CONF, "MpiDefault=none", "MpiDefault none")
    expect(b, CONF, line, r"not a key=value line")


# ---- Slurm GPU-node operations (options.slurm) ---------------------------------------------------

NHC = "slurm/nhc.conf"


def warnings_of(b: Broken) -> list[str]:
    return [str(f) for f in check(b.root).warnings]


def test_health_check_program_without_its_config(broken):
    b = broken("nvl72-blocks")
    (b.root / NHC).unlink()
    expect(b, CONF, b.line_of(CONF, "HealthCheckProgram="),
           r"HealthCheckProgram=/usr/sbin/nhc, but the bundle has no slurm/nhc.conf")


def test_health_check_that_never_runs(broken):
    b = broken("nvl72-blocks")
    line = b.edit(CONF, "HealthCheckInterval=300", "HealthCheckInterval=0")
    assert any(w.startswith(f"{CONF}:{line}: warning: HealthCheckInterval is 0") for w in warnings_of(b))


def test_nhc_gpu_check_disagrees_with_gres(broken):
    b = broken("nvl72-blocks")
    line = b.edit(NHC, "gpu-health.sh 4 gb200", "gpu-health.sh 8 gb200")
    expect(b, NHC, line, r"expects 8x gb200 GPUs on gb200-\[001-072\], but slurm.conf gives them "
                         r"Gres=gpu:gb200:4: NHC would drain nodes that are as configured")


def test_nhc_gpu_check_without_its_script(broken):
    b = broken("nvl72-blocks")
    (b.root / "slurm/gpu-health.sh").unlink()
    expect(b, NHC, 0, r"GPU checks run gpu-health.sh, but the bundle has no slurm/gpu-health.sh")


def test_imex_on_a_slurm_without_the_plugin(broken):
    b = broken("nvl72-blocks")
    _set_slurm_version(b, "23.11")
    expect(b, CONF, b.line_of(CONF, "SwitchType="), r"switch/nvidia_imex needs Slurm 24.05 or newer; .* Slurm 23.11")


def test_backup_controller_with_a_host_local_state_save_location(broken):
    b = broken("nvl72-blocks")  # two controllers, with the shared StateSaveLocation the example gives
    b.edit(CONF, "StateSaveLocation=/shared/slurm/statesave", "StateSaveLocation=/var/spool/slurmctld")
    expect(b, CONF, b.line_of(CONF, "StateSaveLocation="),
           r"2 SlurmctldHost lines, but StateSaveLocation=/var/spool/slurmctld is under /var/spool, each host's own")
    b.edit(CONF, "StateSaveLocation=/var/spool/slurmctld", "StateSaveLocation=/shared/slurm/state")
    assert not [e for e in b.errors() if "StateSaveLocation" in e]


def test_task_prolog_without_its_files(broken):
    b = broken("nvl72-blocks")
    (b.root / "slurm/nccl.env").unlink()
    expect(b, "slurm/task-prolog.sh", 0, r"reads nccl.env beside it, but the bundle has no slurm/nccl.env")
    (b.root / "slurm/task-prolog.sh").unlink()
    expect(b, CONF, b.line_of(CONF, "TaskProlog="), r"TaskProlog=/etc/slurm/task-prolog.sh, but the bundle has no")


def test_plugstack_line_spank_cannot_read(broken):
    b = broken("nvl72-blocks")
    line = b.edit("slurm/plugstack.conf.d/pyxis.conf", "optional /usr/local", "optinal /usr/local")
    expect(b, "slurm/plugstack.conf.d/pyxis.conf", line, r"not a SPANK line")


def test_pmix_default_on_a_slurm_that_opens_libpmix_so(broken):
    b = broken("fsdp-pretraining")
    line = b.edit(CONF, "MpiDefault=none", "MpiDefault=pmix")
    assert any(w.startswith(f"{CONF}:{line}: warning: MpiDefault=pmix on Slurm 22.05") for w in warnings_of(b))


# ---- Kubernetes ----------------------------------------------------------------------------------

KUEUE = "kubernetes/manifests/20-kueue.yaml"


@cache
def _flavor(example: str, pool: str) -> str:
    """A Kueue ResourceFlavor's name: its pool and a hash of its spec (content-named, issue 14)."""
    from generator.render.kubernetes.kueue import flavor_name

    return flavor_name(make_plan(spec.load(REPO / "examples" / f"{example}.yaml"), f"{example}.yaml"), pool)


L40S = _flavor("research-lab", "l40s")


def test_custom_resource_against_crd(broken):
    b = broken("research-lab")
    line = b.edit(KUEUE, "  cohortName: research-lab", "  cohort: research-lab")
    expect(b, KUEUE, line, r"ClusterQueue nlp: spec.cohort: unknown field")


def test_custom_resource_wrong_type(broken):
    b = broken("research-lab")
    line = b.edit(KUEUE, "nominalQuota: '48'", "nominalQuota: [48]")
    expect(b, KUEUE, line, r"ClusterQueue nlp: spec\.resourceGroups\[0\]\.flavors\[0\]\.resources\[2\]\.nominalQuota: "
                           r"expected integer or string, got array")


def test_custom_resource_unknown_version(broken):
    b = broken("research-lab")
    b.edit(KUEUE, "kueue.x-k8s.io/v1beta2\nkind: Cohort", "kueue.x-k8s.io/v1beta9\nkind: Cohort")
    expect(b, KUEUE, None, r"Cohort research-lab: no CRD defines kueue.x-k8s.io/v1beta9 Cohort")


def test_values_key_not_in_chart_defaults(broken):
    b = broken("research-lab")
    path = "kubernetes/helm/gpu-operator.values.yaml"
    line = b.edit(path, "mig:\n  strategy: single", "mig:\n  stratgy: single") + 1
    expect(b, path, line, r"mig.stratgy: unknown key \(not in gpu-operator v26.7.0 defaults\)")


def test_builtin_kind_strict(broken):
    b = broken("research-lab")
    path = "kubernetes/workloads/model-api.yaml"
    # model-api is a serving platform: its PodDisruptionBudget is a built-in kind
    line = b.edit(path, "  maxUnavailable: 1", "  maxUnavailabl: 1")
    expect(b, path, line, r"PodDisruptionBudget model-api: spec.maxUnavailabl: unknown field")


def test_builtin_kind_unknown_version(broken):
    b = broken("research-lab")
    path = "kubernetes/workloads/model-api.yaml"
    line = b.edit(path, "apiVersion: policy/v1", "apiVersion: policy/v2")
    expect(b, path, line, r"PodDisruptionBudget model-api: policy/v2 PodDisruptionBudget is not a Kubernetes 1.33 kind")


def test_cluster_scoped_object_with_namespace(broken):
    b = broken("research-lab")
    line = b.edit(KUEUE, f"  name: {L40S}\n", f"  name: {L40S}\n  namespace: nlp\n") + 1
    expect(b, KUEUE, line, rf"ResourceFlavor {L40S}: cluster-scoped, but has metadata.namespace")


def test_cluster_scoped_builtin_with_namespace(broken):
    b = broken("research-lab")
    path = "kubernetes/manifests/00-namespaces.yaml"
    line = b.edit(path, "  name: nlp\n", "  name: nlp\n  namespace: default\n") + 1
    expect(b, path, line, r"Namespace nlp: cluster-scoped, but has metadata.namespace")


def test_kueue_queue_missing(broken):
    b = broken("research-lab")
    path = "kubernetes/workloads/model-api.yaml"
    # the starter names no queue (the namespace's LocalQueue `default` takes it): name a wrong one
    b.edit(path, "    app.kubernetes.io/managed-by: orchgen\n",
           "    app.kubernetes.io/managed-by: orchgen\n    kueue.x-k8s.io/queue-name: nlq\n")
    expect(b, path, None, r"InferenceService model-api: Kueue LocalQueue nlq does not exist in namespace nlp")


def test_local_queue_names_missing_cluster_queue(broken):
    b = broken("research-lab")
    line = b.edit(KUEUE, "  clusterQueue: vision", "  clusterQueue: visionx")
    expect(b, KUEUE, line, r"LocalQueue default: ClusterQueue visionx does not exist")


def test_volcano_queue_missing(broken):
    b = broken("grpo-rl-volcano")
    path = "kubernetes/manifests/40-ray.yaml"
    b.edit(path, "volcano.sh/queue-name: alignment", "volcano.sh/queue-name: alignmnt")
    expect(b, path, None, r"RayCluster grpo-policy: Volcano Queue alignmnt \(volcano.sh/queue-name\) does not exist")


def test_kai_queue_missing(broken):
    b = broken("research-lab-kai")
    path = "kubernetes/workloads/eval-batch.yaml"
    b.edit(path, "kai.scheduler/queue: vision", "kai.scheduler/queue: visio")
    expect(b, path, None, r"Job eval-batch: KAI Queue visio does not exist")


def test_resource_flavor_labels_nobody_sets(broken):
    b = broken("research-lab")
    line = b.edit(KUEUE, "  nodeLabels:\n    orchgen.io/plane: kubernetes\n    orchgen.io/pool: l40s",
                  "  nodeLabels:\n    orchgen.io/plane: kubernetes\n    orchgen.io/pool: l40x")
    expect(b, KUEUE, line, rf"ResourceFlavor {L40S}: no node gets orchgen.io/plane=kubernetes, orchgen.io/pool=l40x "
                           r"from kubernetes/node-labels.sh")


def test_pod_node_selector_matches_no_node(broken):
    b = broken("research-lab")
    path = "kubernetes/workloads/eval-batch.yaml"
    b.edit(path, "        orchgen.io/pool: l40s", "        orchgen.io/pool: h100")
    expect(b, path, None, r"Job eval-batch: nodeSelector .*orchgen.io/pool=h100 matches no node")


def test_release_depends_on_a_later_release(broken):
    b = broken("grpo-rl-volcano")
    rel = "kubernetes/helm/releases.yaml"
    text = (b.root / rel).read_text()
    b.edit(rel, text, text.replace("dependsOn:\n  - volcano", "dependsOn:\n  - volcanoo"))
    expect(b, rel, None, r"release kuberay-operator depends on volcanoo, which is not installed before it")


def test_release_values_file_missing(broken):
    b = broken("research-lab")
    (b.root / "kubernetes/helm/kueue.values.yaml").unlink()
    expect(b, "kubernetes/helm/releases.yaml", None, r"release kueue: kubernetes/helm/kueue.values.yaml does not exist")


def test_custom_resource_group_no_release_installs(broken):
    b = broken("grpo-rl")
    rel = "kubernetes/helm/releases.yaml"
    b.edit(rel, "  - ray.io\n", "")
    expect(b, "kubernetes/manifests/40-ray.yaml", None,
           r"RayCluster grpo-policy: no release .* installs the CRDs of ray.io")


def test_object_defined_twice(broken):
    b = broken("research-lab")
    path = "kubernetes/manifests/00-namespaces.yaml"
    text = (b.root / path).read_text()
    (b.root / path).write_text(text + text.split("---\n")[1].join(["---\n", ""]))
    expect(b, path, None, r"Namespace nlp is defined twice \(first at kubernetes/manifests/00-namespaces.yaml:2\)")


def test_kustomization_resource_missing(broken):
    b = broken("research-lab")
    (b.root / "kubernetes/manifests/18-topology.yaml").rename(b.root / "kubernetes/manifests/19-topology.yaml")
    expect(b, "kubernetes/kustomization.yaml", None, r"resource manifests/18-topology.yaml does not exist")


@pytest.mark.parametrize("mode,path,old", [
    # research-lab runs a service on Kueue: waitForPodsReady's timeout is sized for it
    ("argocd", "gitops/apps/kueue.yaml", "timeout: 45m"),
    ("flux", "gitops/releases/kueue.yaml", "timeout: 45m"),
])
def test_gitops_values_differ_from_helm_values(mode, path, old, tmp_path):
    bundle.write(render(make_plan(_variant("research-lab", gitops=mode), "research-lab.yaml")), tmp_path / "src")
    b = Broken(tmp_path / "src", tmp_path / "b")
    b.edit(path, old, "timeout: 5m")
    expect(b, path, None, r"values differ from kubernetes/helm/kueue.values.yaml")


def test_gitops_custom_resource_against_crd(tmp_path):
    bundle.write(render(make_plan(_variant("research-lab", gitops="flux"), "research-lab.yaml")), tmp_path / "src")
    b = Broken(tmp_path / "src", tmp_path / "b")
    line = b.edit("gitops/kustomizations.yaml", "  prune: true", "  prun: true")
    expect(b, "gitops/kustomizations.yaml", line, r"Kustomization research-lab-releases: spec.prun: unknown field")


def test_unparsable_yaml_is_a_finding(broken):
    b = broken("research-lab")
    line = b.edit(KUEUE, f"  name: {L40S}\n", f"  name: [{L40S}\n")
    expect(b, KUEUE, None, r"not valid YAML")
    assert line


def test_broken_plan_json_is_a_finding(broken):
    b = broken("research-lab")
    (b.root / "plan.json").write_text('{"versions": {"slurm": "22.05"},\n  oops\n}')
    expect(b, "plan.json", 2, r"not valid JSON")


def test_unreadable_kubernetes_version_is_a_finding(broken):
    b = broken("research-lab")
    plan = json.loads((b.root / "plan.json").read_text())
    plan["versions"]["kubernetes"] = "latest"
    (b.root / "plan.json").write_text(json.dumps(plan))
    expect(b, "plan.json", 0, r"versions.kubernetes: 'latest' is not a Kubernetes version")


def test_file_that_is_not_utf8_is_a_finding(broken):
    b = broken("research-lab")
    (b.root / KUEUE).write_bytes((b.root / KUEUE).read_bytes() + b"# \xff\xfe\n")
    expect(b, KUEUE, 0, r"not UTF-8 text")


# ---- cross-plane ---------------------------------------------------------------------------------

LABELS = "kubernetes/node-labels.sh"


def test_hybrid_node_in_both_planes(broken):
    b = broken("research-lab")
    line = b.edit(LABELS, "label l40s-001 ", "label gpu-h100-064 l40s-001 ")
    expect(b, LABELS, line, r"nodes in both planes: gpu-h100-064 are Slurm nodes \(slurm/slurm.conf:\d+\)")


def test_plan_json_planes_overlap(broken):
    b = broken("research-lab")
    plan = json.loads((b.root / "plan.json").read_text())
    plan["planes"]["kubernetes"]["nodes"].append("gpu-h100-001")
    (b.root / "plan.json").write_text(json.dumps(plan, indent=2))
    expect(b, "plan.json", 0, r"nodes in both planes: gpu-h100-001 are in planes.slurm and planes.kubernetes")


def test_slurm_node_on_kubernetes_without_taint(broken):
    b = broken("slinky-bare-metal")
    text = (b.root / LABELS).read_text()
    node = next(ln.split()[1] for ln in text.splitlines() if ln.startswith("taint "))
    b.edit(LABELS, text, "\n".join(ln for ln in text.splitlines() if not ln.startswith(f"taint {node}")) + "\n")
    expect(b, LABELS, None, rf"node {node} is labelled orchgen.io/plane=slurm but not tainted NoSchedule")


def test_cloud_slurm_nodes_without_taint(broken):
    """Off bare metal the Slurm side of a shared pool is assigned by selector; untainted, Kubernetes
    pods would land there too."""
    b = broken("cloud-training")
    text = (b.root / LABELS).read_text()
    b.edit(LABELS, "assign_plane orchgen.io/pool=h100 30 2",  # the node-granular split (issue 11)
             "expect_nodes orchgen.io/pool=h100 32\nlabel -l orchgen.io/pool=h100 orchgen.io/plane=slurm")
    assert text != (b.root / LABELS).read_text()
    expect(b, LABELS, None, r"nodes with orchgen.io/plane=slurm,orchgen.io/pool=h100 are labelled orchgen.io/plane=slurm "
                            r"but not tainted NoSchedule")


def test_gres_of_a_split_pool_differs_between_planes(broken):
    b = broken("research-lab-split")
    line = b.edit(CONF, "Gres=gpu:h100:8", "Gres=gpu:h100:4")
    b.edit(GRES, "File=/dev/nvidia[0-7]", "File=/dev/nvidia[0-3]")  # Slurm agrees with itself
    expect(b, CONF, line, r"pool h100: Slurm has Gres=gpu:h100:4 per node but the Kubernetes plane has 8x h100")


def test_pod_asks_more_gpus_than_its_pool_has(broken):
    b = broken("research-lab")
    path = "kubernetes/workloads/model-api.yaml"
    b.edit(path, "          nvidia.com/gpu: '4'", "          nvidia.com/gpu: '16'")  # the KServe predictor's
    expect(b, path, None, r"InferenceService model-api: a pod asks for 16 GPUs but nodes of pool l40s have 4")


SLINKY = "kubernetes/helm/slurm.values.yaml"


def test_slinky_nodeset_gres_disagrees_with_its_gpu_limit(broken):
    """Slinky #57/#101: extraConfMap.Gres and the slurmd GPU limit differ -> nodes come up Gres=(null)."""
    b = broken("cloud-training")
    b.edit(SLINKY, "          nvidia.com/gpu: 8", "          nvidia.com/gpu: 4")
    expect(b, SLINKY, b.line_of(SLINKY, "  h100:\n"),
           r"NodeSet h100: extraConfMap.Gres=gpu:h100:8 but slurmd limits nvidia.com/gpu=4")


def test_slinky_gres_types_missing(broken):
    b = broken("cloud-training")
    b.edit(SLINKY, "    GresTypes: gpu\n", "")
    expect(b, SLINKY, b.line_of(SLINKY, "Gres: gpu:h100:8"),
           r"NodeSet h100: Gres=gpu:h100:8 but controller.extraConfMap.GresTypes does not list gpu")


def test_slinky_accounting_tres_without_slurmdbd(broken):
    b = broken("cloud-training")
    b.edit(SLINKY, "accounting:\n  enabled: true", "accounting:\n  enabled: false")
    # the key's line, not accounts.sh's comment that names it
    expect(b, SLINKY, b.line_of(SLINKY, "AccountingStorageTRES:"), r"AccountingStorageTRES needs accounting.enabled")


def test_slinky_gres_conf_disagrees_with_nodeset(broken):
    b = broken("cloud-training")
    b.edit(SLINKY, "Name=gpu Type=h100 File=/dev/nvidia[0-7]", "Name=gpu Type=h100 File=/dev/nvidia[0-3]")
    expect(b, SLINKY, b.line_of(SLINKY, "  gres.conf:"),
           # h100-[0-29]: Kubernetes' 2 nodes are split off the last leaf by node (issue 11; was [0-23])
           r"configFiles gres.conf gives h100-\[0-29\] gpu:h100:4, but NodeSet h100 says Gres=gpu:h100:8")


def test_slinky_partition_names_missing_nodeset(broken):
    b = broken("cloud-training")
    line = b.edit(SLINKY, "    - ALL", "    - h200")
    expect(b, SLINKY, line, r"partition all names NodeSet h200, which does not exist")


def test_slinky_nodeset_larger_than_its_nodes(broken):
    b = broken("cloud-training")
    b.edit(SLINKY, "    replicas: 30", "    replicas: 31")  # 30 since issue 11's split by node (was 24)
    expect(b, SLINKY, None, r"NodeSet h100: 31 replicas but only 30 nodes carry its nodeSelector")


def test_slinky_nodeset_does_not_tolerate_its_nodes(broken):
    b = broken("cloud-training")
    b.edit(SLINKY, "        value: slurm\n", "        value: slurmd\n")
    expect(b, SLINKY, None, r"NodeSet h100: its nodes are tainted orchgen.io/plane=slurm:NoSchedule and it does "
                            r"not tolerate that")


# ---- secrets -------------------------------------------------------------------------------------


def test_key_material_is_an_error(broken):
    b = broken("research-lab")
    line = b.edit(CONF, "slurmdbd\n", "slurmdbd\nStoragePass=hunter2x\n") + 1
    expect(b, CONF, line, r"looks like a literal StoragePass value")


# ---- the command ---------------------------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), "validate", *map(str, args)],
                          capture_output=True, text=True)


def _count(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file() and p.name != bundle.MARKER)


def test_cli_clean_bundle_exit_0_one_summary(pristine):
    ref, root = reference_dir(), pristine("research-lab")
    proc = run(root, "--crds", ref, "--chart-defaults", ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"{root}: ok ({_count(root)} files checked)"]
    assert not proc.stderr


def test_cli_without_dirs_skips_with_notices(pristine):
    proc = run(pristine("research-lab"), "--no-fetch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("notice: ")] == [
        "notice: no --crds: custom resources not checked against CRD schemas",
        "notice: no --chart-defaults: Helm values not checked against the charts' default values"]
    assert lines[-1].endswith(f"ok ({_count(pristine('research-lab'))} files checked; 2 check(s) skipped)")


def test_cli_findings_and_exit_1(broken):
    b = broken("research-lab")
    line = b.edit(GRES, "Type=h100", "Type=a100")
    proc = run(b.root, "--no-fetch")
    assert proc.returncode == 1
    assert re.search(rf"^slurm/gres.conf:{line}: gpu-h100-\[001-064\]: gres.conf has gpu:a100:8", proc.stdout, re.M)
    assert proc.stdout.splitlines()[-1] == f"{b.root}: 1 error ({_count(b.root)} files checked; 2 check(s) skipped)"


@pytest.mark.parametrize("args,pattern", [
    (["/nonexistent/bundle"], r"^orchgen: /nonexistent/bundle: no such bundle directory$"),
    (["{file}"], r"^orchgen: .*plan.json: is not a directory$"),
    (["{empty}"], r"^orchgen: .*: is not an orchgen bundle"),
    (["{bundle}", "--crds", "/nonexistent"], r"^orchgen: /nonexistent: --crds: cannot load CRDs"),
    (["{bundle}", "--crds", "{empty}"], r"^orchgen: .*: --crds: holds no CustomResourceDefinition$"),
    (["{bundle}", "--crds", "{badcrd}"], r"^orchgen: .*: --crds: cannot load CRDs: .*not valid YAML"),
    # a schema is parsed when a custom resource first needs it: the same usage error, then
    (["{bundle}", "--crds", "{badschema}", "--no-fetch"], r"^orchgen: --crds: cannot load CRDs: .*cq\.yaml: not valid YAML"),
    (["{bundle}", "--chart-defaults", "/nonexistent"],
     r"^orchgen: /nonexistent: --chart-defaults: is not a directory$"),
    ([], r"^orchgen: Missing argument 'BUNDLE'"),
    (["{bundle}", "--bogus"], r"^orchgen: No such option '--bogus'"),
])
def test_cli_bad_usage_exit_2_one_line(args, pattern, pristine, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "badcrd").mkdir()
    (tmp_path / "badcrd" / "x.yaml").write_text("kind: CustomResourceDefinition\nspec: [\n")
    (tmp_path / "badschema").mkdir()
    (tmp_path / "badschema" / "cq.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  group: kueue.x-k8s.io\n"
        "  names: {kind: ClusterQueue}\n  scope: Cluster\n  versions:\n  - name: v1beta2\n    served: true\n"
        "    schema:\n      openAPIV3Schema:\n        properties: [\n")
    subs = {"{bundle}": str(pristine("research-lab")), "{empty}": str(tmp_path / "empty"),
            "{file}": str(pristine("research-lab") / "plan.json"), "{badcrd}": str(tmp_path / "badcrd"),
            "{badschema}": str(tmp_path / "badschema")}
    proc = run(*[subs.get(a, a) for a in args])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and re.search(pattern, proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr


def test_validate_needs_no_reference_data_at_run_time(pristine, tmp_path):
    """With CRDs and defaults copied elsewhere, validate opens nothing under the reference dir
    (an audit hook records every file the process opens)."""
    ref = reference_dir().resolve()
    copy = tmp_path / "mine"
    shutil.copytree(ref, copy)
    script = (
        "import sys\n"
        "seen = []\n"
        "sys.addaudithook(lambda ev, args: seen.append(str(args[0])) if ev == 'open' and args and "
        f"str(args[0]).startswith({str(ref)!r}) else None)\n"
        "from generator.cli import main\n"
        f"sys.argv = ['orchgen', 'validate', {str(pristine('research-lab'))!r}, '--crds', {str(copy)!r}, "
        f"'--chart-defaults', {str(copy)!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
        "print('OPENED:', seen, 'CODE:', code)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "ORCHGEN_REFERENCE": "/nonexistent"})
    assert proc.stdout.splitlines()[-1] == "OPENED: [] CODE: 0", proc.stdout + proc.stderr


def test_validation_libraries_are_main_dependencies():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = " ".join(project["dependencies"])
    assert "jsonschema" in deps and "kubernetes-validate" in deps and "cel-python" in deps


# ---- nodes as the real cluster knows them (issue 15) ---------------------------------------------


def test_a_flavor_that_selects_only_part_of_its_pool(broken):
    """Bare metal: every label an object selects is set by node-labels.sh on exactly its pool's
    nodes. A leaf of l40s labelled as another pool leaves the l40s flavor and pods short."""
    b = broken("research-lab")
    text = (b.root / LABELS).read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("label ") and "orchgen.io/pool=l40s" in ln)
    b.edit(LABELS, line, line.replace("orchgen.io/pool=l40s", "orchgen.io/pool=l40s-old"))
    expect(b, "kubernetes/manifests/20-kueue.yaml", None,
           r"ResourceFlavor l40s-[0-9a-f]{8}: selects 0 node\(s\) by orchgen.io/plane=kubernetes,orchgen.io/pool=l40s .* "
           r"but pool l40s has 16 on the kubernetes plane")


def test_a_pod_that_selects_a_pool_beyond_its_plane(broken):
    """Bare metal, Slinky on a pool both planes share: a starter pod without the plane label would
    select the pool's Slurm nodes too."""
    b = broken("research-lab-slinky-split")
    path = "kubernetes/workloads/model-api.yaml"
    b.edit(path, "      orchgen.io/plane: kubernetes\n", "")  # the KServe predictor's nodeSelector
    expect(b, path, None, r"InferenceService model-api: selects 64 node\(s\) by orchgen.io/pool=h100 .* but pool h100 "
                          r"has 2 on the kubernetes plane \(plan.json\): also gpu-h100-")  # the node-granular split


def test_a_cloud_pod_selecting_a_node_by_name(broken):
    b = broken("cloud-training")
    path = "kubernetes/workloads/finetune-jobs.yaml"
    line = b.edit(path, "        orchgen.io/plane: kubernetes\n",
                  "        orchgen.io/plane: kubernetes\n        kubernetes.io/hostname: vm-0042\n")
    expect(b, path, None, r"Job finetune-jobs: selects a node by name \(kubernetes.io/hostname\)")
    assert line


def test_a_cloud_bundle_naming_an_invented_node(broken):
    """Off bare metal the plan's node names only count nodes: one written into a manifest is caught."""
    b = broken("cloud-training")
    flavor = re.search(r"name: (h100-[0-9a-f]{8})\n", (b.root / "kubernetes/manifests/20-kueue.yaml").read_text())[1]
    b.edit("kubernetes/manifests/20-kueue.yaml", f"name: {flavor}\n", f"name: {flavor}\n  annotations: {{pinned: h100-007}}\n")
    expect(b, "kubernetes/manifests/20-kueue.yaml", None, r"names node\(s\) h100-007, which only count nodes")
