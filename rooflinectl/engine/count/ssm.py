"""Mamba-2's layer (Nemotron-H's ``mamba`` layers): a state-space state per sequence in place of a KV cache.
``engine.count.transformer`` hands a layer whose attention kind is ``mamba`` to :func:`mamba2_block`.

Notation as in ``engine.count.transformer`` (B sequences, T new tokens each, N = B·T, H hidden, a the bytes of
``dtype``), and Mamba-2's sizes (``specs.ssm.Mamba2``): h heads of P channels, I = h·P, a state of S per channel
(d_state), G groups of B and C, conv channels C_v = I + 2·G·S, conv taps w, chunks of c positions. Source of the
structure: arXiv 2405.21060 (SSD), and transformers' NemotronHMamba2Mixer.

Per layer, in execution order (count 1):
  attn_norm        RMSNorm N×H (the same op as the attention layers')
  in_proj          N×H · H×(2·I + 2·G·S + h): the gate z, x, B, C and dt
  conv1d           causal depthwise conv of w taps, its bias and SiLU over the C_v channels of x, B and C:
                   (2·w + 1 + 4) FLOPs per channel and token; reads N×C_v, the C_v×w taps and C_v biases, writes
                   N×C_v; reads each sequence's conv state ((w − 1)·C_v values) where it has cached positions and
                   writes it back
  ssm_scan         the selective scan (below): reads x (N×I), B and C (N×G·S each) and dt (N×h); reads each
                   sequence's state (h·P·S) where it has cached positions and writes it back; writes y N×I
  gated_norm       y·SiLU(z), then RMSNorm over each group's I/G channels with a gain of I: reads y, z and the
                   gain, writes N×I
  out_proj         N×I · I×H
  attn_residual    x + the layer's output

The scan per token and head, state S_h (P × S): dt = softplus(dt + dt_bias) and α = exp(dt·A) (SSM_GATE_FLOPS_PER_HEAD),
x' = dt·x (P), S_h ← α·S_h + x'⊗B (the outer product, the decay and the add: 3·P·S), y = S_h·C (2·P·S) + D·x
(2·P): 5·P·S + 3·P FLOPs. A decode step (T = 1) runs it so, on the vector units in fp32 (mamba_ssm's
selective_state_update, vLLM's decode path). A step of T > 1 runs the chunked SSD form (mamba_ssm's
mamba_chunk_scan_combined) over ⌈T/c⌉ chunks of c = ``chunk_size`` positions (the last padded), on the tensor
cores in ``dtype``; per chunk:
  per group: C·Bᵀ, the chunk's scores (2·c²·S; the kernel's bmm_chunk is per group, its heads share it)
  per head: the scores masked by the decays (c²) times x' (2·c²·P); the chunk's state, (B·decay)ᵀ·x' (2·c·S·P,
  the decays c·S); the state carried in from the chunk before, decayed and added (2·P·S); its read by C
  (2·c·S·P) and the decay of that read (c·P)
  in all, per chunk: G·2·c²·S + h·(c²·(2·P + 1) + 4·c·P·S + c·(S + P) + 2·P·S).
Both forms add per token and head the gates and D·x: SSM_GATE_FLOPS_PER_HEAD + 3·P. A_log, D and dt_bias (3·h
values) are read with the inputs and left out of the bytes, as Gated DeltaNet's gates' are.

The states are kept in ``dtype`` (vLLM's default mamba_ssm_cache_dtype "auto": the model's type), as Gated
DeltaNet's (``engine.count.recurrent``). A step of several groups runs conv1d as one kernel and the scan as one
kernel over the groups of each form (``ssm_scan`` for decode groups, ``ssm_scan_chunked`` for the others), each
group counted as a step of its own.
"""

from __future__ import annotations

from dataclasses import replace

from ...specs.ssm import Mamba2
from ...specs.workload import Workload
from ...units import dtype_bytes
from .block import linear, projection, projections
from .op import GATED_RMSNORM_FLOPS_PER_ELEMENT, SILU_FLOPS_PER_ELEMENT, Op, matmul_unit
from .primitives import norm_op
from .recurrent import CONV_FLOPS_PER_TAP, by_form, one_kernel

# Per token and head: dt + dt_bias (1), softplus (exp, add, log: 3), dt·A (1), exp (1).
SSM_GATE_FLOPS_PER_HEAD = 6
# The scan's FLOPs per state element per token (the outer product x'⊗B 1, the decay 1, the add 1, y = S·C 2).
SSM_FLOPS_PER_STATE_ELEMENT = 5
# Per token and channel of x: x' = dt·x (1), D·x and its add to y (2).
SSM_FLOPS_PER_CHANNEL = 3


def _mamba(w: Workload) -> Mamba2:
    mamba = w.model.mamba
    assert mamba is not None  # the callers dispatch on it
    return mamba


