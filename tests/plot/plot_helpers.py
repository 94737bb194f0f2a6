"""What the plot tests share: a made-up GPU whose round numbers make the hand derivations easy (HBM 2000 GB/s,
L2 5000 GB/s, SRAM 20000 GB/s, bf16 tensor 300 TFLOP/s, fp32 vector 20 TFLOP/s), the default workloads, and a
one-line-error check for the command."""

from __future__ import annotations

from pathlib import Path

import yaml

from rooflinectl.records.kernel import MeasurementFile
from rooflinectl.specs.hardware import GPU, load_gpu
from rooflinectl.specs.scenario import resolve_workload

BASE = load_gpu("h100")


def made_up_gpu(gpu_id: str = "test-gpu", name: str = "Test GPU 1", hbm: float = 2000, bf16: float = 300,
                fp32: float = 20, l2: float | None = 5000, smem: float | None = 20000) -> GPU:
    data = BASE.model_dump()
    data.update(id=gpu_id, name=name, aliases=[], device_names=[], measured=None)
    data["memory"].update(hbm_bandwidth_gbps=hbm, l2_bandwidth_gbps=l2, smem_bandwidth_gbps=smem,
                          derived={"l2_bandwidth_gbps": "estimated: for the test"} if l2 else {})
    data["compute"].update(tensor_tflops={"bf16": bf16}, vector_tflops={"fp32": fp32})
    return GPU.model_validate(data)


GPU1 = made_up_gpu()
GPU2 = made_up_gpu("test-gpu-2", "Test GPU 2", hbm=4000, bf16=300, fp32=40, l2=None, smem=None)
DECODE = resolve_workload("decode")  # Llama 3 8B, batch 1, context 4096, bf16, flash
PREFILL = resolve_workload("prefill")


def write_gpu(tmp_path: Path, gpu: GPU) -> str:
    path = tmp_path / f"{gpu.id}.yaml"
    path.write_text(yaml.safe_dump(gpu.model_dump(exclude_none=True)))
    return str(path)


def assert_one_line_error(result, *fragments: str):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""


def measured_record(**fields) -> dict:
    """One record as ``measure --save`` writes it (schema 2): by default a gemv at q_proj's decode shape,
    20 µs for q_proj's count (2·4096·4096 FLOPs over (4096 + 4096·4096 + 4096)·2 bytes)."""
    base = {"kernel": "gemv", "op": "linear", "op_kind": "linear", "shape": [1, 4096, 4096], "shape_text": "1x4096x4096",
            "shape_format": "MxKxN", "dtype": "bf16", "flops": 2 * 4096 * 4096, "bytes": (4096 + 4096 * 4096 + 4096) * 2,
            "unit": "tensor", "op_dtype": "bf16", "status": "passed", "time_s": 20e-6}
    return {**base, **fields}


def measured_file(name: str = "Test GPU 1", *records: dict, **record) -> dict:
    """A whole ``measure --save`` file measured on the device ``name``: ``records``, or one measured_record."""
    return {"schema_version": 2, "gpu": {"name": name}, "torch_version": "2.11.0", "triton_version": "3.6.0",
            "python_version": "3.11.9", "date": "2026-12-02T12:00:00+00:00", "command": "rooflinectl measure",
            "interpret": False, "seed": 0, "records": list(records) or [measured_record(**record)]}


def measured_run(name: str = "Test GPU 1", *records: dict, **record) -> MeasurementFile:
    return MeasurementFile.model_validate(measured_file(name, *records, **record))
