"""Whether a baseline and a run are the same experiment, and what differs between them besides
the numbers (pure): the environment's identity and provenance, the clients that measured each
side, and prompts that could not be checked because a side was read from another tool's file."""

from __future__ import annotations

from typing import Optional

from pytest_goodput.schema.environment import SESSION_FACTS, Fingerprint
from pytest_goodput.schema.runs.side import Side


def identity_mismatches(baseline: Fingerprint, current: Fingerprint) -> list[str]:
    """Human-readable reasons two runs are incomparable (empty when they are comparable)."""
    reasons = []
    for key in sorted(set(baseline.identity) | set(current.identity)):
        b, c = baseline.identity.get(key), current.identity.get(key)
        if b != c:
            reasons.append(f"{key} differs: baseline {b!r}, current {c!r}")
    return reasons


def what_changed(
    baseline: Fingerprint, current: Fingerprint
) -> dict[str, tuple[Optional[str], Optional[str]]]:
    """Provenance fields whose value moved (baseline, current); a recorded session's own
    facts (re-measured, a replaced launch) are not the environment's."""
    keys = sorted((set(baseline.provenance) | set(current.provenance)) - set(SESSION_FACTS))
    return {
        k: (baseline.provenance.get(k), current.provenance.get(k))
        for k in keys
        if baseline.provenance.get(k) != current.provenance.get(k)
    }


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
