"""The prefill grid's order, the paged kernel's page-number load and the batch-1 combine, on a GPU in one call.

    python benchmarks/attention_lab_gpu.py OUT_DIR [--skip-checks] [--skip-prefill] [--skip-paged] [--skip-combine]
        [--prefill-poly] [--prefill-ahead] [--prefill-occupancy] [--prefill-gluon] [--decode-g16] [--decode-slices]
        [--deadline-s N]

1. Checks in bf16, every output NaN-poisoned first, fresh random inputs: prefill in both grid orders (query blocks
   or heads on the fastest axis) and every config timed below, causal and not, at lengths no multiple of the
   blocks (4,097, 777, 1,000), GQA groups 4 and 7, d 64 and 128, against float64, three repeats bit-identical;
   the paged kernel with its page numbers masked by the split's end (the default) and by the length, padded to
   the split's pages or one more, bit-identical to the contiguous kernel and 20 repeats bit-identical
   (decode_grid_gpu.check_paged), on ragged batches whose slots past each length are NaN.
2. Prefill, causal, bf16, d 128: both grid orders at 128×128 (2, 3, 4 stages) and 128×64 (3, 4 stages), 8 warps,
   against SDPA's cuDNN and FlashAttention-2 backends; non-causal, both orders against cuDNN. With
   --prefill-poly instead: every other exponential by the FMA polynomial (FlashConfig.poly_exp), both orders;
   with --prefill-ahead, Q·Kᵀ issued one block ahead of the softmax (FlashConfig.qk_ahead), and 256-query blocks
   in 16 warps (four warpgroups of 64 rows sharing each K/V block); with --prefill-occupancy, two or three
   programs an SM (FlashConfig.max_regs: 128×64 and 128×32 blocks in 8 warps at 128 registers; 64-row blocks in
   4 warps, which fit two or three an SM uncapped), against the same blocks at one program an SM; with
   --prefill-gluon, the Gluon kernel for Hopper (FlashConfig.gluon: a TMA loader warp, two consumer warpgroups,
   the softmax under P·V; with or without the consumers' ping-pong) in 2 to 4 buffers of 128 or 64 positions
   against the shipped config, after one launch of it in a child process that must finish within 120 s (a kernel
   that waits on a barrier forever is killed there, and its configs are dropped, instead of hanging this call);
   its checks add 1, 65, 200, 777 and 1,000 tokens, d 64 and 128, groups 1 to 7, causal and not, and a Gluon
   config that fails one is not timed.
3. Paged decode (pages of 16 and 32, scattered at random) against the contiguous kernel at the rule's config:
   the page numbers' mask (split's end or length) × their tile (the split's pages, or one more), each twice.
4. The batch-1 combine at a group of 16 heads: the combine tile's size (4, 8 or 16 heads at 32 splits) against
   SDPA.
5. With --decode-g16: batch 1 at 64/4 heads, the split count, warps and K/V block over a grid, against SDPA; with
   --decode-slices, the group's heads in 1, 2 or 4 programs (DecodeConfig.head_slices) × 8-32 splits, at 64/4
   and 32/8 (checked first: ragged lengths, NaN past each end, bit-identical repeats).
Every time is measure's timer (``rooflinectl.measure.bench.do_bench``: CUDA-graph replays over input sets rotated
past 4× the L2), clocks warmed first. Writes OUT_DIR/attention_lab.json, prints one line a measurement.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_grid_gpu as dg  # noqa: E402  (the checks, timer and clock helpers of the decode-grid script)

from rooflinectl.kernels import flash_decoding as fd  # noqa: E402
from rooflinectl.kernels.base import relative_error  # noqa: E402
from rooflinectl.kernels.flash_attention import FlashConfig, attention_reference, flash_attention  # noqa: E402
from rooflinectl.kernels.flash_decoding import decode_config, flash_decoding, make_decode_inputs  # noqa: E402
from rooflinectl.kernels.paged_decoding import make_paged_inputs  # noqa: E402
from rooflinectl.measure.bench import input_sets  # noqa: E402

DEV = dg.DEV
RES: dict = {"env": {}, "checks": [], "prefill": [], "paged": [], "combine": []}
log = dg.log


def _tight_table_pad(chunk: int, page: int) -> int:
    """The split's own pages alone: one page more only where the chunk is no multiple of the page."""
    if page == 0:
        return 0
    pad = fd._next_pow2(-(-chunk // page) + (1 if chunk % page else 0))
    return pad if pad <= fd._MAX_TABLE_PAD else 0


SHIPPED_TABLE_PAD = fd._table_pad  # one page more than the split's, always


def table_variant(waits_len: bool, one_more: bool) -> None:
    fd._TABLE_WAITS_LEN = waits_len
    fd._table_pad = SHIPPED_TABLE_PAD if one_more else _tight_table_pad


def cfg_name(c: FlashConfig) -> str:
    return (f"{c.block_m}x{c.block_n} w{c.num_warps} s{c.num_stages}" + (" heads-fast" if c.heads_fast else "")
            + (" tma" if c.tma else "") + (" poly-exp" if c.poly_exp else "") + (" qk-ahead" if c.qk_ahead else "")
            + (f" regs{c.max_regs}" if c.max_regs else "") + (" gluon" if c.gluon else "")
            + (" ping-pong" if c.pingpong else ""))


PREFILL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, heads_fast=True),
                FlashConfig(128, 128, 8, 2, heads_fast=True), FlashConfig(128, 128, 8, 4, heads_fast=True),
                FlashConfig(128, 64, 8, 3, heads_fast=True), FlashConfig(128, 64, 8, 4, heads_fast=True),
                FlashConfig(128, 64, 8, 3), FlashConfig(128, 128, 8, 3, tma=True, heads_fast=True)]
