"""serving/batch.py: a closed batch on the simulated engine. Without chunked prefill on the roofline stack it is the
static batch of engine/generate.py (to the bit through the API, to rounding when simulated); with chunked prefill
the prompts go in chunks of the budget (a case derived by hand below), and the memory check counts one step of
the budget, not a whole-batch prefill (Llama 3 8B's numbers by hand)."""

from __future__ import annotations

import pytest

import rooflinectl as rl
from rooflinectl.api import base_workload, step_analyzer
from rooflinectl.engine.generate import Generation, Request, generate
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.serving.batch import BatchRun, BatchServer, Method
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.stack import Stack, load_stack
from rooflinectl.specs.step import Seqs

H100 = load_gpu("h100")
GIB = 2**30
RESERVE = 8 * GIB  # 10% of the H100's 80 GiB, the default


def server(method: Method, prompt: int, output: int) -> BatchServer:
    base = base_workload(model="llama-3-8b")
    return BatchServer(base, H100, prompt, output, RESERVE, method, step_analyzer(H100, False))


def step_time(*groups: Seqs) -> float:
    return analyze(base_workload(model="llama-3-8b").with_seqs(groups), H100).totals.time_s


def test_the_static_flags_give_the_static_batch_to_the_bit():
    old = generate(base_workload(model="llama-3-8b"), Request(2048, 256, 32), step_analyzer(H100, False), RESERVE)
    new = rl.generate(gpu="h100", model="llama-3-8b", prompt=2048, output=256, batch=32, stack="roofline",
                      chunked_prefill=False)
    assert isinstance(new.generation, Generation)
    assert (new.generation.ttft_s, new.generation.tpot_s, new.generation.e2e_s) == (old.ttft_s, old.tpot_s, old.e2e_s)
    assert new.generation.memory == old.memory and new.largest_batch == 128
    assert new.to_dict()["method"] == {"simulated": False, "stack": "roofline", "chunked_prefill": False,
                                       "max_num_batched_tokens": None, "block_size": None}


def test_the_simulated_closed_batch_without_chunks_is_the_static_batch():
    old = generate(base_workload(model="llama-3-8b"), Request(512, 16, 8), step_analyzer(H100, False), RESERVE)
    run = server(Method(load_stack("roofline"), chunked_prefill=False), 512, 16).serve(8)
    assert run.run.steps == 16  # one prefill step, then 15 decode steps
    assert run.ttft_s == pytest.approx(old.ttft_s, rel=1e-12)
    assert run.tpot_s == pytest.approx(old.tpot_s, rel=1e-12)
    assert run.e2e_s == pytest.approx(old.e2e_s, rel=1e-12) and run.duration_s == pytest.approx(old.e2e_s, rel=1e-12)
    assert run.output_tokens_per_s_per_gpu == pytest.approx(old.output_tokens_per_s_per_gpu, rel=1e-12)


def test_a_budget_that_holds_every_prompt_gives_the_static_ttft():
    # 8 × 512 = 4,096 prompt tokens ≤ the budget of 8,192: one step prefills them all, as the static batch does.
    old = generate(base_workload(model="llama-3-8b"), Request(512, 16, 8), step_analyzer(H100, False), RESERVE)
    run = server(Method(load_stack("roofline")), 512, 16).serve(8)
    assert all(s.ttft_s == pytest.approx(old.ttft_s, rel=1e-12) for s in run.run.served)
    assert run.tpot_s == pytest.approx(old.tpot_s, rel=1e-12)


