"""Attention kernels on a GPU in one call: checks, the decode grid, paged against contiguous, the harness question.

    python benchmarks/decode_grid_gpu.py OUT_DIR [--quick] [--skip-sweep] [--skip-prefill] [--skip-harness]

1. Checks in bf16 against float64, outputs NaN-poisoned first: flash_decoding contiguous and paged (pages of 1,
   16 and 32, NHD and HND views) on ragged batches whose cache past each length is NaN, GQA groups 1 to 16, the
   paged output bit-identical to the contiguous one under the same config, 20 repeats bit-identical.
2. The harness question: one decode shape timed by measure's own timer (``rooflinectl.measure.bench.do_bench``,
   CUDA-graph replays, the input sets ``measure`` would rotate) and by variants of it (more input sets, the
   graph of attention_gpu.py, CUDA events with the L2 flushed, cold clocks, scratch allocated per call, K/V as a
   strided view), each twice, the SM clock read by nvidia-smi after each.
3. The decode grid: batch 1 to 256, 32/32, 32/8, 28/4 and 64/4 heads (GQA groups 1, 4, 7, 16), d 128, lengths
   that are and are not multiples of the blocks, and ragged batches; at each shape our kernel over its splits
   (1 to 8 and the rule's, blocks of 64 and 128), the paged kernel at the rule's config, and SDPA as torch picks.
4. Prefill: the shipped config against Triton's warp-specialized loop and SDPA's cuDNN and FA2 backends.
Every time is measure's timer over measure's rotation (median of its replays). Writes OUT_DIR/decode_grid.json,
prints a table per part.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback

import torch
import triton

from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.flash_attention import FlashConfig, flash_attention
from rooflinectl.kernels.flash_decoding import (
    decode_config,
    decode_reference,
    flash_decoding,
    make_decode_inputs,
)
from rooflinectl.kernels.paged_decoding import gather_pages, make_paged_inputs
from rooflinectl.measure.bench import REP_MS as MEASURE_REP_MS
from rooflinectl.measure.bench import do_bench, input_sets, rotated

DEV = "cuda"
L2 = torch.cuda.get_device_properties(0).L2_cache_size
SMS = torch.cuda.get_device_properties(0).multi_processor_count
RES: dict = {"env": {}, "checks": [], "harness": [], "grid": [], "prefill": []}
REP_MS = 20  # the grid's window (triton's own default); the harness question uses measure's (bench.REP_MS)


def log(*a):
    print(*a, flush=True)


def gen(seed):
    return torch.Generator(DEV).manual_seed(seed)


def sm_clock():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout
        return out.strip()
    except Exception as err:  # no nvidia-smi: say so in the record
        return f"n/a ({type(err).__name__})"


def warm_clocks(seconds=1.0):
    a = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def timed(call, sets, timer="cuda_graph", rep_ms=REP_MS):
    """measure's timer: do_bench over ``sets`` rotated; (median, p20, p80) in s."""
    return do_bench(rotated(call, sets), rep_ms=rep_ms, timer=timer)


def copy_ceiling():
    from rooflinectl.kernels.copy import KERNEL as COPY

    n = 1 << 28
    x = torch.randn(n, device=DEV).to(torch.bfloat16)
    y = torch.empty_like(x)
    t = timed(lambda s: COPY.run({"x": x}, y), [0])[0]
    return 2 * x.numel() * 2 / t


# ---- 1. checks ---------------------------------------------------------------------------------------------------

def check_paged(heads, kv_heads, lengths, d, page, layout="nhd", cfg=None, repeats=20):
    g = gen(sum(lengths) + heads + page)
    b = len(lengths)
    x = make_paged_inputs(b, heads, kv_heads, lengths, d, page, "bf16", DEV, g, spare_pages=7)
    # Slots past each sequence's length in its last page, and the spare pages: NaN (never read into a result).
    per_seq = x["table"].shape[1]
    for i, n in enumerate(lengths):
        for j in range(per_seq):
            lo = max(0, n - j * page)
            if lo < page:
                p = int(x["table"][i, j])
                x["k"][p, lo:] = float("nan")
                x["v"][p, lo:] = float("nan")
    unused = torch.ones(x["k"].shape[0], dtype=torch.bool, device=DEV)
    unused[x["table"].flatten().long()] = False
    x["k"][unused] = float("nan")
    x["v"][unused] = float("nan")
    k, v = x["k"], x["v"]
    if layout == "hnd":  # the same values stored P×g×page×d, passed as a view
        k = k.transpose(1, 2).contiguous().transpose(1, 2)
        v = v.transpose(1, 2).contiguous().transpose(1, 2)
    kc = gather_pages(x["k"], x["table"]).contiguous()
    vc = gather_pages(x["v"], x["table"]).contiguous()
    ref = decode_reference(x["q"], kc, vc, x["lengths"])
    out = torch.full_like(x["q"], float("nan"))
    used, _, _ = flash_decoding(x["q"], k, v, x["lengths"], out, cfg, table=x["table"])
    err = relative_error(out, ref)
    contig = torch.full_like(x["q"], float("nan"))
    flash_decoding(x["q"], kc, vc, x["lengths"], contig, used)
    same_as_contiguous = bool(torch.equal(out, contig))
    stable = True
    for _ in range(repeats):
        again = torch.full_like(out, float("nan"))
        flash_decoding(x["q"], k, v, x["lengths"], again, used, table=x["table"])
        stable &= bool(torch.equal(again, out))
    ok = err <= 2e-2 and not torch.isnan(out).any().item() and same_as_contiguous and stable
    row = {"what": f"paged {layout} page {page}", "heads": [heads, kv_heads], "lengths": lengths[:8], "d": d,
           "config": str(used), "rel_err": err, "same_as_contiguous": same_as_contiguous, "stable": stable,
           "ok": bool(ok)}
    RES["checks"].append(row)
    log(f"check {row['what']} {heads}/{kv_heads} {lengths[:6]}{'…' if len(lengths) > 6 else ''} d{d} {used}: "
        f"err {err:.1e} same-as-contiguous {same_as_contiguous} stable {stable} -> {'ok' if ok else 'FAIL'}")
    return ok


