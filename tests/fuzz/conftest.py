"""The fuzz tests' one fixture: the heavy libraries imported before any example is timed.

``measure`` and ``calibrate`` import torch and triton before they find that no GPU is there, and ``plot`` imports
matplotlib and loads its fonts; cold, each takes longer than the 5 s one example may (22 s for torch on a loaded
machine), and it is the import, not rooflinectl, that would be timed. A fresh ``rooflinectl plot`` pays it once.
"""

from __future__ import annotations

import importlib
import io

import pytest


@pytest.fixture(scope="session", autouse=True)
def _heavy_imports_done():
    for name in ("torch", "triton"):
        try:
            importlib.import_module(name)
        except ImportError:  # then measure stops at "measure needs torch and triton", at once
            pass
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_xscale("log")
    ax.text(1, 1, "warm $x$")
    for fmt in ("png", "svg", "pdf"):
        fig.savefig(io.BytesIO(), format=fmt)
    plt.close(fig)
