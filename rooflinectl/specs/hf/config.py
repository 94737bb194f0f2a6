"""Hugging Face ``config.json`` to a model's fields: which keys mean what, and which architectures are refused.

Pure translation of a parsed config (no file is read here, nothing validated): ``specs.model`` reads the file
and validates the fields as a Model. A config whose architecture the engine does not count is refused by the key
that says so, never analysed as the dense Llama it is not. The experts and latent attention are read by
``specs.hf.experts``, the quantization_config by ``specs.hf.quant``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from ...errors import UserError
from ..sizes import MAX_LAYERS
from .deepseek_v32 import DEEPSEEK_V32_DEFAULTS, hf_deepseek_v32
from .experts import (
    DEEPSEEK_TYPES,
    HF_MOE_KEYS,
    HF_UNMODELLED_KEYS,
    hf_deepseek,
    hf_mla_head_dim,
    hf_moe,
    no_experts,
)
from .glm4_moe import GLM4_MOE_DEFAULTS, GLM4_MOE_KEYS, glm4_moe_keys, hf_glm4_moe
from .llama4 import LLAMA4_DEFAULTS, LLAMA4_MOE_KEYS, hf_llama4
from .minimax_m2 import MINIMAX_M2_DEFAULTS, MINIMAX_M2_MOE_KEYS, hf_minimax_m2, minimax_m2_keys
from .mtp import hf_mtp_layers
from .nemotron_h import NEMOTRON_H_DEFAULTS, NEMOTRON_H_MOE_KEYS, hf_nemotron_h, nemotron_h_keys
from .quant import hf_quantization
from .qwen3_next import QWEN3_NEXT_DEFAULTS, QWEN3_NEXT_MOE_KEYS, hf_qwen3_next

_HF_MODEL_TYPES: tuple[str, ...] = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "phi3", "gemma2",
                                    "gemma3_text", "gemma3", "gpt_oss", "deepseek_v2", "deepseek_v3",
                                    "kimi_k2", "deepseek_v32", "llama4", "llama4_text", "qwen3_next", "nemotron_h",
                                    "glm4_moe", "minimax_m2")
# The transformers classes of those model types: a config's `architectures` entry names the class that builds the
# model, and one outside these (a classifier head, a vision-language wrapper other than Gemma 3's) is refused by
# name. Gemma3ForConditionalGeneration (model_type gemma3) nests its text decoder in text_config: the decoder is
# imported and its SigLIP vision tower (417 M parameters in the Gemma 3 report's Table 1) is not counted.
_HF_CLASSES: dict[str, tuple[str, ...]] = {
    "llama": ("LlamaForCausalLM",), "mistral": ("MistralForCausalLM",), "qwen2": ("Qwen2ForCausalLM",),
    "qwen3": ("Qwen3ForCausalLM",), "mixtral": ("MixtralForCausalLM",), "qwen3_moe": ("Qwen3MoeForCausalLM",),
    "phi3": ("Phi3ForCausalLM",), "gemma2": ("Gemma2ForCausalLM",), "gemma3_text": ("Gemma3ForCausalLM",),
    "gemma3": ("Gemma3ForConditionalGeneration",), "gpt_oss": ("GptOssForCausalLM",),
    "deepseek_v2": ("DeepseekV2ForCausalLM",), "deepseek_v3": ("DeepseekV3ForCausalLM",),
    "kimi_k2": ("DeepseekV3ForCausalLM",), "deepseek_v32": ("DeepseekV32ForCausalLM",),
    "llama4": ("Llama4ForConditionalGeneration",), "llama4_text": ("Llama4ForCausalLM",),
    "qwen3_next": ("Qwen3NextForCausalLM",), "nemotron_h": ("NemotronHForCausalLM",),
    "glm4_moe": ("Glm4MoeForCausalLM",), "minimax_m2": ("MiniMaxM2ForCausalLM",),
}
_HF_ARCHITECTURES: tuple[str, ...] = tuple(c for classes in _HF_CLASSES.values() for c in classes)
# Model types near the ones read that are refused by name, with why.
_HF_REFUSED: dict[str, str] = {
    "phi3small": "Phi-3-small's block-sparse attention and GEGELU MLP are not modelled",
    "phimoe": "Phi-3.5-MoE's experts are not modelled",
}
# Defaults of transformers' config classes (LlamaConfig … DeepseekV3Config, transformers 5.25) for the keys a
# config.json may leave out, by model type: what the class builds when the key is absent (a key given, null
# included, is the config's). Gemma 3 27B's text_config gives no vocab_size or max_position_embeddings; Mistral's
# later configs no sliding_window (MistralConfig: 4096); Qwen3's head_dim is 128 whatever the hidden size
# (Qwen3-0.6B: hidden 1,024, 16 heads). A missing num_key_value_heads is the class's default, not always the
# heads (MistralConfig 8, Qwen3MoeConfig 4, Qwen2Config 32); null is the heads in every class. The sizes that set
# a model's shape (hidden_size, layers, heads, intermediate_size, the experts' counts and widths) have no default
# here: a config without them is refused. tests/specs/test_hf_oracle.py builds each type with transformers.
_HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "mistral": {"num_key_value_heads": 8, "sliding_window": 4096},
    "mixtral": {"num_key_value_heads": 8},
    "qwen2": {"num_key_value_heads": 32, "use_sliding_window": False, "sliding_window": 4096,
              "max_window_layers": 28},
    "qwen3": {"num_key_value_heads": 32, "head_dim": 128, "use_sliding_window": False, "sliding_window": 4096,
              "max_window_layers": 28},
    "qwen3_moe": {"num_key_value_heads": 4, "use_sliding_window": False, "sliding_window": 4096},
    "gemma2": {"vocab_size": 256000, "num_key_value_heads": 4, "head_dim": 256,
               "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192, "sliding_window": 4096,
               "tie_word_embeddings": True, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
    "gemma3_text": {"vocab_size": 262208, "num_key_value_heads": 4, "head_dim": 256,
                    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072,
                    "sliding_window": 4096, "sliding_window_pattern": 6, "tie_word_embeddings": True},
    "gpt_oss": {"num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128, "attention_bias": True,
                "tie_word_embeddings": False},
    # DeepseekV2Config and DeepseekV3Config, and DeepSeek's own modelling code, all default q_lora_rank to 1536
    # (null: one full-rank q_proj, DeepSeek-V2-Lite).
    **{t: {"q_lora_rank": 1536} for t in DEEPSEEK_TYPES},
    "deepseek_v32": {"q_lora_rank": 1536, **DEEPSEEK_V32_DEFAULTS},
    "llama4_text": LLAMA4_DEFAULTS,
    "qwen3_next": QWEN3_NEXT_DEFAULTS,
    "nemotron_h": NEMOTRON_H_DEFAULTS,
    "glm4_moe": GLM4_MOE_DEFAULTS,
    "minimax_m2": MINIMAX_M2_DEFAULTS,
}
# The keys whose class field is a plain whole number (MistralConfig's num_key_value_heads: int = 8): transformers
# refuses null there, and so does the importer, rather than read it as the heads as the other classes do.
_HF_NOT_NULL: dict[str, tuple[str, ...]] = {
    t: ("num_key_value_heads",) for t in ("mistral", "mixtral", "qwen3_moe", "gemma2", "gemma3_text", "gpt_oss",
                                                 "glm4_moe", "minimax_m2")}
# The bias keys each model type's transformers class reads (LlamaAttention/LlamaMLP; the attention of Qwen3,
# Qwen3-MoE, Gemma 2/3 and gpt-oss); every other type builds its projections without biases whatever the key says
# (Mistral, Mixtral, Qwen2's o_proj and MLP, Phi-3, DeepSeek-V3), and the key is ignored as transformers ignores
# it. DeepSeek's attention_bias (and DeepSeek-V2's mlp_bias) are refused by specs.hf.experts; GLM-4.5's (q, k and v
# alone) is read by specs.hf.glm4_moe.
_HF_BIAS_KEYS: dict[str, tuple[str, ...]] = {
    "llama": ("attention_bias", "mlp_bias"), "qwen3": ("attention_bias",), "qwen3_moe": ("attention_bias",),
    "gemma2": ("attention_bias",), "gemma3_text": ("attention_bias",), "gpt_oss": ("attention_bias",),
    "nemotron_h": ("mlp_bias",),
}
# How each model type's attention reads a window (transformers' attention classes): "every" layer through
# sliding_window (MistralAttention, MixtralAttention, Phi3Attention: layer_types ignored); "switch", every layer
# while use_sliding_window is true (Qwen3MoeAttention: layer_types and max_window_layers ignored); "qwen", while
# use_sliding_window is true, by layer_types, else the layers from max_window_layers on (Qwen2Config,
# Qwen3Config); "types", by layer_types, else the class's own pattern (Gemma 2 and gpt-oss alternate from a
# sliding layer 0, Gemma 3 slides except every sliding_window_pattern-th layer). A type not listed (Llama,
# DeepSeek) has no window whatever the config says.
_HF_WINDOWS: dict[str, str] = {
    "mistral": "every", "mixtral": "every", "phi3": "every", "qwen3_moe": "switch", "qwen2": "qwen", "qwen3": "qwen",
    "gemma2": "types", "gemma3_text": "types", "gpt_oss": "types",
}
# Vision-language configs whose text decoder is nested in text_config, by the decoder's model type: Gemma 3's
# (Gemma3ForConditionalGeneration) and Llama 4's (Llama4ForConditionalGeneration). The decoder is imported; the
# vision tower is not counted.
_NESTED_TEXT: dict[str, str] = {"gemma3": "gemma3_text", "llama4": "llama4_text"}
_GEMMA_TYPES: tuple[str, ...] = ("gemma2", "gemma3_text")


def _period(pattern: list[str]) -> list[str]:
    """The shortest prefix whose repetition from layer 0, cut at the pattern's length, gives the pattern: Gemma
    3's 62 layers read back as its period of six. That is the pattern's smallest period, n − π(n − 1) with π the
    prefix function (Knuth–Morris–Pratt), found in time linear in the layers."""
    border = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = border[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        border[i] = k
    return pattern[:len(pattern) - border[-1]]


def _hf_sliding_window(cfg: dict[str, Any], model_type: Any, path: Path) -> dict[str, Any]:
    """``sliding_window`` and ``layer_pattern`` of a config, read as its model type's attention reads them
    (:data:`_HF_WINDOWS`). null or absent means none; {} when no layer slides. No per-layer list is built for more
    layers than a model may have: validation refuses those by name."""
    kind = _HF_WINDOWS.get(model_type) if isinstance(model_type, str) else None
    if kind in ("switch", "qwen"):
        use = cfg.get("use_sliding_window")
        if type(use) is not bool:
            raise UserError(f"{path}: field 'use_sliding_window': expected true or false, got {use!r}")
        if not use:
            return {}  # Qwen2Config and its kin drop sliding_window
    window = cfg.get("sliding_window")
    if kind is None or window is None:
        return {}
    layers = cfg.get("num_hidden_layers")
    if kind in ("every", "switch") or not (type(layers) is int and 0 < layers <= MAX_LAYERS):
        return {"sliding_window": window}  # every layer slides, or validation names the bad num_layers
    types = cfg.get("layer_types")
    if types is not None:
        names = {"sliding_attention": "sliding", "full_attention": "full"}
        if not (isinstance(types, list) and len(types) == layers
                and all(isinstance(t, str) and t in names for t in types)):
            raise UserError(f"{path}: field 'layer_types': expected {layers} entries of 'sliding_attention' or "
                            f"'full_attention' (other attention kinds are not modelled)")
        pattern = [names[t] for t in types]
    elif model_type == "gemma3_text":
        every = cfg.get("sliding_window_pattern")
        if not (type(every) is int and every > 0):
            raise UserError(f"{path}: field 'sliding_window_pattern': expected a positive integer, got {every!r}")
        pattern = ["sliding"] * min(every - 1, layers) + ["full"]
    elif kind == "qwen":
        first = cfg.get("max_window_layers")
        if not (type(first) is int and first >= 0):
            raise UserError(f"{path}: field 'max_window_layers': expected a whole number, got {first!r}")
        pattern = ["full"] * min(first, layers) + ["sliding"] * max(0, layers - first)
    else:
        pattern = ["sliding", "full"]
    if "sliding" not in pattern[:layers]:
        return {}
    pattern = _period(pattern[:layers])
    return {"sliding_window": window, "layer_pattern": None if pattern == ["sliding"] else pattern}


def _check_defaults(cfg: dict[str, Any], model_type: str, path: Path) -> None:
    """Refuses null where the class takes a whole number (:data:`_HF_NOT_NULL`), and a missing
    num_key_value_heads whose class default (Qwen2Config: 32) does not divide the heads the config states, naming
    the missing key rather than the default it was given."""
    for key in _HF_NOT_NULL.get(model_type, ()):
        if key in cfg and cfg[key] is None:
            raise UserError(f"{path}: field '{key}': null, where the {model_type} config takes a whole number "
                            f"(absent: {_HF_DEFAULTS[model_type][key]})")
    kv, heads = _HF_DEFAULTS[model_type].get("num_key_value_heads"), cfg.get("num_attention_heads")
    if "num_key_value_heads" not in cfg and kv is not None and type(heads) is int and heads > 0 and heads % kv:
        raise UserError(f"{path}: field 'num_key_value_heads': missing, and the {model_type} default of {kv} "
                        f"does not divide num_attention_heads {heads}; give it")


def _text_config(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The decoder's config: a vision-language config (``_NESTED_TEXT``) nests it in ``text_config`` (the
    quantization_config, where there is one, stays at the top); any other config is its own."""
    top = cfg.get("model_type")
    if top not in _NESTED_TEXT:
        return cfg
    inner = _NESTED_TEXT[top]
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        raise UserError(f"{path}: field 'text_config': a {top} config nests its text decoder there (a mapping)")
    text = {"model_type": inner, **text}
    if top == "gemma3":
        # Gemma3ForConditionalGeneration ties its LM head by the top-level tie_word_embeddings (Gemma3Config:
        # true); the text decoder's own key builds nothing.
        text["tie_word_embeddings"] = cfg.get("tie_word_embeddings", True)
    if text["model_type"] != inner:
        raise UserError(f"{path}: field 'text_config.model_type': {text['model_type']!r}, expected {inner}")
    if "quantization_config" in cfg:
        text["quantization_config"] = cfg["quantization_config"]
    return text


