"""Issue 16 on a GPU in one call: every rmsnorm_linear candidate checked, then timed beside its baselines.

    python benchmarks/rmsnorm_linear_gpu.py OUT_DIR                    # on the H200: checks, then every group
    python benchmarks/rmsnorm_linear_gpu.py OUT_DIR --groups table --skip-checks
    python benchmarks/rmsnorm_linear_gpu.py OUT_DIR --dry              # the whole flow on the CPU, interpreter
    python benchmarks/rmsnorm_linear_gpu.py --report OUT_DIR/rmsnorm_linear_gpu.json   # the docs table

1. Checks (bf16 and fp16; --dry: fp16 and fp32, the interpreter's bf16 tl.dot being wrong): on odd shapes, one of
   each kernel path (gemv at M = 1 and M = 33, the small and the big tile, K a multiple of the K step and not),
   every candidate of ``RMSNormLinear.candidates`` (the tile kernel without the pre-pass, plain and through TMA,
   the gemv's ss="dot" and TMA twins included; the gemv's split-K sweep only with --all-candidates) on fresh
   random inputs from two seeds, each run twice into NaN-poisoned outputs: the relative error against the
   float32 reference within the kernel's tolerance, and the second run bit-equal to the first (a race such as
   the pipeliner's of rmsnorm_linear's docstring shows as a difference).
2. Timing, bf16 (--dtype fp16: issue 16's "fp16 the same"), per shape: fresh input sets rotated so that together
   they hold 4 L2s of what one call moves (the kernel's count: x + W + g + y), each method checked on the first set first (an output that fails the kernel's
   tolerance is not timed), then timed by rooflinectl's own timer (``rooflinectl.measure.bench``: CUDA-graph
   replays of the rotated calls, ``do_bench_cudagraph``; CUDA events where a capture fails, and the figure says
   so), the clocks warmed and the copy ceiling measured first (``rooflinectl.measure.ceilings``).
   Groups, in this order (no shape starts once --deadline-s has passed; those left are listed as skipped):
   - ``table``: issue 16's 11 shapes: every candidate, torch eager, torch.compile of the pair, F.linear alone
     (cuBLAS), and Liger's RMSNorm + F.linear where ``liger_kernel`` imports.
   - ``prefill``: M in {128, 512, 2048, 8192, 16384} at 4096×4096, 4096×14336 and 8192×8192 (11 beyond the
     table): the chosen config and its twin on the other path (through pointers where the pick reads through
     descriptors, and the other way round), torch.compile and cuBLAS (the targets; fewer candidates than the
     table's: these are the long shapes).
   - ``decode``: M in {1, 8, 16, 32, 64} at the 8 K×N of issue 16 (33 shapes beyond the table): the chosen config
     and its twin through pointers, torch.compile and cuBLAS.
   --wide: every group times every candidate (a tuning run).
   Writes OUT_DIR/rmsnorm_linear_gpu.json (rewritten after each shape, so that a run cut short keeps what it
   measured) and OUT_DIR/rmsnorm_linear_gpu.log.

Device time, estimated from the counts (a fresh machine, nothing compiled; the per-item costs are guesses, which
the log's timestamps and the JSON's wall_s will correct): the checks compile 62 variants of our kernels (~1.5 s
each, ~95 s) and run 248 checks (~30 s); the timing compiles ~90 more (~135 s) and torch.compile's graph for 55
shapes (~15 s the first, ~1-2.5 s each after: ~80 s); 303 figures at REP_MS = 25 (do_bench_cudagraph: ten
replays of a ~25 ms graph, plus the capture: ~0.35 s each, ~105 s); the clocks' warm-up and the copy probe ~3 s.
About 7.5 minutes if compiled as the run goes (--precompile 0), more than the ~6 a call should take. So by
default 12 processes first compile all of it (kernels and torch.compile's graphs) into the caches on disk, the
main process then loading them: the ~310 s of compiling become ~30-60 s if they spread as they should (not yet
seen on the GPU machine); and --deadline-s (default 330 s) stops starting shapes after it, the JSON listing what
was skipped, for a second call with --groups decode --skip-checks.

--report turns the JSON into the markdown table of docs/performance.md: ours (the config ``config_for`` picks,
what ``measure`` runs) and the best candidate, eager, compile, cuBLAS, Liger, ours/cuBLAS, ours/compile, % of the
copy ceiling where W is 64 MB or more, and issue 16's targets: decode (M ≤ 64) no slower than compile and within
5% of cuBLAS; prefill (M ≥ 128) no slower than compile, and within 1.1× cuBLAS from M = 2,048 on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TABLE = [(1, 4096, 4096), (1, 4096, 14336), (8, 4096, 14336), (32, 4096, 14336), (64, 4096, 4096),
         (128, 4096, 14336), (512, 8192, 8192), (2048, 4096, 14336), (8192, 4096, 4096), (1, 8192, 8192),
         (1, 5120, 13824)]
# Llama-3-8B (4096×4096 attention, ×6144 fused qkv, ×14336 MLP, ×28672 fused gate/up), Qwen2.5-14B (5120×13824),
# Llama-3-70B (8192×8192, ×10240 qkv, ×57344 gate/up): issue 16's decode targets.
DECODE_KN = [(4096, 4096), (4096, 6144), (4096, 14336), (4096, 28672), (5120, 13824), (8192, 8192), (8192, 10240),
             (8192, 57344)]
DECODE_M = (1, 8, 16, 32, 64)
PREFILL_KN = [(4096, 4096), (4096, 14336), (8192, 8192)]
PREFILL_M = (128, 512, 2048, 8192, 16384)
# Odd shapes for the checks: gemv at M = 1 (K split 4) and M = 33 (64-row x tiles, split 8), N odd; the small tile
# (M = 200, split 8, K = 4104: not a multiple of the K step, the last split ending inside one, still 16-byte rows
# for TMA); the big tile with M odd, y's rows fit for TMA (N = 3000) and not (N = 1001: the persistent kernel
# stores through pointers).
CHECKS = [(1, 4096, 4097), (33, 4096, 1000), (200, 4104, 1000), (2049, 4096, 3000), (300, 4096, 1001)]

DRY_TABLE = [(1, 64, 40), (3, 100, 33)]
DRY_DECODE_KN = [(64, 40)]
DRY_DECODE_M = (1, 9)
DRY_PREFILL_KN = [(64, 48)]
DRY_PREFILL_M = (70, 300)
DRY_CHECKS = [(1, 136, 45), (70, 200, 33)]  # the big tile is timed (300 × 64 × 48), and checked first

REP_MS = 25  # do_bench_cudagraph's window (measure's is 100 ms): ten replays of a graph this long, the median
WARMUP_MS = 10
SEEDS = (101, 202)
COPY_SHARE_TARGET = 0.85  # of the measured copy bandwidth, on W + x + y, where W is at least:
COPY_TARGET_MIN_W_BYTES = 64e6
DECODE_MAX_M = 64
DECODE_CUBLAS_TARGET = 1.05
PREFILL_CUBLAS_TARGET = 1.1
PREFILL_CUBLAS_MIN_M = 2048
JSON_NAME = "rmsnorm_linear_gpu.json"
LOG_NAME = "rmsnorm_linear_gpu.log"


class Run:
    """The run's state: where it logs, what it has recorded, when it started."""

    def __init__(self, out_dir: Path, dry: bool):
        self.out_dir = out_dir
        self.dry = dry
        self.t0 = time.time()
        self.log_file = open(out_dir / LOG_NAME, "w")
        self.record: dict = {"env": {}, "checks": [], "shapes": [], "skipped": []}

    def log(self, *args) -> None:
        line = f"[{time.time() - self.t0:6.1f}s] " + " ".join(str(a) for a in args)
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def save(self) -> None:
        path = self.out_dir / JSON_NAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.record, indent=1, default=str))
        tmp.replace(path)


