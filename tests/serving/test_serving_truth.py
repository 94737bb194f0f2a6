"""benchmarks/serving_truth.py without the published runs: a row's quantization maps to dtypes or is refused, and
a recorded run re-priced under a stack is that stack's simulation."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

import rooflinectl as rl

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "serving_truth.py"
spec = importlib.util.spec_from_file_location("serving_truth", SCRIPT)
assert spec is not None and spec.loader is not None
st = importlib.util.module_from_spec(spec)
sys.modules["serving_truth"] = st  # its dataclasses look their module up
spec.loader.exec_module(st)


@pytest.mark.parametrize(("gemm", "moe", "experts", "fp4", "expected"), [
    ("", "", False, True, {}),
    ("fp8", "fp8", False, False, {"weight_dtype": "fp8", "act_dtype": "fp8"}),
    ("fp8", "fp8_block", True, True, {"weight_dtype": "fp8_block", "act_dtype": "fp8"}),
    ("fp8", "fp8_block", False, True, {"weight_dtype": "fp8", "act_dtype": "fp8"}),
    ("nvfp4", "nvfp4", True, True, {"weight_dtype": "nvfp4", "act_dtype": "fp4", "kv_dtype": "fp8"}),
    ("nvfp4", "nvfp4", True, False, {"weight_dtype": "nvfp4", "kv_dtype": "fp8"}),
])
def test_a_rows_quantization_maps_to_dtypes(gemm, moe, experts, fp4, expected):
    assert st.quant_options(gemm, moe, experts, fp4) == expected


@pytest.mark.parametrize(("gemm", "moe"), [("int4_wo", "int4_wo"), ("fp8", "w4a16_mxfp4"), ("mxfp8", "")])
def test_an_unknown_quantization_is_skipped_by_name(gemm, moe):
    with pytest.raises(st.Skip, match="not mapped"):
        st.quant_options(gemm, moe, True, True)


def _row(**over):
    row = {"id": "r1", "mode": "agg", "ep_effective": "1", "attention_dp_size": "1", "backend": "vllm",
           "system": "h100_sxm", "model_path": "Qwen/Qwen3-32B", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8",
           "silicon_tpot_ms": "20", "silicon_ttft_ms": "100", "tp_effective": "2", "concurrency": "8", "isl": "1024",
           "osl": "128"}
    return {**row, **over}


def test_a_row_becomes_serves_options():
    case = st.case_of(_row())
    assert case.options == dict(gpu="h100-sxm", model="qwen3-32b", tp=2, concurrency=8, prompt=1024, output=128,
                                requests=64, max_num_seqs=8, max_num_batched_tokens=2048, weight_dtype="fp8",
                                act_dtype="fp8")
    # The experts over the TP GPUs: --tp E --ep E; SGLang's steps apart.
    moe = st.case_of(_row(model_path="Qwen/Qwen3-235B-A22B-FP8", backend="sglang", tp_effective="8",
                          ep_effective="8", gemm_quant_mode="fp8_block", moe_quant_mode="fp8_block"))
    assert moe.options == dict(gpu="h100-sxm", model="qwen3-235b-a22b", tp=8, ep=8, concurrency=8, prompt=1024,
                               output=128, requests=64, max_num_seqs=8, prefill_steps="separate",
                               weight_dtype="fp8_block", act_dtype="fp8")
    # TensorRT-LLM as ai-dynamo/aiconfigurator configures it: 8 + 1,024 + 1,500 = 2,532 tokens a step, rounded up
    # to the 32-token block, 2,560, and no chunked prefill.
    trt = st.case_of(_row(backend="trtllm"))
    assert (trt.budget, trt.chunked) == (2560, False)
    assert trt.options == dict(case.options, max_num_batched_tokens=2560, chunked_prefill=False)
    # A data-parallel rank's batch is its own (serving_truth_dp.py): 2 + 1,024 + 1,500 → 2,528.
    assert dataclasses.replace(trt, batch=2).budget == 2528


@pytest.mark.parametrize(("over", "reason"), [({"mode": "disagg"}, "mode disagg"), ({"ep_effective": "8"}, "expert"),
                                              ({"model_path": "MiniMaxAI/MiniMax-M2.5"}, "no bundled model"),
                                              ({"ep_effective": "4"}, "other GPUs than the TP's"),
                                              ({"tp_effective": "1", "ep_effective": "8"}, "data-parallel attention"),
                                              ({"attention_dp_size": "8"}, "data-parallel attention"),
                                              ({"gemm_quant_mode": "int4_wo"}, "int4_wo not mapped")])
def test_a_row_that_cannot_be_simulated_says_why(over, reason):
    with pytest.raises(st.Skip, match=reason):
        st.case_of(_row(**over))


@pytest.mark.parametrize(("model", "backend", "ep"), [("llama-3-8b", "vllm", 1), ("deepseek-v3", "vllm", 1),
                                                     ("llama-3-8b", "sglang", 1), ("deepseek-v3", "trtllm", 8)])
def test_a_recorded_run_repriced_under_a_stack_is_that_stacks_simulation(tmp_path, model, backend, ep):
    """The replay the fit rests on: the steps recorded once with a unit clock, each priced from StepModel.step_ops
    under the efficiencies and the stack's linear figures, give api.serve's own mean TTFT and TPOT under that
    stack (a dense model, and MLA, whose ops other than attention are keyed by its groups; SGLang's steps apart;
    the experts spread over the TP GPUs). The figures are the GPU family's (the stack's own are decoys): the
    replay prices a family's rows with its figures, as api.serve does on a GPU of that family."""
    gpu, tp = ("h100-sxm", 2) if model == "llama-3-8b" else ("b200", 8)
    case = st.Case(id="t", backend=backend, system="h100_sxm", model=model, gpu=gpu, tp=tp, ep=ep,
                   concurrency=3, isl=700, osl=40, dtypes=(("act_dtype", "fp8"), ("weight_dtype", "fp8")),
                   tpot_ms=1.0, ttft_ms=1.0, fit=True)
    b, c, attention, collective = 0.7, 0.45, 0.8, 0.6
    figures = {"kernel_gap_us": 3.5, "step_overhead_us": 120.0, "sequence_overhead_us": 9.0, "kv_position_ns": 2.5,
               "request_latency_us": 4000.0}
    lag = 2.5  # the stream's lag, steps of each request's TPOT
    family = st.family(gpu)
    assert family == {"h100-sxm": "9", "b200": "10"}[gpu]
    path = tmp_path / "mine.yaml"
    path.write_text("id: mine\nname: mine\nsource: a test\nkernel_gap_us: 90\nbandwidth_efficiency: 0.3\n"
                    f"fused: [{', '.join(st.FUSED)}]\nfamilies:\n  '{family}':\n"
                    + "".join(f"    {k}: {v}\n" for k, v in figures.items())
                    + f"    bandwidth_efficiency: {b}\n    compute_efficiency: {c}\n"
                    f"    attention_efficiency: {attention}\n    collective_efficiency: {collective}\n"
                    f"    stream_lag_steps: {lag}\n")
    x = (*(figures[k] for k in st.UNKNOWNS[:-st.EXTRAS]), 1 / attention - 1, 1 / collective - 1)
    zero = (0.0,) * len(st.UNKNOWNS)
    for stack, fused, point in ((str(path), st.FUSED, (b, c, x, lag)), ("roofline", (), (1.0, 1.0, zero, 0.0))):
        model_ = st.step_model(case, fused)
        steps = st.record(case, model_)
        ttft, tpot = st.linear_of(case, steps, model_, [point[:2]]).at(*point)
        got = rl.serve(stack=stack, **case.options).run
        assert got.steps == len(steps.steps)
        assert got.ttft is not None and got.tpot is not None
        assert ttft == pytest.approx(got.ttft.mean * 1e3, rel=1e-9)
        assert tpot == pytest.approx(got.tpot.mean * 1e3, rel=1e-9)


