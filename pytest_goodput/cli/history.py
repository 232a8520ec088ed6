"""``python -m pytest_goodput history DIR``: change points, drift and creep across main.

Reads the history files ``--goodput-update-baseline`` appends (``docs/history.md``) and
prints, per test and gated metric, the series' change points (commit, before → after,
change, p-value), the drift since a reference run, and the creep gate's reading of the
newest run. The plugin's ``--goodput-history-gate`` reads the same files through
:func:`pytest_goodput.run.history.apply_history_gate`, so the command and the gate cannot disagree.
Exit status: 0 fine, 1 a metric's newest run continues a creep, 2 usage or bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from pytest_goodput.judge.changepoints import (
    DEFAULT_WINDOW,
    END_RUNS,
    ChangePointsUnavailable,
    Series,
    ChangepointSettings,
    creep,
    detect,
    drift,
    relative,
    worse_by,
)
from pytest_goodput.report.vocabulary import fmt_change, fmt_value, metric_info, metric_label
from pytest_goodput.schema.runs.history import HistoryEntry
from pytest_goodput.schema.registry import lookup_info, metric
from pytest_goodput.report.plot import PlotUnavailable
from pytest_goodput.report.trend_plot import plot_trend, trend_file_name
from pytest_goodput.run.history import newest_identity, series_of
from pytest_goodput.store import history as store

EXIT_OK, EXIT_CREPT, EXIT_USAGE = 0, 1, 2
#: ``--since`` values of all digits shorter than this are a run count, longer ones a commit.
_COMMIT_MIN = 7


def add_history_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("history", help="change points, drift and creep in the main branch's history; "
                       "exit 1 when the newest run continues a creep")
    p.add_argument("dir", help="history directory (default location: .goodput/history) or one .jsonl file")
    p.add_argument("--since", help="reference run of the drift: a commit (prefix of 7+ characters) "
                   "or N (N runs before the newest); default: the series' first run")
    p.add_argument("--metric", action="append", help="metric path to analyse (repeatable; "
                   "default: the metrics each test gates on)")
    p.add_argument("--test", help="only tests whose node id contains this text")
    p.add_argument("--max-pvalue", type=float, default=ChangepointSettings.max_pvalue,
                   help="significance level a change point must reach (default 0.001)")
    p.add_argument("--min-magnitude", type=float, default=ChangepointSettings.min_magnitude,
                   help="smallest relative change reported as a change point (default 0.01)")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                   help=f"main-branch runs the creep check looks back over (default {DEFAULT_WINDOW})")
    p.add_argument("--tolerance", type=float, help="creep tolerance for every metric "
                   "(default: each metric's tolerance as its test resolved it)")
    p.add_argument("--plot", metavar="DIR", help="also draw each analysed metric's series with its "
                   "change points to DIR/<test>__<metric>.svg (pytest-goodput[plot])")


def _reference(series: Series, since: Optional[str]) -> tuple[Optional[int], str]:
    """Index into ``series`` of the drift's reference run, and a note when there is none."""
    if since is None:
        return 0, ""
    if since.isdigit() and len(since) < _COMMIT_MIN:
        n = int(since)
        if n >= len(series.values):
            return None, f"the series has {len(series.values)} runs, fewer than {n} + 1"
        return len(series.values) - 1 - n, ""
    for i, lab in enumerate(series.labels):
        if lab.startswith(since[:12]):
            return i, ""
    return None, f"commit {since} is not in this series"


