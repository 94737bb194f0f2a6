"""``compare``'s rows on a deployment (``--replicas``, ``--disagg``) and its closed-loop rows (``--concurrency``):
each one ``rl.serve`` with the row's options (``serving.deployed`` says what a row reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .serve import serve

if TYPE_CHECKING:
    from ..engine.choice import Choice
    from ..engine.memory import MemoryBudget
    from ..serving.batch import BatchServer
    from ..serving.deployed import Plan, ServedLoad
    from ..specs.hardware import GPU
    from ..specs.workload import Workload


@dataclass(frozen=True)
class Options:
    """What every row of one ``compare`` shares: the request, the GPU's reserve, the stack and its token budget, the
    step options, the price, the KV transfer's rule."""

    prompt: int
    output: int
    reserve_gib: float | None
    calibrated: bool
    stack: str
    max_num_batched_tokens: int
    price_per_gpu_hour: float | None
    kv_transfer: str
    step: dict[str, Any]


class DeploymentServer:
    """How a deployment serves B clients (``engine.choice.Server``): ``serve(B)`` is ``rl.serve`` of a closed batch
    (B clients, one request each, no refills) on ``plan``'s replicas; ``largest()`` is what the replicas that hold a
    request to its end hold at once (``replica``: one of them as one engine's closed batch sizes its KV cache)."""

    def __init__(self, g: GPU, plan: Plan, replica: BatchServer, options: Options) -> None:
        self.g, self.plan, self.replica, self.options = g, plan, replica, options

    def largest(self) -> int:
        return self.plan.replicas * self.replica.largest()

    def most_at_once(self) -> int | None:
        """The most requests a step of every replica that holds requests to their end runs at once: one replica's
        (``BatchServer.most_at_once``) times those replicas."""
        most = self.replica.most_at_once()
        return None if most is None else self.plan.replicas * most

    def budget(self, batch: int) -> MemoryBudget:
        """What the busiest replica holding requests to their end holds: its share of ``batch``."""
        from ..serving.deployed import per_replica

        return self.replica.budget(per_replica(batch, self.plan.replicas))

    def serve(self, batch: int) -> ServedLoad:
        return self.loop(batch, batch)

    def loop(self, clients: int, requests: int | None) -> ServedLoad:
        """``clients`` in a closed loop sending ``requests`` in all (None: ``rl.serve``'s default), each step
        limited by the clients alone (``max_num_seqs`` = clients, as one engine's closed batch)."""
        from ..engine.generate import Request
        from ..serving.deployed import ServedLoad, per_replica

        o, p = self.options, self.plan
        disagg = p.kind == "disaggregated"
        r = serve(gpu=self.g, concurrency=clients, requests=requests, prompt=o.prompt, output=o.output,
                  max_num_batched_tokens=o.max_num_batched_tokens, max_num_seqs=clients, reserve_gib=o.reserve_gib,
                  stack=o.stack, calibrated=o.calibrated, tp=p.layout.tp, ep=p.layout.ep, pp=p.layout.pp,
                  price_per_gpu_hour=o.price_per_gpu_hour, replicas=1 if disagg else p.replicas,
                  disagg=(p.prefill, p.replicas) if disagg else None,
                  prefill_tp=p.prefill_layout.tp if disagg else None,
                  prefill_ep=p.prefill_layout.ep if disagg else None, kv_transfer=o.kv_transfer, **o.step)
        memory = self.replica.budget(per_replica(clients, p.replicas))
        return ServedLoad(Request(o.prompt, o.output, clients), r.simulation, memory)


def check_disagg(g: GPU, plan: Plan, decode: BatchServer, prefill: BatchServer, prompt: int, output: int) -> None:
    """A split whose decode replica cannot hold one request, or whose prefill replica cannot hold one prompt, is
    refused in one line (a split is the user's choice of layouts, not a property of the GPU)."""
    from ..errors import UserError
    from ..render.generate import memory_sum

    split = f"--disagg {plan.prefill}:{plan.replicas} on {g.id}"
    if decode.largest() == 0:
        m = decode.budget(1)
        raise UserError(f"{split}: a decode replica ({plan.layout.label()}) cannot hold one request: "
                        f"{memory_sum(m, 1, prompt + output - 1, decode.paged)}; give a larger --decode-tp")
    c = prefill.capacity
    assert c is not None  # a deployment's replicas run chunked prefill
    if c.most_positions(prefill.method.block_size) < prompt:
        raise UserError(f"{split}: a prefill replica ({plan.prefill_layout.label()}) holds {c.blocks:,} KV blocks of "
                        f"{prefill.method.block_size}, less than one prompt of {prompt:,} tokens; give a larger "
                        f"--prefill-tp")


def deployment_choice(g: GPU, plan: Plan, replica: BatchServer, options: Options, base: Workload, label: str,
                      batch: int | None, tpot_s: float | None, load: tuple[int, int | None] | None) -> Choice:
    """A row on ``plan``'s deployment: the closed batch chosen as compare chooses one engine's
    (``engine.choice.choose_batch``: given, under a TPOT target, or the largest the replicas hold), or, with
    ``load`` = (clients, requests), that closed loop."""
    from ..engine.choice import Choice, choose_batch, does_not_fit

    server = DeploymentServer(g, plan, replica, options)
    if load is None:
        return choose_batch(server, base, options.prompt, options.output, label, batch, tpot_s, plan.layout)
    clients, requests = load
    rule = f"closed loop of {clients:,} clients"
    largest = server.largest()
    if largest == 0:
        return Choice(label, rule, 0, None, does_not_fit(server.budget(1)), plan.layout)
    return Choice(label, rule, largest, server.loop(clients, requests), layout=plan.layout)
