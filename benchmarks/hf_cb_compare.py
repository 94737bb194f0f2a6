"""transformers' continuous batching as benchmarks/hf_cb_gpu.py measured it, against rooflinectl's serving
simulation of the same loads, on the CPU.

Each measured point is simulated (``serving.simulate``, as ``rooflinectl.api.serve`` assembles it) with the records'
model, prompt and output lengths, load (a closed loop of C clients and N requests; an open loop as a trace of the
measured arrival times) and the engine's scheduler limits as it resolved them (block size, max_batch_tokens as
``max_num_batched_tokens``, max_requests_per_batch as ``max_num_seqs``, chunked prefill as transformers always does
it), on ``--gpu`` with ``calibrated=True`` and ``--stack``. One engine process served every point of a run after a
warm-up, so each simulation starts knowing the attention shapes the process had run before the point (the step
log's): a stack's ``new_shape_us`` is charged to the shapes that were new to the engine, no others. Printed, in
markdown:

  - per point, measured against predicted TTFT, TPOT, ITL and E2E (mean, p90, p99) and the error of each;
  - per point, the engine's steps (the step log) against the step model's time for the same sequences, decode
    steps split by whether their attention shape (query tokens, KV positions) was new to the process;
  - with ``--fit``, the stack's figures fitted first on the ``--fit-points`` (below); the tables then use them;
    ``--write-stack FILE`` writes the fitted stack as a stack file that ``analyze serve --stack FILE`` takes (the
    host figures are the host's: a run on another machine fits its own).

The fit reads the step log of the fit points. Each logged step whose sequences are known gives one equation

    host time − its ops other than attention  =  F + P·[new shape] + A / attention_efficiency + β · L · layers

with the ops timed by the op model (under the stack's attention rule: ``batch_dense`` counts the step's dense
attention), A the attention ops' time, L the step's KV positions and [new shape] whether the process had not run its
shape before; F, P, 1/attention_efficiency and β are the least squares of the relative errors (each step's residual
over its measured time). A step more than three times the first fit's time is left out and the fit repeated (on
the records: stalls of 0.47–0.52 s in single-sequence decode steps, the first of each process and one more). Then
kernel_gap_us = F / the step's kernels (step_overhead_us 0: the floor is the eager launches), new_shape_us = P,
kv_position_ns = β. refill_latency_us is measured, not fitted: the median wait of every closed-loop refill in the
records (a request's arrival after the last one of its point to finish before it).

    PYTHONPATH=. python benchmarks/hf_cb_compare.py docs/results/h200-2026-12-04-serve
    PYTHONPATH=. python benchmarks/hf_cb_compare.py docs/results/h200-2026-12-04-serve --fit
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import rooflinectl.api as rl
from rooflinectl.engine.memory import reserve_bytes
from rooflinectl.engine.parallel import Layout
from rooflinectl.serving.capacity import kv_capacity
from rooflinectl.serving.load import Lengths, Load, Request, closed_loop
from rooflinectl.serving.metrics import Run
from rooflinectl.serving.scheduler import SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.stack import Stack, load_stack

GPU = "docs/results/op-model-example/h200-issue14.yaml"
# The points the fit uses by default: concurrency 1 at both lengths, and 2048/128 at concurrency 32 (dense prefill
# chunks over up to 65k KV positions, and decode steps of 32 sequences over 67k).
FIT_POINTS = ("smoke closed:512:256:1:2", "full closed:2048:128:1:2", "full closed:2048:128:32:32")
METRICS = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E"))
# A logged step more than this many times the first fit's time is left out of the second.
OUTLIER = 3.0

Counts = dict[tuple[int, int], int]
Runs = list[tuple[str, dict[str, Any], list[list[Any]]]]


def load_runs(*folders: Path) -> Runs:
    """(run name, records, step rows) of each ``*/hf_cb_gpu.json`` under the ``folders``, by name."""
    runs = []
    for path in sorted(p for folder in folders for p in folder.glob("*/hf_cb_gpu.json")):
        steps = path.with_name("hf_cb_steps.json")
        rows = json.loads(steps.read_text())["rows"] if steps.exists() else []
        runs.append((path.parent.name, json.loads(path.read_text()), rows))
    if not runs:
        raise SystemExit(f"no */hf_cb_gpu.json under {', '.join(map(str, folders))}")
    return runs


def step_model(records: dict[str, Any], gpu: str, stack: Stack) -> StepModel:
    """The step model of a run's engine: its model, the stack's fusions, calibrated."""
    return StepModel(rl.base_workload(model=records["model"], fuse=list(stack.fused)), rl.gpu(gpu), True, Layout(),
                     stack)


def log_shape(row: list[Any]) -> tuple[int, int]:
    """A logged step's attention shape as the step model keys it: (query tokens, KV positions read, the new
    tokens' included); the log's kv_read counts the cached positions."""
    return row[7], row[7] + row[8]


def novelty(rows: list[list[Any]]) -> list[bool]:
    """For each logged step, whether its attention shape is new to the process (PyTorch's cuDNN attention builds a
    plan for each new shape and reuses it after)."""
    seen: set[tuple[int, int]] = set()
    out = []
    for row in rows:
        out.append(log_shape(row) not in seen)
        seen.add(log_shape(row))
    return out


def simulate_point(point: dict[str, Any], records: dict[str, Any], rows: list[list[Any]], gpu: str,
                   stack: Stack) -> Run:
    """The simulated run of one measured point, its step model knowing the shapes the process ran before it."""
    model = step_model(records, gpu, stack)
    model.seen_shapes.update(log_shape(row) for row in rows[:point["steps"][0]])
    cb = records["cb_config"]
    budget, block = cb["max_batch_tokens"], cb["block_size"]
    capacity = kv_capacity(model, budget, block, reserve_bytes(model.gpu.capacity_bytes, None))
    config = SchedulerConfig(budget, cb["max_requests_per_batch"], True)
    load = point["load"]
    if load["kind"] == "concurrency":
        lengths = Lengths("fixed", point["prompt"]), Lengths("fixed", point["output"])
        requests = closed_loop(load["concurrency"], point["requests"], *lengths)
    else:
        arrivals = sorted(max(0.0, r["arrival_s"]) for r in point["per_request"])
        requests = Load("trace", tuple(Request(i, t, point["prompt"], point["output"]) for i, t in enumerate(arrivals)))
    return simulate(requests, model, capacity.pool(block), config)


def predicted(run: Run) -> dict[str, dict[str, float] | None]:
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


def ttft_lines(run: str, point: dict[str, Any], simulated: Run) -> list[str]:
    """Each request's TTFT, ms, in the order the point sent them: measured, then simulated."""
    measured = [r["ttft_s"] for r in sorted(point["per_request"], key=lambda r: r["i"])]
    by_id = sorted((s.request.id, s.ttft_s) for s in simulated.served)
    return [f"TTFT of each request, {point_label(run, point)}, ms: measured "
            + ", ".join(f"{t * 1e3:.0f}" for t in measured) + "; simulated "
            + ", ".join(f"{t * 1e3:.0f}" for _, t in by_id), ""]


