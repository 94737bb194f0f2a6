"""engine.calibrated: the calibrated op model's arithmetic, pinned to numbers worked out by hand here; its fit; and
``analyze --calibrated`` timing a step by it, end to end (the decode series' affine fast path included).

The model (engine/calibrated.py's docstring): inside a curve, linear interpolation of the measured time over the
roofline time; beyond an end point (r, m), t = m + s·(t_roof − r) with s the end segment's slope kept within
[1, m / r]; a one-point curve's ratio m / r everywhere; never under the launch floor.
"""

from __future__ import annotations

import json
from typing import get_args

import pytest
from op_model_example import (
    CALIBRATED,
    EXAMPLE,
    LAUNCH_FLOOR_S,
    add_op,
    decode_attention,
    fitted,
    llama_attention,
)

from helpers import assert_one_line_error, cli
from rooflinectl.engine.calibrated import OP_CLASS, curve_time, fit, op_class, predict_time, read_curve
from rooflinectl.engine.count.op import Op, OpKind
from rooflinectl.engine.count.primitives import matmul_op
from rooflinectl.engine.generate import Request, generate, step_workload
from rooflinectl.engine.roofline import analyze
from rooflinectl.specs.hardware import Roofs, load_gpu, load_gpu_file
from rooflinectl.specs.measured import OpCurve, OpModel, OpPoint
from rooflinectl.specs.scenario import resolve_workload

US = 1e-6


def curve(*points: tuple[float, float], op_class="memory", bound="memory") -> OpCurve:
    """A curve from (roof µs, measured µs) pairs."""
    return OpCurve(op_class=op_class, bound=bound,
                   points=[OpPoint(label=f"p{i}", roof_s=r * US, measured_s=m * US) for i, (r, m) in enumerate(points)])


def model(*curves: OpCurve, floor_us: float = 0.5) -> OpModel:
    return OpModel(launch_floor_s=floor_us * US, grid="test", timer="cuda_graph", curves=list(curves))


def at(c: OpCurve, roof_us: float, floor_us: float = 0.5) -> float:
    """The model's time in µs at a roofline time in µs, for an op of the curve's own class and bound."""
    return curve_time(c.op_class, c.bound, roof_us * US, model(c, floor_us=floor_us)).time_s / US


# --- the arithmetic -------------------------------------------------------------------------------------------

TWO = curve((1, 3), (10, 12))  # slope (12 − 3) / (10 − 1) = 1; ratios 3 and 1.2


def test_on_the_points_the_measured_times():
    assert at(TWO, 1) == pytest.approx(3, rel=1e-12)
    assert at(TWO, 10) == pytest.approx(12, rel=1e-12)


def test_between_points_linear_in_roofline_time():
    """3.1623 µs (the geometric mean of 1 and 10): 3 + 9·(3.1623 − 1)/9 = 5.1623 µs. A log-log interpolation would
    give √(3·12) = 6 µs; the model is linear because times are a fixed cost plus a rate (engine/calibrated.py)."""
    assert at(TWO, 3.1623) == pytest.approx(5.1623, rel=1e-12)
    assert at(TWO, 5.5) == pytest.approx(3 + 4.5, rel=1e-12)


def test_below_the_first_point_the_first_segment_carried_on_then_the_floor():
    """Slope 1 (within [1, ratio 3]): 3 − (1 − 0.5) = 2.5 µs at 0.5; 3 − 0.9 = 2.1 at 0.1; with a floor of
    2.2 µs, 2.2."""
    assert at(TWO, 0.5) == pytest.approx(2.5, rel=1e-12)
    assert at(TWO, 0.1) == pytest.approx(2.1, rel=1e-12)
    assert at(TWO, 0.1, floor_us=2.2) == pytest.approx(2.2, rel=1e-12)


def test_above_the_last_point_the_last_segment_carried_on():
    """Slope 1 (within [1, ratio 1.2]): 12 + (20 − 10) = 22 µs."""
    assert at(TWO, 20) == pytest.approx(22, rel=1e-12)


