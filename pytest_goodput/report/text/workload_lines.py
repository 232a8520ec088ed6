"""Terminal lines about a test's workload: a reasoning model's TTFO and lengths, baseline
vs current, and the workload sameness check (pure: returns strings)."""

from __future__ import annotations

from typing import Optional

from pytest_goodput.report.vocabulary import fmt_value, key_metric_values, metric_info
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.registry import REASONING_KEY_METRICS

#: Shown for a test whose model reasoned, baseline → current.
_REASONING_SHOWN = REASONING_KEY_METRICS


def reasoning_line(o: TestOutcome, arrow: str = "→", missing: str = "–") -> Optional[str]:
    """``TTFO P99 1,234 → 1,300 ms; reasoning tokens/request 512 → 512; ...`` for a test
    whose current run reasoned (its key metrics hold TTFO); None otherwise."""
    current = key_metric_values(o)
    if "metrics.ttfo_ms.p99" not in current:
        return None
    base = o.baseline_key_metrics or {}
    parts = []
    for path in _REASONING_SHOWN:
        label, unit = metric_info(path)
        b = fmt_value(base.get(path), unit, missing) if o.baseline_key_metrics is not None else None
        c = fmt_value(current.get(path), unit, missing, with_unit=True)
        parts.append(f"{label} {c}" if b is None else f"{label} {b} {arrow} {c}")
    return "; ".join(parts)


def unrecorded_prompts_line(outcomes: list[TestOutcome]) -> Optional[str]:
    """Said once per session: baselines recorded before prompt fingerprints were kept."""
    n = sum(1 for o in outcomes if o.workload is not None and o.workload.prompts == "unrecorded")
    if not n:
        return None
    return (f"goodput: {n} comparison{'s' if n != 1 else ''} without a prompt fingerprint on one "
            "side (recorded before fingerprints were kept): prompts not checked; "
            "record the baseline again (--goodput-update-baseline) to check them")


__all__ = ["reasoning_line", "unrecorded_prompts_line"]
