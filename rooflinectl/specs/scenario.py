"""Scenarios: one inference step as a file states it (phase, sizes, data types, attention, fusion), and the
catalog of them.

Scenario files (``workloads/decode.yaml`` …) name a model by id or path, or inline it. Command-line options
override any scenario field through :func:`resolve_workload`, which resolves the model into a
:class:`~specs.workload.Workload`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from typing_extensions import Self

from ..errors import UserError, closest
from ..files import user_path
from .choices import AttentionImpl, Fusion
from .dtypes import (
    DEFAULT_GROUP_SIZE,
    GROUPED_WEIGHT_DTYPES,
    ActDType,
    DType,
    WeightDType,
    group_size_refusal,
)
from .load import Strict, Text, invalid, leave_out_unused, looks_like_path, read_yaml, search_dirs, validate
from .model import Model
from .models import WORKLOADS_PATH_ENV, load_model, model_catalog
from .sizes import Batch, Experts, GroupSize, Positions
from .step import MAX_GROUPS, PRESETS, Phase, Seqs, preset_phase
from .workload import Workload, check_fusions, length_field, size_problem


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


# --- the catalog, and a scenario resolved into a workload -----------------------------------------------------


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
        scenario = validate(Scenario, data, "the options given")
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
    if refusal := group_size_refusal(scenario.group_size, fmt):
        raise UserError(refusal)
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
