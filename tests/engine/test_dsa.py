"""DeepSeek Sparse Attention (DeepSeek-V3.2-Exp): the lightning indexer's ops and the attention over the top
2,048 positions, each number derived by hand from the published sizes (config.json: hidden 7,168, 61 layers,
128 heads, kv_lora_rank 512, qk_rope_head_dim 64, q_lora_rank 1,536; index_n_heads 64, index_head_dim 128,
index_topk 2,048)."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.footprint import kv_cache_bytes_per_token
from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_step, resolve_workload
from rooflinectl.specs.step import Seqs

MODEL = "deepseek-v3.2-exp"


def _ops(phase: str, **sizes):
    return {op.name: op for op in step_ops(resolve_workload(phase, model=MODEL, **sizes))}


def test_decode_attention_is_flat_past_the_top_k_while_the_indexer_grows():
    """Batch 4, bf16 latent cache. Attention at 2,048 and at 131,072 positions reads the same 4 × 2,048 rows:
    Q 4·128·576·2 = 589,824 B, rows 8,192 × (576·2 + 4 for the int32 id) = 9,469,952 B, O 4·128·512·2 = 524,288 B:
    10,584,064 B; 128 heads × 8,192 rows × (2·576 + 2·512 + 5) = 2,286,944,256 FLOPs. The indexer's key cache
    grows with the context: 4 × Lk × 132 B, and its FLOPs 4·Lk·64·(2·128 + 3)."""
    short, long = _ops("decode", batch=4, context=2048), _ops("decode", batch=4, context=131072)
    for ops in (short, long):
        core = ops["sparse_latent_attention"]
        assert (core.bytes, core.kv_bytes, core.flops) == (10_584_064, 9_469_952, 2_286_944_256)
        assert core.count == 61 and core.attention is not None and core.attention.topk == 2048
    for lk, ops in ((2048, short), (131072, long)):
        score = ops["index_score"]
        assert score.kv_bytes == 4 * lk * 132
        # bf16 queries (4·64·128·2) and fp32 weights (4·64·4), the cache, one fp32 score a position.
        assert score.bytes == 4 * 64 * 128 * 2 + 4 * 64 * 4 + 4 * lk * 132 + 4 * lk * 4
        assert score.flops == 4 * lk * 64 * (2 * 128 + 3)
        topk = ops["index_topk"]
        assert topk.bytes == 4 * lk * 4 + 4 * min(lk, 2048) * 4
    assert long["index_score"].kv_bytes == 64 * short["index_score"].kv_bytes


def test_below_the_top_k_the_sparse_kernel_reads_what_dense_mla_reads_and_the_ids():
    """At 1,000 positions every one is selected: the latent rows MLA's dense decode reads (deepseek-v3's
    latent_attention), plus their int32 ids."""
    dense = {op.name: op for op in step_ops(resolve_workload("decode", model="deepseek-v3", batch=2, context=1000))}
    sparse = _ops("decode", batch=2, context=1000)
    assert sparse["sparse_latent_attention"].kv_bytes == dense["latent_attention"].kv_bytes + 2 * 1000 * 4
    assert sparse["sparse_latent_attention"].flops == dense["latent_attention"].flops


def test_a_prompt_scores_what_it_sees_and_attends_to_at_most_the_top_k_a_query():
    """A prefill of 4,096: the indexer scores 4,096·4,097/2 = 8,390,656 causal pairs; attention reads
    Σ min(i, 2,048) for i = 1 … 4,096 = 2,048·2,049/2 + 2,048·2,048 = 6,292,480 rows. No kv_b_proj: every
    phase runs the absorbed form."""
    ops = _ops("prefill", batch=1, seq_len=4096)
    assert ops["index_score"].flops == 8_390_656 * 64 * (2 * 128 + 3)
    core = ops["sparse_latent_attention"]
    assert core.flops == 128 * 6_292_480 * (2 * 576 + 2 * 512 + 5)
    assert "kv_b_proj" not in ops and "q_absorb" in ops and "v_up" in ops


def test_a_mixed_step_runs_one_indexer_kernel_over_its_groups():
    w = resolve_step((Seqs(count=2, new=1, cached=9999), Seqs(count=1, new=16, cached=100)), model=MODEL)
    ops = {op.name: op for op in step_ops(w)}
    # Decodes: 2 × 10,000 pairs; the chunk: 16·100 + 16·17/2 = 1,736.
    assert ops["index_score"].flops == (2 * 10_000 + 1_736) * 64 * (2 * 128 + 3)
    # Decodes read 2,048 rows each; the chunk's queries see 101 … 116 positions, all selected: 1,736.
    assert ops["sparse_latent_attention"].kv_bytes == (2 * 2048 + 1_736) * (576 * 2 + 4)


def test_the_indexer_cache_sits_beside_the_latent_cache():
    """A token holds 61 × (576 bf16 latent values + 128 fp8 index values and one fp32 scale) = 61 × 1,284 =
    78,324 bytes; with an fp8 latent 61 × (576 + 132) = 43,188. The indexer's keys stay fp8 whatever kv_dtype."""
    m = load_model(MODEL)
    assert kv_cache_bytes_per_token(m) == 78_324
    assert kv_cache_bytes_per_token(m, "fp8") == 43_188
    w = resolve_workload("decode", model=MODEL, batch=1, context=131072)
    assert kv_cache_bytes_per_sequence(w) == 131072 * 78_324


def test_the_parameter_count_is_deepseek_v3s_and_the_indexers():
    """DeepSeek-V3's 671,026,404,352 (transformers' DeepseekV3ForCausalLM on the meta device) and 61 indexers of
    1,536·8,192 + 7,168·128 + 7,168·64 + 2·128 = 13,959,424: 671,877,929,216, transformers 5.25's
    DeepseekV32ForCausalLM of the default (published) config exactly, and 0.13% above the 671 B DeepSeek states
    (the DeepSeek-V3.2-Exp model card and the V3 technical report, multi-token-prediction module excluded)."""
    m = load_model(MODEL)
    assert m.parameter_count() == load_model("deepseek-v3").parameter_count() + 61 * 13_959_424 == 671_877_929_216
    assert abs(m.parameter_count() / 671e9 - 1) < 0.01


def test_naive_attention_is_refused_in_one_line():
    with pytest.raises(UserError, match="sparse attention runs as one kernel"):
        resolve_workload("decode", model=MODEL, batch=1, context=4096, attention="naive")
