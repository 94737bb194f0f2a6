"""flash_attention_sm90, the Gluon kernel for Hopper: what it refuses, on the CPU, and the order its consumers'
loop compiles to for sm_90 (benchmarks/attention_sass.py --gluon). Gluon has no interpreter: its results are
checked on the GPU (benchmarks/attention_lab_gpu.py --prefill-gluon), not here."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_checks import count, sass_orders, sass_report  # noqa: E402

from rooflinectl.kernels.flash_attention import FlashConfig, flash_attention  # noqa: E402

GLUON = FlashConfig(128, 128, 12, 2, gluon=True)


def _qkv(b=1, h=4, g=2, s=130, d=128, dtype=torch.bfloat16):
    q = torch.zeros(b, h, s, d, dtype=dtype)
    k = torch.zeros(b, g, s, d, dtype=dtype)
    return q, k, k.clone(), torch.empty_like(q)


@pytest.mark.parametrize(("change", "message"), [
    ({}, "needs a Hopper GPU"),  # every input right, but on the CPU
    ({"d": 32}, "head dim 32 is not 64 or 128"),
    ({"dtype": torch.float32}, "must all be bf16 or all fp16"),
])  # fmt: skip
def test_refuses_what_it_cannot_run(change, message):
    q, k, v, out = _qkv(**change)
    with pytest.raises(ValueError, match=message):
        flash_attention(q, k, v, out, True, GLUON)


def test_refuses_strided_inputs_and_a_single_buffer():
    q, k, v, out = _qkv()
    with pytest.raises(ValueError, match="must be contiguous"):
        flash_attention(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, out, True, GLUON)
    # One buffer would deadlock: block j's Q·Kᵀ needs a buffer while block j − 1's V is still read.
    with pytest.raises(ValueError, match="2 or more"):
        flash_attention(q, k, v, out, True, FlashConfig(128, 128, 12, 1, gluon=True))
    with pytest.raises(ValueError, match="128-query blocks in 12 warps"):
        flash_attention(q, k, v, out, True, FlashConfig(64, 64, 4, 2, gluon=True))


@pytest.mark.parametrize("args", [(), ("--no-mask",), ("--block", "128x64", "--stages", "3"), ("--pingpong",)])
def test_each_consumer_runs_its_softmax_under_its_p_v(args):
    # A consumer's trip, block j: K(j) and V(j−1) waited for, Q·K(j)ᵀ and P(j−1)·V(j−1) issued (d/16 = 8 k-steps
    # and BLOCK_N/16), a wait that leaves one product in flight (Q·Kᵀ's done), then every exponential of the softmax
    # (both branches of the mask: 64 × BLOCK_N / 128 a thread each, + the rescale's 2), then the wait for P·V, then
    # the buffer freed: the exponentials run while P·V is on the tensor cores (FlashAttention-3's overlap within a
    # warpgroup).
    out = sass_report("--gluon", *args)
    block_n = int(args[1].split("x")[1]) if "--block" in args else 128
    assert "Performance Loss" not in out
    assert " 0 local-memory loads and stores" in out
    orders = sass_orders(out)
    assert len(orders) == 2  # the two consumer warpgroups' loops
    exps = 2 * (64 * block_n // 128 + 2)
    for order in orders:
        waits = [i for i, part in enumerate(order) if part == "wait for products"]
        assert len(waits) == 2
        before, between, after = order[:waits[0]], order[waits[0] + 1:waits[1]], order[waits[1] + 1:]
        assert sum(count(s, "HGMMA") for s in before) == 8 + block_n // 16
        assert sum(count(s, "EX2") for s in between) == exps
        assert sum(count(s, "EX2") + count(s, "HGMMA") for s in after) == 0
        assert "mbarrier arrive" in after  # the buffer of block j − 1 freed
        # Ping-pong: the consumer waits for its turn before issuing, and passes it on once both products are issued.
        assert ("mbarrier arrive" in before) == ("--pingpong" in args)
        assert before.count("mbarrier wait") == 2 + ("--pingpong" in args)
