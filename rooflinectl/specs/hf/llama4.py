"""Hugging Face ``config.json`` to a model's fields: Llama 4 (Scout, Maverick), read as transformers'
Llama4TextConfig and Llama4TextDecoderLayer build it. Pure translation, for ``specs.hf.config.model_fields``.

- Experts: ``num_local_experts`` routed experts of width ``intermediate_size``, top ``num_experts_per_tok``, and
  one shared expert of the same width (Llama4TextMoe's shared_expert) in every MoE layer; the router
  (Llama4Router) takes the top k logits and applies a sigmoid to them alone: counted as ``router_softmax:
  top_k``, its 5 FLOPs a logit standing for the sigmoid's 4. The MoE layers are ``moe_layers``, by default
  range(step − 1, L, step) with step ``interleave_moe_layer_step`` (Scout 1: all; Maverick 2: the odd layers);
  the others are dense MLPs of width ``intermediate_size_mlp``.
- Attention: ``no_rope_layers`` (1: the layer applies RoPE; default every ``no_rope_layer_interval``-th layer
  NoPE) and ``attention_chunk_size``: a RoPE layer attends in chunks, a NoPE layer over every position
  (Llama4TextConfig's layer_types). ``use_qk_norm``: a weightless RMSNorm over each head of Q and K on the RoPE
  layers; ``attn_temperature_tuning``: the NoPE layers' queries scaled per position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError

# The expert keys a llama4_text config is read with (specs.hf.experts refuses the others).
LLAMA4_MOE_KEYS: tuple[str, ...] = ("num_local_experts", "num_experts_per_tok")
# Llama4TextConfig's defaults for keys a config.json may leave out (the sizes that set the shape excepted).
LLAMA4_DEFAULTS: dict[str, Any] = {
    "vocab_size": 202048, "head_dim": 128, "intermediate_size_mlp": 16384, "num_local_experts": 16,
    "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "use_qk_norm": True, "no_rope_layer_interval": 4,
    "attention_chunk_size": 8192, "attn_temperature_tuning": True, "tie_word_embeddings": False,
    "max_position_embeddings": 131072,
}


def _period(pattern: list[Any]) -> list[Any]:
    """The shortest prefix whose repetition from layer 0 gives the whole list."""
    return next(pattern[:p] for p in range(1, len(pattern) + 1)
                if all(pattern[i] == pattern[i % p] for i in range(len(pattern))))


def _flag(cfg: dict[str, Any], key: str, path: Path) -> bool:
    """A switch given as true/false or a number (Scout's config.json gives attn_temperature_tuning 4): nonzero
    is on, as transformers' ``if self.attn_temperature_tuning`` reads it."""
    value = cfg.get(key)
    if not isinstance(value, (bool, int, float)):
        raise UserError(f"{path}: field '{key}': expected true, false or a number, got {value!r}")
    return bool(value)


def hf_llama4(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The Model fields of a Llama 4 text config beyond the common keys (module docstring)."""
    layers = cfg["num_hidden_layers"]
    if not (type(layers) is int and layers > 0):
        return {}  # validation names the bad num_layers
    step = cfg["interleave_moe_layer_step"]
    if not (type(step) is int and 0 < step <= layers):
        raise UserError(f"{path}: field 'interleave_moe_layer_step': expected 1 … {layers}, got {step!r}")
    given = cfg.get("moe_layers")
    if given is not None and given != list(range(step - 1, layers, step)):
        raise UserError(f"{path}: field 'moe_layers': only every interleave_moe_layer_step-th layer "
                        f"(layers {step - 1}, {2 * step - 1}, …) is modelled as MoE")
    interval = cfg["no_rope_layer_interval"]
    rope = cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    if not (isinstance(rope, list) and len(rope) == layers and all(r in (0, 1) for r in rope)):
        raise UserError(f"{path}: field 'no_rope_layers': expected {layers} entries of 0 (NoPE) or 1 (RoPE)")
    chunk = cfg.get("attention_chunk_size")
    nope = 0 in rope
    data: dict[str, Any] = {
        "intermediate_size": cfg["intermediate_size_mlp"],
        "moe": {"num_experts": cfg["num_local_experts"], "experts_per_token": cfg["num_experts_per_tok"],
                "expert_intermediate_size": cfg["intermediate_size"], "num_shared_experts": 1,
                "router_softmax": "top_k", "moe_every": step},
        "nope_full_layers": nope,
        "attn_temperature_tuning": nope and _flag(cfg, "attn_temperature_tuning", path),
        "rope_qk_l2_norm": 1 in rope and _flag(cfg, "use_qk_norm", path),
    }
    if chunk is not None:
        pattern = _period(["chunked" if r else "full" for r in rope])
        data["attention_chunk_size"] = chunk
        data["layer_pattern"] = None if pattern == ["chunked"] else pattern
    elif nope and 1 in rope:
        raise UserError(f"{path}: field 'attention_chunk_size': null with NoPE and RoPE layers both full is not "
                        f"modelled (give the chunk)")
    return data
