"""Speculative decoding in the simulation: the expected tokens a verification against random acceptances, a
verification step and a drafter priced by hand from the engine's analyses, the budget counting every verified
token, the break-even batch, and the command's input."""

from __future__ import annotations

import json
import random

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.engine.parallel import Layout
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.serving.kvcache import BlockPool
from rooflinectl.serving.load import Lengths, Request, closed_loop
from rooflinectl.serving.scheduler import Live, Scheduler, SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.serving.speculation import Speculation, expected_tokens, parse_acceptance
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.models import model_catalog
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.step import Seqs

H100 = load_gpu("h100")


def base(model: str = "llama-3-8b", **options):
    return resolve_workload("prefill", model=model, batch=1, seq_len=1, **options)


def test_expected_tokens_by_hand():
    # One α: (1 − α^{k+1}) / (1 − α); α = 0.7, k = 3: (1 − 0.2401) / 0.3 = 2.533….
    assert expected_tokens((0.7,) * 3) == pytest.approx((1 - 0.7**4) / 0.3, rel=1e-12)
    assert expected_tokens((0.7,) * 3) == pytest.approx(2.533, abs=1e-3)
    # Per position 0.8, 0.6, 0.4: 1 + 0.8 + 0.8·0.6 + 0.8·0.6·0.4 = 2.472; with 1 draft 1.8; with none 1.
    assert expected_tokens((0.8, 0.6, 0.4)) == pytest.approx(2.472, rel=1e-12)
    assert expected_tokens((0.8, 0.6, 0.4), 1) == pytest.approx(1.8, rel=1e-12)
    assert expected_tokens((0.8, 0.6, 0.4), 0) == 1
    assert parse_acceptance("0.7", 3) == (0.7, 0.7, 0.7)
    assert parse_acceptance("0.8,0.6,0.4", 3) == (0.8, 0.6, 0.4)


@pytest.mark.parametrize("acceptance", [(0.7,) * 3, (0.8, 0.6, 0.4), (0.9, 0.9, 0.5, 0.2)])
def test_random_acceptances_average_the_expected_tokens(acceptance):
    spec = Speculation("ngram", acceptance)
    rng = random.Random(11)
    n = 200_000
    mean = sum(spec.accepted(rng, spec.k) + 1 for _ in range(n)) / n
    # The tokens of one verification lie in 1 … k + 1, so their SD is under (k + 1)/2 ≤ 2.5: 4 SEs < 0.023.
    assert mean == pytest.approx(expected_tokens(acceptance), abs=0.023)


def test_a_long_run_emits_the_expected_tokens_a_step():
    # 4 requests of 4,001 output tokens speculating 3 drafts at α = 0.7: about 1,580 verifications each, all but
    # the last few of a request with 3 drafts, so the run's tokens a verification is E = 2.533 within the noise
    # (SD of one ≈ 1.1, 6,300 of them: SE 0.014) and the requests' ends (at most 2 verifications of fewer drafts
    # each, < 0.002).
    load = closed_loop(4, 4, Lengths("fixed", 16), Lengths("fixed", 4001))
    spec = Speculation("ngram", (0.7,) * 3)
    run = simulate(load, StepModel(base(), H100), BlockPool(5000, 16), SchedulerConfig(), speculation=spec, seed=3)
    assert run.verified_tokens / run.verifications == pytest.approx(expected_tokens(spec.acceptance), abs=0.06)
    assert run.accepted == run.verified_tokens - run.verifications
    # Every token is emitted once: each request's first by its prefill, the rest by verifications or by plain
    # decodes where no draft is left to verify (its last token).
    assert run.output_tokens == 4 * 4001
    assert run.verified_tokens <= run.output_tokens - 4
    assert all(len(s.token_times_s) == 4001 for s in run.served)
    # The same seed draws the same run; another draws another.
    again = simulate(load, StepModel(base(), H100), BlockPool(5000, 16), SchedulerConfig(), speculation=spec, seed=3)
    assert again == run
    other = simulate(load, StepModel(base(), H100), BlockPool(5000, 16), SchedulerConfig(), speculation=spec, seed=4)
    assert other.duration_s != run.duration_s


