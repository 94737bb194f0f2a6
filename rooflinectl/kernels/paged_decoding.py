"""flash_decoding_paged: flash-decoding over a paged KV cache, read through a block table.

Serving engines keep the KV cache in fixed pages (vLLM, SGLang and FlashInfer: 16 positions a page by default) and
give each sequence a table of its pages, in order, so that sequences grow without moving and share nothing they do
not own. K and V are P×page×g×d (the NHD layout), ``table`` B×⌈L_max/page⌉ int32. The kernel is flash_decoding's
(one program a split of one sequence's K/V head, a GQA group a tile): position p of sequence b is read from slot
p mod page of page table[b, ⌊p/page⌋]. Each position's d values stay contiguous (256 bytes at d = 128 in bf16),
so the gather costs the table's int32s (from the L1) and nothing in the width of the loads.

The inputs scatter each sequence's pages over the cache in a random order (a cache after many requests came and
went), so that no read is contiguous across pages by luck. Counted as flash_decoding's bytes plus the table's.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..engine.count.attention_io import decode_op
from ..engine.count.op import Op
from ..errors import UserError
from .base import Inputs, Kernel, torch_dtype
from .flash_attention import check_attention_shape
from .flash_decoding import DecodeConfig, decode_candidates, decode_config, decode_reference, flash_decoding

# Page sizes the kernel takes: powers of two (a page index is a shift); 16 is vLLM's and SGLang's default block,
# FlashInfer takes any; 1 is a token-granular cache (SGLang's radix cache before pages).
PAGE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def make_paged_inputs(batch: int, heads: int, kv_heads: int, lengths: list[int], d: int, page: int, dtype: str,
                      device, generator, spare_pages: int = 0) -> Inputs:
    """q (B×h×d), K and V (P×page×g×d) with each sequence's ⌈L_max/page⌉ pages scattered at random over P pages
    (``spare_pages`` more than the sequences use), the block table (B × pages, int32) and the lengths."""
    t = torch_dtype(dtype)
    per_seq = -(-max(lengths) // page)
    n_pages = batch * per_seq + spare_pages

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=generator, device=device, dtype=torch.float32).to(t)

    order = torch.randperm(n_pages, generator=generator, device=device)[: batch * per_seq]
    return {"q": randn(batch, heads, d), "k": randn(n_pages, page, kv_heads, d), "v": randn(n_pages, page, kv_heads, d),
            "table": order.view(batch, per_seq).to(torch.int32).contiguous(),
            "lengths": torch.tensor(lengths, dtype=torch.int32, device=device)}


def gather_pages(cache: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The contiguous B×g×(pages·page)×d cache a block table describes (what a torch user builds before SDPA)."""
    b, per_seq = table.shape
    _, page, g, d = cache.shape
    return cache[table.long().flatten()].view(b, per_seq * page, g, d).transpose(1, 2)


class PagedDecoding(Kernel):
    shape_format = "BxHxKVxLxDxP"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    # flash_decoding's default shapes in pages of 16 (vLLM's default block), and two in pages of 32.
    default_shapes = [(1, 32, 8, 4096, 128, 16), (16, 32, 8, 4096, 128, 16), (64, 32, 8, 4096, 128, 16),
                      (16, 32, 8, 4096, 128, 32), (1, 32, 8, 16384, 128, 16), (16, 32, 8, 1024, 128, 16)]
    interpret_shapes = [(1, 4, 4, 1, 16, 16), (3, 7, 1, 45, 32, 16), (2, 8, 2, 300, 16, 32)]

    def check_shape(self, shape) -> None:
        super().check_shape(shape)
        check_attention_shape(self.name, shape[:5])
        if shape[5] not in PAGE_SIZES:
            raise UserError(f"kernel {self.name}: page size P must be a power of two up to 256, got {shape[5]}")

    def op(self, shape, dtype) -> Op:
        b, h, g, n, d, page = shape
        plain = decode_op(b, h, g, [n] * b, d, dtype)
        table = 4 * b * -(-n // page)  # each program reads its sequence's int32 page numbers once
        return replace(plain, bytes=plain.bytes + table,
                       reads=f"{plain.reads}, through a block table of pages of {page}")

    def make_inputs(self, shape, dtype, device, generator) -> Inputs:
        b, h, g, n, d, page = shape
        return make_paged_inputs(b, h, g, [n] * b, d, page, dtype, device, generator)

    def make_output(self, inputs: Inputs) -> torch.Tensor:
        return torch.empty_like(inputs["q"])

    def config_for(self, shape, dtype) -> DecodeConfig:
        b, h, g, n, d, page = shape
        return decode_config(b, g, -(-n // page) * page, group=h // g, head_d=d)

    def candidates(self, shape, dtype, gpu=None) -> list[DecodeConfig]:
        b, h, g, n, d, page = shape
        return decode_candidates(b, g, -(-n // page) * page, h // g, d)

    def run(self, inputs: Inputs, out: torch.Tensor, config: DecodeConfig | None = None) -> None:
        from .flash_decoding import _flash_decode_kernel

        self._start_run()
        cfg, grid, handle = flash_decoding(inputs["q"], inputs["k"], inputs["v"], inputs["lengths"], out, config,
                                           table=inputs["table"])
        self._record(_flash_decode_kernel, grid, cfg, handle)

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return decode_reference(inputs["q"], gather_pages(inputs["k"], inputs["table"]),
                                gather_pages(inputs["v"], inputs["table"]), inputs["lengths"])

    def eager(self, inputs: Inputs) -> torch.Tensor:
        """What a torch user without a paged kernel writes: gather the pages into a contiguous cache, then SDPA
        with a mask of each sequence's positions (a page's tail past the length is not the sequence's; the mask
        leaves SDPA's masked backends to torch's pick)."""
        q, lengths = inputs["q"], inputs["lengths"]
        k, v = gather_pages(inputs["k"], inputs["table"]), gather_pages(inputs["v"], inputs["table"])
        mask = torch.arange(k.shape[2], device=q.device)[None, :] < lengths[:, None]  # B × positions
        o = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask[:, None, None, :],
                                                             enable_gqa=q.shape[1] != k.shape[1])
        return o[:, :, 0]

    def tolerance(self, dtype: str) -> float:
        return {"fp32": 5e-3, "fp16": 1e-2, "bf16": 2e-2}[dtype]


KERNEL = PagedDecoding()
