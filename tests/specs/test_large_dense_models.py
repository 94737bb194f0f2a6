"""The bundled large dense models (issue 12): parameter counts derived by hand from their config.json sizes, and
within 1% of the published figures."""

from __future__ import annotations

import pytest

from rooflinectl.specs.models import load_model


def test_llama_3_1_405b_parameters():
    # H = 16384, 128 heads of 128 (q 16384), 8 KV heads (kv 1024), I = 53248, V = 128256, 126 layers, untied.
    # Per layer: Q, K, V 16384·(16384 + 2·1024) = 301,989,888; O 16384² = 268,435,456; two norm gains 32,768;
    # MLP 3·16384·53248 = 2,617,245,696: 3,187,703,808. 126 layers: 401,650,679,808. Embedding and LM head
    # 2·128256·16384 = 4,202,692,608; final norm 16,384. Total 405,853,388,800: 405 B per Meta's Llama 3.1 model
    # card (0.2% above it).
    m = load_model("llama-3.1-405b")
    per_layer = 16384 * (16384 + 2 * 1024) + 16384 * 16384 + 2 * 16384 + 3 * 16384 * 53248
    assert per_layer == 3_187_703_808
    assert m.parameter_count() == 126 * per_layer + 2 * 128256 * 16384 + 16384 == 405_853_388_800
    assert m.parameter_count() == pytest.approx(405e9, rel=0.01)


def test_qwen2_5_72b_parameters():
    # H = 8192, 64 heads of 128 (q 8192), 8 KV heads (kv 1024), I = 29568, V = 152064, 80 layers, untied, Q/K/V
    # biases. Per layer: Q, K, V 8192·(8192 + 2·1024) = 83,886,080; O 8192² = 67,108,864; two norm gains 16,384;
    # biases 8192 + 2·1024 = 10,240; MLP 3·8192·29568 = 726,663,168: 877,684,736. 80 layers: 70,214,778,880.
    # Embedding and LM head 2·152064·8192 = 2,491,416,576; final norm 8,192. Total 72,706,203,648: 72.7 B per
    # the Qwen2.5-72B model card.
    m = load_model("qwen2.5-72b")
    assert m.qkv_bias
    per_layer = 8192 * (8192 + 2 * 1024) + 8192 * 8192 + 2 * 8192 + (8192 + 2 * 1024) + 3 * 8192 * 29568
    assert per_layer == 877_684_736
    assert m.parameter_count() == 80 * per_layer + 2 * 152064 * 8192 + 8192 == 72_706_203_648
    assert m.parameter_count() == pytest.approx(72.7e9, rel=0.01)


def test_qwen3_32b_parameters():
    # H = 5120, 64 heads of 128 (q 8192, not H), 8 KV heads (kv 1024), I = 25600, V = 151936, 64 layers, untied,
    # q_norm and k_norm over a head (2·128). Per layer: Q, K, V 5120·(8192 + 2·1024) = 52,428,800; O 8192·5120 =
    # 41,943,040; two norm gains 10,240; QK norms 256; MLP 3·5120·25600 = 393,216,000: 487,598,336. 64 layers:
    # 31,206,293,504. Embedding and LM head 2·151936·5120 = 1,555,824,640; final norm 5,120. Total
    # 32,762,123,264: 32.8 B per the Qwen3-32B model card.
    m = load_model("qwen3-32b")
    per_layer = 5120 * (8192 + 2 * 1024) + 8192 * 5120 + 2 * 5120 + 2 * 128 + 3 * 5120 * 25600
    assert per_layer == 487_598_336
    assert m.parameter_count() == 64 * per_layer + 2 * 151936 * 5120 + 5120 == 32_762_123_264
    assert m.parameter_count() == pytest.approx(32.8e9, rel=0.01)
