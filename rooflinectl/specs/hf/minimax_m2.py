"""Hugging Face ``config.json`` to a model's fields: MiniMax-M2 (model_type minimax_m2), read as transformers'
MiniMaxM2Config and MiniMaxM2DecoderLayer build it. Pure translation, for ``specs.hf.config.model_fields``.

- Attention: GQA of ``head_dim``, full on every layer (``attn_type_list`` all 1; a 0, MiniMax-01's lightning
  attention, is refused); Q/K norms taken over the whole layer's Q and K (``qk_norm_type`` per_layer:
  MiniMaxM2Attention's q_norm of h·d and k_norm of g·d, built whatever ``use_qk_norm`` says, so false is refused);
  RoPE on ``rotary_dim`` of each head (else ``rope_parameters``' partial_rotary_factor, else all of it).
- Experts: every layer is MoE, ``num_local_experts`` of width ``intermediate_size``, top ``num_experts_per_tok``,
  no shared expert (``shared_intermediate_size`` other than 0 is refused: transformers builds none). The router's
  sigmoid scores and correction bias (``scoring_func`` sigmoid, ``use_routing_bias``: a buffer, no weight) count
  as engine.count's softmax router.
- ``use_mtp``, ``num_mtp_modules``, ``mtp_transformer_layers``: the multi-token-prediction modules run only for
  speculative decoding; transformers does not build them, and no step counts them (``specs.hf.mtp`` reads them as
  ``mtp_layers``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError
from .glm4_moe import rotary_factor

MINIMAX_M2_MOE_KEYS: tuple[str, ...] = ("num_local_experts", "num_experts_per_tok")
# MiniMaxM2Config's defaults (transformers 5.25) for keys a config.json may leave out (the sizes that set the
# shape, the experts' count and top-k included, excepted).
MINIMAX_M2_DEFAULTS: dict[str, Any] = {
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 200064, "max_position_embeddings": 196608,
    "tie_word_embeddings": False,
}


def minimax_m2_keys(cfg: dict[str, Any]) -> dict[str, Any]:
    """A minimax_m2 config with its partial_rotary_factor at the top: rotary_dim / head_dim
    (MiniMaxM2Config.convert_rope_params_to_dict), else rope_parameters', else 1."""
    rotary, head = cfg.get("rotary_dim"), cfg.get("head_dim")
    if "partial_rotary_factor" not in cfg and type(rotary) is int and type(head) is int and head > 0:
        return {**cfg, "partial_rotary_factor": rotary / head}
    return rotary_factor(cfg, 1.0)


def hf_minimax_m2(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The Model fields of a minimax_m2 config beyond the common keys (module docstring)."""
    types = cfg.get("attn_type_list")
    if types is not None and (not isinstance(types, list) or any(t != 1 for t in types)):
        raise UserError(f"{path}: field 'attn_type_list': only full attention (1) on every layer is modelled for "
                        f"minimax_m2")
    for key, modelled in (("qk_norm_type", "per_layer"), ("use_qk_norm", True), ("scoring_func", "sigmoid"),
                          ("shared_intermediate_size", 0)):
        if key in cfg and cfg[key] != modelled:
            raise UserError(f"{path}: field '{key}': {cfg[key]!r} is not modelled for minimax_m2 (transformers' "
                            f"MiniMaxM2 builds {modelled!r})")
    for key in MINIMAX_M2_MOE_KEYS:
        if cfg.get(key) is None:
            raise UserError(f"{path}: field '{key}': missing from the minimax_m2 config (its experts)")
    return {"qk_norm": True, "qk_norm_per_layer": True,
            "moe": {"num_experts": cfg["num_local_experts"], "experts_per_token": cfg["num_experts_per_tok"],
                    "expert_intermediate_size": cfg["intermediate_size"]}}
