"""The engine's matmul FLOPs against torch's own count of a transformers model of the same config.

torch.utils.flop_counter.FlopCounterMode counts, per aten call, 2·m·n·k for every mm, addmm, bmm and baddbmm (and
the SDPA kernels: 4·B·h·T·Lk·d, the full score matrix); it counts nothing else: no RMSNorm, no SiLU, no RoPE, no
softmax, no bias add (addmm's bias is not counted), no embedding gather. So the engine FLOPs compared here are its
matmul FLOPs only, op by op:

- every ``linear`` and ``expert`` op's FLOPs (2·m·n·k each: unfused, nothing else is folded into them), less the
  N·n_out bias adds of Q, K and V where the model has Qwen2's qkv bias (the engine counts them, torch does not);
- the ``attention`` ops that run on the tensor cores: with ``--attention naive`` ``qk`` and ``pv``, 2·d FLOPs per
  score over the full T×Lk scores, masked or not, as transformers' eager attention computes them (two matmuls of
  B·h·T·Lk·d after repeat_kv widens K and V to every head); ``softmax`` runs on the vector units and is left out;
- a ``router`` op's gate matmul, 2·N·H·E: its softmax and top-k ((5 + k)·N·E, op.py's constants) are left out.

Why they are equal: the projections are the same matmuls of the same shapes; with ``logits_to_keep=1`` transformers
applies lm_head to the last token of each sequence only, as the engine's ``lm_head`` does; a decode step over a
cache of L − 1 positions attends to L, the engine's decode ``context``. For a mixture of experts torch sees each
expert's GEMMs over the tokens actually routed to it, Σ_e n_e = N·k token-expert pairs whatever the routing, which
is the engine's expert count; the router's gate is one N×H·H×E matmul in both. The rotary tables (cos, sin) are
built without a matmul torch counts in these transformers versions, and torch's total is checked whole ("Global"),
so a matmul the engine lacks would show.

The dense models run on the meta device (shapes only, no memory); the mixtures of experts on tiny real CPU tensors,
since their routing picks experts by value (``nonzero`` of the router's mask), which meta tensors do not have, and
with transformers' ``eager`` experts (a loop of F.linear over each expert's routed tokens): its default here,
``grouped_mm``, runs torch._grouped_mm, which FlopCounterMode (torch 2.13) does not count, so torch would see no
expert FLOPs at all (checked: 0 of the experts' 1,966,080 per layer in the Mixtral case below).
"""

from __future__ import annotations

import json

import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from rooflinectl.engine.count.op import SOFTMAX_FLOPS_PER_ELEMENT, TOPK_FLOPS_PER_ELEMENT_PER_PICK  # noqa: E402
from rooflinectl.engine.count.transformer import step_ops  # noqa: E402
from rooflinectl.specs.model import Model  # noqa: E402
from rooflinectl.specs.models import model_from_hf_config  # noqa: E402
from rooflinectl.specs.scenario import resolve_workload  # noqa: E402
from rooflinectl.specs.workload import Workload  # noqa: E402

# Small enough to run in well under a second each, large enough that every dimension differs (H 64, 4 heads of
# 16 with 2 KV heads, MLP 160, vocabulary 256): a transposed shape would change the count.
DENSE = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=512)
BATCH, PROMPT = 2, 8


def engine_matmul_flops(w: Workload) -> int:
    """The step's matmul FLOPs by the engine's ops (count × one instance), as the module docstring states."""
    m = w.model
    total = 0
    for op in step_ops(w):
        if op.kind in ("linear", "expert"):
            assert not op.fuses, op.name  # unfused: the op is its matmul (and, for Q, K, V, a bias add)
            flops = op.flops
            if m.qkv_bias and op.name in ("q_proj", "k_proj", "v_proj"):
                flops -= w.tokens * (m.q_dim if op.name == "q_proj" else m.kv_dim)  # N·n_out bias adds
        elif op.kind == "attention" and op.unit == "tensor":
            flops = op.flops  # qk and pv: 2·d per score
        elif op.kind == "router":
            assert m.moe is not None
            e, k = m.moe.num_experts, m.moe.experts_per_token
            softmaxed = k if m.moe.router_softmax == "top_k" else e  # its softmax (or sigmoid) over k or E
            flops = op.flops - (SOFTMAX_FLOPS_PER_ELEMENT * softmaxed + TOPK_FLOPS_PER_ELEMENT_PER_PICK * k * e) * w.tokens
            assert flops == 2 * w.tokens * m.hidden_size * e
        else:
            continue
        total += op.count * flops
    return int(total)


