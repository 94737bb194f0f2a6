"""The GPU specs as rich tables and JSON: ``hardware list`` and ``hardware show``. Formats; computes nothing.

``hardware show`` prints each number once: the spec with its numbered sources, the measured ceilings when the
file has them, then the memory hierarchy (``render.hierarchy``), which carries the ridge points of every level
(HBM's included) and the dense peaks of the units.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..specs.hardware import GPU, Sourced
from ..units import duration, number
from .comm import fit_table
from .hierarchy import gpu_hierarchy_json, gpu_hierarchy_view


def gpu_table(gpus: list[GPU]) -> Table:
    """One row per GPU: HBM, bandwidth, the 16-bit tensor peak (bf16, else fp16) and its ridge against HBM."""
    table = Table(title="GPUs ('rooflinectl hardware show ID' for one in full)", title_justify="left",
                  box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True)
    # One alias a line, and the column as wide as the longest, so that none is folded mid-word (at 80 columns
    # "rtx-pro-6000-works" / "tation": the first part, copied, was an unknown GPU); the peak's header takes two
    # lines to leave it the room.
    table.add_column("aliases", overflow="fold", min_width=max((len(a) for g in gpus for a in g.aliases), default=7))
    for col in ("HBM", "GB/s", "bf16\nTFLOP/s", "ridge"):
        table.add_column(col, justify="right", no_wrap=True)
    for g in gpus:
        roofs = g.roofs()
        dtype = "bf16" if "bf16" in roofs.tensor_tflops else "fp16"
        table.add_row(
            g.id,
            Text("\n".join(g.aliases)),  # a Text: a name from a user's file is never markup (render.console)
            f"{g.memory.hbm_capacity_gib:g} GiB",
            f"{g.memory.hbm_bandwidth_gbps:,.0f}",
            number(roofs.tensor_tflops[dtype], 4) + ("" if dtype == "bf16" else " fp16"),
            number(roofs.ridge(dtype)),
        )
    return table


def gpus_json(gpus: list[GPU]) -> list[dict[str, Any]]:
    """``hardware list --json``: each spec as its file gives it."""
    return [g.model_dump() for g in gpus]


def gpu_json(g: GPU) -> dict[str, Any]:
    """``hardware show --json``: the spec as its file gives it, and the memory hierarchy under "hierarchy"."""
    return {**g.model_dump(), "hierarchy": gpu_hierarchy_json(g)}


def _marked(section: Sourced, field: str, text: str) -> str:
    """``text``, flagged "(derived)" or "(estimated)" when no datasheet gives ``field`` (``Sourced.derivation``)."""
    how = section.derivation(field)
    return text if how is None else f"{text} ({how})"


def _sm_row(g: GPU) -> str | None:
    """"132 × 1980 MHz"; the count alone where no clock is given; None for a part without an SM count."""
    if g.sm_count is None:
        return None
    return f"{g.sm_count} × {g.boost_clock_mhz:g} MHz" if g.boost_clock_mhz else f"{g.sm_count} (no clock given)"


def _spec_table(g: GPU, marks: dict[str, str]) -> Table:
    """The spec's figures, each row with the mark of its section's source (``marks``: section name -> "[n]").
    A figure the file does not give has no row."""
    m, lim = g.memory, g.limits
    spec = Table(title=Text(f"{g.name} ({g.id})"), title_justify="left", box=box.SIMPLE_HEAD)
    spec.add_column("field", no_wrap=True)
    spec.add_column("value", overflow="fold")
    spec.add_column("src", no_wrap=True)
    cc = f" (sm_{g.compute_capability.replace('.', '')})" if g.compute_capability else ""
    l2_bw = f", {_marked(m, 'l2_bandwidth_gbps', f'{m.l2_bandwidth_gbps:,.0f} GB/s')}" if m.l2_bandwidth_gbps else ""
    smem_bw = (f", {_marked(m, 'smem_bandwidth_gbps', f'{m.smem_bandwidth_gbps:,.0f} GB/s')} in all"
               if m.smem_bandwidth_gbps else "")
    mem = marks["memory"]
    rows: list[tuple[str, str, str] | None] = [
        ("vendor / architecture", f"{g.vendor} {g.architecture}{cc}", ""),
        None if (sms := _sm_row(g)) is None else ("SMs × boost clock", sms, ""),
        ("HBM", f"{_marked(m, 'hbm_capacity_gib', f'{m.hbm_capacity_gib:g} GiB')} {m.hbm_type}, "
                f"{_marked(m, 'hbm_bandwidth_gbps', f'{m.hbm_bandwidth_gbps:,.0f} GB/s')}", mem),
        None if m.l2_size_mib is None else ("L2", f"{_marked(m, 'l2_size_mib', f'{m.l2_size_mib:g} MiB')}{l2_bw}", mem),
        None if m.smem_per_sm_kib is None else (
            "shared memory / SM", f"{m.smem_per_sm_kib:g} KiB"
            + (f" of a {m.l1_smem_per_sm_kib:g} KiB L1" if m.l1_smem_per_sm_kib is not None else "") + smem_bw, mem),
        None if m.register_file_per_sm_kib is None else (
            "registers / SM", f"{m.register_file_per_sm_kib:g} KiB"
            + (f" ({lim.registers_per_sm:,} × 32-bit)" if lim else ""), f"{mem} {marks['limits']}" if lim else mem),
        None if lim is None else (
            "limits / SM", f"{lim.max_warps_per_sm} warps of {lim.warp_size}, {lim.max_blocks_per_sm} blocks, "
                           f"{lim.max_smem_per_block_kib:g} KiB shared memory per block", marks["limits"]),
    ]
    if g.interconnect:
        ic = g.interconnect
        rows.append(("interconnect", f"{ic.name}, {_marked(ic, 'bandwidth_gbps', f'{ic.bandwidth_gbps:,.0f} GB/s')} "
                                     f"both directions "
                     f"({ic.per_direction_gbps:,.0f} each way)", marks["interconnect"]))
        rows.append(("collective latency", f"{ic.latency_us:g} µs ({ic.derivation('latency_us') or 'datasheet'})",
                     marks["interconnect"]))
        su = ic.scale_up
        if su is not None and su.topology is not None:
            how = ("behind a switch: any group at the whole bandwidth" if su.topology == "switch" else
                   f"a full mesh: g of them reach (g − 1)/{su.gpus - 1} of the bandwidth")
            rows.append(("scale-up domain", f"{su.gpus} GPUs, {how}", marks["interconnect"]))
    for row in rows:
        if row is not None:
            spec.add_row(*(Text(cell) for cell in row))  # names and sources from the file: never markup
    return spec


def _measured_table(g: GPU) -> Table | None:
    """The calibrated ceilings beside the spec's figures (``rooflinectl calibrate``), when the file has them."""
    mm = g.measured
    if mm is None or mm.copy_bandwidth_gbps is None:  # none, or the collectives alone (_comm_table)
        return None
    m, c = g.memory, g.compute
    measured = Table(title=Text(f"Measured ceilings ({mm.device_name}, {mm.date})"), title_justify="left")
    measured.add_column("what")
    measured.add_column("measured", justify="right")
    measured.add_column("spec", justify="right")
    measured.add_row("copy bandwidth", f"{mm.copy_bandwidth_gbps:,.0f} GB/s", f"{m.hbm_bandwidth_gbps:,.0f} GB/s")
    rows: list[tuple[str, str, float, float | None]]
    rows = [("tensor", dtype, tf, c.tensor_tflops.get(dtype)) for dtype, tf in mm.tensor_tflops.items()]
    rows += [("vector", dtype, tf, c.vector_tflops.get(dtype)) for dtype, tf in mm.vector_tflops.items()]
    for unit, dtype, tf, spec_tf in rows:
        measured.add_row(f"{unit} {dtype}", f"{number(tf, 4)} TFLOP/s", "—" if spec_tf is None else f"{number(spec_tf, 4)} TFLOP/s")
    return measured


