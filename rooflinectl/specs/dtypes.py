"""The data types a workload names: activations, the KV cache, the linear layers' weight formats, and which weight
and activation types a kernel runs together (engine/count/quant.py states each format's layout, scales and source)."""

from __future__ import annotations

from typing import Literal, get_args

# Each Literal is the list; the tuple beside it is read from it (typing.get_args), for loops, checks and help text.
DType = Literal["fp32", "bf16", "fp16", "fp8", "int8"]
DTYPES: tuple[DType, ...] = get_args(DType)
# The linear layers' activations as their tensor cores take them: the workload's dtype, or a narrower type the
# input is quantized to on chip (w8a8 in fp8 or int8, w4a4 in fp4 beside mxfp4/nvfp4 weights on Blackwell).
ActDType = Literal[DType, "fp4"]
ACT_DTYPES: tuple[ActDType, ...] = get_args(ActDType)
NARROW_ACT_DTYPES: tuple[str, ...] = ("fp8", "int8", "fp4")
# Weight storage formats (engine/count/quant.py states each one's layout, scales and source).
# fp8_block: fp8 with one scale per 128×128 block (DeepSeek-V3's checkpoint format).
WeightDType = Literal["fp32", "bf16", "fp16", "fp8", "fp8_block", "int8", "int4", "int4_zp", "mxfp4", "nvfp4"]
WEIGHT_DTYPES: tuple[WeightDType, ...] = get_args(WeightDType)
# The formats stored in groups along k whose size a workload gives (group_size): symmetric int4, and int4 with a
# zero point per group (AWQ's default, GPTQ with sym false).
GROUPED_WEIGHT_DTYPES: tuple[WeightDType, ...] = ("int4", "int4_zp")


def group_size_refusal(group_size: int | None, weight_dtype: str | None) -> str | None:
    """The rule that only the grouped formats take a group size, stated once: what is wrong with ``group_size``
    given beside ``weight_dtype`` (None: no format given), or None when the pair is fine."""
    if group_size is None or weight_dtype in GROUPED_WEIGHT_DTYPES:
        return None
    besides = f", not {weight_dtype}" if weight_dtype else ""
    return (f"group size {group_size}: only int4 weights take a group size (weight_dtype "
            f"{' or '.join(GROUPED_WEIGHT_DTYPES)}{besides})")
# The weight/activation pairs a kernel runs, and so the pairs modelled (engine/quant.kernel_name names them):
# unquantized weights in the activations' type; fp8 or int8 weights beside activations of the same type (w8a8 on
# the fp8 or int8 tensor cores) or widened to bf16/fp16 (w8a16); 4-bit weights widened to bf16/fp16 (w4a16:
# AWQ/GPTQ/Marlin, gpt-oss's MXFP4 on Hopper), and mxfp4/nvfp4 beside fp4 activations (w4a4 on Blackwell's fp4
# tensor cores). int4 or int8 activations with 4-bit weights (w4a8, QServe) and 4-bit activations other than
# fp4 are not modelled.
WEIGHT_ACTIVATION_PAIRS: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32",), "bf16": ("bf16",), "fp16": ("fp16",),
    "fp8": ("fp8", "bf16", "fp16"), "fp8_block": ("fp8", "bf16", "fp16"), "int8": ("int8", "bf16", "fp16"), "int4": ("bf16", "fp16"),
    "int4_zp": ("bf16", "fp16"),
    "mxfp4": ("bf16", "fp16", "fp4"), "nvfp4": ("bf16", "fp16", "fp4"),
}
# int4's group along k: 128 is AWQ's and GPTQ's default (specs.model.GroupSize validates a given one).
DEFAULT_GROUP_SIZE = 128

# The data types a GPU spec rates its units in: the tensor cores' (tf32 is fp32 inputs on the tensor cores; int8,
# int4 in TOPS; fp6 and fp4, the OCP microscaling formats: Blackwell runs fp6 at its fp8 rate, CDNA 4 at its fp4
# rate) and the vector units'. No workload computes in fp6: its peak is shown, nothing is placed under it.
TensorDType = Literal["fp64", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp6", "fp4"]
VectorDType = Literal["fp64", "fp32", "fp16", "bf16"]
