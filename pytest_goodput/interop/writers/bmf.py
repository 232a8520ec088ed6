"""Bencher Metric Format: ``{benchmark: {measure: {value, lower_value, upper_value}}}`` (pure).

One benchmark per test (per load of a sweep or capacity search), named by its node id; one
measure per key metric, its slug naming the unit (``ttft-p99-ms``: Bencher's built-in
``latency`` measure is nanoseconds, so ours are measures of their own). ``value`` is the
number our reports show; ``lower_value`` and ``upper_value`` its 95 % interval from the
run's own requests (``points.interval``), left out where we define none.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_goodput.interop.writers.points import interval, measure_name, points, values
from pytest_goodput.interop.writers.source import ExportedTest, ExportFile


def document(tests: list[ExportedTest]) -> dict[str, dict[str, dict[str, float]]]:
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for test in tests:
        for point in points(test):
            measures: dict[str, dict[str, Any]] = {}
            for path, value in values(point).items():
                metric: dict[str, Any] = {"value": value}
                bounds = interval(point.headline, path)
                if bounds is not None:
                    lo, hi = bounds
                    if lo is not None:
                        metric["lower_value"] = lo
                    if hi is not None:
                        metric["upper_value"] = hi
                measures[measure_name(path)] = metric
            if measures:
                doc[test.nodeid + point.suffix] = measures
    return doc


def write(tests: list[ExportedTest]) -> list[ExportFile]:
    return [ExportFile(None, json.dumps(document(tests), indent=1) + "\n")]
