"""``python -m pytest_goodput frontier RESULTS [--baseline BASE] [--plot out.svg]``.

Reads sweep results, prints each sweep's points and Pareto frontier, optionally judges it
against a baseline (exit 1 when a frontier regressed) and draws it. Accepted files:

- the ``--goodput-json`` session document (``{"schema_version": 1, "tests": [...]}``):
  every test that produced a frontier or ran a sweep;
- ``python -m pytest_goodput run --json`` output: one run result or a list of them, each
  a sweep point;
- (as ``--baseline``) a stored baseline file of a sweep test: its recorded frontier.

Points are recomputed from the runs when the file has them, so the percentile and GPU
count are each run's own ``frontier_percentile`` and ``gpus``; noise for the comparison is
each run's bootstrap throughput interval (request-to-request noise only).
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

from pytest_goodput.judge.frontier import compare_frontiers
from pytest_goodput.judge.frontier_noise import (
    noise_by_load,
    relative_half_width,
    throughput_interval,
)
from pytest_goodput.measure.frontier import (
    max_throughput_under_slo,
    pareto_frontier,
    point_from_result,
)
from pytest_goodput.report import plot
from pytest_goodput.schema.frontier import FrontierComparison, FrontierPoint, NoiseFn
from pytest_goodput.schema.outcome import VERDICT_SYMBOL
from pytest_goodput.schema.results import RunResult


@dataclass
class Sweep:
    """One sweep's points; ``runs`` is empty when only stored points are known."""

    name: str
    points: list[FrontierPoint]
    runs: list[RunResult] = field(default_factory=list)
    percentile: float = 50.0

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


def sweep_from_runs(name: str, runs: list[RunResult]) -> Sweep:
    points = [point_from_result(r, r.spec.frontier_percentile, r.spec.gpus) for r in runs]
    pct = runs[0].spec.frontier_percentile if runs else 50.0
    return Sweep(name=name, points=points, runs=runs, percentile=pct)


def _session_sweeps(path: Path, doc: dict[str, Any]) -> list[Sweep]:
    sweeps = []
    for i, test in enumerate(doc.get("tests") or []):
        if not isinstance(test, dict):
            raise ValueError(f"{path}: tests[{i}] is not an object")
        outcome = test.get("outcome") or {}
        name = str(outcome.get("nodeid") or f"tests[{i}]")
        front = outcome.get("frontier")
        if not front and outcome.get("scenario") != "sweep":
            continue
        runs = _runs(path, test.get("runs") or [], f"tests[{i}].runs")
        if runs:
            sweeps.append(sweep_from_runs(name, runs))
        elif isinstance(front, dict) and front.get("points"):
            pts = _points(path, front["points"], f"tests[{i}].outcome.frontier.points")
            pct = float((outcome.get("spec") or {}).get("frontier_percentile") or 50.0)
            sweeps.append(Sweep(name=name, points=pts, percentile=pct))
    return sweeps


def load_sweeps(path: Path) -> list[Sweep]:
    """Every sweep in a results (or baseline) file; ValueError naming the file otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read results file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (byte {exc.start}), not a results file") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a JSON results file ({exc.msg} at line {exc.lineno})") from None
    if isinstance(doc, list):
        sweeps = [sweep_from_runs(path.name, _runs(path, doc, "item"))] if doc else []
    elif isinstance(doc, dict) and isinstance(doc.get("tests"), list):
        sweeps = _session_sweeps(path, doc)
    elif isinstance(doc, dict) and doc.get("kind") == "pytest-goodput-baseline":
        runs_ = doc.get("runs") or []
        latest = runs_[-1].get("frontier") if runs_ and isinstance(runs_[-1], dict) else None
        pct = float((doc.get("spec") or {}).get("frontier_percentile") or 50.0)
        name = str(doc.get("nodeid") or path.name)
        sweeps = [Sweep(name, _points(path, latest, "frontier"), percentile=pct)] if latest else []
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


def run_noise(sweep: Sweep) -> dict[tuple[str, float], float]:
    """Relative half-width of each run's throughput (bootstrap over its requests)."""
    table: dict[tuple[str, float], float] = {}
    for run, p in zip(sweep.runs, sweep.points):
        h = relative_half_width(throughput_interval(run, gpus=run.spec.gpus), p.throughput)
        if h is not None:
            table[(p.load_kind, p.load)] = h
    return table


