"""Plain-language verdicts on an analysis: why the step is bound where it is, and what would move it. The numbers
they state come from the engine (``engine.roofline.linear_summary``, ``batch_at_ridge``); this module only words
them."""

from __future__ import annotations

from collections.abc import Callable

from ..engine.count.moe import experts_touched, tokens_to_touch
from ..engine.roofline import ALL_EXPERTS, Analysis, layer_linears, linear_summary
from ..units import decimal_bytes, duration, gib, number, plural


def _gb(x: float) -> str:
    return decimal_bytes(x)


def kv_read_text(a: Analysis, size: Callable[[float], str]) -> str:
    """What the step's attention reads as keys and values, ``size`` formatting the bytes: the KV cache, or, where
    MLA runs its expanded form (prefill and mixed steps), the per-head K and V that kv_b_proj expands from the
    latent cache, with the cache those come from (DeepSeek-V3 prefill at 4,096 tokens: 16.4 GB expanded from
    288 MB held, 57×)."""
    t, w = a.totals, a.workload
    if w.model.mla is None or w.phase == "decode":
        return f"{size(t.kv_cache_bytes)} of KV cache"
    held = t.kv_cache_bytes_per_sequence * w.batch
    return f"{size(t.kv_cache_bytes)} of K and V expanded from {size(held)} of latent KV cache"


def moe_lines(a: Analysis) -> list[str]:
    """Mixture-of-experts: how many experts a layer reads, why weights read grow with batch, where that stops."""
    w, moe = a.workload, a.workload.model.moe
    if moe is None:
        return []
    e, k, n = moe.num_experts, moe.experts_per_token, w.tokens
    touched = experts_touched(w)
    experts = [p for p in a.placements if p.op.kind == "expert"]
    flops = sum(p.op.flops for p in experts)
    moved = sum(p.op.bytes for p in experts)
    full = tokens_to_touch(e, k, ALL_EXPERTS)
    if a.layout.ep > 1:  # one GPU's E/e experts, touched by the whole batch's routing (engine.parallel)
        return [f"EP {a.layout.ep}: each GPU holds {e // a.layout.ep} of the {e} experts of each of the "
                f"{w.model.moe_layers} MoE layers and reads those the whole batch's tokens touch among them "
                f"(expected under uniform routing); its expert matmuls sit at intensity {flops / moved:.1f} "
                f"FLOP/byte."]
    if w.experts_touched is not None:
        uniform = experts_touched(w.model_copy(update={"experts_touched": None}))
        how = (f", as stated (--experts-touched); uniform routing would touch {number(uniform, 4)}, and "
               f"{ALL_EXPERTS:.0%} of the {e} from {full:,} tokens on")
    else:
        how = " (expected under uniform routing, E·(1 − (1 − k/E)^N))"
    if w.phase == "decode":
        if w.experts_touched is not None:
            grows = f"{how}."
        else:
            grows = (f"{how}, so the expert weights read grow with batch until every expert is touched: the expected "
                     f"count reaches {ALL_EXPERTS:.0%} of {e} at batch {full:,}")
            grows += "." if w.batch < full else ", which this batch is past."
        return [
            f"Each of the {w.model.moe_layers} MoE layers routes each token to {k} of its {e} experts: the step "
            f"reads {number(touched, 4)} distinct experts per layer{grows}",
            f"The expert matmuls sit at intensity {number(flops / moved)} FLOP/byte: an expert's weights, once read, "
            f"serve {number(n * k / touched)} token{'s' if n * k != touched else ''} on average (N·k / experts touched)"
            + (f", where the dense layers' serve all {n:,}." if n > 1 else "."),
        ]
    if w.experts_touched is None:
        how = f"{how[:-1]}; {ALL_EXPERTS:.0%} of them from {full:,} tokens on)"
    return [
        f"Each MoE layer routes each of the {n:,} tokens to {k} of its {e} experts: it reads {number(touched, 4)} of "
        f"them{how}, and the expert matmuls sit at intensity {number(flops / moved)} FLOP/byte."
    ]


def side_of_ridge(intensity: float, ridge: float) -> tuple[str, str]:
    """(where ``intensity`` sits against ``ridge``, the bound there): a tie is memory-bound, the rule of
    ``roofline.Placement.bound`` (the two times are equal at the ridge; memory is named on a tie)."""
    if intensity == ridge:
        return "at", "memory-bound"
    return ("left of", "memory-bound") if intensity < ridge else ("right of", "compute-bound")


def op_model_lines(a: Analysis) -> list[str]:
    """Under the calibrated op model: the step's time against its time at the roofs, the rate the layers' linear
    ops reach in the model's time against their attainable one, and the share of the step the launch floor sets.
    The sentences above it place the ops on the roofline (intensity against the ridge); this one says how far the
    measured kernels fall short of it."""
    if a.op_model is None:
        return []
    linear = layer_linears(a)
    flops = sum(p.op.flops * p.op.count for p in linear)
    model = sum(p.total_time_s for p in linear)
    roof = sum(p.roofline_time_s * p.op.count for p in linear)
    reach = (f"; the layers' linear ops reach {number(flops / model / 1e12)} TFLOP/s in it, {roof / model:.0%} of "
             f"the {number(flops / roof / 1e12)} TFLOP/s their roofs allow" if linear and flops > 0 else "")
    launch = sum(p.share for p in a.placements if p.limit == "launch")
    floor = (f"; ops held at the launch floor ({duration(a.op_model.launch_floor_s)}) take {launch:.0%} of it"
             if launch > 0 else "")
    return [f"Timed by the calibrated op model, the step takes {duration(a.totals.time_s)}, "
            f"{a.totals.time_s / a.roofline_time_s:.2f}× its {duration(a.roofline_time_s)} at the roofs{reach}"
            f"{floor}."]


