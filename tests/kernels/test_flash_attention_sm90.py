"""flash_attention_sm90, the Gluon kernel for Hopper, on the CPU: what it refuses; what the compiler makes of it for
sm_90 (the launch bound and compiled by triton's JIT, the consumers' loop order read in the SASS by
benchmarks/attention_sass.py --gluon); and its own source run by tests/gluon_emulator.py against float64, with
edits that break it caught. Gluon has no interpreter: on a GPU it is checked by benchmarks/attention_lab_gpu.py
--prefill-gluon."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_checks import count, run_uninterpreted, sass_orders, sass_report  # noqa: E402

from rooflinectl.kernels.flash_attention import FlashConfig, flash_attention  # noqa: E402
from rooflinectl.kernels.flash_attention_sm90 import shared_bytes  # noqa: E402

GLUON = FlashConfig(128, 128, 12, 2, gluon=True)


def _qkv(b=1, h=4, g=2, s=130, d=128, dtype=torch.bfloat16):
    q = torch.zeros(b, h, s, d, dtype=dtype)
    k = torch.zeros(b, g, s, d, dtype=dtype)
    return q, k, k.clone(), torch.empty_like(q)


@pytest.mark.parametrize(("change", "message"), [
    ({}, "needs a Hopper GPU"),  # every input right, but on the CPU
    ({"d": 32}, "head dim 32 is not 64 or 128"),
    ({"dtype": torch.float32}, "must all be bf16 or all fp16"),
    ({"s": 0}, "nothing to attend over"),
])  # fmt: skip
def test_refuses_what_it_cannot_run(change, message):
    q, k, v, out = _qkv(**change)
    with pytest.raises(ValueError, match=message):
        flash_attention(q, k, v, out, True, GLUON)


# The launcher's arguments bound and compiled by triton's own JIT (``warmup``: no launch), with a stand-in for the
# active driver that reports an sm_90 target: what a GPU run would do up to the launch.
WARMUP = """
import sys
import torch, triton
from triton.backends.compiler import GPUTarget


class Sm90Target:
    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0


triton.runtime.driver.set_active(Sm90Target())
from rooflinectl.kernels import flash_attention_sm90 as fa3

b, h, g, s, d, block_n, stages = (int(x) for x in sys.argv[1:8])
q = torch.zeros(b, h, s, d, dtype=torch.bfloat16)
k = torch.zeros(b, g, s, d, dtype=torch.bfloat16)
grid, args, options = fa3.launch_args(q, k, k.clone(), torch.empty_like(q), sys.argv[8] == "causal", block_n,
                                      stages, sys.argv[9] == "pingpong")
