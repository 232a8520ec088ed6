"""The goodput section of pytest's terminal summary, as lines read off the session.

The hook (``plugin/__init__.py``) only opens the section and writes what :func:`summary_lines`
returns, each line with its colour; what the section says, and in which order, is decided here.
"""

from __future__ import annotations

from typing import Optional

from pytest_goodput.plugin.session import GoodputSession
from pytest_goodput.report.text.terminal import render_summary

#: A line of the section and its terminal markup (``red=True``, ``yellow=True``).
Line = tuple[str, dict[str, bool]]


def summary_lines(session: GoodputSession, width: Optional[int], ascii_only: bool) -> list[Line]:
    """The outcomes' table (``width``: a terminal's, None in a CI log, which keeps every column),
    then missing and written baselines, power plans, unused baselines, errors and kept logs."""
    lines: list[Line] = []
    if session.outcomes:
        lines.append((render_summary(session.outcomes, width=width, ascii=ascii_only,
                                     engines=session.engine_use()), {}))
    missing = session.missing_baselines()
    if missing is not None:
        failing = session.missing_baselines_fail()
        lines.append((("error: " if failing else "warning: ") + missing, {"red": failing, "yellow": not failing}))
    lines += [(f"baseline written: {path}", {}) for path in session.written]
    lines += [(line, {}) for line in session.power_plans()]
    lines += [(f"baseline NOT written: {note}", {}) for note in session.skipped_writes]
    s = session.settings
    unused = session.unused_baselines() if (s.compare or s.update) else []
    lines += [(f"unused baseline (its test no longer exists): {path}", {}) for path in unused]
    lines += [(f"error: {err}", {"red": True}) for err in session.errors]
    lines += [(f"engine log kept: {log}", {}) for log in session.kept_logs]
    return lines


__all__ = ["Line", "summary_lines"]
