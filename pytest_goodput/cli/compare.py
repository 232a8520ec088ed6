"""``python -m pytest_goodput compare BASE NEW``: the gate's verdicts outside pytest.

BASE and NEW may each be a baseline file, a directory of baselines, a ``--goodput-json``
session file, or a ``run --json`` result; or another tool's result file: ``vllm bench serve``
JSON, AIPerf's ``profile_export.jsonl`` (or its artifact directory, or its aggregate JSON),
a GuideLLM report (JSON or YAML), told apart by content or forced with ``--format``.
``--base PATH`` and ``--new PATH`` (repeatable) add files to a side: each file is one session
(one launch), judged as a baseline's sessions are; with ``--repeats`` other tools' files of
a side are the repeats of one launch. Tests are matched by node id (a single run, and every
imported file, is called ``run``). Every test is judged by the same
:func:`~pytest_goodput.judge.judge` as the plugin's gate: identity, SLOs, metrics, frontiers
and capacities. ``--export FORMAT=PATH`` also writes NEW's runs and their outcomes for another
tool (docs/export.md). Exit status: 0 pass,
1 regression or broken SLO (or, with ``--strict``, inconclusive or incomparable), 2 bad
input, 3 when a side's runs are invalid (the client set the pace) and nothing regressed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from pytest_goodput.interop.readers.formats import FORMATS
from pytest_goodput.interop.readers.side import definition_mismatch, imported_side
from pytest_goodput.interop.writers import ExportedTest
from pytest_goodput.judge.judge import Policy, fails, judge, metric_defs
from pytest_goodput.cli.run import EXIT_FAIL, EXIT_INVALID, EXIT_OK, export_flag
from pytest_goodput.report.exports import write_exports
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.report.text.terminal import render_summary
from pytest_goodput.run.engine_view import with_server
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.store.foreign import load_foreign
from pytest_goodput.store.files import write_atomic
from pytest_goodput.store.readers import load_evidence


def add_compare_arguments(cmp_: argparse.ArgumentParser) -> None:
    """The arguments for several files per side and other tools' formats."""
    cmp_.add_argument("--base", dest="more_base", action="append", default=[], metavar="PATH",
                      help="another file of the base side (repeatable): each file is one session")
    cmp_.add_argument("--new", dest="more_new", action="append", default=[], metavar="PATH",
                      help="another file of the new side (repeatable)")
    cmp_.add_argument("--format", choices=("auto", *FORMATS), default="auto",
                      help="read every file as this tool's output (default: told by content)")
    cmp_.add_argument("--repeats", action="store_true",
                      help="other tools' files of one side are repeats of one launch (default: one "
                      "session, one launch, per file)")


def load_side(paths: list[str], fmt: Optional[str] = None, repeats: bool = False) -> dict[str, Side]:
    """One side from one or more files: our own (baselines, sessions, runs; several files
    add sessions to each test) or other tools' (every file one session of the test ``run``)."""
    imported = [load_foreign(Path(p), fmt) for p in paths]
    if all(r is not None for r in imported):
        return {"run": imported_side([r for r in imported if r is not None], repeats)}
    if any(r is not None for r in imported):
        theirs = [p for p, r in zip(paths, imported) if r is not None]
        raise ValueError(f"{theirs[0]}: another tool's file among pytest-goodput files on one side; "
                         "give one kind per side")
    out: dict[str, Side] = {}
    for p in paths:
        for nodeid, side in load_evidence(Path(p)).items():
            if nodeid in out:
                side = replace(out[nodeid], sessions=[*out[nodeid].sessions, *side.sessions],
                               slo_results=None)
            out[nodeid] = side
    return out


def cmd_compare(ns: argparse.Namespace) -> int:
    exports = export_flag(ns)
    fmt = None if getattr(ns, "format", "auto") == "auto" else ns.format
    repeats = getattr(ns, "repeats", False)
    base = load_side([ns.base, *getattr(ns, "more_base", [])], fmt, repeats)
    new = load_side([ns.new, *getattr(ns, "more_new", [])], fmt, repeats)
    for nodeid in sorted(set(base) & set(new)):
        gated = [d.path for d in metric_defs(new[nodeid].spec, ns.tolerance)]
        why = definition_mismatch(base[nodeid], new[nodeid], gated)
        if why is not None:
            raise ValueError(f"cannot compare {nodeid}: {why}")
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