def torch_flops(model, **inputs) -> tuple[int, object]:
    # Imported here, not at collection: torch.utils.flop_counter imports triton, which must first be imported
    # after tests/kernels/conftest.py has set TRITON_INTERPRET (the kernel tests run in its interpreter).
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        out = model(**inputs, use_cache=True, logits_to_keep=1)
    return counter.get_total_flops(), out


def engine_model(cfg, tmp_path) -> Model:
    """The engine's model from the same config, through the config.json importer."""
    folder = tmp_path / cfg.model_type
    folder.mkdir()
    data = cfg.to_dict()
    if cfg.model_type == "qwen3_moe" and "num_local_experts" in data:
        # transformers 5 keeps Qwen3-MoE's expert count as num_local_experts (its attribute_map makes num_experts
        # an alias) and writes that name; the published config.json (Qwen/Qwen3-30B-A3B) says num_experts.
        data["num_experts"] = data.pop("num_local_experts")
    (folder / "config.json").write_text(json.dumps(data, default=str))
    return model_from_hf_config(folder / "config.json")


def compare(hf_model, model: Model, device: str) -> None:
    """One prefill of BATCH × PROMPT tokens, then one decode step over its cache: torch's matmul FLOPs and the
    engine's, equal."""
    ids = torch.randint(0, model.vocab_size, (BATCH, PROMPT), device=device)
    got, out = torch_flops(hf_model, input_ids=ids)
    prefill = resolve_workload("prefill", model=model, batch=BATCH, seq_len=PROMPT, attention="naive",
                               fused=[])
    assert got == engine_matmul_flops(prefill), "prefill"
    nxt = torch.randint(0, model.vocab_size, (BATCH, 1), device=device)
    got, _ = torch_flops(hf_model, input_ids=nxt, past_key_values=out.past_key_values)
    # The new token writes its K and V, then attends to the PROMPT cached positions and itself.
    decode = resolve_workload("decode", model=model, batch=BATCH, context=PROMPT + 1, attention="naive", fused=[])
    assert got == engine_matmul_flops(decode), "decode"


@pytest.mark.parametrize("name", ["Llama", "Mistral", "Qwen2"])
def test_dense_models_match_torch_on_the_meta_device(name, tmp_path):
    config_class = getattr(transformers, f"{name}Config")
    extra = {"sliding_window": None} if name == "Mistral" else {}
    cfg = config_class(**DENSE, **extra)
    cfg._attn_implementation = "eager"
    model = engine_model(cfg, tmp_path)
    if name == "Qwen2":
        assert model.qkv_bias  # the importer sets it for model_type qwen2: the bias adds are subtracted above
    with torch.device("meta"):
        hf = getattr(transformers, f"{name}ForCausalLM")(cfg)
    compare(hf.eval(), model, "meta")


def test_qwen3_matches_torch_on_the_meta_device(tmp_path):
    """Qwen3's q/k RMSNorm adds no matmul; the importer reads model_type qwen3 with its q/k norm."""
    cfg = transformers.Qwen3Config(**DENSE)
    cfg._attn_implementation = "eager"
    model = engine_model(cfg, tmp_path)
    assert model.qk_norm
    with torch.device("meta"):
        hf = transformers.Qwen3ForCausalLM(cfg)
    compare(hf.eval(), model, "meta")


