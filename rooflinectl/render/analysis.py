"""Rich tables and JSON of the engine's results. Formats numbers; computes none of its own."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..engine.explain import verdict
from ..engine.roofline import Analysis
from ..specs.hardware import GPU
from ..units import GIB, duration, si

BOUND_STYLE = {"memory": "cyan", "compute": "magenta"}


def analysis_json(a: Analysis) -> dict:
    """The stable ``--json`` shape: each op's flops/bytes are for one instance, ``count`` how many run."""
    w = a.workload
    return {
        "hardware": {
            "id": a.gpu.id,
            "name": a.gpu.name,
            "bandwidth_gbps": a.roofs.bandwidth_gbps,
            "peak_tflops": a.peak_flops / 1e12,
            "ridge": a.ridge,
        },
        "workload": {
            "phase": w.phase,
            "model": w.model.id,
            "batch": w.batch,
            "seq_len": w.tokens_per_seq,
            "context": w.kv_len,
            "dtype": w.dtype,
            "kv_dtype": w.kv_dtype,
            "attention": w.attention,
        },
        "ops": [
            {
                "name": p.name,
                "count": p.op.count,
                "flops": p.op.flops,
                "bytes": p.op.bytes,
                "intensity": p.intensity,
                "bound": p.bound,
                "attainable_tflops": p.attainable_flops / 1e12,
                "time_s": p.time_s,
            }
            for p in a.placements
        ],
        "totals": {
            "flops": a.totals.flops,
            "bytes": a.totals.bytes,
            "time_s": a.totals.time_s,
            "tokens_per_s": a.totals.tokens_per_s,
            "weight_bytes": a.totals.weight_bytes,
            "kv_cache_bytes": a.totals.kv_cache_bytes,
            "memory_bytes": a.totals.memory_bytes,
            "fits": a.totals.fits,
        },
    }


def ops_table(a: Analysis, selected: str | None = None) -> Table:
    """One row per op: its count, one instance's FLOPs and bytes, intensity, bound, attainable rate; then the
    time of all its instances in the step and their share of the step."""
    w = a.workload
    title = f"{w.label()} on {a.gpu.name} ({a.roofs.label} roofs)"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0))
    table.add_column("op", overflow="fold", min_width=12)
    for col, justify, width in (("×", "right", 2), ("FLOPs", "right", 6), ("bytes", "right", 6),
                                ("FLOP/B", "right", 6), ("bound", "left", 7), ("TFLOP/s", "right", 6),
                                ("time×n", "right", 7), ("share", "right", 5)):
        table.add_column(col, justify=justify, no_wrap=True, min_width=width)
    for p in a.placements:
        table.add_row(
            p.name,
            str(p.op.count),
            si(p.op.flops, sep=""),
            si(p.op.bytes, "B", sep=""),
            f"{p.intensity:.3g}",
            Text(p.bound, style=BOUND_STYLE[p.bound]),
            f"{p.attainable_flops / 1e12:.3g}",
            duration(p.total_time_s, sep=""),
            f"{p.share:.1%}",
            style="reverse" if p.name == selected else None,
        )
    return table


def totals_lines(a: Analysis) -> list[str]:
    t, w = a.totals, a.workload
    if w.phase == "decode":
        rate = f"{t.tokens_per_s:,.1f} tokens/s ({w.batch} sequence{'s' if w.batch > 1 else ''})"
    elif w.phase == "prefill":
        rate = f"time to first token {duration(t.time_s)}, {t.tokens_per_s:,.0f} prompt tokens/s"
    else:
        rate = f"{t.tokens_per_s:,.0f} prompt tokens/s through attention alone"
    return [
        f"step: {si(t.flops, 'FLOP')}, {si(t.bytes, 'B')} of HBM traffic, {duration(t.time_s)} predicted; {rate}",
        f"reads {si(t.weight_bytes, 'B')} of weights and {si(t.kv_cache_bytes, 'B')} of KV cache; "
        f"holds {t.memory_bytes / GIB:.1f} GiB of {t.capacity_bytes / GIB:.0f} GiB "
        f"({'fits' if t.fits else 'does not fit'}; largest batch that fits: {t.max_batch:,})",
        f"roofs: {a.roofs.bandwidth_gbps:,.0f} GB/s, {a.peak_flops / 1e12:,.1f} TFLOP/s {w.dtype}; "
        f"ridge {a.ridge:.0f} FLOP/byte",
    ]


def print_analysis(console: Console, a: Analysis) -> None:
    console.print(ops_table(a))
    for line in totals_lines(a):
        console.print(line, highlight=False)
    console.print()
    for line in verdict(a):
        console.print(line, highlight=False)


