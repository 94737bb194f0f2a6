"""Prefix caching: shared blocks counted once, kept when their last holder goes until the room is needed, a hit prefilling only the rest of
its prompt (priced by hand from the engine), and the trace's prefix field."""

from __future__ import annotations

import json

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.engine.roofline import analyze
from rooflinectl.serving.kvcache import BlockPool
from rooflinectl.serving.load import Load, Request
from rooflinectl.serving.scheduler import SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.step import Seqs

H100 = load_gpu("h100")


def base():
    return resolve_workload("prefill", model="llama-3-8b", batch=1, seq_len=1)


def test_shared_blocks_count_once_and_are_evicted_when_the_room_is_needed():
    pool = BlockPool(20, 16)
    pool.grow(1, 100)  # 7 blocks
    pool.share(1, 9, 4, 100)  # its first 4 become prefix 9's
    assert (pool.used, pool.held[1], pool.holds(1), pool.cached_prefix(9)) == (7, 3, 7, 4)
    pool.attach(2, 9, 4)
    pool.grow(2, 100)  # 7 blocks, 4 of them the prefix's: 3 more
    assert pool.used == 10
    pool.free(1)  # request 2 still holds the prefix
    assert (pool.used, pool.cached_prefix(9)) == (7, 4)
    pool.free(2)  # the last holder: the prefix's 4 blocks are free but keep their content (idle)
    assert (pool.used, pool.idle, pool.cached_prefix(9), pool.attached) == (0, 4, 4, {})
    assert pool.attach_cost(9) == 4
    pool.attach(3, 9, 4)  # found again: back in use
    assert (pool.used, pool.idle) == (4, 0)
    pool.free(3)
    pool.grow(4, 16 * 17)  # 17 blocks: 16 are empty, so the idle prefix is evicted for the 17th
    assert (pool.used, pool.idle, pool.cached_prefix(9), pool.prefixes) == (17, 0, 0, {})


def _trace(prefix: int | None):
    # A: 100 prompt tokens (its first 64 prefix 1), 50 output, at 0; B: the same prompt, 4 output, arriving just
    # after A's prefill, so it is admitted beside A's first decode.
    pid = None if prefix is None else 1
    m = StepModel(base(), H100)
    prefill = analyze(base().with_seqs((Seqs(1, 100),)), H100).totals.time_s
    load = Load("trace", (Request(0, 0.0, 100, 50, pid, prefix or 0),
                          Request(1, prefill * 1.0001, 100, 4, pid, prefix or 0)))
    return simulate(load, m, BlockPool(100, 16), SchedulerConfig())


def test_a_hit_prefills_only_the_rest_of_its_prompt():
    run, cold = _trace(64), _trace(None)
    a, b = run.served
    # B finds A's 64 prefix positions (4 blocks of 16) and prefills 36 tokens after them, beside A's decode
    # after 101 positions: its first token comes one such step after A's second.
    step = analyze(base().with_seqs((Seqs(1, 1, 101), Seqs(1, 36, 64))), H100).totals.time_s
    assert b.token_times_s[0] - a.token_times_s[1] == pytest.approx(step, rel=1e-12)
    cold_step = analyze(base().with_seqs((Seqs(1, 1, 101), Seqs(1, 100))), H100).totals.time_s
    assert cold.served[1].token_times_s[0] - cold.served[0].token_times_s[1] == pytest.approx(cold_step, rel=1e-12)
    assert b.ttft_s < cold.served[1].ttft_s
    assert (run.prefix_lookups, run.prefix_hits, run.prefix_tokens, run.prefix_blocks) == (2, 1, 64, 4)
    # Memory: while both run, A holds ⌈105/16⌉ = 7 blocks and B ⌈103/16⌉ = 7, the prefix's 4 counted once: 10;
    # after B, A grows to ⌈149/16⌉ = 10. Without the prefix shared, 7 + 7 = 14 while both run.
    assert run.kv_blocks_peak == 10
    assert cold.kv_blocks_peak == 14


def test_a_prompt_all_prefix_still_computes_its_last_token():
    # B's prompt of 64 tokens is all prefix: it finds 3 blocks (48 positions, its prompt less one token floored to
    # blocks) and prefills 16 tokens.
    m = StepModel(base(), H100)
    prefill = analyze(base().with_seqs((Seqs(1, 64),)), H100).totals.time_s
    load = Load("trace", (Request(0, 0.0, 64, 20, 0, 64), Request(1, prefill * 1.0001, 64, 2, 0, 64)))
    run = simulate(load, m, BlockPool(100, 16), SchedulerConfig())
    assert (run.prefix_hits, run.prefix_tokens, run.prefix_blocks) == (1, 48, 3)


def test_serve_shared_prefix_and_a_trace_prefix(tmp_path):
    args = ["analyze", "serve", "--gpu", "h100", "--concurrency", "8", "--requests", "32", "--prompt", "1024",
            "--output", "32", "--shared-prefix", "768"]
    data = json.loads(cli(*args, "--json").stdout)
    assert data == rl.serve(gpu="h100", concurrency=8, requests=32, prompt=1024, output=32,
                            shared_prefix=768).to_dict()
    prefix = data["prefix_cache"]
    assert prefix["lookups"] == 32 and prefix["hits"] == 24  # all but the first 8, admitted in the first step
    assert prefix["tokens_not_prefilled"] == prefix["hits"] * 768 and prefix["blocks_saved"] == prefix["hits"] * 48
    plain = rl.serve(gpu="h100", concurrency=8, requests=32, prompt=1024, output=32).to_dict()
    assert plain["prefix_cache"] is None
    assert data["ttft_s"]["mean"] < plain["ttft_s"]["mean"]
    # The first 8 arrive together and miss (none has computed the prefix yet): the peak is theirs, as without.
    assert data["kv_cache"]["peak_blocks"] <= plain["kv_cache"]["peak_blocks"]
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt,output,prefix\n0,128,4,7:64\n0.5,128,4,\n")
    assert json.loads(cli("analyze", "serve", "--trace", str(trace), "--json").stdout)["prefix_cache"]["lookups"] == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"arrival_s": 0, "prompt": 64, "output": 4, "prefix": "1:65"}\n')
    assert_one_line_error(cli("analyze", "serve", "--trace", str(bad)), "bad.jsonl:1", "prefix of 65")
    bad.write_text('{"arrival_s": 0, "prompt": 64, "output": 4, "prefix": "x"}\n')
    assert_one_line_error(cli("analyze", "serve", "--trace", str(bad)), "ID:TOKENS")
    assert_one_line_error(cli("analyze", "serve", "--shared-prefix", "0"), "--shared-prefix 0")