def test_chunks_of_the_budget_by_hand():
    # 4 requests of 4,096 prompt and 3 output tokens, a budget of 8,192 tokens a step:
    # step 1: requests 0 and 1 prefilled whole (2 × 4,096 = 8,192): their first tokens at t1.
    # step 2: 0 and 1 decode (2 tokens); 8,190 left: request 2 whole (4,096), request 3's first 4,094: 2's first
    #         token at t1 + t2.
    # step 3: 0, 1 and 2 decode (0 and 1 finish: 3 tokens); request 3's last 2 prompt tokens: its first token.
    # step 4: 2 and 3 decode (2 finishes); step 5: 3 decodes (and finishes).
    t1 = step_time(Seqs(2, 4096))
    t2 = step_time(Seqs(2, 1, 4096), Seqs(1, 4096), Seqs(1, 4094))
    t3 = step_time(Seqs(2, 1, 4097), Seqs(1, 1, 4096), Seqs(1, 2, 4094))
    t4 = step_time(Seqs(1, 1, 4097), Seqs(1, 1, 4096))
    t5 = step_time(Seqs(1, 1, 4097))
    run = server(Method(load_stack("roofline"), max_num_batched_tokens=8192), 4096, 3).serve(4)
    assert run.run.steps == 5 and run.run.max_tokens_in_step == 8192
    ttfts = [s.ttft_s for s in run.run.served]
    for got, want in zip(ttfts, (t1, t1, t1 + t2, t1 + t2 + t3), strict=True):
        assert got == pytest.approx(want, rel=1e-12)
    assert run.ttft_s == pytest.approx((4 * t1 + 2 * t2 + t3) / 4, rel=1e-12)
    e2e = (t1 + t2 + t3, t1 + t2 + t3, t1 + t2 + t3 + t4, t1 + t2 + t3 + t4 + t5)
    assert run.e2e_s == pytest.approx(sum(e2e) / 4, rel=1e-12)
    assert run.duration_s == pytest.approx(e2e[-1], rel=1e-12)
    # TPOT, aiperf's (E2E − TTFT) / (O − 1) per request, then the mean.
    tpots = ((t2 + t3) / 2, (t2 + t3) / 2, (t3 + t4) / 2, (t4 + t5) / 2)
    assert run.tpot_s == pytest.approx(sum(tpots) / 4, rel=1e-12)
    # The static batch prefills all 16,384 prompt tokens in one step: every request waits for it.
    static = step_time(Seqs(4, 4096))
    assert static > t1 and run.ttft_s < static
    # Steps that carry prompt tokens (1–3) and decode-only steps (4, 5).
    phases = {p["phase"]: (p["steps"], p["time_s"]) for p in rl.api.GenerateResult(run, 0).to_dict()["phases"]}
    assert phases["prefill"][0] == 3 and phases["decode"][0] == 2
    assert phases["decode"][1] == pytest.approx(t4 + t5, rel=1e-12)


def test_memory_counts_a_budget_step_not_a_whole_batch_prefill():
    # Llama 3 8B on an H100, 2,048 + 256 tokens, batch 200. The static batch counts the activations of a prefill of
    # 200 × 2,048 tokens (act: 3 × 409,600 × 14,336 × 2 bytes) and fits 128 (docs/serving.md derives it).
    with pytest.raises(UserError, match="batch 200 does not fit.*largest batch that fits: 128"):
        rl.generate(gpu="h100", model="llama-3-8b", batch=200, chunked_prefill=False)
    # Chunked prefill: one step of 8,192 tokens, act 3 × 8,192 × 14,336 × 2 = 704,643,072 bytes; a block of 16
    # positions is 32 layers × 2 (K, V) × 8 heads × 128 × 2 bytes × 16 = 2,097,152 bytes; a request holds
    # ⌈2,303 / 16⌉ = 144 blocks. (85,899,345,920 − 8,589,934,592 reserve − 16,060,522,496 weights − 704,643,072)
    # / 2,097,152 = 28,869 blocks; 28,869 // 144 = 200 requests.
    r = rl.generate(gpu="h100", model="llama-3-8b", batch=200)
    assert isinstance(r.generation, BatchRun)
    m = r.to_dict()["memory"]
    assert m["activation_bytes"] == 704_643_072 and m["activation_op"] == "act"
    assert m["kv_cache_bytes_per_sequence"] == 144 * 2_097_152
    assert m["kv_cache_bytes"] == 200 * 144 * 2_097_152 and m["fits"] and m["largest_batch"] == 200
    assert r.generation.run.preemptions == 0
    with pytest.raises(UserError, match="batch 201 does not fit.*200 × 144 blocks|batch 201 does not fit"):
        rl.generate(gpu="h100", model="llama-3-8b", batch=201)


