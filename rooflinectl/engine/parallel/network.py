"""The network a layout's collectives cross: the GPU file's scale-up domain (``interconnect.scale_up``: 8 GPUs over
NVLink on an HGX board, 72 in an NVL72 rack) and the scale-out network past it (``interconnect.scale_out``: each
GPU's share of the node's NICs, and one hop's latency).

A group of g GPUs (TP's, EP's, the GPUs along PP's stages) inside one domain communicates over the interconnect
alone, as the single-domain model always did. A group past the domain fills n = g / d whole domains of d GPUs,
and each collective runs NCCL's two-level structure; every GPU sends the flat ring's total, split between links:

  all-reduce of S   reduce-scatter within the domain ((d−1)/d·S over the interconnect); an all-reduce of its 1/d
                    shard among the n GPUs of the same local rank, one a domain, each over its own NIC, as a ring
                    (2(n−1)/n·S/d over the network, 2(n−1) steps); an all-gather within the domain ((d−1)/d·S).
                    2(d−1)/d·S + 2(n−1)/n·S/d = 2(g−1)/g·S, the ring's bytes.
  all-gather of T   an all-gather of each GPU's T/g among its n same-rank peers ((n−1)/n·T/d over the network,
                    n−1 steps), then one within the domain ((d−1)/d·T): (g−1)/g·T in all.
  all-to-all        a GPU's pairs·(e−1)/e go to its e−1 peers evenly: the (e−d)/e share for peers in other
                    domains over the network (one step: the sends run at once), the (d−1)/e share over the
                    interconnect.
  PP send           a stage boundary between domains: all of it over the network, one step.

The structure is NCCL's CollNet Direct all-reduce (NVIDIA/nccl src/device/all_reduce.h: an intra-node
reduce-scatter, the inter-node all-reduce, an intra-node all-gather) and the hierarchical all-reduce of Huawei's
HCCL ("Hierarchical Communication Principles": reduce-scatter within the server, then across servers, all-gather
within). The inter-domain step is a ring, not NCCL's double binary tree (NVIDIA technical blog, "Massively Scale
Your Deep Learning Training with NCCL 2.4"): the ring is bandwidth-optimal, 2(n−1)/n of the shard a GPU
(Patarasuk and Yuan, J. Parallel Distrib. Comput. 69(2), 2009), and at n = 2, TP 16 over two HGX boards, ring and
tree are the same exchange; the tree's gain is latency, 2·log2(n) steps against 2(n−1), which NCCL takes for
small messages over many nodes, so past two domains the model's latency is an upper bound.

Within a domain, a ``mesh`` (AMD's xGMI, Gaudi's RoCE ports: each GPU's links join it to each other GPU one to
one) gives a group of g of its d GPUs g − 1 of the d − 1 links' shares, (g − 1)/(d − 1) of the bandwidth: the
rings of a collective among g GPUs run over the links between them, and a point-to-point send (PP's, g = 2) over
one; a ``switch`` (NVSwitch) gives any group all of it (``ScaleUp.share``, the op's ``link_share``). A group
past the domain fills whole domains, so its interconnect part runs over all of the links.

Time: the two links run at once, chunks pipelined through the stages as NCCL's single-kernel algorithms run them,
so one instance takes the interconnect's fixed cost (``latency_us``) + each network step's hop latency +
max(interconnect bytes / its bandwidth, network bytes / the NIC's): the roofline's max over two resources
(engine/placement.py); the op's bound names the link that binds. A PCIe part (scale-up domain 1: no fabric)
reaches its peers over PCIe through the host at any group size, as its file's interconnect says; its server's GPU
count is in no file, so a group past one server is not priced apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError
from ...specs.hardware import GPU, ScaleOut, ScaleUp
from .layout import Layout
from .shard import integral


@dataclass(frozen=True)
class Span:
    """Where a group of ``gpus`` sits: ``per_domain`` of them in each of ``domains`` scale-up domains."""

    gpus: int
    per_domain: int
    domains: int

    @property
    def crosses(self) -> bool:
        return self.domains > 1

    def all_reduce_network_bytes(self, buffer: float) -> int | float:
        """The network's part of one GPU's all-reduce bytes: 2(n−1)/n of its 1/d shard, 2(n−1)·S/g."""
        return integral(2 * (self.domains - 1) * buffer / self.gpus)

    def all_gather_network_bytes(self, total: float) -> int | float:
        """The network's part of one GPU's all-gather bytes (result T): (n−1)/n of T/d, (n−1)·T/g."""
        return integral((self.domains - 1) * total / self.gpus)

    def all_to_all_network_bytes(self, pairs: float) -> int | float:
        """The network's part of one GPU's all-to-all: the (e−d)/e share of its pairs bound for other domains."""
        return integral(pairs * (self.gpus - self.per_domain) / self.gpus)

    @property
    def all_reduce_steps(self) -> int:
        """Network steps of the ring all-reduce across the n domains: 2(n−1)."""
        return 2 * (self.domains - 1)

    @property
    def all_gather_steps(self) -> int:
        return self.domains - 1


@dataclass(frozen=True)
class Fabric:
    """What a GPU's collectives cross: the scale-up domain's size (None: no bound, a PCIe part or a file that
    states no domain), link and topology, and the scale-out network past it (None: the file gives none)."""

    domain: int | None
    link: str
    scale_out: ScaleOut | None
    scale_up: ScaleUp | None = None

    @classmethod
    def of(cls, gpu: GPU) -> Fabric:
        ic = gpu.interconnect
        if ic is None:
            return cls(domain=None, link="", scale_out=None)
        domain = None if ic.link == "pcie" or ic.scale_up is None else ic.scale_up.gpus
        return cls(domain=domain, link=ic.name, scale_out=ic.scale_out,
                   scale_up=None if domain is None else ic.scale_up)

    def share(self, group: int) -> float:
        """The share of a GPU's interconnect bandwidth its sends reach among ``group`` GPUs of one domain (its
        ``ScaleUp.share``: a mesh's g − 1 of gpus − 1 links); 1 where no domain is stated."""
        return 1.0 if self.scale_up is None else self.scale_up.share(group)

    def span(self, gpu_id: str, flag: str, g: int) -> Span:
        """The span of a group of g GPUs; a group past the domain is refused where the file gives no scale-out
        network or the group does not fill whole domains."""
        d = self.domain
        if d is None or g <= d:
            return Span(g, g, 1)
        if self.scale_out is None:
            raise UserError(f"{gpu_id}: {flag} {g} spans more than one {d}-GPU {self.link} domain and the GPU file "
                            f"gives no scale_out network to price what crosses it; add interconnect.scale_out "
                            f"(name, bandwidth_gbit_s, latency_us, source) or keep the group within {d} GPUs")
        if g % d:
            raise UserError(f"{flag} {g} on {gpu_id}: a group past the {d}-GPU {self.link} domain fills whole "
                            f"domains; give a multiple of {d}")
        return Span(g, d, g // d)

    def pp_sends_across(self, layout: Layout) -> int:
        """How many of the p − 1 stage boundaries fall between domains: stages of t GPUs pack ⌊d/t⌋ to a domain
        (at least one; a stage of more than d GPUs fills whole domains), and every ⌊d/t⌋-th boundary crosses."""
        if self.domain is None or layout.pp == 1 or layout.tp * layout.pp <= self.domain:
            return 0
        per_domain = max(1, self.domain // layout.tp)
        return (layout.pp - 1) // per_domain


@dataclass(frozen=True)
class NetworkUse:
    """What a layout's collectives cross, for the notes and ``--json``: the domain's size and link, each group that
    crosses it (its flag, GPUs and domains), the PP sends between domains, and the scale-out network."""

    domain: int | None
    link: str
    groups: tuple[tuple[str, Span], ...]
    pp_sends_across: int
    scale_out: ScaleOut | None
    fabric: Fabric | None = None

    def share(self, group: int) -> float:
        """:meth:`Fabric.share` of the GPU's fabric (1 without one)."""
        return 1.0 if self.fabric is None else self.fabric.share(group)

    @property
    def crosses(self) -> bool:
        return any(s.crosses for _, s in self.groups) or self.pp_sends_across > 0


def group_flag(layout: Layout) -> tuple[str, int]:
    """The collective group of a layout and its option: EP's GPUs with data-parallel attention, else TP's."""
    return ("--ep", layout.ep) if layout.dp_attention else ("--tp", layout.tp)


def network_use(gpu: GPU, layout: Layout) -> NetworkUse:
    """What ``layout`` on ``gpu`` crosses; refuses (UserError) a group past the domain that cannot be priced."""
    fabric = Fabric.of(gpu)
    flag, g = group_flag(layout)
    groups = ((flag, fabric.span(gpu.id, flag, g)),) if g > 1 else ()
    across = fabric.pp_sends_across(layout)
    if across and fabric.scale_out is None:
        raise UserError(f"{gpu.id}: --pp {layout.pp} with --tp {layout.tp} puts stages in more than one "
                        f"{fabric.domain}-GPU {fabric.link} domain and the GPU file gives no scale_out network to "
                        f"price the sends between them; add interconnect.scale_out or use fewer GPUs")
    return NetworkUse(domain=fabric.domain, link=fabric.link, groups=groups, pp_sends_across=across,
                      scale_out=fabric.scale_out, fabric=fabric)
