"""The profile's tables: per op, the engine's prediction beside what ran; the overhead kernels by name; the kernels
outside every op; the summary line. They lay out the record and compute nothing."""

from __future__ import annotations

import re
import textwrap

from rich import box
from rich.console import Console
from rich.table import Table

from ..records.profile import KernelTime, ProfileRecord
from ..units import duration, number
from .console import print_table

# Kernel names are long templates; a table cell keeps this many characters of the short name.
NAME_WIDTH = 44
# The overhead table lists the largest this many names; the rest are summed on one line.
TOP_OVERHEAD = 12


def _t(x: float | None) -> str:
    return "-" if x is None else duration(x)


# A rate below this shows as "<0.001" (a CPU run's tiny model): the table stays within 100 columns; --json has
# every digit.
SMALLEST_RATE = 0.001


def _n(x: float | None) -> str:
    if x is None:
        return "-"
    return f"<{SMALLEST_RATE:g}" if 0 < x < SMALLEST_RATE else number(x)


def _table() -> Table:
    return Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True, title_justify="left")


def _cut(name: str, width: int = NAME_WIDTH) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def headline(r: ProfileRecord) -> str:
    clock = "GPU kernel time" if r.clock == "gpu kernels" else "CPU time, not a GPU figure"
    graph = ", replayed from a CUDA graph" if r.timer == "cuda_graph" else ", eager"
    return (f"{r.workload}\n{r.gpu.name}{graph}; {r.attn_implementation} attention; {clock}\n"
            f"torch {r.torch_version}, transformers {r.transformers_version}, {r.date}")


def _prose(con: Console, text: str) -> None:
    """Prose wrapped to the console's width with each number on the line of its unit ("94.5 µs", never "94.5"
    at a line's end and "µs" on the next): textwrap breaks only at the spaces left (rich would break anywhere)."""
    glued = re.sub(r"(\d) (?=(ns|µs|ms|s|min|h|launches|calls|kernels|CPU ops)\b)", "\\1\u00a0", text)
    wrapped = textwrap.fill(glued, width=max(40, con.width), break_long_words=False, break_on_hyphens=False)
    con.print(wrapped.replace("\u00a0", " "), soft_wrap=True)


# What the ops table's times are: one instance's, as measure --workload's columns are; the record keeps the step's.
PER_INSTANCE = ("predicted, calib. and measured: one instance's time (the step's over its × count, as measure "
                "--workload gives them); overhead: the step's")


def _each(total_s: float | None, count: int) -> float | None:
    return None if total_s is None else total_s / count


def ops_table(r: ProfileRecord) -> Table:
    """One row an op: its count, one instance's predicted and measured time (the record's step totals over the
    count), the CPU ops or kernels that ran for it, its rates, and the step's overhead in its range."""
    gpu = r.clock == "gpu kernels"
    calibrated = any(o.calibrated_s is not None for o in r.ops)
    t = _table()
    t.add_column("op", no_wrap=True)
    t.add_column("×", justify="right", no_wrap=True)
    t.add_column("predicted", justify="right", no_wrap=True)
    if calibrated:
        t.add_column("calib.", justify="right", no_wrap=True)
    t.add_column("measured", justify="right", no_wrap=True)
    t.add_column("kernels" if gpu else "CPU ops", justify="right", no_wrap=True)
    t.add_column("GB/s", justify="right", no_wrap=True)
    t.add_column("TFLOP/s", justify="right", no_wrap=True)
    if gpu:
        t.add_column("%roof", justify="right", no_wrap=True)
    t.add_column("overhead", justify="right", no_wrap=True)  # its kernels by name: the overhead table
    for o in r.ops:
        row = [o.op, str(o.count), _t(_each(o.predicted_s, o.count))]
        if calibrated:
            row.append(_t(_each(o.calibrated_s, o.count)))
        row += [_t(_each(o.measured_s, o.count)), f"{o.launches:,}", _n(o.achieved_gbps), _n(o.achieved_tflops)]
        if gpu:
            row.append("-" if o.roof_pct is None else f"{o.roof_pct:.0f}")
        row.append(duration(sum(k.time_s for k in o.overhead)) if o.overhead else "-")
        t.add_row(*row)
    return t


def kernels_table(items: list[tuple[str, KernelTime]], what: str) -> Table:
    """Overhead or unattributed kernels by name, largest first, with the op they ran in ('' for none)."""
    t = _table()
    t.add_column(what, no_wrap=True)
    t.add_column("in" if any(where for where, _ in items) else "", no_wrap=True)
    t.add_column("time", justify="right", no_wrap=True)
    t.add_column("n", justify="right", no_wrap=True)
    t.add_column("%step", justify="right", no_wrap=True)
    ranked = sorted(items, key=lambda x: (-x[1].time_s, x[1].name))
    for where, k in ranked[:TOP_OVERHEAD]:
        t.add_row(_cut(k.name), where, duration(k.time_s), f"{k.launches:,}", f"{k.step_pct:.1f}")
    rest = ranked[TOP_OVERHEAD:]
    if rest:
        t.add_row(f"{len(rest)} more names", "", duration(sum(k.time_s for _, k in rest)),
                  f"{sum(k.launches for _, k in rest):,}", f"{sum(k.step_pct for _, k in rest):.1f}")
    return t


def totals_line(r: ProfileRecord) -> str:
    what = "kernels" if r.clock == "gpu kernels" else "CPU ops"
    return (f"step {duration(r.step_s)} (wall); in {what} {duration(r.profiled_s)} = counted work "
            f"{duration(r.work_s)} + overhead {duration(r.overhead_s)} + unattributed "
            f"{duration(r.unattributed_s)}; {r.launches:,} {what}")


def print_profile(con: Console, r: ProfileRecord) -> None:
    con.print(headline(r))
    # What a narrow terminal leaves out first (print_table says which): never a cell cut to "1,…"
    print_table(con, ops_table(r), optional=("overhead", "kernels", "CPU ops", "TFLOP/s", "calib."))
    _prose(con, PER_INSTANCE)
    overhead = [(o.op, k) for o in r.ops for k in o.overhead]
    if overhead:
        con.print("Overhead: in an op's range, not counted by the roofline")
        con.print(kernels_table(overhead, "kernel" if r.clock == "gpu kernels" else "CPU op"))
    if r.unattributed:
        con.print("Unattributed: outside every op")
        con.print(kernels_table([("", k) for k in r.unattributed], "kernel" if r.clock == "gpu kernels"
                                else "CPU op"))
    _prose(con, totals_line(r))
    _prose(con, r.summary)
    for note in r.notes:
        _prose(con, f"Note: {note}")
