"""fused_softmax: y = softmax(x) along each row of a ROWS×COLS tensor, computed in fp32 for fp32/fp16/bf16 inputs.

Reads rows·cols elements and writes rows·cols elements (op.softmax_op), and does it in one pass over HBM while
a row fits on chip:

- ``rows`` mode (row length up to ``_ONLINE_ABOVE``): each program loads ROWS whole rows into registers, takes the
  max, the exponentials, their sum and the quotient, and writes the rows back: one read, one write.
- ``online`` mode (longer rows): one program per row walks the row in chunks twice. The first pass keeps the
  running max m and the running sum s of exp(x − m) (Milakov & Gimelshein, "Online normalizer calculation for
  softmax", 2018: when a chunk raises the max, s is rescaled by exp(m_old − m_new)); the second pass writes
  exp(x − m)/s. That is two reads and one write of HBM in the worst case. The second pass walks the chunks in
  reverse, so that it starts with the ones the first pass loaded last, which are still in the L2 cache; the first
  pass asks the L2 to keep its lines (evict_last), the second marks what it reads and writes as done
  (evict_first). Part of the second read then comes from the L2 rather than from HBM: most of it while the rows
  in flight fit in the L2 (rows up to about 64K elements), little of it for rows of 256K.

Rows may be non-contiguous (any row stride, e.g. a column slice of a wider tensor) and columns may be strided.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from ..op import Op, softmax_op
from .base import Inputs, Kernel, torch_dtype

# Rows up to this many elements are held whole in registers (one read, one write); longer rows take the online
# path. Measured on an H200, 4,096 rows: at 32,768 columns the online path was 7-10% faster in bf16 (160-164
# against 175-178 µs) and within 1% in fp32 (262 against 265 µs); at 16,384 the rows path was 12% faster in bf16
# (72.7 against 82.0 µs) and within 1% in fp32 (131.1 against 130.4).
_ONLINE_ABOVE = 16384


@dataclass(frozen=True)
class SoftmaxConfig:
    mode: str  # "rows": ROWS whole rows per program; "online": one row per program, two passes over chunks
    block: int  # rows: the row length rounded up to a power of two; online: the chunk length
    rows_per_program: int = 1
    num_warps: int = 4
    num_stages: int = 1
    # L2 eviction hints. rows mode: evict_first on the load. online mode: evict_last on the first pass's loads,
    # evict_first on the second pass's loads and stores.
    hints: bool = False
    reverse: bool = True  # online: walk the chunks backwards in the second pass (L2 reuse)


@triton.jit
def _softmax_rows_kernel(
    x_ptr, y_ptr, n_rows, n_cols, sxr, sxc, syr, syc,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, HINTS: tl.constexpr,
):  # fmt: skip
    # Reads ROWS rows of n_cols elements, writes ROWS rows: one HBM read and one write per element.
    pid = tl.program_id(0)
    rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    x_ptrs = x_ptr + rows[:, None] * sxr + cols[None, :] * sxc
    if HINTS:
        x = tl.load(x_ptrs, mask=mask, other=-float("inf"), eviction_policy="evict_first")
    else:
        x = tl.load(x_ptrs, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    s = tl.sum(e, axis=1)
    y = e * (1.0 / s)[:, None]
    y_ptrs = y_ptr + rows[:, None] * syr + cols[None, :] * syc
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_online_kernel(
    x_ptr, y_ptr, n_cols, sxr, sxc, syr, syc,
    BLOCK: tl.constexpr, REVERSE: tl.constexpr, HINTS: tl.constexpr,
):  # fmt: skip
    # Pass 1 reads the row once for its max and normalizer; pass 2 reads it again (partly from the L2) and writes.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * sxr
    y_row = y_ptr + row * syr
    offs = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(n_cols, BLOCK)
    # Running max and sum, one element wide so that they stay tensors through the loop.
    m_run = tl.full([1], -float("inf"), tl.float32)
    s_run = tl.zeros([1], tl.float32)
    for c in range(0, n_chunks):
        cols = c * BLOCK + offs
        if HINTS:
            x = tl.load(
                x_row + cols * sxc, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last"
            )
        else:
            x = tl.load(x_row + cols * sxc, mask=cols < n_cols, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m_run, tl.max(x, axis=0))
        # A chunk of -inf only (the masked tail, or masked-out scores) leaves m at -inf: exponents then use 0,
        # so that exp(-inf - -inf) never makes a NaN.
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
        m_run = m_new
    inv = 1.0 / s_run
    for i in range(0, n_chunks):
        if REVERSE:
            c = n_chunks - 1 - i
        else:
            c = i
        cols = c * BLOCK + offs
        mask = cols < n_cols
        if HINTS:
            x = tl.load(x_row + cols * sxc, mask=mask, other=-float("inf"), eviction_policy="evict_first")
        else:
            x = tl.load(x_row + cols * sxc, mask=mask, other=-float("inf"))
        y = (tl.exp(x.to(tl.float32) - m_run) * inv).to(y_ptr.dtype.element_ty)
        if HINTS:
            tl.store(y_row + cols * syc, y, mask=mask, eviction_policy="evict_first")
        else:
            tl.store(y_row + cols * syc, y, mask=mask)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# "rows" mode: ROWS × BLOCK elements a program, 16 of them a thread. Measured on an H200 (bf16 and fp32, 4,096
# rows, 1,024 to 16,384 columns): 2,048 elements a program (two rows of 1,024 in 4 warps, one of 16,384 in 32)
# were the fastest or within 2% of it at every row length; 4 rows of 1,024 were 8% slower, 8 rows 12%.
_ROWS_TARGET_ELEMENTS = 2048
_ELEMENTS_PER_THREAD = 16
# Rows longer than this spill registers when held whole (ptxas for sm_90: 65,536 bf16 in 32 warps).
_ROWS_MAX = 32768


def _rows_config(
    cols: int,
    num_warps: int | None = None,
    rows_per_program: int | None = None,
    n_rows: int | None = None,
    **kw,
) -> SoftmaxConfig:
    block = max(16, _next_pow2(cols))
    rows = rows_per_program or max(1, _ROWS_TARGET_ELEMENTS // block)
    if n_rows is not None:
        rows = min(rows, _next_pow2(n_rows))  # no more rows a program than the tensor has
    warps = num_warps or min(32, max(4, rows * block // (32 * _ELEMENTS_PER_THREAD)))
    return SoftmaxConfig("rows", block, rows_per_program=rows, num_warps=warps, **kw)


# "online" mode: chunks of 16,384 elements in 16 warps for 16-bit data, 32,768 in 32 warps for fp32. Measured on
# an H200, 4,096 rows: bf16 65,536 columns 322 µs (8,192/16 warps 344, 32,768/32 367), 262,144 columns 1,593 µs
# (1,672, 1,623); fp32 65,536 columns 538 µs (16,384/16 warps 634, 8,192/16 685), 262,144 columns 3,135 µs
# (3,261, 3,338).
_ONLINE_16BIT = (16384, 16)
_ONLINE_FP32 = (32768, 32)


def _online_config(block: int | None = None, num_warps: int | None = None, dtype: str = "bf16", **kw):
    default_block, default_warps = _ONLINE_FP32 if dtype == "fp32" else _ONLINE_16BIT
    kw.setdefault("hints", True)
    return SoftmaxConfig("online", block or default_block, num_warps=num_warps or default_warps, **kw)


class FusedSoftmax(Kernel):
    name = "fused_softmax"
    summary = "row softmax in fp32: one HBM read and write while a row fits on chip, online normalizer beyond"
    shape_format = "ROWSxCOLS"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    # Issue 4's targets: rows of 1,024 to 16,384 and 65,536 to 262,144 elements, 4,096 rows.
    default_shapes = [(4096, 1024), (4096, 4096), (4096, 16384), (4096, 65536), (4096, 262144)]
    interpret_shapes = [(1, 1), (3, 7), (5, 781), (2, 3000)]

    def op(self, shape, dtype) -> Op:
        rows, cols = shape
        return softmax_op(f"softmax {rows}x{cols}", rows, cols, dtype)

    def make_inputs(self, shape, dtype, device, generator) -> Inputs:
        rows, cols = shape
        # Standard normal scores times 4: a spread of logits like attention scores, never all equal.
        x = torch.randn((rows, cols), generator=generator, device=device, dtype=torch.float32) * 4.0
        return {"x": x.to(torch_dtype(dtype))}

    def make_output(self, inputs: Inputs) -> torch.Tensor:
        x = inputs["x"]
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def config_for(self, shape, dtype) -> SoftmaxConfig:
        rows, cols = shape
        return _rows_config(cols, n_rows=rows) if cols <= _ONLINE_ABOVE else _online_config(dtype=dtype)

    def candidates(self, shape, dtype) -> list[SoftmaxConfig]:
        """The chosen config and its nearest rivals (the wider sweeps are in docs/kernels-tuning.md)."""
        rows, cols = shape
        chosen = self.config_for(shape, dtype)
        out = [chosen]
        if chosen.mode == "rows":
            out.append(replace(chosen, num_warps=max(2, chosen.num_warps // 2)))
            out.append(replace(chosen, num_warps=min(32, chosen.num_warps * 2)))
        else:
            out.append(_online_config(8192, 16, dtype=dtype))
            out.append(_online_config(*(_ONLINE_16BIT if dtype == "fp32" else _ONLINE_FP32), dtype=dtype))
        return list(dict.fromkeys(out))

    def run(self, inputs: Inputs, out: torch.Tensor, config: SoftmaxConfig | None = None) -> None:
        x = inputs["x"]
        rows, cols = x.shape
        cfg = config or self.config_for((rows, cols), None)
        self._start_run()
        meta = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        strides = (x.stride(0), x.stride(1), out.stride(0), out.stride(1))
        if cfg.mode == "rows":
            if cfg.block < cols:
                raise ValueError(f"rows mode needs block >= cols, got {cfg.block} < {cols}")
            grid = (triton.cdiv(rows, cfg.rows_per_program),)
            handle = _softmax_rows_kernel[grid](
                x, out, rows, cols, *strides, BLOCK=cfg.block, ROWS=cfg.rows_per_program, HINTS=cfg.hints, **meta
            )  # fmt: skip
            self._record(_softmax_rows_kernel, grid, cfg, handle)
        elif cfg.mode == "online":
            grid = (rows,)
            handle = _softmax_online_kernel[grid](
                x, out, cols, *strides, BLOCK=cfg.block, REVERSE=cfg.reverse, HINTS=cfg.hints, **meta
            )  # fmt: skip
            self._record(_softmax_online_kernel, grid, cfg, handle)
        else:
            raise ValueError(f"unknown softmax mode {cfg.mode!r}")

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return torch.softmax(inputs["x"].to(torch.float64), dim=-1)

    def eager(self, inputs: Inputs) -> torch.Tensor:
        return torch.softmax(inputs["x"], dim=-1)

    def tolerance(self, dtype: str) -> float:
        # fp32: exp and division in fp32 land near 1e-6; 16-bit outputs are rounded to 8 (bf16) or 11 (fp16)
        # mantissa bits, about 2e-3 and 3e-4 relative.
        return {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}[dtype]


KERNEL = FusedSoftmax()