def shapes_of(dry: bool) -> dict[str, list[tuple[int, int, int]]]:
    """The shapes of each group, each shape once (in the first group that has it)."""
    table = DRY_TABLE if dry else TABLE
    decode_m = DRY_DECODE_M if dry else DECODE_M
    decode = [(m, k, n) for k, n in (DRY_DECODE_KN if dry else DECODE_KN) for m in decode_m]
    prefill = [(m, k, n) for k, n in (DRY_PREFILL_KN if dry else PREFILL_KN)
               for m in (DRY_PREFILL_M if dry else PREFILL_M)]
    seen = set(table)
    groups = {"table": list(table), "decode": [], "prefill": []}
    for name, shapes in (("decode", decode), ("prefill", prefill)):
        for s in shapes:
            if s not in seen:
                seen.add(s)
                groups[name].append(s)
    return groups


def cfg_text(cfg) -> str:
    d = asdict(cfg)
    keep = [f"{d['kind']} {d['block_m']}x{d['block_n']}x{d['block_k']} w{d['num_warps']} s{d['num_stages']}"
            f" split{d['split_k']}"]
    tma = (" tma" + (" host" if d["host_desc"] else "")) if d["tma"] else ""
    if d["kind"] == "gemv":
        keep.append(f"ss={d['ss']}{tma}")
    else:
        keep.append(f"g{d['group_m']} rstd={d['rstd']}{tma}" + (" ws" if d["warp_spec"] else "")
                    + (" persistent" if d.get("persistent") else "") + (" flat" if d.get("flatten") else "")
                    + (" sub" if d.get("subtile") else "")
                    + (f" occ{d['occupancy']}" if d.get("occupancy", 1) != 1 else "") + (" pdl" if d.get("pdl") else ""))
    return " ".join(keep)


