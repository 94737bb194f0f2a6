"""Workloads: a model architecture (:mod:`specs.model`) plus a scenario (phase, sizes, data types, attention,
fusion).

Scenario files (``workloads/decode.yaml`` …) name a model by id or path, or inline it.
Command-line options override any scenario field through :func:`resolve_workload`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from typing_extensions import Self

from ..errors import UserError, closest, format_validation_error
from ..files import user_path
from .dtypes import (
    DEFAULT_GROUP_SIZE,
    GROUPED_WEIGHT_DTYPES,
    NARROW_ACT_DTYPES,
    WEIGHT_ACTIVATION_PAIRS,
    ActDType,
    DType,
    GroupSize,
    WeightDType,
)
from .load import Strict, Text, invalid, leave_out_unused, looks_like_path, read_yaml, search_dirs, validate
from .model import GATED_MLPS, WORKLOADS_PATH_ENV, Batch, Experts, Model, Positions, load_model, model_catalog

# decode, prefill and attention are the presets of a step; a mixed step is any other set of sequence groups (a
# continuous-batching step: decodes beside a prefill chunk). A scenario file gives a preset by its phase and
# sizes, a mixed step by its groups (``seqs``).
Phase = Literal["decode", "prefill", "attention", "mixed"]
PHASES: tuple[str, ...] = get_args(Phase)
PRESETS: tuple[Phase, ...] = ("decode", "prefill", "attention")  # the bundled scenarios' phases
AttentionImpl = Literal["naive", "flash"]
# Fusions the engine knows. Each removes an HBM round trip (see engine/count/transformer.py for the exact byte changes):
#   qkv          one matmul for Q, K and V: x is read once instead of three times
#   gate_up      one matmul for gate and up: x is read once instead of twice
#   norm_linear  RMSNorm in the prologue of the projections that follow it: the normalized x is never written
#   act          SiLU(gate)·up in the epilogue of gate_up: gate and up never reach HBM (needs gate_up)
#   residual     the residual add in the epilogue of o_proj and down_proj
Fusion = Literal["qkv", "gate_up", "norm_linear", "act", "residual"]
FUSIONS: tuple[str, ...] = get_args(Fusion)

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

# Tokens already in a sequence's KV cache before the step: 0 (a prompt's first chunk) up to a position limit.
Cached = Annotated[int, Field(ge=0, le=2**30)]
# Groups of sequences in one step: a continuous-batching step has a handful (one per distinct length at most).
MAX_GROUPS = 4096


class Seqs(Strict):
    """``count`` sequences that each compute ``new`` tokens in this step after ``cached`` tokens already in their
    KV cache: the unit a step is made of.

    A decode token is ``1`` new after ``context − 1`` cached (it writes its own K and V, then attends to all
    ``context`` positions); a prompt prefilled at once is ``seq_len`` new after 0; a chunk of T prompt tokens
    after P already prefilled is T new after P, and its query i attends causally to P + i positions.
    """

    count: Batch
    new: Positions
    cached: Cached = 0

    def __init__(self, count: int, new: int, cached: int = 0) -> None:
        """``Seqs(16, 1, 4095)`` or by keyword; out-of-range sizes are a UserError naming the field."""
        try:
            BaseModel.__init__(self, count=count, new=new, cached=cached)
        except ValidationError as err:
            raise UserError(format_validation_error("Seqs", err)) from None

    @property
    def positions(self) -> int:
        """KV positions each sequence holds at the end of the step (and its last token attends to)."""
        return self.cached + self.new

    @property
    def tokens(self) -> int:
        """Tokens the group computes in the step, all its sequences together."""
        return self.count * self.new

    def text(self) -> str:
        """The command-line form, ``COUNTxNEW@CACHED`` (``@0`` left out)."""
        return f"{self.count}x{self.new}" + (f"@{self.cached}" if self.cached else "")

    @classmethod
    def parse(cls, text: str) -> Seqs:
        """``COUNTxNEW[@CACHED]`` (``16x1@4095``: 16 decode tokens after 4,095 cached; ``1x512@1024``: a 512-token
        prefill chunk after 1,024): a UserError naming the form for anything else."""
        form = "COUNTxNEW[@CACHED], e.g. 16x1@4095 (16 sequences decoding after 4,095 cached tokens)"
        head, at, cached = text.strip().partition("@")
        count, x, new = head.partition("x")
        parts = (count, new, cached if at else "0")
        if not x or not all(p.strip().isdigit() for p in parts):
            raise UserError(f"--seqs '{text}': expected {form}")
        return validate(Seqs, {"count": int(count), "new": int(new), "cached": int(parts[2])}, f"--seqs '{text}'")


def preset_phase(seqs: tuple[Seqs, ...]) -> Phase:
    """The phase a step of these groups is: one group of single tokens is a decode step, one group of whole
    prompts (nothing cached) a prefill step, anything else a mixed step."""
    if len(seqs) == 1 and seqs[0].new == 1:
        return "decode"
    if len(seqs) == 1 and seqs[0].cached == 0:
        return "prefill"
    return "mixed"


def seqs_text(seqs: tuple[Seqs, ...]) -> str:
    """The groups in words, ``16×1 after 4,095 + 1×512 after 1,024`` (``after 0`` left out)."""
    return " + ".join(f"{g.count:,}×{g.new:,}" + (f" after {g.cached:,}" if g.cached else "") for g in seqs)


class Scenario(Strict):
    """One inference step to analyze. ``model`` is an id, a path, or an inline model."""

    phase: Phase
    model: str | Model
    description: Text | None = None
    batch: Batch = 1
    seq_len: Positions | None = None  # prompt tokens per sequence (prefill, attention)
    context: Positions | None = None  # KV positions one decode step attends to
    seqs: list[Seqs] | None = None  # a mixed step's groups (phase mixed only)
    dtype: DType = "bf16"  # weights and activations, unless weight_dtype or act_dtype says otherwise
    kv_dtype: DType | None = None  # defaults to dtype
    # The linear layers' weight format, and their activations as the tensor cores take them, where they differ
    # from dtype (None: dtype). The embedding, LM head, norms, router and attention stay in dtype (engine/count/quant.py).
    weight_dtype: WeightDType | None = None
    act_dtype: ActDType | None = None
    group_size: GroupSize | None = None  # int4's group along k (None: 128)
    attention: AttentionImpl = "flash"
    causal: bool = True
    fused: list[Fusion] = Field(default_factory=list)
    # Distinct routed experts each MoE layer reads in the step, where routing is not uniform (skew); None: the
    # uniform expectation (engine/count/moe.py's experts_touched). Checked against the model in Workload.
    experts_touched: Experts | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return leave_out_unused(data, {"experts_touched": None, "weight_dtype": None, "act_dtype": None,
                                        "group_size": None, "seqs": None})

    @field_validator("model", mode="wrap")
    @classmethod
    def _model_form(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> str | Model:
        """A mapping is an inline model and is validated as one, so that an incomplete one names its own missing
        field ('model.hidden_size'), not the string form it is not ('model.str … and 9 more errors'); a string
        is a name or a path, of 1 to 4,096 characters (PATH_MAX); nothing else is either. What passes goes on
        through the field's own validation (``handler``), which keeps its serializer."""
        if isinstance(value, dict):
            value = Model.model_validate(value)  # its errors keep their place under 'model'
        elif isinstance(value, str):
            if not 1 <= len(value) <= 4096:
                raise invalid(f"a model's id or path has 1 to 4,096 characters, not {len(value):,}")
        elif not isinstance(value, Model):
            raise invalid(f"a model id, a model file's path, or an inline model (a mapping of its fields), "
                             f"not {type(value).__name__}")
        result: str | Model = handler(value)
        return result

    @model_validator(mode="after")
    def _phase_sizes(self) -> Self:
        if self.phase == "mixed":
            if not self.seqs:
                raise invalid("a mixed scenario needs 'seqs' (its groups: count, new tokens, cached tokens)")
            if self.seq_len is not None or self.context is not None or self.batch != 1:
                raise invalid("a mixed scenario's sizes are its groups ('seqs'), not batch, seq_len or context")
            if len(self.seqs) > MAX_GROUPS:
                raise invalid(f"{len(self.seqs):,} groups of sequences: at most {MAX_GROUPS:,}")
            return self
        if self.seqs is not None:
            raise invalid(f"'seqs' gives a mixed step's groups; a {self.phase} scenario's sizes are batch and "
                          f"{length_field(self.phase)}")
        if self.phase == "decode":
            if self.context is None:
                raise invalid("a decode scenario needs 'context' (the KV length each new token attends to)")
            if self.seq_len not in (None, 1):
                raise invalid(size_problem("decode", "seq_len"))
        else:
            if self.seq_len is None:
                raise invalid(f"a {self.phase} scenario needs 'seq_len' (prompt tokens per sequence)")
            if self.context not in (None, self.seq_len):
                raise invalid(size_problem(self.phase, "context"))
        return self

    @field_validator("fused")
    @classmethod
    def _fusions_fit_together(cls, fused: list[Fusion]) -> list[Fusion]:
        """A rule of the fusions alone, checked on the field, so that its message names 'fused' (a model-wide
        check named '(top level)' and said 'Value error,')."""
        check_fusions(fused)
        return fused


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
        if fmt not in GROUPED_WEIGHT_DTYPES and self.group_size != DEFAULT_GROUP_SIZE:
            raise UserError(f"group size {self.group_size}: only int4 weights take a group size ({fmt} has its "
                            f"own layout)")
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


