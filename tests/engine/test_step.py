"""A step made of groups of sequences: presets give decode's and prefill's numbers to the bit, and a mixed step
(decodes beside a prefill chunk) is counted group by group, each figure derived by hand below."""

from __future__ import annotations

import pytest

from rooflinectl import api
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_step, resolve_workload, step_scenario
from rooflinectl.specs.step import Seqs, preset_phase

H100 = load_gpu("h100")


@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b", "deepseek-v3", "gemma-3-27b", "gpt-oss-20b"])
@pytest.mark.parametrize(("seqs", "phase", "sizes"), [
    ("8x1@2047", "decode", {"batch": 8, "context": 2048}),
    ("1x1", "decode", {"batch": 1, "context": 1}),
    ("4x300", "prefill", {"batch": 4, "seq_len": 300}),
])
def test_a_preset_step_is_the_phase_to_the_bit(model, seqs, phase, sizes):
    step = api.analyze_step(gpu="h100", model=model, seqs=[seqs]).to_dict()
    preset = api.analyze(phase, gpu="h100", model=model, **sizes).to_dict()
    assert step == preset


def test_the_presets_are_one_group_each():
    assert resolve_workload("decode", batch=3, context=10).seqs == (Seqs(count=3, new=1, cached=9),)
    assert resolve_workload("prefill", batch=2, seq_len=7).seqs == (Seqs(count=2, new=7, cached=0),)
    assert resolve_workload("attention", seq_len=7).seqs == (Seqs(count=1, new=7),)
    assert preset_phase((Seqs(count=4, new=1, cached=99),)) == "decode"
    assert preset_phase((Seqs(count=1, new=64),)) == "prefill"
    assert preset_phase((Seqs(count=1, new=64, cached=64),)) == "mixed"  # a second chunk of a prompt
    assert step_scenario((Seqs(count=16, new=1, cached=4095),)) == ("decode", {"batch": 16, "context": 4096})


