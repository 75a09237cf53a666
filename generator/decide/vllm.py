"""How vLLM splits a model over a replica's GPUs: the tensor- and pipeline-parallel sizes orchgen writes.

vLLM refuses a tensor-parallel size (TP) that does not split the model's attention heads evenly, and
one that splits its key/value heads unevenly:
- vllm/config/model.py, ModelConfig.verify_with_parallel_config: "Total number of attention heads
  (...) must be divisible by tensor parallel size (...)";
- vllm/model_executor/layers/linear.py, QKVParallelLinear: `divide(total_num_kv_heads, tp_size)` when
  TP is below the KV heads, else `divide(tp_size, total_num_kv_heads)` (each rank then holds a
  replica of one KV head); `divide` asserts an exact division.
Pipeline parallelism (PP) needs a model implementing vLLM's SupportsPP and gives each stage at least
one layer (vllm/distributed/utils.py get_pp_indices over num_hidden_layers).

For a model whose config orchgen knows (`KNOWN`: the placeholder), TP is the largest size vLLM accepts
that divides a pod's GPUs, and PP takes the rest (GPUs / TP per pod, times the replica's pods), capped
at the model's layers. For a model of your own orchgen cannot read its config: TP is a pod's GPUs and
PP the replica's pods, as vLLM's multi-node recipe writes them (its heads must divide TP).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """The values of a model's published config.json that vLLM's parallel checks read."""

    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    supports_pp: bool  # its vLLM implementation declares SupportsPP
    source: str  # where the values were read


# The placeholder model: Qwen3-0.6B (Apache-2.0, not gated), vLLM's own default --model
# (vllm/config/model.py: `model: str = "Qwen/Qwen3-0.6B"`). Its 16 attention heads and 8 KV heads
# admit TP 1, 2, 4, 8 and 16 (Qwen2.5-0.5B's 14 heads admitted only 1, 2, 7 and 14), and
# Qwen3ForCausalLM implements SupportsPP (vllm/model_executor/models/qwen3.py).
PLACEHOLDER_MODEL = "Qwen/Qwen3-0.6B"
KNOWN: dict[str, ModelShape] = {
    PLACEHOLDER_MODEL: ModelShape(num_attention_heads=16, num_key_value_heads=8, num_hidden_layers=28,
                                  supports_pp=True,
                                  source="https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json"),
}


def tp_accepted(m: ModelShape, tp: int) -> bool:
    """vLLM's rule (module docstring): the attention heads divide by TP, and the KV heads divide by TP
    or TP by the KV heads."""
    if tp < 1 or m.num_attention_heads % tp:
        return False
    kv = m.num_key_value_heads
    return kv % tp == 0 if tp < kv else tp % kv == 0


def parallelism(model: str | None, gpus_per_pod: int, pods: int) -> tuple[int, int]:
    """(tensor_parallel_size, pipeline_parallel_size) of one replica: `pods` pods of `gpus_per_pod`
    GPUs each."""
    gpus_per_pod, pods = max(1, gpus_per_pod), max(1, pods)
    m = KNOWN.get(model or "")
    if m is None:
        return gpus_per_pod, pods
    best = (1, 1)
    for tp in range(1, gpus_per_pod + 1):
        if gpus_per_pod % tp or not tp_accepted(m, tp):
            continue
        pp = (gpus_per_pod // tp) * pods if m.supports_pp else 1
        pp = min(pp, m.num_hidden_layers)
        if tp * pp >= best[0] * best[1]:
            best = (tp, pp)
    return best
