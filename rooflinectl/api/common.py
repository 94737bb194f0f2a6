"""The API's shared pieces: the default GPU, a spec by id or path, a step's options, and a result as a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..specs.hardware import GPU
    from ..specs.model import Model
    from ..specs.workload import Workload

# The GPU a command or a function uses when none is given.
DEFAULT_GPU = "h100-sxm"


def _frame(rows: list[dict[str, Any]]) -> Any:
    """``rows`` as a pandas DataFrame; pandas is optional, and its absence is said in one line."""
    try:
        import pandas as pd  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        from ..errors import UserError

        raise UserError("to_pandas needs pandas: pip install pandas") from None
    return pd.DataFrame(rows)

def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping as one level, keys joined by dots; lists are kept as values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out

def gpu(id_or_path: str) -> GPU:
    """A GPU spec by id, alias or YAML path (``rooflinectl hardware list``)."""
    from ..specs.hardware import load_gpu

    return load_gpu(id_or_path)

def model(id_or_path: str) -> Model:
    """A model by id, model YAML or a local Hugging Face config.json (``rooflinectl workloads list``)."""
    from ..specs.model import load_model

    return load_model(id_or_path)

def _gpu(spec: str | GPU) -> GPU:
    return gpu(spec) if isinstance(spec, str) else spec

def _fusions(fuse: str | Sequence[str] | None) -> list[str] | None:
    """``fuse`` as the scenario's list: a comma-separated string as the command line gives it, or a list."""
    if fuse is None or not isinstance(fuse, str):
        return None if fuse is None else list(fuse)
    from ..specs.load import split_list

    return split_list(fuse, "--fuse")

def step_options(*, model: str | Model | None = None, dtype: str | None = None, kv_dtype: str | None = None,
                 weight_dtype: str | None = None, act_dtype: str | None = None, group_size: int | None = None,
                 attention: str | None = None, causal: bool | None = None,
                 fuse: str | Sequence[str] | None = None, experts_touched: int | None = None) -> dict[str, Any]:
    """The options every step shares, as :func:`specs.scenario.resolve_workload`'s overrides (None: the
    scenario's)."""
    return dict(model=model, dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype, act_dtype=act_dtype,
                group_size=group_size, attention=attention, causal=causal, fused=_fusions(fuse),
                experts_touched=experts_touched)

def base_workload(**options: Any) -> Workload:
    """The serving commands' model and step options (:func:`step_options`) as a one-token prefill: a request's
    steps are this with their own sizes (``engine.generate.step_workload``)."""
    from ..specs.scenario import resolve_workload

    return resolve_workload("prefill", batch=1, seq_len=1, **step_options(**options))
