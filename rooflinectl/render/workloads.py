"""The bundled scenarios and models as rich tables, and one of them in full (``workloads list`` and ``show``).
Formats; every derived figure (parameters, the KV cache a token adds, weight bytes by format) is the engine's
own function (``engine.footprint``, ``Model.parameter_count``), called here and never restated."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..engine.footprint import (
    kv_cache_bytes_per_token,
    kv_cache_bytes_per_token_past_window,
    recurrent_state_bytes,
    weight_bytes_by_format,
)
from ..specs.dtypes import DEFAULT_GROUP_SIZE, GROUPED_WEIGHT_DTYPES, DType
from ..specs.model import Model
from ..specs.scenario import Scenario
from ..units import billions, binary_size
from .console import print_table


def scenarios_table(scenarios: dict[str, Scenario]) -> Table:
    t = Table(title="Scenarios (rooflinectl analyze NAME)", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False, collapse_padding=True)
    for col in ("name", "phase", "model", "batch", "seq_len", "context", "dtype", "attention"):
        t.add_column(col, no_wrap=True)
    for name, s in scenarios.items():
        model = s.model if isinstance(s.model, str) else s.model.id
        # Names from the user's files are Text: never markup.
        t.add_row(Text(name), s.phase, Text(model), str(s.batch), str(s.seq_len or "-"), str(s.context or "-"),
                  s.dtype, s.attention)
    return t


def mlp_text(model: Model) -> str:
    """The MLP column: the dense width, or an MoE model's 'top-k of E×I_e' (its dense layers' width after)."""
    moe = model.moe
    if moe is None:
        return str(model.intermediate_size)
    text = f"top-{moe.experts_per_token} of {moe.num_experts}×{moe.expert_intermediate_size}"
    if moe.num_shared_experts:
        text += f" +{moe.num_shared_experts} shared"
    if moe.first_dense_layers:
        text += f", {moe.first_dense_layers} dense {model.intermediate_size}"
    return text


def models_table(models: list[Model]) -> Table:
    """One row per model; ``params`` is the model's own ``parameter_count()`` (every expert), ``active`` its
    ``active_parameter_count()`` (the weights one token uses)."""
    m = Table(title="Models (--model ID)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
              collapse_padding=True)
    for col in ("id", "params", "active", "hidden", "layers", "heads/kv", "mlp", "vocab"):
        m.add_column(col, no_wrap=True, justify="left" if col == "id" else "right")
    for model in models:
        m.add_row(Text(model.id), billions(model.parameter_count()),
                  billions(model.active_parameter_count()), str(model.hidden_size),
                  str(model.num_layers), f"{model.num_heads}/{model.num_kv_heads}", mlp_text(model),
                  str(model.vocab_size))
    return m


def attention_pattern(model: Model) -> str:
    """The layers' attention in words: 'full', '52 sliding (window 1024), 10 full', '36 chunked (chunks of
    8192), 12 full (NoPE)' or '36 linear (Gated DeltaNet, a fixed state), 12 full'."""
    if model.sliding_window is None and model.attention_chunk_size is None and model.linear_attention is None:
        return "full"
    parts = [f"{n} {kind} ({what})" for kind, n, what in (
        ("linear", model.attention_layers("linear"), "Gated DeltaNet, a fixed state"),
        ("sliding", model.sliding_layers, f"window {model.sliding_window}"),
        ("chunked", model.attention_layers("chunked"), f"chunks of {model.attention_chunk_size}")) if n]
    full = model.attention_layers("full")
    if full:
        parts.append(f"{full} full" + (" (NoPE)" if model.nope_full_layers else ""))
    return ", ".join(parts)


def layer_pattern(model: Model) -> str:
    """The layers in words: '32 dense', '48 MoE (top-8 of 128 experts of width 768)', '3 dense (MLP 18432),
    then 58 MoE (…, + 1 shared expert of width 2048)'; ', q/k RMSNorm per head' and the latent attention where
    the model has them, and the attention's sliding and full layers where it has a window."""
    moe = model.moe
    norm = ""
    if model.qk_norm:
        norm = ", q/k RMSNorm over the whole Q and K" if model.qk_norm_per_layer else ", q/k RMSNorm per head"
    if model.mla is not None:
        norm += (f", latent attention (MLA: {model.mla.kv_lora_rank} + {model.mla.qk_rope_head_dim} cached values a "
                 f"token and layer)")
    if model.sliding_window is not None or model.attention_chunk_size is not None or model.linear_attention:
        norm += f"; attention: {attention_pattern(model)}"
    if moe is None:
        return f"{model.num_layers} dense (MLP {model.intermediate_size}){norm}"
    experts = f"top-{moe.experts_per_token} of {moe.num_experts} experts of width {moe.expert_intermediate_size}"
    if moe.num_shared_experts:
        each = moe.shared_expert_intermediate_size or moe.expert_intermediate_size
        experts += f", + {moe.num_shared_experts} shared expert{'s' if moe.num_shared_experts > 1 else ''} of " \
                   f"width {each}"
    dense = f"{model.dense_layers} dense (MLP {model.intermediate_size}), then " if model.dense_layers else ""
    if moe.moe_every > 1:
        dense = f"{model.dense_layers} dense (MLP {model.intermediate_size}) and, every {moe.moe_every} layers, "
    return f"{dense}{model.moe_layers} MoE ({experts}){norm}"


# The KV cache's data type that ``workloads show`` states a token's bytes in: the scenarios' default dtype.
KV_DTYPE: DType = "bf16"


