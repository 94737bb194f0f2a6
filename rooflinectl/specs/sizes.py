"""The plausible range of every size a model or a step states.

Every size is a positive integer inside a range that no real model leaves by an order of magnitude or more, so
that a typo or a fuzzed 10**9 is refused by name instead of printing a 40-digit FLOP count.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

# The largest published dense models sit far inside them: PaLM 540B (hidden 18,432, 118 layers, 48 heads,
# MLP 73,728), Llama 3.1 405B (hidden 16,384, 126 layers, 128 heads, MLP 53,248), Gemma (head_dim 256,
# vocabulary 256,000), Llama 4 Scout (10M positions). Every count the engine builds is a Python int (exact) and
# becomes a float only when divided; with these ranges the largest product, a prefill's attention scores × 4·d
# FLOPs × layers (2^20 sequences × 2^14 heads × (2^30)² scores × 2^16 × 2^14 layers = 2^124 ≈ 2e37), is hundreds
# of orders of magnitude below float64's 1.8e308: nothing overflows, and roofline.analyze refuses a step beyond
# any GPU's reach (MAX_STEP_FLOPS) with one line.
HiddenSize = Annotated[int, Field(gt=0, le=2**20)]  # 1,048,576: the residual stream's width
MAX_LAYERS = 2**14  # 16,384 layers: a config.json's window pattern is refused past it before it is built
Layers = Annotated[int, Field(gt=0, le=MAX_LAYERS)]
Heads = Annotated[int, Field(gt=0, le=2**14)]  # 16,384 query or KV heads
HeadDim = Annotated[int, Field(gt=0, le=2**14)]  # 16,384 per head
MlpWidth = Annotated[int, Field(gt=0, le=2**22)]  # 4,194,304: the MLP's intermediate size
Vocab = Annotated[int, Field(gt=0, le=2**24)]  # 16,777,216 tokens
Positions = Annotated[int, Field(gt=0, le=2**30)]  # 1,073,741,824: a length, a context, a position limit
Batch = Annotated[int, Field(gt=0, le=2**20)]  # 1,048,576 sequences in one step
# Mixture of experts: the most routed experts published (Kimi K2: 384, DeepSeek-V3: 256) times about 170, and the
# most shared experts (DeepSeek-V2-Lite: 2) and first dense layers (DeepSeek-V3: 3) far inside theirs.
Experts = Annotated[int, Field(gt=0, le=2**16)]  # 65,536 routed experts in a layer, or a top-k of them
SharedExperts = Annotated[int, Field(ge=0, le=2**10)]  # 1,024
DenseLayers = Annotated[int, Field(ge=0, le=2**14)]  # as many as Layers
# Multi-token-prediction modules a checkpoint ships beside its layers: DeepSeek-V3's and GLM-4.5's 1, MiniMax-M2's 3.
MAX_MTP_MODULES = 2**6  # 64, twenty times the most published
MtpModules = Annotated[int, Field(ge=0, le=MAX_MTP_MODULES)]
# Multi-head latent attention's low ranks: DeepSeek-V3's q_lora_rank 1,536 and kv_lora_rank 512, far inside.
LatentRank = Annotated[int, Field(gt=0, le=2**20)]  # 1,048,576, the widest residual stream


def _quantizer_group(size: int) -> int:
    """A group size a quantizer makes: a power of two from 16 to 2**22. GPTQ and AWQ group 32, 64 or 128 weights
    along k, bitsandbytes' 4-bit blocks hold 64, and a config's -1 (one group per column) is read as 2**22, the
    widest k (specs.hf.quant); 1, 7 or 5,000 is no layout any of them stores."""
    if not (16 <= size <= 2**22 and size & (size - 1) == 0):
        raise PydanticCustomError("invalid", f"{size:,} is no group size a quantizer makes: give a power of two "
                                  f"from 16 to {2**22:,} (GPTQ and AWQ use 32, 64 or 128)")
    return size


# int4's group along k (specs.dtypes.DEFAULT_GROUP_SIZE when none is given): from 16 to a whole column.
GroupSize = Annotated[int, AfterValidator(_quantizer_group)]
