"""Ground truth for tests/engine/test_occupancy.py: Triton launches on the GPU in hand, what the compiled kernel reports
(registers, spills, shared memory, warps) and what the CUDA driver's occupancy calculator
(cuOccupancyMaxActiveBlocksPerMultiprocessor on the kernel's own CUfunction) says one SM holds.

    python3 triton_probe.py > ../../tests/data/occupancy_triton_<gpu>.json
"""

import ctypes
import json

import torch
import triton
import triton.language as tl


@triton.jit
def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def softmax(x, y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, 0))
    tl.store(y + row * n_cols + cols, e / tl.sum(e, 0), mask=cols < n_cols)


def driver_blocks(handle: int, threads: int, smem: int) -> int:
    cuda = ctypes.CDLL("libcuda.so.1")
    n = ctypes.c_int(-1)
    err = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), ctypes.c_void_p(handle),
                                                           ctypes.c_int(threads), ctypes.c_size_t(smem))
    return n.value if err == 0 else -err


def record(name, k, grid):
    meta = k.metadata
    threads = meta.num_warps * 32
    return {"kernel": name, "grid": list(grid), "num_warps": meta.num_warps, "num_ctas": getattr(meta, "num_ctas", 1),
            "n_regs": k.n_regs, "n_spills": k.n_spills, "shared": meta.shared,
            "driver_blocks_per_sm": driver_blocks(k.function, threads, meta.shared)}


def main():
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "launches": []}
    M = N = K = 1024
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    for bm, bn, bk, warps, stages in [(128, 128, 64, 4, 3), (128, 256, 64, 8, 3), (64, 64, 32, 4, 2),
                                      (256, 128, 64, 8, 4), (128, 128, 32, 4, 4), (64, 256, 64, 4, 3),
                                      (128, 128, 128, 8, 2), (32, 32, 32, 1, 2)]:
        grid = (M // bm, N // bn)
        k = matmul[grid](a, b, c, M, N, K, BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages)
        torch.cuda.synchronize()
        out["launches"].append(record(f"matmul {bm}x{bn}x{bk} w{warps} s{stages}", k, grid))
    for cols, warps in [(1024, 1), (4096, 4), (16384, 16), (32768, 32), (8192, 8), (2048, 2)]:
        x = torch.randn(4096, cols, device="cuda")
        y = torch.empty_like(x)
        grid = (4096,)
        k = softmax[grid](x, y, cols, BLOCK=cols, num_warps=warps)
        torch.cuda.synchronize()
        out["launches"].append(record(f"softmax {cols} w{warps}", k, grid))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
