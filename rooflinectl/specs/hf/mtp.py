"""Hugging Face ``config.json`` to a model's ``mtp_layers``: the multi-token-prediction modules its checkpoint ships
beside its layers, which only speculative decoding runs (transformers builds none of them). Pure translation, for
``specs.hf.config.model_fields``.

- DeepSeek-V2/V3, Kimi K2, DeepSeek-V3.2 and GLM-4.5 (glm4_moe): ``num_nextn_predict_layers`` (DeepSeek-V3's and
  GLM-4.5's config.json: 1; Kimi K2's: 0).
- MiniMax-M2: ``num_mtp_modules`` where ``use_mtp`` is true (its config.json: 3), each of ``mtp_transformer_layers``
  layers; a module of more than one layer is refused, as the drafter is priced as one layer a module.
- Every other model type: none. Qwen3-Next's config.json names no module (the bundled qwen3-next-80b-a3b gives the
  one its checkpoint ships); Nemotron-H's num_nextn_predict_layers is not read.

A config that leaves the key out ships none: DeepseekV3Config and Glm4MoeConfig default it to 1, but no module is
built from that default, and a drafter assumed where the checkpoint has none would price speculation it cannot run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError
from ..sizes import MAX_MTP_MODULES
from .experts import DEEPSEEK_TYPES

# The key that counts each model type's modules.
_MTP_KEYS: dict[str, str] = {**dict.fromkeys(DEEPSEEK_TYPES, "num_nextn_predict_layers"),
                             "glm4_moe": "num_nextn_predict_layers", "minimax_m2": "num_mtp_modules"}


def _count(cfg: dict[str, Any], key: str, path: Path) -> int:
    """A whole number of modules; absent or null: 0."""
    value = cfg.get(key)
    if value is None:
        return 0
    if type(value) is not int or not 0 <= value <= MAX_MTP_MODULES:
        raise UserError(f"{path}: field '{key}': expected a whole number of multi-token-prediction modules, 0 to "
                        f"{MAX_MTP_MODULES}, got {value!r}")
    return value


def hf_mtp_layers(cfg: dict[str, Any], model_type: str, path: Path) -> dict[str, Any]:
    """``{"mtp_layers": n}`` where the config's model type counts n > 0 modules (the module docstring), else {}."""
    key = _MTP_KEYS.get(model_type)
    if key is None:
        return {}
    if model_type == "minimax_m2":
        use = cfg.get("use_mtp", False)
        if type(use) is not bool:
            raise UserError(f"{path}: field 'use_mtp': expected true or false, got {use!r}")
        if not use:
            return {}
        layers = cfg.get("mtp_transformer_layers", 1)
        if layers != 1 or type(layers) is not int:
            raise UserError(f"{path}: field 'mtp_transformer_layers': {layers!r} layers a multi-token-prediction "
                            f"module is not modelled (one layer a module is)")
    n = _count(cfg, key, path)
    return {"mtp_layers": n} if n else {}
