"""Read other tools' result files from disk: vllm bench serve JSON, AIPerf, GuideLLM JSON/YAML.

The I/O half of ``interop/readers``: a path to parsed documents, then the pure readers. An
AIPerf path may be its artifact directory, its ``profile_export.jsonl`` (the aggregate
``profile_export_aiperf.json`` beside it is read too) or the aggregate alone (summaries only).
A path that is none of the tools' files is None, so the caller can try its own formats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from pytest_goodput.interop.readers.formats import detect, is_records, parse_jsonl, read
from pytest_goodput.interop.readers.imported import ForeignFileError, ImportedRun

AIPERF_RECORDS = "profile_export.jsonl"
AIPERF_AGGREGATE = "profile_export_aiperf.json"


def load_foreign(path: Path, fmt: Optional[str] = None) -> Optional[ImportedRun]:
    """The file read by the tool's reader; None when it is not one of theirs (and ``fmt`` is
    None). Errors name the file."""
    try:
        return _load(path, fmt)
    except ForeignFileError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _load(path: Path, fmt: Optional[str]) -> Optional[ImportedRun]:
    if path.is_dir():
        records = path / AIPERF_RECORDS
        if not records.is_file():
            if fmt is not None:
                raise ForeignFileError(f"no {AIPERF_RECORDS} in this directory")
            return None
        path = records
    doc = _parse(path)
    if doc is None:
        if fmt is not None:
            raise ForeignFileError(f"not JSON, JSON Lines or YAML, so not a {fmt} file")
        return None
    if fmt is None and detect(doc) is None:
        return None
    aggregate = None
    if isinstance(doc, list) and is_records(doc):
        beside = path.parent / AIPERF_AGGREGATE
        aggregate = _parse(beside) if beside.is_file() else None
    return read(doc, fmt, aggregate if isinstance(aggregate, dict) else None)


def _parse(path: Path) -> Any:
    """JSON, JSON Lines or YAML (by suffix); None when the text is none of them."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError):
        return None
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml  # optional: only GuideLLM's YAML report needs it
        except ImportError:
            raise ForeignFileError("reading a YAML report needs PyYAML (pip install pyyaml)") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return parse_jsonl(text, str(path)) if text.lstrip().startswith("{") else None
    except ForeignFileError:
        return None