def test_a_slope_under_one_is_taken_as_one():
    """(1 → 3), (2 → 3.5): slope 0.5, taken as 1 (no op gains on the roof at the margin): 3 − 0.5 = 2.5 µs at 0.5;
    3.5 + 2 = 5.5 µs at 4 (the last ratio, 1.75, is above 1)."""
    shallow = curve((1, 3), (2, 3.5))
    assert at(shallow, 0.5) == pytest.approx(2.5, rel=1e-12)
    assert at(shallow, 4) == pytest.approx(5.5, rel=1e-12)


def test_a_slope_above_the_end_ratio_is_taken_as_the_ratio():
    """(1 → 1.2), (2 → 4): slope 2.8. Above, the last ratio 2: 4 + 2·1 = 6 µs at 3 (= 3 × 2). Below, the first
    ratio 1.2: 1.2 − 1.2·0.5 = 0.6 µs at 0.5 (= 0.5 × 1.2), over the 0.1 µs floor; never a negative fixed cost."""
    steep = curve((1, 1.2), (2, 4))
    assert at(steep, 3) == pytest.approx(6, rel=1e-12)
    assert at(steep, 0.5, floor_us=0.1) == pytest.approx(0.6, rel=1e-12)


def test_a_one_point_curve_is_its_ratio_everywhere_floored():
    """(2 → 5): ratio 2.5: 10 µs at 4, 2.5 at 1; 0.25 at 0.1 is under the 1 µs floor: 1."""
    one = curve((2, 5))
    assert at(one, 4) == pytest.approx(10, rel=1e-12)
    assert at(one, 1) == pytest.approx(2.5, rel=1e-12)
    assert at(one, 0.1, floor_us=1) == pytest.approx(1, rel=1e-12)


def test_three_points_pick_the_segment_the_time_falls_in():
    """(1 → 3), (2 → 5), (4 → 6): 3 + 2·0.5 = 4 µs at 1.5; 5 + 1·(3 − 2)/2 = 5.5 µs at 3."""
    c = curve((1, 3), (2, 5), (4, 6))
    assert read_curve(c.points, 1.5 * US) / US == pytest.approx(4, rel=1e-12)
    assert read_curve(c.points, 3 * US) / US == pytest.approx(5.5, rel=1e-12)


def test_a_missing_bound_falls_back_to_the_other_bound_of_its_class_and_says_so():
    m = model(curve((1, 3), (10, 12), op_class="gemm", bound="memory"))
    t = curve_time("gemm", "compute", 5 * US, m)
    assert t.time_s / US == pytest.approx(3 + 4, rel=1e-12)
    assert t.note == "no compute-bound curve for gemm, so its memory-bound one"
    assert "the calibrated gemm memory-bound curve (2 points)" in t.describe()


def test_a_missing_class_is_roofline_time_plus_the_floor_and_says_so():
    m = model(curve((1, 3), op_class="gemm", bound="memory"), floor_us=1.5)
    t = curve_time("attention", "memory", 4 * US, m)
    assert t.time_s / US == pytest.approx(4 + 1.5, rel=1e-12)
    assert t.curve is None
    assert t.note == "no calibrated curve for attention: roofline time plus the launch floor"


# --- predict_time on engine ops ------------------------------------------------------------------------------

ROOFS = Roofs(gpu_id="test", label="measured", bandwidth_gbps=1000, tensor_tflops={"bf16": 500},
              vector_tflops={"fp32": 50})


def test_predict_time_reads_the_ops_own_class_and_bound():
    """A 1×4096×4096 bf16 GEMV moves 2·(4096·4096 + 4096 + 4096) = 33,570,816 B: 33.570816 µs at 1,000 GB/s
    (2·4096² FLOPs at 500 TFLOP/s take 0.067 µs: memory-bound). On a gemm memory-bound curve (10 → 20), (40 → 50):
    20 + (33.570816 − 10) = 43.570816 µs, and no note."""
    op = matmul_op("q", 1, 4096, 4096, "bf16")
    assert op.bytes == 33_570_816
    m = model(curve((10, 20), (40, 50), op_class="gemm", bound="memory"))
    t, note = predict_time(op, m, ROOFS)
    assert t / US == pytest.approx(43.570816, rel=1e-12)
    assert note is None