# --- scenarios -----------------------------------------------------------------------------------------------


def _scenario_catalog() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for folder in reversed(search_dirs("workloads", WORKLOADS_PATH_ENV)):
        for path in sorted(folder.glob("*.y*ml")):
            names[path.stem.lower()] = path
    return names


def list_scenarios() -> dict[str, Scenario]:
    return {name: load_scenario(str(path)) for name, path in sorted(_scenario_catalog().items())}


def load_scenario(name: str) -> Scenario:
    """A scenario by name (``decode``, ``prefill``, ``attention`` or a user's) or by YAML path."""
    if looks_like_path(name):
        path = user_path(name)
    else:
        catalog = _scenario_catalog()
        if name.lower() not in catalog:
            raise UserError(
                f"unknown workload '{name}'{closest(name, catalog)}; give a phase "
                f"({', '.join(PRESETS)}) or a workload YAML file"
            )
        path = catalog[name.lower()]
    scenario = validate(Scenario, read_yaml(path), str(path))
    model = scenario.model
    if isinstance(model, str) and looks_like_path(model) and not user_path(model).is_absolute():
        # A relative model path is the workload file's own: the file works from any folder it is run from.
        return scenario.model_copy(update={"model": str(path.parent / Path(model))})
    return scenario


def resolve_workload(name: str, **overrides: Any) -> Workload:
    """Load scenario ``name``, apply the overrides that are not None, and resolve its model.

    Overrides are Scenario fields (``model``, ``batch``, ``seq_len``, ``context``, ``dtype``, ``kv_dtype``,
    ``weight_dtype``, ``act_dtype``, ``group_size``, ``attention``, ``causal``, ``fused``, ``experts_touched``;
    ``phase`` ``mixed`` with ``seqs``, as :func:`step_scenario` gives them). Sizes are checked here, so a
    negative ``--batch`` is a UserError.
    """
    scenario = load_scenario(name)
    given = {k: v for k, v in overrides.items() if v is not None}
    if given:
        data = scenario.model_dump(exclude_none=True)
        data.update(given)
        if given.get("phase") == "mixed":  # a step of groups (step_scenario): the groups are its only sizes
            for key in ("batch", "seq_len", "context"):
                data.pop(key, None)
        elif scenario.phase == "mixed":
            sized = [f"--{k.replace('_', '-')}" for k in ("batch", "seq_len", "context") if k in given]
            if sized:
                raise UserError(f"{', '.join(sized)}: a mixed step is sized by its groups (--seqs)")
        # The rule is size_problem's; the words name the command-line options that were given.
        if "context" in given and size_problem(scenario.phase, "context"):
            raise UserError(f"--context applies to decode; {scenario.phase} attends to its --seq-len")
        if "seq_len" in given and size_problem(scenario.phase, "seq_len"):
            raise UserError("decode processes one token per sequence; give its KV length with --context")
        if "seq_len" in given:
            data.pop("context", None)
        if "dtype" in given:
            # --dtype sets weights and activations both: it replaces a scenario file's weight_dtype, act_dtype and
            # group_size, and an explicit --weight-dtype, --act-dtype or --group-size given with it wins.
            # The scenario's group_size goes with its weight_dtype.
            for key in ("weight_dtype", "act_dtype", "group_size"):
                if key not in given:
                    data.pop(key, None)
        scenario = validate(Scenario, data, "options")
    return workload_from_scenario(scenario)


