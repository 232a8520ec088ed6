"""The ``goodput`` marker's arguments, checked at collection (pure).

A marker carries the scenario's arguments (``ScenarioSpec``), A/B mode's (``ABOptions``) and
percentile SLO keywords. Checked here, before anything runs: unknown names (with the name
meant), values of the wrong kind (in words), and arguments the scenario would ignore
(``schema/scenario/applicability.py``). Every problem of a marker is reported at once, each line
quoting the argument as written.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import ValidationError

from pytest_goodput.schema.ab_options import AB_KEYS, ABOptions, split_ab_args
from pytest_goodput.schema.scenario.applicability import not_applicable
from pytest_goodput.schema.scenario.arg_errors import explain, quoted_numbers
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError


def marker_arguments() -> list[str]:
    """Every keyword the marker accepts by name (percentile SLOs are a pattern besides)."""
    return sorted({*ScenarioSpec.model_fields, *AB_KEYS})


def check_marker(args: dict[str, Any], where: str,
                 build: Callable[[dict[str, Any]], ScenarioSpec] = ScenarioSpec.model_validate,
                 ) -> tuple[ScenarioSpec, dict[str, Any], ABOptions]:
    """The spec a marker's arguments make (``build``: validated, with what the caller adds), its
    scenario arguments and its A/B options; or :class:`SpecError` naming the test (``where``)
    and each bad argument. The spec is built here once, not checked and built again."""
    spec_args, options = split_ab_args(args, where)
    problems = [*not_applicable(args), *quoted_numbers(spec_args, ScenarioSpec)]
    try:
        spec = build(spec_args)
    except ValidationError as err:
        # With arguments refused, rules across arguments are left out: they may say again what
        # the refusal says, and are checked once the marker names only what applies.
        text = explain(err, where, ScenarioSpec, spec_args, marker_arguments(), fields_only=bool(problems))
        if not problems:
            raise SpecError(text) from None
        more = text.splitlines()[1:]
        named = [e["loc"][0] for e in err.errors() if e["loc"] and isinstance(e["loc"][0], str)]
    except SpecError:  # what the arguments name is unusable (a trace file): after their own problems
        if not problems:
            raise
        more, named = [], []
    else:
        more, named = [], []
    if problems:
        names = list(dict.fromkeys([*(name for name, _ in problems), *named]))
        raise SpecError("\n".join([f"{where}: invalid goodput arguments: {', '.join(names)}",
                                   *(f"  {why}" for _, why in problems), *more]))
    return spec, spec_args, options