def test_predict_time_notes_a_fallback():
    """c = a + b over 2²⁰ fp32 elements: 12,582,912 B, 12.582912 µs at 1,000 GB/s; no residual curve: + 0.5."""
    t, note = predict_time(add_op(2**20), model(curve((1, 2), op_class="gemm")), ROOFS)
    assert t / US == pytest.approx(12.582912 + 0.5, rel=1e-12)
    assert note == "no calibrated curve for residual: roofline time plus the launch floor"


@pytest.mark.parametrize("kind", get_args(OpKind))
def test_every_op_kind_but_communication_has_a_class(kind):
    op = Op(name="x", kind=kind, flops=1, bytes=1, unit="vector", dtype="fp32", reads="", writes="", computes="")
    expected = {"linear": "gemm", "matmul": "gemm", "expert": "gemm", "router": "gemm", "attention": "attention",
                "norm": "norm", "elementwise": "memory", "gather": "gather", "copy": "copy",
                "recurrent": "attention", "conv": "memory", "indexer": "attention", "communication": None}
    assert op_class(op) == expected[kind] == OP_CLASS.get(kind)


def test_an_elementwise_op_is_timed_by_its_own_operations_curve():
    """RoPE, the MLP's activation and the residual add run as different kernels (several eager ops, two, one):
    each its own class; another elementwise op (a bias add) is 'memory', read from the residual add's curve."""
    from rooflinectl.engine.count.transformer import step_ops
    from rooflinectl.specs.model import Model  # noqa: F401  (the engine's ops below come from a real step)
    from rooflinectl.specs.scenario import resolve_workload

    ops = {op.name: op for op in step_ops(resolve_workload("decode", model="llama-3-8b"))}
    assert [op_class(ops[n]) for n in ("rope", "act", "attn_residual", "mlp_residual", "attn_norm", "embed",
                                       "kv_write")] == ["rope", "activation", "residual", "residual", "norm",
                                                        "gather", "copy"]
    bias = Op(name="b", kind="elementwise", flops=1, bytes=4e6, unit="vector", dtype="fp32", reads="", writes="",
              computes="")
    m = model(curve((1, 3), (10, 12), op_class="residual"))
    t = curve_time(op_class(bias), "memory", 3.1623 * US, m)
    assert t.note == "no curve for memory, so the residual memory-bound one"
    assert t.time_s / US == pytest.approx(3 + 9 * (3.1623 - 1) / 9)


def test_a_collective_has_no_calibrated_time():
    op = Op(name="ar", kind="communication", flops=0, bytes=1, unit="vector", dtype="fp32", reads="", writes="",
            computes="", collective="all_reduce")
    with pytest.raises(ValueError, match="no class"):
        predict_time(op, model(curve((1, 2))), ROOFS)


# --- fit ----------------------------------------------------------------------------------------------------------


def test_fit_groups_sorts_and_merges():
    """Adds of 2¹⁸, 2¹⁶ and twice 2¹⁸ elements (3,145,728 B = 3.145728 µs, 786,432 B = 0.786432 µs at 1,000 GB/s)
    and one GEMV: the memory curve has two points in rising roof time, the equal ones merged into the median of
    2, 4 and 9 µs (4); the GEMV its own gemm memory-bound curve."""
    samples = [(add_op(2**18), 2e-6, "a"), (add_op(2**16), 1e-6, "b"), (add_op(2**18), 9e-6, "c"),
               (add_op(2**18), 4e-6, "d"), (matmul_op("q", 1, 4096, 4096, "bf16"), 50e-6, "gemv")]
    m = fit(samples, ROOFS, 1e-6, "grid", "cuda_graph")
    assert [(c.op_class, c.bound) for c in m.curves] == [("gemm", "memory"), ("residual", "memory")]
    mem = m.curve("residual", "memory")
    assert mem is not None
    assert [p.label for p in mem.points] == ["b", "a = c = d"]
    assert [p.roof_s / US for p in mem.points] == pytest.approx([0.786432, 3.145728], rel=1e-12)
    assert [p.measured_s for p in mem.points] == [1e-6, 4e-6]
    assert (m.launch_floor_s, m.grid, m.timer) == (1e-6, "grid", "cuda_graph")


