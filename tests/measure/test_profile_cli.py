"""`rooflinectl profile` through the CLI on the CPU (tiny configs): the table within 100 columns, --json and
--save, plot --measured reading the record, and every bad input as one line and exit code 2."""

from __future__ import annotations

import json
import math
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from helpers import assert_one_line_error, cli  # noqa: E402
from rooflinectl.engine.count.transformer import step_ops  # noqa: E402
from rooflinectl.profile.run import ProfileRequest, workload_of  # noqa: E402

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
        "vocab_size": 128, "max_position_embeddings": 256, "hidden_act": "silu", "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False}
CPU = ["--device", "cpu", "--batch", "1", "--context", "8"]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One CPU thread (test_profile_run.py says why)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "tiny.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def write_config(tmp_path, **changes) -> str:
    path = tmp_path / f"config-{len(list(tmp_path.glob('*.json')))}.json"
    path.write_text(json.dumps({**TINY, **changes}))
    return str(path)


@pytest.fixture(scope="module")
def saved(config, tmp_path_factory):
    """One CPU profile printed as a table and saved."""
    path = tmp_path_factory.mktemp("rec") / "prof.json"
    result = cli("profile", "--model", config, *CPU, "--save", str(path))
    assert result.exit_code == 0, result.output
    return result.stdout, path


def test_the_table_fits_100_columns_and_says_it_is_cpu_time(saved, config):
    out, path = saved
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "CPU time, not a GPU figure" in out
    assert "of the step is in CPU ops the roofline does not count; the largest is" in out
    ops = [o.name for o in step_ops(workload_of(ProfileRequest(model=config, phase="decode", batch=1, context=8,
                                                                device="cpu")))]
    rows = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in ops]
    assert rows[:len(ops)] == ops  # the per-op table lists every engine op, in the engine's order
    assert f"wrote {path}" in out