def test_gemma3_with_a_sliding_layer_matches_torch_on_the_meta_device(tmp_path):
    """Gemma 3's text decoder, one sliding layer (window 4) and one full: its GELU-tanh MLP, four norms a layer,
    q/k norms and scaled embedding add no matmul. Prefill: eager attention computes the whole 8 × 8 score matrix
    of the sliding layer under its mask, as the engine's naive count does (T × min(Lk, W + T − 1) = 8 × 8). Decode:
    transformers' sliding cache keeps the last W − 1 positions, so the new token attends to W = 4 of them in the
    sliding layer, the engine's min(context, W), and to all 9 in the full one."""
    cfg = transformers.Gemma3TextConfig(**DENSE, sliding_window=4,
                                        layer_types=["sliding_attention", "full_attention"])
    cfg._attn_implementation = "eager"
    model = engine_model(cfg, tmp_path)
    assert model.sliding_window == 4 and model.sliding_layers == 1 and model.mlp == "gated_gelu_tanh"
    assert model.post_norms and model.qk_norm and model.scale_embeddings
    with torch.device("meta"):
        hf = transformers.Gemma3ForCausalLM(cfg)
    compare(hf.eval(), model, "meta")


@pytest.mark.parametrize("name, experts", [
    ("Mixtral", dict(num_local_experts=4, num_experts_per_tok=2)),
    ("Qwen3Moe", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48, decoder_sparse_step=1,
                      mlp_only_layers=[], norm_topk_prob=True)),
])
def test_mixtures_of_experts_match_torch_on_tiny_cpu_tensors(name, experts, tmp_path):
    torch.manual_seed(0)
    cfg = getattr(transformers, f"{name}Config")(**DENSE, **experts)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"  # countable: see the module docstring
    model = engine_model(cfg, tmp_path)
    assert model.moe is not None and model.moe.num_experts == 4 and model.moe.experts_per_token == 2
    hf = getattr(transformers, f"{name}ForCausalLM")(cfg)
    compare(hf.eval(), model, "cpu")


