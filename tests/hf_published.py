"""Published Hugging Face config.json of every model type the importer reads, for the specs tests."""

from __future__ import annotations

from typing import Any

# The published configs (huggingface.co/<repo>/blob/main/config.json), less keys no count reads (token ids,
# dropouts, RoPE scaling, dtypes).
PUBLISHED: dict[str, dict[str, Any]] = {
    "llama": {  # meta-llama/Meta-Llama-3-8B
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "mlp_bias": False,
        "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "tie_word_embeddings": False,
        "vocab_size": 128256},
    "mistral": {  # mistralai/Mistral-7B-v0.1
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "sliding_window": 4096, "tie_word_embeddings": False,
        "vocab_size": 32000},
    "qwen2": {  # Qwen/Qwen2-7B
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 3584,
        "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
        "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "sliding_window": 131072,
        "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 152064},
    "qwen3": {  # Qwen/Qwen3-8B
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960,
        "max_window_layers": 36, "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
        "sliding_window": None, "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 151936},
    "mixtral": {  # mistralai/Mixtral-8x7B-v0.1
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
        "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
        "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32000},
    "qwen3_moe": {  # Qwen/Qwen3-30B-A3B
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
        "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
        "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
        "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
        "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "sliding_window": None,
        "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 151936},
    "phi3": {  # microsoft/Phi-3-mini-4k-instruct
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_bias": False, "hidden_act": "silu",
        "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 4096, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 32, "sliding_window": 2047, "tie_word_embeddings": False,
        "vocab_size": 32064},
    "gemma2": {  # google/gemma-2-27b
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0, "head_dim": 128, "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 4608, "intermediate_size": 36864,
        "max_position_embeddings": 8192, "num_attention_heads": 32, "num_hidden_layers": 46,
        "num_key_value_heads": 16, "query_pre_attn_scalar": 144, "sliding_window": 4096, "vocab_size": 256000},
    "gemma3_text": {  # google/gemma-3-1b-it
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "attention_bias": False,
        "attn_logit_softcapping": None, "final_logit_softcapping": None, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "intermediate_size": 6912,
        "max_position_embeddings": 32768, "num_attention_heads": 4, "num_hidden_layers": 26,
        "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "sliding_window": 512,
        "sliding_window_pattern": 6, "vocab_size": 262144},
    "gemma3": {  # google/gemma-3-27b-it: the text decoder nested, at Gemma3TextConfig's defaults where left out
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 256,
        "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                        "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
                        "num_key_value_heads": 16, "query_pre_attn_scalar": 168, "sliding_window": 1024},
        "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                          "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                          "patch_size": 14}},
    "gpt_oss": {  # openai/gpt-oss-120b
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True, "head_dim": 64,
        "hidden_act": "silu", "hidden_size": 2880, "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention"] * 18, "max_position_embeddings": 131072,
        "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36, "num_key_value_heads": 8,
        "num_local_experts": 128, "sliding_window": 128, "tie_word_embeddings": False, "vocab_size": 201088,
        "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                           "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}},
    "deepseek_v2": {  # deepseek-ai/DeepSeek-V2-Lite
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "first_k_dense_replace": 1,
        "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 10944, "kv_lora_rank": 512,
        "max_position_embeddings": 163840, "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1,
        "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": False, "num_attention_heads": 16,
        "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16, "q_lora_rank": None,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "scoring_func": "softmax", "tie_word_embeddings": False,
        "topk_group": 1, "topk_method": "greedy", "v_head_dim": 128, "vocab_size": 102400},
    "deepseek_v3": {  # deepseek-ai/DeepSeek-V3
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "attention_bias": False,
        "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432,
        "kv_lora_rank": 512, "max_position_embeddings": 163840, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
        "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
        "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
        "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc",
        "v_head_dim": 128, "vocab_size": 129280,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
}
PUBLISHED["kimi_k2"] = {  # moonshotai/Kimi-K2-Instruct: DeepSeek-V3's architecture
    **PUBLISHED["deepseek_v3"], "model_type": "kimi_k2", "first_k_dense_replace": 1, "n_group": 1,
    "n_routed_experts": 384, "num_attention_heads": 64, "num_key_value_heads": 64, "num_nextn_predict_layers": 0,
    "topk_group": 1, "vocab_size": 163840}
