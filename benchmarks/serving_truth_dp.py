"""Data-parallel attention (``analyze serve --ep E`` alone) against the published aggregated runs whose attention
ran on E data-parallel ranks: mean TTFT and mean TPOT, predicted and measured, per row.

    python benchmarks/serving_truth_dp.py [CSV] [--json FILE]     # the report (markdown) on stdout

CSV: the published runs (default ``../shared/serving_truth/published_h100_b200.csv``; its README states the
columns), read at run time, never copied into the project. A row is used when its ``mode`` is ``agg``, its
effective layout is TP 1 with the experts over E > 1 GPUs (``tp_effective`` 1, ``ep_effective`` E: attention on E
data-parallel ranks), and its model and quantization map as in ``serving_truth.py``. Each is simulated with
``api.serve`` as ``serving_truth.py`` simulates the other rows (``Case.options``: a closed loop of ``concurrency``
clients, fixed lengths, the engine's scheduling and token budget, ``requests_for(concurrency)`` requests), with
``--ep E`` alone and each rank's sequence limit the row's ``batch_size`` (the engine's per-rank batch; the
concurrency where none is given), on the ``roofline`` stack and on the engine's (``stacks/<backend>.yaml``,
fitted to the tensor-parallel rows: no data-parallel row was fitted on). Rows whose ``attention_dp_size`` is not
their ``ep_effective`` are left out, named: their labels do not say which GPUs the attention ranks are.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_truth as st  # noqa: E402  (the aggregated rows' script: its maps and rules)


def dp_cases(path: Path) -> tuple[list[tuple[st.Case, int]], list[str]]:
    """The usable data-parallel rows as (Case, per-rank sequence limit), and why others were left out."""
    cases, skipped = [], []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["mode"] != "agg" or row["tp_effective"] != "1" or row["ep_effective"] in ("", "1"):
                continue
            if row["attention_dp_size"] != row["ep_effective"]:
                # attention on 16 or 64 ranks beside experts on 4 or 8 GPUs: a product label, whose per-rank
                # batch_size (concurrency / attention_dp_size) fits neither reading of the layout
                skipped.append(f"{row['id']}: attention_dp_size {row['attention_dp_size']} against "
                               f"ep_effective {row['ep_effective']}")
                continue
            try:
                plain = st.case_of({**row, "attention_dp_size": "1", "ep_effective": "1"})  # its maps and rules
            except st.Skip as why:
                skipped.append(f"{row['id']}: {why}")
                continue
            ranks = int(row["ep_effective"])
            seqs = int(row["batch_size"]) if row["batch_size"] else plain.concurrency
            cases.append((replace(plain, ep=ranks, fit=False, batch=seqs), seqs))
    return cases, skipped


def predict(case: st.Case, seqs: int, stack: str) -> tuple[float, float]:
    """(TTFT, TPOT) mean in ms of ``api.serve`` on the row, ``seqs`` sequences a rank (the stack's own fusions)."""
    return st.serve_means(stack, {**case.options, "max_num_seqs": seqs})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="?", default=st.DEFAULT_CSV)
    ap.add_argument("--json", metavar="FILE", help="also write every row's predictions as JSON")
    args = ap.parse_args(argv)
    cases, skipped = dp_cases(Path(args.csv) if Path(args.csv).is_absolute() else st.ROOT / args.csv)
    rows = []
    for case, seqs in cases:
        rows.append((case, seqs, {m: predict(case, seqs, s) for m, s in (("roofline", "roofline"),
                                                                          ("stack", case.backend))}))
    w = sys.stdout.write
    w("| engine | model | quant | ranks | seqs a rank | c | isl/osl | TTFT measured / roofline / stack ms | "
      "TPOT measured / roofline / stack ms |\n|---|---|---|--:|--:|--:|---|---|---|\n")
    for case, seqs, p in rows:
        q = dict(case.dtypes).get("weight_dtype", "bf16")
        w(f"| {case.backend} | {case.model} | {q} | {case.ep} | {seqs} | {case.concurrency} | {case.isl}/{case.osl} | "
          f"{case.ttft_ms:,.0f} / {p['roofline'][0]:,.0f} / {p['stack'][0]:,.0f} | "
          f"{case.tpot_ms:.1f} / {p['roofline'][1]:.1f} / {p['stack'][1]:.1f} |\n")
    for m, label in (("roofline", "roofline"), ("stack", "engine")):
        for k, name in ((1, "TPOT"), (0, "TTFT")):
            ratios = [p[m][k] / (c.tpot_ms if k else c.ttft_ms) for c, _, p in rows]
            error = statistics.fmean(abs(r - 1) for r in ratios)
            w(f"\n{label} stack, {name}: mean absolute error {error:.1%}, median ratio predicted / measured "
              f"{statistics.median(ratios):.2f} ({len(ratios)} rows)")
    w("\n" + (f"\nLeft out: {'; '.join(skipped)}\n" if skipped else ""))
    if args.json:
        Path(args.json).write_text(json.dumps([{"id": c.id, "ranks": c.ep, "seqs_a_rank": s, "concurrency":
                                                c.concurrency, "isl": c.isl, "osl": c.osl,
                                                "measured": {"ttft_ms": c.ttft_ms, "tpot_ms": c.tpot_ms},
                                                "predicted": {m: {"ttft_ms": v[0], "tpot_ms": v[1]}
                                                              for m, v in p.items()}} for c, s, p in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
