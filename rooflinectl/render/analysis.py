"""``analyze``: the engine's Analysis as a rich table with its totals and verdict, and as JSON. Formats numbers;
computes none of its own."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from ..engine.count.moe import experts_touched
from ..engine.roofline import Analysis, Placement
from ..specs.dtypes import GROUPED_WEIGHT_DTYPES
from ..units import duration, gib, number, plural, si
from ..units import rate as rate_text
from .console import print_table
from .verdict import kv_read_text, verdict

# A collective's bound is its binding link: the interconnect (the scale-up domain's) or the scale-out network.
# Under the calibrated op model an op's limit may be its launch floor instead (engine.calibrated.CurveTime.limit).
BOUND_STYLE = {"memory": "cyan", "compute": "magenta", "interconnect": "green", "network": "yellow",
               "launch": "red"}


def analysis_json(a: Analysis) -> dict[str, Any]:
    """The stable ``--json`` shape: each op's flops/bytes are for one instance, ``count`` how many run. Over several
    GPUs every batch and rate states its scope: ``workload`` is the whole deployment's step as asked (its batch,
    its experts touched), ``parallel.batch_per_gpu`` the sequences one GPU runs, ``ops`` and ``totals`` one GPU's
    but ``totals.tokens_per_s``, the deployment's (``tokens_per_s_per_gpu`` beside it)."""
    w = a.whole or a.workload
    return {
        "hardware": {
            "id": a.gpu.id,
            "name": a.gpu.name,
            "bandwidth_gbps": a.roofs.bandwidth_gbps,
            "peak_tflops": a.peak_flops / 1e12,
            "ridge": a.ridge,
            # Quantized weights only: the matmul kernel the linear layers run, whose data type the roof is.
            **({"kernel": a.kernel} if w.quantized else {}),
        },
        "workload": {
            "phase": w.phase,
            "model": w.model.id,
            "batch": w.batch,
            # A preset step's one length each; a mixed step's groups instead.
            **({"seqs": [g.model_dump() for g in w.seqs]} if w.phase == "mixed"
               else {"seq_len": w.tokens_per_seq, "context": w.kv_len}),
            "dtype": w.dtype,
            "kv_dtype": w.kv_dtype,
            # Quantized linear layers only: their weight format and the type their tensor cores multiply in (and
            # int4's group along k); dtype stays the activations' between kernels.
            **({"weight_dtype": w.weights, "act_dtype": w.matmul_dtype} if w.quantized else {}),
            **({"group_size": w.group_size} if w.quantized and w.weights in GROUPED_WEIGHT_DTYPES else {}),
            "attention": w.attention,
            # Mixture of experts only: the distinct experts each MoE layer reads (stated, or the uniform
            # expectation: a real number, so always a float).
            **({"experts_touched": experts_touched(w)} if w.model.moe is not None else {}),
        },
        # More than one GPU only: the layout, and every figure below is one GPU's but totals.tokens_per_s.
        **({"parallel": parallel_json(a)} if not a.layout.single else {}),
        "ops": [op_json(p) for p in a.placements],
        # Under --calibrated only: whether the GPU file's op model timed the ops, and what it is.
        **({"time_model": time_model_json(a)} if calibrated(a) else {}),
        "totals": {
            "flops": a.totals.flops,
            "bytes": a.totals.bytes,
            "time_s": a.totals.time_s,
            "tokens_per_s": a.totals.tokens_per_s,
            "weight_bytes": a.totals.weight_bytes,
            "kv_cache_bytes": a.totals.kv_cache_bytes,
            "memory_bytes": a.totals.memory_bytes,
            "fits": a.totals.fits,
            **({"communication_bytes": a.totals.communication_bytes,
                "communication_time_s": a.totals.communication_time_s,
                "tokens_per_s_per_gpu": a.totals.tokens_per_s_per_gpu} if not a.layout.single else {}),
        },
    }


def calibrated(a: Analysis) -> bool:
    """Whether the analysis is under the GPU file's measured roofs (``--calibrated``)."""
    return a.roofs.label == "measured"


NO_OP_MODEL = "calibrated ceilings only: no op model (run rooflinectl calibrate on this GPU)"


def time_model_json(a: Analysis) -> dict[str, Any]:
    """``--calibrated``: whether the op model timed the ops and, if it did, its launch floor, timer, probe grid and
    the step's time at the roofs alone (beside ``totals.time_s``, the model's)."""
    m = a.op_model
    if m is None:
        return {"op_model": False, "note": NO_OP_MODEL}
    return {"op_model": True, "launch_floor_s": m.launch_floor_s, "timer": m.timer, "grid": m.grid,
            "roofline_time_s": a.roofline_time_s}


