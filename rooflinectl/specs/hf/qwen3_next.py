"""Hugging Face ``config.json`` to a model's fields: Qwen3-Next, read as transformers' Qwen3NextConfig and
Qwen3NextDecoderLayer build it. Pure translation, for ``specs.hf.config.model_fields``.

- Layers: ``layer_types`` (``linear_attention`` or ``full_attention``), else every ``full_attention_interval``-th
  layer full (Qwen3NextConfig's default); a linear layer is Gated DeltaNet of ``linear_num_key_heads`` /
  ``linear_num_value_heads`` heads of ``linear_key_head_dim`` / ``linear_value_head_dim``, conv of
  ``linear_conv_kernel_dim`` taps. A full layer is gated attention (q_proj twice as wide, O·sigmoid(gate)) with
  Q/K norms and RoPE on ``partial_rotary_factor`` of each head.
- Experts: every layer is MoE (``decoder_sparse_step`` 1, no ``mlp_only_layers``: others are refused), ``num_experts``
  of width ``moe_intermediate_size``, top ``num_experts_per_tok``, one shared expert of
  ``shared_expert_intermediate_size`` scaled by its sigmoid gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError

# The expert keys a qwen3_next config is read with (specs.hf.experts refuses the others).
QWEN3_NEXT_MOE_KEYS: tuple[str, ...] = ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                        "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers",
                                        "norm_topk_prob")
# Qwen3NextConfig's defaults (transformers 5.25) for keys a config.json may leave out (the sizes that set the
# shape excepted), and partial_rotary_factor, which it keeps in rope_parameters.
QWEN3_NEXT_DEFAULTS: dict[str, Any] = {
    "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 151936, "max_position_embeddings": 32768,
    "tie_word_embeddings": False, "partial_rotary_factor": 0.25, "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "full_attention_interval": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
}
_LAYER_NAMES = {"linear_attention": "linear", "full_attention": "full"}


def _period(pattern: list[str]) -> list[str]:
    """The shortest prefix whose repetition from layer 0 gives the whole list."""
    return next(pattern[:p] for p in range(1, len(pattern) + 1)
                if all(pattern[i] == pattern[i % p] for i in range(len(pattern))))


def hf_qwen3_next(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The Model fields of a Qwen3-Next config beyond the common keys (module docstring)."""
    layers = cfg["num_hidden_layers"]
    if not (type(layers) is int and layers > 0):
        return {}  # validation names the bad num_layers
    for key, none in (("decoder_sparse_step", 1), ("mlp_only_layers", [])):
        if cfg[key] not in (none, None):
            raise UserError(f"{path}: field '{key}': {cfg[key]!r} puts dense layers among the MoE ones, which is "
                            f"not modelled for qwen3_next")
    types = cfg.get("layer_types")
    if types is None:
        interval = cfg["full_attention_interval"]
        if not (type(interval) is int and interval > 0):
            raise UserError(f"{path}: field 'full_attention_interval': expected a positive integer, got {interval!r}")
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
    if not (isinstance(types, list) and len(types) == layers and all(t in _LAYER_NAMES for t in types)):
        raise UserError(f"{path}: field 'layer_types': expected {layers} entries of 'linear_attention' or "
                        f"'full_attention'")
    pattern = _period([_LAYER_NAMES[t] for t in types])
    if "full" not in pattern:
        raise UserError(f"{path}: field 'layer_types': no full-attention layer; not modelled")
    for key in ("moe_intermediate_size", "num_experts", "num_experts_per_tok"):
        if key not in cfg:
            raise UserError(f"{path}: field '{key}': missing from the qwen3_next config (its experts)")
    shared = cfg.get("shared_expert_intermediate_size")
    data: dict[str, Any] = {
        "qk_norm": True,  # Qwen3NextAttention's q_norm and k_norm (no config key)
        "attn_output_gate": True,  # its q_proj gives Q and the gate (no config key)
        "moe": {"num_experts": cfg["num_experts"], "experts_per_token": cfg["num_experts_per_tok"],
                "expert_intermediate_size": cfg["moe_intermediate_size"],
                **({"num_shared_experts": 1, "shared_expert_intermediate_size": shared, "shared_expert_gate": True}
                   if shared else {})},
    }
    if "linear" in pattern:
        data["layer_pattern"] = pattern
        data["linear_attention"] = {
            "num_key_heads": cfg["linear_num_key_heads"], "num_value_heads": cfg["linear_num_value_heads"],
            "key_head_dim": cfg["linear_key_head_dim"], "value_head_dim": cfg["linear_value_head_dim"],
            "conv_kernel": cfg["linear_conv_kernel_dim"]}
    return data
