"""The Kernel interface every kernel implements, over every registered kernel: shapes, counts (the same
engine.count.primitives functions the engine uses), correctness of the interpreter shapes, baselines.

The interpreter runs each program as numpy code, so shapes stay small; bf16 is left out because the interpreter's
bf16 arithmetic is not the GPU's (the H200 checks bf16: benchmarks/tune_kernels.py). tests/kernels/conftest.py
sets TRITON_INTERPRET.
"""

from __future__ import annotations

import pytest
from kernel_checks import DTYPES
from kernel_checks import check as _check
from kernel_checks import gen as _gen

from rooflinectl.errors import UserError
from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.registry import KERNELS, get_kernel
from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear

# Rows past the edge and masked lanes compute -inf - -inf in numpy under the interpreter; their results are never
# stored, as on the GPU.
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)


def test_parse_shape():
    k = get_kernel("fused_softmax")
    assert k.parse_shape("4096x16384") == (4096, 16384)
    with pytest.raises(UserError, match="ROWSxCOLS"):
        k.parse_shape("4096")
    with pytest.raises(UserError):
        k.parse_shape("4096xabc")
    with pytest.raises(UserError, match="positive"):
        k.parse_shape("0x8")
    with pytest.raises(UserError, match="dtype"):
        k.check((4, 4), "fp8")



def test_op_counts():
    sm = get_kernel("fused_softmax").op((4096, 4096), "bf16")
    assert sm.bytes == 2 * 4096 * 4096 * 2 and sm.flops == 5 * 4096 * 4096
    cp = get_kernel("copy").op((1 << 20,), "fp32")
    assert cp.bytes == 2 * (1 << 20) * 4 and cp.flops == 0
    mm = get_kernel("matmul").op((8192, 8192, 8192), "bf16")
    assert mm.flops == 2 * 8192**3 and mm.bytes == 3 * 8192 * 8192 * 2 and mm.weight_bytes == 0
    m, k, n = 1, 4096, 14336
    rl = get_kernel("rmsnorm_linear")
    fused = rl.op((m, k, n), "bf16")
    # x, W and the gain read once, y written once; 2mnk of matmul and 4 per x element of RMSNorm.
    assert fused.bytes == (m * k + n * k + k + m * n) * 2
    assert fused.flops == 2 * m * n * k + 4 * m * k
    norm, linear = rl.unfused_ops((m, k, n), "bf16")
    # Unfused, the normalized x is written by the norm and read again by the linear: 2·m·k more elements.
    assert norm.bytes + linear.bytes - fused.bytes == 2 * m * k * 2
    assert get_kernel("copy").unfused_ops((8,), "bf16") == []
    assert RMSNormLinear(with_bias=True).op((m, k, n), "bf16").bytes == fused.bytes + n * 2



@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_interpret_shapes(name, dtype):
    kernel = get_kernel(name)
    for i, shape in enumerate(kernel.interpret_shapes):
        inputs = kernel.make_inputs(shape, dtype, "cpu", _gen(i))
        _check(kernel, inputs, dtype)
        launches = kernel.last_launches()
        assert launches and all(la.programs >= 1 for la in launches)
        # What `measure` times (run without a config) is what config_for chose for that shape and dtype: the
        # kernel's main launch (its last; rmsnorm_linear may launch a pre-pass first) carries that config.
        assert launches[-1].settings == kernel.config_for(shape, dtype), shape
        # Under the interpreter there is no compiled kernel: resources unknown, warps as asked.
        assert launches[-1].handle is None and launches[-1].n_regs is None
        assert launches[-1].num_warps == launches[-1].config["num_warps"]



def test_baselines_match_reference():
    for name in sorted(KERNELS):
        k = get_kernel(name)
        shape = k.interpret_shapes[-1]
        inputs = k.make_inputs(shape, "fp32", "cpu", _gen(8))
        base = k.baselines()
        assert set(base) == {"torch", "compile", *k.extra_baselines()}
        assert relative_error(base["torch"](inputs), k.reference(inputs)) <= k.tolerance("fp32")



