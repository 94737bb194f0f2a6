"""plot.measured: measured kernels on the chart, their share of the roof, the prediction they are tied to,
and which GPU a record was measured on."""

from __future__ import annotations

import json

import pytest
from plot_helpers import BASE, DECODE, GPU1, made_up_gpu

from rooflinectl.errors import UserError
from rooflinectl.plot.build import build_chart
from rooflinectl.plot.measured import MeasuredFile, load_measured


def measured_file(name: str = "Test GPU 1", **record) -> dict:
    base = {"kernel": "gemv", "op": "q_proj", "shape": [1, 4096, 4096], "dtype": "bf16",
            "flops": 2 * 4096 * 4096, "bytes": (4096 + 4096 * 4096 + 4096) * 2, "time_s": 20e-6}
    return {"gpu": {"name": name}, "records": [{**base, **record}]}


def test_measured_point_sits_at_flops_over_bytes_and_time_with_its_share_of_the_roof():
    data = measured_file()
    data["records"].append({"kernel": "fused_softmax", "op": "softmax 4096x16384", "shape": [4096, 16384],
                            "dtype": "bf16", "flops": 5 * 4096 * 16384, "bytes": 2 * 2 * 4096 * 16384,
                            "time_s": 80e-6, "unit": "vector", "op_dtype": "fp32"})
    data["records"].append({"kernel": "copy", "op": "copy", "flops": 0, "bytes": 1e9, "time_s": 1e-3})
    data["records"].append({"kernel": "matmul", "op": "matmul 8x8x8", "flops": 1024, "bytes": 384, "time_s": None})
    panel = build_chart([DECODE], [GPU1], measured=MeasuredFile.model_validate(data)).panels[0]
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
    assert softmax.predicted is None  # a flash decode step has no softmax op
    assert "Measured, not drawn: copy (0 FLOPs: no place on a log axis)." in panel.footnotes
    assert "Measured, not drawn: matmul (not timed)." in panel.footnotes


@pytest.mark.parametrize(
    "measured_name, gpu_name, gpu_id, matches",
    [
        ("NVIDIA H200", "NVIDIA H200 SXM 141GB", "h200", True),
        ("nvidia h200 sxm 141gb", "NVIDIA H200 SXM 141GB", "h200", True),
        ("NVIDIA H200 SXM 141GB (HGX)", "NVIDIA H200 SXM 141GB", "h200", True),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA H200 SXM 141GB", "h200", False),
        ("H200", "NVIDIA H200 SXM 141GB", "h200", True),
    ],
)
def test_measured_gpu_name_matching(measured_name, gpu_name, gpu_id, matches):
    gpu = made_up_gpu(gpu_id, gpu_name)
    assert MeasuredFile.model_validate(measured_file(measured_name)).matches(gpu) is matches


def test_measured_file_naming_the_spec_matches_whatever_the_device_calls_itself():
    data = measured_file("NVIDIA H100 80GB HBM3")
    data["gpu"]["spec"] = "h100-sxm"
    assert MeasuredFile.model_validate(data).matches(BASE)
    assert not MeasuredFile.model_validate(measured_file("NVIDIA H100 80GB HBM3")).matches(BASE)


@pytest.mark.parametrize(
    "content, fragments",
    [
        ("{not json", ["malformed JSON", "line 1"]),
        ("[1, 2]", ["expected a JSON object"]),
        (json.dumps({"records": []}), ["gpu"]),
        (json.dumps({"gpu": {"name": "x"}, "records": []}), ["records", "at least 1"]),
        (json.dumps(measured_file(time_s=-1)), ["records.0.time_s", "greater than 0"]),
        (json.dumps(measured_file(bytes=0)), ["records.0.bytes"]),
        (json.dumps({"gpu": {"name": "x"}, "records": [{"kernel": "k", "op": "o", "flops": 1, "bytes": 1}]}),
         ["no record has a time"]),
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
    with pytest.raises(UserError, match="was measured on 'NVIDIA A100', not on the GPU plotted: test-gpu"):
        build_chart([DECODE], [GPU1], measured=MeasuredFile.model_validate(measured_file("NVIDIA A100")))
