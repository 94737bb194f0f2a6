"""transformers' assisted generation (draft-then-verify speculative decoding) timed on a GPU, for setting beside
``analyze serve --spec draft:MODEL:K`` (benchmarks/spec_hf_compare.py).

Usage: ``python3 benchmarks/spec_hf_gpu.py OUT [--tiny] [--repeats N] [--deadline-s S]``: writes OUT/spec_hf_gpu.json
and OUT/spec_hf_gpu.log. Models are built from configs with random bf16 weights (nothing is downloaded): the
target is Llama-3.1-8B's shapes (workloads/models/llama-3.1-8b.yaml); ``--tiny`` shrinks both models for a check
of the script's logic on a CPU.

Known acceptance with random weights, greedy: a draft agrees with the target only where it computes the same
thing. Case ``self``: the draft is the target's own weights (a second module over the same tensors), so every
draft is accepted (tokens a target step K + 1). Case ``small``: a 2-layer model of the same vocabulary with its own
random weights, so almost none is (tokens a target step near 1). Accepted drafts are counted, not assumed: a
forward hook on the target records each call's query tokens; a run of F target calls that emits T tokens
accepted T − F drafts, and drafted (Σ query tokens) − prompt − (F − 1).

Each configuration: one warm-up run (its wall time kept as ``cold_s``), ``repeats`` timed runs (torch.cuda.synchronize
around each, the median kept), then one instrumented run whose hooks synchronize around each forward of the target
and of the draft (their host times, and the rest of generate's time beside them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

import torch
import transformers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

TARGET = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
              num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
              rope_theta=500000.0, tie_word_embeddings=False)
# The small draft: Llama-3.2-1B's widths, two layers, untied (docs/results/h200-2026-12-04-spec/llama-2l-draft.yaml).
SMALL = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=2,
             num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
             rope_theta=500000.0, tie_word_embeddings=False)
TINY = dict(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64, max_position_embeddings=4096, rope_theta=500000.0,
            tie_word_embeddings=False)

LOG: list[str] = []


def log(*parts: Any) -> None:
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    LOG.append(line)


def build(shape: dict[str, Any], device: str, dtype: torch.dtype) -> LlamaForCausalLM:
    cfg = LlamaConfig(**shape)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    return model.eval()


def alias(target: LlamaForCausalLM) -> LlamaForCausalLM:
    """A second module over the target's own tensors: computes exactly what the target does, hooked apart."""
    with torch.device("meta"):
        twin = LlamaForCausalLM(target.config)
    twin.load_state_dict(target.state_dict(), assign=True, strict=True)
    twin.model.rotary_emb = target.model.rotary_emb
    meta = [n for n, t in list(twin.named_parameters()) + list(twin.named_buffers()) if t.is_meta]
    assert not meta, f"alias left on meta: {meta[:5]}"
    return twin.eval()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


class Counter:
    """A forward pre/post hook pair: the query tokens of each call, and (when ``timed``) its host time after a
    synchronize on each side."""

    def __init__(self, model: torch.nn.Module, device: str) -> None:
        self.device, self.timed, self.calls, self.seconds = device, False, [], []
        self._t0 = 0.0
        model.register_forward_pre_hook(self._pre, with_kwargs=True)
        model.register_forward_hook(self._post)

    def reset(self, timed: bool) -> None:
        self.timed, self.calls, self.seconds = timed, [], []

    def _pre(self, module: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.calls.append(int(ids.shape[-1]) if ids is not None else -1)
        if self.timed:
            sync(self.device)
            self._t0 = time.perf_counter()

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if self.timed:
            sync(self.device)
            self.seconds.append(time.perf_counter() - self._t0)


def gen_config(new: int) -> GenerationConfig:
    # min_new_tokens = max_new_tokens: exactly `new` tokens, EOS never ends a run early.
    return GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0,
                            eos_token_id=None)


def set_drafts(draft: LlamaForCausalLM, k: int) -> None:
    """K drafts every step: the constant schedule, and no confidence threshold (its default, 0.4, would stop a
    random draft after its first token)."""
    gc = draft.generation_config
    gc.num_assistant_tokens = k
    gc.num_assistant_tokens_schedule = "constant"
    gc.assistant_confidence_threshold = 0.0


