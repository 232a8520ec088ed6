"""The history store: one JSON Lines file per test, one line per recorded main-branch run.

JSON Lines because a history lives in git or a CI artifact: appending a run adds one line
(a small diff, no merge conflict in the file's middle), and a damaged line costs that line,
not the file. Appends hold the baseline store's directory lock; a file is bounded to its
newest ``keep`` entries, compacted (rewritten atomically) when a write would exceed it.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

from pydantic import ValidationError

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.history import (
    DEFAULT_KEEP,
    HISTORY_KIND,
    HISTORY_SCHEMA_VERSION,
    HistoryEntry,
)
from pytest_goodput.store.baseline import locked, now_iso
from pytest_goodput.store.baseline import path_for as baseline_path
from pytest_goodput.store.files import WriteError, write_atomic

#: Folder name of the history, next to the baseline directory (``.goodput/history``).
DIR_NAME = "history"
SUFFIX = ".jsonl"


class HistoryError(Exception):
    """A history file or directory cannot be read at all; the message names it and why."""


@dataclass
class HistoryRead:
    """A history file's valid entries (oldest first) and one warning per line that was skipped."""

    entries: list[HistoryEntry] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def default_dir(baseline_dir: Path) -> Path:
    """``.goodput/baselines`` → ``.goodput/history``: next to the baselines, not among them."""
    return baseline_dir.parent / DIR_NAME


def path_for(directory: Path, nodeid: str) -> Path:
    """The test's history file: the baseline file's path under ``directory``, ending ``.jsonl``."""
    return baseline_path(directory, nodeid).with_suffix(SUFFIX)


def _parse(path: Path, number: int, raw: bytes, nodeid: Optional[str]) -> tuple[Optional[HistoryEntry], str]:
    """One line: (entry, "") or (None, why it was skipped)."""
    where = f"{path}:{number}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, f"{where}: not UTF-8 text, line skipped"
    except json.JSONDecodeError as exc:
        return None, f"{where}: not valid JSON ({exc.msg}), line skipped"
    if not isinstance(data, dict) or data.get("kind") != HISTORY_KIND:
        return None, f'{where}: not a history entry (no "kind": "{HISTORY_KIND}"), line skipped'
    if data.get("schema_version") != HISTORY_SCHEMA_VERSION:
        return None, (f"{where}: schema_version {data.get('schema_version')!r}, this version reads "
                      f"{HISTORY_SCHEMA_VERSION}; line skipped")
    try:
        entry = HistoryEntry.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return None, f"{where}: invalid at {loc}: {first['msg']}; line skipped"
    if nodeid is not None and entry.nodeid != nodeid:
        return None, f"{where}: belongs to {entry.nodeid!r}, not {nodeid!r}; line skipped"
    return entry, ""


def _read_bytes(path: Path) -> Optional[bytes]:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise HistoryError(f"cannot read history {path}: it is a directory") from None
    except OSError as exc:
        raise HistoryError(f"cannot read history {path}: {exc.strerror or exc}") from None


def read(path: Path, nodeid: Optional[str] = None) -> HistoryRead:
    """Every valid entry of ``path`` (none if it does not exist); damaged lines are skipped
    with a warning naming the file, the line and why. :class:`HistoryError` only when the
    file itself cannot be read."""
    data = _read_bytes(path)
    out = HistoryRead()
    for number, raw in enumerate((data or b"").split(b"\n"), start=1):
        if not raw.strip():
            continue
        entry, why = _parse(path, number, raw, nodeid)
        if entry is not None:
            out.entries.append(entry)
        else:
            out.warnings.append(why)
    return out