def one_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


# ---- the flow -----------------------------------------------------------------------------------------------------


class Flow:
    """Checks and timings of rmsnorm_linear on ``device`` ("cuda", or "cpu" in the interpreter with --dry)."""

    def __init__(self, run: Run, device: str):
        import torch

        from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear
        from rooflinectl.measure import bench

        self.run, self.device, self.torch, self.bench = run, device, torch, bench
        self.kernel = RMSNormLinear()
        if device == "cuda":
            self.main = bench.gpu_bench("cuda_graph")
            self.events = bench.gpu_bench("events")
        else:  # --dry: a stand-in for the GPU timer, so that the flow runs; its figures mean nothing
            self.main = self.events = cpu_bench
        self.spec = None
        self.all_candidates = False
        self.wide = False  # --wide: every group times every candidate
        self.liger = liger_baseline(self.kernel)

    def fresh(self, shape, dtype, seed):
        gen = self.torch.Generator(device=self.device).manual_seed(seed)
        inputs = self.kernel.make_inputs(shape, dtype, self.device, gen)
        return inputs, self.kernel.make_output(inputs)

    def check_candidate(self, shape, dtype, cfg) -> dict:
        """Two seeds, each run twice into a NaN-poisoned output: within tolerance, and the same bits both times."""
        from rooflinectl.kernels.base import relative_error

        k = self.kernel
        entry = {"shape": list(shape), "dtype": dtype, "config": asdict(cfg), "config_text": cfg_text(cfg)}
        worst, same = 0.0, True
        try:
            for seed in SEEDS:
                inputs, out = self.fresh(shape, dtype, seed)
                ref = k.reference(inputs)
                first = None
                for _ in range(2):
                    out.fill_(float("nan"))
                    k.run(inputs, out, cfg)
                    self.bench.sync(self.device)
                    worst = max(worst, relative_error(out, ref))
                    if first is None:
                        first = out.clone()
                    elif not self.torch.equal(first, out):
                        same = False
                del ref, inputs, out, first
        except Exception as err:  # a compile error, out of resources: recorded, the run goes on
            entry.update(passed=False, error=one_line(err))
            return entry
        passed = math.isfinite(worst) and worst <= k.tolerance(dtype) and same
        entry.update(rel_error=worst, tolerance=k.tolerance(dtype), repeatable=same, passed=passed)
        return entry

    def candidates(self, shape, dtype) -> list:
        """``RMSNormLinear.candidates``, the chosen config first; without --all-candidates, less the gemv's split-K
        sweep (the chosen split was measured: rmsnorm_linear_configs._PROGRAMS_PER_SM), which issue 16 does not
        question, to keep the call within its time."""
        chosen = self.kernel.config_for(shape, dtype)
        out = [chosen, *(c for c in self.kernel.candidates(shape, dtype, self.spec) if c != chosen)]
        if self.all_candidates:
            return out
        return [c for c in out if c == chosen or c.kind != "gemv" or replace(c, split_k=chosen.split_k) != chosen]

    def checks(self, shapes, dtypes) -> None:
        for dtype in dtypes:
            for shape in shapes:
                for cfg in self.candidates(shape, dtype):
                    e = self.check_candidate(shape, dtype, cfg)
                    self.run.record["checks"].append(e)
                    verdict = "ok" if e["passed"] else "FAIL"
                    detail = e.get("error") or f"{e['rel_error']:.2e} repeatable={e['repeatable']}"
                    self.run.log(f"check {shape} {dtype} {e['config_text']}: {detail} {verdict}")
                self.run.save()

    def methods(self, group: str, shape, dtype) -> list[tuple[str, str, object]]:
        """(name, kind, what to run) per method timed for ``shape`` in ``group``."""
        k = self.kernel
        chosen = k.config_for(shape, dtype)
        if group == "table" or self.wide:
            configs = self.candidates(shape, dtype)
        elif group == "prefill":  # the chosen tile kernel and its twin on the other path (pointers, descriptors)
            other = [c for c in self.candidates(shape, dtype) if c.tma != chosen.tma]
            configs = [chosen, *other[:1]]
        else:  # decode: the chosen gemv and its twin through pointers (where TMA does not fit)
            configs = list(dict.fromkeys([chosen, replace(chosen, tma=False, host_desc=False)]))
        out: list[tuple[str, str, object]] = [
            ("ours" if c == chosen else f"candidate {i}", "kernel", c) for i, c in enumerate(configs)]
        fns = k.baselines()
        names = ["torch", "compile", "cublas"] if group == "table" else ["compile", "cublas"]
        out += [(n, "baseline", fns[n]) for n in names]
        if group == "table":
            out.append(("liger", "baseline", self.liger))
        return out

    def tasks(self, check_shapes, check_dtypes, groups, timed_dtype) -> list:
        """What the run will compile, as (shape, dtype, config as a dict, or "compile" for torch.compile's graph):
        every checked candidate, every timed kernel config and the compile baseline of every timed shape."""
        out = [(shape, dtype, asdict(c)) for dtype in check_dtypes for shape in check_shapes
               for c in self.candidates(shape, dtype)]
        for group, shapes in groups:
            for shape in shapes:
                out += [(shape, timed_dtype, asdict(what)) for _, kind, what in self.methods(group, shape, timed_dtype)
                        if kind == "kernel"]
                out.append((shape, timed_dtype, "compile"))
        return list({json.dumps(t): t for t in out}.values())

    def time_shape(self, group: str, shape, dtype, seed: int, l2_bytes: int) -> dict:
        from rooflinectl.kernels.base import relative_error

        k, bench = self.kernel, self.bench
        op = k.op(shape, dtype)
        # What one call moves by the kernel's count (x + W + g + y): the rotation holds 4 L2s of it.
        n_sets = bench.input_sets(int(op.bytes), l2_bytes, bench.free_memory(self.device))
        entry = {"group": group, "shape": list(shape), "dtype": dtype, "bytes": op.bytes, "flops": op.flops,
                 "w_bytes": shape[1] * shape[2] * 2 if dtype != "fp32" else shape[1] * shape[2] * 4,
                 "input_sets": n_sets, "chosen": asdict(k.config_for(shape, dtype)), "methods": []}
        sets = [self.fresh(shape, dtype, seed + i) for i in range(n_sets)]
        ref = k.reference(sets[0][0])
        tol = k.tolerance(dtype)
        for name, kind, what in self.methods(group, shape, dtype):
            m: dict = {"name": name, "kind": kind}
            if kind == "kernel":
                m.update(config=asdict(what), config_text=cfg_text(what))
            started = time.time()
            try:
                if what is None:
                    raise RuntimeError("liger_kernel does not import here")
                if kind == "kernel":
                    def call(s, cfg=what):
                        return k.run(s[0], s[1], cfg)
                    out = sets[0][1]
                    out.fill_(float("nan"))
                    call(sets[0])
                else:
                    def call(s, fn=what):
                        return fn(s[0])
                    out = call(sets[0])
                bench.sync(self.device)
                err = relative_error(out, ref)
                m["rel_error"] = err
                if not (math.isfinite(err) and err <= tol):
                    m["error"] = f"wrong result: relative error {err:.1e} > tolerance {tol:.0e}: not timed"
                else:
                    for other in sets[1:]:  # each set once outside the capture: what a method makes lazily per
                        call(other)        # input (Liger's module for a gain) is not made inside the CUDA graph
                    bench.sync(self.device)
                    t, used, why = bench.time_figure(bench.rotated(call, sets), "cuda_graph", self.main,
                                                     self.events, warmup_ms=WARMUP_MS, rep_ms=REP_MS)
                    m.update(time_s=t[0], p20_s=t[1], p80_s=t[2], capture_error=why,
                             timer=used if self.device == "cuda" else "cpu stand-in (--dry)")
            except Exception as err:  # recorded with its one line; the next method runs
                m["error"] = one_line(err)
                if self.device == "cuda":
                    self.torch.cuda.synchronize()
            m["wall_s"] = time.time() - started
            entry["methods"].append(m)
            shown = f"{m['time_s'] * 1e6:9.1f} µs" if "time_s" in m else m.get("error", "")
            self.run.log(f"  {shape} {name:12} {m.get('config_text', '')}: {shown}")
        del sets, ref
        if self.device == "cuda":
            self.torch.cuda.empty_cache()
        entry["wall_s"] = sum(m["wall_s"] for m in entry["methods"])
        return entry


