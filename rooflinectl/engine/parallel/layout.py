"""How one copy of the model spans GPUs: the degrees (tp, ep, pp), each checked, and the interconnect a layout
over several GPUs needs (shard.py states the layouts)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError
from ...specs.hardware import GPU

# The most GPUs one degree may name: an 8-GPU node, times 64 nodes.
MAX_DEGREE = 512


@dataclass(frozen=True)
class Layout:
    """How one copy of the model is spread over GPUs: ``tp`` GPUs in tensor parallel, ``ep`` GPUs with the
    experts spread over them and the attention data-parallel, or both on the same GPUs (ep = tp: the attention
    tensor-parallel, the experts spread); ``pp`` stages with tp (shard.py's docstring)."""

    tp: int = 1
    ep: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        check_degree("--tp", self.tp)
        check_degree("--ep", self.ep)
        check_degree("--pp", self.pp)
        if self.ep > 1 and self.pp > 1:
            raise UserError(f"--pp {self.pp} with --ep {self.ep}: pipeline stages with expert parallelism are not "
                            f"modelled; give one of them")
        if self.ep > 1 and self.tp > 1 and self.ep != self.tp:
            raise UserError(f"--tp {self.tp} with --ep {self.ep}: expert parallelism under tensor parallelism spreads "
                            f"the experts over the same GPUs (vLLM's --enable-expert-parallel): give --ep {self.tp}, "
                            f"or --ep alone for data-parallel attention")

    @property
    def gpus(self) -> int:
        """The GPUs one copy of the model spans: tokens/s per GPU divides by it."""
        return max(self.tp, self.ep) * self.pp

    @property
    def dp_attention(self) -> bool:
        """Expert parallelism alone: the attention data-parallel, each GPU serving ⌈B/e⌉ sequences."""
        return self.ep > 1 and self.tp == 1

    @property
    def batch_shards(self) -> int:
        """The GPUs a batch's sequences are spread over: ep with data-parallel attention, else 1."""
        return self.ep if self.dp_attention else 1

    @property
    def single(self) -> bool:
        return self.gpus == 1

    def label(self) -> str:
        if self.dp_attention:
            return f"EP {self.ep}"
        if self.ep > 1:
            return f"TP {self.tp} + EP {self.ep}"
        return " × ".join([f"TP {self.tp}"] + ([f"PP {self.pp}"] if self.pp > 1 else []))


def check_degree(name: str, value: int) -> None:
    """A degree is a whole number of GPUs from 1 to MAX_DEGREE: anything else is refused in one line."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEGREE:
        raise UserError(f"{name} {value}: give a whole number of GPUs from 1 to {MAX_DEGREE}")


def check_interconnect(gpu: GPU, layout: Layout) -> None:
    """A layout over several GPUs needs the GPU file's interconnect: its roof and latency time the collectives."""
    if not layout.single and gpu.interconnect is None:
        flag = f"--ep {layout.ep}" if layout.ep > 1 else f"--tp {layout.tp}" if layout.tp > 1 else f"--pp {layout.pp}"
        raise UserError(f"{gpu.id}: the GPU file gives no interconnect, so {flag} cannot be timed; add an "
                        f"'interconnect' section (name, link, bandwidth_gbps, latency_us, source)")
