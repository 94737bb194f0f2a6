"""Serving on several replicas (serving.replicas) and the KV transfer of disaggregated serving (serving.transfer):
bytes and link times by hand, a one-request run summed by hand, conservation, and one replica equal to one engine."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.api.common import base_workload
from rooflinectl.engine.parallel import Layout
from rooflinectl.serving.capacity import kv_capacity
from rooflinectl.serving.kvcache import BlockPool
from rooflinectl.serving.load import Lengths, closed_loop, open_loop
from rooflinectl.serving.replicas import serve_replicas, side
from rooflinectl.serving.scheduler import SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.serving.transfer import KvTransfer, Link, kv_link
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.stack import Stack

# DeepSeek-V3's latent cache: 61 layers × (512 + 64) values × 2 bytes (bf16) × 4,096 positions.
DSV3_4096 = 61 * (512 + 64) * 2 * 4096
NVLINK4 = Link("NVLink 4 (18 links)", True, 450.0, 10.0)  # H100/H200: 900 GB/s both ways, 10 µs (their files)


def test_kv_transfer_of_a_deepseek_v3_request_by_hand():
    assert DSV3_4096 == 287_834_112
    base = base_workload(model="deepseek-v3")
    h200 = load_gpu("h200")
    # 8 GPUs fit the HGX H200's NVLink domain; 16 do not, and go over its 400 Gb/s NDR port a GPU (50 GB/s, 5 µs).
    assert kv_link(h200, 8) == replace(NVLINK4, domain=h200.interconnect.scale_up)  # behind NVSwitch: share 1
    assert kv_link(h200, 16) == Link("InfiniBand NDR (ConnectX-7), one port a GPU", False, 50.0, 5.0)
    x = KvTransfer(base, Layout(tp=8), Layout(tp=8), kv_link(h200, 8), "after")
    assert x.request_bytes(4096) == DSV3_4096
    # MLA's latent is replicated on every TP rank: each of the 8 decode GPUs receives all of it, the 8 prefill GPUs
    # send 8 copies between them, one each: the busiest link moves one latent.
    assert x.link_bytes(4096) == DSV3_4096
    assert x.seconds(4096) == pytest.approx(10e-6 + 287_834_112 / 450e9, rel=1e-12)  # 0.650 ms
    out = KvTransfer(base, Layout(tp=8), Layout(tp=8), kv_link(h200, 16), "after")
    assert out.seconds(4096) == pytest.approx(5e-6 + 287_834_112 / 50e9, rel=1e-12)  # 5.76 ms
    # One prefill GPU feeding 8 decode GPUs sends 8 latents over its one link.
    assert KvTransfer(base, Layout(), Layout(tp=8), NVLINK4, "after").link_bytes(4096) == 8 * DSV3_4096
    # In fp8 the cache is half.
    assert KvTransfer(base_workload(model="deepseek-v3", kv_dtype="fp8"), Layout(tp=8), Layout(tp=8), NVLINK4,
                      "after").request_bytes(4096) == DSV3_4096 // 2


def test_kv_transfer_of_a_gqa_request_by_hand():
    # Llama 3 70B: 80 layers × 2 (K, V) × 8 KV heads × 128 × 2 bytes = 327,680 bytes a token.
    b = 80 * 2 * 8 * 128 * 2 * 4096
    base = base_workload(model="llama-3-70b")
    x = KvTransfer(base, Layout(tp=4), Layout(tp=8), NVLINK4, "after")
    assert x.request_bytes(4096) == b
    # A TP-8 decode GPU holds 1 of the 8 KV heads (b/8); the 4 prefill GPUs send the 8 shares between them (b/4).
    assert x.link_bytes(4096) == b / 4
    assert KvTransfer(base, Layout(), Layout(tp=4), NVLINK4, "after").link_bytes(4096) == b


def test_kv_transfer_over_a_mesh_by_hand():
    """MI355X: 7 xGMI links of 153.6 GB/s both ways, one to each other GPU of 8 (537.6 GB/s one way in all, 76.8 a
    link). Llama 3 70B, 4,096 positions: b = 80 × 2 × 8 × 128 × 2 × 4,096 bytes a request."""
    b = 80 * 2 * 8 * 128 * 2 * 4096
    base = base_workload(model="llama-3-70b")
    mi355x = load_gpu("mi355x")
    link = kv_link(mi355x, 4)
    assert link == Link("AMD Infinity Fabric (xGMI, 7 links)", True, 537.6, 10.0, domain=mi355x.interconnect.scale_up)
    # One prefill GPU to one decode GPU: all of b over the one link between them, 1/7 of the GPU's bandwidth.
    one = KvTransfer(base, Layout(), Layout(), link, "after")
    assert one.seconds(4096) == pytest.approx(10e-6 + b / (537.6e9 / 7), rel=1e-12)  # 27.3 ms
    # Two prefill GPUs (TP 2) to one decode GPU: it receives b over 2 links; each sender sends b/2 over 1.
    two = KvTransfer(base, Layout(tp=2), Layout(), link, "after")
    assert two.seconds(4096) == pytest.approx(10e-6 + b / (2 * 537.6e9 / 7), rel=1e-12)
    # One prefill GPU to a TP-2 decode pair: it sends b (b/2 to each) over 2 links; each receives b/2 over 1.
    fan = KvTransfer(base, Layout(), Layout(tp=2), link, "after")
    assert fan.seconds(4096) == pytest.approx(10e-6 + b / (2 * 537.6e9 / 7), rel=1e-12)
    # Behind a switch the same pair of GPUs moves b at the GPU's whole bandwidth.
    assert KvTransfer(base, Layout(), Layout(), NVLINK4, "after").seconds(4096) == pytest.approx(10e-6 + b / 450e9)


def test_a_deployment_past_the_scale_up_domain_needs_a_scale_out_network():
    # The MI300X's file: an 8-GPU Infinity Fabric domain and no scale-out network; TP 8 twice is 16 GPUs.
    assert_one_line_error(cli("analyze", "serve", "--gpu", "mi300x", "--model", "llama-3-8b", "--tp", "8",
                              "--disagg", "1:1", "--requests", "2"), "scale-out")


def test_a_pcie_part_moves_the_kv_over_pcie():
    """A PCIe card reaches every peer over PCIe, the rule the collectives follow (engine.parallel.network.Fabric):
    Llama 3 8B's 512-token prompt is 32 layers × K, V × 8 heads × 128 × 2 bytes × 512 = 67,108,864 bytes, on the
    L4's PCIe 4.0 x16 at 32 GB/s one way after 20 µs: 2.117152 ms."""
    r = rl.serve(gpu="l4", model="llama-3-8b", weight_dtype="int4", concurrency=1, requests=2, prompt=512, output=8,
                 disagg=(1, 1)).to_dict()["deployment"]["kv_transfer"]
    assert r["link"] == "PCIe 4.0 x16" and r["kv_bytes_per_request"] == 32 * 2 * 8 * 128 * 2 * 512
    assert r["link_time_s"]["mean"] == pytest.approx(20e-6 + 67_108_864 / 32e9)


