"""``python -m pytest_goodput frontier RESULTS [--baseline BASE] [--plot out.svg]``.

Reads sweep results, prints each sweep's points and Pareto frontier, optionally judges it
against a baseline and draws it. Accepted files (RESULTS and BASE alike):

- the ``--goodput-json`` session document (``{"schema_version": 1, "tests": [...]}``):
  every test that produced a frontier or ran a sweep;
- ``python -m pytest_goodput run --json`` output: one run result or a list of them, each
  a sweep point, in the sweep's order;
- a stored baseline file of a sweep test, or a directory of baselines.

The comparison is the gate's own: :func:`~pytest_goodput.judge.judge` with the same
policy, so each point is judged at equal load against every baseline session (the scalar
rule), and the step lookup of the two frontiers is shown but does not decide. Exit status
as the gate decides (:func:`~pytest_goodput.judge.fails`): 1 on a regression (or, with
``--strict``, an inconclusive, underpowered or incomparable verdict), else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError
from tabulate import tabulate

from pytest_goodput.judge.evidence import from_sweep_runs
from pytest_goodput.judge.judge import Policy, fails, judge
from pytest_goodput.measure.frontier import (
    max_throughput_under_slo,
    pareto_frontier,
    point_from_result,
)
from pytest_goodput.report import plot
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.outcomes.frontier import FrontierComparison, FrontierPoint
from pytest_goodput.schema.outcomes.outcome import VERDICT_SYMBOL, MetricComparison, TestOutcome
from pytest_goodput.schema.outcomes.shapes import LoadComparison
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.store.readers import load_evidence


@dataclass
class Sweep:
    """One sweep's points and, when its per-request runs are known, the judge's evidence.

    ``runs`` is set when the sweep was read from bare run results (``run --json``): its spec
    is then rebuilt from the points, and rebuilt again like the other side's when compared.
    """

    name: str
    points: list[FrontierPoint]
    percentile: float = 50.0
    evidence: Optional[Side] = None
    runs: list[RunResult] = field(default_factory=list)

    @property
    def frontier(self) -> list[FrontierPoint]:
        return pareto_frontier(self.points)


def _invalid(path: Path, where: str, err: ValidationError) -> ValueError:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top)"
    return ValueError(f"{path}: {where} is invalid at {loc}: {first['msg']}")


def _runs(path: Path, items: list[Any], where: str) -> list[RunResult]:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(RunResult.model_validate(item))
        except ValidationError as err:
            raise _invalid(path, f"{where}[{i}]", err) from None
    return out


def _points(path: Path, items: list[Any], where: str) -> list[FrontierPoint]:
    try:
        return [FrontierPoint.model_validate(p) for p in items]
    except ValidationError as err:
        raise _invalid(path, where, err) from None


def sweep_from_runs(name: str, runs: list[RunResult], read: Optional[Side] = None) -> Sweep:
    """A sweep read from bare run results, one per point (``read``: what else the file said)."""
    ev = from_sweep_runs(runs, read.env if read is not None else None)
    points = [point_from_result(r, ev.spec.frontier_percentile, ev.spec.gpus) for r in runs]
    return Sweep(name=name, points=points, percentile=ev.spec.frontier_percentile, evidence=ev,
                 runs=runs)


def _from_evidence(path: Path, name: str, ev: Side) -> Sweep:
    """A sweep test as the judge reads it: its newest session's points (or frontier)."""
    if ev.spec.scenario != "sweep" and ev.results:  # a session document without the test's spec
        return sweep_from_runs(name, ev.results, ev)
    pct = ev.spec.frontier_percentile
    if ev.results:
        points = [point_from_result(r, pct, ev.spec.gpus) for r in ev.results]
    else:
        points = list(ev.points or ev.frontier or [])
    return Sweep(name=name, points=points, percentile=pct, evidence=ev if ev.samples else None)


def _session_sweeps(path: Path, doc: dict[str, Any]) -> list[Sweep]:
    found: list[tuple[str, int, Any]] = []
    for i, test in enumerate(doc.get("tests") or []):
        if not isinstance(test, dict):
            raise ValueError(f"{path}: tests[{i}] is not an object")
        outcome = test.get("outcome") or {}
        if outcome.get("frontier") or outcome.get("scenario") == "sweep":
            _runs(path, test.get("runs") or [], f"tests[{i}].runs")  # names a damaged run
            found.append((str(outcome.get("nodeid") or f"tests[{i}]"), i, outcome))
    evidence = load_evidence(path) if found else {}
    sweeps = []
    for name, i, outcome in found:
        front = outcome.get("frontier")
        if name in evidence:
            sweeps.append(_from_evidence(path, name, evidence[name]))
        elif isinstance(front, dict) and front.get("points"):
            pts = _points(path, front["points"], f"tests[{i}].outcome.frontier.points")
            pct = float((outcome.get("spec") or {}).get("frontier_percentile") or 50.0)
            sweeps.append(Sweep(name=name, points=pts, percentile=pct))
    return sweeps


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read results file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (byte {exc.start}), not a results file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a JSON results file ({exc.msg} at line {exc.lineno})") from None


