"""The operations of one forward step of a workload, each with its FLOPs and HBM bytes.

Notation: B batch, T tokens per sequence in this step (1 for decode, the prompt for prefill), N = B·T tokens,
Lk the KV positions attended, H hidden size, h heads, g KV heads, d head dim, I MLP width, V vocabulary, L layers;
mixture of experts: E routed experts, k of them per token (top-k), I_e an expert's width.
Sizes in bytes: a for activations and weights' data type (``dtype``), kv for the KV cache (``kv_dtype``).

Per layer (count L), unless fused (see ``specs.workload.FUSIONS``):
  attn_norm      RMSNorm N×H                          reads x, gain; writes N×H
  q/k/v_proj     N×H · H×(h·d | g·d | g·d)            reads x and W; writes N×(h·d | g·d)
  rope           rotates Q and K                      reads Q, K and the cos/sin rows (N×d); writes Q, K
  kv_write       new K, V into the cache              reads N×2·g·d; writes N×2·g·d in kv_dtype
  naive:  qk     per head T×d · d×Lk                  reads Q, K (g heads: GQA shares K); writes B·h·T·Lk scores
          softmax over Lk                              reads and writes the scores
          pv     per head T×Lk · Lk×d                 reads P, V; writes N×h·d
  flash:  attention, one kernel: scores stay on chip; reads Q, K, V once, writes N×h·d
  o_proj         N×h·d · h·d×H
  attn_residual  x + attn                             reads 2·N×H; writes N×H
  mlp_norm, gate_proj, up_proj (N×H · H×I), act (SiLU(gate)·up on N×I), down_proj (N×I · I×H), mlp_residual
  (Qwen3's qk_norm adds q_norm and k_norm, RMSNorm over each head of Q and K, before rope.)
Variants (``Model`` fields) add or rename ops: ``attention_local`` and ``attention_chunked`` (a sliding or
chunked layer's core, engine/count/attention.py), ``qk_l2_norm`` and ``q_temperature`` (Llama 4's RoPE and NoPE
layers, engine/count/rope.py), ``post_attn_norm`` and ``post_mlp_norm`` (``post_norms``), and a plain
``gelu_tanh`` MLP has no gate_proj; norms, activations, biases and partial RoPE change counts only
(docs/design.md, "The counting rules", states each).
A mixture-of-experts layer (``Model.moe``) keeps the attention half and replaces the MLP with the router, the
routed and shared experts and moe_combine (``_moe_mlp_block`` states each); an MLA model's attention half is
``engine.count.mla``'s.
Once per model: embed (gathers N rows of V×H: min(N, V) distinct rows read), final_norm (N×H), lm_head (B×H · H×V:
the last token of each sequence only, as a serving engine computes logits only where it samples).

Rules beyond docs/design.md's defaults, stated once here:
- RMSNorm gains are kept in the activation data type (quantization schemes leave norms unquantized).
- Attention matmuls run at the activation data type; a narrower KV cache is read narrow and widened on chip.
- Causal flash attention skips masked scores: query i of T new tokens at the end of Lk positions sees
  Lk − T + i + 1 of them, T·(Lk − T) + T·(T + 1)/2 in all (S·(S+1)/2 for a prefill; Lk for a decode step).
  Naive attention computes and stores the full T×Lk scores, mask or not.
- Flash attention reads K and V once per KV head (the ideal; re-reads across query blocks hit in L2).
- An fp32 matmul runs on the vector units (PyTorch's default; TF32 is opt-in).
"""

from __future__ import annotations

from dataclasses import replace