def check_contiguous(heads, kv_heads, lengths, d, cfg=None):
    x = make_decode_inputs(len(lengths), heads, kv_heads, lengths, d, "bf16", DEV, gen(len(lengths) + heads),
                           l_max=max(lengths) + 37)
    for i, n in enumerate(lengths):
        x["k"][i, :, n:] = float("nan")
        x["v"][i, :, n:] = float("nan")
    out = torch.full_like(x["q"], float("nan"))
    used, _, _ = flash_decoding(x["q"], x["k"], x["v"], x["lengths"], out, cfg)
    err = relative_error(out, decode_reference(x["q"], x["k"], x["v"], x["lengths"]))
    ok = err <= 2e-2 and not torch.isnan(out).any().item()
    RES["checks"].append({"what": "contiguous", "heads": [heads, kv_heads], "lengths": lengths[:8], "d": d,
                          "config": str(used), "rel_err": err, "ok": bool(ok)})
    log(f"check contiguous {heads}/{kv_heads} {lengths[:6]} d{d} {used}: err {err:.1e} -> {'ok' if ok else 'FAIL'}")
    return ok


def checks():
    ok = True
    for page in (16, 32):
        ok &= check_paged(32, 8, [1, 1000, 4097, 333], 128, page)
        ok &= check_paged(32, 8, [1, 1000, 4097, 333], 128, page, layout="hnd")
    ok &= check_paged(32, 32, [5000, 17, 64], 128, 16)
    ok &= check_paged(64, 4, [2048, 1, 3000], 128, 16)
    ok &= check_paged(28, 4, [700, 5000] * 20, 128, 16)
    ok &= check_paged(8, 1, [129, 1, 64], 64, 1)
    ok &= check_paged(32, 8, [4096] * 16, 128, 16, cfg=decode_config(16, 8, 4096, splits=3))
    for heads, kv in ((32, 32), (32, 8), (28, 4), (64, 4), (32, 16)):
        ok &= check_contiguous(heads, kv, [1, 1000, 4097, 333], 128)
    ok &= check_contiguous(32, 32, [3000] * 4, 128)
    for s in (1, 2, 3, 5, 8):
        ok &= check_contiguous(32, 32, [4096, 4000, 17, 1], 128, decode_config(4, 32, 4096 + 37, splits=s))
        ok &= check_contiguous(32, 32, [4096, 4000, 17, 1], 128,
                               decode_config(4, 32, 4096 + 37, splits=s, tensor_cores=False))
        ok &= check_contiguous(32, 16, [4096, 4000, 17, 1], 128,
                               decode_config(4, 16, 4096 + 37, splits=s, tensor_cores=False))
    ok &= check_paged(32, 32, [5000, 17, 64], 128, 16, cfg=decode_config(3, 32, 5008, tensor_cores=False))
    return ok


# ---- 2. the harness question -------------------------------------------------------------------------------------

