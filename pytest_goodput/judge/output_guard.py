"""The output guard: did the engine still generate what it generated at the baseline? (pure)

A kernel or quantisation change that speeds decoding by producing other tokens reads
*improved* on every speed metric; the guard pairs the speed verdicts with an output check
(``docs/metrics.md``, "Output agreement"; ``docs/decisions.md``, "Output guard"). With
deterministic sampling each run keeps its outputs' fingerprints by prompt
(``measure/outputs/fingerprint.py``). Engines are not batch-invariant: greedy outputs of one
prompt can differ between runs of the same engine as batches form differently, so the
threshold is measured, not 100 %:

* the baseline's own agreement ``a_b`` is the share of matching prompts over every pair of
  its runs (repeats and sessions), pooled;
* the current agreement ``a_c`` is the share over every pair of a current run with a
  baseline run;
* each is read as a proportion over the ``K`` prompts compared (pairs reuse the same prompts,
  so the pairs do not add evidence beyond them), and ``a_c − a_b`` gets Newcombe's hybrid
  score interval; the one verdict rule (``verdicts.decide``) judges it against an absolute
  tolerance (two points by default, ``schema/registry.py``).

One baseline run has no pair: its own agreement is unmeasured, and the verdict is
*underpowered* (the agreement is still reported) rather than a guess of 100 % that a
non-batch-invariant engine would fail.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, Optional, Sequence

from pytest_goodput.judge.scalar.verdicts import decide
from pytest_goodput.measure.outputs.fingerprint import PREFIX_CHARS, agreed_prefix, agreement
from pytest_goodput.schema.outcomes.comparison import MetricComparison
from pytest_goodput.schema.registry import OUTPUT_AGREEMENT
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.binomial import newcombe_interval

Prints = Mapping[int, str]
#: Scenarios whose runs are judged one by one (a sweep's points and a capacity search's probes
#: are judged on their shapes).
GUARDED_SCENARIOS = ("offline", "server", "interactive", "concurrency", "trace")


def off_note(spec: ScenarioSpec) -> Optional[str]:
    """What the report says when random sampling turned the guard off (None: nothing to say)."""
    if spec.guards_outputs or spec.output_guard is False or spec.temperature is None:
        return None
    return f"output guard off: sampling not deterministic (temperature={spec.temperature:g}; 0 turns it on)"


def _prints(runs: Sequence[Samples]) -> list[Prints]:
    return [r.output_prints for r in runs if r.output_prints is not None]


def pooled(pairs: Sequence[tuple[Prints, Prints]]) -> tuple[int, int, int]:
    """(matching prompts, prompts compared, distinct prompts) over ``pairs`` of runs."""
    matched = compared = 0
    keys: set[int] = set()
    for a, b in pairs:
        m, n = agreement(a, b)
        matched, compared = matched + m, compared + n
        keys |= a.keys() & b.keys()
    return matched, compared, len(keys)


def _early(pairs: Sequence[tuple[Prints, Prints]]) -> tuple[int, int]:
    """(differing outputs, of which the first PREFIX_CHARS[0] characters agree) over ``pairs``."""
    differ = early = 0
    for a, b in pairs:
        for k in a.keys() & b.keys():
            if a[k] != b[k]:
                differ += 1
                early += agreed_prefix(a[k], b[k]) >= 1
    return differ, early


def output_comparison(spec: ScenarioSpec, baseline: Sequence[Sequence[Samples]], current: Sequence[Samples],
                      *, tolerance: float, confidence: float) -> Optional[MetricComparison]:
    """The output agreement of ``current`` runs against the ``baseline`` sessions' runs; None
    when the guard is off or the current runs kept no fingerprints."""
    if not spec.guards_outputs or spec.scenario not in GUARDED_SCENARIOS:
        return None
    cur = _prints(current)
    if not cur:
        return None
    base = _prints([run for session in baseline for run in session])

    def result(verdict: str, **fields: object) -> MetricComparison:
        return MetricComparison(metric=OUTPUT_AGREEMENT, direction="higher", tolerance=tolerance,
                                verdict=verdict, scale="absolute", **fields)  # type: ignore[arg-type]

    if not base:
        return result("new", note="the baseline kept no output fingerprints (recorded with the guard "
                      "off or before it existed): re-record it to guard the outputs")
    against = [(c, b) for c in cur for b in base]
    m_c, n_c, k_c = pooled(against)
    if n_c == 0:
        return result("inconclusive", note="no prompt completed in both the current runs and the baseline")
    a_c = m_c / n_c
    differ, early = _early(against)
    diverged = (f"; of the {differ} differing outputs, {early} agree in their first "
                f"{PREFIX_CHARS[0]} characters" if differ else "")
    m_b, n_b, k_b = pooled(list(combinations(base, 2)))
    if n_b == 0:
        return result("underpowered", current=a_c,
                      note=f"{m_c}/{n_c} outputs match the baseline's; 1 baseline run: its own agreement "
                      f"is unmeasured (record repeats= or more sessions){diverged}")
    a_b = m_b / n_b
    change = a_c - a_b
    interval = newcombe_interval(a_c * k_c, k_c, a_b * k_b, k_b, confidence)
    verdict = decide("higher", change, interval, tolerance, "zero")
    note = (f"{a_c:.1%} of outputs match the baseline's ({m_c}/{n_c} over {k_c} prompts); the baseline "
            f"agrees with itself on {a_b:.1%} ({m_b}/{n_b} over {k_b} prompts){diverged}")
    return result(verdict, baseline=a_b, current=a_c, change=change, interval=interval,
                  method=f"Newcombe over {min(k_c, k_b)} prompts", note=note)


__all__ = ["GUARDED_SCENARIOS", "off_note", "output_comparison", "pooled"]