from ...specs.layers import GATED_MLPS, KV_ATTENTIONS, LAYER_ATTENTIONS, LayerAttention
from ...specs.workload import Workload
from ...units import dtype_bytes
from .attention import attention_ops, scores_computed, span_of
from .block import linear as _linear
from .block import projection as _projection
from .block import projections as _projections
from .block import quantized as _quantized
from .block import residual as _residual
from .block import with_residual as _with_residual
from .mla import mla_attention_block, mla_attention_ops
from .moe import experts_touched
from .op import (
    BIAS_FLOPS_PER_ELEMENT,
    EMBED_SCALE_FLOPS_PER_ELEMENT,
    SIGMOID_GATE_FLOPS_PER_ELEMENT,
    SOFTCAP_FLOPS_PER_ELEMENT,
    Op,
)
from .primitives import (
    expert_matmul_op,
    gated_act_op,
    kv_write_op,
    matmul_op,
    norm_op,
    rmsnorm_op,
    router_op,
    with_gated_act,
)
from .quant import linear_weight_bytes
from .recurrent import gated_deltanet_block
from .rope import position_ops
from .ssm import mamba2_block

__all__ = ["attention_ops", "layer_ops", "model_ops", "moe_layer_ops", "scores_computed", "step_ops"]


def _with_bias(op: Op, w: Workload, n_out: int, rows: int | None = None, vectors: float = 1) -> Op:
    """Add a projection's bias in its epilogue (Qwen2's Q, K, V; gpt-oss's O and experts): reads the bias
    vector once, n_out elements in ``dtype`` (biases stay unquantized, as GPTQ/AWQ keep them in fp16), and adds
    it to each of the ``rows`` output rows (default N), rows·n_out FLOPs; y is written once as before.
    ``vectors``: how many bias vectors are read (an expert matmul reads those of the experts touched; an
    expectation is rounded to the byte)."""
    rows = w.tokens if rows is None else rows
    bias_exact = vectors * n_out * dtype_bytes(w.dtype)
    bias = int(bias_exact) if float(bias_exact).is_integer() else round(bias_exact)
    return replace(
        op,
        flops=op.flops + BIAS_FLOPS_PER_ELEMENT * rows * n_out,
        bytes=op.bytes + bias,
        weight_bytes=op.weight_bytes + bias,
        reads=op.reads + f", bias {n_out}",
        computes=op.computes + f" + {rows}·{n_out} bias adds",
        gemm=replace(op.gemm, bias=True) if op.gemm is not None else None,
    )


def _qkv(w: Workload, name: str, n_out: int, norm: bool) -> Op:
    """A Q, K or V projection (or all three fused), with the model's bias where it has one."""
    op = _projection(w, name, w.model.hidden_size, n_out, norm)
    return _with_bias(op, w, n_out) if w.model.qkv_bias else op




def _close_branch(ops: list[Op], w: Workload, branch: str) -> list[Op]:
    """End a branch (``attn`` or ``mlp``) whose last op writes its output: the post norm where the model has
    one (``post_norms``: Gemma 2/3's post_attention_layernorm and post_feedforward_layernorm), then the residual
    add, its own op or (``residual`` fused) in the epilogue of the branch's last op."""
    fused = "residual" in w.fused
    if w.model.post_norms:
        ops = [*ops, norm_op(f"post_{branch}_norm", w.tokens, w.model.hidden_size, w.dtype, w.model.norm)]
    if fused:
        return [*ops[:-1], _with_residual(ops[-1], w, f"{branch}_residual")]
    return [*ops, _residual(f"{branch}_residual", w)]


