"""A model's multi-head latent attention (DeepSeek-V2/V3, Kimi K2): the low-rank projections and the latent the
KV cache holds. ``engine/count/mla.py`` counts it."""

from __future__ import annotations

from .load import Strict
from .sizes import HeadDim, LatentRank


class MLA(Strict):
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2; DeepSeek-V2 paper, arXiv 2405.04434, section 2.1).

    Q: ``q_a_proj`` H → ``q_lora_rank``, its RMSNorm, ``q_b_proj`` → h·(d_nope + d_rope); or, with no
    ``q_lora_rank`` (DeepSeek-V2-Lite), one ``q_proj`` H → h·(d_nope + d_rope). K and V: ``kv_a_proj_with_mqa``
    H → ``kv_lora_rank`` + d_rope (the latent c_kv and one RoPE key shared by every head), an RMSNorm over the
    latent, and ``kv_b_proj`` kv_lora_rank → h·(d_nope + d_v) (each head's K_nope and V); ``o_proj``
    h·d_v → H. The KV cache holds the normed latent and the rotated shared key, ``kv_lora_rank + qk_rope_head_dim``
    values per token and layer for all heads together (:attr:`latent_dim`).
    """

    q_lora_rank: LatentRank | None = None  # None: Q is one full-rank projection
    kv_lora_rank: LatentRank
    qk_nope_head_dim: HeadDim
    qk_rope_head_dim: HeadDim
    v_head_dim: HeadDim

    @property
    def latent_dim(self) -> int:
        """Values one token keeps in the cache per layer, shared by every head: c_kv and the RoPE key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def qk_head_dim(self) -> int:
        """A query's (and, expanded, a key's) width per head: the no-RoPE part and the RoPE part."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def matrices(self, hidden: int, heads: int) -> list[tuple[str, int, int]]:
        """The attention's weight matrices of one layer as (name, k, n), y = x·W with W k×n."""
        q_out = heads * self.qk_head_dim
        q = ([("q_a_proj", hidden, self.q_lora_rank), ("q_b_proj", self.q_lora_rank, q_out)]
             if self.q_lora_rank is not None else [("q_proj", hidden, q_out)])
        return [*q, ("kv_a_proj_with_mqa", hidden, self.latent_dim),
                ("kv_b_proj", self.kv_lora_rank, heads * (self.qk_nope_head_dim + self.v_head_dim)),
                ("o_proj", heads * self.v_head_dim, hidden)]

    def parameters(self, hidden: int, heads: int) -> int:
        """One layer's attention weights: its matrices and the gains of q_a_layernorm (q_lora_rank, where Q is
        low-rank) and kv_a_layernorm (kv_lora_rank); the block's two norms are the Model's."""
        gains = (self.q_lora_rank or 0) + self.kv_lora_rank
        return sum(k * n for _, k, n in self.matrices(hidden, heads)) + gains
