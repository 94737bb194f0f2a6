"""fused_softmax: y = softmax(x) along each row of a ROWS×COLS tensor, computed in fp32 for fp32/fp16/bf16 inputs.

Reads rows·cols elements and writes rows·cols elements (primitives.softmax_op), in one of three ways by row length:

- ``rows`` mode (rows up to ``_ONLINE_ABOVE`` elements): each program loads whole rows into registers, takes the
  max, the exponentials, their sum and the quotient, and writes the rows back: one HBM read, one write.
- ``online`` mode (rows up to ``_SPLIT_ABOVE``): one program per row walks the row in chunks twice. The first
  pass keeps the running max m and the running sum s of exp(x − m) (Milakov & Gimelshein, "Online normalizer
  calculation for softmax", 2018: when a chunk raises the max, s is rescaled by exp(m_old − m_new)); the second
  pass writes exp(x − m)/s. The second pass walks the chunks in reverse, so that it starts with the ones the
  first pass loaded last, which are still in the L2 cache; the first pass asks the L2 to keep its lines
  (evict_last), the second marks what it reads and writes as done (evict_first). While the rows in flight fit in
  the L2 (rows up to about 64K elements) most of the second read comes from there.
- ``split`` mode (longer rows): a row's parts go to consecutive programs, which exchange their max and sum
  through a small workspace in global memory (see _softmax_split_kernel). A part is small enough either to stay
  in registers (one read, one write) or, read twice, to still be in the L2 for its second read, which a whole row
  of 256K elements is not (online mode reached 65% of copy bandwidth there, split mode 75-83%).

On Hopper and later GPUs the rows and online kernels are launched as programmatic dependents (PDL): a kernel
starts while the previous one in the stream drains and waits for its writes before it reads, which hides most of
the launch gap that a microsecond kernel would otherwise pay.

Rows may be non-contiguous (any row stride, e.g. a column slice of a wider tensor) and columns may be strided.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..engine.count.op import Op
from ..engine.count.primitives import softmax_op
from .base import Inputs, Kernel, dtype_name, interpreting, sm_count, torch_dtype

# Rows up to this many elements are held whole in registers (one read, one write); longer rows take the online
# path. Measured on an H200, 4,096 rows: at 32,768 columns the online path was 7-10% faster in bf16 (160-164
# against 175-178 µs) and within 1% in fp32 (262 against 265 µs); at 16,384 the rows path was 12% faster in bf16
# (72.7 against 82.0 µs) and within 1% in fp32 (131.1 against 130.4).
_ONLINE_ABOVE = 16384


@dataclass(frozen=True)
class SoftmaxConfig:
    # "rows": ROWS whole rows per program; "online": one row per program, two passes over chunks; "split": a row
    # shared by consecutive programs, one part of CHUNKS × BLOCK columns each
    mode: str
    block: int  # rows: the row length rounded up to a power of two; online and split: the chunk length
    rows_per_program: int = 1
    num_warps: int = 4
    num_stages: int = 1  # software pipelining of the loads across loop iterations (triton's launch option)
    # L2 eviction hints. rows mode and split mode with one chunk: evict_first on the load. online mode and split
    # mode with several chunks: evict_last on the first pass's loads, evict_first on the second pass's loads (and
    # in online mode its stores).
    hints: bool = False
    reverse: bool = True  # online: walk the chunks backwards in the second pass (L2 reuse)
    chunks: int = 1  # split: chunks of BLOCK columns a part (1: the part stays in registers)
    # Programmatic dependent launch (Hopper and later): the kernel may start while the previous one drains, and
    # waits for its writes before it reads (rows and online modes, GPU only).
    pdl: bool = False


@triton.jit
def _softmax_rows_kernel(
    x_ptr, y_ptr, n_rows, n_cols, sxr, sxc, syr, syc,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, HINTS: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    # Reads ROWS rows of n_cols elements, writes ROWS rows: one HBM read and one write per element.
    if GDC:  # launched as a programmatic dependent: wait until the previous kernel's writes are visible
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    x_ptrs = x_ptr + rows[:, None] * sxr + cols[None, :] * sxc
    x = tl.load(x_ptrs, mask=mask, other=-float("inf"), eviction_policy="evict_first" if HINTS else "")
    x = x.to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    s = tl.sum(e, axis=1)
    y = e * (1.0 / s)[:, None]
    y_ptrs = y_ptr + rows[:, None] * syr + cols[None, :] * syc
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_stats(x_row, sxc, n_cols, first, last, BLOCK: tl.constexpr, HINTS: tl.constexpr):
    # Max and sum of exp(x - max) over chunks first..last-1 of a row, with the online normalizer; evict_last
    # (with HINTS) asks the L2 to keep the lines for a second read.
    offs = tl.arange(0, BLOCK)
    # Running max and sum, one element wide so that they stay tensors through the loop.
    m_run = tl.full([1], -float("inf"), tl.float32)
    s_run = tl.zeros([1], tl.float32)
    for c in range(first, last):
        cols = c * BLOCK + offs
        x = tl.load(
            x_row + cols * sxc, mask=cols < n_cols, other=-float("inf"),
            eviction_policy="evict_last" if HINTS else "",
        )  # fmt: skip
        x = x.to(tl.float32)
        m_new = tl.maximum(m_run, tl.max(x, axis=0))
        # A chunk of -inf only (the masked tail, or masked-out scores) leaves m at -inf: exponents then use 0, so
        # that exp(-inf - -inf) never makes a NaN.
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
        m_run = m_new
    return tl.max(m_run, axis=0), tl.sum(s_run, axis=0)


@triton.jit
def _write_chunks(
    x_row, y_row, sxc, syc, n_cols, first, last, row_m, inv,
    BLOCK: tl.constexpr, REVERSE: tl.constexpr, LOAD_HINT: tl.constexpr, STORE_HINT: tl.constexpr,
):  # fmt: skip
    # y = exp(x - row_m) · inv over chunks first..last-1, read again; REVERSE starts with the chunk read last (the
    # likeliest to be in the L2). The hints mark the loads and stores evict_first: done with, for the L2.
    offs = tl.arange(0, BLOCK)
    for i in range(0, last - first):
        if REVERSE:
            c = last - 1 - i
        else:
            c = first + i
        cols = c * BLOCK + offs
        mask = cols < n_cols
        x = tl.load(
            x_row + cols * sxc, mask=mask, other=-float("inf"), eviction_policy="evict_first" if LOAD_HINT else "",
        )  # fmt: skip
        y = (tl.exp(x.to(tl.float32) - row_m) * inv).to(y_row.dtype.element_ty)
        tl.store(y_row + cols * syc, y, mask=mask, eviction_policy="evict_first" if STORE_HINT else "")


@triton.jit
def _softmax_online_kernel(
    x_ptr, y_ptr, n_rows, n_cols, sxr, sxc, syr, syc,
    BLOCK: tl.constexpr, REVERSE: tl.constexpr, HINTS: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    # Pass 1 reads the row once for its max and normalizer; pass 2 reads it again (partly from the L2) and writes.
    # One row a program, written as a loop over the rows pid, pid + programs, ... (one trip): that form ran 2-5%
    # faster in bf16 at 32,768-65,536 columns than the straight-line one (160.7 against 168.5 µs, 315.4 against
    # 323.5: docs/kernels-tuning.md runs 13-14), with the same result.
    if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    n_chunks = tl.cdiv(n_cols, BLOCK)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * sxr
        y_row = y_ptr + tl.cast(row, tl.int64) * syr
        row_m, row_s = _row_stats(x_row, sxc, n_cols, 0, n_chunks, BLOCK, HINTS)
        # A row of -inf only: exp(-inf - -inf) = NaN, as torch gives.
        _write_chunks(x_row, y_row, sxc, syc, n_cols, 0, n_chunks, row_m, 1.0 / row_s, BLOCK, REVERSE, HINTS, HINTS)


@triton.jit
def _softmax_split_kernel(
    x_ptr, y_ptr, count_ptr, part_ptr, n_cols, n_parts, sxr, sxc, syr, syc,
    BLOCK: tl.constexpr, CHUNKS: tl.constexpr, PARTS: tl.constexpr, HINTS: tl.constexpr,
    MAX_POLLS: tl.constexpr, FALLBACK_BLOCK: tl.constexpr,
):  # fmt: skip
    # n_parts consecutive programs share a row, CHUNKS × BLOCK columns each. Each takes the max and the sum of
    # its part, publishes them, waits until every part of its row has published, combines them into the row's
    # max and normalizer, and writes its part. With CHUNKS == 1 the part stays in registers (in its own data
    # type) from the read to the write: one HBM read and one write. With more chunks the part is read twice,
    # the second time from the L2, which holds it because only a part per program is in flight, not a row.
    #
    # The wait is bounded. The programs of a row are consecutive, and the GPU starts programs in order, so they
    # are resident together and the wait is short; but that order is an observation, not a promise, so after
    # MAX_POLLS polls a program stops waiting and reads the whole row for its max and normalizer itself: slower,
    # never wrong, never deadlocked (and it is what Triton's interpreter, which runs programs one at a time,
    # exercises).
    pid = tl.program_id(0)
    row = pid // n_parts
    part = pid - row * n_parts
    x_row = x_ptr + row.to(tl.int64) * sxr
    y_row = y_ptr + row.to(tl.int64) * syr
    offs = tl.arange(0, BLOCK)
    if CHUNKS == 1:
        cols = part * BLOCK + offs
        mask = cols < n_cols
        x = tl.load(
            x_row + cols * sxc, mask=mask, other=-float("inf"), eviction_policy="evict_first" if HINTS else ""
        )
        xf = x.to(tl.float32)
        m = tl.max(xf, axis=0)
        s = tl.sum(tl.exp(xf - tl.where(m == -float("inf"), 0.0, m)), axis=0)
    else:
        m, s = _row_stats(x_row, sxc, n_cols, part * CHUNKS, part * CHUNKS + CHUNKS, BLOCK, HINTS)
    slot = part_ptr + (row.to(tl.int64) * PARTS + part) * 2
    tl.store(slot, m)
    tl.store(slot + 1, s)
    # Publish (the release orders the two stores before the count), then wait for the row's other parts.
    done = tl.atomic_add(count_ptr + row, 1, sem="acq_rel") + 1
    polls = pid * 0
    while (done < n_parts) & (polls < MAX_POLLS):
        done = tl.atomic_add(count_ptr + row, 0, sem="acquire")
        polls += 1
    if done >= n_parts:
        j = tl.arange(0, PARTS)
        slots = part_ptr + (row.to(tl.int64) * PARTS + j) * 2
        pm = tl.load(slots, mask=j < n_parts, other=-float("inf"), cache_modifier=".cg")
        ps = tl.load(slots + 1, mask=j < n_parts, other=0.0, cache_modifier=".cg")
        row_m = tl.max(pm, axis=0)
        row_s = tl.sum(ps * tl.exp(pm - tl.where(row_m == -float("inf"), 0.0, row_m)), axis=0)
    else:
        # Small chunks: registers hold the part (CHUNKS == 1) while this runs.
        row_m, row_s = _row_stats(x_row, sxc, n_cols, 0, tl.cdiv(n_cols, FALLBACK_BLOCK), FALLBACK_BLOCK, False)
    row_m = tl.where(row_m == -float("inf"), 0.0, row_m)
    inv = 1.0 / row_s  # a row of -inf only: 1/0, and exp(-inf)·inf = NaN, as torch gives
    if CHUNKS == 1:
        y = (tl.exp(x.to(tl.float32) - row_m) * inv).to(y_ptr.dtype.element_ty)
        tl.store(y_row + cols * syc, y, mask=mask)
    else:
        first = part * CHUNKS
        _write_chunks(x_row, y_row, sxc, syc, n_cols, first, first + CHUNKS, row_m, inv, BLOCK, True, HINTS, False)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# split mode: how long a program waits for the other parts of its row before it reads the whole row itself. A
# poll is a load-acquire from the L2 (`ld.global.gpu.acquire`), one L2 round trip (on the order of a microsecond
# under load; not measured on its own). Parts that are running publish within a few microseconds (a whole
# 4096×262,144 split kernel takes 1.4 ms for 65,536 programs), so 1,024 polls run out only when the parts of a
# row are not resident together. The interpreter runs programs
# one at a time, so there a wait never ends: it polls a few times and takes the fallback.
_MAX_POLLS = 1024
_MAX_POLLS_INTERPRETED = 3
# The fallback reads its row in chunks of this many elements a thread: few enough registers beside a part held
# in registers (chunks as large as the part doubled the registers and slowed split mode:
# docs/kernels-tuning.md, run 6).
_FALLBACK_PER_THREAD = 4


@functools.cache
def pdl_supported() -> bool:
    """Programmatic dependent launch: a CUDA GPU of compute capability 9.0 (Hopper) or later, not interpreted,
    and a triton that has the launch option (3.4 and later; the pyproject admits 3.0)."""
    if interpreting() or not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        return False
    try:
        from triton.backends.nvidia.compiler import CUDAOptions  # type: ignore[import-untyped]
    except ImportError:
        return False
    return "launch_pdl" in {f.name for f in fields(CUDAOptions)}


# "rows" mode: one row a program (several when rows are shorter than 1,024 elements), 16 elements a thread.
# Measured on an H200 (4,096 rows, PDL on; benchmarks/tune_softmax.py, docs/kernels-tuning.md run 6): at 1,024
# columns one row in 2 warps took 5.5 µs in bf16 and 9.6 in fp32, against 5.8 and 10.0 for two rows in 4 warps
# (4 rows: 6.3 and 10.7; 8 rows: 7.0 and 12.3); at 2,048 to 16,384 columns one row a program, 16 elements a
# thread, was the fastest or within 2%. Persistent grids with pipelined loads (2-16 programs an SM, 1-3 stages,
# run 5) were never faster than one program a row, so the kernels launch one program a block of rows.
_ROWS_TARGET_ELEMENTS = 1024
_ELEMENTS_PER_THREAD = 16


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
    warps = num_warps or min(32, max(2, rows * block // (32 * _ELEMENTS_PER_THREAD)))
    kw.setdefault("pdl", pdl_supported())
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
    kw.setdefault("pdl", pdl_supported())
    return SoftmaxConfig("online", block or default_block, num_warps=num_warps or default_warps, **kw)


# "split" mode, rows longer than this. Measured on an H200, 4,096 rows (docs/kernels-tuning.md run 7): at 262,144
# columns split mode took 1,381 µs in bf16 (parts of 2 chunks of 8,192 in 8 warps; the part held in registers:
# 1,703-1,982) and 2,502 µs in fp32 (parts of 8,192 held in registers, 4 warps; read twice: 2,975-3,309),
# against 1,652 and 3,112 µs in online mode; at 65,536 and 32,768 columns online mode was 2-10% faster.
_SPLIT_ABOVE = 65536
_SPLIT_16BIT = (8192, 8, 2)  # block, warps, chunks
_SPLIT_FP32 = (8192, 4, 1)


def _split_config(cols: int, dtype: str) -> SoftmaxConfig:
    block, warps, chunks = _SPLIT_FP32 if dtype == "fp32" else _SPLIT_16BIT
    # No more parts than SMs, so that a row's parts can all be resident: longer rows take longer parts.
    chunks = max(chunks, -(-cols // (block * sm_count())))
    return SoftmaxConfig("split", block, num_warps=warps, chunks=chunks, hints=chunks > 1)


class FusedSoftmax(Kernel):
    shape_format = "ROWSxCOLS"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    # The targets (docs/performance.md): rows of 1,024 to 16,384 and 65,536 to 262,144 elements, 4,096 rows.
    default_shapes = [(4096, 1024), (4096, 4096), (4096, 16384), (4096, 65536), (4096, 262144)]
    # Every mode: rows (up to 3,000), online (20,000) and split (70,001, its last part ragged).
    interpret_shapes = [(1, 1), (3, 7), (5, 781), (2, 3000), (2, 20000), (2, 70001)]

    def op(self, shape, dtype) -> Op:
        rows, cols = shape
        return softmax_op("softmax", rows, cols, dtype)

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
        if cols <= _ONLINE_ABOVE:
            return _rows_config(cols, n_rows=rows)
        if cols <= _SPLIT_ABOVE:
            return _online_config(dtype=dtype)
        return _split_config(cols, dtype)

    def candidates(self, shape, dtype, gpu=None) -> list[SoftmaxConfig]:
        """The chosen config and its nearest rivals (the wider sweeps are in docs/kernels-tuning.md)."""
        rows, cols = shape
        chosen = self.config_for(shape, dtype)
        out = [chosen, replace(chosen, pdl=not chosen.pdl)] if chosen.pdl else [chosen]
        if chosen.mode == "rows":
            out.append(replace(chosen, num_warps=max(2, chosen.num_warps // 2)))
            out.append(replace(chosen, num_warps=min(32, chosen.num_warps * 2)))
        else:
            out.append(_online_config(dtype=dtype))
            out.append(_split_config(cols, "fp32" if dtype != "fp32" else "bf16"))
        return list(dict.fromkeys(out))

    def run(self, inputs: Inputs, out: torch.Tensor, config: SoftmaxConfig | None = None) -> None:
        x = inputs["x"]
        rows, cols = x.shape
        cfg = config or self.config_for((rows, cols), dtype_name(x.dtype))
        self._start_run()
        meta = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        if cfg.pdl:
            meta["launch_pdl"] = True
        strides = (x.stride(0), x.stride(1), out.stride(0), out.stride(1))
        if cfg.mode == "rows":
            if cfg.block < cols:
                raise ValueError(f"rows mode needs block >= cols, got {cfg.block} < {cols}")
            grid = (triton.cdiv(rows, cfg.rows_per_program),)
            handle = _softmax_rows_kernel[grid](
                x, out, rows, cols, *strides, BLOCK=cfg.block, ROWS=cfg.rows_per_program, HINTS=cfg.hints,
                GDC=cfg.pdl, **meta,
            )  # fmt: skip
            self._record(_softmax_rows_kernel, grid, cfg, handle)
        elif cfg.mode == "online":
            grid = (rows,)
            handle = _softmax_online_kernel[grid](
                x, out, rows, cols, *strides, BLOCK=cfg.block, REVERSE=cfg.reverse, HINTS=cfg.hints, GDC=cfg.pdl,
                **meta,
            )  # fmt: skip
            self._record(_softmax_online_kernel, grid, cfg, handle)
        elif cfg.mode == "split":
            parts = triton.cdiv(cols, cfg.block * cfg.chunks)
            if parts > sm_count():
                # More parts than SMs cannot all be resident: most programs would end up reading their whole row.
                raise ValueError(f"split mode needs at most {sm_count()} parts a row (one per SM), got {parts}")
            # counts[row]: the parts of the row that have published; partials: each part's max and sum.
            counts = torch.zeros(rows, dtype=torch.int32, device=x.device)
            width = _next_pow2(parts)
            partials = torch.empty(rows * width * 2, dtype=torch.float32, device=x.device)
            grid = (rows * parts,)
            handle = _softmax_split_kernel[grid](
                x, out, counts, partials, cols, parts, *strides, BLOCK=cfg.block, CHUNKS=cfg.chunks, PARTS=width,
                HINTS=cfg.hints, MAX_POLLS=_MAX_POLLS_INTERPRETED if interpreting() else _MAX_POLLS,
                FALLBACK_BLOCK=min(cfg.block, 32 * cfg.num_warps * _FALLBACK_PER_THREAD), num_warps=cfg.num_warps,
            )  # fmt: skip
            self._record(_softmax_split_kernel, grid, cfg, handle, parts=parts)
        else:
            raise ValueError(f"unknown softmax mode {cfg.mode!r}")

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return torch.softmax(inputs["x"].to(torch.float64), dim=-1)

    def eager(self, inputs: Inputs) -> torch.Tensor:
        return torch.softmax(inputs["x"], dim=-1)

    def tolerance(self, dtype: str) -> float:
        # fp32: exp and division in fp32 land near 1e-6; 16-bit outputs are rounded to 8 (bf16) or 11 (fp16)
        # mantissa bits, about 2e-3 and 3e-4 relative (u/√3): bf16's 1e-2 is 2.6 u, fp16's 2e-3 is 4 u (it was
        # 1e-2, 20 u: an fp16 kernel 30× off its rounding passed).
        return {"fp32": 1e-4, "fp16": 2e-3, "bf16": 1e-2}[dtype]


KERNEL = FusedSoftmax()
