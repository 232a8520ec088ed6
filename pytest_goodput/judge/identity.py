"""Whether a baseline and a run are the same experiment, and what changed between them (pure)."""

from __future__ import annotations

from typing import Optional

from pytest_goodput.schema.environment import SESSION_FACTS, Fingerprint


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
