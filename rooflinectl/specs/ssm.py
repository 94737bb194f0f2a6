"""A state-space layer's sizes: Mamba-2 (Nemotron-H's ``mamba`` layers).

Like Gated DeltaNet (:mod:`specs.recurrent`), a Mamba-2 layer keeps a state of fixed size per sequence in place of a
KV cache: a decode step reads and writes the same bytes at position 100 and at position 100,000. The layer's ops and
their counts are ``engine.count.ssm``'s.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator
from typing_extensions import Self

from .load import Strict, invalid
from .recurrent import ConvKernel
from .sizes import HeadDim, Heads, Positions

# The SSM's state per head and channel (Mamba-2's d_state): Nemotron-H 8B's ssm_state_size is 128, 56B's 256.
StateSize = Annotated[int, Field(gt=0, le=2**14)]


class Mamba2(Strict):
    """Mamba-2's SSD layer (Dao and Gu, arXiv 2405.21060; transformers' NemotronHMamba2Mixer): per token, in_proj
    gives the gate z (I = ``num_heads`` × ``head_dim`` channels), x (I), B and C (``n_groups`` × ``state_size``
    each) and the step dt (one per head); x, B and C go through a causal depthwise conv of ``conv_kernel`` taps
    (with a bias where ``conv_bias``) and SiLU; each head keeps a state of head_dim × state_size, decayed by
    exp(dt·A) and fed dt·B⊗x, read out by C (the heads of a group share its B and C), plus D·x; an RMSNorm over
    each group's I/n_groups channels of y·SiLU(z); out_proj back to H. A step of several tokens runs the chunked
    (SSD) form over chunks of ``chunk_size`` positions."""

    num_heads: Heads
    head_dim: HeadDim
    state_size: StateSize
    n_groups: Heads
    conv_kernel: ConvKernel = 4
    conv_bias: bool = True
    chunk_size: Positions = 128

    @model_validator(mode="after")
    def _groups(self) -> Self:
        if self.num_heads % self.n_groups:
            raise invalid(f"num_heads ({self.num_heads}) must be a multiple of n_groups ({self.n_groups}): each "
                          f"group's B and C serve a group of heads")
        return self

    @property
    def inner(self) -> int:
        """The SSM's channels I: num_heads × head_dim (Mamba-2's d_inner, expand × H in the reference)."""
        return self.num_heads * self.head_dim

    @property
    def bc_dim(self) -> int:
        """B's (or C's) width per token: n_groups × state_size."""
        return self.n_groups * self.state_size

    @property
    def conv_channels(self) -> int:
        """The channels the convolution runs over: x, B and C (I + 2·n_groups·state_size)."""
        return self.inner + 2 * self.bc_dim

    @property
    def in_proj_width(self) -> int:
        """in_proj's outputs: z, x, B, C and dt (2·I + 2·n_groups·state_size + num_heads)."""
        return self.inner + self.conv_channels + self.num_heads

    @property
    def state_elements(self) -> int:
        """One sequence's SSM state in one layer: num_heads × head_dim × state_size."""
        return self.inner * self.state_size

    @property
    def conv_state_elements(self) -> int:
        """One sequence's convolution state in one layer: the last conv_kernel − 1 inputs of every channel."""
        return (self.conv_kernel - 1) * self.conv_channels

    def parameters(self, hidden: int) -> int:
        """One layer's weights: in_proj H×(2·I + 2·G·N + heads), the conv's channels × kernel (and a bias per
        channel), dt_bias, A_log and D (one each per head), the gated norm's gain (I) and out_proj I×H; no
        projection biases (Nemotron-H's use_bias false)."""
        conv = self.conv_channels * (self.conv_kernel + (1 if self.conv_bias else 0))
        return hidden * self.in_proj_width + conv + 3 * self.num_heads + self.inner + self.inner * hidden