NONCAUSAL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, heads_fast=True)]
if "--prefill-poly" in sys.argv:  # half the exponentials on the FMA units, in both grid orders, TMA loads or not
    PREFILL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, heads_fast=True),
                    FlashConfig(128, 128, 8, 3, poly_exp=True), FlashConfig(128, 128, 8, 3, heads_fast=True,
                                                                            poly_exp=True),
                    FlashConfig(128, 128, 8, 3, heads_fast=True, tma=True, poly_exp=True),
                    FlashConfig(128, 64, 8, 3, heads_fast=True, poly_exp=True)]
    NONCAUSAL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, poly_exp=True)]
if "--prefill-ahead" in sys.argv:  # Q·Kᵀ one block ahead of the softmax, against the shipped loop, both orders
    PREFILL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, heads_fast=True),
                    FlashConfig(128, 128, 8, 3, qk_ahead=True), FlashConfig(128, 128, 8, 3, heads_fast=True,
                                                                            qk_ahead=True),
                    FlashConfig(128, 128, 8, 2, heads_fast=True, qk_ahead=True),
                    FlashConfig(128, 64, 8, 3, heads_fast=True, qk_ahead=True),
                    FlashConfig(128, 64, 8, 4, heads_fast=True, qk_ahead=True),
                    FlashConfig(256, 128, 16, 2, heads_fast=True), FlashConfig(256, 128, 16, 2, heads_fast=True,
                                                                              qk_ahead=True),
                    FlashConfig(256, 64, 16, 3, heads_fast=True, qk_ahead=True)]
    NONCAUSAL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, qk_ahead=True)]
if "--prefill-occupancy" in sys.argv:  # programs an SM (compiled by triton 3.6 for sm_90: registers, shared memory)
    PREFILL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 128, 8, 3, heads_fast=True),
                    FlashConfig(128, 64, 8, 2, heads_fast=True),  # 194 regs, 96 kB: one an SM
                    FlashConfig(128, 64, 8, 2, heads_fast=True, max_regs=128),  # 120 B spilled, 96 kB: two
                    FlashConfig(128, 32, 8, 3, heads_fast=True, max_regs=128),  # no spill, 80 kB: two
                    FlashConfig(128, 32, 8, 4, heads_fast=True, max_regs=128),  # no spill, 96 kB: two
                    FlashConfig(128, 32, 8, 3, max_regs=128),
                    FlashConfig(64, 64, 4, 3, heads_fast=True),  # 183 regs, 112 kB: two
                    FlashConfig(64, 32, 4, 3, heads_fast=True)]  # 149 regs, 64 kB: three
    NONCAUSAL_CFGS = [FlashConfig(128, 128, 8, 3), FlashConfig(128, 64, 8, 2, max_regs=128),
                      FlashConfig(128, 32, 8, 3, max_regs=128), FlashConfig(128, 32, 8, 4, max_regs=128)]

