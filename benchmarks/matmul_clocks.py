"""Why calibrate's bf16 ceiling (about 660 TFLOP/s on the H200, sustained) is below a burst of torch matmuls
(788 TFLOP/s in the device notes: ten products after three warm-ups): the same 8192³ bf16 product on random
data, timed in bursts from idle and then under a sustained load, with the SM clock and the board power read by
nvidia-smi between the windows. Prints one line per window.

    python benchmarks/matmul_clocks.py [SECONDS_SUSTAINED]
"""

from __future__ import annotations

import subprocess
import sys
import time

import torch

N = 8192
FLOPS = 2 * N**3


def smi() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
                          "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    return out.stdout.strip()


def window(a: torch.Tensor, b: torch.Tensor, n: int) -> float:
    """TFLOP/s of n back-to-back products, timed by CUDA events around all of them."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        torch.matmul(a, b)
    end.record()
    end.synchronize()
    return n * FLOPS / (start.elapsed_time(end) * 1e-3) / 1e12


def main(sustained_s: float) -> None:
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    time.sleep(2.0)  # idle: let the clocks and power fall back
    print(f"idle: {smi()}")
    window(a, b, 3)  # the device notes' method: three warm-ups, then ten timed
    print(f"burst (10 products after 3 warm-ups, from idle): {window(a, b, 10):.0f} TFLOP/s; then {smi()}")
    t0 = time.time()
    while time.time() - t0 < sustained_s:
        rate = window(a, b, 50)  # about 70 ms a window
        print(f"sustained t={time.time() - t0:4.1f} s: {rate:.0f} TFLOP/s; {smi()}")
    time.sleep(2.0)
    window(a, b, 3)
    print(f"burst again after 2 s idle: {window(a, b, 10):.0f} TFLOP/s; then {smi()}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 6.0)
