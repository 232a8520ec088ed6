"""Every report's first line names the engine its numbers come from (report/text/engine_line.py)."""

from __future__ import annotations

import pytest

from pytest_goodput.report.text.engine_line import engine_line
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.report.text.terminal import render_summary
from pytest_goodput.schema.outcomes.ab_summary import ABSummary
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome

SIM = {"engine": "pytest-goodput-sim", "engine_version": "0.1.0"}
SERVE = {"engine": "llama-server", "engine_cmd": "llama-server -m m.gguf --api-key *** --port 8001"}
URL = {"engine": "attached", "engine_url": "http://***@10.0.0.5:8000/v1"}


def outcome(env: dict[str, str], name: str = "t.py::test_a", **kw) -> Outcome:
    return Outcome(nodeid=name, scenario="server", current_env=env, **kw)


@pytest.mark.parametrize("env,line", [
    (SIM, "engine: embedded simulator"),
    ({**SIM, "engine_flags": "GOODPUT_SIM_SLOWDOWN=1.2"}, "engine: embedded simulator (GOODPUT_SIM_SLOWDOWN=1.2)"),
    (SERVE, "engine: llama-server -m m.gguf --api-key *** --port 8001"),
    (URL, "engine: http://***@10.0.0.5:8000/v1"),
    ({"engine_name": "vllm", "engine_version": "0.6.3"}, "engine: vllm 0.6.3"),
    ({}, "engine: not recorded"),
])
def test_the_engine_in_words(env, line):
    assert engine_line([outcome(env)]) == line


def test_several_engines_and_an_ab_base_are_all_named_once():
    ab = ABSummary(base="simulator slowdown=1.2", head="h", rounds_used=4, min_rounds=4, max_rounds=12,
                   decided=True, looks=9, alpha_per_look=0.01)
    outcomes = [outcome(SIM), outcome(SIM, "t.py::b"), outcome(URL, "t.py::c", ab=ab)]
    assert engine_line(outcomes) == ("engines: embedded simulator; http://***@10.0.0.5:8000/v1 "
                                     "(A/B base: simulator slowdown=1.2)")


def test_terminal_and_markdown_reports_open_with_the_engine():
    assert render_summary([outcome(SERVE)]).splitlines()[0] == (
        "engine: llama-server -m m.gguf --api-key *** --port 8001")
    assert render_markdown([outcome(SERVE)]).splitlines()[0] == (
        "## pytest-goodput report — engine: `llama-server -m m.gguf --api-key *** --port 8001`")
    assert render_markdown([outcome(SIM)], title="PR #7").splitlines()[0] == (
        "## PR #7 — engine: embedded simulator")
