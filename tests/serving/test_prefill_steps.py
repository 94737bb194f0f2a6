"""Prompts and decodes in separate steps (``SchedulerConfig.mixed`` False, SGLang's policy): a step holds prompts
whenever one can be formed, else every decode; requests prefilled in one burst then decode and finish together.
The stacks carry the policy, and --prefill-steps overrides it."""

from __future__ import annotations

import json

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.serving.kvcache import BlockPool
from rooflinectl.serving.load import Lengths, closed_loop, open_loop
from rooflinectl.serving.scheduler import Scheduler, SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.specs.stack import load_stack


class OneSecondSteps:
    """A step model that prices every step at one second: token times are step counts."""

    stack = None

    def time_counts(self, counts: dict[tuple[int, int], int]) -> float:
        return 1.0


def run_of(load, config: SchedulerConfig, blocks: int = 1000):
    return simulate(load, OneSecondSteps(), BlockPool(blocks, 16), config)  # type: ignore[arg-type]


def test_a_burst_is_prefilled_first_then_decoded_together():
    # 4 requests at once of 8 prompt and 3 output tokens, 16 tokens a step. Steps apart: [A, B prompts],
    # [C, D prompts], [4 decodes], [4 decodes]: first tokens at 1, 1, 2, 2 s, every last token at 4 s.
    load = closed_loop(4, 4, Lengths("fixed", 8), Lengths("fixed", 3))
    run = run_of(load, SchedulerConfig(max_num_batched_tokens=16, mixed=False))
    assert [s.token_times_s[0] for s in run.served] == [1.0, 1.0, 2.0, 2.0]
    assert [s.token_times_s[-1] for s in run.served] == [4.0] * 4
    assert run.steps == 4
    # Mixed (vLLM's), the same load: [A, B prompts], [A, B decode; C's 8 and 6 of D's], [A, B, C decode; D's 2],
    # then A and B are done at 3 s, C at 4 s and D (first token at 3 s) at 5 s.
    mixed = run_of(load, SchedulerConfig(max_num_batched_tokens=16))
    assert [s.token_times_s[0] for s in mixed.served] == [1.0, 1.0, 2.0, 3.0]
    assert [s.token_times_s[-1] for s in mixed.served] == [3.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("blocks", [5000, 40])  # 40 blocks: preemptions
def test_no_step_holds_both_prompts_and_decodes(monkeypatch, blocks):
    kinds: list[set[str]] = []
    step = Scheduler.step

    def spy(self):
        out = step(self)
        kinds.append({"decode" if s.live.generated > 0 and s.cached == s.live.target - 1 else "prompt" for s in out})
        return out

    monkeypatch.setattr(Scheduler, "step", spy)
    load = open_loop(3.0, 60, Lengths("uniform", 20, 300), Lengths("uniform", 2, 40), seed=4)
    run = run_of(load, SchedulerConfig(max_num_batched_tokens=256, mixed=False), blocks)
    assert len(run.served) == 60
    assert {"decode"} in kinds and {"prompt"} in kinds
    assert all(len(k) <= 1 for k in kinds)
    if blocks == 40:
        assert run.preemptions > 0


def test_a_stack_states_its_policy_and_the_option_overrides_it(tmp_path):
    assert load_stack("vllm").prefill_steps == "mixed"
    apart = tmp_path / "apart.yaml"
    apart.write_text("id: apart\nname: Apart\nsource: a test\nprefill_steps: separate\n")
    kw = dict(gpu="h100", model="llama-3.1-8b", concurrency=4, prompt=512, output=16, requests=8)
    separate = rl.serve(stack=str(apart), **kw)
    assert separate.to_dict()["scheduler"]["prefill_steps"] == "separate"
    mixed = rl.serve(stack=str(apart), prefill_steps="mixed", **kw)
    assert mixed.to_dict()["scheduler"]["prefill_steps"] == "mixed"
    # Every step of the separate run that carries prompt tokens carries no decode: the four prompts of 512 tokens
    # fit one 8,192-token step, so the run's four requests of each round finish together.
    assert len({s.token_times_s[-1] for s in separate.run.served[:4]}) == 1


def test_a_stacks_token_budget_is_the_default_and_the_option_overrides_it(tmp_path):
    small = tmp_path / "small.yaml"
    small.write_text("id: small\nname: Small\nsource: a test\nmax_num_batched_tokens: 512\n")
    kw = dict(gpu="h100", model="llama-3.1-8b", concurrency=2, prompt=2000, output=4, requests=2)
    run = rl.serve(stack=str(small), **kw)
    assert run.to_dict()["scheduler"]["max_num_batched_tokens"] == 512
    assert run.run.max_tokens_in_step == 512  # 2 × 2,000 prompt tokens in chunks of the budget
    assert rl.serve(stack=str(small), max_num_batched_tokens=4096, **kw).run.max_tokens_in_step == 4000
    assert rl.serve(**kw).to_dict()["scheduler"]["max_num_batched_tokens"] == 8192  # roofline: none of its own


def test_a_bad_policy_gets_one_line():
    r = cli("analyze", "serve", "--model", "llama-3.1-8b", "--prefill-steps", "both")
    assert_one_line_error(r, "--prefill-steps both")
    out = json.loads(cli("analyze", "serve", "--model", "llama-3.1-8b", "--concurrency", "2", "--requests", "4",
                         "--prompt", "64", "--output", "4", "--prefill-steps", "separate", "--json").stdout)
    assert out["scheduler"]["prefill_steps"] == "separate"
