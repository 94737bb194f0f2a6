"""rmsnorm_linear where it trailed torch.compile, in one GPU call: the candidates that could close each miss
checked on odd shapes, the rstd pre-pass timed alone, then 17 shapes timed beside torch.compile and cuBLAS.

    python benchmarks/rmsnorm_linear_misses.py OUT_DIR            # on the H200: checks, pre-pass, the sweep
    python benchmarks/rmsnorm_linear_misses.py OUT_DIR --final    # checks of the picks, then the picks' table
    python benchmarks/rmsnorm_linear_misses.py OUT_DIR --dry      # the whole flow on the CPU, interpreter

The misses (re-timed on the H200: 64 × 4096 × 4096, 128 × 4096 × 14336, 16 × 3584 × 18944, 512 × 8192 × 8192,
8192 × 4096 × 4096) and the levers tried on each:
- prefill (M ≥ 128): the pre-pass with one row a program read whole (``configs.rstd_settings``) against the old
  four rows a program in 1,024-column steps ("old pre-pass", timed through the same launch with the old settings);
  the matmul launched with programmatic dependent launch (``pdl``: its programs start while the pre-pass runs);
  at M ≤ 256 the persistent kernel's 64×128 tiles two programs an SM (``occupancy=2``) and its 128×128 tiles;
  from M = 512 its 4-stage and whole-y twins.
- decode at M = 64 and 16 × 3584 × 18944 (296 tiles of 64 rows of W: more than two programs an SM's 264): the
  gemv's W rows a program (64 in 4 warps, 128 in 8), stages (2-4, or K steps of 64 with 4 and 6) and K split.

Checks and timings are rmsnorm_linear_gpu.py's (``Flow``: fresh random inputs from two seeds, each run twice into
NaN-poisoned outputs and bit-equal; CUDA-graph replays over input sets rotated past 4 L2s, each method checked on
the first set; clocks warmed; the same 12 compile workers first). Writes OUT_DIR/rmsnorm_linear_gpu.json and .log
(``rmsnorm_linear_gpu.py --report`` prints the table) and OUT_DIR/prepass.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rmsnorm_linear_gpu as gpu  # noqa: E402  (the benchmark beside this one: its Flow, Run and report)

SHAPES = [*gpu.TABLE, (16, 3584, 18944), (64, 4096, 14336), (128, 4096, 4096), (128, 8192, 8192),
          (512, 4096, 4096), (512, 4096, 14336)]
# --final: beside SHAPES, the shapes the run-34a changes reach that it did not time: M = 64 at the other K × N of
# issue 16 (4 stages for the 128-row W tile), 3584 × 18944 at M = 1 and 32 (3 stages where 4 start a second wave).
FINAL_EXTRA = [(64, k, n) for k, n in gpu.DECODE_KN if (k, n) not in ((4096, 4096), (4096, 14336))] + [
    (1, 3584, 18944), (32, 3584, 18944)]
DRY_SHAPES = [(1, 64, 40), (9, 64, 300), (70, 64, 48), (300, 64, 48)]
# Odd shapes for the checks of the new paths: the pdl tile kernel split (M = 200, K = 4104) and unsplit (N odd);
# the persistent kernel with pdl (y through TMA, and through pointers) and two programs an SM; gemv variants (at
# 16 × 3584 × 18001, 282 tiles: 3 stages); M = 100 with N odd: the persistent 128×128 pick with pdl.
CHECKS = [(200, 4104, 1000), (300, 4096, 1001), (2049, 4096, 3000), (33, 4096, 1000), (16, 3584, 18001),
          (100, 4096, 12999)]
DRY_CHECKS = [(70, 200, 33), (300, 64, 48), (9, 136, 45)]
# The pre-pass alone: (M, K) and the settings tried (ROWS, BLOCK_K, num_warps); None: configs.rstd_settings.
PREPASS_SHAPES = [(128, 4096), (128, 3584), (512, 4096), (512, 8192), (2048, 4096), (8192, 4096)]
PREPASS_SETTINGS = [None, (4, 1024, 4), (1, 4096, 4), (1, 8192, 8), (2, 8192, 8), (1, 2048, 4), (1, 4096, 8)]
OLD_PREPASS = {"ROWS": 4, "BLOCK_K": 1024, "num_warps": 4}


def _smem_fits(cfg, dtype) -> bool:
    from rooflinectl.kernels.base import smem_per_block_bytes
    from rooflinectl.kernels.rmsnorm_linear.configs import _smem_estimate

    return _smem_estimate(cfg, dtype) <= smem_per_block_bytes(None)


def gemv_sweep(chosen, m: int) -> list:
    """The gemv variants tried at M = 64 and 16 × 3584 × 18944: W rows a program, stages, K step, K split."""
    splits = (1, 2, 4, 8) if m > 32 else (1, 2)
    out = []
    for block_n, warps in ((64, 4), (128, 8)):
        for stages in (2, 3, 4):
            for split in splits:
                out.append(replace(chosen, block_n=block_n, num_warps=warps, num_stages=stages, split_k=split))
        for stages in (4, 6):
            out.append(replace(chosen, block_n=block_n, num_warps=warps, block_k=64, num_stages=stages,
                               split_k=splits[-1] if m > 32 else 1))
    return out


def prefill_variants(chosen, m: int) -> list:
    """The pick with and without pdl, and its rivals at this M, each with and without pdl."""
    from rooflinectl.kernels.rmsnorm_linear import configs as c

    small = replace(c._TILE_MID_PERSISTENT, block_m=64, num_warps=4, occupancy=2)
    if m <= c._SMALL_TILE_MAX_M:
        rivals = [c._TILE_MID_PERSISTENT, small, replace(small, num_stages=3),
                  c._tile_config(m, 0, 0, c._TILE_NARROW, split_k=1), c._tile_config(m, 0, 0, c._TILE_MID, split_k=1),
                  replace(chosen, split_k=max(1, chosen.split_k // 2)), replace(chosen, split_k=chosen.split_k * 2)]
    else:
        rivals = [replace(chosen, num_stages=4), replace(chosen, subtile=False), c._TILE_MID_PERSISTENT,
                  c._TILE_BIG_PERSISTENT, replace(c._TILE_BIG_PERSISTENT, num_stages=4)]
    out = [chosen]
    for cfg in [chosen, *rivals]:
        out += [replace(cfg, pdl=False), replace(cfg, pdl=True)]
    return list(dict.fromkeys(out))


class MissFlow(gpu.Flow):
    """rmsnorm_linear_gpu's Flow with this run's methods: the sweep (or, --final, the picks and their pdl twins)."""

    final = False

    def variants(self, shape, dtype) -> list:
        from rooflinectl.kernels.rmsnorm_linear import configs as c

        m, k, n = shape
        chosen = self.kernel.config_for(shape, dtype)
        if self.final:  # the pick, and its twin on the other side of the change run 34a measured
            if chosen.kind == "gemv":
                return [chosen, replace(chosen, num_stages=7 - chosen.num_stages)]
            if chosen.pdl:
                return [chosen, replace(chosen, pdl=False), c._tile_config(m, k, n, c._TILE_SMALL)]
            return [chosen, replace(chosen, num_stages=7 - chosen.num_stages)] if chosen.persistent else [chosen]
        if chosen.kind == "gemv":
            if self.final or not (m > 32 or k == 3584 or (self.run.dry and m > 1)):
                return [chosen]
            return list(dict.fromkeys([chosen, *(c for c in gemv_sweep(chosen, m) if _smem_fits(c, dtype))]))
        return [c for c in prefill_variants(chosen, m) if _smem_fits(c, dtype)]

    def candidates(self, shape, dtype) -> list:
        return self.variants(shape, dtype)

    def methods(self, group, shape, dtype):
        chosen = self.kernel.config_for(shape, dtype)
        out = [("ours" if c == chosen else f"candidate {i}", "kernel", c)
               for i, c in enumerate(self.variants(shape, dtype))]
        if chosen.kind == "tile" and chosen.rstd == "prepass" and not self.final:
            out.append(("ours, old pre-pass", "baseline", self.with_prepass(OLD_PREPASS, chosen)))
        fns = self.kernel.baselines()
        return out + [(name, "baseline", fns[name]) for name in ("compile", "cublas")]

    def with_prepass(self, settings: dict, cfg):
        """The kernel run with ``cfg`` but the pre-pass launched with ``settings`` (configs.rstd_settings swapped for
        the call, so that a CUDA graph captures that launch)."""
        from rooflinectl.kernels.rmsnorm_linear import configs

        def run(inputs):
            out = self.kernel.make_output(inputs)
            saved = configs.rstd_settings
            configs.rstd_settings = lambda m, k: dict(settings)
            try:
                self.kernel.run(inputs, out, cfg)
            finally:
                configs.rstd_settings = saved
            return out

        return run


def time_prepass(flow: MissFlow, l2: int, dtype: str) -> list[dict]:
    """The pre-pass kernel alone, per (M, K) and settings: its time, and x's bytes over it."""
    import torch
    import triton

    from rooflinectl.kernels.rmsnorm_linear import configs
    from rooflinectl.kernels.rmsnorm_linear.tile import _rstd_kernel

    bench, out = flow.bench, []
    shapes = [(70, 200), (300, 64)] if flow.run.dry else PREPASS_SHAPES
    for m, k in shapes:
        gen = torch.Generator(device=flow.device).manual_seed(m + k)
        xb = m * k * (2 if dtype != "fp32" else 4)
        n_sets = bench.input_sets(xb, l2, bench.free_memory(flow.device))
        xs = [torch.randn((m, k), generator=gen, device=flow.device).to(getattr(torch, "bfloat16" if dtype == "bf16"
                                                                                 else "float16")) for _ in range(n_sets)]
        ref = torch.rsqrt(xs[0].float().pow(2).mean(-1) + 1e-6)
        for s in PREPASS_SETTINGS:
            settings = configs.rstd_settings(m, k) if s is None else {"ROWS": s[0], "BLOCK_K": s[1], "num_warps": s[2]}
            rstd = torch.full((m,), float("nan"), device=flow.device)
            e = {"m": m, "k": k, "settings": settings, "rule": s is None}

            def call(x, settings=settings, rstd=rstd, m=m, k=k):
                _rstd_kernel[(triton.cdiv(m, settings["ROWS"]),)](x, rstd, m, k, x.stride(0), 1e-6, **settings)

            try:
                call(xs[0])
                bench.sync(flow.device)
                e["max_rel_error"] = float(((rstd - ref).abs() / ref).max())
                t, used, why = bench.time_figure(bench.rotated(call, xs), "cuda_graph", flow.main, flow.events,
                                                 warmup_ms=gpu.WARMUP_MS, rep_ms=gpu.REP_MS)
                e.update(time_s=t[0], timer=used, gbps=xb / t[0] / 1e9)
            except Exception as err:
                e["error"] = gpu.one_line(err)
            out.append(e)
            shown = f"{e['time_s'] * 1e6:7.2f} µs err {e['max_rel_error']:.1e}" if "time_s" in e else e["error"]
            flow.run.log(f"prepass {m}x{k} {settings}{' (rule)' if s is None else ''}: {shown}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--dry", action="store_true", help="the whole flow on the CPU in triton's interpreter")
    p.add_argument("--final", action="store_true", help="the picks (and their pdl twins) only, no sweep")
    p.add_argument("--skip-checks", action="store_true")
    p.add_argument("--deadline-s", type=float, default=420.0, help="start no shape after this many seconds")
    p.add_argument("--precompile", type=int, default=None, metavar="N", help="compile workers (default 12, --dry 0)")
    args = p.parse_args(argv)
    if args.dry:
        os.environ["TRITON_INTERPRET"] = "1"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = gpu.Run(out_dir, args.dry)
    device = "cpu" if args.dry else "cuda"
    run.record["env"] = gpu.environment(device)
    dtype = "fp16" if args.dry else "bf16"
    run.record["env"]["timed_dtype"] = dtype
    run.log("environment:", json.dumps(run.record["env"]))
    flow = MissFlow(run, device)
    flow.final = args.final
    from rooflinectl.measure.ceilings import probe_copy_bandwidth

    if device == "cuda":
        from rooflinectl.measure.ceilings import warm_up_clocks

        l2 = run.record["env"].get("l2_bytes") or 60 * 2**20
        warm_up_clocks()
    else:
        l2 = 32 * 1024
    gbps, moved, probe = probe_copy_bandwidth(flow.main, l2, timer="cuda_graph", events=flow.events, device=device)
    run.record["env"].update(copy_gbps=gbps, copy_bytes=moved, l2_used_bytes=l2)
    run.log(f"copy ceiling: {gbps:,.0f} GB/s")
    shapes = DRY_SHAPES if args.dry else SHAPES + (FINAL_EXTRA if args.final else [])
    checks = DRY_CHECKS if args.dry else CHECKS
    check_dtypes = ("fp16",) if args.dry else ("bf16",)
    workers = args.precompile if args.precompile is not None else (0 if args.dry else 12)
    if workers > 0:
        tasks = flow.tasks(() if args.skip_checks else checks, check_dtypes, [("misses", shapes)], dtype)
        gpu.precompile(run, tasks, workers, device)
    if not args.skip_checks:
        flow.checks(checks, check_dtypes)
        failed = [c for c in run.record["checks"] if not c["passed"]]
        run.log(f"checks: {len(run.record['checks']) - len(failed)} passed, {len(failed)} failed")
    prepass = time_prepass(flow, l2, dtype) if not args.final else []
    (out_dir / "prepass.json").write_text(json.dumps(prepass, indent=1))
    for si, shape in enumerate(shapes):
        if time.time() - run.t0 > args.deadline_s:
            run.record["skipped"].append({"group": "misses", "shape": list(shape), "why": "deadline"})
            continue
        run.log(f"misses {shape} {dtype}")
        try:
            entry = flow.time_shape("misses", shape, dtype, seed=3400 + si, l2_bytes=l2)
        except Exception as err:
            entry = {"group": "misses", "shape": list(shape), "dtype": dtype, "error": gpu.one_line(err)}
            run.log(entry["error"])
        run.record["shapes"].append(entry)
        run.save()
    run.record["wall_s"] = time.time() - run.t0
    run.save()
    print(gpu.report(run.record))
    print(summary(run.record))
    return 1 if any(not c["passed"] for c in run.record["checks"]) else 0


def _us(v) -> str:
    return "—" if v is None else f"{v * 1e6:.1f}"


def summary(record: dict) -> str:
    """Per shape: ours, the best kernel (its config), compile, cuBLAS: the lines to read first."""
    lines = ["", "shape | ours | best kernel | compile | cublas"]
    for e in record["shapes"]:
        if "methods" not in e:
            continue
        t = {m["name"]: m.get("time_s") for m in e["methods"]}
        ks = [m for m in e["methods"] if m["kind"] == "kernel" and m.get("time_s")]
        best = min(ks, key=lambda m: m["time_s"]) if ks else None
        lines.append(f"{'x'.join(map(str, e['shape']))} | {_us(t.get('ours'))} | "
                     f"{_us(best['time_s']) if best else '—'} {best['config_text'] if best else ''} | "
                     f"{_us(t.get('compile'))} | {_us(t.get('cublas'))} | old pre-pass {_us(t.get('ours, old pre-pass'))}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