def warm(tasks: list, device: str = "cuda") -> list:
    """In a worker process: run each task of ``Flow.tasks`` once on inputs of the right shapes and strides (zeros:
    their values do not matter), so that Triton's cache on disk (and Inductor's, for "compile") holds what the main
    process will then load instead of compiling; (shape, dtype, what, seconds, error or None) per task."""
    import torch

    from rooflinectl.kernels.base import torch_dtype
    from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear, RMSNormLinearConfig

    kernel = RMSNormLinear()
    done = []
    for shape, dtype, what in tasks:
        started, error = time.time(), None
        try:
            m, k, n = shape
            t = torch_dtype(dtype)
            x = torch.zeros((m, k), dtype=t, device=device)
            w = torch.zeros((n, k), dtype=t, device=device)
            inputs = {"x": x, "w": w, "g": torch.ones((k,), dtype=t, device=device), "w_g": w, "x_normed": x}
            if what == "compile":
                kernel.baselines()["compile"](inputs)
            else:
                kernel.run(inputs, torch.empty((m, n), dtype=t, device=device), RMSNormLinearConfig(**what))
            if device == "cuda":
                torch.cuda.synchronize()
            del x, w, inputs
        except Exception as err:  # the main process meets it again, and records it
            error = one_line(err)
        done.append((list(shape), dtype, what, time.time() - started, error))
    return done