GLUON_CFGS = [FlashConfig(128, 128, 12, 2, gluon=True), FlashConfig(128, 128, 12, 2, gluon=True, pingpong=True),
              FlashConfig(128, 64, 12, 3, gluon=True), FlashConfig(128, 128, 12, 3, gluon=True),
              FlashConfig(128, 128, 12, 3, gluon=True, pingpong=True), FlashConfig(128, 64, 12, 4, gluon=True)]
if "--prefill-gluon" in sys.argv:  # FlashAttention-3's schedule in Gluon against the shipped loop
    PREFILL_CFGS = [FlashConfig(128, 128, 8, 3, heads_fast=True), *GLUON_CFGS]
    NONCAUSAL_CFGS = [FlashConfig(128, 128, 8, 3), *GLUON_CFGS[:3]]

FAILED: set[str] = set()  # the Gluon configs (cfg_name) that failed a check: not timed

# One launch of the Gluon kernel, run by gluon_smoke() in a child process: it must return.
GLUON_SMOKE = """
import torch
from rooflinectl.kernels.flash_attention import FlashConfig, flash_attention
q, k, v = (torch.randn(1, h, 1000, 128, device="cuda", dtype=torch.bfloat16) for h in (8, 2, 2))
o = torch.empty_like(q)
flash_attention(q, k, v, o, True, FlashConfig(128, 128, 12, 2, gluon=True))
torch.cuda.synchronize()
print("returned; NaN in the output:", bool(torch.isnan(o).any()))
"""


