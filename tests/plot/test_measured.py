"""plot.measured: measured kernels on the chart, their share of the roof (the engine's), the prediction they are tied
to (same kind and fusions, nearest intensity), which GPU a record was measured on, and the files it reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from plot_helpers import BASE, DECODE, GPU1, made_up_gpu, measured_file, measured_record, measured_run

from helpers import assert_one_line_error, cli
from rooflinectl.engine.count.primitives import rmsnorm_linear_op
from rooflinectl.engine.roofline import analyze, measured_share
from rooflinectl.errors import UserError
from rooflinectl.plot.build import build_chart
from rooflinectl.plot.measured import load_measured, measured_gpu, record_op
from rooflinectl.records.kernel import MeasurementFile
from rooflinectl.specs.devices import device_matches
from rooflinectl.specs.hardware import list_gpus, load_gpu
from rooflinectl.specs.scenario import resolve_workload

RESULTS = Path(__file__).parents[2] / "docs" / "results"


def test_measured_point_sits_at_flops_over_bytes_and_time_with_its_share_of_the_roof():
    run = measured_run(
        "Test GPU 1",
        measured_record(),
        measured_record(kernel="fused_softmax", op="softmax", op_kind="attention", shape=[4096, 16384],
                        shape_text="4096x16384", shape_format="ROWSxCOLS", flops=5 * 4096 * 16384,
                        bytes=2 * 2 * 4096 * 16384, time_s=80e-6, unit="vector", op_dtype="fp32"),
        measured_record(kernel="copy", op="copy", op_kind="copy", shape=[1 << 28], shape_text="268435456",
                        shape_format="N", flops=0, bytes=1e9, time_s=1e-3, unit="vector", op_dtype="fp32"),
        measured_record(kernel="matmul", op="matmul", op_kind="matmul", shape=[8, 8, 8], shape_text="8x8x8",
                        flops=1024, bytes=384, time_s=None, status="checked"),
    )
    panel = build_chart([DECODE], [GPU1], measured=run).panels[0]
    gemv, softmax = panel.measured
    flops, nbytes = 2 * 4096 * 4096, (4096 + 4096 * 4096 + 4096) * 2
    assert gemv.intensity == pytest.approx(flops / nbytes)
    assert gemv.flops == pytest.approx(flops / 20e-6)
    # Under the HBM roof at that intensity: 2000e9 · intensity; 20 µs against the 16.8 µs the roof allows.
    assert gemv.roof_flops == pytest.approx(2000e9 * flops / nbytes)
    assert gemv.fraction == pytest.approx(nbytes / 2000e9 / 20e-6)
    assert gemv.label == f"gemv 1x4096x4096 {gemv.fraction:.0%}" == "gemv 1x4096x4096 84%"
    q = next(p for p in panel.points if p.op == "q_proj")
    assert gemv.predicted == (q.intensity, q.flops)
    # The softmax record names its roof (fp32 vector): intensity 5/4 FLOP/byte, memory-bound under 2000 GB/s.
    assert softmax.intensity == pytest.approx(1.25)
    assert softmax.roof_flops == pytest.approx(1.25 * 2000e9)
    # A flash decode step has no softmax op: its one attention op sits at 4 FLOP/byte, over 2× away.
    assert softmax.predicted is None
    assert "Measured, not drawn: copy (0 FLOPs: no place on a log axis)." in panel.footnotes
    assert "Measured, not drawn: matmul (not timed)." in panel.footnotes


def test_roof_and_fraction_are_the_engines_measured_share():
    run = measured_run()
    (point,) = build_chart([DECODE], [GPU1], measured=run).panels[0].measured
    share = measured_share(record_op(run.records[0]), GPU1.roofs(), 20e-6)
    assert (point.intensity, point.flops, point.roof_flops, point.fraction) == (
        share.placement.intensity, share.achieved_flops, share.attainable_flops, share.fraction)


def test_a_measured_op_pairs_with_the_prediction_of_its_kind_and_fusions():
    """Prefill with RMSNorm fused into the projections: a fused rmsnorm_linear at q's shape ties to
    attn_norm+q_proj, not to o_proj (a linear op too, at the same intensity within 0.04%, fusing nothing); a plain
    linear at that shape ties to o_proj; a matmul of two activations (kind matmul) to none of the linear ops."""
    w = resolve_workload("prefill", fused=["norm_linear"])
    fused = rmsnorm_linear_op("rmsnorm_linear", 2048, 4096, 4096, "bf16")
    rec = dict(shape=[2048, 4096, 4096], shape_text="2048x4096x4096", flops=fused.flops, bytes=fused.bytes,
               time_s=1e-3)
    run = measured_run("Test GPU 1", measured_record(kernel="rmsnorm_linear", op="rmsnorm_linear", op_fuses=["norm"],
                                                     **rec),
                       measured_record(kernel="plain", **rec),
                       measured_record(kernel="matmul", op="matmul", op_kind="matmul", **rec))
    panel = build_chart([w], [GPU1], measured=run).panels[0]
    points = {p.op: (p.intensity, p.flops) for p in panel.points}
    with_norm, plain, matmul = panel.measured
    assert with_norm.predicted == points["attn_norm+q_proj"]
    assert plain.predicted == points["o_proj"]
    assert matmul.predicted is None


def test_a_kernel_timed_at_a_sweeps_size_pairs_with_that_value_of_the_sweep():
    values = [1, 8, 64, 256]
    flops, nbytes = 2 * 64 * 4096 * 4096, (64 * 4096 + 4096 * 4096 + 64 * 4096) * 2
    run = measured_run(shape=[64, 4096, 4096], shape_text="64x4096x4096", flops=flops, bytes=nbytes)
    panel = build_chart([DECODE], [GPU1], "batch", values, measured=run).panels[0]
    q = next(t for t in panel.trajectories if t.op == "q_proj")
    assert panel.measured[0].predicted == (q.points[2].intensity, q.points[2].flops)


# measure --kernel's schema 1 files, not a workload's or a profile's (records of their own kinds, with "kind").
@pytest.mark.parametrize("path", [p for p in sorted(RESULTS.glob("*/*.json"))
                                  if isinstance(record := json.loads(p.read_text()), dict)
                                  and record.get("schema_version") == 1 and "kind" not in record],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_records_saved_before_ops_had_kinds_still_draw(path):
    """docs/results holds schema 1 files: no op_kind, and the shape in the op's name ("softmax 4096x16384"),
    which records.kernel.load takes off. Each still draws under the roof its record names (unit and op_dtype),
    at the same percentage the measure table gave it (%spec), and pairs by its name, the one use of a name."""
    run = load_measured(path)
    assert all(r.op_kind is None for r in run.records)
    h200 = load_gpu("h200")
    w = resolve_workload("prefill", attention="naive")
    panel = build_chart([w], [h200], measured=run, measured_source=str(path)).panels[0]
    timed = [r for r in run.records if r.time_s is not None and r.flops > 0]
    assert [m.kernel for m in panel.measured] == [r.kernel for r in timed]
    engine = {p.name: p for p in analyze(w, h200).placements}
    for m, r in zip(panel.measured, timed):
        assert m.fraction == pytest.approx(r.spec_roof_pct / 100, rel=1e-9)
        same = engine.get(r.op)  # "softmax" is an op of this step; "matmul", "rmsnorm_linear" are not
        if same is not None and abs(math.log10(same.intensity / m.intensity)) < math.log10(2):
            assert m.predicted == (same.intensity, same.attainable_flops)
        else:
            assert m.predicted is None


def test_a_schema_1_softmax_pairs_with_the_naive_steps_softmax_by_name():
    run = load_measured(RESULTS / "h200-2026-12-02" / "softmax-bf16.json")
    h200 = load_gpu("h200")
    w = resolve_workload("prefill", attention="naive")
    panel = build_chart([w], [h200], measured=run).panels[0]
    softmax = next(p for p in panel.points if p.op == "softmax")
    assert {m.op for m in panel.measured} == {"softmax"}
    assert all(m.predicted == (softmax.intensity, softmax.flops) for m in panel.measured)


@pytest.mark.parametrize(
    "measured_name, matches",
    [
        ("NVIDIA H200", True),
        ("nvidia h200 sxm 141gb", True),  # the spec's own name, case and spacing aside
        ("NVIDIA  H200-SXM", True),  # an alias
        ("H200", True),
        ("NVIDIA H200 SXM 141GB (HGX)", False),  # a word more is another name: exact or nothing
        ("NVIDIA H200 NVL", False),
        ("NVIDIA A100-SXM4-80GB", False),
        ("NVIDIA", False),
        ("", False),
    ],
)
def test_measured_gpu_is_found_by_an_exact_name(measured_name, matches):
    gpu = made_up_gpu("h200", "NVIDIA H200 SXM 141GB").model_copy(update={"aliases": ["h200-sxm"]})
    if matches:
        assert measured_gpu(measured_run(measured_name), [gpu]) is gpu
    else:
        with pytest.raises(UserError, match="none of the GPUs plotted: h200 " if measured_name else "names no device"):
            measured_gpu(measured_run(measured_name), [gpu])


def test_the_spec_a_record_names_never_vouches_for_its_device():
    """A device no spec names is refused though the record names the spec it was compared against (measure --gpu
    h100 on some other board); the board's own file lists the device in its device_names."""
    data = measured_file("Some Board Rev 2")
    data["gpu"]["spec"] = "h100-sxm"
    with pytest.raises(UserError, match=r"measured on 'Some Board Rev 2', none of the GPUs plotted: h100-sxm .*"
                                        r"lists the device in its device_names"):
        measured_gpu(MeasurementFile.model_validate(data), [BASE])
    board = made_up_gpu("board", "Some Board").model_copy(update={"device_names": ["Some Board Rev 2"]})
    assert measured_gpu(MeasurementFile.model_validate(data), [BASE, board]) is board
    # The device's own name matches by the one matcher measure uses too (issue 11's named disagreement).
    assert measured_gpu(measured_run("NVIDIA H100 80GB HBM3"), [BASE]) is BASE
    # An L40S measured against the L4's spec (a wrong --gpu) is an L40S still: never drawn on the L4.
    data = measured_file("NVIDIA L40S")
    data["gpu"]["spec"] = "l4"
    with pytest.raises(UserError, match=r"measured on 'NVIDIA L40S', none of the GPUs plotted: l4 \(NVIDIA L4\) "
                                        r"\(the spec l40s: pass --gpu l40s\)"):
        measured_gpu(MeasurementFile.model_validate(data), [load_gpu("l4")])


