"""Hugging Face ``config.json`` to a model's fields: GLM-4.5 and GLM-4.6 (model_type glm4_moe), read as
transformers' Glm4MoeConfig and Glm4MoeDecoderLayer build it. Pure translation, for
``specs.hf.config.model_fields``.

- Attention: GQA with ``head_dim`` given (96 heads of 128 over a hidden size of 5,120); ``attention_bias`` puts
  biases on q_proj, k_proj and v_proj only (Glm4MoeAttention builds o_proj without one); ``use_qk_norm`` an
  RMSNorm over each head of Q and K; RoPE on ``partial_rotary_factor`` of each head (Glm4MoeConfig: 0.5).
- Experts: the first ``first_k_dense_replace`` layers keep the dense MLP of ``intermediate_size``, every later one
  is MoE: ``n_routed_experts`` of ``moe_intermediate_size``, top ``num_experts_per_tok``, and ``n_shared_experts``
  of that width as one MLP. The router is DeepSeek-V3's: sigmoid scores, a correction bias that is a buffer (no
  weight), group-limited top-k (``n_group``, ``topk_group``) and scaling of the k weights
  (``routed_scaling_factor``, ``norm_topk_prob``), counted as engine.count's softmax router (5 FLOPs a logit).
- ``num_nextn_predict_layers``: the multi-token-prediction layer (the checkpoint's layer 92 in GLM-4.5) runs only
  for speculative decoding; transformers does not build it, and no step counts it (``specs.hf.mtp`` reads it as
  ``mtp_layers``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError

# The expert keys a glm4_moe config is read with (specs.hf.experts refuses the others).
GLM4_MOE_KEYS: tuple[str, ...] = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                                  "n_shared_experts", "first_k_dense_replace", "n_group", "topk_group",
                                  "norm_topk_prob", "num_nextn_predict_layers")
# Glm4MoeConfig's defaults (transformers 5.25) for keys a config.json may leave out (the sizes that set the shape,
# the experts' counts and width included, excepted). Its partial_rotary_factor (0.5) is read by rotary_factor.
GLM4_MOE_DEFAULTS: dict[str, Any] = {
    "num_key_value_heads": 8, "vocab_size": 151552, "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "attention_bias": False, "use_qk_norm": False, "n_shared_experts": 1, "first_k_dense_replace": 1,
}
_GLM4_MOE_ROTARY = 0.5


def rotary_factor(cfg: dict[str, Any], default: float) -> dict[str, Any]:
    """The config with ``partial_rotary_factor`` at its top: the config's own, else its ``rope_parameters``' (where
    transformers 5 writes it), else the class's ``default``."""
    if "partial_rotary_factor" in cfg:
        return cfg
    rope = cfg.get("rope_parameters")
    inner = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    return {**cfg, "partial_rotary_factor": default if inner is None else inner}


def glm4_moe_keys(cfg: dict[str, Any]) -> dict[str, Any]:
    """A glm4_moe config with its partial_rotary_factor where ``specs.hf.config`` reads it."""
    return rotary_factor(cfg, _GLM4_MOE_ROTARY)


def _flag(cfg: dict[str, Any], key: str, path: Path) -> bool:
    value = cfg[key]
    if type(value) is not bool:
        raise UserError(f"{path}: field '{key}': expected true or false, got {value!r}")
    return value


def hf_glm4_moe(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The Model fields of a glm4_moe config beyond the common keys (module docstring)."""
    for key in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"):
        if cfg.get(key) is None:
            raise UserError(f"{path}: field '{key}': missing from the glm4_moe config (its experts)")
    data: dict[str, Any] = {
        "moe": {"num_experts": cfg["n_routed_experts"], "experts_per_token": cfg["num_experts_per_tok"],
                "expert_intermediate_size": cfg["moe_intermediate_size"],
                "num_shared_experts": cfg["n_shared_experts"] or 0,
                "first_dense_layers": cfg["first_k_dense_replace"]},
    }
    if _flag(cfg, "attention_bias", path):
        data["qkv_bias"] = True
    if _flag(cfg, "use_qk_norm", path):
        data["qk_norm"] = True
    return data
