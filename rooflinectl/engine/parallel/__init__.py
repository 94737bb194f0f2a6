"""Tensor, expert and pipeline parallelism: one GPU's share of a step, and the collectives that join the shares.
Pure: no I/O.

The package: ``layout`` (the degrees, checked), ``shard`` (one GPU's model, workload, expert ops, KV cache and
weights), ``collectives`` (the communication ops and their bytes), ``summary`` (the notes beside the per-GPU
figures).

The layout is Megatron-LM's (Shoeybi et al., "Megatron-LM", arXiv 1909.08053, section 3), as vLLM and SGLang
serve it. With ``tp`` = t GPUs, each GPU holds:

  attention   Q, K, V column-parallel: h/t query heads and g/t KV heads each. Where t exceeds g, each KV head is
              replicated on t/g GPUs and each GPU holds one KV head (vLLM's QKVParallelLinear does so), so the
              KV cache per GPU stops shrinking at t = g. O row-parallel: its h/t heads' rows of h·d × H.
  MLA         (DeepSeek) q_b_proj and kv_b_proj column-parallel (h/t heads each), o_proj row-parallel; q_a_proj
              and kv_a_proj_with_mqa replicated, and the latent cache replicated on every GPU: every head reads
              the whole latent, so each rank needs all of it (vLLM's DeepseekV2 attention: ReplicatedLinear for
              the two down-projections).
  MLP         gate and up column-parallel, down row-parallel: width I/t.
  experts     every expert on every GPU, each one's width split I_e/t as the dense MLP's (the shared experts'
              too); the router's H×E gate replicated.
  vocabulary  the embedding and the LM head vocabulary-parallel: V/t rows each (V padded up to the next
              multiple of t where t does not divide it: the least padding; Megatron's make_vocab_size_divisible_by
              pads to a multiple of 128·t and vLLM each shard to a multiple of 64, which is not counted).
  everything  else replicated: norms (and their gains), RoPE, residual adds, biases of row-parallel layers.

So one GPU's step is the engine's own step of a model with those sizes (``per_gpu_workload``): ``transformer.py``
counts it unchanged, and the weights, KV cache and largest batch per GPU follow from the same functions.

The shares are joined by collectives (``communication_ops``), each an op of kind ``communication``:

  attn_all_reduce  after o_proj, every layer: the N×H partial sums of the t GPUs' heads
  mlp_all_reduce   after down_proj (or, in an MoE layer, after moe_combine): the MLP's N×H partial sums
  embed_all_reduce once: each GPU's gather fills the rows of its vocabulary shard (zeros elsewhere), and the
                   sum is the embedding (Megatron's VocabParallelEmbedding)
  logits_all_gather once: each GPU's B×V/t logits gathered into B×V on every GPU, for sampling

Bytes are what one GPU sends, by NCCL's ring algorithms (NCCL's documentation, "Collective Operations", and
nccl-tests' doc/PERFORMANCE.md, which define the bus bandwidth by these factors): an all-reduce of S bytes sends
2(t−1)/t·S (a reduce-scatter then an all-gather, (t−1)/t·S each), an all-gather of S bytes in all (t−1)/t·S. A
GPU receives as much as it sends at the same time, so the roof is the interconnect's bandwidth in one
direction (half the datasheet's bidirectional total: ``Interconnect.per_direction_gbps``), and the time is the
collective's latency plus bytes / that bandwidth (``roofline.place``). The reduction's adds and the collective
kernel's own HBM traffic are not counted. None of these can overlap with compute in a decode step: the next op
needs the sum (the critical path); prefill engines can overlap a layer's collective with another micro-batch's
compute, which is not modelled. Modelled, not measured, unless the GPU file holds the collectives that
``rooflinectl calibrate --comm`` measured (``measured.interconnect``): then ``analyze --calibrated`` times each
collective op (``Op.collective``) with that collective's bus bandwidth at the largest size and its time at the
smallest (``MeasuredInterconnect.fit``). nccl-tests' busbw is defined so that busbw × time = these ring bytes,
so the same formula holds with the measured figures in place of the datasheet's.

Expert parallelism (``ep`` = e GPUs, a mixture of experts only; not with tp > 1) takes DeepSeek's serving layout
(DeepSeek-V3 technical report, arXiv 2412.19437, section 3.4: attention data-parallel, experts expert-parallel),
as SGLang's DP attention with DeepEP and vLLM's data-parallel attention with expert parallelism run it:

  attention   data-parallel: every GPU holds the attention, the dense layers, the router, embedding and LM
              head whole, and serves ⌈B/e⌉ of the B sequences (the busiest GPU sets the step's time), with
              their KV cache.
  experts     E/e whole experts a GPU (refused where e does not divide E). A GPU's tokens send each of their k
              copies to the GPU of its expert; under uniform routing a GPU receives as many pairs as it sends,
              ⌈B/e⌉·T·k, so its expert matmuls are the engine's for its own batch, and they read the weights of
              E/e·(1 − (1 − k/E)^N) distinct experts (N the whole step's tokens; a stated experts_touched X:
              X/e), an expectation.
  all-to-all  dispatch_all_to_all before the experts, combine_all_to_all after, per MoE layer: a GPU sends
              n·k·H activations (n its tokens), (e−1)/e of them to other GPUs under uniform routing, and receives as many:
              bytes sent = n·k·H·a·(e−1)/e each way (DeepEP's dispatch and combine; DeepSeek dispatches in FP8
              and deduplicates tokens per node, neither modelled). Same roof and time rule as above.

Expert parallelism under tensor parallelism (``ep`` = ``tp`` = t, the same GPUs: vLLM's
``--tensor-parallel-size t --enable-expert-parallel``): the attention, dense layers, shared experts and vocabulary
are split as under TP, and the routed experts are not sliced but spread, E/t whole experts a GPU. After the
attention's all-reduce every GPU holds every token, so no token is sent anywhere: each GPU runs the pairs routed
to its own experts, N·k/t under uniform routing (its expert matmuls' FLOPs and activation bytes are 1/t of the
engine's for the N tokens, and they read E/t·(1 − (1 − k/E)^N) distinct experts' weights, an expectation), sums
its pairs' weighted outputs into an N×H partial (moe_combine over N·k/t pairs: a multiply and an add a pair and
element, 2·(N·k/t)·H FLOPs, plus the shared experts' add), and mlp_all_reduce sums the t partials as under TP.

Pipeline parallelism (``pp`` = p stages, with tp; not with ep) splits the layers into p stages of L/p
consecutive layers (refused where p does not divide L, or where the stages would hold different kinds of layer:
an MoE model's first dense layers, a window pattern that does not repeat within a stage). A GPU holds one
stage: its layers' weights and KV cache, and the embedding (first stage) or the LM head and final norm (last
stage; the heavier, counted); a tied embedding is held by both end stages. A step's ops are its pass through
all p stages, one after another (each GPU runs L/p layers of it), and between stages the N×H activations go
from one GPU to the next: ``pp_send``, point-to-point, N·H·a bytes, p − 1 times, timed by the same rule. With
one batch in the pipeline each stage idles (p−1)/p of the step; split into M micro-batches the idle share (the
bubble) is (p−1)/(M+p−1) (GPipe: Huang et al., arXiv 1811.06965, section 2.2). The step time here is the
batch's pass with no micro-batching (M = 1), the bubble's worst case; the output states the bubble for
M = p.

tokens/s per GPU divides by the GPUs one copy spans, max(tp, ep)·pp: ep alone, tp·pp, or tp = ep on the same
GPUs; no GPU is counted twice.
"""

from __future__ import annotations

from .collectives import all_gather_bytes, all_reduce_bytes, communication_ops
from .layout import MAX_DEGREE, Layout, check_degree, check_interconnect
from .shard import (
    check_experts,
    expert_ops_per_gpu,
    kv_bytes_per_sequence_per_gpu,
    kv_heads_per_gpu,
    padded_vocab,
    per_gpu_model,
    per_gpu_workload,
    sequences_per_gpu,
    stage_workload,
    weight_bytes_per_gpu,
)
from .summary import notes

__all__ = [
    "MAX_DEGREE",
    "Layout",
    "all_gather_bytes",
    "all_reduce_bytes",
    "check_degree",
    "check_experts",
    "check_interconnect",
    "communication_ops",
    "expert_ops_per_gpu",
    "kv_bytes_per_sequence_per_gpu",
    "kv_heads_per_gpu",
    "notes",
    "padded_vocab",
    "per_gpu_model",
    "per_gpu_workload",
    "sequences_per_gpu",
    "stage_workload",
    "weight_bytes_per_gpu",
]
