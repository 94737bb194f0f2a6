"""benchmarks/rmsnorm_linear_gpu.py, issue 16's one-call GPU run: its whole flow under --dry (the CPU, Triton's
interpreter, tiny shapes), and its report's arithmetic against issue 16's targets, on numbers set by hand."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "rmsnorm_linear_gpu.py"


def _script():
    spec = importlib.util.spec_from_file_location("rmsnorm_linear_gpu", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shape_lists_are_issue_16s():
    s = _script()
    groups = s.shapes_of(dry=False)
    assert len(groups["table"]) == 11
    # The decode grid: 5 M × 8 K×N = 40, of which 7 are in the table; prefill: 5 M × 3 K×N = 15, of which 4 are
    # (128×4096×14336, 512×8192×8192, 2048×4096×14336, 8192×4096×4096).
    assert len(groups["decode"]) == 40 - 7 and len(groups["prefill"]) == 15 - 4
    every = [shape for g in groups.values() for shape in g]
    assert len(every) == len(set(every)) == 55
    assert all(m <= 64 for m, _, _ in groups["decode"]) and all(m >= 128 for m, _, _ in groups["prefill"])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_dry_runs_the_whole_flow_on_the_cpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # --dry sets it itself
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--dry"], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "rmsnorm_linear_gpu.json").read_text())
    assert (tmp_path / "rmsnorm_linear_gpu.log").read_text().strip()
    # Checks: every candidate of each check shape, in fp16 and fp32, each passed and repeatable: the gemv through
    # descriptors and pointers, the pre-pass tile kernel through pointers and persistent, and (M = 70 ≤ 256) the
    # tile kernel without the pre-pass through host-made descriptors.
    checks = record["checks"]
    assert checks and all(c["passed"] and c["repeatable"] for c in checks)
    assert {c["dtype"] for c in checks} == {"fp16", "fp32"}
    kinds = {(c["config"]["kind"], c["config"]["rstd"], c["config"]["tma"], c["config"]["persistent"])
             for c in checks}
    assert kinds >= {("gemv", "prepass", True, False), ("gemv", "prepass", False, False),
                     ("tile", "prepass", False, False), ("tile", "prepass", True, True), ("tile", "tile", True, False)}
    # Timings: every group's shapes, in the run's order, nothing skipped.
    s = _script()
    groups = s.shapes_of(dry=True)
    assert [tuple(e["shape"]) for e in record["shapes"]] == groups["table"] + groups["prefill"] + groups["decode"]
    assert record["skipped"] == []
    for e in record["shapes"]:
        names = [m["name"] for m in e["methods"]]
        assert names[0] == "ours" and "compile" in names and "cublas" in names
        if e["group"] == "table":
            assert {"torch", "liger"} <= set(names)
        for m in e["methods"]:
            if m["name"] == "liger" and "liger_kernel" not in sys.modules and "time_s" not in m:
                assert "does not import" in m["error"]
                continue
            assert m.get("error") is None, m
            assert m["rel_error"] <= 3e-3 and m["time_s"] > 0  # fp16's tolerance
    prefill = [e for e in record["shapes"] if e["group"] == "prefill"]
    assert any(m["config"]["persistent"] for e in prefill for m in e["methods"] if m["kind"] == "kernel")
    # The report printed at the end: its header and one row per shape.
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == len(record["shapes"])


def _entry(shape, ours, compile_, cublas, *, dtype_bytes=2):
    m, k, n = shape
    return {"group": "table", "shape": list(shape), "dtype": "bf16",
            "bytes": (m * k + n * k + k + m * n) * dtype_bytes, "w_bytes": n * k * dtype_bytes,
            "methods": [{"name": "ours", "kind": "kernel", "time_s": ours, "config_text": "chosen"},
                        {"name": "compile", "kind": "baseline", "time_s": compile_},
                        {"name": "cublas", "kind": "baseline", "time_s": cublas}]}


def test_the_targets_by_hand():
    verdict = _script().verdict
    copy = 4270.0  # GB/s, issue 16's measured copy ceiling
    # Decode at 1×4096×4096: 13.9 µs against compile 16.3 and cuBLAS 13.8 (13.9/13.8 = 1.007 ≤ 1.05); W is
    # 4096·4096·2 = 33.6 MB, under the 64 MB from which the copy share counts.
    assert verdict(_entry((1, 4096, 4096), 13.9e-6, 16.3e-6, 13.8e-6), 13.9e-6, copy) == ("—", "yes")
    # 1×4096×14336 at 34.0 µs: 34.0/32.1 = 1.059 > 1.05; W 117.4 MB; x + W + g + y = (4096 + 58,720,256 + 4096
    # + 14,336)·2 = 117,485,568 bytes in 34.0 µs = 3,455 GB/s, 80.9% of 4,270 (< 85%).
    share, met = verdict(_entry((1, 4096, 14336), 34.0e-6, 34.5e-6, 32.1e-6), 34.0e-6, copy)
    assert share == "81%" and met == "no (> 1.05× cuBLAS, < 85% of copy)"
    # Prefill 2048×4096×14336: 340 µs against compile 317.7 (slower) and cuBLAS 314.3 (1.082 ≤ 1.1).
    assert verdict(_entry((2048, 4096, 14336), 340e-6, 317.7e-6, 314.3e-6), 340e-6, copy)[1] == \
        "no (slower than compile)"
    # ... at 350 µs also 1.114 > 1.1.
    assert verdict(_entry((2048, 4096, 14336), 350e-6, 317.7e-6, 314.3e-6), 350e-6, copy)[1] == \
        "no (slower than compile, > 1.1× cuBLAS)"
    # M = 512 is under 2,048: only compile counts (95.0 ≤ 95.6), whatever cuBLAS' 89.6 (1.06×).
    assert verdict(_entry((512, 8192, 8192), 95.0e-6, 95.6e-6, 89.6e-6), 95.0e-6, copy)[1] == "yes"
    # No compile figure: no verdict.
    e = _entry((1, 4096, 4096), 13.9e-6, None, 13.8e-6)
    assert verdict(e, 13.9e-6, copy)[1] == "—"


def test_the_report_row():
    s = _script()
    entry = _entry((1, 4096, 4096), 13.9e-6, 16.3e-6, 13.8e-6)
    entry["methods"] += [{"name": "candidate 1", "kind": "kernel", "time_s": 13.5e-6, "config_text": "gemv split2"},
                         {"name": "torch", "kind": "baseline", "time_s": 28.8e-6},
                         {"name": "liger", "kind": "baseline", "error": "RuntimeError: liger_kernel does not import"}]
    record = {"env": {"gpu": "NVIDIA H200", "torch": "2.11", "triton": "3.6.0", "liger_kernel": "0.6",
                      "date": "2026-12-04", "timer": "cuda_graph", "rep_ms": 25, "copy_gbps": 4270.0,
                      "command": "benchmarks/rmsnorm_linear_gpu.py out"},
              "checks": [{"passed": True}], "shapes": [entry], "skipped": [{"shape": [8, 8192, 57344]}]}
    text = s.report(record)
    # ours/cuBLAS = 13.9/13.8 = 1.007, ours/compile = 13.9/16.3 = 0.853.
    row = "| 1 × 4096 × 4096 | 13.9 | 13.5 (gemv split2) | 28.8 | 16.3 | 13.8 | — | 1.01 | 0.85 | — | yes |"
    assert row in text
    assert "Not timed (deadline): 8×8192×57344" in text and "Checks: 1 passed, 0 failed" in text


def test_the_liger_baseline_wraps_liger_rmsnorm_then_f_linear(monkeypatch):
    """Liger's Triton RMSNorm does not run in the interpreter (it calls .to on its eps, a Python float there), so a
    stand-in module of the same interface (LigerRMSNorm(hidden_size, eps=...), a ``weight`` parameter, Llama's
    casting) checks the wrapper: the gain goes in as the weight, the bias after F.linear, one module per gain."""
    import types

    import torch

    made = []

    class LigerRMSNorm(torch.nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps
            made.append(self)

        def forward(self, x):
            xf = x.to(torch.float32)
            h = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
            return (h * self.weight.to(torch.float32)).to(x.dtype)  # Llama's casting: the gain in fp32

    rms_norm = types.ModuleType("liger_kernel.transformers.rms_norm")
    rms_norm.LigerRMSNorm = LigerRMSNorm
    for name, module in (("liger_kernel", types.ModuleType("liger_kernel")),
                         ("liger_kernel.transformers", types.ModuleType("liger_kernel.transformers")),
                         ("liger_kernel.transformers.rms_norm", rms_norm)):
        monkeypatch.setitem(sys.modules, name, module)
    from rooflinectl.kernels.base import relative_error
    from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear

    for with_bias in (False, True):
        k = RMSNormLinear(with_bias=with_bias)
        run = _script().liger_baseline(k)
        inputs = k.make_inputs((5, 72, 33), "fp32", "cpu", torch.Generator().manual_seed(4))
        out = run(inputs)
        assert relative_error(out, k.reference(inputs)) <= 1e-5
        run(inputs)
        assert len(made) == 1 and made[0].variance_epsilon == k.eps  # one module for one gain, the kernel's eps
        made.clear()


def test_without_liger_kernel_the_baseline_is_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "liger_kernel", None)  # import fails
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers.rms_norm", None)
    from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear

    assert _script().liger_baseline(RMSNormLinear()) is None


def test_the_precompile_tasks_are_what_the_run_compiles(tmp_path):
    s = _script()
    flow = s.Flow(s.Run(tmp_path, dry=False), "cpu")
    groups = s.shapes_of(dry=False)
    tasks = flow.tasks(s.CHECKS, ("bf16", "fp16"), list(groups.items()), "bf16")
    keys = [s.json.dumps(t) for t in tasks]
    assert len(keys) == len(set(keys))
    # torch.compile's graph once per timed shape; every candidate of every check shape in both data types.
    assert sorted(tuple(t[0]) for t in tasks if t[2] == "compile") == sorted(x for g in groups.values() for x in g)
    for dtype in ("bf16", "fp16"):
        for shape in s.CHECKS:
            for c in flow.candidates(shape, dtype):
                assert (shape, dtype, s.asdict(c)) in tasks
    # ... and every kernel config the timing runs, with the shape it runs at.
    for group, shapes in groups.items():
        for shape in shapes:
            for _, kind, what in flow.methods(group, shape, "bf16"):
                if kind == "kernel":
                    assert (shape, "bf16", s.asdict(what)) in tasks


def test_a_warm_task_runs_the_config_it_names():
    # In the interpreter (no compiling: what is checked here is the task's round trip and its error report), in a
    # process of its own: TRITON_INTERPRET counts only when set before triton is imported.
    code = f"""
