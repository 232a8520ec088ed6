"""Session-major recording: every goodput test shares each engine launch of a recording.

``--goodput-update-baseline`` records ``--goodput-sessions`` sessions of every test, and a
session of a launched engine is a launch (its spread is the run-to-run noise verdicts rest
on). Relaunching per test cost ``1 + tests × (sessions − 1)`` starts; here the goodput tests
run once per session, all on that session's launch, and the engine is relaunched between
sessions: ``sessions`` starts for the whole suite. The earlier sessions run before pytest's
own loop, unreported (their measurements are kept by the gate's session); pytest's loop is
the last session, where each test is judged and recorded over all of them.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
from _pytest.runner import runtestprotocol  # re-running an item unreported, as pytest-rerunfailures does

from pytest_goodput.plugin.session import GoodputSession
from pytest_goodput.plugin.terminal_io import start_line


class SessionMajorRecording:
    """The pytest plugin object that runs the earlier recording sessions (registered in
    update mode by the entry point)."""

    def __init__(self, gate: Callable[[], GoodputSession], records: Callable[[pytest.Item], bool],
                 say: Callable[[str], None]) -> None:
        self._gate = gate
        self._records = records  # a goodput test measured on the session's engine
        self._say = say

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        config = session.config
        runs = not config.option.collectonly and not (
            session.testsfailed and not config.option.continue_on_collection_errors)
        gs = self._gate()
        items = [i for i in session.items if self._records(i)] if runs else []
        if items and gs.settings.sessions > 1:
            self._earlier_sessions(session, gs, items)
        return (yield)

    def _earlier_sessions(self, session: pytest.Session, gs: GoodputSession, items: list[pytest.Item]) -> None:
        total = gs.settings.sessions
        gs.session_major = True
        for k in range(1, total):
            gs.recording_pass = k
            self._say(f"goodput: recording session {k} of {total}: {len(items)} test(s) on one engine launch")
            for j, item in enumerate(items):
                runtestprotocol(item, log=False, nextitem=items[j + 1] if j + 1 < len(items) else None)
                if session.shouldstop or session.shouldfail:
                    break
            gs.recording_pass = None
            gs.next_recording_session()  # an engine not started here is not: the tests' notes say so
        self._say(f"goodput: recording session {total} of {total}: the tests, reported")


def register(config: pytest.Config, gs: GoodputSession,
             marker: Callable[[pytest.Item], tuple[bool, Any]]) -> None:
    """Register session-major recording for this pytest session; ``marker(item)``: whether
    the item is marked, and its A/B options (None when it names none)."""
    def records(item: pytest.Item) -> bool:
        marked, ab = marker(item)
        if not (marked or "goodput" in getattr(item, "fixturenames", ())):
            return False
        return not gs.ab_options_of(ab).has_base  # an A/B test records nothing

    def say(line: str) -> None:
        tr = config.pluginmanager.getplugin("terminalreporter")
        if tr is not None:
            start_line(tr)
            tr.write_line(line)

    config.pluginmanager.register(SessionMajorRecording(lambda: gs, records, say), "goodput-session-major")
