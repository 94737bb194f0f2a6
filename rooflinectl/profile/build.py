"""The model a profile runs: a Hugging Face model built from a config with random weights, never downloaded; its
static cache filled with random K and V; the step's inputs. torch and transformers are imported inside the
functions: importing this module costs nothing.

The config comes from the user's ``config.json`` (``transformers.AutoConfig.for_model`` on its keys) or, for a
bundled model id, from the rooflinectl Model's fields (:func:`config_from_model`). Nothing is fetched: the
process sets ``HF_HUB_OFFLINE=1`` before transformers is imported, and no hub id is ever passed to it.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine.footprint import kv_cache_bytes_per_token
from ..errors import UserError
from ..files import user_path
from ..specs.dtypes import DType
from ..specs.model import Model
from ..specs.workload import Workload

HF_HINT = "pip install -e '.[hf]'"
# The transformers families whose modules profile.ranges maps onto the engine's ops (LlamaDecoderLayer and its
# kin), each with the Model variants (``Model.variants``) it builds beyond a plain Llama. Every other variant, a
# new Model field included, is refused until a family here is said to build it.
BUILDS: dict[str, tuple[str, ...]] = {"llama": (), "mistral": ("sliding_window",), "qwen2": ("qkv_bias",),
                                      "qwen3": ("qk_norm",)}
MAPPED_TYPES = tuple(BUILDS)
# Variants every family builds: the tied LM head, the position limit, RoPE over the whole head (a rotary_dim of
# head_dim; a partial one is refused); and the multi-token-prediction modules, which no family builds and no step
# runs (they draft for speculation alone).
EVERY_FAMILY_BUILDS = ("tie_embeddings", "max_position_embeddings", "mtp_layers")

def require_transformers() -> str:
    """transformers' version; a UserError saying which extra to install when it (or torch) is missing."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is fetched from the hub, whatever a config names
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserError(f"profile needs torch and transformers (torch is not installed): {HF_HINT} and "
                        f"pip install -e '.[gpu]'") from None
    try:
        import transformers
    except ImportError:
        raise UserError(f"profile needs transformers, which is not installed: {HF_HINT}") from None
    return str(transformers.__version__)


def check_buildable(m: Model, model_type: str | None = None) -> str:
    """The transformers family that builds ``m``: the first of BUILDS that builds all its variants, or
    ``model_type`` (the family a user's config.json names); a UserError naming a variant it does not build."""
    variants = m.variants()
    if m.rotary == m.head_dim:
        variants.pop("rotary_dim", None)  # RoPE over the whole head, as every family rotates
    extra = [name for name in variants if name not in EVERY_FAMILY_BUILDS]
    families = list(BUILDS) if model_type is None else [model_type]
    for family in families:
        if set(extra) <= set(BUILDS[family]):
            return family
    built = {name for family in families for name in BUILDS[family]}
    unbuilt = [name for name in extra if name not in built]
    words = [m.variant_words(name, variants[name]) for name in (unbuilt[:1] or extra)]
    what = words[0] if unbuilt else " with ".join(words) + ", which no one family builds together"
    given = "" if model_type is None else f" (its config's model_type is {model_type})"
    raise UserError(f"profile builds dense Llama-family models ({', '.join(BUILDS)}); {m.id} has {what}{given}")


def config_from_model(m: Model) -> Any:
    """A transformers config with ``m``'s sizes: LlamaConfig, or Qwen2's (Q/K/V biases), Qwen3's (q/k norm),
    Mistral's (a sliding window) where the model has those."""
    from transformers import AutoConfig

    model_type = check_buildable(m)
    keys: dict[str, Any] = dict(
        hidden_size=m.hidden_size, num_hidden_layers=m.num_layers, num_attention_heads=m.num_heads,
        num_key_value_heads=m.num_kv_heads, head_dim=m.head_dim, intermediate_size=m.intermediate_size,
        vocab_size=m.vocab_size, tie_word_embeddings=m.tie_embeddings, hidden_act="silu",
        max_position_embeddings=m.max_position_embeddings or 2**20,
    )
    if model_type == "mistral":
        keys["sliding_window"] = m.sliding_window
    return AutoConfig.for_model(model_type, **keys)


