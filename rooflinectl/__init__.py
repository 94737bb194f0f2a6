"""rooflinectl: roofline analysis of LLM inference. The Python API is :mod:`rooflinectl.api`, reachable from the
package itself (``import rooflinectl as rl; rl.analyze("decode", gpu="h100")``); importing the package loads
nothing until a name of it is used, so that it stays as light as the command line's start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import (
        CompareResult,
        GenerateResult,
        Seqs,
        ServeResult,
        StepResult,
        analyze,
        analyze_step,
        compare,
        generate,
        gpu,
        model,
        serve,
    )
    from .errors import UserError

__all__ = ["CompareResult", "GenerateResult", "Seqs", "ServeResult", "StepResult", "UserError", "analyze",
           "analyze_step", "compare", "generate", "gpu", "model", "serve"]


def __getattr__(name: str) -> Any:
    """The API's names, imported on first use (PEP 562)."""
    if name == "UserError":
        from .errors import UserError

        return UserError
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'rooflinectl' has no attribute {name!r}")