PRECOMPILE_TIMEOUT_S = 240  # past this, the workers are left and the run compiles as it goes


def precompile(run: Run, tasks: list, workers: int, device: str) -> None:
    """``warm`` over ``workers`` processes (spawned: each with its own CUDA context), the costliest tasks spread
    first; the main process waits, then finds the compiled kernels on disk. Best effort: a failure or a worker
    past PRECOMPILE_TIMEOUT_S is logged and the run goes on compiling as it goes."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, wait

    started = time.time()
    # torch.compile's graphs first (the slowest), then the tiles (wgmma, big), then the gemvs.
    order = sorted(tasks, key=lambda t: (t[2] != "compile", t[2] == "compile" or t[2]["kind"] == "gemv"))
    chunks = [c for c in (order[i::workers] for i in range(workers)) if c]
    pool = ProcessPoolExecutor(len(chunks), mp_context=multiprocessing.get_context("spawn"),
                               initializer=_one_compile_thread)
    try:
        futures = [pool.submit(warm, chunk, device) for chunk in chunks]
        finished, late = wait(futures, timeout=PRECOMPILE_TIMEOUT_S)
        results = [r for f in futures if f in finished and f.exception() is None for r in f.result()]
        failed = [one_line(f.exception()) for f in finished if f.exception() is not None]
    except Exception as err:
        run.log(f"precompile failed ({one_line(err)}): compiling in the main process as the run goes")
        pool.shutdown(wait=False, cancel_futures=True)
        return
    pool.shutdown(wait=not late, cancel_futures=True)
    if late or failed:
        run.log(f"precompile: {len(late)} workers still running after {PRECOMPILE_TIMEOUT_S} s, {len(failed)} "
                f"failed ({'; '.join(failed[:3])}): the rest compiles as the run goes")
    errors = [r for r in results if r[4]]
    run.record["precompile"] = {"workers": workers, "tasks": len(results), "errors": len(errors),
                                "wall_s": time.time() - started, "task_s": sum(r[3] for r in results)}
    run.log(f"precompiled {len(results)} kernels and graphs in {workers} processes: {time.time() - started:.0f} s "
            f"({sum(r[3] for r in results):.0f} s of work), {len(errors)} errors")
    for shape, dtype, what, _, error in errors[:10]:
        run.log(f"  precompile {shape} {dtype} {what if what == 'compile' else cfg_text_of(what)}: {error}")


def _one_compile_thread() -> None:
    """A worker's Inductor compiles in the worker itself: N workers × a pool per CPU would swamp the machine."""
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"


