"""Double-entry bookkeeping for the engine: every op of a step recounted here by hand from the model's sizes, by
the rules of DESIGN.md (each input read once, each output written once, in its data type; FLOPs per element as
engine/count/op.py names them), and compared FLOP for FLOP and byte for byte with ``step_ops``.

The recount is written apart from the engine on purpose: it knows the ops by their names and the shapes by the
model's fields, and restates each formula, so that a change to the engine's count that no one meant shows up
here. Dense (Llama 3 8B), GQA with biases (Qwen2.5 14B), a sliding window (Mistral 7B), a mixture of experts
(Mixtral 8x7B), each unfused and fused.

Notation: B sequences, T new tokens each (N = B·T), Lk positions attended, H hidden, h heads, g KV heads, d head
dim, I the MLP's width, V the vocabulary, a bytes per activation, kv per cached value; E experts, k of them per
token, P = N·k pairs, X the distinct experts touched.
"""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.moe import experts_touched
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.workload import Workload

# FLOPs per element, restated: RMSNorm (square, sum, scale, gain), softmax (max, subtract, exp, sum, divide),
# SiLU(gate)·up (negate, exp, add, divide, multiply), RoPE (4 multiplies and 2 adds a pair), the residual add,
# a bias add, top-k (one compare per logit per pick).
NORM, SOFTMAX, ACT, ROPE, ADD, BIAS, TOPK = 4, 5, 5, 3, 1, 1, 1
EXPERT_ID = 4  # int32 expert ids
SIZE = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}  # bytes per element of each data type the steps below use


def _linears(w: Workload) -> dict[str, tuple[int, int]]:
    """(K, N_out) of each projection by its name."""
    m = w.model
    h, q, kv, i = m.hidden_size, m.q_dim, m.kv_dim, m.intermediate_size
    shapes = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "qkv_proj": (h, q + 2 * kv),
              "o_proj": (q, h), "gate_proj": (h, i), "up_proj": (h, i), "gate_up_proj": (h, 2 * i),
              "down_proj": (i, h), "lm_head": (h, m.vocab_size)}
    if m.moe is not None:
        ie = m.moe.expert_intermediate_size
        shapes |= {"expert_gate_proj": (h, ie), "expert_up_proj": (h, ie), "expert_gate_up_proj": (h, 2 * ie),
                   "expert_down_proj": (ie, h)}
    return shapes


def _expected(x: float) -> int:
    return int(x) if float(x).is_integer() else round(x)


def _linear(w: Workload, base: str, norm_in: bool, act: bool, residual: bool) -> tuple[int, int]:
    m, a = w.model, SIZE[w.dtype]
    k, n = _linears(w)[base]
    expert = base.startswith("expert_")
    rows = w.batch if base == "lm_head" else w.tokens
    if expert:
        assert m.moe is not None
        rows *= m.moe.experts_per_token  # the (token, expert) pairs
        weights = _expected(experts_touched(w) * k * n * a)
    else:
        weights = k * n * a
    flops = 2 * rows * k * n
    nbytes = rows * k * a + weights + rows * n * a
    if m.qkv_bias and base in ("q_proj", "k_proj", "v_proj", "qkv_proj"):
        flops += BIAS * rows * n
        nbytes += n * a
    if norm_in:
        flops += NORM * rows * k
        nbytes += k * a
    if act:  # SiLU(gate)·up in the epilogue: the product of width n/2 is written, not gate and up
        flops += ACT * rows * n // 2
        nbytes -= rows * n // 2 * a
    if residual:
        flops += ADD * rows * n
        nbytes += rows * n * a
    return flops, nbytes


def _attention(w: Workload, core: str, window: int | None) -> tuple[int, int]:
    m = w.model
    a, kv = SIZE[w.dtype], SIZE[w.kv_dtype]
    b, t, h, g, d = w.batch, w.tokens_per_seq, m.num_heads, m.num_kv_heads, m.head_dim
    lk = w.kv_len if window is None else min(w.kv_len, window + t - 1)  # the positions the T queries read
    q_bytes = b * t * h * d * a  # Q in, and O out
    k_bytes = b * lk * g * d * kv  # K (or V) of every KV head, read once
    if core == "attention":
        # Causal, scores past the mask skipped: query i of T sees Lk − T + i of them (1-based); through a window
        # W at most W. Written for the cases below: a decode step (T = 1) or a prefill inside the window.
        if t == 1:
            per_head = lk if window is None else min(lk, window)
        else:
            assert window is None or w.kv_len <= window
            per_head = t * (w.kv_len - t) + t * (t + 1) // 2
        scores = b * h * per_head
        return scores * (4 * d + SOFTMAX), 2 * q_bytes + 2 * k_bytes
    scores = b * h * t * lk  # naive: the full T × Lk, masked or not, through HBM
    if core == "softmax":
        return SOFTMAX * scores, 2 * scores * a
    if core == "qk":
        return 2 * d * scores, q_bytes + k_bytes + scores * a
    return 2 * d * scores, scores * a + k_bytes + q_bytes  # pv


