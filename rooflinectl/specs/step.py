"""A step: its phase, and the groups of sequences it is made of.

A step is groups of sequences (:class:`Seqs`), each ``count`` sequences computing ``new`` tokens after ``cached``
ones; decode, prefill and attention are the presets, one group each, and any other set of groups is a mixed step.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, Field, ValidationError

from ..errors import UserError, format_validation_error
from ..units import whole_number
from .load import Strict
from .sizes import Batch, Positions

# decode, prefill and attention are the presets of a step; a mixed step is any other set of sequence groups (a
# continuous-batching step: decodes beside a prefill chunk). A scenario file gives a preset by its phase and
# sizes, a mixed step by its groups (``seqs``).
Phase = Literal["decode", "prefill", "attention", "mixed"]
PHASES: tuple[str, ...] = get_args(Phase)
PRESETS: tuple[Phase, ...] = ("decode", "prefill", "attention")  # the bundled scenarios' phases

# Tokens already in a sequence's KV cache before the step: 0 (a prompt's first chunk) up to a position limit.
Cached = Annotated[int, Field(ge=0, le=2**30)]
# Groups of sequences in one step: a continuous-batching step has a handful (one per distinct length at most).
MAX_GROUPS = 4096


class Seqs(Strict):
    """``count`` sequences that each compute ``new`` tokens in this step after ``cached`` tokens already in their
    KV cache: the unit a step is made of.

    A decode token is ``1`` new after ``context − 1`` cached (it writes its own K and V, then attends to all
    ``context`` positions); a prompt prefilled at once is ``seq_len`` new after 0; a chunk of T prompt tokens
    after P already prefilled is T new after P, and its query i attends causally to P + i positions.
    """

    count: Batch
    new: Positions
    cached: Cached = 0

    def __init__(self, count: int, new: int, cached: int = 0) -> None:
        """``Seqs(16, 1, 4095)`` or by keyword; out-of-range sizes are a UserError naming the field."""
        self._fill(count, new, cached, "Seqs")

    def _fill(self, count: int, new: int, cached: int, where: str) -> None:
        try:
            BaseModel.__init__(self, count=count, new=new, cached=cached)
        except ValidationError as err:
            raise UserError(format_validation_error(where, err)) from None

    @property
    def positions(self) -> int:
        """KV positions each sequence holds at the end of the step (and its last token attends to)."""
        return self.cached + self.new

    @property
    def tokens(self) -> int:
        """Tokens the group computes in the step, all its sequences together."""
        return self.count * self.new

    def text(self) -> str:
        """The command-line form, ``COUNTxNEW@CACHED`` (``@0`` left out)."""
        return f"{self.count}x{self.new}" + (f"@{self.cached}" if self.cached else "")

    @classmethod
    def parse(cls, text: str) -> Seqs:
        """``COUNTxNEW[@CACHED]`` (``16x1@4095``: 16 decode tokens after 4,095 cached; ``1x512@1024``: a 512-token
        prefill chunk after 1,024): a UserError naming the form for anything else."""
        form = "COUNTxNEW[@CACHED], e.g. 16x1@4095 (16 sequences decoding after 4,095 cached tokens)"
        if not isinstance(text, str):
            raise UserError(f"Seqs.parse: give a text of the form {form}, not {type(text).__name__}")
        head, at, cached = text.strip().partition("@")
        count, x, new = head.partition("x")
        parts = (count, new, cached if at else "0")
        numbers = [whole_number(p) for p in parts]
        if not x or None in numbers:
            shown = text if len(text) <= 60 else f"{text[:60]}…"
            raise UserError(f"--seqs '{shown}': expected {form}")
        n, new_tokens, past = (int(v) for v in numbers if v is not None)
        seqs = cls.__new__(cls)
        seqs._fill(n, new_tokens, past, f"--seqs '{text}'")  # a bad size named as the user wrote it
        return seqs


def preset_phase(seqs: tuple[Seqs, ...]) -> Phase:
    """The phase a step of these groups is: one group of single tokens is a decode step, one group of whole
    prompts (nothing cached) a prefill step, anything else a mixed step."""
    if len(seqs) == 1 and seqs[0].new == 1:
        return "decode"
    if len(seqs) == 1 and seqs[0].cached == 0:
        return "prefill"
    return "mixed"


# The most groups a title or a message spells out: a step of 2,000 groups made a title of 424 lines.
SHOWN_GROUPS = 6


def seqs_text(seqs: tuple[Seqs, ...]) -> str:
    """The groups in words, ``16×1 after 4,095 + 1×512 after 1,024`` (``after 0`` left out); past SHOWN_GROUPS,
    the first of them and how many more."""
    words = [f"{g.count:,}×{g.new:,}" + (f" after {g.cached:,}" if g.cached else "") for g in seqs[:SHOWN_GROUPS]]
    more = len(seqs) - SHOWN_GROUPS
    return " + ".join(words) + (f" + {more:,} more groups" if more > 0 else "")
