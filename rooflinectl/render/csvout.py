"""``--csv`` for every printed table: the rows a spreadsheet takes, one header line, numbers with all their digits
(a spreadsheet formats them; the terminal tables round through ``units``). Formats; computes nothing."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from ..engine.generate import Generation
from ..engine.occupancy import Occupancy
from ..engine.roofline import Analysis
from ..records.kernel import BASELINE_LABELS, MeasurementFile
from ..serving.batch import BatchRun
from ..specs.hardware import GPU
from ..specs.model import Model
from ..specs.scenario import Scenario


def to_csv(rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> str:
    """Rows as CSV with a header; None is an empty cell; floats with all their digits."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(fields), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in fields})
    return out.getvalue()


ANALYSIS_FIELDS = ("op", "kind", "unit", "dtype", "count", "flops", "bytes", "link_bytes", "intensity", "bound",
                   "attainable_tflops", "time_s", "total_time_s", "share", "model_limit", "model_tflops")


def analysis_csv(a: Analysis) -> str:
    """``analyze --csv``: the ops table, one instance's FLOPs and HBM bytes (a collective's bytes, sent over links,
    in ``link_bytes``, empty for every other op), all instances' time and share; where the calibrated op model
    timed the op, what set its time and its FLOPs over that time (``--json``'s model_limit, model_tflops; empty
    otherwise: bound and attainable_tflops are the roofline's)."""
    link = "communication"
    rows = [{"op": p.name, "kind": p.op.kind, "unit": p.op.unit, "dtype": p.op.dtype, "count": p.op.count,
             "flops": p.op.flops, "bytes": 0 if p.op.kind == link else p.op.bytes,
             "link_bytes": p.op.bytes if p.op.kind == link else None, "intensity": p.intensity, "bound": p.bound,
             "attainable_tflops": p.attainable_flops / 1e12, "time_s": p.time_s, "total_time_s": p.total_time_s,
             "share": p.share, **({"model_limit": p.limit, "model_tflops": p.achieved_flops / 1e12}
                                  if p.model_time_s is not None else {})} for p in a.placements]
    return to_csv(rows, ANALYSIS_FIELDS)


GENERATION_FIELDS = ("op", "kind", "prefill_s", "decode_s", "total_s", "share", "stack", "chunked_prefill")


def generation_csv(g: Generation | BatchRun) -> str:
    """``analyze generate --csv``: every op's time over the batch (the text table lists the largest), and how the
    batch was served (the stack, and chunked prefill: false for the static batch)."""
    from .generate import method_json, span

    method = method_json(g)
    total = span(g)
    rows = [{"op": o.name, "kind": o.kind, "prefill_s": o.prefill_s, "decode_s": o.decode_s, "total_s": o.total_s,
             "share": o.total_s / total, "stack": method["stack"], "chunked_prefill": method["chunked_prefill"]}
            for o in sorted(g.op_times(), key=lambda o: -o.total_s)]
    return to_csv(rows, GENERATION_FIELDS)


OCCUPANCY_FIELDS = ("limit", "blocks_per_sm", "binds", "arithmetic")


def occupancy_csv(o: Occupancy) -> str:
    """``occupancy --csv``: the limits table, one row per limit, the binding ones marked."""
    rows = [{"limit": r.name, "blocks_per_sm": r.blocks, "binds": r.name in o.binding, "arithmetic": r.arithmetic}
            for r in o.limits]
    return to_csv(rows, OCCUPANCY_FIELDS)


GPU_FIELDS = ("id", "aliases", "name", "hbm_gib", "hbm_bandwidth_gbps", "peak_dtype", "peak_tflops", "ridge")


def gpus_csv(gpus: Sequence[GPU]) -> str:
    """``hardware list --csv``: the table's columns, the peak of bf16 (fp16 where a GPU has no bf16)."""
    rows = []
    for g in gpus:
        roofs = g.roofs()
        dtype = "bf16" if "bf16" in roofs.tensor_tflops else "fp16"
        rows.append({"id": g.id, "aliases": " ".join(g.aliases), "name": g.name,
                     "hbm_gib": g.memory.hbm_capacity_gib, "hbm_bandwidth_gbps": g.memory.hbm_bandwidth_gbps,
                     "peak_dtype": dtype, "peak_tflops": roofs.tensor_tflops[dtype], "ridge": roofs.ridge(dtype)})
    return to_csv(rows, GPU_FIELDS)


CATALOG_FIELDS = ("type", "id", "phase", "model", "batch", "seq_len", "context", "dtype", "attention", "params",
                  "active_params", "hidden", "layers", "heads", "kv_heads", "vocab")


def catalog_csv(scenarios: dict[str, Scenario], models: Sequence[Model]) -> str:
    """``workloads list --csv``: the scenarios, then the models, in one table (``type`` says which)."""
    rows: list[dict[str, Any]] = []
    for name, s in scenarios.items():
        rows.append({"type": "scenario", "id": name, "phase": s.phase,
                     "model": s.model if isinstance(s.model, str) else s.model.id, "batch": s.batch,
                     "seq_len": s.seq_len, "context": s.context, "dtype": s.dtype, "attention": s.attention})
    for m in models:
        rows.append({"type": "model", "id": m.id, "params": m.parameter_count(),
                     "active_params": m.active_parameter_count(), "hidden": m.hidden_size, "layers": m.num_layers,
                     "heads": m.num_heads, "kv_heads": m.num_kv_heads, "vocab": m.vocab_size})
    return to_csv(rows, CATALOG_FIELDS)


MEASURE_FIELDS = ("kernel", "shape", "dtype", "impl", "status", "rel_error", "tolerance", "time_s", "p20_s", "p80_s",
                  "achieved_gbps", "achieved_tflops", "predicted_time_s", "spec_roof_pct", "measured_roof_pct",
                  "speedup", "error")


def measure_csv(run: MeasurementFile) -> str:
    """``measure --csv``: per shape, the kernel's row, then one row per baseline (``impl`` says which)."""
    rows: list[dict[str, Any]] = []
    for r in run.records:
        c, t = r.correctness, r.timing
        rows.append({"kernel": r.kernel, "shape": r.shape_text, "dtype": r.dtype, "impl": "triton",
                     "status": r.status, "rel_error": c.rel_error if c else None,
                     "tolerance": c.tolerance if c else None, "time_s": r.time_s,
                     "p20_s": t.p20_s if t else None, "p80_s": t.p80_s if t else None,
                     "achieved_gbps": r.achieved_gbps, "achieved_tflops": r.achieved_tflops,
                     "predicted_time_s": r.predicted_time_s, "spec_roof_pct": r.spec_roof_pct,
                     "measured_roof_pct": r.measured_roof_pct, "error": r.error})
        for b in r.baselines:
            bt = b.timing
            rows.append({"kernel": r.kernel, "shape": r.shape_text, "dtype": r.dtype,
                         "impl": BASELINE_LABELS[b.name],
                         "status": "error" if b.error else "timed", "rel_error": b.rel_error, "time_s": b.time_s,
                         "p20_s": bt.p20_s if bt else None, "p80_s": bt.p80_s if bt else None,
                         "achieved_gbps": b.achieved_gbps, "achieved_tflops": b.achieved_tflops,
                         "speedup": b.speedup, "error": b.error})
    return to_csv(rows, MEASURE_FIELDS)