def test_llama4_with_chunked_nope_and_interleaved_experts_matches_torch_on_tiny_cpu_tensors(tmp_path):
    """Llama 4's text decoder, two layers: layer 0 dense (intermediate_size_mlp) and chunked with RoPE and the
    weightless Q/K norm, layer 1 MoE (4 experts, top-1, a shared expert) and NoPE over every position
    (interleave_moe_layer_step 2, no_rope_layer_interval 2). Llama4TextMoe runs every token through every
    expert (bmm over all E, the unpicked ones weighted 0), so torch sees E/k times the engine's expert matmuls,
    which count the N·k pairs a serving kernel runs. The chunk (16) is longer than the 9 positions: transformers'
    chunked cache keeps C − 1 positions, so a decode past a chunk's end would attend to more than the engine's
    own chunk; the chunk geometry is test_chunked_attention.py's."""
    torch.manual_seed(0)
    e, k = 4, 1
    cfg = transformers.Llama4TextConfig(
        **{**DENSE, "num_hidden_layers": 2}, intermediate_size_mlp=96, num_local_experts=e, num_experts_per_tok=k,
        interleave_moe_layer_step=2, no_rope_layer_interval=2, attention_chunk_size=16, use_qk_norm=True)
    cfg._attn_implementation = "eager"
    model = engine_model(cfg, tmp_path)
    assert model.layer_counts() == {(False, "chunked"): 1, (True, "full"): 1} and model.rope_qk_l2_norm
    assert model.intermediate_size == 96 and model.moe is not None and model.moe.expert_intermediate_size == 160
    hf = transformers.Llama4ForCausalLM(cfg).eval()
    ids = torch.randint(0, model.vocab_size, (BATCH, PROMPT))
    got, out = torch_flops(hf, input_ids=ids)

    def expected(w: Workload) -> int:
        experts = sum(op.count * op.flops for op in step_ops(w) if op.kind == "expert")
        return engine_matmul_flops(w) + int(experts) * (e // k - 1)

    prefill = resolve_workload("prefill", model=model, batch=BATCH, seq_len=PROMPT, attention="naive", fused=[])
    assert got == expected(prefill), "prefill"
    nxt = torch.randint(0, model.vocab_size, (BATCH, 1))
    got, _ = torch_flops(hf, input_ids=nxt, past_key_values=out.past_key_values)
    decode = resolve_workload("decode", model=model, batch=BATCH, context=PROMPT + 1, attention="naive", fused=[])
    assert got == expected(decode), "decode"


def test_qwen3_next_with_a_linear_and_a_gated_full_layer_matches_torch_on_tiny_cpu_tensors(tmp_path):
    """Qwen3-Next, two layers: layer 0 Gated DeltaNet, layer 1 gated full attention (full_attention_interval 2),
    both MoE (4 experts, top-2, a gated shared expert). Beside the projections torch counts, in the linear
    layer, the chunked delta rule's matmuls (torch_chunk_gated_delta_rule: β·K·Kᵀ, Q·Kᵀ, the state read twice,
    the intra-chunk product and the state update; not its triangular solve, its decays, norms and gates, which
    the engine's delta_rule_chunked op counts beside them) and the conv as a padded F.conv1d: T + K − 1 outputs
    a channel in a prefill (padding K − 1, then cut to T) and 2 in a decode step (its cache keeps K inputs, one
    more than the taps need), 2·K FLOPs each. The decode's recurrent delta rule is elementwise: torch counts
    none of it."""
    from rooflinectl.engine.count.recurrent import DELTA_RULE_CHUNK, chunked_flops_per_head

    torch.manual_seed(0)
    cfg = transformers.Qwen3NextConfig(
        **{**DENSE, "num_hidden_layers": 2}, full_attention_interval=2, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=48, shared_expert_intermediate_size=32, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=12, linear_conv_kernel_dim=4)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    model = engine_model(cfg, tmp_path)
    assert model.layer_counts() == {(True, "linear"): 1, (True, "full"): 1}
    hf = transformers.Qwen3NextForCausalLM(cfg).eval().requires_grad_(False)
    assert model.parameter_count() == sum(p.numel() for p in hf.parameters())
    gdn = model.linear_attention
    assert gdn is not None
    c, dk, dv, taps, channels = DELTA_RULE_CHUNK, 8, 12, 4, gdn.conv_channels
    heads = BATCH * gdn.num_value_heads
    ids = torch.randint(0, model.vocab_size, (BATCH, PROMPT))
    got, out = torch_flops(hf, input_ids=ids)
    prefill = resolve_workload("prefill", model=model, batch=BATCH, seq_len=PROMPT, attention="naive", fused=[])
    rule = next(op for op in step_ops(prefill) if op.name == "delta_rule_chunked")
    # The engine's op less what torch does not count: the solve (c²·(d_k + d_v)) and the state's decay (d_k·d_v)
    # per chunk and head, the norms and gates per token.
    chunks = -(-PROMPT // c)
    not_matmul = heads * chunks * (c * c * (dk + dv) + dk * dv) + BATCH * PROMPT * (7 * gdn.key_dim + 9 * 4)
    assert rule.flops - not_matmul == heads * chunks * (c * c * (4 * dk + 2 * dv) + 6 * c * dk * dv)
    assert chunked_flops_per_head(PROMPT, dk, dv) * heads + BATCH * PROMPT * (7 * gdn.key_dim + 9 * 4) == rule.flops
    conv = 2 * taps * BATCH * channels * (PROMPT + taps - 1)
    assert got == engine_matmul_flops(prefill) + rule.flops - not_matmul + conv, "prefill"
    nxt = torch.randint(0, model.vocab_size, (BATCH, 1))
    got, _ = torch_flops(hf, input_ids=nxt, past_key_values=out.past_key_values)
    decode = resolve_workload("decode", model=model, batch=BATCH, context=PROMPT + 1, attention="naive", fused=[])
    assert got == engine_matmul_flops(decode) + 2 * taps * BATCH * channels * 2, "decode"


def test_nemotron_h_with_mamba_attention_and_mlp_layers_matches_torch_on_tiny_cpu_tensors(tmp_path):
    """Nemotron-H, four one-branch layers "M*-M": two Mamba-2 (8 heads of 8, state 16, 2 groups, chunks of 4),
    one attention without RoPE, one squared-ReLU MLP. Beside the projections torch counts, in each Mamba-2 layer,
    transformers' torch SSD (mamba2_chunk_scan): per chunk and head C·Bᵀ (2·c²·S: it widens B and C to every head,
    where the engine's kernel computes them per group), the masked scores times x (2·c²·P), the chunk's state
    (2·c·S·P) and its read by C (2·c·S·P), and per head the chunk-to-chunk state passing as one einsum over the
    (K + 1)² pairs of chunks (2·(K + 1)²·P·S, where the engine counts the scan's 2·P·S a chunk); not the
    decays, gates and D·x, which the engine's ssm_scan_chunked counts beside them. The conv is a padded F.conv1d:
    T + w − 1 outputs a channel in a prefill and 2 in a decode step, 2·w FLOPs each (as Qwen3-Next's). The decode's
    recurrent scan is elementwise but for its read-out, a bmm of 2·P·S a head."""
    from rooflinectl.engine.count.ssm import SSM_FLOPS_PER_CHANNEL, SSM_GATE_FLOPS_PER_HEAD, chunked_flops

    torch.manual_seed(0)
    cfg = transformers.NemotronHConfig(
        **{k: v for k, v in DENSE.items() if k != "num_hidden_layers"}, hybrid_override_pattern="M*-M",
        mamba_num_heads=8, mamba_head_dim=8, ssm_state_size=16, n_groups=2, conv_kernel=4, chunk_size=4)
    cfg._attn_implementation = "eager"
    folder = tmp_path / "nemotron_h"
    folder.mkdir()
    data = cfg.to_dict()
    data.pop("time_step_limit")  # (0, inf): JSON has no Infinity, and the key builds no weight
    (folder / "config.json").write_text(json.dumps(data, default=str))
    model = model_from_hf_config(folder / "config.json")
    assert model.layer_counts() == {(False, "mamba"): 2, (False, "full"): 1, (False, "mlp"): 1}
    hf = transformers.NemotronHForCausalLM(cfg).eval().requires_grad_(False)
    assert model.parameter_count() == sum(p.numel() for p in hf.parameters())
    ssm = model.mamba
    assert ssm is not None
    h, p, s, g, c, taps, channels = 8, 8, 16, 2, 4, 4, ssm.conv_channels
    chunks = -(-PROMPT // c)
    ids = torch.randint(0, model.vocab_size, (BATCH, PROMPT))
    got, out = torch_flops(hf, input_ids=ids)
    prefill = resolve_workload("prefill", model=model, batch=BATCH, seq_len=PROMPT, attention="naive", fused=[])
    scan = next(op for op in step_ops(prefill) if op.name == "ssm_scan_chunked")
    per_token = SSM_GATE_FLOPS_PER_HEAD * h + SSM_FLOPS_PER_CHANNEL * ssm.inner
    assert scan.flops == BATCH * chunked_flops(PROMPT, ssm) + BATCH * PROMPT * per_token
    # The engine's chunked core less what torch does not count (the mask c², the decays c·(S + P) a chunk and
    # head) and with torch's own C·Bᵀ per head and state passing, per sequence:
    matmuls = chunks * (h * (2 * c * c * p + 4 * c * s * p) + g * 2 * c * c * s)
    assert chunked_flops(PROMPT, ssm) == matmuls + chunks * h * (c * c + c * (s + p) + 2 * p * s)
    torch_ssd = BATCH * (matmuls + chunks * (h - g) * 2 * c * c * s + h * 2 * (chunks + 1) ** 2 * p * s)
    conv = 2 * taps * BATCH * channels * (PROMPT + taps - 1)
    assert got == engine_matmul_flops(prefill) + 2 * (torch_ssd + conv), "prefill"
    nxt = torch.randint(0, model.vocab_size, (BATCH, 1))
    got, _ = torch_flops(hf, input_ids=nxt, past_key_values=out.past_key_values)
    decode = resolve_workload("decode", model=model, batch=BATCH, context=PROMPT + 1, attention="naive", fused=[])
    readout = BATCH * h * 2 * p * s
    assert got == engine_matmul_flops(decode) + 2 * (readout + 2 * taps * BATCH * channels * 2), "decode"