def _attention_block(w: Workload, attention: LayerAttention = "full") -> list[Op]:
    """The attention half of a block, in execution order: attn_norm … attn_residual (count 1); ``attention``:
    the layer's kind (full, sliding through the model's window, chunked; engine.count.attention). A model with
    multi-head latent attention builds its own (engine/count/mla.py; Model refuses windows and post norms beside
    it). A NoPE full layer (``nope_full_layers``) has no RoPE (engine.count.rope)."""
    m = w.model
    if m.mla is not None:
        return mla_attention_block(w)
    if attention == "linear":  # Gated DeltaNet in place of attention (engine/count/recurrent.py)
        return _close_branch(gated_deltanet_block(w), w, "attn")
    if attention == "mamba":  # Mamba-2 in place of attention (engine/count/ssm.py)
        return _close_branch(mamba2_block(w), w, "attn")
    n, h = w.tokens, m.hidden_size
    fused = set(w.fused)
    norm = norm_op("attn_norm", n, h, w.dtype, m.norm)
    norm_in = "norm_linear" in fused
    ops: list[Op] = [] if norm_in else [norm]
    q_out = (2 if m.attn_output_gate else 1) * m.q_dim  # a gated attention's q_proj gives Q and the gate
    qkv = [_qkv(w, name, width, False) for name, width in (("q_proj", q_out), ("k_proj", m.kv_dim),
                                                           ("v_proj", m.kv_dim))]
    ops += _projections(qkv, norm if norm_in else None, "qkv_proj" if "qkv" in fused else None,
                        lambda name, n_out, with_norm: _qkv(w, name, n_out, with_norm))
    if m.qk_norm:
        # Qwen3, Gemma 3: RMSNorm over each head of Q (N·h rows of d) and of K (N·g rows), gain d, before RoPE, a
        # kernel of its own; MiniMax-M2's per layer: N rows of h·d and of g·d, a gain of each row's width.
        for name, heads in (("q_norm", m.num_heads), ("k_norm", m.num_kv_heads)):
            rows, width = (n, heads * m.head_dim) if m.qk_norm_per_layer else (n * heads, m.head_dim)
            ops.append(rmsnorm_op(name, rows, width, w.dtype))
    ops += position_ops(w, rotates=not (m.nope_full_layers and attention == "full"))
    new_kv = n * 2 * m.kv_dim
    ops.append(kv_write_op(new_kv, w.dtype, w.kv_dtype, reads=f"new K and V, {w.tokens}×{m.kv_dim} each",
                           writes=f"them into the KV cache in {w.kv_dtype}"))
    ops.extend(attention_ops(w, *span_of(w, attention)))
    if m.attn_output_gate:
        ops.append(_output_gate(w))
    o_proj = _linear(w, "o_proj", m.q_dim, h)
    return _close_branch([*ops, _with_bias(o_proj, w, h) if m.o_bias else o_proj], w, "attn")


def _output_gate(w: Workload) -> Op:
    """Qwen3-Next's gated attention: the attention's output times sigmoid(gate), the gate q_proj's second half:
    reads both (N×h·d each), writes N×h·d; SIGMOID_GATE_FLOPS_PER_ELEMENT each."""
    n, q = w.tokens, w.model.q_dim
    return Op(name="attn_gate", kind="elementwise", flops=SIGMOID_GATE_FLOPS_PER_ELEMENT * n * q,
              bytes=3 * n * q * dtype_bytes(w.dtype), unit="vector", dtype="fp32",
              reads=f"O and the gate, {n}×{q} each", writes=f"{n}×{q}",
              computes=f"O·sigmoid(gate): {SIGMOID_GATE_FLOPS_PER_ELEMENT} FLOPs per element", tensor=(n, q))


def _gated_mlp(w: Workload, prefix: str, width: int, norm: Op | None) -> list[Op]:
    """The model's MLP (``Model.mlp``) over the step's N tokens: gate and up (N×H · H×width, or one gate_up
    matmul), act, and down (N×width · width×H), which writes its own output; a plain MLP (gelu_tanh) has up,
    act and down. Names start with ``prefix`` ('' for the dense MLP, 'shared_' for an MoE layer's shared
    experts); with ``norm`` (norm_linear) that norm runs in the prologue of gate and up; ``mlp_bias`` adds each
    projection's bias in its epilogue."""
    m = w.model
    n, h = w.tokens, m.hidden_size
    fused = set(w.fused)

    def proj(name: str, k: int, n_out: int, with_norm: bool) -> Op:
        op = _projection(w, name, k, n_out, with_norm)
        return _with_bias(op, w, n_out) if m.mlp_bias else op

    # A plain MLP (gelu_tanh) has no gate: Workload refuses gate_up and act fusions for it.
    names = ["up_proj"] if m.mlp not in GATED_MLPS else ["gate_proj", "up_proj"]
    ops = _projections([proj(prefix + name, h, width, False) for name in names], norm,
                       prefix + "gate_up_proj" if "gate_up" in fused else None,
                       lambda name, n_out, with_norm: proj(name, h, n_out, with_norm))
    if "act" in fused:
        ops[-1] = with_gated_act(ops[-1], n, width, w.dtype, m.mlp, act=prefix + "act")
    else:
        ops.append(gated_act_op(prefix + "act", n, width, w.dtype, m.mlp))
    ops.append(proj(prefix + "down_proj", width, h, False))
    return ops


