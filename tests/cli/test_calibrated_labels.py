"""analyze --calibrated with an op model: the rate, bound and verdict describe what gave each op its time (the op
model's rate and limit), not the plain roofline beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import cli

ROOT = Path(__file__).parents[2]

BW = 2950e9  # the file's measured copy bandwidth, bytes/s
FLOOR = 2e-6  # its launch floor, s
# A hand-made op model: a one-point curve is its ratio everywhere (engine/calibrated.py), so a memory-bound GEMM
# takes 2× its roofline time and the residual add 1.5×, floored at FLOOR.
OP_MODEL = {"launch_floor_s": FLOOR, "grid": "test", "timer": "cuda_graph", "curves": [
    {"op_class": "gemm", "bound": "memory", "points": [{"label": "gemv", "roof_s": 1e-5, "measured_s": 2e-5}]},
    {"op_class": "residual", "bound": "memory", "points": [{"label": "add", "roof_s": 1e-6, "measured_s": 1.5e-6}]},
]}


@pytest.fixture
def gpu(tmp_path) -> str:
    spec = yaml.safe_load((ROOT / "hardware" / "h100-sxm.yaml").read_text())
    spec.update(id="lab-h100", aliases=[], measured={
        "device_name": "NVIDIA H100 80GB HBM3", "date": "2026-12-01T10:00:00+00:00",
        "command": "rooflinectl calibrate -o lab-h100.yaml --gpu h100", "torch_version": "2.4.0",
        "copy_bandwidth_gbps": BW / 1e9, "tensor_tflops": {"bf16": 760.5}, "vector_tflops": {"fp32": 50},
        "op_model": OP_MODEL})
    path = tmp_path / "lab-h100.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


ARGS = ("analyze", "decode", "--model", "llama-3-8b", "--batch", "1", "--context", "512", "--calibrated")


def test_each_op_states_the_op_models_rate_and_limit(gpu):
    data = json.loads(cli(*ARGS, "--gpu", gpu, "--json").stdout)
    ops = {o["name"]: o for o in data["ops"]}
    # q_proj at batch 1: 2·4096·4096 FLOPs over 4096·4096·2 + 2·4096·2 bytes, 2× its roofline time.
    q = ops["q_proj"]
    flops, moved = 2 * 4096 * 4096, 4096 * 4096 * 2 + 2 * 4096 * 2
    assert (q["flops"], q["bytes"]) == (flops, moved)
    assert q["roofline_time_s"] == pytest.approx(moved / BW)
    assert q["time_s"] == pytest.approx(2 * moved / BW)
    assert (q["bound"], q["model_limit"]) == ("memory", "memory")
    assert q["attainable_tflops"] == pytest.approx(flops / (moved / BW) / 1e12)  # the roofline's, beside
    assert q["model_tflops"] == pytest.approx(flops / (2 * moved / BW) / 1e12)  # half of it: the model's
    # The residual add reads two rows of 4096 and writes one (24,576 B): 1.5 × 8.3 ns is under the floor.
    r = ops["attn_residual"]
    assert r["bytes"] == 3 * 4096 * 2
    assert 1.5 * r["bytes"] / BW < FLOOR
    assert (r["bound"], r["model_limit"], r["time_s"]) == ("memory", "launch", FLOOR)
    assert r["model_tflops"] == pytest.approx(r["flops"] / FLOOR / 1e12)


def test_the_table_and_verdict_say_what_set_the_time(gpu):
    out = cli(*ARGS, "--gpu", gpu, env={"COLUMNS": "200"}).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(" ") and line.split()}
    assert rows["attn_residual"][6] == "launch"  # op, kind, ×, FLOPs, bytes, FLOP/B, bound
    assert rows["q_proj"][6] == "memory"
    # The rate column is FLOPs over the model's time: q_proj's 33.55 MFLOP in 2 × 11.38 µs = 1.47 TFLOP/s.
    assert rows["q_proj"][7] == "1.47"
    assert "bound is what set each op's time" in out
    # Every linear op is timed at 2× its roofline time, so the layers' linear ops reach 50% of their roofs' rate.
    verdict = " ".join(out.split())
    assert "Timed by the calibrated op model" in verdict
    assert "50% of the" in verdict
    assert "ops held at the launch floor (2 µs) take" in verdict


def test_without_the_op_model_the_columns_are_the_roofline(gpu):
    out = cli("analyze", "decode", "--gpu", "h100", "--batch", "1", "--context", "512", env={"COLUMNS": "200"}).stdout
    assert "bound is what set" not in out and "Timed by the calibrated op model" not in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(" ") and line.split()}
    # q_proj at the H100's 3.35 TB/s: 33.55 MFLOP over 33.57 MB / 3.35e12 B/s = 3.35 TFLOP/s.
    assert rows["q_proj"][7] == "3.35"


def test_the_csv_carries_the_op_models_limit_and_rate_beside_the_roofline(gpu):
    import csv
    import io

    rows = {r["op"]: r for r in csv.DictReader(io.StringIO(cli(*ARGS, "--gpu", gpu, "--csv").stdout))}
    q, r = rows["q_proj"], rows["attn_residual"]
    flops, moved = 2 * 4096 * 4096, 4096 * 4096 * 2 + 2 * 4096 * 2
    assert (q["bound"], q["model_limit"], r["model_limit"]) == ("memory", "memory", "launch")
    assert float(q["model_tflops"]) == pytest.approx(flops / (2 * moved / BW) / 1e12)
    plain = next(csv.DictReader(io.StringIO(cli("analyze", "decode", "--gpu", "h100", "--csv").stdout)))
    assert plain["model_limit"] == plain["model_tflops"] == ""
