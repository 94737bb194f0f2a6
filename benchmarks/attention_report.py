"""Issue 17's target tables from a benchmarks/attention_gpu.py record (markdown, for docs/attention.md).

    python benchmarks/attention_report.py RECORD.json [--copy-gbps 4246] [--ours '128x128 w8 s3']

Prefill: our chosen config's time against torch SDPA's flash (FlashAttention-2) backend and against torch's best
backend; target: faster than the first at every size, ≥ 0.8× the best from 4,096 tokens. Decode: our chosen
config against torch's default and the copy ceiling (q + K + V + o at the copy rate, bytes read + written);
targets: ≥ 1.5× torch where torch is below 50% of the ceiling, ≥ 90% of the ceiling from 16 × 4,096 up, never
slower than torch. TFLOP/s use the FlashAttention papers' causal convention, 4·B·h·S²·d/2.
"""

from __future__ import annotations

import json
import sys

OURS: str | None = None  # --ours NAME: the row of that config (a run whose chosen config has since changed)


def chosen(times: dict) -> tuple[str, float]:
    if OURS is not None:
        for name, t in times.items():
            if name.startswith("ours") and name.endswith(OURS) and "s" in t:
                return name, t["s"]
    for name, t in times.items():
        if name.startswith("ours") and "chosen" in name and "s" in t:
            return name, t["s"]
    ours = {n: t["s"] for n, t in times.items() if n.startswith("ours") and "s" in t}
    first = next(iter(ours))
    return first, ours[first]


def prefill_table(rows: list[dict]) -> list[str]:
    out = ["| B × S | ours ms (TFLOP/s) | SDPA flash ms | ours vs flash | torch best (backend) ms | ours / best | "
           "target met |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        b, _, _, s, _ = r["shape"]
        t = r["times"]
        _, ours = chosen(t)
        flash = t["sdpa FLASH_ATTENTION"]["s"]
        backends = {n: v["s"] for n, v in t.items() if n.startswith("sdpa") and "s" in v}
        best_name = min(backends, key=lambda n: backends[n])
        best = backends[best_name]
        ratio = best / ours
        met = ours < flash and ratio >= 0.8
        out.append(f"| {b} × {s:,} | {ours * 1e3:.3f} ({r['fa_flops'] / ours / 1e12:.0f}) | {flash * 1e3:.3f} | "
                   f"{flash / ours:.2f}× | {best * 1e3:.3f} ({best_name.removeprefix('sdpa ')}) | {ratio:.2f} | "
                   f"{'yes' if met else 'NO'} |")
    return out


def decode_table(rows: list[dict], copy_bps: float) -> list[str]:
    out = ["| B × L | ours µs | % ceiling | torch µs | % ceiling | speedup | target | met |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, _, _, n, _ = r["shape"]
        t = r["times"]
        _, ours = chosen(t)
        torch_t = t["sdpa default"]["s"]
        ceiling = r["bytes"] / copy_bps
        pct_ours, pct_torch = 100 * ceiling / ours, 100 * ceiling / torch_t
        if pct_torch < 50:
            target, met = "≥ 1.5× torch", torch_t / ours >= 1.5
        elif b * n >= 16 * 4096:
            target, met = "≥ 90% ceiling, ≥ torch", pct_ours >= 90 and ours <= torch_t
        else:
            target, met = "≥ torch", ours <= torch_t
        out.append(f"| {b} × {n:,} | {ours * 1e6:.1f} | {pct_ours:.0f}% | {torch_t * 1e6:.1f} | {pct_torch:.0f}% | "
                   f"{torch_t / ours:.2f}× | {target} | {'yes' if met else 'NO'} |")
    return out


def main() -> None:
    global OURS
    rec = json.load(open(sys.argv[1]))
    if "--ours" in sys.argv:
        OURS = sys.argv[sys.argv.index("--ours") + 1]
    copy = rec["env"].get("copy_bw_bytes_per_s")
    if "--copy-gbps" in sys.argv:
        copy = float(sys.argv[sys.argv.index("--copy-gbps") + 1]) * 1e9
    print(f"{rec['env']['gpu']}, torch {rec['env']['torch']}, triton {rec['env']['triton']}, {rec['env']['date']}; "
          f"copy ceiling {copy / 1e9:,.0f} GB/s\n")
    if rec.get("prefill"):
        print("\n".join(prefill_table(rec["prefill"])))
        print()
    if rec.get("decode"):
        print("\n".join(decode_table(rec["decode"], copy)))


if __name__ == "__main__":
    main()