def config_from_json(path_text: str) -> Any:
    """The user's config.json as a transformers config; an architecture transformers does not know, or one whose
    modules profile does not map, is a one-line UserError."""
    from transformers import AutoConfig

    from ..specs.load import read_json

    path = user_path(path_text)
    data = read_json(path, "a config.json")  # malformed, nested too deep, 4,300-digit numbers: one line each
    model_type = data.get("model_type")
    if not isinstance(model_type, str):
        raise UserError(f"{path}: field 'model_type': missing (transformers builds a model by it)")
    from transformers import __version__
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        raise UserError(f"{path}: model_type '{model_type}' is an architecture transformers {__version__} does not "
                        f"know")
    data = {k: v for k, v in data.items() if k not in ("model_type", "transformers_version", "_name_or_path")}
    try:
        config = AutoConfig.for_model(model_type, **data)
    except Exception as err:  # transformers' own validation (a ValueError, or huggingface_hub's strict dataclass's)
        reason = " ".join(str(err).split())
        raise UserError(f"{path}: transformers {__version__} refuses the config: {reason[-200:]}") from None
    if model_type not in MAPPED_TYPES:
        raise UserError(f"{path}: model_type '{model_type}': profile maps the modules of "
                        f"{', '.join(MAPPED_TYPES)} onto the engine's ops, not this one")
    return config


@dataclass
class Built:
    """What a step runs: the module, a function that runs one step, the cache (None for a user's module)."""

    model: Any
    step: Callable[[], Any]
    reset: Callable[[], None]  # put the cache back where the step starts (a no-op without a cache)
    cache: Any = None


def torch_dtype(device: str) -> Any:
    """bf16 on a GPU, fp32 on the CPU (the CPU's matmuls in bf16 are slow and beside the point)."""
    from ..kernels.base import torch_dtype as torch_dtype_of

    return torch_dtype_of(engine_dtype(device))


def engine_dtype(device: str) -> DType:
    """The data type a profile runs in: bf16 on a GPU, fp32 on the CPU (whose bf16 matmuls are emulated)."""
    return "bf16" if device == "cuda" else "fp32"