def time_model_lines(a: Analysis) -> list[str]:
    """``--calibrated``: how the times were made (the op model's curves, or the calibrated ceilings alone), and the
    ops no curve of their own class and bound timed, by note."""
    if not calibrated(a):
        return []
    m = a.op_model
    if m is None:
        return [NO_OP_MODEL]
    lines = [f"times: the calibrated op model ({m.timer} timer, launch floor {duration(m.launch_floor_s)}): each op "
             f"read from its class's curve of measured time over roofline time; at the roofs alone the step takes "
             f"{duration(a.roofline_time_s)}"]
    fallbacks: dict[str, list[str]] = {}
    for p in a.placements:
        if p.time_note is not None:
            fallbacks.setdefault(p.time_note, []).append(p.name)
    lines += [f"  {note}: {', '.join(names)}" for note, names in fallbacks.items()]
    return lines


def parallel_json(a: Analysis) -> dict[str, Any]:
    """The layout of a step over several GPUs: the degrees, the GPUs one copy spans, the interconnect's roof
    (one direction) and latency, and the notes that say what the per-GPU figures mean."""
    return {
        "tp": a.layout.tp,
        "ep": a.layout.ep,
        "pp": a.layout.pp,
        "gpus": a.layout.gpus,
        # The sequences one GPU runs: the whole batch under TP and PP, ⌈B/e⌉ (the busiest GPU's) under EP alone.
        "batch_per_gpu": a.workload.batch,
        "interconnect_gbps": a.roofs.interconnect_gbps,
        "interconnect_latency_us": a.roofs.interconnect_latency_us,
        **({"measured_collectives": {c: {"busbw_gbps": gbps, "latency_us": us}
                                     for c, (gbps, us) in a.roofs.measured_collectives.items()}}
           if a.roofs.measured_collectives else {}),
        **({"network": network_json(a)} if a.network is not None else {}),
        "notes": list(a.layout_notes),
    }


def network_json(a: Analysis) -> dict[str, Any]:
    """What the layout's collectives cross: the scale-up domain (GPUs, link), whether any group or PP send crosses
    it, each group's span, and the scale-out network (one direction per GPU, a step's latency) where it crosses."""
    net = a.network
    assert net is not None
    so = net.scale_out
    return {
        "scale_up_gpus": net.domain,
        "scale_up_link": net.link,
        "crosses_scale_up": net.crosses,
        "groups": [{"option": flag, "gpus": s.gpus, "domains": s.domains, "gpus_per_domain": s.per_domain}
                   for flag, s in net.groups],
        "pp_sends_across": net.pp_sends_across,
        **({"scale_out": {"name": so.name, "gbps": so.bandwidth_gbps, "latency_us": so.latency_us}}
           if net.crosses and so is not None else {}),
    }


def op_json(p: Placement) -> dict[str, Any]:
    """One op of ``--json``: what it is (its kind, the kinds of work fused into it, the unit and data type whose
    roof it sits under, its weights' storage format where that is not ``dtype``), one instance's count (FLOPs,
    bytes and the parts of them that are weights and KV cache read), what it reads, writes and computes in
    words, and its placement. Every field is the engine's Op or Placement, copied: whatever kind an op has, it
    comes through this one path."""
    op = p.op
    link = op.kind == "communication"
    return {
        "name": op.name,
        "kind": op.kind,
        "fuses": list(op.fuses),
        "unit": op.unit,
        "dtype": op.dtype,
        **({"weight_dtype": op.weight_dtype} if op.weight_dtype is not None else {}),
        "per_model": op.per_model,
        "count": op.count,
        "flops": op.flops,
        # A collective's bytes are sent over links, not HBM traffic: HBM bytes 0, link bytes (and the scale-out
        # network's part of them, and the share of the interconnect's bandwidth its group reaches) beside.
        "bytes": 0 if link else op.bytes,
        **({"link_bytes": op.bytes, "network_bytes": op.network_bytes, "link_share": op.link_share} if link else {}),
        "weight_bytes": op.weight_bytes,
        "kv_bytes": op.kv_bytes,
        "reads": op.reads,
        "writes": op.writes,
        "computes": op.computes,
        "intensity": p.intensity,
        "bound": p.bound,
        "attainable_tflops": p.attainable_flops / 1e12,
        "time_s": p.time_s,
        # Timed by the calibrated op model only: the roofline's time beside it, which curve gave it, what set the
        # model's time (memory, compute or launch: the launch floor) and the rate at that time (FLOPs / time_s);
        # bound and attainable_tflops above stay the roofline's.
        **({"roofline_time_s": p.roofline_time_s, "time_model": p.time_model, "model_limit": p.limit,
            "model_tflops": p.achieved_flops / 1e12} if p.time_model is not None else {}),
    }