def test_a_recorded_run_holds_a_sliding_models_kv_as_serve_does():
    """gpt-oss-120b (a window of 128 on 18 of its 36 layers) on one H100, 48 clients of 6,000 + 1,000 tokens: the
    cache overflows, so the replay's steps are api.serve's only where its pool charges a request's blocks as
    api.serve's does, the sliding layers their window alone (serving.kvcache; every layer's blocks preempted 459
    times in 9,057 steps)."""
    case = st.Case(id="t", backend="vllm", system="h100_sxm", model="gpt-oss-120b", gpu="h100-sxm", tp=1, ep=1,
                   concurrency=48, isl=6000, osl=1000, dtypes=(), tpot_ms=1.0, ttft_ms=1.0, fit=True)
    model = st.step_model(case, ())
    steps = st.record(case, model)
    ttft, tpot = st.linear_of(case, steps, model, [(1.0, 1.0)]).at(1.0, 1.0, (0.0,) * len(st.UNKNOWNS), 0.0)
    got = rl.serve(stack="roofline", **case.options).run
    assert (got.preemptions, got.steps, got.kv_blocks) == (778, 9081, 20_207)
    assert got.steps == len(steps.steps)
    assert got.ttft is not None and got.tpot is not None
    assert ttft == pytest.approx(got.ttft.mean * 1e3, rel=1e-9)
    assert tpot == pytest.approx(got.tpot.mean * 1e3, rel=1e-9)
    # Not represented: the cache is 20,207 blocks of 16 positions of 18 layers, 589,824 B each; one client's 7,000
    # positions are (18 · 7,000 + 18 · 128) · 2,048 B as analyze counts them, and 48 of those do not fit.
    cache, sequence = st.kv_room(case)
    assert (cache, sequence) == (20_207 * 16 * 18 * 2048, (18 * 7000 + 18 * 128) * 2048)
    assert st.Result(case, kv_room=(cache, sequence)).kv_bound