def append(path: Path, entry: HistoryEntry, *, keep: int = DEFAULT_KEEP) -> int:
    """Append ``entry`` under the directory lock; returns the entries the file now holds.

    Below ``keep`` entries the line is appended (a partial last line left by a crash is
    closed first, so it costs only itself). At ``keep`` the file is compacted: rewritten
    atomically with the newest ``keep - 1`` valid entries and ``entry`` (damaged lines go).
    Raises :class:`~pytest_goodput.store.files.WriteError` when it cannot write.
    """
    keep = max(int(keep), 1)
    line = _line(entry)
    with locked(path):
        try:
            data = _read_bytes(path) or b""
        except HistoryError as exc:
            raise WriteError(path, str(exc).split(": ", 1)[-1]) from None
        lines = [raw for raw in data.split(b"\n") if raw.strip()]
        if len(lines) + 1 <= keep:
            _append_line(path, line, needs_newline=bool(data) and not data.endswith(b"\n"))
            return len(lines) + 1
        kept = read(path, entry.nodeid).entries[-(keep - 1):] if keep > 1 else []
        write_atomic(path, "".join(_line(e) for e in kept) + line)
        return len(kept) + 1


def _line(entry: HistoryEntry) -> str:
    """One JSON line; no ``verdicts`` key when there are none, so the line stays readable by
    versions that predate it."""
    return entry.model_dump_json(exclude=None if entry.verdicts else {"verdicts"}) + "\n"


def _append_line(path: Path, line: str, *, needs_newline: bool) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(("\n" if needs_newline else "") + line)
            fh.flush()
            os.fsync(fh.fileno())
    except IsADirectoryError:
        raise WriteError(path, "it is a directory") from None
    except OSError as exc:
        raise WriteError(path, exc.strerror or str(exc)) from None


def find_all(directory: Path) -> dict[str, Path]:
    """nodeid → history file under ``directory`` (the first valid line names the test);
    :class:`HistoryError` when ``directory`` is not a readable directory."""
    if not directory.is_dir():
        what = "does not exist" if not directory.exists() else "is not a directory"
        raise HistoryError(f"history directory {directory} {what}")
    found: dict[str, Path] = {}
    for p in sorted(directory.rglob(f"*{SUFFIX}")):
        try:
            entries = read(p).entries
        except HistoryError:
            continue
        if entries:
            found.setdefault(entries[0].nodeid, p)
    return found


def commit_of(env: Fingerprint, environ: Mapping[str, str]) -> Optional[str]:
    """The commit a run measured: ``GITHUB_SHA`` in GitHub Actions, else the checkout's HEAD
    (the fingerprint's ``git_commit``), else unknown."""
    return environ.get("GITHUB_SHA") or env.provenance.get("git_commit") or None


def session_medians(summaries: Sequence[Mapping[str, Optional[float]]]) -> dict[str, float]:
    """Per metric, the median of the sessions' headline numbers (sessions lacking it skipped)."""
    names = sorted({k for s in summaries for k in s})
    out: dict[str, float] = {}
    for name in names:
        values = [float(v) for s in summaries if (v := s.get(name)) is not None and v == v
                  and abs(v) != float("inf")]
        if values:
            out[name] = float(statistics.median(values))
    return out


def record(
    directory: Path,
    nodeid: str,
    summaries: Sequence[Mapping[str, Optional[float]]],
    env: Fingerprint,
    *,
    tolerances: Mapping[str, float],
    verdicts: Optional[Mapping[str, str]] = None,
    keep: int = DEFAULT_KEEP,
    environ: Optional[Mapping[str, str]] = None,
) -> Path:
    """Append one recorded run (the median of its sessions) to the test's history file, with
    each gated metric's verdict against the baseline it replaced (what acceptance is made of)."""
    entry = HistoryEntry(
        nodeid=nodeid,
        recorded_at=now_iso(),
        commit=commit_of(env, os.environ if environ is None else environ),
        environment=env,
        sessions=max(len(summaries), 1),
        metrics=session_medians(summaries),
        gated=list(tolerances),
        tolerances=dict(tolerances),
        verdicts=dict(verdicts or {}),
    )
    path = path_for(directory, nodeid)
    append(path, entry, keep=keep)
    return path
