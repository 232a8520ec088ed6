"""``python -m pytest_goodput compare BASE NEW``: the gate's verdicts outside pytest.

BASE and NEW may each be a baseline file, a directory of baselines, a ``--goodput-json``
session file, or a ``run --json`` result. Tests are matched by node id (a single run is
called ``run``). Exit status: 0 pass, 1 regression (or, with ``--strict``, inconclusive).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from pytest_goodput.judge.judge import fails, key_metrics, metric_defs
from pytest_goodput.judge.verdicts import compare
from pytest_goodput.report.markdown import render_markdown
from pytest_goodput.report.terminal import render_summary
from pytest_goodput.schema.outcome import TestOutcome
from pytest_goodput.schema.results import RunResult, Samples
from pytest_goodput.schema.spec import ScenarioSpec
from pytest_goodput.store import baseline as store


@dataclass
class Side:
    """One test's runs as the statistics need them."""

    spec: ScenarioSpec
    samples: list[Samples]
    env: dict[str, str] = field(default_factory=dict)
    summary: dict[str, Optional[float]] = field(default_factory=dict)


def _from_results(runs: list[RunResult]) -> Side:
    return Side(
        spec=runs[0].spec,
        samples=[Samples.from_records(r.requests, r.window.seconds) for r in runs],
        summary=key_metrics(runs[-1]),
    )


def load_sides(path: Path) -> dict[str, Side]:
    """Every test in ``path``, by node id; ValueError naming the file when it is not ours."""
    if path.is_dir():
        out = {}
        for nodeid, p in store.find_all(path).items():
            out.update({nodeid: s for s in load_sides(p).values()})
        if not out:
            raise ValueError(f"{path}: no pytest-goodput baselines in this directory")
        return out
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    try:
        if isinstance(data, dict) and data.get("kind") == store.BASELINE_KIND:
            doc = store.load(path)
            assert doc is not None
            latest = doc.latest
            return {doc.nodeid: Side(
                spec=ScenarioSpec.model_validate(doc.spec),
                samples=[s for run in doc.runs for s in run.samples],
                env=latest.environment.flat(),
                summary=latest.summary,
            )}
        if isinstance(data, dict) and "tests" in data:
            out = {}
            for t in data["tests"]:
                outcome = TestOutcome.model_validate(t["outcome"])
                runs = [RunResult.model_validate(r) for r in t.get("runs", [])]
                if runs:
                    side = _from_results(runs)
                    side.env = outcome.current_env
                    out[outcome.nodeid] = side
            return out
        if isinstance(data, list):
            return {"run": _from_results([RunResult.model_validate(r) for r in data])}
        if isinstance(data, dict) and "spec" in data and "requests" in data:
            return {"run": _from_results([RunResult.model_validate(data)])}
    except (ValidationError, KeyError, TypeError, store.BaselineError) as exc:
        raise ValueError(f"{path}: not a pytest-goodput file this version reads ({exc})") from None
    raise ValueError(
        f"{path}: not a pytest-goodput baseline, session JSON (--goodput-json) or run result (run --json)"
    )


def compare_sides(nodeid: str, base: Side, new: Side, tolerance: Optional[float]) -> TestOutcome:
    outcome = TestOutcome(
        nodeid=nodeid, scenario=new.spec.scenario, spec=new.spec.model_dump(mode="json"),
        key_metrics=new.summary, current_env=new.env, baseline_env=base.env or None,
    )
    if base.spec.identity_hash() != new.spec.identity_hash():
        return outcome.model_copy(update={
            "baseline_status": "incomparable",
            "incomparable_reasons": ["the scenario specs differ"],
        })
    comps = compare(base.samples, new.samples, metric_defs(new.spec, tolerance), paired=True)
    return outcome.model_copy(update={"baseline_status": "compared", "comparisons": comps})


def cmd_compare(ns: argparse.Namespace) -> int:
    base, new = load_sides(Path(ns.base)), load_sides(Path(ns.new))
    if set(base) == {"run"} or set(new) == {"run"}:
        if len(base) == 1 and len(new) == 1:  # two single runs: compare them whatever their ids
            base = {next(iter(new)): next(iter(base.values()))}
    outcomes = []
    for nodeid in sorted(new):
        if nodeid in base:
            outcomes.append(compare_sides(nodeid, base[nodeid], new[nodeid], ns.tolerance))
        else:
            outcomes.append(TestOutcome(nodeid=nodeid, scenario=new[nodeid].spec.scenario,
                                        baseline_status="new", key_metrics=new[nodeid].summary))
    if not outcomes:
        raise ValueError(f"{ns.new}: no test results to compare")
    print(render_summary(outcomes))
    if ns.report:
        store.write_atomic(Path(ns.report), render_markdown(outcomes))
    return 1 if any(fails(o, ns.strict) for o in outcomes) else 0
