"""What the judge says of sides read from other tools' files (pure): which clients measured
them, and that their prompts are not known."""

from __future__ import annotations

from typing import Optional

from pytest_goodput.schema.runs.side import Side


def _tools(baseline: Side, current: Side) -> list[Optional[str]]:
    return [s.source.tool if s.source is not None else None for s in (*baseline.sessions, *current.sessions)]


def clients_note(baseline: Side, current: Side) -> list[str]:
    """A note when the sides come from different clients (tools), one of them imported."""
    tools = _tools(baseline, current)
    names = {t or "pytest-goodput" for t in tools}
    if len(names) < 2 or all(t is None for t in tools):
        return []
    return [f"the sides were measured by different clients ({', '.join(sorted(names))}): the metrics are "
            "defined alike, but each client's connections, processes and pacing are its own, so part of "
            "a change may be the client's"]


def prompts_note(baseline: Side, current: Side) -> Optional[str]:
    """Why the prompts were not checked, when a side is imported (its file keeps no prompts)."""
    imported = sorted({t for t in _tools(baseline, current) if t is not None})
    if not imported:
        return None
    return (f"imported from {', '.join(imported)}: the file does not keep its prompts, so whether both "
            "sides sent the same prompts was not checked")