def harness(shape):
    b, h, g, n, d = shape
    one = make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(1))
    work = sum(t.numel() * t.element_size() for t in one.values()) + one["q"].numel() * 2
    n_measure = input_sets(work, L2)
    cfg = decode_config(b, g, n)
    sets = [one] + [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(i + 2)) for i in range(3)]
    outs = [torch.empty_like(x["q"]) for x in sets]
    scratch = [(torch.empty(b * h * cfg.splits * d, dtype=torch.float32, device=DEV),
                torch.empty(b * h * cfg.splits, dtype=torch.float32, device=DEV)) for _ in sets]
    kv_bytes = 2 * b * g * n * d * 2

    def ours(i, scr=True, x=None):
        x = x or sets[i]
        return flash_decoding(x["q"], x["k"], x["v"], x["lengths"], outs[i], cfg, scratch[i] if scr else None)

    def sdpa(i):
        x = sets[i]
        return torch.nn.functional.scaled_dot_product_attention(x["q"][:, :, None], x["k"], x["v"],
                                                                enable_gqa=h != g)

    strided = []
    for x in sets:  # the same values stored B×L×g×d (vLLM's contiguous layout), passed as a B×g×L×d view
        strided.append({**x, "k": x["k"].transpose(1, 2).contiguous().transpose(1, 2),
                        "v": x["v"].transpose(1, 2).contiguous().transpose(1, 2)})

    def graph_of_sets(call, n_sets):
        """attention_gpu.py's harness: one graph holding one call per set, replayed, events around the replays."""
        for i in range(n_sets):
            call(i)
        torch.cuda.synchronize()
        gr = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(n_sets):
                call(i)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        with torch.cuda.graph(gr):
            for i in range(n_sets):
                call(i)
        gr.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(7):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(50):
                gr.replay()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) / 1e3 / (50 * n_sets))
        times.sort()
        return times[3], times[1], times[5]

    def timed(call, sets, timer="cuda_graph"):  # measure's window, as `measure` times
        return globals()["timed"](call, sets, timer, MEASURE_REP_MS)

    variants = [
        ("measure: graph, its sets", lambda: timed(ours, list(range(n_measure)))),
        ("graph, 4 sets", lambda: timed(ours, [0, 1, 2, 3])),
        ("events (L2 flushed), its sets", lambda: timed(ours, list(range(n_measure)), timer="events")),
        ("one graph of the sets (attention_gpu.py), 4 sets", lambda: graph_of_sets(ours, 4)),
        ("scratch allocated per call, 4 sets", lambda: timed(lambda i: ours(i, scr=False), [0, 1, 2, 3])),
        ("K/V a strided view (B×L×g×d storage), 4 sets",
         lambda: timed(lambda i: ours(i, x=strided[i]), [0, 1, 2, 3])),
        ("sdpa default: graph, its sets", lambda: timed(sdpa, list(range(n_measure)))),
        ("sdpa default: graph, 4 sets", lambda: timed(sdpa, [0, 1, 2, 3])),
        ("sdpa default: strided K/V, 4 sets", lambda: timed(
            lambda i: torch.nn.functional.scaled_dot_product_attention(
                strided[i]["q"][:, :, None], strided[i]["k"], strided[i]["v"], enable_gqa=h != g), [0, 1, 2, 3])),
    ]
    for cold in (True, False):  # cold: the GPU idle 5 s first, nothing warmed
        name = "measure: graph, its sets, after 5 s idle" if cold else "measure: graph, its sets, warmed"
        if cold:
            torch.cuda.synchronize()
            time.sleep(5)
            clock_before = sm_clock()
            t = timed(ours, list(range(n_measure)))
        else:
            warm_clocks()
            clock_before = sm_clock()
            t = timed(ours, list(range(n_measure)))
        RES["harness"].append({"shape": shape, "variant": name, "s": t, "clock_before": clock_before,
                               "clock_after": sm_clock(), "sets": n_measure})
        log(f"harness {shape} {name}: {t[0] * 1e6:.1f} µs ({kv_bytes / t[0] / 1e12:.2f} TB/s K/V) "
            f"clocks {clock_before} -> {sm_clock()}")
    for name, fn in variants:
        for rep in (1, 2):
            try:
                t = fn()
                RES["harness"].append({"shape": shape, "variant": name, "rep": rep, "s": t, "clock": sm_clock(),
                                       "sets": n_measure})
                log(f"harness {shape} {name} #{rep}: {t[0] * 1e6:.1f} µs (p20-p80 {t[1] * 1e6:.1f}-"
                    f"{t[2] * 1e6:.1f}) {kv_bytes / t[0] / 1e12:.2f} TB/s; clocks {sm_clock()}")
            except Exception as err:
                RES["harness"].append({"shape": shape, "variant": name, "rep": rep, "error": str(err)[:300]})
                log(f"harness {shape} {name}: {type(err).__name__}: {str(err)[:200]}")
    sets = strided = None  # free the inputs (the closures above hold these names, not the tensors)
    torch.cuda.empty_cache()


# ---- 3. the decode grid ------------------------------------------------------------------------------------------

LAYOUTS = [(32, 32), (32, 8), (28, 4), (64, 4)]
POINTS = [(1, 1024), (1, 4096), (1, 16384), (1, 3000), (4, 4096), (16, 1024), (16, 4096), (16, 3000), (64, 4096),
          (256, 1000)]


def grid_candidates(b, g, n):
    rule = decode_config(b, g, n)
    cands = [rule]
    for s in (1, 2, 3, 4, 6, 8, 16, 32):
        cands.append(decode_config(b, g, n, splits=s))
    cands.append(decode_config(b, g, n, splits=1, block_n=64))
    cands.append(decode_config(b, g, n, splits=2, block_n=128))
    cands.append(decode_config(b, g, n, num_stages=4))
    return rule, list(dict.fromkeys(cands))


