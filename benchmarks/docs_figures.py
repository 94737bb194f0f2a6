"""The performance figures of the docs, generated from the committed records under docs/results/.

Each generated block sits between `<!-- figures:NAME -->` and `<!-- /figures:NAME -->` in a doc; this script
rewrites what is between them from the records, so that no figure in those blocks is typed by hand.

    python benchmarks/docs_figures.py           # rewrite the blocks
    python benchmarks/docs_figures.py --check   # exit 1, naming each block that differs from its records

tests/test_docs_figures.py runs the check. Records are read through rooflinectl.records.kernel.load, the one
reader of `measure --save` files; the CLI's start-up times come from a saved `benchmarks/cli_speed.sh` output.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from rooflinectl.records.kernel import MeasurementFile, ShapeRecord, load

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
MORNING = RESULTS / "h200-2026-12-02"
SOFTMAX = RESULTS / "h200-2026-12-02-softmax"
CLI_SPEED = RESULTS / "cli-speed-2026-12-03.txt"
RMS16 = RESULTS / "h200-2026-12-03-rmsnorm-linear"  # issue 16: `measure` and benchmarks/rmsnorm_linear_gpu.py

# Issue 4's and issue 5's targets, as the issues state them: softmax at least this share of the copy ceiling.
SOFTMAX_TARGET_PCT = {1024: 85, 2048: 85, 4096: 85, 8192: 85, 16384: 85, 65536: 70, 262144: 70}
RMSNORM_TARGET_US = {"1x4096x4096": 11.0, "1x4096x14336": 34.0}  # issue 5's absolute targets
MODES = {"_softmax_rows_kernel": "rows", "_softmax_online_kernel": "online", "_softmax_split_kernel": "split"}


def num(x: float) -> str:
    """Three significant figures, thousands separated: 5.48, 17.7, 313, 1,330."""
    if x >= 1000:
        return f"{round(x, -len(str(int(x))) + 3):,.0f}"
    return f"{x:.3g}" if x >= 100 else f"{x:#.3g}".rstrip(".")


def us(seconds: float) -> str:
    return num(seconds * 1e6)


def baseline(r: ShapeRecord, name: str) -> float | None:
    return next((b.time_s for b in r.baselines if b.name == name and b.time_s is not None), None)


def rel(path: Path) -> str:
    return path.relative_to(RESULTS.parent).as_posix()  # as a link from a doc in docs/


def records(path: Path) -> tuple[MeasurementFile, dict[str, ShapeRecord]]:
    run = load(path)
    return run, {r.shape_text: r for r in run.records}


# --- docs/performance.md --------------------------------------------------------------------------------------


def softmax_table() -> str:
    bf16_run, bf16 = records(SOFTMAX / "softmax-bf16.json")
    fp32_run, fp32 = records(SOFTMAX / "softmax-fp32.json")
    lines = ["| rows × cols | mode | bf16 µs | bf16 GB/s | bf16 of copy | eager µs | × eager | compile µs | × compile "
             "| fp32 µs | fp32 of copy | fp32 eager µs | target (of copy) | met |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for shape, b in bf16.items():
        f = fp32[shape]
        cols = b.shape[1]
        eager, compiled, f_eager = baseline(b, "torch"), baseline(b, "compile"), baseline(f, "torch")
        target = SOFTMAX_TARGET_PCT.get(cols)
        target_text = f"≥ {target}%" if target else "(none)"
        met = "—" if target is None else {(True, True): "yes", (False, True): "fp32 only", (True, False): "bf16 only",
                                          (False, False): "no"}[(b.measured_roof_pct >= target,
                                                                 f.measured_roof_pct >= target)]
        lines.append(
            f"| {b.shape[0]} × {cols:,} | {MODES[b.launches[0].function]} | {us(b.time_s)} | {num(b.achieved_gbps)} "
            f"| {b.measured_roof_pct:.0f}% | {us(eager)} | {eager / b.time_s:.2f} | {us(compiled)} "
            f"| {compiled / b.time_s:.2f} | {us(f.time_s)} | {f.measured_roof_pct:.0f}% | {us(f_eager)} "
            f"| {target_text} | {met} |")
    worst_b = max(r.correctness.rel_error for r in bf16.values())
    worst_f = max(r.correctness.rel_error for r in fp32.values())
    lines += ["", f"Records: [{rel(SOFTMAX / 'softmax-bf16.json')}]({rel(SOFTMAX / 'softmax-bf16.json')}) "
              f"({bf16_run.date}) and [{rel(SOFTMAX / 'softmax-fp32.json')}]({rel(SOFTMAX / 'softmax-fp32.json')}) "
              f"({fp32_run.date}); copy ceilings of the two runs {num(bf16_run.ceilings.copy_bandwidth_gbps)} and "
              f"{num(fp32_run.ceilings.copy_bandwidth_gbps)} GB/s. Every shape passed its check first: largest "
              f"relative error bf16 {worst_b:.2g}, fp32 {worst_f:.3g}."]
    return "\n".join(lines)


def morning_checks() -> str:
    worst: dict[str, float] = {}
    names = []
    for path in sorted(MORNING.glob("*.json")):
        run = load(path)
        names.append(f"[{path.name}]({rel(path)})")
        for r in run.records:
            if r.status == "passed":
                worst[r.dtype] = max(worst.get(r.dtype, 0.0), r.correctness.rel_error)
    errors = ", ".join(f"{d} ≤ {e:.2g}" for d, e in sorted(worst.items()))
    return (f"Every shape of the 11:34–11:40 UTC records ({', '.join(names)}) passed its check before it was "
            f"timed; largest relative error: {errors}.")


def softmax_before() -> str:
    """The same command at 11:34 UTC, before that afternoon's changes: times and shares of copy."""
    parts = []
    for dtype in ("bf16", "fp32"):
        _, before = records(MORNING / f"softmax-{dtype}.json")
        parts.append(f"{dtype} " + ", ".join(f"{r.shape[1]:,}: {us(r.time_s)} µs ({r.measured_roof_pct:.0f}%)"
                                              for r in before.values()))
    return (f"Before that afternoon (11:34 UTC, same machine image, same command; records "
            f"[{rel(MORNING / 'softmax-bf16.json')}]({rel(MORNING / 'softmax-bf16.json')}) and "
            f"[{rel(MORNING / 'softmax-fp32.json')}]({rel(MORNING / 'softmax-fp32.json')})), by columns, with the "
            f"share of copy: {'; '.join(parts)}.")


