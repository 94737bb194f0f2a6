"""Tensor, expert and pipeline parallelism: one GPU's share of a step, and the collectives that join the shares.
Pure: no I/O.

The layout is Megatron-LM's (Shoeybi et al., "Megatron-LM", arXiv 1909.08053, section 3), as vLLM and SGLang
serve it. With ``tp`` = t GPUs, each GPU holds:

  attention   Q, K, V column-parallel: h/t query heads and g/t KV heads each. Where t exceeds g, each KV head is
              replicated on t/g GPUs and each GPU holds one KV head (vLLM's QKVParallelLinear does so), so the
              KV cache per GPU stops shrinking at t = g. O row-parallel: its h/t heads' rows of h·d × H.
  MLA         (DeepSeek) q_b_proj and kv_b_proj column-parallel (h/t heads each), o_proj row-parallel; q_a_proj
              and kv_a_proj_with_mqa replicated, and the latent cache replicated on every GPU: every head reads
              the whole latent, so each rank needs all of it (vLLM's DeepseekV2 attention: ReplicatedLinear for
              the two down-projections).
  MLP         gate and up column-parallel, down row-parallel: width I/t.
  experts     every expert on every GPU, each one's width split I_e/t as the dense MLP's (the shared experts'
              too); the router's H×E gate replicated.
  vocabulary  the embedding and the LM head vocabulary-parallel: V/t rows each (V padded up to the next
              multiple of t where t does not divide it: the least padding; Megatron's make_vocab_size_divisible_by
              pads to a multiple of 128·t and vLLM each shard to a multiple of 64, which is not counted).
  everything  else replicated: norms (and their gains), RoPE, residual adds, biases of row-parallel layers.

So one GPU's step is the engine's own step of a model with those sizes (``per_gpu_workload``): ``transformer.py``
counts it unchanged, and the weights, KV cache and largest batch per GPU follow from the same functions.

The shares are joined by collectives (``communication_ops``), each an op of kind ``communication``:

  attn_all_reduce  after o_proj, every layer: the N×H partial sums of the t GPUs' heads
  mlp_all_reduce   after down_proj (or, in an MoE layer, after moe_combine): the MLP's N×H partial sums
  embed_all_reduce once: each GPU's gather fills the rows of its vocabulary shard (zeros elsewhere), and the
                   sum is the embedding (Megatron's VocabParallelEmbedding)
  logits_all_gather once: each GPU's B×V/t logits gathered into B×V on every GPU, for sampling

Bytes are what one GPU sends, by NCCL's ring algorithms (NCCL's documentation, "Collective Operations", and
nccl-tests' doc/PERFORMANCE.md, which define the bus bandwidth by these factors): an all-reduce of S bytes sends
2(t−1)/t·S (a reduce-scatter then an all-gather, (t−1)/t·S each), an all-gather of S bytes in all (t−1)/t·S. A
GPU receives as much as it sends at the same time, so the roof is the interconnect's bandwidth in one
direction (half the datasheet's bidirectional total: ``Interconnect.per_direction_gbps``), and the time is the
collective's latency plus bytes / that bandwidth (``roofline.place``). The reduction's adds and the collective
kernel's own HBM traffic are not counted. None of these can overlap with compute in a decode step: the next op
needs the sum (the critical path); prefill engines can overlap a layer's collective with another micro-batch's
compute, which is not modelled. Modelled, not measured, unless the GPU file holds the collectives that
``rooflinectl calibrate --comm`` measured (``measured.interconnect``): then ``analyze --calibrated`` times each
collective op (``Op.collective``) with that collective's bus bandwidth at the largest size and its time at the
smallest (``MeasuredInterconnect.fit``). nccl-tests' busbw is defined so that busbw × time = these ring bytes,
so the same formula holds with the measured figures in place of the datasheet's.

Expert parallelism (``ep`` = e GPUs, a mixture of experts only; not with tp > 1) takes DeepSeek's serving layout
(DeepSeek-V3 technical report, arXiv 2412.19437, section 3.4: attention data-parallel, experts expert-parallel),
as SGLang's DP attention with DeepEP and vLLM's data-parallel attention with expert parallelism run it:

  attention   data-parallel: every GPU holds the attention, the dense layers, the router, embedding and LM
              head whole, and serves ⌈B/e⌉ of the B sequences (the busiest GPU sets the step's time), with
              their KV cache.
  experts     E/e whole experts a GPU (refused where e does not divide E). A GPU's tokens send each of their k
              copies to the GPU of its expert; under uniform routing a GPU receives as many pairs as it sends,
              ⌈B/e⌉·T·k, so its expert matmuls are the engine's for its own batch, and they read the weights of
              E/e·(1 − (1 − k/E)^N) distinct experts (N the whole step's tokens; a stated experts_touched X:
              X/e), an expectation.
  all-to-all  dispatch_all_to_all before the experts, combine_all_to_all after, per MoE layer: a GPU sends
              n·k·H activations (n its tokens), (e−1)/e of them to other GPUs under uniform routing, and receives as many:
              bytes sent = n·k·H·a·(e−1)/e each way (DeepEP's dispatch and combine; DeepSeek dispatches in FP8
              and deduplicates tokens per node, neither modelled). Same roof and time rule as above.

Expert parallelism under tensor parallelism (``ep`` = ``tp`` = t, the same GPUs: vLLM's
``--tensor-parallel-size t --enable-expert-parallel``): the attention, dense layers, shared experts and vocabulary
are split as under TP, and the routed experts are not sliced but spread, E/t whole experts a GPU. After the
attention's all-reduce every GPU holds every token, so no token is sent anywhere: each GPU runs the pairs routed
to its own experts, N·k/t under uniform routing (its expert matmuls' FLOPs and activation bytes are 1/t of the
engine's for the N tokens, and they read E/t·(1 − (1 − k/E)^N) distinct experts' weights, an expectation), sums
its pairs' weighted outputs into an N×H partial (moe_combine over N·k/t pairs: a multiply and an add a pair and
element, 2·(N·k/t)·H FLOPs, plus the shared experts' add), and mlp_all_reduce sums the t partials as under TP.

Pipeline parallelism (``pp`` = p stages, with tp; not with ep) splits the layers into p stages of L/p
consecutive layers (refused where p does not divide L, or where the stages would hold different kinds of layer:
an MoE model's first dense layers, a window pattern that does not repeat within a stage). A GPU holds one
stage: its layers' weights and KV cache, and the embedding (first stage) or the LM head and final norm (last
stage; the heavier, counted); a tied embedding is held by both end stages. A step's ops are its pass through
all p stages, one after another (each GPU runs L/p layers of it), and between stages the N×H activations go
from one GPU to the next: ``pp_send``, point-to-point, N·H·a bytes, p − 1 times, timed by the same rule. With
one batch in the pipeline each stage idles (p−1)/p of the step; split into M micro-batches the idle share (the
bubble) is (p−1)/(M+p−1) (GPipe: Huang et al., arXiv 1811.06965, section 2.2). The step time here is the
batch's pass with no micro-batching (M = 1), the bubble's worst case; the output states the bubble for
M = p.

tokens/s per GPU divides by the GPUs one copy spans, max(tp, ep)·pp: ep alone, tp·pp, or tp = ep on the same
GPUs; no GPU is counted twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UserError
from ..specs.hardware import GPU
from ..specs.load import validate
from ..specs.measured import Collective
from ..specs.model import GATED_MLPS, Model
from ..specs.workload import Workload
from ..units import dtype_bytes
from .moe import experts_touched
from .op import Op
from .quant import weight_matrix_bytes
from .transformer import kv_cache_bytes_per_sequence, weight_footprint_bytes

# The most GPUs one degree may name: an 8-GPU node, times 64 nodes.
MAX_DEGREE = 512


@dataclass(frozen=True)
class Layout:
    """How one copy of the model is spread over GPUs: ``tp`` GPUs in tensor parallel, ``ep`` GPUs with the
    experts spread over them and the attention data-parallel, or both on the same GPUs (ep = tp: the attention
    tensor-parallel, the experts spread); ``pp`` stages with tp (the module's docstring)."""

    tp: int = 1
    ep: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        check_degree("--tp", self.tp)
        check_degree("--ep", self.ep)
        check_degree("--pp", self.pp)
        if self.ep > 1 and self.pp > 1:
            raise UserError(f"--pp {self.pp} with --ep {self.ep}: pipeline stages with expert parallelism are not "
                            f"modelled; give one of them")
        if self.ep > 1 and self.tp > 1 and self.ep != self.tp:
            raise UserError(f"--tp {self.tp} with --ep {self.ep}: expert parallelism under tensor parallelism spreads "
                            f"the experts over the same GPUs (vLLM's --enable-expert-parallel): give --ep {self.tp}, "
                            f"or --ep alone for data-parallel attention")

    @property
    def gpus(self) -> int:
        """The GPUs one copy of the model spans: tokens/s per GPU divides by it."""
        return max(self.tp, self.ep) * self.pp

    @property
    def dp_attention(self) -> bool:
        """Expert parallelism alone: the attention data-parallel, each GPU serving ⌈B/e⌉ sequences."""
        return self.ep > 1 and self.tp == 1

    @property
    def batch_shards(self) -> int:
        """The GPUs a batch's sequences are spread over: ep with data-parallel attention, else 1."""
        return self.ep if self.dp_attention else 1

    @property
    def single(self) -> bool:
        return self.gpus == 1

    def label(self) -> str:
        if self.dp_attention:
            return f"EP {self.ep}"
        if self.ep > 1:
            return f"TP {self.tp} + EP {self.ep}"
        return " × ".join([f"TP {self.tp}"] + ([f"PP {self.pp}"] if self.pp > 1 else []))


def check_degree(name: str, value: int) -> None:
    """A degree is a whole number of GPUs from 1 to MAX_DEGREE: anything else is refused in one line."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEGREE:
        raise UserError(f"{name} {value}: give a whole number of GPUs from 1 to {MAX_DEGREE}")


def check_interconnect(gpu: GPU, layout: Layout) -> None:
    """A layout over several GPUs needs the GPU file's interconnect: its roof and latency time the collectives."""
    if not layout.single and gpu.interconnect is None:
        flag = f"--ep {layout.ep}" if layout.ep > 1 else f"--tp {layout.tp}" if layout.tp > 1 else f"--pp {layout.pp}"
        raise UserError(f"{gpu.id}: the GPU file gives no interconnect, so {flag} cannot be timed; add an "
                        f"'interconnect' section (name, link, bandwidth_gbps, latency_us, source)")


def _split(what: str, total: int, t: int, model: Model) -> int:
    if total % t:
        raise UserError(f"--tp {t}: model {model.id} has {total:,} {what}, which {t} GPUs cannot split evenly")
    return total // t


def kv_heads_per_gpu(model: Model, t: int) -> int:
    """g/t KV heads a GPU; where t exceeds g, one (each KV head replicated on t/g GPUs); refused where neither
    divides the other."""
    g = model.num_kv_heads
    if g % t == 0:
        return g // t
    if t % g == 0:
        return 1
    raise UserError(f"--tp {t}: model {model.id}'s {g} KV heads can neither be split over {t} GPUs nor "
                    f"replicated evenly on them")


def padded_vocab(vocab: int, t: int) -> int:
    """The vocabulary padded up to a multiple of t (unchanged where t divides it)."""
    return -(-vocab // t) * t


def per_gpu_model(model: Model, t: int, whole_experts: bool = False) -> Model:
    """One GPU's share of ``model`` under tensor parallelism of degree t (the module's docstring states it);
    ``whole_experts``: the routed experts are spread over the t GPUs (ep = tp), not sliced, so their width stays
    (the op adjustment :func:`expert_ops_per_gpu` takes 1/t of their pairs)."""
    if t == 1:
        return model
    data: dict[str, Any] = model.model_dump()
    heads = _split("attention heads", model.num_heads, t, model)
    data["num_heads"] = heads
    data["num_kv_heads"] = heads if model.mla is not None else kv_heads_per_gpu(model, t)
    if model.dense_layers:
        data["intermediate_size"] = _split("MLP width (intermediate_size)", model.intermediate_size, t, model)
    if model.moe is not None:
        moe = dict(data["moe"])
        if not whole_experts:
            moe["expert_intermediate_size"] = _split("expert width", model.moe.expert_intermediate_size, t, model)
        if model.moe.shared_expert_intermediate_size is not None:
            moe["shared_expert_intermediate_size"] = _split(
                "shared expert width", model.moe.shared_expert_intermediate_size, t, model)
        elif whole_experts and model.moe.num_shared_experts:
            # The shared experts stay TP-split when the routed ones are spread: their width, the routed width
            # when not given, is split apart from the routed experts'.
            moe["shared_expert_intermediate_size"] = _split(
                "shared expert width", model.moe.expert_intermediate_size, t, model)
        data["moe"] = moe
    data["vocab_size"] = padded_vocab(model.vocab_size, t) // t
    return validate(Model, data, f"model {model.id} at --tp {t}")


def check_experts(model: Model, e: int) -> None:
    """--ep needs a mixture of experts whose E experts e GPUs share evenly."""
    if e == 1:
        return
    if model.moe is None:
        raise UserError(f"--ep {e}: model {model.id} is dense; expert parallelism spreads a mixture of experts")
    if model.moe.num_experts % e:
        raise UserError(f"--ep {e}: model {model.id} has {model.moe.num_experts} experts, which {e} GPUs cannot "
                        f"share evenly")


def sequences_per_gpu(batch: int, e: int) -> int:
    """⌈B/e⌉: the sequences the busiest GPU serves under data-parallel attention."""
    return -(-batch // e)


def per_gpu_workload(w: Workload, layout: Layout) -> Workload:
    """One GPU's step: under TP, ``w`` with its model's per-GPU sizes (batch, lengths and data types
    unchanged); under EP, ``w`` with ⌈B/e⌉ sequences (its expert ops then adjusted by :func:`expert_ops_per_gpu`)."""
    if layout.single:
        return w
    if layout.dp_attention:
        check_experts(w.model, layout.ep)
        # A stated experts_touched is the whole step's; the per-GPU share is set on the expert ops instead.
        return validate(Workload, {**dict(w), "batch": sequences_per_gpu(w.batch, layout.ep),
                                   "experts_touched": None}, f"{w.label()} per GPU")
    check_experts(w.model, layout.ep)
    model = per_gpu_model(w.model, layout.tp, whole_experts=layout.ep > 1)
    return validate(Workload, {**dict(w), "model": model}, f"{w.label()} per GPU")


def _expert_shapes(w: Workload, fused_shapes: bool) -> list[tuple[int, int]]:
    """One expert's matrices as (k, n), in the order engine.transformer builds its expert ops (``fused_shapes``:
    gate_up as one H×2I_e where the workload fuses it), or as stored (gate and up apart, as the footprint counts)."""
    m = w.model
    assert m.moe is not None
    h, ie = m.hidden_size, m.moe.expert_intermediate_size
    if m.mlp == "gelu_tanh":
        return [(h, ie), (ie, h)]
    if fused_shapes and "gate_up" in w.fused:
        return [(h, 2 * ie), (ie, h)]
    return [(h, ie), (h, ie), (ie, h)]


def _matrix_bytes(w: Workload, k: int, n: int) -> int:
    """One expert matrix as stored: in the weight format where the experts are quantized (engine.quant)."""
    return weight_matrix_bytes(w.weights, k, n, w.group_size) if w.quantized else k * n * int(dtype_bytes(w.dtype))


def _expected(x: float) -> int:
    """An expectation of bytes rounded to the byte, as engine.op.expert_matmul_op rounds it."""
    return int(x) if float(x).is_integer() else round(x)


def expert_ops_per_gpu(ops: list[Op], whole: Workload, per_gpu: Workload, layout: Layout) -> list[Op]:
    """Under EP, each expert op of one GPU's step reads the weights of the experts touched among its E/e
    (experts_touched of the whole step / e), not of its own tokens' touches among all E; FLOPs and activation
    bytes are the engine's for its ⌈B/e⌉ sequences (the module's docstring). Under TP + EP every GPU holds all N
    tokens and runs the N·k/e pairs routed to its experts: the expert ops' and expert_act's FLOPs and activation
    bytes are 1/e of the engine's for the N tokens, and moe_combine sums those pairs only. Other layouts:
    unchanged."""
    if layout.ep == 1 or whole.model.moe is None:
        return ops
    e = layout.ep
    share = experts_touched(whole) / e
    shapes = iter(_expert_shapes(per_gpu, fused_shapes=True))
    a = dtype_bytes(per_gpu.dtype)
    local = not layout.dp_attention  # TP + EP: 1/e of the step's pairs on each GPU
    out = []
    for op in ops:
        if local and op.name.startswith("moe_combine"):
            out.append(_local_combine(op, per_gpu, e))
            continue
        if local and op.name == "expert_act":
            out.append(replace(op, flops=_whole(op.flops / e), bytes=_expected(op.bytes / e),
                               computes=op.computes + f"; 1/{e} of the pairs on this GPU (TP + EP)"))
            continue
        if op.kind != "expert":
            out.append(op)
            continue
        k, n = next(shapes)
        held = _expected(share * _matrix_bytes(per_gpu, k, n))
        if per_gpu.model.mlp_bias:
            held += _expected(share * n * a)
        moved = op.bytes - op.weight_bytes  # the pairs' rows in and out
        flops = op.flops
        if local:
            moved, flops = _expected(moved / e), _whole(flops / e)
        label = "TP + EP" if local else "EP"
        out.append(replace(op, flops=flops, bytes=moved + held, weight_bytes=held,
                           reads=op.reads + f"; {label} {e}: {share:.4g} experts read of this GPU's "
                                            f"{whole.model.moe.num_experts // e} (expected)"))
    return out


def _local_combine(op: Op, per_gpu: Workload, e: int) -> Op:
    """moe_combine on one GPU under TP + EP: the weighted sum of its N·k/e pairs into an N×H partial, a multiply
    and an add a pair and element (2·(N·k/e)·H FLOPs in place of the whole step's (2k − 1)·N·H), reading those
    pairs' rows and router weights; the shared experts' add, the output and a fused residual as before."""
    m = per_gpu.model
    assert m.moe is not None
    n, h, k, a = per_gpu.tokens, m.hidden_size, m.moe.experts_per_token, dtype_bytes(per_gpu.dtype)
    pairs, local = n * k, n * k / e
    return replace(
        op,
        flops=_whole(op.flops - (2 * k - 1) * n * h + 2 * local * h),
        bytes=_expected(op.bytes - (pairs * h + pairs) * a + (local * h + local) * a),
        reads=op.reads + f"; TP + EP {e}: this GPU's {local:,.4g} pairs (expected)",
        computes=f"per element of each of this GPU's pairs: a multiply by its router weight and an add into "
                 f"the token's partial sum (mlp_all_reduce sums the {e} partials)",
    )


def stage_workload(per_gpu: Workload, p: int) -> Workload:
    """One pipeline stage of one GPU's step: its model with L/p layers (the module's docstring); refused where p
    does not divide L or where the stages would differ."""
    m = per_gpu.model
    if m.num_layers % p:
        raise UserError(f"--pp {p}: model {m.id} has {m.num_layers} layers, which {p} stages cannot split evenly")
    stage = validate(Model, {**m.model_dump(), "num_layers": m.num_layers // p}, f"model {m.id} at --pp {p}")
    whole_counts = m.layer_counts()
    if {kind: n * p for kind, n in stage.layer_counts().items()} != whole_counts:
        raise UserError(f"--pp {p}: model {m.id}'s stages would hold different kinds of layer (dense and MoE, "
                        f"full and sliding); not modelled")
    return validate(Workload, {**dict(per_gpu), "model": stage}, f"{per_gpu.label()} per stage")


def kv_bytes_per_sequence_per_gpu(per_gpu: Workload, layout: Layout) -> float:
    """One sequence's KV cache on one GPU: of its stage's layers under PP."""
    if layout.pp > 1:
        per_gpu = stage_workload(per_gpu, layout.pp)
    return kv_cache_bytes_per_sequence(per_gpu)


def weight_bytes_per_gpu(whole: Workload, per_gpu: Workload, layout: Layout) -> float:
    """The weights one GPU holds: the per-GPU model's footprint; under EP less the E − E/e experts of each MoE
    layer that live on other GPUs (each expert's matrices as stored, with its biases); under PP the heaviest
    stage's: its L/p layers and one V×H table (the last stage's LM head, and the final norm), the other end's
    table left out where the two are not tied."""
    if layout.pp > 1:
        stage = stage_workload(per_gpu, layout.pp)
        held = weight_footprint_bytes(stage)
        m = stage.model
        return held if m.tie_embeddings else held - m.vocab_size * m.hidden_size * dtype_bytes(stage.dtype)
    held = weight_footprint_bytes(per_gpu)
    moe = whole.model.moe
    if layout.ep == 1 or moe is None:
        return held
    m = whole.model
    ie = moe.expert_intermediate_size
    biases = m.mlp_parameters(ie) - (3 if m.mlp in GATED_MLPS else 2) * m.hidden_size * ie
    one = sum(_matrix_bytes(per_gpu, k, n) for k, n in _expert_shapes(per_gpu, fused_shapes=False)) \
        + biases * dtype_bytes(per_gpu.dtype)
    return held - m.moe_layers * (moe.num_experts - moe.num_experts // layout.ep) * one


def _whole(x: float) -> int | float:
    """An integer where the count is one (the engine's counts are: --json prints them so)."""
    return int(x) if float(x).is_integer() else x


def all_reduce_bytes(buffer: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-reduce of ``buffer`` bytes over t GPUs: 2(t−1)/t of it."""
    return _whole(2 * (t - 1) * buffer / t) if (2 * (t - 1) * buffer) % t else _whole(2 * (t - 1) * buffer // t)


def all_gather_bytes(total: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-gather whose result is ``total`` bytes: (t−1)/t of it."""
    return _whole((t - 1) * total / t) if ((t - 1) * total) % t else _whole((t - 1) * total // t)


_ALGORITHMS: dict[Collective, str] = {"all_reduce": "all-reduce", "all_gather": "all-gather",
                                      "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all"}


def _collective(name: str, what: str, collective: Collective, buffer: float, sent: int | float, t: int, count: int,
                per_model: bool = False) -> Op:
    algorithm = _ALGORITHMS[collective]
    return Op(
        name=name,
        kind="communication",
        flops=0,
        bytes=sent,
        unit="vector",
        dtype="fp32",
        reads=f"{what}: {buffer:,} bytes on each of {t} GPUs",
        writes="the result on every GPU",
        computes=f"ring {algorithm}: sends {sent:,} bytes a GPU over the interconnect; cannot overlap "
                 f"(the next op needs its result)",
        count=count,
        per_model=per_model,
        collective=collective,
    )


def communication_ops(w: Workload, layout: Layout) -> list[Op]:
    """The collectives of one step of ``w`` (the whole model's workload) under ``layout``, one GPU's bytes each;
    none on one GPU. The attention phase (the attention core alone) has none: its heads need no other GPU's."""
    t = layout.tp
    if layout.single or w.phase == "attention":
        return []
    sends = []
    if layout.pp > 1:
        x = w.tokens * w.model.hidden_size * dtype_bytes(w.dtype)
        sends = [Op(name="pp_send", kind="communication", flops=0, bytes=_whole(x), unit="vector", dtype="fp32",
                    reads=f"x {w.tokens}×{w.model.hidden_size} at the end of a stage", writes="it on the next stage's GPU",
                    computes=f"point-to-point: sends {_whole(x):,} bytes; cannot overlap (the next stage needs it)",
                    count=layout.pp - 1)]
        if t == 1:
            return sends
    m = w.model
    a = dtype_bytes(w.dtype)
    if layout.dp_attention:
        assert m.moe is not None
        e, k = layout.ep, m.moe.experts_per_token
        n = sequences_per_gpu(w.batch, e) * w.tokens_per_seq  # this GPU's tokens
        pairs = n * k * m.hidden_size * a  # its tokens' k copies of H, in the activations' type
        sent = _whole(pairs * (e - 1) / e) if (pairs * (e - 1)) % e else _whole(pairs * (e - 1) // e)
        return [_collective(name, f"{n} tokens × top-{k} copies of {m.hidden_size}", "all_to_all", pairs, sent, e,
                            m.moe_layers) for name in ("dispatch_all_to_all", "combine_all_to_all")]
    activations = w.tokens * m.hidden_size * a  # N×H, in the activations' type
    logits = w.batch * padded_vocab(m.vocab_size, t) * a  # B×V, the last token of each sequence
    return [*sends,
        _collective("embed_all_reduce", f"x {w.tokens}×{m.hidden_size}", "all_reduce", activations,
                    all_reduce_bytes(activations, t), t, 1, per_model=True),
        _collective("attn_all_reduce", f"o_proj's partial sums {w.tokens}×{m.hidden_size}", "all_reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers),
        _collective("mlp_all_reduce", f"the MLP's partial sums {w.tokens}×{m.hidden_size}", "all_reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers),
        _collective("logits_all_gather", f"logits {w.batch}×{padded_vocab(m.vocab_size, t) // t} a GPU",
                    "all_gather", logits // t, all_gather_bytes(logits, t), t, 1, per_model=True),
    ]


def _timed_with(line: str, measured: Sequence[str]) -> str:
    """The layout's last note, ``line`` (collectives modelled, not measured), or, where ``analyze --calibrated``
    timed some collectives with a measured interconnect (``calibrate --comm``), which ones."""
    if not measured:
        return line
    return (f"collectives modelled (ring algorithms); {', '.join(measured)} timed with the bus bandwidth and "
            f"latency calibrate --comm measured, any other with the datasheet's interconnect")


def notes(w: Workload, layout: Layout, measured: Sequence[str] = ()) -> list[str]:
    """What a reader of the per-GPU numbers must know about the layout, one line each. ``measured``: the
    collectives the roofs carry measured figures for (``Roofs.measured_collectives``)."""
    if layout.single:
        return []
    m, t = w.model, layout.tp
    pp = []
    if layout.pp > 1:
        p = layout.pp
        pp = [f"PP {p}: {m.num_layers // p} of {m.num_layers} layers a stage; the step is the batch's pass through "
              f"all {p} stages (one micro-batch: each GPU idles {(p - 1) / p:.0%} of it); with M micro-batches the "
              f"bubble is (p−1)/(M+p−1) of the time (GPipe), {(p - 1) / (2 * p - 1):.0%} at M = {p}; memory is one "
              f"stage's"]
        if t == 1:
            return [*pp, "point-to-point sends between stages modelled, not measured"]  # calibrate --comm: no p2p
    if layout.dp_attention:
        assert m.moe is not None
        e = layout.ep
        return [f"EP {e} (DeepSeek's layout): {m.moe.num_experts // e} of {m.moe.num_experts} experts a GPU; "
                f"attention data-parallel, {sequences_per_gpu(w.batch, e)} of {w.batch} sequences a GPU; "
                f"tokens/s per GPU over {e} GPUs",
                _timed_with("all-to-all dispatch and combine under uniform routing; collectives modelled, not measured",
                            measured)]
    out = [f"TP {t} (Megatron): {m.num_heads // t} of {m.num_heads} heads a GPU; tokens/s per GPU over "
           f"{layout.gpus} GPUs", *pp]
    if layout.ep > 1:
        assert m.moe is not None
        out.append(f"EP {layout.ep} on the same GPUs (vLLM's --enable-expert-parallel): "
                   f"{m.moe.num_experts // layout.ep} of {m.moe.num_experts} whole experts a GPU, which runs the "
                   f"pairs routed to them (1/{layout.ep} under uniform routing); every GPU holds every token, so "
                   f"mlp_all_reduce sums the experts' outputs and no all-to-all is needed")
    if m.mla is not None:
        out.append("MLA: the latent KV cache is replicated on every GPU (each rank's heads read the whole latent)")
    elif t > m.num_kv_heads:
        out.append(f"KV heads replicated: {m.num_kv_heads} KV heads over {t} GPUs, each GPU holds one "
                   f"({t // m.num_kv_heads} copies of each)")
    if padded_vocab(m.vocab_size, t) != m.vocab_size:
        out.append(f"vocabulary padded from {m.vocab_size:,} to {padded_vocab(m.vocab_size, t):,} for {t} GPUs")
    out.append(_timed_with("collectives modelled (ring algorithms, interconnect roof and latency), not measured",
                           measured))
    return out