def grid_shape(b, h, g, lengths, quick):
    d = 128
    n = max(lengths)
    one = make_decode_inputs(b, h, g, lengths, d, "bf16", DEV, gen(b + n))
    kv_bytes = 2 * sum(lengths) * g * d * 2
    work = sum(t.numel() * t.element_size() for t in one.values()) + one["q"].numel() * 2
    n_sets = min(input_sets(work, L2), 16)
    sets = [one] + [make_decode_inputs(b, h, g, lengths, d, "bf16", DEV, gen(b + n + i)) for i in range(1, n_sets)]
    outs = [torch.empty_like(x["q"]) for x in sets]
    rule, cands = grid_candidates(b, g, n)
    row = {"shape": [b, h, g, n, d], "ragged": len(set(lengths)) > 1, "kv_bytes": kv_bytes, "sets": n_sets,
           "rule": str(rule), "ours": {}, "paged": {}, "sdpa": None}
    for cfg in cands[: 3 if quick else None]:
        # Splits past what the positions allow collapse onto the same config: keep each once.
        def ours(i, cfg=cfg):
            x = sets[i]
            return flash_decoding(x["q"], x["k"], x["v"], x["lengths"], outs[i], cfg)
        try:
            t = timed(ours, list(range(n_sets)))
            row["ours"][f"n{cfg.block_n} sp{cfg.splits} w{cfg.num_warps} s{cfg.num_stages}"] = t
        except Exception as err:
            row["ours"][str(cfg)] = {"error": str(err)[:200]}
    # SDPA as torch picks: the whole cache (equal lengths), or a mask of each sequence's positions (ragged).
    if row["ragged"]:
        mask = (torch.arange(n, device=DEV)[None, :] < one["lengths"][:, None])[:, None, None, :]

        def sdpa(i):
            x = sets[i]
            return torch.nn.functional.scaled_dot_product_attention(x["q"][:, :, None], x["k"], x["v"],
                                                                    attn_mask=mask, enable_gqa=h != g)
    else:
        def sdpa(i):
            x = sets[i]
            return torch.nn.functional.scaled_dot_product_attention(x["q"][:, :, None], x["k"], x["v"],
                                                                    enable_gqa=h != g)
    try:
        row["sdpa"] = timed(sdpa, list(range(n_sets)))
    except Exception as err:
        row["sdpa"] = {"error": str(err)[:200]}
    sets = outs = None
    torch.cuda.empty_cache()
    # Paged, pages of 16 scattered at random, at the rule's config and the contiguous best.
    best = min((v[0], k) for k, v in row["ours"].items() if isinstance(v, tuple))
    pg = [make_paged_inputs(b, h, g, lengths, d, 16, "bf16", DEV, gen(7 + i)) for i in range(n_sets)]
    pouts = [torch.empty_like(x["q"]) for x in pg]
    for label, cfg in (("rule", rule),):
        def paged(i, cfg=cfg):
            x = pg[i]
            return flash_decoding(x["q"], x["k"], x["v"], x["lengths"], pouts[i], cfg, table=x["table"])
        try:
            row["paged"][label] = timed(paged, list(range(n_sets)))
        except Exception as err:
            row["paged"][label] = {"error": str(err)[:200]}
    pg = pouts = None
    torch.cuda.empty_cache()
    rule_key = f"n{rule.block_n} sp{rule.splits} w{rule.num_warps} s{rule.num_stages}"
    r = row["ours"].get(rule_key)
    sd = row["sdpa"][0] if isinstance(row["sdpa"], tuple) else float("nan")
    pr = row["paged"]["rule"][0] if isinstance(row["paged"]["rule"], tuple) else float("nan")
    log(f"grid {b}x{h}/{g}x{n}{' ragged' if row['ragged'] else ''}: rule {rule_key} "
        f"{r[0] * 1e6 if isinstance(r, tuple) else float('nan'):.1f} µs, best {best[1]} {best[0] * 1e6:.1f}, "
        f"paged {pr * 1e6:.1f}, sdpa {sd * 1e6:.1f} | {kv_bytes / best[0] / 1e12:.2f} TB/s best")
    RES["grid"].append(row)


def grid(quick):
    for h, g in LAYOUTS:
        for b, n in POINTS[: 4 if quick else None]:
            grid_shape(b, h, g, [n] * b, quick)
        # Ragged: lengths drawn uniformly in [1, 8,192] (seeded), batch 16 and 64.
        for b in (16, 64)[: 1 if quick else None]:
            lengths = torch.randint(1, 8193, (b,), generator=torch.Generator().manual_seed(b)).tolist()
            grid_shape(b, h, g, lengths, quick)