def copy_matmul() -> str:
    _, copy = records(MORNING / "copy-bf16.json")
    _, mm = records(MORNING / "matmul-bf16.json")
    (c,) = copy.values()
    (m,) = mm.values()
    ct, mt = baseline(c, "torch"), baseline(m, "torch")
    assert ct is not None and mt is not None
    return "\n".join([
        "| kernel | shape, bf16 | time | achieved | torch | × torch | target | met |",
        "|---|---|---|---|---|---|---|---|",
        f"| `copy` | {c.shape_text} elements | {us(c.time_s)} µs | {num(c.achieved_gbps)} GB/s | {us(ct)} µs "
        f"| {ct / c.time_s:.2f} | ≥ 0.95 | {'met' if ct / c.time_s >= 0.95 else 'no'} |",
        f"| `matmul` | {m.shape_text} | {us(m.time_s)} µs | {num(m.achieved_tflops)} TFLOP/s | {us(mt)} µs "
        f"({num(m.flops / mt / 1e12)} TFLOP/s) | {mt / m.time_s:.2f} | ≥ 0.70 | "
        f"{'met' if mt / m.time_s >= 0.70 else 'no'} |",
        "",
        f"Records: [{rel(MORNING / 'copy-bf16.json')}]({rel(MORNING / 'copy-bf16.json')}), "
        f"[{rel(MORNING / 'matmul-bf16.json')}]({rel(MORNING / 'matmul-bf16.json')}).",
    ])


