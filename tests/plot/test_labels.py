"""plot.labels: which ops share a marker and a label, and how their names are joined."""

from __future__ import annotations

import pytest
from plot_helpers import DECODE, GPU1

from rooflinectl.engine.roofline import analyze
from rooflinectl.plot.build import build_chart
from rooflinectl.plot.labels import join_names


def test_ops_that_share_a_point_share_a_marker_and_a_label():
    panel = build_chart([DECODE], [GPU1]).panels[0]
    linear = next(g for g in panel.groups if "q_proj" in g.ops)
    assert linear.ops == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
    assert linear.label == "q/k/v/o/gate/up/down_proj, lm_head"
    engine = analyze(DECODE, GPU1)
    assert linear.points[0].share == pytest.approx(sum(engine.placement(op).share for op in linear.ops))
    # Every drawn op is in exactly one group, and named by exactly one label.
    drawn = [p.op for p in panel.points]
    assert sorted(op for g in panel.groups for op in g.ops) == sorted(drawn)
    assert sorted(op for lab in panel.labels for op in lab.ops) == sorted(drawn)
    assert next(lab for lab in panel.labels if "q_proj" in lab.ops).text == "q/k/v/o/gate/up/down_proj, lm_head 97%"


@pytest.mark.parametrize(
    "names, joined",
    [
        (["q_proj", "k_proj", "v_proj", "o_proj"], "q/k/v/o_proj"),
        (["attn_norm", "mlp_norm", "final_norm", "lm_head"], "attn/mlp/final_norm, lm_head"),
        (["attn_norm+q_proj", "attn_norm+k_proj"], "attn_norm+q/k_proj"),
        (["attn_norm+q_proj", "o_proj"], "attn_norm+q_proj, o_proj"),
        (["attention"], "attention"),
        (["qk", "pv"], "qk, pv"),
        # A mixture of experts' ops share their first word as well as their ending.
        (["expert_gate_proj", "expert_up_proj", "expert_down_proj"], "expert_gate/up/down_proj"),
        (["shared_gate_proj", "shared_up_proj", "q_proj"], "shared_gate/shared_up/q_proj"),
        (["expert_act", "shared_act"], "expert/shared_act"),
    ],
)
def test_join_names(names, joined):
    assert join_names(names) == joined