def rule_grid():
    """The shipped rule only, against SDPA, over the same grid (the confirmation run after the rule was set).

    Ours and SDPA are timed alternately, twice each (ours, SDPA, ours, SDPA), so that a drift of the clocks over
    the call moves both. A row is behind only where both of ours are slower than both of SDPA's; where the two
    pairs overlap the row is level within the call's spread, and the log says which."""
    for h, g in [*LAYOUTS, (32, 16)]:
        for b, n in POINTS:
            lengths = [n] * b
            d = 128
            sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, L2), 16)
            sets = [make_decode_inputs(b, h, g, lengths, d, "bf16", DEV, gen(b + n + i)) for i in range(sets_n)]
            outs = [torch.empty_like(x["q"]) for x in sets]
            rule = decode_config(b, g, n, group=h // g, head_d=d)
            row = {"shape": [b, h, g, n, d], "rule": str(rule), "sets": sets_n, "ours": [], "sdpa": []}
            for _ in range(2):
                row["ours"].append(timed(lambda i, sets=sets, outs=outs, rule=rule: flash_decoding(
                    sets[i]["q"], sets[i]["k"], sets[i]["v"], sets[i]["lengths"], outs[i], rule),
                    list(range(sets_n))))
                row["sdpa"].append(timed(lambda i, sets=sets, gqa=h != g:
                                         torch.nn.functional.scaled_dot_product_attention(
                                             sets[i]["q"][:, :, None], sets[i]["k"], sets[i]["v"], enable_gqa=gqa),
                                         list(range(sets_n))))
            ours = [t[0] for t in row["ours"]]
            sdpa = [t[0] for t in row["sdpa"]]
            row["verdict"] = "behind" if min(ours) > max(sdpa) else "ahead" if max(ours) < min(sdpa) else "level"
            RES.setdefault("rule_grid", []).append(row)
            log(f"rule {b}x{h}/{g}x{n} sp{rule.splits} n{rule.block_n} s{rule.num_stages} w{rule.num_warps} "
                f"hs{rule.head_slices}: ours {ours[0] * 1e6:.2f}/{ours[1] * 1e6:.2f} µs, sdpa "
                f"{sdpa[0] * 1e6:.2f}/{sdpa[1] * 1e6:.2f} -> {sdpa[0] / ours[0]:.3f}x/{sdpa[1] / ours[1]:.3f}x "
                f"{row['verdict']}")
            sets = outs = None
            torch.cuda.empty_cache()
    rows = RES.get("rule_grid", [])
    tally = {v: sum(r["verdict"] == v for r in rows) for v in ("ahead", "level", "behind")}
    log(f"rule grid: {len(rows)} rows, {tally}")


def cuda_core_lab():
    """One and two query heads a K/V head: the products on the tensor cores (rows padded to 16) against the CUDA
    cores (the group's own rows), at the rule's splits and around them, against SDPA."""
    shapes = [(1, 32, 32, 1024), (1, 32, 32, 4096), (4, 32, 32, 4096), (16, 32, 32, 1024), (16, 32, 32, 4096),
              (64, 32, 32, 4096), (256, 32, 32, 1000), (1, 32, 16, 4096), (16, 32, 16, 1024), (16, 32, 16, 4096),
              (64, 32, 16, 4096)]
    for b, h, g, n in shapes:
        d = 128
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, L2), 16)
        sets = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(b + n + i)) for i in range(sets_n)]
        outs = [torch.empty_like(x["q"]) for x in sets]
        rule = decode_config(b, g, n)
        cfgs = [("dot rule", rule), ("cuda rule", decode_config(b, g, n, tensor_cores=False))]
        for s_ in sorted({max(1, rule.splits // 2), 2 * rule.splits}):
            cfgs.append((f"cuda sp{s_}", decode_config(b, g, n, splits=s_, tensor_cores=False)))
        for bn in (32, 64, 128):
            cfgs.append((f"cuda n{bn}", decode_config(b, g, n, block_n=bn, tensor_cores=False)))
        cfgs.append(("cuda w8", decode_config(b, g, n, num_warps=8, tensor_cores=False)))
        row = {"shape": [b, h, g, n, d], "sets": sets_n, "times": {}}
        for label, cfg in cfgs:
            try:
                t = timed(lambda i, cfg=cfg, sets=sets, outs=outs: flash_decoding(
                    sets[i]["q"], sets[i]["k"], sets[i]["v"], sets[i]["lengths"], outs[i], cfg), list(range(sets_n)))
                row["times"][f"{label} {cfg}"] = t
                log(f"cuda-lab {b}x{h}/{g}x{n} {label} n{cfg.block_n} sp{cfg.splits} w{cfg.num_warps}: "
                    f"{t[0] * 1e6:.1f} µs")
            except Exception as err:
                log(f"cuda-lab {b}x{h}/{g}x{n} {label}: {type(err).__name__}: {str(err)[:150]}")
        t = timed(lambda i, sets=sets, gqa=h != g: torch.nn.functional.scaled_dot_product_attention(
            sets[i]["q"][:, :, None], sets[i]["k"], sets[i]["v"], enable_gqa=gqa), list(range(sets_n)))
        row["times"]["sdpa"] = t
        log(f"cuda-lab {b}x{h}/{g}x{n} sdpa: {t[0] * 1e6:.1f} µs")
        RES.setdefault("cuda_core_lab", []).append(row)
        sets = outs = None
        torch.cuda.empty_cache()


def miss_lab():
    """The shapes where the rule's config trails SDPA: every block (32, 64, 128) × pipeline depth (2-4) × warps
    (4, 8) at the rule's splits, and half and twice its splits, against SDPA."""
    shapes = [(16, 32, 32, 1024), (16, 32, 16, 1024), (1, 32, 32, 1024), (1, 64, 4, 4096), (1, 64, 4, 3000),
              (256, 28, 4, 1000), (64, 32, 16, 4096)]
    for b, h, g, n in shapes:
        d = 128
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, L2), 16)
        sets = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(b + n + i)) for i in range(sets_n)]
        outs = [torch.empty_like(x["q"]) for x in sets]
        rule = decode_config(b, g, n)
        cfgs = [decode_config(b, g, n, splits=rule.splits, block_n=bn, num_stages=st, num_warps=w)
                for bn in (32, 64, 128) for st in (2, 3, 4) for w in (4, 8)]
        cfgs += [decode_config(b, g, n, splits=sp) for sp in {max(1, rule.splits // 2), 2 * rule.splits}]
        row = {"shape": [b, h, g, n, d], "rule": str(rule), "times": {}}
        for cfg in dict.fromkeys([rule, *cfgs]):
            try:
                t = timed(lambda i, cfg=cfg, sets=sets, outs=outs: flash_decoding(
                    sets[i]["q"], sets[i]["k"], sets[i]["v"], sets[i]["lengths"], outs[i], cfg), list(range(sets_n)))
                row["times"][str(cfg)] = t
            except Exception as err:
                row["times"][str(cfg)] = {"error": str(err)[:150]}
        t = timed(lambda i, sets=sets, gqa=h != g: torch.nn.functional.scaled_dot_product_attention(
            sets[i]["q"][:, :, None], sets[i]["k"], sets[i]["v"], enable_gqa=gqa), list(range(sets_n)))
        row["times"]["sdpa"] = t
        ok = sorted((v[0], k) for k, v in row["times"].items() if isinstance(v, tuple) and k != "sdpa")
        log(f"miss-lab {b}x{h}/{g}x{n}: rule {row['times'][str(rule)][0] * 1e6:.1f} µs, sdpa {t[0] * 1e6:.1f}; "
            + "; ".join(f"{k.replace('DecodeConfig', '')} {v * 1e6:.1f}" for v, k in ok[:4]))
        RES.setdefault("miss_lab", []).append(row)
        sets = outs = None
        torch.cuda.empty_cache()


def alternately(row, calls, ids):
    """Each of ``calls`` (a name → a call of input set i) timed in turn, the round twice, so that a drift of the
    clocks over the call moves every one alike; the timings into ``row[name]``, their medians (µs) returned."""
    for _ in range(2):
        for name, call in calls.items():
            row.setdefault(name, []).append(timed(call, ids))
    return {name: [t[0] * 1e6 for t in row[name]] for name in calls}


def decode_call(sets, outs, cfg):
    """flash_decoding of input set i into ``outs[i]`` under ``cfg``, through the set's block table where it has one."""
    return lambda i: flash_decoding(sets[i]["q"], sets[i]["k"], sets[i]["v"], sets[i]["lengths"], outs[i], cfg,
                                    table=sets[i].get("table"))


def paged_short_lab():
    """The paged kernel where its programs are short (batch 1, a group of 16 heads in two slices; one split of
    1,024 positions): each of decode_candidates' configs, paged (pages of 16) against contiguous at the same
    config, alternately twice, over rotated input sets (these caches fit in the L2 one at a time)."""
    from rooflinectl.kernels.flash_decoding import decode_candidates

    for b, h, g, n in ((1, 64, 4, 4096), (1, 64, 4, 3000), (16, 32, 8, 1024), (1, 32, 8, 16384), (1, 32, 8, 4096)):
        d, page = 128, 16
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, L2), 16)
        flat = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(b + n + i)) for i in range(sets_n)]
        paged = [make_paged_inputs(b, h, g, [n] * b, d, page, "bf16", DEV, gen(7 + b + n + i)) for i in range(sets_n)]
        outs = [torch.empty_like(x["q"]) for x in flat]
        ids = list(range(sets_n))
        for cfg in decode_candidates(b, g, n, h // g, d):
            row = {"shape": [b, h, g, n, d, page], "config": str(cfg)}
            us = alternately(row, {"contiguous": decode_call(flat, outs, cfg), "paged": decode_call(paged, outs, cfg)},
                             ids)
            RES.setdefault("paged_short", []).append(row)
            c, pg = us["contiguous"], us["paged"]
            log(f"paged-short {b}x{h}/{g}x{n} sp{cfg.splits} n{cfg.block_n} s{cfg.num_stages} w{cfg.num_warps} "
                f"hs{cfg.head_slices}: contiguous {c[0]:.2f}/{c[1]:.2f} µs, paged {pg[0]:.2f}/{pg[1]:.2f} "
                f"({min(pg) / min(c) - 1:+.1%})")
        flat = paged = outs = None
        torch.cuda.empty_cache()


def paged_k_rows():
    """K loaded as rows in the paged kernel (``flash_decoding._PAGED_K_ROWS``: the page numbers gathered in V's
    layout only, one gather a block instead of two) against K as columns (``paged`` in the log: the paged kernel
    before rows were taken) and the contiguous kernel, at the rule's config, alternately twice, over rotated input
    sets; the rows' output first checked, NaN-poisoned, against the columns'."""
    from rooflinectl.kernels import flash_decoding as fd

    shapes = [(1, 32, 8, 4096, 16), (16, 32, 8, 4096, 16), (64, 32, 8, 4096, 16), (16, 32, 8, 4096, 32),
              (1, 32, 8, 16384, 16), (16, 32, 8, 1024, 16), (1, 32, 32, 1024, 16), (1, 64, 4, 3000, 16),
              (1, 64, 4, 16384, 32), (1, 64, 4, 4096, 16), (16, 64, 4, 4096, 16), (4, 32, 32, 4096, 16)]
    for b, h, g, n, page in shapes:
        d = 128
        cfg = decode_config(b, g, n, group=h // g, head_d=d)
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, L2), 16)
        ids = list(range(sets_n))
        flat = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(b + n + i)) for i in ids]
        paged = [make_paged_inputs(b, h, g, [n] * b, d, page, "bf16", DEV, gen(7 + b + n + i)) for i in ids]
        outs = [torch.empty_like(x["q"]) for x in flat]

        def run_paged(i, k_rows, call=decode_call(paged, outs, cfg), shipped=fd._PAGED_K_ROWS):
            fd._PAGED_K_ROWS = k_rows
            try:
                call(i)
            finally:
                fd._PAGED_K_ROWS = shipped

        checked = []
        for k_rows in (False, True):
            outs[0].fill_(float("nan"))
            run_paged(0, k_rows)
            torch.cuda.synchronize()
            checked.append(outs[0].clone())
        err = relative_error(checked[1], checked[0])
        ok = not torch.isnan(checked[1]).any().item() and err < 1e-2
        row = {"shape": [b, h, g, n, d, page], "config": str(cfg), "err_vs_shipped": err, "ok": ok}
        RES.setdefault("paged_k_rows", []).append(row)
        if ok:
            us = alternately(row, {"contiguous": decode_call(flat, outs, cfg),
                                   "paged": lambda i, run=run_paged: run(i, False),
                                   "paged_k_rows": lambda i, run=run_paged: run(i, True)}, ids)
            c, p0, p1 = us["contiguous"], us["paged"], us["paged_k_rows"]
            log(f"paged-k-rows {b}x{h}/{g}x{n} page {page} {cfg}: contiguous {c[0]:.2f}/{c[1]:.2f} µs, paged "
                f"{p0[0]:.2f}/{p0[1]:.2f} ({min(p0) / min(c) - 1:+.1%}), K rows {p1[0]:.2f}/{p1[1]:.2f} "
                f"({min(p1) / min(c) - 1:+.1%}); err {err:.1e}")
        else:
            log(f"paged-k-rows {b}x{h}/{g}x{n} page {page}: K rows FAILED its check (err {err:.1e}), not timed")
        flat = paged = outs = None
        torch.cuda.empty_cache()