def test_the_fit_recovers_the_figures_it_was_made_with():
    """Rows whose measured means are a stack's own predictions are fitted back to that stack's figures."""
    grid = [(b, c) for b in st.BANDWIDTH_GRID for c in st.COMPUTE_GRID]
    truth = (2.0, 40.0, 6.0, 1.5, 3000.0, 0.25, 0.5)  # UNKNOWNS: µs, µs, µs, ns, µs, then 1/0.8 − 1, 1/(2/3) − 1
    lag = 3.0  # steps, one of LAG_GRID
    lins, cases = [], []
    for i in range(8):
        # memory-bound parts over b, compute-bound ones over c, attention apart: no two alike across the rows
        ops = {(b_, c_): ((1 + i) * 0.01 / b_ + 0.002 * (1 + i % 3) ** 2 / c_, (1 + i) * 0.001 / b_ + 1e-4 * i / c_)
               for b_, c_ in grid}
        attn = {(b_, c_): (0.003 * (i % 4) / b_, 0.0004 * (1 + i % 2) / b_) for b_, c_ in grid}
        coll = {(b_, c_): (0.002 * (i % 3), 0.0003 * (i % 5)) for b_, c_ in grid}  # the link's: no b, no c
        columns = ((800.0 * (i + 2), 10.0 * (i + 1), 30.0 * (i + 1) ** 2, 5e5 * (i + 1) ** 2, 1.0),
                   (600.0 + 40 * i, 1.0, 4.0 + i, 2e5 * (i + 3), 0.0))
        lin = st.Linear(ops, attn, coll, columns)
        ttft, tpot = lin.at(0.8, 0.6, truth, lag)
        lins.append(lin)
        cases.append(st.Case(id=str(i), backend="vllm", system="h100_sxm", model="llama-3-8b", gpu="h100-sxm", ep=1,
                             tp=1, concurrency=1, isl=1, osl=2, dtypes=(), tpot_ms=tpot, ttft_ms=ttft, fit=True))
    f = st.fit_backend("vllm", lins, cases)
    assert (f.bandwidth_efficiency, f.compute_efficiency, f.stream_lag_steps) == (0.8, 0.6, lag)
    assert f.unknowns == pytest.approx(truth, rel=1e-2)

    assert f.tpot_mape < 0.1 and f.ttft_mape < 0.1