def _non_attention(seqs):
    return sum(p.total_time_s for p in analyze(base().with_seqs(seqs), H100).placements if p.op.kind != "attention")


def _attention(w, seqs, layout=Layout()):
    return sum(p.total_time_s for p in analyze(w.with_seqs(seqs), H100, layout=layout).placements
               if p.op.kind == "attention")


def test_a_verification_step_by_hand():
    # 4 sequences verify 3 drafts each after 500 cached positions: their attention is the engine's group of 4 new
    # tokens after 500, and every other op that of 16 tokens as decodes (the LM head over all 16 rows).
    m = StepModel(base(), H100)
    got = m.time_verify({}, {(4, 500): 4})
    assert got == pytest.approx(_non_attention((Seqs(16, 1, 500),)) + _attention(base(), (Seqs(4, 4, 500),)),
                                rel=1e-12)
    # It differs from the engine's prefill-like group of 4 tokens only in the LM head's rows (16 against 4).
    full = analyze(base().with_seqs((Seqs(4, 4, 500),)), H100)
    lm = [p for p in full.placements if p.op.name == "lm_head"][0]
    assert lm.op.flops == 2 * 4 * 4096 * 128256
    assert got > full.totals.time_s
    # Beside a prompt chunk: the chunk is the engine's own group.
    mixed = m.time_verify({(300, 0): 1}, {(4, 500): 4})
    assert mixed == pytest.approx(_non_attention((Seqs(16, 1, 500), Seqs(1, 300)))
                                  + _attention(base(), (Seqs(4, 4, 500), Seqs(1, 300))), rel=1e-12)


def test_an_mla_verification_is_absorbed():
    # DeepSeek-V3 verifies in the absorbed form: 2 query tokens after 1,000 cached cost the FLOPs of two decodes
    # (after 1,000 and 1,001), and read the latent once, the longer one's.
    w = base("deepseek-v3")
    m = StepModel(w, H100, layout=Layout(tp=8))
    parts = dict((p[0], p[1:]) for p in m._verify_parts(2, 1000))
    one = [p.op for p in analyze(w.with_seqs((Seqs(1, 1, 1000),)), H100, layout=Layout(tp=8)).placements
           if p.op.kind == "attention"]
    two = [p.op for p in analyze(w.with_seqs((Seqs(1, 1, 1001),)), H100, layout=Layout(tp=8)).placements
           if p.op.kind == "attention"]
    for a, b in zip(one, two):
        flops, moved, kv, _ = parts[a.name]
        assert flops == pytest.approx(a.flops + b.flops, rel=1e-12)
        assert kv == pytest.approx(b.kv_bytes, rel=1e-12)
        assert moved == pytest.approx(a.bytes - a.weight_bytes - a.kv_bytes + b.bytes - b.weight_bytes, rel=1e-12)


def test_a_draft_models_steps_by_hand():
    # Two sequences after 700 and 900 cached positions draft 3 and 2 tokens; a prompt chunk of 128 runs too. The
    # draft model's step 0 holds the chunk and one token of each after 700 and 900, step 1 one token each after
    # 701 and 901, step 2 one token after 702 (the other has no third draft): three of its engine steps.
    draft = base("llama-3.1-8b")
    spec = Speculation("draft", (0.8,) * 3, StepModel(draft, H100), "llama-3.1-8b")

    def t(*seqs):
        return analyze(draft.with_seqs(seqs), H100).totals.time_s

    want = (t(Seqs(1, 128), Seqs(1, 1, 700), Seqs(1, 1, 900)) + t(Seqs(1, 1, 701), Seqs(1, 1, 901))
            + t(Seqs(1, 1, 702)))
    assert spec.draft_time({(128, 0): 1}, [(700, 3), (900, 2)]) == pytest.approx(want, rel=1e-12)
    assert Speculation("ngram", (0.8,) * 3).draft_time({(128, 0): 1}, [(700, 3)]) == 0


