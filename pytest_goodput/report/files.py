"""Write a session's reports: JSON results, Markdown report, GitHub step summary and annotations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pytest_goodput.report.github import append_step_summary, emit, in_github_actions
from pytest_goodput.report.markdown import render_markdown

if TYPE_CHECKING:
    from pytest_goodput.plugin.session import GoodputSession


def write_session_reports(gs: "GoodputSession", write: Callable[[str], None] = print) -> None:
    s = gs.settings
    if not gs.outcomes:
        return
    if s.json_path:
        gs.write_json(Path(s.json_path))

    on_github = in_github_actions(os.environ)
    if s.report or on_github:
        md = render_markdown(gs.outcomes)
        if s.report:
            from pytest_goodput.store.files import write_atomic

            write_atomic(Path(s.report), md)
        if on_github:
            append_step_summary(md, os.environ)
            emit(gs.outcomes, write=write, rootdir=gs.rootdir)
