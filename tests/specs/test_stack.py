"""Serving stack files: every bundled one loads with a source; a typo, an unknown attention rule or an efficiency
above 1 is refused."""

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
                                  "kv_position_ns: -1", "new_shape_us: .inf"])
def test_a_bad_stack_file_is_one_line(tmp_path, body):
    path = tmp_path / "bad.yaml"
    path.write_text(f"id: bad\nname: bad\nsource: a test\n{body}\n")
    with pytest.raises(UserError, match="bad.yaml"):
        load_stack(str(path))
