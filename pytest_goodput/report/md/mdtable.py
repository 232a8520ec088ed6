"""Markdown building blocks every report section shares: safe cells, code spans, GFM tables.

Pure. Numbers are right-aligned (``align="r"``) so that their digits line up in a rendered
table, and every cell goes through :func:`escape_cell` so a node id or a note cannot break
the table or inject HTML.
"""

from __future__ import annotations


def escape_cell(text: object) -> str:
    """Make any value safe inside a Markdown table cell (pipes, newlines, raw HTML)."""
    s = str(text)
    s = s.replace("\\", "\\\\").replace("|", "\\|")
    s = s.replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


def code_span(text: str) -> str:
    """Inline code that survives backticks in the text."""
    text = text.replace("\n", " ")
    fence = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fence_for(body: str) -> str:
    """A code fence longer than any backtick run in ``body``."""
    return "`" * max(3, _longest_backtick_run(body) + 1)


def table(headers: list[str], rows: list[list[str]], align: str = "") -> str:
    """A GFM table; ``align`` has one of l/r per column (default left). Cells are pre-escaped."""
    align = align or "l" * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