def cfg_text_of(d: dict) -> str:
    from rooflinectl.kernels.rmsnorm_linear import RMSNormLinearConfig

    return cfg_text(RMSNormLinearConfig(**d))


def cpu_bench(fn, warmup_ms: float = 0.0, rep_ms: float = 0.0) -> tuple[float, float, float]:
    """--dry's stand-in for the GPU timer (the interpreter's times mean nothing): three calls after one."""
    fn()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


def liger_baseline(kernel):
    """Liger-Kernel's RMSNorm followed by F.linear, or None where liger_kernel does not import."""
    try:
        from liger_kernel.transformers.rms_norm import LigerRMSNorm
    except Exception:
        return None
    import torch

    norms: dict = {}

    def run(inputs):
        x, g = inputs["x"], inputs["g"]
        key = (x.shape[1], x.dtype, x.device, g.data_ptr())
        norm = norms.get(key)
        if norm is None:  # one module per gain, made by the untimed calls before the capture (time_shape)
            norm = LigerRMSNorm(x.shape[1], eps=kernel.eps)
            norm.weight = torch.nn.Parameter(g, requires_grad=False)  # on x's device, in its dtype: no copy
            norms[key] = norm
        with torch.no_grad():
            return torch.nn.functional.linear(norm(x), inputs["w"], inputs.get("bias"))

    return run


