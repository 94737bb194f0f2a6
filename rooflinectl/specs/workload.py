"""Workloads: a model architecture (:mod:`specs.model`) plus a scenario (phase, sizes, data types, attention,
fusion).

Scenario files (``workloads/decode.yaml`` …) name a model by id or path, or inline it.
Command-line options override any scenario field through :func:`resolve_workload`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from ..errors import UserError, closest
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

Phase = Literal["decode", "prefill", "attention"]
PHASES: tuple[str, ...] = ("decode", "prefill", "attention")
AttentionImpl = Literal["naive", "flash"]
# Fusions the engine knows. Each removes an HBM round trip (see engine/transformer.py for the exact byte changes):
#   qkv          one matmul for Q, K and V: x is read once instead of three times
#   gate_up      one matmul for gate and up: x is read once instead of twice
#   norm_linear  RMSNorm in the prologue of the projections that follow it: the normalized x is never written
#   act          SiLU(gate)·up in the epilogue of gate_up: gate and up never reach HBM (needs gate_up)
#   residual     the residual add in the epilogue of o_proj and down_proj
Fusion = Literal["qkv", "gate_up", "norm_linear", "act", "residual"]
FUSIONS: tuple[str, ...] = ("qkv", "gate_up", "norm_linear", "act", "residual")

# --- the sizes of a step: THE one statement of which phase has which ------------------------------------------
#   batch     sequences in the step, every phase
#   context   KV positions one decode step attends to (decode only; a decode step processes one token)
#   seq_len   prompt tokens per sequence (prefill and attention, which attend to their own prompt)
SizeField = Literal["batch", "context", "seq_len"]
SIZE_FIELDS: tuple[SizeField, ...] = ("batch", "context", "seq_len")
LengthField = Literal["context", "seq_len"]


def length_field(phase: Phase) -> LengthField:
    """The name of a phase's length: ``context`` for decode, ``seq_len`` for prefill and attention."""
    return "context" if phase == "decode" else "seq_len"


def size_problem(phase: str, field: str) -> str | None:
    """Why ``phase`` has no size ``field`` (a sentence), or None when it has it."""
    if field not in SIZE_FIELDS:
        return f"'{field}' is not a size: choose one of {', '.join(SIZE_FIELDS)}"
    if field == "context" and phase != "decode":
        return f"a {phase} step attends to its own prompt: its length is seq_len, not context"
    if field == "seq_len" and phase == "decode":
        return "decode processes one token per sequence: its length is context (the KV positions it attends to), " \
               "not seq_len"
    return None


class Scenario(Strict):
    """One inference step to analyze. ``model`` is an id, a path, or an inline model."""

    phase: Phase
    model: str | Model
    description: Text | None = None
    batch: Batch = 1
    seq_len: Positions | None = None  # prompt tokens per sequence (prefill, attention)
    context: Positions | None = None  # KV positions one decode step attends to
    dtype: DType = "bf16"  # weights and activations, unless weight_dtype or act_dtype says otherwise
    kv_dtype: DType | None = None  # defaults to dtype
    # The linear layers' weight format, and their activations as the tensor cores take them, where they differ
    # from dtype (None: dtype). The embedding, LM head, norms, router and attention stay in dtype (engine/quant.py).
    weight_dtype: WeightDType | None = None
    act_dtype: ActDType | None = None
    group_size: GroupSize | None = None  # int4's group along k (None: 128)
    attention: AttentionImpl = "flash"
    causal: bool = True
    fused: list[Fusion] = Field(default_factory=list)
    # Distinct routed experts each MoE layer reads in the step, where routing is not uniform (skew); None: the
    # uniform expectation (engine/moe.py's experts_touched). Checked against the model in Workload.
    experts_touched: Experts | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return leave_out_unused(data, {"experts_touched": None, "weight_dtype": None, "act_dtype": None,
                                        "group_size": None})

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
        if "act" in fused and "gate_up" not in fused:
            raise invalid("fusion 'act' goes in the epilogue of the fused gate_up matmul: add 'gate_up'")
        if len(set(fused)) != len(fused):
            raise invalid("a fusion is listed twice")
        return fused


class Workload(Strict):
    """A scenario with its model resolved: what the engine takes."""

    phase: Phase
    model: Model
    batch: Batch
    tokens_per_seq: Positions  # tokens each sequence processes in this step: 1 for decode
    kv_len: Positions  # KV positions attended (decode: context; prefill: the prompt)
    dtype: DType  # activations between kernels, and the unquantized weights (embedding, LM head, norms, router)
    kv_dtype: DType
    attention: AttentionImpl
    causal: bool
    fused: tuple[Fusion, ...] = ()
    experts_touched: Experts | None = None
    weight_dtype: WeightDType | None = None  # the linear layers' weights; None: dtype
    act_dtype: ActDType | None = None  # the linear layers' inputs as the tensor cores take them; None: dtype
    group_size: GroupSize = DEFAULT_GROUP_SIZE  # int4's group along k

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return leave_out_unused(data, {"weight_dtype": None, "act_dtype": None})

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
        if limit is not None and self.kv_len > limit[0]:
            most, field = limit
            name = length_field(self.phase)
            what = (f"{name} {self.kv_len:,} (the KV positions the new token attends to, itself included)"
                    if self.phase == "decode" else f"{name} {self.kv_len:,}")
            raise UserError(f"{what} exceeds model {self.model.id}'s {field} of {most:,}")
        return self

    @property
    def tokens(self) -> int:
        """Tokens processed by the step, all sequences together."""
        return self.batch * self.tokens_per_seq

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

    def label(self) -> str:
        size = f"{length_field(self.phase)} {self.length}"
        touched = f", {self.experts_touched} experts touched" if self.experts_touched is not None else ""
        types: str = self.dtype
        if self.quantized:
            group = f" g{self.group_size}" if self.weights in GROUPED_WEIGHT_DTYPES else ""
            types = f"{self.weights}{group} weights, {self.matmul_dtype} activations"
        return (f"{self.model.id} {self.phase}, batch {self.batch}, {size}, {types}, {self.attention} attention"
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
                f"({', '.join(PHASES)}) or a workload YAML file"
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
    ``weight_dtype``, ``act_dtype``, ``group_size``, ``attention``, ``causal``, ``fused``, ``experts_touched``). Sizes are checked here, so a negative ``--batch``
    is a UserError.
    """
    scenario = load_scenario(name)
    given = {k: v for k, v in overrides.items() if v is not None}
    if given:
        data = scenario.model_dump(exclude_none=True)
        data.update(given)
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
    decode = scenario.phase == "decode"
    # Scenario's validator guarantees the phase's length: context for decode, seq_len otherwise.
    length = scenario.context if decode else scenario.seq_len
    assert length is not None
    return Workload(
        phase=scenario.phase,
        model=model,
        batch=scenario.batch,
        tokens_per_seq=1 if decode else length,
        kv_len=length,
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


def scenario_from_workload(w: Workload) -> Scenario:
    """The scenario that reproduces ``w`` (for saving a view as YAML). A model that is not in the catalog (from
    a config.json or a YAML path) is written inline, so that the saved file stands on its own."""
    decode = w.phase == "decode"
    catalog = model_catalog()
    bundled = w.model.id.lower() in catalog and load_model(w.model.id) == w.model
    return Scenario(
        phase=w.phase,
        model=w.model.id if bundled else w.model,
        batch=w.batch,
        seq_len=None if decode else w.tokens_per_seq,
        context=w.kv_len if decode else None,
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
