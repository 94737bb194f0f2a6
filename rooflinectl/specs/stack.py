"""Serving stacks: what a step costs on an inference engine beyond its ops' roofline times.

A stack file (``stacks/<id>.yaml``; a user's folder of their own through ROOFLINECTL_STACKS_PATH, or a path) holds
its figures, each with a ``source``; the serving simulation (``serving.stepmodel``) prices a step as

    Σ over ops other than attention  max(FLOPs / (peak · compute_efficiency), bytes / (bandwidth · bandwidth_efficiency))
    + Σ over attention ops  (the same) / attention_efficiency
    + Σ over collectives  (their interconnect time) / collective_efficiency
    + KV positions × layers × kv_position_ns
    + kernels in the step × kernel_gap_us  +  step_overhead_us  +  sequences in the step × sequence_overhead_us
    + new_shape_us, if the step's attention shape is one the run has not had before

and every token of a request reaches its client ``request_latency_us`` + ``stream_lag_steps`` × the request's own
mean interval between tokens in the engine after the engine made it (the API server's HTTP, tokenization and
streaming, which run beside the engine's steps and delay none of them, and waits that grow with the step time),
so TTFT and E2E include both and TPOT neither; a closed loop's next request reaches the engine
``refill_latency_us`` after its client's last one finished there (a step that starts meanwhile runs without it).

where the kernels are the step's op instances (the layer count times each op: fusions launch fewer), the KV
positions are every sequence's cached and new tokens together, the layers those whose attention reads them, and,
under ``--calibrated``, each op's time is the GPU's measured op model instead of the efficiencies' roofline (the
attention efficiency, the gap, the position cost and the step's fixed costs still apply). ``attention`` says which
attention ops the step runs (``varlen`` or ``batch_dense``: :class:`Stack`); ``fused`` is the engine's own kernel
fusion, the step's default when no ``--fuse`` is given; ``families`` hold figures fitted apart on one GPU family,
which replace the stack's own on that family's GPUs (``Stack.on``; ``load_stack`` given the run's GPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import Field

from ..errors import UserError, closest
from ..files import user_path
from .choices import Fusion
from .load import Id, Name, Strict, Text, looks_like_path, read_yaml, search_dirs, validate

STACKS_PATH_ENV = "ROOFLINECTL_STACKS_PATH"
# Microseconds of a fixed cost: up to a second a step, beyond any engine's.
Micros = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
# Nanoseconds per KV position and layer: up to a millisecond, beyond any engine's.
Nanos = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
# A share of the roofs a stack's kernels reach: from 1% (the fitted stacks reach 0.46 and above) to all of them.
# Below 1% a step of a real model would last minutes; 5e-324 turned every time into inf and every share into nan.
Efficiency = Annotated[float, Field(ge=0.01, le=1, allow_inf_nan=False)]
# Steps of a request's own token interval: up to ten thousand, beyond any engine's stream.
Steps = Annotated[float, Field(ge=0, le=1e4, allow_inf_nan=False)]
# How the engine runs a step's attention over its sequences (Stack.attention).
StepAttention = Literal["varlen", "batch_dense"]
# Whether the engine's scheduler puts prefill chunks and decodes in one step (Stack.prefill_steps).
PrefillSteps = Literal["mixed", "separate"]
PREFILL_STEPS: tuple[PrefillSteps, ...] = get_args(PrefillSteps)


# A GPU family as a stack keys its own figures: the major version of NVIDIA's compute capability ("9": Hopper,
# H100/H200/H800/H20; "10": datacenter Blackwell, B200/B300/GB200/GB300), the level at which the engines build
# and pick their kernels.
Family = Annotated[str, Field(pattern=r"^[1-9][0-9]?$")]


def family_of(compute_capability: str | None) -> str | None:
    """The family of a GPU of that compute capability ("9.0" → "9"; None, a GPU without one: None)."""
    return compute_capability.split(".")[0] if compute_capability else None


class FamilyFigures(Strict):
    """A stack's figures on one GPU family, fitted apart from the rest (``Stack.families``); a figure left out is
    the stack's own."""

    step_overhead_us: Micros | None = None
    kernel_gap_us: Micros | None = None
    sequence_overhead_us: Micros | None = None
    request_latency_us: Micros | None = None
    stream_lag_steps: Steps | None = None
    bandwidth_efficiency: Efficiency | None = None
    compute_efficiency: Efficiency | None = None
    attention_efficiency: Efficiency | None = None
    collective_efficiency: Efficiency | None = None
    kv_position_ns: Nanos | None = None
    source: Text | None = None  # what they were fitted to, where it differs from the stack's source


