"""A baseline's power plan in words: the noise split and what one PR launch can detect.

Printed after a recording (for each baseline written) and by ``python -m pytest_goodput
plan``, which reads baselines only and runs nothing (``docs/statistics.md``, "Power planning").
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from tabulate import tabulate

from pytest_goodput.judge.evidence import from_baseline
from pytest_goodput.judge.judge import metric_defs
from pytest_goodput.judge.noise.power_plan import (MAX_PLAN_SESSIONS, PLAN_LAUNCHES, PlanRow, plan_metric,
                                                   seconds_per_launch)
from pytest_goodput.judge.noise.sittings import Sittings, sitting_count
from pytest_goodput.judge.noise.spread import fmt_on_scale
from pytest_goodput.report.vocabulary import metric_label
from pytest_goodput.schema.runs.baseline import BaselineFile
from pytest_goodput.store import baseline as store


def _sd(row: PlanRow, value: Optional[float]) -> str:
    return "–" if value is None else fmt_on_scale(row.split.scale, value)


def _between(row: PlanRow) -> str:
    """The between-launch SD; without repeats it cannot be told from the within part, and
    the session spread is its upper bound."""
    if row.split.within is None and row.split.session is not None:
        return "≤" + fmt_on_scale(row.split.scale, row.split.session)
    return _sd(row, row.split.between)


def _secs(x: float) -> str:
    return f"{x:,.1f}" if x < 10 else f"{x:,.0f}"


def _launches(row: PlanRow, seconds: float) -> str:
    if row.launches is None:
        return f"none (+{row.limit:.1%} with unlimited launches)"
    if row.launches == 1:
        return "1"
    return f"{row.launches} ({_secs(row.launches * seconds)} s of load)"


def _sessions(row: PlanRow) -> str:
    if row.with_sessions is None:
        return f"none up to {MAX_PLAN_SESSIONS} sessions and {PLAN_LAUNCHES} launches"
    n, k = row.with_sessions
    return f"{n} sessions, {k} launch{'es' if k > 1 else ''}"


#: Said under a plan in which no number of PR launches reaches a tolerance.
NONE_NOTE = ("  none: the baseline's own spread (and a between-sitting prior) stays whatever the PR "
             "does: record more baseline sessions, in separate sittings (other days or machines), "
             "or judge in A/B mode")


def plan_lines(doc: BaselineFile, *, same_sitting: bool = False,
               tolerance: Optional[float] = None) -> list[str]:
    """The plan of one baseline as terminal lines (no lines for a baseline of no session).

    The PR run is planned as CI judges it: outside the baseline's sitting when its sessions
    share one (so the between-sitting prior applies), unless ``same_sitting``.
    """
    if not doc.sessions:
        return []
    ev = from_baseline(doc)
    sessions = ev.history
    count = sitting_count(ev.recorded_at, ev.client_cpus)
    sit = Sittings(count=count, current_new=True) if count is not None and not same_sitting else None
    rows = [r for r in (plan_metric(sessions, d, sittings=sit) for d in metric_defs(ev.spec, tolerance))
            if r is not None]
    if not rows:
        return [f"power plan: {doc.nodeid}: none for a {ev.spec.scenario} test (its frontier points "
                "or capacity are judged by rules of their own: docs/frontiers.md)"]
    seconds = seconds_per_launch(sessions)
    repeats = rows[0].split.repeats
    where = ("a PR run inside the baseline's sitting" if sit is None
             else "a PR run on another day or machine (the baseline's sessions share one sitting: "
                  "the between-sitting prior applies)" if sit.count == 1
             else f"a PR run on another day or machine (the baseline spans {sit.count} sittings)")
    head = (f"power plan: {doc.nodeid}: {len(sessions)} session(s) x {repeats:g} run(s), "
            f"{_secs(seconds)} s of load per launch; planned for {where}")
    table = [[metric_label(r.metric), fmt_on_scale(r.split.scale, r.tolerance),
              _sd(r, r.split.within), _between(r), f"+{r.one_launch:.1%}",
              _launches(r, seconds), _sessions(r)] for r in rows]
    body = tabulate(table, headers=["metric", "tolerance", "within a launch", "between launches",
                                    "one PR launch detects", "PR launches for the tolerance",
                                    "fewest PR launches with more sessions"],
                    tablefmt="simple", disable_numparse=True)
    lines = [head, *("  " + line for line in body.splitlines())]
    return lines + [NONE_NOTE] if any(r.launches is None for r in rows) else lines


def plan_file_lines(path: Path, **kw: object) -> list[str]:
    """:func:`plan_lines` of every baseline in a file or directory (sorted by test)."""
    if path.is_dir():
        found = sorted(store.find_all(path).items())
        if not found:
            raise ValueError(f"{path}: no pytest-goodput baselines in this directory")
        docs = [store.load(p, nodeid) for nodeid, p in found]
    else:
        if not path.exists():
            raise ValueError(f"{path}: no such file")
        docs = [store.load(path)]
    out: list[str] = []
    for doc in docs:
        if doc is not None:
            out += plan_lines(doc, **kw)  # type: ignore[arg-type]
    return out