def _op_model_table(g: GPU) -> Table | None:
    """The calibrated op model (``calibrate``), when the file has one: each curve's class and bound, its points
    (roofline time → measured), and the range of measured / roofline over them (engine/calibrated.py)."""
    m = g.measured.op_model if g.measured else None
    if m is None:
        return None
    table = Table(title=Text(f"Calibrated op model ({m.timer} timer, launch floor {duration(m.launch_floor_s)})"),
                  title_justify="left", caption=Text(f"probed: {m.grid}"), caption_justify="left")
    table.add_column("class")
    table.add_column("bound")
    table.add_column("points: roofline → measured", overflow="fold")
    table.add_column("measured / roofline", justify="right", no_wrap=True)
    for c in m.curves:
        ratios = [p.measured_s / p.roof_s for p in c.points]
        low, high = min(ratios), max(ratios)
        table.add_row(c.op_class, c.bound,
                      Text("; ".join(f"{duration(p.roof_s, sep='')} → {duration(p.measured_s, sep='')}"
                                     for p in c.points)),
                      f"{low:.2f}×" if low == high else f"{low:.2f}–{high:.2f}×")
    return table


def gpu_detail(g: GPU) -> Group:
    """One GPU's spec, each section with its numbered source; its measured ceilings; its memory hierarchy."""
    named: tuple[tuple[str, Sourced | None], ...] = (
        ("memory", g.memory), ("limits", g.limits), ("compute", g.compute), ("interconnect", g.interconnect))
    sections = {name: section for name, section in named if section is not None}  # numbered in this order
    marks = {name: f"[{i}]" for i, name in enumerate(sections, 1)}
    parts: list[RenderableType] = [_spec_table(g, marks),
                   Text("\n".join(f"{marks[name]} {section.source}" for name, section in sections.items()))]
    measured = _measured_table(g)
    if measured is not None:
        parts.append(measured)
    op_model = _op_model_table(g)
    if op_model is not None:
        parts.append(op_model)
    comm = fit_table(g)
    if comm is not None:
        parts.append(comm)
    if g.notes:
        parts.append(Text(g.notes))
    parts.append(gpu_hierarchy_view(g, source_mark=marks["compute"]))
    return Group(*parts)
