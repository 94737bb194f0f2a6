"""Which ops share a marker, and which share a label: the chart's grouping and labelling decisions.

Ops whose points coincide (at every value of a sweep) form one group, drawn as one marker per value; each group
gets one label, the most important first, and small groups close together share one. Where each label finally
goes on the canvas is the drawing's business (``plot.place``); this module decides only what is labelled, with
which text, next to which point. It reads points, never an op's name (but to join names into a label's text).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .chart import Group, Label, OpPoint

# Points closer than this many decades on both axes (7%) share one marker and one label: at the chart's scale
# (about an inch per decade) that is under 2 points, well inside a marker.
GROUP_DECADES = 0.03
# A marker covers a smaller one when it is this much bigger (share of the step) and this close (decades): about
# the radius of a marker of 5% share at the chart's scale.
COVER_SHARE = 0.05
COVER_DECADES = 0.08
# Groups under 2% of the step within 0.1 decade (26%) of one another share one label.
SMALL_SHARE = 0.02
CLUSTER_DECADES = 0.1


def _close(a: OpPoint, b: OpPoint) -> bool:
    return (a.bound == b.bound
            and abs(math.log10(a.intensity / b.intensity)) < GROUP_DECADES
            and abs(math.log10(a.flops / b.flops)) < GROUP_DECADES)


def group_ops(gpu: str, per_op: dict[str, list[OpPoint]]) -> list[Group]:
    """Ops whose points coincide (at every value of a sweep) form one group. Greedy from the largest share:
    each op joins the first group whose leading op is close to it at every value."""
    order = list(per_op)
    by_share = sorted(order, key=lambda op: -max(p.share for p in per_op[op]))
    members: list[list[str]] = []
    for op in by_share:
        for m in members:
            lead = per_op[m[0]]
            if all(_close(a, b) for a, b in zip(lead, per_op[op])):
                m.append(op)
                break
        else:
            members.append([op])
    groups = []
    for m in members:
        ops = tuple(sorted(m, key=order.index))
        lead = per_op[m[0]]
        points = tuple(replace(p, share=sum(per_op[op][i].share for op in ops)) for i, p in enumerate(lead))
        moves = any(not _close(points[0], p) for p in points[1:])
        groups.append(Group(gpu=gpu, ops=ops, label=join_names(ops), points=points, moves=moves))
    return groups


def mark_values_group(groups: list[Group]) -> list[Group]:
    """Write the swept values next to the moving group of the first GPU with the largest share."""
    first_gpu = groups[0].gpu if groups else None
    moving = [g for g in groups if g.moves and g.gpu == first_gpu]
    if not moving:
        return groups
    best = max(moving, key=lambda g: max(p.share for p in g.points))
    return [replace(g, show_values=True) if g is best else g for g in groups]


def join_names(names: Sequence[str]) -> str:
    """['q_proj', 'k_proj', 'v_proj', 'o_proj', 'lm_head'] -> 'q/k/v/o_proj, lm_head': names that end alike
    share their ending (and a common fused prefix such as 'attn_norm+', or a common first word such as 'expert_':
    'expert_gate/up/down_proj')."""
    by_suffix: dict[str, list[str]] = {}
    for name in names:
        head, sep, tail = name.rpartition("_")
        key = sep + tail if head else name
        by_suffix.setdefault(key, []).append(name)
    parts = []
    for suffix, group in by_suffix.items():
        if len(group) == 1:
            parts.append(group[0])
            continue
        heads = [n[: -len(suffix)] for n in group]
        common = _common_prefix(heads)
        if any("+" in h[len(common):] for h in heads):  # 'attn_norm+q' and 'o' share no readable prefix
            parts.extend(group)
            continue
        parts.append(common + "/".join(h[len(common):] for h in heads) + suffix)
    return ", ".join(parts)


def _common_prefix(heads: list[str]) -> str:
    """The longest common prefix that ends at a '+' (a fused op's leading part) or a '_' (a word the names share:
    'expert_' of expert_gate/up/down_proj), or ''."""
    prefix = heads[0]
    for h in heads[1:]:
        while not h.startswith(prefix):
            prefix = prefix[:-1]
    cut = max(prefix.rfind("+"), prefix.rfind("_"))
    return prefix[: cut + 1] if cut >= 0 else ""


def group_label(g: Group, field: str | None, shares: Sequence[float] = ()) -> str:
    """A group's label: its names, and its share of the step (without a sweep), or that it stays put (sweep).
    ``shares``: the same ops' share on each GPU of the chart, in the chart's GPU order, written "7% · 6% · 6%"
    where they differ (the legend names the order): one GPU's share would be wrong for the others."""
    if field is None:
        if len(shares) > 1 and len({f"{x:.0%}" for x in shares}) > 1:
            return f"{g.label} {' · '.join(f'{x:.0%}' for x in shares)}"
        share = g.points[0].share
        return f"{g.label} {share:.0%}" if share >= 0.005 else g.label
    if not g.moves and len(g.points) > 1:
        return f"{g.label} (every {field})"
    return g.label