@pytest.mark.parametrize("mode", ["after", "overlap"])
def test_one_request_is_its_prefill_steps_transfer_and_decode_steps(mode):
    # Llama 3 8B on H100s, one request of 3,000 prompt and 4 output tokens, prefill budget 2,048 tokens a step.
    r = rl.serve(gpu="h100", model="llama-3-8b", concurrency=1, requests=1, prompt=3000, output=4,
                 disagg=(1, 1), prefill_max_num_batched_tokens=2048, kv_transfer=mode)
    m = StepModel(base_workload(model="llama-3-8b"), load_gpu("h100"))
    prefill = m.time_counts({(2048, 0): 1}) + m.time_counts({(952, 2048): 1})
    kv = 32 * 2 * 8 * 128 * 2 * 3000  # 32 layers × K, V × 8 KV heads × 128 × 2 bytes × 3,000 positions
    if mode == "after":
        ttft = prefill + 10e-6 + kv / 450e9
    else:  # the link keeps up with the compute: what is left after the prefill is the last layer's last chunk
        ttft = prefill + 10e-6 + kv * 952 / 3000 / 32 / 450e9
    decode = [m.time_counts({(1, 3000 + i): 1}) for i in range(3)]
    (served,) = r.run.served
    assert served.ttft_s == pytest.approx(ttft, rel=1e-12)
    assert served.token_times_s[1:] == pytest.approx([ttft + sum(decode[:i + 1]) for i in range(3)], rel=1e-12)
    d = r.simulation.deployment
    assert d is not None and d.transfers is not None and d.transfers.kv_bytes == kv
    assert d.gpus == 2 and [s.steps for s in d.sides] == [2, 3]