def test_an_l40s_record_is_not_drawn_on_the_l4():
    """Issue 18: a record from "NVIDIA L40S" was drawn on the L4 as 900% of its roof (a substring match)."""
    l4, l40s = load_gpu("l4"), load_gpu("l40s")
    run = measured_run("NVIDIA L40S")
    with pytest.raises(UserError, match="none of the GPUs plotted: l4"):
        build_chart([DECODE], [l4], measured=run)
    panel = build_chart([DECODE], [l4, l40s], measured=run).panels[0]
    assert {m.gpu for m in panel.measured} == {"l40s"}
    assert measured_gpu(measured_run("NVIDIA L4"), [l4, l40s]) is l4


def test_a_bare_vendor_name_matches_no_gpu():
    with pytest.raises(UserError, match="measured on 'NVIDIA', none of the GPUs plotted"):
        build_chart([DECODE], [load_gpu(g) for g in ("h100", "l4", "a100")], measured=measured_run("NVIDIA"))


def test_two_plotted_gpus_claiming_the_device_are_told_apart_by_the_recorded_spec():
    twin = BASE.model_copy(update={"id": "my-h100"})
    data = measured_file("NVIDIA H100 80GB HBM3")
    assert measured_gpu(MeasurementFile.model_validate({**data, "gpu": {**data["gpu"], "spec": "my-h100"}}),
                        [BASE, twin]) is twin
    with pytest.raises(UserError, match=r"several GPUs plotted claim \(h100-sxm, my-h100\)"):
        measured_gpu(MeasurementFile.model_validate(data), [BASE, twin])


