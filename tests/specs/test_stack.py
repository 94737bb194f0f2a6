"""Serving stack files: every bundled one loads with a source; a typo, an unknown attention rule or an efficiency
above 1 is refused; a GPU family's figures replace the stack's own on that family's GPUs alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.stack import list_stacks, load_stack

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("path", sorted((ROOT / "stacks").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_stack_file_loads_under_its_id(path):
    stack = load_stack(str(path))
    assert stack.id == path.stem and stack.source
    assert list_stacks()[stack.id] == stack


def test_the_roofline_stack_is_the_floor():
    s = load_stack("roofline")
    assert (s.step_overhead_us, s.kernel_gap_us, s.bandwidth_efficiency, s.compute_efficiency, s.fused) == \
        (0, 0, 1, 1, [])
    assert (s.attention, s.attention_efficiency, s.kv_position_ns, s.new_shape_us) == ("varlen", 1, 0, 0)


@pytest.mark.parametrize("body", ["bandwith_efficiency: 0.8", "bandwidth_efficiency: 1.2", "kernel_gap_us: -1",
                                  "fused: [everything]", "attention: dense", "attention_efficiency: 0",
                                  "kv_position_ns: -1", "new_shape_us: .inf", "families: {hopper: {}}",
                                  "families: {'9': {kernel_gap: 1}}", "families: {'9': {fused: []}}",
                                  "families: {'9': {compute_efficiency: 2}}", "family: '9'",
                                  "stream_lag_steps: -0.5", "families: {'10': {stream_lag_steps: .nan}}",
                                  # a share so small that every time is inf and every share nan
                                  "bandwidth_efficiency: 5e-324", "families: {'9': {compute_efficiency: 0.001}}"])
def test_a_bad_stack_file_is_one_line(tmp_path, body):
    path = tmp_path / "bad.yaml"
    path.write_text(f"id: bad\nname: bad\nsource: a test\n{body}\n")
    with pytest.raises(UserError, match="bad.yaml"):
        load_stack(str(path))


def test_a_gpu_familys_figures_replace_the_stacks_own_on_its_gpus(tmp_path):
    """On a GPU whose compute capability's major is listed the family's figures apply, each one given (the rest
    stay the stack's); on any other GPU, or one without a compute capability (AMD's), the stack's own."""
    from rooflinectl.specs.hardware import load_gpu

    path = tmp_path / "fam.yaml"
    path.write_text("id: fam\nname: fam\nsource: a test\nkernel_gap_us: 2\nrequest_latency_us: 500\n"
                    "families:\n  '9': {kernel_gap_us: 5, compute_efficiency: 0.5, source: H100 rows}\n"
                    "  '10': {request_latency_us: 0}\n")
    own = load_stack(str(path))
    assert (own.kernel_gap_us, own.compute_efficiency, own.request_latency_us, own.family) == (2, 1, 500, None)
    figures = {}
    for gpu in ("h200", "h100-sxm", "b200", "b300", "a100-80gb", "mi300x"):
        s = load_stack(str(path), load_gpu(gpu).compute_capability)
        figures[gpu] = (s.family, s.kernel_gap_us, s.compute_efficiency, s.request_latency_us)
    assert figures == {"h200": ("9", 5, 0.5, 500), "h100-sxm": ("9", 5, 0.5, 500), "b200": ("10", 2, 1, 0),
                       "b300": ("10", 2, 1, 0), "a100-80gb": (None, 2, 1, 500), "mi300x": (None, 2, 1, 500)}
    assert own.on("9.0").on("9.0") == own.on("9.0")
