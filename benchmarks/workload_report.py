"""Issue 14's error tables from the records benchmarks/workload_gpu.sh saved: per step, the graphed step against
the spec-roof and calibrated predictions; per op that runs 8 µs or longer, how many the calibrated model puts
within 10%, and the mean absolute error of each prediction (LLMCompass's anchor: 10.9% per op, 4.1% end to end
on an A100).

    python benchmarks/workload_report.py OUTDIR            # markdown on stdout
"""

from __future__ import annotations

import sys
from pathlib import Path

from rooflinectl.records.step import WorkloadRun, load_workload

LONG_OP_S = 8e-6  # the threshold: ops that run 8 µs or longer
TARGET_PCT = 10.0


def _err(pred: float | None, meas: float) -> float | None:
    return None if pred is None else 100.0 * (pred / meas - 1)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}%"


def _us(s: float | None) -> str:
    return "—" if s is None else (f"{s * 1e3:,.2f} ms" if s >= 1e-3 else f"{s * 1e6:,.1f} µs")


def _mean(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.1f}%" if xs else "—"


def _label(run: WorkloadRun) -> str:
    w = run.workload
    size = f"batch {w.batch} × {w.kv_len:,}" if w.phase == "decode" else f"{w.batch} × {w.tokens_per_seq:,} tokens"
    return f"{w.model} {w.phase} {size}"


def main(folder: Path) -> None:
    runs = [load_workload(p) for p in sorted(folder.glob("*.json"))]
    runs = [r for r in runs if r.step is not None and r.step.timing is not None]
    runs.sort(key=lambda r: (r.workload.model, r.workload.phase, r.workload.batch, r.workload.kv_len))
    if not runs:
        raise SystemExit(f"{folder}: no measured workload records")
    first = runs[0]
    print(f"{first.gpu.name}, torch {first.torch_version}, triton {first.triton_version}, driver "
          f"{first.gpu.driver}; {first.date[:10]}; timer {first.timer}\n")
    print("| step | graphed step | Σ ops | spec roofs | err | calibrated | err |")
    print("|---|---|---|---|---|---|---|")
    step_spec, step_cal = [], []
    for r in runs:
        st = r.step
        assert st is not None and st.timing is not None
        meas = st.timing.median_s
        es, ec = _err(st.predicted_spec_s, meas), _err(st.predicted_calibrated_s, meas)
        step_spec += [abs(es)] if es is not None else []
        step_cal += [abs(ec)] if ec is not None else []
        print(f"| {_label(r)} | {_us(meas)} | {_us(st.sum_ops_s)} | {_us(st.predicted_spec_s)} | {_pct(es)} | "
              f"{_us(st.predicted_calibrated_s)} | {_pct(ec)} |")
    print()
    print(f"| step | ops ≥ 8 µs | within {TARGET_PCT:.0f}% (calibrated) | mean \\|err\\| calibrated | "
          f"mean \\|err\\| spec | worst (calibrated) |")
    print("|---|---|---|---|---|---|")
    all_spec, all_cal = [], []
    for r in runs:
        long = [o for o in r.ops if o.timing is not None and o.timing.median_s >= LONG_OP_S]
        cal = [(o.name, _err(o.predicted_calibrated_s, o.timing.median_s)) for o in long if o.timing]
        spec = [abs(e) for o in long if o.timing and (e := _err(o.predicted_spec_s, o.timing.median_s)) is not None]
        cal_abs = [abs(e) for _, e in cal if e is not None]
        all_spec += spec
        all_cal += cal_abs
        within = sum(1 for e in cal_abs if e <= TARGET_PCT)
        worst = max(((n, e) for n, e in cal if e is not None), key=lambda t: abs(t[1]), default=None)
        print(f"| {_label(r)} | {len(long)} | {within} of {len(cal_abs)} | {_mean(cal_abs)} | {_mean(spec)} | "
              f"{f'{worst[0]} {worst[1]:+.1f}%' if worst else '—'} |")
    print()
    print(f"Mean absolute error, ops ≥ 8 µs ({len(all_cal)} op measurements): calibrated {_mean(all_cal)}, spec roofs "
          f"{_mean(all_spec)}; whole steps ({len(runs)}): calibrated {_mean(step_cal)}, spec roofs {_mean(step_spec)}.")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
