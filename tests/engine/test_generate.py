"""engine/generate.py and engine/memory.py: a request is the engine's own steps, summed; memory is counted by hand.

Every latency is pinned to ``roofline.analyze`` of the step it comes from (the prefill, and the decode step at each
context), never to a formula of its own; the memory totals are derived by hand below from Llama 3 8B's config.json
(hidden 4096, 32 layers, 8 KV heads of 128, MLP 14336, vocabulary 128,256; 8,030,261,248 parameters).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooflinectl.engine.choice import (
    StaticServer,
    batch_for_tpot,
    choose,
    curve_batches,
    latency_throughput_curve,
)
from rooflinectl.engine.generate import (
    Request,
    budget_at,
    decode_series,
    generate,
    largest_batch,
    step_workload,
)
from rooflinectl.engine.memory import DEFAULT_RESERVE_FRACTION, activation_live_set, reserve_bytes
from rooflinectl.engine.placement import add_times
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload

GIB = 2**30
H100 = load_gpu("h100")


def base(model: str = "llama-3-8b", **overrides):
    return resolve_workload("prefill", model=model, batch=1, seq_len=1, **overrides)


def on(gpu):
    return lambda w: analyze(w, gpu)


def decode_at(b, batch: int, context: int, gpu=H100):
    return analyze(resolve_workload("decode", model=b.model.id, batch=batch, context=context, dtype=b.dtype,
                                    kv_dtype=b.kv_dtype, attention=b.attention, fused=list(b.fused),
                                    weight_dtype=b.weight_dtype, act_dtype=b.act_dtype), gpu)


# --- the steps are analyze's steps --------------------------------------------------------------------------------

CASES = [
    dict(model="llama-3-8b"),
    dict(model="llama-3-8b", attention="naive", fused=["qkv", "gate_up", "act", "norm_linear", "residual"]),
    dict(model="mixtral-8x7b"),
    dict(model="qwen2-7b", weight_dtype="int4", kv_dtype="fp8"),
]


@pytest.mark.parametrize("options", CASES, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_each_decode_step_is_analyze_decode_at_its_context(options):
    """Issue 13's test: the sum of the decode steps is the sum of `analyze decode` at each context, P + 1 …
    P + O − 1; here each step equals it to the bit, and so does each op's time summed over the steps."""
    options = dict(options)
    b = base(options.pop("model"), **options)
    r = Request(prompt=512, output=64, batch=8)
    g = generate(b, r, on(H100), reserve_bytes=0.0)
    assert g.decode is not None and not g.decode.analysed_every_step  # the affine path is the one tested
    steps = [decode_at(b, 8, c) for c in range(513, 576)]
    assert g.decode.steps == 63 == len(steps)
    assert list(g.decode.step_times_s) == [a.totals.time_s for a in steps]
    assert g.decode.total_time_s == add_times(a.totals.time_s for a in steps)
    for i in range(len(g.decode.first.placements)):
        assert g.decode.op_times_s[i] == pytest.approx(sum(a.placements[i].total_time_s for a in steps), rel=1e-12)
    memory_bound = sum(p.total_time_s for a in steps for p in a.placements if p.bound == "memory")
    assert g.decode.memory_bound_s == pytest.approx(memory_bound, rel=1e-12)
    # TTFT is the prefill of the batch, analyze's.
    prefill = analyze(resolve_workload("prefill", model=b.model.id, batch=8, seq_len=512, dtype=b.dtype,
                                       kv_dtype=b.kv_dtype, attention=b.attention, fused=list(b.fused),
                                       weight_dtype=b.weight_dtype, act_dtype=b.act_dtype), H100)
    assert g.ttft_s == prefill.totals.time_s


def test_rates_from_the_steps():
    """End-to-end = TTFT + Σ decode; B·O output tokens (and B·(P + O) in all) over it; TPOT the mean step."""
    b = base()
    g = generate(b, Request(prompt=2048, output=256, batch=32), on(H100), reserve_bytes=0.0)
    steps = [decode_at(b, 32, c).totals.time_s for c in range(2049, 2304)]
    e2e = g.ttft_s + add_times(steps)
    assert g.e2e_s == e2e
    assert g.tpot_s == pytest.approx(sum(steps) / 255, rel=1e-15)
    assert (g.tpot_first_s, g.tpot_last_s) == (steps[0], steps[-1])
    assert g.output_tokens_per_s_per_gpu == 32 * 256 / e2e
    assert g.total_tokens_per_s_per_gpu == 32 * (2048 + 256) / e2e
    assert g.output_tokens_per_s_per_request == 256 / e2e
    assert g.decode_tokens_per_s_per_request == 1 / g.tpot_s
    assert sum(o.total_s for o in g.op_times()) == pytest.approx(e2e, rel=1e-12)
    # Decode at batch 32 is memory-bound on an H100; the prefill of 65,536 tokens is compute-bound.
    assert g.phase_bound("decode")[0] == "memory" and g.phase_bound("prefill")[0] == "compute"


