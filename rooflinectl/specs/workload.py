"""Workloads: a step (:mod:`specs.step`) on a model (:mod:`specs.model`), with its data types, attention and
fusions, and which sizes each phase has (batch, context, seq_len): what the engine takes.

A scenario (:mod:`specs.scenario`) states one in a file or on the command line and resolves to one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from pydantic import Field, field_validator, model_validator
from typing_extensions import Self

from ..errors import UserError
from .choices import AttentionImpl, Fusion
from .dtypes import (
    DEFAULT_GROUP_SIZE,
    GROUPED_WEIGHT_DTYPES,
    NARROW_ACT_DTYPES,
    WEIGHT_ACTIVATION_PAIRS,
    ActDType,
    DType,
    WeightDType,
    group_size_refusal,
)
from .layers import GATED_MLPS
from .load import Strict, invalid, validate
from .model import Model
from .sizes import Experts, GroupSize
from .step import MAX_GROUPS, Phase, Seqs, preset_phase, seqs_text

# The attention kernel and the fusions: specs.choices states them (AttentionImpl, Fusion, FUSIONS).

# --- the sizes of a step: THE one statement of which phase has which ------------------------------------------
#   batch     sequences in the step, every phase
#   context   KV positions one decode step attends to (decode only; a decode step processes one token)
#   seq_len   prompt tokens per sequence (prefill and attention, which attend to their own prompt)
SizeField = Literal["batch", "context", "seq_len"]
SIZE_FIELDS: tuple[SizeField, ...] = get_args(SizeField)
LengthField = Literal["context", "seq_len"]


def length_field(phase: Phase) -> LengthField:
    """The name of a phase's length: ``context`` for decode, ``seq_len`` for prefill and attention."""
    return "context" if phase == "decode" else "seq_len"


def size_problem(phase: str, field: str) -> str | None:
    """Why ``phase`` has no size ``field`` (a sentence), or None when it has it."""
    if field not in SIZE_FIELDS:
        return f"'{field}' is not a size: choose one of {', '.join(SIZE_FIELDS)}"
    if phase == "mixed":
        return f"a mixed step has no single {field}: each group of sequences has its own (--seqs)"
    if field == "context" and phase != "decode":
        return f"a {phase} step attends to its own prompt: its length is seq_len, not context"
    if field == "seq_len" and phase == "decode":
        return "decode processes one token per sequence: its length is context (the KV positions it attends to), " \
               "not seq_len"
    return None


def check_fusions(fused: Sequence[Fusion]) -> None:
    """A validation error naming the rule where the fusions do not fit together (a scenario's or a step's)."""
    if "act" in fused and "gate_up" not in fused:
        raise invalid("fusion 'act' goes in the epilogue of the fused gate_up matmul: add 'gate_up'")
    if len(set(fused)) != len(fused):
        raise invalid("a fusion is listed twice")


