"""The command lines rooflinectl writes down for a reader to paste: the one that repeats a run (a record's or a
hardware file's ``command``), and the one each ``explore --serve`` tab runs. Built in one place, so that every such
line quotes its values for a POSIX shell the same way and leaves out what was not given the same way."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

# An option as a command was given it: (flag, value). None and False leave it out, True is the bare flag, any other
# value follows the flag as its text (a Path, an int).
Option = tuple[str, object]


def command_line(words: Sequence[str], options: Iterable[Option] = (),
                 program: Sequence[str] = ("rooflinectl",)) -> str:
    """``program`` (``rooflinectl``, or ``python -m rooflinectl``, or torchrun's launch of it), then ``words`` as
    they are (the sub-command, arguments), then each option given, in order, quoted for a POSIX shell:
    ``command_line(["calibrate"], [("-o", "my gpu.yaml"), ("--gpu", None)])`` is
    ``rooflinectl calibrate -o 'my gpu.yaml'``."""
    args = [*program, *words]
    for flag, value in options:
        if value is None or value is False:
            continue
        args += [flag] if value is True else [flag, str(value)]
    return shlex.join(args)