def chunked_flops(t: int, ssm: Mamba2) -> int:
    """The chunked form's core for one sequence of ``t`` tokens over all heads (module docstring), the per-token
    gates and D·x aside."""
    c, p, s = ssm.chunk_size, ssm.head_dim, ssm.state_size
    chunks = -(-t // c)
    per_head = c * c * (2 * p + 1) + 4 * c * p * s + c * (s + p) + 2 * p * s
    return chunks * (ssm.n_groups * 2 * c * c * s + ssm.num_heads * per_head)


def state_bytes_per_sequence(w: Workload) -> float:
    """One sequence's state over the model's Mamba-2 layers, in ``dtype``: the SSM's and the conv's, h·P·S +
    (w − 1)·C_v values a layer, the same at any context."""
    ssm = w.model.mamba
    if ssm is None:
        return 0
    return w.model.attention_layers("mamba") * (ssm.state_elements + ssm.conv_state_elements) * dtype_bytes(w.dtype)


def _conv_op(w: Workload) -> Op:
    """conv1d of a step of one group (module docstring)."""
    ssm, g, a = _mamba(w), w.uniform, dtype_bytes(w.dtype)
    n, c, taps = w.tokens, ssm.conv_channels, ssm.conv_kernel
    bias = 1 if ssm.conv_bias else 0
    carried = g.count if g.cached else 0  # the sequences whose earlier inputs are read back
    state = (g.count + carried) * ssm.conv_state_elements * a
    weights = c * (taps + bias) * a
    return Op(
        name="conv1d",
        kind="conv",
        flops=(CONV_FLOPS_PER_TAP * taps + bias + SILU_FLOPS_PER_ELEMENT) * n * c,
        bytes=2 * n * c * a + weights + state,
        unit="vector",
        dtype="fp32",
        reads=f"x, B, C {n}×{c}, the {c}×{taps} taps" + (f" and {c} biases" if bias else "")
              + (f", {carried} conv states" if carried else ""),
        writes=f"{n}×{c}, {g.count} conv states of {taps - 1}×{c}",
        computes=f"{CONV_FLOPS_PER_TAP}·{taps} FLOPs a channel and token" + (", + bias" if bias else "") + ", + SiLU",
        weight_bytes=weights,
        kv_bytes=carried * ssm.conv_state_elements * a,
    )


def _scan_op(w: Workload) -> Op:
    """ssm_scan of a step of one group: the recurrent form for T = 1, the chunked form else (module docstring)."""
    ssm, g, a = _mamba(w), w.uniform, dtype_bytes(w.dtype)
    n, h, p, s = w.tokens, ssm.num_heads, ssm.head_dim, ssm.state_size
    per_token = SSM_GATE_FLOPS_PER_HEAD * h + SSM_FLOPS_PER_CHANNEL * ssm.inner
    recurrent = g.new == 1
    if recurrent:
        core = n * SSM_FLOPS_PER_STATE_ELEMENT * ssm.state_elements
    else:
        core = g.count * chunked_flops(g.new, ssm)
    carried = g.count if g.cached else 0
    state = ssm.state_elements * a
    return Op(
        name="ssm_scan" if recurrent else "ssm_scan_chunked",
        kind="recurrent",
        flops=core + n * per_token,
        bytes=n * (2 * ssm.inner + 2 * ssm.bc_dim + h) * a + (g.count + carried) * state,
        unit="vector" if recurrent else matmul_unit(w.dtype),
        dtype="fp32" if recurrent else w.dtype,
        reads=f"x {n}×{ssm.inner}, B and C {n}×{ssm.bc_dim}, dt {n}×{h}"
              + (f", {carried} states of {h}×{p}×{s}" if carried else ""),
        writes=f"y {n}×{ssm.inner}, {g.count} states",
        computes=(f"the selective scan token by token: {SSM_FLOPS_PER_STATE_ELEMENT}·P·S + {SSM_FLOPS_PER_CHANNEL}·P "
                  f"FLOPs a token and head" if recurrent
                  else f"the chunked SSD scan over ⌈{g.new}/{ssm.chunk_size}⌉ chunks a sequence"),
        kv_bytes=carried * state,
    )


def mamba2_block(w: Workload) -> list[Op]:
    """The layer before its residual add, in execution order (module docstring); the caller closes the branch."""
    m, ssm = w.model, _mamba(w)
    n, h, a = w.tokens, m.hidden_size, dtype_bytes(w.dtype)
    norm = norm_op("attn_norm", n, h, w.dtype, m.norm)
    norm_in = "norm_linear" in w.fused
    ops: list[Op] = [] if norm_in else [norm]
    ops += projections([projection(w, "in_proj", h, ssm.in_proj_width, False)], norm if norm_in else None, None,
                       lambda name, n_out, with_norm: projection(w, name, h, n_out, with_norm))
    ops += one_kernel(by_form(w, _conv_op))
    ops += by_form(w, _scan_op)
    rows, width = n * ssm.n_groups, ssm.inner // ssm.n_groups
    gated = norm_op("gated_norm", rows, width, w.dtype)
    gain = (ssm.inner - width) * a  # a gain per channel, not one shared by the groups
    ops.append(replace(gated, flops=GATED_RMSNORM_FLOPS_PER_ELEMENT * n * ssm.inner,
                       bytes=gated.bytes + n * ssm.inner * a + gain, weight_bytes=gated.weight_bytes + gain,
                       reads=f"y and z, {n}×{ssm.inner} each, gain {ssm.inner}",
                       computes=f"y·SiLU(z), then RMSNorm over each group of {width}: "
                                f"{GATED_RMSNORM_FLOPS_PER_ELEMENT} FLOPs per element"))
    ops.append(linear(w, "out_proj", ssm.inner, h))
    return ops
