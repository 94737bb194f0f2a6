"""rmsnorm_linear's launch configurations: which kernel (gemv or tile), tiles, stages and K split by shape.

The table the H200 measurements chose (each constant carries its measurement); the package's kernels run what
``config_for`` picks and ``benchmarks/tune_kernels.py`` times what ``candidates`` offers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...specs.hardware import GPU
from ..base import compute_capability, sm_count, smem_per_block_bytes


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class RMSNormLinearConfig:
    kind: str  # "gemv" (decode) or "tile" (prefill)
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    split_k: int = 1  # programs that share one output tile, each over a K range
    # gemv only: the sum of squares of x from a loop of its own before the matmul loop ("loop"), from a load of its
    # own one step ahead inside it ("inloop": hides the separate loop's L2 latency), or from the x tile that feeds
    # the dot, which reads a copy of its own ("dot": _GEMV_SS, measured fastest).
    ss: str = "loop"
    group_m: int = 8  # tile: tile rows per group, for L2 reuse
    # tile only: where rstd comes from. "prepass": a small kernel before the matmul reads x once more (measured on
    # the H200, the default); "tile": the sum of squares of the x tiles the K loop loads for the dot (which takes
    # them from registers, against the pipeliner's race: rmsnorm_linear's docstring), rstd in the epilogue, no
    # pre-pass; "ahead": the same from a load of its own one step ahead (the gemv's "inloop"). Both measured
    # slower than the pre-pass at M ≥ 512 (483-672 against 422 µs at 2048×4096×14336).
    rstd: str = "prepass"
    tma: bool = False  # gemv, or tile with rstd "tile"/"ahead": x and W_g tiles through tensor descriptors (TMA)
    warp_spec: bool = False  # with tma: the K loop warp-specialized (tl.range(..., warp_specialize=True))
    # With tma: the descriptors made on the host (triton.tools.tensor_descriptor, kernel parameters) instead of by
    # each program (tl.make_tensor_descriptor into global scratch, a few instructions and a fence a program).
    host_desc: bool = False
    # tile with rstd "prepass" (the pick beyond M = 256 where TMA fits): persistent.py's kernel, one
    # program an SM walking its tiles, x and W_g through host-made descriptors (so with tma and host_desc);
    # flatten: its two loops pipelined as one (the next tile's loads under this one's epilogue); subtile: y stored
    # through a descriptor in two halves of block_n/2 columns.
    persistent: bool = False
    flatten: bool = False
    subtile: bool = False
    # persistent: programs an SM (min(occupancy × SMs, tiles) programs), for tiles small enough that two fit.
    occupancy: int = 1
    # tile with rstd "prepass": the matmul launched with programmatic dependent launch (Hopper's griddepcontrol),
    # so that its programs start while the pre-pass still runs and wait for its rstd only before their epilogue.
    # Triton's interpreter has no grid dependency control: there the kernels run without it.
    pdl: bool = False


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# The rstd pre-pass: one row of x a program, 8 warps, up to 4,096 columns a step (16 values a thread in flight).
# Measured on an H200 (bf16, the pre-pass alone, graph replays over rotated x; docs/kernels-tuning.md, run 34a),
# µs, this / 4 rows a program in 1,024-column steps, 4 warps (the setting before) / one row in 4 warps, 4,096
# columns / one row, 8 warps, 8,192 columns: 128×4096 2.21 / 5.49 / 3.33 / 2.59; 512×4096 3.02 / 5.76 / 3.77 /
# 3.25; 512×8192 4.02 / 9.36 / 5.64 / 3.98; 2048×4096 6.25 / 7.25 / 7.18 / 8.50; 8192×4096 18.35 / 18.94 / 21.21 /
# 27.84 (one row in 4 warps, 2,048 columns: 17.35 there, 2.58 at 128×4096).
_RSTD_ROWS = 1
_RSTD_MAX_BLOCK_K = 4096
_RSTD_WARPS = 8


def rstd_settings(m: int, k: int) -> dict:
    """The pre-pass kernel's launch settings for x of m × k: its ROWS, BLOCK_K and num_warps."""
    return {"BLOCK_K": min(_next_pow2(k), _RSTD_MAX_BLOCK_K), "ROWS": _RSTD_ROWS, "num_warps": _RSTD_WARPS}