def test_fit_refuses_a_sample_it_cannot_place_rather_than_dropping_it():
    ar = Op(name="ar", kind="communication", flops=0, bytes=1, unit="vector", dtype="fp32", reads="", writes="",
            computes="")
    with pytest.raises(ValueError, match="probe 'ar'"):
        fit([(add_op(2**16), 1e-6, "a"), (ar, 1e-6, "ar")], ROOFS, 1e-6, "g", "t")
    with pytest.raises(ValueError, match="not positive"):
        fit([(add_op(2**16), 0.0, "a")], ROOFS, 1e-6, "g", "t")


# --- the schema ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("edit, reason", [
    (lambda m: m["curves"][0].update(points=[]), "at least 1 item"),
    (lambda m: m["curves"][0]["points"][0].update(roof_s=0.0), "greater than or equal to 0.000000000001"),
    (lambda m: m["curves"][0]["points"][0].update(measured_s=-1e-6), "greater than or equal to 0.000000000001"),
    (lambda m: m["curves"][0]["points"][0].update(measured_s=5e-324), "greater than or equal to 0.000000000001"),
    (lambda m: m["curves"][0]["points"][0].update(roof_s=float("inf")), "finite"),
    (lambda m: m.update(launch_floor_s=0), "greater than or equal to 0.000000000001"),
    (lambda m: m["curves"][0]["points"].reverse(), "must rise strictly"),
    (lambda m: m["curves"].append(m["curves"][0]), "two attention memory-bound curves"),
    (lambda m: m["curves"][0].update(op_class="softmax"), "op_class"),
    (lambda m: m.update(curve=[]), "curve"),
])
def test_a_bad_op_model_is_one_line_and_exit_2(tmp_path, edit, reason):
    import yaml

    data = yaml.safe_load(EXAMPLE.read_text())
    edit(data["measured"]["op_model"])
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    assert_one_line_error(cli("analyze", "decode", "--gpu", str(bad), "--calibrated"), "bad.yaml", reason)


def test_an_op_model_needs_the_ceilings_it_was_fitted_under(tmp_path):
    import yaml

    data = yaml.safe_load(EXAMPLE.read_text())
    data["measured"] = {"op_model": data["measured"]["op_model"]}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    assert_one_line_error(cli("analyze", "decode", "--gpu", str(bad), "--calibrated"), "op_model needs the measured")


def test_the_op_model_round_trips_through_the_calibrate_writer(tmp_path):
    from rooflinectl.specs.write import write_measured

    measured = load_gpu_file(CALIBRATED).measured
    assert measured is not None
    with_model = measured.model_copy(update={"op_model": fitted()})
    written = write_measured(load_gpu("h200"), tmp_path / "my-h200.yaml", ceilings=measured, op_model=fitted())
    loaded = load_gpu_file(tmp_path / "my-h200.yaml")
    assert loaded == written
    assert loaded.measured == with_model
    assert loaded.measured is not None and loaded.measured.op_model == fitted()