def _hf_mlp(cfg: dict[str, Any], model_type: Any, path: Path) -> str:
    """The MLP's kind: gpt-oss's experts are its clamped SwiGLU whatever hidden_act says (GptOssExperts); Gemma's
    ``hidden_activation`` (else ``hidden_act``) gelu_pytorch_tanh is the gated GELU-tanh; silu/swish the gated
    SiLU. Anything else is refused naming the key."""
    if model_type == "gpt_oss":
        return "clamped_swiglu"
    key = "hidden_activation" if cfg.get("hidden_activation") is not None else "hidden_act"
    act = cfg.get(key, "silu")
    if act in ("silu", "swish"):
        return "gated_silu"
    if act in ("gelu_pytorch_tanh", "gelu_new") and model_type in _GEMMA_TYPES:
        return "gated_gelu_tanh"
    raise UserError(f"{path}: field '{key}': the {model_type} MLP with '{act}' is not modelled (gated SiLU, and "
                    f"Gemma's gated gelu_pytorch_tanh, are)")


def _hf_head_dim(cfg: dict[str, Any], path: Path) -> Any:
    """``head_dim`` as given (0, false or {} is an error, not a fallback), else hidden_size / heads."""
    heads, hidden = cfg["num_attention_heads"], cfg["hidden_size"]
    if cfg.get("head_dim") is not None:
        return cfg["head_dim"]
    if not (type(heads) is int and type(hidden) is int and heads > 0):
        return hidden  # not a division: validation names the bad size (num_heads or hidden_size)
    if hidden % heads:
        raise UserError(f"{path}: field 'head_dim': missing, and hidden_size {hidden} is not a multiple of "
                        f"num_attention_heads {heads}")
    return hidden // heads


