"""JSON Lines input (datasets, traces, other tools' per-request records): one object per non-blank
line, errors naming the file and line. One reader, so every input says a bad line the same way."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator


def jsonl_objects(lines: Iterable[tuple[int, str]], path: str,
                  error: type[Exception]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` per non-blank numbered line; a line that is not a JSON object
    raises ``error`` naming ``path:line``."""
    for lineno, line in lines:
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise error(f"{where}: expected a JSON object, got {type(obj).__name__}")
        yield where, obj


__all__ = ["jsonl_objects"]