def test_one_output_token_has_no_decode_step():
    g = generate(base(), Request(prompt=100, output=1, batch=2), on(H100), reserve_bytes=0.0)
    assert g.decode is None and g.tpot_s is None and g.e2e_s == g.ttft_s
    # Its KV cache holds the prompt's 100 positions: 32 layers × 2 × 1024 × 100 × 2 bytes, per sequence.
    assert g.memory.kv_cache_bytes == 2 * 32 * 2 * 1024 * 100 * 2


def test_long_outputs_analyse_four_steps_and_stay_exact():
    """8,191 decode steps from 4 analyses (first, second, middle, last): the counts are affine in the context."""
    b = base()
    calls = []

    def step(c):
        calls.append(c)
        return decode_at(b, 4, c)

    series = decode_series(step, 101, 8191)
    assert sorted(calls) == [101, 102, (101 + 8191) // 2, 8191]
    assert not series.analysed_every_step and series.steps == 8091
    for c in (101, 2000, 4146, 8190):
        assert series.step_times_s[c - 101] == decode_at(b, 4, c).totals.time_s


def test_counts_not_affine_in_the_context_are_analysed_step_by_step():
    """A step function whose counts jump (contexts rounded up to blocks of 16, as a paged cache might read) fails
    the affine check as a whole; its halves are tried in turn, down to stretches analysed step by step, and the
    sums are still the steps'. Too short to split (under 16 steps), it is analysed step by step."""
    b = base()

    def paged(c):
        return decode_at(b, 4, (c + 15) // 16 * 16)

    series = decode_series(paged, 101, 140)
    assert list(series.step_times_s) == [paged(c).totals.time_s for c in range(101, 141)]
    short = decode_series(paged, 110, 121)
    assert short.analysed_every_step
    assert list(short.step_times_s) == [paged(c).totals.time_s for c in range(110, 122)]


# --- requests refused -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("request_, fragment", [
    (Request(2048, 0, 1), "--output 0"),
    (Request(0, 10, 1), "--prompt 0"),
    (Request(10, 10, 0), "--batch 0"),
    (Request(10, 10, 2**20 + 1), "--batch 1,048,577: at most 1,048,576"),
    # Llama 3 8B: max_position_embeddings 8,192; 8,000 + 193 tokens sit at positions 0 … 8,192.
    (Request(8000, 193, 1), "8,193 tokens exceed model llama-3-8b's max_position_embeddings of 8,192"),
])
def test_bad_requests_are_refused(request_, fragment):
    with pytest.raises(UserError, match=fragment):
        generate(base(), request_, on(H100), 0.0)


def test_a_series_across_a_sliding_window_is_its_steps():
    """Mistral 7B v0.1 slides every layer through a window of 4,096: a decode step reads min(context, 4,096)
    positions, affine on each side of the window but not across it. A series that crosses it (contexts 4,001 …
    4,199) leaves the line through its first two steps at the last one and is split: each half tried again, the
    half holding the window's edge split further; one wholly past it (5,001 … 5,199: every step reads 4,096
    positions) is affine again. Both equal analyze's steps, and the one across the window analyses a few dozen
    steps, not 199."""
    b = base("mistral-7b")
    calls = []

    def counted(c):
        calls.append(c)
        return decode_at(b, 1, c)

    across = decode_series(counted, 4001, 4199)
    assert list(across.step_times_s) == [decode_at(b, 1, c).totals.time_s for c in range(4001, 4200)]
    assert len(calls) < 80
    past = generate(b, Request(5000, 200, 1), on(H100), 0.0).decode
    assert past is not None and not past.analysed_every_step
    assert list(past.step_times_s) == [decode_at(b, 1, c).totals.time_s for c in range(5001, 5200)]