def step_counts(row: list[Any]) -> Counts | None:
    """A logged step's sequences as {(new, cached): count}. A step log without them (an earlier harness) gives
    its decode steps as the mean cached length, which the step model prices the same to within a position's
    bytes, and its steps of whole fresh prompts of one length; its other steps are left out (None)."""
    requests, q, kv, prefilling = row[6], row[7], row[8], row[9]
    counts: Counts = {}
    if len(row) > 11:
        for new, cached, count in row[11]:
            counts[new, cached] = counts.get((new, cached), 0) + count
        return counts
    if requests > 0 and prefilling == 0:
        return {(1, round(kv / requests)): requests}
    if requests > 0 and prefilling == requests and kv == 0 and q % requests == 0:
        return {(q // requests, 0): requests}
    return None


def step_table(runs: Runs, gpu: str, stack: Stack) -> list[str]:
    """Per point, the median step measured (host time from the step's start to its end) against the step model
    for the same sequences and the same novelty: decode steps of a new attention shape, of one seen before, and
    steps with prompt tokens."""
    lines = ["| point | decode steps new / seen | decode, new shape: measured / model (ms) | error "
             "| decode, seen shape: measured / model (ms) | error | steps with prompt tokens | measured / model (ms) "
             "| error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    med = statistics.median
    for run, records, rows in runs:
        model = step_model(records, gpu, stack)
        fresh = novelty(rows)
        for point in records["points"]:
            kinds: dict[str, tuple[list[float], list[float]]] = {"new": ([], []), "seen": ([], []), "prompt": ([], [])}
            for i in range(*point["steps"]):
                row = rows[i]
                counts = step_counts(row)
                if counts is None:
                    continue
                kind = "prompt" if row[9] else ("new" if fresh[i] else "seen")
                kinds[kind][0].append(row[4] - row[0])
                kinds[kind][1].append(model.time_counts(counts, fresh[i]))
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


# A decode step this many times the median of its point's steps of the same novelty is slow; past OUTLIER times,
# a stall (left out of the fit, and here). The engine's slow steps come in runs of consecutive steps.
SLOW = 1.3


def slow_table(runs: Runs) -> list[str]:
    """Per point, its decode steps' median and mean host time (new and seen shapes apart) and the slow ones: a
    step over SLOW times its kind's median (under OUTLIER times), how many, their mean, and the longest run of
    consecutive slow steps. A point's TPOT is a mean, so its slow steps weigh in it; the step model has no term
    for them."""
    lines = ["| point | shape | decode steps | median (ms) | mean (ms) | slow steps | their mean (ms) "
             "| longest run | mean without them (ms) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for run, records, rows in runs:
        fresh = novelty(rows)
        for point in records["points"]:
            for kind in (True, False):
                steps = [(i, rows[i][4] - rows[i][0]) for i in range(*point["steps"])
                         if rows[i][9] == 0 and fresh[i] == kind]
                if len(steps) < 5:
                    continue
                median = statistics.median(t for _, t in steps)
                steps = [(i, t) for i, t in steps if t <= OUTLIER * median]
                slow = [(i, t) for i, t in steps if t > SLOW * median]
                longest = run_length = 0
                last = None
                for i, _ in slow:
                    run_length = run_length + 1 if last is not None and i == last + 1 else 1
                    longest, last = max(longest, run_length), i
                rest = [t for i, t in steps if t <= SLOW * median]
                lines.append(f"| {point_label(run, point)} | {'new' if kind else 'seen'} | {len(steps)} "
                             f"| {ms(median)} | {ms(statistics.fmean(t for _, t in steps))} | {len(slow)} | "
                             f"{ms(statistics.fmean(t for _, t in slow)) if slow else '—'} | {longest} | "
                             f"{ms(statistics.fmean(rest))} |")
    return lines + [""]


def solve(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Least squares x of rows · x = ys (normal equations, columns scaled to unit size, Gaussian elimination)."""
    n = len(rows[0])
    scale = [max(abs(r[j]) for r in rows) or 1.0 for j in range(n)]
    a = [[r[j] / scale[j] for j in range(n)] for r in rows]
    m = [[sum(r[i] * r[j] for r in a) for j in range(n)] + [sum(r[i] * y for r, y in zip(a, ys))] for i in range(n)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda k: abs(m[k][c]))
        m[c], m[pivot] = m[pivot], m[c]
        for k in range(n):
            if k != c:
                f = m[k][c] / m[c][c]
                m[k] = [x - f * y for x, y in zip(m[k], m[c])]
    return [m[i][n] / m[i][i] / scale[i] for i in range(n)]


def refill_gaps(runs: Runs) -> list[float]:
    """Each closed-loop refill's wait, seconds: a request sent after the first C, from the last request of its
    point that had finished before it (arrival + E2E, the engine's stamp of the last token) to its own arrival
    (the engine's stamp in add_request). The client's turn between the two: refill_latency_us."""
    gaps = []
    for _, records, _ in runs:
        for point in records["points"]:
            if point["load"]["kind"] != "concurrency":
                continue
            requests = sorted(point["per_request"], key=lambda r: r["i"])
            finished = [r["arrival_s"] + r["e2e_s"] for r in requests]
            for r in requests[point["load"]["concurrency"]:]:
                before = [f for f in finished if f <= r["arrival_s"]]
                if before:
                    gaps.append(r["arrival_s"] - max(before))
    return gaps


def fit_stack(runs: Runs, fit: set[str], gpu: str, base: Stack) -> Stack:
    """``base`` with kernel_gap_us, new_shape_us, attention_efficiency and kv_position_ns fitted to the fit
    points' logged steps (the module docstring), step_overhead_us 0, and refill_latency_us the median of every
    closed-loop refill's wait in the runs that hold a fit point (``refill_gaps``: measured, not fitted; a run is
    one machine's, and the wait is the host's). Exits with a line where the points leave the attention's time
    unconstrained (its fitted share not positive: points without long prompts or many KV positions)."""
    plain = base.model_copy(update={"attention_efficiency": 1.0})
    samples = []  # (host s, other ops s, attention s, positions × layers, new shape, kernels)
    for run, records, rows in runs:
        model = step_model(records, gpu, plain)
        fresh = novelty(rows)
        for point in records["points"]:
            if f"{run} {point['point']}" not in fit:
                continue
            for i in range(*point["steps"]):
                counts = step_counts(rows[i])
                if counts is None:
                    continue
                other, attention, kernels, layers = model.op_times(counts)
                samples.append((rows[i][4] - rows[i][0], other, attention, log_shape(rows[i])[1] * layers,
                                1.0 if fresh[i] else 0.0, kernels))
    if not samples:
        raise SystemExit(f"no logged steps at the fit points {sorted(fit)}")

    def least_squares(used: list[tuple[float, ...]]) -> list[float]:
        rows = [[1 / h, new / h, att / h, pos / h] for h, _, att, pos, new, _ in used]
        return solve(rows, [(h - other) / h for h, other, *_ in used])

    def modelled(x: list[float], s: tuple[float, ...]) -> float:
        return s[1] + x[0] + x[1] * s[4] + x[2] * s[2] + x[3] * s[3]

    x = least_squares(samples)
    kept = [s for s in samples if s[0] <= OUTLIER * modelled(x, s)]
    x = least_squares(kept)
    floor, plan, inverse_efficiency, per_position = x
    if inverse_efficiency <= 0:
        raise SystemExit(f"the fit points {', '.join(sorted(fit))} leave the attention's time unconstrained "
                         f"(1/attention_efficiency fitted {inverse_efficiency:.3g}): add one with long prompts or "
                         "many KV positions, such as 2048/128 at concurrency 32")
    kernels = statistics.median(s[5] for s in kept)
    residuals = sorted(abs(modelled(x, s) / s[0] - 1) for s in kept)
    print(f"fit on {len(kept)} logged steps of {', '.join(sorted(fit))} ({len(samples) - len(kept)} left out, over "
          f"{OUTLIER:g}x the first fit): floor {ms(floor)} ms a step = {kernels:.0f} kernels × "
          f"{floor / kernels * 1e6:.2f} µs; new shape {ms(plan)} ms; attention efficiency {1 / inverse_efficiency:.3f}; "
          f"{per_position * 1e9:.2f} ns per KV position and layer; |error| of a step: median "
          f"{100 * statistics.median(residuals):.1f}%, p90 {100 * residuals[int(0.9 * (len(residuals) - 1))]:.1f}%",
          file=sys.stderr)
    fitted_runs = [r for r in runs if any(f"{r[0]} {p['point']}" in fit for p in r[1]["points"])]
    gaps = refill_gaps(fitted_runs)
    refill = round(statistics.median(gaps) * 1e6, -1) if gaps else base.refill_latency_us
    if gaps:
        between = [b[0] - a[4] for _, _, rows in fitted_runs for a, b in zip(rows, rows[1:])]
        print(f"refill latency {refill:g} µs: the median of {len(gaps)} closed-loop refills "
              f"({min(gaps) * 1e6:.0f}-{max(gaps) * 1e6:.0f} µs); the engine's next step starts a median of "
              f"{statistics.median(between) * 1e6:.0f} µs after the last one ends", file=sys.stderr)
    return base.model_copy(update={
        "refill_latency_us": refill,
        "kernel_gap_us": round(floor / kernels * 1e6, 1), "step_overhead_us": 0.0,
        "new_shape_us": round(plan * 1e6, -1), "attention_efficiency": round(min(1.0, 1 / inverse_efficiency), 3),
        "kv_position_ns": round(max(0.0, per_position * 1e9), 1)})


def stack_file(stack: Stack, stem: str, records: list[str], fit: set[str], gpu: str) -> str:
    """The YAML of a fitted ``stack`` as a stack file of id ``stem``, its source naming what it was fitted to."""
    import yaml

    data = stack.model_dump(mode="json", exclude_defaults=True)
    data.pop("notes", None)  # the base stack's notes describe the machine it was fitted on, not this one
    data.update(id=stem, name=f"{stack.name}, fitted to {', '.join(records)}", source=(
        f"fitted by benchmarks/hf_cb_compare.py --fit to the step logs of {', '.join(records)} at the points "
        f"{', '.join(sorted(fit))}, with calibrated=True and the op model of {gpu}; kernel_gap_us, new_shape_us and "
        f"refill_latency_us are the host's of the machine those records were measured on"))
    order = ["id", "name", "source"]
    return yaml.safe_dump({k: data[k] for k in order} | {k: v for k, v in data.items() if k not in order},
                          sort_keys=False, width=116, allow_unicode=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="*", default=["docs/results/h200-2026-12-04-serve"],
                   help="folders of runs (each run a folder holding hf_cb_gpu.json and hf_cb_steps.json)")
    p.add_argument("--gpu", default=GPU, help="a GPU file with a measured op model (calibrated=True)")
    p.add_argument("--stack", default="hf")
    p.add_argument("--fit", action="store_true", help="fit the stack's figures to the fit points' step logs first")
    p.add_argument("--fit-points", default=",".join(FIT_POINTS),
                   help="'RUN POINT' names, comma-separated (default: both concurrency-1 points and 2048/128 at "
                        "concurrency 32)")
    p.add_argument("--write-stack", default="", metavar="FILE",
                   help="with --fit: write the fitted stack to FILE (a stack file for analyze serve --stack)")
    p.add_argument("--ttfts", default="", help="'RUN POINT' names, comma-separated: print each request's TTFT, "
                                               "measured and simulated, below the point's table")
    args = p.parse_args()
    runs = load_runs(*map(Path, args.records))
    g = rl.gpu(args.gpu)
    if g.measured is None or g.measured.op_model is None:
        raise SystemExit(f"{args.gpu}: no measured op model, which calibrated=True needs")
    fit = {name.strip() for name in args.fit_points.split(",") if name.strip()}
    ttfts = {name.strip() for name in args.ttfts.split(",") if name.strip()}
    stack = load_stack(args.stack)
    if args.write_stack and not args.fit:
        raise SystemExit("--write-stack writes a fitted stack: give --fit too")
    if args.fit:
        stack = fit_stack(runs, fit, args.gpu, stack)
    if args.write_stack:
        import yaml
        from pydantic import ValidationError

        from rooflinectl.files import write_atomic

        text = stack_file(stack, Path(args.write_stack).stem, args.records, fit, args.gpu)
        try:
            Stack.model_validate(yaml.safe_load(text))
        except ValidationError as invalid:  # what load_stack would refuse (an id or a source too long)
            raise SystemExit(f"--write-stack {args.write_stack}: {invalid.errors()[0]['msg']}") from None
        write_atomic(args.write_stack, text)
    figures = ("attention", "kernel_gap_us", "step_overhead_us", "new_shape_us", "attention_efficiency",
               "kv_position_ns", "refill_latency_us")
    print(f"Predicted: `serving.simulate` on {args.gpu}, calibrated, stack {args.stack!r}"
          f"{' (fitted)' if args.fit else ''}: " + ", ".join(f"{k} {getattr(stack, k)}" for k in figures)
          + f", fused {stack.fused or '[]'}; op model of {g.id}.\n")
    summary = ["| point | role | TTFT mean: measured / predicted (ms) | error | TPOT mean: measured / predicted (ms) "
               "| error |", "|---|---|---:|---:|---:|---:|"]
    tables: list[str] = []
    for run, records, rows in runs:
        for point in records["points"]:
            role = "fit" if f"{run} {point['point']}" in fit else "check"
            simulated = simulate_point(point, records, rows, args.gpu, stack)
            pred = predicted(simulated)
            tables += table(run, point, pred, role)
            if f"{run} {point['point']}" in ttfts:
                tables += ttft_lines(run, point, simulated)
            m, q = point["metrics"], pred
            summary.append(f"| {point_label(run, point)} | {role} | {ms(m['ttft_s']['mean'])} / "
                           f"{ms(q['ttft_s']['mean'])} | {err(q['ttft_s']['mean'], m['ttft_s']['mean']):+.0f}% "  # type: ignore[index]
                           f"| {ms(m['tpot_s']['mean'])} / {ms(q['tpot_s']['mean'])} "  # type: ignore[index]
                           f"| {err(q['tpot_s']['mean'], m['tpot_s']['mean']):+.0f}% |")  # type: ignore[index]
    print("\n".join(summary + [""] + tables))
    print("Steps, the median host time (the step log) against the step model's for the same sequences:\n")
    print("\n".join(step_table(runs, args.gpu, stack)))
    print("\n".join(slow_table(runs)))


if __name__ == "__main__":
    main()