def test_every_request_is_prefilled_once_and_decoded_once():
    n = 60
    r = rl.serve(gpu="h100", model="llama-3-8b", concurrency=12, requests=n, prompt="uniform:16-3000",
                 output="uniform:1-64", seed=5, disagg=(2, 3), max_num_seqs=8, prefill_max_num_batched_tokens=1024)
    run, d = r.run, r.simulation.deployment
    assert d is not None and d.transfers is not None
    requests = r.simulation.load.requests
    assert [s.request.id for s in run.served] == [q.id for q in requests]
    assert all(len(s.token_times_s) == s.request.output for s in run.served)
    assert all(list(s.token_times_s) == sorted(s.token_times_s) for s in run.served)
    prefill, decode = d.sides
    more = sum(1 for q in requests if q.output > 1)
    assert sum(prefill.requests) == n and sum(decode.requests) == more == d.transfers.count
    assert 1 <= min(prefill.requests) and 1 <= min(decode.requests)  # the least loaded takes work from each
    # Each request's prompt is prefilled once: the prefill replicas' steps carry exactly the prompts' tokens.
    assert prefill.prefill_time_s == prefill.busy_s
    assert decode.prefill_time_s == 0.0 and decode.preemptions == 0
    assert d.transfers.kv_bytes == sum(32 * 2 * 8 * 128 * 2 * q.prompt for q in requests if q.output > 1)
    assert min(s.ttft_s for s in run.served) > 0


@pytest.mark.parametrize("kind", ["closed", "open"])
@pytest.mark.parametrize("refill_us", [0.0, 300.0])
def test_one_aggregated_replica_is_one_engine(kind, refill_us):
    # The deployment's event loop with one aggregated replica runs the same steps as simulate, preemptions
    # included (a small KV cache forces them), and delays a closed loop's refills by the same rule.
    prompt, output = Lengths.parse("uniform:100-3000", "--prompt"), Lengths.parse("uniform:1-200", "--output")
    load = (closed_loop(8, 40, prompt, output, 3) if kind == "closed" else open_loop(5.0, 40, prompt, output, 3))
    stack = Stack(id="t", name="a test stack", source="this test", refill_latency_us=refill_us)
    m = StepModel(base_workload(model="llama-3-8b"), load_gpu("h100"), stack=stack)
    config = SchedulerConfig(2048, 16)
    capacity = replace(kv_capacity(m, 2048, 16, 8 * 2**30), blocks=300)
    one = simulate(load, m, BlockPool(300, 16), config)
    many = serve_replicas(load, [side("aggregated", 1, m, capacity, config, 16)], None, stack).run
    assert one.preemptions > 0
    assert (many.served, many.steps, many.duration_s, many.preemptions) == (one.served, one.steps, one.duration_s,
                                                                            one.preemptions)


def test_two_replicas_serve_two_clients_apart():
    one = rl.serve(gpu="h100", model="llama-3-8b", concurrency=1, requests=1, prompt=512, output=16).run
    two = rl.serve(gpu="h100", model="llama-3-8b", concurrency=2, requests=2, prompt=512, output=16, replicas=2)
    assert [s.token_times_s for s in two.run.served] == [one.served[0].token_times_s] * 2
    d = two.simulation.deployment
    assert d is not None and d.gpus == 2 and d.sides[0].requests == (1, 1)


