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
from rooflinectl import api as rl_api

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


@pytest.mark.parametrize(("call", "named"), [
    (lambda: rl.analyze("decode", gpu=None), "gpu: give a GPU id"),
    (lambda: rl.analyze("decode", gpu=5), "not 5 (int)"),
    (lambda: rl.analyze(42), "workload: give a phase"),
    (lambda: rl.model(42), "model: give a model id"),
    (lambda: rl.analyze("decode", gpu="a100", fuse=5), "fuse: give"),
    (lambda: rl.analyze_step(gpu="h100", seqs=[(1, 1, 5)]), "seqs: give each group as Seqs"),
    (lambda: rl.compare(gpus=[], prompt=64, output=8), "gpus: give at least one"),
    (lambda: rl.compare(gpus=["h100"], disagg=(1, 1, 1)), "disagg 1: give 'P:D'"),
    (lambda: rl.compare(gpus=["h100"], prompt=64, output=8, concurrency=1.5), "concurrency: give an integer"),
    (lambda: rl.compare(gpus=["h100"], prompt=64, output=8, tpot_ms="20"), "tpot_ms: give a number"),
    (lambda: rl.generate(gpu="h100", prompt=64, output=8, batch=True), "batch: give an integer, not True"),
    (lambda: rl.generate(gpu="h100", prompt=64, output=8, reserve_gib="2"), "reserve_gib: give a number"),
    (lambda: rl.serve(gpu="h100", concurrency=1.5, prompt=64, output=8), "concurrency: give an integer"),
    (lambda: rl.serve(gpu="h100", concurrency=1, requests="2", prompt=64, output=8), "requests: give an integer"),
    (lambda: rl.serve(gpu="h100", concurrency=1, requests=2, prompt=64, output=8, stack=3), "stack: give"),
    (lambda: rl.serve(gpu="h100", trace=5), "trace: give a trace file's path"),
    (lambda: rl.serve(gpu="h100", concurrency=1, requests=2, prompt=64, output=8, slo_ttft_ms="9"),
     "slo_ttft_ms: give a number"),
    (lambda: rl.serve(gpu="h100", requests=2, prompt=64, output=8, block_size=None), "block_size: give an integer"),
    (lambda: rl.serve(gpu="h100", requests=2, prompt=64, output=8, seed=None), "seed: give an integer, not None"),
    (lambda: rl.serve(gpu="h100", requests=2, prompt=64, output=8, chunked_prefill="no"),
     "chunked_prefill: give True or False, not 'no'"),
    # A truthy string must not switch the measured roofs on.
    (lambda: rl.analyze("decode", calibrated="no"), "calibrated: give True or False, not 'no'"),
    (lambda: rl.analyze_step(seqs="16x1", calibrated=1), "calibrated: give True or False, not 1 (int)"),
    (lambda: rl_api.curves(gpus=["h100"], output=4, calibrated="no"), "calibrated: give True or False, not 'no'"),
    (lambda: rl_api.curves(gpus=["h100"], output=4, chunked_prefill="no"), "chunked_prefill: give True or False"),
    (lambda: rl_api.curves(gpus=["h100"], output=4, prompt=None), "prompt: give an integer, not None"),
    (lambda: rl.serve(gpu="h100", requests=2, prompt=64, output=4, spec=123, accept=0.5), "spec: give"),
    (lambda: rl.serve(gpu="h100", requests=2, prompt=64, output=4, spec="ngram:2", accept=[0.5]), "accept: give"),
    (lambda: rl.serve(gpu="h100", requests=2, prompt=64, output=4, progress=5), "progress: give a function"),
    (lambda: rl.Seqs.parse(None), "Seqs.parse: give a text"),
    (lambda: rl.analyze("decode", batch="4"), "batch: give an integer, not '4'"),
    (lambda: rl.analyze("decode", tp=2.0), "tp: give an integer"),
    (lambda: rl.analyze("decode", causal="yes"), "causal: give True or False"),
    (lambda: rl.analyze("decode", group_size="x"), "group_size: give an integer"),
    (lambda: rl.analyze_step(seqs=None), "seqs: give Seqs(count, new, cached), 'COUNTxNEW@CACHED' or a list"),
    (lambda: rl.analyze_step(seqs=5), "not 5 (int)"),
    (lambda: rl.analyze("decode", bogus=1), "unknown keyword 'bogus' (beyond the function's own"),
    (lambda: rl.generate(prompt=64, output=8, bogus=1), "unknown keyword 'bogus'"),
    # A spec's repr runs to thousands of characters: the message cuts it.
    (lambda: rl.analyze("decode", gpu=rl.model("llama-3-8b")), "not Model(id='llama-3-8b'"),
])
def test_a_wrong_type_is_a_user_error_naming_the_argument(call, named):
    # A notebook passes Python values the command line's parser never would: each is the one-line UserError.
    with pytest.raises(rl.UserError) as error:
        call()
    assert named in str(error.value)
    assert "\n" not in str(error.value) and len(str(error.value)) < 240


def test_a_spec_given_to_gpu_or_model_is_itself():
    h100 = rl.gpu("h100")
    assert rl.gpu(h100) is h100
    llama = rl.model("llama-3-8b")
    assert rl.model(llama) is llama


def test_one_value_stands_for_a_list_of_one_and_a_path_for_its_name():
    one = rl.compare(gpus="h100", model="llama-3-8b", prompt=512, output=32, batch=4, tp=2, replicas=1)
    listed = rl.compare(gpus=["h100"], model="llama-3-8b", prompt=512, output=32, batch=4, tp=[2], replicas=[1])
    assert one.to_dict() == listed.to_dict()
    pair = rl.compare(gpus=["h100"], model="llama-3-8b", prompt=512, output=32, concurrency=2, requests=4,
                      disagg=(1, 1))
    text = rl.compare(gpus=["h100"], model="llama-3-8b", prompt=512, output=32, concurrency=2, requests=4,
                      disagg="1:1")
    assert pair.to_dict() == text.to_dict()
    by_path = rl.analyze("decode", gpu=ROOT / "hardware" / "a100-80gb.yaml", model=ROOT / "workloads" / "models" /
                         "llama-3-8b.yaml")
    by_name = rl.analyze("decode", gpu="a100-80gb", model="llama-3-8b")
    assert by_path.totals == by_name.totals
    assert rl.analyze_step(gpu="h100", seqs="4x1@10").to_dict() == rl.analyze_step(gpu="h100",
                                                                                  seqs=["4x1@10"]).to_dict()
