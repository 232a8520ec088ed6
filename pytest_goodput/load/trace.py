"""Trace files: the arrival times and lengths of recorded traffic, read for a replay.

Two formats (``docs/workloads.md``, "Trace replay"):

- Mooncake JSONL (any name not ending in ``.csv``): one object per line with ``timestamp``
  (ms since the trace's start), ``input_length`` and ``output_length`` (tokens) and optional
  ``hash_ids`` (one id per ``trace_block_size``-token block of the prompt; requests whose
  leading ids are equal share that prefix). Other keys are ignored.
- CSV (``.csv``): a header naming ``timestamp`` (ms) or ``timestamp_s`` (seconds),
  ``input_length`` and ``output_length``, optionally ``hash_ids`` (ids separated by spaces);
  other columns are ignored.

Rows must be in arrival order (equal timestamps are fine): an earlier timestamp after a later
one is an error naming both lines, not silently sorted. The file is read line by line (a
large trace is never held as text) and hashed as it is read: the SHA-256 of its bytes pins
the spec's identity, so a baseline is never compared with a replay of another trace.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterator, Optional

import numpy as np

from pytest_goodput.schema.jsonl import jsonl_objects
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError, build_spec

class TraceError(SpecError):
    """A trace file is unusable; the message names the file, the line and the field."""


@dataclass(frozen=True)
class Trace:
    """A parsed trace: per row, arrival (ms, as in the file), lengths and block ids."""

    path: str
    sha256: str
    timestamps_ms: np.ndarray  # float64, non-decreasing
    input_lengths: np.ndarray  # int64 >= 1
    output_lengths: np.ndarray  # int64 >= 1
    hash_ids: tuple[Optional[tuple[int, ...]], ...]  # None: the row shares no block

    def __len__(self) -> int:
        return len(self.timestamps_ms)


def _count(value: Any, where: str, name: str) -> int:
    """A token count: an integer >= 1 (a float with no fraction, as CSV and some JSON give)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or value < 1:
        raise TraceError(f"{where}: {name!r} must be a whole number of tokens >= 1, got {value!r}")
    return int(value)


def _time_ms(value: Any, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise TraceError(f"{where}: {name!r} must be a number >= 0, got {value!r}")
    return float(value)


def _ids(value: Any, where: str) -> Optional[tuple[int, ...]]:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in value):
        raise TraceError(f"{where}: 'hash_ids' must be a list of integers >= 0, got {value!r}")
    return tuple(value) or None


