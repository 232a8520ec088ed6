"""JSON laid out for review: one line per number a re-record changes, short lists on one line.

``json.dumps(indent=...)`` puts every list element on a line of its own (thousands of lines
for a sweep's loads) or, without indent, a whole file on one line; neither gives a readable
``git diff``. Here an object has one key per line and a list of plain values stays on one
line, so a re-recorded baseline's diff shows the numbers that changed, each on its own line.
"""

from __future__ import annotations

import json
from typing import Any


def _scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def dumps(value: Any, indent: int = 1, _depth: int = 0) -> str:
    """``value`` as JSON text (parsing it back gives ``value``)."""
    pad, inner = " " * (indent * _depth), " " * (indent * (_depth + 1))
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dumps(v, indent, _depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value and not all(_scalar(v) for v in value):
        items = [f"{inner}{dumps(v, indent, _depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
