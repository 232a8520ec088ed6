"""``--goodput-export FORMAT=PATH``: which format goes where, checked before anything runs (pure).

The plugin and the command line share this parser, so a bad value reads the same in both:
it names the value, what is wrong with it and the formats allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Optional

#: The formats ``--goodput-export`` writes (``docs/export.md``).
FORMATS: dict[str, str] = {
    "llmd": "llm-d Benchmark Report v0.2.1 (one JSON report per run)",
    "vllm": "vllm bench serve result JSON with per-request arrays (one file per run)",
    "bmf": "Bencher Metric Format JSON (one file: every test's key metrics with intervals)",
    "pytorch": "PyTorch OSS benchmark database records, v3 (one JSON list)",
}


class ExportUsageError(ValueError):
    """A ``FORMAT=PATH`` value that cannot be used."""


@dataclass(frozen=True)
class ExportTarget:
    format: str
    path: str


def parse_target(text: str, flag: str = "--goodput-export") -> ExportTarget:
    """``llmd=reports/run.json`` → ``ExportTarget("llmd", "reports/run.json")``."""
    allowed = ", ".join(FORMATS)
    fmt, sep, path = text.partition("=")
    fmt, path = fmt.strip().lower(), path.strip()
    if not sep:
        raise ExportUsageError(f"{flag} {text!r}: give FORMAT=PATH, FORMAT one of {allowed}")
    if fmt not in FORMATS:
        raise ExportUsageError(f"{flag} {text!r}: unknown format {fmt!r}; allowed: {allowed}")
    if not path:
        raise ExportUsageError(f"{flag} {text!r}: no PATH after '='; give {fmt}=PATH")
    return ExportTarget(fmt, path)


def parse_targets(values: Optional[list[str]], flag: str = "--goodput-export") -> list[ExportTarget]:
    """Every ``FORMAT=PATH`` given (the option repeats); two formats to one path are refused."""
    targets = [parse_target(v, flag) for v in values or []]
    seen: dict[str, str] = {}
    for t in targets:
        if t.path in seen:
            raise ExportUsageError(f"{flag}: {t.path!r} is given twice ({seen[t.path]} and {t.format}); "
                                   "give each export its own PATH")
        seen[t.path] = t.format
    return targets


def file_path(path: str, label: Optional[str]) -> str:
    """Where one document of an export goes: PATH, or PATH with ``.label`` before its extension."""
    if label is None:
        return path
    p = PurePath(path)
    return str(p.with_name(f"{p.stem}.{label}{p.suffix}")) if p.suffix else f"{path}.{label}"
