"""Which tool wrote a file, told by its content (``--format`` forces one), and reading it.

Documents come in parsed (JSON or YAML objects, JSON Lines as a list of objects): the
callers read the files. A document no reader knows is None from :func:`detect`; a forced
format that does not fit is an error naming the format and what its files hold.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from pytest_goodput.interop.readers import aiperf, guidellm, vllm_bench
from pytest_goodput.interop.readers.imported import ForeignFileError, ImportedRun
from pytest_goodput.schema.jsonl import jsonl_objects

FORMATS: tuple[str, ...] = ("vllm-bench", "aiperf", "guidellm")
EXPECTED = {
    "vllm-bench": "a `vllm bench serve --save-result` JSON (request_throughput, mean_ttft_ms, ...)",
    "aiperf": "AIPerf's profile_export.jsonl or profile_export_aiperf.json",
    "guidellm": "a GuideLLM benchmark report (metadata.guidellm_version, benchmarks)",
}


def detect(doc: Any) -> Optional[str]:
    """The format of a parsed document, or None when it is none of the tools'."""
    if vllm_bench.looks_like(doc):
        return "vllm-bench"
    if aiperf.looks_like_aggregate(doc) or (isinstance(doc, list) and doc and aiperf.looks_like_record(doc[0])):
        return "aiperf"
    if guidellm.looks_like(doc):
        return "guidellm"
    return None


def read(doc: Any, fmt: Optional[str] = None, aggregate: Optional[Mapping[str, Any]] = None) -> ImportedRun:
    """Read one document; ``aggregate``: AIPerf's aggregate JSON found beside its JSON Lines."""
    found = detect(doc)
    if fmt is not None and fmt not in FORMATS:
        raise ForeignFileError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    if fmt is not None and found != fmt:
        raise ForeignFileError(f"not a {fmt} file: expected {EXPECTED[fmt]}"
                               + (f" (this looks like {found})" if found else ""))
    if found == "vllm-bench":
        return vllm_bench.read(doc)
    if found == "aiperf":
        if isinstance(doc, list):
            return aiperf.read(doc, aggregate)
        return aiperf.read(None, doc)
    if found == "guidellm":
        return guidellm.read(doc)
    raise ForeignFileError("not a vllm bench serve, AIPerf or GuideLLM result file")


def parse_jsonl(text: str, name: str) -> list[dict[str, Any]]:
    """JSON Lines: one object a line (blank lines skipped), or an error naming the line."""
    return [row for _, row in jsonl_objects(enumerate(text.splitlines(), 1), name, ForeignFileError)]


def is_records(rows: Sequence[Any]) -> bool:
    """JSON Lines of AIPerf's per-request records."""
    return bool(rows) and aiperf.looks_like_record(rows[0])
