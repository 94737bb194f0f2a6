"""Hugging Face ``config.json`` to a model's fields: the experts (Mixtral, Qwen3-MoE, gpt-oss, DeepSeek-V2/V3,
Kimi K2) and multi-head latent attention, the keys each model type is read with, and the expert keys of
architectures that are not counted. Pure translation, for ``specs.hf.config.model_fields``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError

# DeepSeek-V2/V3, Kimi K2 (model_type kimi_k2, built by DeepseekV3ForCausalLM) and DeepSeek-V3.2 (its sparse
# attention read by specs.hf.deepseek_v32): experts and MLA, read by hf_deepseek.
DEEPSEEK_TYPES: tuple[str, ...] = ("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32")
_DEEPSEEK_KEYS: tuple[str, ...] = (
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace",
    "moe_layer_freq", "n_group", "topk_group", "norm_topk_prob", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "num_nextn_predict_layers",
)
# The expert keys each mixture-of-experts model type is read with; any other expert key in its config is refused.
HF_MOE_KEYS: dict[str, tuple[str, ...]] = {
    "mixtral": ("num_local_experts", "num_experts_per_tok"),
    "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
                  "mlp_only_layers", "norm_topk_prob"),
    "gpt_oss": ("num_local_experts", "num_experts_per_tok"),
    **{t: _DEEPSEEK_KEYS for t in DEEPSEEK_TYPES},
}
# Keys of architectures the importer does not count: experts outside the model types above (DeepSeek's routed and
# shared experts, grouped routing, dense first layers; Qwen2-MoE's shared expert) and MLA's low-rank attention.
HF_UNMODELLED_KEYS: tuple[str, ...] = (
    "num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "moe_intermediate_size", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
    "shared_expert_intermediate_size", "moe_layer_freq", "n_group", "topk_group", "decoder_sparse_step",
    "mlp_only_layers", "qk_nope_head_dim", "v_head_dim", "num_nextn_predict_layers",
)


def no_experts(value: Any) -> bool:
    """A key of an expert architecture that says "none": None, 0 or 1 (an int, not a boolean), or an empty list
    (Qwen's ``mlp_only_layers``)."""
    return value is None or (type(value) is int and value in (0, 1)) or value == []


def hf_moe(cfg: dict[str, Any], model_type: str, path: Path) -> dict[str, Any]:
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

    if model_type in ("mixtral", "gpt_oss"):
        # gpt-oss (GptOssMLP): a router with a bias on each of the E logits, whose softmax runs over the top k
        # logits it picked (GptOssTopKRouter); its experts' biases are mlp_bias.
        gpt_oss = model_type == "gpt_oss"
        return {"num_experts": need("num_local_experts"), "experts_per_token": need("num_experts_per_tok"),
                "expert_intermediate_size": need("intermediate_size"), "router_bias": gpt_oss,
                **({"router_softmax": "top_k"} if gpt_oss else {})}
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


def hf_deepseek(cfg: dict[str, Any], model_type: str, path: Path) -> dict[str, Any]:
    """The ``moe`` and ``mla`` sections of a DeepSeek-V2/V3 or Kimi K2 config (transformers' DeepseekV2Config,
    DeepseekV3Config; Kimi K2's config.json is DeepSeek-V3's). Experts: ``n_routed_experts``, top-k
    ``num_experts_per_tok``, width ``moe_intermediate_size``, ``n_shared_experts`` of that width, and the first
    ``first_k_dense_replace`` layers dense (``intermediate_size``); ``moe_layer_freq`` must be 1 (DeepSeek's code
    makes layer i MoE when i ≥ first_k_dense_replace and i % moe_layer_freq == 0: other values put dense layers
    between the MoE ones). The router is counted by engine.count.primitives.router_op, whose 5 FLOPs per logit for softmax
    stand equally for V3's sigmoid (4) and its correction-bias add (1); the group-limited selection (``n_group``,
    ``topk_group``: the best groups first, O(E) compares per token, like the top-k passes counted) and the
    scaling of the k weights (``routed_scaling_factor``, ``norm_topk_prob``: O(k) per token) are not counted
    apart, each under 0.1% of the gate's 2·H·E FLOPs. ``num_nextn_predict_layers``: the multi-token-prediction
    module (DeepSeek-V3: one more layer, 14 B of the checkpoint's 685 B) runs only for speculative decoding, and
    is not counted in a step (``specs.hf.mtp`` reads it as ``mtp_layers``). MLA: ``q_lora_rank`` (null: a full-rank q_proj, DeepSeek-V2-Lite), ``kv_lora_rank``,
    ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``."""
    def need(key: str) -> Any:
        if cfg.get(key) is None:
            raise UserError(f"{path}: field '{key}': missing from the {model_type} config")
        return cfg[key]

    if cfg.get("attention_bias") is True:  # DeepseekV3Attention: biases on q_a_proj, kv_a_proj_with_mqa, o_proj
        raise UserError(f"{path}: field 'attention_bias': biases on MLA's projections are not modelled")
    if model_type == "deepseek_v2" and cfg.get("mlp_bias") is True:  # DeepseekV2MLP: the dense and shared MLPs
        raise UserError(f"{path}: field 'mlp_bias': biases on DeepSeek-V2's MLPs are not modelled")
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
    # The shared experts and the dense first layers have no default to read: DeepseekV2Config gives 2 and 0,
    # DeepseekV3Config 1 and 3, and DeepSeek's own modelling code none and 0; a config without them does not say
    # which model it is.
    for key in ("n_shared_experts", "first_k_dense_replace"):
        if key not in cfg:
            raise UserError(f"{path}: field '{key}': missing from the {model_type} config (transformers' and "
                            f"DeepSeek's defaults differ; give it, 0 for none)")
    return {"moe": moe, "mla": mla}


def hf_mla_head_dim(cfg: dict[str, Any], path: Path) -> Any:
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