kernel = fa3._fa3_fwd_kernel.warmup(*args, grid=grid, **options)
print(grid, kernel.metadata.num_warps, kernel.metadata.shared)
"""


@pytest.mark.parametrize(("argv", "expected"), [
    # 2·8 (sequence, head) pairs × ⌈300/128⌉ query blocks; 12 warps (two consumer warpgroups and the loader's);
    # Q 128×128 + 2 buffers × (K + V) 128×128, bf16: 163,840 B, and 288 of mbarriers as triton aligns them.
    ("2 8 2 300 128 128 2 causal pingpong", "(16, 3) 12 164128"),
    # d 64, 64-position blocks in 3 buffers: Q 16,384 + 3 × 2 × 8,192 = 65,536 B, and 288 of mbarriers.
    ("1 4 4 1 64 64 3 full plain", "(4, 1) 12 65824"),
])  # fmt: skip
def test_the_launcher_binds_and_compiles(argv, expected):
    proc = run_uninterpreted(["-c", WARMUP, *argv.split()])
    if proc.returncode and "ptxas" in proc.stderr.lower():
        pytest.skip("this triton build cannot compile for sm_90 here")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == expected
    # What check_inputs counts covers what the compiler allocated.
    b, h, g, s, d, block_n, stages = (int(x) for x in argv.split()[:7])
    assert int(expected.split()[-1]) <= shared_bytes(d, block_n, stages)


def test_refuses_strided_inputs_and_a_single_buffer():
    q, k, v, out = _qkv()
    with pytest.raises(ValueError, match="must be contiguous"):
        flash_attention(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, out, True, GLUON)
    # One buffer would deadlock: block j's Q·Kᵀ needs a buffer while block j − 1's V is still read.
    with pytest.raises(ValueError, match="2 or more"):
        flash_attention(q, k, v, out, True, FlashConfig(128, 128, 12, 1, gluon=True))
    with pytest.raises(ValueError, match="128-query blocks in 12 warps"):
        flash_attention(q, k, v, out, True, FlashConfig(64, 64, 4, 2, gluon=True))
    # Contiguous, but 2 bytes past a 16-byte boundary: TMA cannot read it.
    shifted = torch.zeros(q.numel() + 1, dtype=q.dtype)[1:].view(q.shape)
    with pytest.raises(ValueError, match="16-byte boundary"):
        flash_attention(shifted, k, v, out, True, GLUON)


def test_refuses_tiles_past_the_shared_memory():
    from rooflinectl.kernels.flash_attention_sm90 import check_tiling
    from rooflinectl.specs.hardware import load_gpu

    limit = load_gpu("h200").limits.max_smem_per_block_bytes  # 227 KiB, the H100's too
    # 4 buffers of 128 × 128: 2 · 128 · (128 + 2 · 4 · 128) = 294,912 B with Q's tile, + 512 for the mbarriers.
    with pytest.raises(ValueError, match="295,424 B of shared memory, over the 232,448"):
        check_tiling(128, 128, 4, limit)
    check_tiling(128, 128, 3, limit)  # 229,376 + 512: fits
    check_tiling(128, 64, 4, limit)


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


# ---- the kernel's own source, run by tests/gluon_emulator.py ----------------------------------------------------

def _emulate(b, h, g, s, d, block_n, stages, causal, pingpong, dtype=torch.bfloat16, timing=0, v_next_head=None,
             fa3=None):
    """The kernel's output on random inputs (NaN-poisoned first) under the emulator, its copies landing in the
    order the seed ``timing`` draws, and attention_reference's; ``fa3``: another module in place of the kernel's."""
    from gluon_emulator import Emulator

    from rooflinectl.kernels.flash_attention import attention_reference

    if fa3 is None:
        from rooflinectl.kernels import flash_attention_sm90 as fa3

    gen = torch.Generator().manual_seed(b * h * s + d)
    q, k, v = (torch.randn(b, n, s, d, generator=gen).to(dtype) for n in (h, g, g))
    if v_next_head is not None:  # what the KV head after the first holds at its position 0
        v[0, 1, 0] = v_next_head
    out = torch.full_like(q, float("nan"))
    grid, args, options = fa3.launch_args(q, k, v, out, causal, block_n, stages, pingpong)
    Emulator(timing).launch(fa3, "_fa3_fwd_kernel", grid, args, options)
    return out, attention_reference(q, k, v, causal)


@pytest.mark.parametrize("case", [
    (1, 2, 1, 1, 64, 128, 2, True, False),    # one position: O is V's row
    (2, 4, 2, 65, 64, 64, 3, True, True),     # one query block, two K/V blocks, ping-pong
    (1, 2, 2, 300, 64, 128, 2, False, False),  # non-causal, a ragged tail block
    (1, 4, 2, 300, 128, 64, 2, True, True),   # d 128; 64-wide blocks wholly masked for the first consumer's rows
    (1, 7, 1, 129, 64, 128, 4, False, True),  # group 7, 4 buffers, a one-position tail
    (2, 6, 2, 257, 64, 128, 3, True, False),  # three query blocks a head, the last one position
])  # fmt: skip
def test_the_kernel_source_agrees_with_float64(case):
    from rooflinectl.kernels.base import relative_error

    first, ref = _emulate(*case)
    again, _ = _emulate(*case, timing=1)  # the same inputs, the copies landing in another order
    assert not torch.isnan(first).any()
    assert relative_error(first, ref) <= 2e-2  # FlashAttention.tolerance("bf16")
    assert torch.equal(first, again)


def test_the_kernel_source_in_fp16():
    from rooflinectl.kernels.base import relative_error

    out, ref = _emulate(1, 4, 2, 200, 64, 128, 2, True, False, dtype=torch.float16)
    assert relative_error(out, ref) <= 1e-2  # FlashAttention.tolerance("fp16")


def test_a_head_past_its_end_is_not_read():
    # S = 65 in 128-position blocks: the first KV head's only block runs 63 positions past its end, onto the next
    # head's rows. An infinity there must not reach the first head's outputs (0 · inf is NaN).
    out, ref = _emulate(1, 4, 2, 65, 64, 128, 2, False, False, v_next_head=float("inf"))
    assert not torch.isnan(out[0, :2]).any()
    assert torch.allclose(out[0, :2].float(), ref[0, :2].float(), atol=2e-2, rtol=2e-2)


def test_one_buffer_deadlocks_which_is_why_it_is_refused():
    # With one K/V buffer the loader waits for block 0's buffer to be freed, and the consumers free it only after
    # block 1's Q·Kᵀ, which needs block 1 loaded: check_inputs refuses stages < 2, and the emulator sees the cycle.
    import gluon_emulator

    wait_s = gluon_emulator.WAIT_S
    gluon_emulator.WAIT_S = 1.0
    try:
        with pytest.raises(gluon_emulator.Deadlock):
            _emulate(1, 2, 2, 300, 64, 128, 1, False, False)
    finally:
        gluon_emulator.WAIT_S = wait_s


# Edits that break the kernel, each in a way one of the emulated runs must catch: a deadlock, a race, a NaN or a
# wrong value (an emulator that passed them would check nothing).
MUTANTS = {
    "the loader waits on the wrong parity of a free buffer": (
        "mbarrier.wait(free.index(s), ((j // STAGES) & 1) ^ 1)", "mbarrier.wait(free.index(s), (j // STAGES) & 1)"),
    "P·V issued without waiting for V": ("    mbarrier.wait(v_ready.index(prev), ((j - 1) // STAGES) & 1)\n", ""),
    "Q·Kᵀ issued without waiting for K": ("    mbarrier.wait(k_ready.index(s), (j // STAGES) & 1)\n", ""),
    "the scores used with both products in flight": (
        "s_acc = warpgroup_mma_wait(1, deps=(s_tok,))", "s_acc = warpgroup_mma_wait(2, deps=(s_tok,))"),
    "a buffer freed before its P·V is retired": (
        "    o_acc, p_op = warpgroup_mma_wait(0, deps=(o_tok, p_op))\n    mbarrier.arrive(free.index(prev), count=1)",
        "    mbarrier.arrive(free.index(prev), count=1)\n    o_acc, p_op = warpgroup_mma_wait(0, deps=(o_tok, p_op))"),
    "the diagonal masked": ("(gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))",
                            "(gl.expand_dims(cols, 0) < gl.expand_dims(rows, 1))"),
    "the wrong K/V head": ("kv_head = b * (n_heads // group) + h // group",
                           "kv_head = b * (n_heads // group) + h % group"),
    "the masked blocks start one late": ("        n_full = m0 // BLOCK_N\n", "        n_full = m0 // BLOCK_N + 1\n"),
    "O not rescaled": (
        "    o_acc = o_acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)\n", ""),
    "a consumer passes the turn to itself (ping-pong)": (
        "mbarrier.arrive(turn.index(1 - HALF), count=1)", "mbarrier.arrive(turn.index(HALF), count=1)"),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_emulator_catches_a_broken_kernel(mutant, tmp_path, monkeypatch):
    import importlib.util
    from pathlib import Path

    import gluon_emulator

    from rooflinectl.kernels import flash_attention_sm90
    from rooflinectl.kernels.base import relative_error

    old, new = MUTANTS[mutant]
    source = Path(flash_attention_sm90.__file__).read_text()
    assert old in source  # the edit still applies to the kernel as it is
    path = tmp_path / "mutant.py"
    path.write_text(source.replace(old, new, 1))
    spec = importlib.util.spec_from_file_location("rooflinectl.kernels.mutant", path)  # its relative imports
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(gluon_emulator, "WAIT_S", 1.0)
    try:
        out, ref = _emulate(1, 4, 2, 300, 64, 64, 2, True, "ping-pong" in mutant, fa3=module)
    except (gluon_emulator.Deadlock, gluon_emulator.Race):
        return
    assert torch.isnan(out).any() or relative_error(out, ref) > 2e-2



def test_the_gluon_kernel_is_the_default_where_it_runs(monkeypatch):
    # d 128 past 256 tokens on a GPU whose inputs the kernel's own checks take: FlashAttention-3's schedule in
    # Gluon (the H200's measure --kernel flash_attention: 1.03-1.08× cuDNN at batch 1, 0.95× at batch 4, against
    # 0.82-0.90× for the Triton kernel); anywhere else the Triton kernel's config for the shape.
    from types import SimpleNamespace

    from rooflinectl.kernels import flash_attention as fa
    from rooflinectl.kernels import flash_attention_sm90 as sm90

    def tensor(s=4096, d=128, cuda=True):
        return SimpleNamespace(is_cuda=cuda, shape=(1, 32, s, d))

    asked = []

    def check(q, k, v, out, block_n, stages):
        asked.append((block_n, stages))
        if q.shape[1] != 32:
            raise ValueError("flash_attention sm90: not this one")

    monkeypatch.setattr(sm90, "check_inputs", check)
    assert fa._gluon_fits(tensor(), tensor(), tensor(), tensor(), True)
    assert fa._gluon_fits(tensor(), tensor(), tensor(), tensor(), False)
    assert asked == [(128, 3), (64, 3)]  # each default's own tiling checked
    assert fa._gluon_config(True) == FlashConfig(128, 128, 12, 3, gluon=True)
    assert fa._gluon_config(False) == FlashConfig(128, 64, 12, 3, gluon=True)
    for q in (tensor(cuda=False), tensor(d=64), tensor(s=256)):
        assert not fa._gluon_fits(q, tensor(), tensor(), tensor(), True)
    other = SimpleNamespace(is_cuda=True, shape=(1, 8, 4096, 128))  # one the kernel's checks refuse
    assert not fa._gluon_fits(other, tensor(), tensor(), tensor(), True)
