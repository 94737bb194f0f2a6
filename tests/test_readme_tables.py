"""README's tables of the bundled models and GPUs say what each file holds: every row is derived here from the
spec it names (its parameters, experts, attention, layer kinds, checkpoint; its memory, bf16 peak, data types below
16 bits, scale-up domain and scale-out network), so a spec that changes changes its README row or fails here."""

from __future__ import annotations

from pathlib import Path

from rooflinectl.specs.hardware import GPU, list_gpus
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import list_models

README = Path(__file__).parents[1] / "README.md"
YES = "✓"
MODEL_HEAD = ("model", "parameters", "experts", "attention", "sparse (DSA)", "sliding", "chunked", "NoPE",
              "Gated DeltaNet", "Mamba-2", "checkpoint")
GPU_HEAD = ("GPU", "HBM", "GB/s", "bf16 TFLOP/s", "below 16 bits", "scale-up domain", "scale-out a GPU")


def model_row(m: Model) -> tuple[str, ...]:
    total, active = m.parameter_count() / 1e9, m.active_parameter_count() / 1e9
    attention = ("MLA" if m.mla else "MHA" if m.num_kv_heads == m.num_heads
                 else f"GQA {m.num_heads}/{m.num_kv_heads}")
    return (m.id, f"{total:,.1f} B" + (f" ({active:,.1f} B active)" if m.moe else ""),
            f"{m.moe.num_experts} × top {m.moe.experts_per_token}" if m.moe else "", attention,
            YES if m.sparse_attention else "", YES if m.sliding_window else "",
            YES if m.attention_chunk_size else "", YES if m.nope_full_layers else "",
            YES if m.linear_attention else "", YES if m.mamba else "", m.weight_dtype or "")


def gpu_row(g: GPU) -> tuple[str, ...]:
    peaks, ic = g.compute.tensor_tflops, g.interconnect
    if ic is None:
        domain = "not stated"
    elif ic.link == "pcie" or ic.scale_up is None:
        domain = f"none ({ic.name})"
    else:
        domain = f"{ic.scale_up.gpus} × {ic.name}"
    out = "not stated" if ic is None or ic.scale_out is None else f"{ic.scale_out.bandwidth_gbit_s:g} Gb/s"
    return (g.id, f"{g.memory.hbm_capacity_gib:g} GiB", f"{g.memory.hbm_bandwidth_gbps:,.0f}",
            f"{peaks['bf16']:,.0f}" if "bf16" in peaks else "—",
            ", ".join(k for k in ("fp8", "fp6", "fp4") if k in peaks), domain, out)


def table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def _block(text: str, first: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(first)
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def test_the_model_table_is_every_bundled_model_as_its_spec_says():
    want = table(MODEL_HEAD, [model_row(m) for m in list_models()])
    assert _block(README.read_text(), want[0]) == want


def test_the_gpu_table_is_every_bundled_gpu_as_its_spec_says():
    want = table(GPU_HEAD, [gpu_row(g) for g in list_gpus()])
    assert _block(README.read_text(), want[0]) == want


def test_a_row_says_what_it_derives():
    """Two rows by hand: DeepSeek-V3.2-Exp (671,877,929,216 parameters, 256 experts, 8 a token, MLA with the
    sparse indexer) and the H200 (139.8 GiB at 4,800 GB/s, 989 dense bf16 TFLOP/s, fp8, 8 GPUs over NVLink 4,
    one 400 Gb/s port a GPU)."""
    models = {m.id: m for m in list_models()}
    gpus = {g.id: g for g in list_gpus()}
    assert model_row(models["deepseek-v3.2-exp"]) == (
        "deepseek-v3.2-exp", "671.9 B (38.4 B active)", "256 × top 8", "MLA", YES, "", "", "", "", "", "")
    assert gpu_row(gpus["h200"]) == ("h200", "139.8 GiB", "4,800", "989", "fp8", "8 × NVLink 4 (18 links)",
                                     "400 Gb/s")