def op_labels(groups: Sequence[Group], field: str | None) -> list[Label]:
    """One label per group, the most important first. The same ops on several GPUs sit in one column (one
    intensity): they get one label, by the highest point. Groups under SMALL_SHARE that sit within
    CLUSTER_DECADES of one another share a label (elementwise ops crowd around 1 FLOP/byte)."""
    first_gpu = groups[0].gpu if groups else None
    gpus = list(dict.fromkeys(g.gpu for g in groups))  # the chart's order: groups are built GPU by GPU

    def shares(g: Group) -> list[float]:
        """The share of g's ops on each GPU (a GPU that grouped them otherwise: its groups within g's ops)."""
        if len(gpus) < 2:
            return []
        return [sum(h.points[0].share for h in groups if h.gpu == gpu and set(h.ops) <= set(g.ops)) for gpu in gpus]

    order = sorted(groups, key=lambda g: (g.gpu != first_gpu, -max(p.share for p in g.points)))
    items: list[tuple[list[str], list[str], OpPoint, float]] = []  # texts, ops, anchor, importance
    seen: set[tuple[str, ...]] = set()
    for g in order:
        if g.ops in seen:
            continue
        seen.add(g.ops)
        anchor = max((_anchor(h, groups) for h in groups if h.ops == g.ops), key=lambda p: p.flops)
        importance = max(p.share for h in groups if h.ops == g.ops for p in h.points)
        for texts, ops, lead, weight in items:
            if (importance < SMALL_SHARE and weight < SMALL_SHARE
                    and abs(math.log10(lead.intensity / anchor.intensity)) < CLUSTER_DECADES
                    and abs(math.log10(lead.flops / anchor.flops)) < CLUSTER_DECADES):
                texts.append(group_label(g, field, shares(g) if field is None else ()))
                ops.extend(g.ops)
                break
        else:
            items.append(([group_label(g, field, shares(g) if field is None else ())], list(g.ops), anchor,
                          importance))
    labels = []
    for texts, ops, anchor, _ in items:
        one_line = ", ".join(texts)
        labels.append(Label(one_line if len(one_line) <= 40 else "\n".join(texts), tuple(ops), anchor.intensity,
                            anchor.flops, anchor.share))
    return labels


def _anchor(g: Group, groups: Sequence[Group]) -> OpPoint:
    """Where a group's label goes: its last point (the end of a trajectory), unless a bigger marker of another
    group covers it there, as a norm's last point can sit on the projections' first one; then an earlier point."""
    others = [q for h in groups if h is not g and h.gpu == g.gpu for q in h.points]
    shares = np.array([q.share for q in others])

    def covered(p: OpPoint) -> bool:
        # Only the markers bigger by COVER_SHARE can cover p: found at once among all (a scan of every point for
        # each point cost 0.8 s on a 64-value sweep of 6 GPUs), then checked one by one.
        return any(abs(math.log10(q.intensity / p.intensity)) < COVER_DECADES
                   and abs(math.log10(q.flops / p.flops)) < COVER_DECADES
                   for q in (others[k] for k in np.flatnonzero(shares > p.share + COVER_SHARE)))

    return next((p for p in reversed(g.points) if not covered(p)), g.points[-1])
