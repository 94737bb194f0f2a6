"""The API's shared pieces: the default GPU, a spec by id or path, a step's options, and a result as a table."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..specs.hardware import GPU
    from ..specs.model import Model
    from ..specs.workload import Workload

# The GPU a command or a function uses when none is given.
DEFAULT_GPU = "h100-sxm"

T = TypeVar("T")


def name_arg(value: object, what: str) -> str:
    """``value`` as the name a spec loader takes: a str, or a path (``os.PathLike``) as its str. Anything else
    is a UserError naming the argument, as the command line's parser would refuse it."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return str(os.fspath(value))
    from ..errors import UserError

    raise UserError(f"{what}: give {_NAMES[what]}, not {shown(value)} ({type(value).__name__})")


def shown(value: object, width: int = 60) -> str:
    """``value``'s repr for a one-line message, cut to ``width`` characters (a spec's repr runs to thousands)."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"


# What each named argument takes, for name_arg's message.
_NAMES = {"gpu": "a GPU id, an alias or a YAML path ('rooflinectl hardware list')",
          "model": "a model id, a model YAML or a config.json path ('rooflinectl workloads list')",
          "workload": "a phase (decode, prefill, attention) or a workload YAML path",
          "stack": "a serving stack's id or a YAML path",
          "trace": "a trace file's path"}


def check_numbers(ints: dict[str, object], reals: dict[str, object], bools: dict[str, object] | None = None,
                  required: tuple[str, ...] = ()) -> None:
    """The API's keywords as the command line parses them: each of ``ints`` an int, each of ``reals`` an int or
    a float (a bool is neither), each of ``bools`` a bool; None passes (the default) unless the name is
    ``required`` (a keyword whose default is a value, not None). Their ranges are checked where they are used."""
    from ..errors import UserError

    for names, kinds, words in ((ints, (int,), "an integer"), (reals, (int, float), "a number"),
                                (bools or {}, (bool,), "True or False")):
        for name, value in names.items():
            if value is None and name not in required:
                continue
            if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
                raise UserError(f"{name}: give {words}, not {shown(value)} ({type(value).__name__})")


def seconds_of_ms(value: float | None, what: str) -> float | None:
    """A target in milliseconds (``--tpot-ms``, ``--slo-ttft-ms``) in seconds: positive and finite, else a
    one-line UserError naming ``what``; None stays None."""
    from ..errors import UserError

    if value is None:
        return None
    if not 0 < value < float("inf"):  # NaN fails both comparisons
        raise UserError(f"{what} {value}: give a positive, finite number of milliseconds")
    return value / 1e3


def one_or_more(value: T | Sequence[T], what: str, single: tuple[type, ...]) -> tuple[T, ...]:
    """An argument that takes several values (``gpus``, ``tp``, ``replicas``, ``disagg``) as a tuple: one value
    of the ``single`` types is a tuple of one; an empty sequence is a UserError (nothing to compare)."""
    from ..errors import UserError

    if isinstance(value, single):
        return (value,)  # type: ignore[return-value]  # one of the single types is a T
    if not isinstance(value, Sequence):
        raise UserError(f"{what}: give one value or a list of them, not {shown(value)} ({type(value).__name__})")
    if not value:
        raise UserError(f"{what}: give at least one value")
    return tuple(value)


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

def gpu(id_or_path: str | os.PathLike[str] | GPU) -> GPU:
    """A GPU spec by id, alias or YAML path (``rooflinectl hardware list``); a spec is itself."""
    from ..specs.hardware import GPU, load_gpu

    return id_or_path if isinstance(id_or_path, GPU) else load_gpu(name_arg(id_or_path, "gpu"))

def model(id_or_path: str | os.PathLike[str] | Model) -> Model:
    """A model by id, model YAML or a local Hugging Face config.json (``rooflinectl workloads list``); a model is
    itself."""
    from ..specs.model import Model
    from ..specs.models import load_model

    return id_or_path if isinstance(id_or_path, Model) else load_model(name_arg(id_or_path, "model"))


_gpu = gpu  # the functions' ``gpu`` keyword shadows the module's function

def _fusions(fuse: str | Sequence[str] | None) -> list[str] | None:
    """``fuse`` as the scenario's list: a comma-separated string as the command line gives it, or a list."""
    if fuse is None:
        return None
    if not isinstance(fuse, str):
        if isinstance(fuse, Sequence):
            return list(fuse)
        from ..errors import UserError

        raise UserError(f"fuse: give 'qkv,gate_up' or a list of fusions, not {shown(fuse)} ({type(fuse).__name__})")
    from ..specs.load import split_list

    return split_list(fuse, "--fuse")

def step_options(*, model: str | os.PathLike[str] | Model | None = None, dtype: str | None = None,
                 kv_dtype: str | None = None, weight_dtype: str | None = None, act_dtype: str | None = None,
                 group_size: int | None = None,
                 attention: str | None = None, causal: bool | None = None,
                 fuse: str | Sequence[str] | None = None, experts_touched: int | None = None,
                 **unknown: Any) -> dict[str, Any]:
    """The options every step shares, as :func:`specs.scenario.resolve_workload`'s overrides (None: the
    scenario's). A keyword that is none of them is a UserError naming them."""
    if unknown:
        from ..errors import UserError

        raise UserError(f"unknown keyword {', '.join(map(repr, unknown))} (beyond the function's own, a step's "
                        "options: model, dtype, kv_dtype, weight_dtype, act_dtype, group_size, attention, causal, "
                        "fuse, experts_touched)")
    check_numbers(dict(group_size=group_size, experts_touched=experts_touched), {}, dict(causal=causal))
    if isinstance(model, os.PathLike):
        model = name_arg(model, "model")
    return dict(model=model, dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype, act_dtype=act_dtype,
                group_size=group_size, attention=attention, causal=causal, fused=_fusions(fuse),
                experts_touched=experts_touched)

def base_workload(**options: Any) -> Workload:
    """The serving commands' model and step options (:func:`step_options`) as a one-token prefill: a request's
    steps are this with their own sizes (``engine.generate.step_workload``)."""
    from ..specs.scenario import resolve_workload

    return resolve_workload("prefill", batch=1, seq_len=1, **step_options(**options))