def gpu_table(gpus: list[GPU]) -> Table:
    table = Table(title="GPUs ('rooflinectl hardware show ID' for one in full)", title_justify="left",
                  box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True)
    table.add_column("aliases", overflow="fold")
    for col in ("HBM", "GB/s", "bf16 TFLOP/s", "ridge"):
        table.add_column(col, justify="right", no_wrap=True)
    for g in gpus:
        roofs = g.roofs()
        dtype = "bf16" if "bf16" in roofs.tensor_tflops else "fp16"
        table.add_row(
            g.id,
            ", ".join(g.aliases),
            f"{g.memory.hbm_capacity_gib:g} GiB",
            f"{g.memory.hbm_bandwidth_gbps:,.0f}",
            f"{roofs.tensor_tflops[dtype]:,.1f}" + ("" if dtype == "bf16" else " fp16"),
            f"{roofs.ridge(dtype):.0f}",
        )
    return table


def _marked(section, field: str, text: str) -> str:
    """``text``, flagged when the GPU file lists ``field`` under ``derived`` (derived or estimated)."""
    note = section.derived.get(field)
    if note is None:
        return text
    return f"{text} ({'estimated' if note.lower().startswith('estimated') else 'derived'})"


def gpu_detail(g: GPU) -> Group:
    """One GPU's spec, each section with its numbered source, and its peaks with their ridge points."""
    m, c, lim = g.memory, g.compute, g.limits
    sources = [m.source, lim.source, c.source] + ([g.interconnect.source] if g.interconnect else [])
    spec = Table(title=f"{g.name} ({g.id})", title_justify="left", box=box.SIMPLE_HEAD)
    spec.add_column("field", no_wrap=True)
    spec.add_column("value", overflow="fold")
    spec.add_column("src", no_wrap=True)
    cc = f" (sm_{g.compute_capability.replace('.', '')})" if g.compute_capability else ""
    l2_bw = f", {_marked(m, 'l2_bandwidth_gbps', f'{m.l2_bandwidth_gbps:,.0f} GB/s')}" if m.l2_bandwidth_gbps else ""
    smem_bw = (f", {_marked(m, 'smem_bandwidth_gbps', f'{m.smem_bandwidth_gbps:,.0f} GB/s')} in all"
               if m.smem_bandwidth_gbps else "")
    rows = [
        ("vendor / architecture", f"{g.vendor} {g.architecture}{cc}", ""),
        ("SMs × boost clock", f"{g.sm_count} × {g.boost_clock_mhz:g} MHz", ""),
        ("HBM", f"{_marked(m, 'hbm_capacity_gib', f'{m.hbm_capacity_gib:g} GiB')} {m.hbm_type}, "
                f"{m.hbm_bandwidth_gbps:,.0f} GB/s", "[1]"),
        ("L2", f"{_marked(m, 'l2_size_mib', f'{m.l2_size_mib:g} MiB')}{l2_bw}", "[1]"),
        ("shared memory / SM", f"{m.smem_per_sm_kib:g} KiB of a {m.l1_smem_per_sm_kib:g} KiB L1{smem_bw}", "[1]"),
        ("registers / SM", f"{m.register_file_per_sm_kib:g} KiB ({lim.registers_per_sm:,} × 32-bit)", "[1] [2]"),
        ("limits / SM", f"{lim.max_warps_per_sm} warps of {lim.warp_size}, {lim.max_blocks_per_sm} blocks, "
                        f"{lim.max_smem_per_block_kib:g} KiB shared memory per block", "[2]"),
    ]
    if g.interconnect:
        rows.append(("interconnect", f"{g.interconnect.name}, {g.interconnect.bandwidth_gbps:,.0f} GB/s", "[4]"))
    for row in rows:
        spec.add_row(*row)

    ridge = Table(title="Dense peaks [3] and ridge points against HBM (FLOP per byte an op needs to be "
                        "compute-bound)", title_justify="left", box=box.SIMPLE_HEAD)
    ridge.add_column("unit")
    ridge.add_column("dtype")
    ridge.add_column("peak", justify="right")
    ridge.add_column("ridge FLOP/B", justify="right")
    roofs = g.roofs()
    for unit, table in (("tensor", c.tensor_tflops), ("vector", c.vector_tflops)):
        for dtype, tf in table.items():
            peak = f"{tf:,.1f} {'TOPS' if dtype == 'int8' else 'TFLOP/s'}"
            ridge.add_row(unit, dtype, peak, f"{roofs.ridge(dtype, unit):.1f}")
    notes = Text("\n".join(f"[{i}] {text}" for i, text in enumerate(sources, 1)))
    parts = [spec, ridge, notes]
    if g.measured:
        mm = g.measured
        measured = Table(title=f"Measured ceilings ({mm.device_name}, {mm.date})", title_justify="left")
        measured.add_column("what")
        measured.add_column("measured", justify="right")
        measured.add_column("spec", justify="right")
        measured.add_row("copy bandwidth", f"{mm.copy_bandwidth_gbps:,.0f} GB/s", f"{m.hbm_bandwidth_gbps:,.0f} GB/s")
        for dtype, tf in mm.tensor_tflops.items():
            measured.add_row(f"tensor {dtype}", f"{tf:,.1f} TFLOP/s", f"{c.tensor_tflops.get(dtype, 0):,.1f} TFLOP/s")
        parts.append(measured)
    if g.notes:
        parts.append(Text(g.notes))
    return Group(*parts)