def _number(text: str, where: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{where}: {name!r} must be a number, got {text!r}") from None


def _jsonl_rows(lines: Iterator[tuple[int, str]], path: str) -> Iterator[tuple[str, float, int, int, Any]]:
    for where, obj in jsonl_objects(lines, path, TraceError):
        for key in ("timestamp", "input_length", "output_length"):
            if key not in obj:
                raise TraceError(f"{where}: missing {key!r} (a Mooncake trace row has timestamp, "
                                 "input_length, output_length and optional hash_ids)")
        yield (where, _time_ms(obj["timestamp"], where, "timestamp"),
               _count(obj["input_length"], where, "input_length"),
               _count(obj["output_length"], where, "output_length"), _ids(obj.get("hash_ids"), where))


def _csv_rows(lines: Iterator[tuple[int, str]], path: str) -> Iterator[tuple[str, float, int, int, Any]]:
    numbered = iter(lines)
    first = next(numbered, None)
    if first is None:
        return
    header = [c.strip() for c in next(csv.reader([first[1].lstrip("\ufeff")]))]
    time_col = "timestamp" if "timestamp" in header else "timestamp_s" if "timestamp_s" in header else None
    missing = [c for c in ("input_length", "output_length") if c not in header]
    if time_col is None or missing:
        need = (["timestamp (ms) or timestamp_s"] if time_col is None else []) + missing
        raise TraceError(f"{path}:{first[0]}: the CSV header {header} lacks {', '.join(need)}")
    col = {name: header.index(name) for name in (time_col, "input_length", "output_length")}
    ids_col = header.index("hash_ids") if "hash_ids" in header else None
    scale = 1000.0 if time_col == "timestamp_s" else 1.0
    for lineno, line in numbered:
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        cells = next(csv.reader([line]))
        if len(cells) < len(header):
            raise TraceError(f"{where}: {len(cells)} fields, the header names {len(header)}")
        ids = None
        if ids_col is not None and cells[ids_col].strip():
            try:
                ids = [int(h) for h in cells[ids_col].split()]
            except ValueError:
                raise TraceError(f"{where}: 'hash_ids' must be integers separated by spaces, "
                                 f"got {cells[ids_col]!r}") from None
        t = _number(cells[col[time_col]], where, time_col)
        yield (where, _time_ms(t * scale if math.isfinite(t) else t, where, time_col),
               _count(_number(cells[col["input_length"]], where, "input_length"), where, "input_length"),
               _count(_number(cells[col["output_length"]], where, "output_length"), where, "output_length"),
               _ids(ids, where))


def _lines(fh: Any, digest: Any, path: str) -> Iterator[tuple[int, str]]:
    for lineno, raw in enumerate(fh, 1):
        digest.update(raw)
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceError(f"{path}:{lineno}: not UTF-8 text") from None


def read_trace(path: str) -> Trace:
    """Parse the trace at ``path`` (format by extension); errors name the file, line and field."""
    if not os.path.isfile(path):
        raise TraceError(f"trace file {path!r} does not exist")
    digest = hashlib.sha256()
    times: list[float] = []
    isl: list[int] = []
    osl: list[int] = []
    ids: list[Optional[tuple[int, ...]]] = []
    rows = _csv_rows if path.lower().endswith(".csv") else _jsonl_rows
    last = ("", -math.inf)
    try:
        with open(path, "rb") as fh:
            for where, t, i, o, h in rows(_lines(fh, digest, path), path):
                if t < last[1]:
                    raise TraceError(f"{where}: timestamp {t:g} ms is earlier than {last[1]:g} ms at "
                                     f"{last[0]}; rows must be in arrival order (sort the trace by "
                                     "timestamp)")
                last = (where, t)
                times.append(t)
                isl.append(i)
                osl.append(o)
                ids.append(h)
    except OSError as exc:
        raise TraceError(f"trace file {path!r} cannot be read: {exc}") from None
    if not times:
        raise TraceError(f"trace file {path!r} has no rows")
    return Trace(path, digest.hexdigest(), np.asarray(times, dtype=np.float64),
                 np.asarray(isl, dtype=np.int64), np.asarray(osl, dtype=np.int64), tuple(ids))


@lru_cache(maxsize=2)
def _cached(path: str, version: tuple[str, int, int, int]) -> Trace:
    del version  # the cache key: another or a rewritten file is read again
    return read_trace(path)


def load_trace(spec: ScenarioSpec) -> Trace:
    """The spec's trace, read once per file version; it must match a pinned ``trace_sha256``."""
    path = str(spec.trace)
    try:
        st = os.stat(path)
    except OSError:
        raise TraceError(f"trace file {path!r} does not exist") from None
    trace = _cached(path, (os.path.abspath(path), st.st_ino, st.st_mtime_ns, st.st_size))
    if spec.trace_sha256 is not None and spec.trace_sha256 != trace.sha256:
        raise TraceError(f"trace file {path!r} changed: its SHA-256 is {trace.sha256}, the spec pins "
                         f"trace_sha256={spec.trace_sha256!r} (a baseline of another trace is not "
                         "comparable; re-record it, or drop trace_sha256=)")
    return trace


def with_trace_digest(spec: ScenarioSpec) -> ScenarioSpec:
    """``spec`` with its trace file's SHA-256 in ``trace_sha256`` (part of its identity)."""
    if spec.scenario != "trace":
        return spec
    trace = load_trace(spec)
    return spec if spec.trace_sha256 == trace.sha256 else spec.model_copy(
        update={"trace_sha256": trace.sha256})


def identified_spec(args: dict[str, Any], where: str,
                    validate: Callable[[dict[str, Any], str], ScenarioSpec] = build_spec) -> ScenarioSpec:
    """``args`` validated into the spec that is measured, its identity complete: a trace
    replay's file read (a bad or missing file is a :class:`TraceError` before anything runs)
    and its SHA-256 filled in. Every entry point builds its spec here (the plugin when it
    collects a test, ``run`` from its flags), and nothing downstream stamps it again."""
    return with_trace_digest(validate(args, where))


def trace_changed(spec: ScenarioSpec) -> bool:
    """Whether a trace replay's file no longer has the digest ``spec`` carries (rewritten,
    removed or unreadable since the spec was built); False for every other scenario. Only the
    bytes are hashed (no parse): the replay reads the file again anyway."""
    if spec.scenario != "trace":
        return False
    digest = hashlib.sha256()
    try:
        with open(str(spec.trace), "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return True
    return digest.hexdigest() != spec.trace_sha256
