"""Every command's output goes through the one formatter (rooflinectl.units): no raw float with more than four
significant digits and no exponent ("71743.13 GB", "500000000015.0 GiB", "1.98e+03") anywhere a reader looks.

Whole numbers with thousands separators (32,768 · 10,393 tokens/s) are counts and pass; so do the sources the
YAML files quote (a datasheet's "1307.4 TFLOPS" is its own words, shown as the citation it is)."""

from __future__ import annotations

import itertools
import re

import pytest

from helpers import cli

# A number with a decimal point or an exponent, not part of a word or a version (580.159.04, sm_90a, 2412.19437
# are cut out of citations below, not here).
NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])")


def raw_floats(text: str) -> list[str]:
    """The numbers of ``text`` that no formatter of units would print: an exponent, or more than 4 significant
    digits after a decimal point."""
    bad = []
    for token in NUMBER.findall(text):
        digits = token.replace(",", "").replace(".", "").lstrip("0")
        if "e" in token.lower() or len(digits) > 4:
            bad.append(token)
    return bad


def prose(text: str) -> str:
    """The output without the citations, which are given as their authors wrote them: a paragraph that starts
    with "[n]", "source" or "Source", and a footnote ("†1 HBM size — derived: …", "≈3 …") or a model's "source:" up
    to the next blank line, "field: value" line or "# …" line."""
    paragraphs = re.split(r"\n\s*\n", text)
    kept = [p for p in paragraphs if not re.match(r"\s*(\[\d+\]|source|Source)", p)]
    lines, in_note = [], False
    for line in "\n\n".join(kept).splitlines():
        if re.match(r"(†|≈|\[)\d+|source: ", line):
            in_note = True
        elif not line.strip() or re.match(r"[A-Za-z][\w /]*: |#", line):
            in_note = False
        if not in_note:
            lines.append(line)
    return "\n".join(lines)


def test_the_check_catches_the_issues_examples():
    """Issue 19's examples fail the check; their formatted forms pass."""
    for text in ("Naive attention moves 71743.13 GB", "Time to first token: 71700.93 ms", "holds 500000000015.0 GiB",
                 "compute 1.98e+03", "1,978.9 TFLOP/s"):
        assert raw_floats(text), text
    for text in ("moves 71.7 TB", "3.22 s", "1,250 GiB", "compute 1,979", "0.0263 tokens/s", "10,393 tokens/s"):
        assert not raw_floats(text), text


GPUS = ["a100", "h100", "h200", "mi300x", "l4"]
MODELS = ["llama-3-8b", "deepseek-v3", "gpt-oss-120b", "gemma-3-27b", "mixtral-8x7b", "llama-3-70b"]


def _commands() -> list[list[str]]:
    cmds = []
    for gpu, model in itertools.product(GPUS, MODELS):
        for phase in ("decode", "prefill", "attention", "generate"):
            cmds.append(["analyze", phase, "--gpu", gpu, "--model", model])
        cmds.append(["analyze", "attention", "--gpu", gpu, "--model", model, "--attention", "naive",
                     "--seq-len", "8192"])
        cmds.append(["analyze", "decode", "--gpu", gpu, "--model", model, "--batch", "256", "--context", "8192"])
    cmds.append(["analyze", "decode", "--gpu", "h100", "--dtype", "fp8", "--batch", "256"])
    cmds.append(["analyze", "generate", "--gpu", "h200", "--model", "llama-3-70b", "--prompt", "8192",
                 "--output", "4096", "--batch", "1"])
    for model in MODELS:
        cmds.append(["compare", "--gpu", "a100", "--gpu", "h100", "--gpu", "h200", "--gpu", "mi300x",
                     "--model", model])
        cmds.append(["workloads", "show", model])
    # every bundled GPU, the parts without SM-level figures too (their occupancy is a one-line refusal)
    from rooflinectl.specs.hardware import list_gpus, load_gpu

    shown = {load_gpu(g).id for g in GPUS}
    for gpu in [*GPUS, *(g.id for g in list_gpus() if g.id not in shown)]:
        cmds.append(["hardware", "show", gpu])
        cmds.append(["occupancy", "--gpu", gpu, "--threads", "256", "--regs", "64", "--smem", "48KiB",
                     "--grid", "1000"])
        cmds.append(["occupancy", "--gpu", gpu, "--threads", "1024", "--regs", "64", "--grid", "7"])
    cmds += [["hardware", "list"], ["workloads", "list"], ["workloads", "show", "decode"]]
    return cmds


@pytest.mark.parametrize("args", _commands(), ids=" ".join)
def test_no_raw_float_in_any_output(args):
    result = cli(*args)
    # A refusal (a model too large for one GPU in `generate`) is a one-line message: checked as prose too.
    text = result.stdout if result.exit_code == 0 else result.stderr
    assert result.exit_code in (0, 2), result.output
    assert raw_floats(prose(text)) == [], text
