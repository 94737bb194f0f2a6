"""profile's attribution rules (rooflinectl.profile.attribute), on events built by hand: which op each
event is charged to, work or overhead, and that the parts add up to the profiled total."""

from __future__ import annotations

import math

import pytest

from rooflinectl.profile.attribute import (
    CORE,
    HARNESS,
    LAYER,
    MLP,
    ROPE_TABLES,
    SELF_ATTN,
    Event,
    Range,
    attribute,
    is_work,
    short_name,
)
from rooflinectl.profile.trace import match_replays

US = 1e-6
OPS = [("embed", "gather"), ("attn_norm", "norm"), ("q_proj", "linear"), ("rope", "elementwise"),
       ("kv_write", "copy"), ("qk", "attention"), ("softmax", "attention"), ("pv", "attention"),
       ("o_proj", "linear"), ("attn_residual", "elementwise"), ("act", "elementwise"), ("lm_head", "linear")]
NAIVE = ("qk", "softmax", "pv")

L = Range(LAYER, 1)
SA = Range(SELF_ATTN, 2)


def ev(name, us, ranges, calls, call_id=-1, start=0.0):
    return Event(name=name, time_s=us * US, ranges=tuple(ranges), calls=tuple(calls), call_id=call_id,
                 start_s=start)


def naive_step() -> list[Event]:
    """One layer of an eager (naive-attention) decode, in the order it runs; times in µs, distinct powers of two
    so that every sum below is exact and tells which events went where."""
    core = Range(CORE, 10)
    events = [
        ev("index_select", 1, [Range("embed", 3)], ["aten::embedding", "aten::index_select"]),
        ev("direct_copy", 2, [L, Range("attn_norm", 4)], ["aten::to", "aten::_to_copy", "aten::copy_"]),
        ev("pow", 4, [L, Range("attn_norm", 4)], ["aten::pow"]),
        ev("gemm", 8, [L, SA, Range("q_proj", 5)], ["aten::linear", "aten::matmul", "aten::mm"], 30),
        ev("splitKreduce", 16, [L, SA, Range("q_proj", 5)], ["aten::linear", "aten::matmul", "aten::mm"], 30),
        ev("memset", 32, [L, SA, Range("q_proj", 5)], []),  # no launching op: never work
        ev("cos", 64, [Range(ROPE_TABLES, 6)], ["aten::cos"]),
        ev("mul", 128, [L, SA, Range("rope", 7)], ["aten::mul"]),
        ev("cat", 256, [L, SA, Range("rope", 7)], ["aten::cat"]),
        ev("index_copy", 512, [L, SA, Range("kv_write", 8)], ["aten::index_copy_"]),
        ev("arange", 1024, [L, SA, Range("kv_write", 8)], ["aten::arange"]),
        # the core: repeat_kv's copy, QK^T, the mask add, softmax, the cast back, PV (two kernels of one call)
        ev("repeat_copy", 2048, [L, SA, core], ["aten::reshape", "aten::clone", "aten::copy_"], 40),
        ev("bmm", 4096, [L, SA, core], ["aten::matmul", "aten::bmm"], 41),
        ev("add", 8192, [L, SA, core], ["aten::add"], 42),
        ev("softmax", 16384, [L, SA, core], ["aten::softmax", "aten::_softmax"], 43),
        ev("direct_copy", 32768, [L, SA, core], ["aten::to", "aten::_to_copy", "aten::copy_"], 44),
        ev("bmm", 65536, [L, SA, core], ["aten::matmul", "aten::bmm"], 45),
        ev("bmm_tail", 131072, [L, SA, core], ["aten::matmul", "aten::bmm"], 45),
        ev("contiguous", 262144, [L, SA], ["aten::contiguous", "aten::clone", "aten::copy_"]),
        ev("add", 524288, [L, Range("attn_residual", 11)], ["aten::add"]),
        ev("mul", 1048576, [L, Range(MLP, 12)], ["aten::mul"]),
        ev("where", 2097152, [L], ["aten::where"]),
        ev("triu", 4194304, [], ["aten::triu"]),
        ev("fill", 8388608, [Range(HARNESS, 13)], ["aten::fill_"]),
    ]
    return [Event(e.name, e.time_s, e.ranges, e.calls, e.call_id, float(i)) for i, e in enumerate(events)]


def by_op(a):
    return {o.op: o for o in a.ops}


