"""What a model holds in memory, per token of KV cache and per weight format: ``workloads show``'s numbers.

Nothing is counted here: each figure is the engine's own function (``resident.kv_cache_bytes_per_sequence``,
``resident.weight_footprint_bytes``) applied to the smallest step that has it, a decode of one sequence at one
position, so that a model the engine counts differently (its attention, its experts, its weight formats) is
counted here by the same rule as in ``analyze``.
"""

from __future__ import annotations

from ..specs.dtypes import DEFAULT_GROUP_SIZE, DType, WeightDType
from ..specs.model import Model
from ..specs.step import Seqs
from ..specs.workload import Workload
from .count.resident import (
    fixed_state_bytes_per_sequence,
    kv_cache_bytes_per_sequence,
    weight_footprint_bytes,
)

# Weight formats with no scales, in which the whole step may run (dtype = weight format).
_PLAIN: tuple[str, ...] = ("fp32", "bf16", "fp16")


def one_token_step(model: Model, *, dtype: DType = "bf16", kv_dtype: DType = "bf16",
                   weight_dtype: WeightDType | None = None, group_size: int | None = None,
                   positions: int = 1) -> Workload:
    """A decode step of one sequence at ``positions`` positions (its own the last; 1 by default): the smallest
    workload the engine counts."""
    return Workload(phase="decode", model=model, seqs=(Seqs(count=1, new=1, cached=positions - 1),), dtype=dtype,
                    kv_dtype=kv_dtype, attention="flash", causal=True, weight_dtype=weight_dtype,
                    group_size=DEFAULT_GROUP_SIZE if group_size is None else group_size)


def _exact(x: float) -> int:
    """Bytes of whole data types are whole numbers; a fraction here is a bug, not a rounding."""
    if not float(x).is_integer():
        raise ValueError(f"expected a whole number of bytes, got {x}")
    return int(x)


def kv_cache_bytes_per_token(model: Model, kv_dtype: DType = "bf16") -> int:
    """KV cache one token adds, all layers, in ``kv_dtype``: the engine's cache of one sequence at two positions
    less its cache at one (for a GQA model, attention layers × 2 (K and V) × KV heads × head_dim × bytes; a
    recurrent layer's fixed state is in both, and out of the difference)."""
    def held(n: int) -> float:
        return kv_cache_bytes_per_sequence(one_token_step(model, kv_dtype=kv_dtype, positions=n))
    return _exact(held(2) - held(1))


def recurrent_state_bytes(model: Model, dtype: DType = "bf16") -> int:
    """The fixed state one sequence holds in the model's recurrent layers, whatever its length (0 without
    any): engine.count.resident.fixed_state_bytes_per_sequence, in the activations' ``dtype``."""
    return _exact(fixed_state_bytes_per_sequence(one_token_step(model, dtype=dtype)))


def kv_cache_bytes_per_token_past_window(model: Model, kv_dtype: DType = "bf16") -> int | None:
    """For a model with a sliding window W: the KV cache one more token adds once a sequence holds W positions
    (only the full layers still grow: a sliding layer keeps its last W), the engine's cache at W + 1 positions
    less its cache at W. None without a window."""
    w = model.sliding_window
    if w is None:
        return None
    def held(n: int) -> float:
        return kv_cache_bytes_per_sequence(one_token_step(model, kv_dtype=kv_dtype, positions=n))
    return _exact(held(w + 1) - held(w))


def weight_bytes(model: Model, fmt: WeightDType, group_size: int | None = None) -> int:
    """The model's weights held in memory with its linear layers in ``fmt`` (every expert; scales included;
    the embedding, LM head, norms and routers in bf16 beside a quantized format, as engine.count.quant keeps them).
    An unscaled format (fp32, bf16, fp16) holds every parameter in it."""
    if fmt in _PLAIN:
        step = one_token_step(model, dtype=fmt)  # type: ignore[arg-type]  # fp32/bf16/fp16 are DTypes
    else:
        step = one_token_step(model, weight_dtype=fmt, group_size=group_size)
    return _exact(weight_footprint_bytes(step))


def weight_bytes_by_format(model: Model) -> dict[str, int]:
    """bf16, and the model's own quantized format where its config has one (``model.weight_dtype``)."""
    out = {"bf16": weight_bytes(model, "bf16")}
    own = model.weight_dtype
    if own is not None and own != "bf16":
        out[own] = weight_bytes(model, own, model.group_size)
    return out
