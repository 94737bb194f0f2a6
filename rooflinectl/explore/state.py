"""The knobs of an exploration and how each key turns them. Pure: no terminal, no engine arithmetic.

A :class:`Knobs` is one point of the space the user moves through; :meth:`Knobs.workload` turns it into the
engine's Workload through the same validation as a workload file, so a knob can never reach a state that
``rooflinectl analyze`` would refuse. Each turn returns new knobs and leaves the old ones untouched: the app keeps
the old ones when the new ones fail (a data type the GPU has no peak for, say).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import yaml

from ..engine.count.op import matmul_unit
from ..engine.parallel import Layout
from ..engine.roofline import Analysis, analyze
from ..errors import UserError
from ..files import write_atomic
from ..specs.dtypes import DTYPES
from ..specs.hardware import GPU
from ..specs.load import validate
from ..specs.model import Model
from ..specs.scenario import Scenario, scenario_from_workload, workload_from_scenario
from ..specs.step import PRESETS, Phase
from ..specs.workload import LengthField, Workload, length_field

T = TypeVar("T")


@dataclass(frozen=True)
class Knobs:
    """What the keys turn. ``length`` is the context of a decode step and the prompt (seq_len) otherwise: one
    knob, so that switching phase keeps the number of tokens in play."""

    phase: Phase
    model: Model
    gpu: GPU
    batch: int
    length: int
    dtype: str
    kv_dtype: str
    attention: str
    causal: bool = True
    fused: tuple[str, ...] = ()
    calibrated: bool = False
    layout: Layout = Layout()  # the GPUs one copy spans (--tp, --ep, --pp): every figure is then one GPU's

    @classmethod
    def from_workload(cls, w: Workload, gpu: GPU, calibrated: bool = False, layout: Layout = Layout()) -> Knobs:
        """The knobs of ``w``; one that states ``experts_touched`` is refused rather than dropped: the batch and
        length keys change the step's tokens, and with them the experts a step can touch, so explore counts the
        uniform expectation only (cli/options.py's workload_overrides says the same of --experts-touched)."""
        if w.quantized:
            raise UserError(f"{w.weights} weights: explore's keys set one data type for weights and activations; "
                            f"give quantized weights to 'rooflinectl analyze' or 'rooflinectl plot'")
        if w.experts_touched is not None:
            raise UserError(f"experts_touched {w.experts_touched}: explore counts the experts touched under uniform "
                            f"routing as its keys change the batch; give a stated count to 'rooflinectl analyze'")
        return cls(
            phase=w.phase, model=w.model, gpu=gpu, batch=w.batch,
            length=w.length,
            dtype=w.dtype, kv_dtype=w.kv_dtype, attention=w.attention, causal=w.causal, fused=tuple(w.fused),
            calibrated=calibrated, layout=layout,
        )

    @property
    def length_name(self) -> LengthField:
        """The phase's length: context for decode, seq_len otherwise (``specs.workload.length_field``)."""
        return length_field(self.phase)

    def scenario(self) -> Scenario:
        data: dict[str, object] = {
            "phase": self.phase, "model": self.model, "batch": self.batch, self.length_name: self.length,
            "dtype": self.dtype, "kv_dtype": self.kv_dtype, "attention": self.attention, "causal": self.causal,
            "fused": list(self.fused),
        }
        return validate(Scenario, data, "explore")

    def workload(self) -> Workload:
        return workload_from_scenario(self.scenario())

    def analyze(self) -> Analysis:
        """The engine's analysis of these knobs; a UserError when the GPU lacks the data type's peak."""
        return analyze(self.workload(), self.gpu, calibrated=self.calibrated, layout=self.layout)


def _itself(item: object) -> object:
    return item


def cycle(items: Sequence[T], current: T, key: Callable[[T], object] = _itself) -> T:
    """The item after ``current`` in ``items`` (by ``key``), wrapping; the first one if ``current`` is absent."""
    keys = [key(i) for i in items]
    k = key(current)
    return items[(keys.index(k) + 1) % len(items)] if k in keys else items[0]


def next_phase(k: Knobs) -> Knobs:
    return replace(k, phase=cycle(list(PRESETS), k.phase))


def scale_batch(k: Knobs, factor: float) -> Knobs:
    batch = int(k.batch * factor)
    if batch < 1:
        raise UserError("batch is already 1")
    return replace(k, batch=batch)


def scale_length(k: Knobs, factor: float) -> Knobs:
    length = int(k.length * factor)
    if length < 1:
        raise UserError(f"{k.length_name} is already 1")
    return replace(k, length=length)


def dtypes_with_peaks(gpu: GPU, calibrated: bool = False) -> list[str]:
    """The workload data types this GPU has a compute peak for (tensor cores; the vector units for fp32)."""
    roofs = gpu.roofs(calibrated)
    return [d for d in DTYPES
            if d in (roofs.vector_tflops if matmul_unit(d) == "vector" else roofs.tensor_tflops)]


def next_dtype(k: Knobs) -> Knobs:
    """The next data type the GPU has a peak for; the KV cache follows unless it was set apart."""
    dtype = cycle(dtypes_with_peaks(k.gpu, k.calibrated), k.dtype)
    kv = dtype if k.kv_dtype == k.dtype else k.kv_dtype
    return replace(k, dtype=dtype, kv_dtype=kv)


def toggle_attention(k: Knobs) -> Knobs:
    return replace(k, attention="flash" if k.attention == "naive" else "naive")


def next_model(k: Knobs, models: list[Model]) -> Knobs:
    return replace(k, model=cycle(models, k.model, key=lambda m: m.id))


def next_gpu(k: Knobs, gpus: list[GPU]) -> tuple[Knobs, list[str]]:
    """The next GPU that has a peak for the current data type, and the ones skipped for lacking it."""
    skipped: list[str] = []
    gpu = k.gpu
    for _ in gpus:
        gpu = cycle(gpus, gpu, key=lambda g: g.id)
        if gpu.id == k.gpu.id:
            break
        if k.dtype in dtypes_with_peaks(gpu, k.calibrated):
            return replace(k, gpu=gpu), skipped
        skipped.append(gpu.id)
    raise UserError(f"no other GPU has a {k.dtype} peak" + (f" (skipped {', '.join(skipped)})" if skipped else ""))


# --- saving --------------------------------------------------------------------------------------------------


def layout_flags(layout: Layout) -> str:
    """The options that give ``layout`` to a command (none for one GPU), as ' --tp 4 --pp 2'."""
    return "".join(f" --{name} {n}" for name, n in (("tp", layout.tp), ("ep", layout.ep), ("pp", layout.pp))
                   if n > 1)


def workload_yaml(k: Knobs, gpu_ref: str, path: str = "FILE") -> str:
    """A workload file that ``rooflinectl analyze PATH --gpu GPU_REF`` reads back to the same analysis (a model
    that is not in the catalog is written inline by ``scenario_from_workload``)."""
    scenario = scenario_from_workload(k.workload())
    data = {"phase": scenario.phase,
            "description": f"saved by rooflinectl explore: {k.workload().label()} on {k.gpu.name}",
            **scenario.model_dump(exclude_none=True, exclude={"phase", "description"}, mode="json")}
    flags = layout_flags(k.layout) + (" --calibrated" if k.calibrated else "")
    header = f"# Reproduce with: rooflinectl analyze {path} --gpu {gpu_ref}{flags}\n"
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def workload_filename(k: Knobs) -> str:
    size = f"{k.length_name[0]}{k.length}"  # c4096 (context) or s4096 (seq_len)
    stem = f"explore-{k.model.id}-{k.phase}-b{k.batch}-{size}-{k.dtype}-{k.attention}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem) + ".yaml"


def save_workload(k: Knobs, gpu_ref: str, folder: Path) -> Path:
    """Write the workload file of ``k`` into ``folder``; an OS error becomes a one-line UserError."""
    path = folder / workload_filename(k)
    write_atomic(path, workload_yaml(k, gpu_ref, str(path)))
    return path
