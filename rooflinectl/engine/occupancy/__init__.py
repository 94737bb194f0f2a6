"""Occupancy: how many blocks (programs) and warps of a kernel one SM holds at once, which limit binds, how many
waves a grid takes, and what change would raise it. Pure: a GPU's ``limits`` in, numbers out; no device, no torch.

- ``limits``: the four limits' arithmetic (NVIDIA's CUDA Occupancy Calculator, each rule stated in its
  docstring) and the result types;
- ``calculator``: ``occupancy()``, the checks of the input and each limit's arithmetic in words;
- ``suggest``: what would raise it (bounded searches);
- ``launch``: one Triton launch's anatomy, for the measure harness.
"""

from __future__ import annotations

from .calculator import occupancy
from .launch import Anatomy, launch_anatomy
from .limits import LIMITS, Limit, LimitResult, Occupancy, Suggestion, sub_partitions

__all__ = [
    "LIMITS",
    "Anatomy",
    "Limit",
    "LimitResult",
    "Occupancy",
    "Suggestion",
    "launch_anatomy",
    "occupancy",
    "sub_partitions",
]
