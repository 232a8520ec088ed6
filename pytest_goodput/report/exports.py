"""``--goodput-export FORMAT=PATH``: a session's or a command's results written for other tools.

The formats are pure writers (``interop/writers``); this writes their documents, each all or
nothing and redacted (``store.files.write_atomic``), and returns the paths written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence

from pytest_goodput.interop.writers import ExportedTest, ExportError, export, parse_targets
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