def comparison_noise(baseline: Sweep, current: Sweep) -> Optional[NoiseFn]:
    if not baseline.runs and not current.runs:
        return None
    return noise_by_load(run_noise(baseline), run_noise(current))


def _num(v: Optional[float], digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def _load(p: FrontierPoint) -> str:
    if p.load_kind == "rate":
        return f"{p.load:g} req/s"
    return f"{p.load:g} {'user' if p.load == 1 else 'users'}"


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


def render_comparison(cmp: FrontierComparison) -> str:
    rows = []
    for r in cmp.points:
        cur = "none as interactive" if r.current is None else (
            f"{_num(r.current.throughput)} ({_load(r.current)})")
        rows.append([f">= {_num(r.interactivity)}",
                     f"{_num(r.baseline.throughput)} ({_load(r.baseline)})", cur,
                     f"{r.ratio:.3f}", f"[{r.interval[0]:.3f}, {r.interval[1]:.3f}]",
                     f"{VERDICT_SYMBOL.get(r.verdict, '')} {r.verdict}"])
    head = ["interactivity tok/s/user", "baseline tok/s", "current tok/s", "ratio",
            "interval", "verdict"]
    lines = [tabulate(rows, head, disable_numparse=True)]
    worst = cmp.worst
    tail = "" if worst is None else (
        f" (worst ratio {worst.ratio:.3f} at {_num(worst.interactivity)} tok/s/user)")
    lines.append(f"verdict: {VERDICT_SYMBOL.get(cmp.verdict, '')} {cmp.verdict}{tail}, "
                 f"tolerance {cmp.tolerance:.0%}")
    return "\n".join(lines)


def _pair(current: list[Sweep], baseline: list[Sweep]) -> list[tuple[Sweep, Optional[Sweep]]]:
    """Match sweeps by name; a lone sweep on each side is matched whatever its name."""
    if len(current) == 1 and len(baseline) == 1:
        return [(current[0], baseline[0])]
    by_name = {b.name: b for b in baseline}
    return [(c, by_name.get(c.name)) for c in current]


def _plot_path(base: Path, index: int, count: int) -> Path:
    return base if count == 1 else base.with_name(f"{base.stem}-{index + 1}{base.suffix}")


def cmd_frontier(ns: argparse.Namespace) -> int:
    """Print, compare and draw; 1 when any frontier regressed against its baseline."""

    tolerance = 0.05 if ns.tolerance is None else float(ns.tolerance)
    if not 0 <= tolerance < 1:
        raise ValueError(f"--tolerance must be a fraction in [0, 1), got {tolerance}")
    if ns.plot and Path(ns.plot).suffix.lower() not in plot.FORMATS:
        raise ValueError(f"--plot must end in {' or '.join(plot.FORMATS)}, got {ns.plot!r}")
    current = load_sweeps(Path(ns.results))
    baseline = load_sweeps(Path(ns.baseline)) if ns.baseline else []
    pairs = _pair(current, baseline) if ns.baseline else [(c, None) for c in current]
    regressed = False
    for i, (cur, base) in enumerate(pairs):
        if i:
            print()
        print(render_sweep(cur))
        if ns.baseline and base is None:
            print(f"baseline: {VERDICT_SYMBOL['new']} new (no sweep named {cur.name} in {ns.baseline})")
        if base is not None:
            cmp = compare_frontiers(base.points, cur.points, tolerance, comparison_noise(base, cur))
            print(f"\nagainst baseline {base.name}:")
            print(render_comparison(cmp))
            regressed = regressed or cmp.verdict == "regressed"
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
    return 1 if regressed else 0