def model_json(model: Model) -> dict[str, Any]:
    """``workloads show MODEL --json``: the model's fields, and what follows from them (the engine's, computed,
    not typed): its parameters in all and those one token uses, its layers by kind, the KV cache one token adds
    (all layers, in KV_DTYPE) and its weights' bytes by format (bf16, and the checkpoint's own if quantized)."""
    return {
        **model.model_dump(),
        "parameters": {"total": model.parameter_count(), "active_per_token": model.active_parameter_count()},
        "layers": {"dense": model.dense_layers, "moe": model.moe_layers, "sliding": model.sliding_layers,
                   "linear": model.attention_layers("linear")},
        # The layers that hold a KV cache (all but the linear ones), and the fixed state a sequence holds in the
        # linear layers whatever its length (0 without any).
        "kv_cache": {"dtype": KV_DTYPE, "bytes_per_token": kv_cache_bytes_per_token(model, KV_DTYPE),
                     "layers": kv_layers(model),
                     "recurrent_state_bytes_per_sequence": recurrent_state_bytes(model, KV_DTYPE)},
        "weight_bytes": weight_bytes_by_format(model),
    }


def kv_layers(model: Model) -> int:
    """The layers that hold a KV cache: every attention layer; a linear (recurrent) layer holds a fixed state."""
    return model.num_layers - model.attention_layers("linear")


def memory_lines(model: Model) -> list[str]:
    """The KV cache a token adds, the fixed recurrent state where the model has linear layers, and the weights'
    bytes, for ``workloads show``: '131,072 B (128 KiB) per token, all 32 layers, bf16'; '24,576 B (24 KiB), the
    12 full layers of 48 (the 36 linear layers hold a fixed state instead), bf16'; '16,060,522,496 B (15 GiB) in
    bf16'."""
    kv = kv_cache_bytes_per_token(model, KV_DTYPE)
    weights = []
    for fmt, n in weight_bytes_by_format(model).items():
        what = fmt if fmt not in GROUPED_WEIGHT_DTYPES else f"{fmt} g{model.group_size or DEFAULT_GROUP_SIZE}"
        own = " (the checkpoint's format)" if fmt == model.weight_dtype else ""
        weights.append(f"{n:,} B ({binary_size(n)}) in {what}{own}")
    linear = model.attention_layers("linear")
    held = (f"all {model.num_layers} layers" if not linear else
            f"the {kv_layers(model)} attention layers of {model.num_layers} (the {linear} linear layers hold a fixed "
            f"state instead)")
    kv_line = f"KV cache per token: {kv:,} B ({binary_size(kv)}), {held}, {KV_DTYPE}"
    past = kv_cache_bytes_per_token_past_window(model, KV_DTYPE)
    if past == 0:
        kv_line += (f", up to {model.sliding_window:,} positions; none beyond (every layer slides: it holds its "
                    f"last {model.sliding_window:,})")
    elif past is not None and past != kv:
        kv_line += (f", up to {model.sliding_window:,} positions; then {past:,} B ({binary_size(past)}) a token "
                    f"(the {model.sliding_layers} sliding layers hold their last {model.sliding_window:,})")
    state = recurrent_state_bytes(model, KV_DTYPE)
    recurrent = ([f"recurrent state per sequence: {state:,} B ({binary_size(state)}), the {linear} linear layers' "
                  f"(convolution window and state matrix), whatever the length, {KV_DTYPE}"] if state else [])
    return [kv_line, *recurrent, f"weights: {'; '.join(weights)}"]


# The models table's columns a narrow terminal drops first, in this order (``render.console.print_table``): the
# MLP in words is the widest, and ``workloads show ID`` gives it and the rest of each model.
MODEL_OPTIONAL_COLUMNS = ("mlp", "vocab", "heads/kv", "hidden")


def print_catalog(console: Console, scenarios: dict[str, Scenario], models: list[Model]) -> None:
    """``workloads list``: the scenarios, then the models, no name or number cut at the console's width."""
    print_table(console, scenarios_table(scenarios))
    print_table(console, models_table(models), MODEL_OPTIONAL_COLUMNS)


def catalog_json(scenarios: dict[str, Scenario], models: list[Model]) -> dict[str, Any]:
    return {
        "scenarios": {name: s.model_dump() for name, s in scenarios.items()},
        "models": [m.model_dump() for m in models],
    }


def spec_json(spec: Scenario | Model) -> dict[str, Any]:
    """``workloads show --json``: a scenario's fields, or :func:`model_json`."""
    return model_json(spec) if isinstance(spec, Model) else spec.model_dump()


def spec_view(spec: Scenario | Model) -> str:
    """``workloads show``: the scenario or model as the YAML that would define it (fields left unset omitted);
    under a model, as YAML comments, its parameters (in all and per token for a mixture of experts), its layers,
    the KV cache one token adds and its weights' bytes (``memory_lines``)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        """Lists of plain values in flow style: a layer pattern reads as one line, [sliding, sliding, full]."""

    def flow_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
        flow = all(isinstance(x, (str, int, float, bool)) for x in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    Dumper.add_representer(list, flow_list)
    text = yaml.dump(spec.model_dump(exclude_none=True), Dumper=Dumper, sort_keys=False).rstrip()
    if isinstance(spec, Model):
        if spec.moe is not None:
            text += (f"\n# parameters: {spec.parameter_count():,} in all (every expert, held in memory)"
                     f"\n# active per token: {spec.active_parameter_count():,}")
        else:
            text += f"\n# parameters: {spec.parameter_count():,}"
        text += f"\n# layers: {layer_pattern(spec)}"
        text += "".join(f"\n# {line}" for line in memory_lines(spec))
    return text + "\n"
