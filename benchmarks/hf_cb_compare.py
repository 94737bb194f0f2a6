"""transformers' continuous batching as benchmarks/hf_cb_gpu.py measured it, against rooflinectl's serving
simulation of the same loads (``rooflinectl.api.serve``), on the CPU.

Each measured point is simulated with the records' model, prompt and output lengths, load (a closed loop of C
clients and N requests; an open loop as a trace of the measured arrival times) and the engine's scheduler limits
as it resolved them (block size, max_batch_tokens as ``max_num_batched_tokens``, max_requests_per_batch as
``max_num_seqs``, chunked prefill as transformers always does it), on ``--gpu`` with ``calibrated=True`` and
``--stack``. Printed, in markdown:

  - per point, measured against predicted TTFT, TPOT, ITL and E2E (mean, p90, p99) and the error of each;
  - per point, the engine's decode steps (the step log) against the step model's time for the same sequences,
    split into steps whose attention shape the process had run before and steps with a new one (PyTorch's cuDNN
    attention builds an execution plan for each new shape: see docs/serving.md);
  - with ``--fit``, the stack's fixed costs fitted on the ``--fit-points``: ``kernel_gap_us`` from those points'
    decode steps of a shape already seen (the eager launches, no plan to build), ``step_overhead_us`` so that
    their mean TPOT and TTFT are met best (least squares of the relative errors); the tables then use the fit.

    PYTHONPATH=. python benchmarks/hf_cb_compare.py docs/results/h200-2026-12-04-serve
    PYTHONPATH=. python benchmarks/hf_cb_compare.py docs/results/h200-2026-12-04-serve --fit
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import rooflinectl.api as rl
from rooflinectl.engine.parallel import Layout
from rooflinectl.serving.simulate import merge
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.stack import Stack, load_stack
from rooflinectl.specs.workload import Seqs

GPU = "docs/results/op-model-example/h200-issue14.yaml"
# The points the fit uses by default: concurrency 1, both lengths.
FIT_POINTS = ("smoke closed:512:256:1:2", "full closed:2048:128:1:2")
METRICS = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E"))


def load_runs(folder: Path) -> list[tuple[str, dict[str, Any], list[list[Any]]]]:
    """(run name, records, step rows) of each ``*/hf_cb_gpu.json`` under ``folder``, by name."""
    runs = []
    for path in sorted(folder.glob("*/hf_cb_gpu.json")):
        steps = path.with_name("hf_cb_steps.json")
        rows = json.loads(steps.read_text())["rows"] if steps.exists() else []
        runs.append((path.parent.name, json.loads(path.read_text()), rows))
    if not runs:
        raise SystemExit(f"no */hf_cb_gpu.json under {folder}")
    return runs


def sim_options(records: dict[str, Any], gpu: str, stack: str) -> dict[str, Any]:
    cb = records["cb_config"]
    return dict(gpu=gpu, calibrated=True, stack=stack, model=records["model"],
                max_num_batched_tokens=cb["max_batch_tokens"], max_num_seqs=cb["max_requests_per_batch"],
                block_size=cb["block_size"], chunked_prefill=True)


def simulate(point: dict[str, Any], records: dict[str, Any], gpu: str, stack: str) -> rl.ServeResult:
    """The simulated run of one measured point."""
    opts = sim_options(records, gpu, stack)
    load = point["load"]
    if load["kind"] == "concurrency":
        return rl.serve(concurrency=load["concurrency"], requests=point["requests"], prompt=point["prompt"],
                        output=point["output"], **opts)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in point["per_request"]:
            f.write(json.dumps({"arrival_s": max(0.0, r["arrival_s"]), "prompt": point["prompt"],
                                "output": point["output"]}) + "\n")
    try:
        return rl.serve(trace=f.name, **opts)
    finally:
        Path(f.name).unlink()


def predicted(result: rl.ServeResult) -> dict[str, dict[str, float] | None]:
    run = result.run
    out: dict[str, dict[str, float] | None] = {}
    for key, stats in (("ttft_s", run.ttft), ("tpot_s", run.tpot), ("itl_s", run.itl), ("e2e_s", run.e2e)):
        out[key] = None if stats is None else {"mean": stats.mean, "p90": stats.p90, "p99": stats.p99}
    return out


def err(pred: float, meas: float) -> float:
    return 100.0 * (pred / meas - 1.0)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}" if seconds >= 0.1 else f"{seconds * 1e3:,.2f}"


def point_label(run: str, point: dict[str, Any]) -> str:
    load = point["load"]
    what = (f"C={load['concurrency']}, {point['requests']} requests" if load["kind"] == "concurrency"
            else f"Poisson {load['rate']:g}/s, {point['requests']} requests")
    return f"{point['prompt']}/{point['output']}, {what} ({run})"


def table(run: str, point: dict[str, Any], pred: dict[str, dict[str, float] | None], role: str) -> list[str]:
    lines = [f"**{point_label(run, point)}** — {role}", "",
             "| metric | measured mean | predicted mean | error | measured p90 | predicted p90 | error "
             "| measured p99 | predicted p99 | error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, name in METRICS:
        m, p = point["metrics"][key], pred[key]
        if m is None or p is None:
            continue
        cells = [name + " (ms)"]
        for q in ("mean", "p90", "p99"):
            cells += [ms(m[q]), ms(p[q]), f"{err(p[q], m[q]):+.1f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def step_groups(row: list[Any]) -> tuple[Seqs, ...] | None:
    """A logged step's sequences. A step log without them (an earlier harness) gives its decode steps as the mean
    cached length, which the step model prices the same to within a position's bytes, and its steps of whole
    fresh prompts of one length; its other steps are left out (None)."""
    requests, q, kv, prefilling = row[6], row[7], row[8], row[9]
    if len(row) > 11:
        return merge([(new, cached) for new, cached, count in row[11] for _ in range(count)])
    if requests > 0 and prefilling == 0:
        return (Seqs(requests, 1, round(kv / requests)),)
    if requests > 0 and prefilling == requests and kv == 0 and q % requests == 0:
        return (Seqs(requests, q // requests, 0),)
    return None


def novelty(rows: list[list[Any]]) -> list[bool]:
    """For each logged step, whether its attention shape (query tokens, KV positions read) is new to the process
    (PyTorch's cuDNN attention builds a plan for each new shape and reuses it after)."""
    seen: set[tuple[int, int]] = set()
    out = []
    for row in rows:
        out.append((row[7], row[8]) not in seen)
        seen.add((row[7], row[8]))
    return out


def step_table(runs: list[tuple[str, dict[str, Any], list[list[Any]]]], gpu: str, stack: Stack) -> list[str]:
    """Per point, the median step measured (host time from the step's start to its end) against the step model
    for the same sequences: decode steps of a new attention shape, of one seen before, and steps with prompt
    tokens."""
    lines = ["| point | decode steps new / seen | decode, new shape: measured / model (ms) | error "
             "| decode, seen shape: measured / model (ms) | error | steps with prompt tokens | measured / model (ms) "
             "| error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    med = statistics.median
    for run, records, rows in runs:
        model = StepModel(rl.base_workload(model=records["model"], fuse=list(stack.fused)), rl.gpu(gpu), True,
                          Layout(), stack)
        fresh = novelty(rows)
        for point in records["points"]:
            kinds: dict[str, tuple[list[float], list[float]]] = {"new": ([], []), "seen": ([], []), "prompt": ([], [])}
            for i in range(*point["steps"]):
                row = rows[i]
                groups = step_groups(row)
                if groups is None:
                    continue
                kind = "prompt" if row[9] else ("new" if fresh[i] else "seen")
                kinds[kind][0].append(row[4] - row[0])
                kinds[kind][1].append(model.time(groups))
            cells = [point_label(run, point), f"{len(kinds['new'][0])} / {len(kinds['seen'][0])}"]
            for kind in ("new", "seen", "prompt"):
                measured, modelled = kinds[kind]
                if kind == "prompt":
                    cells.append(str(len(measured)))
                if measured:
                    cells += [f"{ms(med(measured))} / {ms(med(modelled))}", f"{err(med(modelled), med(measured)):+.0f}%"]
                else:
                    cells += ["—", "—"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def kernel_gap_from_seen_steps(runs, fit: set[str], gpu: str, base: Stack) -> tuple[float, int, float, float]:
    """(gap µs, kernels, median measured s, median ops s) over the fit points' decode steps of a seen shape."""
    measured, ops, kernels = [], [], 0
    for run, records, rows in runs:
        model = StepModel(rl.base_workload(model=records["model"], fuse=list(base.fused)), rl.gpu(gpu), True)
        fresh = novelty(rows)
        for point in records["points"]:
            if f"{run} {point['point']}" not in fit:
                continue
            for i in range(*point["steps"]):
                row = rows[i]
                groups = step_groups(row)
                if row[9] == 0 and not fresh[i] and groups is not None:
                    measured.append(row[4] - row[0])
                    t, kernels = model.roofline_time(groups)
                    ops.append(t)
    m, o = statistics.median(measured), statistics.median(ops)
    return (m - o) / kernels * 1e6, kernels, m, o


def fit_stack(runs, fit: set[str], gpu: str, base: Stack) -> Stack:
    """The stack with kernel_gap_us from the fit points' seen-shape decode steps and step_overhead_us fitted to
    their mean TPOT and TTFT."""
    gap, kernels, m, o = kernel_gap_from_seen_steps(runs, fit, gpu, base)
    print(f"kernel_gap_us: {gap:.2f} = (median seen-shape decode step {ms(m)} ms − its ops {ms(o)} ms) / "
          f"{kernels} kernels", file=sys.stderr)
    points = [(records, point) for run, records, _ in runs for point in records["points"]
              if f"{run} {point['point']}" in fit]
    folder = Path(tempfile.mkdtemp())

    def loss(overhead_us: float) -> float:
        stack = base.model_copy(update={"kernel_gap_us": gap, "step_overhead_us": overhead_us})
        path = folder / "fit.yaml"
        path.write_text(json.dumps(stack.model_dump()))
        total = 0.0
        for records, point in points:
            pred = predicted(simulate(point, records, gpu, str(path)))
            for key in ("ttft_s", "tpot_s"):
                total += (pred[key]["mean"] / point["metrics"][key]["mean"] - 1) ** 2  # type: ignore[index]
        return total

    lo, hi = 0.0, 200_000.0  # golden-section search: the loss is convex in the step's fixed cost
    r = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = hi - r * (hi - lo), lo + r * (hi - lo)
        if loss(a) < loss(b):
            hi = b
        else:
            lo = a
    overhead = round((lo + hi) / 2, -1)
    print(f"step_overhead_us: {overhead:.0f} (least squares of the relative errors of mean TPOT and TTFT at "
          f"{', '.join(sorted(fit))})", file=sys.stderr)
    return base.model_copy(update={"kernel_gap_us": round(gap, 1), "step_overhead_us": overhead})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="?", default="docs/results/h200-2026-12-04-serve")
    p.add_argument("--gpu", default=GPU, help="a GPU file with a measured op model (calibrated=True)")
    p.add_argument("--stack", default="hf")
    p.add_argument("--fit", action="store_true", help="fit the stack's kernel gap and step overhead first")
    p.add_argument("--fit-points", default=",".join(FIT_POINTS),
                   help="'RUN POINT' names, comma-separated (default: the concurrency-1 points)")
    args = p.parse_args()
    runs = load_runs(Path(args.records))
    g = rl.gpu(args.gpu)
    if g.measured is None or g.measured.op_model is None:
        raise SystemExit(f"{args.gpu}: no measured op model, which calibrated=True needs")
    fit = {name.strip() for name in args.fit_points.split(",") if name.strip()}
    stack = load_stack(args.stack)
    stack_arg = args.stack
    if args.fit:
        stack = fit_stack(runs, fit, args.gpu, stack)
        path = Path(tempfile.mkdtemp()) / "fitted.yaml"
        path.write_text(json.dumps(stack.model_dump()))
        stack_arg = str(path)
        print(f"fitted: kernel_gap_us {stack.kernel_gap_us}, step_overhead_us {stack.step_overhead_us}\n")
    print(f"Predicted: `rooflinectl.api.serve(gpu={args.gpu!r}, calibrated=True, stack={args.stack!r}"
          f"{' (fitted)' if args.fit else ''})`: kernel_gap_us {stack.kernel_gap_us:g}, step_overhead_us "
          f"{stack.step_overhead_us:g}, fused {stack.fused or '[]'}; op model of {g.id}.\n")
    summary = ["| point | role | TTFT mean: measured / predicted (ms) | error | TPOT mean: measured / predicted (ms) "
               "| error |", "|---|---|---:|---:|---:|---:|"]
    tables: list[str] = []
    for run, records, _ in runs:
        for point in records["points"]:
            role = "fit" if f"{run} {point['point']}" in fit else "check"
            pred = predicted(simulate(point, records, args.gpu, stack_arg))
            tables += table(run, point, pred, role)
            m, q = point["metrics"], pred
            summary.append(f"| {point_label(run, point)} | {role} | {ms(m['ttft_s']['mean'])} / "
                           f"{ms(q['ttft_s']['mean'])} | {err(q['ttft_s']['mean'], m['ttft_s']['mean']):+.0f}% "  # type: ignore[index]
                           f"| {ms(m['tpot_s']['mean'])} / {ms(q['tpot_s']['mean'])} "  # type: ignore[index]
                           f"| {err(q['tpot_s']['mean'], m['tpot_s']['mean']):+.0f}% |")  # type: ignore[index]
    print("\n".join(summary + [""] + tables))
    print("Steps, the median host time (the step log) against the step model's for the same sequences:\n")
    print("\n".join(step_table(runs, args.gpu, stack)))


if __name__ == "__main__":
    main()
