"""The Markdown block of the engine's clock: its latencies beside ours, and whose clock moved.

Why a block of its own: the "why" block explains a verdict with the engine's load (queue,
batch, KV cache); this one says where the time went. The engine's means are exact; its
percentiles come from histogram buckets and are shown as the bucket that holds them
(``docs/metrics.md``, "The engine's clock").
"""

from __future__ import annotations

from pytest_goodput.judge.attribution import attribute
from pytest_goodput.report.md.md_context import WHY_STATUSES
from pytest_goodput.report.md.mdtable import escape_cell, table
from pytest_goodput.report.text.clock import HEADERS, clock_rows, gap_line
from pytest_goodput.schema.outcomes.outcome import TestOutcome

__all__ = ["clock_block"]

def clock_block(o: TestOutcome) -> str:
    """The engine's latencies, baseline and current, beside ours; "" without an engine clock."""
    server = o.server or {}
    cur, base = server.get("current") or {}, server.get("baseline") or {}
    moved = attribute(o.comparisons, cur, base)
    rows = [*clock_rows("baseline", base), *clock_rows("current", cur)]
    if not rows or (moved is None and o.status not in WHY_STATUSES):
        return ""
    parts = ["**The engine's clock** — its own latencies (ms) beside ours; P50/P90/P99 are the "
             "histogram bucket that holds them, means are exact:",
             table(HEADERS, rows, "llrrrrrr")]
    gap = gap_line(cur)
    if gap is not None:
        parts.append(gap[0].upper() + gap[1:] + ".")
    if moved is not None:
        parts.append("> **Whose clock moved:** " + escape_cell(moved.note))
    return "\n\n".join(parts)