def test_one_speculating_request_is_the_sum_of_its_steps():
    # One request of 200 prompt and 4 output tokens, k = 2, every draft accepted (α = 1): a prefill (token 1),
    # one verification of 2 drafts after 200 positions (tokens 2–4: E = 3), nothing left.
    m = StepModel(base(), H100)
    spec = Speculation("ngram", (1.0, 1.0))
    run = simulate(closed_loop(1, 1, Lengths("fixed", 200), Lengths("fixed", 4)), m, BlockPool(100, 16),
                   SchedulerConfig(), speculation=spec)
    prefill = analyze(base().with_seqs((Seqs(1, 200),)), H100).totals.time_s
    verify = _non_attention((Seqs(3, 1, 200),)) + _attention(base(), (Seqs(1, 3, 200),))
    (served,) = run.served
    assert served.token_times_s[0] == pytest.approx(prefill, rel=1e-12)
    assert served.token_times_s[1:] == pytest.approx((prefill + verify,) * 3, rel=1e-12)
    assert (run.steps, run.verifications, run.verified_tokens, run.drafted, run.accepted) == (2, 1, 3, 2, 2)


def test_the_budget_counts_every_verified_token_and_decode_runs_are_off():
    # Budget 10, three decoding requests, k = 3: the first two take 1 + 3 tokens, the third what is left, 2 (one
    # draft); a request with 2 tokens left verifies one draft only.
    pool = BlockPool(100, 16)
    sched = Scheduler(SchedulerConfig(max_num_batched_tokens=10), pool, drafts=3)
    for i, output in enumerate((50, 50, 50)):
        live = Live(Request(i, 0.0, 100, output), target=101, computed=100, generated=1)
        pool.grow(i, 100)
        sched.running.append(live)
    got = [(s.new, s.drafts) for s in sched.step()]
    assert got == [(4, 3), (4, 3), (2, 1)]
    assert sched.decode_run() == 0
    short = Scheduler(SchedulerConfig(), BlockPool(100, 16), drafts=3)
    short.running.append(Live(Request(0, 0.0, 100, 10), target=109, computed=108, generated=8))
    assert [(s.new, s.drafts) for s in short.step()] == [(2, 1)]
    # Without speculation the same requests would run as one run of plain decodes.
    plain = Scheduler(SchedulerConfig(max_num_batched_tokens=10), BlockPool(100, 16))
    for i in range(3):
        plain.running.append(Live(Request(i, 0.0, 100, 50), target=101, computed=100, generated=1))
    assert plain.decode_run() > 1


def test_the_break_even_batch_is_where_speculation_stops_paying():
    # Llama 3.1 70B on 4 H100s drafted by Llama 3.1 8B: at a batch of 1 the verification of 5 tokens costs about a
    # decode step (both read the weights) and the draft 4 small steps, so 2.86 tokens pay; as the batch grows the
    # verification turns compute-bound and stops paying. The batch found is the first that does not pay.
    layout = Layout(tp=4)
    m = StepModel(base("llama-3.1-70b"), H100, layout=layout)
    spec = Speculation("draft", (0.8, 0.7, 0.6, 0.5), StepModel(base("llama-3.1-8b"), H100, layout=layout))
    b = spec.break_even(m, 1152, 1024)
    assert b is not None and b > 2
    assert spec.pays(m, 1, 1152) and spec.pays(m, b - 1, 1152)
    assert not spec.pays(m, b, 1152) and not spec.pays(m, 2 * b, 1152)
    # Where it pays at every batch up to the limit, none is found; where it never pays, 1.
    assert Speculation("ngram", (0.9,) * 2).break_even(m, 1152, 8) is None
    assert Speculation("ngram", (0.0,) * 2).break_even(m, 1152, 8) == 1