def test_the_last_position_is_allowed():
    """8,000 + 192 = 8,192 tokens: positions 0 … 8,191 exist; the last decode step attends to 8,191."""
    g = generate(base(), Request(8000, 192, 1), on(H100), 0.0)
    assert g.decode is not None and g.decode.last.workload.kv_len == 8191


# --- memory, by hand --------------------------------------------------------------------------------------------

WEIGHTS = 8_030_261_248 * 2  # 16,060,522,496 B: every parameter in bf16
KV_PER_SEQ = 32 * 2 * 8 * 128 * 2303 * 2  # layers × (K, V) × KV heads × head dim × (2,048 + 256 − 1) × bf16
ACT_PER_SEQ = 3 * 2048 * 14336 * 2  # the prefill's act: reads gate and up, writes SiLU(gate)·up, N×I each
CAPACITY = 80 * GIB  # the H100 file's hbm_capacity_gib
RESERVE = CAPACITY // 10  # vLLM's default gpu_memory_utilization 0.9 leaves 10%


def test_memory_budget_by_hand():
    assert KV_PER_SEQ == 301_858_816 and ACT_PER_SEQ == 176_160_768 and RESERVE == 8_589_934_592
    m = budget_at(base(), Request(2048, 256, 32), on(H100), reserve_bytes(CAPACITY, None))
    assert (m.weight_bytes, m.kv_cache_bytes_per_sequence, m.kv_cache_bytes) == (WEIGHTS, KV_PER_SEQ,
                                                                                32 * KV_PER_SEQ)
    assert (m.activations.phase, m.activations.op, m.activation_bytes) == ("prefill", "act", 32 * ACT_PER_SEQ)
    assert m.reserve_bytes == RESERVE
    assert m.total_bytes == 16_060_522_496 + 9_659_482_112 + 5_637_144_576 + 8_589_934_592 == 39_947_083_776
    assert m.fits and m.capacity_bytes == CAPACITY


def test_largest_batch_by_hand():
    """(80 GiB − 8 GiB reserve − 16,060,522,496 B of weights) = 61,248,888,832 B of room; each request takes its
    KV cache and its share of the act op's live set, 301,858,816 + 176,160,768 = 478,019,584 B: 128.13 → 128.
    With no reserve: 69,838,823,424 / 478,019,584 = 146.10 → 146."""
    room = CAPACITY - RESERVE - WEIGHTS
    assert room == 61_248_888_832 and room // (KV_PER_SEQ + ACT_PER_SEQ) == 128
    b = base()
    assert largest_batch(b, 2048, 256, on(H100), RESERVE) == 128
    assert budget_at(b, Request(2048, 256, 128), on(H100), RESERVE).fits
    assert not budget_at(b, Request(2048, 256, 129), on(H100), RESERVE).fits
    assert (CAPACITY - WEIGHTS) // (KV_PER_SEQ + ACT_PER_SEQ) == 146
    assert largest_batch(b, 2048, 256, on(H100), 0.0) == 146


def test_activations_are_the_largest_op_live_set():
    """bytes − weight bytes − KV bytes of each op, one instance; fused act keeps gate and up on chip, so the
    fused gate_up's N×H in and N×I out (plus its act epilogue) is smaller than the unfused act's 3·N·I."""
    fused = base(fused=["gate_up", "act"])
    a = analyze(step_workload(fused, "prefill", 1, 2048), H100)
    live = activation_live_set([a])
    want = max(p.op.bytes - p.op.weight_bytes - p.op.kv_bytes for p in a.placements)
    assert live.bytes == want < ACT_PER_SEQ


def test_reserve_default_and_bounds():
    assert DEFAULT_RESERVE_FRACTION == 0.10 and reserve_bytes(CAPACITY, None) == RESERVE
    assert reserve_bytes(CAPACITY, 2.5) == 2.5 * GIB
    for bad in (-1.0, 80.0, float("nan")):
        with pytest.raises(UserError, match="--reserve-gib"):
            reserve_bytes(CAPACITY, bad)


def test_a_model_that_fits_nowhere():
    """Llama 3 70B's 70,553,706,496 parameters are 141,107,412,992 B (131.4 GiB) in bf16: over an H100's 80."""
    b = base("llama-3-70b")
    assert largest_batch(b, 2048, 256, on(H100), 0.0) == 0
    c = choose(b, 2048, 256, on(H100), 0.0, "h100-sxm")
    assert c.generation is None and "weights 131.4 GiB" in c.note


# --- the curve and the choices ----------------------------------------------------------------------------------