class Workload(Strict):
    """A scenario with its model resolved: what the engine takes. Its step is ``seqs``, groups of sequences
    (:class:`Seqs`); decode, prefill and attention are one group each.

    A uniform step (one group) may also be built from ``batch``, ``tokens_per_seq`` (tokens each sequence
    computes) and ``kv_len`` (the positions its last token attends to), the sizes the presets are stated in; each
    given replaces that size of the one group (``{**dict(w), "batch": 8}`` is ``w`` at batch 8).
    """

    phase: Phase
    model: Model
    seqs: tuple[Seqs, ...] = Field(min_length=1, max_length=MAX_GROUPS)
    dtype: DType  # activations between kernels, and the unquantized weights (embedding, LM head, norms, router)
    kv_dtype: DType
    attention: AttentionImpl
    causal: bool
    fused: tuple[Fusion, ...] = ()
    experts_touched: Experts | None = None
    weight_dtype: WeightDType | None = None  # the linear layers' weights; None: dtype
    act_dtype: ActDType | None = None  # the linear layers' inputs as the tensor cores take them; None: dtype
    group_size: GroupSize = DEFAULT_GROUP_SIZE  # int4's group along k

    @model_validator(mode="before")
    @classmethod
    def _uniform_sizes(cls, data: Any) -> Any:
        """``batch``, ``tokens_per_seq`` and ``kv_len`` to the one group they describe, each size not given
        taken from the one group already there."""
        sizes = ("batch", "tokens_per_seq", "kv_len")
        if not isinstance(data, dict) or not any(k in data for k in sizes):
            return data
        data = dict(data)
        given = {k: data.pop(k) for k in sizes if k in data}
        groups = data.pop("seqs", None)
        if groups is not None:
            if len(groups) != 1:
                raise invalid("batch, tokens_per_seq and kv_len size a step of one group; this one has "
                              f"{len(groups)} (give its seqs)")
            one = groups[0] if isinstance(groups[0], Seqs) else Seqs.model_validate(groups[0])
            given = {"batch": one.count, "tokens_per_seq": one.new, "kv_len": one.positions, **given}
        missing = [k for k in sizes if k not in given]
        if missing:
            raise invalid(f"a step of one group needs {', '.join(missing)}")
        batch, new, positions = (given[k] for k in sizes)
        cached = positions - new if isinstance(positions, int) and isinstance(new, int) else positions
        data["seqs"] = ({"count": batch, "new": new, "cached": cached},)
        return data

    @model_validator(mode="after")
    def _preset_groups(self) -> Self:
        """Decode is one group of single new tokens, prefill and attention one group of whole prompts, and a
        mixed step any groups: a phase that does not match its groups would be counted by the wrong rules."""
        one = self.seqs[0] if len(self.seqs) == 1 else None
        if self.phase == "decode" and (one is None or one.new != 1):
            raise invalid(f"a decode step is one group of single new tokens, not {seqs_text(self.seqs)}")
        if self.phase in ("prefill", "attention") and (one is None or one.cached != 0):
            raise invalid(f"a {self.phase} step is one group of whole prompts (nothing cached), not "
                          f"{seqs_text(self.seqs)}")
        return self

    @property
    def weights(self) -> WeightDType:
        """The linear layers' weight format: ``weight_dtype``, or ``dtype``."""
        return self.weight_dtype or self.dtype

    @property
    def matmul_dtype(self) -> ActDType:
        """The data type the linear layers' tensor cores multiply in, whose peak is their compute roof:
        ``act_dtype``, or ``dtype``. A weight narrower than it is widened on chip (w4a16, w8a16)."""
        return self.act_dtype or self.dtype

    @property
    def quantized(self) -> bool:
        """Whether the linear layers' weights or inputs differ from ``dtype`` (the unquantized case: one type)."""
        return self.weights != self.dtype or self.matmul_dtype != self.dtype

    @model_validator(mode="after")
    def _weights_and_activations(self) -> Self:
        """The weight format and activation type are a pair some kernel runs (WEIGHT_ACTIVATION_PAIRS), and a
        group size is int4's alone. A UserError: one line."""
        fmt, act = self.weights, self.matmul_dtype
        if act != self.dtype and act not in NARROW_ACT_DTYPES:
            raise UserError(f"activations {act} beside dtype {self.dtype}: the linear layers' activations are the "
                            f"workload's dtype or a narrower type quantized on chip ({', '.join(NARROW_ACT_DTYPES)})")
        allowed = WEIGHT_ACTIVATION_PAIRS[fmt]
        if act not in allowed:
            raise UserError(f"weights in {fmt} with activations in {act} are not modelled: with {fmt} weights the "
                            f"activations are {' or '.join(allowed)}")
        # A step keeps the default group size whatever its format: only another one is a refusal.
        if refusal := group_size_refusal(None if self.group_size == DEFAULT_GROUP_SIZE else self.group_size, fmt):
            raise UserError(refusal)
        return self

    @field_validator("fused")
    @classmethod
    def _fusions_fit(cls, fused: tuple[Fusion, ...]) -> tuple[Fusion, ...]:
        """The scenario's rule, for a step built directly (``validate(Workload, …)``)."""
        check_fusions(fused)
        return fused

    @model_validator(mode="after")
    def _fusions_fit_the_model(self) -> Self:
        """The gate_up and act fusions need a gate: a plain MLP (``mlp: gelu_tanh``) has up and down only."""
        if self.model.mlp not in GATED_MLPS and "gate_up" in self.fused:
            raise UserError(f"fusion 'gate_up': model {self.model.id}'s MLP ({self.model.mlp}) has no gate "
                            f"projection to fuse with up")
        return self

    @model_validator(mode="after")
    def _sparse_attention_is_flash(self) -> Self:
        """Sparse attention (DeepSeek-V3.2's DSA) runs as one kernel over each query's selected positions; naive
        attention's score matrix through HBM has no sparse form. A UserError, one line."""
        if self.attention == "naive" and self.model.sparse_attention is not None:
            raise UserError(f"attention naive: model {self.model.id}'s sparse attention runs as one kernel over "
                            f"each query's selected positions (no score matrix through HBM); use flash")
        return self

    @model_validator(mode="after")
    def _experts_touched_possible(self) -> Self:
        """A stated number of experts touched is one the step can touch: a model with experts, at least the k
        that one token uses, at most the layer's E and at most the k of each token of the step (N·k). A
        UserError, one line with no field path in front."""
        n = self.experts_touched
        if n is None:
            return self
        moe = self.model.moe
        if moe is None:
            raise UserError(f"experts_touched {n}: model {self.model.id} has no experts (it is dense)")
        k, e = moe.experts_per_token, moe.num_experts
        most = min(e, self.tokens * k)
        if not k <= n <= most:
            step = f"a step of {self.tokens:,} token{'s' if self.tokens > 1 else ''}"
            reach = f"exactly {k}" if most == k else f"{k} to {most:,} of them per layer"
            raise UserError(f"experts_touched {n}: {self.model.id} routes each token to {k} of its {e} experts, and "
                            f"{step} touches {reach}")
        return self

    @model_validator(mode="after")
    def _within_the_models_positions(self) -> Self:
        """A step may not use more positions than the model has (``Model.max_length``), refused with one line.

        The positions a step uses are ``kv_len``, in every phase. Decode: the context counts the new token
        itself, since the step writes the new token's K and V into the cache and then attends to all ``context``
        positions, itself included (transformer.scores_computed gives Lk scores for a decode step); the new token
        sits at position context − 1, so context = max_position_embeddings is the last valid step and one more
        is refused. Prefill and attention: the prompt's seq_len tokens sit at positions 0 … seq_len − 1.
        A UserError (not a ValueError) so that the message is the whole line, with no field path in front.
        """
        limit = self.model.max_length()
        longest = max(g.positions for g in self.seqs)
        if limit is not None and longest > limit[0]:
            most, field = limit
            if self.phase == "mixed":
                what = f"a group of {longest:,} positions (cached + new)"
            else:
                name = length_field(self.phase)
                what = (f"{name} {longest:,} (the KV positions the new token attends to, itself included)"
                        if self.phase == "decode" else f"{name} {longest:,}")
            raise UserError(f"{what} exceeds model {self.model.id}'s {field} of {most:,}")
        return self

    @property
    def batch(self) -> int:
        """Sequences in the step, all groups together."""
        return sum(g.count for g in self.seqs)

    @property
    def tokens(self) -> int:
        """Tokens processed by the step, all sequences together."""
        return sum(g.tokens for g in self.seqs)

    @property
    def uniform(self) -> Seqs:
        """The one group of a preset step; a mixed step has several, and asking for one is a bug in the caller
        (a ValueError: code that sizes a step by one batch and one length must go group by group)."""
        if len(self.seqs) != 1:
            raise ValueError(f"a mixed step ({seqs_text(self.seqs)}) has no single batch and length")
        return self.seqs[0]

    @property
    def tokens_per_seq(self) -> int:
        """Tokens each sequence computes in a preset step: 1 for decode, the prompt for prefill."""
        return self.uniform.new

    @property
    def kv_len(self) -> int:
        """KV positions a preset step's last token attends to: decode's context, prefill's prompt."""
        return self.uniform.positions

    def with_seqs(self, seqs: tuple[Seqs, ...]) -> Workload:
        """This step's model and options over other groups of sequences (its phase the one they make). A stated
        ``experts_touched`` is the whole step's and is left out."""
        phase = "attention" if self.phase == "attention" else preset_phase(seqs)
        return validate(Workload, {**dict(self), "phase": phase, "seqs": seqs, "experts_touched": None}, "seqs")

    @property
    def length(self) -> int:
        """The phase's length (:func:`length_field`): decode's context, prefill's and attention's seq_len."""
        return self.kv_len if self.phase == "decode" else self.tokens_per_seq

    def size(self, field: SizeField) -> int:
        """``batch``, ``context`` or ``seq_len`` of this step; a size the phase does not have is a UserError."""
        problem = size_problem(self.phase, field)
        if problem:
            raise UserError(problem)
        return self.batch if field == "batch" else self.length

    def with_size(self, field: SizeField, value: int) -> Workload:
        """This step with one size changed, validated: ``batch``; ``context`` (decode: the KV length); ``seq_len``
        (prefill, attention: the prompt, which is also what they attend to). A size the phase does not have, or
        one that is not a positive integer, is a UserError."""
        problem = size_problem(self.phase, field)
        if problem:
            raise UserError(problem)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UserError(f"{field} must be a positive integer, got {value}")
        if field == "batch":
            update: dict[str, int] = {"batch": value}
        elif field == "context":
            update = {"kv_len": value}
        else:
            update = {"tokens_per_seq": value, "kv_len": value}
        return validate(Workload, {**dict(self), **update}, field)

    def types_label(self) -> str:
        """The step's data types in words: ``bf16``, or ``int4 g128 weights, bf16 activations`` where the linear
        layers' weights or inputs differ from ``dtype``."""
        if not self.quantized:
            return self.dtype
        group = f" g{self.group_size}" if self.weights in GROUPED_WEIGHT_DTYPES else ""
        return f"{self.weights}{group} weights, {self.matmul_dtype} activations"

    def label(self) -> str:
        touched = f", {self.experts_touched} experts touched" if self.experts_touched is not None else ""
        if self.phase == "mixed":
            sizes = f"{self.batch:,} sequences ({seqs_text(self.seqs)})"
        else:
            sizes = f"batch {self.batch}, {length_field(self.phase)} {self.length}"
        return (f"{self.model.id} {self.phase}, {sizes}, {self.types_label()}, {self.attention} attention"
                f"{touched}")
