"""PyTorch OSS benchmark database records, schema v3 (``benchmark.oss_ci_benchmark_v3``) (pure).

A JSON list, one record per metric per benchmark (``points``): ``benchmark`` (our tool,
inference), ``model`` (the served model, the engine as its backend), ``metric`` (the
registry path as its name, ``benchmark_values`` one value per repeat with the headline run
last, ``target_value`` the spec's limit when it has one). The table's ``extra_info`` maps are
``Map(String, String)``, so every value there is a string: the unit, which way is good, the
95 % interval, and, when the gate judged the test, the verdict with its change and interval.
The uploader (pytorch/test-infra ``upload_benchmark_results.py``) adds the repository, commit
and job, and requires only ``metric``.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from pytest_goodput.interop.writers.points import Point, interval, points, slo_limit, values
from pytest_goodput.interop.writers.source import TOOL, ExportedTest, ExportFile
from pytest_goodput.measure.headline import lookup
from pytest_goodput.schema.outcomes.comparison import MetricComparison
from pytest_goodput.schema.registry import lookup_info


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _judged(test: ExportedTest, path: str) -> Optional[MetricComparison]:
    if test.outcome is None:
        return None
    return next((c for c in test.outcome.comparisons if c.metric == path), None)


def _metric_info(test: ExportedTest, point: Point, path: str) -> dict[str, str]:
    info = lookup_info(path)
    out: dict[str, str] = {}
    if info is not None:
        out.update(unit=info.unit, direction=info.direction, label=info.label)
    bounds = interval(point.headline, path)
    if bounds is not None:
        out["interval_95"] = _text(list(bounds))
    c = _judged(test, path) if not point.suffix else None
    if c is not None:
        out.update(verdict=c.verdict, tolerance=_text(c.tolerance))
        if c.change is not None:
            out["change"] = _text(c.change)
        if c.interval is not None:
            out["change_interval"] = _text(list(c.interval))
        if c.baseline is not None:
            out["baseline"] = _text(c.baseline)
    if test.outcome is not None:
        out["status"] = test.outcome.status
    return out


def records(tests: list[ExportedTest]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for test in tests:
        env = test.exported_environment
        for point in points(test):
            spec = point.headline.spec
            benchmark = {"name": TOOL, "mode": "inference", "dtype": "",
                         "extra_info": {"test": test.nodeid + point.suffix, "scenario": spec.scenario,
                                        "spec_hash": spec.identity_hash(),
                                        **{k: _text(v) for k, v in point.headline.load.items()}}}
            model = {"name": test.model, "type": "llm-serving", "backend": test.engine, "origins": [],
                     "extra_info": env}
            for path, _ in values(point).items():
                runs = [v for v in (lookup(r, path) for r in point.runs) if v is not None]
                metric: dict[str, Any] = {"name": path, "benchmark_values": runs,
                                          "extra_info": _metric_info(test, point, path)}
                limit = slo_limit(point.headline, path)
                if limit is not None:
                    metric["target_value"] = limit
                out.append({"benchmark": benchmark, "model": model, "metric": metric})
    return out


def write(tests: list[ExportedTest]) -> list[ExportFile]:
    return [ExportFile(None, json.dumps(records(tests), indent=1) + "\n")]
