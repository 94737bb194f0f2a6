"""Hugging Face ``config.json`` to a model's fields: which keys mean what, and which architectures are refused.

Pure translation of a parsed config (no file is read here, nothing validated): ``specs.workload`` reads the file
and validates the fields as a Model. A config whose architecture the engine does not count is refused by the key
that says so, never analysed as the dense Llama it is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError

_HF_MODEL_TYPES: tuple[str, ...] = ("llama", "mistral", "qwen2", "mixtral", "qwen3_moe")
# The transformers classes of those model types: a config's `architectures` entry names the class that builds the
# model, and one outside these (a Gemma, a classifier head, a vision-language wrapper) is refused by name.
_HF_ARCHITECTURES: tuple[str, ...] = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                      "MixtralForCausalLM", "Qwen3MoeForCausalLM")
# The expert keys each mixture-of-experts model type is read with; any other expert key in its config is refused.
_HF_MOE_KEYS: dict[str, tuple[str, ...]] = {
    "mixtral": ("num_local_experts", "num_experts_per_tok"),
    "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
                  "mlp_only_layers", "norm_topk_prob"),
}
# Keys of architectures the importer does not count: experts outside the model types above (DeepSeek's routed and
# shared experts, grouped routing, dense first layers; Qwen2-MoE's shared expert) and MLA's low-rank attention.
_HF_UNMODELLED_KEYS: tuple[str, ...] = (
    "num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "moe_intermediate_size", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
    "shared_expert_intermediate_size", "moe_layer_freq", "n_group", "topk_group", "decoder_sparse_step",
    "mlp_only_layers",
)


def _no_experts(value: Any) -> bool:
    """A key of an expert architecture that says "none": None, 0 or 1 (an int, not a boolean), or an empty list
    (Qwen's ``mlp_only_layers``)."""
    return value is None or (type(value) is int and value in (0, 1)) or value == []


def _hf_moe(cfg: dict[str, Any], model_type: str, path: Path) -> dict[str, Any]:
    """The ``moe`` section of a Mixtral or Qwen3-MoE config. Mixtral: ``num_local_experts``, top-k
    ``num_experts_per_tok``, and ``intermediate_size`` is each expert's width (every layer is MoE). Qwen3-MoE:
    ``num_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``; ``decoder_sparse_step`` 1 and no
    ``mlp_only_layers`` (every layer MoE) are what is modelled, and other values are refused, since they put dense
    layers between the MoE ones; ``norm_topk_prob`` (renormalizing the top-k weights, k elements per token) is
    left out of the count. Validation names a missing or wrong size by its YAML name, under 'moe'."""
    def need(key: str) -> Any:
        if key not in cfg:
            raise UserError(f"{path}: field '{key}': missing from the {model_type} config (its experts)")
        return cfg[key]

    if model_type == "mixtral":
        return {"num_experts": need("num_local_experts"), "experts_per_token": need("num_experts_per_tok"),
                "expert_intermediate_size": need("intermediate_size")}
    step = cfg.get("decoder_sparse_step", 1)
    if step != 1 or type(step) is not int:
        raise UserError(f"{path}: field 'decoder_sparse_step': {step!r} puts dense layers between the MoE ones, "
                        f"which is not modelled (1: every layer is MoE)")
    dense = cfg.get("mlp_only_layers", [])
    if dense != [] and dense is not None:
        raise UserError(f"{path}: field 'mlp_only_layers': {dense!r} makes layers dense among the MoE ones, "
                        f"which is not modelled (give none)")
    return {"num_experts": need("num_experts"), "experts_per_token": need("num_experts_per_tok"),
            "expert_intermediate_size": need("moe_intermediate_size")}


def _hf_sliding_window(cfg: dict[str, Any], path: Path) -> Any:
    """config.json's ``sliding_window`` where the model uses it: Mistral 7B v0.1 gives 4096 (and no
    ``use_sliding_window``); Qwen2 gives one with ``use_sliding_window: false``, which turns it off; null or absent
    means none. A model that slides its window over some layers only (Qwen2's ``max_window_layers``) is held to
    the window in every layer: refusing a length that the count would overstate is the safe side."""
    use = cfg.get("use_sliding_window", True)
    if type(use) is not bool:
        raise UserError(f"{path}: field 'use_sliding_window': expected true or false, got {use!r}")
    return cfg.get("sliding_window") if use else None


# quantization_config's methods the engine's formats (engine/quant.py) model, each to its weight format.
_HF_QUANT_METHODS: tuple[str, ...] = ("gptq", "awq", "fp8", "mxfp4")
# Modules a checkpoint may leave unquantized that the engine already keeps in dtype (engine/quant.py: embedding,
# LM head, router); any other entry of modules_to_not_convert (gpt-oss's attention) would be counted quantized.
_HF_UNQUANTIZED_OK: tuple[str, ...] = ("lm_head", "embed_tokens", "router", ".gate")


def _hf_quantization(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The model's ``weight_dtype`` (and int4 ``group_size``) from config.json's ``quantization_config``; {} when
    absent. Modelled: ``gptq`` with ``bits`` 4 and ``sym`` true (absent: true, GPTQConfig's default) → int4 in
    its ``group_size`` (absent: 128; -1, one scale per column → a group of 2**22, the widest k, so ⌈k/g⌉ = 1);
    ``awq`` with ``bits`` 4 and ``zero_point`` false → the same; ``fp8`` without ``weight_block_size`` → fp8
    (per-tensor scales); ``mxfp4`` → mxfp4. Refused in one line naming the key: asymmetric int4 (GPTQ
    ``sym: false``, AWQ's zero points, its default), whose 4-bit zero per group engine/quant.py does not count;
    other bits; block-wise fp8 scales; bitsandbytes and every other method; modules left unquantized beyond the
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
    for module in q.get("modules_to_not_convert") or []:
        if not (isinstance(module, str) and module.endswith(_HF_UNQUANTIZED_OK)):
            raise UserError(f"{where}.modules_to_not_convert': {module!r} stays unquantized, which is not modelled "
                            f"(only the embedding, LM head and router stay in dtype)")
    if method == "fp8":
        block = q.get("weight_block_size")
        if block is not None:
            raise UserError(f"{where}.weight_block_size': {block!r}: block-wise fp8 scales are not modelled "
                            f"(fp8 is counted with one scale per tensor)")
        return {"weight_dtype": "fp8"}
    if method == "mxfp4":
        return {"weight_dtype": "mxfp4"}
    bits = q.get("bits")
    if type(bits) is not int or bits != 4:
        raise UserError(f"{where}.bits': {bits!r}: only 4-bit {method} weights are modelled")
    if method == "gptq":
        sym = q.get("sym", True)
        if sym is not True:
            raise UserError(f"{where}.sym': {sym!r}: asymmetric int4 (a zero point per group) is not modelled; "
                            f"rooflinectl counts symmetric int4 with fp16 scales only")
    else:
        zero = q.get("zero_point", True)
        if zero is not False:
            raise UserError(f"{where}.zero_point': {zero!r}: AWQ's zero points (a 4-bit zero per group) are not "
                            f"modelled; rooflinectl counts symmetric int4 with fp16 scales only")
    if "group_size" not in q:  # absent: the model gives none, and the workload's int4 default (128) applies
        return {"weight_dtype": "int4"}
    group = q["group_size"]
    # -1 is GPTQ's and AWQ's "one scale per output column": a group as wide as the widest k gives ⌈k/g⌉ = 1.
    return {"weight_dtype": "int4", "group_size": 2**22 if group == -1 and type(group) is int else group}


def model_fields(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The Model fields of a Hugging Face ``config.json``'s keys (Llama/Mistral/Qwen2-style; Mixtral and Qwen3-MoE
    with their experts), for ``specs.workload.model_from_hf_config`` to validate; ``path`` names the file in
    messages and gives the model its id."""
    # A config this importer does not model must not be analysed as the dense Llama it is not (a DeepSeek config
    # read as dense printed wrong numbers with exit 0): a model type other than these, or any key of an
    # architecture it does not count (experts outside Mixtral and Qwen3-MoE, MLA's low-rank attention), is
    # refused by name.
    model_type = cfg.get("model_type")
    if model_type is not None and model_type not in _HF_MODEL_TYPES:
        raise UserError(f"{path}: field 'model_type': '{model_type}' is not modelled; rooflinectl counts "
                        f"{', '.join(_HF_MODEL_TYPES)} models")
    architectures = cfg.get("architectures")
    if architectures is not None:
        if not isinstance(architectures, list):
            raise UserError(f"{path}: field 'architectures': expected a list of class names, got {architectures!r}")
        for entry in architectures:
            if entry not in _HF_ARCHITECTURES:
                raise UserError(f"{path}: field 'architectures': {entry!r} is not modelled; rooflinectl counts "
                                f"{', '.join(_HF_ARCHITECTURES)}")
    own = _HF_MOE_KEYS.get(model_type, ()) if isinstance(model_type, str) else ()
    # Outside a model type's own expert keys, None, 0 or 1 mean "no experts"; anything else is an architecture
    # not modelled.
    unknown = sorted(k for k in _HF_UNMODELLED_KEYS if k in cfg and k not in own and not _no_experts(cfg[k]))
    if unknown:
        raise UserError(f"{path}: field '{unknown[0]}': mixture-of-experts and latent-attention models are "
                        f"modelled only as model_type {' or '.join(_HF_MOE_KEYS)} (without MLA)")
    if cfg.get("attention_bias", False) is not False:
        # transformers' attention_bias (Llama, Qwen3) puts a bias on o_proj as well as on Q, K and V: the O bias
        # is not modelled.
        raise UserError(f"{path}: field 'attention_bias': biases on all four projections (o_proj's included) "
                        f"are not modelled; Qwen2's Q, K and V biases are")
    act = cfg.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise UserError(f"{path}: field 'hidden_act': only the gated SiLU MLP is supported, not '{act}'")
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
               if k not in cfg]
    if missing:
        raise UserError(f"{path}: field '{missing[0]}': missing from the config")
    heads, hidden = cfg["num_attention_heads"], cfg["hidden_size"]
    if "head_dim" in cfg:  # given: validated as given (0, false or {} is an error, not a fallback)
        head_dim = cfg["head_dim"]
    elif not (type(heads) is int and type(hidden) is int and heads > 0):
        head_dim = hidden  # not a division: validation names the bad size (num_heads or hidden_size)
    elif hidden % heads:
        raise UserError(f"{path}: field 'head_dim': missing, and hidden_size {hidden} is not a multiple of "
                        f"num_attention_heads {heads}")
    else:
        head_dim = hidden // heads
    # A config.json is named after its folder (resolved: read from the folder itself, Path("config.json").parent
    # is '.', whose name is ''); any other file after its own stem. The name falls back to the id, never to ''.
    model_id = path.resolve().parent.name if path.name == "config.json" else path.stem
    data = {
        "id": model_id,
        "name": str(cfg.get("_name_or_path") or cfg.get("model_type") or model_id),
        "source": f"Hugging Face config {path}",
        "hidden_size": cfg["hidden_size"],
        "num_layers": cfg["num_hidden_layers"],
        "num_heads": heads,
        "num_kv_heads": cfg["num_key_value_heads"] if cfg.get("num_key_value_heads") is not None else heads,
        "head_dim": head_dim,
        "intermediate_size": cfg["intermediate_size"],
        "vocab_size": cfg["vocab_size"],
        "tie_embeddings": cfg.get("tie_word_embeddings", False),  # strict: "false" is an error, not True
        # Absent or null: the model states no limit, and none is checked.
        "max_position_embeddings": cfg.get("max_position_embeddings"),
        "sliding_window": _hf_sliding_window(cfg, path),
    }
    data.update(_hf_quantization(cfg, path))
    if model_type in _HF_MOE_KEYS:
        data["moe"] = _hf_moe(cfg, model_type, path)
    if model_type == "qwen2":
        data["qkv_bias"] = True  # Qwen2Attention builds q_proj, k_proj, v_proj with bias=True (no config key)
    if model_type == "qwen3_moe":
        data["qk_norm"] = True  # Qwen3's q_norm and k_norm: RMSNorm over each head of Q and K (no config key)
    return data