def rmsnorm_rows() -> list[tuple[ShapeRecord, bool]]:
    """issue 5's shapes from the first run, the four decode batches from the run after the in-loop change (†)."""
    _, first = records(MORNING / "rmsnorm_linear-bf16.json")
    _, inloop = records(MORNING / "rmsnorm-decode-inloop.json")
    return [(inloop[s], True) if s in inloop else (r, False) for s, r in first.items()]


def rmsnorm_table() -> str:
    lines = ["| M × K × N | fused µs | eager µs | compile µs | × eager | × compile | target | met |",
             "|---|---|---|---|---|---|---|---|"]
    for r, dagger in rmsnorm_rows():
        eager, compiled = baseline(r, "torch"), baseline(r, "compile")
        assert eager is not None and compiled is not None
        if r.shape_text in RMSNORM_TARGET_US:
            target, met = f"≤ {RMSNORM_TARGET_US[r.shape_text]:g} µs", r.time_s * 1e6 <= RMSNORM_TARGET_US[r.shape_text]
        elif r.shape[0] == 8192:
            target, met = "≤ 1.15 × matmul alone", None
        else:
            target, met = "≤ compile", r.time_s <= compiled
        lines.append(f"| {' × '.join(str(n) for n in r.shape)}{' †' if dagger else ''} | {us(r.time_s)} | "
                     f"{us(eager)} | {us(compiled)} | {eager / r.time_s:.2f} | {compiled / r.time_s:.2f} | {target} "
                     f"| {'—' if met is None else 'yes' if met else 'no'} |")
    return "\n".join(lines)


def rmsnorm_summary() -> str:
    rows = rmsnorm_rows()
    vs_eager = [baseline(r, "torch") / r.time_s for r, _ in rows]  # type: ignore[operator]
    vs_compile = [baseline(r, "compile") / r.time_s for r, _ in rows]  # type: ignore[operator]
    beats = [r.shape_text for (r, _), x in zip(rows, vs_compile) if x >= 1]
    n = len(rows)
    eager_text = (f"beats eager at all {n} shapes ({min(vs_eager):.2f}–{max(vs_eager):.2f}×)"
                  if min(vs_eager) > 1 else
                  f"beats eager at {sum(x > 1 for x in vs_eager)} of {n} shapes")
    return (f"The fused kernel {eager_text} and reaches torch.compile at {len(beats)} of them "
            f"({', '.join(beats)}). Records: [{rel(MORNING / 'rmsnorm_linear-bf16.json')}]"
            f"({rel(MORNING / 'rmsnorm_linear-bf16.json')}); rows marked † from "
            f"[{rel(MORNING / 'rmsnorm-decode-inloop.json')}]({rel(MORNING / 'rmsnorm-decode-inloop.json')}), "
            f"after the gemv took the sum of squares inside its matmul loop from M = 8 up.")


def cli_table() -> str:
    text = CLI_SPEED.read_text()
    header = text.splitlines()[0].lstrip("# ").split("; load before")[0]
    base = re.search(r"^baseline: .*?([\d.]+) s$", text, re.M)
    assert base is not None, f"{CLI_SPEED}: no baseline line"
    lines = ["| command | time | over the baseline |", "|---|---|---|"]
    for m in re.finditer(r"^(rooflinectl .*?)\s+([\d.]+) s\s+\(\+([\d.]+) s over the baseline\)$", text, re.M):
        command = re.sub(r"/tmp/tmp\.\w+/", "", m.group(1))
        lines.append(f"| `{command}` | {m.group(2)} s | +{m.group(3)} s |")
    loads = re.findall(r"load (?:before|after): ([\d. ]+)", text)
    lines += ["", f"{header}; the library-import baseline {base.group(1)} s; load average (1, 5, 15 min) "
              f"{' before, '.join(loads)} after. Record: [{rel(CLI_SPEED)}]({rel(CLI_SPEED)})."]
    return "\n".join(lines)