# The columns a narrow terminal drops first, in this order, so that no op name or number is ever wrapped or cut:
# the attainable rate and the intensity follow from FLOPs, bytes and the roofs, the kind from the op's name.
OPTIONAL_COLUMNS = ("TFLOP/s", "FLOP/B", "kind", "FLOPs")


def ops_table(a: Analysis, selected: str | None = None) -> Table:
    """One row per op: its count, one instance's FLOPs and bytes, intensity, bound, rate; then the time of all its
    instances in the step and their share of the step. The bound and rate describe what gave the time: the
    roofline's bound and attainable rate, or under the calibrated op model its limit (memory, compute or the
    launch floor) and its FLOPs over the model's time (:data:`OP_MODEL_COLUMNS` says so under the table). No cell
    wraps: on a narrow terminal ``print_table`` drops OPTIONAL_COLUMNS until it fits."""
    w = a.workload
    # A Text, not a str, wherever a user's name goes: a str title or cell is markup to a console that reads it
    # (render.console's has markup off; Textual's and a caller's own may not).
    model = ", calibrated op model" if a.op_model is not None else ""
    title = Text(f"{w.label()} on {a.gpu.name} ({a.roofs.label} roofs{model})")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0))
    # The op's kind (engine.count.op.OpKind), as the engine gives it: a kind added there shows here unchanged.
    columns: tuple[tuple[str, JustifyMethod, int], ...] = (
        ("op", "left", 12), ("kind", "left", 4), ("×", "right", 2), ("FLOPs", "right", 6), ("bytes", "right", 6),
        ("FLOP/B", "right", 6), ("bound", "left", 7), ("TFLOP/s", "right", 6), ("time×n", "right", 7),
        ("share", "right", 5))
    for col, justify, width in columns:
        table.add_column(col, justify=justify, no_wrap=True, min_width=width)
    names = [c[0] for c in columns]
    for p in a.placements:
        cells: dict[str, str | Text] = {
            "op": p.name,
            "kind": p.op.kind,
            "×": str(p.op.count),
            "FLOPs": si(p.op.flops, sep=""),
            "bytes": si(p.op.bytes, "B", sep=""),
            "FLOP/B": number(p.intensity),
            "bound": Text(p.limit, style=BOUND_STYLE[p.limit]),
            "TFLOP/s": number(p.achieved_flops / 1e12),
            "time×n": duration(p.total_time_s, sep=""),
            "share": f"{p.share:.1%}",
        }
        table.add_row(*(cells[n] for n in names), style="reverse" if p.name == selected else None)
    return table


def totals_lines(a: Analysis) -> list[str]:
    t, w = a.totals, a.workload
    batch = (a.whole or w).batch  # tokens/s are the model copy's: of all its sequences
    if w.phase == "decode":
        rate = f"{rate_text(t.tokens_per_s)} ({plural(batch, 'sequence')})"
    elif w.phase == "prefill":
        rate = f"time to first token {duration(t.time_s)}, {rate_text(t.tokens_per_s, 'prompt tokens/s')}"
    elif w.phase == "mixed":
        rate = f"{rate_text(t.tokens_per_s)} ({plural(batch, 'sequence')}, {(a.whole or w).tokens:,} new tokens)"
    else:
        rate = f"{rate_text(t.tokens_per_s, 'prompt tokens/s')} through attention alone"
    kernel = f" ({a.kernel})" if w.quantized else ""
    return [
        f"step: {si(t.flops, 'FLOP')}, {si(t.bytes, 'B')} of HBM traffic, {duration(t.time_s)} predicted; {rate}",
        f"reads {si(t.weight_bytes, 'B')} of weights and {kv_read_text(a, lambda x: si(x, 'B'))}; "
        f"holds {gib(t.memory_bytes)} of {gib(t.capacity_bytes, 0)} "
        f"({'fits' if t.fits else 'does not fit'}; largest batch that fits: {t.max_batch:,}"
        f"{f' over the {a.layout.batch_shards} GPUs' if a.layout.batch_shards > 1 else ''})",
        f"roofs: {bandwidth_text(a)}, {number(a.peak_flops / 1e12)} TFLOP/s {w.matmul_dtype}{kernel}; "
        f"ridge {number(a.ridge)} FLOP/byte",
        *time_model_lines(a),
        *parallel_lines(a),
    ]