import importlib.util, json, warnings
warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location("rl", {str(SCRIPT)!r})
s = importlib.util.module_from_spec(spec)
spec.loader.exec_module(s)
from rooflinectl.kernels.rmsnorm_linear import RMSNormLinearConfig
cfg = RMSNormLinearConfig("gemv", 16, 64, 64, 4, 4, split_k=2, ss="dot")
bad = RMSNormLinearConfig("tile", 16, 32, 32, 4, 2, rstd="rows")
done = s.warm([((3, 128, 40), "fp32", s.asdict(cfg)), ((3, 128, 40), "fp32", s.asdict(bad))], device="cpu")
print(json.dumps([d[4] for d in done]))
"""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        None, "ValueError: unknown rmsnorm_linear rstd 'rows' (prepass, tile or ahead)"]


def test_precompile_spawns_workers_that_run_the_tasks(tmp_path):
    # The script as __main__ (how the GPU run starts it), two spawned workers, the decode group's tasks under --dry
    # (its one shape beyond the table: 2 kernel configs and torch.compile's graph), then the timing.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--dry", "--precompile", "2", "--groups",
                           "decode", "--skip-checks"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "rmsnorm_linear_gpu.json").read_text())
    assert record["precompile"]["workers"] == 2 and record["precompile"]["errors"] == 0
    assert record["precompile"]["tasks"] == 3 and [e["group"] for e in record["shapes"]] == ["decode"]


def test_the_misses_lab_times_each_lever_with_and_without_it():
    # benchmarks/rmsnorm_linear_misses.py: each prefill rival twice (without and with pdl), the pick first; the
    # gemv sweep within an H200's shared memory; --final, the pick and its twin across run 34a's change.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import rmsnorm_linear_misses as lab

    from rooflinectl.kernels.rmsnorm_linear import configs

    chosen = configs.config_for((512, 8192, 8192), "bf16")
    prefill = lab.prefill_variants(chosen, 512)
    assert prefill[0] == chosen and len(prefill) % 2 == 0
    assert {replace(c, pdl=False) for c in prefill if c.pdl} == {c for c in prefill if not c.pdl}
    sweep = lab.gemv_sweep(configs.config_for((64, 4096, 4096), "bf16"), 64)
    assert {(c.block_n, c.num_warps) for c in sweep} == {(64, 4), (128, 8)}
    assert {c.num_stages for c in sweep} == {2, 3, 4, 6} and {c.split_k for c in sweep} == {1, 2, 4, 8}
    assert len(lab.SHAPES) == len(set(lab.SHAPES)) == 17

    class Final(lab.MissFlow):
        def __init__(self):  # no device: only the variants
            from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear

            self.kernel, self.final = RMSNormLinear(), True

    flow = Final()
    picked = flow.variants((128, 4096, 14336), "bf16")
    assert picked[0].pdl and not picked[1].pdl and picked[2] == configs._tile_config(128, 4096, 14336,
                                                                                     configs._TILE_SMALL)
    assert [c.num_stages for c in flow.variants((16, 3584, 18944), "bf16")] == [3, 4]