def run_case(name: str, target: LlamaForCausalLM, draft: LlamaForCausalLM | None, k: int, prompt: torch.Tensor,
             new: int, repeats: int, device: str, tc: Counter, dc: Counter | None) -> dict[str, Any]:
    if draft is not None:
        set_drafts(draft, k)
    kwargs: dict[str, Any] = dict(generation_config=gen_config(new), attention_mask=torch.ones_like(prompt))
    if draft is not None:
        kwargs["assistant_model"] = draft

    def once(timed_hooks: bool) -> tuple[float, torch.Tensor]:
        tc.reset(timed_hooks)
        if dc is not None:
            dc.reset(timed_hooks)
        sync(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = target.generate(prompt, **kwargs)
        sync(device)
        return time.perf_counter() - t0, out

    cold, out = once(False)
    emitted = int(out.shape[-1] - prompt.shape[-1])
    assert emitted == new, f"{name}: {emitted} tokens, not {new}"
    times = [once(False)[0] for _ in range(repeats)]
    target_calls = list(tc.calls)
    draft_calls = list(dc.calls) if dc is not None else []
    inst, _ = once(True)
    f = len(target_calls)
    drafted = sum(target_calls) - prompt.shape[-1] - (f - 1) if draft is not None else 0
    rec: dict[str, Any] = dict(
        case=name, k=k if draft is not None else 0, new_tokens=new, prompt=int(prompt.shape[-1]), cold_s=cold,
        times_s=times, median_s=statistics.median(times), target_calls=f, target_query_tokens=target_calls,
        draft_calls=len(draft_calls), tokens_per_target_step=new / f, drafted=drafted,
        accepted=(new - f) if draft is not None else 0,
        instrumented_s=inst, target_forward_s=list(tc.seconds),
        draft_forward_s=list(dc.seconds) if dc is not None else [])
    rec["accept_rate"] = rec["accepted"] / drafted if drafted else None
    tf, df = sum(tc.seconds), sum(dc.seconds) if dc is not None else 0.0
    log(f"{name:>18}: median {rec['median_s'] * 1e3:9.1f} ms (cold {cold * 1e3:8.1f}) over {repeats}; "
        f"{f} target calls, {rec['tokens_per_target_step']:.2f} tokens/step, accepted {rec['accepted']}/{drafted}; "
        f"instrumented {inst * 1e3:.1f} ms = target {tf * 1e3:.1f} + draft {df * 1e3:.1f} "
        f"({len(dc.seconds) if dc else 0} calls) + rest {(inst - tf - df) * 1e3:.1f}")
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--ks", default="2,4")
    ap.add_argument("--deadline-s", type=float, default=480.0)
    a = ap.parse_args()
    start = time.time()
    os.makedirs(a.out, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() and not a.tiny else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    env: dict[str, Any] = dict(transformers=transformers.__version__, torch=torch.__version__,
                               python=platform.python_version(), device=device, command=" ".join(sys.argv))
    if device == "cuda":
        env.update(gpu=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                   sms=torch.cuda.get_device_properties(0).multi_processor_count)
    log("env", json.dumps(env))
    torch.manual_seed(0)
    target = build(TINY if a.tiny else TARGET, device, dtype)
    small = build(dict(TINY, num_hidden_layers=1) if a.tiny else SMALL, device, dtype)
    twin = alias(target)
    log("attn", target.config._attn_implementation, "built in", f"{time.time() - start:.1f}s")
    tc, sc, wc = Counter(target, device), Counter(small, device), Counter(twin, device)
    prompt = torch.randint(10, target.config.vocab_size - 10, (1, a.prompt), device=device)
    ks = [int(k) for k in a.ks.split(",")]
    plan: list[tuple[str, LlamaForCausalLM | None, Counter | None, int, int]] = [("plain-1", None, None, 0, 1),
                                                                               ("plain", None, None, 0, a.output)]
    for k in ks:
        plan += [(f"self-k{k}", twin, wc, k, a.output), (f"small-k{k}", small, sc, k, a.output)]
    records: list[dict[str, Any]] = []
    result: dict[str, Any] = dict(env=env, target=TINY if a.tiny else TARGET, small=SMALL, records=records)

    def save() -> None:
        with open(os.path.join(a.out, "spec_hf_gpu.json"), "w") as fh:
            json.dump(result, fh, indent=1)
        with open(os.path.join(a.out, "spec_hf_gpu.log"), "w") as fh:
            fh.write("\n".join(LOG) + "\n")

    for name, draft, dcount, k, new in plan:
        if time.time() - start > a.deadline_s:
            log("deadline: skipped", name)
            continue
        records.append(run_case(name, target, draft, k, prompt, new, a.repeats, device, tc, dcount))
        save()
    # Does the verification's masked SDPA pay cuDNN's per-shape plan? The same self-k4 case without cuDNN's SDPA.
    if device == "cuda" and time.time() - start < a.deadline_s:
        torch.backends.cuda.enable_cudnn_sdp(False)
        k = ks[-1]
        records.append(run_case(f"self-k{k}-nocudnn", target, twin, k, prompt, a.output, a.repeats, device, tc, wc))
        torch.backends.cuda.enable_cudnn_sdp(True)
    result["wall_s"] = time.time() - start
    save()
    plain = {r["case"]: r for r in records}
    if "plain" in plain and "plain-1" in plain:
        t1 = plain["plain-1"]["median_s"]
        log("case                 E2E ms   TPOT ms  speed-up  tokens/step")
        for r in records:
            if r["new_tokens"] > 1:
                tpot = (r["median_s"] - t1) / (r["new_tokens"] - 1)
                log(f"{r['case']:>18} {r['median_s'] * 1e3:9.1f} {tpot * 1e3:9.2f} "
                    f"{plain['plain']['median_s'] / r['median_s']:8.2f}x {r['tokens_per_target_step']:8.2f}")
    save()


if __name__ == "__main__":
    main()
