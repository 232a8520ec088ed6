"""Read what the product wrote back as evidence for the judge: baselines, session JSON, run results.

A path may be a baseline file, a directory of baselines, a ``--goodput-json`` session file
or a ``run --json`` result; tests are keyed by node id (a bare run result is called ``run``).
Anything else is a :class:`ValueError` naming the file and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_goodput.judge.evidence import from_baseline, from_results
from pytest_goodput.schema.runs.baseline import BASELINE_KIND
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Sweep
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.store import baseline as store


def _from_session_test(test: dict[str, Any]) -> tuple[str, Side] | None:
    outcome = TestOutcome.model_validate(test["outcome"])
    runs = [RunResult.model_validate(r) for r in test.get("runs", [])]
    if not runs:
        return None
    ev = from_results(runs, Fingerprint.from_flat(outcome.current_env) if outcome.current_env else None)
    if outcome.spec:  # the test's own spec (a sweep's runs carry their point's spec)
        ev.spec = ScenarioSpec.model_validate(outcome.spec)
        ev.spec_hash = ev.spec.identity_hash()
    session = ev.sessions[-1]
    update: dict[str, Any] = {"summary": dict(outcome.key_metrics)}
    if outcome.frontier is not None:
        fr = outcome.frontier
        update["sweep"] = Sweep(points=fr.points if "points" in fr.model_fields_set else None,
                                frontier=fr.current, saturation=fr.saturation)
    if outcome.capacity is not None and outcome.capacity.current is not None:
        update["capacity"] = outcome.capacity.current
    ev.sessions[-1] = session.model_copy(update=update)
    return outcome.nodeid, ev


def load_evidence(path: Path) -> dict[str, Side]:
    """Every test in ``path``, by node id."""
    if path.is_dir():
        out: dict[str, Side] = {}
        for nodeid, p in store.find_all(path).items():
            out.update({nodeid: e for e in load_evidence(p).values()})
        if not out:
            raise ValueError(f"{path}: no pytest-goodput baselines in this directory")
        return out
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}), not a pytest-goodput file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    try:
        if isinstance(data, dict) and data.get("kind") == BASELINE_KIND:
            doc = store.load(path)
            assert doc is not None
            return {doc.nodeid: from_baseline(doc)}
        if isinstance(data, dict) and "tests" in data:
            pairs = [_from_session_test(t) for t in data["tests"]]
            return dict(p for p in pairs if p is not None)
        if isinstance(data, list):
            return {"run": from_results([RunResult.model_validate(r) for r in data])}
        if isinstance(data, dict) and "spec" in data and "requests" in data:
            return {"run": from_results([RunResult.model_validate(data)])}
    except (ValidationError, KeyError, TypeError, IndexError, store.BaselineError) as exc:
        raise ValueError(f"{path}: not a pytest-goodput file this version reads ({exc})") from None
    raise ValueError(
        f"{path}: not a pytest-goodput baseline, session JSON (--goodput-json) or run result (run --json)"
    )
