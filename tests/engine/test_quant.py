"""Quantized weights (issue 12): each storage format's bytes, scales included, and the kernel whose tensor cores
set the compute roof; every figure derived by hand below from the layout engine/count/quant.py states."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.engine.count.quant import bits_per_weight, kernel_name, weight_matrix_bytes
from rooflinectl.engine.count.resident import weight_footprint_bytes
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload

# Llama 3 8B: H = 4096, 32 heads of 128 (q 4096), 8 KV heads (kv 1024), I = 14336, V = 128256, 32 layers,
# 8,030,261,248 parameters.
H, Q, KV, I, V, L = 4096, 4096, 1024, 14336, 128256, 32


def ops_by_name(w) -> dict:
    return {op.name: op for op in step_ops(w)}


def test_bits_per_weight_of_each_format():
    # int4, one fp16 scale per group of g: (4·g + 16)/g bits. 128: 4.125; 64: 4.25; 32: 4.5.
    assert bits_per_weight("int4", 128) == (4 * 128 + 16) / 128 == 4.125
    assert bits_per_weight("int4", 64) == 4.25
    assert bits_per_weight("int4", 32) == 4.5
    # MXFP4 (OCP MX v1.0): E2M1 in blocks of 32 with one 8-bit E8M0 scale: (32·4 + 8)/32 = 4.25.
    assert bits_per_weight("mxfp4") == (32 * 4 + 8) / 32 == 4.25
    # NVFP4: E2M1 in blocks of 16 with one FP8 E4M3 scale: (16·4 + 8)/16 = 4.5 (the per-tensor fp32 aside).
    assert bits_per_weight("nvfp4") == (16 * 4 + 8) / 16 == 4.5
    # int8 with one fp32 scale per output channel: 8 + 32/k bits, at k = 4096 8.0078125.
    assert bits_per_weight("int8") == 8 + 32 / 4096
    # fp8 with one fp32 scale per tensor: 8 bits; bf16 16.
    assert bits_per_weight("fp8") == 8
    assert bits_per_weight("bf16") == 16


def test_weight_matrix_bytes_by_hand():
    # 4096×4096 int4 g128: 4096·4096/2 packed values + 4096 columns · 32 groups · 2 bytes of scale.
    assert weight_matrix_bytes("int4", Q, H, 128) == 4096 * 4096 // 2 + 4096 * 32 * 2 == 8_650_752
    assert weight_matrix_bytes("int4", Q, H, 128) == 4096 * 4096 * 4.125 / 8
    # nvfp4: 4096·4096/2 + 4096 columns · 256 blocks · 1 byte + 4 (the per-tensor fp32).
    assert weight_matrix_bytes("nvfp4", H, Q, 128) == 8_388_608 + 1_048_576 + 4 == 9_437_188
    # mxfp4: 4096·4096/2 + 4096 · 128 blocks · 1 byte.
    assert weight_matrix_bytes("mxfp4", H, Q, 128) == 8_388_608 + 524_288
    # int8: 4096·4096 + 4096 fp32 scales; fp8: 4096·4096 + one fp32.
    assert weight_matrix_bytes("int8", H, Q, 128) == 16_777_216 + 4 * 4096
    assert weight_matrix_bytes("fp8", H, Q, 128) == 16_777_216 + 4
    # A k that is not a multiple of the group rounds the groups up: k = 100 at g 128 is one group per column;
    # 100·3 values of 4 bits are 150 bytes.
    assert weight_matrix_bytes("int4", 100, 3, 128) == 150 + 3 * 1 * 2


def llama_int4_a100():
    w = resolve_workload("decode", model="llama-3-8b", batch=1, context=4096, weight_dtype="int4", group_size=128)
    return w, analyze(w, load_gpu("a100"))


def test_llama3_8b_int4_decode_on_a100():
    w, a = llama_int4_a100()
    ops = ops_by_name(w)
    # q_proj: x 1×4096 and y 1×4096 in bf16, W 4096×4096 at 4.125 bits: 8,650,752 bytes.
    assert ops["q_proj"].weight_bytes == 4096 * 4096 * 4.125 / 8 == 8_650_752
    assert ops["q_proj"].bytes == 4096 * 2 + 8_650_752 + 4096 * 2 == 8_667_136
    assert ops["q_proj"].flops == 2 * 4096 * 4096  # FLOPs do not change with the storage format
    assert ops["k_proj"].weight_bytes == 4096 * 1024 * 4.125 / 8 == 2_162_688
    # gate_proj 4096×14336 and down_proj 14336×4096: the same count of weights and of groups.
    assert ops["gate_proj"].weight_bytes == ops["down_proj"].weight_bytes == 4096 * 14336 * 4.125 / 8 == 30_277_632
    # Unquantized: the LM head (bf16, 4096×128256), the norms' gains, the one embedding row.
    assert ops["lm_head"].weight_bytes == 4096 * 128256 * 2 == 1_050_673_152
    assert ops["attn_norm"].weight_bytes == 4096 * 2
    # Weights read: per layer (4096·(4096 + 2·1024) + 4096·4096 + 3·4096·14336) = 218,103,808 weights at
    # 4.125 bits = 112,459,776 bytes, × 32 layers; two gains of 8,192 bytes per layer; the embedding row, the final
    # norm's gain and the LM head.
    per_layer = (H * (Q + 2 * KV) + Q * H + 3 * H * I) * 4.125 / 8
    assert per_layer == 112_459_776
    read = 32 * per_layer + 32 * 2 * 8192 + 8192 + 8192 + 1_050_673_152
    assert a.totals.weight_bytes == read == 4_649_926_656
    assert isinstance(a.totals.weight_bytes, int)
    # Footprint: 6,979,321,856 linear weights at 4.125 bits, the other 1,050,939,392 parameters (embedding, LM head,
    # 65 gains) in bf16.
    linear = 32 * 218_103_808
    rest = 8_030_261_248 - linear
    assert rest == 2 * V * H + 65 * H == 1_050_939_392
    assert weight_footprint_bytes(w) == linear * 4.125 / 8 + rest * 2 == 5_700_591_616
    # The roof is the bf16 tensor cores', named.
    assert a.peak_flops == 312e12
    assert a.kernel == kernel_name(w) == "w4a16: int4 g128 dequantized to the bf16 tensor cores"
    assert ops["q_proj"].dtype == "bf16"
    # The largest batch: HBM less the footprint over one sequence's KV cache (32 layers · K and V · 1024 · 4096
    # positions · 2 bytes).
    assert a.totals.max_batch == (80 * 2**30 - 5_700_591_616) // (32 * 2 * 1024 * 4096 * 2)


def test_fp8_w8a8_on_h100_uses_the_fp8_peak():
    w = resolve_workload("decode", model="llama-3-8b", weight_dtype="fp8", act_dtype="fp8")
    a = analyze(w, load_gpu("h100"))
    assert a.peak_flops == 1978.9e12  # H100 SXM dense FP8 tensor
    assert a.kernel == "w8a8: fp8 on the fp8 tensor cores"
    q = a.placement("q_proj")
    assert q.op.dtype == "fp8" and q.peak_flops == 1978.9e12
    # x read and y written in bf16, quantized on chip; W fp8 with its per-tensor fp32 scale.
    assert q.op.bytes == 4096 * 2 + 4096 * 4096 + 4 + 4096 * 2
    # Attention and the LM head stay bf16.
    assert a.placement("attention").op.dtype == "bf16"
    assert a.placement("lm_head").op.dtype == "bf16"


def test_nvfp4_w4a4_needs_an_fp4_peak():
    w = resolve_workload("decode", model="llama-3-8b", weight_dtype="nvfp4", act_dtype="fp4")
    a = analyze(w, load_gpu("b200"))
    assert a.peak_flops == 9000e12  # B200: 18 PFLOPS FP4 with sparsity, 9 dense
    assert a.kernel == "w4a4: nvfp4 on the fp4 tensor cores"
    with pytest.raises(UserError, match="a100-80gb has no tensor-core peak for fp4"):
        analyze(w, load_gpu("a100"))
    with pytest.raises(UserError, match="h100-sxm has no tensor-core peak for fp4"):
        analyze(w, load_gpu("h100"))
    # nvfp4 with bf16 activations runs anywhere bf16 does: dequantized.
    a16 = analyze(resolve_workload("decode", model="llama-3-8b", weight_dtype="nvfp4"), load_gpu("a100"))
    assert a16.kernel == "w4a16: nvfp4 dequantized to the bf16 tensor cores"
    assert a16.placement("q_proj").op.weight_bytes == 9_437_188


def test_moe_experts_read_in_the_weight_format():
    # Mixtral decode at batch 1 touches its top-2 experts: each expert's gate 4096×14336 at 4.125 bits.
    w = resolve_workload("decode", model="mixtral-8x7b", batch=1, weight_dtype="int4")
    ops = ops_by_name(w)
    assert ops["expert_gate_proj"].weight_bytes == 2 * 4096 * 14336 * 4.125 / 8 == 60_555_264
    assert ops["router"].weight_bytes == 4096 * 8 * 2  # the router's gate stays bf16


def test_dtype_alone_is_unchanged():
    base = analyze(resolve_workload("decode", model="llama-3-8b"), load_gpu("h100"))
    same = analyze(resolve_workload("decode", model="llama-3-8b", weight_dtype="bf16", act_dtype="bf16"),
                   load_gpu("h100"))
    assert same == base
    assert base.workload.label() == "llama-3-8b decode, batch 1, context 4096, bf16, flash attention"
    # --dtype fp8 stays the idealized one type for everything, no scales, as before quantized formats existed.
    fp8 = ops_by_name(resolve_workload("decode", model="llama-3-8b", dtype="fp8"))
    assert fp8["q_proj"].weight_bytes == 4096 * 4096


def test_precedence_of_dtype_and_the_explicit_options(tmp_path):
    w = resolve_workload("decode", dtype="fp16", weight_dtype="int4")
    assert (w.dtype, w.weights, w.matmul_dtype) == ("fp16", "int4", "fp16")
    # A scenario file's weight_dtype is replaced by --dtype on the command line, unless --weight-dtype is given.
    f = tmp_path / "q.yaml"
    f.write_text("phase: decode\nmodel: llama-3-8b\ncontext: 1024\nweight_dtype: int4\ngroup_size: 64\n")
    assert resolve_workload(str(f)).weights == "int4"
    assert resolve_workload(str(f)).group_size == 64
    replaced = resolve_workload(str(f), dtype="fp16")
    assert (replaced.weights, replaced.matmul_dtype, replaced.quantized) == ("fp16", "fp16", False)
    # An explicit --weight-dtype beside --dtype wins for the weights; the file's group goes with the file's weights.
    both = resolve_workload(str(f), dtype="fp16", weight_dtype="int4")
    assert (both.dtype, both.weights, both.group_size) == ("fp16", "int4", 128)
    assert resolve_workload(str(f), dtype="fp16", weight_dtype="int4", group_size=32).group_size == 32


def test_a_quantized_scenario_round_trips_and_explore_refuses_it():
    from rooflinectl.explore.state import Knobs
    from rooflinectl.specs.scenario import scenario_from_workload, workload_from_scenario

    w = resolve_workload("decode", model="llama-3-8b", weight_dtype="int4", group_size=64)
    assert workload_from_scenario(scenario_from_workload(w)) == w
    w4a4 = resolve_workload("decode", model="llama-3-8b", weight_dtype="nvfp4", act_dtype="fp4")
    assert workload_from_scenario(scenario_from_workload(w4a4)) == w4a4
    # explore's keys set one data type for everything: a quantized step is refused, not silently dropped.
    with pytest.raises(UserError, match="int4 weights: explore"):
        Knobs.from_workload(w, load_gpu("a100"))


@pytest.mark.parametrize(("args", "fragment"), [
    (["--act-dtype", "int4"], "act_dtype"),
    (["--weight-dtype", "int4", "--act-dtype", "fp8"], "weights in int4 with activations in fp8 are not modelled"),
    (["--weight-dtype", "bf16", "--act-dtype", "fp8"], "weights in bf16 with activations in fp8"),
    (["--group-size", "64"], "only int4 weights take a group size"),
    (["--act-dtype", "fp4"], "weights in bf16 with activations in fp4"),
    (["--weight-dtype", "int3"], "weight_dtype"),
    (["--gpu", "a100", "--weight-dtype", "mxfp4", "--act-dtype", "fp4"], "no tensor-core peak for fp4"),
])
def test_refusals_are_one_line(args, fragment):
    assert_one_line_error(cli("analyze", "decode", *args), fragment)


def test_analyze_names_the_kernel():
    out = " ".join(cli("analyze", "decode", "--gpu", "a100", "--model", "llama-3-8b", "--weight-dtype",
                       "int4").stdout.split())
    assert "int4 g128 weights, bf16 activations" in out
    assert "w4a16: int4 g128 dequantized to the bf16" in out


GPUS = sorted(p.stem for p in (Path(__file__).parents[2] / "hardware").glob("*.yaml"))


@pytest.mark.parametrize("gpu_id", GPUS)
def test_every_gpu_runs_w4a4_on_its_fp4_peak_or_refuses_it(gpu_id):
    gpu = load_gpu(gpu_id)
    w = resolve_workload("decode", model="llama-3-8b", weight_dtype="nvfp4", act_dtype="fp4")
    fp4 = gpu.roofs(False).tensor_tflops.get("fp4")
    if fp4 is None:
        with pytest.raises(UserError, match=f"{gpu_id} has no tensor-core peak for fp4"):
            analyze(w, gpu)
    else:
        a = analyze(w, gpu)
        assert a.peak_flops == fp4 * 1e12 == a.placement("q_proj").peak_flops
    # w4a16 runs wherever bf16 (or fp16) does, on that roof, and reads fewer weight bytes than bf16 at the same
    # FLOPs: 4.125 of 16 bits for every linear weight.
    bf16 = resolve_workload("decode", model="llama-3-8b", dtype="fp16" if gpu_id == "v100" else "bf16")
    int4 = resolve_workload("decode", model="llama-3-8b", dtype=bf16.dtype, weight_dtype="int4")
    a16, a4 = analyze(bf16, gpu), analyze(int4, gpu)
    assert a4.peak_flops == a16.peak_flops
    assert a4.totals.flops == a16.totals.flops
    assert a4.totals.weight_bytes < a16.totals.weight_bytes
    assert a4.totals.time_s <= a16.totals.time_s


@pytest.mark.parametrize("size", [0, 1, 7, 8, 48, 5000, -1, 2**23])
def test_a_group_size_no_quantizer_makes_is_one_line(size):
    # Powers of two from 16 to 2**22 (per-column, a config's -1, read as 2**22) are the layouts quantizers store.
    result = cli("analyze", "decode", "--weight-dtype", "int4", "--group-size", str(size))
    assert_one_line_error(result, "no group size a quantizer makes")


@pytest.mark.parametrize("size", [16, 32, 64, 128, 1024, 2**22])
def test_the_group_sizes_quantizers_make_are_taken(size):
    assert cli("analyze", "decode", "--weight-dtype", "int4", "--group-size", str(size), "--json").exit_code == 0
