"""``python -m pytest_goodput plan``: what stored baselines let the gate detect, and at what cost.

Reads baselines only (files or directories) and runs nothing: per test and gated metric, the
noise within a launch and between launches, the smallest worse change one PR launch can show,
and how many PR launches would bring it within the tolerance, with their seconds of load
(``docs/statistics.md``, "Power planning").
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_goodput.report.text.power_plan import plan_file_lines
from pytest_goodput.store.baseline import BaselineError


def add_plan_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("plan", help="what stored baselines let the gate detect with one PR launch, "
                                    "and how many launches their tolerances need (runs nothing)")
    p.add_argument("baselines", nargs="+", type=Path, help="baseline files or directories")
    p.add_argument("--same-sitting", action="store_true",
                   help="plan for a PR run inside the baseline's sitting (default: on another day "
                        "or machine, as CI judges a committed baseline)")
    p.add_argument("--tolerance", type=float, help="the blanket tolerance the gate runs with")


def cmd_plan(ns: argparse.Namespace) -> int:
    lines: list[str] = []
    for path in ns.baselines:
        try:
            lines += plan_file_lines(path, same_sitting=ns.same_sitting, tolerance=ns.tolerance)
        except BaselineError as exc:
            raise ValueError(str(exc)) from None
    if not lines:
        raise ValueError("no baseline with a recorded session to plan: "
                         + ", ".join(str(p) for p in ns.baselines))
    print("\n".join(lines))
    return 0
