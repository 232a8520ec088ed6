"""``python -m pytest_goodput compare BASE NEW``: the gate's verdicts outside pytest.

BASE and NEW may each be a baseline file, a directory of baselines, a ``--goodput-json``
session file, or a ``run --json`` result. Tests are matched by node id (a single run is
called ``run``). Every test is judged by the same :func:`~pytest_goodput.judge.judge` as
the plugin's gate: identity, SLOs, metrics, frontiers and capacities. Exit status: 0 pass,
1 regression or broken SLO (or, with ``--strict``, inconclusive or incomparable).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_goodput.judge.judge import Policy, fails, judge
from pytest_goodput.report.markdown import render_markdown
from pytest_goodput.report.terminal import render_summary
from pytest_goodput.store.files import write_atomic
from pytest_goodput.store.readers import load_evidence


def cmd_compare(ns: argparse.Namespace) -> int:
    base, new = load_evidence(Path(ns.base)), load_evidence(Path(ns.new))
    if set(base) == {"run"} or set(new) == {"run"}:
        if len(base) == 1 and len(new) == 1:  # two single runs: compare them whatever their ids
            base = {next(iter(new)): next(iter(base.values()))}
    policy = Policy(compare=True, strict=ns.strict, tolerance=ns.tolerance)
    outcomes = [judge(nodeid, new[nodeid], base.get(nodeid), policy) for nodeid in sorted(new)]
    if not outcomes:
        raise ValueError(f"{ns.new}: no test results to compare")
    print(render_summary(outcomes))
    if ns.report:
        write_atomic(Path(ns.report), render_markdown(outcomes))
    if ns.json:
        doc = {"schema_version": 1, "outcomes": [o.model_dump(mode="json") for o in outcomes]}
        write_atomic(Path(ns.json), json.dumps(doc, indent=1) + "\n")
    return 1 if any(fails(o, policy) for o in outcomes) else 0
