"""A test's scenario spec, built once: at collection, from its marker and the session's settings.

The marker's arguments, the command line's knobs where the marker is silent (one precedence,
``Settings.for_test``), the trace file's digest and ``--goodput-scale`` make one
``ScenarioSpec``, checked when the test is collected and stashed on the item; the harness
measures that object. Only ``goodput.run(**overrides)`` / ``goodput.measure(**overrides)``
build another (from the marker's arguments and the overrides), as does a trace file rewritten
between collection and run (its new digest is the spec's identity).
"""

from __future__ import annotations

from typing import Any

from pytest_goodput.load.trace import identified_spec, trace_changed
from pytest_goodput.plugin.settings import Settings
from pytest_goodput.schema.ab_options import ABOptions
from pytest_goodput.schema.precedence import pick
from pytest_goodput.schema.scenario.arg_errors import quoted_numbers
from pytest_goodput.schema.scenario.marker import check_marker
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError

#: The knobs a test's marker sets and the session's settings fill in where it is silent.
SESSION_KNOBS = ("workers", "capture")


def with_settings(args: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """``args`` with the session's knobs where they are silent (marker > command line > ini >
    environment); a Ray address in the session means the Ray backend."""
    args = dict(args)
    for knob in SESSION_KNOBS:
        if (value := settings.for_test(knob, args.get(knob))) is not None:
            args[knob] = value
    if settings.ray is not None:
        args["backend"] = pick(("marker", args.get("backend")), (settings.sources.get("ray", "session"), "ray"))[1]
    return args


def _validated(args: dict[str, Any], where: str) -> ScenarioSpec:
    """The spec of ``args``; a pydantic ``ValidationError`` is left to the marker's check to word."""
    del where  # the marker's check names the test
    return ScenarioSpec.model_validate(args)


def collected_spec(marker_args: dict[str, Any], settings: Settings,
                   where: str) -> tuple[ScenarioSpec, dict[str, Any], ABOptions]:
    """A marked test's spec, its scenario arguments and its A/B options, or :class:`SpecError`
    naming the test and each bad argument (a bad or missing trace file included)."""
    spec, args, options = check_marker(
        marker_args, where, lambda a: identified_spec(with_settings(a, settings), where, _validated))
    return spec.scaled(settings.scale), args, options


def spec_with_overrides(args: dict[str, Any], overrides: dict[str, Any], settings: Settings,
                        where: str) -> ScenarioSpec:
    """The spec of a test's marker arguments with a run's keyword ``overrides`` (or of a test
    with no marker)."""
    if quoted := quoted_numbers(overrides, ScenarioSpec):  # as the marker's are refused
        raise SpecError("\n".join([f"{where}: invalid goodput arguments: " + ", ".join(name for name, _ in quoted),
                                   *(f"  {why}" for _, why in quoted)]))
    return identified_spec(with_settings({**args, **overrides}, settings), where).scaled(settings.scale)


def current(spec: ScenarioSpec, args: dict[str, Any], settings: Settings, where: str) -> ScenarioSpec:
    """The collected ``spec`` to measure now: itself, or built again when its trace file was
    rewritten since collection and the marker does not pin its digest (a pinned digest is
    then refused by the load, naming both)."""
    if "trace_sha256" in args or not trace_changed(spec):
        return spec
    return spec_with_overrides(args, {}, settings, where)


__all__ = ["collected_spec", "current", "spec_with_overrides", "with_settings"]