# --- docs/kernels-tuning.md ----------------------------------------------------------------------------------

SECTION = re.compile(r"^ -- softmax \(4096, (\d+)\) (\w+)")
CANDIDATE = re.compile(r"^\s+\*?\s+([\d.]+) us \(flush .*?\)\s+(\d+) GB/s .*?row=\S+\s+(.*?)\s+\|")
COPY_SAME = re.compile(r"^\s+copy same bytes\s+([\d.]+) us")
COPY_CEILING = re.compile(r"^torch copy_ bf16 \d+ elements: [\d.]+ us, (\d+) GB/s")


def tune_log(path: Path) -> tuple[float, dict[tuple[str, int], tuple[dict[str, tuple[float, float]], float]]]:
    """A tune_softmax.py log: its copy_ ceiling (GB/s), and per (dtype, columns) each config's (µs, GB/s) and
    the Triton copy of the same bytes (µs)."""
    ceiling = 0.0
    out: dict[tuple[str, int], tuple[dict[str, tuple[float, float]], float]] = {}
    key: tuple[str, int] | None = None
    for line in path.read_text().splitlines():
        if (m := COPY_CEILING.match(line)) and not ceiling:
            ceiling = float(m.group(1))
        elif m := SECTION.match(line):
            key = (m.group(2), int(m.group(1)))
            out[key] = ({}, 0.0)
        elif key and (m := CANDIDATE.match(line)):
            out[key][0].setdefault(m.group(3), (float(m.group(1)), float(m.group(2))))
        elif key and (m := COPY_SAME.match(line)):
            out[key] = (out[key][0], float(m.group(1)))
    return ceiling, out


def picked_configs(path: Path) -> dict[tuple[str, int], str]:
    """The configs run() picks, as a tune_kernels.py --final log's summary names them (its last column)."""
    row = re.compile(r"^fused_softmax\s+\(4096, (\d+)\)\s+(\w+)\s.*?(?:OK|SHORT|-)\s.*?\s((?:rows|online|split) b=.*)$")
    return {(m.group(2), int(m.group(1))): m.group(3).strip()
            for line in path.read_text().splitlines() if (m := row.match(line))}


def _range(values: list[float], fmt: str) -> str:
    texts = sorted({fmt.format(v) for v in values}, key=lambda t: float(t.replace(",", "")))
    return texts[0] if len(texts) == 1 else f"{texts[0]}–{texts[-1]}"


def _mode(config: str) -> str:
    words = dict(w.split("=") for w in config.split()[1:])
    mode = config.split()[0]
    part = f"parts of {words['chunks']} × {int(words['b']):,}" if mode == "split" else ""
    rows = f"{words['r']} row / " if mode == "rows" else ""
    text = ", ".join(t for t in (mode, part, f"{rows}{words['w']} warps") if t)
    return text + (", PDL" if words["pdl"] == "1" else "")


