"""Hugging Face ``config.json``'s ``quantization_config`` to a model's weight format (GPTQ, AWQ, fp8, MXFP4), and
the modules a checkpoint may leave unquantized. Pure translation, for ``specs.hf.config.model_fields``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError

# quantization_config's methods the engine's formats (engine/count/quant.py) model, each to its weight format.
_HF_QUANT_METHODS: tuple[str, ...] = ("gptq", "awq", "fp8", "mxfp4")
# Modules a checkpoint may leave unquantized that the engine already keeps in dtype (engine/count/quant.py: embedding,
# LM head, router); an MoE model's attention (gpt-oss's self_attn) makes the format the experts' alone; any other
# entry of modules_to_not_convert would be counted quantized, and is refused.
_HF_UNQUANTIZED_OK: tuple[str, ...] = ("lm_head", "embed_tokens", "router", ".gate")


def hf_quantization(cfg: dict[str, Any], path: Path, experts: bool) -> dict[str, Any]:
    """:func:`_hf_quantized_format`, and ``quantized: experts`` where the checkpoint leaves the attention
    unquantized beside its experts (gpt-oss's ``modules_to_not_convert`` lists ``model.layers.*.self_attn``,
    the router, the embedding and lm_head: its MXFP4 covers the expert matrices alone). A model without experts
    that keeps its attention unquantized is refused (which of its MLPs are quantized is not said)."""
    fields = _hf_quantized_format(cfg, path)
    q = cfg.get("quantization_config")
    modules = _unconverted(q, path) if isinstance(q, dict) else []
    if any(isinstance(m, str) and m.endswith("self_attn") for m in modules):
        if not experts:
            raise UserError(f"{path}: field 'quantization_config.modules_to_not_convert': the attention stays "
                            f"unquantized in a model without experts, which is not modelled")
        fields["quantized"] = "experts"
    return fields


def _unconverted(q: dict[str, Any], path: Path) -> list[Any]:
    """``modules_to_not_convert``: a list of module names (null or absent: none), never a string read letter by
    letter."""
    modules = q.get("modules_to_not_convert")
    if modules is None:
        return []
    if not isinstance(modules, list):
        raise UserError(f"{path}: field 'quantization_config.modules_to_not_convert': expected a list of module "
                        f"names, got {modules!r}")
    return modules


def _hf_quantized_format(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The model's ``weight_dtype`` (and int4 ``group_size``) from config.json's ``quantization_config``; {} when
    absent. Modelled: ``gptq`` with ``bits`` 4 and ``sym`` true (absent: true, GPTQConfig's default) → int4 in
    its ``group_size`` (absent: 128; -1, one scale per column → a group of 2**22, the widest k, so ⌈k/g⌉ = 1);
    ``awq`` with ``bits`` 4 and ``zero_point`` false → the same; GPTQ ``sym`` false and AWQ's zero points (its
    default) → int4_zp (a 4-bit zero per group beside each scale); ``fp8`` without ``weight_block_size`` → fp8
    (per-tensor scales), with ``weight_block_size`` [128, 128] → fp8_block (DeepSeek-V3's); ``mxfp4`` → mxfp4.
    Refused in one line naming the key: other bits; fp8 blocks other than 128×128;
    bitsandbytes and every other method; modules left unquantized beyond the
    embedding, LM head and router."""
    q = cfg.get("quantization_config")
    if q is None:
        return {}
    where = f"{path}: field 'quantization_config"
    if not isinstance(q, dict):
        raise UserError(f"{where}': expected a mapping, got {q!r}")
    method = q.get("quant_method")
    if method not in _HF_QUANT_METHODS:
        raise UserError(f"{where}.quant_method': {method!r} is not modelled; rooflinectl reads "
                        f"{', '.join(_HF_QUANT_METHODS)}")
    for module in _unconverted(q, path):
        if not (isinstance(module, str) and module.endswith((*_HF_UNQUANTIZED_OK, "self_attn"))):
            raise UserError(f"{where}.modules_to_not_convert': {module!r} stays unquantized, which is not modelled "
                            f"(the embedding, LM head, router, and an MoE model's attention, stay in dtype)")
    if method == "fp8":
        block = q.get("weight_block_size")
        if block is None:
            return {"weight_dtype": "fp8"}
        if block != [128, 128] or any(type(b) is not int for b in block):
            raise UserError(f"{where}.weight_block_size': {block!r}: block-wise fp8 is modelled with 128×128 blocks "
                            f"only (fp8_block, DeepSeek-V3's)")
        return {"weight_dtype": "fp8_block"}
    if method == "mxfp4":
        return {"weight_dtype": "mxfp4"}
    bits = q.get("bits")
    if type(bits) is not int or bits != 4:
        raise UserError(f"{where}.bits': {bits!r}: only 4-bit {method} weights are modelled")
    # Symmetric (GPTQ sym true, AWQ zero_point false): int4; with a 4-bit zero point per group (GPTQ sym false,
    # AWQ's default zero_point true): int4_zp. Strict: a value other than true or false is refused by name.
    key, default, zp_when = ("sym", True, False) if method == "gptq" else ("zero_point", True, True)
    flag = q.get(key, default)
    if type(flag) is not bool:
        raise UserError(f"{where}.{key}': expected true or false, got {flag!r}")
    fmt = "int4_zp" if flag is zp_when else "int4"
    if "group_size" not in q:  # absent: the model gives none, and the workload's int4 default (128) applies
        return {"weight_dtype": fmt}
    group = q["group_size"]
    # -1 is GPTQ's and AWQ's "one scale per output column": a group as wide as the widest k gives ⌈k/g⌉ = 1.
    return {"weight_dtype": fmt, "group_size": 2**22 if group == -1 and type(group) is int else group}