def paged_layout_short():
    """Where the pages cost most (a group of 16 heads, short programs) against where they cost little (a group of
    4, programs of the same length), at the rule's config: contiguous, then paged with each sequence's pages in
    random or in sequential order, NHD or HND, pages of 16 or 64, each alternately twice with the contiguous
    kernel over rotated input sets."""
    for b, h, g, n in ((1, 64, 4, 4096), (1, 32, 8, 4096)):
        d = 128
        cfg = decode_config(b, g, n, group=h // g, head_d=d)
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, L2), 16)
        ids = list(range(sets_n))
        flat = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(b + n + i)) for i in range(sets_n)]
        outs = [torch.empty_like(x["q"]) for x in flat]
        for page in (16, 64):
            for order in ("random", "sequential"):
                for layout in ("nhd", "hnd"):
                    paged = [make_paged_inputs(b, h, g, [n] * b, d, page, "bf16", DEV, gen(7 + i)) for i in ids]
                    for x in paged:
                        if order == "sequential":
                            x["table"] = torch.arange(x["table"].numel(), device=DEV, dtype=torch.int32).view(
                                x["table"].shape)
                        if layout == "hnd":
                            x["k"] = x["k"].transpose(1, 2).contiguous().transpose(1, 2)
                            x["v"] = x["v"].transpose(1, 2).contiguous().transpose(1, 2)
                    row = {"shape": [b, h, g, n, d, page], "order": order, "layout": layout, "config": str(cfg)}
                    us = alternately(row, {"contiguous": decode_call(flat, outs, cfg),
                                           "paged": decode_call(paged, outs, cfg)}, ids)
                    RES.setdefault("paged_layout", []).append(row)
                    c, pg = us["contiguous"], us["paged"]
                    log(f"paged-layout {b}x{h}/{g}x{n} page {page} {order} {layout} {cfg}: contiguous "
                        f"{c[0]:.2f}/{c[1]:.2f} µs, paged {pg[0]:.2f}/{pg[1]:.2f} ({min(pg) / min(c) - 1:+.1%})")
                    paged = None
        flat = outs = None
        torch.cuda.empty_cache()