# Decode (gemv) up to this many rows of x; beyond, the tile kernel. Measured on an H200 at M = 128 (4096×14336):
# gemv with 128 rows of x a program 117-157 µs, the tile kernel 42.9. M = 64 was not timed on either side.
_GEMV_MAX_M = 64
# gemv: 64 rows of W a program, the M side of one warpgroup's wgmma. Measured on an H200 at 1×4096×14336: 64 rows
# 34.8 µs; 32 and 16 rows (mma.sync, not wgmma) 72 and 116 µs.
_GEMV_BLOCK_N = 64
# gemv K step 128 (256 bytes of each W row a load), 4 warps, 4 stages: 80 KB of shared memory, two programs an SM.
# Measured on an H200: 14.3 µs at 1×4096×4096 (K step 256: 18.9; 6 stages, one program an SM: 18.7), 43.1 at
# 1×4096×14336 (47.8, 47.8).
_GEMV_BLOCK_K = 128
_GEMV_WARPS = 4
_GEMV_STAGES = 4
# Programs wanted on the grid: two per SM (264 on the H200's 132); fewer tiles than this split K. Measured on an
# H200: at 1×4096×4096 (64 tiles) split 4 14.3 µs, 2 17.9, 8 17.5, none 23.5; at 8×8192×8192 (128 tiles) split 2 44.9,
# none 52.3, 4 46.0; at 1×4096×14336 (224 tiles) none 43.1, 2 47.8, 4 47.3.
_PROGRAMS_PER_SM = 2
# A split's K range holds at least this many K steps, so that the pipeline fills.
_MIN_STEPS_PER_SPLIT = 4
# Prefill tiles. Measured on an H200 (bf16, K×N 4096×14336 and 8192×8192): up to M = 256, 64×128 tiles in 4 warps,
# K split when there are fewer tiles than SMs (M = 128: 42.9 µs at 4096×14336 against 43.1 for 128×128
# and 58.4 for 128×256; 54.3 at 8192×8192 against 60.8 unsplit); beyond, matmul.py's 128×256×64 in 8 warps,
# 3 stages (M = 2048: 370.6 µs against 391-400 for 4 stages, groups of 16, 256×128; M = 8192: within 1% of them).
_SMALL_TILE_MAX_M = 256
_TILE_BIG = RMSNormLinearConfig("tile", 128, 256, 64, num_warps=8, num_stages=3)
_TILE_MID = RMSNormLinearConfig("tile", 128, 128, 64, num_warps=8, num_stages=4)
_TILE_SMALL = RMSNormLinearConfig("tile", 64, 128, 64, num_warps=4, num_stages=4)
# A candidate at M ≤ 256: twice the tiles of 128×128 along N, for the SMs that 112 tiles of 128×128 leave idle
# at 128×4096×14336. Measured on an H200: 44.4 µs against 43.9 for the pick and 42.7 for persistent 128×128
# tiles.
_TILE_NARROW = RMSNormLinearConfig("tile", 128, 64, 64, num_warps=4, num_stages=4)
# Beyond _SMALL_TILE_MAX_M, where TMA fits: the big tile in the persistent kernel, loops flattened, y stored
# in halves, 3 stages. Measured on an H200 (bf16, graph replay, checked first; docs/kernels-tuning.md), µs,
# this / the best persistent variant / the non-persistent pointer kernel (the pick before) / cuBLAS alone:
# 2048×4096×14336 364.3 / 364.3 / 422.2 / 366.1; 8192×4096×4096 436.4 / 435.9 / 512.5 / 406.1; 16384×4096×4096
# 857.9 / 840.7 / 990.7 / 844.0; 8192×4096×14336 1461.8 / 1456.1 / 1690.8 / 1404.3; 2048×8192×8192 414.6 /
# 414.1 / 471.2 / 399.5; 8192×8192×8192 1682.8 / 1667.7 / 1891.1 / 1620.9.
# 4 stages since run 34a (3 before): µs, 4 / 3 stages, there and in run 16d: 512×8192×8192 103.6 / 104.9 and 98.5 /
# 104.8; 512×4096×14336 93.4 / 100.4; 2048×4096×14336 358.5 / 360.4 and 346.7 / 350.8; 8192×4096×4096 426.7 /
# 424.9 and 416.3 / 424.2.
_TILE_BIG_PERSISTENT = replace(_TILE_BIG, num_stages=4, persistent=True, tma=True, host_desc=True, flatten=True,
                               subtile=True)
# Where the big tiles would leave more than half the SMs idle, 128×128 tiles, 4 stages. Measured on an H200,
# µs, 128×128 / 128×256: 512×4096×4096 (64 big tiles) 33.5 / 48.1; 512×8192×8192 (128) 115.5 / 108.0;
# 512×4096×14336 (224) 113.7 / 102.6.
_TILE_MID_PERSISTENT = replace(_TILE_BIG_PERSISTENT, block_n=128, num_stages=4)