def tuning_softmax_table() -> str:
    picked = picked_configs(SOFTMAX / "tune-kernels-run9-final.log")
    runs = {7: tune_log(SOFTMAX / "tune-softmax-run7.log"), 8: tune_log(SOFTMAX / "tune-softmax-run8.log")}
    lines = ["| columns | config `run()` picks | bf16 µs | %copy | fp32 µs | %copy | Triton copy of the same bytes, "
             "bf16 / fp32 µs | runs |", "|---|---|---|---|---|---|---|---|"]
    measured = {key for _, sections in runs.values() for key in sections}
    for cols in sorted({c for d, c in picked if (d, c) in measured}):
        cells, copies, used = [], [], []
        for dtype in ("bf16", "fp32"):
            config = picked[(dtype, cols)]
            times, pcts, same = [], [], []
            for n, (ceiling, sections) in runs.items():
                configs, copy_us = sections.get((dtype, cols), ({}, 0.0))
                if config in configs:
                    t, gbps = configs[config]
                    times.append(t)
                    pcts.append(100 * gbps / ceiling)
                    same.append(copy_us)
                    used.append(n)
            cells += [_range(times, "{:,.1f}"), _range(pcts, "{:.0f}")]
            copies.append(_range(same, "{:,.1f}"))
        modes = {_mode(picked[(d, cols)]) for d in ("bf16", "fp32")}
        mode = " / ".join(f"{d}: {_mode(picked[(d, cols)])}" for d in ("bf16", "fp32")) if len(modes) > 1 \
            else modes.pop()
        lines.append(f"| {cols:,} | {mode} | {' | '.join(cells)} | {' / '.join(copies)} "
                     f"| {', '.join(str(n) for n in sorted(set(used)))} |")
    ceilings = ", ".join(f"run {n} {c:,.0f} GB/s" for n, (c, _) in runs.items())
    return "\n".join(lines + ["", f"%copy against the torch `copy_` of the same run ({ceilings}). Logs: "
                               f"[tune-softmax-run7.log]({rel(SOFTMAX / 'tune-softmax-run7.log')}), "
                               f"[tune-softmax-run8.log]({rel(SOFTMAX / 'tune-softmax-run8.log')}); the configs "
                               f"from the summary of [tune-kernels-run9-final.log]"
                               f"({rel(SOFTMAX / 'tune-kernels-run9-final.log')})."])


# --- README.md ------------------------------------------------------------------------------------------------


# --- docs/performance.md, issue 16 ------------------------------------------------------------------------------


def rmsnorm16_table() -> str:
    """Issue 16's 11 shapes as `measure --baseline all` timed them: ours against eager, compile and cuBLAS alone."""
    run, by_shape = records(RMS16 / "measure-rmsnorm_linear.json")
    lines = ["| M × K × N | ours µs | eager µs | compile µs | cuBLAS alone µs | ours/compile | ours/cuBLAS | "
             "of copy |", "|---|---|---|---|---|---|---|---|"]
    for r in by_shape.values():
        eager, compiled, cublas = baseline(r, "torch"), baseline(r, "compile"), baseline(r, "cublas")
        assert eager and compiled and cublas and r.time_s, r.shape_text
        share = f"{r.measured_roof_pct:.0f}%" if r.shape[0] <= 64 and r.measured_roof_pct is not None else "—"
        lines.append(f"| {' × '.join(map(str, r.shape))} | {us(r.time_s)} | {us(eager)} | {us(compiled)} | "
                     f"{us(cublas)} | {r.time_s / compiled:.2f} | {r.time_s / cublas:.2f} | {share} |")
    lines += ["", f"Record: [{rel(RMS16 / 'measure-rmsnorm_linear.json')}]"
                  f"({rel(RMS16 / 'measure-rmsnorm_linear.json')}) ({run.gpu.name}, torch {run.torch_version}, "
                  f"triton {run.triton_version}); \"of copy\": decode rows against the copy ceiling measured in the "
                  f"same run."]
    return "\n".join(lines)


