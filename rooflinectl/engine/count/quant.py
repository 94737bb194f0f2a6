"""Weight storage formats: the bytes a linear layer's k×n weight matrix takes in each, scales included, and the
kernel that multiplies by it. Pure counting: no I/O.

Each format is stated with its layout and source beside its code (design.md's counting rules give the table).
Scales sit along k, the input dimension a dot product runs over, so a group or block is g consecutive weights of
one output column; a k×n matrix holds n·⌈k/g⌉ of them. Bytes are rounded up to whole bytes once per matrix (two
4-bit values pack into a byte).

What stays unquantized (in the workload's ``dtype``): the embedding table, the LM head, every RMSNorm gain and
an MoE router's gate, as in the published w4a16 and fp8 checkpoints (AutoAWQ and GPTQ quantize the decoder
layers' linear modules only; gpt-oss keeps its router, embedding and unembedding in bf16 beside its MXFP4
experts; NVIDIA ModelOpt's NVFP4 and FP8 exports leave lm_head out by default).
"""

from __future__ import annotations

import math

from ...specs.dtypes import WeightDType
from ...specs.workload import Workload


def _scaled(k: int, n: int, bits: int, group: int, scale_bytes: int, per_tensor_bytes: int = 0) -> int:
    """k·n values of ``bits`` each, packed, plus one scale of ``scale_bytes`` per ``group`` weights along k in
    each of the n columns, plus ``per_tensor_bytes`` once."""
    return math.ceil(k * n * bits / 8) + n * math.ceil(k / group) * scale_bytes + per_tensor_bytes


# fp8_block's square block of weights that shares one scale (DeepSeek-V3's weight_block_size [128, 128]).
FP8_BLOCK = 128


def weight_matrix_bytes(fmt: WeightDType, k: int, n: int, group_size: int) -> int:
    """Bytes of a k×n weight matrix stored in ``fmt`` (``group_size``: int4's group along k)."""
    if fmt == "fp32":
        return 4 * k * n
    if fmt in ("bf16", "fp16"):
        return 2 * k * n
    if fmt == "fp8":
        # FP8 E4M3 elements and one fp32 scale for the whole tensor (vLLM's Fp8LinearMethod and the
        # llm-compressor/ModelOpt FP8 checkpoints: a per-tensor weight_scale; torch._scaled_mm takes fp32
        # scales): k·n bytes + 4. 8.000 bits a weight.
        return k * n + 4
    if fmt == "fp8_block":
        # FP8 E4M3 elements and one fp32 scale per 128×128 block of the matrix (DeepSeek-V3's checkpoint,
        # README_WEIGHTS.md of deepseek-ai/DeepSeek-V3: quantization_config weight_block_size [128, 128], a float32
        # weight_scale_inv per block; DeepGEMM and vLLM's block-wise fp8 run it): k·n + 4·⌈k/128⌉·⌈n/128⌉ bytes,
        # 8 + 32/16384 bits a weight (a matrix whose sides are not multiples of 128 has its edge blocks padded).
        return k * n + 4 * math.ceil(k / FP8_BLOCK) * math.ceil(n / FP8_BLOCK)
    if fmt == "int8":
        # INT8 elements and one fp32 scale per output channel (SmoothQuant-style W8A8 and compressed-tensors'
        # channel-wise int8: the int32 accumulator is scaled per column): k·n + 4·n bytes, 8 + 32/k bits a weight.
        return k * n + 4 * n
    if fmt == "int4":
        # Symmetric INT4 in groups of g along k, one fp16 scale per group, no zero point: (4·g + 16)/g bits a
        # weight, 4.125 at g = 128 (GPTQ with sym=True, the layout the Marlin kernels run).
        return _scaled(k, n, 4, group_size, 2)
    if fmt == "int4_zp":
        # Asymmetric INT4 in groups of g along k: one fp16 scale and one 4-bit zero point per group (AutoAWQ's
        # GEMM layout, AWQ's default zero_point=True: qzeros packs eight 4-bit zeros in an int32 per group and 8
        # columns; GPTQ with sym=False the same): (4·g + 16 + 4)/g bits a weight, 4.15625 at g = 128. The zeros
        # of a matrix, n·⌈k/g⌉ of 4 bits, are packed and rounded up once, like the weights.
        zeros = math.ceil(n * math.ceil(k / group_size) * 4 / 8)
        return _scaled(k, n, 4, group_size, 2) + zeros
    if fmt == "mxfp4":
        # OCP Microscaling Formats (MX) Specification v1.0 (2023), MXFP4: FP4 E2M1 elements in blocks of 32, one
        # shared 8-bit E8M0 scale per block: (32·4 + 8)/32 = 4.25 bits a weight.
        return _scaled(k, n, 4, 32, 1)
    if fmt == "nvfp4":
        # NVIDIA NVFP4 (Blackwell; NVIDIA technical blog 'Introducing NVFP4 for Efficient and Accurate Low-Precision
        # Inference', 2025): FP4 E2M1 elements in blocks of 16, one FP8 E4M3 scale per block, and one fp32 scale
        # per tensor: (16·4 + 8)/16 = 4.5 bits a weight, plus 4 bytes a matrix.
        return _scaled(k, n, 4, 16, 1, per_tensor_bytes=4)
    raise ValueError(f"unknown weight format {fmt}")  # WeightDType is closed: a bug in the caller


def bits_per_weight(fmt: WeightDType, group_size: int = 128) -> float:
    """Bits a weight of ``fmt`` takes with its scales, per-tensor scales left out: the figure of a large matrix
    (k a multiple of every block size). int8's per-channel scale is counted at k = 4,096."""
    k = 4096 if fmt == "int8" else group_size * 32 * 16  # a multiple of 16, 32, 128 and g
    n = 4096
    per_tensor = 4 if fmt in ("fp8", "nvfp4") else 0
    return (weight_matrix_bytes(fmt, k, n, group_size) - per_tensor) * 8 / (k * n)


def linear_weight_bytes(w: Workload, k: int, n: int) -> int:
    """Bytes of one of the workload's quantizable k×n weight matrices (a projection, an expert)."""
    return weight_matrix_bytes(w.weights, k, n, w.group_size)


def kernel_name(w: Workload) -> str:
    """The matmul kernel a linear layer runs, named: 'bf16', or 'w4a16: int4 g128 dequantized to the bf16 tensor
    cores', 'w8a8: fp8 on the fp8 tensor cores', 'w4a4: nvfp4 on the fp4 tensor cores'. The compute roof is
    the type the tensor cores multiply in (``w.matmul_dtype``): a weight narrower than it is widened on chip
    before the multiply; an input narrower than ``dtype`` is quantized on chip as the kernel reads it."""
    fmt, act = w.weights, w.matmul_dtype
    if not w.quantized:
        return act  # weights and activations in one type: the step as it always was
    bits = {"fp8": 8, "fp8_block": 8, "int8": 8}.get(fmt, 4)
    act_bits = {"fp4": 4, "fp8": 8, "int8": 8}.get(act, 16)
    what = f"int4 g{w.group_size}" if fmt == "int4" else f"int4 g{w.group_size} with zero points" if fmt == "int4_zp" else "fp8 in 128×128 blocks" if fmt == "fp8_block" else fmt
    if act_bits == 16:
        return f"w{bits}a16: {what} dequantized to the {act} tensor cores"
    return f"w{bits}a{act_bits}: {what} on the {act} tensor cores"
