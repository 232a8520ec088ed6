"""What the product writes for other tools: ``--goodput-export FORMAT=PATH`` files and the JSON
Schemas of its own result contracts (``docs/schema``).

The formats are pure writers (``interop/writers``); this writes their documents, each all or
nothing and redacted (``store.files.write_atomic``), and returns the paths written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional, Sequence

from pytest_goodput.interop.writers import ExportedTest, ExportError, export, parse_targets
from pytest_goodput.schema.outcomes.ab import ABResult
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.store.files import WriteError, write_atomic


def session_tests(outcomes: Sequence[TestOutcome], measurements: Mapping[str, Session]) -> list[ExportedTest]:
    """Every judged test with the runs behind its outcome and the environment it ran in."""
    return [ExportedTest(o.nodeid, tuple(measurements[o.nodeid].results), o, dict(o.current_env))
            for o in outcomes if o.nodeid in measurements]


def run_tests(runs: Sequence[RunResult], env: Mapping[str, str]) -> list[ExportedTest]:
    """``run``'s runs as one test, ``run`` (the name ``compare`` gives a bare run result)."""
    return [ExportedTest("run", tuple(runs), None, {k: v for k, v in env.items() if v})]


def write_exports(values: Optional[Sequence[str]], tests: list[ExportedTest],
                  flag: str = "--goodput-export") -> list[Path]:
    """Write every ``FORMAT=PATH`` export of ``tests``; the paths written, in order.

    An export that cannot be written (an unwritable path, results its format cannot hold)
    leaves the others written and raises :class:`WriteError` naming it, after them.
    """
    written: list[Path] = []
    failed: Optional[WriteError] = None
    for target in parse_targets(list(values or []), flag):
        try:
            files = export(target, tests)
            for path, text in files:
                write_atomic(Path(path), text)
                written.append(Path(path))
        except ExportError as exc:
            failed = failed or WriteError(Path(target.path), f"{target.format}: {exc}")
        except WriteError as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    return written


def export_schemas(directory: str | Path) -> list[Path]:
    """Write the JSON Schemas of the results, outcome and A/B contracts, for tools that consume them."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in (("run_result", RunResult), ("test_outcome", TestOutcome), ("ab_result", ABResult)):
        path = out / f"{name}.schema.json"
        schema = model.model_json_schema()
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written
