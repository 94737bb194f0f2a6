"""Pipeline stages that hold different kinds of layer (engine/parallel/stages.py): the memory figures are the
heaviest stage's, derived by hand here, and a layout note says which stage and why."""

from __future__ import annotations

import json

import yaml

from helpers import cli
from rooflinectl.engine.count.resident import weight_footprint_bytes
from rooflinectl.engine.parallel import Layout
from rooflinectl.engine.roofline import analyze
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.load import validate
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload

KV_PER_LAYER_TOKEN = 2 * 8 * 128 * 2  # Llama 3 8B: K and V, 8 KV heads of 128, bf16: 4,096 bytes


def _pattern_model(tmp_path) -> str:
    """Llama 3 8B cut to 28 layers of the pattern (full, sliding, sliding, full, full), window 1,024. Over 4
    stages of 7 (layer j has entry j mod 5): stage 0 holds layers 0–6 (F S S F F F S: 4 full), stage 1 7–13
    (S F F F S S F: 4), stage 2 14–20 (F F S S F F F: 5), stage 3 21–27 (S S F F F S S: 3). The counts over
    the 4 stages average to stage 0's 4 × 4 = 16 full layers, but stage 2 holds one full layer more."""
    m = yaml.safe_load(load_model("llama-3-8b").model_dump_json())
    m.update(id="pp-pattern", num_layers=28, sliding_window=1024,
             layer_pattern=["full", "sliding", "sliding", "full", "full"])
    path = tmp_path / "pp-pattern.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in m.items() if v is not None}, sort_keys=False))
    return str(path)


def test_stages_that_average_out_are_priced_at_the_heaviest(tmp_path):
    model = _pattern_model(tmp_path)
    run = {c: json.loads(cli("analyze", "decode", "--gpu", "h100", "--model", model, "--pp", "4", "--batch", "8",
                             "--context", str(c), "--json").stdout) for c in (1024, 8192)}
    # At 1,024 positions every layer holds 1,024 (the window); at 8,192 the stage holds 8,192 in each full layer:
    # stage 2's 5, not stage 0's 4. The weights are the same (every stage 7 layers, the same table).
    grown = run[8192]["totals"]["memory_bytes"] - run[1024]["totals"]["memory_bytes"]
    assert grown == 8 * 5 * (8192 - 1024) * KV_PER_LAYER_TOKEN == 1_174_405_120
    notes = run[8192]["parallel"]["notes"]
    assert any("memory is the heaviest stage's, stage 2" in n and "5 full, 2 sliding" in n
               and "stage 0: 4 full, 3 sliding" in n for n in notes), notes


def test_stages_alike_keep_stage_zero_and_say_nothing(tmp_path):
    # Llama 3 70B at PP 2: 40 full layers each; no note on the stages.
    a = analyze(resolve_workload("decode", model="llama-3-70b", batch=8, context=1024), load_gpu("h100"),
                layout=Layout(pp=2))
    assert not any("different layers" in n for n in a.layout_notes)


def test_first_dense_layers_put_the_heaviest_stage_after_the_first():
    """DeepSeek-V2-Lite (27 layers, the first dense) at PP 3: stage 0 holds the dense layer and 8 MoE layers,
    stages 1 and 2 nine MoE layers, the first of those the heaviest. An MoE layer holds 64 + 2 shared experts of
    3·2048·1408 and the router's 64×2048 where the dense layer holds 3·2048·10944, in bf16."""
    moe = (64 + 2) * 3 * 2048 * 1408 + 64 * 2048
    dense = 3 * 2048 * 10944
    w = resolve_workload("decode", model="deepseek-v2-lite", batch=8, context=1024)
    a = analyze(w, load_gpu("h100"), layout=Layout(pp=3))
    m = load_model("deepseek-v2-lite")
    stage0 = validate(Model, {**m.model_dump(), "num_layers": 9}, "test")
    first = weight_footprint_bytes(w.model_copy(update={"model": stage0}))
    untied_table = 102_400 * 2048 * 2  # the embedding, on stage 0 alone: not on the LM head's stage
    assert a.totals.weight_footprint_bytes - (first - untied_table) == (moe - dense) * 2
    assert any("stage 1" in n and "9 MoE full" in n for n in a.layout_notes), a.layout_notes