def paged_lab():
    """What the pages cost, and why: random against sequential page order, page sizes, the NHD and HND layouts,
    pipeline depth and splits, each against the contiguous kernel at the same config."""
    for b, h, g, n in ((16, 32, 8, 4096), (64, 32, 8, 4096), (32, 28, 4, 4096)):  # each K/V ≥ 4× the L2
        d = 128
        base = make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(3))
        out = torch.empty_like(base["q"])
        rule = decode_config(b, g, n)
        cfgs = [("rule", rule), ("stages 4", decode_config(b, g, n, num_stages=4)),
                ("stages 5", decode_config(b, g, n, num_stages=5)),
                ("2x splits", decode_config(b, g, n, splits=2 * rule.splits)),
                ("blocks 32", decode_config(b, g, n, block_n=32))]
        for label, cfg in cfgs:
            try:  # a config past the shared memory (5 stages of 128-position blocks) raises: say so, go on
                timed(lambda i, cfg=cfg, x=base, out=out: flash_decoding(x["q"], x["k"], x["v"], x["lengths"], out,
                                                                         cfg), [0], rep_ms=1)
            except Exception as err:
                log(f"paged-lab {b}x{h}/{g}x{n} {label} {cfg}: {type(err).__name__}: {str(err)[:120]}")
                continue
            t = timed(lambda i, cfg=cfg, x=base, out=out: flash_decoding(x["q"], x["k"], x["v"], x["lengths"], out,
                                                                         cfg), [0])
            RES.setdefault("paged_lab", []).append({"shape": [b, h, g, n], "what": f"contiguous {label}",
                                                    "config": str(cfg), "s": t})
            log(f"paged-lab {b}x{h}/{g}x{n} contiguous {label} {cfg}: {t[0] * 1e6:.1f} µs")
            for page in (16, 64, 256):
                for order in ("random", "sequential"):
                    for layout in ("nhd", "hnd") if page == 16 and label == "rule" else ("nhd",):
                        if (page != 16 or order != "random" or layout != "nhd") and label != "rule":
                            continue
                        x = make_paged_inputs(b, h, g, [n] * b, d, page, "bf16", DEV, gen(5))
                        if order == "sequential":
                            x["table"] = torch.arange(x["table"].numel(), device=DEV, dtype=torch.int32).view(
                                x["table"].shape)
                        k, v = x["k"], x["v"]
                        if layout == "hnd":
                            k = k.transpose(1, 2).contiguous().transpose(1, 2)
                            v = v.transpose(1, 2).contiguous().transpose(1, 2)
                        t = timed(lambda i, cfg=cfg, x=x, k=k, v=v, out=out: flash_decoding(
                            x["q"], k, v, x["lengths"], out, cfg, table=x["table"]), [0])
                        what = f"paged {label} page {page} {order} {layout}"
                        RES["paged_lab"].append({"shape": [b, h, g, n], "what": what, "config": str(cfg), "s": t})
                        log(f"paged-lab {b}x{h}/{g}x{n} {what}: {t[0] * 1e6:.1f} µs")
                        x = k = v = None
        base = None
        torch.cuda.empty_cache()
    # The events timer (an L2 flush before each call, CUDA events around it) for both kernels at 16 × 4,096.
    b, h, g, n, d = 16, 32, 8, 4096, 128
    x = make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, gen(9))
    out = torch.empty_like(x["q"])
    for name, fn in (("ours", lambda i: flash_decoding(x["q"], x["k"], x["v"], x["lengths"], out)),
                     ("sdpa default", lambda i: torch.nn.functional.scaled_dot_product_attention(
                         x["q"][:, :, None], x["k"], x["v"], enable_gqa=True))):
        for timer in ("events", "cuda_graph"):
            t = timed(fn, [0], timer=timer, rep_ms=MEASURE_REP_MS)
            RES.setdefault("timers", []).append({"what": name, "timer": timer, "s": t})
            log(f"timer {name} 16x32/8x4096 {timer}: {t[0] * 1e6:.1f} µs")


