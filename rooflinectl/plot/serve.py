"""``plot serve``: a serving engine's latency against its load, and its batch and KV cache over time.

Left: TTFT and TPOT (p50 solid, p90 dashed, p99 dotted; ms, log scale) against the load, one point per simulated
run (concurrency or request rate, log scale). Right: the most loaded run's timeline, the sequences in each step
and the KV blocks in use (of the cache's capacity, dashed). The runs are ``serving.metrics.Simulation`` objects;
this module only draws them. matplotlib is imported inside ``draw_serve``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..files import write_atomic
from ..serving.metrics import Simulation, Stats
from ..units import number
from .chart import GPU_COLORS, check_output

SIZE_IN = (12.0, 5.4)
DPI = 150
PERCENTILES = (("p50", "-"), ("p90", "--"), ("p99", ":"))


def load_value(s: Simulation) -> float:
    """The run's load on the x axis: its clients (closed loop) or its requests per second (open loop)."""
    return float(s.load.concurrency) if s.load.kind == "concurrency" else s.load.rate


def draw_serve(runs: Sequence[Simulation], title: str, path: Path) -> Any:
    """Draw the runs to ``path`` (format from its extension); returns the figure."""
    check_output(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False}):
        fig, (left, right) = plt.subplots(1, 2, figsize=SIZE_IN)
        try:
            _latency(left, runs)
            _timeline(right, max(runs, key=load_value))
            fig.suptitle(title, fontsize=10)
            fig.tight_layout()
            buffer = io.BytesIO()
            fig.savefig(buffer, dpi=DPI, format=Path(path).suffix.lower().lstrip("."))
        except (OSError, ValueError) as err:
            plt.close(fig)
            raise UserError(f"cannot draw {path}: {' '.join(str(err).split())[:200]}") from None
        write_atomic(path, buffer.getvalue(), "-o")
    return fig


def _latency(ax: Any, runs: Sequence[Simulation]) -> None:
    ordered = sorted(runs, key=load_value)
    x = [load_value(s) for s in ordered]
    for (metric, label), color in zip((("ttft", "TTFT"), ("tpot", "TPOT")), GPU_COLORS):
        for pct, style in PERCENTILES:
            stats: list[Stats | None] = [getattr(s.run, metric) for s in ordered]
            points = [(xi, getattr(st, pct) * 1e3) for xi, st in zip(x, stats) if st is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], linestyle=style, color=color, marker="o",
                        markersize=3, linewidth=1.4, label=f"{label} {pct}")
    closed = ordered[0].load.kind == "concurrency"
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    ax.set_xscale("log")
    ax.set_yscale("log")
    # Plain numbers, never an exponent (text.parse_math is off, so matplotlib's 10^n labels would print as TeX).
    ax.xaxis.set_major_locator(FixedLocator(x))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    # Labels at 1, 2 and 5 of each decade, and at every integer multiple where the values span less than a
    # decade and a half (TTFT 34 to 68 ms had no label at all with decades alone).
    values = [y for line in ax.get_lines() for y in line.get_ydata() if y > 0]
    span = max(values) / min(values) if values else 10.0
    subs = (1.0, 2.0, 5.0) if span >= 30 else tuple(float(k) for k in range(1, 10))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    ax.set_xlabel("concurrent clients (closed loop)" if closed else "requests per second (Poisson)")
    ax.set_ylabel("ms")
    ax.set_title("latency against load", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, ncol=2)


def _timeline(ax: Any, s: Simulation) -> None:
    from matplotlib.ticker import MaxNLocator

    points = s.run.timeline
    t = [p.time_s for p in points]
    ax.plot(t, [p.sequences for p in points], color=GPU_COLORS[0], linewidth=1.0, label="sequences in the step")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("sequences in the step")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count: no 0.96 … 1.04 ticks for a steady 1
    ax.set_ylim(bottom=0)
    kv = ax.twinx()
    kv.plot(t, [p.kv_blocks for p in points], color=GPU_COLORS[1], linewidth=1.0, label="KV blocks in use")
    kv.axhline(s.run.kv_blocks, color=GPU_COLORS[1], linestyle="--", linewidth=0.8, label="KV blocks held")
    kv.set_ylabel("KV blocks")
    kv.set_ylim(0, s.run.kv_blocks * 1.05)
    load = f"{s.load.concurrency:,} clients" if s.load.kind == "concurrency" else f"{s.load.rate:g} requests/s"
    ax.set_title(f"the most loaded run ({load}): batch and KV cache", fontsize=10)
    lines = ax.get_legend_handles_labels()
    more = kv.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper right")
