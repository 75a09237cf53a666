"""Model servers that start (issue 34): every tensor-parallel size orchgen writes for the placeholder model
is one vLLM accepts for that model's published config.

The placeholder's values are recorded here from its published config.json, and vLLM's rule is written out
here from vLLM's source, independently of generator/decide/vllm.py:
- https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json: "num_attention_heads": 16,
  "num_key_value_heads": 8, "num_hidden_layers": 28, "architectures": ["Qwen3ForCausalLM"];
- vllm/config/model.py ModelConfig.verify_with_parallel_config: "Total number of attention heads (...) must
  be divisible by tensor parallel size (...)"; vllm/model_executor/layers/linear.py QKVParallelLinear:
  `divide(total_num_kv_heads, tp_size)` below the KV heads, `divide(tp_size, total_num_kv_heads)` from
  them on (`divide` asserts an exact division); vllm/distributed/utils.py get_pp_indices: each pipeline
  stage holds at least one of num_hidden_layers.
What the generator can write: a pool has 1 to 64 GPUs a node (spec/models.py Gpu.count), a replica spans
1 to 64 nodes (Serving.nodes_per_replica) with the same GPUs in each pod; every (GPUs a pod, pods) pair is
checked, and the four serving stacks are rendered for every per-node count from 1 to 16 to read the
sizes from the objects themselves (vLLM's flags, Ray Serve LLM's engine_kwargs).
"""
from __future__ import annotations

from typing import Any

import pytest
import yaml

from generator.decide import vllm
from generator.render.kubernetes import serving
from tests._consumers import REPO
from tests.support import plan_of, run_cli
from tests.test_serving import EXAMPLE

CONFIG_URL = "https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json"
HEADS, KV_HEADS, LAYERS = 16, 8, 28  # recorded from CONFIG_URL


def vllm_accepts_tp(tp: int) -> bool:
    if HEADS % tp:
        return False  # verify_with_parallel_config
    return KV_HEADS % tp == 0 if tp < KV_HEADS else tp % KV_HEADS == 0  # QKVParallelLinear


def whole_split_exists(per_pod: int, pods: int) -> bool:
    """Some accepted TP inside a pod, with the rest as pipeline stages within the layers, uses every GPU."""
    return any(per_pod % t == 0 and vllm_accepts_tp(t) and per_pod // t * pods <= LAYERS
               for t in range(1, per_pod + 1))


def test_the_recorded_config_is_the_generators():
    m = vllm.KNOWN[vllm.PLACEHOLDER_MODEL]
    assert (m.num_attention_heads, m.num_key_value_heads, m.num_hidden_layers) == (HEADS, KV_HEADS, LAYERS)
    assert m.source == CONFIG_URL
    from generator.decide import serving as decide_serving
    assert decide_serving.PLACEHOLDER_MODEL == vllm.PLACEHOLDER_MODEL == "Qwen/Qwen3-0.6B"


def test_every_size_the_generator_can_write_is_accepted():
    for per_pod in range(1, 65):
        for pods in range(1, 65):
            tp, pp = vllm.parallelism(vllm.PLACEHOLDER_MODEL, per_pod, pods)
            assert vllm_accepts_tp(tp), (per_pod, pods, tp)
            assert per_pod % tp == 0, (per_pod, pods, tp)  # a TP group stays inside a pod (a node's NVLink)
            assert 1 <= pp <= LAYERS and tp * pp <= per_pod * pods, (per_pod, pods, tp, pp)
            # every GPU is used whenever some accepted split uses them all
            if whole_split_exists(per_pod, pods):
                assert tp * pp == per_pod * pods, (per_pod, pods, tp, pp)
    # the case: TP 4 and 8 on one node (Qwen2.5-0.5B's 14 heads refused both)
    assert vllm.parallelism(vllm.PLACEHOLDER_MODEL, 4, 1) == (4, 1)
    assert vllm.parallelism(vllm.PLACEHOLDER_MODEL, 8, 1) == (8, 1)
    assert vllm.parallelism(vllm.PLACEHOLDER_MODEL, 8, 2) == (8, 2)


def test_a_model_of_your_own_keeps_a_pods_gpus_as_tp():
    assert vllm.parallelism("meta-llama/Llama-3.1-405B-Instruct", 8, 2) == (8, 2)


