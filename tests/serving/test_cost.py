"""Dollars per million tokens and joules per output token of a run, by hand, and the board power's source."""

from __future__ import annotations

import json

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.serving.cost import run_costs
from rooflinectl.specs.hardware import load_gpu


def test_costs_by_hand():
    # 2 GPUs at $3 an hour for 36 s: $0.06. 9 of the 30 busy seconds carry prompts: 30% of it, $0.018, on 600,000
    # input tokens ($0.03 a million), 70%, $0.042, on 20,000 output tokens ($2.10 a million; all of it $3 a
    # million). Energy: 700 W × 2 GPUs × 30 s busy / 20,000 tokens = 2.1 J a token.
    c = run_costs(36.0, 30.0, 9.0, 600_000, 20_000, 2, 3.0, 700.0)
    assert c.usd_per_million_input == pytest.approx(0.03, rel=1e-12)
    assert c.usd_per_million_output == pytest.approx(2.10, rel=1e-12)
    assert c.usd_per_million_output_all_on_output == pytest.approx(3.0, rel=1e-12)
    assert c.joules_per_output_token == pytest.approx(2.1, rel=1e-12)
    bare = run_costs(36.0, 30.0, 9.0, 600_000, 20_000, 2, None, None)
    assert (bare.usd_per_million_input, bare.joules_per_output_token) == (None, None)


@pytest.mark.parametrize(("gpu", "watts"), [("h100-sxm", 700), ("h200", 700), ("b200", 1000), ("a100-80gb", 400),
                                            ("a100-40gb", 400), ("mi300x", 750)])
def test_board_power_is_the_datasheets(gpu, watts):
    power = load_gpu(gpu).power
    assert power is not None and power.board_w == watts and power.source


def test_serve_gives_cost_and_energy():
    kw = dict(gpu="h100", concurrency=4, requests=8, prompt=512, output=32)
    data = rl.serve(**kw, price_per_gpu_hour=2.0).to_dict()
    assert data == json.loads(cli("analyze", "serve", "--gpu", "h100", "--concurrency", "4", "--requests", "8",
                                  "--prompt", "512", "--output", "32", "--price-per-gpu-hour", "2", "--json").stdout)
    c, t = data["cost"], data["throughput"]
    # The run's closed loop never idles: busy = duration. All cost on output = $2 × duration / 3,600 / 256 tokens.
    assert c["busy_s"] == pytest.approx(t["duration_s"], rel=1e-12)
    assert c["usd_per_million_output_tokens_all_on_output"] == pytest.approx(
        2.0 * t["duration_s"] / 3600 / (8 * 32) * 1e6, rel=1e-12)
    share = data["steps"]["prefill_time_share"]
    assert c["usd_per_million_input_tokens"] == pytest.approx(
        2.0 * t["duration_s"] / 3600 * share / (8 * 512) * 1e6, rel=1e-12)
    assert c["joules_per_output_token"] == pytest.approx(700 * t["duration_s"] / (8 * 32), rel=1e-12)
    # A GPU whose file states no board power gives no energy.
    assert rl.serve(**{**kw, "gpu": "l4"}).to_dict()["cost"]["joules_per_output_token"] is None
    assert_one_line_error(cli("analyze", "serve", "--price-per-gpu-hour", "-1"), "--price-per-gpu-hour -1")
    # A price so small that a cost printed as 300 digits of zeros: below a hundredth of a cent an hour.
    assert_one_line_error(cli("analyze", "serve", "--price-per-gpu-hour", "1e-300"), "from 0.0001 to 1,000,000")


@pytest.mark.parametrize("command", [("analyze", "serve", "--requests", "4", "--output", "8"),
                                     ("compare", "--prompt", "64", "--output", "8", "--batch", "2")])
def test_a_price_past_a_million_dollars_an_hour_is_one_line(command):
    # 1e308 used to print six lines of dollar digits (and --json an overflow "please report this").
    for price in ("1e308", "inf"):
        assert_one_line_error(cli(*command, "--price-per-gpu-hour", price), "to 1,000,000")
    assert cli(*command, "--price-per-gpu-hour", "1000000").exit_code == 0