def test_each_replica_pays_for_its_own_new_attention_shapes():
    # The hf stack charges new_shape_us to a step of an attention shape its engine has not run (cuDNN's plan):
    # four replicas of one client each are four engines, each planning its own shapes, so each runs as one
    # engine of one client does (they shared one set: TPOT 59.5 ms alone, 30.4 ms in four).
    one = rl.serve(gpu="h200", model="llama-3-8b", stack="hf", concurrency=1, requests=1, prompt=512, output=64)
    four = rl.serve(gpu="h200", model="llama-3-8b", stack="hf", concurrency=4, requests=4, prompt=512, output=64,
                    replicas=4)
    assert [s.token_times_s for s in four.run.served] == [one.run.served[0].token_times_s] * 4


def test_disaggregated_costs_put_the_prefill_gpus_on_the_input():
    r = rl.serve(gpu="h100", model="llama-3-8b", concurrency=4, requests=8, prompt=1024, output=32, disagg=(1, 3),
                 price_per_gpu_hour=2.0)
    data = r.to_dict()
    c, run = data["cost"], r.run
    total = 2.0 * 4 * run.duration_s / 3600  # 4 GPUs for the run's duration
    assert c["usd_per_million_input_tokens"] == pytest.approx(total / 4 / (8 * 1024) * 1e6, rel=1e-12)
    assert c["usd_per_million_output_tokens"] == pytest.approx(total * 3 / 4 / (8 * 32) * 1e6, rel=1e-12)
    d = r.simulation.deployment
    assert d is not None
    busy = sum(s.busy_s for s in d.sides)  # one GPU a replica
    assert c["joules_per_output_token"] == pytest.approx(700 * busy / (8 * 32), rel=1e-12)
    assert data["throughput"]["output_tokens_per_s_per_gpu"] == pytest.approx(8 * 32 / run.duration_s / 4,
                                                                              rel=1e-12)


def test_cli_json_is_the_api_and_bad_input_is_one_line():
    args = ["analyze", "serve", "--gpu", "h100", "--model", "llama-3-8b", "--concurrency", "4", "--requests", "8",
            "--prompt", "512", "--output", "16", "--disagg", "1:2", "--kv-transfer", "overlap"]
    data = json.loads(cli(*args, "--json").stdout)
    assert data == rl.serve(gpu="h100", model="llama-3-8b", concurrency=4, requests=8, prompt=512, output=16,
                            disagg="1:2", kv_transfer="overlap").to_dict()
    dep = data["deployment"]
    assert dep["gpus"] == 3 and [s["role"] for s in dep["sides"]] == ["prefill", "decode"]
    assert dep["kv_transfer"]["mode"] == "overlap" and dep["kv_transfer"]["transfers"] == 8
    assert rl.serve(gpu="h100", model="llama-3-8b", requests=2, output=4).to_dict()["deployment"] is None
    base = ["analyze", "serve", "--model", "llama-3-8b", "--requests", "2"]
    assert_one_line_error(cli(*base, "--disagg", "0:1"), "--disagg 0:1")
    assert_one_line_error(cli(*base, "--disagg", "two"), "--disagg two")
    assert_one_line_error(cli(*base, "--disagg", "١:١"), "--disagg ١:١: give P:D")  # ASCII digits only
    assert_one_line_error(cli(*base, "--replicas", "0"), "--replicas 0")
    assert_one_line_error(cli(*base, "--disagg", "1:1", "--replicas", "2"), "--replicas")
    assert_one_line_error(cli(*base, "--disagg", "1:1", "--kv-transfer", "later"), "--kv-transfer later")
    assert_one_line_error(cli(*base, "--disagg", "1:1", "--spec", "ngram:2", "--accept", "0.5"), "--spec")
    assert_one_line_error(cli("analyze", "serve", "--model", "mixtral-8x7b", "--disagg", "1:1", "--decode-ep", "2",
                              "--requests", "2"), "--decode-ep 2")


