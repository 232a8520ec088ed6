"""A client self-check that always passes, for tests whose subject is not the client's validity.

On a busy shared machine a real run can be invalid (the client, not the engine, set the pace)
whatever the product does; a test of placement, of a trace's shape or of a gate's wiring
should then decide one outcome, not accept "passed or invalid" nor retry until valid. The
self-check still runs and its reasons are kept as notes; only its verdict is forced valid.

Every integration test has it (tests/conftest.py), in its own process and, through
``tests/selfcheck_site/sitecustomize.py``, in the Python processes it starts. Tests whose
subject is validity are marked ``real_selfcheck`` and use the real check.

``install(monkeypatch)`` in this process (pytester's in-process sessions included);
``cli(*args)`` is ``python -m pytest_goodput *args`` with the same check.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

#: The verdicts, by module: the run's own, and its loop lag judged again against the latencies.
VERDICTS = {"pytest_goodput.load.selfcheck.health": ("judge", "judge_workers"),
            "pytest_goodput.measure.metrics": ("judge_loop_lag",)}

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
        if health.valid:
            return health
        kept = [f"{FORCED}{r}" for r in health.reasons]
        forced.extend(health.reasons)
        return health.model_copy(update={"valid": True, "reasons": [], "notes": [*health.notes, *kept]})
    judged_valid.forced_valid = True  # type: ignore[attr-defined]
    return judged_valid


def cli(*args: str) -> list[str]:
    """The command line of ``python -m pytest_goodput *args`` with a passing self-check."""
    return [sys.executable, "-c", CLI, *args]


def patch(module: ModuleType, monkeypatch: Any = None) -> None:
    """Force ``module``'s self-check verdicts valid (until ``monkeypatch`` undoes it)."""
    for name in VERDICTS[module.__name__]:
        fake = passing(getattr(module, name))
        if monkeypatch is None:
            setattr(module, name, fake)
        else:
            monkeypatch.setattr(module, name, fake)


def install(monkeypatch: Any = None) -> None:
    """Force this process's self-check verdicts valid (until ``monkeypatch`` undoes it)."""
    import importlib
    for name in VERDICTS:
        patch(importlib.import_module(name), monkeypatch)
