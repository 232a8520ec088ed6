"""Write a session's reports: JSON results, Markdown report, GitHub step summary and annotations."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Mapping, Optional, Protocol, Sequence

from pytest_goodput.report.exports import session_tests, write_exports
from pytest_goodput.report.github import append_step_summary, emit, in_github_actions
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.schema.outcomes.cost import EngineUse
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.redaction import redact
from pytest_goodput.store.files import write_atomic

#: Version of the ``--goodput-json`` session document.
SESSION_SCHEMA_VERSION = 1


class ReportSettings(Protocol):
    json_path: Optional[str]
    report: Optional[str]
    export: Optional[list[str]]
    sources: dict[str, str]


class ReportedSession(Protocol):
    """What a session must hold for its reports (the pytest session object does)."""

    settings: ReportSettings
    outcomes: Sequence[TestOutcome]
    measurements: Mapping[str, Session]
    rootdir: Path

    def engine_use(self) -> EngineUse:
        """The session's engine launches and seconds of load."""


def session_json(outcomes: Sequence[TestOutcome], measurements: Mapping[str, Session],
                 engines: Optional[EngineUse] = None) -> str:
    """The ``--goodput-json`` document: every outcome with the runs behind it, and the
    session's engine launches (``engines``, when counted)."""
    doc: dict = {
        "schema_version": SESSION_SCHEMA_VERSION,
        **({"engines": engines.model_dump(mode="json")} if engines is not None else {}),
        "tests": [
            {
                "outcome": o.model_dump(mode="json"),
                "runs": [r.model_dump(mode="json") for r in measurements[o.nodeid].results]
                if o.nodeid in measurements else [],
            }
            for o in outcomes
        ],
    }
    return json.dumps(doc, indent=1) + "\n"


def write_session_reports(gs: ReportedSession, write: Callable[[str], None] = print) -> None:
    s = gs.settings
    if not gs.outcomes:
        return
    engines = gs.engine_use()
    if s.json_path:
        write_atomic(Path(s.json_path), session_json(gs.outcomes, gs.measurements, engines))
    on_github = in_github_actions(os.environ)
    if s.report or on_github:
        md = render_markdown(list(gs.outcomes), engines=engines)
        if s.report:
            write_atomic(Path(s.report), md)
        if on_github:  # files go through write_atomic, which redacts; these two do not
            append_step_summary(redact(md), os.environ)
            emit(list(gs.outcomes), write=lambda line: write(redact(line)), rootdir=gs.rootdir)
    if s.export:  # last: an export its format cannot hold leaves the reports above written
        write_exports(s.export, session_tests(gs.outcomes, gs.measurements),
                      s.sources.get("export", "--goodput-export"))