def gluon_smoke() -> bool:
    """Whether one launch of the Gluon kernel returns within 120 s, in a child process (logged either way)."""
    import subprocess

    try:
        proc = subprocess.run([sys.executable, "-c", GLUON_SMOKE], capture_output=True, text=True, timeout=120,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        ok = proc.returncode == 0
        log(f"gluon smoke: exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-600:]}")
    except subprocess.TimeoutExpired:
        ok = False
        log("gluon smoke: no return within 120 s (killed); the Gluon configs are dropped")
    RES["checks"].append({"what": "gluon smoke", "ok": ok})
    return ok


# ---- 1. checks ---------------------------------------------------------------------------------------------------

def check_prefill(b, h, g, s, d, causal, cfg):
    gn = dg.gen(b * 1000 + s + d + int(causal))
    x = {n: torch.randn(shape, device=DEV, dtype=torch.float32, generator=gn).to(torch.bfloat16)
         for n, shape in (("q", (b, h, s, d)), ("k", (b, g, s, d)), ("v", (b, g, s, d)))}
    ref = attention_reference(x["q"], x["k"], x["v"], causal)
    outs = []
    for _ in range(3):
        out = torch.full_like(x["q"], float("nan"))
        try:
            flash_attention(x["q"], x["k"], x["v"], out, causal, cfg)
        except triton.runtime.errors.OutOfResources as err:  # reported; that config's timing fails the same way
            log(f"check prefill {cfg_name(cfg)}: {err}")
            return True
        except Exception as err:  # a config that cannot run these inputs: a failed check, the next ones go on
            RES["checks"].append({"what": "prefill", "shape": [b, h, g, s, d], "causal": causal,
                                  "config": cfg_name(cfg), "error": f"{type(err).__name__}: {str(err)[:300]}",
                                  "ok": False})
            log(f"check prefill {b}x{h}/{g}x{s}x{d} {cfg_name(cfg)}: {type(err).__name__}: {str(err)[:200]} -> FAIL")
            FAILED.add(cfg_name(cfg))
            return False
        outs.append(out)
    err = relative_error(outs[0], ref)
    same = all(torch.equal(o, outs[0]) for o in outs[1:])
    ok = err <= 2e-2 and not torch.isnan(outs[0]).any().item() and same
    if not ok and cfg.gluon:  # a Gluon config that failed a check is not timed (its wrong answer, or its hang)
        FAILED.add(cfg_name(cfg))
    RES["checks"].append({"what": "prefill", "shape": [b, h, g, s, d], "causal": causal, "config": cfg_name(cfg),
                          "rel_err": err, "repeats_identical": same, "ok": bool(ok)})
    log(f"check prefill {b}x{h}/{g}x{s}x{d} causal={causal} {cfg_name(cfg)}: err {err:.1e} identical {same} -> "
        f"{'ok' if ok else 'FAIL'}")
    return ok


def check_slices(h, g, lengths, cfg):
    """The decode kernel in head slices against float64, NaN past each length, three repeats bit-identical."""
    from rooflinectl.kernels.flash_decoding import decode_reference

    x = make_decode_inputs(len(lengths), h, g, lengths, 128, "bf16", DEV, dg.gen(h + cfg.splits + cfg.head_slices),
                           l_max=max(lengths) + 37)
    for i, n in enumerate(lengths):
        x["k"][i, :, n:] = float("nan")
        x["v"][i, :, n:] = float("nan")
    outs = []
    for _ in range(3):
        out = torch.full_like(x["q"], float("nan"))
        flash_decoding(x["q"], x["k"], x["v"], x["lengths"], out, cfg)
        outs.append(out)
    err = relative_error(outs[0], decode_reference(x["q"], x["k"], x["v"], x["lengths"]))
    same = all(torch.equal(o, outs[0]) for o in outs[1:])
    ok = err <= 2e-2 and not torch.isnan(outs[0]).any().item() and same
    RES["checks"].append({"what": "decode slices", "heads": [h, g], "lengths": lengths, "config": str(cfg),
                          "rel_err": err, "repeats_identical": same, "ok": bool(ok)})
    log(f"check decode {h}/{g} {lengths} {cfg}: err {err:.1e} identical {same} -> {'ok' if ok else 'FAIL'}")
    return ok


def checks():
    ok = True
    if "--prefill-gluon" in sys.argv:
        global PREFILL_CFGS, NONCAUSAL_CFGS
        if not gluon_smoke():
            PREFILL_CFGS = [c for c in PREFILL_CFGS if not c.gluon]
            NONCAUSAL_CFGS = [c for c in NONCAUSAL_CFGS if not c.gluon]
            ok = False
        for cfg in [c for c in GLUON_CFGS[:3] if c in PREFILL_CFGS]:  # each kind: plain, ping-pong, 64-wide
            for causal in (True, False):
                for b, h, g, s, d in ((1, 4, 2, 1, 128), (2, 4, 1, 65, 128), (1, 8, 8, 200, 64),
                                      (2, 28, 4, 777, 128), (3, 8, 2, 1000, 64)):
                    ok &= check_prefill(b, h, g, s, d, causal, cfg)
    for cfg in [c for c in PREFILL_CFGS if c.num_stages < 4 or c.block_n < 128]:  # 4 of 128×128 fit no SM
        ok &= check_prefill(1, 32, 8, 4097, 128, True, cfg)
    for cfg in NONCAUSAL_CFGS:
        ok &= check_prefill(1, 32, 8, 4097, 128, False, cfg)
    for heads_fast in (False, True):
        for ahead in (False, True) if "--prefill-ahead" in sys.argv else (False,):
            ok &= check_prefill(2, 28, 4, 777, 128, True, FlashConfig(128, 128, 8, 3, heads_fast=heads_fast,
                                                                      qk_ahead=ahead))
            ok &= check_prefill(2, 28, 4, 777, 128, False, FlashConfig(128, 128, 8, 3, heads_fast=heads_fast,
                                                                       qk_ahead=ahead))
            ok &= check_prefill(3, 8, 2, 1000, 64, True, FlashConfig(128, 64, 4, 3, heads_fast=heads_fast,
                                                                     qk_ahead=ahead))
            ok &= check_prefill(3, 8, 2, 1000, 64, False, FlashConfig(128, 64, 4, 3, heads_fast=heads_fast,
                                                                      qk_ahead=ahead))
    if "--decode-slices" in sys.argv:
        for h, g, lengths in ((64, 4, [3000, 1, 4097, 17]), (32, 8, [1, 1000, 4097, 333])):
            for sp in (8, 16, 32):
                for hs in (2, 4):
                    ok &= check_slices(h, g, lengths, decode_config(len(lengths), g, max(lengths) + 37, splits=sp,
                                                                    block_n=64, head_slices=hs))
    if "--skip-paged" in sys.argv:
        return ok
    for waits_len in (False, True):
        for one_more in (False, True):
            table_variant(waits_len, one_more)
            for page in (16, 32):
                ok &= dg.check_paged(32, 8, [1, 1000, 4097, 333], 128, page)
            ok &= dg.check_paged(32, 8, [4096], 128, 16)
            ok &= dg.check_paged(32, 8, [1024] * 16, 128, 16)
            ok &= dg.check_paged(64, 4, [2048, 1, 3000], 128, 16)
            ok &= dg.check_paged(8, 1, [129, 1, 64], 64, 256, cfg=decode_config(3, 1, 256, splits=3, block_n=64))
            ok &= dg.check_paged(32, 8, [4096] * 16, 128, 16, cfg=decode_config(16, 8, 4096, splits=3))
    table_variant(False, True)
    for tile in (16384, 32768, 65536):
        fd._COMBINE_TILE = tile
        ok &= dg.check_contiguous(64, 4, [3000, 1, 4097, 17], 128, decode_config(4, 4, 4097 + 37, splits=32))
    fd._COMBINE_TILE = 16384
    RES["checks"].extend(dg.RES["checks"])
    return ok


# ---- 2. prefill --------------------------------------------------------------------------------------------------

def prefill():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shapes = [(1, 32, 8, 4096, 128), (1, 32, 8, 8192, 128), (1, 32, 8, 16384, 128), (4, 32, 8, 4096, 128),
              (1, 64, 8, 8192, 128)]
    for b, h, g, s, d in shapes:
        if past_deadline(f"prefill {b}x{h}/{g}x{s}"):
            break
        fl = 4 * b * h * s * s * d / 2
        x = [{"q": torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, generator=dg.gen(i)),
              "k": torch.randn(b, g, s, d, device=DEV, dtype=torch.bfloat16, generator=dg.gen(i + 9)),
              "v": torch.randn(b, g, s, d, device=DEV, dtype=torch.bfloat16, generator=dg.gen(i + 19))}
             for i in range(2)]
        outs = [torch.empty_like(t["q"]) for t in x]
        for causal in (True, False):
            if not causal and (b, h, s) not in ((1, 32, 4096), (1, 32, 16384)):
                continue
            row = {"shape": [b, h, g, s, d], "causal": causal, "times": {}}
            cfgs = PREFILL_CFGS if causal else NONCAUSAL_CFGS
            flops = fl if causal else 2 * fl
            for rep in (1, 2) if causal else (1,):
                for cfg in cfgs:
                    name = cfg_name(cfg)
                    if name in FAILED:
                        if rep == 1:
                            log(f"prefill {b}x{h}/{g}x{s} {name}: not timed, it failed a check")
                        continue
                    try:
                        t = dg.timed(lambda i, cfg=cfg, x=x, outs=outs, causal=causal: flash_attention(x[i]["q"], x[i]["k"], x[i]["v"], outs[i],
                                                                        causal, cfg), [0, 1])
                        row["times"].setdefault(name, []).append(t)
                        log(f"prefill {b}x{h}/{g}x{s} causal={causal} #{rep} {name}: {t[0] * 1e3:.3f} ms "
                            f"{flops / t[0] / 1e12:.0f} TFLOP/s")
                    except Exception as err:
                        row["times"][name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
                        if rep == 1:
                            log(f"prefill {b}x{h}/{g}x{s} {name}: {type(err).__name__}: {str(err)[:160]}")
                for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
                    if not causal and label == "fa2":
                        continue
                    try:
                        with sdpa_kernel([backend]):
                            t = dg.timed(lambda i, x=x, causal=causal: torch.nn.functional.scaled_dot_product_attention(
                                x[i]["q"], x[i]["k"], x[i]["v"], is_causal=causal, enable_gqa=True), [0, 1])
                        row["times"].setdefault(label, []).append(t)
                        log(f"prefill {b}x{h}/{g}x{s} causal={causal} #{rep} {label}: {t[0] * 1e3:.3f} ms "
                            f"{flops / t[0] / 1e12:.0f} TFLOP/s")
                    except Exception as err:
                        row["times"][label] = {"error": str(err)[:200]}
            RES["prefill"].append(row)
        x = outs = None
        torch.cuda.empty_cache()


# ---- 3. paged ----------------------------------------------------------------------------------------------------

PAGED_VARIANTS = [("mask by split, tile of its pages", False, False), ("mask by split, one page more", False, True),
                  ("mask by length, tile of its pages", True, False), ("mask by length, one page more", True, True)]


def paged():
    for b, h, g, n, page in ((1, 32, 8, 4096, 16), (16, 32, 8, 1024, 16), (16, 32, 8, 4096, 16),
                             (64, 32, 8, 4096, 16), (1, 32, 8, 16384, 16), (16, 32, 8, 4096, 32)):
        d = 128
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, dg.L2), 16)
        cont = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, dg.gen(b + n + i)) for i in range(sets_n)]
        pg = [make_paged_inputs(b, h, g, [n] * b, d, page, "bf16", DEV, dg.gen(7 + i)) for i in range(sets_n)]
        outs = [torch.empty_like(x["q"]) for x in cont]
        rule = decode_config(b, g, n)
        row = {"shape": [b, h, g, n, d, page], "rule": str(rule), "sets": sets_n, "times": {}}
        for rep in (1, 2):
            t = dg.timed(lambda i, cont=cont, outs=outs, rule=rule: flash_decoding(cont[i]["q"], cont[i]["k"], cont[i]["v"], cont[i]["lengths"],
                                                  outs[i], rule), list(range(sets_n)))
            row["times"].setdefault("contiguous", []).append(t)
            line = [f"contiguous {t[0] * 1e6:.1f}"]
            for label, waits_len, one_more in PAGED_VARIANTS:
                table_variant(waits_len, one_more)
                t = dg.timed(lambda i, pg=pg, outs=outs, rule=rule: flash_decoding(pg[i]["q"], pg[i]["k"], pg[i]["v"], pg[i]["lengths"], outs[i],
                                                      rule, table=pg[i]["table"]), list(range(sets_n)))
                row["times"].setdefault(label, []).append(t)
                line.append(f"{label} {t[0] * 1e6:.1f}")
            table_variant(False, True)
            log(f"paged {b}x{h}/{g}x{n} page {page} {rule.splits} splits n{rule.block_n} #{rep} µs: "
                + "; ".join(line))
        RES["paged"].append(row)
        cont = pg = outs = None
        torch.cuda.empty_cache()