def environment(device: str) -> dict:
    import torch
    import triton

    env = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": " ".join(sys.argv), "device": device,
           "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
           "timer": "cuda_graph" if device == "cuda" else "cpu stand-in (--dry)", "rep_ms": REP_MS,
           "warmup_ms": WARMUP_MS}
    try:
        from importlib.metadata import version

        import liger_kernel  # noqa: F401

        env["liger_kernel"] = version("liger-kernel")
    except Exception as err:
        env["liger_kernel"] = f"not available ({type(err).__name__})"
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                   compute_capability=".".join(map(str, torch.cuda.get_device_capability(0))),
                   sm_count=props.multi_processor_count, l2_bytes=getattr(props, "L2_cache_size", None))
    return env


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", nargs="?", help="folder for the JSON and the log")
    p.add_argument("--dry", action="store_true",
                   help="the whole flow on the CPU in Triton's interpreter, tiny shapes")
    p.add_argument("--groups", default="table,prefill,decode", help="comma list of table, prefill, decode")
    p.add_argument("--skip-checks", action="store_true", help="go straight to the timings")
    p.add_argument("--all-candidates", action="store_true", help="the gemv's split-K sweep too")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default=None,
                   help="the timed data type (default bf16; --dry: fp16, and only fp16)")
    p.add_argument("--wide", action="store_true",
                   help="time every candidate in the prefill and decode groups too (a tuning run)")
    p.add_argument("--deadline-s", type=float, default=330.0, help="start no shape after this many seconds")
    p.add_argument("--precompile", type=int, default=None, metavar="N",
                   help="compile what the run needs in N processes first (0: as it goes; default 12, --dry 0)")
    p.add_argument("--report", metavar="JSON", help="print the markdown table of a run's JSON and exit")
    args = p.parse_args(argv)
    if args.report:
        print(report(json.loads(Path(args.report).read_text())))
        return 0
    if not args.out:
        p.error("OUT_DIR is required (or --report JSON)")
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    if bad := [g for g in groups if g not in ("table", "decode", "prefill")]:
        p.error(f"--groups: unknown {', '.join(bad)} (table, decode, prefill)")
    if args.dry and args.dtype not in (None, "fp16"):
        p.error("--dry times fp16 only (the interpreter's bf16 tl.dot is wrong)")
    if args.dry:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported, which the flow does
        import warnings

        warnings.filterwarnings("ignore", category=RuntimeWarning)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = Run(out_dir, args.dry)
    device = "cpu" if args.dry else "cuda"
    run.record["env"] = environment(device)
    run.log("environment:", json.dumps(run.record["env"]))
    flow = Flow(run, device)
    flow.all_candidates = args.all_candidates
    flow.wide = args.wide
    timed_dtype = "fp16" if args.dry else (args.dtype or "bf16")
    run.record["env"]["timed_dtype"] = timed_dtype
    if device == "cuda":
        from rooflinectl.measure.ceilings import probe_copy_bandwidth, warm_up_clocks
        from rooflinectl.measure.device import detect_device_spec

        try:
            flow.spec = detect_device_spec()
        except Exception as err:  # a device no bundled spec matches: the candidates of the tuned GPU
            run.log(f"no bundled spec for this device ({one_line(err)}): candidates as for the H200")
        l2 = run.record["env"].get("l2_bytes") or 60 * 2**20
        run.log("warming the clocks up, then the copy ceiling")
        warm_up_clocks()
    else:
        from rooflinectl.measure.ceilings import probe_copy_bandwidth

        l2 = 32 * 1024  # --dry: a small "L2", so that every shape rotates 2 sets or more (4 L2s over 73 KB at most)
    gbps, moved, probe = probe_copy_bandwidth(flow.main, l2, timer="cuda_graph", events=flow.events, device=device)
    run.record["env"].update(copy_gbps=gbps, copy_bytes=moved, l2_used_bytes=l2,
                             copy_timer=probe.timer if device == "cuda" else "cpu stand-in (--dry)")
    run.log(f"copy ceiling: {gbps:,.0f} GB/s ({moved / 1e9:.2f} GB moved, {probe.timer})")
    run.save()
    check_shapes = DRY_CHECKS if args.dry else CHECKS
    check_dtypes = ("fp16", "fp32") if args.dry else ("bf16", "fp16")
    shapes = shapes_of(args.dry)
    workers = args.precompile if args.precompile is not None else (0 if args.dry else 12)
    if workers > 0:  # (the interpreter compiles nothing but torch.compile's graphs: --dry only tests the flow)
        tasks = flow.tasks(() if args.skip_checks else check_shapes, check_dtypes,
                           [(g, shapes[g]) for g in groups], timed_dtype)
        precompile(run, tasks, workers, device)
        run.save()

    if not args.skip_checks:
        started = time.time()
        flow.checks(check_shapes, check_dtypes)
        run.record["checks_wall_s"] = time.time() - started
        failed = [c for c in run.record["checks"] if not c["passed"]]
        run.log(f"checks: {len(run.record['checks']) - len(failed)} passed, {len(failed)} failed")
    for gi, group in enumerate(groups):
        for si, shape in enumerate(shapes[group]):
            if time.time() - run.t0 > args.deadline_s:
                run.record["skipped"].append({"group": group, "shape": list(shape), "why": "deadline"})
                continue
            run.log(f"{group} {shape} {timed_dtype}")
            try:
                entry = flow.time_shape(group, shape, timed_dtype, seed=1000 * (gi + 1) + si, l2_bytes=l2)
            except Exception:  # out of memory making the inputs, say: recorded, the next shape runs
                entry = {"group": group, "shape": list(shape), "dtype": timed_dtype,
                         "error": traceback.format_exc(limit=3)}
                run.log(entry["error"])
            run.record["shapes"].append(entry)
            run.save()
    run.record["wall_s"] = time.time() - run.t0
    run.save()
    if run.record["skipped"]:
        run.log(f"skipped after the deadline: {len(run.record['skipped'])} shapes (see the JSON)")
    print(report(run.record))
    return 1 if any(not c["passed"] for c in run.record["checks"]) else 0


# ---- the report ---------------------------------------------------------------------------------------------------


