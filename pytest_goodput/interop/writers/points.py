"""What the one-number-per-metric formats (BMF, PyTorch) report per test, and each value's interval (pure).

A test's numbers are its headline run's key metrics (the last repeat: what every report
shows, ``measure/headline.py``); a sweep or capacity search reports each load it offered
as a point of its own, named by that load. A value's interval is the 95 % confidence interval of
that run's number from its own requests (``docs/export.md``): the distribution-free
order-statistic interval of a percentile, a seeded bootstrap of a mean, Wilson's interval
of the attainment. Rates and maxima get none: the run measured their value, not a sample of it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from pytest_goodput import stats
from pytest_goodput.interop.writers.source import ExportedTest, measured
from pytest_goodput.measure.headline import key_metrics
from pytest_goodput.schema.runs.results import RunResult

CONFIDENCE = 0.95
_LATENCY = re.compile(r"^metrics\.([a-z_]+)_ms\.(mean|p\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class Point:
    """One benchmark of a test: its name suffix and the runs behind its values (headline last)."""

    suffix: str
    runs: tuple[RunResult, ...]

    @property
    def headline(self) -> RunResult:
        return self.runs[-1]


def _load(run: RunResult) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, v) for k, v in run.load.items() if k in ("rate", "concurrency")))


def points(test: ExportedTest) -> list[Point]:
    """The test's benchmarks: one (its repeats share a load) or, for a sweep or capacity
    search, one per load its runs offered, in the order measured."""
    groups: dict[tuple[tuple[str, float], ...], list[RunResult]] = {}
    for run in test.runs:
        groups.setdefault(_load(run), []).append(run)
    if len(groups) <= 1:
        return [Point("", test.runs)] if test.runs else []
    return [Point(" [" + ", ".join(f"{k}={v:g}" for k, v in load) + "]", tuple(runs))
            for load, runs in groups.items()]


def measure_name(path: str) -> str:
    """A Bencher measure slug with its unit: ``metrics.ttft_ms.p99`` → ``ttft-p99-ms``."""
    m = _LATENCY.match(path)
    if m:
        return f"{m.group(1)}-{m.group(2)}-ms".replace("_", "-")
    return path.replace(".", "-").replace("_", "-")


def _column(run: RunResult, name: str) -> list[float]:
    done = [r for r in measured(run) if r.ok]
    if name == "itl":
        return [v for r in done for v in r.itl_ms]
    values = (getattr(r, f"{name}_ms", None) for r in done)
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def interval(run: RunResult, path: str) -> Optional[tuple[Optional[float], Optional[float]]]:
    """95 % interval of the run's ``path`` from its requests; None where we define none.
    A side too few requests can bound is None (the format leaves it out)."""
    if run.percentiles == "sketch":
        return None  # the kept requests are a sample: their interval is not the run's
    if path == "goodput.attainment" and run.goodput is not None:
        lo, hi = stats.wilson_interval(run.goodput.good, run.goodput.issued, CONFIDENCE)
        return lo, hi
    m = _LATENCY.match(path)
    if not m:
        return None
    xs = _column(run, m.group(1))
    if not xs:
        return None
    if m.group(2) == "mean":
        lo, hi = stats.bootstrap_interval(xs, lambda a: np.mean(a, axis=-1), confidence=CONFIDENCE, seed=0)
    else:
        lo, hi = stats.quantile_interval(xs, float(m.group(2)[1:]), CONFIDENCE)
    return (lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None)


def values(point: Point) -> dict[str, float]:
    """The headline run's key metrics, by path (``docs/metrics.md`` defines each)."""
    return {p: v for p, v in key_metrics(point.headline).items() if v is not None and math.isfinite(v)}


def slo_limit(run: RunResult, path: str) -> Optional[float]:
    """The spec's limit on ``path``, when it has one (a percentile SLO such as ``ttft_p99_ms``)."""
    for check in run.percentile_slos:
        if path == f"metrics.{check.metric}.p{check.percentile:g}":
            return check.limit_ms
    return None
