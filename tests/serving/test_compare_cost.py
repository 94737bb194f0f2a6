"""Dollars and joules per output token in compare and plot pareto (serving.cost.Pricing), by hand."""

from __future__ import annotations

import json

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.serving.cost import Pricing
from rooflinectl.units import number


def test_pricing_by_hand():
    # 1,000 output tokens/s per GPU at $3.60 an hour: $0.001 a second, $1e-6 a token, $1 a million; 700 W over
    # 1,000 tokens a second: 0.7 J a token.
    assert Pricing(3.6, 700.0).per_output_token(1000.0) == pytest.approx((1.0, 0.7), rel=1e-12)
    assert Pricing(None, None).per_output_token(1000.0) == (None, None)


def test_compare_rows_carry_cost_and_energy():
    result = rl.compare(gpus=["h100", "b200"], model="llama-3-8b", batch=16, output=64, price_per_gpu_hour=2.0)
    rows = result.to_dict()["gpus"]
    for row, watts in zip(rows, (700, 1000), strict=True):
        rate = row["output_tokens_per_s_per_gpu"]
        assert row["usd_per_million_output_tokens"] == pytest.approx(2.0 / 3600 / rate * 1e6, rel=1e-12)
        assert row["joules_per_output_token"] == pytest.approx(watts / rate, rel=1e-12)
    assert result.to_dict()["price_per_gpu_hour"] == 2.0
    out = cli("compare", "--gpu", "h100", "--model", "llama-3-8b", "--batch", "16", "--output", "64",
              "--price-per-gpu-hour", "2", "--json")
    assert json.loads(out.stdout) == result.to_dict() | {"gpus": rows[:1]}
    table = cli("compare", "--gpu", "h100", "--model", "llama-3-8b", "--batch", "16", "--output", "64",
                "--price-per-gpu-hour", "2").stdout
    assert f"{number(rows[0]['usd_per_million_output_tokens'])}   {number(rows[0]['joules_per_output_token'])}" in table
    bare = rl.compare(gpus=["h100"], model="llama-3-8b", batch=16, output=64).to_dict()["gpus"][0]
    assert bare["usd_per_million_output_tokens"] is None and bare["joules_per_output_token"] is not None
    assert_one_line_error(cli("compare", "--price-per-gpu-hour", "0"), "--price-per-gpu-hour 0")


def test_pareto_points_carry_cost_and_the_axis_needs_its_figures(tmp_path):
    chart = tmp_path / "cost.png"
    out = cli("plot", "pareto", "--gpu", "h100", "--model", "llama-3-8b", "--output", "64", "--price-per-gpu-hour",
              "2", "--y", "usd", "-o", str(chart), "--json")
    data = json.loads(out.stdout)
    assert chart.exists() and data["price_per_gpu_hour"] == 2.0
    for p in data["points"]:
        rate = p["output_tokens_per_s_per_gpu"]
        assert p["usd_per_million_output_tokens"] == pytest.approx(2.0 / 3600 / rate * 1e6, rel=1e-12)
        assert p["joules_per_output_token"] == pytest.approx(700 / rate, rel=1e-12)
    assert_one_line_error(cli("plot", "pareto", "--y", "usd", "-o", str(chart)), "--price-per-gpu-hour")
    assert_one_line_error(cli("plot", "pareto", "--y", "watts", "-o", str(chart)), "--y watts")
    assert_one_line_error(cli("plot", "pareto", "--gpu", "l40s", "--model", "llama-3-8b", "--y", "joules", "-o",
                              str(chart)), "board power")
