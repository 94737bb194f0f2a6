"""benchmarks/spec_hf_gpu.py's measurements of transformers' assisted generation set beside ``analyze serve --spec``.

Usage: ``PYTHONPATH=. python benchmarks/spec_hf_compare.py [RECORDS_DIR] [--stack hf-warm]``: reads
RECORDS_DIR/spec_hf_gpu.json (default docs/results/h200-2026-12-04-spec), prints measured against predicted and
writes RECORDS_DIR/compare-<stack>.json.

The same case on each side: one request at a time, prompt 512, output 128, Llama-3.1-8B on the H200's calibrated op
model (docs/results/op-model-example/h200-issue14.yaml, calibrated=True). The draft is llama-3.1-8b itself for the
``self`` cases and the two-layer model of llama-2l-draft.yaml for the ``small`` ones. The acceptance given to the
simulation is the one measured: the α whose expected tokens a verification, (1 − α^{K+1}) / (1 − α), is the
measured tokens per target forward. Two requests are simulated and the second is compared: the measured runs
are the median of repeats after a warm-up, so every attention shape had been run before (the stack's
``new_shape_us``), as in the simulation's second request. Measured TPOT is (E2E − E2E of a 1-token generate) / 127.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

import yaml

import rooflinectl.api as rl
from rooflinectl.serving.speculation import expected_tokens

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "docs/results/h200-2026-12-04-spec")
GPU = os.path.join(ROOT, "docs/results/op-model-example/h200-issue14.yaml")
TARGET = "llama-3.1-8b"
DRAFTS = {"self": TARGET, "small": os.path.join(RECORDS, "llama-2l-draft.yaml")}


def warm_stack(stack: str) -> str:
    """``STACK-warm``: the stack's YAML with no cost for a new attention shape, written to a temporary file. The
    measured medians come after a warm-up run of the same tokens (greedy, so the same shapes), so PyTorch's cuDNN
    plans were all built; the simulation's second request draws other acceptances than its first, so its
    verifications would meet shapes new to the run and pay them."""
    if not stack.endswith("-warm"):
        return stack
    with open(os.path.join(ROOT, "stacks", stack.removesuffix("-warm") + ".yaml")) as fh:
        spec = yaml.safe_load(fh)
    spec.update(id=stack, name=spec["name"] + ", every attention shape seen", new_shape_us=0.0)
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix=stack)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(spec, fh)
    return path


def acceptance_for(tokens_per_step: float, k: int) -> float:
    """The α, one for every position, whose expected tokens a verification of k drafts is ``tokens_per_step``
    (bisection: E rises with α from 1 at α = 0 to k + 1 at α = 1)."""
    low, high = 0.0, 1.0
    if tokens_per_step <= 1.0:
        return 0.0
    if tokens_per_step >= k + 1:
        return 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if expected_tokens((mid,) * k) < tokens_per_step:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def predict(draft: str, k: int, accept: float, stack: str = "hf", prompt: int = 512, output: int = 128,
            requests: int = 2) -> dict[str, Any]:
    """The simulated case: the last request's E2E and TPOT with speculation and without, and the tokens a
    verification the simulation drew."""
    common: dict[str, Any] = dict(gpu=GPU, calibrated=True, model=TARGET, concurrency=1, requests=requests,
                                  prompt=prompt, output=output, stack=warm_stack(stack))
    plain = rl.serve(**common).run.served[-1]
    sim = rl.serve(**common, spec=f"draft:{draft}:{k}", accept=accept).simulation
    spec = sim.run.served[-1]
    assert sim.speculation is not None
    return dict(plain_e2e_s=plain.e2e_s, plain_tpot_s=plain.tpot_s, e2e_s=spec.e2e_s, tpot_s=spec.tpot_s,
                tokens_per_step=sim.speculation.tokens_per_step, expected_tokens=expected_tokens((accept,) * k))


def compare(records: dict[str, Any], stack: str) -> list[dict[str, Any]]:
    by = {r["case"]: r for r in records["records"]}
    t1, plain = by["plain-1"]["median_s"], by["plain"]
    rows = []
    for r in records["records"]:
        if not r["k"] or r["case"].endswith("nocudnn"):
            continue
        kind, k, new = r["case"].split("-")[0], r["k"], r["new_tokens"]
        accept = acceptance_for(r["tokens_per_target_step"], k)
        p = predict(DRAFTS[kind], k, accept, stack, r["prompt"], new)
        m_tpot, m_plain_tpot = (r["median_s"] - t1) / (new - 1), (plain["median_s"] - t1) / (new - 1)
        rows.append(dict(
            case=r["case"], k=k, accept=accept, measured_tokens_per_step=r["tokens_per_target_step"],
            predicted_tokens_per_step=p["tokens_per_step"], measured_plain_tpot_s=m_plain_tpot,
            predicted_plain_tpot_s=p["plain_tpot_s"], measured_tpot_s=m_tpot, predicted_tpot_s=p["tpot_s"],
            measured_speedup=plain["median_s"] / r["median_s"], predicted_speedup=p["plain_e2e_s"] / p["e2e_s"],
            measured_e2e_s=r["median_s"], predicted_e2e_s=p["e2e_s"]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("records", nargs="?", default=RECORDS)
    ap.add_argument("--stack", default="hf-warm")
    a = ap.parse_args()
    with open(os.path.join(a.records, "spec_hf_gpu.json")) as fh:
        records = json.load(fh)
    rows = compare(records, a.stack)
    print(f"stack {a.stack}; TPOT ms measured / predicted (error); speed-up in E2E measured / predicted")
    print(f"{'case':>9} {'alpha':>5} {'tok/step m/p':>12} {'plain TPOT':>18} {'spec TPOT':>22} {'speed-up':>18}")
    for row in rows:
        def err(m: float, p: float) -> str:
            return f"{(p - m) / m * 100:+.0f}%"
        print(f"{row['case']:>9} {row['accept']:5.3f} {row['measured_tokens_per_step']:5.2f}/"
              f"{row['predicted_tokens_per_step']:5.2f} "
              f"{row['measured_plain_tpot_s'] * 1e3:5.1f}/{row['predicted_plain_tpot_s'] * 1e3:5.1f} "
              f"({err(row['measured_plain_tpot_s'], row['predicted_plain_tpot_s'])}) "
              f"{row['measured_tpot_s'] * 1e3:5.1f}/{row['predicted_tpot_s'] * 1e3:5.1f} "
              f"({err(row['measured_tpot_s'], row['predicted_tpot_s'])}) "
              f"{row['measured_speedup']:4.2f}/{row['predicted_speedup']:4.2f} "
              f"({err(row['measured_speedup'], row['predicted_speedup'])})")
    with open(os.path.join(a.records, f"compare-{a.stack}.json"), "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
