"""A model's DeepSeek Sparse Attention (DSA, DeepSeek-V3.2-Exp): the lightning indexer beside multi-head latent
attention, its weights and the key cache it keeps. ``engine/count/dsa.py`` counts it."""

from __future__ import annotations

from .load import Strict
from .sizes import HeadDim, Heads, Positions

# The indexer's keys are cached in fp8 (e4m3), one byte a value, with one fp32 scale per block of
# INDEX_SCALE_BLOCK values: DeepSeek-V3.2-Exp's inference/model.py (Indexer: k_cache float8_e4m3fn of
# index_head_dim and k_scale_cache float32 of index_head_dim // block_size, block_size 128), as vLLM's and
# SGLang's indexer caches hold it (128 + 4 = 132 bytes a token and layer for DeepSeek-V3.2-Exp).
INDEX_KEY_BYTES = 1
INDEX_SCALE_BLOCK = 128
INDEX_SCALE_BYTES = 4


class SparseAttention(Strict):
    """DeepSeek Sparse Attention (DeepSeek-AI 2025, "DeepSeek-V3.2-Exp: Boosting Long-Context Efficiency with
    DeepSeek Sparse Attention", section 2.1; transformers' ``DeepseekV32Indexer``), in every layer of an MLA model.

    The lightning indexer: ``wq_b`` q_lora_rank → h_I·d_I (the index queries, from MLA's normed Q latent),
    ``wk`` H → d_I (one index key a position, shared by every index head) with its LayerNorm, ``weights_proj``
    H → h_I (each index head's weight for its token); RoPE on the first qk_rope_head_dim of each. Each query scores
    every cached position, I(t, s) = Σ_j w(t, j) · ReLU(q(t, j) · k(s)), and MLA's attention then runs over the
    ``index_topk`` positions of highest score (all of them where fewer are cached).
    """

    index_n_heads: Heads  # h_I (config.json's index_n_heads)
    index_head_dim: HeadDim  # d_I (index_head_dim)
    index_topk: Positions  # k (index_topk): the positions each query's attention reads at most

    @property
    def key_bytes_per_token(self) -> int:
        """Bytes one token's index key holds in one layer's cache: d_I fp8 values and a scale per 128."""
        blocks = -(-self.index_head_dim // INDEX_SCALE_BLOCK)
        return self.index_head_dim * INDEX_KEY_BYTES + blocks * INDEX_SCALE_BYTES

    def matrices(self, hidden: int, q_lora_rank: int) -> list[tuple[str, int, int]]:
        """The indexer's weight matrices of one layer as (name, k, n), y = x·W with W k×n."""
        return [("index_wq_b", q_lora_rank, self.index_n_heads * self.index_head_dim),
                ("index_wk", hidden, self.index_head_dim),
                ("index_weights_proj", hidden, self.index_n_heads)]

    def parameters(self, hidden: int, q_lora_rank: int) -> int:
        """One layer's indexer weights: its matrices and k_norm's LayerNorm gain and bias (2·d_I). DeepSeek-V3.2-Exp:
        1,536·8,192 + 7,168·128 + 7,168·64 + 256 = 13,959,424 a layer."""
        return sum(k * n for _, k, n in self.matrices(hidden, q_lora_rank)) + 2 * self.index_head_dim
