"""A stack's attention rule and costs in the step model: batch_dense is the engine's count of one dense attention of
the step's query tokens over all its KV positions, a repeated attention shape pays its plan once, and the position
cost, the attention efficiency and the collective efficiency add what they say."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rooflinectl.engine.count.primitives import flash_attention_op
from rooflinectl.engine.parallel import Layout
from rooflinectl.engine.placement import place
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.stack import Stack, load_stack
from rooflinectl.specs.step import Seqs

H100 = load_gpu("h100")
ROOT = Path(__file__).parents[2]


def base(model: str = "llama-3-8b", **options):
    return resolve_workload("prefill", model=model, batch=1, seq_len=1, **options)


def stack(**figures) -> Stack:
    return Stack(id="t", name="a test stack", source="this test", **figures)


def attention_time(a) -> float:
    return sum(p.total_time_s for p in a.placements if p.op.kind == "attention")


def test_batch_dense_is_one_dense_attention_counted_by_hand():
    # Two decodes after 100 cached and a 5-token prompt: N = 2 + 5 = 7 query tokens over L = 2 × 101 + 5 = 207
    # KV positions. Llama 3 8B: 32 heads of 128 (4,096), 8 KV heads (1,024), 32 layers, bf16.
    step = (Seqs(2, 1, 100), Seqs(1, 5, 0))
    n, ln = 7, 207
    scores = 32 * n * ln  # every query against every position, masked or not
    assert scores * (2 * 128 + 2 * 128 + 5) == 23_972_256  # FLOPs a layer
    q_bytes = n * 4096 * 2  # Q in, and O out
    kv_bytes = 2 * ln * 1024 * 2  # K and V of the gathered sequence, read once
    by_hand = flash_attention_op("attention", scores, 128, 128, q_bytes, kv_bytes, q_bytes, "bf16", "", "", "").times(32)
    # The same count as the engine's for one sequence of N new tokens after L − N cached without the causal mask.
    one = base().with_seqs((Seqs(1, n, ln - n),)).model_copy(update={"causal": False})
    (engine,) = [p.op for p in analyze(one, H100).placements if p.op.kind == "attention"]
    assert (engine.flops, engine.bytes, engine.kv_bytes, engine.count) == \
        (by_hand.flops, by_hand.bytes, by_hand.kv_bytes, by_hand.count)
    # The step: its other ops as the engine analyses it, its attention the dense op.
    varlen = analyze(base().with_seqs(step), H100)
    expected = varlen.totals.time_s - attention_time(varlen) + place(by_hand, H100.roofs(False)).total_time_s
    model = StepModel(base(), H100, stack=stack(attention="batch_dense"))
    assert model.time(step) == pytest.approx(expected, rel=1e-12)
    # varlen, for contrast: each sequence scores its own positions, 2 × 101 + 5·6/2 a head (the prompt causal).
    (own,) = [p.op for p in varlen.placements if p.op.kind == "attention"]
    assert own.flops == 32 * (2 * 101 + 15) * 517 < by_hand.flops


@pytest.mark.parametrize(("model", "options", "layout"), [
    ("llama-3-8b", {"attention": "naive"}, Layout()),
    ("mixtral-8x7b", {"fused": ["qkv", "gate_up"]}, Layout(tp=2)),
    ("deepseek-v3", {}, Layout(tp=8)),
    ("qwen2-7b", {"weight_dtype": "int4"}, Layout(pp=2)),
])
def test_batch_dense_is_the_engines_count_at_every_step(model, options, layout):
    # From four small analyses the step model prices any N and L: each step equals the engine's analysis of the
    # step for its other ops and of one non-causal sequence of N after L − N for its attention.
    rng = random.Random(3)
    w = base(model, **options)
    m = StepModel(w, H100, layout=layout, stack=stack(attention="batch_dense"))
    for _ in range(5):
        step = [Seqs(rng.randint(1, 3), 1, rng.randint(0, 600)) for _ in range(rng.randint(0, 3))]
        if not step or rng.random() < 0.5:
            step.append(Seqs(1, rng.randint(2, 300), rng.choice([0, rng.randint(1, 500)])))
        n = sum(g.tokens for g in step)
        ln = sum(g.count * g.positions for g in step)
        one = w.with_seqs((Seqs(1, n, ln - n),)).model_copy(update={"causal": False})
        varlen = analyze(w.with_seqs(tuple(step)), H100, layout=layout)
        expected = varlen.totals.time_s - attention_time(varlen) + attention_time(analyze(one, H100, layout=layout))
        assert m.time(tuple(step)) == pytest.approx(expected, rel=1e-12)
    assert m.analyses < 25  # the anchors and the other ops' keys, not an analysis a step


def test_batch_dense_reaches_past_the_models_positions():
    # 128 decodes after 2,100 cached: L = 268,928 KV positions, far beyond Llama 3's 8,192, as the whole batch's
    # gathered sequence is. Its attention: 32 heads × 128 × L scores, K and V over L, a layer.
    n, ln = 128, 128 * 2101
    dense = StepModel(base(), H100, stack=stack(attention="batch_dense"))
    plain = StepModel(base(), H100)
    step = (Seqs(n, 1, 2100),)
    other, attention, _, layers = dense.op_times({(1, 2100): n})
    by_hand = flash_attention_op("attention", 32 * n * ln, 128, 128, n * 4096 * 2, 2 * ln * 1024 * 2, n * 4096 * 2,
                                 "bf16", "", "", "").times(32)
    assert attention == pytest.approx(place(by_hand, H100.roofs(False)).total_time_s, rel=1e-12)
    assert layers == 32
    assert other == pytest.approx(plain.op_times({(1, 2100): n})[0], rel=1e-12)
    assert dense.time(step) > plain.time(step)


def test_a_repeated_shape_pays_its_plan_once():
    # new_shape_us is charged to the first step of each (query tokens, KV positions) in the run, not again.
    m = StepModel(base(), H100, stack=stack(new_shape_us=1000.0))
    plain = StepModel(base(), H100)
    step = (Seqs(1, 1, 500),)
    first, again = m.time(step), m.time(step)
    assert first - again == pytest.approx(1e-3, abs=1e-12)
    assert again == pytest.approx(plain.time(step), rel=1e-12)
    assert m.seen_shapes == {(1, 501)}
    # A step of the same groups in another order is the same shape; one more cached position is a new one.
    assert m.time((Seqs(1, 1, 500),)) == again
    assert m.time((Seqs(1, 1, 501),)) == pytest.approx(plain.time((Seqs(1, 1, 501),)) + 1e-3, rel=1e-12)
    # The shape is the step's totals, as the dense kernel sees them: two decodes after 250 and 251 cached are 2
    # query tokens over 503 positions.
    assert StepModel.shape({(1, 250): 1, (1, 251): 1}) == (2, 503)
    # Asked explicitly, a step pays or not as told and nothing is recorded.
    fresh = StepModel(base(), H100, stack=stack(new_shape_us=1000.0))
    assert fresh.time(step, new_shape=False) == pytest.approx(plain.time(step), rel=1e-12)
    assert fresh.time(step, new_shape=True) == pytest.approx(first, rel=1e-12)
    assert fresh.seen_shapes == set()


def test_the_position_cost_and_the_attention_efficiency():
    # 3 decodes after 999 cached: 3,000 positions × 32 layers × 10 ns, and the attention op's time doubled.
    counts = {(1, 999): 3}
    plain = StepModel(base(), H100)
    other, attention, kernels, layers = plain.op_times(counts)
    m = StepModel(base(), H100, stack=stack(kv_position_ns=10.0, attention_efficiency=0.5, kernel_gap_us=2.0))
    assert m.time_counts(counts) == pytest.approx(other + attention / 0.5 + 3000 * 32 * 10e-9 + kernels * 2e-6,
                                                  rel=1e-12)
    assert (layers, kernels) == (32, 15 * 32 + 3)


def test_the_collective_efficiency_divides_the_collectives_alone():
    # TP 2: a step's all-reduces (two a layer, and the logits' gather) take twice their time at the link's roof at
    # an efficiency of 0.5; every other op keeps its own.
    counts = {(1, 999): 3, (200, 0): 1}
    layout = Layout(2)
    plain = StepModel(base(), H100, layout=layout)
    rest, _ = plain.step_ops(counts)
    collectives = sum(place(op, H100.roofs()).total_time_s for op in rest if op.kind == "communication")
    assert collectives > 0 and sum(op.count for op in rest if op.kind == "communication") >= 2 * 32
    other, attention, _, _ = plain.op_times(counts)
    m = StepModel(base(), H100, layout=layout, stack=stack(collective_efficiency=0.5))
    assert m.time_counts(counts) == pytest.approx(other + collectives + attention, rel=1e-12)
    assert StepModel(base(), H100, stack=stack(collective_efficiency=0.5)).time_counts(counts) == pytest.approx(
        sum(StepModel(base(), H100).op_times(counts)[:2]), rel=1e-12)  # one GPU: no collective to slow


def test_the_default_stack_is_still_the_engines_analysis():
    m = StepModel(base(), H100, stack=load_stack("roofline"))
    for step in [(Seqs(1, 1, 700),), (Seqs(3, 1, 40), Seqs(1, 300, 12))]:
        assert m.time(step) == pytest.approx(analyze(base().with_seqs(step), H100).totals.time_s, rel=1e-12)
        assert m.time(step) == pytest.approx(analyze(base().with_seqs(step), H100).totals.time_s, rel=1e-12)


def test_batch_dense_refuses_a_sliding_window():
    with pytest.raises(UserError, match="sliding-window"):
        StepModel(base("gemma-3-27b"), H100, stack=stack(attention="batch_dense"))


def test_the_hf_stack_is_its_fit():
    # stacks/hf.yaml holds what benchmarks/hf_cb_compare.py --fit gives on the records it names.
    import hf_cb_compare as compare

    runs = compare.load_runs(ROOT / "docs/results/h200-2026-12-04-serve")
    hf = load_stack("hf")
    fitted = compare.fit_stack(runs, set(compare.FIT_POINTS), str(ROOT / compare.GPU), hf)
    assert fitted == hf


def test_a_written_stack_is_its_fit():
    # --fit --write-stack FILE writes the fitted figures as a stack file that loads back with them; the H100 record
    # docs/results/h100-2026-12-05-serve/hf-h100-b.yaml is what it writes for that run's three Llama points.
    import hf_cb_compare as compare

    folder = "docs/results/h100-2026-12-05-serve"
    gpu = f"{folder}/calibrate-b/h100-calibrated.yaml"
    fit = {f"llama-b closed:{p}" for p in ("512:256:1:2", "2048:128:8:16", "2048:128:32:32")}
    fitted = compare.fit_stack(compare.load_runs(ROOT / folder), fit, str(ROOT / gpu), load_stack("hf"))
    assert fitted.kernel_gap_us != load_stack("hf").kernel_gap_us
    text = compare.stack_file(fitted, "hf-h100-b", [folder], fit, gpu)
    assert text == (ROOT / folder / "hf-h100-b.yaml").read_text()
    own = {"id", "name", "source", "notes"}
    assert load_stack(str(ROOT / folder / "hf-h100-b.yaml")).model_dump(exclude=own) == fitted.model_dump(exclude=own)


def test_a_fit_without_long_steps_is_refused():
    # The third H200 machine's two concurrency-1 points leave the attention's share unconstrained (it fits
    # negative): the fit stops with one line rather than write a stack with a negative efficiency.
    import hf_cb_compare as compare

    runs = compare.load_runs(ROOT / "docs/results/h200-2026-12-05-serve")
    fit = {"c8 closed:512:256:1:2", "c8 closed:2048:128:1:2"}
    with pytest.raises(SystemExit, match="leave the attention's time unconstrained"):
        compare.fit_stack(runs, fit, str(ROOT / compare.GPU), load_stack("hf"))


def test_the_slow_steps_table_counted_by_hand():
    # Ten decode steps of new shapes at 10, 10, 10, 10, 10, 14, 14, 14, 10 and 40 ms: median 10 ms; 40 ms is over
    # OUTLIER (3) times it, a stall, left out; the three 14 ms steps are over SLOW (1.3) times it, one run of three.
    # Mean of the nine: (6 × 10 + 3 × 14) / 9 = 11.33 ms; without the slow ones 10 ms.
    import hf_cb_compare as compare

    times = [10, 10, 10, 10, 10, 14, 14, 14, 10, 40]
    rows, t = [], 0.0
    for i, ms in enumerate(times):
        rows.append([t, t, t, t, t + ms / 1e3, 0.0, 8, 8, 4096 + 8 * i, 0, 8, [[1, 512 + i, 8]]])
        t += ms / 1e3
    point = {"point": "closed:512:256:8:8", "prompt": 512, "output": 256, "requests": 8,
             "load": {"kind": "concurrency", "concurrency": 8}, "steps": [0, len(rows)]}
    lines = compare.slow_table([("run", {"points": [point]}, rows)])
    assert lines[2] == "| 512/256, C=8, 8 requests (run) | new | 9 | 10.00 | 11.33 | 3 | 14.00 | 3 | 10.00 |"
    assert len(lines) == 4 and lines[3] == ""


def test_the_sequence_cost_and_the_request_latency():
    # 3 decodes and a 40-token prompt: 4 sequences, so a step costs 4 × 7 µs more than without the cost.
    step = (Seqs(3, 1, 200), Seqs(1, 40, 0))
    plain = StepModel(base(), H100, stack=stack()).time(step, new_shape=False)
    costed = StepModel(base(), H100, stack=stack(sequence_overhead_us=7.0)).time(step, new_shape=False)
    assert costed - plain == pytest.approx(4 * 7e-6, rel=1e-9)
    # The latency between engine and client moves every token a request's client sees, not the engine's steps:
    # TTFT and E2E grow by it, TPOT and the run's duration do not.
    from rooflinectl.serving.kvcache import BlockPool
    from rooflinectl.serving.load import Lengths, closed_loop
    from rooflinectl.serving.scheduler import SchedulerConfig
    from rooflinectl.serving.simulate import simulate

    load = closed_loop(3, 9, Lengths("fixed", 300), Lengths("fixed", 20))
    runs = [simulate(load, StepModel(base(), H100, stack=stack(request_latency_us=us)), BlockPool(2000, 16),
                     SchedulerConfig()) for us in (0.0, 2500.0)]
    assert runs[1].duration_s == runs[0].duration_s and runs[1].steps == runs[0].steps
    for a, b in zip(runs[0].served, runs[1].served):
        assert b.ttft_s == pytest.approx(a.ttft_s + 2.5e-3, rel=1e-12)
        assert b.e2e_s == pytest.approx(a.e2e_s + 2.5e-3, rel=1e-12)
        assert b.tpot_s == pytest.approx(a.tpot_s, rel=1e-9)
    # The stream's lag moves them by that many of the request's own TPOT in the engine, (E2E − TTFT) / 19 here,
    # beside the latency: 2.5 ms + 1.5 × TPOT.
    lagged = simulate(load, StepModel(base(), H100, stack=stack(request_latency_us=2500.0, stream_lag_steps=1.5)),
                      BlockPool(2000, 16), SchedulerConfig())
    assert lagged.duration_s == runs[0].duration_s
    for a, b in zip(runs[0].served, lagged.served):
        assert a.tpot_s is not None and b.tpot_s == pytest.approx(a.tpot_s, rel=1e-9)
        assert b.ttft_s == pytest.approx(a.ttft_s + 2.5e-3 + 1.5 * a.tpot_s, rel=1e-12)
        assert b.e2e_s == pytest.approx(a.e2e_s + 2.5e-3 + 1.5 * a.tpot_s, rel=1e-12)
    # A request of one token has no interval between tokens: the latency alone.
    from rooflinectl.serving.simulate import delivery_delay

    assert delivery_delay((0.25,), stack(request_latency_us=2500.0, stream_lag_steps=4.0)) == 2.5e-3
    assert delivery_delay((0.25, 0.5), None) == 0.0


def test_a_refill_that_comes_late_waits_for_the_next_step():
    # Two clients, prompts of 300: request 0 makes 3 tokens, request 1 eight; request 0's client then sends request
    # 2. Steps: 1 prefills both; 2 and 3 decode both (request 1 at 300 and 301 cached positions); request 0 ends
    # with step 3. Sent at once, request 2 is prefilled in step 4 beside request 1's decode at 302: its TTFT is
    # that step. Reaching the engine 100 µs later, step 4 has already started without it: step 4 decodes request
    # 1 alone, step 5 prefills request 2 beside request 1 at 303, and its TTFT is both steps less the 100 µs.
    from rooflinectl.serving.kvcache import BlockPool
    from rooflinectl.serving.load import Load, Request
    from rooflinectl.serving.scheduler import SchedulerConfig
    from rooflinectl.serving.simulate import simulate

    load = Load("concurrency", (Request(0, 0.0, 300, 3), Request(1, 0.0, 300, 8), Request(2, 0.0, 300, 4)),
                concurrency=2)
    now = StepModel(base(), H100, stack=stack())
    late = StepModel(base(), H100, stack=stack(refill_latency_us=100.0))
    (sent,) = [s for s in simulate(load, now, BlockPool(2000, 16), SchedulerConfig()).served if s.request.id == 2]
    (waited,) = [s for s in simulate(load, late, BlockPool(2000, 16), SchedulerConfig()).served
                 if s.request.id == 2]
    assert sent.ttft_s == pytest.approx(now.time((Seqs(1, 1, 302), Seqs(1, 300)), new_shape=False), rel=1e-12)
    assert waited.ttft_s == pytest.approx(late.time((Seqs(1, 1, 302),), new_shape=False)
                                          + late.time((Seqs(1, 1, 303), Seqs(1, 300)), new_shape=False) - 1e-4,
                                          rel=1e-12)


def test_the_torch_stack_is_its_fit():
    # stacks/torch.yaml's gap is what benchmarks/torch_stack.py fits to the whole-step records it names, and the
    # step model prices those steps as the calibrated prediction plus one gap per kernel the record launched.
    import torch_stack

    folder = ROOT / "docs/results/h200-2026-12-03-workload"
    rows = torch_stack.records(folder)
    assert len(rows) == 15
    torch = load_stack("torch")
    assert torch.kernel_gap_us == round(torch_stack.fit_gap_us(rows), 2)
    gpu = load_gpu(str(folder / "h200-calibrated.yaml"))
    command, _, predicted, kernels = rows[3]
    assert command.endswith("decode --model llama-3-8b --batch 16 --context 4096")
    step = (Seqs(16, 1, 4095),)
    plain = StepModel(base(), gpu, calibrated=True).time(step)
    assert plain == pytest.approx(predicted, rel=1e-9)
    priced = StepModel(base(), gpu, calibrated=True, stack=torch).time(step, new_shape=False)
    assert priced == pytest.approx(predicted + kernels * torch.kernel_gap_us / 1e6, rel=1e-9)


def test_serve_names_the_collective_efficiency(tmp_path):
    """A stack's collective efficiency is printed among its costs, and slows a TP run's steps by its collectives'
    share alone: the same load on one GPU is not slowed."""
    from helpers import cli

    path = tmp_path / "slow-links.yaml"
    path.write_text("id: slow-links\nname: slow links\nsource: this test\ncollective_efficiency: 0.25\n")
    args = ["analyze", "serve", "--gpu", "h100", "--model", "llama-3-8b", "--concurrency", "2", "--prompt", "300",
            "--output", "8", "--requests", "4"]
    out = cli(*args, "--tp", "2", "--stack", str(path))
    assert out.exit_code == 0, out.output
    assert "collectives at 25% of the link's rate" in " ".join(out.stdout.split())
    for layout in (["--tp", "2"], []):
        slow = json.loads(cli(*args, *layout, "--stack", str(path), "--json").stdout)["tpot_s"]["mean"]
        plain = json.loads(cli(*args, *layout, "--stack", "roofline", "--json").stdout)["tpot_s"]["mean"]
        assert (slow > plain) if layout else (slow == plain)


def test_serve_says_whose_family_figures_priced_the_run(tmp_path):
    """On a GPU of a family the stack lists, the run's stack line and its JSON name that family and carry its
    figures; on another GPU they are the stack's own."""
    from helpers import cli

    path = tmp_path / "fam.yaml"
    path.write_text("id: fam\nname: fam\nsource: this test\nkernel_gap_us: 1\n"
                    "families:\n  '9': {kernel_gap_us: 7}\n")
    args = ["analyze", "serve", "--model", "llama-3-8b", "--concurrency", "2", "--prompt", "300", "--output", "8",
            "--requests", "4", "--stack", str(path)]
    out = cli(*args, "--gpu", "h100")
    assert out.exit_code == 0, out.output
    assert "stack fam (its figures for compute capability 9.x):" in " ".join(out.stdout.split())
    hopper = json.loads(cli(*args, "--gpu", "h100", "--json").stdout)["stack"]
    ampere = json.loads(cli(*args, "--gpu", "a100-80gb", "--json").stdout)["stack"]
    assert (hopper["family"], hopper["kernel_gap_us"], "families" in hopper) == ("9", 7, False)
    assert (ampere["family"], ampere["kernel_gap_us"]) == (None, 1)