@pytest.mark.parametrize(
    "device, spec",
    [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
     ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA H200", "h200"), ("NVIDIA H100 PCIe", "h100-pcie"),
     ("NVIDIA L4", "l4"), ("NVIDIA L40S", "l40s"), ("Tesla V100-SXM2-32GB", "v100"),
     ("NVIDIA GeForce RTX 4090", "rtx4090"), ("AMD Instinct MI300X", "mi300x")],
)
def test_a_device_is_measured_on_exactly_its_bundled_spec(device, spec):
    assert [g.id for g in list_gpus() if device_matches(device, g)] == [spec]


@pytest.mark.parametrize("device", ["NVIDIA", "NVIDIA H100 NVL", "NVIDIA GeForce RTX 4090 D",
                                    "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA H100 40GB HBM3",
                                    "NVIDIA A10", "NVIDIA L4S"])
def test_a_name_that_only_contains_a_spec_matches_none(device):
    assert [g.id for g in list_gpus() if device_matches(device, g)] == []


def test_a_calibrated_file_matches_the_devices_its_file_lists_not_the_one_its_section_names():
    """A measured section's device name is what --calibrated checks: it vouches for nothing. A board of the user's
    own is its device by the file's device_names."""
    from rooflinectl.specs.measured import Measured

    measured = Measured(device_name="Board X Rev 2", date="d", command="c", torch_version="2.5",
                        copy_bandwidth_gbps=1000.0)
    gpu = made_up_gpu("board-x", "Board X").model_copy(update={"measured": measured})
    assert device_matches("board x", gpu) and not device_matches("Board X Rev 2", gpu)
    listed = gpu.model_copy(update={"device_names": ["Board X Rev 2"]})
    assert device_matches("Board X Rev 2", listed) and not device_matches("Board X Rev 3", listed)


