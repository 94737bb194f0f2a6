"""How long `rooflinectl plot` takes in-process on this machine: issue 18's bound is 5 s for any accepted input.

    python benchmarks/plot_speed.py            # median of 3 runs of each command
    python benchmarks/plot_speed.py -n 5       # median of 5
    python benchmarks/plot_speed.py --profile  # and a cProfile of the largest case (top 25 by cumulative time)

Each command runs through the CLI's own entry (``rooflinectl.cli.app``) in this process, after one warm-up run
of the plain command (matplotlib's import and font cache are not counted: they are paid once per process and are
the same for every chart). It prints the machine, the versions, and the median and spread (min-max) of each.
The largest accepted sweep is 4 GPUs (cli/plot.py's MAX_SWEPT_GPUS) × decode and prefill × a 64-value list (the
most one list may give) × every op; without a sweep, 6 GPUs (plot.chart.GPU_COLORS).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import statistics
import sys
import tempfile
import time

BATCH_9 = "1,2,4,8,16,32,64,128,256"
BATCH_64 = ",".join(str(v) for v in range(1, 65))
THREE = ["--gpu", "h100", "--gpu", "a100", "--gpu", "mi300x"]
FOUR = [*THREE, "--gpu", "b200"]
SIX = [*FOUR, "--gpu", "h200", "--gpu", "l40s"]

COMMANDS: list[tuple[str, list[str]]] = [
    ("plot decode --gpu h100 -o d.png", ["plot", "decode", "--gpu", "h100", "-o", "{tmp}/d.png"]),
    (f"plot --gpu h100 --gpu a100 --gpu mi300x --batch {BATCH_9} -o q.pdf",
     ["plot", *THREE, "--batch", BATCH_9, "-o", "{tmp}/q.pdf"]),
    ("plot --gpu h100 --gpu a100 --gpu mi300x --batch 1,2,...,64 -o q.png",
     ["plot", *THREE, "--batch", BATCH_64, "-o", "{tmp}/q.png"]),
    ("plot --gpu h100 --gpu a100 --gpu mi300x --gpu b200 --batch 1,2,...,64 -o q4.png",
     ["plot", *FOUR, "--batch", BATCH_64, "-o", "{tmp}/q4.png"]),
    ("plot --gpu h100 --gpu a100 --gpu mi300x --gpu b200 --batch 1,2,...,64 -o q4.svg",
     ["plot", *FOUR, "--batch", BATCH_64, "-o", "{tmp}/q4.svg"]),
    ("plot (6 GPUs) -o q6.pdf", ["plot", *SIX, "-o", "{tmp}/q6.pdf"]),
]


def run(args: list[str], tmp: str) -> float:
    """Wall time of one in-process run of ``rooflinectl ARGS``; a failure stops the benchmark."""
    from rooflinectl.cli import app

    argv = [a.replace("{tmp}", tmp) for a in args]
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = app(argv, standalone_mode=False)
    elapsed = time.perf_counter() - t0
    if code not in (None, 0):
        raise SystemExit(f"rooflinectl {' '.join(argv)} exited {code}")
    return elapsed


def machine() -> str:
    import matplotlib
    import numpy

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.machine()}, {os.cpu_count()} cores, load {load:.2f}; Python {platform.python_version()}, "
            f"matplotlib {matplotlib.__version__}, numpy {numpy.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=3, help="runs of each command (the median is printed)")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest case once")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(COMMANDS[0][1], tmp)  # warm-up: imports, font cache
        print(f"median of {opts.n} runs, in-process, warm; {machine()}")
        for label, args in COMMANDS:
            times = [run(args, tmp) for _ in range(opts.n)]
            print(f"{label:<80} {statistics.median(times):6.2f} s  ({min(times):.2f}-{max(times):.2f})")
            sys.stdout.flush()
        if opts.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.runcall(run, COMMANDS[3][1], tmp)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
