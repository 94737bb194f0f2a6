"""rmsnorm_linear's persistent prefill kernel: one program an SM, each walking its tiles in turn.

The tile kernel of ``tile.py`` launches one program a BLOCK_M×BLOCK_N tile of y: each loads its tiles'
first K steps only once it starts, and stores its epilogue while no load of the next tile is in flight. Here
``min(occupancy × SMs, tiles)`` programs (the config's ``occupancy``: 1, or more where they fit an SM's shared
memory) each take tiles start, start + programs, ... in the same grouped order, x and W_g tiles come through
host-made tensor descriptors (Hopper's TMA), and with ``FLATTEN`` triton's pipeliner treats the two loops as one,
so that the first K steps of a program's next tile are loaded while it stores the last (triton's
``tl.range(..., flatten=True)``). rstd still comes from the pre-pass kernel (M floats, read in the epilogue; with
``PDL`` the kernel is launched while the pre-pass may still run, and waits for it before that read); the epilogue
stores through a descriptor of y too where y's rows allow it (``Y_TMA``), in two halves of BLOCK_N/2 columns where
``SUBTILE`` (half the store's shared buffer: compiled for sm_90 by triton 3.9 at 128×256×64, 8 warps, 3 stages,
flattened, 180 KB of shared memory against 213 storing y whole).

``configs.config_for`` picks it beyond M = 256 where TMA fits: on the H200 it took prefill from M = 2,048 from
1.16-1.29× of cuBLAS's F.linear alone (the pointer kernel) to 1.00-1.06× (docs/kernels-tuning.md).
"""

from __future__ import annotations

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..base import sm_count


@triton.jit
def _grouped(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # The tile's (row, column) of tiles in GROUP_M-row groups, as the other tile kernels order them.
    return tl.swizzle2d(tile // num_pid_n, tile % num_pid_n, num_pid_m, num_pid_n, GROUP_M)


@triton.jit
def _tile_persistent_kernel(
    x_td, w_td, y_td, rstd_ptr, b_ptr, y_ptr, M, N, K, sym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    HAS_BIAS: tl.constexpr, PROGRAMS: tl.constexpr, FLATTEN: tl.constexpr, Y_TMA: tl.constexpr,
    SUBTILE: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    # Per tile: reads a BLOCK_M×K strip of x and a BLOCK_N×K strip of W_g (rows and columns past the edges read as
    # zeros), writes one BLOCK_M×BLOCK_N tile of y = rstd[m]·(x·W_gᵀ)[m, n] (+ bias[n]).
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    # The epilogue counts its own tiles: with FLATTEN its tile indices are not the loop's (which the flattened
    # loop has already moved on), as in triton's persistent matmul tutorial.
    tile_out = start - PROGRAMS
    for tile in tl.range(start, num_pid_m * num_pid_n, PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = _grouped(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ks in range(k_steps):
            x = x_td.load([pid_m * BLOCK_M, ks * BLOCK_K])
            w = w_td.load([pid_n * BLOCK_N, ks * BLOCK_K])
            acc = tl.dot(x, w.T, acc, input_precision="tf32")
        tile_out += PROGRAMS
        pid_m, pid_n = _grouped(tile_out, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        if PDL:  # launched while the pre-pass may still run: its rstd once it has finished (at once after)
            tl.extra.cuda.gdc_wait()
        rstd = tl.load(rstd_ptr + offs_m, mask=offs_m < M, other=0.0)
        acc = acc * rstd[:, None]
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        if HAS_BIAS:
            bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
            acc = acc + bias.to(tl.float32)[None, :]
        out = acc.to(y_ptr.dtype.element_ty)
        if Y_TMA:  # the descriptor drops what lies past M and N
            if SUBTILE:
                halves = tl.permute(tl.reshape(out, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
                left, right = tl.split(halves)
                y_td.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left)
                y_td.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right)
            else:
                y_td.store([pid_m * BLOCK_M, pid_n * BLOCK_N], out)
        else:
            y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * sym + offs_n[None, :]
            tl.store(y_ptrs, out, mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])


def launch_persistent(cfg, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor, bias_arg: torch.Tensor | None,
                      out: torch.Tensor, has_bias: bool, y_tma: bool, meta: dict):  # fmt: skip
    """Launch ``_tile_persistent_kernel`` for ``cfg`` (a tile config with ``persistent``); returns (grid, handle)
    for the caller's record. ``y_tma``: y's base and rows fit a tensor descriptor."""
    from triton.tools.tensor_descriptor import TensorDescriptor  # type: ignore[import-untyped]

    m, k = x.shape
    n = w.shape[0]
    tiles = triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n)
    programs = max(1, min(cfg.occupancy * sm_count(), tiles))
    subtile = cfg.subtile and y_tma
    y_block = [cfg.block_m, cfg.block_n // 2 if subtile else cfg.block_n]
    y_td = TensorDescriptor.from_tensor(out, y_block) if y_tma else None
    grid = (programs,)
    handle = _tile_persistent_kernel[grid](
        TensorDescriptor.from_tensor(x, [cfg.block_m, cfg.block_k]),
        TensorDescriptor.from_tensor(w, [cfg.block_n, cfg.block_k]), y_td, rstd, bias_arg, out, m, n, k,
        out.stride(0), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        HAS_BIAS=has_bias, PROGRAMS=programs, FLATTEN=cfg.flatten, Y_TMA=y_tma, SUBTILE=subtile, PDL=cfg.pdl, **meta,
    )  # fmt: skip
    return grid, handle
