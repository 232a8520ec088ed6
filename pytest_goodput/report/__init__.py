"""Reports users read: shared vocabulary (metric labels, order, number formats) and schema export.

Everything here is pure except :func:`export_schemas`. The terminal, Markdown and GitHub
reports all format numbers through these functions so that a value reads the same in a
log line, a PR comment and an annotation.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from pytest_goodput.schema.outcome import TestOutcome
from pytest_goodput.schema.results import RunResult

if TYPE_CHECKING:  # pragma: no cover
    from pytest_goodput.schema.outcome import MetricComparison, TestOutcome

#: Test statuses (``TestOutcome.status``) in the order summaries count them.
STATUSES: tuple[str, ...] = (
    "passed",
    "regressed",
    "inconclusive",
    "new",
    "slo-failed",
    "invalid",
    "error",
    "incomparable",
)
#: Statuses that fail the gate (inconclusive fails only in strict mode).
FAILING: frozenset[str] = frozenset({"regressed", "slo-failed", "invalid", "error"})
#: Statuses that deserve a detailed look in every report.
NOTEWORTHY: frozenset[str] = FAILING | {"inconclusive", "incomparable"}

#: How bad a verdict is, for picking a test's worst metric (higher is worse).
VERDICT_SEVERITY: dict[str, int] = {
    "improved": 0,
    "pass": 1,
    "new": 2,
    "incomparable": 3,
    "inconclusive": 4,
    "regressed": 5,
}

_LATENCY = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}
_STATS = ("p50", "p90", "p95", "p99", "mean", "max")

#: Known metric paths (into a RunResult) → (label, unit), in report order.
METRICS: dict[str, tuple[str, str]] = {
    "goodput.requests_per_s": ("goodput", "req/s"),
    "goodput.tokens_per_s": ("token goodput", "tok/s"),
    "goodput.attainment": ("SLO attainment", "%"),
    "throughput.requests_per_s": ("throughput", "req/s"),
    "throughput.output_tokens_per_s": ("output throughput", "tok/s"),
    "throughput.total_tokens_per_s": ("total throughput", "tok/s"),
    "frontier_throughput": ("frontier throughput", "tok/s"),
    "capacity.requests_per_s": ("capacity", "req/s"),
    "error_rate": ("error rate", "%"),
    "attainment": ("attainment", "%"),
}
for _m, _name in _LATENCY.items():
    for _s in _STATS:
        METRICS[f"metrics.{_m}_ms.{_s}"] = (f"{_name} {_s.upper() if _s[0] == 'p' else _s}", "ms")

_ORDER = {path: i for i, path in enumerate(METRICS)}
_SHORT_PCT = re.compile(r"^(ttft|tpot|itl|e2e)_p(\d+)_ms$")
_SHORT_STAT = re.compile(r"^(ttft|tpot|itl|e2e)_ms\.(p\d+|mean|max)$")


def canonical_metric(name: str) -> str:
    """The path form of a metric name (``ttft_p99_ms`` → ``metrics.ttft_ms.p99``)."""
    m = _SHORT_PCT.match(name)
    if m:
        return f"metrics.{m.group(1)}_ms.p{m.group(2)}"
    m = _SHORT_STAT.match(name)
    if m:
        return f"metrics.{name}"
    return name


def metric_info(name: str) -> tuple[str, str]:
    """(label, unit) of a metric; unknown metrics keep their name and a guessed unit."""
    path = canonical_metric(name)
    if path in METRICS:
        return METRICS[path]
    if path.endswith("_ms") or "_ms." in path:
        return path, "ms"
    if "attainment" in path:
        return path, "%"
    if path.endswith("per_s"):
        return path, "/s"
    return path, ""


def metric_label(name: str, with_unit: bool = True) -> str:
    """``goodput (req/s)``: how a metric is named in table cells."""
    label, unit = metric_info(name)
    return f"{label} ({unit})" if with_unit and unit and unit != "%" else label


def metric_sort_key(name: str) -> tuple[int, str]:
    """Known metrics in their fixed report order, then unknown ones alphabetically."""
    path = canonical_metric(name)
    return (_ORDER.get(path, len(_ORDER)), path)


def _finite(x: Optional[float]) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def fmt_num(x: Optional[float], missing: str = "–") -> str:
    """Three significant digits, thousands grouped, no scientific notation for big values."""
    if x is None:
        return missing
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if x == 0:
        return "0"
    return f"{x:.3g}"


def fmt_percent(fraction: Optional[float], missing: str = "–") -> str:
    """A fraction as a percent that never rounds a shortfall up to 100 %."""
    if fraction is None:
        return missing
    if not math.isfinite(fraction):
        return str(fraction)
    value = fraction * 100.0
    for digits in (1, 2, 3, 4):
        text = f"{value:.{digits}f}"
        if fraction >= 1 or float(text) < 100:
            break
    return f"{text}%"


def fmt_value(x: Optional[float], unit: str = "", missing: str = "–", with_unit: bool = False) -> str:
    """A metric value in its unit; fractions with unit ``%`` are shown as percents."""
    if unit == "%":
        return fmt_percent(x, missing)
    text = fmt_num(x, missing)
    return f"{text} {unit}" if with_unit and unit and x is not None else text


def fmt_change(change: Optional[float], missing: str = "–") -> str:
    """A signed relative change: ``+12.3%`` / ``-4.0%``."""
    if change is None:
        return missing
    if math.isnan(change):
        return "nan"
    if math.isinf(change):
        return "+inf" if change > 0 else "-inf"
    return f"{change * 100:+.1f}%"


def fmt_interval(interval: Optional[tuple[float, float]], missing: str = "–") -> str:
    """``[-5.1%, +2.0%]``: the interval of a relative change."""
    if interval is None:
        return missing
    lo, hi = interval
    return f"[{fmt_change(lo)}, {fmt_change(hi)}]"


def sorted_outcomes(outcomes: Iterable["TestOutcome"]) -> list["TestOutcome"]:
    """Reports list tests by node id so that reruns diff cleanly."""
    return sorted(outcomes, key=lambda o: o.nodeid)


def sorted_comparisons(outcome: "TestOutcome") -> list["MetricComparison"]:
    return sorted(outcome.comparisons, key=lambda c: metric_sort_key(c.metric))


def badness(c: "MetricComparison") -> float:
    """How far a change moved in the bad direction (negative: it improved)."""
    if not _finite(c.change):
        return 0.0
    return -c.change if c.direction == "higher" else c.change  # type: ignore[operator]


def worst_comparison(outcome: "TestOutcome") -> Optional["MetricComparison"]:
    """The comparison a one-row summary shows: worst verdict, then the largest bad change."""
    if not outcome.comparisons:
        return None
    return max(
        sorted_comparisons(outcome),
        key=lambda c: (VERDICT_SEVERITY.get(c.verdict, 0), badness(c)),
    )


def status_counts(outcomes: Iterable["TestOutcome"]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    return counts


def key_metric_values(outcome: "TestOutcome") -> dict[str, Optional[float]]:
    """``key_metrics`` keyed by canonical path."""
    return {canonical_metric(k): v for k, v in outcome.key_metrics.items()}


def export_schemas(directory: str | Path) -> list[Path]:
    """Write the JSON Schemas of the results and outcome contracts, for tools that consume them."""

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in (("run_result", RunResult), ("test_outcome", TestOutcome)):
        path = out / f"{name}.schema.json"
        schema = model.model_json_schema()
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written


__all__ = [
    "FAILING",
    "METRICS",
    "NOTEWORTHY",
    "STATUSES",
    "badness",
    "canonical_metric",
    "export_schemas",
    "fmt_change",
    "fmt_interval",
    "fmt_num",
    "fmt_percent",
    "fmt_value",
    "key_metric_values",
    "metric_info",
    "metric_label",
    "metric_sort_key",
    "sorted_comparisons",
    "sorted_outcomes",
    "status_counts",
    "worst_comparison",
]
