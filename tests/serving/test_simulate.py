"""The serving simulation: its step times are the engine's, one request is the sum of its steps, the scheduler
keeps its budget and the KV cache its capacity, Little's law holds, percentiles are numpy's, and bad loads get
one line."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.engine.parallel import Layout
from rooflinectl.engine.roofline import analyze
from rooflinectl.serving.kvcache import BlockPool
from rooflinectl.serving.load import Lengths, closed_loop, open_loop
from rooflinectl.serving.metrics import Stats, Tally, percentile
from rooflinectl.serving.scheduler import SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.step import Seqs

H100 = load_gpu("h100")


def base(model: str = "llama-3-8b", **options):
    return resolve_workload("prefill", model=model, batch=1, seq_len=1, **options)


@pytest.mark.parametrize(("model", "options", "layout"), [
    ("llama-3-8b", {}, Layout()),
    ("mixtral-8x7b", {"fused": ["qkv", "gate_up"]}, Layout(tp=2)),
    ("deepseek-v3", {}, Layout(tp=8)),
    ("deepseek-v3.2-exp", {"weight_dtype": "fp8"}, Layout(tp=8)),
    ("gemma-3-27b", {}, Layout()),
    ("gpt-oss-20b", {"attention": "naive"}, Layout()),
    ("qwen2-7b", {"weight_dtype": "int4"}, Layout(pp=2)),
])
def test_the_step_model_is_the_engines_analysis(model, options, layout):
    rng = random.Random(1)
    m = StepModel(base(model, **options), H100, layout=layout)
    for _ in range(12):
        # Decodes at many contexts (their parts are affine in the context without a window: two anchors serve
        # them all), beside prompt chunks with and without cached positions.
        seqs = [Seqs(rng.randint(1, 4), 1, rng.randint(0, 3000)) for _ in range(rng.randint(0, 5))]
        if not seqs or rng.random() < 0.6:
            seqs.append(Seqs(1, rng.randint(2, 700), rng.choice([0, rng.randint(1, 2000)])))
        step = tuple(seqs)
        full = analyze(m.base.with_seqs(step), H100, layout=layout).totals.time_s
        assert m.time(step) == pytest.approx(full, rel=1e-12)


def test_chunked_attention_is_not_taken_for_affine_in_the_context():
    # Llama 4 Scout's chunked layers read (context − 1) mod 8,192 + 1 positions: decodes just before, at and past
    # a chunk's end, and far past it, priced as the engine analyses each.
    m = StepModel(base("llama-4-scout"), H100, layout=Layout(tp=8))
    for cached in (8190, 8191, 8192, 8193, 9000, 20000, 70000):
        step = (Seqs(2, 1, cached), Seqs(1, 1, cached // 2))
        full = analyze(m.base.with_seqs(step), H100, layout=Layout(tp=8)).totals.time_s
        assert m.time(step) == pytest.approx(full, rel=1e-12)


@pytest.mark.parametrize(("model", "layout"), [("gemma-3-27b", Layout()), ("gpt-oss-20b", Layout()),
                                               ("mistral-7b", Layout(tp=2))])
def test_decodes_past_a_sliding_window_are_the_engines(model, layout):
    # Past the window a sliding layer reads W positions whatever the context, the full layers one more a token:
    # the step model's line through two anchors past W must be each decode's analysis, at the window's edge too.
    m = StepModel(base(model), H100, layout=layout)
    w = m.base.model.sliding_window
    limit = m.base.model.max_length()
    for cached in (w - 2, w - 1, w, w + 1, w + 3, w + 4, 3 * w + 17, 40 * w):
        if limit is not None and cached + 6 > limit[0]:
            continue
        step = (Seqs(3, 1, cached), Seqs(1, 1, cached + 5))
        full = analyze(m.base.with_seqs(step), H100, layout=layout).totals.time_s
        assert m.time(step) == pytest.approx(full, rel=1e-12), cached


def test_one_request_is_the_sum_of_its_steps():
    # Concurrency 1, one request of 300 prompt and 5 output tokens: a prefill step of 300, then 4 decode steps
    # at 300, 301, 302, 303 cached positions, each timed by the engine alone.
    m = StepModel(base(), H100)
    load = closed_loop(1, 1, Lengths("fixed", 300), Lengths("fixed", 5))
    run = simulate(load, m, BlockPool(1000, 16), SchedulerConfig())

    def t(*groups):
        return analyze(m.base.with_seqs(groups), H100).totals.time_s

    prefill = t(Seqs(1, 300))
    decodes = [t(Seqs(1, 1, 300 + k)) for k in range(4)]
    (served,) = run.served
    assert served.ttft_s == pytest.approx(prefill, rel=1e-12)
    assert served.e2e_s == pytest.approx(prefill + sum(decodes), rel=1e-12)
    assert served.tpot_s == pytest.approx(sum(decodes) / 4, rel=1e-12)
    assert run.steps == 5


def test_every_step_of_a_closed_loop_is_the_engines(monkeypatch):
    m = StepModel(base(), H100)
    seen = []
    plain = StepModel.time_counts

    def spy(self, counts):
        got = plain(self, counts)
        seen.append((tuple(Seqs(c, new, cached) for (new, cached), c in counts.items()), got))
        return got

    monkeypatch.setattr(StepModel, "time_counts", spy)
    simulate(closed_loop(4, 12, Lengths("fixed", 64), Lengths("fixed", 8)), m, BlockPool(500, 16), SchedulerConfig())
    assert len(seen) > 20
    for seqs, got in seen[::5]:
        assert got == pytest.approx(analyze(m.base.with_seqs(seqs), H100).totals.time_s, rel=1e-12)


@pytest.mark.parametrize(("load", "blocks", "config"), [
    (closed_loop(6, 30, Lengths("uniform", 100, 900), Lengths("uniform", 20, 300), seed=2), 5000, SchedulerConfig()),
    (closed_loop(8, 24, Lengths("fixed", 200), Lengths("fixed", 100)), 60, SchedulerConfig()),  # preempts
    (open_loop(15.0, 120, Lengths("fixed", 400), Lengths("uniform", 10, 200), seed=5), 20000, SchedulerConfig()),
    (closed_loop(12, 36, Lengths("fixed", 50), Lengths("fixed", 64)), 5000, SchedulerConfig(max_num_seqs=5)),
    # As many decoding as the token budget holds, the rest waiting: decode runs while requests wait (compare's
    # largest batches of one-token prompts).
    (closed_loop(40, 40, Lengths("fixed", 1), Lengths("uniform", 5, 40), seed=3), 5000,
     SchedulerConfig(max_num_batched_tokens=16)),
    # Prompts and decodes in separate steps (SGLang's policy), with and without preemptions.
    (closed_loop(6, 30, Lengths("uniform", 100, 900), Lengths("uniform", 20, 300), seed=2), 5000,
     SchedulerConfig(mixed=False)),
    (closed_loop(8, 24, Lengths("fixed", 200), Lengths("fixed", 100)), 60, SchedulerConfig(mixed=False)),
])
def test_runs_of_plain_decode_steps_are_the_step_by_step_loop(monkeypatch, load, blocks, config):
    """The loop runs a stretch of steps that only decode every running request at once
    (Scheduler.decode_run); forming each of those steps with the scheduler instead gives the same run, to the
    bit: every token time, the timeline, the KV peak and the preemptions."""
    from rooflinectl.serving.scheduler import Scheduler

    m = StepModel(base(), H100)
    fast = simulate(load, m, BlockPool(blocks, 16), config)
    monkeypatch.setattr(Scheduler, "decode_run", lambda self: 0)
    slow = simulate(load, StepModel(base(), H100), BlockPool(blocks, 16), config)
    assert fast == slow
    assert fast.steps > len(load.requests)


def test_the_budget_holds_and_long_prompts_are_chunked():
    m = StepModel(base(), H100)
    load = closed_loop(8, 16, Lengths("fixed", 3000), Lengths("fixed", 4))
    run = simulate(load, m, BlockPool(5000, 16), SchedulerConfig(max_num_batched_tokens=1024))
    assert run.max_tokens_in_step == 1024
    assert all(len(s.token_times_s) == 4 for s in run.served)
    # Without chunked prefill a prompt longer than the budget cannot run: said in one line.
    with pytest.raises(rl.UserError, match="chunked prefill"):
        simulate(load, m, BlockPool(5000, 16), SchedulerConfig(max_num_batched_tokens=1024, chunked_prefill=False))


def test_without_chunked_prefill_only_prompts_must_fit_the_budget():
    # TensorRT-LLM's budget as ai-dynamo/aiconfigurator configures it (batch + prompt + 1,500 tokens) holds a
    # prompt of 1,024 but not a whole sequence of 1,024 + 2,048: with KV room for every sequence it runs, each
    # prompt in one step (at most 2 of 1,024 beside 8 decodes in 2,532 tokens).
    m = StepModel(base(), H100)
    load = closed_loop(8, 16, Lengths("fixed", 1024), Lengths("fixed", 2048))
    config = SchedulerConfig(max_num_batched_tokens=8 + 1024 + 1500, chunked_prefill=False)
    run = simulate(load, m, BlockPool(8 * 192, 16), config)
    assert run.preemptions == 0 and all(len(s.token_times_s) == 2048 for s in run.served)
    assert run.max_tokens_in_step <= 2 * 1024 + 8
    # Short of KV blocks it preempts, and a preempted request of more tokens than the budget could never be
    # prefilled again whole: refused in one line where it happens. Two clients on 340 blocks (5,440 positions)
    # run out at about 2,720 positions each, 1,696 generated: 2,720 tokens to prefill again > 2,526.
    pair = closed_loop(2, 2, Lengths("fixed", 1024), Lengths("fixed", 2048))
    with pytest.raises(rl.UserError, match="preempted .* without chunked prefill"):
        simulate(pair, m, BlockPool(340, 16), SchedulerConfig(2 + 1024 + 1500, chunked_prefill=False))


def test_the_kv_cache_never_overflows_and_preempts_by_recompute():
    # 8 clients of 200 + 100 tokens need up to 8 × ⌈299/16⌉ = 152 blocks; 60 force preemptions.
    m = StepModel(base(), H100)
    pool = BlockPool(60, 16)
    run = simulate(closed_loop(8, 24, Lengths("fixed", 200), Lengths("fixed", 100)), m, pool, SchedulerConfig())
    assert run.preemptions > 0
    assert run.kv_blocks_peak <= 60 and pool.used == 0
    assert all(len(s.token_times_s) == 100 for s in run.served)
    assert sum(s.preemptions for s in run.served) == run.preemptions
    # Token times never go backwards.
    assert all(list(s.token_times_s) == sorted(s.token_times_s) for s in run.served)


def test_littles_law_in_an_open_loop():
    # Mean requests in the system (time-averaged) = arrival rate × mean time in the system.
    m = StepModel(base(), H100)
    rate = 20.0
    run = simulate(open_loop(rate, 1500, Lengths("fixed", 256), Lengths("fixed", 32), seed=3), m,
                   BlockPool(20000, 16), SchedulerConfig())
    events = sorted([(s.request.arrival_s, 1) for s in run.served] + [(s.token_times_s[-1], -1) for s in run.served])
    area, inside, last = 0.0, 0, 0.0
    for t, d in events:
        area += inside * (t - last)
        inside, last = inside + d, t
    in_system = area / last
    assert in_system == pytest.approx(rate * run.e2e.mean, rel=0.1)


def test_percentiles_are_numpys():
    rng = random.Random(7)
    for n in (1, 2, 5, 101, 1000):
        xs = sorted(rng.random() for _ in range(n))
        for q in (0, 50, 90, 99, 100):
            assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-12)


def test_tallied_stats_are_the_samples_stats_to_the_bit():
    # A tally holds each distinct value once; its mean and percentiles must be those of the samples themselves.
    rng = random.Random(11)
    for n, distinct in ((1, 1), (2, 1), (7, 3), (1000, 5), (5000, 4000)):
        values = [rng.random() * 10 ** rng.randint(-6, 0) for _ in range(distinct)]
        xs = [rng.choice(values) for _ in range(n)]
        assert Stats.tallied(iter(xs)) == Stats.of(xs)
    assert Stats.tallied(iter([])) is None
    # Rank by rank: 0.5 twice, 1.5 once, 3.0 three times.
    tally = Tally({3.0: 3, 0.5: 2, 1.5: 1})
    assert len(tally) == 6 and [tally[i] for i in range(6)] == [0.5, 0.5, 1.5, 3.0, 3.0, 3.0]
    assert tally.fsum() == 11.5
    assert percentile(tally, 50) == 2.25  # rank 2.5: halfway from 1.5 to 3.0


def test_itl_is_every_gap_in_the_engine_and_the_client_delay_cancels():
    # Two requests' engine times, one delayed by a stack: its TTFT and E2E grow by the delay, its gaps do not.
    from array import array

    from rooflinectl.serving.load import Request
    from rooflinectl.serving.metrics import Served

    a = Served(Request(0, 0.0, 10, 3), array("d", (0.5, 0.75, 1.25)), 0)
    b = Served(Request(1, 0.25, 10, 2), array("d", (0.75, 1.0)), 0, delay_s=0.125)
    assert list(a.gaps()) == [0.25, 0.5] and list(b.gaps()) == [0.25]
    assert (b.ttft_s, b.e2e_s, b.tpot_s) == (0.625, 0.875, 0.25)
    assert b.token_times_s == (0.875, 1.125)
    assert Stats.tallied(g for s in (a, b) for g in s.gaps()) == Stats.of([0.25, 0.5, 0.25])


def test_serve_to_dict_is_the_json():
    args = ["analyze", "serve", "--gpu", "h100", "--concurrency", "4", "--prompt", "uniform:100-400", "--output",
            "16", "--requests", "20", "--slo-tpot-ms", "30"]
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == rl.serve(gpu="h100", concurrency=4, prompt="uniform:100-400", output=16, requests=20,
                            slo_tpot_ms=30).to_dict()
    assert set(data["tpot_s"]) == {"mean", "p50", "p90", "p99"}
    assert data["load"]["requests"] == 20


@pytest.mark.parametrize(("args", "fragment"), [
    (["--concurrency", "0"], "--concurrency 0"),
    (["--rate", "-1"], "--rate -1"),
    (["--rate", "2", "--concurrency", "3"], "give one load"),
    (["--prompt", "lots"], "--prompt 'lots'"),
    (["--output", "uniform:9-3"], "lower bound"),
    (["--requests", "0"], "--requests 0"),
    (["--max-num-batched-tokens", "0"], "--max-num-batched-tokens"),
    (["--block-size", "0"], "--block-size"),
    (["--slo-ttft-ms", "-5"], "--slo-ttft-ms"),
    (["--trace", "missing.jsonl"], "no such file"),
    (["--model", "llama-2-7b", "--prompt", "4000", "--output", "100"], "max_position_embeddings is 4,096"),
    # Numbers int() and float() take but a count is not written in; 5,000 digits made int() itself raise.
    (["--prompt", "\u0661\u0662\u0663"], "--prompt"),
    (["--output", "uniform:1_0-20"], "--output"),
    (["--spec", "ngram:\u0663", "--accept", "0.7"], "--spec 'ngram:"),
    (["--spec", "ngram:3", "--accept", "0.7,nan,0.5"], "--accept"),
    (["--disagg", "9" * 5000 + ":1"], "--disagg"),
])
def test_bad_loads_get_one_line(args, fragment):
    assert_one_line_error(cli("analyze", "serve", *args), fragment)


def test_a_bad_trace_names_its_line(tmp_path):
    good = tmp_path / "t.jsonl"
    good.write_text('{"arrival_s": 0.0, "prompt": 64, "output": 4}\n{"arrival_s": 0.5, "prompt": 32, "output": 2}\n')
    data = json.loads(cli("analyze", "serve", "--trace", str(good), "--json").stdout)
    assert data["load"] == {"kind": "trace", "concurrency": None, "rate": None, "requests": 2, "prompt": "trace",
                            "output": "trace", "seed": 0}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"arrival_s": 0.0, "prompt": 64, "output": 4}\n{"arrival_s": 1, "prompt": 0, "output": 2}\n')
    assert_one_line_error(cli("analyze", "serve", "--trace", str(bad)), "bad.jsonl:2")
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,prompt,output\n0,64,4\n0.1,16,2\n")
    assert cli("analyze", "serve", "--trace", str(csv), "--json").exit_code == 0


@pytest.mark.parametrize(("name", "text", "fragment"), [
    # Each was a traceback (exit 1): the csv module's field limit, JSON nested past the recursion limit, an
    # integer past Python's 4,300 digits.
    ("big.csv", "arrival_s,prompt,output\n0,64," + "9" * 200_000 + "\n", "big.csv:2: not a trace row"),
    ("nest.jsonl", "[" * 100_000 + "\n", "nest.jsonl:1: not a JSON object"),
    ("huge.jsonl", '{"arrival_s": 0, "prompt": ' + "9" * 5000 + ', "output": 4}\n', "huge.jsonl:1: not a JSON"),
    # Other scripts' digits and underscores, which int() and float() take, are no token count or time here.
    ("arabic.jsonl", '{"arrival_s": 0, "prompt": "\u0661\u0662", "output": 4}\n', "arabic.jsonl:1: arrival_s is"),
    ("under.csv", "arrival_s,prompt,output\n0,1_6,4\n", "under.csv:2: arrival_s is seconds"),
    ("true.jsonl", '{"arrival_s": 0, "prompt": true, "output": 4}\n', "true.jsonl:1: arrival_s is seconds"),
    ("twice.csv", "arrival_s,arrival_s,prompt,output\n0,5,64,4\n", "twice.csv: a trace CSV has the header"),
    # A prefix must be ID:TOKENS: a 0 or false was read as no prefix.
    ("zero.jsonl", '{"arrival_s": 0, "prompt": 64, "output": 4, "prefix": 0}\n', "prefix is ID:TOKENS"),
])
def test_a_malformed_trace_row_is_one_line_naming_it(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert_one_line_error(cli("analyze", "serve", "--trace", str(path)), fragment)


def test_a_trace_runs_from_its_first_arrival(tmp_path):
    """Unix timestamps run as the seconds after the first request: the same run, rates and costs as the trace
    that starts at 0 (the duration used to count from the epoch: 0.0000000115 requests/s over 481,497 h)."""
    rows = [(0.25 * i, 256, 8) for i in range(6)]
    zero, epoch, upper = tmp_path / "zero.jsonl", tmp_path / "epoch.jsonl", tmp_path / "upper.CSV"
    zero.write_text("".join(json.dumps({"arrival_s": a, "prompt": p, "output": o}) + "\n" for a, p, o in rows))
    epoch.write_text("".join(json.dumps({"arrival_s": 1733390000 + a, "prompt": p, "output": o}) + "\n"
                             for a, p, o in reversed(rows)))
    upper.write_text("arrival_s,prompt,output\n" + "".join(f"{a},{p},{o}\n" for a, p, o in rows))
    args = ("analyze", "serve", "--price-per-gpu-hour", "2", "--json", "--trace")
    runs = [json.loads(cli(*args, str(path)).stdout) for path in (zero, epoch, upper)]
    for run in runs[1:]:
        assert run["throughput"] == pytest.approx(runs[0]["throughput"], rel=1e-6)
        assert run["cost"] == pytest.approx(runs[0]["cost"], rel=1e-6)
        assert run["ttft_s"] == pytest.approx(runs[0]["ttft_s"], rel=1e-6)
        assert run["e2e_s"] == pytest.approx(runs[0]["e2e_s"], rel=1e-6)
    assert 1 < runs[1]["throughput"]["duration_s"] < 3  # 1.25 s of arrivals and the last request's steps


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "the trace holds no requests"),
    ('{"arrival_s": 0, "prompt": 8, "output": 2}\n{"arrival_s": 1e300, "prompt": 8, "output": 2}\n',
     "a trace spans at most 1e+07 s"),
])
def test_an_empty_or_endless_trace_is_one_line(tmp_path, text, fragment):
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    assert_one_line_error(cli("analyze", "serve", "--trace", str(path)), fragment)


def test_a_stack_adds_its_costs(tmp_path):
    # A step of the stack costs its ops at half the bandwidth and peak, 2 µs a kernel and 100 µs a step. A decode
    # step of one sequence: Llama 3 8B launches 15 ops × 32 layers + 3 once = 483 kernels (the engine's count).
    from rooflinectl.specs.stack import load_stack

    path = tmp_path / "slow.yaml"
    path.write_text("id: slow\nname: a slow engine\nsource: this test\nstep_overhead_us: 100\nkernel_gap_us: 2\n"
                    "bandwidth_efficiency: 0.5\ncompute_efficiency: 0.5\n")
    stack = load_stack(str(path))
    plain, slow = StepModel(base(), H100), StepModel(base(), H100, stack=stack)
    step = (Seqs(1, 1, 999),)
    a = analyze(plain.base.with_seqs(step), H100)
    kernels = sum(p.op.count for p in a.placements)
    assert kernels == 15 * 32 + 3
    # Every op of a one-token decode is memory-bound, even at half the peak: its time doubles exactly.
    assert all(p.bound == "memory" for p in a.placements)
    assert slow.time(step) == pytest.approx(2 * a.totals.time_s + (kernels * 2 + 100) / 1e6, rel=1e-12)
    assert plain.time(step) == pytest.approx(a.totals.time_s, rel=1e-12)
    assert_one_line_error(cli("analyze", "serve", "--stack", "nope"), "unknown stack 'nope'")


def test_a_static_batch_is_the_simulation_without_refills_or_chunks():
    # analyze generate's static batch (B prompts prefilled in one step, then B decodes a step) is the simulation
    # of B requests arriving at once with no client refilling, no chunked prefill and a budget of B prompts.
    from rooflinectl.api import step_analyzer
    from rooflinectl.engine.generate import Request as Batch
    from rooflinectl.engine.generate import generate

    b, prompt, output = 8, 512, 16
    static = generate(base(), Batch(prompt, output, b), step_analyzer(H100, False), reserve_bytes=8 * 2**30)
    m = StepModel(base(), H100)
    run = simulate(closed_loop(b, b, Lengths("fixed", prompt), Lengths("fixed", output)), m, BlockPool(10_000, 16),
                   SchedulerConfig(max_num_batched_tokens=b * prompt, chunked_prefill=False))
    assert run.steps == output  # one prefill step, then output − 1 decode steps
    assert run.ttft.mean == pytest.approx(static.ttft_s, rel=1e-12)
    assert run.tpot.mean == pytest.approx(static.tpot_s, rel=1e-12)
    assert run.e2e.mean == pytest.approx(static.e2e_s, rel=1e-12)


def test_decodes_past_the_sparse_top_k_are_the_engines():
    # DeepSeek-V3.2's attention reads min(context, 2,048) selected positions and its indexer every one: past the
    # top-k the step model's line through two anchors must be each decode's analysis, at the edge too.
    m = StepModel(base("deepseek-v3.2-exp", weight_dtype="fp8"), H100, layout=Layout(tp=8))
    for cached in (2045, 2046, 2047, 2048, 2049, 2051, 9000, 120000):
        step = (Seqs(3, 1, cached), Seqs(1, 1, cached + 5))
        full = analyze(m.base.with_seqs(step), H100, layout=Layout(tp=8)).totals.time_s
        assert m.time(step) == pytest.approx(full, rel=1e-12), cached


def test_no_room_for_a_block_names_the_reserve_when_it_fills_the_gpu():
    # --reserve-gib 79.9 on an 80 GiB H100 blamed "the weights and activations".
    assert_one_line_error(cli("analyze", "serve", "--reserve-gib", "79.9", "--requests", "2"),
                          "the reserve (79.9 GiB, --reserve-gib) fill the GPU's 80.0 GiB")


@pytest.mark.parametrize(("model", "gpu", "tp", "options"), [
    ("llama-3-8b", "h100", 2, {}),
    ("mixtral-8x7b", "h100", 2, {}),
    ("qwen3-next-80b-a3b", "h200", 1, {"weight_dtype": "fp8"}),
    ("gemma-3-27b", "h100", 1, {}),
])
def test_the_ops_by_tokens_and_by_sequences_add_to_the_pairs_time_to_the_bit(model, gpu, tp, options):
    """The step model prices the ops other than attention by the step's tokens N and sequences B apart (the LM
    head and the logits' gather on B, the rest on N) and adds them in the engine's order: equal to the bit to one
    analysis of the (N, B) step, the key it used before, at token and sequence counts no probe saw."""
    import random

    from rooflinectl.api.common import base_workload
    from rooflinectl.engine.parallel import Layout
    from rooflinectl.serving.stepmodel import StepModel
    from rooflinectl.specs.hardware import load_gpu

    def made() -> StepModel:
        return StepModel(base_workload(model=model, **options), load_gpu(gpu), layout=Layout(tp=tp))

    split, pairs = made(), made()
    pairs._sequence_probe = (None,)  # "cannot be split": the pair (N, B) is the key, one analysis each
    assert split._sequence_ops() is not None and "lm_head" in split._sequence_ops()
    rng = random.Random(7)
    for _ in range(25):
        sequences = rng.randint(1, 300)
        counts = {(1, rng.randint(1, 4000)): sequences, (rng.randint(2, 2000), 0): 1}
        assert split._rest_time(counts) == pairs._rest_time(counts), counts
        assert [op.name for op in split.step_ops(counts)[0]] == [op.name for op in pairs.step_ops(counts)[0]]


def test_lengths_beside_a_trace_are_refused_not_ignored(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival_s": 0, "prompt": 64, "output": 4}\n')
    for given in (["--prompt", "100"], ["--output", "8"]):  # were ignored: the trace's lengths ran
        assert_one_line_error(cli("analyze", "serve", "--trace", str(trace), *given), "with --trace")
    assert cli("analyze", "serve", "--trace", str(trace)).exit_code == 0
