"""``python -m pytest_goodput compare BASE NEW``: the gate's verdicts outside pytest.

BASE and NEW may each be a baseline file, a directory of baselines, a ``--goodput-json``
session file, or a ``run --json`` result. Tests are matched by node id (a single run is
called ``run``). Every test is judged by the same :func:`~pytest_goodput.judge.judge` as
the plugin's gate: identity, SLOs, metrics, frontiers and capacities. ``--export
FORMAT=PATH`` also writes NEW's runs and their outcomes for another tool (docs/export.md). Exit status: 0 pass,
1 regression or broken SLO (or, with ``--strict``, inconclusive or incomparable), 2 bad
input, 3 when a side's runs are invalid (the client set the pace) and nothing regressed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_goodput.judge.judge import Policy, fails, judge
from pytest_goodput.cli.run import EXIT_FAIL, EXIT_INVALID, EXIT_OK, export_flag
from pytest_goodput.interop.writers import ExportedTest
from pytest_goodput.report.exports import write_exports
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.report.text.terminal import render_summary
from pytest_goodput.run.server import with_server
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.store.files import write_atomic
from pytest_goodput.store.readers import load_evidence


def cmd_compare(ns: argparse.Namespace) -> int:
    exports = export_flag(ns)
    base, new = load_evidence(Path(ns.base)), load_evidence(Path(ns.new))
    if set(base) == {"run"} or set(new) == {"run"}:
        if len(base) == 1 and len(new) == 1:  # two single runs: compare them whatever their ids
            base = {next(iter(new)): next(iter(base.values()))}
    policy = Policy(compare=True, strict=ns.strict, tolerance=ns.tolerance)
    outcomes = [with_server(judge(nodeid, new[nodeid], base.get(nodeid), policy), new[nodeid], base.get(nodeid))
                for nodeid in sorted(new)]
    if not outcomes:
        raise ValueError(f"{ns.new}: no test results to compare")
    print(render_summary(outcomes))
    if ns.report:
        write_atomic(Path(ns.report), render_markdown(outcomes))
    if ns.json:
        doc = {"schema_version": 1, "outcomes": [o.model_dump(mode="json") for o in outcomes]}
        write_atomic(Path(ns.json), json.dumps(doc, indent=1) + "\n")
    if exports:
        tests = [ExportedTest(o.nodeid, tuple(new[o.nodeid].results), o, dict(o.current_env)) for o in outcomes]
        if not any(t.runs for t in tests):
            print(f"warning: --export: {ns.new} holds no run results (a baseline keeps per-request "
                  "samples only): nothing exported", file=sys.stderr)
        write_exports(exports, tests, "--export")
    invalid_base = [n for n in sorted(new) if n in base
                    and not all(r.client.valid for r in base[n].results)]
    return compare_exit_code(outcomes, policy, invalid_base)


def compare_exit_code(outcomes: list[TestOutcome], policy: Policy, invalid_base: list[str]) -> int:
    """1 on a regression, an error or failed requests beyond ``max_error_rate``; else 3 when
    either side's runs are invalid; else 1 when :func:`fails` says so (SLOs, strict); else 0."""
    if any(o.error or o.regressed or _errors_broken(o) for o in outcomes):
        return EXIT_FAIL
    if invalid_base or any(not o.client_valid for o in outcomes):
        return EXIT_INVALID
    return EXIT_FAIL if any(fails(o, policy) for o in outcomes) else EXIT_OK


def _errors_broken(outcome: TestOutcome) -> bool:
    return any(s.name == "error_rate" and not s.ok for s in outcome.slos)