def test_serve_speculates_and_compares_with_the_plain_run():
    args = ["analyze", "serve", "--gpu", "h100", "--concurrency", "4", "--prompt", "256", "--output", "64",
            "--requests", "8", "--spec", "ngram:3", "--accept", "0.8,0.6,0.4"]
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == rl.serve(gpu="h100", concurrency=4, prompt=256, output=64, requests=8, spec="ngram:3",
                            accept="0.8,0.6,0.4").to_dict()
    spec = data["speculation"]
    assert spec["expected_tokens_per_step"] == pytest.approx(2.472, rel=1e-12)
    plain = rl.serve(gpu="h100", concurrency=4, prompt=256, output=64, requests=8).to_dict()
    assert plain["speculation"] is None
    assert spec["plain"]["duration_s"] == plain["throughput"]["duration_s"]
    assert spec["speedup"]["output_tokens_per_s"] == pytest.approx(
        plain["throughput"]["duration_s"] / data["throughput"]["duration_s"], rel=1e-12)
    assert spec["speedup"]["tpot"] == pytest.approx(plain["tpot_s"]["mean"] / data["tpot_s"]["mean"], rel=1e-12)
    text = cli(*args).stdout
    assert "speculation: ngram, k = 3" in text and "× the output tokens/s" in text


def test_a_drafter_takes_its_room_in_the_kv_cache():
    # The draft model's weights and its own KV block come out of the cache's room: Llama 3.1 8B beside 70B on
    # 4 H100s holds fewer blocks, each block's bytes the two models' (70B: 80 layers × 2 × 8/4 heads × 128 × 2
    # bytes × 16; 8B: 32 × 2 × 8/4 × 128 × 2 × 16).
    kw = dict(gpu="h100", model="llama-3.1-70b", tp=4, concurrency=2, requests=2, prompt=128, output=8)
    plain = rl.serve(**kw).to_dict()["kv_cache"]
    spec = rl.serve(**kw, spec="draft:llama-3.1-8b:2", accept=0.7).to_dict()["kv_cache"]
    assert plain["block_bytes"] == 80 * 2 * 2 * 128 * 2 * 16
    assert spec["block_bytes"] == plain["block_bytes"] + 32 * 2 * 2 * 128 * 2 * 16
    assert spec["weight_bytes"] > plain["weight_bytes"] and spec["blocks"] < plain["blocks"]


def test_an_mtp_module_is_one_layer_of_the_models_last_kind():
    # Qwen3-Next's layers run linear, linear, linear, full, and its MTP module is a full-attention layer with the
    # experts (vLLM's qwen3_next_mtp). The one-layer copy kept the pattern of four, which validation refused
    # ("layer_pattern has 4 entries, more than the 1 layers"); it is now one full-attention layer, whose K and V
    # (2 KV heads over TP 2, head_dim 256, bf16, 16 positions) are what a block adds.
    kw = dict(gpu="h200", model="qwen3-next-80b-a3b", tp=2, concurrency=1, requests=2, prompt=128, output=8)
    plain = rl.serve(**kw).to_dict()["kv_cache"]
    spec = rl.serve(**kw, spec="mtp:1", accept=0.8).to_dict()["kv_cache"]
    assert spec["block_bytes"] == plain["block_bytes"] + 2 * 1 * 256 * 2 * 16
    assert spec["weight_bytes"] > plain["weight_bytes"] and spec["blocks"] < plain["blocks"]


def test_an_mtp_module_of_a_layer_other_than_attention_is_refused(tmp_path):
    # Nemotron-H 8B's last layer is an MLP layer apart; a model file that gives it a module has no layer of
    # attention to copy there.
    import yaml

    data = yaml.safe_load(model_catalog()["nemotron-h-8b"].read_text())
    path = tmp_path / "nemotron-h-mtp.yaml"
    path.write_text(yaml.safe_dump({**data, "id": "nemotron-h-mtp", "mtp_layers": 1}))
    result = cli("analyze", "serve", "--model", str(path), "--requests", "2", "--spec", "mtp:1", "--accept", "0.7")
    assert_one_line_error(result)
    assert result.stderr == ("error: --spec 'mtp:1': model nemotron-h-mtp's last layer is 'mlp': a multi-token-"
                             "prediction module is modelled as a full, sliding or chunked attention layer; give "
                             "draft:MODEL:K or ngram:K\n")


# The one line for mtp:K on a model whose checkpoint ships no multi-token-prediction module.
MTP_REFUSED = ("--spec 'mtp:2': model {} has no multi-token-prediction module (mtp_layers 0) to draft with; give "
               "draft:MODEL:K (a draft model) or ngram:K (prompt lookup)")


