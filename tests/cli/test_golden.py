"""Golden output: fixed width 100, no colour, compared byte for byte with tests/golden/*.txt; regenerated only
with `pytest --update-golden` (review the diff)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import cli

GOLDEN = Path(__file__).parents[1] / "golden"


@pytest.mark.parametrize(
    "name, args",
    [
        ("analyze_decode_h100", ["analyze", "decode", "--gpu", "h100"]),
        ("analyze_attention_naive_h100", ["analyze", "attention", "--gpu", "h100", "--attention", "naive"]),
        ("hardware_show_h100", ["hardware", "show", "h100"]),
        ("occupancy_h100", ["occupancy", "--gpu", "h100", "--threads", "256", "--regs", "64", "--smem", "48KiB",
                            "--grid", "1000"]),
        ("workloads_show_decode", ["workloads", "show", "decode"]),
        ("workloads_show_llama-3-8b", ["workloads", "show", "llama-3-8b"]),
    ],
)
def test_golden_output(name, args, update_golden):
    """Fixed width, no colour; regenerate with `pytest --update-golden` and review the diff."""
    result = cli(*args)
    assert result.exit_code == 0, result.output
    out = result.stdout
    path = GOLDEN / f"{name}.txt"
    if update_golden:
        path.write_text(out)
    assert path.exists(), f"{path} missing: run pytest --update-golden"
    assert out == path.read_text()
