"""Ranges around a Hugging Face model's modules and functions, named by the engine's ops, for ``torch.profiler``.

Each range is a ``torch.profiler.record_function`` named ``rooflinectl:<label>``, opened by a forward pre-hook
and closed by the forward hook of the module (or around the call of a function). The profiler records it as a
user annotation; a kernel is inside it when the aten op that launched it is (``profile.trace``).

Which module is which op (Llama, Mistral, Qwen2, Qwen3: ``LlamaDecoderLayer`` and its kin), by the module's
attribute name:

  embed_tokens → embed                 input_layernorm → attn_norm        post_attention_layernorm → mlp_norm
  self_attn.{q,k,v,o}_proj → same      self_attn.{q,k}_norm → same (Qwen3) mlp.{gate,up,down}_proj → same
  mlp.act_fn → act                     the model's final norm → final_norm lm_head → lm_head
  self_attn → container (its reshapes: the core's overhead)
  mlp → act's range too: the gate product SiLU(gate)·up is computed in LlamaMLP.forward, outside act_fn
  rotary_emb → the cos/sin tables, rope's overhead      layers.<i> → a decoder layer (outside its ops: unattributed)

Functions, patched for the run and restored after it: ``apply_rotary_pos_emb`` of the model's modeling module
→ rope; the attention interface's function (``eager_attention_forward``, or the one
``ALL_ATTENTION_FUNCTIONS`` holds for sdpa/flash) → the attention core; the cache's ``update`` → kv_write.
The residual adds are inline in the decoder layer's forward: ``attn_residual`` is the range from self_attn's
end to post_attention_layernorm's start, ``mlp_residual`` from the MLP's end to the layer's end.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .attribute import CORE, HARNESS, LAYER, MLP, ROPE_TABLES, SELF_ATTN

PREFIX = "rooflinectl:"

# A module's attribute name -> its range's label (an engine op, or one of attribute.CONTAINERS).
MODULE_LABELS: dict[str, str] = {
    "embed_tokens": "embed", "input_layernorm": "attn_norm", "post_attention_layernorm": "mlp_norm",
    "q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "o_proj",
    "q_norm": "q_norm", "k_norm": "k_norm",
    "gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj", "act_fn": "act",
    "lm_head": "lm_head", "self_attn": SELF_ATTN, "mlp": MLP, "rotary_emb": ROPE_TABLES,
}
_LAYER_NAME = re.compile(r"(^|\.)layers\.\d+$")


def label_of(qualified: str) -> str | None:
    """The range label of the module named ``qualified`` in ``model.named_modules()``, or None (no range)."""
    if _LAYER_NAME.search(qualified):
        return LAYER
    leaf = qualified.rsplit(".", 1)[-1]
    if leaf == "norm" and ".layers." not in f".{qualified}":
        return "final_norm"
    return MODULE_LABELS.get(leaf)


class _Stack:
    """The open ranges, innermost last; every open is matched by a close of the same label."""

    def __init__(self) -> None:
        import torch

        self._record = torch.profiler.record_function
        self.open: list[tuple[str, Any]] = []

    def push(self, label: str) -> None:
        rf = self._record(PREFIX + label)
        rf.__enter__()  # type: ignore[no-untyped-call]  # torch's record_function is unannotated
        self.open.append((label, rf))

    def pop(self, label: str) -> None:
        """Close ``label``'s range, and any opened inside it and left open (a residual range of a module
        whose layer has no MLP norm); a label not open closes nothing."""
        names = [name for name, _ in self.open]
        if label not in names:
            return
        while self.open:
            name, rf = self.open.pop()
            rf.__exit__(None, None, None)
            if name == label:
                return

    def pop_if(self, label: str) -> None:
        if self.open and self.open[-1][0] == label:
            self.pop(label)

    def close_all(self) -> None:
        while self.open:
            self.open.pop()[1].__exit__(None, None, None)


def _wrap(fn: Callable[..., Any], stack: _Stack, label: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def ranged(*args: Any, **kwargs: Any) -> Any:
        stack.push(label)
        try:
            return fn(*args, **kwargs)
        finally:
            stack.pop(label)

    return ranged


@contextmanager
def harness_range() -> Iterator[None]:
    """rooflinectl's own work before a step (not the step's: attribute.HARNESS)."""
    import torch

    with torch.profiler.record_function(PREFIX + HARNESS):
        yield


@contextmanager
def installed(model: Any, cache: Any = None) -> Iterator[list[str]]:
    """Hooks and function wrappers on ``model`` (and ``cache.update``) for as long as the block runs; yields the
    labels installed. Everything is restored on exit, also after an error."""
    stack = _Stack()
    handles: list[Any] = []
    labels: set[str] = set()
    for name, module in model.named_modules():
        label = label_of(name)
        if label is None:
            continue
        labels.add(label)
        handles.append(module.register_forward_pre_hook(_pre(stack, label)))
        handles.append(module.register_forward_hook(_post(stack, label)))
    restore: list[Callable[[], None]] = []
    modeling = sys.modules.get(type(model).__module__)
    # The layer modules' own modeling module too (a user's wrapper around a Llama).
    layer_modules = {sys.modules.get(type(m).__module__) for n, m in model.named_modules() if label_of(n) == LAYER}
    seen: set[int] = set()
    for mod in {modeling, *layer_modules} - {None}:
        restore += _patch_functions(mod, stack, labels, seen)
    if cache is not None:
        cache.update = _wrap(cache.update, stack, "kv_write")
        labels.add("kv_write")
        restore.append(lambda: delattr(cache, "update"))
    try:
        yield sorted(labels)
    finally:
        stack.close_all()
        for h in handles:
            h.remove()
        for undo in reversed(restore):
            undo()


def _patch_functions(mod: Any, stack: _Stack, labels: set[str], seen: set[int]) -> list[Callable[[], None]]:
    """Wrap the modeling module's RoPE and attention functions (an object ``seen`` already, never twice);
    returns how to undo each."""
    undo: list[Callable[[], None]] = []

    def patch(owner: Any, attr: str, label: str) -> None:
        original = getattr(owner, attr)
        setattr(owner, attr, _wrap(original, stack, label))
        labels.add(label)
        undo.append(lambda: setattr(owner, attr, original))

    if callable(getattr(mod, "apply_rotary_pos_emb", None)):
        patch(mod, "apply_rotary_pos_emb", "rope")
    if callable(getattr(mod, "eager_attention_forward", None)):
        patch(mod, "eager_attention_forward", CORE)
    functions: Any = getattr(mod, "ALL_ATTENTION_FUNCTIONS", None)
    local = getattr(functions, "_local_mapping", None)
    if isinstance(local, dict) and id(functions) not in seen:
        seen.add(id(functions))
        keys = list(functions)
        before = dict(local)
        for key in keys:
            local[key] = _wrap(functions[key], stack, CORE)
        labels.add(CORE)

        def unpatch() -> None:
            local.clear()
            local.update(before)

        undo.append(unpatch)
    return undo


def _pre(stack: _Stack, label: str) -> Callable[..., None]:
    def hook(module: Any, args: Any) -> None:
        if label == "mlp_norm":
            stack.pop_if("attn_residual")  # the first residual add ends where the MLP's norm starts
        stack.push(label)

    return hook


def _post(stack: _Stack, label: str) -> Callable[..., None]:
    def hook(module: Any, args: Any, output: Any) -> None:
        if label == LAYER:
            stack.pop_if("mlp_residual")
        stack.pop(label)
        if label == SELF_ATTN:
            stack.push("attn_residual")
        elif label == MLP:
            stack.push("mlp_residual")

    return hook
