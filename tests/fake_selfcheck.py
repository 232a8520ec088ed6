"""A client self-check whose last word is valid, for tests whose subject is not the client's validity.

On a busy shared machine a real run can be invalid (the client, not the engine, set the pace)
whatever the product does; a test of placement, of a trace's shape or of a gate's wiring
should then decide one outcome, not accept "passed or invalid" nor retry until valid. The
self-check still runs and its reasons are kept as notes; only its verdict is forced valid,
and only where the product would not measure again: a try of the product's one re-measure
rule (``run/remeasure.until_valid``) other than its last keeps its real verdict, so a passing
stall is re-measured by the product, as it is for users, instead of entering the figures a
test decides on. ``install(retry=False)`` (tests marked ``forced_selfcheck``: planted stalls whose
measurements are counted, an engine that changes during the test) forces every verdict.

Every integration test has it (tests/conftest.py), in its own process and, through
``tests/selfcheck_site/sitecustomize.py``, in the Python processes it starts. Tests whose
subject is validity are marked ``real_selfcheck`` and use the real check.

``install(monkeypatch)`` in this process (pytester's in-process sessions included);
``cli(*args)`` is ``python -m pytest_goodput *args`` with the same check.
"""

from __future__ import annotations

import sys
import functools
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

#: The verdicts, by module: the run's own, and its loop lag judged again against the latencies.
VERDICTS = {"pytest_goodput.load.selfcheck.health": ("judge", "judge_workers"),
            "pytest_goodput.measure.metrics": ("judge_loop_lag",)}
#: The product's one re-measure rule, whose tries before the last keep the real verdict.
RETRY = "pytest_goodput.run.remeasure"

#: Whether the verdict judged now is real: a try the product would measure again.
_real = [False]

#: The note a forced verdict leaves, before the reason the real check gave.
FORCED = "self-check forced valid by the test: "

#: Verdicts forced valid in this process (reported after the project's test sessions).
forced: list[str] = []

CLI = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
       "import fake_selfcheck; fake_selfcheck.install(); "
       "from pytest_goodput.cli import main; sys.exit(main(sys.argv[1:]))")


def passing(judge: Callable[..., Any]) -> Callable[..., Any]:
    """``judge`` with an invalid verdict turned valid, its reasons kept as notes."""
    if getattr(judge, "forced_valid", False):
        return judge

    def judged_valid(*args: Any, **kwargs: Any) -> Any:
        health = judge(*args, **kwargs)
        if health.valid or _real[0]:
            return health
        kept = [f"{FORCED}{r}" for r in health.reasons]
        forced.extend(health.reasons)
        return health.model_copy(update={"valid": True, "reasons": [], "notes": [*health.notes, *kept]})
    judged_valid.forced_valid = True  # type: ignore[attr-defined]
    return judged_valid


def first_tries_real(until_valid: Callable[..., Any]) -> Callable[..., Any]:
    """``until_valid`` whose tries before the last are judged by the real self-check."""
    if getattr(until_valid, "first_tries_real", False):
        return until_valid
    default = inspect.signature(until_valid).parameters["tries"].default

    @functools.wraps(until_valid)
    def retried(measure: Callable[[], Any], reasons: Callable[[Any], list[str]],
                again: Callable[[list[str]], None], tries: int = default) -> Any:
        done = [0]

        def measured() -> Any:
            done[0] += 1
            before, _real[0] = _real[0], done[0] < tries
            try:
                return measure()
            finally:
                _real[0] = before
        return until_valid(measured, reasons, again, tries)
    retried.first_tries_real = True  # type: ignore[attr-defined]
    return retried


def cli(*args: str) -> list[str]:
    """The command line of ``python -m pytest_goodput *args`` with a passing self-check."""
    return [sys.executable, "-c", CLI, *args]


def _set(module: ModuleType, name: str, value: Any, monkeypatch: Any) -> None:
    if monkeypatch is None:
        setattr(module, name, value)
    else:
        monkeypatch.setattr(module, name, value)


def patch(module: ModuleType, monkeypatch: Any = None) -> None:
    """Force ``module``'s self-check verdicts valid, or let the re-measure rule's first tries
    keep theirs (until ``monkeypatch`` undoes it)."""
    if module.__name__ == RETRY:
        _set(module, "until_valid", first_tries_real(module.until_valid), monkeypatch)
        return
    for name in VERDICTS[module.__name__]:
        _set(module, name, passing(getattr(module, name)), monkeypatch)


def install(monkeypatch: Any = None, retry: bool = True) -> None:
    """Force this process's self-check verdicts valid (until ``monkeypatch`` undoes it);
    ``retry``: except on the re-measure rule's tries before its last, in every module that
    imported the rule."""
    import importlib
    for name in VERDICTS:
        patch(importlib.import_module(name), monkeypatch)
    if not retry:
        return
    rule = importlib.import_module(RETRY)
    original, wrapped = rule.until_valid, first_tries_real(rule.until_valid)
    for name, module in list(sys.modules.items()):
        if name.startswith("pytest_goodput.") and getattr(module, "until_valid", None) is original:
            _set(module, "until_valid", wrapped, monkeypatch)