def _sizes(obj: dict[str, Any]) -> tuple[int, int]:
    """(TP, PP) as the server reads them from the object orchgen wrote."""
    if obj["kind"] == "RayService":
        cfg = yaml.safe_load(obj["spec"]["serveConfigV2"])
        engine = cfg["applications"][0]["args"]["llm_configs"][0]["engine_kwargs"]
        return engine["tensor_parallel_size"], engine.get("pipeline_parallel_size", 1)
    if obj["kind"] == "LeaderWorkerSet":
        args = obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["args"][0].split()
    elif obj["kind"] == "InferenceService":
        args = obj["spec"]["predictor"]["containers"][0]["args"]
    else:
        args = obj["spec"]["template"]["spec"]["containers"][0]["args"]

    def flag(name: str) -> int:
        return int(args[args.index(name) + 1]) if name in args else 1
    return flag("--tensor-parallel-size"), flag("--pipeline-parallel-size")


@pytest.mark.parametrize("per_node", range(1, 17))
def test_the_rendered_servers_carry_accepted_sizes(per_node: int):
    doc = yaml.safe_load(EXAMPLE.read_text())
    h100 = next(p for p in doc["fleet"]["pools"] if p["name"] == "h100")
    h100["gpu"]["count"] = per_node
    doc["workloads"] = [
        {"name": "one-node", "long_lived_services": True, "tenant": "chat", "pool": "h100", "gpus": per_node,
         "serving": {"stack": "kserve"}},
        {"name": "plain", "long_lived_services": True, "tenant": "chat", "pool": "h100", "gpus": per_node,
         "serving": {"stack": "plain"}},
        # a tightly coupled service of two nodes: one LeaderWorkerSet replica over both
        {"name": "two-node", "nodes": 2, "tightly_coupled": True, "long_lived_services": True, "tenant": "chat",
         "pool": "h100"},
        {"name": "ray", "long_lived_services": True, "tenant": "chat", "pool": "h100", "gpus": per_node,
         "serving": {"stack": "ray"}},
    ]
    plan = plan_of(doc)
    seen = {}
    for w in serving.serving_workloads(plan):
        server = serving.objects(plan, w)[0]
        tp, pp = _sizes(server)
        assert vllm_accepts_tp(tp) and pp <= LAYERS, (w.name, server["kind"], tp, pp)
        seen[w.name] = (server["kind"], tp * pp)
    # every GPU of a replica is used where an accepted split exists
    pods_of = {"two-node": 2}
    for name, (kind, used) in seen.items():
        if whole_split_exists(per_node, pods_of.get(name, 1)):
            assert used == per_node * pods_of.get(name, 1), (name, kind, used)
    assert seen["two-node"][0] == "LeaderWorkerSet"


def test_a_mig_endpoint_is_one_instance_with_tp_1():
    """mig-lab's model-demo (gpus: 1 on a pool of A100s cut into seven 1g.10gb instances): each replica is
    one instance, as a CUDA process enumerates only one MIG device; the GPU's seven instances are its
    replicas."""
    plan = plan_of(REPO / "examples" / "mig-lab.yaml")
    [w] = [w for w in serving.serving_workloads(plan) if w.name == "model-demo"]
    server = serving.objects(plan, w)[0]
    pod = server["spec"]["predictor"]
    res = pod["containers"][0]["resources"]
    assert res["requests"]["nvidia.com/mig-1g.10gb"] == res["limits"]["nvidia.com/mig-1g.10gb"] == "1"
    assert "nvidia.com/gpu" not in res["requests"]
    assert _sizes(server) == (1, 1)
    assert w.serving.max_replicas == 7 and w.serving.gpus_per_replica == 1


def test_a_mig_replica_of_several_instances_is_refused(tmp_path):
    doc = yaml.safe_load((REPO / "examples" / "mig-lab.yaml").read_text())
    next(w for w in doc["workloads"] if w["name"] == "model-demo")["serving"] = {"gpus_per_replica": 2}
    path = tmp_path / "mig.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli(["plan", path, "-o", tmp_path / "out"], capture_output=True, text=True)
    assert r.returncode == 2 and not (tmp_path / "out").exists(), r.stderr
    [line] = r.stderr.strip().splitlines()
    assert "serving.gpus_per_replica" in line and "MIG" in line, line
