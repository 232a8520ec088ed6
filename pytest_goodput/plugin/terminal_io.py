"""Writing to the terminal from the plugin: progress past pytest's capture, redacted summaries.

Plain pytest-facing helpers with no import of the gate's core, so the entry point stays cheap.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest


def start_line(tr: Any) -> None:
    """End the terminal reporter's open line, if any, so that what follows starts a line.

    ``ensure_newline`` ends only the line of a test file's progress, which pytest opens at
    verbosity 0 and above; at ``-q`` the progress dots and ``[100%]`` are written with no file
    name, and only the writer knows that its line is still open.
    """
    tr.ensure_newline()
    tw = getattr(tr, "_tw", None)
    if tw is not None and getattr(tw, "width_of_current_line", 0):
        tw.line()


class TerminalStream:
    """Progress lines go to the terminal past pytest's output capture, each on its own line."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> None:
        pm = self._config.pluginmanager
        tr, capman = pm.getplugin("terminalreporter"), pm.getplugin("capturemanager")
        if tr is None or capman is None:
            return
        with capman.global_and_fixture_disabled():
            start_line(tr)
            tr.write(text)

    def flush(self) -> None:
        pass


class Redacting:
    """The terminal reporter with every written line redacted (secrets never reach a log)."""

    def __init__(self, tr: Any, redact: Callable[[str], str]) -> None:
        self._tr, self._redact, self._tw = tr, redact, tr._tw

    def section(self, title: str) -> None:
        self._tr.section(title)

    def ensure_newline(self) -> None:
        start_line(self._tr)

    def write_line(self, line: str, **markup: bool) -> None:
        self._tr.write_line(self._redact(line), **markup)
