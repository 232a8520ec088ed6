"""The output guard: did the engine still generate what it generated at the baseline? (pure)

A kernel or quantisation change that speeds decoding by producing other tokens reads
*improved* on every speed metric; the guard pairs the speed verdicts with an output check
(``docs/metrics.md``, "Output agreement"; ``docs/decisions.md``, "Output guard"). With
deterministic sampling each run keeps its outputs' fingerprints by prompt
(``measure/outputs/agreement.py``). Engines are not batch-invariant: greedy outputs of one
prompt can differ between runs of the same engine as batches form differently, so the
threshold is measured, not 100 %:

* per prompt ``j``, the baseline's own agreement ``b_j`` is the share of pairs of its runs
  (repeats and sessions) whose outputs match on it, and the current agreement ``c_j`` the
  share of (current run, baseline run) pairs that match;
* over the ``K`` prompts both sides compared, ``a_b`` and ``a_c`` are the means of ``b_j``
  and ``c_j`` and the change ``a_c − a_b`` the mean of ``d_j = c_j − b_j``, paired by
  prompt: a prompt the engine always answers the same way adds no noise, a batch-variant
  one adds its own; the interval is Student's over the ``d_j`` (``K − 1`` degrees of
  freedom), and the one verdict rule (``verdicts.decide``) judges it against an absolute
  tolerance (two points by default, ``schema/registry.py``).

One baseline run has no pair: its own agreement is unmeasured, and the verdict is
*underpowered* (the agreement is still reported) rather than a guess of 100 % that a
non-batch-invariant engine would fail.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Mapping, Optional, Sequence

from pytest_goodput.judge.scalar.verdicts import decide
from pytest_goodput.measure.outputs.agreement import PREFIX_CHARS, agreed_prefix, agreement
from pytest_goodput.schema.outcomes.comparison import MetricComparison
from pytest_goodput.schema.registry import OUTPUT_AGREEMENT
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.student import t_ppf

Prints = Mapping[int, str]
#: Scenarios whose runs are judged one by one (a sweep's points and a capacity search's probes
#: are judged on their shapes).
GUARDED_SCENARIOS = ("offline", "server", "interactive", "concurrency", "trace")


#: How the note that random sampling turned the guard off begins (reports pick it out).
GUARD_OFF_NOTE = "output guard off"


def off_note(spec: ScenarioSpec) -> Optional[str]:
    """What the report says when random sampling turned the guard off (None: nothing to say)."""
    if spec.guards_outputs or spec.output_guard is False or spec.temperature is None:
        return None
    return f"{GUARD_OFF_NOTE}: sampling not deterministic (temperature={spec.temperature:g}; 0 turns it on)"


def _prints(runs: Sequence[Samples]) -> list[Prints]:
    return [r.output_prints for r in runs if r.output_prints is not None]


def pooled(pairs: Sequence[tuple[Prints, Prints]]) -> tuple[int, int]:
    """(matching outputs, outputs compared) over ``pairs`` of runs."""
    counts = [agreement(a, b) for a, b in pairs]
    return sum(m for m, _ in counts), sum(n for _, n in counts)


def by_prompt(pairs: Sequence[tuple[Prints, Prints]]) -> dict[int, float]:
    """Per prompt, the share of ``pairs`` of runs whose outputs match on it (pairs that
    completed it)."""
    matched: dict[int, int] = {}
    compared: dict[int, int] = {}
    for a, b in pairs:
        for k in a.keys() & b.keys():
            matched[k] = matched.get(k, 0) + (a[k] == b[k])
            compared[k] = compared.get(k, 0) + 1
    return {k: matched[k] / n for k, n in compared.items()}


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
    m_c, n_c = pooled(against)
    if n_c == 0:
        return result("inconclusive", note="no prompt completed in both the current runs and the baseline")
    a_c = m_c / n_c
    differ, early = _early(against)
    diverged = (f"; of the {differ} differing outputs, {early} agree in their first "
                f"{PREFIX_CHARS[0]} characters" if differ else "")
    pairs = list(combinations(base, 2))
    if not pairs:
        return result("underpowered", current=a_c,
                      note=f"{m_c}/{n_c} outputs match the baseline's; 1 baseline run: its own agreement "
                      f"is unmeasured (record repeats= or more sessions){diverged}")
    own, now = by_prompt(pairs), by_prompt(against)
    shared = sorted(own.keys() & now.keys())
    if len(shared) < 2:
        return result("underpowered", current=a_c, note=f"{len(shared)} prompt compared on both sides")
    d = [now[k] - own[k] for k in shared]
    a_b, a_c = sum(own[k] for k in shared) / len(shared), sum(now[k] for k in shared) / len(shared)
    change = a_c - a_b
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    half = t_ppf(0.5 + confidence / 2.0, len(d) - 1) * sd / math.sqrt(len(d))
    interval = (change - half, change + half)
    verdict = decide("higher", change, interval, tolerance, "zero")
    m_b, n_b = pooled(pairs)
    note = (f"{a_c:.1%} of outputs match the baseline's ({m_c}/{n_c}); the baseline agrees with "
            f"itself on {a_b:.1%} ({m_b}/{n_b}); {len(shared)} prompts{diverged}")
    return result(verdict, baseline=a_b, current=a_c, change=change, interval=interval,
                  method=f"paired by prompt (Student, {len(shared)} prompts)", note=note)


__all__ = ["GUARDED_SCENARIOS", "GUARD_OFF_NOTE", "by_prompt", "off_note", "output_comparison", "pooled"]
