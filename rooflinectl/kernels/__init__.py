"""Triton kernels that `measure` runs; `registry` finds them by name without importing torch or triton."""