# Up to M = 128 where 128×128 tiles give at least 3/4 of the SMs one (N ≥ 12,672 on 132 SMs), the persistent kernel's
# 128×128 tiles, the matmul launched with programmatic dependent launch (pdl). Measured on an H200 (run 34a), µs, at
# 128×4096×14336: this 39.1; without pdl 40.3; the tile kernel's 64×128 tiles (the pick before) 42.6, with pdl 43.4;
# 128×64 tiles 43.2, with pdl 40.4; persistent 64×128 tiles two an SM 39.4, with pdl 43.4; torch.compile 36.8,
# cuBLAS alone 35.2. At 128×4096×4096 (32 such tiles) and 128×8192×8192 (64) the tile kernel stays faster (22.7
# against 26.8; 50.4 against 55.7 with pdl). pdl measured slower for the 128×256 persistent tiles (by 5-36 µs from
# M = 512) and for 128×128 ones at 512×8192×8192 (115.9 against 112.5), within 0.4 µs at 512×4096×4096 (run 34a),
# so only here.
_PERSISTENT_PDL_MAX_M = 128
_PERSISTENT_MIN_SM_SHARE = 0.75
_TILE_SMALL_M_PERSISTENT = replace(_TILE_MID_PERSISTENT, pdl=True)


def _smem_estimate(cfg: RMSNormLinearConfig, dtype: str) -> int:
    """The software pipeline's shared memory: stages × (x tile + W tile)."""
    size = 4 if dtype == "fp32" else 2
    return cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * size


