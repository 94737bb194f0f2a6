"""At any width, an analysis table never wraps or cuts an op name or a number: it leaves out columns, and says so."""

from __future__ import annotations

import re

import pytest

from helpers import cli


@pytest.mark.parametrize(("args", "width"), [
    (["analyze", "decode", "--gpu", "a100"], 80),
    (["analyze", "decode", "--gpu", "h200", "--model", "deepseek-v3", "--batch", "64"], 80),
    (["analyze", "step", "--gpu", "h100", "--seqs", "16x1@4095", "--seqs", "1x512@1024"], 64),
    (["analyze", "prefill", "--gpu", "h100", "--model", "gemma-3-27b", "--tp", "2"], 72),
])
def test_piped_tables_keep_every_name_whole(args, width):
    out = cli(*args, env={"COLUMNS": str(width)}).stdout
    full = cli(*args, "--csv").stdout.splitlines()[1:]
    names = [row.split(",")[0] for row in full]
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines)
    rows = [line.split()[0] for line in lines if line.startswith(" ") and line.split()
            and re.match(r"[a-z]", line.split()[0])]
    for name in names:  # each op's row starts with its whole name
        assert name in rows, (name, width)
    assert "…" not in out
    # Below the table's natural width, what was left out is said (the README's first command fits 80 whole).
    assert (f"({width} columns:" in out) == (width < 80 or "deepseek" in " ".join(args))
