"""The ``torch`` stack's one figure, fitted to whole-step measurements: what a step captured as one CUDA graph costs
beyond the calibrated op model's time of its ops.

    python benchmarks/torch_stack.py [FOLDER]      # default docs/results/h200-2026-12-03-workload

FOLDER holds ``measure --workload`` records (kind ``workload``) taken on one GPU: each times every op of the step
alone and the whole step as one CUDA graph replayed (``step.timing.median_s``), and keeps the calibrated op model's
prediction of the step (``step.predicted_calibrated_s``, the sum of its ops' predicted times). A graph launches its
kernels back to back with no host in between, so what the whole step costs beyond that prediction, per kernel, is
the stack's ``kernel_gap_us``: the least-squares fit of

    measured step = predicted step + kernels × gap

over the records' relative errors (each record's residual divided by its measured step), kernels being the step's
op instances. The report prints every record's measured and predicted step, the error without and with the gap,
and the figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "docs" / "results" / "h200-2026-12-03-workload"


def records(folder: Path) -> list[tuple[str, float, float, int]]:
    """(command, measured step s, predicted step s, kernels) of every whole-step record in ``folder``."""
    found = []
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("kind") != "workload" or record["step"].get("timing") is None:
            continue
        step = record["step"]
        kernels = sum(op["count"] for op in record["ops"])
        found.append((record["command"].split(" --gpu")[0], step["timing"]["median_s"],
                      step["predicted_calibrated_s"], kernels))
    return found


def fit_gap_us(rows: list[tuple[str, float, float, int]]) -> float:
    """The gap per kernel, µs, minimizing Σ ((predicted + kernels·gap) / measured − 1)²."""
    num = sum(k / m * (1 - p / m) for _, m, p, k in rows)
    den = sum((k / m) ** 2 for _, m, _, k in rows)
    return num / den * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", default=str(DEFAULT))
    args = ap.parse_args(argv)
    rows = records(Path(args.folder))
    if not rows:
        print(f"no whole-step workload records in {args.folder}", file=sys.stderr)
        return 2
    gap = fit_gap_us(rows)
    print("| record | kernels | measured ms | calibrated ms | error | with the gap |")
    print("|---|--:|--:|--:|--:|--:|")
    before, after = [], []
    for command, measured, predicted, kernels in rows:
        fitted = predicted + kernels * gap / 1e6
        before.append(abs(predicted / measured - 1))
        after.append(abs(fitted / measured - 1))
        print(f"| `{command}` | {kernels} | {measured * 1e3:.2f} | {predicted * 1e3:.2f} | "
              f"{(predicted / measured - 1) * 100:+.1f}% | {(fitted / measured - 1) * 100:+.1f}% |")
    print(f"\nkernel_gap_us = {gap:.2f} over {len(rows)} records; mean absolute error "
          f"{statistics.fmean(before) * 100:.1f}% without it, {statistics.fmean(after) * 100:.1f}% with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
