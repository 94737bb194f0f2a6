"""benchmarks/attention_sass.py: what the compiler makes of flash_attention's loop for sm_90, read on the CPU."""

from __future__ import annotations

from kernel_checks import count, sass_orders, sass_report


def _order(out: str) -> list[str]:
    """The first loop's order line, split at its arrows."""
    return sass_orders(out)[0]


def test_the_shipped_loop_waits_for_its_products_before_the_softmax():
    # 128×128 blocks in 8 warps: Q·Kᵀ is 8 wgmma k-steps of 16 over d = 128, P·V 8 over the 128 positions; a
    # thread holds 128·128 / 256 = 64 scores, so 64 exponentials and the rescale's 2. One wait for products a block,
    # after Q·Kᵀ's 8 issues: every exponential runs after it, and P·V's 8 are issued after them, so the block's
    # softmax overlaps no product of the same warpgroup (docs/attention.md, "What the compiler makes of the loop").
    out = sass_report()
    assert "Performance Loss" not in out  # ptxas keeps the products asynchronous
    order = _order(out)
    waits = [i for i, part in enumerate(order) if part == "wait for products"]
    assert len(waits) == 1
    before, after = order[:waits[0]], order[waits[0] + 1:]
    assert sum(count(s, "HGMMA") for s in before) == 8 and sum(count(s, "EX2") for s in before) == 0
    assert sum(count(s, "HGMMA") for s in after) == 8 and sum(count(s, "EX2") for s in after) == 66
    assert "barrier" in before and "barrier" in after


def test_scores_a_block_ahead_serialise_the_products():
    # With the next block's scores issued before this block's softmax (FlashConfig.qk_ahead, 2 stages), ptxas finds
    # the softmax writing registers of a product in flight and serialises every product: 16 waits a trip.
    out = sass_report("--stages", "2", "--qk-ahead")
    assert "(C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized" in out
    assert _order(out).count("wait for products") == 16