def test_json_is_the_saved_record(saved, config):
    from rooflinectl.records.profile import load

    _, path = saved
    record = load(path)
    result = cli("profile", "--model", config, *CPU, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "profile" and data["clock"] == "cpu ops"
    assert [o["op"] for o in data["ops"]] == [o.op for o in record.ops]
    parts = [o["measured_s"] or 0.0 for o in data["ops"]] + [k["time_s"] for o in data["ops"] for k in o["overhead"]]
    parts += [k["time_s"] for k in data["unattributed"]]
    assert math.isclose(math.fsum(parts), data["profiled_s"], rel_tol=1e-9)
    assert record.command.startswith("rooflinectl profile --model")


def test_plot_refuses_a_cpu_profile(saved, tmp_path):
    _, path = saved
    result = cli("plot", "decode", "--gpu", "h100", "--measured", str(path), "-o", str(tmp_path / "p.png"))
    assert_one_line_error(result, "ran on the CPU")
    assert not (tmp_path / "p.png").exists()


def test_plot_places_a_gpu_profile_ops_under_the_roofs(saved, tmp_path):
    """A GPU record (the CPU one relabelled: the chart reads the record, not the device) is placed as measured
    points through plot --measured's reader, one an op that ran, each at the op's whole-step count and its
    measured rate (the chart built, not drawn: matplotlib is plot's own tests' cost)."""
    from rooflinectl.plot.build import build_chart
    from rooflinectl.plot.measured import load_measured
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.scenario import resolve_workload

    _, path = saved
    data = json.loads(path.read_text())
    data.update(clock="gpu kernels", device="cuda")
    data["gpu"].update(name="NVIDIA H100 80GB HBM3", spec="h100-sxm")
    gpu_path = tmp_path / "gpu.json"
    gpu_path.write_text(json.dumps(data))
    run = load_measured(gpu_path)
    chart = build_chart([resolve_workload("decode")], [load_gpu("h100")], measured=run)
    points = [m for panel in chart.panels for m in panel.measured]
    drawn = {o["op"]: o for o in data["ops"] if o["measured_s"] and o["flops"] > 0}
    assert {p.op for p in points} == set(drawn) and all(p.kernel == p.op for p in points)
    for p in points:
        o = drawn[p.op]
        assert math.isclose(p.intensity, o["flops"] / o["bytes"], rel_tol=1e-12)
        assert math.isclose(p.flops, o["flops"] / o["measured_s"], rel_tol=1e-12)


def test_a_users_module(tmp_path, monkeypatch, config):
    """--module: the user's nn.Module and inputs, its modules mapped by the same names (no cache: no kv_write)."""
    (tmp_path / "my_tiny_model.py").write_text(
        "import json, torch\n"
        "from transformers import AutoConfig, AutoModelForCausalLM\n"
        "def build(device):\n"
        f"    cfg = json.loads(open({config!r}).read()); kind = cfg.pop('model_type')\n"
        "    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **cfg))\n"
        "    return model, {'input_ids': torch.randint(0, 128, (1, 8))}\n"
        "def wrong(device):\n"
        "    return 42\n"
        "def misfit(device):\n"
        "    return torch.nn.Linear(4, 4), (torch.ones(2, 3),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = cli("profile", "--model", config, "--module", "my_tiny_model:build", "--phase", "prefill",
                 "--seq-len", "8", "--device", "cpu", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    ran = {o["op"] for o in data["ops"] if o["launches"]}
    assert {"q_proj", "attention", "rope", "gate_proj", "act", "lm_head", "attn_residual"} <= ran
    assert "kv_write" not in ran
    result = cli("profile", "--model", config, "--module", "my_tiny_model:wrong", *CPU)
    assert_one_line_error(result, "--module my_tiny_model:wrong", "returned int")
    # A module that fails on its own inputs (a shape) was a 56-line traceback, exit 1.
    result = cli("profile", "--model", config, "--module", "my_tiny_model:misfit", *CPU)
    assert_one_line_error(result, "--module my_tiny_model:misfit: its forward raised RuntimeError")


def test_bad_inputs_are_one_line(tmp_path, config, monkeypatch):
    cases = [
        (["--model", write_config(tmp_path, model_type="foo_llm"), *CPU], "does not know"),
        # transformers accepts it; the engine refuses a context beyond the model's positions, naming the field.
        (["--model", write_config(tmp_path, max_position_embeddings=4), *CPU], "max_position_embeddings"),
        (["--model", write_config(tmp_path, model_type="gemma2", architectures=["Gemma2ForCausalLM"]), *CPU],
         "not this one"),
        (["--model", "mixtral-8x7b", *CPU], "dense Llama-family"),
        (["--model", config, "--device", "cuda"], "no CUDA GPU"),
        (["--model", config, *CPU, "--cuda-graph"], "--cuda-graph needs --device cuda"),
        (["--model", config, *CPU, "--phase", "attention"], "--phase"),
        (["--model", config, *CPU, "--attn-implementation", "flash_attention_2"], "--attn-implementation"),
        (["--model", config, *CPU, "--module", "no_such_package_xyz.model:build"], "cannot import"),
        (["--model", config, *CPU, "--module", "json"], "package.module:function"),
        (["--model", config, *CPU, "--module", "json:no_such_function"], "has no function"),
        # The other phase's length is refused as analyze refuses it, not silently dropped.
        (["--model", config, *CPU, "--seq-len", "99999"], "decode processes one token per sequence"),
        (["--model", config, *CPU, "--phase", "prefill"], "--context applies to decode"),
    ]
    for args, fragment in cases:
        assert_one_line_error(cli("profile", *args), fragment)


def test_without_transformers_it_names_the_extra(monkeypatch, config):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    assert_one_line_error(cli("profile", "--model", config, *CPU), "pip install -e '.[hf]'")


def test_a_model_whose_weights_exceed_the_memory_is_refused_before_it_is_built():
    # Llama 3 8B: 8,030,261,248 parameters, 4 bytes each in the CPU's fp32 = 32.1 GB; 2 in a GPU's bf16.
    from rooflinectl.errors import UserError
    from rooflinectl.profile.build import check_fits
    from rooflinectl.specs.scenario import resolve_workload

    one = resolve_workload("decode", model="llama-3-8b", batch=1, context=64)
    assert one.model.parameter_count() == 8_030_261_248
    with pytest.raises(UserError, match=r"llama-3-8b's weights take 32.1 GB in fp32 and this machine has 20.0 GB"):
        check_fits(one, "cpu", 20 * 10**9)
    with pytest.raises(UserError, match=r"16.1 GB in bf16 and the GPU has 10.0 GB free"):
        check_fits(one, "cuda", 10 * 10**9)
    check_fits(one, "cpu", 33 * 10**9)  # fits: its cache is 64 positions × 131,072 B in fp32, 8.4 MB
    check_fits(one, "cpu", None)  # unknown: not refused
    # The static cache counts too: 64 sequences × 4,096 positions × 32 layers × 2 × 8 KV heads × 128 × 4 B =
    # 68.7 GB in fp32 beside the 32.1 GB of weights (a batch of a million was a torch allocator traceback).
    big = resolve_workload("decode", model="llama-3-8b", batch=64, context=4096)
    with pytest.raises(UserError, match=r"weights \(32.1 GB\) and the KV cache of 64 sequences × 4,096 positions "
                                        r"\(68.7 GB\) in fp32 take more than the 80.0 GB this machine has free"):
        check_fits(big, "cpu", 80 * 10**9)