def test_each_event_goes_where_the_rules_say():
    a = attribute(naive_step(), OPS, NAIVE)
    ops = by_op(a)
    work = {name: round(o.time_s / US) for name, o in ops.items()}
    assert work == {"embed": 1, "attn_norm": 4, "q_proj": 8 + 16, "rope": 128, "kv_write": 512, "qk": 4096,
                    "softmax": 16384, "pv": 65536 + 131072, "o_proj": 0, "attn_residual": 524288,
                    "act": 1048576, "lm_head": 0}
    overhead = {name: {k.name: round(k.time_s / US) for k in o.overhead} for name, o in ops.items() if o.overhead}
    assert overhead == {
        "attn_norm": {"direct_copy": 2},
        "q_proj": {"memset": 32},
        "rope": {"cat": 256, "cos": 64},  # rotate_half's cat, and the cos/sin tables
        "kv_write": {"arange": 1024},
        "qk": {"repeat_copy": 2048, "add": 8192},  # repeat_kv before any core op, the mask after QK^T
        "softmax": {"direct_copy": 32768},
        "pv": {"contiguous": 262144},  # the attention module's reshape of the output
    }
    assert [(u.name, round(u.time_s / US)) for u in a.unattributed] == [
        ("triu (outside the layers)", 4194304), ("where (in a decoder layer)", 2097152)]
    assert ops["pv"].events == 2 and ops["q_proj"].events == 2 and ops["o_proj"].events == 0
    assert a.harness is not None and a.harness.events == 1 and round(a.harness.time_s / US) == 8388608


def test_the_parts_add_up_to_the_profiled_total():
    events = naive_step()
    a = attribute(events, OPS, NAIVE)
    step = [e for e in events if e.ranges[-1:] != (Range(HARNESS, 13),)]
    assert a.events == len(step) == 23
    # 2^0 … 2^22 µs: every event of the step once, the harness's (2^23) not at all.
    assert round(a.total_s / US) == 2**23 - 1
    assert math.isclose(a.work_s + a.overhead_s + a.unattributed_s, a.total_s, rel_tol=1e-12)
    counted = sum(o.events + sum(k.events for k in o.overhead) for o in a.ops) + sum(u.events for u in a.unattributed)
    assert counted == a.events


def test_flash_core_charges_the_sdpa_call_and_lists_the_rest():
    core = Range(CORE, 5)
    events = [
        ev("repeat", 3, [L, SA, core], ["aten::expand", "aten::reshape", "aten::clone", "aten::copy_"], 1, 0.0),
        ev("flash_fwd", 5, [L, SA, core], ["aten::scaled_dot_product_attention",
                                           "aten::_scaled_dot_product_flash_attention"], 2, 1.0),
        ev("contiguous", 7, [L, SA], ["aten::contiguous", "aten::clone", "aten::copy_"], 3, 2.0),
    ]
    ops = [("attention", "attention"), ("o_proj", "linear")]
    a = attribute(events, ops, ("attention",))
    att = by_op(a)["attention"]
    assert round(att.time_s / US) == 5 and att.events == 1
    assert {k.name: round(k.time_s / US) for k in att.overhead} == {"repeat": 3, "contiguous": 7}
    assert round(a.total_s / US) == 15


@pytest.mark.parametrize("kind, calls, work", [
    ("linear", ["aten::linear", "aten::addmm"], True),
    ("linear", ["aten::to", "aten::_to_copy", "aten::copy_"], False),
    ("norm", ["aten::mean"], True),
    ("norm", ["aten::to", "aten::_to_copy"], False),
    ("elementwise", ["aten::mul"], True),
    ("elementwise", ["aten::masked_fill"], False),
    ("gather", ["aten::embedding", "aten::index_select"], True),
    ("copy", ["aten::index_copy_"], True),
    ("copy", ["aten::arange"], False),
    ("attention", ["aten::matmul", "aten::bmm"], False),  # inside the flash core, a matmul is not the kernel
    ("attention", ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_efficient_attention"], True),
    ("norm", [], False),
])
def test_what_the_roofline_counts_by_kind(kind, calls, work):
    assert is_work(kind, calls) is work


def test_a_core_the_step_does_not_have_is_a_bug():
    with pytest.raises(ValueError):
        attribute([], OPS, ("attention",))


@pytest.mark.parametrize("name, short", [
    ("void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
     "::{lambda()#3}::operator()() const::{lambda(c10::BFloat16)#1}>(int, at::native::direct_copy_kernel_cuda)",
     "elementwise_kernel<direct_copy_kernel_cuda>"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
     "vectorized_elementwise_kernel<CUDAFunctor_add>"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4>)", "reduce_kernel<MeanOps>"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>("
     "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)",
     "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
     "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"),
    ("aten::addmm", "aten::addmm"),
])
def test_short_kernel_names(name, short):
    assert short_name(name) == short


def test_graph_replays_matched_to_the_eager_kernels_by_position():
    eager = [ev("a", 10, [], []), ev("b", 20, [], []), ev("c", 30, [], [])]
    replayed = [("a", 1e-6), ("b", 2e-6), ("c", 3e-6), ("a", 3e-6), ("b", 4e-6), ("c", 5e-6)]
    matched = match_replays(eager, replayed, 2)
    assert matched is not None
    assert [round(e.time_s / US, 9) for e in matched] == [2, 3, 4]  # each kernel's mean over the two replays
    assert [e.name for e in matched] == ["a", "b", "c"]
    assert match_replays(eager, replayed[:5], 2) is None  # a kernel short
    swapped = [("a", 1e-6), ("c", 2e-6), ("b", 3e-6)] * 2
    assert match_replays(eager, swapped, 2) is None  # a name out of place


