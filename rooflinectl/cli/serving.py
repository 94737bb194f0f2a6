"""The set-up shared by the serving commands (``analyze generate``, ``compare``, ``plot pareto``): the model's
step as a workload, a row's name, and the step analyzer on a layout (their options are options.py's). Nothing
heavy is imported here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import workload_overrides

if TYPE_CHECKING:
    from ..engine.generate import StepAnalyzer
    from ..specs.hardware import GPU
    from ..specs.workload import Workload


def base_workload(model: str | None, dtype: str | None, kv_dtype: str | None, weight_dtype: str | None,
                  act_dtype: str | None, group_size: int | None, attention: str | None, fuse: str | None) -> Workload:
    """The model and its step options (data types, attention, fusions) as a one-token prefill: the request's
    steps are this with their own sizes (``engine.generate.step_workload``)."""
    from ..specs.workload import resolve_workload

    overrides = workload_overrides(model, 1, 1, None, dtype, kv_dtype, attention, None, fuse,
                                   weight_dtype=weight_dtype, act_dtype=act_dtype, group_size=group_size)
    return resolve_workload("prefill", **overrides)


def layout_label(gpu: str, tp: int, ep: int, pp: int, several: bool) -> str:
    """A row's (a curve's) name: the GPU, and its degrees where they are not 1 or where several TP degrees are
    compared ("h100-sxm TP4", "h200 EP8", "h100-sxm TP4 PP2")."""
    parts = [gpu]
    if tp > 1 or several:
        parts.append(f"TP{tp}")
    if ep > 1:
        parts.append(f"EP{ep}")
    if pp > 1:
        parts.append(f"PP{pp}")
    return " ".join(parts)


def step_analyzer(gpu: GPU, calibrated: bool, tp: int = 1, ep: int = 1, pp: int = 1) -> StepAnalyzer:
    """``roofline.analyze`` on one GPU, or on one GPU of a tensor- or expert-parallel layout (engine.parallel):
    each step of a request placed under its roofs."""
    from ..engine.parallel import Layout, check_interconnect
    from ..engine.roofline import analyze

    layout = Layout(tp, ep, pp)
    check_interconnect(gpu, layout)

    def analyze_step(w: Workload) -> Any:
        return analyze(w, gpu, calibrated, layout)

    return analyze_step
