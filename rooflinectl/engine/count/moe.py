"""Mixture-of-experts arithmetic: how many distinct experts a step's tokens touch, and how many tokens it takes
to touch a given share of them. The expert ops themselves are built in ``engine.count.transformer``."""

from __future__ import annotations

import math

from ...specs.workload import Workload


def experts_touched(w: Workload) -> float:
    """Distinct routed experts one MoE layer reads in the step: the workload's stated ``experts_touched``, or the
    expectation under uniform routing, E·(1 − (1 − k/E)^N) for N tokens of top-k among E experts.

    Why: a token picks k distinct experts; under uniform routing each expert is among them with probability k/E,
    so a token misses a given expert with probability 1 − k/E. Assuming the N tokens of the step are routed
    independently of one another, an expert is missed by all of them with probability (1 − k/E)^N, and by
    linearity of expectation the distinct experts touched number E·(1 − (1 − k/E)^N) on average. One token
    touches exactly k; the count rises with N towards E (a prefill of thousands of tokens touches all of them,
    to within float precision) and never exceeds N·k. Real routers are skewed (some experts are popular), which
    touches fewer: ``experts_touched`` states it. Clamped to [k, min(E, N·k)], the bounds the formula keeps
    exactly, against float rounding.
    """
    moe = w.model.moe
    if moe is None:
        return 0.0
    if w.experts_touched is not None:
        return float(w.experts_touched)
    e, k, n = moe.num_experts, moe.experts_per_token, w.tokens
    expected = e * (1 - (1 - k / e) ** n)
    return min(float(min(e, n * k)), max(float(k), expected))


def tokens_to_touch(e: int, k: int, fraction: float) -> int:
    """The fewest tokens whose expected distinct experts, E·(1 − (1 − k/E)^N) (:func:`experts_touched`), reach
    ``fraction`` of E: the least N with (1 − k/E)^N ≤ 1 − fraction, N = ⌈ln(1 − fraction) / ln(1 − k/E)⌉
    (1 when k = E: one token touches them all). Checked against the formula itself and moved by one where the
    logarithms round across an integer. Mixtral (E 8, top-2) reaches 99% at 17 tokens: 0.75^16 = 1.0% misses."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction {fraction} is not in (0, 1)")
    if k >= e:
        return 1
    miss = 1 - k / e
    n = max(1, math.ceil(math.log(1 - fraction) / math.log(miss)))
    while n > 1 and miss ** (n - 1) <= 1 - fraction:
        n -= 1
    while miss**n > 1 - fraction:
        n += 1
    return n
