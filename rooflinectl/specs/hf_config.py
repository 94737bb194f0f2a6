"""Hugging Face ``config.json`` to a model's fields: which keys mean what, and which architectures are refused.

Pure translation of a parsed config (no file is read here, nothing validated): ``specs.workload`` reads the file
and validates the fields as a Model. A config whose architecture the engine does not count is refused by the key
that says so, never analysed as the dense Llama it is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError

_HF_MODEL_TYPES: tuple[str, ...] = ("llama", "mistral", "qwen2", "mixtral", "qwen3_moe", "deepseek_v2", "deepseek_v3",
                                    "kimi_k2")
# The transformers classes of those model types: a config's `architectures` entry names the class that builds the
# model, and one outside these (a Gemma, a classifier head, a vision-language wrapper) is refused by name.
_HF_ARCHITECTURES: tuple[str, ...] = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                      "MixtralForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV2ForCausalLM",
                                      "DeepseekV3ForCausalLM")
# DeepSeek-V2/V3 and Kimi K2 (model_type kimi_k2, built by DeepseekV3ForCausalLM): experts and MLA, read by
# _hf_deepseek.
_DEEPSEEK_TYPES: tuple[str, ...] = ("deepseek_v2", "deepseek_v3", "kimi_k2")
_DEEPSEEK_KEYS: tuple[str, ...] = (
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace",
    "moe_layer_freq", "n_group", "topk_group", "norm_topk_prob", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "num_nextn_predict_layers",
)
# The expert keys each mixture-of-experts model type is read with; any other expert key in its config is refused.
_HF_MOE_KEYS: dict[str, tuple[str, ...]] = {
    "mixtral": ("num_local_experts", "num_experts_per_tok"),
    "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
                  "mlp_only_layers", "norm_topk_prob"),
    **{t: _DEEPSEEK_KEYS for t in _DEEPSEEK_TYPES},
}
# Keys of architectures the importer does not count: experts outside the model types above (DeepSeek's routed and
# shared experts, grouped routing, dense first layers; Qwen2-MoE's shared expert) and MLA's low-rank attention.
_HF_UNMODELLED_KEYS: tuple[str, ...] = (
    "num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "moe_intermediate_size", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
    "shared_expert_intermediate_size", "moe_layer_freq", "n_group", "topk_group", "decoder_sparse_step",
    "mlp_only_layers", "qk_nope_head_dim", "v_head_dim", "num_nextn_predict_layers",
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


# DeepSeek's routers: scores by softmax (V2) or sigmoid (V3, Kimi K2), top-k greedy, group-limited (V2's
# group_limited_greedy) or with V3's bias-corrected group-limited selection (noaux_tc).
_DEEPSEEK_SCORING: tuple[str, ...] = ("softmax", "sigmoid")
_DEEPSEEK_TOPK: tuple[str, ...] = ("greedy", "group_limited_greedy", "noaux_tc")


def _hf_deepseek(cfg: dict[str, Any], model_type: str, path: Path) -> dict[str, Any]:
    """The ``moe`` and ``mla`` sections of a DeepSeek-V2/V3 or Kimi K2 config (transformers' DeepseekV2Config,
    DeepseekV3Config; Kimi K2's config.json is DeepSeek-V3's). Experts: ``n_routed_experts``, top-k
    ``num_experts_per_tok``, width ``moe_intermediate_size``, ``n_shared_experts`` of that width, and the first
    ``first_k_dense_replace`` layers dense (``intermediate_size``); ``moe_layer_freq`` must be 1 (DeepSeek's code
    makes layer i MoE when i ≥ first_k_dense_replace and i % moe_layer_freq == 0: other values put dense layers
    between the MoE ones). The router is counted by engine.op.router_op, whose 5 FLOPs per logit for softmax
    stand equally for V3's sigmoid (4) and its correction-bias add (1); the group-limited selection (``n_group``,
    ``topk_group``: the best groups first, O(E) compares per token, like the top-k passes counted) and the
    scaling of the k weights (``routed_scaling_factor``, ``norm_topk_prob``: O(k) per token) are not counted
    apart, each under 0.1% of the gate's 2·H·E FLOPs. ``num_nextn_predict_layers``: the multi-token-prediction
    module (DeepSeek-V3: one more layer, 14 B of the checkpoint's 685 B) runs only for speculative decoding, and
    is not counted. MLA: ``q_lora_rank`` (null: a full-rank q_proj, DeepSeek-V2-Lite), ``kv_lora_rank``,
    ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``."""
    def need(key: str) -> Any:
        if cfg.get(key) is None:
            raise UserError(f"{path}: field '{key}': missing from the {model_type} config")
        return cfg[key]

    freq = cfg.get("moe_layer_freq", 1)
    if freq != 1 or type(freq) is not int:
        raise UserError(f"{path}: field 'moe_layer_freq': {freq!r} puts dense layers between the MoE ones, which is "
                        f"not modelled (1: every layer after first_k_dense_replace is MoE)")
    for key, known in (("scoring_func", _DEEPSEEK_SCORING), ("topk_method", _DEEPSEEK_TOPK)):
        if key in cfg and cfg[key] not in known:
            raise UserError(f"{path}: field '{key}': {cfg[key]!r} is not modelled; rooflinectl reads "
                            f"{', '.join(known)}")
    moe = {"num_experts": need("n_routed_experts"), "experts_per_token": need("num_experts_per_tok"),
           "expert_intermediate_size": need("moe_intermediate_size"),
           "num_shared_experts": cfg.get("n_shared_experts") or 0,
           "first_dense_layers": cfg.get("first_k_dense_replace", 0)}
    mla = {"q_lora_rank": cfg.get("q_lora_rank"), "kv_lora_rank": need("kv_lora_rank"),
           "qk_nope_head_dim": need("qk_nope_head_dim"), "qk_rope_head_dim": need("qk_rope_head_dim"),
           "v_head_dim": need("v_head_dim")}
    return {"moe": moe, "mla": mla}


def _hf_mla_head_dim(cfg: dict[str, Any], path: Path) -> Any:
    """An MLA model's head_dim: the query's width per head, qk_nope_head_dim + qk_rope_head_dim. A config's own
    ``head_dim`` is read as transformers' DeepseekV3Config writes it (qk_rope_head_dim) or as that sum; any other
    value is refused."""
    nope, rope = cfg.get("qk_nope_head_dim"), cfg.get("qk_rope_head_dim")
    if not (type(nope) is int and type(rope) is int):
        return nope  # validation names the bad size under 'mla'
    given = cfg.get("head_dim")
    if given is not None and given not in (rope, nope + rope):
        raise UserError(f"{path}: field 'head_dim': {given!r} is neither qk_rope_head_dim ({rope}) nor "
                        f"qk_nope_head_dim + qk_rope_head_dim ({nope + rope})")
    return nope + rope


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
    (per-tensor scales), with ``weight_block_size`` [128, 128] → fp8_block (DeepSeek-V3's); ``mxfp4`` → mxfp4.
    Refused in one line naming the key: asymmetric int4 (GPTQ ``sym: false``, AWQ's zero points, its default),
    whose 4-bit zero per group engine/quant.py does not count; other bits; fp8 blocks other than 128×128;
    bitsandbytes and every other method; modules left unquantized beyond the embedding, LM head and router."""
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
        raise UserError(f"{path}: field '{unknown[0]}': mixture-of-experts models are modelled only as model_type "
                        f"{', '.join(_HF_MOE_KEYS)}, and latent attention as the last {len(_DEEPSEEK_TYPES)}")
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
    if model_type in _DEEPSEEK_TYPES:
        head_dim = _hf_mla_head_dim(cfg, path)
    elif "head_dim" in cfg:  # given: validated as given (0, false or {} is an error, not a fallback)
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
    if model_type in _DEEPSEEK_TYPES:
        data.update(_hf_deepseek(cfg, model_type, path))
    elif model_type in _HF_MOE_KEYS:
        data["moe"] = _hf_moe(cfg, model_type, path)
    if model_type == "qwen2":
        data["qkv_bias"] = True  # Qwen2Attention builds q_proj, k_proj, v_proj with bias=True (no config key)
    if model_type == "qwen3_moe":
        data["qk_norm"] = True  # Qwen3's q_norm and k_norm: RMSNorm over each head of Q and K (no config key)
    return data
