"""A recurrent layer's sizes: Gated DeltaNet's linear attention (Qwen3-Next's ``linear_attention`` layers).

A recurrent layer keeps, per sequence, a state of fixed size in place of a KV cache that grows with the context:
what a decode step reads and writes there is the same at position 100 and at position 100,000. The layer's ops and
their counts are ``engine.count.recurrent``'s.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator
from typing_extensions import Self

from .load import Strict, invalid
from .sizes import HeadDim, Heads

# A causal depthwise convolution's kernel: Qwen3-Next's linear_conv_kernel_dim and Mamba's conv_kernel are 4.
ConvKernel = Annotated[int, Field(ge=1, le=64)]


class GatedDeltaNet(Strict):
    """Gated DeltaNet (Yang, Kautz, Hatamizadeh, arXiv 2412.06464; transformers' Qwen3NextGatedDeltaNet): per
    token, in_proj_qkvz gives q, k (``num_key_heads`` × ``key_head_dim`` each), v and the output gate z
    (``num_value_heads`` × ``value_head_dim`` each), in_proj_ba the per-value-head β and decay a; q, k and v go
    through a causal depthwise conv of ``conv_kernel`` taps with SiLU; each value head keeps a state S of
    key_head_dim × value_head_dim (a key head serves num_value_heads / num_key_heads value heads), decayed and
    updated by the delta rule and read by q; an RMSNorm over each value head gated by SiLU(z); out_proj back to H."""

    num_key_heads: Heads
    num_value_heads: Heads
    key_head_dim: HeadDim
    value_head_dim: HeadDim
    conv_kernel: ConvKernel = 4

    @model_validator(mode="after")
    def _groups(self) -> Self:
        if self.num_value_heads % self.num_key_heads:
            raise invalid(f"num_value_heads ({self.num_value_heads}) must be a multiple of num_key_heads "
                          f"({self.num_key_heads}): each key head serves a group of value heads")
        return self

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """The channels the convolution runs over: q, k and v (2·key_dim + value_dim)."""
        return 2 * self.key_dim + self.value_dim

    @property
    def state_elements(self) -> int:
        """One sequence's recurrent state in one layer: num_value_heads × key_head_dim × value_head_dim."""
        return self.num_value_heads * self.key_head_dim * self.value_head_dim

    @property
    def conv_state_elements(self) -> int:
        """One sequence's convolution state in one layer: the last conv_kernel − 1 inputs of every channel."""
        return (self.conv_kernel - 1) * self.conv_channels

    def parameters(self, hidden: int) -> int:
        """One layer's weights: in_proj_qkvz H×(2·key_dim + 2·value_dim), in_proj_ba H×2·num_value_heads, the
        conv's channels × kernel (no bias), dt_bias and A_log (one each per value head), the gated norm's gain
        (value_head_dim, shared by the heads) and out_proj value_dim×H."""
        in_proj = hidden * (2 * self.key_dim + 2 * self.value_dim) + hidden * 2 * self.num_value_heads
        conv = self.conv_channels * self.conv_kernel
        return in_proj + conv + 2 * self.num_value_heads + self.value_head_dim + self.value_dim * hidden