@pytest.mark.parametrize("model, options", [
    ("llama-3.1-8b", ["--accept", "0.7"]),
    ("llama-3.1-8b", []),  # refused for the model before --accept is asked for
    ("kimi-k2", ["--gpu", "h200", "--tp", "8", "--weight-dtype", "fp8_block", "--accept", "0.7"]),  # MLA, none
])
def test_mtp_is_refused_for_a_model_that_ships_no_module(model, options):
    # mtp:K priced a one-layer copy of Llama 3.1 8B as its drafter, a module its checkpoint does not have.
    result = cli("analyze", "serve", "--model", model, "--requests", "2", "--spec", "mtp:2", *options)
    assert_one_line_error(result)
    assert result.stderr == f"error: {MTP_REFUSED.format(model)}\n"


def test_the_api_refuses_mtp_in_the_same_words():
    with pytest.raises(UserError) as err:
        rl.serve(model="llama-3.1-8b", requests=2, spec="mtp:2", accept=0.7)
    assert str(err.value) == MTP_REFUSED.format("llama-3.1-8b")


def test_every_mtp_module_the_checkpoint_ships_is_held(tmp_path):
    # MiniMax-M2 ships 3 modules, each a layer with its own K and V; the engine holds them all (vLLM builds every
    # one). A copy of the model that ships one holds a third of their weights, and one layer's K and V a block:
    # 8 KV heads over TP 8, head_dim 128, bf16, 16 positions.
    import yaml

    one = yaml.safe_load(model_catalog()["minimax-m2"].read_text())
    path = tmp_path / "minimax-m2-one.yaml"
    path.write_text(yaml.safe_dump({**one, "id": "minimax-m2-one", "mtp_layers": 1}))
    kw = dict(gpu="h200", tp=8, concurrency=1, requests=2, prompt=128, output=8)
    plain = rl.serve(model="minimax-m2", **kw).to_dict()["kv_cache"]
    three = rl.serve(model="minimax-m2", spec="mtp:1", accept=0.8, **kw).to_dict()["kv_cache"]
    single = rl.serve(model=str(path), spec="mtp:1", accept=0.8, **kw).to_dict()["kv_cache"]
    assert single["block_bytes"] - plain["block_bytes"] == 2 * 1 * 128 * 2 * 16
    assert three["block_bytes"] - plain["block_bytes"] == 3 * (2 * 1 * 128 * 2 * 16)
    assert three["weight_bytes"] - plain["weight_bytes"] == pytest.approx(
        3 * (single["weight_bytes"] - plain["weight_bytes"]), rel=1e-12)
    assert single["weight_bytes"] > plain["weight_bytes"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--spec", "eagle:3", "--accept", "0.7"], "--spec 'eagle:3'"),
    (["--spec", "mtp:0", "--accept", "0.7"], "--spec 'mtp:0'"),
    (["--spec", "draft:3", "--accept", "0.7"], "--spec 'draft:3'"),
    (["--spec", "ngram:3"], "--spec needs --accept"),
    (["--spec", "ngram:3", "--accept", "1.5"], "--accept '1.5'"),
    (["--spec", "ngram:3", "--accept", "0.5,0.5"], "each of the 3 positions"),
    (["--accept", "0.5"], "--accept without --spec"),
    (["--spec", "ngram:2", "--accept", "0.5", "--pp", "2"], "--spec with --pp"),
    (["--spec", "draft:nope:2", "--accept", "0.5"], "nope"),
])
def test_bad_speculation_gets_one_line(args, fragment):
    assert_one_line_error(cli("analyze", "serve", "--requests", "2", *args), fragment)


def test_a_run_that_verifies_no_draft_says_so_instead_of_a_zero_rate():
    # Two output tokens: the prefill's and one more, before which no draft is verified; the line printed
    # "0.00 tokens a sequence and step (expected 5.00), 0 of 0 drafts accepted".
    out = cli("analyze", "serve", "--concurrency", "4", "--requests", "8", "--prompt", "100", "--output", "2",
              "--spec", "ngram:4", "--accept", "1", env={"COLUMNS": "200"}).stdout
    assert "no step verified drafts" in out and "0 of 0 drafts" not in out