def test_the_example_file_is_the_fit_of_its_probes():
    """docs/results/op-model-example/h200-issue14.yaml's op model is what engine.calibrated.fit makes of
    issue 14's figures (benchmarks/op_model_example.py), under its own calibrated roofs; its SDPA probe is the
    engine's own Llama-3-8B decode attention op."""
    mine, engine = decode_attention(1, 4096), llama_attention(1, 4096)
    assert (mine.kind, mine.flops, mine.bytes, mine.unit, mine.dtype, mine.kv_bytes) == (
        engine.kind, engine.flops, engine.bytes, engine.unit, engine.dtype, engine.kv_bytes)
    gpu = load_gpu_file(EXAMPLE)
    assert gpu.measured is not None and gpu.measured.op_model == fitted()
    roofs = gpu.roofs(calibrated=True)
    # The ratios: 7.9 µs at the copy ceiling for the GEMV; 73%, 43% and 17% for the adds; 3.9 µs for SDPA.
    m = gpu.measured.op_model
    gemv = m.curve("gemm", "memory")
    adds = m.curve("residual", "memory")
    sdpa = m.curve("attention", "memory")
    assert gemv is not None and adds is not None and sdpa is not None
    assert gemv.points[0].roof_s / US == pytest.approx(7.9, abs=0.01)
    assert [round(p.roof_s / p.measured_s, 2) for p in adds.points] == [0.17, 0.44, 0.73]
    assert sdpa.points[0].roof_s / US == pytest.approx(3.96, abs=0.005)
    assert roofs.bandwidth_gbps == 4245.5


# --- analyze --calibrated, end to end -----------------------------------------------------------------------------