def load_sweeps(path: Path) -> list[Sweep]:
    """Every sweep in a results or baseline file (or directory); ValueError naming it otherwise."""
    if path.is_dir():
        sweeps = [_from_evidence(path, name, ev) for name, ev in sorted(load_evidence(path).items())
                  if ev.spec.scenario == "sweep"]
    else:
        doc = _read(path)
        if isinstance(doc, list):
            sweeps = [sweep_from_runs(path.name, _runs(path, doc, "item"))] if doc else []
        elif isinstance(doc, dict) and isinstance(doc.get("tests"), list):
            sweeps = _session_sweeps(path, doc)
        elif isinstance(doc, dict) and doc.get("kind") == "pytest-goodput-baseline":
            sweeps = [_from_evidence(path, name, ev) for name, ev in load_evidence(path).items()
                      if ev.spec.scenario == "sweep"]
        elif isinstance(doc, dict) and "spec" in doc and "window" in doc:
            sweeps = [sweep_from_runs(path.name, _runs(path, [doc], "result"))]
        else:
            raise ValueError(
                f"{path} is neither a --goodput-json session document, `run --json` results, "
                "nor a baseline file"
            )
    if not sweeps:
        raise ValueError(f"{path} holds no sweep results (no test with a frontier, no runs)")
    return sweeps