class Stack(Strict):
    """A serving stack's costs beyond the roofline (the module's docstring states how each is applied).

    ``attention``: ``varlen`` (the default) runs each attention op as one variable-length kernel in which every
    sequence attends to its own positions, so its FLOPs and bytes are the sums of each group's
    (``engine.count.attention.by_group``: vLLM's and SGLang's paged kernels, FlashAttention's varlen). ``batch_dense``
    runs it as one dense attention of all the step's N query tokens over all its sequences' L KV positions (cached
    and new), the other sequences masked out: transformers' continuous batching with ``paged|sdpa``, which gathers
    every scheduled request's K and V into one sequence and calls SDPA once with a block-diagonal additive mask
    (transformers 5.17, ``ContinuousBatchingManager``; docs/serving.md, "Validation on the H200 against
    transformers' continuous batching"). Its count is the engine's for one sequence of N new tokens after L − N
    cached, without the causal mask: N·L scores (a kernel given an arbitrary mask computes every score, masked or
    not), K and V read over L positions, Q in and O out over N tokens. A model with a sliding window is refused:
    there the window is only part of the mask, and the positions each layer kind gathers are not modelled.

    ``new_shape_us``: a cost on the host charged to a step whose attention shape, (its query tokens N, its KV
    positions L), the run has not had before: PyTorch's cuDNN attention builds an execution plan on the CPU for
    each new shape and reuses it after. With ``paged|sdpa`` and no CUDA graphs nothing is padded, so every decode
    step of a new length is a new shape (measured there: a decode step of one sequence takes 60–66 ms on an H200
    at a new length and 23–27 ms at one run before). The key is the step's totals, as the dense kernel sees them:
    two steps of different sequences but the same N and L share a plan.
    """

    id: Id
    name: Name
    source: Text  # where the figures come from: a measurement here, a fit to published runs (which rows), a doc
    step_overhead_us: Micros = 0.0  # the engine's CPU work per step: scheduling, input preparation, sampling
    kernel_gap_us: Micros = 0.0  # per kernel launched: launch latency, or the gap between a graph's nodes
    # per sequence in a step: the host's work that grows with the batch (input preparation, sampling, the output
    # processing of each sequence's token)
    sequence_overhead_us: Micros = 0.0
    # per request, between the engine and its client: the API server's HTTP, tokenization and streaming, run in
    # a process beside the engine (vLLM's frontend, SGLang's tokenizer manager), so no step waits for it; it is
    # added to each request's TTFT and E2E; it does not delay a closed loop's next request (refill_latency_us does)
    request_latency_us: Micros = 0.0
    # per request of a closed loop: how long after the engine finished a client's last request its next one
    # reaches the engine's queue (the client's own work and the hand-off between them). An engine starts its next
    # step as soon as the last one ends, so a refill that comes this long after it waits for the step after.
    refill_latency_us: Micros = 0.0
    # per request, in its own mean interval between tokens in the engine (its TPOT): how much later than the
    # engine made them its client sees its tokens, beyond request_latency_us. A wait that grows with the engine's
    # step time, as a request's wait behind steps already formed does (an engine that forms a step ahead of its
    # results, as TensorRT-LLM's overlap scheduler does, admits a request that arrives during step n in step n + 2
    # at the earliest). Fitted (stacks/<engine>.yaml's source); added to TTFT and E2E, as request_latency_us is,
    # and not to TPOT.
    stream_lag_steps: Steps = 0.0
    bandwidth_efficiency: Efficiency = 1.0  # the share of the roofs' bandwidth its kernels reach
    compute_efficiency: Efficiency = 1.0  # the share of the roofs' peak its matmuls reach
    attention: StepAttention = "varlen"  # how a step's attention runs over its sequences (the class docstring)
    # The share of its op's time (the roofs' or, under --calibrated, the op model's) the engine's attention kernel
    # reaches: each attention op's time is divided by it. Fitted where the engine's kernel is not the one the op
    # model was measured on (a masked dense kernel beside the op model's SDPA decode probes).
    attention_efficiency: Efficiency = 1.0
    # The share of its op's time (the interconnect's roof or, under --calibrated, the op model's) the engine's
    # collectives reach: each collective's time (the tensor-parallel all-reduces, the experts' all-to-alls) is
    # divided by it. Fitted where the engine's all-reduce runs below the link's datasheet rate or is not
    # overlapped with the GEMMs around it (stacks/<engine>.yaml's source says what it was fitted to).
    collective_efficiency: Efficiency = 1.0
    # Per KV position and per layer whose attention reads it, a cost the attention op's FLOPs and bytes do not
    # show: for batch_dense the gathering of every sequence's K and V into one copy and its repetition for each
    # query head (copies), and the dense kernel's pass over every position with only heads × query tiles of
    # parallelism. Fitted from a step log (the stack's source says which).
    kv_position_ns: Nanos = 0.0
    new_shape_us: Micros = 0.0  # per step of an attention shape new to the run (the class docstring)
    # The engine's scheduling of prompts beside decodes: ``mixed``, prefill chunks in the decodes' step (vLLM V1,
    # TensorRT-LLM's in-flight batching); ``separate``, a step of prompts whenever one can be formed, else a step
    # of decodes (SGLang without --enable-mixed-chunk). serving.scheduler states both; --prefill-steps overrides.
    prefill_steps: PrefillSteps = "mixed"
    # The token budget a step (--max-num-batched-tokens) the engine ran with where the figures were fitted, the
    # default of a run on this stack (none: vLLM's API-server default on a data-centre GPU, 8,192).
    max_num_batched_tokens: Annotated[int, Field(ge=1, le=2**24)] | None = None
    fused: list[Fusion] = Field(default_factory=list)
    # Figures of the stack on a GPU family (the major version of its compute capability, ``Family``), which
    # replace the stack's own on a GPU of that family: an engine runs other kernels on Hopper than on Blackwell,
    # and the published runs a stack was fitted to ran other engine versions on each. A GPU of a family not listed
    # takes the stack's own figures.
    families: dict[Family, FamilyFigures] = Field(default_factory=dict)
    # The family whose figures a run prices with (``Stack.on``; None: the stack's own).
    family: Family | None = None
    notes: Text | None = None

    def on(self, compute_capability: str | None) -> Stack:
        """The stack as it prices a step on a GPU of that compute capability ("9.0"; None, a GPU without one, as
        AMD's): the family's figures in place of its own where it lists that family, else itself."""
        family = family_of(compute_capability)
        figures = self.families.get(family) if family else None
        if family is None or figures is None:
            return self
        return self.model_copy(update={**figures.model_dump(exclude_none=True, exclude={"source"}),
                                       "family": family})


def _catalog() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for folder in reversed(search_dirs("stacks", STACKS_PATH_ENV)):
        for path in sorted(folder.glob("*.y*ml")):
            names[path.stem.lower()] = path
    return names


def list_stacks() -> dict[str, Stack]:
    return {name: load_stack(str(path)) for name, path in sorted(_catalog().items())}


def load_stack(name: str, compute_capability: str | None = None) -> Stack:
    """A stack by id (``roofline``, ``vllm`` …) or YAML path, with its figures on a GPU of ``compute_capability``
    (``Stack.on``; None: its own)."""
    if looks_like_path(name):
        path = user_path(name)
    else:
        catalog = _catalog()
        if name.lower() not in catalog:
            raise UserError(f"unknown stack '{name}'{closest(name, catalog)}; the stacks are: "
                            f"{', '.join(sorted(catalog))}")
        path = catalog[name.lower()]
    stack = validate(Stack, read_yaml(path), str(path))
    if stack.family is not None:
        raise UserError(f"{path}: family is set by the GPU a run is on (Stack.on), not by the file")
    return stack.on(compute_capability)
