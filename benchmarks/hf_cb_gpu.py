"""Serve a random-weight model with transformers' continuous batching on a GPU and record every request's times.

The engine under test is transformers' own (``ContinuousBatchingManager``, transformers 5.x): its scheduler, its
paged KV cache and its attention path, in the configuration it picks for itself, except for the scheduler's limits,
which are set here so that ``rooflinectl analyze serve`` can be given the same ones (``--block-size``,
``--max-num-batched-tokens``, ``--max-num-seqs``). The model is built from a config with random bf16 weights on the
GPU: nothing is downloaded.

Loads, each a "point" (``--point``, repeatable, run in order):

  closed:ISL:OSL:C:N   C clients in a closed loop: each sends its next request when its last one finishes, until
                       N requests were sent (the first C at once). Requests go through ``add_request`` and come
                       back through ``get_result`` while the manager runs: the streaming API, not generate_batch,
                       which takes all its requests at once and so cannot hold a closed loop.
  rate:ISL:OSL:R:N     N requests with Poisson arrivals at R requests/s (seeded), each sent at its arrival time
                       whatever the engine's state (an open loop).

Every request has ISL random prompt tokens and asks for exactly OSL new tokens (eos_token_id=-1, greedy). Times
are host ``time.perf_counter`` seconds: a request's arrival is the engine's ``created_time`` (stamped inside
add_request), each token's time the engine's ``record_timestamps`` stamp when the step that made it was read
back. Metrics, per point (aiperf's and vLLM's benchmark definitions, as rooflinectl.serving.simulate states them):

  TTFT  first token − arrival;  E2E  last token − arrival;  TPOT  (E2E − TTFT) / (OSL − 1) per request;
  ITL   every gap between successive tokens of a request;  mean, p50, p90 and p99 (linear interpolation).

Each engine step is also logged (by wrapping the batch processor's methods, not changing them): its start and
end on the host, the GPU time of its forward pass (CUDA events on the engine's compute stream), its requests,
query tokens, KV positions read, how many of its requests were prefilling, and its sequences as
[new tokens, cached positions, count]. That says where a step's time goes: the comparison script reads it.

``--point profile:closed:ISL:OSL:C:N`` (or ``profile:rate:...``) runs that load under torch.profiler, started in
the engine's thread, and records the kernels' total time a step beside the step's host time (records["profiles"]);
not a validation point. ``--point diag`` (not a load) profiles two short loads with torch.profiler, started in the
engine's own thread so that its CPU ops are recorded, and reruns them with PyTorch's cuDNN and then its
memory-efficient SDPA backend switched off: what the engine's attention path costs (records["diagnostics"],
hf_cb_profile.txt).

Writes, under --out (rewritten after every point, so that a run stopped early keeps what it measured):
  hf_cb_gpu.json     the environment, the engine's resolved configuration, the command, and per point its load,
                     metrics and every request's arrival, TTFT, TPOT, E2E and token count
  hf_cb_tokens.json  every request's per-token times (seconds after its arrival)
  hf_cb_steps.json   the step log
  hf_cb_profile.txt  with --point diag: the profiler's tables

    python3 benchmarks/hf_cb_gpu.py --model llama-3-8b --out $OUT \\
        --point closed:512:256:1:2 --point closed:512:256:8:16 --point rate:512:256:2.0:48
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import threading
import time
from pathlib import Path

import torch
import transformers
from transformers import GenerationConfig

# The model configs (the shapes of rooflinectl's workloads/models/<id>.yaml, from each model's config.json).
MODELS = {
    "llama-3-8b": ("LlamaConfig", "LlamaForCausalLM", dict(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False, hidden_act="silu")),
    "qwen2-7b": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, max_position_embeddings=131072, rope_theta=1000000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=False, hidden_act="silu", use_sliding_window=False)),
}


def log(*args: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def percentile(ordered: list[float], q: float) -> float:
    n = len(ordered)
    rank = (n - 1) * q / 100
    lo = math.floor(rank)
    hi = min(lo + 1, n - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def stats(samples: list[float]) -> dict[str, float] | None:
    if not samples:
        return None
    s = sorted(samples)
    return {"mean": math.fsum(s) / len(s), "p50": percentile(s, 50), "p90": percentile(s, 90),
            "p99": percentile(s, 99), "count": len(s)}


def build_model(name: str, tiny: bool = False) -> torch.nn.Module:
    """The model with random weights, bf16, built on the GPU (its own init: normal weights, unit norms). ``tiny``:
    two layers of width 256 on the CPU, to check the harness on a machine without a GPU."""
    config_cls, model_cls, kwargs = MODELS[name]
    if tiny:
        kwargs = {**kwargs, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 4096}
    config = getattr(transformers, config_cls)(**kwargs)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cpu" if tiny else "cuda"):
            model = getattr(transformers, model_cls)(config)
    finally:
        torch.set_default_dtype(torch.float32)
    model.eval()
    # Paged SDPA: the attention that runs without flash-attn (not installed on the machine; the runtime also
    # cannot fetch kernels). Set here so the manager does not look for flash kernels itself.
    model.set_attn_implementation("paged|sdpa")
    return model


class StepLog:
    """Wraps ContinuousBatchProcessor's prepare_next_batch, _generation_step and update_batch to log each step."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.rows: list[list[float]] = []
        self._cur: dict[str, object] | None = None
        # torch.profiler records the CPU ops of the thread that starts it: the engine's thread starts and stops
        # it when asked (profile_start / profile_stop), at the top of its next loop.
        self._want: str | None = None
        self._ack = threading.Event()
        self._prof = None
        self.profile = None

    def _profiler_turn(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        if self._want == "start" and self._prof is None:
            self._prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self._prof.__enter__()
        elif self._want == "stop" and self._prof is not None:
            self._prof.__exit__(None, None, None)
            self.profile, self._prof = self._prof, None
        else:
            return
        self._want = None
        self._ack.set()

    def _ask(self, what: str) -> None:
        self._ack.clear()
        self._want = what
        if not self._ack.wait(30):
            raise RuntimeError(f"the engine's thread did not {what} the profiler")

    def profile_start(self) -> None:
        self._ask("start")

    def profile_stop(self):  # type: ignore[no-untyped-def]
        self._ask("stop")
        return self.profile

    def install(self) -> None:
        from transformers.generation.continuous_batching import continuous_api as api

        cls = api.ContinuousBatchProcessor
        prepare, step, update = cls.prepare_next_batch, cls._generation_step, cls.update_batch
        logger = self

        def prepare_next_batch(self):  # type: ignore[no-untyped-def]
            if logger._want is not None:
                logger._profiler_turn()
            t = time.perf_counter()
            ok = prepare(self)
            if ok:
                io = self.inputs_and_outputs
                reqs = getattr(io, "requests_in_batch", [])
                groups: dict[tuple[int, int], int] = {}
                for f in reqs:  # (new tokens, cached positions): prepare has moved position_offset past the new
                    key = (f.query_length, f.state.position_offset - f.query_length)
                    groups[key] = groups.get(key, 0) + 1
                logger._cur = {"t_prep": t, "t_prep_end": time.perf_counter(), "n": len(reqs),
                               "q": int(getattr(io, "num_q_tokens", -1)), "kv": int(getattr(io, "max_kv_read", -1)),
                               "prefill": sum(1 for f in reqs if f.query_length > 1),
                               "new": sum(1 for f in reqs if f.has_new_token),
                               "groups": [[q, c, n] for (q, c), n in groups.items()]}
            return ok

        def _generation_step(self, model):  # type: ignore[no-untyped-def]
            cur = logger._cur
            stream = self.inputs_and_outputs.compute_stream
            events = None
            if stream is not None:
                events = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                events[0].record(stream)
            out = step(self, model)
            if cur is not None:
                if events is not None:
                    events[1].record(stream)
                cur["events"] = events
                cur["t_launched"] = time.perf_counter()
            return out

        def update_batch(self):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            out = update(self)
            cur, logger._cur = logger._cur, None
            if cur is not None and "events" in cur:
                gpu_ms = 0.0
                if cur["events"] is not None:
                    a, b = cur["events"]  # type: ignore[misc]
                    b.synchronize()
                    gpu_ms = a.elapsed_time(b)
                t0 = logger.t0
                logger.rows.append([round(cur["t_prep"] - t0, 6), round(cur["t_prep_end"] - t0, 6),  # type: ignore[operator]
                                    round(cur["t_launched"] - t0, 6), round(t - t0, 6),  # type: ignore[operator]
                                    round(time.perf_counter() - t0, 6), round(gpu_ms, 4), cur["n"], cur["q"],
                                    cur["kv"], cur["prefill"], cur["new"], cur["groups"]])
            return out

        cls.prepare_next_batch = prepare_next_batch
        cls._generation_step = _generation_step
        cls.update_batch = update_batch


STEP_FIELDS = ["prep_start_s", "prep_end_s", "launched_s", "update_start_s", "update_end_s", "gpu_ms",
               "requests", "q_tokens", "kv_read", "prefilling", "new_tokens", "groups [new, cached, count]"]


def run_point(manager, spec: str, vocab: int, rng: random.Random, deadline: float) -> dict:
    """One load on the running manager; returns its records."""
    kind, isl, osl, level, count = spec.split(":")
    isl, osl, n = int(isl), int(osl), int(count)
    prompts = [[rng.randrange(1000, vocab - 1000) for _ in range(isl)] for _ in range(n)]
    sent: dict[str, dict] = {}
    done: dict[str, object] = {}
    issued = 0
    truncated = False

    def send(i: int) -> None:
        rid = f"{spec}#{i}"
        t = time.perf_counter()
        manager.add_request(prompts[i], request_id=rid, max_new_tokens=osl, record_timestamps=True,
                            eos_token_id=-1)
        sent[rid] = {"i": i, "sent": t}

    t_start = time.perf_counter()
    if kind == "closed":
        c = int(level)
        for i in range(min(c, n)):
            send(i)
        issued = min(c, n)
        while len(done) < issued:
            out = manager.get_result(timeout=1.0)
            if out is None:
                if not manager.is_running():
                    raise RuntimeError("the generation thread stopped")
                continue
            if not out.is_finished():
                continue
            done[out.request_id] = out
            if issued < n:
                if time.perf_counter() < deadline:
                    send(issued)
                    issued += 1
                else:
                    truncated = True
        load = {"kind": "concurrency", "concurrency": c}
    elif kind == "rate":
        r = float(level)
        gaps = random.Random(1234)
        arrivals, t = [], 0.0
        for _ in range(n):
            arrivals.append(t)
            t += gaps.expovariate(r)
        while len(done) < issued or issued < n:
            now = time.perf_counter()
            while issued < n and now - t_start >= arrivals[issued]:
                if now >= deadline:
                    truncated = True
                    n = issued
                    break
                send(issued)
                issued += 1
            wait = 0.5 if issued >= n else max(0.0005, min(0.5, t_start + arrivals[issued] - now))
            if issued >= n and len(done) >= issued:
                break
            out = manager.get_result(timeout=wait)
            if out is not None and out.is_finished():
                done[out.request_id] = out
            elif out is None and not manager.is_running():
                raise RuntimeError("the generation thread stopped")
        load = {"kind": "rate", "rate": r, "schedule_s": arrivals[:issued]}
    else:
        raise SystemExit(f"unknown point kind {kind!r}")
    t_end = time.perf_counter()

    requests, tokens = [], []
    for rid, meta in sorted(sent.items(), key=lambda kv: kv[1]["i"]):
        out = done[rid]
        if out.error is not None:
            raise RuntimeError(f"{rid} failed: {out.error}")
        ts = out.timestamps or []
        arrival = out.created_time
        if len(ts) != osl:
            raise RuntimeError(f"{rid}: {len(ts)} timestamps for {osl} tokens")
        ttft, e2e = ts[0] - arrival, ts[-1] - arrival
        requests.append({"i": meta["i"], "arrival_s": arrival - t_start, "sent_s": meta["sent"] - t_start,
                         "admitted_s": out.lifespan[0] - t_start, "ttft_s": ttft, "e2e_s": e2e,
                         "tpot_s": (e2e - ttft) / (len(ts) - 1) if len(ts) > 1 else None, "tokens": len(ts)})
        tokens.append([round(t - arrival, 6) for t in ts])
    itl = [b - a for tk in tokens for a, b in zip(tk, tk[1:])]
    metrics = {"ttft_s": stats([r["ttft_s"] for r in requests]),
               "tpot_s": stats([r["tpot_s"] for r in requests if r["tpot_s"] is not None]),
               "itl_s": stats(itl), "e2e_s": stats([r["e2e_s"] for r in requests]),
               "duration_s": t_end - t_start,
               "output_tokens_per_s": sum(r["tokens"] for r in requests) / (t_end - t_start)}
    return {"point": spec, "prompt": isl, "output": osl, "requests_asked": int(count), "requests": len(requests),
            "truncated": truncated, "load": load, "t_start_s": t_start, "t_end_s": t_end, "metrics": metrics,
            "per_request": requests, "_tokens": tokens}


def step_summary(rows: list[list]) -> dict[str, float | int]:
    """Medians over a point's decode-only steps (no prompt tokens): host time a step, its parts, GPU span."""
    dec = [r for r in rows if r[9] == 0]
    if not dec:
        return {"decode_steps": 0}

    def med(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    return {"decode_steps": len(dec), "host_ms": med([(r[4] - r[0]) * 1e3 for r in dec]),
            "prepare_ms": med([(r[1] - r[0]) * 1e3 for r in dec]), "forward_ms": med([(r[2] - r[1]) * 1e3 for r in dec]),
            "gpu_span_ms": med([r[5] for r in dec]), "requests": med([r[6] for r in dec]),
            "kv_read": med([r[8] for r in dec])}


def profile_load(manager, spec: str, vocab: int, rng: random.Random, steps: StepLog, out_dir: Path,
                 texts: list[str]) -> dict:
    """One load under torch.profiler, started in the engine's thread: the kernels' total time a step against the
    step's host time, its decode steps' summary, and the top kernels and host ops (``texts`` gains the tables)."""
    def device_us(e) -> float:  # type: ignore[no-untyped-def]
        return float(getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0) or 0)

    first = len(steps.rows)
    steps.profile_start()
    try:
        run_point(manager, spec, vocab, rng, 1e18)
    finally:
        prof = steps.profile_stop()
    rows = steps.rows[first:]
    ka = prof.key_averages()
    kernels = sorted((e for e in ka if device_us(e) > 0), key=device_us, reverse=True)
    # The kernels' own rows: an op's row also carries the device time of the kernels it launched.
    total = sum(device_us(e) for e in kernels if "CPU" not in str(getattr(e, "device_type", "")))
    host = sum(r[4] - r[0] for r in rows)
    res = {"steps": len(rows), "step_rows": [first, len(steps.rows)], "host_ms_per_step": host / len(rows) * 1e3,
           "kernel_ms_per_step": total / len(rows) / 1e3, "summary_profiled": step_summary(rows),
           "top_kernels_ms": [[e.key[:120], round(device_us(e) / 1e3, 3), e.count] for e in kernels[:25]],
           "top_cpu_ms": [[e.key[:120], round(e.self_cpu_time_total / 1e3, 3), e.count]
                          for e in sorted(ka, key=lambda e: e.self_cpu_time_total, reverse=True)[:25]]}
    for key in ("self_cuda_time_total", "self_device_time_total", "self_cpu_time_total"):
        try:
            texts.append(f"== {spec}, by {key}\n" + ka.table(sort_by=key, row_limit=30, max_name_column_width=70))
        except Exception as e:  # noqa: BLE001 - a sort key this torch does not know
            texts.append(f"== {spec}, by {key}: {e}")
    (out_dir / "hf_cb_profile.txt").write_text("\n\n".join(texts))
    log(f"profile {spec}: {res['host_ms_per_step']:.2f} ms host/step, {res['kernel_ms_per_step']:.2f} ms of "
        f"kernels/step; decode steps {res['summary_profiled']}")
    return res


def diagnose(manager, vocab: int, rng: random.Random, steps: StepLog, out_dir: Path, texts: list[str]) -> dict:
    """Where a step's time goes: torch.profiler over short loads (the kernels' total time against the step's),
    then the same loads with PyTorch's cuDNN, then its memory-efficient, SDPA backend switched off (the switches
    are process-wide, so they reach the engine's thread). Not part of the validation points."""
    res: dict[str, dict] = {}
    for spec in ("closed:512:24:1:1", "closed:512:24:32:32"):
        res["profile " + spec] = profile_load(manager, spec, vocab, rng, steps, out_dir, texts)
    switches = {"cudnn_sdp off": torch.backends.cuda.enable_cudnn_sdp,
                "mem_efficient_sdp off": torch.backends.cuda.enable_mem_efficient_sdp}
    for name, switch in switches.items():
        switch(False)
        try:
            for spec in ("closed:512:64:1:1", "closed:512:64:32:32"):
                first = len(steps.rows)
                rec = run_point(manager, spec, vocab, rng, 1e18)
                summary = step_summary(steps.rows[first:])
                res[f"{name} {spec}"] = {"tpot_mean_s": rec["metrics"]["tpot_s"]["mean"], **summary}
                log(f"{name} {spec}: TPOT {rec['metrics']['tpot_s']['mean'] * 1e3:.2f} ms; {summary}")
        finally:
            switch(True)
    return res


def cb_config_record(manager) -> dict:
    cfg = manager.continuous_batching_config
    keys = ["block_size", "num_blocks", "max_batch_tokens", "max_memory_percent", "max_requests_per_batch",
            "max_blocks_per_request", "allow_block_sharing", "use_async_batching", "use_cuda_graph",
            "q_padding_interval_size", "kv_padding_interval_size", "default_compile_level", "scheduler_type",
            "safety_margin", "cpu_offload_space", "return_logprobs"]
    rec = {k: getattr(cfg, k, None) for k in keys}
    rec["use_cuda_graph"] = list(rec["use_cuda_graph"]) if isinstance(rec["use_cuda_graph"], tuple) else \
        rec["use_cuda_graph"]
    rec["varlen_compile_config"] = None if cfg.varlen_compile_config is None else str(cfg.varlen_compile_config)
    rec["decode_compile_config"] = None if cfg.decode_compile_config is None else str(cfg.decode_compile_config)
    bp = manager.batch_processor
    if bp is not None:
        cache, io = bp.cache, bp.inputs_and_outputs
        rec["cache_num_pages"] = getattr(cache, "num_pages", None)
        rec["cache_max_blocks_per_request"] = getattr(cache, "max_blocks_per_request", None)
        rec["use_prefix_sharing"] = getattr(cache, "use_prefix_sharing", None)
        rec["scheduler_class"] = type(bp.scheduler).__name__
        rec["scheduler_safety_margin"] = getattr(bp.scheduler, "safety_margin", None)
        rec["io_class"] = type(io).__name__
        rec["attention_mask_materialised"] = getattr(io, "attention_mask", None) is not None
    return rec


def environment() -> dict:
    import importlib.util

    gpu = torch.cuda.is_available()
    props = torch.cuda.get_device_properties(0) if gpu else None
    return {"gpu": torch.cuda.get_device_name(0) if gpu else None,
            "gpu_memory_bytes": props.total_memory if props else None,
            "sm_count": props.multi_processor_count if props else None, "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "flash_attn_installed": importlib.util.find_spec("flash_attn") is not None,
            "kernels_installed": importlib.util.find_spec("kernels") is not None,
            "sdp_backends": {"flash": torch.backends.cuda.flash_sdp_enabled(),
                             "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                             "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                             "math": torch.backends.cuda.math_sdp_enabled()},
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llama-3-8b", choices=sorted(MODELS))
    p.add_argument("--point", action="append", default=[], help="closed:ISL:OSL:C:N or rate:ISL:OSL:R:N")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--tag", default="run", help="names the run in the records")
    p.add_argument("--block-size", type=int, default=256)
    p.add_argument("--max-batch-tokens", type=int, default=8192)
    p.add_argument("--max-requests-per-batch", type=int, default=256)
    p.add_argument("--num-blocks", type=int, default=None, help="KV blocks (default: the engine sizes the cache)")
    p.add_argument("--deadline-s", type=float, default=1e9,
                   help="seconds after the start past which no new request is sent (records are kept)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tiny", action="store_true", help="a two-layer model on the CPU: checks the harness alone")
    args = p.parse_args()
    t_begin = time.perf_counter()
    deadline = t_begin + args.deadline_s
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    from transformers.generation import ContinuousBatchingConfig

    env = environment()
    log("env", json.dumps(env))
    model = build_model(args.model, args.tiny)
    log(f"model {args.model} built: {sum(p.numel() for p in model.parameters()) / 1e9:.3f} B parameters, "
        f"attn {model.config._attn_implementation}")
    gen = GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=0, max_new_tokens=16)
    cb = ContinuousBatchingConfig(block_size=args.block_size, max_batch_tokens=args.max_batch_tokens,
                                  max_requests_per_batch=args.max_requests_per_batch, allow_block_sharing=False,
                                  num_blocks=args.num_blocks)
    steps = StepLog(t_begin)
    steps.install()
    manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
    manager.start()
    while manager.batch_processor is None:
        time.sleep(0.01)
    rng = random.Random(args.seed)
    vocab = model.config.vocab_size

    # Warm-up, not recorded: allocator, cuBLAS handles and clocks, with a full-budget prefill and decode batches.
    t = time.perf_counter()
    for spec in ("closed:512:32:16:16", f"closed:{args.max_batch_tokens // 4}:4:4:4")[: 1 if args.tiny else 2]:
        run_point(manager, spec, vocab, rng, 1e18)
    log(f"warm-up {time.perf_counter() - t:.1f} s; {len(steps.rows)} steps")
    warm_steps = len(steps.rows)

    records = {"tool": "benchmarks/hf_cb_gpu.py", "tag": args.tag, "model": args.model,
               "model_config": MODELS[args.model][2], "weights": "random (the model class's own init), bf16",
               "command": "python3 " + " ".join(sys.argv), "environment": env,
               "generation": {"do_sample": False, "eos_token_id": -1, "ignore_eos": True},
               "cb_config_asked": {"block_size": args.block_size, "max_batch_tokens": args.max_batch_tokens,
                                   "max_requests_per_batch": args.max_requests_per_batch,
                                   "allow_block_sharing": False},
               "cb_config": cb_config_record(manager), "attn_implementation": model.config._attn_implementation,
               "warmup_steps": warm_steps, "step_fields": STEP_FIELDS, "points": []}
    tokens: dict[str, list] = {}

    def write() -> None:
        (out_dir / "hf_cb_gpu.json").write_text(json.dumps(records, indent=1))
        (out_dir / "hf_cb_tokens.json").write_text(json.dumps(tokens))
        (out_dir / "hf_cb_steps.json").write_text(json.dumps({"fields": STEP_FIELDS, "t0": "start of the run",
                                                              "rows": steps.rows}))

    write()
    texts: list[str] = []
    for spec in args.point:
        if spec.startswith("profile:"):  # a load under the profiler: not a validation point
            records.setdefault("profiles", {})[spec] = profile_load(manager, spec.split(":", 1)[1], vocab, rng,
                                                                    steps, out_dir, texts)
            write()
            continue
        if spec == "diag":
            first_step = len(steps.rows)
            records["diagnostics"] = diagnose(manager, vocab, rng, steps, out_dir, texts)
            records["diagnostics"]["steps"] = [first_step, len(steps.rows)]
            write()
            continue
        if time.perf_counter() > deadline:
            log(f"deadline: {spec} not run")
            records.setdefault("skipped", []).append(spec)
            continue
        first_step = len(steps.rows)
        rec = run_point(manager, spec, vocab, rng, deadline)
        tokens[spec] = rec.pop("_tokens")
        rec["steps"] = [first_step, len(steps.rows)]
        rec["t_start_s"] -= t_begin
        rec["t_end_s"] -= t_begin
        records["points"].append(rec)
        m = rec["metrics"]
        rows = steps.rows[first_step:]
        gpu = sum(r[5] for r in rows) / 1e3
        wall = sum(r[4] - r[0] for r in rows)
        rec["decode_step_summary"] = step_summary(rows)
        log(f"{spec}: {rec['requests']} requests{' (truncated)' if rec['truncated'] else ''} in "
            f"{m['duration_s']:.1f} s; TTFT mean {m['ttft_s']['mean'] * 1e3:.1f} ms p99 {m['ttft_s']['p99'] * 1e3:.1f};"
            f" TPOT mean {m['tpot_s']['mean'] * 1e3:.2f} ms p99 {m['tpot_s']['p99'] * 1e3:.2f}; {len(rows)} steps, "
            f"{wall / max(1, len(rows)) * 1e3:.2f} ms host/step, {gpu / max(1, len(rows)) * 1e3:.2f} ms GPU/step")
        write()
    manager.stop(block=True, timeout=30)
    records["wall_s"] = time.perf_counter() - t_begin
    write()
    log(f"done in {records['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
