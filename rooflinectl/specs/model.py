"""Models: a decoder-only transformer's architecture and its variants.

A mixture of experts is :mod:`specs.moe`'s, multi-head latent attention :mod:`specs.mla`'s, and each size's range
is in :mod:`specs.sizes`. Where a model comes from (the bundled catalog, a YAML path, a Hugging Face
``config.json``) is :mod:`specs.models`'.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from typing_extensions import Self  # typing.Self is 3.11+; the floor is 3.10

from .dsa import SparseAttention
from .dtypes import WeightDType, group_size_refusal
from .layers import GATED_MLPS, KV_ATTENTIONS, LayerAttention, MlpKind, NormKind
from .load import (
    Id,
    Name,
    Strict,
    Text,
    invalid,
)
from .mla import MLA
from .moe import MoE
from .recurrent import GatedDeltaNet
from .sizes import GroupSize, HeadDim, Heads, HiddenSize, Layers, MlpWidth, MtpModules, Positions, Vocab
from .ssm import Mamba2

# A soft cap's value (cap·tanh(x/cap)): the count does not depend on it; Gemma 2's are 50 and 30.
Softcap = Annotated[float, Field(gt=0, le=1e6)]
# Which matrices a model's quantized weight format covers: every linear layer, or the MoE experts alone.
QuantizedScope = Literal["linear", "experts"]


# Variant fields every model's dump shows, at their default too (the other variants are left out where unused).
SHOWN_AT_DEFAULT = ("mlp", "tie_embeddings", "max_position_embeddings", "sliding_window")
# The variants engine/count/mla.py models beside multi-head latent attention (its MLP's and the model's, DeepSeek-V3's
# MTP module among them); any other (an attention variant DeepSeek's attention does not have: Q/K norms, biases,
# sinks, windows, post norms, LayerNorm, a new field) is refused with it.
MLA_MODELS = ("mla", "sparse_attention", "moe", "mlp", "mlp_bias", "tie_embeddings", "scale_embeddings", "max_position_embeddings",
              "final_logit_softcapping", "weight_dtype", "group_size", "quantized", "mtp_layers")


class Model(Strict):
    """A decoder-only transformer with RoPE and GQA: the dense Llama family (Llama, Mistral, Qwen2/3, Phi-3), its
    variants (Gemma 2/3, gpt-oss), or with a mixture of experts in place of the MLP (``moe``: Mixtral, Qwen3-MoE,
    gpt-oss).

    ``mlp``: the MLP's kind (:data:`MLP_KINDS`; an MoE model's experts and shared experts are of the same kind).
    ``norm``: every norm's kind (RMSNorm, or LayerNorm with a gain and a bias); ``post_norms`` (Gemma 2/3) adds a
    norm on the attention's and on the MLP's output before each residual add, four norms a layer in all.
    ``qk_norm``: an RMSNorm over each head of Q and of K after their projections, with a gain of ``head_dim``
    each (Qwen3, Gemma 3). ``scale_embeddings`` (Gemma): the embedding's output is multiplied by sqrt(H).
    Biases: ``qkv_bias`` on Q, K and V (Qwen2), ``o_bias`` on O, ``mlp_bias`` on the MLP's (or every expert's)
    projections. ``attention_sinks`` (gpt-oss): one learned logit per head and layer in each softmax's
    denominator. ``attn_logit_softcapping``/``final_logit_softcapping`` (Gemma 2): cap·tanh(x/cap) on every
    attention score and on the logits. ``rotary_dim``: the dimensions of each head that RoPE rotates (Phi-3's
    ``partial_rotary_factor``); None: all ``head_dim``.

    ``sliding_window``: the positions a sliding (local) layer attends to, the last ``sliding_window`` up to and
    including its own; ``layer_pattern`` which layers slide, as a list of ``sliding``/``full`` repeated from layer
    0 and cut at ``num_layers`` (Gemma 3: five sliding, one full; gpt-oss: sliding, full); no pattern with a
    window: every layer slides (Mistral 7B v0.1). ``max_position_embeddings`` is the longest sequence the model is
    specified for (config.json's key of that name): a workload beyond it is refused. None: not given (a user's
    file), no limit checked.
    """

    id: Id
    name: Name
    source: Text
    hidden_size: HiddenSize
    num_layers: Layers
    num_heads: Heads
    num_kv_heads: Heads
    head_dim: HeadDim
    intermediate_size: MlpWidth
    # Every field with a default is a variant of the plain Llama (:meth:`variants`); its description is the variant
    # in words, for a runner's refusal ("has a mixture of experts").
    mlp: MlpKind = Field("gated_silu", description="the MLP")
    norm: NormKind = Field("rmsnorm", description="the norm")
    post_norms: bool = Field(False, description="post norms")
    vocab_size: Vocab
    tie_embeddings: bool = Field(False, description="a tied LM head")
    scale_embeddings: bool = Field(False, description="scaled embeddings")
    max_position_embeddings: Positions | None = Field(None, description="a position limit")
    sliding_window: Positions | None = Field(None, description="a sliding window")
    layer_pattern: list[LayerAttention] | None = Field(default=None, min_length=1, max_length=2**14,
                                                       description="a layer pattern")
    # Chunked local attention (Llama 4): a query at position p attends to positions ⌊p/C⌋·C … p, its own chunk.
    attention_chunk_size: Positions | None = Field(None, description="chunked local attention")
    # NoPE full layers (Llama 4's no_rope_layers): the full-attention layers apply no RoPE; with
    # attn_temperature_tuning their Q is scaled per position (Llama4TextAttention).
    nope_full_layers: bool = Field(False, description="NoPE full-attention layers")
    attn_temperature_tuning: bool = Field(False, description="position-scaled queries on the NoPE layers")
    # Llama 4 Scout's use_qk_norm: a weightless RMSNorm over each head of Q and K, on the RoPE layers only.
    rope_qk_l2_norm: bool = Field(False, description="weightless Q/K norms on the RoPE layers")
    qk_norm: bool = Field(False, description="Q/K norms")
    # MiniMax-M2's qk_norm_type per_layer: one RMSNorm over all of Q (gain h·d) and one over K (g·d), not per head.
    qk_norm_per_layer: bool = Field(False, description="Q/K norms over the whole layer's Q and K")
    rotary_dim: HeadDim | None = Field(None, description="partial RoPE")
    # Biases on the Q, K and V projections (Qwen2/Qwen2.5: its architecture, no config key), on O, on the MLP's.
    qkv_bias: bool = Field(False, description="biases on Q, K and V")
    o_bias: bool = Field(False, description="a bias on O")
    mlp_bias: bool = Field(False, description="biases on the MLP")
    attention_sinks: bool = Field(False, description="attention sinks")
    attn_logit_softcapping: Softcap | None = Field(None, description="attention logit soft-capping")
    final_logit_softcapping: Softcap | None = Field(None, description="final logit soft-capping")
    moe: MoE | None = Field(None, description="a mixture of experts")
    # Multi-head latent attention in place of GQA (DeepSeek-V2/V3, Kimi K2). With it, head_dim is the query's
    # width per head, qk_nope_head_dim + qk_rope_head_dim, and num_kv_heads is num_heads (each head gets its own
    # K and V from the shared latent: DeepSeek's config.json gives num_key_value_heads = num_attention_heads).
    mla: MLA | None = Field(None, description="multi-head latent attention")
    # DeepSeek Sparse Attention beside MLA in every layer (DeepSeek-V3.2-Exp): a lightning indexer picks each
    # query's top-k cached positions, and the latent attention reads those alone.
    sparse_attention: SparseAttention | None = Field(None, description="DeepSeek sparse attention")
    # Gated DeltaNet linear attention on the layers ``layer_pattern`` names ``linear`` (Qwen3-Next).
    linear_attention: GatedDeltaNet | None = Field(None, description="Gated DeltaNet linear attention")
    # Mamba-2 state-space layers on the layers ``layer_pattern`` names ``mamba`` (Nemotron-H).
    mamba: Mamba2 | None = Field(None, description="Mamba-2 state-space layers")
    # Qwen3-Next's gated attention: q_proj also gives a gate per output of attention, which is multiplied by
    # sigmoid(gate) before o_proj (Qwen3NextAttention).
    attn_output_gate: bool = Field(False, description="a sigmoid gate on the attention's output")
    # The checkpoint's weight format where its linear layers are stored quantized (config.json's
    # quantization_config), and int4's group along k; None: the workload's dtype. A scenario's or the command
    # line's weight_dtype (and group_size) wins over it (workload_from_scenario). ``quantized`` says which
    # matrices a weight format other than dtype applies to: every linear layer, or the MoE experts alone (gpt-oss's
    # MXFP4 checkpoint keeps attention, router, embedding and LM head in bf16), whichever format is chosen.
    weight_dtype: WeightDType | None = Field(None, description="a quantized checkpoint")
    group_size: GroupSize | None = Field(None, description="an int4 group size")
    quantized: QuantizedScope = Field("linear", description="the quantized matrices")
    # The multi-token-prediction modules the checkpoint ships beside its layers (config.json's
    # num_nextn_predict_layers for DeepSeek-V3 and GLM-4.5, num_mtp_modules for MiniMax-M2): they draft for
    # speculative decoding alone (serving.speculation's mtp:K), and no step counts them. 0: none, and mtp:K is
    # refused.
    mtp_layers: MtpModules = Field(0, description="multi-token-prediction modules")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The fields, less the variants a model does not use (as before they existed), but those every dump has
        shown from the start (``SHOWN_AT_DEFAULT``)."""
        data: dict[str, Any] = handler(self)
        used, variant = self.variants(), self.variant_defaults()
        return {k: v for k, v in data.items() if k in used or k in SHOWN_AT_DEFAULT or k not in variant}

    @classmethod
    def variant_defaults(cls) -> dict[str, Any]:
        """Each variant field and its default: every field that has a default (the sizes have none)."""
        return {name: f.default for name, f in cls.model_fields.items() if not f.is_required()}

    def variants(self) -> dict[str, Any]:
        """The variant fields whose value is not their default, by field name: what this model has beyond a plain
        Llama (``{}`` for Llama 3 8B's sizes alone). Derived from the fields' defaults, so that a new field is a
        new variant with nothing else to list: a runner that allow-lists variants refuses it until told it runs."""
        return {name: value for name, default in self.variant_defaults().items()
                if (value := getattr(self, name)) != default}

    @classmethod
    def variant_words(cls, name: str, value: Any) -> str:
        """A variant in words, for a refusal: its field's description, with the value where it is not a flag or a
        section (``the MLP (gelu_tanh)``, ``a mixture of experts``); the field's name where it has none."""
        words = cls.model_fields[name].description or name
        return words if value is True or isinstance(value, Strict) else f"{words} ({value})"

    @model_validator(mode="after")
    def _gqa(self) -> Self:
        if self.num_heads % self.num_kv_heads:
            raise invalid(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.moe is not None and self.moe.first_dense_layers >= self.num_layers:
            raise invalid(f"moe.first_dense_layers ({self.moe.first_dense_layers}) leaves none of the "
                           f"{self.num_layers} layers with experts: drop 'moe' for a dense model")
        if self.moe is not None and self.moe_layers == 0:
            raise invalid(f"moe.moe_every ({self.moe.moe_every}) leaves none of the {self.num_layers} layers with "
                           f"experts: drop 'moe' for a dense model")
        if refusal := group_size_refusal(self.group_size, self.weight_dtype):
            raise invalid(refusal)
        if self.layer_pattern is not None:
            for kind, size, key in (("sliding", self.sliding_window, "sliding_window"),
                                    ("chunked", self.attention_chunk_size, "attention_chunk_size"),
                                    ("linear", self.linear_attention, "linear_attention"),
                                    ("mamba", self.mamba, "mamba")):
                if kind in self.layer_pattern and size is None:
                    raise invalid(f"layer_pattern names {kind} layers, but the model gives no {key}")
            if set(self.layer_pattern) == {"full"}:
                raise invalid("layer_pattern has no sliding layer (nor a chunked one): drop it and the window")
            if len(self.layer_pattern) > self.num_layers:
                raise invalid(f"layer_pattern has {len(self.layer_pattern)} entries, more than the "
                               f"{self.num_layers} layers")
            if not set(self.layer_pattern) & set(KV_ATTENTIONS):
                raise invalid("layer_pattern has no attention layer: a model without one is not modelled")
            if self.mlp_apart and (self.moe is not None or self.post_norms):
                raise invalid("mlp layers apart from the mixers, with experts or post norms, are not modelled")
        elif self.sliding_window is not None and self.attention_chunk_size is not None:
            raise invalid("sliding_window and attention_chunk_size together need a layer_pattern saying which "
                          "layers slide and which attend in chunks")
        for kind, given in (("linear", self.linear_attention), ("mamba", self.mamba)):
            if given is not None and kind not in (self.layer_pattern or []):
                raise invalid(f"{'linear_attention' if kind == 'linear' else kind} is given, but layer_pattern "
                              f"names no {kind} layer")
        if self.recurrent and (self.sliding_window or self.attention_chunk_size):
            raise invalid("linear or mamba layers beside sliding or chunked attention are not modelled")
        if self.attn_temperature_tuning and not self.nope_full_layers:
            raise invalid("attn_temperature_tuning scales the queries of NoPE layers: give nope_full_layers")
        if self.qk_norm_per_layer and not self.qk_norm:
            raise invalid("qk_norm_per_layer says how the Q/K norms are taken: give qk_norm")
        if self.rope_qk_l2_norm and self.qk_norm:
            raise invalid("qk_norm and rope_qk_l2_norm are two Q/K norms: a model has one")
        if self.rotary_dim is not None and (self.rotary_dim > self.head_dim or self.rotary_dim % 2):
            raise invalid(f"rotary_dim {self.rotary_dim}: RoPE rotates pairs of a head's {self.head_dim} "
                           f"dimensions (an even number, at most head_dim)")
        if self.quantized == "experts" and self.moe is None:
            raise invalid("quantized: experts, but the model has no experts (drop it, or give 'moe')")
        if self.mla is not None:
            self._check_mla(self.mla)
        if self.sparse_attention is not None and (self.mla is None or self.mla.q_lora_rank is None):
            raise invalid("sparse_attention's indexer reads MLA's Q latent: give 'mla' with a q_lora_rank")
        return self

    def _check_mla(self, mla: MLA) -> None:
        """With MLA, head_dim and num_kv_heads have one meaning each (see ``mla``), and every variant engine/count/mla.py
        does not model beside it (not in ``MLA_MODELS``: the attention variants DeepSeek's attention does not have)
        is refused."""
        if self.head_dim != mla.qk_head_dim:
            raise invalid(f"head_dim ({self.head_dim}) must be mla.qk_nope_head_dim + mla.qk_rope_head_dim "
                           f"({mla.qk_nope_head_dim} + {mla.qk_rope_head_dim} = {mla.qk_head_dim}): with MLA it is "
                           f"the query's width per head")
        if self.num_kv_heads != self.num_heads:
            raise invalid(f"num_kv_heads ({self.num_kv_heads}) must be num_heads ({self.num_heads}) with MLA: every "
                           f"head expands its own K and V from the shared latent")
        for field in self.variants():
            if field not in MLA_MODELS:
                raise invalid(f"{field} is not modelled with MLA (DeepSeek's attention has no such variant)")

    def max_length(self) -> tuple[int, str] | None:
        """(the most positions a step may use, the field that sets it), or None when the model gives none:
        ``max_position_embeddings`` (positions 0 … max − 1 exist). A sliding window is modelled (its layers
        read the last ``sliding_window`` positions), so it sets no limit."""
        if self.max_position_embeddings is None:
            return None
        return self.max_position_embeddings, "max_position_embeddings"

    def layer_attention(self, layer: int) -> LayerAttention:
        """Layer ``layer``'s (0-based) attention: its entry of ``layer_pattern`` repeated from layer 0, or, with no
        pattern, every layer sliding where a window is given, chunked where a chunk is, else full."""
        if self.layer_pattern is not None:
            return self.layer_pattern[layer % len(self.layer_pattern)]
        if self.sliding_window is not None:
            return "sliding"
        return "chunked" if self.attention_chunk_size is not None else "full"

    def layer_slides(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) attends through the sliding window."""
        return self.layer_attention(layer) == "sliding"

    def layer_is_moe(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has the experts (``MoE.is_moe``)."""
        return self.moe is not None and self.moe.is_moe(layer)

    def layer_counts(self) -> dict[tuple[bool, LayerAttention], int]:
        """How many layers there are of each kind, keyed (MoE MLP, attention): an MoE model's first
        ``first_dense_layers`` layers are dense and then every ``moe_every``-th is MoE, and the attention pattern
        runs over all layers from layer 0. Both repeat with period P = lcm(pattern, moe_every) from layer 0, so a
        model of 2**14 layers is counted by one period, the whole periods and the rest (no walk over them all)."""
        period = math.lcm(len(self.layer_pattern or [None]), self.moe.moe_every if self.moe else 1)
        first = self.moe.first_dense_layers if self.moe else 0
        counts: dict[tuple[bool, LayerAttention], int] = {}

        def add(layers: range, times: int = 1) -> None:
            for i in layers:
                kind = (self.layer_is_moe(i), self.layer_attention(i))
                counts[kind] = counts.get(kind, 0) + times

        add(range(min(first, self.num_layers)))  # the first dense layers, one by one (DeepSeek: 1 to 3)
        start = min(first, self.num_layers)
        periods, rest = divmod(self.num_layers - start, period)
        add(range(start, start + period), periods)
        add(range(start, start + rest))
        return {kind: n for kind, n in counts.items() if n}

    def attention_layers(self, kind: LayerAttention) -> int:
        """Layers whose attention is of ``kind``."""
        return sum(n for (_, attention), n in self.layer_counts().items() if attention == kind)

    @property
    def mlp_apart(self) -> bool:
        """Whether the MLP is a layer of its own (``mlp`` layers in the pattern) and the mixers' layers have none."""
        return "mlp" in (self.layer_pattern or [])

    def layer_has_mlp(self, kind: LayerAttention) -> bool:
        """Whether a layer of ``kind`` has an MLP (and, but for ``mlp`` layers, a mixer before it)."""
        return kind == "mlp" or not self.mlp_apart

    @property
    def recurrent(self) -> bool:
        """Whether some layers keep a fixed state per sequence (Gated DeltaNet or Mamba-2) in place of a cache."""
        return self.linear_attention is not None or self.mamba is not None

    @property
    def sliding_layers(self) -> int:
        """Layers that attend through the sliding window."""
        return self.attention_layers("sliding")

    @property
    def attention_affine_in_context(self) -> bool:
        """Whether every attention op's FLOPs and bytes of a decode step are affine in the cached positions
        (scores and K/V reads a + b·cached), as a serving step model may interpolate them: not with a sliding
        window (min(context, W)), in chunks (context mod C) nor sparse (min(context, top-k))."""
        return self.sliding_window is None and self.attention_chunk_size is None and self.sparse_attention is None

    @property
    def attention_span(self) -> int | None:
        """The most positions a decode's attention reads a layer, past which its parts grow no more (or grow
        affinely, the sparse indexer's): the sliding window, or sparse attention's top-k; None: all of them."""
        if self.sparse_attention is not None:
            return self.sparse_attention.index_topk
        return self.sliding_window

    @property
    def rotary(self) -> int:
        """The dimensions of each head RoPE rotates: ``rotary_dim``, or all of ``head_dim``."""
        return self.rotary_dim or self.head_dim

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def dense_layers(self) -> int:
        """Layers with the dense MLP: all of them (the ``mlp`` layers where the MLP is apart), or those of an MoE
        model without experts (``MoE.is_moe``)."""
        return (self.attention_layers("mlp") if self.mlp_apart else self.num_layers) - self.moe_layers

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is the mixture of experts."""
        return sum(n for (moe, _), n in self.layer_counts().items() if moe)

    def mlp_parameters(self, width: int) -> int:
        """One MLP of ``width`` (a dense MLP, an expert, the shared experts together): gate, up and down, 3·H·I
        (a plain MLP: up and down, 2·H·I), and with ``mlp_bias`` one bias per output (2·I + H; plain I + H)."""
        h = self.hidden_size
        gated = self.mlp in GATED_MLPS
        weights = (3 if gated else 2) * h * width
        return weights + ((2 if gated else 1) * width + h if self.mlp_bias else 0)

    @property
    def norm_parameters(self) -> int:
        """One norm over H: its gain (RMSNorm), or gain and bias (LayerNorm)."""
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def _parameters(self, experts: int) -> int:
        """Weights with ``experts`` routed experts in each MoE layer: per layer Q, K, V, O, two norms (four with
        ``post_norms``), and the two per-head gains of ``qk_norm``, the biases of ``qkv_bias`` and ``o_bias``, one
        sink per head with ``attention_sinks``; per dense layer the MLP (:meth:`mlp_parameters`); per MoE layer
        the router's H×E gate (and E biases), ``experts`` expert MLPs and the shared experts' MLP; embedding,
        final norm, and the LM head unless tied to the embedding."""
        h = self.hidden_size
        if self.mla is not None:  # MLA's matrices and its two latent norms (MLA.parameters) in place of Q, K, V, O
            attention = self.mla.parameters(h, self.num_heads)
            if self.sparse_attention is not None and self.mla.q_lora_rank is not None:  # the indexer's weights
                attention += self.sparse_attention.parameters(h, self.mla.q_lora_rank)
        else:  # attn_output_gate: q_proj gives the gate too, h·d more outputs
            attention = h * ((2 if self.attn_output_gate else 1) * self.q_dim + 2 * self.kv_dim) + self.q_dim * h
        norms = (4 if self.post_norms else 1 if self.mlp_apart else 2) * self.norm_parameters
        if self.qk_norm:  # a gain per element of Q and K (per layer), or of one head of each
            attention += self.q_dim + self.kv_dim if self.qk_norm_per_layer else 2 * self.head_dim
        if self.qkv_bias:
            attention += self.q_dim + 2 * self.kv_dim  # one bias per output of Q, K and V
        if self.o_bias:
            attention += h
        if self.attention_sinks:
            attention += self.num_heads  # one learned logit per head
        linear = self.attention_layers("linear")  # Gated DeltaNet's weights in place of the attention's
        mamba = self.attention_layers("mamba")  # and Mamba-2's
        total = (self.num_layers * norms + sum(map(self.attention_layers, KV_ATTENTIONS)) * attention
                 + (linear * self.linear_attention.parameters(h) if self.linear_attention else 0)
                 + (mamba * self.mamba.parameters(h) if self.mamba else 0)
                 + self.dense_layers * self.mlp_parameters(self.intermediate_size))
        if self.moe is not None:
            e = self.moe
            router = h * e.num_experts + (e.num_experts if e.router_bias else 0)
            shared = self.mlp_parameters(e.shared_width) + (h if e.shared_expert_gate else 0) if e.shared_width else 0
            total += self.moe_layers * (router + experts * self.mlp_parameters(e.expert_intermediate_size) + shared)
        head = 0 if self.tie_embeddings else self.vocab_size * h
        return total + self.vocab_size * h + self.norm_parameters + head

    def parameter_count(self) -> int:
        """Weights of the whole model, every expert included: what the GPU holds."""
        return self._parameters(self.moe.num_experts if self.moe else 0)

    def active_parameter_count(self) -> int:
        """Weights one token uses: every routed expert but its top-k left out, the embedding table, LM head and
        router included (the convention of the published "active" counts: Mixtral 8x7B's 12.9 B is 12.88 B
        so counted). A dense model's are all of them."""
        return self._parameters(self.moe.experts_per_token if self.moe else 0)
