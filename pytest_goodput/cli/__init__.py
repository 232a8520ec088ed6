"""``python -m pytest_goodput``: run, simulate, compare and draw frontiers without pytest, and
``init`` a repository's first gate.

Exit status, the same for every command:

- 0: everything judged passed;
- 1: a regression, a broken SLO, or failed requests beyond the spec's ``max_error_rate``
  (also: an engine that would not start, a crashed client worker);
- 2: usage or bad input: flags, spec values, unreadable or damaged files, an output path
  that cannot be written (``error: cannot write <path>: <reason>``), a ``--url`` that
  answers nothing before the run starts, a busy ``sim`` port;
- 3: an invalid run: the client set the pace, so the numbers measure the load generator
  (a regression or failed requests still exit 1);
- 130: interrupted (Ctrl-C); ``run --json`` still writes the runs made so far, the last one
  marked ``interrupted`` with the requests it finished.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, TextIO

from pytest_goodput.cli.ab import add_ab_parser, cmd_ab
from pytest_goodput.cli.compare import add_compare_arguments, cmd_compare
from pytest_goodput.cli.frontier import cmd_frontier
from pytest_goodput.cli.history import add_history_parser, cmd_history
from pytest_goodput.cli.init import add_init_parser, cmd_init
from pytest_goodput.cli.plan import add_plan_parser, cmd_plan
from pytest_goodput.cli.run import CLIError, add_export_flag, add_run_parser, cmd_run
from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.scenario.spec import SpecError
from pytest_goodput.sim import server as sim_server


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_goodput", description=__doc__)
    parser.epilog = "exit status: 0 pass; 1 regression, broken SLO or failed requests; 2 usage " \
                    "or bad input; 3 invalid run (the client set the pace)"
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_parser(sub)
    sim = sub.add_parser("sim", help="serve the embedded engine simulator", add_help=False)
    sim.add_argument("sim_args", nargs=argparse.REMAINDER)
    cmp_ = sub.add_parser("compare", help="compare two result or baseline files; exit 1 on regression")
    cmp_.add_argument("base")
    cmp_.add_argument("new")
    cmp_.add_argument("--report", help="write the Markdown report here")
    cmp_.add_argument("--json", help="write every outcome (verdicts, intervals, SLOs) here as JSON")
    cmp_.add_argument("--strict", action="store_true")
    cmp_.add_argument("--tolerance", type=float)
    add_compare_arguments(cmp_)
    add_export_flag(cmp_)
    fr = sub.add_parser("frontier", help="frontier of a sweep result; compare and plot")
    fr.add_argument("results")
    fr.add_argument("--baseline")
    fr.add_argument("--plot")
    fr.add_argument("--strict", action="store_true")
    fr.add_argument("--tolerance", type=float)
    add_history_parser(sub)
    add_ab_parser(sub)
    add_plan_parser(sub)
    add_init_parser(sub)
    return parser


class _Redacted:
    """stdout or stderr with every write redacted: whatever a command prints, no secret."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(redact(text))

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        return sim_server.main(argv[1:])
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacted(out), _Redacted(err)  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str]) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)

    try:
        if ns.command == "run":
            return cmd_run(ns)
        if ns.command == "compare":
            return cmd_compare(ns)
        if ns.command == "frontier":
            return cmd_frontier(ns)
        if ns.command == "history":
            return cmd_history(ns)
        if ns.command == "ab":
            return cmd_ab(ns)
        if ns.command == "plan":
            return cmd_plan(ns)
        if ns.command == "init":
            return cmd_init(ns)
    except (CLIError, SpecError, ValueError, ConnectionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # an engine that would not start, a crashed client worker
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {ns.command!r}")
    return 2