def test_gpu_kernels_find_their_ranges_through_the_launching_op():
    """trace.gpu_events on events shaped as torch.profiler's FunctionEvents: a kernel is tied to the aten op whose
    id is its linked_correlation_id, and that op's ancestors give the ranges; the CUDA runtime's launch call and
    the device-side mirror of a range are not kernels; a kernel no op launched keeps no range."""
    from types import SimpleNamespace

    from rooflinectl.profile.trace import gpu_events

    def event(id, name, device="CPU", parent=None, linked=0, start=0.0, end=0.0, annotation=False):
        return SimpleNamespace(id=id, name=name, device_type=f"DeviceType.{device}", cpu_parent=parent,
                               linked_correlation_id=linked, time_range=SimpleNamespace(start=start, end=end),
                               is_user_annotation=annotation)

    layer = event(1, "rooflinectl:layer", annotation=True)
    q = event(2, "rooflinectl:q_proj", parent=layer, annotation=True)
    linear = event(3, "aten::linear", parent=q)
    mm = event(4, "aten::mm", parent=linear)
    events = [
        layer, q, linear, mm,
        event(5, "cudaLaunchKernel", parent=mm, linked=4),
        event(6, "sm90_xmma_gemm_bf16", device="CUDA", linked=4, start=10.0, end=13.5),
        event(7, "rooflinectl:q_proj", device="CUDA", linked=2, start=10.0, end=14.0, annotation=True),
        event(8, "Memset (Device)", device="CUDA", linked=99, start=20.0, end=21.0),
    ]
    got = gpu_events(events)
    assert [e.name for e in got] == ["sm90_xmma_gemm_bf16", "Memset (Device)"]
    gemm, memset = got
    assert [r.label for r in gemm.ranges] == ["layer", "q_proj"] and gemm.calls == ("aten::linear", "aten::mm")
    assert gemm.call_id == 3 and math.isclose(gemm.time_s, 3.5e-6)
    assert memset.ranges == () and memset.calls == ()


def test_gpu_kernels_found_through_the_runtime_call_that_launched_them():
    """The shape torch 2.11's profiler gives on an H200 (dumped there, 2026-12-03): a kernel has no linked
    correlation id, and its own id is that of the runtime call that launched it (cuLaunchKernelEx,
    cudaLaunchKernel), whose CPU parent is the aten op; CPU ids are not unique (the profiler's 'Activity Buffer
    Request' shares aten::mm's id)."""
    from types import SimpleNamespace

    from rooflinectl.profile.trace import gpu_events

    def event(id, name, device="CPU", parent=None, start=0.0, end=0.0, annotation=False):
        return SimpleNamespace(id=id, name=name, device_type=f"DeviceType.{device}", cpu_parent=parent,
                               linked_correlation_id=None, time_range=SimpleNamespace(start=start, end=end),
                               is_user_annotation=annotation)

    q = event(1, "rooflinectl:q_proj", annotation=True)
    linear = event(2, "aten::linear", parent=q)
    mm = event(7, "aten::mm", parent=linear)
    copy = event(11, "aten::copy_", parent=q)
    events = [
        q, linear, mm, event(7, "Activity Buffer Request", parent=mm),
        event(14, "cuLaunchKernelEx", parent=mm), event(16, "cudaLaunchKernelExC", parent=mm),
        copy, event(32, "cudaLaunchKernel", parent=copy),
        event(1, "rooflinectl:q_proj", device="CUDA", start=0.0, end=9.0, annotation=True),
        event(14, "nvjet_sm90_tst_64x8", device="CUDA", start=1.0, end=4.0),
        event(16, "splitKreduce_kernel", device="CUDA", start=4.0, end=5.0),
        event(32, "direct_copy_kernel", device="CUDA", start=5.0, end=5.5),
        event(99, "Memset (Device)", device="CUDA", start=8.0, end=8.5),
    ]
    got = {e.name: e for e in gpu_events(events)}
    assert list(got) == ["nvjet_sm90_tst_64x8", "splitKreduce_kernel", "direct_copy_kernel", "Memset (Device)"]
    for name in ("nvjet_sm90_tst_64x8", "splitKreduce_kernel"):
        assert [r.label for r in got[name].ranges] == ["q_proj"] and got[name].calls == ("aten::linear", "aten::mm")
    assert got["direct_copy_kernel"].calls == ("aten::copy_",)
    assert got["Memset (Device)"].ranges == () and math.isclose(got["nvjet_sm90_tst_64x8"].time_s, 3e-6)