def _num(v: Optional[float], digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def _load_label(load: float, kind: str) -> str:
    if kind == "rate":
        return f"{load:g} req/s"
    return f"{load:g} {'user' if load == 1 else 'users'}"


def _load(p: FrontierPoint) -> str:
    return _load_label(p.load, p.load_kind)


def render_sweep(sweep: Sweep) -> str:
    on_front = {id(p) for p in sweep.frontier}
    pct = f"P{sweep.percentile:g}"
    rows = [
        [_load(p), _num(p.interactivity), _num(p.throughput), _num(p.ttft_ms), _num(p.tpot_ms),
         {True: "ok", False: "FAIL", None: "-"}[p.slo_ok], "*" if id(p) in on_front else ""]
        for p in sorted(sweep.points, key=lambda q: q.load)
    ]
    head = ["load", "interactivity tok/s/user", "throughput tok/s", f"TTFT {pct} ms",
            f"TPOT {pct} ms", "SLO", "frontier"]
    lines = [f"frontier of {sweep.name} (TPOT {pct}; {len(sweep.points)} points, "
             f"{len(on_front)} on the frontier *)", tabulate(rows, head, disable_numparse=True)]
    best = max_throughput_under_slo(sweep.points)
    if best is not None:
        lines.append(f"max throughput under SLO: {_num(best.throughput)} tok/s at {_load(best)} "
                     f"({_num(best.interactivity)} tok/s/user)")
    elif any(p.slo_ok is False for p in sweep.points):
        lines.append("max throughput under SLO: none (no point met its SLOs)")
    else:
        lines.append("max throughput under SLO: - (no SLOs stated)")
    return "\n".join(lines)


def render_step_lookup(cmp: FrontierComparison) -> str:
    """The step lookup of the two frontiers (docs/frontiers.md): shown, not the verdict."""
    rows = []
    for r in cmp.points:
        cur = "none as interactive" if r.current is None else (
            f"{_num(r.current.throughput)} ({_load(r.current)})")
        rows.append([f">= {_num(r.interactivity)}",
                     f"{_num(r.baseline.throughput)} ({_load(r.baseline)})", cur,
                     f"{r.ratio:.3f}"])
    head = ["interactivity tok/s/user", "baseline tok/s", "current tok/s", "ratio"]
    worst = cmp.worst
    tail = "" if worst is None else (
        f": worst ratio {worst.ratio:.3f} at {_num(worst.interactivity)} tok/s/user")
    return "\n".join([f"step lookup of the frontiers (newest baseline session; shown, not the "
                      f"verdict){tail}", tabulate(rows, head, disable_numparse=True)])


def _change(c: Optional[MetricComparison]) -> str:
    if c is None or c.change is None:
        return "-"
    lo, hi = c.interval or (None, None)
    span = "" if lo is None or hi is None else f" [{lo:+.1%}, {hi:+.1%}]"
    return f"{round(c.change, 6) + 0.0:+.1%}{span}"  # no "-0.0%" from rounding noise


def render_by_load(by_load: list[LoadComparison], sweep_over: str, sessions: int,
                   percentile: float) -> str:
    """The gate's comparison: every point against the same load in every baseline session."""
    rows = []
    for p in by_load:
        thr = p.throughput
        rows.append([_load_label(p.load, sweep_over), _num(thr.baseline), _num(thr.current),
                     _change(thr), _change(p.tpot),
                     "; ".join(f"{registry.metric(c.metric).label} {_change(c)}" for c in p.latency) or "-",
                     f"{VERDICT_SYMBOL.get(p.verdict, '')} {p.verdict}"])
    head = ["load", "baseline tok/s", "current tok/s", "throughput change",
            f"TPOT P{percentile:g} change", "latency change", "verdict"]
    return "\n".join([f"at equal load, against {sessions} baseline session(s) (the verdict):",
                      tabulate(rows, head, disable_numparse=True)])


def render_outcome(outcome: TestOutcome, sessions: int) -> str:
    """What the gate would say about this sweep: the frontier verdict, then every other check."""
    if outcome.baseline_status == "incomparable":
        return f"baseline: {VERDICT_SYMBOL.get('incomparable', '')} incomparable: " + "; ".join(
            outcome.incomparable_reasons)
    lines = []
    frontier = outcome.frontier.comparison if outcome.frontier is not None else None
    if frontier is not None and "by_load" in frontier.model_fields_set:
        lines.append(render_by_load(frontier.by_load, outcome.spec.get("sweep_over", "concurrency"),
                                    sessions, float(outcome.spec.get("frontier_percentile") or 50)))
    if frontier is not None and frontier.points:
        step = frontier.model_dump(mode="json", exclude={"by_load"})
        lines.append("\n" + render_step_lookup(FrontierComparison.model_validate(step)))
    by_metric: dict[str, MetricComparison] = {c.metric: c for c in outcome.comparisons}
    front = by_metric.pop("frontier_throughput", None)
    if front is not None:
        lines.append(f"\nverdict: {VERDICT_SYMBOL.get(front.verdict, '')} {front.verdict} "
                     f"({front.note}), tolerance {front.tolerance:.0%}")
    for c in by_metric.values():
        change = "" if c.change is None else (
            f" {c.change * 100:+.2f} pp" if c.scale == "absolute" else f" {c.change:+.1%}")
        lines.append(f"{c.metric}: {VERDICT_SYMBOL.get(c.verdict, '')} {c.verdict}{change}")
    return "\n".join(lines)


def _pair(current: list[Sweep], baseline: list[Sweep]) -> list[tuple[Sweep, Optional[Sweep]]]:
    """Match sweeps by name; a lone sweep on each side is matched whatever its name."""
    if len(current) == 1 and len(baseline) == 1:
        return [(current[0], baseline[0])]
    by_name = {b.name: b for b in baseline}
    return [(c, by_name.get(c.name)) for c in current]


def _plot_path(base: Path, index: int, count: int) -> Path:
    return base if count == 1 else base.with_name(f"{base.stem}-{index + 1}{base.suffix}")


def judge_sweep(cur: Sweep, base: Sweep, policy: Policy, where: str) -> TestOutcome:
    """The gate's verdict on ``cur`` against ``base``: one :func:`judge`, as the plugin calls it.

    A side read from bare run results takes the other side's sweep spec for the fields its
    points overwrote, so that the spec-hash check compares what was really run.
    """
    if cur.evidence is None or base.evidence is None:
        which = cur.name if cur.evidence is None else f"{base.name} in {where}"
        raise ValueError(f"{which} has frontier points but no per-request runs: the comparison "
                         "judges each load from its requests (--goodput-json keeps them)")
    cur_ev, base_ev = cur.evidence, base.evidence
    if cur.runs and not base.runs:
        cur_ev = from_sweep_runs(cur.runs, cur_ev.env, like=base_ev.spec)
    elif base.runs and not cur.runs:
        base_ev = from_sweep_runs(base.runs, base_ev.env, like=cur_ev.spec)
    return judge(cur.name, cur_ev, base_ev, policy)


def cmd_frontier(ns: argparse.Namespace) -> int:
    """Print, compare and draw; 1 when the gate would fail a sweep against its baseline."""
    if ns.tolerance is not None and not 0 <= ns.tolerance < 1:
        raise ValueError(f"--tolerance must be a fraction in [0, 1), got {ns.tolerance}")
    if ns.plot and Path(ns.plot).suffix.lower() not in plot.FORMATS:
        raise ValueError(f"--plot must end in {' or '.join(plot.FORMATS)}, got {ns.plot!r}")
    policy = Policy(compare=True, strict=bool(getattr(ns, "strict", False)), tolerance=ns.tolerance)
    current = load_sweeps(Path(ns.results))
    baseline = load_sweeps(Path(ns.baseline)) if ns.baseline else []
    pairs = _pair(current, baseline) if ns.baseline else [(c, None) for c in current]
    failed = False
    for i, (cur, base) in enumerate(pairs):
        if i:
            print()
        print(render_sweep(cur))
        if ns.baseline and base is None:
            print(f"baseline: {VERDICT_SYMBOL['new']} new (no sweep named {cur.name} in {ns.baseline})")
        if base is not None:
            outcome = judge_sweep(cur, base, policy, ns.baseline)
            sessions = len(base.evidence.history) if base.evidence is not None else 0
            print(f"\nagainst baseline {base.name}:")
            print(render_outcome(outcome, sessions))
            failed = failed or fails(outcome, policy)
        if ns.plot:
            out = _plot_path(Path(ns.plot), i, len(pairs))
            try:
                plot.plot_frontiers(cur.points, cur.frontier,
                               base.points if base else None, base.frontier if base else None,
                               path=out, title=cur.name)
            except plot.PlotUnavailable as exc:
                print(f"notice: {exc}; no plot written", file=sys.stderr)
            else:
                print(f"plot written to {out}")
    return 1 if failed else 0