def test_analyze_decode_by_the_op_model_end_to_end():
    """Llama-3-8B decode, batch 1, context 4,096, on the example file, by hand from its curves at 4,245.5 GB/s:
    - q_proj is the GEMV probe itself (33,570,816 B): 13.8 µs, × 32 layers;
    - attention is the SDPA probe itself (16,793,600 B): 12.0 µs, × 32;
    - gate_proj (117,477,376 B, 27.671 µs at the roof) on the one-point gemm memory curve: × 13.8 / 7.9074;
    - attn_norm (24,576 B: 5.79 ns at the roof) is under the first add (0.3705 µs → 2.2): the first segment's
      slope (3.4 − 2.2) / (1.4819 − 0.3705) = 1.0797 carries it to 2.2 − 1.0797·0.3647 = 1.806 µs, under the
      1.82 µs floor: 1.82 µs.
    The step is Σ predict_time × count over every op, and --json carries it."""
    bw = 4245.5e9
    ratio = 13.8e-6 / (33_570_816 / bw)
    result = cli("analyze", "decode", "--gpu", str(EXAMPLE), "--calibrated", "--model", "llama-3-8b", "--batch", "1",
                 "--context", "4096", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    ops = {o["name"]: o for o in data["ops"]}
    assert ops["q_proj"]["time_s"] == pytest.approx(13.8e-6, rel=1e-12)
    assert ops["attention"]["time_s"] == pytest.approx(12.0e-6, rel=1e-12)
    assert ops["gate_proj"]["time_s"] == pytest.approx(117_477_376 / bw * ratio, rel=1e-12)
    assert ops["gate_proj"]["roofline_time_s"] == pytest.approx(117_477_376 / bw, rel=1e-12)
    assert ops["attn_norm"]["time_s"] == pytest.approx(LAUNCH_FLOOR_S, rel=1e-12)
    assert ops["q_proj"]["time_model"] == "the calibrated gemm memory-bound curve (1 point)"

    gpu = load_gpu_file(EXAMPLE)
    assert gpu.measured is not None and gpu.measured.op_model is not None
    a = analyze(resolve_workload("decode", model="llama-3-8b", batch=1, context=4096), gpu, calibrated=True)
    roofs = gpu.roofs(calibrated=True)
    by_hand = sum(predict_time(p.op, gpu.measured.op_model, roofs)[0] * p.op.count for p in a.placements)
    assert data["totals"]["time_s"] == pytest.approx(by_hand, rel=1e-12)
    assert data["time_model"]["op_model"] is True
    assert data["time_model"]["roofline_time_s"] == pytest.approx(
        sum(o["roofline_time_s"] * o["count"] for o in data["ops"]), rel=1e-12)
    # The roofline's own placement is unchanged: bound and attainable rate as without the model.
    plain = analyze(a.workload, gpu.model_copy(update={"measured": gpu.measured.model_copy(
        update={"op_model": None})}), calibrated=True)
    assert [(p.bound, p.attainable_flops) for p in a.placements] == [
        (p.bound, p.attainable_flops) for p in plain.placements]
    assert plain.totals.time_s == pytest.approx(data["time_model"]["roofline_time_s"], rel=1e-12)


def test_analyze_text_says_which_time_model():
    out = cli("analyze", "prefill", "--gpu", str(EXAMPLE), "--calibrated").stdout
    assert "(measured roofs, calibrated op model)" in out
    assert "times: the calibrated op model (cuda_graph timer, launch floor 1.82 µs)" in out
    # No compute-bound attention probe in the example: the prefill's flash attention says what it fell back to.
    assert "no compute-bound curve for attention, so its memory-bound one: attention" in out
    ceilings_only = cli("analyze", "decode", "--gpu", str(CALIBRATED), "--calibrated").stdout
    assert "calibrated ceilings only: no op model (run rooflinectl calibrate on this GPU)" in ceilings_only


def test_the_decode_series_fast_path_reads_the_same_curves():
    """analyze generate's decode steps by the affine fast path equal, to the bit, each step analysed on its own
    under the op model, and differ from the roofline's times (the model is not skipped)."""
    gpu = load_gpu_file(EXAMPLE)
    base = resolve_workload("prefill", model="llama-3-8b")
    request = Request(prompt=500, output=40, batch=4)

    def step(w):
        return analyze(w, gpu, calibrated=True)

    g = generate(base, request, step, reserve_bytes=0)
    assert g.decode is not None and not g.decode.analysed_every_step  # the fast path ran
    contexts = request.decode_contexts
    each = [step(step_workload(base, "decode", 4, c)) for c in contexts]
    assert list(g.decode.step_times_s) == [a.totals.time_s for a in each]
    assert g.decode.step_times_s[0] != each[0].roofline_time_s
    assert sum(g.decode.op_times_s) == pytest.approx(sum(a.totals.time_s for a in each), rel=1e-12)


def test_the_explorer_describes_an_op_timed_by_the_model():
    from rooflinectl.explore.describe import describe

    gpu = load_gpu_file(EXAMPLE)
    a = analyze(resolve_workload("decode", model="llama-3-8b", batch=1, context=4096), gpu, calibrated=True)
    lines = describe(a.placement("q_proj"), a)
    assert "time     13.8 µs by the calibrated gemm memory-bound curve (1 point); 7.91 µs at the roofs" in lines


def test_the_chart_title_names_the_op_model():
    from rooflinectl.plot.build import chart_title

    w = resolve_workload("decode")
    assert "(measured roofs, calibrated op model)" in chart_title(w, [load_gpu_file(EXAMPLE)], True)
    assert "(measured roofs) " in chart_title(w, [load_gpu_file(CALIBRATED)], True)


@pytest.mark.parametrize("args", [
    ["compare", "--tpot-ms", "30", "--prompt", "512", "--output", "16"],
    ["plot", "pareto", "--prompt", "512", "--output", "16"],
])
def test_the_serving_commands_take_the_op_model(args, tmp_path):
    """compare and plot pareto run their steps through api.step_analyzer, so under the op model."""
    extra = ["-o", str(tmp_path / "p.svg")] if args[0] == "plot" else []
    result = cli(*args, "--gpu", str(EXAMPLE), "--calibrated", "--json", *extra)
    assert result.exit_code == 0, result.output


def test_generate_times_the_prefill_by_the_op_model():
    result = cli("analyze", "generate", "--gpu", str(EXAMPLE), "--calibrated", "--prompt", "512", "--output", "8",
                 "--json")
    assert result.exit_code == 0, result.output
    g = json.loads(result.stdout)
    assert g["hardware"]["op_model"] is True
    prefill = json.loads(cli("analyze", "prefill", "--gpu", str(EXAMPLE), "--calibrated", "--seq-len", "512",
                             "--json").stdout)
    assert g["latency"]["ttft_s"] == prefill["totals"]["time_s"]
    assert prefill["totals"]["time_s"] != prefill["time_model"]["roofline_time_s"]
