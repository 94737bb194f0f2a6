"""Expert parallelism with data-parallel attention (serving.ranks): one rank is the plain engine, a lockstep step
is the engine's analysis of one GPU's share at the most expensive rank's shape, the KV cache is the ranks'
summed, requests go to the least loaded rank, Little's law holds, and what is not simulated gets one line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.api.common import base_workload
from rooflinectl.engine.parallel import Layout
from rooflinectl.engine.roofline import analyze
from rooflinectl.serving.capacity import kv_capacity
from rooflinectl.serving.kvcache import BlockPool
from rooflinectl.serving.load import Lengths, Load, Request, closed_loop, open_loop
from rooflinectl.serving.ranks import RankModel, serve_ranks
from rooflinectl.serving.scheduler import SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.stack import Stack
from rooflinectl.specs.step import Seqs

H100, H200 = load_gpu("h100"), load_gpu("h200")
MOE = "qwen3-30b-a3b"  # 48 layers, 128 experts of width 768 (8 a token), hidden 2,048, 4 KV heads of 128


def _ep(e: int) -> RankModel:
    return RankModel(base_workload(model=MOE), H200, layout=Layout(ep=e))


@pytest.mark.parametrize("refill_us", [0.0, 300.0])
def test_one_rank_is_the_plain_engine_step_for_step(refill_us):
    # Llama 3 8B, 8 clients of drawn lengths on a cache small enough to preempt: the same run, to the bit, the
    # closed loop's refills delayed alike.
    load = closed_loop(8, 40, Lengths.parse("uniform:200-900", "p"), Lengths.parse("uniform:20-200", "o"), seed=5)
    config = SchedulerConfig(max_num_batched_tokens=1024)
    stack = Stack(id="t", name="a test stack", source="this test", refill_latency_us=refill_us)
    capacity = replace(kv_capacity(StepModel(base_workload(), H100), 1024, 16, 8e9), blocks=200)
    run, totals = serve_ranks(load, StepModel(base_workload(), H100, stack=stack), capacity, config, 16)
    plain = simulate(load, StepModel(base_workload(), H100, stack=stack), BlockPool(200, 16), config)
    assert run.preemptions > 0
    assert run == plain
    assert totals.requests == (40,) and totals.preemptions == (plain.preemptions,)
    if refill_us:  # the delay moved the refills: not the undelayed run
        assert plain.served != simulate(load, StepModel(base_workload(), H100), BlockPool(200, 16), config).served


def test_e_requests_at_once_on_e_ranks_take_one_ranks_step():
    # 4 identical requests arriving together on EP 4: one a rank, so the prefill step is one GPU's share of the
    # step of 4 sequences of 512 (one a GPU), and each decode step one GPU's share of 4 decodes.
    base = base_workload(model=MOE)
    ep4 = Layout(ep=4)

    def step(seqs: Seqs) -> float:
        return analyze(base.with_seqs((seqs,)), H200, False, ep4).totals.time_s

    r = rl.serve(gpu="h200", model=MOE, ep=4, concurrency=4, requests=4, prompt=512, output=3)
    assert r.simulation.ranks is not None and r.simulation.ranks.requests == (1, 1, 1, 1)
    prefill, decodes = step(Seqs(4, 512)), [step(Seqs(4, 1, 512)), step(Seqs(4, 1, 513))]
    for s in r.run.served:
        assert s.ttft_s == pytest.approx(prefill, rel=1e-9)
        assert s.tpot_s == pytest.approx(sum(decodes) / 2, rel=1e-9)
    # The MoE is every rank's tokens': a decode alone on EP 4 touches the experts of 1 token, not of 4.
    assert step(Seqs(1, 1, 512)) < decodes[0]
    data = r.to_dict()
    assert data["layout"]["gpus"] == 4
    assert data["throughput"]["output_tokens_per_s_per_gpu"] == pytest.approx(12 / r.run.duration_s / 4)


def test_the_most_expensive_rank_sets_the_step():
    # EP 2: a 2,048-token prompt and a 64-token one arrive together, one a rank. The step is priced at the longer
    # rank's shape (two GPUs each prefilling 2,048 tokens) and the short prompt's first token waits for it.
    base = base_workload(model=MOE)
    load = Load("trace", (Request(0, 0.0, 2048, 2), Request(1, 0.0, 64, 2)))
    model = _ep(2)
    run, totals = serve_ranks(load, model, kv_capacity(model, 8192, 16, 14e9), SchedulerConfig(), 16)
    long = analyze(base.with_seqs((Seqs(2, 2048),)), H200, False, Layout(ep=2)).totals.time_s
    short = analyze(base.with_seqs((Seqs(2, 64),)), H200, False, Layout(ep=2)).totals.time_s
    assert totals.requests == (1, 1) and short < long
    assert [s.ttft_s for s in run.served] == pytest.approx([long, long], rel=1e-9)


def test_the_kv_cache_is_e_times_one_gpus_room():
    model = _ep(4)
    cap = kv_capacity(model, 8192, 16, 14e9)
    # One block: 48 layers × K and V × 4 KV heads × 128 × 2 bytes × 16 positions, all on the rank's one GPU.
    assert cap.block_bytes == 48 * 2 * 4 * 128 * 2 * 16
    # The GPU holds every weight but the 96 of each MoE layer's 128 experts that live on the 3 others, each expert
    # three 2,048 × 768 matrices in bf16.
    whole = analyze(base_workload(model=MOE).with_seqs((Seqs(1, 16),)), H200).totals.weight_footprint_bytes
    assert cap.weight_bytes == whole - 48 * 96 * 3 * 2048 * 768 * 2
    assert cap.blocks == (cap.capacity_bytes - 14e9 - cap.weight_bytes - cap.activation_bytes) // cap.block_bytes
    r = rl.serve(gpu="h200", model=MOE, ep=4, requests=2, prompt=64, output=2, reserve_gib=14e9 / 2**30)
    assert r.run.kv_blocks == 4 * cap.blocks
    assert r.to_dict()["kv_cache"]["blocks"] == 4 * cap.blocks
    assert r.to_dict()["data_parallel_attention"]["kv_blocks_per_rank"] == cap.blocks


def test_requests_go_to_the_least_loaded_rank():
    # 8 clients of identical requests on 4 ranks: every rank holds 2 and frees them together, so each takes 10.
    r = rl.serve(gpu="h200", model=MOE, ep=4, concurrency=8, requests=40, prompt=128, output=8)
    assert r.to_dict()["data_parallel_attention"]["requests"] == [10, 10, 10, 10]
    # EP 2: a long request holds rank 0, so the later short ones, arriving one at a time, all go to rank 1.
    load = Load("trace", (Request(0, 0.0, 64, 1000), Request(1, 0.0, 64, 2), Request(2, 0.1, 64, 2),
                          Request(3, 0.2, 64, 2)))
    model = _ep(2)
    run, totals = serve_ranks(load, model, kv_capacity(model, 8192, 16, 14e9), SchedulerConfig(), 16)
    assert run.served[0].e2e_s > 0.2 > run.served[2].e2e_s + 0.1  # request 0 still runs when request 3 comes
    assert totals.requests == (1, 3)


def test_littles_law_in_an_open_loop():
    # Mean requests in the system (time-averaged) = arrival rate × mean time in the system.
    model = _ep(4)
    rate = 40.0
    load = open_loop(rate, 800, Lengths("fixed", 256), Lengths("fixed", 32), seed=3)
    run, totals = serve_ranks(load, model, kv_capacity(model, 8192, 16, 14e9), SchedulerConfig(), 16)
    events = sorted([(s.request.arrival_s, 1) for s in run.served] + [(s.token_times_s[-1], -1) for s in run.served])
    area, inside, last = 0.0, 0, 0.0
    for t, d in events:
        area += inside * (t - last)
        inside, last = inside + d, t
    assert area / last == pytest.approx(rate * run.e2e.mean, rel=0.1)
    assert sum(totals.requests) == 800 and max(totals.requests) - min(totals.requests) <= 800 // 10


def test_the_table_says_the_attention_is_data_parallel():
    out = cli("analyze", "serve", "--gpu", "h200", "--model", MOE, "--ep", "2", "--requests", "2", "--output", "4")
    assert out.exit_code == 0, out.output
    assert "attention data-parallel over 2 ranks" in out.output
    data = json.loads(cli("analyze", "serve", "--gpu", "h200", "--model", MOE, "--ep", "2", "--requests", "2",
                          "--output", "4", "--json").output)
    assert data["data_parallel_attention"]["ranks"] == 2 and data["layout"]["gpus"] == 2
    plain = json.loads(cli("analyze", "serve", "--gpu", "h200", "--model", MOE, "--requests", "2", "--output", "4",
                           "--json").output)
    assert plain["data_parallel_attention"] is None


@pytest.mark.parametrize(("extra", "words"), [
    (["--tp", "2"], "--tp 2 with --ep 4"),
    (["--disagg", "1:1"], "--prefill-ep 4"),
    (["--replicas", "2"], "--replicas"),
    (["--spec", "ngram:3", "--accept", "0.7"], "--spec"),
])
def test_what_is_not_simulated_with_ep_alone_gets_one_line(extra, words):
    assert_one_line_error(cli("analyze", "serve", "--gpu", "h200", "--model", MOE, "--ep", "4", "--requests", "2",
                              *extra), words)


def test_ep_on_a_dense_model_gets_one_line():
    assert_one_line_error(cli("analyze", "serve", "--gpu", "h100", "--model", "llama-3-8b", "--ep", "2",
                              "--requests", "2"), "dense")