def test_sm_count_without_a_device_is_the_tuned_one():
    # Under the interpreter the configs follow the SM count they were tuned on (H100/H200), so that CI exercises
    # the same split-K paths as the GPU; on a GPU the device's own count is read.
    from rooflinectl.kernels.base import TUNED_SM_COUNT, sm_count

    assert sm_count() == TUNED_SM_COUNT == 132


def test_ops_are_named_as_the_engine_names_them_without_the_shape():
    # Interface 5: the record's op is the engine's name; the shape lives in the record's shape fields.
    names = {name: get_kernel(name).op(get_kernel(name).interpret_shapes[-1], "bf16") for name in KERNELS}
    assert {n: (op.name, op.kind, op.fuses) for n, op in names.items()} == {
        "fused_softmax": ("softmax", "attention", ()),
        "copy": ("copy", "copy", ()),
        "matmul": ("matmul", "matmul", ()),
        "rmsnorm_linear": ("rmsnorm_linear", "linear", ("norm",)),
        # The attention core, as transformer.attention_ops names the flash op (naive: its three kernels summed).
        "flash_attention": ("attention", "attention", ()),
        "flash_decoding": ("attention", "attention", ()),
        "flash_decoding_paged": ("attention", "attention", ()),
        "naive_attention": ("attention", "attention", ()),
    }
    assert [op.name for op in get_kernel("rmsnorm_linear").unfused_ops((1, 64, 32), "bf16")] == ["rmsnorm", "linear"]


def test_fp32_dots_run_as_tf32_and_16_bit_as_themselves():
    from rooflinectl.kernels.base import dot_dtype

    assert [dot_dtype(d) for d in ("fp32", "bf16", "fp16")] == ["tf32", "bf16", "fp16"]
    for name in ("matmul", "rmsnorm_linear"):
        k = get_kernel(name)
        assert k.op((8, 8, 8), "fp32").dtype == "tf32" and k.op((8, 8, 8), "fp32").unit == "tensor"
        assert k.op((8, 8, 8), "fp16").dtype == "fp16"
    assert get_kernel("rmsnorm_linear").unfused_ops((8, 8, 8), "fp32")[1].dtype == "tf32"


def test_shared_memory_limit_from_the_spec_or_the_tuned_gpu():
    from rooflinectl.kernels.base import TUNED_SMEM_PER_BLOCK_BYTES, smem_per_block_bytes
    from rooflinectl.specs.hardware import load_gpu

    assert TUNED_SMEM_PER_BLOCK_BYTES == 227 * 1024 == smem_per_block_bytes(load_gpu("h200"))
    assert smem_per_block_bytes() == TUNED_SMEM_PER_BLOCK_BYTES
    assert smem_per_block_bytes(load_gpu("a100")) == 163 * 1024


def test_a_kernel_takes_its_name_and_summary_from_the_registry():
    from rooflinectl.kernels.registry import info_for_module

    for name, info in KERNELS.items():
        kernel = get_kernel(name)
        assert kernel.info is info and info_for_module(info.module) is info
    with pytest.raises(LookupError):
        info_for_module("rooflinectl.kernels.base")


def test_one_map_from_our_dtype_names_to_torch():
    """kernels.base.torch_dtype is the map the kernels, the workload runner, the profile and the ceiling probes
    share: every name is a units dtype of the size torch stores it in (tf32 in fp32's 4 bytes), or the index type
    of the workload's gathers; dtype_name goes back to the first name of a torch type."""
    import torch

    from rooflinectl.kernels.base import TORCH_DTYPE_NAMES, dtype_name, torch_dtype
    from rooflinectl.measure.step.cases import INDEX_DTYPE
    from rooflinectl.units import DTYPE_BYTES

    assert [torch_dtype(n) for n in ("bf16", "fp16", "fp32", "tf32", "fp8", INDEX_DTYPE)] == [
        torch.bfloat16, torch.float16, torch.float32, torch.float32, torch.float8_e4m3fn, torch.int64]
    for name in TORCH_DTYPE_NAMES:
        assert name == INDEX_DTYPE or torch_dtype(name).itemsize == DTYPE_BYTES[name], name
    assert [dtype_name(t) for t in (torch.float32, torch.bfloat16, torch.int64)] == ["fp32", "bf16", "int64"]
