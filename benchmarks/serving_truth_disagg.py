"""The disaggregated serving simulation (``analyze serve --disagg``) against the published disaggregated runs of
SGLang, TensorRT-LLM and vLLM: mean TTFT and mean TPOT, predicted and measured, per row and per engine.

    python benchmarks/serving_truth_disagg.py [CSV] [--json FILE]     # the report (markdown) on stdout

CSV: the published runs (default ``../shared/serving_truth/published_h100_b200.csv``; its README states the
columns), read at run time, never copied into the project. A row is used when its ``mode`` is ``disagg``, its model
and quantization map as in ``serving_truth.py``, and neither side runs data-parallel attention
(``*_attention_dp_size`` 1: ``serve`` simulates EP only with TP on the same GPUs). Each is simulated with
``api.serve``: ``concurrency`` clients in a closed loop, every request ``isl`` prompt and ``osl`` output tokens,
``--disagg prefill_num_workers:decode_num_workers``, each side's TP (``*_tp_size``) and EP (``*_moe_ep_size``
where above 1), the decode side's sequence limit its ``decode_batch_size``, the prefill side's its
``prefill_batch_size``, 8,192 tokens a step with chunked prefill, blocks of 16, the KV cache in bf16, the KV sent
after the prefill, and ``serving_truth.requests_for(concurrency)`` requests; on the ``roofline`` stack and on the
engine's (``stacks/<backend>.yaml``, fitted to the aggregated rows: no disaggregated row was fitted on).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_truth as st  # noqa: E402  (the aggregated rows' script: its maps and rules)

ROOT = st.ROOT


@dataclass(frozen=True)
class DisaggCase:
    """One usable disaggregated row and the options it is simulated with."""

    id: str
    backend: str
    system: str
    model: str
    gpu: str
    layouts: tuple[tuple[int, int, int], tuple[int, int, int]]  # (replicas, tp, ep) of prefill and of decode
    seqs: tuple[int, int]  # prefill and decode batch limits
    concurrency: int
    isl: int
    osl: int
    dtypes: tuple[tuple[str, str], ...]
    tpot_ms: float
    ttft_ms: float

    @property
    def options(self) -> dict[str, object]:
        (p, ptp, pep), (d, dtp, dep) = self.layouts
        return dict(gpu=self.gpu, model=self.model, concurrency=self.concurrency, prompt=self.isl, output=self.osl,
                    requests=st.requests_for(self.concurrency), disagg=(p, d), prefill_tp=ptp, prefill_ep=pep,
                    decode_tp=dtp, decode_ep=dep, prefill_max_num_seqs=self.seqs[0], max_num_seqs=self.seqs[1],
                    fuse=list(st.FUSED), **dict(self.dtypes))

    def label(self) -> str:
        (p, ptp, pep), (d, dtp, dep) = self.layouts
        def side(n: int, tp: int, ep: int) -> str:
            return f"{n}×TP{tp}" + (f"EP{ep}" if ep > 1 else "")
        return f"{side(p, ptp, pep)} + {side(d, dtp, dep)}"


def _side(row: dict[str, str], which: str) -> tuple[int, int, int]:
    if row[f"{which}_attention_dp_size"] not in ("", "1"):
        raise st.Skip("attention data parallelism")
    tp = int(row[f"{which}_tp_size"])
    ep = int(row[f"{which}_moe_ep_size"] or "0")
    ep = ep if ep > 1 else 1
    if ep > 1 and ep != tp:
        raise st.Skip("expert parallelism other than on the TP GPUs")
    return int(row[f"{which}_num_workers"]), tp, ep


def case_of(row: dict[str, str]) -> DisaggCase:
    if row["mode"] != "disagg":
        raise st.Skip(f"mode {row['mode']}")
    if row["model_path"] not in st.MODELS:
        raise st.Skip(f"no bundled model ({row['model_path']})")
    if row["system"] not in st.SYSTEMS:
        raise st.Skip(f"system {row['system']}")
    layouts = (_side(row, "prefill"), _side(row, "decode"))
    model, gpu = st.MODELS[row["model_path"]], st.SYSTEMS[row["system"]]
    dtypes = st.quant_options(row["gemm_quant_mode"], row["moe_quant_mode"], st._has_experts(model),
                              st._has_fp4(gpu))
    return DisaggCase(row["id"], row["backend"], row["system"], model, gpu, layouts,
                      (int(row["prefill_batch_size"] or "1"), int(row["decode_batch_size"])),
                      int(row["concurrency"]), int(row["isl"]), int(row["osl"]), tuple(sorted(dtypes.items())),
                      float(row["silicon_tpot_ms"]), float(row["silicon_ttft_ms"]))


def predict(case: DisaggCase, stack: str) -> tuple[float, float]:
    """(mean TTFT, mean TPOT) in ms."""
    return st.serve_means(stack, case.options)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="?", default=st.DEFAULT_CSV)
    ap.add_argument("--json", metavar="FILE", help="also write every row's predictions as JSON")
    args = ap.parse_args(argv)
    import os

    os.chdir(ROOT)
    with Path(args.csv).open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["mode"] == "disagg"]
    cases, skipped = [], {}
    for row in rows:
        try:
            cases.append(case_of(row))
        except st.Skip as why:
            skipped[str(why)] = skipped.get(str(why), 0) + 1
    out: list[dict[str, object]] = []
    started = time.time()
    for case in cases:
        got: dict[str, object] = {"id": case.id, "backend": case.backend, "gpu": case.gpu, "model": case.model,
                                  "layout": case.label(), "quant": dict(case.dtypes).get("weight_dtype", "bf16"),
                                  "concurrency": case.concurrency, "isl": case.isl, "osl": case.osl,
                                  "ttft_ms": case.ttft_ms, "tpot_ms": case.tpot_ms}
        for stack in ("roofline", case.backend):
            try:
                got[stack] = predict(case, stack)
            except Exception as e:  # a row the simulation refuses (it does not fit): reported, not fatal
                got[stack] = None
                got[f"{stack}_error"] = str(e).splitlines()[0]
        out.append(got)
        print(f"  {len(out)}/{len(cases)} {time.time() - started:.0f}s", file=sys.stderr)
    w = sys.stdout.write
    w(f"{len(rows)} disaggregated rows; {len(cases)} simulated; skipped: "
      + "; ".join(f"{k} ({n})" for k, n in sorted(skipped.items())) + "\n\n")
    w("| engine | GPU | model | quant | prefill + decode | c | isl/osl | TTFT ms measured | roofline | engine stack "
      "| TPOT ms measured | roofline | engine stack |\n|---|---|---|---|---|--:|---|--:|--:|--:|--:|--:|--:|\n")
    for g in out:
        def cell(stack: str, i: int, g: dict[str, object] = g) -> str:
            p = g[stack]
            return "—" if p is None else f"{p[i]:,.1f} ({p[i] / (g['ttft_ms'] if i == 0 else g['tpot_ms']) - 1:+.0%})"  # type: ignore[index, operator]
        w(f"| {st.ENGINE_NAMES[str(g['backend'])]} | {g['gpu']} | {g['model']} | {g['quant']} | {g['layout']} | "
          f"{g['concurrency']} | {g['isl']}/{g['osl']} | {g['ttft_ms']:,.1f} | {cell('roofline', 0)} | "
          f"{cell(str(g['backend']), 0)} | {g['tpot_ms']:.1f} | {cell('roofline', 1)} | "
          f"{cell(str(g['backend']), 1)} |\n")
    w("\n| method | rows | TPOT MAPE | TPOT median ratio | TTFT MAPE | TTFT median ratio |\n|---|--:|--:|--:|--:|--:|\n")
    for name, key in (("roofline stack", "roofline"), ("engine stack", None)):
        pairs = [(g[key or str(g["backend"])], g) for g in out if g[key or str(g["backend"])] is not None]
        tpot = [p[1] / g["tpot_ms"] for p, g in pairs]  # type: ignore[index, operator]
        ttft = [p[0] / g["ttft_ms"] for p, g in pairs]  # type: ignore[index, operator]
        if pairs:
            w(f"| {name} | {len(pairs)} | {statistics.fmean(abs(x - 1) for x in tpot):.1%} | "
              f"{statistics.median(tpot):.2f} | {statistics.fmean(abs(x - 1) for x in ttft):.1%} | "
              f"{statistics.median(ttft):.2f} |\n")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