def whole_batch(a: Analysis, whole: float) -> str:
    """Under EP alone (each GPU runs ⌈B/e⌉ of the B sequences), the words after a GPU's batch that say so and give
    the whole deployment's, ``whole``, so that no batch reads as the other's; elsewhere nothing (every GPU runs
    them all)."""
    shards = a.layout.batch_shards
    return f" a GPU, {whole:,.0f} over its {shards} GPUs" if shards > 1 else ""


def verdict(a: Analysis) -> list[str]:
    """A few sentences under the table. The bound shares are of what set each op's time (``Placement.limit``:
    the roofline's bound, or the op model's limit under ``--calibrated``)."""
    w, t = a.workload, a.totals
    ridge = a.ridge
    lines: list[str] = []
    memory_share = sum(p.share for p in a.placements if p.limit == "memory")
    where = f"{a.gpu.id}'s ridge at {number(ridge)} FLOP/byte ({w.matmul_dtype})"

    if w.phase in ("decode", "prefill"):
        intensity, turn = linear_summary(a)
        moe = w.model.moe
        linear = ("the linear layers" if moe is None else "the dense linear layers (attention projections"
                  + (", shared experts)" if moe.num_shared_experts else ")"))
        side, bound = side_of_ridge(intensity, ridge)
        if w.phase == "decode":
            what = "every weight" if w.model.moe is None else "the weights it uses (all but the untouched experts)"
            lines.append(
                f"Decode reads {what} once per step for only {w.tokens:,} new token{'s' if w.tokens > 1 else ''}"
                f"{whole_batch(a, (a.whole or w).tokens)}: "
                f"{linear} sit at intensity {number(intensity)} FLOP/byte (about 2·batch/bytes-per-weight), {side} "
                f"{where}: {bound}."
            )
            if turn is None:
                lines.append("They would not reach the ridge at any batch: the activations' traffic grows as fast.")
            elif intensity < ridge:
                lines.append(
                    f"Batching shares each weight read among more tokens: they would turn compute-bound at "
                    f"batch ≈ {round(turn):,}{whole_batch(a, round(turn) * a.layout.batch_shards)}."
                )
            lines.append(
                f"Memory-bound ops take {memory_share:.0%} of the step; it reads {_gb(t.weight_bytes)} of weights and "
                f"{_gb(t.kv_cache_bytes)} of KV cache, and attention's intensity does not grow with batch, "
                f"since every sequence reads its own cache."
            )
            lines += moe_lines(a)
        else:
            lines.append(
                f"Prefill pushes {w.tokens:,} tokens through each weight read: {linear} sit at intensity "
                f"{number(intensity)} FLOP/byte, {side} {where}: {bound}. Time to first token: "
                f"{duration(t.time_s)}."
            )
            lines += moe_lines(a)
    elif w.phase == "mixed":
        intensity, _ = linear_summary(a)
        side, bound = side_of_ridge(intensity, ridge)
        decoding = sum(g.count for g in w.seqs if g.new == 1)
        attention = sum(p.share for p in a.placements if p.op.kind == "attention")
        prompt, groups = w.tokens - decoding, plural(len(w.seqs), "group")
        if prompt and decoding:
            what = f"{plural(decoding, 'sequence')} decode and {plural(prompt, 'prompt token')} are computed beside them"
        elif decoding:
            what = f"{plural(decoding, 'sequence')} decode, in {groups} of their own lengths"
        else:
            what = f"{plural(prompt, 'prompt token')} are computed, in {groups}"
        lines.append(
            f"A mixed step: {what}, {w.tokens:,} tokens through each weight read: the linear layers sit at "
            f"intensity {number(intensity)} FLOP/byte, {side} {where}: {bound}."
        )
        lines.append(
            f"Memory-bound ops take {memory_share:.0%} of the step and attention {attention:.0%}; it reads "
            f"{_gb(t.weight_bytes)} of weights and {kv_read_text(a, _gb)}, each group its own."
        )
        lines += moe_lines(a)
    else:
        lines.append(
            f"The attention core of {w.model.num_layers} layers at seq_len {w.tokens_per_seq:,}: "
            f"{memory_share:.0%} of its time is memory-bound against {where}."
        )
    if a.flash is not None:
        # Naive attention's traffic: every op of kind attention (qk, softmax, pv), the score matrix included.
        scores = sum(p.op.bytes * p.op.count for p in a.placements if p.op.kind == "attention")
        flash_bytes = sum(p.op.bytes * p.op.count for p in a.flash.placements if p.op.kind == "attention")
        lines.append(
            f"Naive attention moves {_gb(scores)} through HBM, most of it the score matrix; FlashAttention keeps the "
            f"scores on chip and moves {_gb(flash_bytes)}: the step would take "
            f"{duration(a.flash.totals.time_s)} instead of {duration(t.time_s)}."
        )
    lines += op_model_lines(a)
    fit = "fits" if t.fits else "does NOT fit"
    length = "this mix's mean KV per sequence" if w.phase == "mixed" else "this length"
    lines.append(
        f"Weights and KV cache take {gib(t.memory_bytes)} of {gib(t.capacity_bytes, 0)}: {fit}; "
        f"the largest batch that fits at {length} is {t.max_batch:,}"
        + (f" over the {a.layout.batch_shards} GPUs, {t.max_batch // a.layout.batch_shards:,} a GPU"
           if a.layout.batch_shards > 1 else "") + " (activations not counted)."
    )
    return lines
