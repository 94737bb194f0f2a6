"""Tables of measurement runs and calibrations: they lay out the harness's records and compute nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from ..records.kernel import BASELINE_LABELS, MeasurementFile, ShapeRecord, Timing
from ..units import duration, plural, si, time_band
from .console import console, print_table

if TYPE_CHECKING:
    from ..kernels.registry import KernelInfo
    from ..records.calibration import Calibration

STATUS_STYLE = {"passed": "green", "checked": "green", "failed": "bold red", "error": "bold red"}


# --- measure --------------------------------------------------------------------------------------------------


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def _time(x: float | None) -> str:
    return "-" if x is None else duration(x, sep=" ")


# What a figure's timer is called in a table's "timer" column (records.Timer -> the word).
TIMER_WORD = {"cuda_graph": "graph", "events": "events"}


def _timer(t: Timing | None) -> str:
    return TIMER_WORD[t.timer] if t else "-"


def _table(title: str | None) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)


def _check_cell(r: ShapeRecord) -> Text:
    if r.status == "error":
        return Text("ERROR", style=STATUS_STYLE["error"])
    c = r.correctness
    assert c is not None
    word = "ok" if c.passed else "FAILED"
    return Text(f"{word} {c.rel_error:.1e}", style=STATUS_STYLE[r.status])


def headline(run: MeasurementFile) -> str:
    first = run.records[0] if run.records else None
    what = f"{first.kernel} {first.dtype}" if first else "measure"
    spec = f", against the spec {run.gpu.spec}" if run.gpu.spec else ""
    return f"{what} on {run.gpu.name}{spec}"


def results_table(run: MeasurementFile) -> Table:
    """Per shape: the check, and when timed, the time, the rates and the share of the roof."""
    t = _table(None)
    t.add_column("shape", no_wrap=True)
    t.add_column("check", no_wrap=True)
    timed = not run.interpret
    cols = ("time", "p20–p80", "timer", "GB/s", "TFLOP/s", "predicted", "%spec", "%meas") if timed else (
        "tolerance", "predicted")
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for r in run.records:
        row: list[str | Text] = [r.shape_text, _check_cell(r)]
        if timed:
            row += [_time(r.time_s), time_band(r.timing.p20_s, r.timing.p80_s) if r.timing else "-", _timer(r.timing),
                    _num(r.achieved_gbps), _num(r.achieved_tflops, ",.1f"), _time(r.predicted_time_s),
                    _num(r.spec_roof_pct, ".0f"), _num(r.measured_roof_pct, ".0f")]
        else:
            row += [f"{r.correctness.tolerance:.0e}" if r.correctness else "-", _time(r.predicted_time_s)]
        t.add_row(*row)
    return t


def baselines_table(run: MeasurementFile) -> Table:
    """Per shape and baseline: its time, rate and error, and the kernel's speedup over it."""
    t = _table("Baselines: the same op by torch (×: baseline time / kernel time)")
    t.add_column("shape", no_wrap=True)
    # Not wrapped, like the rest: in an 80-column terminal rich squeezed this, the one column that could wrap, to
    # nothing, and the rows lost the name of their baseline; now every column gives up its share.
    t.add_column("baseline", no_wrap=True)
    for col in ("time", "p20–p80", "timer", "GB/s", "TFLOP/s", "rel. err", "kernel ×"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in run.records:
        for b in r.baselines:
            if b.error:
                t.add_row(r.shape_text, b.name, Text("error (below)", style="red"), "", "", "", "", "", "")
                continue
            t.add_row(r.shape_text, BASELINE_LABELS[b.name], _time(b.time_s),
                      time_band(b.timing.p20_s, b.timing.p80_s) if b.timing else "-", _timer(b.timing),
                      _num(b.achieved_gbps),
                      _num(b.achieved_tflops, ",.1f"), _num(b.rel_error, ".1e"), _num(b.speedup, ".2f"))
    return t


def anatomy_table(run: MeasurementFile) -> Table:
    t = _table(ANATOMY_HEADING)
    t.add_column("shape", no_wrap=True)
    t.add_column("function", overflow="fold", min_width=10)
    for col in ("grid", "warps", "threads", "regs", "spills", "smem", "per SM", "occup.", "waves"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("limit")
    for r in run.records:
        for launch in r.launches:
            occ = "-" if launch.occupancy is None else f"{launch.occupancy:.0%}"
            t.add_row(
                r.shape_text, launch.function, "×".join(str(g) for g in launch.grid), _num(launch.num_warps, "d"),
                _num(launch.threads_per_program, "d"), _num(launch.n_regs, "d"), _num(launch.n_spills, "d"),
                "-" if launch.shared_bytes is None else si(launch.shared_bytes, "B", sep=""),
                _num(launch.programs_per_sm, "d"), ("≤" + occ) if launch.occupancy_upper_bound else occ,
                _num(launch.waves, "d"), launch.limiter or "-",
            )
    return t


def fusion_table(run: MeasurementFile) -> Table:
    """What the fusion buys by the engine's count: the fused op against the operations it replaces."""
    t = _table(FUSION_HEADING)
    for col in ("shape", "unfused ops", "bytes unfused", "fused", "predicted unfused", "fused", "measured"):
        t.add_column(col, justify="left" if col in ("shape", "unfused ops") else "right", no_wrap=col != "unfused ops")
    for r in run.records:
        if not r.unfused:
            continue
        t.add_row(
            r.shape_text, " + ".join(u.op for u in r.unfused), si(r.unfused_bytes or 0, "B"),
            si(r.bytes, "B"), _time(r.unfused_predicted_time_s), _time(r.predicted_time_s), _time(r.time_s),
        )
    return t


# Below this many columns the fusion and launch-anatomy tables are written as one wrapped line per row: as
# tables at 80 columns their headings were cut and a kernel's name wrapped over three lines.
TABLE_MIN_WIDTH = 100
FUSION_HEADING = "Fusion: the fused kernel against the operations it replaces (engine's count, spec roofs)"
ANATOMY_HEADING = "Launch anatomy: each Triton launch of the checked run (occupancy on the spec's limits)"


def fusion_lines(run: MeasurementFile) -> list[str]:
    """The fusion table as lines: '1x40x24: rmsnorm + linear, 2.29 kB unfused → 2.13 kB fused; predicted …'."""
    return [f"{r.shape_text}: {' + '.join(u.op for u in r.unfused)}, {si(r.unfused_bytes or 0, 'B')} unfused → "
            f"{si(r.bytes, 'B')} fused; predicted {_time(r.unfused_predicted_time_s)} → {_time(r.predicted_time_s)}; "
            f"measured {_time(r.time_s)}" for r in run.records if r.unfused]


def anatomy_lines(run: MeasurementFile) -> list[str]:
    """The launch-anatomy table as lines, one per launch, each naming its kernel whole."""
    out = []
    for r in run.records:
        for launch in r.launches:
            occ = "-" if launch.occupancy is None else f"{launch.occupancy:.0%}"
            smem = "-" if launch.shared_bytes is None else si(launch.shared_bytes, "B")
            out.append(
                f"{r.shape_text} {launch.function}: grid {'×'.join(str(g) for g in launch.grid)}, "
                f"{_num(launch.num_warps, 'd')} warps ({_num(launch.threads_per_program, 'd')} threads), "
                f"{_num(launch.n_regs, 'd')} registers, {_num(launch.n_spills, 'd')} spills, smem {smem}; "
                f"{_num(launch.programs_per_sm, 'd')} per SM, occupancy {('≤' + occ) if launch.occupancy_upper_bound else occ}, "
                f"{'- waves' if launch.waves is None else plural(launch.waves, 'wave')}, "
                f"limit {launch.limiter or '-'}")
    return out


def _grouped(items: list[tuple[str, str]]) -> list[str]:
    """('shape', 'message') pairs -> one line per message, naming the shapes it holds for."""
    shapes: dict[str, list[str]] = {}
    for shape, message in items:
        shapes.setdefault(message, [])
        if shape not in shapes[message]:
            shapes[message].append(shape)
    return [f"{', '.join(where)}: {message}" for message, where in shapes.items()]


def print_run(run: MeasurementFile) -> None:
    """The run's tables and notes."""
    c = console()
    c.print(headline(run), highlight=False, markup=False)
    # What a narrow terminal leaves out first (print_table says which): never a cell cut to "1,…"
    print_table(c, results_table(run), optional=("timer", "p20–p80", "%meas", "TFLOP/s", "predicted"))
    if any(r.baselines for r in run.records):
        print_table(c, baselines_table(run), optional=("timer", "p20–p80", "rel. err", "TFLOP/s"))
    narrow = c.width < TABLE_MIN_WIDTH
    if any(r.unfused for r in run.records):
        if narrow:
            c.print()
            for line in [FUSION_HEADING, *fusion_lines(run)]:
                c.print(line, highlight=False, markup=False)
        else:
            c.print(fusion_table(run))
    if any(r.launches for r in run.records):
        if narrow:
            c.print()
            for line in [ANATOMY_HEADING, *anatomy_lines(run)]:
                c.print(line, highlight=False, markup=False)
            c.print()
        else:
            c.print(anatomy_table(run))
    items: list[tuple[str, str]] = []
    for r in run.records:
        if r.error:
            items.append((r.shape_text, f"error: {r.error}"))
        items += [(r.shape_text, f"baseline {b.name}: {b.error}") for b in r.baselines if b.error]
        for launch in r.launches:
            where = f"{r.shape_text} {launch.function}"
            items += [(where, f"warning: {w}") for w in launch.warnings]
            if launch.note:
                items.append((where, f"anatomy: {launch.note}"))
        items += [(r.shape_text, n) for n in r.notes if not n.startswith("checked in the Triton interpreter")]
    lines = _grouped(items) + run.notes
    g = run.gpu
    versions = f"torch {run.torch_version}, triton {run.triton_version}"
    if g.driver:
        versions += f", driver {g.driver}"
    if run.interpret:
        lines.append("checked correctness only, in Triton's interpreter on the CPU: nothing was timed "
                     "(run without --interpret on a GPU for speed)")
    else:
        lines.append("time: median of the timed runs, p20–p80 the band around it; timer: graph = replays of a CUDA "
                     "graph of the runs over the rotated inputs (no launch gaps, no L2 flush), events = CUDA events "
                     "around each run, the L2 flushed before each (launch gaps and the flush's write-back included)"
                     f"; this run asked for {TIMER_WORD[run.timer or 'events']}. %spec, %meas: the engine's "
                     f"predicted time under the spec's roofs, or under the ceilings measured in this run, over the "
                     f"measured time (100 = on the roofline)")
        cl = run.ceilings
        if cl and cl.copy_bandwidth_gbps:
            parts = [f"copy {cl.copy_bandwidth_gbps:,.0f} GB/s"]
            for d, v in cl.tensor_tflops.items():
                check = cl.tensor_tflops_check.get(d)
                again = f" ({TIMER_WORD[cl.check_timer]} {check:,.0f})" if check and cl.check_timer else ""
                parts.append(f"{d} matmul {v:,.0f} TFLOP/s{again}")
            how = f", timed by {TIMER_WORD[cl.timer]}" if cl.timer else ""
            lines.append(f"ceilings measured in this run{how}: " + ", ".join(parts))
            lines += [f"ceilings: {n}" for n in cl.notes]
    lines.append(f"{versions}; {run.date}")
    for line in lines:
        c.print(line, highlight=False, markup=False)
    # One line however long: rich's wrap would break the command at a blank, and a paste would run two.
    c.print(f"reproduce: {run.command}", highlight=False, markup=False, soft_wrap=True)


def list_table(kernels: list[KernelInfo]) -> Table:
    t = Table(title="Kernels", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("name", no_wrap=True)
    t.add_column("summary")
    for k in kernels:
        t.add_row(k.name, k.summary)
    return t


# --- the commands --------------------------------------------------------------------------------------------


def print_calibration(done: Calibration) -> None:
    m = done.measured
    t = Table(title=f"Measured on {m.device_name} ({m.date})", title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("ceiling")
    t.add_column("measured", justify="right")
    t.add_column(f"spec {done.spec.id}", justify="right")
    t.add_column("of spec", justify="right")
    check = "events" if m.timer == "cuda_graph" else "graph"
    t.add_column(f"check ({check})", justify="right")
    for row in done.rows:
        places = ",.0f" if row.unit == "GB/s" else ",.1f"
        t.add_row(row.ceiling, f"{row.measured:{places}} {row.unit}",
                  _num(row.spec, places) + (f" {row.unit}" if row.spec else ""),
                  "-" if row.of_spec is None else f"{row.of_spec:.0%}",
                  "-" if row.check is None else f"{row.check:{places}} ({row.check_gap:+.1%})")
    c = console()
    c.print(t)
    if m.timer:
        c.print(f"timed by {TIMER_WORD[m.timer]} after the clocks' warm-up; the copy by an elementwise kernel on "
                f"the SMs; check: each matmul timed again by {check} in the same run", highlight=False, markup=False)
    for n in done.notes:
        c.print(n, highlight=False, markup=False)
    if m.op_model is not None:
        om = m.op_model
        points = sum(len(cv.points) for cv in om.curves)
        curves = ", ".join(f"{cv.op_class} {cv.bound}-bound ({len(cv.points)})" for cv in om.curves)
        c.print(f"op model: {plural(points, 'probe point')} in {plural(len(om.curves), 'curve')} ({curves}); "
                f"launch floor {duration(om.launch_floor_s)}; 'rooflinectl hardware show {done.output}' lists "
                f"them", highlight=False, markup=False)
    c.print(f"wrote {done.output} (id {done.written.id}); use it: rooflinectl analyze --calibrated --gpu "
            f"{done.output}", highlight=False, markup=False)
