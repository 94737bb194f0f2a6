"""Hugging Face ``config.json`` to a model's fields: Nemotron-H, read as transformers' NemotronHConfig and
NemotronHBlock build it. Pure translation, for ``specs.hf.config.model_fields``.

- Layers: ``hybrid_override_pattern``, a character a layer (``M`` Mamba-2, ``*`` attention, ``-`` MLP; ``E``, a
  mixture of experts, is refused), or transformers' ``layers_block_type`` list (``linear_attention`` or
  ``mamba``, ``full_attention`` or ``attention``, ``mlp``); every layer is one block, a norm, its one mixer or
  MLP and the residual add, so the MLP is a layer apart (``Model.mlp_apart``).
- A Mamba-2 layer: ``mamba_num_heads`` of ``mamba_head_dim``, ``ssm_state_size``, ``n_groups``, a conv of
  ``conv_kernel`` taps with a bias where ``use_conv_bias``, chunks of ``chunk_size`` (and their older names
  ``mamba_n_groups``, ``mamba_d_conv``, ``mamba_conv_bias``, ``mamba_chunk_size``). ``expand`` builds nothing
  (the inner width is heads × head_dim), nor does ``mamba_ssm_cache_dtype`` (the state is counted in the
  activations' type, vLLM's default).
- Attention: GQA without RoPE (NemotronHAttention applies no position embedding) and without biases whatever
  ``attention_bias`` says; the MLP is up and down with ``mlp_hidden_act`` relu2 (squared ReLU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError

# The expert keys a nemotron_h config may carry at their class defaults: they build nothing without ``E`` layers,
# which are refused.
NEMOTRON_H_MOE_KEYS: tuple[str, ...] = ("n_routed_experts", "n_shared_experts", "num_experts_per_tok",
                                        "moe_intermediate_size", "n_group", "topk_group")
# NemotronHConfig's defaults (transformers 5.25) for keys a config.json may leave out (the sizes that set the shape
# excepted): the published 8B config gives attention_head_dim, which the class does not read, and no head_dim.
NEMOTRON_H_DEFAULTS: dict[str, Any] = {
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072, "max_position_embeddings": 4096,
    "tie_word_embeddings": False, "mlp_hidden_act": "relu2", "mamba_hidden_act": "silu", "ssm_state_size": 128,
    "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "conv_kernel": 4, "use_conv_bias": True,
    "chunk_size": 128, "use_bias": False, "num_nextn_predict_layers": 0,
}
_CHARACTERS = {"M": "mamba", "*": "full", "-": "mlp"}
_BLOCK_TYPES = {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "full", "attention": "full",
                "mlp": "mlp"}
# NemotronHConfig's older key names, read where the newer one is absent (its __post_init__).
_OLD_NAMES = {"n_groups": "mamba_n_groups", "conv_kernel": "mamba_d_conv", "use_conv_bias": "mamba_conv_bias",
              "chunk_size": "mamba_chunk_size"}


def _layers(cfg: dict[str, Any], path: Path) -> list[str]:
    """Each layer's kind, from ``layers_block_type`` where given, else ``hybrid_override_pattern``."""
    types = cfg.get("layers_block_type", cfg.get("layer_types"))
    if types is not None:
        if not (isinstance(types, list) and types and all(t in _BLOCK_TYPES for t in types)):
            raise UserError(f"{path}: field 'layers_block_type': expected a list of 'mamba', 'attention' and 'mlp' "
                            f"layers (their transformers names too; moe layers are not modelled)")
        return [_BLOCK_TYPES[t] for t in types]
    pattern = cfg.get("hybrid_override_pattern")
    if not (isinstance(pattern, str) and pattern and set(pattern) <= set(_CHARACTERS)):
        raise UserError(f"{path}: field 'hybrid_override_pattern': expected a string of M (Mamba-2), * (attention) "
                        f"and - (MLP), got {pattern!r} (E, experts, is not modelled)")
    return [_CHARACTERS[c] for c in pattern]


def nemotron_h_keys(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The config with its older key names read as the newer (:data:`_OLD_NAMES`) and, where it gives none,
    num_hidden_layers the pattern's length (NemotronHConfig derives it so, and its to_dict leaves it out)."""
    cfg = {**cfg, **{new: cfg[old] for new, old in _OLD_NAMES.items() if old in cfg and new not in cfg}}
    return {**cfg, "num_hidden_layers": cfg.get("num_hidden_layers", len(_layers(cfg, path)))}


def hf_nemotron_h(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The Model fields of a Nemotron-H config beyond the common keys (module docstring)."""
    layers = _layers(cfg, path)
    if cfg.get("num_hidden_layers") != len(layers):
        raise UserError(f"{path}: field 'num_hidden_layers': {cfg.get('num_hidden_layers')!r}, but the pattern "
                        f"has {len(layers)} layers")
    for key, want in (("mlp_hidden_act", "relu2"), ("mamba_hidden_act", "silu"), ("use_bias", False)):
        if cfg[key] != want:
            raise UserError(f"{path}: field '{key}': {cfg[key]!r} is not modelled for nemotron_h ({want!r} is)")
    if "mamba" not in layers:
        raise UserError(f"{path}: field 'hybrid_override_pattern': no Mamba-2 layer; not modelled as nemotron_h")
    return {
        "num_layers": len(layers),
        "mlp": "relu2",
        "nope_full_layers": True,  # NemotronHAttention: no RoPE
        "layer_pattern": layers,
        "mamba": {"num_heads": cfg["mamba_num_heads"], "head_dim": cfg["mamba_head_dim"],
                  "state_size": cfg["ssm_state_size"], "n_groups": cfg["n_groups"],
                  "conv_kernel": cfg["conv_kernel"], "conv_bias": cfg["use_conv_bias"],
                  "chunk_size": cfg["chunk_size"]},
    }
