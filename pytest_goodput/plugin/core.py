"""The gate's core as the pytest hooks use it: the session, a test's spec and reports.

Imported by ``plugin/__init__.py`` on a session's first goodput work (a goodput test or
fixture collected, or baselines recorded), never before: the core (pydantic models, numpy
statistics) costs about half a second, which unrelated test suites must not pay
(``bench/plugin_overhead.py``). The harness, which brings the load generator, loads
separately, when a test measures.
"""

from __future__ import annotations

from pytest_goodput.plugin.machine import check_machine
from pytest_goodput.plugin.recording import register
from pytest_goodput.plugin.session import GoodputSession
from pytest_goodput.plugin.spec import collected_spec
from pytest_goodput.plugin.summary import summary_lines
from pytest_goodput.report.files import write_session_reports
from pytest_goodput.report.junit import junit_properties
from pytest_goodput.report.text.terminal import failure_message, supports_unicode
from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.scenario.spec import SpecError

__all__ = ["GoodputSession", "SpecError", "check_machine", "collected_spec", "failure_message", "junit_properties", "redact",
           "register", "summary_lines", "supports_unicode", "write_session_reports"]
