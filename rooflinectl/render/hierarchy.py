"""The memory hierarchy as a table (``hardware show``) and as JSON. Formats ``hierarchy.Hierarchy``; computes
nothing of its own."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..engine.count.op import Unit
from ..engine.hierarchy import Hierarchy, MemoryLevel, Note, hierarchy
from ..specs.hardware import GPU
from ..units import binary_size, number

MARK = {"estimated": "≈", "derived": "†"}


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    return number(x)


def ridge_columns(h: Hierarchy) -> list[tuple[Unit, str, str]]:
    """(unit, dtype, header) of the ridges the table shows: the 16-bit tensor rate, fp8 where the chip has it,
    and fp32 on the vector units (elementwise work). JSON carries every data type."""
    have = {(c.unit, c.dtype) for c in h.compute}
    cols: list[tuple[Unit, str, str]] = []
    half = next((d for d in ("bf16", "fp16") if ("tensor", d) in have), None)
    if half:
        cols.append(("tensor", half, half))
    if ("tensor", "fp8") in have:
        cols.append(("tensor", "fp8", "fp8"))
    if ("vector", "fp32") in have:
        cols.append(("vector", "fp32", "fp32 vec"))
    return cols


# Short names for the table (JSON keeps the full ones).
SHORT = {"shared memory / L1": "shared/L1", "register file": "registers"}


def _units_table(h: Hierarchy, marks: dict[str, str]) -> Table:
    """The peaks, a row a unit; ``marks``: a field (tensor_tflops, vector_tflops) -> its note's mark ("≈2")."""
    dtypes = list(dict.fromkeys(c.dtype for c in h.compute))
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    t.add_column("unit", no_wrap=True)
    for d in dtypes:
        t.add_column(d, justify="right", no_wrap=True)
    for unit, label in (("tensor", "tensor cores"), ("vector", "vector units")):
        rates = {c.dtype: c.tflops for c in h.compute if c.unit == unit}
        mark = marks.get(f"{unit}_tflops")
        t.add_row(label + (f" {mark}" if mark else ""), *[number(rates[d], 4) if d in rates else "—" for d in dtypes])
    return t


def hierarchy_view(h: Hierarchy, source_mark: str = "") -> Group:
    """Top to bottom: each level's size, per-SM bytes, bandwidth and ridge points; then the units they feed, the
    notes on derived numbers and each level's detail. ``source_mark`` (such as "[3]") follows the peaks' heading,
    pointing to the source note of the view it is part of."""
    cols = ridge_columns(h)
    table = Table(
        title="Memory hierarchy, top to bottom (ridge: FLOP per byte read from that level an op needs to be "
              "compute-bound)",
        title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True,
    )
    table.add_column("level", no_wrap=True)
    table.add_column("holds\nin all", justify="right", no_wrap=True)
    table.add_column("holds\nper SM", justify="right", no_wrap=True)
    table.add_column("GB/s\nin all", justify="right", no_wrap=True)
    table.add_column("GB/s\nper SM", justify="right", no_wrap=True)
    for _, _, header in cols:
        table.add_column(f"ridge\n{header}", justify="right", no_wrap=True)

    notes: list[str] = []

    def mark(note: Note, what: str) -> str:
        notes.append(f"{MARK[note.provenance]}{len(notes) + 1} {what} — {note.how}")
        return f"{MARK[note.provenance]}{len(notes)}"

    for depth, lv in enumerate(h.levels):
        name = (" " * (depth - 1) + "└ " if depth else "") + SHORT.get(lv.name, lv.name)
        size_mark = mark(lv.size_note, f"{lv.name} size") if lv.size_note else ""
        bandwidth = _num(lv.bandwidth_gbps)
        if lv.provenance == "derived" or lv.provenance == "estimated":  # the two MARK has a sign for
            bandwidth += mark(Note("", lv.provenance, lv.how), f"{lv.name} bandwidth")
        for extra in lv.notes:
            mark(extra, f"{lv.name}, {extra.field}")
        per_sm = ("—" if lv.per_sm_bytes is None  # no SM count in the file
                  else binary_size(lv.per_sm_bytes) + ("*" if lv.chip_wide else "") + size_mark)
        table.add_row(name, binary_size(lv.size_bytes) + size_mark, per_sm, bandwidth,
                      _num(lv.bandwidth_per_sm_gbps), *[_num(lv.ridge(dtype, unit)) for unit, dtype, _ in cols])
    unit_marks = {extra.field: mark(extra, f"peak {extra.field}") for extra in h.compute_notes}

    share = (f"* an even share of a chip-wide level over {h.sm_count} SMs (the SM-local levels: each SM's own)"
             if h.sm_count is not None else "per SM: — (no SM count in this GPU file)")
    legend = Text(f"{share}. ≈ estimated, † derived: no datasheet gives it.")
    feeder = "the registers" if h.levels[-1].name == "register file" else "these levels"
    details = [Text(f"{lv.name}: {lv.detail}" + ("" if lv.bandwidth_gbps is not None else f"; bandwidth: {lv.how}"))
               for lv in h.levels]
    return Group(Text(""), table, legend, *[Text(n) for n in notes], *details, Text(""),
                 Text(f"Units {feeder} feed, dense peak TFLOP/s (int8: TOPS){' ' + source_mark if source_mark else ''}:"),
                 _units_table(h, unit_marks))


def _level_json(lv: MemoryLevel) -> dict[str, Any]:
    ridges: dict[str, dict[str, float]] = {}
    for r in lv.ridges:
        ridges.setdefault(r.unit, {})[r.dtype] = r.flop_per_byte
    return {
        "name": lv.name,
        "size_bytes": lv.size_bytes,
        "per_sm_bytes": lv.per_sm_bytes,
        "chip_wide": lv.chip_wide,
        "bandwidth_gbps": lv.bandwidth_gbps,
        "bandwidth_per_sm_gbps": lv.bandwidth_per_sm_gbps,
        "bandwidth_provenance": lv.provenance,
        "bandwidth_how": lv.how,
        "detail": lv.detail,
        "ridge_flop_per_byte": ridges,
        "notes": [_note_json(n) for n in ((lv.size_note,) if lv.size_note else ()) + lv.notes],
    }


def _note_json(n: Note) -> dict[str, Any]:
    return {"field": n.field, "provenance": n.provenance, "how": n.how}


def hierarchy_json(h: Hierarchy) -> dict[str, Any]:
    """The stable ``--json`` shape of the hierarchy (under ``hardware show --json``'s "hierarchy" key)."""
    return {
        "sm_count": h.sm_count,
        "levels": [_level_json(lv) for lv in h.levels],
        "compute": [{"unit": c.unit, "dtype": c.dtype, "tflops": c.tflops, "per_sm_tflops": c.per_sm_tflops}
                    for c in h.compute],
        "compute_source": h.compute_source,
        "compute_notes": [_note_json(n) for n in h.compute_notes],
    }


def gpu_hierarchy_view(gpu: GPU, source_mark: str = "") -> Group:
    """``hardware show``'s hierarchy section for one GPU."""
    return hierarchy_view(hierarchy(gpu), source_mark)


def gpu_hierarchy_json(gpu: GPU) -> dict[str, Any]:
    return hierarchy_json(hierarchy(gpu))