def _dense_mlp_block(w: Workload) -> list[Op]:
    """The MLP half of a dense block: mlp_norm, gate, up, act, down, mlp_residual (or their fusions)."""
    m = w.model
    norm = norm_op("mlp_norm", w.tokens, m.hidden_size, w.dtype, m.norm)
    norm_in = "norm_linear" in w.fused
    ops: list[Op] = [] if norm_in else [norm]
    ops += _gated_mlp(w, "", m.intermediate_size, norm if norm_in else None)
    return _close_branch(ops, w, "mlp")


def _moe_mlp_block(w: Workload) -> list[Op]:
    """The MLP half of an MoE block, in execution order (count 1).

      mlp_norm            RMSNorm N×H, always its own kernel: its output is read by the router, every expert and
                          the shared experts (norm_linear would repeat it in each), so it is written once
      router              N×H · H×E gate, softmax, top-k (engine.count.primitives.router_op)
      expert_gate_proj,   grouped matmuls over the N·k (token, expert) pairs: rows N·k×H · H×I_e, weights of the
      expert_up_proj      X distinct experts touched, each read once (experts_touched: X); gate_up fuses them
      expert_act          SiLU(gate)·up on N·k×I_e (or in the gate_up epilogue with act)
      expert_down_proj    N·k×I_e · I_e×H, weights of the same X experts; writes each pair's N·k×H output
      shared_…            the shared experts (n_s of width I_s: one gated MLP of width n_s·I_s) on all N tokens
      moe_combine         each token's k outputs times their router weights, summed (k multiplies, k − 1 adds
                          per element), plus the shared output (one add): reads N·k×H, the N·k weights and
                          N×H shared; writes N×H. With residual fusion the residual add is in its epilogue
      mlp_residual        x + the combined output
    FLOPs follow the k experts each token uses: 2·N·k·(3·H·I_e) for the three expert matmuls.
    """
    m = w.model
    moe = m.moe
    assert moe is not None
    n, h, a = w.tokens, m.hidden_size, dtype_bytes(w.dtype)
    k, ie = moe.experts_per_token, moe.expert_intermediate_size
    pairs = n * k
    x = experts_touched(w)
    fused = set(w.fused)
    router = router_op("router", n, h, moe.num_experts, k, w.dtype, moe.router_softmax)
    ops: list[Op] = [norm_op("mlp_norm", n, h, w.dtype, m.norm),
                     _with_bias(router, w, moe.num_experts) if moe.router_bias else router]

    def expert(name: str, k_in: int, n_out: int) -> Op:
        if not _quantized(w, expert=True):
            op = expert_matmul_op(name, pairs, k_in, n_out, x, w.dtype)
        else:
            op = expert_matmul_op(name, pairs, k_in, n_out, x, w.dtype, weight_dtype=w.weights,
                                  expert_bytes=linear_weight_bytes(w, k_in, n_out), compute_dtype=w.matmul_dtype)
        # gpt-oss's experts' biases: the bias of each expert touched read once, one add per output of a pair.
        return _with_bias(op, w, n_out, rows=pairs, vectors=x) if m.mlp_bias else op

    names = ["expert_up_proj"] if m.mlp not in GATED_MLPS else ["expert_gate_proj", "expert_up_proj"]
    projections = _projections([expert(name, h, ie) for name in names], None,
                               "expert_gate_up_proj" if "gate_up" in fused else None,
                               lambda name, n_out, _: expert(name, h, n_out))
    if "act" in fused:
        projections[-1] = with_gated_act(projections[-1], pairs, ie, w.dtype, m.mlp, act="expert_act")
    ops += projections
    if "act" not in fused:
        ops.append(gated_act_op("expert_act", pairs, ie, w.dtype, m.mlp))
    ops.append(expert("expert_down_proj", ie, h))
    shared = moe.shared_width > 0
    if shared:
        ops += _gated_mlp(w, "shared_", moe.shared_width, None)
    if moe.shared_expert_gate:
        # Qwen2-MoE's and Qwen3-Next's shared_expert_gate: N×H · H×1; its sigmoid and the multiply of the shared
        # output by it are moe_combine's (below).
        # Kept in dtype whatever the checkpoint's format (vLLM builds it with no quant_config).
        ops.append(matmul_op("shared_expert_gate", n, h, 1, w.dtype))
    gate = moe.shared_expert_gate
    combine = Op(
        name="moe_combine",
        kind="elementwise",
        flops=(2 * k - 1 + (1 if shared else 0) + (1 if gate else 0)) * n * h
              + (SIGMOID_GATE_FLOPS_PER_ELEMENT - 1) * (n if gate else 0),
        bytes=(pairs * h + pairs + (n * h if shared else 0) + (n if gate else 0) + n * h) * a,
        unit="vector",
        dtype="fp32",
        reads=f"{pairs}×{h} expert outputs, their {pairs} router weights" + (f", shared {n}×{h}" if shared else "")
              + (f", {n} shared gate logits" if gate else ""),
        writes=f"{n}×{h}",
        computes=f"per element: {k} multiplies by the router weights, {k - 1} add{'s' if k != 2 else ''}"
                 + (", 1 add of the shared experts' output" if shared else "")
                 + (" times sigmoid of its gate (a sigmoid a token, a multiply)" if gate else ""),
    )
    return _close_branch([*ops, combine], w, "mlp")


