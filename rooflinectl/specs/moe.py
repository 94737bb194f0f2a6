"""A model's mixture of experts (Mixtral, Qwen3-MoE, gpt-oss; DeepSeek's keys where they mean the same): the
routed and shared experts that replace the dense MLP, and the router that picks them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer, model_validator
from typing_extensions import Self

from .load import Strict, invalid, leave_out_unused
from .sizes import DenseLayers, Experts, Layers, MlpWidth, SharedExperts


class MoE(Strict):
    """The mixture-of-experts MLP of a model (Mixtral, Qwen3-MoE; DeepSeek's keys where they mean the same).

    Each MoE layer replaces the dense MLP with a router (a linear H → E gate, softmax, top-k), ``num_experts``
    routed experts of which each token uses ``experts_per_token`` (top-k), each a gated SiLU MLP of width
    ``expert_intermediate_size``, and ``num_shared_experts`` experts every token uses (DeepSeek, Qwen2-MoE: of
    width ``shared_expert_intermediate_size``, the routed width when not given). The first
    ``first_dense_layers`` layers (DeepSeek's ``first_k_dense_replace``) keep the dense MLP of the model's
    ``intermediate_size``. ``moe_every`` n: of the layers after those, only every n-th is MoE, layers n − 1,
    2n − 1, … (Llama 4 Maverick's ``interleave_moe_layer_step`` 2: layers 1, 3, 5, …, as Llama4TextConfig's
    ``moe_layers`` = range(n − 1, L, n)); the others keep the dense MLP.
    """

    num_experts: Experts
    experts_per_token: Experts
    expert_intermediate_size: MlpWidth
    num_shared_experts: SharedExperts = 0
    shared_expert_intermediate_size: MlpWidth | None = None
    first_dense_layers: DenseLayers = 0
    moe_every: Layers = 1
    router_bias: bool = False  # a bias on each of the E logits (gpt-oss)
    # Qwen2-MoE's and Qwen3-Next's shared_expert_gate: an H → 1 linear whose sigmoid scales the shared experts'
    # output, per token.
    shared_expert_gate: bool = False
    # Which logits the router's softmax runs over: all E and then the top k picked from the probabilities
    # (Mixtral's and Qwen-MoE's MixtralSparseMoeBlock/Qwen2MoeSparseMoeBlock in transformers), or the k picked
    # logits alone, top-k first (gpt-oss's GptOssTopKRouter). DeepSeek-V3's sigmoid scores, 4 FLOPs and a bias
    # add per logit, count as a softmax over all E (5 per logit).
    router_softmax: Literal["experts", "top_k"] = "experts"

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return leave_out_unused(data, {"router_bias": False, "router_softmax": "experts", "moe_every": 1,
                                       "shared_expert_gate": False})

    @model_validator(mode="after")
    def _top_k(self) -> Self:
        if self.experts_per_token > self.num_experts:
            raise invalid(f"experts_per_token ({self.experts_per_token}) exceeds num_experts ({self.num_experts}): "
                           f"a token picks its top-k among the layer's experts")
        if self.shared_expert_intermediate_size is not None and self.num_shared_experts == 0:
            raise invalid("shared_expert_intermediate_size is given but num_shared_experts is 0")
        if self.shared_expert_gate and self.num_shared_experts == 0:
            raise invalid("shared_expert_gate scales the shared experts' output, but num_shared_experts is 0")
        return self

    def is_moe(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has the experts: past the first dense layers, every ``moe_every``-th."""
        return layer >= self.first_dense_layers and (layer + 1) % self.moe_every == 0

    @property
    def shared_width(self) -> int:
        """The shared experts together: n_s experts of width I_s are one gated MLP of width n_s·I_s (the same
        weights and FLOPs; DeepSeek's code builds them so)."""
        return self.num_shared_experts * (self.shared_expert_intermediate_size or self.expert_intermediate_size)
