"""What ``compare`` puts beside one engine's closed batch: the same load served by ``analyze serve``'s simulation on
a deployment (N aggregated replicas, or P prefill and D decode replicas: ``serving.replicas``), read as compare
reads a served batch (``engine.choice.Served``).

The rules a row follows (the docstring of ``rl.compare`` and docs/serving.md say them to a user):

- The load is the row's: B clients that each send one request at once (the closed batch: ``analyze serve
  --concurrency B --requests B``), or C clients in a closed loop, each sending its next request when its last ends.
- TTFT, TPOT and E2E are the requests' means; throughput is the output tokens over the run's duration per GPU of
  the whole deployment (``Simulation.gpus``: P × prefill GPUs + D × decode GPUs, or N × one replica's).
- Dollars and joules are the simulation's (``serving.cost``): the whole deployment paid for the run's duration,
  all of it on the output tokens (compare's rule for one engine), and the board's power over each GPU's busy time.
- The largest batch is what the replicas that hold a request to its end can hold at once: N × one replica's
  blocks // a request's, or D × one decode replica's (a request routed to the least-loaded replica, B of them
  spread evenly, so none is preempted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..engine.generate import Request
from ..engine.memory import MemoryBudget
from ..engine.parallel import Layout
from ..units import plural
from .metrics import Simulation

Kind = Literal["engine", "aggregated", "disaggregated"]


def _compact(layout: Layout) -> str:
    """A layout in a row's name: "TP1", "TP2 EP2", "TP4 PP2"."""
    return " ".join([f"TP{layout.tp}"] + [f"{k}{v}" for k, v in (("EP", layout.ep), ("PP", layout.pp)) if v > 1])


@dataclass(frozen=True)
class Plan:
    """A row's deployment: one engine on ``layout``; ``replicas`` aggregated copies of it; or, with ``prefill`` > 0,
    ``prefill`` replicas on ``prefill_layout`` that run the prompts and ``replicas`` decode replicas on ``layout``."""

    layout: Layout
    replicas: int = 1
    prefill: int = 0
    prefill_layout: Layout = Layout()

    @property
    def kind(self) -> Kind:
        if self.prefill:
            return "disaggregated"
        return "aggregated" if self.replicas > 1 else "engine"

    @property
    def gpus(self) -> int:
        """Every GPU of the deployment: what a row's throughput per GPU divides by."""
        return self.prefill * self.prefill_layout.gpus + self.replicas * self.layout.gpus

    def name(self) -> str:
        """The deployment in a row's name: "8×TP1" (aggregated), "2P+6D" (both sides on one GPU), "1P+3D TP2",
        "1P TP4+2D TP2"; "" on one engine (its name is the layout's)."""
        if self.kind == "aggregated":
            return f"{self.replicas}×{_compact(self.layout)}"
        if self.kind == "engine":
            return ""
        if self.prefill_layout == self.layout:
            plain = self.layout == Layout()
            return f"{self.prefill}P+{self.replicas}D" + ("" if plain else f" {_compact(self.layout)}")
        return f"{self.prefill}P {_compact(self.prefill_layout)}+{self.replicas}D {_compact(self.layout)}"

    def words(self) -> str:
        """The deployment in words, for the line under the table."""
        gpus = plural(self.gpus, "GPU")
        if self.kind == "disaggregated":
            return (f"{plural(self.prefill, 'prefill replica')} of {self.prefill_layout.label()} + "
                    f"{plural(self.replicas, 'decode replica')} of {self.layout.label()}, {gpus}")
        return f"{plural(self.replicas, 'replica')} of {self.layout.label()}, {gpus}"


@dataclass(frozen=True)
class ServedLoad:
    """A load as ``analyze serve`` simulated it, read as compare reads a served batch (the module's docstring):
    ``request`` the prompt, the output and the clients (as the batch); ``memory`` what the busiest replica that
    holds requests to their end holds."""

    request: Request
    simulation: Simulation
    memory: MemoryBudget

    @property
    def ttft_s(self) -> float:
        ttft = self.simulation.run.ttft
        assert ttft is not None  # every request has a first token
        return ttft.mean

    @property
    def tpot_s(self) -> float | None:
        tpot = self.simulation.run.tpot
        return None if tpot is None else tpot.mean

    @property
    def e2e_s(self) -> float:
        e2e = self.simulation.run.e2e
        assert e2e is not None
        return e2e.mean

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        """Output tokens over the run's duration, per GPU of the whole deployment (``render.serve``'s figure)."""
        run = self.simulation.run
        return run.output_tokens / run.duration_s / self.simulation.gpus

    @property
    def total_tokens_per_s_per_gpu(self) -> float:
        """Prompt and output tokens over the run's duration, per GPU of the whole deployment."""
        run = self.simulation.run
        tokens = sum(s.request.prompt for s in run.served) + run.output_tokens
        return tokens / run.duration_s / self.simulation.gpus

    def phase_bound(self, phase: str) -> tuple[str, float] | None:
        """None: a deployment's run keeps its replicas' totals, not each step's ops (one engine's closed batch
        gives the bound)."""
        return None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        c = self.simulation.costs
        return None if c is None else c.usd_per_million_output_all_on_output

    @property
    def joules_per_output_token(self) -> float | None:
        c = self.simulation.costs
        return None if c is None else c.joules_per_output_token

    @property
    def kv_transfer_s(self) -> float | None:
        """A request's KV transfer on its busiest link (mean; None unless disaggregated)."""
        d = self.simulation.deployment
        return None if d is None or d.transfers is None or d.transfers.time is None else d.transfers.time.mean

    @property
    def kv_wait_s(self) -> float | None:
        """What TTFT waits for a request's KV after its prefill: the link's time and its queue (mean)."""
        d = self.simulation.deployment
        return None if d is None or d.transfers is None or d.transfers.wait is None else d.transfers.wait.mean

    @property
    def kv_bytes_per_request(self) -> float | None:
        """The whole model's KV cache of a request's prompt, mean over the transfers."""
        d = self.simulation.deployment
        if d is None or d.transfers is None or not d.transfers.count:
            return None
        return d.transfers.kv_bytes / d.transfers.count


def per_replica(batch: int, replicas: int) -> int:
    """The requests the busiest of ``replicas`` holds when ``batch`` are spread by least-loaded routing."""
    return math.ceil(batch / replicas)