def test_a_mixed_step_by_hand():
    # Llama 3 8B (H 4096, 32 heads of d 128, 8 KV heads: kv_dim 1024; I 14336; V 128,256; 32 layers), bf16, flash:
    # 16 sequences decode at context 4,096 (1 new after 4,095) while one prompt's 512-token chunk follows 1,024
    # already prefilled: N = 16 + 512 = 528 tokens, 17 sequences.
    w = resolve_step((Seqs(count=16, new=1, cached=4095), Seqs(count=1, new=512, cached=1024)))
    assert (w.phase, w.batch, w.tokens) == ("mixed", 17, 528)
    ops = {op.name: op for op in step_ops(w)}
    # The projections run over all 528 tokens: q_proj 2·528·4096·4096 FLOPs.
    assert ops["q_proj"].flops == 2 * 528 * 4096 * 4096 == 17_716_740_096
    # Attention, one kernel over both groups. Scores per head: a decode token sees its 4,096 positions; the
    # chunk's query i (1-based) sees 1,024 + i, 512·1,024 + 512·513/2 = 524,288 + 131,328 = 655,616. Over 32 heads
    # and 17 sequences: 32·(16·4,096 + 655,616) = 32·721,152 = 23,076,864 scores of 2·128 + 2·128 + 5 = 517 FLOPs.
    attention = ops["attention"]
    assert attention.flops == 23_076_864 * 517 == 11_930_738_688
    # Q in and O out, 528 × 4,096 × 2 B each; K and V of 16·4,096 + 1,536 = 67,072 positions × 1,024 × 2 B each.
    assert attention.kv_bytes == 2 * 67_072 * 1024 * 2 == 274_726_912
    assert attention.bytes == 2 * 528 * 4096 * 2 + 274_726_912 == 283_377_664
    # The KV write: 528 new tokens' K and V (2 × 1,024 values, bf16) read and written.
    assert ops["kv_write"].bytes == 2 * 528 * 2 * 1024 * 2
    # The LM head runs on each sequence's last token: 17 rows.
    assert ops["lm_head"].flops == 2 * 17 * 4096 * 128_256
    a = analyze(w, H100)
    # KV held at the end of the step: 67,072 positions × 32 layers × 2 (K, V) × 1,024 × 2 B.
    held = 67_072 * 32 * 2 * 1024 * 2
    weights = a.totals.memory_bytes - held
    assert weights == a.totals.weight_footprint_bytes
    # The largest batch at the mix's mean KV per sequence (held / 17).
    assert a.totals.max_batch == int((a.totals.capacity_bytes - weights) // (held / 17))


def test_weights_are_read_once_whatever_the_mix():
    # Every linear layer reads its weights once per step: the mixed step's linear weight bytes are those of its
    # decode group alone (the embedding gathers rows per token, so it is left out).
    mixed = resolve_step((Seqs(count=16, new=1, cached=4095), Seqs(count=1, new=512, cached=1024)))
    decode = resolve_workload("decode", batch=16, context=4096)

    def linear_weights(w):
        return sum(op.weight_bytes * op.count for op in step_ops(w) if op.kind == "linear")

    assert linear_weights(mixed) == linear_weights(decode) > 0


def test_mla_runs_decodes_absorbed_and_chunks_expanded():
    # DeepSeek-V3 (h 128, r 512, d_r 64, d_n 128, d_v 128): the decode group takes q_absorb, the latent attention
    # and v_up over its 8 tokens; the chunk of 256 after 512 takes kv_b_proj over all 768 positions it attends to
    # (the cached latent is expanded too) and the expanded attention.
    w = resolve_step((Seqs(count=8, new=1, cached=2047), Seqs(count=1, new=256, cached=512)),
                         model="deepseek-v3")
    ops = {op.name: op for op in step_ops(w)}
    assert ops["q_absorb"].flops == 2 * 8 * 128 * 128 * 512
    assert ops["kv_b_proj"].flops == 2 * 768 * 512 * (128 * (128 + 128))
    # latent: 8 sequences × 128 heads × 2,048 scores of 2·576 + 2·512 + 5 FLOPs.
    assert ops["latent_attention"].flops == 8 * 128 * 2048 * (2 * 576 + 2 * 512 + 5)
    # expanded: 256·512 + 256·257/2 = 131,072 + 32,896 = 163,968 scores a head, 2·192 + 2·128 + 5 FLOPs each.
    assert ops["attention"].flops == 128 * 163_968 * (2 * 192 + 2 * 128 + 5)


def test_naive_mla_keeps_both_softmaxes_apart():
    w = resolve_step((Seqs(count=2, new=1, cached=99), Seqs(count=1, new=16)),
                         model="deepseek-v3", attention="naive")
    names = [op.name for op in step_ops(w)]
    assert "latent_softmax" in names and "softmax" in names and len(names) == len(set(names))


def test_a_sliding_model_counts_each_group_through_its_window():
    # Mistral 7B v0.1 (every layer sliding, W 4,096; 32 heads, d 128): a decode at context 8,192 reads 4,096
    # positions, a 100-token chunk after 8,000 reads min(8,100, 4,096 + 99) = 4,195.
    w = resolve_step((Seqs(count=1, new=1, cached=8191), Seqs(count=1, new=100, cached=8000)),
                         model="mistral-7b")
    local = {op.name: op for op in step_ops(w)}["attention_local"]
    assert local.kv_bytes == 2 * (4096 + 4195) * 1024 * 2
    # Scores: 4,096 for the decode; each chunk query sees the full window (positions past 4,096): 100 × 4,096.
    assert local.flops == 32 * (4096 + 100 * 4096) * 517


def test_groups_are_parsed_and_refused_in_one_line():
    assert Seqs.parse("16x1@4095") == Seqs(count=16, new=1, cached=4095)
    assert Seqs.parse("2x64") == Seqs(count=2, new=64, cached=0)
    assert Seqs(count=1, new=5, cached=3).text() == "1x5@3"
    for bad in ("16", "x1", "16x", "16x1@", "0x1", "-1x1", "axb", "16x1@-3", "１６x1", "16x1@٣", "1_6x1",
                "9" * 5000 + "x1"):
        with pytest.raises(UserError):
            Seqs.parse(bad)
    # A size out of range is named as the user wrote it, not by the class.
    with pytest.raises(UserError, match=r"^--seqs '0x1': field 'count': must be greater than 0$"):
        Seqs.parse("0x1")
    with pytest.raises(UserError, match=r"^Seqs: field 'new'"):
        Seqs(count=1, new=0)


def test_a_mixed_step_has_no_single_length():
    w = resolve_step((Seqs(count=2, new=1, cached=9), Seqs(count=1, new=8)))
    with pytest.raises(UserError, match="mixed step"):
        w.size("batch")
    with pytest.raises(ValueError, match="mixed step"):
        _ = w.kv_len


def test_a_group_past_the_models_positions_is_refused():
    with pytest.raises(UserError, match="max_position_embeddings"):
        resolve_step((Seqs(count=1, new=1, cached=10), Seqs(count=1, new=8, cached=131_072)))


def test_a_step_of_many_groups_names_the_first_few():
    # 2,000 groups spelt out made a title of 424 lines at 80 columns.
    from rooflinectl.specs.step import SHOWN_GROUPS, seqs_text

    seqs = tuple(Seqs(1, 1, i) for i in range(1, 2001))
    text = seqs_text(seqs)
    assert text.startswith("1×1 after 1 + 1×1 after 2 + ") and text.endswith(" + 1,994 more groups")
    assert text.count("×") == SHOWN_GROUPS == 6
    assert seqs_text(seqs[:6]) == " + ".join(f"1×1 after {i}" for i in range(1, 7))