def _us(t) -> str:
    return "—" if t is None else f"{t * 1e6:,.1f}"


def _ratio(a, b) -> str:
    return "—" if a is None or b is None else f"{a / b:.2f}"


def verdict(entry: dict, ours: float | None, copy_gbps: float | None) -> tuple[str, str]:
    """(% of copy or "—", whether issue 16's target for this shape is met: "yes", "no (why)" or "—")."""
    times = {m["name"]: m.get("time_s") for m in entry["methods"]}
    compile_t, cublas = times.get("compile"), times.get("cublas")
    m = entry["shape"][0]
    share = "—"
    if ours is not None and copy_gbps and entry["w_bytes"] >= COPY_TARGET_MIN_W_BYTES:
        share = f"{entry['bytes'] / ours / 1e9 / copy_gbps:.0%}"
    if ours is None or compile_t is None or cublas is None:
        return share, "—"
    misses = []
    if ours > compile_t:
        misses.append("slower than compile")
    if m <= DECODE_MAX_M:
        if ours > DECODE_CUBLAS_TARGET * cublas:
            misses.append(f"> {DECODE_CUBLAS_TARGET:.2f}× cuBLAS")
        if share != "—" and entry["bytes"] / ours / 1e9 < COPY_SHARE_TARGET * copy_gbps:
            misses.append(f"< {COPY_SHARE_TARGET:.0%} of copy")
    elif m >= PREFILL_CUBLAS_MIN_M and ours > PREFILL_CUBLAS_TARGET * cublas:
        misses.append(f"> {PREFILL_CUBLAS_TARGET:.1f}× cuBLAS")
    return share, "yes" if not misses else "no (" + ", ".join(misses) + ")"


def report(record: dict) -> str:
    """The markdown table of a run: one row per timed shape, in the run's order."""
    env = record["env"]
    copy = env.get("copy_gbps")
    lines = [
        f"{env.get('timed_dtype', 'bf16')} on {env.get('gpu', env.get('device'))}, torch {env.get('torch')}, "
        f"triton {env.get('triton')}, "
        f"liger_kernel {env.get('liger_kernel')}, {env.get('date')}; timer {env.get('timer')} "
        f"(rep {env.get('rep_ms')} ms), copy ceiling {copy:,.0f} GB/s; `{env.get('command')}`"
        if copy else f"{env.get('device')}, {env.get('date')}; `{env.get('command')}`",
        "",
        "| M × K × N | ours µs | best candidate µs | eager | compile | cuBLAS | Liger | ours/cuBLAS | ours/compile "
        "| of copy | target met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in record["shapes"]:
        shape = " × ".join(str(s) for s in e["shape"])
        if "methods" not in e:
            lines.append(f"| {shape} | error | | | | | | | | | — |")
            continue
        times = {m["name"]: m.get("time_s") for m in e["methods"]}
        kernels = [m for m in e["methods"] if m["kind"] == "kernel" and m.get("time_s") is not None]
        ours = times.get("ours")
        best = min(kernels, key=lambda m: m["time_s"]) if kernels else None
        best_text = "—" if best is None or best["name"] == "ours" else \
            f"{_us(best['time_s'])} ({best['config_text']})"
        share, met = verdict(e, ours, copy)
        lines.append(
            f"| {shape} | {_us(ours)} | {best_text} | {_us(times.get('torch'))} | {_us(times.get('compile'))} | "
            f"{_us(times.get('cublas'))} | {_us(times.get('liger'))} | {_ratio(ours, times.get('cublas'))} | "
            f"{_ratio(ours, times.get('compile'))} | {share} | {met} |")
    if record.get("skipped"):
        lines += ["", "Not timed (deadline): " + ", ".join("×".join(map(str, s["shape"])) for s in record["skipped"])]
    failed = [c for c in record.get("checks", []) if not c["passed"]]
    if record.get("checks"):
        why = [c.get("error") or f"error {c['rel_error']:.1e}, repeatable {c['repeatable']}" for c in failed]
        lines += ["", f"Checks: {len(record['checks']) - len(failed)} passed, {len(failed)} failed"
                  + "".join(f"; {'×'.join(map(str, c['shape']))} {c['dtype']} {c['config_text']}: {w}"
                            for c, w in zip(failed, why))]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
