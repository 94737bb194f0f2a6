"""The device in hand: whether torch, triton and CUDA are there, what the device is, and which spec it matches.

Torch and triton are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime

from ..errors import UserError
from ..records.kernel import DeviceInfo
from ..specs.devices import match_device
from ..specs.hardware import GPU

INSTALL_HINT = "pip install -e '.[gpu]'"
INTERPRETER_DEVICE_NAME = "CPU (Triton interpreter)"


def set_interpret(kernel_module: str) -> None:
    """Make Triton interpret kernels on the CPU: TRITON_INTERPRET must be set before the kernel module is imported,
    since ``triton.jit`` reads it when it wraps the function."""
    if os.environ.get("TRITON_INTERPRET") != "1" and kernel_module in sys.modules:
        raise UserError(f"--interpret: {kernel_module} was imported before TRITON_INTERPRET was set; "
                        f"run it in a fresh process")
    os.environ["TRITON_INTERPRET"] = "1"


# What each command can do without a GPU, for the messages below: measure checks correctness on the CPU with
# --interpret; calibrate measures ceilings, which only a GPU has, and has no --interpret to suggest.
_WITHOUT_A_GPU = {
    "measure": "or use --interpret to check correctness on the CPU",
    "calibrate": "calibrate times the GPU itself, so it has no CPU mode: run it on the machine with the GPU",
}


def require_gpu_stack(command: str = "measure") -> tuple[str, str]:
    """torch's and triton's versions; a UserError saying what to install when either is missing, and what
    ``command`` (measure or calibrate) can do without a GPU."""
    try:
        import torch
        import triton  # type: ignore[import-untyped]  # triton ships no type information
    except ImportError as err:
        missing = getattr(err, "name", None) or "torch/triton"
        cpu = ("with no GPU, a CPU build of torch and then --interpret checks correctness on the CPU"
               if command == "measure" else "and run it on the machine with the GPU")
        raise UserError(f"{command} needs torch and triton ({missing} is not installed): {INSTALL_HINT} ({cpu})") \
            from None
    return str(torch.__version__), str(triton.__version__)


def require_cuda(command: str = "measure") -> None:
    """A UserError when torch sees no CUDA device, saying what ``command`` (measure or calibrate) can do instead."""
    import torch

    if not torch.cuda.is_available():
        raise UserError(
            f"no CUDA GPU is visible to torch {torch.__version__}: on a machine with an NVIDIA GPU run "
            f"{INSTALL_HINT}; {_WITHOUT_A_GPU[command]}"
        )


def driver_version() -> str | None:
    """The NVIDIA driver's version (pynvml, else nvidia-smi), or None."""
    try:
        import pynvml  # type: ignore[import-not-found]  # optional: nvidia-ml-py, when installed

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # not installed, or no NVML: try the command
        pass
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def device_info(spec: GPU | None, device: str) -> DeviceInfo:
    """What the run ran on: the CUDA device's name, driver, CUDA, capability, SMs and L2; or the interpreter."""
    if device != "cuda":
        return DeviceInfo(name=INTERPRETER_DEVICE_NAME, spec=spec.id if spec else None,
                          spec_name=spec.name if spec else None)
    import torch

    props = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability(0)
    return DeviceInfo(
        name=torch.cuda.get_device_name(0),
        spec=spec.id if spec else None,
        spec_name=spec.name if spec else None,
        driver=driver_version(),
        cuda=torch.version.cuda,
        compute_capability=f"{major}.{minor}",
        sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None),
    )


def spec_mismatch_notes(spec: GPU, info: DeviceInfo) -> list[str]:
    """Where the spec compared against visibly is not the device (a wrong --gpu)."""
    notes = []
    if info.sm_count is not None and spec.sm_count is not None and info.sm_count != spec.sm_count:
        notes.append(f"the spec {spec.id} has {spec.sm_count} SMs, the device {info.sm_count}: is --gpu right?")
    if info.compute_capability and spec.compute_capability and info.compute_capability != spec.compute_capability:
        notes.append(f"the spec {spec.id} is compute capability {spec.compute_capability}, the device "
                     f"{info.compute_capability}: is --gpu right?")
    return notes


def detect_device_spec() -> GPU:
    """The spec of the CUDA device in hand, by its name (``specs.devices.match_device``)."""
    import torch

    from ..specs.hardware import list_gpus

    return match_device(torch.cuda.get_device_name(0), list_gpus())


def resolve_spec(gpu: str | None, device: str) -> GPU | None:
    """--gpu, or the spec matching the CUDA device's name; None under the interpreter without --gpu."""
    from ..specs.hardware import load_gpu

    if gpu is not None:
        return load_gpu(gpu)
    return detect_device_spec() if device == "cuda" else None


def now() -> str:
    """Local time with its UTC offset, ISO 8601, to the second: a record's date."""
    return datetime.now().astimezone().isoformat(timespec="seconds")