def _mixer(w: Workload, attention: LayerAttention) -> list[Op]:
    """A layer's first half, its attention (or recurrent mixer); none in an ``mlp`` layer."""
    return [] if attention == "mlp" else _attention_block(w, attention)


def layer_ops(w: Workload, attention: LayerAttention = "full") -> list[Op]:
    """The operations of one dense transformer block, in execution order (count 1); ``attention``: its
    attention's kind (full, sliding, chunked, linear, mamba; or mlp, an MLP alone). Where the MLP is a layer
    apart (``Model.mlp_apart``: Nemotron-H), the other layers are their mixer alone."""
    mlp = _dense_mlp_block(w) if w.model.layer_has_mlp(attention) else []
    return [*_mixer(w, attention), *mlp]


def moe_layer_ops(w: Workload, attention: LayerAttention = "full") -> list[Op]:
    """The operations of one MoE block, in execution order (count 1): attention, then the experts."""
    return [*_mixer(w, attention), *_moe_mlp_block(w)]


def _merge_layers(blocks: list[tuple[list[Op], int]]) -> list[Op]:
    """The ops of several kinds of layer, each block's ops times its count; an op in more than one kind (the
    projections, mlp_norm, mlp_residual: the same work by the same name) once, with the counts added. An op new to
    the list goes before the next op of its block that is already there, so that the order stays each block's:
    dense layers' MLP, then the MoE one's, then mlp_residual; a sliding layer's attention_local after the full
    layers' attention, before o_proj. Ops of different work never share a name (a sliding layer's core is
    ``attention_local``), which the check below holds."""
    merged: list[Op] = []
    for ops, count in blocks:
        if count == 0:
            continue
        for j, op in enumerate(ops):
            names = [o.name for o in merged]
            if op.name in names:
                i = names.index(op.name)
                if replace(merged[i], count=1) != op:
                    raise ValueError(f"op {op.name} differs between the kinds of layer")  # a bug in the engine
                merged[i] = op.times(merged[i].count + count)
            else:
                later = [names.index(o.name) for o in ops[j + 1:] if o.name in names]
                merged.insert(later[0] if later else len(merged), op.times(count))
    return merged


