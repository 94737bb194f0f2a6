"""The Python API: each result's to_dict() is the command's --json, docs/api.md's examples run, and importing the
package loads nothing heavy."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rooflinectl as rl
from helpers import cli

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize(("call", "args"), [
    (lambda: rl.analyze("decode", gpu="a100", model="llama-3-8b", batch=8, context=2048),
     ["analyze", "decode", "--gpu", "a100", "--model", "llama-3-8b", "--batch", "8", "--context", "2048"]),
    (lambda: rl.analyze("prefill", gpu="h100", model="mixtral-8x7b", seq_len=512, fuse="qkv,gate_up", tp=2),
     ["analyze", "prefill", "--gpu", "h100", "--model", "mixtral-8x7b", "--seq-len", "512", "--fuse", "qkv,gate_up",
      "--tp", "2"]),
    (lambda: rl.analyze_step(gpu="h100", seqs=[rl.Seqs(16, 1, 4095), "1x512@1024"], weight_dtype="int4"),
     ["analyze", "step", "--gpu", "h100", "--seqs", "16x1@4095", "--seqs", "1x512@1024", "--weight-dtype", "int4"]),
    (lambda: rl.generate(gpu="h200", model="llama-3-8b", prompt=1024, output=64, batch=4),
     ["analyze", "generate", "--gpu", "h200", "--model", "llama-3-8b", "--prompt", "1024", "--output", "64",
      "--batch", "4"]),
    (lambda: rl.compare(gpus=["a100", "h100"], model="llama-3-8b", prompt=512, output=32, tpot_ms=20),
     ["compare", "--gpu", "a100", "--gpu", "h100", "--model", "llama-3-8b", "--prompt", "512", "--output", "32",
      "--tpot-ms", "20"]),
])
def test_to_dict_is_the_commands_json(call, args):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    assert call().to_dict() == json.loads(result.stdout)


def _blocks() -> list[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("code", _blocks(), ids=lambda c: c.splitlines()[2][:40])
def test_the_docs_examples_run(code, capsys):
    exec(compile(code, "docs/api.md", "exec"), {})
    assert capsys.readouterr().out.strip()  # every example prints what it shows


def test_the_docs_show_every_function():
    text = (ROOT / "docs" / "api.md").read_text()
    for name in ("analyze", "analyze_step", "generate", "compare", "serve", "gpu", "model", "Seqs"):
        assert f"rl.{name}(" in text, name


def test_bad_input_is_the_commands_one_line():
    with pytest.raises(rl.UserError) as api_error:
        rl.analyze("decode", gpu="a100", batch=0)
    result = cli("analyze", "decode", "--gpu", "a100", "--batch", "0")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {api_error.value}"


def test_to_pandas_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(rl.UserError, match="pip install pandas"):
        rl.analyze("decode", gpu="a100").to_pandas()


def test_importing_the_package_loads_nothing_heavy():
    code = ("import sys, rooflinectl as rl; rl.analyze('decode', gpu='a100'); "
            "print(' '.join(m for m in ('torch', 'triton', 'matplotlib', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
    bare = "import sys, rooflinectl; print('pydantic' in sys.modules, 'rooflinectl.api' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", bare], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
