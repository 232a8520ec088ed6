"""A baseline's per-request samples: one compressed, versioned, columnar file beside its JSON.

Gzip'd JSON, one object per run (repeat, sweep point or probe) of each session, column by
column. A column equal to another (``ttfo_ms`` to ``ttft_ms`` without reasoning,
``answer_tpot_ms`` to ``tpot_ms``) is stored once and named in ``same``; an all-null column
is named in ``null``; a column that was never measured (None) is left out. Reading rebuilds
every :class:`Samples` exactly (``docs/decisions.md``, "Baseline files"). The bytes are
deterministic (no gzip timestamp), so an unchanged file is unchanged in git.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from typing import Any

from pydantic import ValidationError

from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.runs.results import Samples

SAMPLES_KIND = "pytest-goodput-samples"
SAMPLES_SCHEMA_VERSION = 1
SUFFIX = ".samples.json.gz"
#: Columns that usually repeat another one: stored as a reference when equal.
_SAME_AS = {"ttfo_ms": "ttft_ms", "answer_tpot_ms": "tpot_ms"}


class SamplesFileError(ValueError):
    """The samples file cannot be read; the message says why."""


def _columns(samples: Samples) -> dict[str, Any]:
    data = samples.model_dump(mode="json", exclude_none=True)
    out: dict[str, Any] = {}
    null: list[str] = []
    same: dict[str, str] = {}
    for name, value in data.items():
        if isinstance(value, list) and value and all(v is None for v in value):
            null.append(name)
        elif name in _SAME_AS and value == data.get(_SAME_AS[name]):
            same[name] = _SAME_AS[name]
        else:
            out[name] = value
    if null:
        out["null"] = null
    if same:
        out["same"] = same
    return out


def _samples(columns: dict[str, Any]) -> Samples:
    data = dict(columns)
    null = data.pop("null", [])
    same = data.pop("same", {})
    n = len(data.get("ok", []))
    for name in null:
        data[name] = [None] * n
    for name, other in same.items():
        data[name] = list(data[other])
    return Samples.model_validate(data)


def encode(sessions: list[list[Samples]]) -> bytes:
    """Each session's samples (oldest first) as the file's bytes."""
    doc = {"kind": SAMPLES_KIND, "schema_version": SAMPLES_SCHEMA_VERSION,
           "sessions": [[_columns(s) for s in session] for session in sessions]}
    text = redact(json.dumps(doc, separators=(",", ":")))
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_name(stem: str, data: bytes) -> str:
    """The samples file of baseline ``stem``: named by its digest, so a new write never
    replaces the file an older baseline JSON names."""
    return f"{stem}.{digest(data)[:12]}{SUFFIX}"


def decode(data: bytes) -> list[list[Samples]]:
    """The samples of each session; :class:`SamplesFileError` naming what is wrong."""
    try:
        doc = json.loads(gzip.decompress(data).decode("utf-8"))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as exc:
        raise SamplesFileError(f"not a gzip'd JSON samples file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != SAMPLES_KIND:
        raise SamplesFileError(f"not a pytest-goodput samples file (no \"kind\": \"{SAMPLES_KIND}\")")
    if doc.get("schema_version") != SAMPLES_SCHEMA_VERSION:
        raise SamplesFileError(f"schema_version {doc.get('schema_version')!r}; this pytest-goodput "
                               f"reads version {SAMPLES_SCHEMA_VERSION}")
    try:
        return [[_samples(c) for c in session] for session in doc["sessions"]]
    except (ValidationError, KeyError, TypeError, AttributeError) as exc:
        raise SamplesFileError(f"invalid samples ({str(exc).splitlines()[0]})") from None