def _split_for(tiles: int, k: int, block_k: int, per_sm: int = _PROGRAMS_PER_SM) -> int:
    """Split K so that tiles × split comes nearest ``per_sm`` programs on every SM without passing it (a second,
    partial wave costs a whole one), keeping _MIN_STEPS_PER_SPLIT steps a split. Measured on an H200, the gemv
    at 1×4096×6144 (96 tiles): split 2 16.7 µs, 3 21.5; at 1×8192×10240 (160 tiles): split 1 44.0, 2 52.5
    (rounding to the nearest had picked 3 and 2)."""
    most = max(1, k // (block_k * _MIN_STEPS_PER_SPLIT))
    return max(1, min(most, per_sm * sm_count() // tiles))


# The gemv's sum of squares from the x tile that feeds the dot ("dot"), x and W_g through host-made tensor
# descriptors where TMA fits (_tma_fits; else through pointers). Measured on an H200 (bf16, graph replay over
# rotated inputs, each checked first; benchmarks/rmsnorm_linear_gpu.py, docs/kernels-tuning.md), µs, dot +
# host descriptors / dot through pointers / dot + descriptors made by each program / the pick before (the
# separate loop below M = 8, "inloop" from 8):
#   1×4096×4096 12.6 / 13.3 / 14.8 / 14.4;  1×4096×14336 30.4 / 36.7 / 33.2 / 42.7;  1×8192×8192 36.3 / 39.0 /
#   38.4 / 45.8;  1×5120×13824 36.4 / 43.4 / 39.1 / 50.7;  8×4096×14336 30.8 / 30.7 / 33.1 / 31.2;
#   32×4096×14336 31.8 / 32.4 / 34.0 / 33.0;  64×4096×4096 20.9 / 22.7 / 24.1 / 23.2.
_GEMV_SS = "dot"
# From this many rows of x (block_m): 128 rows of W a program in 8 warps (two wgmmas of 64 rows), so that x is
# read half as often for the W it meets, 3 stages (144 KiB of shared memory: one program an SM, so K is split
# for one). The 64-row tile (4 warps) had 4 stages, 128 KiB, also one an SM. Measured on an H200 (bf16, graph
# replay, checked first; docs/kernels-tuning.md), µs, this / 64 rows, 3 stages / 64 rows, 4 stages / cuBLAS
# alone: 64×4096×4096 17.0 / 15.7 / 20.8 / 11.7; 64×4096×6144 22.8 / 24.0 / 31.7 / 16.0; 64×4096×14336 36.6 /
# 39.9 / 50.8 / 33.1; 64×4096×28672 71.5 / 82.6 / 100.6 / 63.2; 64×5120×13824 44.4 / 52.2 / 63.4 / 37.2;
# 64×8192×8192 42.6 / 46.7 / 57.6 / 37.1; 64×8192×10240 59.9 / 76.5 / 98.3 / 42.4 (split 3, for two an SM:
# 56.6); 64×8192×57344 282.7 / 332.5 / 357.7 / 234.8.
_GEMV_WIDE_X_M = 64
_GEMV_WIDE_X_BLOCK_N = 2 * _GEMV_BLOCK_N
_GEMV_WIDE_X_WARPS = 8
# 4 stages since run 34a (192 KiB, one program an SM; 3 before): µs, 4 / 3 stages, 64×4096×4096 16.0 / 17.3 (split 4);
# 64×4096×14336 34.3 / 37.1 (unsplit).
_GEMV_WIDE_X_STAGES = 4


def _gemv_config(m: int, k: int, n: int, dtype: str, gpu: GPU | None = None, **kw) -> RMSNormLinearConfig:
    block_m = max(16, _next_pow2(m))
    block_k = _GEMV_BLOCK_K if dtype != "fp32" else _GEMV_BLOCK_K // 2
    tma = _tma_fits(k, dtype, gpu)  # with descriptors made on the host: _GEMV_SS's measurements
    base = RMSNormLinearConfig(
        "gemv", block_m, _GEMV_BLOCK_N, block_k, num_warps=_GEMV_WARPS, num_stages=_GEMV_STAGES, ss=_GEMV_SS,
        tma=tma, host_desc=tma,
    )
    if block_m >= _GEMV_WIDE_X_M:
        base = replace(base, block_n=_GEMV_WIDE_X_BLOCK_N, num_warps=_GEMV_WIDE_X_WARPS,
                       num_stages=_GEMV_WIDE_X_STAGES)
    cfg = replace(base, **kw)
    tiles = _cdiv(n, cfg.block_n) * _cdiv(m, cfg.block_m)
    if "num_stages" not in kw and tiles > _fitting(cfg, dtype, gpu) * sm_count() and \
            tiles <= _fitting(replace(cfg, num_stages=_GEMV_WAVE_STAGES), dtype, gpu) * sm_count():
        cfg = replace(cfg, num_stages=_GEMV_WAVE_STAGES)
    if "split_k" not in kw:
        per_sm = _PROGRAMS_PER_SM if _smem_estimate(cfg, dtype) * 2 <= smem_per_block_bytes(gpu) else 1
        cfg = replace(cfg, split_k=_split_for(tiles, k, cfg.block_k, per_sm))
    return cfg


# Where the tiles of W would start a partial second wave at _GEMV_STAGES but all fit the SMs at once with fewer
# stages (more programs an SM), this many. Measured on an H200 (run 34a) at 16×3584×18944 (296 tiles of 64 rows:
# two programs an SM at 4 stages, 264 at once; three at 3 stages): 3 stages 34.6 µs, 4 stages 44.2, 2 stages 41.0;
# 128 rows of W in 8 warps, 3 stages 35.8; torch.compile 39.9, cuBLAS alone 37.8.
_GEMV_WAVE_STAGES = 3


def _fitting(cfg: RMSNormLinearConfig, dtype: str, gpu: GPU | None) -> int:
    """Programs of ``cfg`` whose shared memory fits an SM at once (by ``_smem_estimate``)."""
    return max(1, smem_per_block_bytes(gpu) // _smem_estimate(cfg, dtype))


def _tile_config(m: int, k: int, n: int, base: RMSNormLinearConfig, **kw) -> RMSNormLinearConfig:
    cfg = replace(base, **kw)
    if "split_k" not in kw:
        tiles = _cdiv(m, cfg.block_m) * _cdiv(n, cfg.block_n)
        cfg = replace(cfg, split_k=_split_for(tiles, k, cfg.block_k) if tiles < sm_count() else 1)
    return cfg


def config_for(shape: tuple[int, ...], dtype: str, gpu: GPU | None = None) -> RMSNormLinearConfig:
    """The configuration ``RMSNormLinear.run`` launches for this shape and data type (on ``gpu``; default: the
    GPU the table was tuned on)."""
    m, k, n = shape
    if m <= _GEMV_MAX_M:
        return _gemv_config(m, k, n, dtype, gpu)
    if dtype == "fp32":
        return _tile_config(m, k, n, replace(_TILE_MID, block_k=32, num_stages=3))
    if m <= _PERSISTENT_PDL_MAX_M and _tma_fits(k, dtype, gpu) and \
            _cdiv(n, _TILE_MID.block_n) >= _PERSISTENT_MIN_SM_SHARE * sm_count():
        return _TILE_SMALL_M_PERSISTENT
    if m <= _SMALL_TILE_MAX_M:
        return _tile_config(m, k, n, _TILE_SMALL)
    if _tma_fits(k, dtype, gpu):
        if _cdiv(m, _TILE_BIG.block_m) * _cdiv(n, _TILE_BIG.block_n) * 2 < sm_count():
            return _TILE_MID_PERSISTENT
        return _TILE_BIG_PERSISTENT
    return _tile_config(m, k, n, _TILE_BIG, split_k=1)

# Tensor descriptors (TMA: the gemv, the persistent kernel, the tile kernel without the pre-pass) from compute
# capability 9.0 (Hopper) on. Triton's warp specialization of its K loop (tl.range(..., warp_specialize=True))
# changes nothing on sm_90: compiled for sm_90 with triton 3.6 and 3.9 on this project's CPU machine (2026-12-03;
# bf16, 128×256×64 tiles, 8 warps, 3 stages), the PTX with and without it was the same byte for byte; so it is
# offered from compute capability 10.0 (Blackwell) on. Without a spec, the current device's compute capability
# (base.compute_capability: the tuned H200's 9.0 without a device).
_TMA_MIN_CC = 9.0
_WARP_SPEC_MIN_CC = 10.0
# TMA reads rows whose stride is a multiple of 16 bytes.
_TMA_ALIGN_BYTES = 16


def _compute_capability(gpu: GPU | None) -> float:
    """The spec's compute capability; without one, the current device's (the tuned GPU's without a device)."""
    if gpu is None:
        return compute_capability()
    return float(gpu.compute_capability) if gpu.compute_capability else 0.0


def _tma_fits(k: int, dtype: str, gpu: GPU | None) -> bool:
    """Whether the GPU has TMA and K's rows (contiguous x and W) are a multiple of its 16 bytes."""
    size = 4 if dtype == "fp32" else 2
    return _compute_capability(gpu) >= _TMA_MIN_CC and (k * size) % _TMA_ALIGN_BYTES == 0


def candidates(shape: tuple[int, ...], dtype: str, gpu: GPU | None = None) -> list[RMSNormLinearConfig]:
    """The chosen config and its nearest rivals whose shared memory fits one program on ``gpu`` (default: the GPU
    the configs were tuned on); the wider sweeps, and the rivals dropped once measured slower, are in
    docs/kernels-tuning.md (the gemv's "loop"/"inloop" sums of squares through pointers and its
    descriptors made by each program; the tile kernel without the pre-pass at M > 256, and the non-persistent
    tile kernel's 4 stages and groups of 16)."""
    m, k, n = shape
    chosen = config_for(shape, dtype, gpu)
    out = [chosen]
    if chosen.kind == "gemv":
        for split_k in (1, 2, 3, 4):
            out.append(replace(chosen, split_k=split_k))
        out.append(replace(chosen, tma=False, host_desc=False))  # the path where TMA does not fit
        if chosen.block_m >= _GEMV_WIDE_X_M:
            # 64 rows of x: K split for two programs an SM; 64 rows of W in 4 warps, 3 stages (two an SM).
            narrow = _gemv_config(m, k, n, dtype, gpu, block_n=_GEMV_BLOCK_N, num_warps=_GEMV_WARPS, num_stages=3)
            out += [replace(chosen, split_k=_split_for(_cdiv(n, chosen.block_n), k, chosen.block_k)), narrow]
    elif m <= _SMALL_TILE_MAX_M:
        small = _tile_config(m, k, n, _TILE_SMALL)  # the pick where the persistent one (with pdl) is not
        out += [
            small,
            replace(small, split_k=1),
            replace(small, split_k=2),
            _tile_config(m, k, n, _TILE_MID, split_k=1),
            _tile_config(m, k, n, _TILE_NARROW),
        ]
        if _tma_fits(k, dtype, gpu):
            # Without the pre-pass, through host-made descriptors (21.2 µs against 25.4 at 128×4096×4096);
            # persistent 128×128 tiles, without and with pdl.
            no_prepass = replace(small, rstd="tile", tma=True, host_desc=True)
            out += [no_prepass, _TILE_MID_PERSISTENT, _TILE_SMALL_M_PERSISTENT]
            if _compute_capability(gpu) >= _WARP_SPEC_MIN_CC:
                out.append(replace(no_prepass, warp_spec=True))
    else:
        out += [replace(chosen, num_stages=3 if chosen.num_stages == 4 else 4), replace(chosen, subtile=False)]
        if chosen.persistent:
            # Through pointers (where TMA does not fit), and persistent 128×128 tiles (more tiles where M·N is
            # small: 512×4096×4096 is 64 tiles of 128×256 on 132 SMs).
            out += [_tile_config(m, k, n, _TILE_BIG, split_k=1), _TILE_MID_PERSISTENT, _TILE_BIG_PERSISTENT]
    return [c for c in dict.fromkeys(out) if _smem_estimate(c, dtype) <= smem_per_block_bytes(gpu)]
