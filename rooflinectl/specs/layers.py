"""The kinds a model's layers are made of: its MLP's, its norm's, and the mixer each entry of ``layer_pattern``
names (which of them hold a KV cache)."""

from __future__ import annotations

from typing import Literal, get_args

# The MLP's kinds (engine/count/op.py states each activation's FLOPs per element beside its constant):
#   gated_silu       down(SiLU(gate(x)) · up(x)): Llama, Mistral, Qwen, Phi-3
#   gated_gelu_tanh  down(GELU_tanh(gate(x)) · up(x)): Gemma (hidden_activation gelu_pytorch_tanh)
#   gelu_tanh        down(GELU_tanh(up(x))): the plain two-matrix MLP (GPT-2's gelu_new)
#   clamped_swiglu   down((clamp(up, ±7) + 1) · g·σ(1.702·g)), g = min(gate, 7): gpt-oss's experts
#   relu2            down(ReLU(up(x))²): the plain two-matrix MLP with squared ReLU (Nemotron-H)
MlpKind = Literal["gated_silu", "gated_gelu_tanh", "gelu_tanh", "clamped_swiglu", "relu2"]
MLP_KINDS: tuple[MlpKind, ...] = get_args(MlpKind)
GATED_MLPS: tuple[MlpKind, ...] = ("gated_silu", "gated_gelu_tanh", "clamped_swiglu")
# RMSNorm (a gain), or LayerNorm (a gain and a bias).
NormKind = Literal["rmsnorm", "layernorm"]
# A layer's attention: over every position, over the last sliding_window positions, over the positions of
# its own attention_chunk_size chunk (Llama 4's chunked local attention), or none: a recurrent layer with a
# fixed state per sequence in its place (``linear``: Gated DeltaNet, ``Model.linear_attention``; ``mamba``: Mamba-2,
# ``Model.mamba``), or ``mlp``: a layer of an MLP alone. A pattern with ``mlp`` layers makes every layer one branch
# (Nemotron-H's blocks: a norm, one mixer or the MLP, the residual add): its other layers have no MLP.
LayerAttention = Literal["full", "sliding", "chunked", "linear", "mamba", "mlp"]
LAYER_ATTENTIONS: tuple[LayerAttention, ...] = get_args(LayerAttention)
# The kinds that attend over cached positions and hold a KV cache; the others hold a recurrent state.
KV_ATTENTIONS: tuple[LayerAttention, ...] = ("full", "sliding", "chunked")