def _bench_report():
    """benchmarks/rmsnorm_linear_gpu.py's report function (this script is also loaded by path, from the tests)."""
    import importlib.util

    here = Path(__file__).resolve().parent  # not ROOT, which the tests point at a copy of the docs
    spec = importlib.util.spec_from_file_location("rmsnorm_linear_gpu", here / "rmsnorm_linear_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.report


def _bench_table(run: str) -> str:
    import json

    return _bench_report()(json.loads((RMS16 / run / "rmsnorm_linear_gpu.json").read_text()))


def rmsnorm16_grid() -> str:
    """The last bf16 run of benchmarks/rmsnorm_linear_gpu.py (run 16d): every shape of issue 16's grids."""
    return _bench_table("run16d")


def rmsnorm16_fp16() -> str:
    """The same in fp16 (run 16e): issue 16's "fp16 the same"."""
    return _bench_table("run16e-fp16")


def readme_kernels() -> str:
    _, sm = records(SOFTMAX / "softmax-bf16.json")
    _, sm32 = records(SOFTMAX / "softmax-fp32.json")
    _, copy = records(MORNING / "copy-bf16.json")
    _, mm = records(MORNING / "matmul-bf16.json")
    _, rl = records(RMS16 / "measure-rmsnorm_linear.json")
    lines = ["| kernel | shape, bf16 | time | achieved | against |", "|---|---|---|---|---|"]
    for shape in ("4096x4096", "4096x8192", "4096x262144"):
        r = sm[shape]
        eager, compiled = baseline(r, "torch"), baseline(r, "compile")
        assert eager is not None and compiled is not None
        extra = f", {compiled / r.time_s:.2f}× torch.compile" if shape == "4096x4096" else ""
        fp32 = f" (fp32: {sm32[shape].measured_roof_pct:.0f}% of copy)" if shape == "4096x262144" else ""
        lines.append(f"| `fused_softmax` | {r.shape[0]} × {r.shape[1]} | {us(r.time_s)} µs | {num(r.achieved_gbps)} "
                     f"GB/s, {r.measured_roof_pct:.0f}% of copy | {eager / r.time_s:.2f}× torch eager{extra}{fp32} |")
    (c,) = copy.values()
    (m,) = mm.values()
    assert c.shape == [2**28] and m.shape == [8192] * 3, "the labels below name these shapes"
    r = rl["8x4096x14336"]
    ct, mt, re_, rc = baseline(c, "torch"), baseline(m, "torch"), baseline(r, "torch"), baseline(r, "compile")
    rb = baseline(r, "cublas")
    assert ct and mt and re_ and rc and rb
    lines += [
        f"| `copy` | 2²⁸ elements | {us(c.time_s)} µs | {num(c.achieved_gbps)} GB/s | {ct / c.time_s:.2f}× torch `copy_` |",
        f"| `matmul` | 8192³ | {num(m.time_s * 1e3)} ms | {num(m.achieved_tflops)} TFLOP/s | {mt / m.time_s:.2f}× torch "
        f"matmul |",
        f"| `rmsnorm_linear` | 8 × 4096 × 14336 | {us(r.time_s)} µs | {num(r.achieved_gbps)} GB/s | {re_ / r.time_s:.2f}× "
        f"eager, {rc / r.time_s:.2f}× torch.compile, {rb / r.time_s:.2f}× cuBLAS's `F.linear` alone |",
    ]
    return "\n".join(lines)


BLOCKS: dict[str, list[tuple[str, Callable[[], str]]]] = {
    "docs/performance.md": [("softmax", softmax_table), ("softmax-before", softmax_before),
                            ("morning-checks", morning_checks),
                            ("copy-matmul", copy_matmul), ("rmsnorm", rmsnorm_table),
                            ("rmsnorm-summary", rmsnorm_summary), ("rmsnorm16", rmsnorm16_table),
                            ("rmsnorm16-grid", rmsnorm16_grid), ("rmsnorm16-fp16", rmsnorm16_fp16),
                            ("cli", cli_table)],
    "README.md": [("kernels", readme_kernels)],
    "docs/kernels-tuning.md": [("softmax-configs", tuning_softmax_table)],
}


def render(text: str, name: str, body: str, doc: str) -> str:
    pattern = re.compile(rf"(<!-- figures:{re.escape(name)} -->\n).*?(<!-- /figures:{re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{doc}: no block <!-- figures:{name} --> … <!-- /figures:{name} -->")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block differs")
    args = parser.parse_args(argv)
    stale = []
    for doc, blocks in BLOCKS.items():
        path = ROOT / doc
        old = path.read_text()
        new = old
        for name, make in blocks:
            new = render(new, name, make(), doc)
            if render(old, name, make(), doc) != old:
                stale.append(f"{doc}: figures:{name}")
        if new != old and not args.check:
            path.write_text(new)
    if args.check and stale:
        print("differ from their records (run python benchmarks/docs_figures.py):\n  " + "\n  ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