@pytest.mark.parametrize(
    "content, fragments",
    [
        ("{not json", ["malformed JSON", "line 1"]),
        ("[1, 2]", ["expected a measurement record"]),
        (json.dumps({"records": []}), ["gpu"]),
        (json.dumps(measured_file("x", time_s=-1)), ["records.0.time_s", "greater than or equal to 0.000000001"]),
        # Issue 18: values no run gives, which drew points at 1e307 FLOP/s or axes matplotlib could not draw.
        (json.dumps(measured_file("x", time_s=1e-300)), ["records.0.time_s", "greater than or equal to 0.000000001"]),
        (json.dumps(measured_file("x", time_s=1e300)), ["records.0.time_s", "less than or equal to 1000000"]),
        (json.dumps(measured_file("x", flops=1e-300)), ["records.0.flops", "fractional part"]),
        (json.dumps(measured_file("x", flops=10**21 + 1)), ["records.0.flops", "less than or equal to 1000000000000000000000"]),
        (json.dumps(measured_file("x", bytes=1e-300)), ["records.0.bytes", "fractional part"]),
        (json.dumps(measured_file("x", bytes=0)), ["records.0.bytes", "greater than or equal to 1"]),
        (json.dumps(measured_file("x", flops=10**21, time_s=1e-3)), ["records.0", "1e+12 TFLOP/s", "not a measurement"]),
        (json.dumps(measured_file("x", bytes=10**15, time_s=1e-6)), ["records.0", "1e+12 GB/s", "not a measurement"]),
        (json.dumps(measured_file("x", bytes=0)), ["records.0.bytes"]),
        (json.dumps({**measured_file("x"), "records": []}), ["no record has a time"]),
        (json.dumps(measured_file("x", time_s=None, status="checked")), ["no record has a time"]),
    ],
)
def test_malformed_measured_files(tmp_path, content, fragments):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(UserError) as err:
        load_measured(path)
    assert str(path) in str(err.value)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_measured_on_another_gpu_is_an_error():
    with pytest.raises(UserError, match="was measured on 'NVIDIA A100', none of the GPUs plotted: test-gpu"):
        build_chart([DECODE], [GPU1], measured=measured_run("NVIDIA A100"))


def test_a_measured_point_above_every_roof_is_on_the_chart_and_the_limits_are_floats():
    """A record at 10,000 TFLOP/s on a 300 TFLOP/s GPU is drawn where it is (and says 3333%), not cut off."""
    run = measured_run("Test GPU 1", measured_record(kernel="matmul", op="matmul", op_kind="matmul", flops=1e12,
                                                     bytes=1e6, time_s=1e-4))
    panel = build_chart([DECODE], [GPU1], measured=run).panels[0]
    (m,) = panel.measured
    assert m.flops == pytest.approx(1e16) and panel.ylim[0] < m.flops < panel.ylim[1]
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in (*panel.xlim, *panel.ylim))


def test_a_measured_point_is_paired_only_with_a_prediction_of_its_kind_within_2x_of_its_intensity():
    """Issue 14: a point always paired with a prediction passed CI. At decode batch 1 every linear op sits near
    1 FLOP/byte (q_proj: 2·4096² FLOPs over (4096 + 4096² + 4096)·2 bytes); a linear kernel timed at M = 512 sits
    at 2·512·4096² / ((512·4096 + 4096² + 512·4096)·2) = 409.6 FLOP/byte, 400× away: no pair. A kernel at
    q_proj's own intensity but of a kind the step has no op of (an expert: Llama 3 8B is dense): no pair either."""
    m = 512
    far = measured_record(shape=[m, 4096, 4096], shape_text=f"{m}x4096x4096", flops=2 * m * 4096 * 4096,
                          bytes=(m * 4096 + 4096 * 4096 + m * 4096) * 2, time_s=200e-6)
    other_kind = measured_record(kernel="expert_gemv", op="expert", op_kind="expert")
    run = measured_run("Test GPU 1", measured_record(), far, other_kind)
    near, far_point, other = build_chart([DECODE], [GPU1], measured=run).panels[0].measured
    assert far_point.intensity == pytest.approx(409.6)
    q = next(p for p in build_chart([DECODE], [GPU1]).panels[0].points if p.op == "q_proj")
    assert near.predicted == (q.intensity, q.flops)
    assert far_point.predicted is None
    assert other.predicted is None


# --- plot --measured: a record of another device ---------------------------------------------------------------

@pytest.mark.parametrize("device", ["NVIDIA H100 NVL", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA", ""])
def test_plot_refuses_a_record_of_another_device_that_names_the_sxm_spec(tmp_path, device):
    data = measured_file(device)
    data["gpu"]["spec"] = "h100-sxm"  # measure --gpu h100 on that device: the record says what it was compared to
    (tmp_path / "r.json").write_text(json.dumps(data))
    expected = f"measured on '{device}', none of the GPUs plotted: h100-sxm" if device else "names no device"
    assert_one_line_error(cli("plot", "decode", "--gpu", "h100", "--measured", str(tmp_path / "r.json"),
                              "-o", str(tmp_path / "x.svg")), expected)
    assert not (tmp_path / "x.svg").exists()
