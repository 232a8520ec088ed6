"""``docs/markers.md``: every goodput marker argument, generated from the schema.

Type, default and meaning come from the pydantic models (``ScenarioSpec``, ``ABOptions``),
the scenarios an argument applies to from ``schema/scenario/applicability.py``: the page cannot say
what the code does not. Regenerate with::

    python -m pytest_goodput.report.markers_doc > docs/markers.md

``tests/test_markers_doc.py`` fails when the committed page differs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pytest_goodput.report.md.mdtable import code_span, escape_cell, table
from pytest_goodput.schema.ab_options import ABOptions
from pytest_goodput.schema.scenario.applicability import RATE_SWEEP, SCENARIOS, applies_to
from pytest_goodput.schema.scenario.arg_errors import PERCENTILE_SLO_FORM, type_words
from pytest_goodput.schema.registry import LATENCIES
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: Sections of the page: (title, the first argument of the section in the spec's field order).
SECTIONS: tuple[tuple[str, str], ...] = (
    ("Scenario and load", "scenario"),
    ("Sweeps and capacity searches", "sweep"),
    ("Requests", "api"),
    ("Reasoning models", "reasoning_effort"),
    ("Workload", "workload"),
    ("Conversations and shared prefixes", "turns"),
    ("ISL/OSL presets and trace replay", "isl_osl"),
    ("Images", "images_per_request"),
    ("SLOs", "slo"),
    ("Gate", "tolerance"),
)
_BOUNDS = (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"))  # pydantic's bound metadata
_HEAD = ["argument", "type", "default", "applies to", "meaning"]

INTRO = """\
# Marker arguments

<!-- Generated from the schema by `python -m pytest_goodput.report.markers_doc > docs/markers.md`;
tests/test_markers_doc.py fails when this file differs. Edit the field descriptions in
pytest_goodput/schema/scenario/spec.py and pytest_goodput/schema/ab_options.py, and the table in
pytest_goodput/schema/scenario/applicability.py. -->

Every keyword `@pytest.mark.goodput(...)` takes. The marker's arguments are checked when the
tests are collected, before anything runs: an unknown name (with the name probably meant), a
value of the wrong kind (a number in quotes, `rate="8"`, included), an unknown `slo=` preset
(with the preset meant), or an argument the test's scenario would ignore is a collection
error naming the test and the argument, and the session stops (exit 2). So is a misspelt
marker (`@pytest.mark.goodputs`), which would otherwise measure nothing. `goodput.run(...)`
and `goodput.measure(...)` take the scenario's keywords as overrides. Scenarios:
[docs/scenarios.md](scenarios.md); metrics: [docs/metrics.md](metrics.md).

*Applies to* lists the scenarios that read the argument; elsewhere the marker refuses it.
`{rate_sweep}` is a sweep with `sweep_over='rate'`, whose points are open-loop runs.
Some arguments depend on others besides (the marker says which): `burstiness` on
`arrival='gamma'`, `think_time_s` on `turns` > 1, `prefix_groups` and `prefix_fraction` on
`prefix_len`, `image_size` on `images_per_request`, the reasoning controls and images on
`api='chat'`, `attainment` on a per-request limit (`ttft_ms`, `ttfo_ms`, `tpot_ms`, `e2e_ms`
or `slo`).
"""


def _type(f: FieldInfo) -> str:
    bounds = [f"{sign} {getattr(m, attr):g}" for m in f.metadata for attr, sign in _BOUNDS
              if isinstance(getattr(m, attr, None), (int, float))]
    words = type_words(f.annotation)
    return words + (", " + ", ".join(bounds) if bounds else "")


def _default(f: FieldInfo) -> str:
    value: Any = f.get_default(call_default_factory=True)
    return code_span(repr(value))


def _applies(name: str) -> str:
    where = applies_to(name)
    if set(SCENARIOS) <= set(where):
        return "all"
    left = [("sweep over concurrency" if s == "sweep" and RATE_SWEEP in where else s)
            for s in SCENARIOS if s not in where]
    return "all but " + ", ".join(left) if len(left) <= 2 else ", ".join(where)


def _row(name: str, f: FieldInfo) -> list[str]:
    return [code_span(name), escape_cell(_type(f)), _default(f), escape_cell(_applies(name)),
            escape_cell(f.description or "")]


def _sections(model: type[BaseModel]) -> list[tuple[str, list[str]]]:
    names = list(model.model_fields)
    starts = {first: title for title, first in SECTIONS}
    missing = [first for first in starts if first not in names]
    if missing:
        raise ValueError(f"sections start at fields that no longer exist: {missing}")
    out: list[tuple[str, list[str]]] = []
    for name in names:
        if name in starts:
            out.append((starts[name], []))
        out[-1][1].append(name)
    return out


def render_markers_doc() -> str:
    """The whole page (Markdown)."""
    spec, ab = ScenarioSpec.model_fields, ABOptions.model_fields
    parts = [INTRO.format(rate_sweep=RATE_SWEEP)]
    for title, names in _sections(ScenarioSpec):
        parts.append(f"## {title}\n\n" + table(_HEAD, [_row(n, spec[n]) for n in names]))
        if title == "SLOs":
            parts.append(
                "Percentile SLOs are keywords of their own: "
                f"{code_span(PERCENTILE_SLO_FORM)} (e.g. `ttft_p99_ms=450`, `tpot_p90_ms=40`), a "
                "positive number of ms, for the metrics "
                + ", ".join(code_span(m) for m in LATENCIES)
                + " at a percentile P in (0, 100); they apply to all scenarios and are collected "
                "into `percentile_slos`. A run meets one when that percentile of its requests, "
                "failed requests counted as over the limit, is within it.")
    parts.append("## A/B mode ([docs/ab.md](ab.md))\n\n"
                 + table(_HEAD, [_row(n, ab[n]) for n in ab]))
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render_markers_doc(), end="")