def bandwidth_text(a: Analysis) -> str:
    """The memory roof, "3,350 GB/s", marked "(estimated)" or "(derived)" where the spec's roof is not a
    datasheet's figure (``Sourced.derivation``); a measured roof is the device's own."""
    how = a.gpu.memory.derivation("hbm_bandwidth_gbps") if a.roofs.label == "spec" else None
    return f"{number(a.roofs.bandwidth_gbps)} GB/s" + (f" ({how})" if how else "")


def _comm_gpus(a: Analysis) -> int | str:
    """The GPU count the measured collectives were timed on (a ring's latency grows with it: docs/measure.md)."""
    comm = a.gpu.measured.interconnect if a.gpu.measured else None
    return comm.gpu_count if comm else "?"


def _link_rates(a: Analysis) -> str:
    """The rates the datasheet-timed collectives ran at, as ``roofline.place`` timed them: the interconnect's
    one-direction bandwidth times the op's link share (a mesh gives a group of g (g − 1)/(N − 1) of it), or past
    the scale-up domain the bus bandwidth of the binding link, with each network step's hop in the latency.
    "450 GB/s a direction + 10 µs each" where one rate serves every collective, else each rate with its ops."""
    rates: dict[str, tuple[list[str], set[float]]] = {}
    for p in a.placements:
        op = p.op
        if op.kind != "communication" or (op.collective in a.roofs.measured_collectives and not op.network_bytes):
            continue
        how = "a direction" if not op.network_bytes else f"of bus bandwidth, the {p.link} binding"
        names, latencies = rates.setdefault(f"{number(p.bandwidth / 1e9)} GB/s {how}", ([], set()))
        names.append(op.name)
        latencies.add(p.latency_s * 1e6)

    def text(rate: str, latencies: set[float]) -> str:
        lo, hi = number(min(latencies)), number(max(latencies))  # equal as printed: one figure, not "15–15"
        return f"{rate} + {lo}{'' if lo == hi else f'–{hi}'} µs"

    if len(rates) == 1:
        rate, (_, latencies) = next(iter(rates.items()))
        return f"{text(rate, latencies)} each"
    return "; ".join(f"{text(rate, latencies)} ({', '.join(names)})" for rate, (names, latencies) in rates.items())


def parallel_lines(a: Analysis) -> list[str]:
    """Over several GPUs: every figure above is one GPU's; the collectives' share and the layout's notes."""
    if a.layout.single:
        return []
    r, t = a.roofs, a.totals
    who = "along the pass through the stages" if a.layout.pp > 1 else "a GPU"
    rates = _link_rates(a)
    return [
        f"per GPU of {t.gpus} ({a.layout.label()}): {rate_text(t.tokens_per_s_per_gpu)} per GPU; "
        f"collectives send {si(t.communication_bytes, 'B')} {who}, {duration(t.communication_time_s)} "
        f"({t.communication_share:.1%} of the step)" + (f" at {rates}" if rates else "")
        + (", except where measured:" if r.measured_collectives else ""),
        *[f"  {c}: measured bus bandwidth {number(bus)} GB/s + {number(us)} µs (calibrate --comm on {_comm_gpus(a)} "
          f"GPUs)" for c, (bus, us) in r.measured_collectives.items()],
        *a.layout_notes,
    ]


OP_MODEL_COLUMNS = ("(op model: bound is what set each op's time, its class's memory- or compute-bound curve or the "
                    "launch floor; TFLOP/s is its FLOPs over that time)")


def print_analysis(console: Console, a: Analysis) -> None:
    print_table(console, ops_table(a), OPTIONAL_COLUMNS)
    if a.op_model is not None:
        console.print(OP_MODEL_COLUMNS, highlight=False)
    if any(p.op.kind == "communication" for p in a.placements):
        console.print("(a communication op's bytes are what one GPU sends over the link its bound names, not HBM "
                      "traffic)", highlight=False)
    for line in totals_lines(a):
        console.print(line, highlight=False)
    console.print()
    for line in verdict(a):
        console.print(line, highlight=False)
