"""Workload sameness: did baseline and current run the same workload? (pure)

Two checks (``docs/metrics.md``, "Workload sameness"):

* **prompts** — every run's fingerprint of the prompts it sent (``load/prompt_set.py``)
  must equal the baseline's. Different prompts are a different workload: the comparison is
  ``incomparable``, as for a changed spec.
* **output lengths** — mean reasoning tokens and mean answer tokens per completed request,
  pooled over every baseline session and over the current runs. A change of more than
  :data:`LENGTH_CHANGE` that Welch's t-test finds significant is a *workload change*: a
  model that thinks 30 % longer, or an engine that stops answers early, changes latency and
  throughput without any change in speed. It is named next to the verdicts (which still
  judge the metrics as measured) and fails the test in strict mode.
"""

from __future__ import annotations

from typing import Optional, Sequence

from pytest_goodput.judge.values import Sessions, as_sessions
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.outcomes.workload_check import LengthChange, LengthColumn, WorkloadCheck
from pytest_goodput.stats.student import welch_different

#: Mean tokens per request changing by more than this (relative) can be a workload change.
LENGTH_CHANGE = 0.10
#: Confidence of the two-sample test a length change must also pass.
LENGTH_CONFIDENCE = 0.99
TAIL = "a workload change, not a performance change"


def _column(runs: Sequence[Samples], column: LengthColumn, split: bool) -> Optional[list[float]]:
    """Per completed request: reasoning tokens, or answer tokens (output - reasoning). Without
    the ``split`` (a side recorded before the reasoning column was kept) no reasoning column,
    and the whole output stands for the answer on both sides."""
    if column == "reasoning_tokens" and not split:
        return None
    out: list[float] = []
    for s in runs:
        reasoning = s.reasoning_tokens if split and s.reasoning_tokens is not None else [0] * len(s.ok)
        for ok, n, r in zip(s.ok, s.output_tokens, reasoning):
            if ok:
                out.append(float(r if column == "reasoning_tokens" else n - r))
    return out


def _tokens(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _name(c: LengthChange, reasoned: bool) -> str:
    if c.column == "reasoning_tokens":
        label = "reasoning tokens per request"
        if c.baseline == 0:
            what = "the model reasons now and did not in the baseline"
        elif c.current == 0:
            what = "the model no longer reasons"
        else:
            assert c.change is not None
            what = f"the model thinks {abs(c.change) * 100:.0f} % {'longer' if c.change > 0 else 'shorter'}"
    else:
        noun = "answers" if reasoned else "outputs"
        label = f"{'answer' if reasoned else 'output'} tokens per request"
        if c.change is None:
            what = f"{noun} are no longer empty"
        else:
            what = f"{noun} are {abs(c.change) * 100:.0f} % {'longer' if c.change > 0 else 'shorter'}"
    return f"{what} ({label} {_tokens(c.baseline)} → {_tokens(c.current)}): {TAIL}"


def length_change(column: LengthColumn, base: list[float], cur: list[float],
                  threshold: float = LENGTH_CHANGE) -> Optional[LengthChange]:
    """Baseline vs current mean of one column; None when a side has no completed request."""
    if not base or not cur:
        return None
    b, c = sum(base) / len(base), sum(cur) / len(cur)
    change = c / b - 1.0 if b else None
    significant = welch_different(base, cur, LENGTH_CONFIDENCE)
    big = (c != b) if change is None else abs(round(change, 12)) > threshold  # 110/100-1 > 0.1
    return LengthChange(column=column, baseline=b, current=c, change=change,
                        significant=significant, changed=big and significant)


def _prompts(baseline: list[Samples], current: Sequence[Samples]) -> tuple[str, Optional[str]]:
    """("same" | "differ" | "unrecorded" | "unchecked", the reason when they differ)."""
    sets = [s.prompt_set for s in (*baseline, *current)]
    if any(p is None for p in sets):
        return "unrecorded", None
    first = [p for p in sets if p is not None]
    if len({p.requests for p in first}) > 1:
        return "unchecked", None
    digests = {p.sha256 for p in first}
    if len(digests) == 1:
        return "same", None
    b = sorted({p.sha256 for p in first[:len(baseline)]})
    c = sorted({p.sha256 for p in first[len(baseline):]})
    return "differ", (f"the prompts differ from the baseline's (prompt fingerprint {', '.join(b)} → "
                      f"{', '.join(c)} over the first {first[0].requests} requests): a different "
                      "workload, not a performance change")


def check_workload(baseline: Sessions | Sequence[Samples], current: Sequence[Samples],
                   threshold: float = LENGTH_CHANGE) -> tuple[WorkloadCheck, Optional[str]]:
    """The sameness check, and the reason the comparison is incomparable (prompts differ) or None."""
    base = [r for s in as_sessions(baseline) for r in s]
    prompts, reason = _prompts(base, current)
    lengths: list[LengthChange] = []
    reasoned = False
    split = all(s.reasoning_tokens is not None for s in (*base, *current))
    for column in ("reasoning_tokens", "answer_tokens"):
        b, c = _column(base, column, split), _column(current, column, split)
        if b is None or c is None:
            continue
        found = length_change(column, b, c, threshold)
        if found is None:
            continue
        if column == "reasoning_tokens":
            reasoned = found.baseline > 0 or found.current > 0
            if not reasoned:
                continue
        lengths.append(found)
    changes = [_name(c, reasoned) for c in lengths if c.changed]
    return WorkloadCheck(prompts=prompts, lengths=lengths, changes=changes), reason


__all__ = ["LENGTH_CHANGE", "check_workload", "length_change"]