def model_ops(w: Workload) -> tuple[list[Op], list[Op]]:
    """The once-per-model operations: (before the layers, after the layers)."""
    m = w.model
    n, h, a = w.tokens, m.hidden_size, dtype_bytes(w.dtype)
    # The gather reads each token's row of the V×H table, but no row more than once (DESIGN.md: each input read
    # once): at most min(N, V) distinct rows, so never more than the table itself. A prefill of 64 × 4096 tokens
    # through Llama 3's 128,256-row table reads the table once, not 262,144 rows (which counted more weight bytes
    # than the model has). Below V rows every token is counted as a distinct row, the most the gather can read.
    # (A tied LM head reads the same table again in its own kernel: that is traffic, and counted as such.)
    rows_read = min(n, m.vocab_size)
    embed_read = rows_read * h * a
    embed = Op(
        name="embed",
        kind="gather",
        flops=0,
        bytes=embed_read + n * h * a,
        unit="vector",
        dtype="fp32",
        reads=f"{rows_read} distinct rows (at most) of the {m.vocab_size}×{h} embedding table for {n} tokens",
        writes=f"x {n}×{h}",
        computes="nothing: a gather",
        weight_bytes=embed_read,
        per_model=True,
    )
    if m.scale_embeddings:
        # Gemma: the gathered rows times sqrt(H), one multiply per element, in the gather's epilogue.
        embed = replace(embed, flops=EMBED_SCALE_FLOPS_PER_ELEMENT * n * h, computes="a gather, then ·sqrt(H)")
    final_norm = replace(norm_op("final_norm", n, h, w.dtype, m.norm), per_model=True)
    lm_head = replace(matmul_op("lm_head", w.batch, h, m.vocab_size, w.dtype), per_model=True)
    if m.final_logit_softcapping is not None:
        # Gemma 2: cap·tanh(logit/cap) on each of the B×V logits, in the LM head's epilogue.
        lm_head = replace(lm_head, flops=lm_head.flops + SOFTCAP_FLOPS_PER_ELEMENT * w.batch * m.vocab_size,
                          computes=lm_head.computes + f", + soft cap ({SOFTCAP_FLOPS_PER_ELEMENT} FLOPs a logit)")
    if w.phase in ("prefill", "mixed"):
        lm_head = replace(lm_head, computes=lm_head.computes + ", for the last token of each sequence only")
    return [embed], [final_norm, lm_head]


def step_ops(w: Workload) -> list[Op]:
    """Every operation of one step with its count: each kind of layer's ops (dense or MoE MLP, full or sliding
    attention: ``Model.layer_counts``) times its count, merged by name; the attention phase is only the
    attention core of every layer."""
    m = w.model
    counts = m.layer_counts()
    if w.phase == "attention":
        if m.mla is not None:  # the expanded form's core in every layer (engine/count/mla.py)
            return [op.times(m.num_layers) for op in mla_attention_ops(w)]
        return _merge_layers([(attention_ops(w, *span_of(w, kind)), m.attention_layers(kind))
                              for kind in KV_ATTENTIONS])
    before, after = model_ops(w)
    # Order of the kinds: dense before MoE (an MoE model's first dense layers), full before sliding and chunked.
    blocks = [((moe_layer_ops if moe else layer_ops)(w, kind), counts[moe, kind])
              for moe in (False, True) for kind in LAYER_ATTENTIONS if counts.get((moe, kind))]
    return [*before, *_merge_layers(blocks), *after]