def test_curve_batches():
    assert curve_batches(0) == []
    assert curve_batches(1) == [1]
    assert curve_batches(128) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert curve_batches(249) == [1, 2, 4, 8, 16, 32, 64, 128, 249]


def test_curve_points_are_analyze_numbers():
    b = base()
    curve = latency_throughput_curve(b, 2048, 256, on(H100), RESERVE, "h100-sxm")
    assert curve.largest_batch == 128 and [g.request.batch for g in curve.points] == curve_batches(128)
    for g in curve.points:
        n = g.request.batch
        assert g.ttft_s == analyze(step_workload(b, "prefill", n, 2048), H100).totals.time_s
        assert g.tpot_first_s == decode_at(b, n, 2049).totals.time_s
        assert g.tpot_last_s == decode_at(b, n, 2303).totals.time_s
    # More batch: more tokens/s per GPU, and a longer TPOT.
    rates = [g.output_tokens_per_s_per_gpu for g in curve.points]
    tpots = [g.tpot_s for g in curve.points]
    assert rates == sorted(rates) and tpots == sorted(tpots)
    assert curve.limit == curve.points[-1].memory


def test_batch_for_a_tpot_target():
    b = base()
    largest = largest_batch(b, 2048, 256, on(H100), RESERVE)
    at_64 = generate(b, Request(2048, 256, 64), on(H100), RESERVE)
    assert at_64.tpot_s is not None
    static = StaticServer(b, 2048, 256, on(H100), RESERVE)
    g = batch_for_tpot(static, at_64.tpot_s, largest)
    assert g is not None and g.request.batch >= 64
    assert g.tpot_s is not None and g.tpot_s <= at_64.tpot_s
    if g.request.batch < largest:  # one more request would miss the target
        above = generate(b, Request(2048, 256, g.request.batch + 1), on(H100), RESERVE)
        assert above.tpot_s is not None and above.tpot_s > at_64.tpot_s
    one = generate(b, Request(2048, 256, 1), on(H100), RESERVE)
    assert batch_for_tpot(static, (one.tpot_s or 0) / 2, largest) is None
    # A target the largest batch meets is the largest batch, found with two runs (batch 1 and the largest).
    top = generate(b, Request(2048, 256, largest), on(H100), RESERVE)
    served: list[int] = []
    counting = type("Counting", (), {"serve": lambda self, n: served.append(n) or static.serve(n)})()
    g = batch_for_tpot(counting, (top.tpot_s or 0) * 1.01, largest)
    assert g is not None and g.request.batch == largest and served == [1, largest]


def test_choices_refused():
    with pytest.raises(UserError, match="give one"):
        choose(base(), 2048, 256, on(H100), 0.0, "h100", batch=8, tpot_s=0.02)
    with pytest.raises(UserError, match="at least 2 output tokens"):
        choose(base(), 2048, 1, on(H100), 0.0, "h100", tpot_s=0.02)
    with pytest.raises(UserError, match="at least 2 output tokens"):
        latency_throughput_curve(base(), 2048, 1, on(H100), 0.0, "h100")


# --- any request: the sums are the steps' ----------------------------------------------------------------------

MODELS = ("llama-3-8b", "mistral-7b", "qwen3-30b-a3b", "llama-2-7b")


@settings(max_examples=25, deadline=None, derandomize=True)
@given(model=st.sampled_from(MODELS), prompt=st.integers(1, 3000), output=st.integers(1, 40),
       batch=st.integers(1, 64), attention=st.sampled_from(["flash", "naive"]),
       gpu=st.sampled_from(["h100", "a100", "mi300x", "l4"]))
def test_any_request_is_its_steps(model, prompt, output, batch, attention, gpu):
    """TTFT is analyze's prefill; each decode step is analyze's decode at its context, to the bit, whether the
    series took the affine path (4 or more steps) or analysed each step; end-to-end is their sum."""
    g_spec = load_gpu(gpu)
    b = base(model, attention=attention)
    g = generate(b, Request(prompt, output, batch), on(g_spec), reserve_bytes=0.0)
    assert g.ttft_s == analyze(step_workload(b, "prefill", batch, prompt), g_spec).totals.time_s
    steps = [analyze(step_workload(b, "decode", batch, c), g_spec).totals.time_s
             for c in range(prompt + 1, prompt + output)]
    assert (list(g.decode.step_times_s) if g.decode else []) == steps
    assert g.e2e_s == g.ttft_s + add_times(steps)
