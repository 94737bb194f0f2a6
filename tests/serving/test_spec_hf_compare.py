"""benchmarks/spec_hf_compare.py's prediction side: the acceptance it gives the simulation, its stack without the
cost of a new attention shape, and the simulated case it sets beside transformers' assisted generation."""

from __future__ import annotations

import pytest
import spec_hf_compare as shc
import yaml


@pytest.mark.parametrize(("tokens", "k", "alpha"), [
    (1.75, 2, 0.5),  # 1 + α + α² at α = 1/2
    (1.9375, 4, 0.5),  # 1 + 1/2 + 1/4 + 1/8 + 1/16
    (1.0, 2, 0.0),  # no draft accepted
    (3.0, 2, 1.0),  # every draft accepted
])
def test_the_acceptance_is_the_one_whose_expected_tokens_were_measured(tokens, k, alpha):
    assert shc.acceptance_for(tokens, k) == pytest.approx(alpha, abs=1e-9)


def test_the_warm_stack_is_hf_without_the_new_shape_cost():
    with open(shc.warm_stack("hf-warm")) as fh:
        warm = yaml.safe_load(fh)
    with open(f"{shc.ROOT}/stacks/hf.yaml") as fh:
        hf = yaml.safe_load(fh)
    assert hf["new_shape_us"] > 0 and warm["new_shape_us"] == 0
    assert {k: v for k, v in warm.items() if k not in ("id", "name", "new_shape_us")} == \
        {k: v for k, v in hf.items() if k not in ("id", "name", "new_shape_us")}
    assert shc.warm_stack("hf") == "hf"


def test_the_self_draft_at_full_acceptance_verifies_three_tokens_a_step():
    # 128 tokens: the prefill emits 1; 42 verifications of 2 drafts emit 126; the last step, with 1 token left,
    # drafts none (d = min(K, left - 1)) and is a plain decode, not a verification: 126 tokens over 42.
    p = shc.predict("llama-3.1-8b", 2, 1.0, "hf-warm")
    assert p["tokens_per_step"] == pytest.approx(126 / 42)
    assert p["expected_tokens"] == pytest.approx(3.0)
    assert p["e2e_s"] > 0 and p["plain_e2e_s"] > 0 and p["tpot_s"] is not None


def test_the_small_draft_is_a_model_file_the_simulation_prices():
    p = shc.predict(shc.DRAFTS["small"], 4, 0.0, "hf-warm", prompt=64, output=16, requests=1)
    assert p["tokens_per_step"] == pytest.approx(1.0)
    assert p["e2e_s"] > p["plain_e2e_s"]  # four draft steps a token, none accepted
