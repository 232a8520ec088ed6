"""pytest-goodput: LLM-serving performance as a merge gate.

The public API is the names in ``__all__``; every other module is private by convention
(its import path may change between versions). The names are imported on first use, so
``import pytest_goodput`` (which pytest does for the plugin in every test suite) loads
neither pydantic nor numpy.

A public name must not be the name of a subpackage: importing ``pytest_goodput.<name>``
rebinds ``pytest_goodput.<name>`` to that package, so such a name would change meaning with
import order. Hence ``judge`` is the judging package itself (call
``pytest_goodput.judge.judge(...)``, ``pytest_goodput.judge.fails``), and the runner's
``measure`` function is not exported here: ``pytest_goodput.measure`` is the metrics layer.

``Measurement`` is the deprecated name of ``Session``: the runner returns one session (its
runs are ``Session.results``); the old name warns and will go.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from pytest_goodput._version import __version__

if TYPE_CHECKING:
    from pytest_goodput import judge
    from pytest_goodput.engines.engine import Engine
    from pytest_goodput.load.scenario import run_scenario
    from pytest_goodput.run.runner import run_once
    from pytest_goodput.schema.outcomes.ab import ABResult
    from pytest_goodput.schema.outcomes.ab_summary import ABSummary
    from pytest_goodput.schema.outcomes.frontier import FrontierPoint
    from pytest_goodput.schema.outcomes.outcome import MetricComparison, SLOOutcome, TestOutcome
    from pytest_goodput.schema.runs.results import RequestRecord, RunResult, Samples
    from pytest_goodput.schema.runs.session import Capacity, Session, Sweep
    from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError, build_spec

#: Public name -> the module that defines it (a name equal to the module's last part, as
#: ``judge``, is that module itself).
_EXPORTS: dict[str, str] = {
    "ScenarioSpec": "pytest_goodput.schema.scenario.spec",
    "build_spec": "pytest_goodput.schema.scenario.spec",
    "SpecError": "pytest_goodput.schema.scenario.spec",
    "RunResult": "pytest_goodput.schema.runs.results",
    "RequestRecord": "pytest_goodput.schema.runs.results",
    "Samples": "pytest_goodput.schema.runs.results",
    "TestOutcome": "pytest_goodput.schema.outcomes.outcome",
    "MetricComparison": "pytest_goodput.schema.outcomes.outcome",
    "SLOOutcome": "pytest_goodput.schema.outcomes.outcome",
    "Session": "pytest_goodput.schema.runs.session",
    "Sweep": "pytest_goodput.schema.runs.session",
    "Capacity": "pytest_goodput.schema.runs.session",
    "FrontierPoint": "pytest_goodput.schema.outcomes.frontier",
    "ABResult": "pytest_goodput.schema.outcomes.ab",
    "ABSummary": "pytest_goodput.schema.outcomes.ab_summary",
    "Engine": "pytest_goodput.engines.engine",
    "run_once": "pytest_goodput.run.runner",
    "run_scenario": "pytest_goodput.load.scenario",
    "judge": "pytest_goodput.judge",
}

__all__ = [
    "ABResult",
    "ABSummary",
    "Capacity",
    "Engine",
    "FrontierPoint",
    "MetricComparison",
    "RequestRecord",
    "RunResult",
    "SLOOutcome",
    "Samples",
    "ScenarioSpec",
    "Session",
    "SpecError",
    "Sweep",
    "TestOutcome",
    "__version__",
    "build_spec",
    "judge",
    "run_once",
    "run_scenario",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562), then keep it as a module attribute."""
    if name == "Measurement":  # deprecated: the runner returns a Session
        warnings.warn("pytest_goodput.Measurement is deprecated: the runner returns a Session "
                      "(its runs are Session.results)", DeprecationWarning, stacklevel=2)
        name = "Session"
    try:
        module_name = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if module_name.rpartition(".")[2] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