# ---- 4. the batch-1 combine --------------------------------------------------------------------------------------

def time_decode(key, cfg, sets, outs, row, line):
    """Time flash_decoding at ``cfg`` over the input ``sets`` into ``row["times"][key]`` and a word on ``line``;
    a config that fails is recorded with its error."""
    try:
        t = dg.timed(lambda i: flash_decoding(sets[i]["q"], sets[i]["k"], sets[i]["v"], sets[i]["lengths"], outs[i],
                                              cfg), list(range(len(sets))))
        row["times"].setdefault(key, []).append(t)
        line.append(f"{key} {t[0] * 1e6:.2f}")
    except Exception as err:
        row["times"][key] = {"error": str(err)[:200]}
        line.append(f"{key} {type(err).__name__}")


def time_sdpa_decode(sets, row) -> float:
    """Time SDPA as torch picks it (cuDNN) on the decode input ``sets`` into ``row["times"]["sdpa"]``; seconds."""
    gqa = sets[0]["q"].shape[1] != sets[0]["k"].shape[1]
    t = dg.timed(lambda i: torch.nn.functional.scaled_dot_product_attention(
        sets[i]["q"][:, :, None], sets[i]["k"], sets[i]["v"], enable_gqa=gqa), list(range(len(sets))))
    row["times"].setdefault("sdpa", []).append(t)
    return t[0]


