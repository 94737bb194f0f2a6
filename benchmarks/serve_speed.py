"""How long `analyze serve` takes on this machine: the target is 1,000 requests of 1,000 output tokens in 5 s.

    python benchmarks/serve_speed.py           # median of 3 runs of each case
    python benchmarks/serve_speed.py -n 1      # one run each

Each case is one `rooflinectl.api.serve` call in this process, after a warm-up call of a small run (imports and
the model's first analyses are paid once per process). It prints the machine, the versions, and for each run the
median and spread of its time, the steps it simulated and its output tokens. The last case, 10,000 Poisson requests
of mixed lengths, is the open loop's worst: its steps take every token and sequence count (about 9 s a run).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

CASES = [
    # (what, serve's keywords)
    ("1,000 × (1,000 in, 1,000 out), concurrency 64",
     dict(concurrency=64, requests=1000, prompt=1000, output=1000)),
    ("1,000 × (1,000 in, 1,000 out), concurrency 256",
     dict(concurrency=256, requests=1000, prompt=1000, output=1000)),
    ("1,000 × (uniform 200-2,000 in, 1,000 out), Poisson 8/s",
     dict(rate=8.0, requests=1000, prompt="uniform:200-2000", output=1000)),
    ("10,000 × (uniform 100-3,000 in, uniform 10-400 out), Poisson 20/s",
     dict(rate=20.0, requests=10000, prompt="uniform:100-3000", output="uniform:10-400")),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3, help="runs of each case (the median is printed)")
    args = parser.parse_args()
    import pydantic

    import rooflinectl.api as rl

    print(f"{platform.processor() or platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}, pydantic {pydantic.VERSION}; llama-3-8b on h100, stack roofline")
    rl.serve(gpu="h100", concurrency=4, requests=8, prompt=256, output=16)
    for what, kwargs in CASES:
        times, result = [], None
        for _ in range(args.n):
            start = time.perf_counter()
            result = rl.serve(gpu="h100", model="llama-3-8b", **kwargs)  # type: ignore[arg-type]
            times.append(time.perf_counter() - start)
        assert result is not None
        run = result.run
        print(f"{what}: {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}); "
              f"{run.steps:,} steps, {run.output_tokens:,} output tokens")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