# ---- 4. prefill --------------------------------------------------------------------------------------------------

def prefill(shapes):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cfgs = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, True)]
    if "--prefill-tma" in sys.argv:  # K and V through tensor descriptors, with and without the other switches
        cfgs = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, tma=True),
                FlashConfig(128, 128, 8, 4, tma=True), FlashConfig(128, 128, 8, 2, tma=True),
                FlashConfig(128, 64, 8, 4, tma=True), FlashConfig(128, 128, 8, 3, True, tma=True)]
    for b, h, g, s, d in shapes:
        fl = 4 * b * h * s * s * d / 2
        x = [{"q": torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, generator=gen(i)),
              "k": torch.randn(b, g, s, d, device=DEV, dtype=torch.bfloat16, generator=gen(i + 9)),
              "v": torch.randn(b, g, s, d, device=DEV, dtype=torch.bfloat16, generator=gen(i + 19))}
             for i in range(2)]
        outs = [torch.empty_like(t["q"]) for t in x]
        row = {"shape": [b, h, g, s, d], "times": {}}
        for cfg in cfgs:
            name = f"ours {cfg.block_m}x{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages}" + (
                " ws" if cfg.warp_specialize else "") + (" tma" if cfg.tma else "")
            try:
                outs[0].fill_(float("nan"))
                flash_attention(x[0]["q"], x[0]["k"], x[0]["v"], outs[0], True, cfg)
                ref = torch.nn.functional.scaled_dot_product_attention(x[0]["q"], x[0]["k"], x[0]["v"],
                                                                       is_causal=True, enable_gqa=True)
                err = relative_error(outs[0], ref.to(torch.float64))
                t = timed(lambda i, cfg=cfg, x=x, outs=outs: flash_attention(x[i]["q"], x[i]["k"], x[i]["v"],
                                                                              outs[i], True, cfg), [0, 1])
                row["times"][name] = {"s": t, "err_vs_sdpa": err}
                log(f"prefill {b}x{h}/{g}x{s}: {name} {t[0] * 1e3:.3f} ms {fl / t[0] / 1e12:.0f} TFLOP/s "
                    f"(err vs sdpa {err:.1e})")
            except Exception as err:
                row["times"][name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
                log(f"prefill {b}x{h}/{g}x{s}: {name}: {type(err).__name__}: {str(err)[:200]}")
        for label, backend in (("sdpa default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                               ("fa2", SDPBackend.FLASH_ATTENTION)):
            def call(i, x=x):
                return torch.nn.functional.scaled_dot_product_attention(x[i]["q"], x[i]["k"], x[i]["v"],
                                                                        is_causal=True, enable_gqa=True)
            try:
                if backend is None:
                    t = timed(call, [0, 1])
                else:
                    with sdpa_kernel([backend]):
                        t = timed(call, [0, 1])
                row["times"][label] = {"s": t}
                log(f"prefill {b}x{h}/{g}x{s}: {label} {t[0] * 1e3:.3f} ms {fl / t[0] / 1e12:.0f} TFLOP/s")
            except Exception as err:
                row["times"][label] = {"error": str(err)[:200]}
        RES["prefill"].append(row)
        x = outs = None
        torch.cuda.empty_cache()


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)  # made first: a missing folder lost a whole call's JSON at its end
    quick = "--quick" in sys.argv
    RES["env"] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                  "cuda": torch.version.cuda, "sms": SMS, "l2_bytes": L2, "rep_ms": REP_MS,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "clock_idle": sm_clock()}
    log(RES["env"])
    t0 = time.time()
    try:
        RES["env"]["checks_ok"] = checks()
        warm_clocks()
        RES["env"]["copy_bytes_per_s"] = copy_ceiling()
        log(f"copy ceiling (SM kernel, read + write): {RES['env']['copy_bytes_per_s'] / 1e12:.3f} TB/s")
        labs = {"--miss-lab": miss_lab, "--cuda-core-lab": cuda_core_lab, "--paged-lab": paged_lab,
                "--paged-k-rows": paged_k_rows, "--paged-layout": paged_layout_short, "--paged-short": paged_short_lab,
                "--rule-grid": rule_grid}
        for flag, lab in labs.items():  # each asked for, in this order, on warm clocks
            if flag in sys.argv:
                warm_clocks()
                lab()
        if "--skip-harness" not in sys.argv:
            harness((16, 32, 8, 4096, 128))
        log(f"elapsed {time.time() - t0:.0f} s")
        if "--skip-sweep" not in sys.argv:
            warm_clocks()
            grid(quick)
        log(f"elapsed {time.time() - t0:.0f} s")
        if "--skip-prefill" not in sys.argv:
            warm_clocks()
            prefill([(1, 32, 8, 4096, 128), (1, 32, 8, 8192, 128), (1, 32, 8, 16384, 128), (4, 32, 8, 4096, 128)]
                    [: 1 if quick else None])
    except Exception:
        traceback.print_exc()
    finally:
        RES["env"]["elapsed_s"] = time.time() - t0
        with open(f"{out_dir}/decode_grid.json", "w") as f:
            json.dump(RES, f, indent=1, default=str)
        log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
