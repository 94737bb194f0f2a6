"""Ceilings: which matmul peaks a run needs, the calibrated hardware YAML (it loads, and `analyze --calibrated`
uses its ceilings), and the measured ceilings beside the spec's."""

from __future__ import annotations

import json

import pytest
from measure_fakes import H200

from helpers import cli
from rooflinectl.calibrate.run import measured_section
from rooflinectl.engine.count.primitives import matmul_op, softmax_op
from rooflinectl.measure.ceilings import ceiling_dtypes
from rooflinectl.records.calibration import calibration_rows
from rooflinectl.records.kernel import RunCeilings
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.write import write_measured


def test_ceiling_dtypes_are_those_of_tensor_ops():
    ops = [softmax_op("s", 1, 1, "bf16"), matmul_op("a", 1, 1, 1, "bf16"), matmul_op("b", 1, 1, 1, "fp16"),
           matmul_op("c", 2, 2, 2, "bf16")]
    assert ceiling_dtypes(ops) == ["bf16", "fp16"]


def fake_measured():
    ceilings = RunCeilings(copy_bandwidth_gbps=4251.37, copy_bytes=2 << 30,
                        tensor_tflops={"bf16": 760.04, "fp16": 771.2, "tf32": 401.9, "fp8": 1302.55},
                        timer="cuda_graph", tensor_tflops_check={"bf16": 789.96}, check_timer="events")
    return measured_section(ceilings, device_name="NVIDIA H200", date="2026-12-01T10:00:00+00:00",
                            command="rooflinectl calibrate -o my-h200.yaml --gpu h200", torch_version="2.11.0",
                            triton_version="3.6.0", driver="580.159.03")


def test_calibrated_yaml_loads_and_analyze_uses_it(tmp_path):
    out = tmp_path / "my-h200.yaml"
    gpu = write_measured(H200, out, ceilings=fake_measured())
    loaded = load_gpu(str(out))
    assert loaded == gpu
    assert loaded.id == "my-h200" and loaded.aliases == []  # never shadows the bundled h200 by accident
    assert loaded.measured.copy_bandwidth_gbps == 4251.4
    assert loaded.measured.tensor_tflops == {"bf16": 760.0, "fp16": 771.2, "tf32": 401.9, "fp8": 1302.5}
    # How they were timed, and the check by the other method, round-trip too (rounded to 0.1 as the peaks are).
    assert (loaded.measured.timer, loaded.measured.tensor_tflops_check) == ("cuda_graph", {"bf16": 790.0})
    assert loaded.roofs(calibrated=True).tensor_tflops["bf16"] == 760.0  # the check is never a roof
    assert loaded.memory == H200.memory and loaded.compute == H200.compute  # the spec's content, unchanged
    assert out.read_text().startswith("# NVIDIA H200 SXM 141GB: the spec sheet's numbers")
    assert not (tmp_path / "my-h200.yaml.tmp").exists()

    result = cli("analyze", "decode", "--gpu", str(out), "--calibrated", "--json")
    assert result.exit_code == 0, result.output
    hw = json.loads(result.stdout)["hardware"]
    assert hw["id"] == "my-h200"
    assert hw["bandwidth_gbps"] == 4251.4
    assert hw["peak_tflops"] == 760.0  # decode runs in bf16
    spec = json.loads(cli("analyze", "decode", "--gpu", str(out), "--json").stdout)["hardware"]
    assert spec["bandwidth_gbps"] == 4800 and spec["peak_tflops"] == 989.4


def test_calibrated_file_named_like_the_spec_keeps_its_aliases(tmp_path):
    out = tmp_path / "h200.yaml"
    write_measured(H200, out, ceilings=fake_measured())
    gpu = load_gpu(str(out))
    assert gpu.id == "h200" and gpu.aliases == H200.aliases and gpu.measured is not None



def test_calibration_rows_put_each_ceiling_beside_the_spec():
    rows = calibration_rows(H200, fake_measured())
    assert [(r.ceiling, r.measured, r.spec, r.unit) for r in rows] == [
        ("copy bandwidth (read + write)", 4251.4, 4800, "GB/s"),
        ("bf16 matmul", 760.0, 989.4, "TFLOP/s"),
        ("fp16 matmul", 771.2, 989.4, "TFLOP/s"),
        ("tf32 matmul", 401.9, H200.compute.tensor_tflops["tf32"], "TFLOP/s"),
        ("fp8 matmul", 1302.5, H200.compute.tensor_tflops["fp8"], "TFLOP/s"),
    ]
    assert rows[0].of_spec == pytest.approx(4251.4 / 4800)
