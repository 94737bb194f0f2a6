"""Serving stacks: what a step costs on an inference engine beyond its ops' roofline times.

A stack file (``stacks/<id>.yaml``; a user's folder of their own through ROOFLINECTL_STACKS_PATH, or a path) holds
its figures, each with a ``source``; the serving simulation (``serving.stepmodel``) prices a step as

    Σ over ops  max(FLOPs / (peak · compute_efficiency), bytes / (bandwidth · bandwidth_efficiency))
    + kernels in the step × kernel_gap_us  +  step_overhead_us

where the kernels are the step's op instances (the layer count times each op: fusions launch fewer) and, under
``--calibrated``, each op's time is the GPU's measured op model instead of the efficiencies' roofline (the gap
and the step's fixed cost still apply). ``fused`` is the engine's own kernel fusion, the step's default when
no ``--fuse`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from ..errors import UserError, closest
from ..files import user_path
from .load import Id, Name, Strict, Text, looks_like_path, read_yaml, search_dirs, validate
from .workload import Fusion

STACKS_PATH_ENV = "ROOFLINECTL_STACKS_PATH"
# Microseconds of a fixed cost: up to a second a step, beyond any engine's.
Micros = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
Efficiency = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class Stack(Strict):
    """A serving stack's costs beyond the roofline (the module's docstring states how each is applied)."""

    id: Id
    name: Name
    source: Text  # where the figures come from: a measurement here, a fit to published runs (which rows), a doc
    step_overhead_us: Micros = 0.0  # the engine's CPU work per step: scheduling, input preparation, sampling
    kernel_gap_us: Micros = 0.0  # per kernel launched: launch latency, or the gap between a graph's nodes
    bandwidth_efficiency: Efficiency = 1.0  # the share of the roofs' bandwidth its kernels reach
    compute_efficiency: Efficiency = 1.0  # the share of the roofs' peak its matmuls reach
    fused: list[Fusion] = Field(default_factory=list)
    notes: Text | None = None


def _catalog() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for folder in reversed(search_dirs("stacks", STACKS_PATH_ENV)):
        for path in sorted(folder.glob("*.y*ml")):
            names[path.stem.lower()] = path
    return names


def list_stacks() -> dict[str, Stack]:
    return {name: load_stack(str(path)) for name, path in sorted(_catalog().items())}


def load_stack(name: str) -> Stack:
    """A stack by id (``roofline``, ``vllm`` …) or YAML path."""
    if looks_like_path(name):
        path = user_path(name)
    else:
        catalog = _catalog()
        if name.lower() not in catalog:
            raise UserError(f"unknown stack '{name}'{closest(name, catalog)}; the stacks are: "
                            f"{', '.join(sorted(catalog))}")
        path = catalog[name.lower()]
    return validate(Stack, read_yaml(path), str(path))
