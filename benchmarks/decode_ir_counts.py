"""What the paged decode kernel adds to the contiguous one, read from the sm_90 compile on a CPU: per kernel (a
group of 16 heads in slices of 8, and a group of 4; contiguous and in pages of 16) the shared memory, the gathers in
the TritonGPU IR and the shared-memory and barrier instructions in the PTX; paged also with K loaded as rows
(``K_ROWS``, the position offsets in V's layout only).

    python benchmarks/decode_ir_counts.py      # the installed triton; run without TRITON_INTERPRET

``tl.gather`` of a split's page numbers lowers to a store of the table tile to shared memory, a barrier and a
shared-memory load per position (one gather for K's layout, one for V's), inside the loop.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(root / "tests"), str(root)]

from kernel_checks import _compile  # noqa: E402

spec = importlib.util.spec_from_file_location("test_attention", root / "tests/kernels/test_attention.py")
assert spec is not None and spec.loader is not None
test_attention = importlib.util.module_from_spec(spec)
spec.loader.exec_module(test_attention)

print(f"{'group/slice':12} {'cache':16} {'shared B':>9} {'gathers':>8} {'ld.shared':>10} {'st.shared':>10} "
      f"{'bar.sync':>9} {'cp.async':>9}")
for group, slice_ in ((16, 8), (4, 4)):
    for paged, k_rows in ((False, False), (True, False), (True, True)):
        job = test_attention._decode_job(group, slice_, paged)
        job.constexprs["K_ROWS"] = k_rows
        k = _compile(job)
        cache = ("pages 16" + (" K rows" if k_rows else "")) if paged else "contiguous"
        print(f"{f'{group}/{slice_}':12} {cache:16} {k.shared:>9} "
              f"{k.ttgir.count('tt.gather'):>8} {k.ptx.count('ld.shared'):>10} {k.ptx.count('st.shared'):>10} "
              f"{k.ptx.count('bar.sync'):>9} {k.ptx.count('cp.async.cg'):>9}")