def _analyse(entries: list[HistoryEntry], path: str, ns: argparse.Namespace,
             settings: ChangepointSettings) -> tuple[list[str], bool, bool]:
    """Lines for one metric, whether the newest run crept, whether ``--since`` was found."""
    s = series_of(entries, path)
    info = metric(path)
    unit = metric_info(path)[1]
    tol = ns.tolerance if ns.tolerance is not None else entries[-1].tolerances.get(path, info.tolerance)
    head = f"  {metric_label(path)} — {info.direction} is better, tolerance {tol * 100:g}%"
    if s is None:
        return [head, "    no values recorded"], False, ns.since is None
    lines = [head + f", {len(s.values)} runs"]
    points = detect(s.values, settings)
    if ns.plot:
        drawn = plot_trend(s.labels, s.values, points, title=f"{entries[-1].nodeid}: {metric_label(path)}",
                           ylabel=f"{metric_label(path)}", path=Path(ns.plot) / trend_file_name(
                               entries[-1].nodeid, path))
        lines.append(f"    plot: {drawn}")
    for cp in points:
        word = "worse" if worse_by(cp.change, info.direction) > 0 else "better"
        lines.append(f"    change point at {s.labels[cp.index]} (run {cp.index + 1}): "
                     f"{fmt_value(cp.before, unit)} → {fmt_value(cp.after, unit)} "
                     f"{fmt_change(cp.change)} ({word}), p = {cp.pvalue:.2g}")
    if not points:
        lines.append("    no change point")
    ref, why = _reference(s, ns.since)
    d = drift(s.values, ref) if ref is not None else None
    if d is not None:
        word = "worse" if worse_by(d.change, info.direction) > 0 else "better"
        lines.append(f"    drift since {s.labels[ref]} (run {ref + 1}): {fmt_value(d.start, unit)} → "
                     f"{fmt_value(d.end, unit)} {fmt_change(d.change)} ({word}; medians of "
                     f"{END_RUNS} runs)")
    else:
        lines.append(f"    drift: {why}")
    c = creep(s.values[:-1], s.values[-1], direction=info.direction, tolerance=tol,
              window=ns.window, settings=settings, accepted=s.accepted[:-1]) if len(s.values) > 1 else None
    if c is None:
        lines.append(f"    creep: too few runs to judge (needs {2 * END_RUNS} in the window)")
    else:
        state = "CREPT" if c.crept else "within tolerance"
        since = (f" after the regression accepted at {s.labels[c.step_at]}"
                 if c.step_at is not None else "")
        if c.unaccepted_step is not None:
            since += (f" (the step at {s.labels[c.unaccepted_step.index]} "
                      f"{fmt_change(c.unaccepted_step.change)} was not called regressed: counted)")
        lines.append(f"    creep: {state} — the newest {len(s.values) - c.window_start} runs{since}: "
                     f"{fmt_value(c.start, unit)} → {fmt_value(c.end, unit)} "
                     f"{fmt_change(relative(c.start, c.end))}, the newest run alone "
                     f"{fmt_change(relative(c.start, c.current))} (medians of {END_RUNS} runs)")
    return lines, bool(c is not None and c.crept), d is not None


def cmd_history(ns: argparse.Namespace) -> int:
    try:
        settings = ChangepointSettings(max_pvalue=ns.max_pvalue, min_magnitude=ns.min_magnitude)
        if ns.window < 2 * END_RUNS:
            raise ValueError(f"--window must be at least {2 * END_RUNS}, got {ns.window}")
        if ns.tolerance is not None and not 0 <= ns.tolerance < 1:
            raise ValueError(f"--tolerance must be in [0, 1), got {ns.tolerance}")
        wanted = [metric(m).path for m in ns.metric or []]
        return _report(Path(ns.dir), ns, settings, wanted)
    except (ValueError, store.HistoryError, ChangePointsUnavailable, PlotUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"error: cannot write the plot: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _files(root: Path) -> dict[str, Path]:
    if root.is_file():
        entries = store.read(root).entries
        if not entries:
            raise store.HistoryError(f"{root} holds no readable history entry")
        return {entries[0].nodeid: root}
    return store.find_all(root)


def _report(root: Path, ns: argparse.Namespace, settings: ChangepointSettings, wanted: list[str]) -> int:
    files = {n: p for n, p in _files(root).items() if not ns.test or ns.test in n}
    if not files:
        raise store.HistoryError(f"no history of {'a test matching ' + repr(ns.test) if ns.test else 'any test'} "
                                 f"under {root} (histories are *.jsonl files written by "
                                 "--goodput-update-baseline)")
    crept, since_found = [], False
    for nodeid, path in sorted(files.items()):
        read = store.read(path, nodeid)
        for w in read.warnings:
            print(f"warning: {w}", file=sys.stderr)
        entries = newest_identity(read.entries)
        if not entries:
            continue
        ident = ", ".join(f"{k}={v}" for k, v in sorted(entries[-1].environment.identity.items()))
        other = len(read.entries) - len(entries)
        print(f"{nodeid}: {len(entries)} runs ({ident})"
              + (f"; {other} runs of another hardware, model or scenario not compared" if other else ""))
        known = [m for m in sorted(entries[-1].metrics) if lookup_info(m) is not None]
        for path_ in wanted or entries[-1].gated or known:
            lines, is_crept, found = _analyse(entries, path_, ns, settings)
            print("\n".join(lines))
            since_found = since_found or found
            if is_crept:
                crept.append(f"{nodeid} {metric_label(path_)}")
    if ns.since is not None and not since_found:
        raise ValueError(f"--since {ns.since}: no test's history has that run")
    if crept:
        print(f"creep beyond tolerance: {'; '.join(crept)}")
        return EXIT_CREPT
    return EXIT_OK
