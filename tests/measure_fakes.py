"""Test doubles for the measure harness: a kernel that runs on the CPU without Triton, and a fake clock."""

from __future__ import annotations

import torch

from rooflinectl.engine.count.primitives import softmax_op
from rooflinectl.kernels.base import Kernel
from rooflinectl.measure.bench import REP_MS, WARMUP_MS, CaptureError
from rooflinectl.measure.harness import Plan, Reporter, run_measure
from rooflinectl.records.kernel import DeviceInfo
from rooflinectl.specs.hardware import load_gpu

H100 = load_gpu("h100")
H200 = load_gpu("h200")
MIB = 2**20


class FakeSoftmax(Kernel):
    """Row softmax by torch; ``mode`` breaks it on purpose: "half" leaves half the output unwritten (NaN from the
    poison), "raise" raises as a kernel that fails to compile would."""

    name = "fake_softmax"
    summary = "test double"
    shape_format = "ROWSxCOLS"
    dtypes = ("bf16", "fp32")
    default_dtype = "bf16"
    default_shapes = [(512, 2048)]
    interpret_shapes = [(3, 7)]

    def __init__(self, mode: str = "ok", error: float = 0.0, baseline_error: float = 0.0):
        super().__init__()
        self.mode = mode
        self.error = error  # the output is the softmax × (1 + error): a relative error of exactly ``error``
        self.baseline_error = baseline_error  # the same for the eager baseline
        self.inputs_made = 0
        self.runs = 0
        self.seeds: list[int] = []  # the seed of each input set drawn, in order (the fake allocator's log)
        self.ran_on: list[tuple[int, int]] = []  # (x's data_ptr, out's data_ptr) of each run, in order

    def op(self, shape, dtype):
        return softmax_op("softmax", *shape, dtype)

    def make_inputs(self, shape, dtype, device, generator):
        self.inputs_made += 1
        self.seeds.append(generator.initial_seed())
        x = torch.randn(shape, generator=generator, device=device) * 4
        return {"x": x.to(torch.bfloat16 if dtype == "bf16" else torch.float32)}

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def run(self, inputs, out, config=None):
        self._start_run()
        self.runs += 1
        self.ran_on.append((inputs["x"].data_ptr(), out.data_ptr()))
        if self.mode == "raise":
            raise RuntimeError("out of resources: shared memory, Required: 300000, Hardware limit: 232448")
        y = (torch.softmax(inputs["x"].double(), dim=-1) * (1 + self.error)).to(out.dtype)
        if self.mode == "half":
            out[: out.shape[0] // 2] = y[: out.shape[0] // 2]
        else:
            out.copy_(y)
        self._record(self.run, (out.shape[0],), {"num_warps": 4, "BLOCK": 2048}, None)

    def reference(self, inputs):
        return torch.softmax(inputs["x"].double(), dim=-1)

    def eager(self, inputs):
        if self.mode == "baseline_raises":
            raise RuntimeError("torch eager: no kernel image is available for execution on the device")
        return (torch.softmax(inputs["x"].double(), dim=-1) * (1 + self.baseline_error)).to(inputs["x"].dtype)

    def tolerance(self, dtype):
        return {"bf16": 1e-2, "fp32": 1e-4}[dtype]

    def config_for(self, shape, dtype):
        return None


class FakeClock:
    """A bench that returns the given (median, p20, p80) in turn and counts the runs it was handed."""

    def __init__(self, *timings):
        self.timings = list(timings)
        self.calls = 0

    def __call__(self, fn, warmup_ms=None, rep_ms=None):
        fn()
        fn()  # rotation: a second call takes the next input set
        self.calls += 1
        return self.timings.pop(0)


class FakeDevice:
    """A fake device's timer: each figure runs ``fn`` ``runs`` times (as the GPU's timed runs would), and it records
    what it was asked (the windows, the figures) and returns the given (median, p20, p80) in turn. Figures whose
    index is in ``no_capture`` raise CaptureError, as a kernel that cannot be captured in a CUDA graph does."""

    def __init__(self, *timings, runs: int = 2, no_capture=(), name: str = "graph"):
        self.timings = list(timings)
        self.runs = runs
        self.no_capture = set(no_capture)
        self.name = name
        self.asked: list[tuple[float, float]] = []  # (warmup_ms, rep_ms) of each figure
        self.figures = 0

    def __call__(self, fn, warmup_ms=WARMUP_MS, rep_ms=REP_MS):
        index = self.figures
        self.figures += 1
        self.asked.append((warmup_ms, rep_ms))
        if index in self.no_capture:
            raise CaptureError("RuntimeError: operation not permitted when stream is capturing")
        for _ in range(self.runs):
            fn()
        return self.timings.pop(0)


def cpu_info(l2_bytes: int | None = 8 * MIB) -> DeviceInfo:
    return DeviceInfo(name="fake GPU", spec="h100-sxm", l2_bytes=l2_bytes)


def run_fake(kernel, shapes, dtype="bf16", timed=True, baselines=("torch",), clock=None, ceilings=None,
             spec=H100, info=None, events=None, **plan):
    plan = Plan(shapes=shapes, dtype=dtype, device="cpu", timed=timed, baselines=baselines, seed=7, **plan)
    return run_measure(kernel, plan, spec, command="rooflinectl measure --kernel fake_softmax", reporter=Reporter(),
                       bench=clock or FakeClock(), ceilings=ceilings, info=info or cpu_info(), events_bench=events)
