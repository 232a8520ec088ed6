"""The gate's core as the pytest hooks use it: the session, a test's spec, and the hooks'
hand-offs (a test's verdict, the summary, the session's end).

Imported by ``plugin/__init__.py`` on a session's first goodput work (a goodput test or
fixture collected, or baselines recorded), never before: the core (pydantic models, numpy
statistics) costs about half a second, which unrelated test suites must not pay
(``bench/plugin_overhead.py``). The harness, which brings the load generator, loads
separately, when a test measures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pytest

from pytest_goodput.plugin.machine import check_machine
from pytest_goodput.plugin.recording import register
from pytest_goodput.plugin.session import GoodputSession
from pytest_goodput.plugin.spec import collected_spec
from pytest_goodput.plugin.summary import summary_lines
from pytest_goodput.plugin.terminal_io import Redacting, start_line
from pytest_goodput.report.files import write_session_reports
from pytest_goodput.report.junit import junit_properties
from pytest_goodput.report.text.terminal import failure_message, supports_unicode
from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.scenario.spec import SpecError

if TYPE_CHECKING:  # the harness brings the load generator: loaded when a test measures
    from pytest_goodput.plugin.harness import GoodputHarness


def finish_test(item: pytest.Item, harness: "GoodputHarness", gs: GoodputSession) -> None:
    """A goodput test after its body: its outcome (measured now if the body did not), JUnit
    XML properties (baseline, current, change and verdict per metric; redacted like every
    output), and the test failed with the readable message when the outcome fails."""
    outcome = harness.finish_test(item.location[:2] if item.location else None)
    if outcome is None:  # an earlier session of a recording: judged with the last
        return
    item.user_properties += [(name, redact(value))
                             for name, value in junit_properties(outcome, harness.remeasured_because)]
    if gs.fails(outcome):
        pytest.fail(redact(failure_message(outcome)), pytrace=False)


def terminal_summary(terminalreporter: Any, gs: GoodputSession) -> None:
    """The goodput section of pytest's summary: a table that fits a terminal, every column in
    a CI log; nothing when the session judged and recorded nothing."""
    if not gs.outcomes and not gs.settings.update:
        return
    tr = Redacting(terminalreporter, redact)
    tr.section("goodput")
    out = getattr(tr._tw, "_file", None)
    width = tr._tw.fullwidth if getattr(out, "isatty", lambda: False)() else None
    for line, markup in summary_lines(gs, width, not supports_unicode(out)):
        tr.write_line(line, **markup)


def finish_session(session: pytest.Session, gs: GoodputSession) -> None:
    """The session's end: its reports written, its engines stopped, and the run failed by a
    session error (a report or history not written, no baseline compared where one was due)."""
    try:
        _write = _line_writer(session.config.pluginmanager.getplugin("terminalreporter"))
        write_session_reports(gs, write=_write)
    except OSError as exc:
        gs.errors.append(f"could not write a goodput report: {exc}")
    gs.close()  # before the summary, which names the engine logs kept
    failing = gs.errors or (gs.missing_baselines() is not None and gs.missing_baselines_fail())
    if failing and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _line_writer(tr: Any) -> Callable[[str], None]:
    """Each line on a line of its own: GitHub reads workflow commands (``::error``) only at
    the start of a line, and pytest's progress line may still be open (at every verbosity:
    ``start_line``)."""
    if tr is None:
        return lambda line: print(redact(line))

    def write(line: str) -> None:
        start_line(tr)
        tr.write_line(redact(line))

    return write


__all__ = ["GoodputSession", "SpecError", "check_machine", "collected_spec", "finish_session", "finish_test",
           "register", "terminal_summary"]
