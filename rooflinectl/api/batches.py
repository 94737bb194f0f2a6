"""How one GPU serves a batch of one request, for the API's generate, compare and curves: each step placed on the
GPU's roofline (``step_analyzer``), the server of a batch (the static batch or the simulated closed batch), a row's
name, and the checks of their repeatable options. Nothing heavy is imported at module level."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from .common import base_workload, name_arg, one_or_more

if TYPE_CHECKING:
    from ..engine.choice import StaticServer
    from ..engine.generate import StepAnalyzer
    from ..engine.roofline import Analysis
    from ..serving.batch import BatchServer, Method
    from ..specs.hardware import GPU
    from ..specs.workload import Workload

    # One GPU (an id, an alias, a YAML path or a spec) or a list of them.
    GPUs: TypeAlias = str | os.PathLike[str] | GPU | Sequence[str | os.PathLike[str] | GPU]

__all__ = ["batch_server", "check_once", "gpu_list", "layout_label", "step_analyzer"]


def step_analyzer(g: GPU, calibrated: bool, tp: int = 1, ep: int = 1, pp: int = 1) -> StepAnalyzer:
    """Each step of a request placed under ``g``'s roofs, on one GPU of the layout (engine.parallel)."""
    from ..engine.parallel import Layout, check_interconnect
    from ..engine.roofline import analyze as place_step

    layout = Layout(tp, ep, pp)
    check_interconnect(g, layout)

    def analyze_one(w: Workload) -> Analysis:
        return place_step(w, g, calibrated, layout)

    return analyze_one


def layout_label(gpu_id: str, tp: int, ep: int, pp: int, several: bool) -> str:
    """A row's (a curve's) name: the GPU, and its degrees where they are not 1 or where several TP degrees are
    compared ("h100-sxm TP4", "h200 EP8", "h100-sxm TP4 PP2")."""
    parts = [gpu_id]
    if tp > 1 or several:
        parts.append(f"TP{tp}")
    if ep > 1:
        parts.append(f"EP{ep}")
    if pp > 1:
        parts.append(f"PP{pp}")
    return " ".join(parts)


def batch_server(g: GPU, prompt: int, output: int, reserve_gib: float | None, calibrated: bool, tp: int, ep: int,
            pp: int, stack: str, chunked_prefill: bool, max_num_batched_tokens: int | None,
            options: dict[str, Any]) -> tuple[StaticServer | BatchServer, Workload, Method]:
    """How ``g`` serves a batch of the request: the static batch of ``engine.generate`` (no chunked prefill, a
    stack with no costs), else the simulated closed batch (``serving.batch``); and the step options it runs."""
    from ..engine.choice import StaticServer
    from ..engine.memory import reserve_bytes
    from ..engine.parallel import Layout
    from ..errors import UserError
    from ..serving.batch import BatchServer, Method
    from ..serving.scheduler import SchedulerConfig
    from ..specs.stack import load_stack

    if max_num_batched_tokens is not None and not chunked_prefill:
        raise UserError("--max-num-batched-tokens with --no-chunked-prefill: without chunked prefill one step "
                        "holds the whole batch's prompts; the budget is chunked prefill's")
    costs = load_stack(name_arg(stack, "stack"), g.compute_capability)
    method = Method(costs, chunked_prefill, SchedulerConfig.on(costs, max_num_batched_tokens).max_num_batched_tokens)
    if not method.static and options.get("fuse") is None:
        options = {**options, "fuse": list(method.stack.fused)}
    base = base_workload(**options)
    analyze_one = step_analyzer(g, calibrated, tp, ep, pp)
    reserve = reserve_bytes(g.capacity_bytes, reserve_gib)
    if method.static:
        return StaticServer(base, prompt, output, analyze_one, reserve, tp * ep * pp), base, method
    return (BatchServer(base, g, prompt, output, reserve, method, analyze_one, calibrated, Layout(tp, ep, pp)), base,
            method)


def check_once(flag: str, values: Sequence[object]) -> None:
    """Each value of a repeatable option once: a repeat would give the same row (or curve) twice, a slip."""
    from ..errors import UserError

    repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
    if repeated:
        raise UserError(f"{flag} {', '.join(repeated)}: given more than once; name each once")


def gpu_list(gpus: GPUs) -> tuple[str | os.PathLike[str] | GPU, ...]:
    """The GPUs to compare: one (an id, a path or a spec) or a list of them."""
    from ..specs.hardware import GPU

    return one_or_more(gpus, "gpus", (str, os.PathLike, GPU))
