"""Which GPU spec a device is: THE rule that ``measure`` picks its spec with, that ``plot --measured`` checks a
record's GPU against and that ``--calibrated`` checks a ``measured`` section's device against (the rule's
statement is below).

The matcher reads a spec through :class:`NamedSpec` (``specs.hardware.GPU`` is one) rather than importing the GPU
model, so that ``hardware.py`` applies the rule to its own measured section without an import cycle.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

from ..errors import UserError

# --- matching a device name to a spec ------------------------------------------------------------------------
#
# THE rule, exact or nothing: a device name matches a spec when its words, in order, ARE the words of one of the
# spec's names (its id, an alias, its name, or one of its `device_names`, the names torch gives its device). Words are
# compared after normalizing only what never tells two chips apart: case, the separators ("A100-SXM4-80GB" reads
# as "a100 sxm4 80gb"), the brand words ("NVIDIA", "Tesla", "GeForce", "AMD", "Instinct", "Radeon") and the memory
# technology ("HBM3", "GDDR6X"). A memory size ("80GB") is a word like any other, with one allowance: where the
# spec's name gives none, the device's must equal the spec's own HBM capacity (torch reports the H100 SXM as
# "NVIDIA H100 80GB HBM3", which no bundled name spells). Anything more or less is no match: "NVIDIA L40S" is not
# the L4, "NVIDIA" alone matches nothing, and an "H100 NVL", an "RTX 4090 D" or a MIG slice ("... MIG 1g.10gb")
# is never given the numbers of the chip whose name it contains (a word-subset rule did exactly that). A `measured`
# section's own device name is no name of the spec: it is what the rule checks, so it cannot vouch for itself.

_BRAND_WORDS = {"nvidia", "amd", "tesla", "geforce", "instinct", "radeon"}
_MEMORY_TECH = re.compile(r"^(hbm\d*e?|gddr\d+x?)$")
_CAPACITY = re.compile(r"^(\d+)gb$")


def _words(text: str) -> tuple[tuple[str, ...], int | None]:
    """A name's words in order (lower case, brand and memory-technology words left out, memory size taken out)
    and its memory size in GB (None when it gives none; two sizes make no name, so the words keep both)."""
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w and w not in _BRAND_WORDS
             and not _MEMORY_TECH.match(w)]
    sizes = [w for w in words if _CAPACITY.match(w)]
    if len(sizes) != 1:
        return tuple(words), None
    return tuple(w for w in words if w != sizes[0]), int(sizes[0][:-2])


class _Capacity(Protocol):
    @property
    def hbm_capacity_gib(self) -> float: ...


class NamedSpec(Protocol):
    """What the matcher reads of a GPU spec (``specs.hardware.GPU``): its names and its HBM capacity."""

    @property
    def id(self) -> str: ...
    @property
    def aliases(self) -> Sequence[str]: ...
    @property
    def name(self) -> str: ...
    @property
    def device_names(self) -> Sequence[str]: ...
    @property
    def memory(self) -> _Capacity: ...


Spec = TypeVar("Spec", bound=NamedSpec)


def spec_names(gpu: NamedSpec) -> list[str]:
    """The names a device may report to be ``gpu``: its id, aliases and name, and its ``device_names``."""
    return [gpu.id, *gpu.aliases, gpu.name, *gpu.device_names]


def _match_score(device_name: str, gpu: NamedSpec) -> int:
    """1 when ``device_name`` is exactly one of ``gpu``'s names by the rule above, else 0."""
    words, size = _words(device_name)
    if not words:  # "NVIDIA", "", "80GB": no chip named
        return 0
    for name in spec_names(gpu):
        name_words, name_size = _words(name)
        if name_words != words:
            continue
        if size is None or size == (name_size if name_size is not None else round(gpu.memory.hbm_capacity_gib)):
            return 1
    return 0


def device_matches(device_name: str, gpu: NamedSpec) -> bool:
    """Whether a device reporting ``device_name`` (``torch.cuda.get_device_name()``) is ``gpu``: exactly one of
    its names (the rule above; :func:`match_device` uses the same one)."""
    return _match_score(device_name, gpu) > 0


def match_device(device_name: str, gpus: Sequence[Spec]) -> Spec:
    """THE spec of a device name (``'NVIDIA H200'`` -> the ``h200`` spec): the one spec that has the name
    (:func:`device_matches`). No match, or two specs that both claim the name: a UserError asking for --gpu."""
    top = [gpu for gpu in gpus if device_matches(device_name, gpu)]
    if not top:
        raise UserError(
            f"no hardware spec matches the device '{device_name}': pass --gpu ID or --gpu FILE "
            f"('rooflinectl hardware list' shows the known ones)"
        )
    if len({g.id for g in top}) > 1:
        raise UserError(
            f"the device '{device_name}' matches several specs ({', '.join(sorted(g.id for g in top))}): "
            f"pass --gpu to choose one"
        )
    return top[0]


def require_device(device_name: str | None, gpu: NamedSpec, what: str) -> None:
    """Refuse, in one line naming both, ``what`` (a measured section, a record) measured on ``device_name`` where
    it would be used as ``gpu``'s: by :func:`device_matches`, exact or nothing. A record that names no device is
    refused too: nothing then says it ran on this GPU, and every writer of these records states the device
    (``torch.cuda.get_device_name()``), so a blank one was edited, and its figures are no one's to trust."""
    if device_name is None or not device_name.strip():
        raise UserError(f"{what} names no device it was measured on, so nothing says it is {gpu.id}'s "
                        f"({gpu.name}): measure it again on that GPU")
    if not device_matches(device_name, gpu):
        raise UserError(f"{what} was measured on '{device_name}', not on {gpu.id} ({gpu.name}): measure on "
                        f"that GPU, or, if the device is that GPU, add '{device_name}' to its file's device_names")