def available_bytes(device: str) -> int | None:
    """Memory free for the model on ``device``: the GPU's free bytes (torch.cuda.mem_get_info), or the host's
    MemAvailable (Linux's /proc/meminfo: free memory and the page cache it can drop); None where unknown."""
    if device == "cuda":
        import torch

        return int(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_fits(w: Workload, device: str, available: int | None) -> None:
    """A UserError, before anything is built, where the model's weights (every parameter in the profile's dtype:
    fp32 on the CPU, bf16 on a GPU), or they and the static KV cache the step allocates (batch × its positions,
    :func:`decoder_step`), exceed the memory ``available``: the build would be killed, or fail in torch's
    allocator with a traceback. Activations are not counted: a step that fits this may still not run."""
    if available is None:
        return
    m, dtype = w.model, engine_dtype(device)
    weights = m.parameter_count() * (2 if dtype == "bf16" else 4)
    cache = w.batch * w.kv_len * kv_cache_bytes_per_token(m, dtype)
    where = "the GPU has" if device == "cuda" else "this machine has"
    if weights > available:
        raise UserError(f"{m.id}'s weights take {weights / 1e9:,.1f} GB in {dtype} and {where} "
                        f"{available / 1e9:,.1f} GB free: profile a smaller model (a config.json of fewer layers)")
    if weights + cache > available:
        raise UserError(f"{m.id}'s weights ({weights / 1e9:,.1f} GB) and the KV cache of {w.batch:,} sequences × "
                        f"{w.kv_len:,} positions ({cache / 1e9:,.1f} GB) in {dtype} take more than the "
                        f"{available / 1e9:,.1f} GB {where} free: profile a smaller batch or length")


def build_model(config: Any, device: str, attn_implementation: str, seed: int = 0) -> Any:
    """The model with random weights (transformers' own initialisation, seeded), on ``device``, in eval mode."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    dtype = torch_dtype(device)
    kw: dict[str, Any] = {"attn_implementation": attn_implementation}
    # transformers 5 names it dtype (torch_dtype deprecated); 4.x torch_dtype.
    major = int(transformers.__version__.split(".")[0])
    kw["dtype" if major >= 5 else "torch_dtype"] = dtype
    with torch.device(device):
        # transformers' from_config is unannotated.
        model = AutoModelForCausalLM.from_config(config, **kw)  # type: ignore[no-untyped-call]
    return model.to(dtype).eval()


def _cache_positions(cache: Any, position: int) -> None:
    """Set a static cache's write position (transformers 5 keeps it in each layer's ``cumulative_length``, which
    every step advances; 4.x takes ``cache_position`` from the step's inputs instead)."""
    for layer in getattr(cache, "layers", None) or []:
        length: Any = getattr(layer, "cumulative_length", None)
        if hasattr(length, "fill_"):
            length.fill_(position)
        elif isinstance(length, int):
            layer.cumulative_length = position


def decoder_step(model: Any, config: Any, w: Workload, device: str, seed: int = 0) -> Built:
    """One step of ``w`` through ``model``. Decode: a StaticCache of ``context`` positions whose first
    context − 1 hold random K and V (written through the cache's own ``update``), then batch new tokens at
    position context − 1: the engine's decode step, whose ``context`` includes the new token. Prefill: seq_len
    tokens from position 0 into an empty StaticCache of seq_len positions. The LM head runs on the last token only
    (``logits_to_keep=1``), as the engine counts it."""
    import torch
    from transformers import StaticCache

    dtype = torch_dtype(device)
    # K and V drawn on the device itself: a batch-64 Llama-3-8B cache at 4,096 positions is 34 GB of bf16, minutes
    # to draw on the CPU and copy over.
    g = torch.Generator(device=device).manual_seed(seed)
    decode = w.phase == "decode"
    tokens, start = (1, w.kv_len - 1) if decode else (w.tokens_per_seq, 0)
    max_len = w.kv_len
    params = inspect.signature(StaticCache.__init__).parameters
    kw: dict[str, Any] = {"config": config, "max_cache_len": max_len}
    if "max_batch_size" in params:  # transformers 4.x allocates up front
        kw.update(max_batch_size=w.batch, device=device, dtype=dtype)
    cache = StaticCache(**kw)
    m = w.model
    if start > 0:
        shape = (w.batch, m.num_kv_heads, start, m.head_dim)
        positions = torch.arange(start, device=device)
        for layer in range(m.num_layers):
            k = torch.randn(shape, generator=g, device=device, dtype=dtype)
            v = torch.randn(shape, generator=g, device=device, dtype=dtype)
            cache.update(k, v, layer, {"cache_position": positions})
    ids = torch.randint(0, m.vocab_size, (w.batch, tokens), generator=g, device=device)
    position_ids = (torch.arange(tokens) + start).unsqueeze(0).expand(w.batch, tokens).to(device)
    forward = inspect.signature(model.forward).parameters
    inputs: dict[str, Any] = {"input_ids": ids, "position_ids": position_ids, "use_cache": True}
    inputs["cache" if "cache" in forward else "past_key_values"] = cache
    if "cache_position" in forward:
        inputs["cache_position"] = torch.arange(start, start + tokens, device=device)
    if "logits_to_keep" in forward:
        inputs["logits_to_keep"] = 1
    elif "num_logits_to_keep" in forward:
        inputs["num_logits_to_keep"] = 1

    def reset() -> None:
        _cache_positions(cache, start)

    def step() -> Any:
        return model(**inputs).logits

    return Built(model=model, step=step, reset=reset, cache=cache)


def user_module(spec: str, device: str) -> Built:
    """``--module pkg.mod:build``: ``build(device)`` (or ``build()``) returns (an nn.Module, its inputs: a dict of
    keyword arguments or a tuple of positional ones). Anything else is a one-line UserError."""
    import torch

    if spec.count(":") != 1 or not all(spec.split(":")):
        raise UserError(f"--module {spec!r}: give it as package.module:function")
    mod_name, fn_name = spec.split(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as err:  # any error importing the user's code is theirs to fix: one line, never a traceback
        raise UserError(f"--module {spec}: cannot import {mod_name}: {type(err).__name__}: {err}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise UserError(f"--module {spec}: {mod_name} has no function {fn_name}")
    try:
        takes_device = bool(inspect.signature(fn).parameters)
        out = fn(device) if takes_device else fn()
    except Exception as err:
        raise UserError(f"--module {spec}: {fn_name} raised {type(err).__name__}: {err}") from None
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.nn.Module)
            and isinstance(out[1], (dict, tuple, list))):
        raise UserError(f"--module {spec}: {fn_name} returned {type(out).__name__}, not (an nn.Module, its inputs "
                        f"as a dict or a tuple)")
    module, inputs = out
    module.eval()

    def step() -> Any:
        try:
            return module(**inputs) if isinstance(inputs, dict) else module(*inputs)
        except Exception as err:  # the user's module failing on its own inputs (a shape): theirs, in one line
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise UserError(f"--module {spec}: its forward raised {type(err).__name__}: {first}") from None

    return Built(model=module, step=step, reset=lambda: None, cache=None)
