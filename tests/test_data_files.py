"""Every bundled workload, model and GPU file loads and analyzes; a saved scenario round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import list_gpus, load_gpu
from rooflinectl.specs.models import load_model, model_from_hf_config
from rooflinectl.specs.scenario import (
    load_scenario,
    resolve_workload,
    scenario_from_workload,
    workload_from_scenario,
)

ROOT = Path(__file__).parent.parent
SCENARIOS = sorted(p.stem for p in (ROOT / "workloads").glob("*.yaml"))
MODELS = sorted(p.stem for p in (ROOT / "workloads" / "models").glob("*.yaml"))
GPUS = sorted(p.stem for p in (ROOT / "hardware").glob("*.yaml"))


def test_the_required_files_exist():
    assert {"decode", "prefill", "attention"} <= set(SCENARIOS)
    assert {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b"} <= set(MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_model_file_loads_with_a_source_and_its_id_is_its_name(model):
    m = load_model(model)
    assert m.id == model
    assert m.source
    assert m.head_dim * m.num_heads == m.q_dim


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_on_every_gpu(scenario, gpu):
    g = load_gpu(gpu)
    w = workload_from_scenario(load_scenario(scenario))
    if w.dtype not in g.compute.tensor_tflops:
        with pytest.raises(UserError, match=f"no tensor-core peak for {w.dtype}"):
            analyze(w, g)
        return
    a = analyze(w, g)
    assert a.totals.time_s > 0
    assert sum(p.share for p in a.placements) == pytest.approx(1.0)
    for p in a.placements:
        assert p.attainable_flops <= p.peak_flops * (1 + 1e-12)


@pytest.mark.parametrize("model", MODELS)
def test_every_model_decodes(model):
    a = analyze(resolve_workload("decode", model=model), load_gpu("h100"))
    # Decode at batch 1 is memory-bound in every linear layer.
    assert all(p.bound == "memory" for p in a.placements if p.name.endswith("_proj"))


def test_list_gpus_matches_the_files():
    assert sorted(g.id for g in list_gpus()) == GPUS


def test_saved_scenario_round_trips(tmp_path):
    w = resolve_workload("prefill", model="mistral-7b", batch=3, seq_len=777, attention="naive", fused=["qkv"])
    path = tmp_path / "saved.yaml"
    path.write_text(yaml.safe_dump(scenario_from_workload(w).model_dump(exclude_none=True)))
    assert resolve_workload(str(path)) == w


def test_saved_scenario_inlines_a_model_from_a_config(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8, '
                   '"intermediate_size": 1024, "vocab_size": 1000}')
    w = resolve_workload("decode", model=str(cfg))
    assert w.model == model_from_hf_config(cfg)
    path = tmp_path / "saved.yaml"
    path.write_text(yaml.safe_dump(scenario_from_workload(w).model_dump(exclude_none=True)))
    assert resolve_workload(str(path)) == w


def test_user_hardware_folder_is_searched(tmp_path, monkeypatch):
    text = (ROOT / "hardware" / "h100-sxm.yaml").read_text()
    text = text.replace("id: h100-sxm", "id: my-gpu").replace("aliases: [h100, h100-sxm5]", "aliases: [mine]")
    (tmp_path / "my-gpu.yaml").write_text(text)
    monkeypatch.setenv("ROOFLINECTL_HARDWARE_PATH", str(tmp_path))
    assert load_gpu("mine").id == "my-gpu"
    assert load_gpu("h100").id == "h100-sxm"


def test_a_users_alias_does_not_take_a_bundled_gpus_name_unseen(tmp_path, monkeypatch):
    # A file of the user's with its own id but the alias "h100": --gpu h100 would have run on it with no word.
    text = (ROOT / "hardware" / "h100-sxm.yaml").read_text()
    text = text.replace("id: h100-sxm", "id: my-gpu").replace("aliases: [h100, h100-sxm5]", "aliases: [h100, mine]")
    (tmp_path / "my-gpu.yaml").write_text(text)
    monkeypatch.setenv("ROOFLINECTL_HARDWARE_PATH", str(tmp_path))
    with pytest.raises(UserError, match="'h100' is both .*h100-sxm.yaml and an alias in .*my-gpu.yaml"):
        load_gpu("h100")
    assert load_gpu("mine").id == "my-gpu" and load_gpu("h100-sxm").id == "h100-sxm"
    # A file with the bundled GPU's own id replaces it on purpose, as the user's folders shadow the bundled one.
    (tmp_path / "my-gpu.yaml").write_text(text.replace("id: my-gpu", "id: h100-sxm").replace("[h100, mine]",
                                                                                              "[h100]"))
    from rooflinectl.specs.hardware import _catalog

    assert load_gpu("h100").id == "h100-sxm" and _catalog()["h100"] == tmp_path / "my-gpu.yaml"


DATA_FILES = sorted([*(ROOT / "hardware").glob("*.yaml"), *(ROOT / "workloads").rglob("*.yaml")])


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_c_and_python_yaml_loaders_read_every_data_file_alike(path):
    from rooflinectl.specs.load import SAFE_LOADER, pure_python_loader, read_yaml

    ours = read_yaml(path, SAFE_LOADER)
    assert read_yaml(path, pure_python_loader()) == ours
    # and no bundled file depends on the YAML 1.2 scalars: PyYAML's YAML 1.1 reads each one the same
    assert read_yaml(path, yaml.SafeLoader) == ours


def test_every_gpu_loads_the_same_with_the_pure_python_loader(monkeypatch):
    from rooflinectl.specs import load

    fast = list_gpus()
    monkeypatch.setattr(load, "SAFE_LOADER", load.pure_python_loader())
    assert list_gpus() == fast