def combine():
    for b, h, g, n in ((1, 64, 4, 3000), (1, 64, 4, 4096), (1, 64, 4, 1024), (1, 64, 4, 16384), (1, 32, 32, 1024),
                       (1, 32, 8, 1024)):
        d = 128
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, dg.L2), 16)
        sets = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, dg.gen(b + n + i)) for i in range(sets_n)]
        outs = [torch.empty_like(x["q"]) for x in sets]
        row = {"shape": [b, h, g, n, d], "times": {}}
        cfgs = [("rule", decode_config(b, g, n, group=h // g, head_d=d)), ("rule before", decode_config(b, g, n)),
                ("16 splits", decode_config(b, g, n, splits=16))]
        for rep in (1, 2):
            line = []
            for tile in (16384, 32768, 65536):
                fd._COMBINE_TILE = tile
                for label, cfg in cfgs:
                    key = f"{label} sp{cfg.splits} tile {tile} ({fd._heads_step(h // g, cfg.splits, d)} heads)"
                    time_decode(key, cfg, sets, outs, row, line)
            fd._COMBINE_TILE = 16384
            t = time_sdpa_decode(sets, row)
            log(f"combine {b}x{h}/{g}x{n} #{rep} µs: " + "; ".join(line) + f"; sdpa {t * 1e6:.2f}")
        RES["combine"].append(row)
        sets = outs = None
        torch.cuda.empty_cache()


def decode_g16():
    """Batch 1 at a group of 16 query heads a K/V head (64/4): splits × warps × K/V block, each twice, against
    SDPA. With --decode-slices instead: the group in 1, 2 or 4 head slices × 8, 16 or 32 splits (blocks of 64, 4
    warps), at 64/4 and 32/8."""
    RES["decode_g16"] = []
    slices = "--decode-slices" in sys.argv
    rows = [(64, 4, n) for n in (4096, 3000, 16384)] + ([(32, 8, 4096), (32, 8, 1024)] if slices else [])
    for h, g, n in rows:
        b, d = 1, 128
        sets_n = min(input_sets(2 * b * g * n * d * 2 + 4 * b * h * d, dg.L2), 16)
        sets = [make_decode_inputs(b, h, g, [n] * b, d, "bf16", DEV, dg.gen(b + n + i)) for i in range(sets_n)]
        outs = [torch.empty_like(x["q"]) for x in sets]
        row = {"shape": [b, h, g, n, d], "times": {}}
        cfgs = [("rule", decode_config(b, g, n, group=h // g, head_d=d))]
        if slices:
            cfgs += [(f"sp{sp} x{hs}", decode_config(b, g, n, splits=sp, block_n=64, head_slices=hs))
                     for sp in (8, 16, 32) for hs in (1, 2, 4)]
        else:
            cfgs += [(f"sp{sp} w{w} bn{bn}", decode_config(b, g, n, splits=sp, num_warps=w, block_n=bn))
                     for sp in (8, 12, 16, 24, 32) for w in (4, 8) for bn in (64, 128)]
        for rep in (1, 2):
            line = []
            for label, cfg in cfgs:
                time_decode(f"{label} (sp{cfg.splits} bn{cfg.block_n} w{cfg.num_warps})", cfg, sets, outs, row, line)
            t = time_sdpa_decode(sets, row)
            log(f"decode g16 {b}x{h}/{g}x{n} #{rep} µs: " + "; ".join(line) + f"; sdpa {t * 1e6:.2f}")
        RES["decode_g16"].append(row)
        sets = outs = None
        torch.cuda.empty_cache()


# --deadline-s N: no section or prefill shape starts N seconds after the start, so that the JSON is written before
# the device call's own limit kills the process.
START = time.time()
DEADLINE_S = float(sys.argv[sys.argv.index("--deadline-s") + 1]) if "--deadline-s" in sys.argv else float("inf")


def past_deadline(what: str) -> bool:
    if time.time() - START < DEADLINE_S:
        return False
    log(f"deadline ({DEADLINE_S:.0f} s) passed: {what} and what follows skipped")
    RES["env"].setdefault("skipped_at_deadline", []).append(what)
    return True


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)  # made first: a missing folder lost a whole call's JSON at its end
    RES["env"] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                  "cuda": torch.version.cuda, "sms": dg.SMS, "l2_bytes": dg.L2, "rep_ms": dg.REP_MS,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "clock_idle": dg.sm_clock(),
                  "argv": sys.argv[1:]}
    log(RES["env"])
    t0 = time.time()
    try:
        if "--skip-checks" not in sys.argv:
            RES["env"]["checks_ok"] = checks()
            log(f"checks ok: {RES['env']['checks_ok']}; elapsed {time.time() - t0:.0f} s")
        for part, fn in (("paged", paged), ("prefill", prefill), ("combine", combine), ("decode-g16", decode_g16)):
            if f"--skip-{part}" not in sys.argv and (part != "decode-g16" or "--decode-g16" in sys.argv
                                                     or "--decode-slices" in sys.argv) and not past_deadline(part):
                dg.warm_clocks()
                log(f"clocks before {part}: {dg.sm_clock()}")
                fn()
                log(f"elapsed {time.time() - t0:.0f} s")
    except Exception:
        traceback.print_exc()
    finally:
        RES["env"]["elapsed_s"] = time.time() - t0
        with open(f"{out_dir}/attention_lab.json", "w") as f:
            json.dump(RES, f, indent=1, default=str)
        log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
