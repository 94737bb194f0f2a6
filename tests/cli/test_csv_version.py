"""`rooflinectl --version`, and `--csv` wherever a table is printed: the rows a spreadsheet takes, each number the
engine's own (all its digits), one header line; `--json --csv` is a one-line error."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.engine.roofline import analyze
from rooflinectl.specs.hardware import list_gpus, load_gpu
from rooflinectl.specs.models import list_models
from rooflinectl.specs.scenario import list_scenarios, resolve_workload


def rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_version_prints_the_installed_version():
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"rooflinectl {version('rooflinectl')}\n"


def test_analyze_csv_is_the_engines_ops_table():
    result = cli("analyze", "decode", "--gpu", "h100", "--batch", "8", "--csv")
    assert result.exit_code == 0, result.output
    got = rows(result.stdout)
    a = analyze(resolve_workload("decode", batch=8), load_gpu("h100"))
    assert [r["op"] for r in got] == [p.name for p in a.placements]
    for r, p in zip(got, a.placements, strict=True):
        assert (r["kind"], int(r["count"]), float(r["flops"]), float(r["bytes"])) == (
            p.op.kind, p.op.count, p.op.flops, p.op.bytes)
        assert float(r["total_time_s"]) == p.total_time_s and float(r["share"]) == p.share  # every digit
    assert sum(float(r["share"]) for r in got) == pytest.approx(1.0)


def test_generate_csv_lists_every_op_and_their_shares_add_to_one():
    result = cli("analyze", "generate", "--gpu", "h100", "--model", "llama-3-8b", "--batch", "4", "--csv")
    assert result.exit_code == 0, result.output
    got = rows(result.stdout)
    assert {"gate_proj", "attention", "lm_head"} <= {r["op"] for r in got}
    assert sum(float(r["share"]) for r in got) == pytest.approx(1.0)
    for r in got:
        assert float(r["total_s"]) == pytest.approx(float(r["prefill_s"]) + float(r["decode_s"]))


def test_occupancy_csv_has_one_row_per_limit_and_marks_the_binding_one():
    # 256 threads × 64 registers: 2,048 registers a warp, 65,536 / (8 warps × 2,048) = 4 blocks by registers;
    # 64 warps / 8 = 8 by warps; 32 by the block limit (H100, compute capability 9.0).
    got = rows(cli("occupancy", "--gpu", "h100", "--threads", "256", "--regs", "64", "--csv").stdout)
    by = {r["limit"]: r for r in got}
    assert by["registers"]["blocks_per_sm"] == "4" and by["registers"]["binds"] == "True"
    assert by["warps"]["blocks_per_sm"] == "8" and by["warps"]["binds"] == "False"
    assert by["blocks"]["blocks_per_sm"] == "32"


def test_hardware_list_csv_has_every_gpu_with_its_ridge():
    got = rows(cli("hardware", "list", "--csv").stdout)
    gpus = list_gpus()
    assert [r["id"] for r in got] == [g.id for g in gpus]
    h100 = next(r for r in got if r["id"] == "h100-sxm")
    assert float(h100["ridge"]) == pytest.approx(float(h100["peak_tflops"]) * 1e12 /
                                                 (float(h100["hbm_bandwidth_gbps"]) * 1e9))


def test_workloads_list_csv_has_the_scenarios_then_the_models():
    got = rows(cli("workloads", "list", "--csv").stdout)
    assert [r["id"] for r in got if r["type"] == "scenario"] == list(list_scenarios())
    models = {m.id: m for m in list_models()}
    assert [r["id"] for r in got if r["type"] == "model"] == list(models)
    llama = next(r for r in got if r["id"] == "llama-3-8b")
    assert int(llama["params"]) == models["llama-3-8b"].parameter_count()


def test_the_scenarios_table_shows_batch_and_lengths_in_their_columns():
    """A comment had swallowed four cells: "flash" stood under "batch"."""
    line = next(x for x in cli("workloads", "list").stdout.splitlines() if x.strip().startswith("decode"))
    assert line.split() == ["decode", "decode", "llama-3-8b", "1", "-", "4096", "bf16", "flash"]


@pytest.mark.parametrize("args", [["analyze", "decode"], ["hardware", "list"], ["workloads", "list"],
                                  ["occupancy", "--threads", "128", "--regs", "32"],
                                  ["analyze", "generate", "--model", "llama-3-8b"], ["measure", "--list"]])
def test_json_and_csv_together_is_a_one_line_error(args):
    assert_one_line_error(cli(*args, "--json", "--csv"), "--json and --csv")


def test_measure_csv_under_the_interpreter():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-m", "rooflinectl", "measure", "--kernel", "fused_softmax", "--interpret",
                           "--seed", "1", "--gpu", "h200", "--shape", "3x7,5x781", "--csv"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    got = rows(done.stdout)
    assert [(r["shape"], r["impl"], r["status"]) for r in got] == [("3x7", "triton", "checked"),
                                                                   ("5x781", "triton", "checked")]
    assert all(float(r["rel_error"]) <= float(r["tolerance"]) for r in got)