def hand_count(w: Workload, name: str) -> tuple[int, int]:
    """(FLOPs, bytes) of one instance of the op ``name`` of ``w``'s step, recounted by hand."""
    m = w.model
    a = SIZE[w.dtype]
    n_tok, hid = w.tokens, m.hidden_size
    norm_in = name.startswith(("attn_norm+", "mlp_norm+"))
    base = name.split("+", 1)[1] if norm_in else name
    residual = base.endswith("+residual")
    base = base.removesuffix("+residual")
    act = base.endswith("+act")
    base = base.removesuffix("+act")
    if base in _linears(w):
        return _linear(w, base, norm_in, act, residual)
    assert not (norm_in or act) and (not residual or base == "moe_combine"), name
    window = m.sliding_window if base.endswith("_local") else None
    core = base.removesuffix("_local")
    if core in ("attention", "qk", "softmax", "pv"):
        return _attention(w, core, window)
    if base == "embed":  # min(N, V) distinct rows read, N rows written
        return 0, min(n_tok, m.vocab_size) * hid * a + n_tok * hid * a
    if base in ("attn_norm", "mlp_norm", "final_norm"):
        return NORM * n_tok * hid, 2 * n_tok * hid * a + hid * a
    if base == "rope":
        rotated = n_tok * (m.num_heads + m.num_kv_heads) * m.head_dim
        return ROPE * rotated, 2 * rotated * a + n_tok * m.head_dim * a  # Q, K in and out; cos, sin rows
    if base == "kv_write":
        values = 2 * n_tok * m.kv_dim  # new K and V, read in the activations' type, written in the cache's
        return 0, values * a + values * SIZE[w.kv_dtype]
    if base == "act":
        i = m.intermediate_size
        return ACT * n_tok * i, 3 * n_tok * i * a
    if base in ("attn_residual", "mlp_residual"):
        return ADD * n_tok * hid, 3 * n_tok * hid * a
    assert m.moe is not None, name
    e, k, ie = m.moe.num_experts, m.moe.experts_per_token, m.moe.expert_intermediate_size
    pairs = n_tok * k
    if base == "router":  # x·W_g, top-k by k passes over the E logits, a softmax over them; k weights and ids out
        flops = 2 * n_tok * hid * e + TOPK * k * n_tok * e + SOFTMAX * n_tok * e
        return flops, n_tok * hid * a + hid * e * a + pairs * (a + EXPERT_ID)
    if base == "expert_act":
        return ACT * pairs * ie, 3 * pairs * ie * a
    if base == "moe_combine":  # k multiplies by the router weights, k − 1 adds; reads the pairs and weights
        flops, nbytes = (2 * k - 1) * n_tok * hid, (pairs * hid + pairs + n_tok * hid) * a
        if residual:
            flops, nbytes = flops + ADD * n_tok * hid, nbytes + n_tok * hid * a
        return flops, nbytes
    raise AssertionError(f"no hand count for {name}")


STEPS = [
    ("llama-3-8b", "decode", dict(batch=16, context=4096)),
    ("llama-3-8b", "decode", dict(batch=2, context=1024, attention="naive")),
    ("llama-3-8b", "decode", dict(batch=8, context=4096, kv_dtype="fp8")),
    ("llama-3-8b", "prefill", dict(batch=2, seq_len=512)),
    ("llama-3-8b", "prefill", dict(batch=1, seq_len=256, attention="naive", dtype="fp32")),
    ("llama-3-8b", "decode", dict(batch=8, context=2048, fused=["norm_linear", "gate_up", "act", "residual"])),
    ("qwen2.5-14b", "decode", dict(batch=4, context=2048, fused=["qkv", "gate_up"])),
    ("qwen2.5-14b", "prefill", dict(batch=1, seq_len=1024, fused=["norm_linear", "qkv"])),
    ("mistral-7b", "decode", dict(batch=4, context=8192)),
    ("mistral-7b", "decode", dict(batch=1, context=8192, attention="naive")),
    ("mistral-7b", "prefill", dict(batch=1, seq_len=2048, fused=["norm_linear", "residual"])),
    ("mixtral-8x7b", "decode", dict(batch=1, context=4096)),
    ("mixtral-8x7b", "decode", dict(batch=3, context=4096)),  # 8·(1 − 0.75³) = 4.625 experts expected
    ("mixtral-8x7b", "prefill", dict(batch=1, seq_len=1024, fused=["gate_up", "act", "residual"])),
    ("mixtral-8x7b", "decode", dict(batch=64, context=1024, experts_touched=5)),
]


@pytest.mark.parametrize("model, phase, sizes", STEPS)
def test_every_op_is_counted_as_the_hand_count_says(model, phase, sizes):
    w = resolve_workload(phase, model=model, **sizes)
    ops = step_ops(w)
    assert ops
    for op in ops:
        assert (op.flops, op.bytes) == hand_count(w, op.name), op.name


@pytest.mark.parametrize("model, phase, sizes", STEPS)
def test_each_op_appears_as_often_as_its_layers(model, phase, sizes):
    """The counts: once per model for embed, final_norm and lm_head; a sliding layer's core once per sliding
    layer; every other op once per layer."""
    w = resolve_workload(phase, model=model, **sizes)
    m = w.model
    for op in step_ops(w):
        if op.name in ("embed", "final_norm", "lm_head"):
            assert op.count == 1
        elif op.name.endswith("_local"):
            assert op.count == m.sliding_layers
        elif op.name.removesuffix("_local") in ("attention", "qk", "softmax", "pv"):
            assert op.count == m.num_layers - m.sliding_layers
        else:
            assert op.count == m.num_layers, op.name
