"""A request's KV cache moved from a prefill replica to a decode replica (disaggregated serving): its bytes and its
time on the link.

Bytes: the engine's KV cache of the request's prompt positions (``kv_cache_bytes_per_sequence``: MLA's latent,
r + d_r values a position and layer; K and V of every KV head otherwise; in the KV cache's data type), the whole
model's: DeepSeek-V3's 4,096-token prompt in bf16 is 61 × 576 × 2 × 4,096 = 287,834,112 bytes.

On the link: every decode GPU receives its own share, the decode layout's cache of those positions on one GPU
(``kv_bytes_per_sequence_per_gpu``: a KV head or MLA latent replicated over several GPUs is received by each), and
the prefill GPUs send all those bytes between them in equal parts, every GPU's link at once. The transfer takes its
busiest link's time: latency + max(received per decode GPU, all received / prefill GPUs) / the link's one-way
bandwidth (a transfer moves one way; the other way is free for the opposite traffic). On a mesh (``ScaleUp``'s
topology: each GPU's links join it to each other GPU one to one) a GPU reaches p peers over p of its d − 1 links'
shares, so a decode GPU receives from the p prefill GPUs at p/(d − 1) of its bandwidth.

The link: the interconnect's (NVLink, Infinity Fabric: its one-way bandwidth and latency) where the whole deployment
fits its scale-up domain (P × prefill GPUs + D × decode GPUs ≤ ``scale_up.gpus``: the replicas can be placed in
one NVLink domain; a PCIe part's peers are all reached over PCIe, as ``engine.parallel.network.Fabric`` rules for
the collectives), else each GPU's scale-out NIC (``scale_out``: 400 Gb/s InfiniBand is 50 GB/s one way); a GPU
file without a scale-out network is refused there.

Overlap (``--kv-transfer``): ``after`` sends a request's KV once its prefill has finished (vLLM's NIXL and
P2P-NCCL connectors, SGLang's Mooncake and NIXL backends and TensorRT-LLM's cache transceiver send a finished
request's blocks: the default, as the published disaggregated runs ran); ``overlap`` sends each layer's KV as the
prefill computes it (layer-wise transfer, as in Mooncake's and LMCache's layer-wise modes): the transfer may start
with the request's first prefill step and ends at max(its start + its time, the end of the prefill + the last
layer's share of its last chunk), the link then being the limit or the compute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..engine.count.resident import kv_cache_bytes_per_sequence
from ..engine.parallel import Layout, kv_bytes_per_sequence_per_gpu, per_gpu_workload
from ..engine.parallel.network import Fabric
from ..errors import UserError
from ..specs.hardware import GPU, ScaleUp
from ..specs.workload import Workload

TransferMode = Literal["after", "overlap"]
TRANSFER_MODES: tuple[TransferMode, ...] = get_args(TransferMode)


def check_mode(mode: object) -> None:
    """A KV transfer mode: one of ``TRANSFER_MODES``, or a one-line UserError naming them."""
    if mode not in TRANSFER_MODES:
        raise UserError(f"--kv-transfer {mode}: give one of {', '.join(TRANSFER_MODES)}")


@dataclass(frozen=True)
class Link:
    """The link a KV transfer crosses: its name, whether it is the scale-up domain's, a GPU's one-way bandwidth on
    it (GB/s, 1e9 bytes/s) and its latency (µs); ``domain``, the scale-up domain it is the interconnect of, whose
    topology says what share of that bandwidth a GPU reaches its peers over (None on the network)."""

    name: str
    scale_up: bool
    bandwidth_gbps: float
    latency_us: float
    domain: ScaleUp | None = None

    def seconds(self, nbytes: float, peers: int = 1) -> float:
        """The time of ``nbytes`` sent (or received) by one GPU to (from) ``peers`` GPUs at once: latency +
        bytes / the bandwidth it reaches them over (``ScaleUp.share`` of the group they make with it: all of it
        behind a switch, ``peers`` of a mesh's links)."""
        share = 1.0 if self.domain is None else self.domain.share(peers + 1)
        return self.latency_us / 1e6 + nbytes / (self.bandwidth_gbps * 1e9 * share)


def kv_link(gpu: GPU, gpus: int) -> Link:
    """The link between the replicas of a deployment of ``gpus`` GPUs (the module's docstring)."""
    ic = gpu.interconnect
    if ic is None:
        raise UserError(f"{gpu.id}: the GPU file gives no interconnect, so a KV transfer between replicas cannot be "
                        f"timed; add an 'interconnect' section")
    domain = Fabric.of(gpu).domain  # the collectives' rule: no bound on a PCIe part or a file stating no domain
    if domain is None or gpus <= domain:
        return Link(ic.name, True, ic.per_direction_gbps, ic.latency_us,
                    domain=None if domain is None else ic.scale_up)
    if ic.scale_out is None:
        raise UserError(f"{gpu.id}: {gpus} GPUs exceed its scale-up domain of {domain} and the GPU file gives no "
                        f"scale-out network for the KV transfer; add interconnect.scale_out")
    out = ic.scale_out
    return Link(out.name, False, out.bandwidth_gbps, out.latency_us)


@dataclass(frozen=True)
class KvTransfer:
    """How a request's KV moves between a prefill and a decode replica: the model and its layouts on both sides,
    the link, and when it starts (``mode``)."""

    base: Workload
    prefill: Layout
    decode: Layout
    link: Link
    mode: TransferMode

    def __post_init__(self) -> None:
        check_mode(self.mode)

    def request_bytes(self, positions: int) -> float:
        """The KV cache of ``positions`` prompt positions, the whole model's."""
        return kv_cache_bytes_per_sequence(self.base, positions)

    def link_bytes(self, positions: int) -> float:
        """The bytes the busiest GPU moves: max(received per decode GPU, all received / prefill GPUs)."""
        received = kv_bytes_per_sequence_per_gpu(per_gpu_workload(self.base, self.decode), self.decode, positions)
        return max(received, received * self.decode.gpus / self.prefill.gpus)

    def seconds(self, positions: int) -> float:
        """The transfer's time on the link: its busiest GPU's. Behind a switch, latency + link bytes / the
        bandwidth. On a mesh each decode GPU receives from the p prefill GPUs over p links and each prefill GPU
        sends to the q decode GPUs over q: max(received / p shares, received·q/p / q shares), both
        received·(d − 1)/p / the bandwidth."""
        received = kv_bytes_per_sequence_per_gpu(per_gpu_workload(self.base, self.decode), self.decode, positions)
        p, q = self.prefill.gpus, self.decode.gpus
        return max(self.link.seconds(received, peers=p), self.link.seconds(received * q / p, peers=q))

    def finish(self, ready_s: float, prefill_start_s: float, prefill_end_s: float, positions: int,
               last_chunk: int) -> float:
        """When the KV of a request of ``positions`` prompt positions has arrived, its links free from
        ``ready_s``: ``after``, from max(ready, the prefill's end); ``overlap``, from max(ready, the prefill's
        first step's start), ending no sooner than the prefill's end + the last layer's share of its last chunk
        of ``last_chunk`` tokens."""
        time = self.seconds(positions)
        if self.mode == "after":
            return max(ready_s, prefill_end_s) + time
        layers = self.base.model.num_layers
        latency = self.link.latency_us / 1e6
        tail = latency + (time - latency) * last_chunk / positions / layers
        return max(max(ready_s, prefill_start_s) + time, prefill_end_s + tail)
