"""Tensor parallelism (engine/parallel/): per-GPU weights, KV cache and collective sizes derived by hand, TP 1
exactly today's step, the decode series of a TP request equal to analyze at each context, and bad layouts
refused in one line.

Llama-3-70B (meta-llama/Meta-Llama-3-70B config.json): H 8192, L 80, h 64, g 8, d 128, I 28672, V 128256, bf16
(2 bytes). A decode step of batch B 32 at context 4096: N = 32 tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import assert_one_line_error, cli
from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence, weight_footprint_bytes
from rooflinectl.engine.generate import Request, generate
from rooflinectl.engine.parallel import Layout, all_reduce_bytes, padded_vocab, per_gpu_model
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.load import validate
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload

H, L, HEADS, G, D, I, V = 8192, 80, 64, 8, 128, 28672, 128256
B, CTX = 32, 4096


def _w(model: str = "llama-3-70b", **kw):
    return resolve_workload("decode", model=model, batch=kw.pop("batch", B), context=kw.pop("context", CTX), **kw)


def _op(a, name):
    return a.placement(name).op


@pytest.mark.parametrize("t", [4, 8])
def test_llama_3_70b_weights_per_gpu(t):
    # Per layer and GPU: Q H×(h/t·d), K and V H×(g/t·d) each, O (h/t·d)×H, gate and up H×(I/t), down (I/t)×H, two
    # norm gains of H (replicated); once: embedding and LM head (V/t)×H each, the final norm's H.
    q, kv = HEADS // t * D, G // t * D
    layer = H * q + 2 * H * kv + q * H + 3 * H * (I // t) + 2 * H
    params = L * layer + 2 * (V // t) * H + H
    assert per_gpu_model(load_model("llama-3-70b"), t).parameter_count() == params
    a = analyze(_w(), load_gpu("h100"), layout=Layout(t))
    assert weight_footprint_bytes(a.workload) == params * 2
    # TP 4: 17,639,415,808 parameters, 35.3 GB a GPU; TP 8: 8,820,367,360, 17.6 GB.
    assert params * 2 == {4: 35_278_831_616, 8: 17_640_734_720}[t]


@pytest.mark.parametrize("t, kv_heads", [(4, 2), (8, 1), (16, 1)])
def test_llama_3_70b_kv_cache_per_gpu(t, kv_heads):
    # g/t KV heads a GPU; at t = 16 > g = 8 each GPU holds one KV head (each replicated on 2 GPUs), so the cache
    # per GPU stops shrinking at t = g. Per sequence: L × 2 (K, V) × kv heads × d × 2 bytes × 4096 positions.
    a = analyze(_w(), load_gpu("h100"), layout=Layout(t))
    per_seq = L * 2 * kv_heads * D * 2 * CTX
    assert kv_cache_bytes_per_sequence(a.workload) == per_seq
    assert a.totals.memory_bytes == weight_footprint_bytes(a.workload) + B * per_seq
    if t > G:
        assert any("KV heads replicated" in n and "each GPU holds one" in n for n in a.layout_notes)


@pytest.mark.parametrize("t, per_layer", [(4, 786_432), (8, 917_504)])
def test_llama_3_70b_all_reduce_bytes(t, per_layer):
    # Ring all-reduce of the N×H activations, B·H·2 = 32·8192·2 = 524,288 bytes: each GPU sends 2(t−1)/t of it:
    # TP 4: 2·3/4·524,288 = 786,432; TP 8: 2·7/8·524,288 = 917,504. Two a layer (after o_proj, after down_proj).
    assert 2 * (t - 1) * B * H * 2 // t == per_layer
    a = analyze(_w(), load_gpu("h100"), layout=Layout(t))
    for name in ("attn_all_reduce", "mlp_all_reduce"):
        op = _op(a, name)
        assert (op.kind, op.bytes, op.count, op.flops) == ("communication", per_layer, L, 0)
    assert _op(a, "embed_all_reduce").bytes == per_layer and _op(a, "embed_all_reduce").count == 1
    # Logits all-gather: B×V×2 = 8,208,384 bytes in all, each GPU sends (t−1)/t of it.
    assert _op(a, "logits_all_gather").bytes == (t - 1) * B * V * 2 // t
    # Time = latency + bytes / the interconnect's bandwidth one way: H100 SXM NVLink 900 GB/s both ways, 450 each.
    p = a.placement("attn_all_reduce")
    assert p.time_s == 10e-6 + per_layer / 450e9
    assert a.totals.communication_bytes == 2 * L * per_layer + per_layer + (t - 1) * B * V * 2 // t
    assert a.totals.bytes == sum(q.op.bytes * q.op.count for q in a.placements if q.op.kind != "communication")
    # The collectives' time: 2L all-reduces of per_layer bytes, the embedding's, and the logits' all-gather, each at
    # 10 µs + its bytes at 450 GB/s; the step's tokens shared among the t GPUs.
    logits = (t - 1) * B * V * 2 // t
    comm = (2 * L + 1) * (10e-6 + per_layer / 450e9) + 10e-6 + logits / 450e9
    assert a.totals.communication_time_s == pytest.approx(comm, rel=1e-12)
    assert a.totals.communication_share == pytest.approx(comm / a.totals.time_s, rel=1e-12)
    assert (a.totals.gpus, a.totals.tokens_per_s_per_gpu) == (t, a.totals.tokens_per_s / t)


def test_all_reduce_factor():
    assert all_reduce_bytes(1000, 2) == 1000  # 2·1/2
    assert all_reduce_bytes(1000, 8) == 1750  # 2·7/8


def test_tp_1_is_todays_step():
    g = load_gpu("h100")
    for w in (_w(), resolve_workload("prefill", model="mixtral-8x7b", batch=2, seq_len=512),
              _w("deepseek-v3", batch=4)):
        base, one = analyze(w, g), analyze(w, g, layout=Layout(1))
        assert one.placements == base.placements and one.totals == base.totals and one.workload == w


def test_largest_batch_per_gpu():
    # TP 4 on an 80 GiB H100: (80 GiB − 35,278,831,616 B of weights) / (32,768 positions' … per sequence):
    # per sequence at 4096 positions = 80 × 2 × 2 × 128 × 2 × 4096 = 335,544,320 bytes.
    a = analyze(_w(), load_gpu("h100"), layout=Layout(4))
    assert a.totals.max_batch == (80 * 2**30 - 35_278_831_616) // 335_544_320 == 150


def test_moe_and_mla_under_tp():
    g = load_gpu("h200")
    # Mixtral 8x7B: every expert on every GPU, each one's width 14336 split over 8 (1792), the router replicated.
    m = per_gpu_model(load_model("mixtral-8x7b"), 8)
    assert m.moe is not None and m.moe.expert_intermediate_size == 14336 // 8 and m.moe.num_experts == 8
    # DeepSeek-V3: 128 heads → 16 a GPU; the latent cache (576 values a layer and token) replicated on every GPU.
    w = _w("deepseek-v3", batch=4)
    one, eight = analyze(w, g), analyze(w, g, layout=Layout(8))
    assert eight.workload.model.num_heads == 16
    assert kv_cache_bytes_per_sequence(eight.workload) == kv_cache_bytes_per_sequence(one.workload) == 61 * 576 * 2 * CTX
    assert any("latent KV cache is replicated" in n for n in eight.layout_notes)


def test_generate_under_tp_sums_analyze():
    # The decode series (affine path, with the collectives' latency) equals analyze of each step to the bit.
    g = load_gpu("h100")
    base = resolve_workload("prefill", model="llama-3-70b", batch=1, seq_len=1)
    layout = Layout(4)
    gen = generate(base, Request(128, 9, 4), lambda w: analyze(w, g, layout=layout), 8 * 2**30, gpus=4)
    assert gen.decode is not None and not gen.decode.analysed_every_step
    for i, c in enumerate(range(129, 137)):
        assert gen.decode.step_times_s[i] == analyze(_w(batch=4, context=c), g, layout=layout).totals.time_s
    assert gen.output_tokens_per_s_per_gpu == 4 * 9 / gen.e2e_s / 4
    # Memory per GPU: the per-GPU weights, the per-GPU cache of 4 sequences at 136 positions.
    assert gen.memory.weight_bytes == 35_278_831_616
    assert gen.memory.kv_cache_bytes == 4 * 80 * 2 * 2 * 128 * 2 * 136


def test_bad_layouts():
    with pytest.raises(UserError, match="64 attention heads, which 3 GPUs"):
        analyze(_w(), load_gpu("h100"), layout=Layout(3))
    assert_one_line_error(cli("analyze", "decode", "--model", "llama-3-70b", "--tp", "3"), "TP 3", "64")
    assert_one_line_error(cli("analyze", "decode", "--tp", "0"), "--tp 0")


def test_gpu_without_interconnect_refuses_tp(tmp_path: Path):
    spec = yaml.safe_load(Path("hardware/h100-sxm.yaml").read_text())
    del spec["interconnect"]
    spec["id"], spec["aliases"] = "h100-alone", []
    path = tmp_path / "h100-alone.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert cli("analyze", "decode", "--gpu", str(path)).exit_code == 0
    assert_one_line_error(cli("analyze", "decode", "--gpu", str(path), "--tp", "2"), "no interconnect", "--tp 2")
    assert_one_line_error(cli("analyze", "generate", "--gpu", str(path), "--tp", "2"), "no interconnect")
    png = tmp_path / "tp.png"
    assert_one_line_error(cli("plot", "decode", "--gpu", str(path), "--tp", "2", "-o", str(png)), "no interconnect")
    assert not png.exists()


def test_plot_takes_the_layout_and_refuses_a_bad_one(tmp_path: Path):
    png = tmp_path / "tp.png"
    r = cli("plot", "decode", "--gpu", "h100", "--model", "llama-3-70b", "--tp", "4", "-o", str(png), "--json")
    assert r.exit_code == 0, r.output
    roofs = {x["name"]: x["value"] for x in json.loads(r.stdout)["panels"][0]["roofs"]}
    assert roofs["interconnect"] == 450e9 and png.stat().st_size > 0
    assert_one_line_error(cli("plot", "decode", "--model", "llama-3-70b", "--tp", "3", "-o", str(png)), "TP 3")


def test_cli_tp_json():
    import json

    r = cli("analyze", "decode", "--model", "llama-3-70b", "--gpu", "h100", "--tp", "8", "--batch", "32",
            "--context", "4096", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["parallel"]["tp"] == 8 and data["parallel"]["interconnect_gbps"] == 450
    ops = {o["name"]: o for o in data["ops"]}
    ar = ops["attn_all_reduce"]
    # 2·7/8 of 32×8192×2 bytes, sent over NVLink: link bytes, no HBM bytes, bound by its link, in bf16.
    assert (ar["link_bytes"], ar["network_bytes"], ar["bytes"]) == (917_504, 0, 0) and ar["kind"] == "communication"
    assert (ar["bound"], ar["unit"], ar["dtype"]) == ("interconnect", "link", "bf16")
    assert data["parallel"]["network"]["crosses_scale_up"] is False


# Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1 config.json): H 4096, L 32, h 32, g 8, d 128, E 8 experts of width
# 14336, top-2, V 32000, untied. At EP 8 each GPU holds 1 expert a layer and serves ⌈B/8⌉ sequences.
MH, ML, MIE, MV = 4096, 32, 14336, 32000


def test_mixtral_ep_8_weights_per_gpu():
    expert = 3 * MH * MIE  # gate, up, down: 176,160,768
    attention = MH * MH + 2 * MH * 1024 + MH * MH  # q, k, v (8 KV heads of 128), o: 41,943,040
    layer_all = attention + 2 * MH + MH * 8 + 8 * expert  # + two norms, the router H×E
    total = ML * layer_all + 2 * MV * MH + MH
    assert total == load_model("mixtral-8x7b").parameter_count() == 46_702_792_704
    per_gpu = ML * (attention + 2 * MH + MH * 8 + 1 * expert) + 2 * MV * MH + MH  # 1 of 8 experts a layer
    a = analyze(_w("mixtral-8x7b", batch=64), load_gpu("h200"), layout=Layout(ep=8))
    assert a.totals.weight_footprint_bytes == per_gpu * 2 == 14_485_561_344


def test_mixtral_ep_8_step():
    g = load_gpu("h200")
    a = analyze(_w("mixtral-8x7b", batch=64), g, layout=Layout(ep=8))
    # Attention data-parallel: 64 / 8 = 8 sequences a GPU, each with its whole cache: 32 × 2 × 8 × 128 × 2 × 4096.
    assert a.workload.batch == 8
    assert kv_cache_bytes_per_sequence(a.workload) == 32 * 2 * 8 * 128 * 2 * CTX
    # All-to-all per MoE layer: the GPU's 8 tokens × top-2 copies × H × 2 bytes, 7/8 of them to other GPUs,
    # 8·2·4096·2·7/8 = 114,688 bytes each way.
    for name in ("dispatch_all_to_all", "combine_all_to_all"):
        op = _op(a, name)
        assert (op.kind, op.bytes, op.count) == ("communication", 8 * 2 * MH * 2 * 7 // 8, ML)
    assert _op(a, "dispatch_all_to_all").bytes == 114_688
    # Experts: the GPU's 8·2 = 16 pairs, FLOPs 2·16·H·I_e; weights of its 1 expert touched with probability
    # 1 − (3/4)^64 by the whole batch's 64 tokens (E·(1 − (1 − k/E)^N) / e = 1 − 0.75^64).
    gate = _op(a, "expert_gate_proj")
    share = 8 * (1 - (1 - 2 / 8) ** 64) / 8
    assert gate.flops == 2 * 16 * MH * MIE
    assert gate.weight_bytes == round(share * MH * MIE * 2)
    assert gate.bytes == 16 * MH * 2 + gate.weight_bytes + 16 * MIE * 2
    # No all-reduce: the attention is whole on every GPU.
    assert not any(p.name.endswith("all_reduce") for p in a.placements)
    # tokens/s of the model copy: 64 new tokens over the busiest GPU's step.
    assert a.totals.tokens_per_s == 64 / a.totals.time_s


def test_generate_under_ep():
    g = load_gpu("h200")
    base = resolve_workload("prefill", model="mixtral-8x7b", batch=1, seq_len=1)
    layout = Layout(ep=8)
    gen = generate(base, Request(256, 6, 60), lambda w: analyze(w, g, layout=layout), 8 * 2**30, gpus=8)
    assert gen.decode is not None
    for i, c in enumerate(range(257, 262)):
        assert gen.decode.step_times_s[i] == analyze(_w("mixtral-8x7b", batch=60, context=c), g,
                                                     layout=layout).totals.time_s
    # The busiest GPU serves ⌈60/8⌉ = 8 sequences: its cache at 261 positions.
    assert gen.memory.kv_cache_bytes == 8 * 32 * 2 * 8 * 128 * 2 * 261
    assert gen.memory.weight_bytes == 14_485_561_344
    assert gen.output_tokens_per_s_per_gpu == 60 * 6 / gen.e2e_s / 8


def test_bad_ep():
    assert_one_line_error(cli("analyze", "decode", "--model", "llama-3-8b", "--ep", "8"), "--ep 8", "dense")
    assert_one_line_error(cli("analyze", "decode", "--model", "mixtral-8x7b", "--ep", "3"), "8 experts")
    # EP under TP spreads the experts over the same GPUs: a different degree, or EP with stages, is refused.
    assert_one_line_error(cli("analyze", "decode", "--model", "mixtral-8x7b", "--ep", "2", "--tp", "4"),
                          "--tp 4 with --ep 2", "give --ep 4")
    assert_one_line_error(cli("analyze", "decode", "--model", "mixtral-8x7b", "--ep", "2", "--pp", "2"),
                          "--pp 2 with --ep 2")


def test_tp_with_ep_on_the_same_gpus_by_hand():
    """Issue 13's example, DeepSeek-V3 at --tp 8 --ep 8, batch 128, context 4096, bf16 (vLLM's
    --enable-expert-parallel under TP): the attention split as TP 8, 32 of the 256 whole experts a GPU.
    Every GPU holds all N = 128 tokens; the N·k = 1,024 pairs (top-8) spread over 8 GPUs: 128 a GPU.
      expert_gate_proj: 2 · 128 · 7168 · 2048 = 3,758,096,384 FLOPs; weights of the experts touched among its 32:
        256·(1 − (1 − 8/256)^128)/8 experts × 7168·2048·2 B, plus the 128 pairs' rows in (7168) and out (2048), bf16
      moe_combine: a multiply and an add a pair and element, 2·128·7168, plus the shared expert's add, 128·7168
      collectives: TP's all-reduces of N×H = 128·7168·2 B = 1,835,008 B, 2·7/8 of it sent: 3,211,264 B; no all-to-all
      weights a GPU: the TP 8 model with whole experts, less the 224 experts of each of 58 MoE layers it does not
        hold (3 matrices of 7168·2048, bf16, each)."""
    w = resolve_workload("decode", model="deepseek-v3", batch=128, context=4096)
    layout = Layout(tp=8, ep=8)
    assert layout.gpus == 8 and layout.label() == "TP 8 + EP 8" and not layout.dp_attention
    a = analyze(w, load_gpu("h200"), layout=layout)
    ops = {p.name: p.op for p in a.placements}
    touched = 256 * (1 - (1 - 8 / 256) ** 128) / 8
    gate = ops["expert_gate_proj"]
    assert gate.flops == 2 * 128 * 7168 * 2048
    assert gate.weight_bytes == round(touched * 7168 * 2048 * 2)
    assert gate.bytes == gate.weight_bytes + 128 * (7168 + 2048) * 2
    assert ops["moe_combine"].flops == 2 * 128 * 7168 + 128 * 7168
    assert ops["attn_all_reduce"].bytes == ops["mlp_all_reduce"].bytes == 2 * 7 * 128 * 7168 * 2 // 8 == 3_211_264
    assert not [name for name in ops if "all_to_all" in name]
    tp_only = analyze(w, load_gpu("h200"), layout=Layout(tp=8))  # experts sliced to width 256 on every GPU
    whole_experts = per_gpu_model(w.model, 8, whole_experts=True)
    held = weight_footprint_bytes(resolve_workload("decode", model=whole_experts, batch=128, context=4096))
    assert a.totals.weight_footprint_bytes == held - 58 * 224 * 3 * 7168 * 2048 * 2
    # The same weights in all as TP 8 alone (each GPU holds 1/8 of every expert there, 32 whole ones here).
    assert a.totals.weight_footprint_bytes == pytest.approx(tp_only.totals.weight_footprint_bytes, rel=1e-3)
    assert a.totals.max_batch == tp_only.totals.max_batch == 0  # 671 B in bf16: not on 8 × 141 GB


def test_a_batch_that_fits_nowhere():
    r = cli("analyze", "generate", "--gpu", "h100", "--model", "llama-3-70b", "--tp", "4", "--batch", "4096")
    assert_one_line_error(r, "does not fit", "--tp 4")


def test_llama_3_70b_pp_2():
    # Two stages of 40 layers. A full layer: Q and O 8192×8192, K and V 8192×1024, gate, up, down 3·8192·28672,
    # two norms: 855,654,400. The heavier stage (the last) adds the LM head 128,256×8192 and the final norm.
    layer = 2 * H * H + 2 * H * 1024 + 3 * H * I + 2 * H
    assert layer == 855_654_400
    held = (40 * layer + V * H + H) * 2
    g = load_gpu("h100")
    a = analyze(_w(), g, layout=Layout(pp=2))
    assert a.totals.weight_footprint_bytes == held == 70_553_714_688
    # KV: 40 layers × 2 × 8 KV heads × 128 × 2 bytes × 4096 positions a sequence.
    assert a.totals.kv_cache_bytes_per_sequence == 40 * 2 * 8 * D * 2 * CTX
    assert a.totals.memory_bytes == held + B * 40 * 2 * 8 * D * 2 * CTX
    # The step is the pass through both stages: every layer's ops, and one point-to-point send of N×H×2 bytes.
    one = analyze(_w(), g)
    send = a.placement("pp_send")
    assert (send.op.bytes, send.op.count) == (B * H * 2, 1)
    assert a.totals.time_s == pytest.approx(one.totals.time_s + send.total_time_s, rel=1e-12)
    assert any("bubble is (p−1)/(M+p−1)" in n and "33% at M = 2" in n for n in a.layout_notes)
    # With TP 4: 8 GPUs, the stage's layers a quarter each.
    both = analyze(_w(), g, layout=Layout(tp=4, pp=2))
    assert both.layout.gpus == 8
    assert both.totals.kv_cache_bytes_per_sequence == 40 * 2 * 2 * D * 2 * CTX


def test_bad_pp():
    assert_one_line_error(cli("analyze", "decode", "--model", "llama-3-70b", "--pp", "3"), "80 layers")
    assert_one_line_error(cli("analyze", "decode", "--model", "deepseek-v3", "--pp", "2"), "--pp 2")
    assert_one_line_error(cli("analyze", "decode", "--model", "mixtral-8x7b", "--pp", "2", "--ep", "2"), "--ep 2")


def test_compare_and_pareto_rows_per_degree(tmp_path: Path):
    import json

    # The static batch (a simulated one is checked against rl.generate in tests/serving/test_batch.py).
    r = cli("compare", "--gpu", "h100", "--model", "llama-3-70b", "--tp", "4", "--tp", "8", "--batch", "64",
            "--stack", "roofline", "--no-chunked-prefill", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["gpus"]
    assert [(x["gpu"], x["tp"], x["gpus"]) for x in rows] == [("h100-sxm TP4", 4, 4), ("h100-sxm TP8", 8, 8)]
    g = load_gpu("h100")
    base = resolve_workload("prefill", model="llama-3-70b", batch=1, seq_len=1)
    for row, t in zip(rows, (4, 8), strict=True):
        gen = generate(base, Request(2048, 256, 64), lambda w, t=t: analyze(w, g, layout=Layout(t)), 8 * 2**30,
                       gpus=t)
        assert row["output_tokens_per_s_per_gpu"] == gen.output_tokens_per_s_per_gpu
    r = cli("plot", "pareto", "--gpu", "h100", "--model", "llama-3-70b", "--tp", "4", "--tp", "8", "--output", "16",
            "-o", str(tmp_path / "p.png"), "--json")
    assert r.exit_code == 0, r.output
    curves = json.loads(r.stdout)["gpus"]
    assert [(c["gpu"], c["tp"]) for c in curves] == [("h100-sxm TP4", 4), ("h100-sxm TP8", 8)]


def test_largest_batch_under_ep_counts_every_gpu():
    # Each of the 8 GPUs holds ⌈B/8⌉ sequences: the search for the largest batch must reach past one GPU's.
    from rooflinectl.engine.generate import budget_at, largest_batch

    g = load_gpu("h200")
    base = resolve_workload("prefill", model="mixtral-8x7b", batch=1, seq_len=1)
    step = lambda w: analyze(w, g, layout=Layout(ep=8))  # noqa: E731
    reserve = 14 * 2**30
    most = largest_batch(base, 2048, 256, step, reserve)
    assert budget_at(base, Request(2048, 256, most), step, reserve).fits
    assert not budget_at(base, Request(2048, 256, most + 1), step, reserve).fits
    one = budget_at(base, Request(2048, 256, 1), step, reserve)
    # Past what one GPU's KV cache alone would allow (the bound before the batch was spread): the batched
    # prefill's activations, not the cache, stop it.
    assert most > (one.capacity_bytes - one.weight_bytes - one.reserve_bytes) // one.kv_cache_bytes_per_sequence


def test_generate_json_carries_the_layout():
    import json

    r = cli("analyze", "generate", "--gpu", "h100", "--model", "llama-3-70b", "--tp", "4", "--pp", "2", "--batch",
            "8", "--output", "4", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {k: data["parallel"][k] for k in ("tp", "ep", "pp", "gpus")} == {"tp": 4, "ep": 1, "pp": 2, "gpus": 8}
    assert data["request"]["gpus"] == 8
    assert {"attn_all_reduce", "pp_send"} <= {o["name"] for o in data["ops"] if o["kind"] == "communication"}
    one = json.loads(cli("analyze", "generate", "--batch", "8", "--output", "4", "--json").stdout)
    assert "parallel" not in one


def test_a_vocabulary_that_t_does_not_divide_is_padded_to_a_multiple_of_t():
    """Llama 3 8B's sizes with a vocabulary of 32,001 (a tokenizer with one added token) at TP 2: padded up to
    32,002, 16,001 rows a GPU of the embedding and of the LM head. Decode at batch 8: the LM head 8×4096 ·
    4096×16,001, 2·8·4096·16,001 FLOPs a GPU; the logits all-gather of 8×32,002 in bf16 (512,032 bytes), each
    GPU sending (t−1)/t = 1/2 of it: 256,016 bytes."""
    m = validate(Model, {**load_model("llama-3-8b").model_dump(), "vocab_size": 32_001}, "test")
    assert padded_vocab(32_001, 2) == 32_002
    assert per_gpu_model(m, 2).vocab_size == 16_001
    a = analyze(resolve_workload("decode", model=m, batch=8, context=1024), load_gpu("h100"),  # type: ignore[arg-type]
                layout=Layout(2))
    assert _op(a, "lm_head").flops == 2 * 8 * 4096 * 16_001
    assert _op(a, "logits_all_gather").bytes == 8 * 32_002 * 2 // 2 == 256_016


def test_pp_holds_a_tied_table_once_on_the_last_stage():
    """A small model of 4 layers, tied or not, at PP 2: each stage 2 layers. A layer: Q and O 64×64, K and V
    64×32, two norms of 64, MLP 3·64·128: 12,288 + 128 + 24,576 = 36,992. The last stage (the heavier) holds its
    2 layers, the final norm and the LM head; tied, the LM head is the embedding table itself, held there once:
    2·36,992 + 100·64 + 64 = 80,448 parameters either way, 160,896 bytes in bf16."""
    base = {"id": "toy", "name": "toy", "source": "a test", "hidden_size": 64, "num_layers": 4, "num_heads": 2,
            "num_kv_heads": 1, "head_dim": 32, "intermediate_size": 128, "vocab_size": 100}
    for tied in (False, True):
        m = validate(Model, {**base, "tie_embeddings": tied}, "test")
        a = analyze(resolve_workload("decode", model=m, batch=1, context=64), load_gpu("h100"),  # type: ignore[arg-type]
                    layout=Layout(pp=2))
        assert a.totals.weight_footprint_bytes == (2 * 36_992 + 100 * 64 + 64) * 2 == 160_896, tied


def test_pp_send_at_prefill_moves_every_token():
    """Prefill of 2 sequences of 512 tokens through Llama 3 70B at PP 2: the stage boundary passes x for all
    N = 1,024 tokens, N·H·2 = 1,024·8192·2 = 16,777,216 bytes, once (p − 1 = 1)."""
    a = analyze(resolve_workload("prefill", model="llama-3-70b", batch=2, seq_len=512), load_gpu("h100"),
                layout=Layout(pp=2))
    send = _op(a, "pp_send")
    assert (send.bytes, send.count) == (2 * 512 * H * 2, 1)
    assert send.bytes == 16_777_216