def resolve_step(seqs: tuple[Seqs, ...], **overrides: Any) -> Workload:
    """A step of these groups (:func:`step_scenario`) with the options of :func:`resolve_workload`."""
    name, sizes = step_scenario(seqs)
    return resolve_workload(name, **sizes, **overrides)


def workload_from_scenario(scenario: Scenario) -> Workload:
    model = scenario.model if isinstance(scenario.model, Model) else load_model(scenario.model)
    # Precedence for the linear layers' weights: the scenario's (or command line's) weight_dtype, then the
    # model's own (a quantized checkpoint's config.json), then dtype. The model's group size goes with its
    # format: it applies when the model's format does and no group_size is given.
    fmt = scenario.weight_dtype or model.weight_dtype or scenario.dtype
    if scenario.group_size is not None and fmt not in GROUPED_WEIGHT_DTYPES:
        raise UserError(f"group size {scenario.group_size}: only int4 weights take a group size "
                        f"(--weight-dtype int4 or int4_zp)")
    group = scenario.group_size or (model.group_size if scenario.weight_dtype is None else None)
    return Workload(
        phase=scenario.phase,
        model=model,
        seqs=scenario_seqs(scenario),
        # Precedence: weight_dtype, then dtype, for the linear layers' weights; act_dtype, then dtype, for their
        # inputs; a field equal to dtype is dtype's (stored as None, so that it reads as the unquantized step).
        dtype=scenario.dtype,
        kv_dtype=scenario.kv_dtype or scenario.dtype,
        weight_dtype=None if fmt == scenario.dtype else fmt,
        act_dtype=None if scenario.act_dtype in (None, scenario.dtype) else scenario.act_dtype,
        group_size=group or DEFAULT_GROUP_SIZE,
        attention=scenario.attention,
        causal=scenario.causal,
        fused=tuple(scenario.fused),
        experts_touched=scenario.experts_touched,
    )


