"""Hugging Face ``config.json`` to a model's fields: DeepSeek-V3.2's sparse attention (model_type deepseek_v32,
transformers' DeepseekV32Config), read beside the experts and MLA that ``specs.hf.experts.hf_deepseek`` reads as
for DeepSeek-V3. Pure translation, for ``specs.hf.config.model_fields``.

- ``index_n_heads``, ``index_head_dim``, ``index_topk``: the lightning indexer's heads, their width and the
  positions each query's attention keeps (DeepSeek-V3.2-Exp's config.json: 64, 128, 2,048, also
  DeepseekV32Config's defaults, which a config that leaves them out takes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError

DEEPSEEK_V32_DEFAULTS: dict[str, Any] = {"index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}
# DeepseekV32Config's layer_types: every layer's attention is the indexed (sparse) kind; no other is modelled.
_INDEXED = "indexed_attention"


def hf_deepseek_v32(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The ``sparse_attention`` section of a deepseek_v32 config (the defaults above merged in by the caller).
    A ``layer_types`` other than every layer indexed is refused, naming the key."""
    types = cfg.get("layer_types")
    if types is not None and (not isinstance(types, list) or any(t != _INDEXED for t in types)):
        raise UserError(f"{path}: field 'layer_types': only '{_INDEXED}' on every layer is modelled for "
                        f"deepseek_v32")
    return {"sparse_attention": {key: cfg[key] for key in DEEPSEEK_V32_DEFAULTS}}
