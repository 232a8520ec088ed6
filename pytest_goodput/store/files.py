"""Files the product writes: all or nothing, so a crash never leaves half a baseline or report."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pytest_goodput.schema.redaction import redact


class WriteError(OSError):
    """A file could not be written; the message is ``cannot write <path>: <reason>``."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _default_mode() -> int:
    """The mode a plain ``open()`` would give a new file: 0o666 less the umask (mkstemp's
    private 0o600 would leave baselines and reports unreadable to a CI step under another
    user)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write via a temporary file in the same directory and ``os.replace``: all or nothing.

    Every file the product writes comes through here, so secrets are redacted here
    (:mod:`pytest_goodput.schema.redaction`): no baseline, report or result holds one.

    Any failure (read-only directory, ``path`` is a directory, disk full) raises
    :class:`WriteError` naming the path and the reason; no temporary file is left behind.
    Bytes (a compressed file) are written as given: their writer redacts the text inside.
    """
    path = Path(path)
    data = redact(text).encode("utf-8") if isinstance(text, str) else text
    if path.is_dir():
        raise WriteError(path, "it is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise WriteError(path, _reason(exc)) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise WriteError(path, _reason(exc)) from None
        raise
