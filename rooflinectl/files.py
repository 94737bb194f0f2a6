"""Reading and writing the user's files safely: THE one place that opens a path the user named.

Reading (:func:`read_text`) takes regular files only (a FIFO would block forever, ``/dev/zero`` would read until
memory runs out), at most ``max_bytes`` of them (a spec is a few KiB; a 50 MB file is a mistake, not a spec), as
UTF-8 (a UTF-16 or binary file is a one-line error, not a traceback).

Writing (:func:`write_atomic`) never leaves a half-written file: the bytes go to a unique temporary file in the
destination's folder, are flushed to disk, and replace the destination in one ``os.replace``; on any error the
temporary file is removed and the old file is intact. A destination that is a link, a folder, a FIFO or a device
is refused (writing through a link would overwrite whatever it points to). :func:`check_writable` asks the same
questions before minutes of work, and creates nothing.

No writer replaces a file the same command read: inside :func:`command_inputs` (every CLI command runs in one)
each file read is remembered by its device and inode, and a destination that is one of them is refused (a
``--save`` equal to ``--model`` overwrote the config.json with the record; ``plot -o`` over the ``--gpu`` spec
put a chart in its place). A writer whose job is to update the file it read (calibrate's ``-o`` merging its
measured section into the spec) says so with ``replaces_input=True``.

Every failure is a :class:`UserError` of one line naming the path.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from .errors import UserError

# Spec files (hardware, models, scenarios, config.json) are a few KiB; a measurement record of many shapes is
# tens of KiB. 4 MiB is far above any real one and parses in well under a second.
MAX_READ_BYTES = 4 * 2**20

# The (device, inode) of every file read inside command_inputs(); None outside one (a library caller's session).
_INPUTS: ContextVar[set[tuple[int, int]] | None] = ContextVar("rooflinectl_inputs", default=None)


@contextmanager
def command_inputs() -> Iterator[None]:
    """One command's reads: a file read inside it may not be replaced by a write inside it."""
    token = _INPUTS.set(set())
    try:
        yield
    finally:
        _INPUTS.reset(token)


def _reason(err: OSError) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "the name is too long"
    return err.strerror or str(err)


def is_file(path: Path | str) -> bool:
    """Whether ``path`` names an existing regular file; False, not an error, for a name the system refuses
    (too long, a folder that may not be read)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):  # ValueError: a NUL byte in the name
        return False


def is_dir(path: Path | str) -> bool:
    """Whether ``path`` names an existing folder: :func:`is_file`'s twin, False (not PermissionError or
    ENAMETOOLONG, as ``Path.is_dir`` raises) for a name the system refuses."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):  # ValueError: a NUL byte in the name
        return False


def user_path(name: Path | str) -> Path:
    """``name`` with a leading ``~`` or ``~user`` expanded, as a shell would; as given when that home folder does
    not exist (``Path.expanduser`` raises RuntimeError there), so that it reads as no such file, in one line."""
    try:
        return Path(name).expanduser()
    except RuntimeError:
        return Path(name)


def read_text(path: Path | str, max_bytes: int = MAX_READ_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``; anything else is a one-line UserError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except ValueError:
        raise UserError(f"{path!r}: not a valid file name") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read: {_reason(err)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file (a FIFO, a socket or a device): rooflinectl reads files only")
    if st.st_size > max_bytes:
        raise UserError(f"{path}: {st.st_size:,} bytes, more than the {max_bytes:,} a spec or record may have")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
            opened = os.fstat(f.fileno())
    except OSError as err:
        raise UserError(f"{path}: cannot read: {_reason(err)}") from None
    inputs = _INPUTS.get()
    if inputs is not None:
        inputs.add((opened.st_dev, opened.st_ino))
    if len(data) > max_bytes:  # it grew after the stat
        raise UserError(f"{path}: more than the {max_bytes:,} bytes a spec or record may have")
    try:
        return data.decode("utf-8-sig")  # a UTF-8 byte-order mark, as some editors write, is not an error
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None


def _refuse_special(path: Path, option: str) -> None:
    """A UserError when ``path`` exists (or is a dangling link) and is not a regular file we may replace."""
    prefix = f"{option} {path}" if option else str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except ValueError:
        raise UserError(f"{prefix}: not a valid file name") from None
    except OSError as err:
        raise UserError(f"{prefix}: cannot write: {_reason(err)}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UserError(f"{prefix}: cannot write: it is a symbolic link; rooflinectl does not write through "
                        f"links (give the file's own path)")
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{prefix}: cannot write: it is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{prefix}: cannot write: not a regular file (a FIFO, a socket or a device)")
    if not os.access(path, os.W_OK):
        raise UserError(f"{prefix}: cannot write: the file is read-only")


def _check_folder(path: Path, option: str) -> Path:
    prefix = f"{option} {path}" if option else str(path)
    folder = path.parent
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        raise UserError(f"{prefix}: cannot write: no such folder {folder}") from None
    except OSError as err:
        raise UserError(f"{prefix}: cannot write into {folder}: {_reason(err)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UserError(f"{prefix}: cannot write: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{prefix}: cannot write into {folder}: permission denied")
    return folder


def _refuse_an_input(path: Path, option: str) -> None:
    """A UserError when ``path`` is a file this command has read (see the module's docstring)."""
    inputs = _INPUTS.get()
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return  # no such file (or one _refuse_special has refused): nothing read is replaced
    if inputs and (st.st_dev, st.st_ino) in inputs:
        raise UserError(f"{option + ' ' if option else ''}{path}: cannot write: this command read it as an input; "
                        f"give another path")


def check_writable(path: Path | str, option: str = "", replaces_input: bool = False,
                   will_read: Sequence[Path | str | None] = ()) -> None:
    """A UserError now, before any work, when :func:`write_atomic` could not write ``path``. Creates nothing.
    ``will_read``: the files the command is about to read (a --model file): refused as ``path`` now, not after
    the run has read them."""
    path = Path(path)
    for name in will_read:
        try:
            same = name is not None and os.path.samefile(name, path)
        except (OSError, ValueError):
            same = False  # one of them does not exist: nothing read is replaced
        if same:
            raise UserError(f"{option + ' ' if option else ''}{path}: cannot write: this command reads it as an "
                            f"input; give another path")
    if len(path.name.encode()) > 255:
        raise UserError(f"{option + ' ' if option else ''}{path}: cannot write: the name is too long")
    _refuse_special(path, option)
    _check_folder(path, option)
    if not replaces_input:
        _refuse_an_input(path, option)


def write_atomic(path: Path | str, data: bytes | str, option: str = "", replaces_input: bool = False) -> None:
    """Write ``data`` (str as UTF-8) to ``path`` all at once or not at all (see the module's docstring).

    A new file gets the permissions the umask gives; a replaced file keeps its own.
    """
    path = Path(path)
    check_writable(path, option, replaces_input)
    folder = path.parent
    payload = data.encode() if isinstance(data, str) else data
    prefix = f"{option} {path}" if option else str(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    except OSError as err:
        raise UserError(f"{prefix}: cannot write: {_reason(err)}") from None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name[:200]}.", suffix=".tmp")
    except OSError as err:
        raise UserError(f"{prefix}: cannot write into {folder}: {_reason(err)}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise UserError(f"{prefix}: cannot write: {_reason(err)}") from None
        raise