@pytest.mark.parametrize(("args", "fragment"), [
    (["--disagg", "1:1", "--prefill-tp", "0"], "--prefill-tp 0"),  # was taken for "not given": --tp's 1
    (["--disagg", "1:1", "--decode-ep", "0"], "--decode-ep 0"),
    (["--disagg", "1:1", "--prefill-tp", "-2"], "--prefill-tp -2"),  # was named --tp
    (["--disagg", "1:1", "--prefill-max-num-batched-tokens", "0"], "--prefill-max-num-batched-tokens 0"),
    (["--disagg", "1:1", "--prefill-max-num-seqs", "0"], "--prefill-max-num-seqs 0"),
    (["--prefill-tp", "2"], "give --disagg P:D"),  # was ignored
    (["--kv-transfer", "overlap"], "give --disagg P:D"),
    (["--kv-transfer", "foo"], "--kv-transfer foo"),  # was ignored without --disagg
])
def test_a_sides_option_is_checked_in_its_own_name_and_never_ignored(args, fragment):
    assert_one_line_error(cli("analyze", "serve", "--requests", "4", "--output", "8", *args), fragment)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--tp", "4", "--tp", "4"], "--tp 4: given more than once"),
    (["--replicas", "2", "--replicas", "2"], "--replicas 2: given more than once"),
    (["--disagg", "2:6", "--disagg", "2:6"], "--disagg 2:6: given more than once"),
    (["--kv-transfer", "bogus"], "--kv-transfer bogus"),
    (["--kv-transfer", "overlap"], "give --disagg P:D"),
    (["--disagg", "1:1", "--prefill-tp", "3"], "TP 3: model llama-3-70b has 64 attention heads"),
])
def test_compare_refuses_a_repeat_or_a_transfer_without_a_split(args, fragment):
    assert_one_line_error(cli("compare", "--model", "llama-3-70b", "--prompt", "64", "--output", "8", "--batch",
                              "2", *args), fragment)


def test_the_runs_kv_peak_is_the_decode_sides_beside_its_blocks():
    # The run's kv_cache gives a decode replica's blocks; its peak was the largest of either side's, so a prefill
    # side of TP 4 (111,764 blocks) printed a peak of 37,918 of 28,869 blocks. Each side keeps its own.
    r = rl.serve(gpu="h100", model="llama-3-8b", disagg="1:1", prefill_tp=4, decode_tp=1, concurrency=512,
                 requests=512, prompt=7000, output=2, prefill_max_num_batched_tokens=600000,
                 prefill_max_num_seqs=512).to_dict()
    assert r["kv_cache"]["peak_blocks"] <= r["kv_cache"]["blocks"]
    sides = r["deployment"]["sides"]
    assert max(s["kv_peak_blocks"] for s in sides) > r["kv_cache"]["blocks"]  # the prefill side's, kept there


@pytest.mark.parametrize("layout", [{"replicas": 2}, {"disagg": (1, 1)}, {"model": "qwen3-30b-a3b", "ep": 4}])
def test_an_idle_deployment_is_drawn_idle(layout):
    """Requests 2 s apart at 0.5/s, a few ms of work each: the timeline of replicas, of a disaggregated decode
    side and of expert-parallel ranks holds 0 sequences across the gaps between arrivals, as one engine's does,
    so that a chart of it does not draw the last step's batch across them; its times never go back."""
    kwargs = {"model": "llama-3-8b", **layout}
    run = rl.serve(gpu="h200", rate=0.5, output=4, prompt=64, requests=4, seed=3, **kwargs).run
    points = run.timeline
    assert all(a.time_s <= b.time_s for a, b in zip(points, points[1:]))
    gaps = [(a.time_s, b.time_s) for a, b in zip(points, points[1:]) if a.sequences == b.sequences == 0]
    assert sum(b - a for a, b in gaps) > 0.5 * run.duration_s
    assert max(p.sequences for p in points) >= 1