def scenario_seqs(scenario: Scenario) -> tuple[Seqs, ...]:
    """A scenario's groups: a mixed one's ``seqs``; a preset's one group of ``batch`` sequences, each 1 new
    token after ``context − 1`` cached (decode) or ``seq_len`` new after none (prefill, attention)."""
    if scenario.phase == "mixed":
        assert scenario.seqs is not None  # Scenario's validator
        return tuple(scenario.seqs)
    # Scenario's validator guarantees the phase's length: context for decode, seq_len otherwise.
    if scenario.phase == "decode":
        assert scenario.context is not None
        return (Seqs(count=scenario.batch, new=1, cached=scenario.context - 1),)
    assert scenario.seq_len is not None
    return (Seqs(count=scenario.batch, new=scenario.seq_len),)


def step_scenario(seqs: tuple[Seqs, ...]) -> tuple[str, dict[str, Any]]:
    """The scenario that states a step of these groups, and the sizes to give it (:func:`resolve_workload`'s
    name and overrides): a preset where the groups make one (``16x1@4095`` is the decode scenario at batch 16,
    context 4,096), else a mixed step on the decode scenario's model and options."""
    phase = preset_phase(seqs)
    (one, *_) = seqs
    if phase == "decode":
        return "decode", {"batch": one.count, "context": one.positions}
    if phase == "prefill":
        return "prefill", {"batch": one.count, "seq_len": one.new}
    return "decode", {"phase": "mixed", "seqs": list(seqs)}


def scenario_from_workload(w: Workload) -> Scenario:
    """The scenario that reproduces ``w`` (for saving a view as YAML). A model that is not in the catalog (from
    a config.json or a YAML path) is written inline, so that the saved file stands on its own."""
    decode, mixed = w.phase == "decode", w.phase == "mixed"
    catalog = model_catalog()
    bundled = w.model.id.lower() in catalog and load_model(w.model.id) == w.model
    return Scenario(
        phase=w.phase,
        model=w.model.id if bundled else w.model,
        batch=1 if mixed else w.batch,
        seq_len=None if decode or mixed else w.tokens_per_seq,
        context=w.kv_len if decode else None,
        seqs=list(w.seqs) if mixed else None,
        dtype=w.dtype,
        kv_dtype=w.kv_dtype,
        # A model that carries its own weight format is overridden explicitly where the step's differs (None
        # would read back as the model's format).
        weight_dtype=w.weights if w.model.weight_dtype not in (None, w.weights) else w.weight_dtype,
        act_dtype=w.act_dtype,
        group_size=w.group_size if w.weights in GROUPED_WEIGHT_DTYPES else None,
        attention=w.attention,
        causal=w.causal,
        fused=list(w.fused),
        experts_touched=w.experts_touched,
    )
