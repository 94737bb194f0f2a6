"""Check every registered kernel against its reference, then time candidate configurations per shape.

One call on a GPU machine does it all (device time is scarce): correctness in bf16/fp16/fp32 on odd shapes,
the ceilings (torch copy_ bandwidth, torch bf16 matmul), then per kernel and shape every candidate config
(checked first, timed only when correct), torch eager and torch.compile, and a table against the targets of
issues 4 and 5. The full log and a JSON record go to --out.

Timing: each candidate runs over R sets of inputs (rotating, R·bytes ≥ 4 × the L2) captured R·k times in one
CUDA graph, replayed 7 times; the median replay over the calls in it is the time of one call. That removes the
CPU's launch cost (µs kernels are otherwise timed as Python) and the L2 reuse between calls, without leaving the
L2 full of dirty lines as a flush does. triton.testing.do_bench (L2 flushed before each call, median) is printed
beside it as "flush".

    python benchmarks/tune_kernels.py --out /tmp/tune            # everything
    python benchmarks/tune_kernels.py --only softmax,copy        # some sections
    TRITON_INTERPRET=1 python benchmarks/tune_kernels.py --dry   # the script's logic on a CPU, tiny shapes
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, is_dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402

from rooflinectl.kernels.base import relative_error  # noqa: E402
from rooflinectl.kernels.registry import get_kernel  # noqa: E402

T0 = time.time()
LOG = None
RECORD: dict = {"env": {}, "ceilings": {}, "correctness": [], "timings": []}
L2_BYTES = 60 * 2**20
# The spec of the device in hand (specs.hardware.match_device), for the shared-memory limit the candidates must fit;
# None (the limit the configs were tuned for) off the GPU or for a device no bundled spec matches.
SPEC = None


def log(*args):
    line = " ".join(str(a) for a in args)
    print(line, flush=True)
    if LOG:
        LOG.write(line + "\n")
        LOG.flush()


def elapsed() -> str:
    return f"[{time.time() - T0:6.1f}s]"


def cfg_str(cfg) -> str:
    if cfg is None:
        return "-"
    d = asdict(cfg) if is_dataclass(cfg) else dict(cfg)
    short = {
        "block": "b",
        "rows_per_program": "r",
        "num_warps": "w",
        "num_stages": "s",
        "block_m": "bm",
        "block_n": "bn",
        "block_k": "bk",
        "group_m": "g",
        "reverse": "rev",
        "hints": "h",
        "fold_g": "fold",
        "rstd": "rstd",
        "mode": "",
        "kind": "",
    }
    return " ".join(
        f"{short.get(k, k)}{'' if short.get(k) == '' else '='}{int(v) if isinstance(v, bool) else v}"
        for k, v in d.items()
    )


# ---- timing ------------------------------------------------------------------------------------------------


def bench_graph(calls, target_ms: float = 4.0, replays: int = 7, graph: bool = True) -> float:
    """Median time of one call in ms, the calls run round-robin over R rotating input sets.

    The calls are captured in one CUDA graph (else the CPU's launch cost, 20 to 100 µs a call in Python, is what
    gets timed for short kernels), except with graph=False: torch's copy_ becomes a memcpy node in a graph, which
    the copy engines run at two thirds of the SMs' bandwidth (2.7 against 4.2 TB/s on an H200), so copy_ is timed
    in a plain loop between two events.
    """
    if DEVICE == "cpu":
        t = time.perf_counter()
        for c in calls:
            c()
        return (time.perf_counter() - t) * 1e3 / len(calls)
    for c in calls:  # warm-up: compilation, autotuning of baselines, allocator
        c()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for c in calls:
        c()
    end.record()
    end.synchronize()
    est = max(start.elapsed_time(end) / len(calls), 1e-3)
    r = len(calls)
    n = max(r, min(3000, int(target_ms / est)))
    n = max(r, n - n % r)

    def loop():
        for i in range(n):
            calls[i % r]()

    captured = None
    if graph:
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured):
            loop()
    run = captured.replay if captured is not None else loop
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / n)
    del captured
    return statistics.median(times)


def bench_any(calls, graph: bool = True) -> tuple[float, str]:
    """bench_graph, falling back to a plain loop if the calls cannot be captured; says which it used."""
    if graph:
        try:
            return bench_graph(calls), "graph"
        except Exception as exc:
            log(f"     (graph capture failed: {type(exc).__name__}: {str(exc)[:120]}; timing a plain loop)")
            torch.cuda.synchronize()
    return bench_graph(calls, graph=False), "loop"


def bench_flush(fn) -> float:
    if DEVICE == "cpu":
        return float("nan")
    return triton.testing.do_bench(fn, warmup=5, rep=30, return_mode="median")


def rotation(bytes_per_set: float) -> int:
    return int(min(16, max(2, math.ceil(4 * L2_BYTES / bytes_per_set))))


# ---- correctness -------------------------------------------------------------------------------------------


def row_error(out, ref) -> float:
    """Largest relative error of one row: a race that spoils a few rows hides in the global error."""
    if out.dim() != 2:
        return float("nan")
    o, r = out.double(), ref.double()
    num = torch.linalg.vector_norm(o - r, dim=1)
    den = torch.linalg.vector_norm(r, dim=1).clamp_min(1e-30)
    return float((num / den).max())


def check(kernel, inputs, out, cfg, dtype, ref=None) -> tuple[bool, float, float]:
    out.fill_(float("nan"))
    kernel.run(inputs, out, cfg)
    if ref is None:
        ref = kernel.reference(inputs)
    err = relative_error(out, ref)
    rows = row_error(out, ref)
    ok = err <= kernel.tolerance(dtype) and not rows > 4 * max(kernel.tolerance(dtype), 1e-6)
    return ok, err, rows


def anatomy(kernel) -> str:
    parts = []
    for la in kernel.last_launches():
        parts.append(
            f"{la.function} grid={la.grid} regs={la.n_regs} spills={la.n_spills} "
            f"smem={la.shared_bytes} warps={la.num_warps}"
        )
    return "; ".join(parts)


def correctness_section(gen):
    log(f"\n== correctness {elapsed()}")
    from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear

    cases = {
        "fused_softmax": [(1823, 781), (7, 262147)],
        "copy": [(1000003,)],
        "matmul": [(1823, 781, 1000)],
        "rmsnorm_linear": [(1, 4095, 1001), (33, 1000, 777), (300, 1000, 555)],
    }
    if FULL_CHECK:
        cases["fused_softmax"] += [(1, 1), (37, 100000), (4096, 4096), (64, 32768)]
        cases["copy"] += [(1,), (1 << 24,)]
        cases["matmul"] += [(1, 1, 1), (2048, 4096, 3000), (4096, 4096, 4096)]
        cases["rmsnorm_linear"] += [
            (7, 4096, 4096),
            (64, 4096, 14336),
            (1000, 4096, 14336),
            (8192, 4096, 4096),
        ]
    if DRY:
        cases = {name: get_kernel(name).interpret_shapes for name in cases}
    failures = 0
    for name, shapes in cases.items():
        kernels = [get_kernel(name)]
        if name == "rmsnorm_linear":
            kernels.append(RMSNormLinear(with_bias=True))
        for kernel in kernels:
            for shape in shapes:
                if getattr(kernel, "with_bias", False) and shape != shapes[0]:
                    continue
                for dtype in kernel.dtypes:
                    if DRY and dtype == "bf16":
                        continue
                    try:
                        inputs = kernel.make_inputs(shape, dtype, DEVICE, gen)
                        out = kernel.make_output(inputs)
                        ok, err, rerr = check(kernel, inputs, out, None, dtype)
                        extra = anatomy(kernel)
                    except Exception as exc:  # a failure is a finding, not the end of the run
                        ok, err, rerr, extra = (
                            False,
                            float("nan"),
                            float("nan"),
                            f"{type(exc).__name__}: {exc}",
                        )
                    failures += not ok
                    tag = name + ("+bias" if getattr(kernel, "with_bias", False) else "")
                    log(
                        f"{'ok  ' if ok else 'FAIL'} {tag:20s} {str(shape):22s} {dtype} err={err:.2e} row={rerr:.1e} "
                        f"tol={kernel.tolerance(dtype):.0e}  {extra}"
                    )
                    RECORD["correctness"].append(
                        {
                            "kernel": tag,
                            "shape": shape,
                            "dtype": dtype,
                            "ok": ok,
                            "err": err,
                            "anatomy": extra,
                        }
                    )
            # non-contiguous rows for softmax: a column slice of a wider tensor
            if name == "fused_softmax":
                for dtype in kernel.dtypes:
                    if DRY and dtype == "bf16":
                        continue
                    wide = kernel.make_inputs((513, 5000), dtype, DEVICE, gen)["x"]
                    inputs = {"x": wide[:, 17 : 17 + 3001]}
                    out = torch.empty((513, 3001), dtype=wide.dtype, device=DEVICE)
                    ok, err, rerr = check(kernel, inputs, out, None, dtype)
                    failures += not ok
                    log(
                        f"{'ok  ' if ok else 'FAIL'} fused_softmax slice  (513, 3001) of 5000 {dtype} err={err:.2e}"
                    )
    log(f"correctness: {failures} failures {elapsed()}")
    return failures


# ---- ceilings ----------------------------------------------------------------------------------------------


def ceilings(gen):
    log(f"\n== ceilings {elapsed()}")
    n = (1 << 28) if not DRY else 1 << 12
    xs = [torch.randn(n, device=DEVICE, generator=gen).to(torch.bfloat16) for _ in range(2)]
    ys = [torch.empty_like(x) for x in xs]
    t = bench_graph([lambda x=x, y=y: y.copy_(x) for x, y in zip(xs, ys)], graph=False)
    bw = 2 * n * 2 / (t * 1e-3)
    RECORD["ceilings"]["copy_gbps"] = bw / 1e9
    log(f"torch copy_ bf16 {n} elements: {t * 1e3:.1f} us, {bw / 1e9:.0f} GB/s")
    del xs, ys
    s = 8192 if not DRY else 64
    a = torch.randn((s, s), device=DEVICE, generator=gen).to(torch.bfloat16)
    b = torch.randn((s, s), device=DEVICE, generator=gen).to(torch.bfloat16)
    t = bench_graph([lambda: a @ b])
    tf = 2 * s**3 / (t * 1e-3) / 1e12
    RECORD["ceilings"]["matmul_bf16_tflops"] = tf
    RECORD["ceilings"]["matmul_bf16_8192_us"] = t * 1e3
    log(f"torch matmul bf16 {s}^3: {t * 1e3:.1f} us, {tf:.0f} TFLOP/s")
    return bw


# ---- timing sections ---------------------------------------------------------------------------------------


def time_shape(kernel, shape, dtype, gen, *, baselines=("torch",), extra=None, only_chosen=False, configs=None):
    """Check and time every candidate config of kernel at shape (or the given configs, the chosen one first);
    returns a dict of results."""
    only_chosen = only_chosen or FINAL
    if DRY and dtype == "bf16":
        dtype = "fp16"  # the interpreter's bf16 arithmetic is not the GPU's: every bf16 check would fail
    op = kernel.op(shape, dtype)
    per_set = op.bytes
    r = rotation(per_set) if not DRY else 2
    sets = [kernel.make_inputs(shape, dtype, DEVICE, gen) for _ in range(r)]
    outs = [kernel.make_output(s) for s in sets]
    ref = kernel.reference(sets[0])
    chosen = kernel.config_for(shape, dtype)
    cands = [chosen] if only_chosen else (configs or kernel.candidates(shape, dtype, SPEC))
    rows = []
    # The first timing of a section ran 5-10% slow in every run (clocks or TLBs settling): time the chosen config
    # once, unrecorded, before the candidates.
    try:
        kernel.run(sets[0], outs[0], chosen)
        bench_graph(
            [lambda s=s, o=o: kernel.run(s, o, chosen) for s, o in zip(sets, outs)], target_ms=2.0, replays=2
        )
    except Exception:
        pass  # the candidate loop reports the failure
    for cfg in cands:
        if time.time() - T0 > BUDGET_S:
            log(f"   budget spent: skipping the remaining candidates of {kernel.name} {shape}")
            break
        try:
            ok, err, rerr = check(kernel, sets[0], outs[0], cfg, dtype, ref)
            anat = anatomy(kernel)
            if not ok:
                log(f"   FAIL err={err:.2e} row={rerr:.1e} {cfg_str(cfg)}")
                rows.append({"config": cfg_str(cfg), "ok": False, "err": err})
                continue
            t = bench_graph([lambda s=s, o=o, c=cfg: kernel.run(s, o, c) for s, o in zip(sets, outs)])
            one = lambda s=sets[0], o=outs[0], c=cfg: kernel.run(s, o, c)  # noqa: E731
            tf = bench_flush(one) if cfg == chosen else float("nan")
        except Exception as exc:
            log(f"   ERROR {cfg_str(cfg)}: {type(exc).__name__}: {str(exc)[:200]}")
            rows.append({"config": cfg_str(cfg), "ok": False, "error": str(exc)[:500]})
            continue
        row = {
            "config": cfg_str(cfg),
            "chosen": cfg == chosen,
            "ok": True,
            "err": err,
            "us": t * 1e3,
            "flush_us": tf * 1e3,
            "gbps": op.bytes / (t * 1e-3) / 1e9,
            "tflops": op.flops / (t * 1e-3) / 1e12,
            "anatomy": anat,
        }
        rows.append(row)
        log(
            f"   {'*' if row['chosen'] else ' '} {t * 1e3:9.1f} us (flush {tf * 1e3:8.1f}) {row['gbps']:7.0f} GB/s "
            f"{row['tflops']:7.1f} TFLOP/s  err={err:.1e} row={rerr:.1e}  {cfg_str(cfg)}  | {anat}"
        )
    base = {}
    for bname in baselines:
        if time.time() - T0 > BUDGET_S:
            break
        try:
            fn = kernel.baselines()[bname]
            out = fn(sets[0])
            berr = relative_error(out, ref)
            t, how = bench_any([lambda s=s, f=fn: f(s) for s in sets], graph=kernel.name != "copy")
            base[bname] = t * 1e3
            log(
                f"     baseline {bname:8s} {t * 1e3:9.1f} us  {op.bytes / (t * 1e-3) / 1e9:7.0f} GB/s  err={berr:.1e} ({how})"
            )
        except Exception as exc:
            log(f"     baseline {bname} ERROR {type(exc).__name__}: {str(exc)[:300]}")
    if extra:
        for ename, efn in extra.items():
            try:
                t, how = bench_any([lambda s=s, f=efn: f(s) for s in sets])
                base[ename] = t * 1e3
                log(f"     {ename:17s} {t * 1e3:9.1f} us ({how})")
            except Exception as exc:
                log(f"     {ename} ERROR {type(exc).__name__}: {str(exc)[:300]}")
    good = [x for x in rows if x.get("ok")]
    best = min(good, key=lambda x: x["us"]) if good else None
    chosen_row = next((x for x in good if x.get("chosen")), None)
    result = {
        "kernel": kernel.name,
        "shape": shape,
        "dtype": dtype,
        "bytes": op.bytes,
        "flops": op.flops,
        "rotation": r,
        "candidates": rows,
        "best": best,
        "chosen": chosen_row,
        "baselines_us": base,
    }
    RECORD["timings"].append(result)
    sets.clear()
    outs.clear()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return result


def section_copy(gen, copy_bw):
    log(f"\n== copy {elapsed()}")
    k = get_kernel("copy")
    results = []
    for shape in k.default_shapes if not DRY else k.interpret_shapes[-1:]:
        res = time_shape(k, shape, "bf16", gen)
        results.append(res)
    return results


def section_softmax(gen, copy_bw):
    log(f"\n== fused_softmax {elapsed()}")
    k = get_kernel("fused_softmax")
    shapes = [(4096, c) for c in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 262144)]
    if DRY:
        shapes = [(64, 100), (8, 5000)]
    results = []
    for dtype in ("bf16", "fp32"):
        for shape in shapes:
            log(f" -- softmax {shape} {dtype} {elapsed()}")
            same = {}
            if not DRY:
                # The Triton copy of the same bytes: the ceiling for this size (launch and tail effects included).
                kcopy = get_kernel("copy")

                def same_copy(s, kcopy=kcopy):
                    x = s["x"].reshape(-1)
                    kcopy.run({"x": x}, torch.empty_like(x))

                same = {"copy same bytes": same_copy}
            base = (
                ("torch", "compile")
                if (shape == (4096, 4096) and dtype == "bf16" and COMPILE)
                else ("torch",)
            )
            results.append(time_shape(k, shape, dtype, gen, baselines=base, extra=same))
    return results


def section_matmul(gen, copy_bw):
    log(f"\n== matmul {elapsed()}")
    k = get_kernel("matmul")
    results = []
    for shape, dtype in (
        ((8192, 8192, 8192), "bf16"),
        ((8192, 8192, 8192), "fp16"),
        ((4096, 4096, 4096), "fp32"),
    ):
        if DRY:
            shape = (64, 100, 40)
        log(f" -- matmul {shape} {dtype} {elapsed()}")
        results.append(time_shape(k, shape, dtype, gen, only_chosen=dtype != "bf16"))
    return results


def section_rmsnorm_linear(gen, copy_bw):
    log(f"\n== rmsnorm_linear {elapsed()}")
    k = get_kernel("rmsnorm_linear")
    shapes = k.default_shapes if not DRY else k.interpret_shapes
    results = []

    def matmul_alone(s):
        return torch.nn.functional.linear(s["x"], s["w"])

    for shape in shapes:
        log(f" -- rmsnorm_linear {shape} bf16 {elapsed()}")
        base = ("torch", "compile") if COMPILE else ("torch",)
        results.append(
            time_shape(k, shape, "bf16", gen, baselines=base, extra={"matmul alone": matmul_alone})
        )
    return results


# ---- summary -----------------------------------------------------------------------------------------------


def summary(copy_bw: float):
    log(
        f"\n== summary {elapsed()}  (copy ceiling {copy_bw / 1e9:.0f} GB/s, "
        f"matmul ceiling {RECORD['ceilings'].get('matmul_bf16_tflops', float('nan')):.0f} TFLOP/s)"
    )
    log(
        f"{'kernel':15s} {'shape':20s} {'dt':4s} {'chosen us':>9s} {'best us':>9s} {'GB/s':>6s} {'%copy':>5s} "
        f"{'TF/s':>6s} {'eager':>8s} {'compile':>8s} {'other':>8s}  target  best config"
    )
    for res in RECORD["timings"]:
        best, chosen = res["best"], res["chosen"]
        if best is None:
            log(f"{res['kernel']:15s} {str(res['shape']):20s} {res['dtype']:4s} NO PASSING CONFIG")
            continue
        b = res["baselines_us"]
        us = best["us"]
        gbps = res["bytes"] / (us * 1e-6) / 1e9
        pct = 100 * gbps * 1e9 / copy_bw
        tf = res["flops"] / (us * 1e-6) / 1e12
        other = next((v for kk, v in b.items() if kk not in ("torch", "compile")), float("nan"))
        verdict = target(res, us, pct, tf)
        log(
            f"{res['kernel']:15s} {str(tuple(res['shape'])):20s} {res['dtype']:4s} "
            f"{(chosen or {}).get('us', float('nan')):9.1f} {us:9.1f} {gbps:6.0f} {pct:5.0f} {tf:6.1f} "
            f"{b.get('torch', float('nan')):8.1f} {b.get('compile', float('nan')):8.1f} {other:8.1f}  {verdict}  "
            f"{best['config']}"
        )


def target(res, us, pct, tf) -> str:
    name, shape, dt = res["kernel"], tuple(res["shape"]), res["dtype"]
    b = res["baselines_us"]
    if name == "fused_softmax":
        cols = shape[1]
        if 1024 <= cols <= 16384:
            ok = pct >= 85
            s = f"{'OK' if ok else 'SHORT'} >=85%"
            if shape == (4096, 4096) and dt == "bf16" and "torch" in b:
                s += f", {b['torch'] / us:.2f}x eager (>=2.5)"
            return s
        if cols >= 65536:
            return f"{'OK' if pct >= 70 else 'SHORT'} >=70%"
        return "-"
    if name == "copy":
        r = b.get("torch", float("nan")) / us
        return f"{'OK' if r >= 0.95 else 'SHORT'} {100 * r:.0f}% of copy_ (>=95)"
    if name == "matmul":
        ceil = RECORD["ceilings"].get("matmul_bf16_tflops")
        if dt == "bf16" and ceil:
            return f"{'OK' if tf >= 0.7 * ceil else 'SHORT'} {100 * tf / ceil:.0f}% of torch (>=70)"
        return "-"
    if name == "rmsnorm_linear":
        if shape == (1, 4096, 4096):
            return f"{'OK' if us <= 11 else 'SHORT'} <=11us"
        if shape == (1, 4096, 14336):
            return f"{'OK' if us <= 34 else 'SHORT'} <=34us"
        if shape == (8192, 4096, 4096):
            mm = b.get("matmul alone")
            return f"{'OK' if mm and us <= 1.15 * mm else 'SHORT'} {us / mm if mm else float('nan'):.2f}x matmul (<=1.15)"
        c = b.get("compile")
        if c:
            return f"{'OK' if us <= c else 'SHORT'} {c / us:.2f}x compile (>=1)"
        return "-"
    return "-"


def env_info():
    info = {"torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0]}
    if DEVICE == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update(
            gpu=p.name,
            sms=p.multi_processor_count,
            l2_bytes=getattr(p, "L2_cache_size", None),
            memory_gib=p.total_memory / 2**30,
        )
        try:
            info["driver"] = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
            ).stdout.strip()
        except Exception as exc:
            info["driver"] = f"unknown ({exc})"
    RECORD["env"] = info
    log("env:", json.dumps(info))
    return info


SECTIONS = {
    "copy": section_copy,
    "softmax": section_softmax,
    "matmul": section_matmul,
    "rmsnorm_linear": section_rmsnorm_linear,
}


def main():
    global LOG, DEVICE, DRY, BUDGET_S, COMPILE, L2_BYTES, SPEC
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/tune"))
    ap.add_argument(
        "--only",
        default="rmsnorm_linear,softmax,copy,matmul",
        help="sections to time, in order (rmsnorm_linear, softmax, copy, matmul)",
    )
    ap.add_argument("--no-correctness", action="store_true")
    ap.add_argument("--full-check", action="store_true", help="more correctness shapes")
    ap.add_argument(
        "--final", action="store_true", help="time only the configs run() picks (and the baselines)"
    )
    ap.add_argument(
        "--no-compile", action="store_true", help="skip the torch.compile baselines (slow to build)"
    )
    ap.add_argument(
        "--budget-s", type=float, default=500, help="stop starting new candidates after this long"
    )
    ap.add_argument("--dry", action="store_true", help="CPU and tiny shapes: test this script's logic")
    args = ap.parse_args()
    global FULL_CHECK, FINAL
    DRY, BUDGET_S, COMPILE, FULL_CHECK = args.dry, args.budget_s, not args.no_compile, args.full_check
    FINAL = args.final
    DEVICE = "cuda" if torch.cuda.is_available() and not DRY else "cpu"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    LOG = open(out / "tune.log", "w")
    log("command:", " ".join(sys.argv))
    info = env_info()
    if info.get("l2_bytes"):
        L2_BYTES = info["l2_bytes"]
    if DEVICE == "cuda":
        from rooflinectl.errors import UserError
        from rooflinectl.specs.devices import match_device
        from rooflinectl.specs.hardware import list_gpus

        try:
            SPEC = match_device(torch.cuda.get_device_name(0), list_gpus())
        except UserError as err:
            log(f"no spec for the device ({err}): candidates fit the tuned GPU's shared memory")
    gen = torch.Generator(DEVICE).manual_seed(1234)
    copy_bw = ceilings(gen)
    if not args.no_correctness:
        correctness_section(gen)
    for name in args.only.split(","):
        if time.time() - T0 > BUDGET_S:
            log(f"budget spent: section {name} not run")
            continue
        try:
            SECTIONS[name](gen, copy_bw)
        except Exception:
            log(f"section {name} crashed:\n{traceback.format_exc()}")
        (out / "tune.json").write_text(json.dumps(RECORD, indent=1, default=str))
    summary(copy_bw)
    (out / "tune.json").write_text(json.dumps(RECORD, indent=1, default=str))
    log(f"done {elapsed()}")


DEVICE, DRY, BUDGET_S, COMPILE, FULL_CHECK, FINAL = "cpu", False, 500.0, True, False, False

if __name__ == "__main__":
    main()