def test_nnls_is_the_best_non_negative_solution():
    """Lawson and Hanson's method against every subset of the columns solved unconstrained (the definition)."""
    import itertools

    import numpy as np

    rng = np.random.default_rng(4)
    for _ in range(20):
        a, y = rng.normal(size=(30, 4)), rng.normal(size=30)
        x = st.nnls(a, y)
        assert (x >= 0).all()
        best = float(y @ y)
        for k in range(1, 5):
            for cols in itertools.combinations(range(4), k):
                z, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
                if (z >= 0).all():
                    best = min(best, float(np.sum((a[:, cols] @ z - y) ** 2)))
        assert float(np.sum((a @ x - y) ** 2)) == pytest.approx(best, rel=1e-9)


def test_the_campaign_table_groups_rows_by_version_month_and_model():
    """A row's campaign is its engine version and month ("?" where the data leaves them out); the table gives each
    campaign's errors, the largest first: here 10% and 30% TTFT errors (MAPE 20%, median ratio 0.90) against one
    row at 50%."""
    first = st.case_of(_row(backend_version="0.12.0", measured="2026-01-05"))
    assert (first.campaign, st.case_of(_row()).campaign) == ("0.12.0, 2026-01", "?, ?")
    rows = []
    for i, (ttft, tpot, campaign) in enumerate(((110.0, 20.0, "a"), (70.0, 22.0, "a"), (150.0, 20.0, "b"))):
        case = st.Case(id=str(i), backend="vllm", system="h100_sxm", model="qwen3-32b", gpu="h100-sxm", tp=1, ep=1,
                       concurrency=1, isl=1, osl=2, dtypes=(), tpot_ms=20.0, ttft_ms=100.0, fit=False,
                       campaign=campaign)
        rows.append(st.Result(case, {"stack": (ttft, tpot)}))
    lines = st.by_campaign(rows, "stack")
    assert lines[2:] == ["| vLLM | h100-sxm | a | qwen3-32b | 2 | 5.0% | 20.0% | 0.90 |",
                         "| vLLM | h100-sxm | b | qwen3-32b | 1 | 0.0% | 50.0% | 1.50 |"]


def test_the_cache_key_follows_the_code_and_specs_alone(tmp_path):
    """The fingerprint in every --cache key changes with a source or spec file's contents or name under the
    package, hardware/ or workloads/, and not with docs, compiled files or the stacks (priced apart)."""
    fingerprint = st.code_fingerprint.__wrapped__
    for name, text in (("rooflinectl/engine/a.py", "x = 1\n"), ("hardware/h.yaml", "id: h\n"),
                       ("workloads/models/m.yaml", "id: m\n"), ("docs/d.md", "d\n"), ("stacks/s.yaml", "id: s\n")):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    base = fingerprint(tmp_path)
    (tmp_path / "docs/d.md").write_text("changed\n")
    (tmp_path / "stacks/s.yaml").write_text("id: t\n")
    (tmp_path / "rooflinectl/engine/a.cpython-311.pyc").write_bytes(b"\0")
    assert fingerprint(tmp_path) == base
    (tmp_path / "hardware/h.yaml").write_text("id: h2\n")
    changed = fingerprint(tmp_path)
    (tmp_path / "hardware/h.yaml").rename(tmp_path / "hardware/g.yaml")
    assert len({base, changed, fingerprint(tmp_path)}) == 3


@pytest.mark.parametrize("argv", [["--swap-halves"], ["--fit", "--swap-halves", "--write-stacks"]])
def test_the_other_half_is_fitted_only_to_report(argv):
    """--swap-halves fits on the odd half to show what the split does; it never writes the stacks, which are the
    even half's."""
    with pytest.raises(SystemExit) as e:
        st.main(argv)
    assert e.value.code == 2