def test_a_stack_costs_row_and_the_api_keywords():
    r = rl.generate(gpu="h100", model="llama-3-8b", prompt=512, output=8, batch=4, stack="hf",
                    max_num_batched_tokens=1024)
    d = r.to_dict()
    assert d["method"] == {"simulated": True, "stack": "hf", "chunked_prefill": True, "max_num_batched_tokens": 1024,
                           "block_size": 16}
    (stack,) = [o for o in d["ops"] if o["kind"] == "stack"]
    # The rows add up to the run: the ops at the roofs, and the stack's costs beyond them.
    assert sum(o["total_s"] for o in d["ops"]) == pytest.approx(d["simulation"]["duration_s"], rel=1e-9)
    assert stack["total_s"] > 0
    c = rl.compare(gpus=["h100"], model="llama-3-8b", batch=4, prompt=512, output=8, stack="hf",
                   max_num_batched_tokens=1024)
    assert c.to_dict()["gpus"][0]["tpot_s"] == d["latency"]["tpot_s"]


def test_compare_stops_at_the_most_requests_one_step_runs():
    """One-token prompts with a 64-token budget: memory holds thousands of Llama 3 8B requests of 1 + 2 tokens
    on the H100 (one 16-token block each), but a step schedules a token of its budget for every request it runs,
    so 64 run at once. Batch 64 is two steps (64 one-token prefills, then their 64 decodes); at 65 the last
    request waits for both (the decodes spend the budget) and takes two steps of its own: 4 steps, its first token
    two steps late. A batch past the budget only queues. The largest that fits stays memory's."""
    method = Method(load_stack("roofline"), max_num_batched_tokens=64)
    s = server(method, 1, 2)
    assert s.most_at_once() == 64 and s.largest() > 64
    assert s.serve(64).run.steps == 2
    late = s.serve(65)
    assert late.run.steps == 4 and max(r.ttft_s for r in late.run.served) > min(r.ttft_s for r in late.run.served)
    for tpot_ms in (None, 1e6):  # the largest that fits, and a target every batch meets
        row = rl.compare(gpus=["h100"], model="llama-3-8b", prompt=1, output=2, max_num_batched_tokens=64,
                         tpot_ms=tpot_ms).to_dict()["gpus"][0]
        assert (row["batch"], row["largest_batch"]) == (64, s.largest())
    assert rl.compare(gpus=["h100"], model="llama-3-8b", prompt=1, output=2, max_num_batched_tokens=64)\
        .to_dict()["gpus"][0]["rule"] == "largest one step runs (64: the token budget)"
    # Without chunked prefill a step holds the whole batch's prompts: no such limit.
    assert server(Method(load_stack("roofline"), chunked_prefill=False), 1, 2).most_at_once() is None


@pytest.mark.parametrize("field", sorted(set(Stack.model_fields) - {
    "id", "name", "source", "notes", "families", "family", "prefill_steps", "max_num_batched_tokens"}))
def test_every_cost_of_a_stack_makes_it_costly(field):
    # The static batch (engine.generate) applies no stack cost: a stack whose one changed figure is any cost
    # field, a field added later included, must not pass for costless and be served as if it had none.
    blank = load_stack("roofline")
    assert Method(blank).costless
    default = blank.model_dump()[field]
    changed = {"attention": "batch_dense", "fused": ["rmsnorm_linear"]}.get(field, 0.5 if default == 1.0 else 3.0)
    assert not Method(blank.model_copy(update={field: changed})).costless, field
