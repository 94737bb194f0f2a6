"""``measure --workload``'s tables: each op's predictions beside its measurement, then the step. Lays out the
record (``records.step.WorkloadRun``) and computes nothing."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..records.step import WorkloadOp, WorkloadRun
from ..units import duration, number, time_band
from .console import console, print_table

NONE = "—"


def _t(x: float | None) -> str:
    return NONE if x is None else duration(x, sep="")


def _pct(x: float | None) -> str:
    return NONE if x is None else f"{x:+.0f}%"


def _band(o: WorkloadOp) -> str:
    if o.timing is None:
        return NONE
    return time_band(o.timing.p20_s, o.timing.p80_s, sep="")


def _measured(o: WorkloadOp) -> str | Text:
    if o.error is not None:
        return Text("ERROR", style="bold red")
    if o.check is not None and not o.check.passed:
        return Text("FAILED", style="bold red")
    return _t(o.timing.median_s if o.timing else None)


def ops_table(run: WorkloadRun) -> Table:
    """One row an op: ×count, predicted (spec roofs, calibrated), measured, p20–p80, errors, rates, roof share; a
    CPU run's record holds no prediction (measure.step.run), and its table has no column for one."""
    gpu = run.device == "cuda"
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    t.add_column("op", no_wrap=True)
    predicted = ("spec", "err", "calib.", "err") if gpu else ()
    for col in ("×", *predicted, "measured", "p20–p80", "GB/s", "TF/s", *(("roof",) if gpu else ())):
        t.add_column(col, justify="right", no_wrap=True)
    for o in run.ops:
        # The one formatter (units.number): a CPU op's 0.0554 GB/s is "0.0554", not "0"
        rates = [NONE if o.achieved_gbps is None else number(o.achieved_gbps),
                 NONE if o.achieved_tflops is None else number(o.achieved_tflops)]
        if not gpu:
            t.add_row(o.name, str(o.count), _measured(o), _band(o), *rates)
            continue
        t.add_row(o.name, str(o.count), _t(o.predicted_spec_s), _pct(o.error_spec_pct), _t(o.predicted_calibrated_s),
                  _pct(o.error_calibrated_pct), _measured(o), _band(o), *rates,
                  NONE if o.roof_pct is None else f"{o.roof_pct:.0f}%")
    return t


def step_lines(run: WorkloadRun) -> list[str]:
    s = run.step
    if s is None:
        return []
    how = "one CUDA graph, replayed" if s.capture == "cuda_graph" else "run in sequence"
    layers = {"distinct": "every layer its own weights and KV cache",
              "shared_weights": "one layer's weights replayed for every layer",
              "shared_weights_and_caches": "one layer's weights and KV caches replayed"}[s.layers]
    lines = [f"step: Σ ops (each × its count) {_t(s.sum_ops_s)}; the whole step ({how}; {layers}) "
             f"{_t(s.timing.median_s if s.timing else None)}"
             + (f" (p20–p80 {time_band(s.timing.p20_s, s.timing.p80_s, sep='')})" if s.timing else "")]
    if run.device == "cuda":
        lines.append(f"step predicted: spec roofs {_t(s.predicted_spec_s)} ({_pct(s.error_spec_pct)}), calibrated "
                     f"{_t(s.predicted_calibrated_s)} ({_pct(s.error_calibrated_pct)})")
    if s.error:
        lines.append(f"step: error: {s.error}")
    if s.output_finite is False:
        lines.append("step: the logits hold NaN or inf")
    return lines


def print_workload_run(run: WorkloadRun, out: Console | None = None) -> None:
    c = out or console()
    w = run.workload
    size = f"context {w.kv_len}" if w.phase == "decode" else f"{w.tokens_per_seq} tokens"
    fused = f", fused {','.join(w.fused)}" if w.fused else ""
    spec = f", against the spec {run.gpu.spec}" if run.gpu.spec else ""
    c.print(f"{w.model} {w.phase}, batch {w.batch:,}, {size}, {w.dtype}, {w.attention} attention{fused} on "
            f"{run.gpu.name}{spec}")
    # What a narrow terminal leaves out first (print_table says which): never a cell cut to "1,…"
    print_table(c, ops_table(run), optional=("p20–p80", "TF/s", "calib.", "roof"))
    lines = step_lines(run)
    for o in run.ops:
        if o.error:
            lines.append(f"{o.name}: error: {o.error}")
        elif o.check is not None and not o.check.passed:
            lines.append(f"{o.name}: check failed: relative error {o.check.rel_error:.2e} > {o.check.tolerance:.0e}"
                         + (f" ({o.check.note})" if o.check.note else ""))
    by_runner: dict[str, list[str]] = {}
    for o in run.ops:
        by_runner.setdefault(o.runner + (f" ({o.backend})" if o.backend else ""), []).append(o.name)
    lines += [f"{', '.join(names)}: {runner}" for runner, names in by_runner.items()]
    rates = "GB/s, TF/s: the op's bytes and FLOPs over the measured time"
    if run.device == "cuda":
        lines.append(f"measured: median (CUDA-graph replays over input sets rotated past 4× the L2); spec (the "
                     f"spec's roofs), calib. (the calibrated model): the predicted time of one instance; err: "
                     f"predicted / measured − 1; roof: spec / measured (100% = on the roofline); {rates}")
    else:
        lines.append(f"measured: median (CPU wall time, time.perf_counter), one instance; {rates}")
    lines += run.notes
    lines.append(f"torch {run.torch_version}, triton {run.triton_version}; {run.date}")
    for line in lines:
        c.print(line, highlight=False, markup=False)
    # One line however long: rich's wrap would break the command at a blank, and a paste would run two.
    c.print(f"reproduce: {run.command}", highlight=False, markup=False, soft_wrap=True)
