"""Timing's pure pieces: how many input sets rotate past the L2, the rotation itself, a Timing from a bench."""

from __future__ import annotations

from measure_fakes import MIB

from rooflinectl.measure.bench import input_sets, rotated, timing


def test_input_sets_rotate_past_four_l2s():
    l2 = 50 * MIB
    assert input_sets(4 * MIB, l2) == 50  # ceil(4 × 50 / 4)
    assert input_sets(3 * MIB, l2) == 64  # ceil(200 / 3) = 67, capped
    assert input_sets(200 * MIB, l2) == 1  # one set is already 4 L2s
    assert input_sets(199 * MIB, l2) == 2
    assert input_sets(4 * MIB, l2, free_bytes=40 * MIB) == 5  # half of 40 MiB of free memory holds 5 sets
    assert input_sets(4 * MIB, l2, free_bytes=1 * MIB) == 1



def test_rotation_takes_the_sets_in_turn():
    seen = []
    run = rotated(seen.append, ["a", "b", "c"])
    for _ in range(5):
        run()
    assert seen == ["a", "b", "c", "a", "b"]


def test_timing_from_a_bench():
    t = timing((2e-6, 1.9e-6, 2.2e-6), "cuda_graph", 8)
    assert (t.median_s, t.p20_s, t.p80_s, t.timer, t.input_sets) == (2e-6, 1.9e-6, 2.2e-6, "cuda_graph", 8)
