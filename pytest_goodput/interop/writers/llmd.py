"""llm-d's Benchmark Report v0.2.1: one report per run, for Prism and llm-d-benchmark (pure).

The report keeps aggregate statistics only (``results.request_performance.aggregate``):
our distributions go in as they are (nearest-rank percentiles, milliseconds, the units the
schema allows for each field), the workload in ``scenario.load`` (standardized, and our
spec as its native config), the engine in ``scenario.stack`` as a generic component. The
schema's ``Statistics`` forbid any other field, so our intervals have no place in it; the
gate's status and its regressed metrics go in ``run.description`` and ``run.keywords``.
``docs/export.md`` maps every field.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from pytest_goodput._version import __version__
from pytest_goodput.interop.writers.source import (
    TOOL,
    ExportedTest,
    ExportFile,
    labelled_runs,
    measured,
    run_id,
)
from pytest_goodput.measure.metrics import distribution
from pytest_goodput.schema.runs.results import Distribution, RunResult

VERSION = "0.2.1"
#: Our length distributions → llm-d's ``Distribution`` (normal: its ``gaussian``).
_DISTRIBUTIONS = {"fixed": "fixed", "uniform": "uniform", "normal": "gaussian", "lognormal": "other"}


def statistics(d: Distribution, units: str) -> Optional[dict[str, Any]]:
    """Our distribution as llm-d ``Statistics`` (None when it has no sample)."""
    if d.mean is None:
        return None
    out: dict[str, Any] = {"units": units, "mean": d.mean}
    for key in ("p50", "p90", "p95", "p99", "max"):
        value = getattr(d, key)
        if value is not None:
            out[key] = value
    return out


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _aggregate(run: RunResult) -> dict[str, Any]:
    done = [r for r in measured(run) if r.ok]
    m = run.metrics
    latency = _drop_none({
        "time_to_first_token": statistics(m.ttft_ms, "ms"),
        "time_per_output_token": statistics(m.tpot_ms, "ms/token"),
        "inter_token_latency": statistics(m.itl_ms, "ms/token"),
        "request_latency": statistics(m.e2e_ms, "ms"),
    })
    requests = _drop_none({
        "total": run.issued,
        "failures": run.issued - run.completed,
        "input_length": statistics(distribution(r.prompt_tokens for r in done), "count"),
        "output_length": statistics(distribution(float(r.output_tokens) for r in done), "count"),
    })
    t = run.throughput
    throughput = {
        "input_token_rate": {"units": "tokens/s", "mean": t.total_tokens_per_s - t.output_tokens_per_s},
        "output_token_rate": {"units": "tokens/s", "mean": t.output_tokens_per_s},
        "total_token_rate": {"units": "tokens/s", "mean": t.total_tokens_per_s},
        "request_rate": {"units": "queries/s", "mean": t.requests_per_s},
    }
    return _drop_none({"requests": requests, "latency": latency or None, "throughput": throughput})


def _length(value: int, dist: str, cv: float) -> dict[str, Any]:
    out: dict[str, Any] = {"distribution": _DISTRIBUTIONS.get(dist, "other"), "value": value}
    if dist == "normal":
        out["std_dev"] = value * cv
    return out


def _load(test: ExportedTest, run: RunResult, index: int) -> dict[str, Any]:
    spec = run.spec
    standardized: dict[str, Any] = {
        "tool": TOOL, "tool_version": __version__, "parallelism": spec.workers,
        "source": "random" if spec.workload == "synthetic" else "sampled",
        "stage": index,
        "input_seq_len": _length(spec.isl, spec.isl_dist, spec.length_cv),
        "output_seq_len": _length(spec.osl, spec.osl_dist, spec.length_cv),
    }
    if spec.workload != "synthetic":  # lengths come from the data: the measured means
        done = [r for r in measured(run) if r.ok]
        isl = distribution(r.prompt_tokens for r in done).mean
        standardized["input_seq_len"] = {"distribution": "other", "value": isl or 0.0}
        standardized.pop("output_seq_len")
    rate, users = run.load.get("rate"), run.load.get("concurrency")
    if spec.rate is not None or rate is not None:
        standardized["rate_qps"] = spec.rate if spec.rate is not None else rate
    if spec.concurrency is not None or users is not None:
        standardized["concurrency"] = int(spec.concurrency if spec.concurrency is not None else users or 1)
    if spec.turns > 1:
        standardized["multi_turn"] = {"enabled": True, "max_turns": {"distribution": "fixed", "value": spec.turns}}
    return {
        "metadata": {"schema_version": "0.0.1", "cfg_id": spec.identity_hash(),
                     "description": f"{test.nodeid} ({spec.scenario})"},
        "standardized": standardized,
        "native": {"config": json.loads(spec.model_dump_json(exclude_none=True))},
    }


def _stack(test: ExportedTest) -> list[dict[str, Any]]:
    env = test.environment
    extra = test.exported_environment
    return [{
        "metadata": {"schema_version": "0.0.1", "label": "engine",
                     "cfg_id": run_id(test.model, env.get("engine"), env.get("engine_version"))},
        "standardized": {"kind": "generic", "tool": test.engine,
                         "tool_version": env.get("engine_version") or "unknown",
                         "model": test.model, **extra},
        "native": {},
    }]


def _verdict(test: ExportedTest) -> tuple[str, list[str]]:
    """The gate's status for the description, and the keywords (tool, status, regressed metrics)."""
    o = test.outcome
    if o is None:
        return "not judged", [TOOL]
    words = [TOOL, f"status:{o.status}", *(f"regressed:{c.metric}" for c in o.regressed),
             *(f"slo-failed:{s.name}" for s in o.slo_failed)]
    return o.status, words


def report(test: ExportedTest, index: int) -> dict[str, Any]:
    """The Benchmark Report of one run of ``test``."""
    run = test.runs[index]
    status, keywords = _verdict(test)
    time: dict[str, Any] = {"duration": f"PT{run.window.seconds:.6f}S"}
    if run.measured_at:
        time["start"] = run.measured_at
    first = test.runs[0].measured_at
    return {
        "version": VERSION,
        "run": {
            "uid": run_id(test.nodeid, run.measured_at, index),
            "eid": run_id(test.nodeid, first),
            "time": time,
            "description": f"{test.model} [{test.nodeid}] {status}",
            "keywords": keywords,
        },
        "scenario": {"stack": _stack(test), "load": _load(test, run, index)},
        "results": {"request_performance": {"aggregate": _aggregate(run)}},
    }


def write(tests: list[ExportedTest]) -> list[ExportFile]:
    return [ExportFile(label, json.dumps(report(t, i), indent=1) + "\n")
            for label, t, i in labelled_runs(tests)]