def _hf_rotary_dim(cfg: dict[str, Any], head_dim: Any, path: Path) -> Any:
    """Phi-3's ``partial_rotary_factor`` (Phi-4-mini: 0.75): RoPE rotates int(head_dim · factor) dimensions of
    each head (Phi3Attention's rotary_ndims); absent or 1: all of them (None)."""
    factor = cfg.get("partial_rotary_factor")
    if factor is None or factor == 1:
        return None
    if not (isinstance(factor, (int, float)) and not isinstance(factor, bool) and 0 < factor < 1):
        raise UserError(f"{path}: field 'partial_rotary_factor': expected a number in (0, 1], got {factor!r}")
    return int(head_dim * factor) if type(head_dim) is int else None


# The Model fields that a config.json spells otherwise (transformers' names), for messages about its values.
HF_KEY_OF_FIELD = {"num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
                   "num_kv_heads": "num_key_value_heads", "tie_embeddings": "tie_word_embeddings"}


def model_fields(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The Model fields of a Hugging Face ``config.json``'s keys (Llama/Mistral/Qwen2/Qwen3/Phi-3-style; Gemma
    2/3 with their norms, GELU and window pattern; Mixtral, Qwen3-MoE and gpt-oss with their experts), for
    ``specs.model.model_from_hf_config`` to validate; ``path`` names the file in messages and gives the model
    its id."""
    # A config this importer does not model must not be analysed as the dense Llama it is not (a DeepSeek config
    # read as dense printed wrong numbers with exit 0): a model type other than these, or any key of an
    # architecture it does not count (experts outside Mixtral, Qwen3-MoE and gpt-oss, MLA's low-rank
    # attention), is refused by name.
    top_type = cfg.get("model_type")
    if top_type is None:  # the features are read by model type: without one, a window or a bias would be dropped
        raise UserError(f"{path}: field 'model_type' is missing (transformers' AutoConfig needs it too); "
                        f"rooflinectl counts {', '.join(_HF_MODEL_TYPES)} models")
    if not isinstance(top_type, str):
        raise UserError(f"{path}: field 'model_type': expected a name such as 'llama', got {top_type!r}")
    if top_type in _HF_REFUSED:
        raise UserError(f"{path}: field 'model_type': '{top_type}' is not modelled: {_HF_REFUSED[top_type]}")
    if top_type not in _HF_MODEL_TYPES:
        raise UserError(f"{path}: field 'model_type': '{top_type}' is not modelled; rooflinectl counts "
                        f"{', '.join(_HF_MODEL_TYPES)} models")
    architectures = cfg.get("architectures")
    if architectures is not None:
        if not isinstance(architectures, list):
            raise UserError(f"{path}: field 'architectures': expected a list of class names, got {architectures!r}")
        # A class of another model type (a Gemma class in a llama config) is refused too: which one is meant?
        allowed = _HF_CLASSES[top_type]
        for entry in architectures:
            if entry not in allowed:
                raise UserError(f"{path}: field 'architectures': {entry!r} is not modelled"
                                + (f" for model_type {top_type}" if entry in _HF_ARCHITECTURES else "")
                                + f"; rooflinectl counts {', '.join(allowed)}")
    cfg = _text_config(cfg, path)
    model_type = cfg.get("model_type")
    if isinstance(model_type, str) and model_type in _HF_DEFAULTS:
        _check_defaults(cfg, model_type, path)
        cfg = {**_HF_DEFAULTS[model_type], **cfg}  # a key given (null included) is the config's
    if model_type == "nemotron_h":
        cfg = nemotron_h_keys(cfg, path)
    if model_type == "glm4_moe":
        cfg = glm4_moe_keys(cfg)
    if model_type == "minimax_m2":
        cfg = minimax_m2_keys(cfg)
    own = HF_MOE_KEYS.get(model_type, ()) if isinstance(model_type, str) else ()
    own += LLAMA4_MOE_KEYS if model_type == "llama4_text" else ()
    own += QWEN3_NEXT_MOE_KEYS if model_type == "qwen3_next" else ()
    own += NEMOTRON_H_MOE_KEYS if model_type == "nemotron_h" else ()
    own += GLM4_MOE_KEYS if model_type == "glm4_moe" else ()
    own += MINIMAX_M2_MOE_KEYS if model_type == "minimax_m2" else ()
    # Outside a model type's own expert keys, None, 0 or 1 mean "no experts"; anything else is an architecture
    # not modelled.
    unknown = sorted(k for k in HF_UNMODELLED_KEYS if k in cfg and k not in own and not no_experts(cfg[k]))
    if unknown:
        raise UserError(f"{path}: field '{unknown[0]}': mixture-of-experts models are modelled only as model_type "
                        f"{', '.join(HF_MOE_KEYS)}, and latent attention as the last {len(DEEPSEEK_TYPES)}")
    # transformers' attention_bias puts a bias on q, k, v and o_proj; mlp_bias (Llama) on gate, up and down; read
    # on the model types whose classes read them (_HF_BIAS_KEYS), ignored on the others.
    biases = {}
    for key in ("attention_bias", "mlp_bias"):
        value = cfg.get(key, False) if key in _HF_BIAS_KEYS.get(str(model_type), ()) else False
        if type(value) is not bool:
            raise UserError(f"{path}: field '{key}': expected true or false, got {value!r}")
        biases[key] = value
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
               if k not in cfg]
    if missing:
        raise UserError(f"{path}: field '{missing[0]}': missing from the config")
    heads = cfg["num_attention_heads"]
    head_dim = hf_mla_head_dim(cfg, path) if model_type in DEEPSEEK_TYPES else _hf_head_dim(cfg, path)
    # A config.json is named after its folder (resolved: read from the folder itself, Path("config.json").parent
    # is '.', whose name is ''); any other file after its own stem. The name falls back to the id, never to ''.
    model_id = path.resolve().parent.name if path.name == "config.json" else path.stem
    gemma = model_type in _GEMMA_TYPES
    data: dict[str, Any] = {
        "id": model_id,
        "name": str(cfg.get("_name_or_path") or cfg.get("model_type") or model_id),
        "source": f"Hugging Face config {path}"
                  + ("; the text decoder of text_config (the vision tower is not counted)"
                     if top_type in _NESTED_TEXT else "")
                  # Phi3Attention's qkv_proj and Phi3MLP's gate_up_proj: one matrix each in the checkpoint; the
                  # FLOPs and weight bytes are the three (two) projections', the x reads those of --fuse.
                  + ("; its checkpoint fuses qkv_proj and gate_up_proj: --fuse qkv,gate_up counts that kernel"
                     if model_type == "phi3" else ""),
        "hidden_size": cfg["hidden_size"],
        "num_layers": cfg["num_hidden_layers"],
        "num_heads": heads,
        "num_kv_heads": cfg["num_key_value_heads"] if cfg.get("num_key_value_heads") is not None else heads,
        "head_dim": head_dim,
        "intermediate_size": cfg["intermediate_size"],
        "mlp": _hf_mlp(cfg, model_type, path),
        "vocab_size": cfg["vocab_size"],
        "tie_embeddings": cfg.get("tie_word_embeddings", False),  # strict: "false" is an error, not True
        # Absent or null: the model states no limit, and none is checked.
        "max_position_embeddings": cfg.get("max_position_embeddings"),
        **_hf_sliding_window(cfg, model_type, path),
    }
    rotary = _hf_rotary_dim(cfg, head_dim, path)
    if rotary is not None:
        data["rotary_dim"] = rotary
    if model_type in DEEPSEEK_TYPES:
        data.update(hf_deepseek(cfg, cast(str, model_type), path))
        if model_type == "deepseek_v32":
            data.update(hf_deepseek_v32(cfg, path))
    elif model_type in HF_MOE_KEYS:
        data["moe"] = hf_moe(cfg, cast(str, model_type), path)
    elif model_type == "llama4_text":
        data.update(hf_llama4(cfg, path))
    elif model_type == "qwen3_next":
        data.update(hf_qwen3_next(cfg, path))
    elif model_type == "nemotron_h":
        data.update(hf_nemotron_h(cfg, path))
    elif model_type == "glm4_moe":
        data.update(hf_glm4_moe(cfg, path))
    elif model_type == "minimax_m2":
        data.update(hf_minimax_m2(cfg, path))
    data.update(hf_mtp_layers(cfg, cast(str, model_type), path))
    data.update(hf_quantization(cfg, path, experts="moe" in data))
    if model_type == "qwen2" or biases["attention_bias"]:
        data["qkv_bias"] = True  # Qwen2Attention builds q_proj, k_proj, v_proj with bias=True (no config key)
    if biases["attention_bias"]:
        data["o_bias"] = True
    if biases["mlp_bias"] or model_type == "gpt_oss":
        data["mlp_bias"] = True  # gpt-oss's experts: gate_up_proj_bias and down_proj_bias (GptOssExperts)
    if model_type == "gpt_oss":
        data["attention_sinks"] = True  # GptOssAttention's sinks: one learned logit per head
    if model_type in ("qwen3", "qwen3_moe", "gemma3_text"):
        data["qk_norm"] = True  # Qwen3's and Gemma 3's q_norm and k_norm: RMSNorm over each head (no config key)
    if gemma:
        # Gemma2DecoderLayer/Gemma3DecoderLayer: input, post_attention, pre_feedforward and post_feedforward
        # norms; the embedding times sqrt(hidden_size) (Gemma's normalizer).
        data["post_norms"] = True
        data["scale_embeddings"] = True
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            if cfg.get(key) is not None:
                data[key] = cfg[key]
    return data
