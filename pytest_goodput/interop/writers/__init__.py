"""Our results written in the formats other tools read (pure): llm-d's Benchmark Report,
``vllm bench serve`` result JSON, Bencher Metric Format and PyTorch's benchmark database.

:func:`export` turns a session's tests into the documents of one format; the caller writes
them (``store.files.write_atomic``: all or nothing, redacted). ``docs/export.md`` maps every
field and says what each format leaves out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from pytest_goodput.interop.writers import bmf, llmd, pytorch, vllm
from pytest_goodput.interop.writers.source import ExportedTest, ExportError, ExportFile
from pytest_goodput.interop.writers.targets import (
    FORMATS,
    ExportTarget,
    ExportUsageError,
    file_path,
    parse_target,
    parse_targets,
)

WRITERS: dict[str, Callable[[list[ExportedTest]], list[ExportFile]]] = {
    "llmd": llmd.write, "vllm": vllm.write, "bmf": bmf.write, "pytorch": pytorch.write,
}
assert set(WRITERS) == set(FORMATS)


def export(target: ExportTarget, tests: list[ExportedTest]) -> list[tuple[str, str]]:
    """(path, text) of every document ``target`` asks for: one file, or one per run.

    A run stopped before its end (``interrupted``) is partial evidence, never judged: it is
    not exported either, so no dashboard reads it as a measurement.
    """
    tests = [replace(t, runs=tuple(r for r in t.runs if r.interrupted is None)) for t in tests]
    tests = [t for t in tests if t.runs]
    if not tests:
        return []
    return [(file_path(target.path, f.label), f.text) for f in WRITERS[target.format](tests)]


__all__ = ["FORMATS", "WRITERS", "ExportError", "ExportFile", "ExportTarget", "ExportUsageError",
           "ExportedTest", "export", "file_path", "parse_target", "parse_targets"]