# A side that does not fit said "no room for a single KV block" or "request 0: … need 6,250 KV blocks; the cache
# holds 2,307", naming neither the side nor its GPUs. Each side is now checked before the run, in one line.
@pytest.mark.parametrize(("args", "message"), [
    (["--model", "llama-3.1-405b", "--disagg", "1:1"],
     "--disagg 1:1: the prefill side (1 prefill replica of TP 1, 1 GPU) cannot hold a prompt of 2,048 tokens: each "
     "GPU needs 756.0 GiB weights + 1.0 GiB KV cache (128 blocks of 16) + 2.4 GiB activations + 8.0 GiB reserve = "
     "767.4 GiB of 80.0 GiB; the decode side (1 decode replica of TP 1, 1 GPU) cannot hold a request of 2,048 prompt "
     "and 256 output tokens: each GPU needs 756.0 GiB weights + 1.1 GiB KV cache (144 blocks of 16) + 2.4 GiB "
     "activations + 8.0 GiB reserve = 767.5 GiB of 80.0 GiB; give a larger --prefill-tp and --decode-tp"),
    (["--model", "llama-3.1-70b", "--disagg", "1:1", "--prefill-tp", "2", "--decode-tp", "4", "--prompt", "100000",
      "--output", "16"],
     "--disagg 1:1: the prefill side (1 prefill replica of TP 2, 2 GPUs) cannot hold a prompt of 100,000 tokens: "
     "each GPU needs 65.7 GiB weights + 15.3 GiB KV cache (6,250 blocks of 16) + 0.7 GiB activations + 8.0 GiB "
     "reserve = 89.6 GiB of 80.0 GiB; give a larger --prefill-tp"),
    (["--model", "llama-3.1-70b", "--disagg", "1:1", "--prefill-tp", "4", "--decode-tp", "2", "--prompt", "100000",
      "--output", "16"],
     "--disagg 1:1: the decode side (1 decode replica of TP 2, 2 GPUs) cannot hold a request of 100,000 prompt and "
     "16 output tokens: each GPU needs 65.7 GiB weights + 15.3 GiB KV cache (6,251 blocks of 16) + 0.7 GiB "
     "activations + 8.0 GiB reserve = 89.6 GiB of 80.0 GiB; give a larger --decode-tp"),
    (["--model", "llama-3.1-70b", "--disagg", "2:3", "--prefill-tp", "1", "--decode-tp", "4"],
     "--disagg 2:3: the prefill side (2 prefill replicas of TP 1, 2 GPUs) cannot hold a prompt of 2,048 tokens: "
     "each GPU needs 131.4 GiB weights + 0.6 GiB KV cache (128 blocks of 16) + 1.3 GiB activations + 8.0 GiB "
     "reserve = 141.4 GiB of 80.0 GiB; give a larger --prefill-tp"),
    # One output token: the request ends at its prefill, and a decode replica needs room for a block alone.
    (["--model", "llama-3.1-70b", "--disagg", "1:1", "--prefill-tp", "4", "--decode-tp", "1", "--output", "1"],
     "--disagg 1:1: the decode side (1 decode replica of TP 1, 1 GPU) cannot hold one KV block: each GPU needs "
     "131.4 GiB weights + 0.0 GiB KV cache (1 block of 16) + 1.3 GiB activations + 8.0 GiB reserve = 140.7 GiB of "
     "80.0 GiB; give a larger --decode-tp"),
], ids=["both", "prefill", "decode", "prefill-replicas", "decode-one-token"])
def test_a_side_that_does_not_fit_is_named_with_its_sum(args, message):
    result = cli("analyze", "serve", "--gpu", "h100", "--requests", "2", *args)
    assert_one_line_error(result)
    assert result.stderr == f"error: {message}\n"


def test_the_api_names_the_side_that_does_not_fit_in_the_same_words():
    from rooflinectl.errors import UserError

    with pytest.raises(UserError, match=r"^--disagg 2:3: the prefill side \(2 prefill replicas of TP 1, 2 GPUs\) "
                                        r"cannot hold a prompt of 2,048 tokens: each GPU needs 131\.4 GiB weights"):
        rl.serve(gpu="h100", model="llama-3.1-70b", disagg="2:3", prefill_tp=1, decode_tp=4, requests=2)
    # Sides that fit run as before.
    assert rl.serve(gpu="h100", model="llama-3.1-70b", disagg="2:3", tp=4, requests=2, output=8).run.served
