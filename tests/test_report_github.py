"""GitHub Actions integration: escaping, annotation caps, step summary limits."""

from __future__ import annotations

import pytest

import report_fixtures as fx

from pytest_goodput.report.github import (
    ANNOTATIONS_PER_TYPE,
    annotations,
    append_step_summary,
    command,
    emit,
    escape_data,
    escape_property,
    in_github_actions,
    workspace_prefix,
)

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded core
# is imported here, before any pytester run.
import pytest_goodput.load.coordinator  # noqa: E402,F401
import pytest_goodput.plugin.harness  # noqa: E402,F401
import pytest_goodput.plugin.session  # noqa: E402,F401
import pytest_goodput.report.files  # noqa: E402,F401

pytest_plugins = ["pytester"]


def test_escaping_data_vs_properties():
    raw = "50% off: a,b\r\nnext"
    assert escape_data(raw) == "50%25 off: a,b%0D%0Anext"
    assert escape_property(raw) == "50%25 off%3A a%2Cb%0D%0Anext"
    # % is escaped first, so an already-escaped-looking text survives a round trip.
    assert escape_data("%0A") == "%250A"


def test_command_format():
    line = command("error", "p99: 1,2\n3", file="tests/a,b.py", line=7, title="x: y", col=None)
    assert line == "::error file=tests/a%2Cb.py,line=7,title=x%3A y::p99: 1,2%0A3"
    assert command("warning", "plain") == "::warning::plain"


def test_in_github_actions():
    assert in_github_actions({"GITHUB_ACTIONS": "true"})
    assert not in_github_actions({})
    assert not in_github_actions({"GITHUB_ACTIONS": "false"})


def test_annotations_kinds_locations_and_order():
    lines = annotations(fx.all_outcomes())
    errors = [ln for ln in lines if ln.startswith("::error ")]
    warnings = [ln for ln in lines if ln.startswith("::warning ")]
    assert len(errors) == 4 and len(warnings) == 1  # error, invalid, slo-failed, regressed; incomparable
    assert len(lines) == 5  # passed and new tests are not annotated
    # Ordered by severity class: error, invalid, SLO-failed, regressed.
    assert errors[0].startswith("::error file=tests/test_load.py,line=21,title=goodput%3A run failed::")
    assert errors[1].startswith("::error file=tests/test_load.py,line=4,title=goodput%3A invalid run (client-bound)::")
    assert errors[2].startswith(
        "::error file=tests/test_slo.py,line=13,title=goodput%3A SLO broken (attainment%2C ttft_p99_ms)::"
    )
    assert errors[3].startswith(
        "::error file=tests/test_serve.py,line=42,title=goodput%3A regression (goodput -15.0%25)::"
        "goodput regressed: tests/test_serve.py::test_param[a|b] (scenario server)%0A"
    )
    assert warnings[0].startswith("::warning file=tests/test_serve.py,line=71,title=goodput%3A baseline not comparable::")
    # Messages are one physical line each (newlines escaped).
    assert all("\n" not in ln and "\r" not in ln for ln in lines)


def test_inconclusive_is_a_warning():
    o = fx.outcome("tests/t.py::test_x", line=0, comparisons=[fx.cmp("metrics.ttft_ms.p99", 100.0, 120.0, "inconclusive")])
    [line] = annotations([o])
    assert line.startswith("::warning file=tests/t.py,line=1,title=goodput%3A inconclusive change (TTFT P99 +20.0%25)::")


def test_path_prefix_and_missing_location():
    o = fx.regressed().model_copy(update={"location": None})
    [line] = annotations([o])
    assert line.startswith("::error title=goodput%3A regression")
    [line] = annotations([fx.regressed()], path_prefix="sub/")
    assert "file=sub/tests/test_serve.py,line=42" in line


def test_workspace_prefix(tmp_path):
    suite = tmp_path / "example_suite"
    suite.mkdir()
    env = {"GITHUB_WORKSPACE": str(tmp_path)}
    assert workspace_prefix(suite, env) == "example_suite/"
    assert workspace_prefix(tmp_path, env) == ""
    assert workspace_prefix(tmp_path.parent, env) == ""  # outside the checkout: leave paths alone
    assert workspace_prefix(suite, {}) == ""
    got: list[str] = []
    emit([fx.regressed()], write=got.append, rootdir=suite, env=env)
    assert "file=example_suite/tests/test_serve.py,line=42" in got[0]


def test_cap_of_ten_per_type_with_summary_line():
    many = [fx.regressed().model_copy(update={"nodeid": f"tests/t.py::test_{i:02d}"}) for i in range(14)]
    doubtful = [
        fx.outcome(f"tests/w.py::test_{i:02d}", comparisons=[fx.cmp("goodput.requests_per_s", 8.0, 7.0, "inconclusive")])
        for i in range(10)
    ]
    lines = annotations(many + doubtful)
    errors = [ln for ln in lines if ln.startswith("::error")]
    warnings = [ln for ln in lines if ln.startswith("::warning")]
    assert len(errors) == ANNOTATIONS_PER_TYPE == 10
    assert len(warnings) == 10  # exactly 10: all shown, no summary needed
    assert all("file=" in ln for ln in errors[:9])
    summary = errors[9]
    assert summary.startswith("::error title=goodput%3A 5 more failures::5 more goodput tests not annotated")
    assert "%0Aregressed: tests/t.py::test_09%0A" in summary and summary.endswith("regressed: tests/t.py::test_13")


def test_emit_writes_each_line():
    got: list[str] = []
    n = emit([fx.regressed(), fx.passed()], write=got.append)
    assert n == 1 and got[0].startswith("::error file=tests/test_serve.py,line=42")


def test_step_summary_appends(tmp_path):
    path = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(path)}
    assert append_step_summary("# one", env)
    assert append_step_summary("# two\n", env)
    assert path.read_text() == "# one\n\n# two\n"
    assert not append_step_summary("# three", {})


def test_step_summary_respects_the_limit(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("x" * 600)  # another tool already wrote to this step's summary
    env = {"GITHUB_STEP_SUMMARY": str(path)}
    body = "\n\n".join(f"paragraph {i} " + "é" * 40 for i in range(40))
    assert append_step_summary(body, env, limit=2000)
    text = path.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 2000
    assert text.startswith("x" * 600 + "\nparagraph 0 ")
    assert text.rstrip().endswith("GitHub limits a step summary to 1 MiB.")
    assert "paragraph 39" not in text
    # A file already at the limit takes nothing more.
    path.write_text("x" * 2000)
    assert not append_step_summary("more", env, limit=2000)
    assert path.read_text() == "x" * 2000


SUITE = """
import pytest

def test_first():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, isl=64, osl=8,
                     e2e_ms=0.001, attainment=0.99)
def test_slo_breaks():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, isl=64, osl=8)
def test_other_hardware():
    pass

def test_last():
    pass
"""


@pytest.mark.parametrize("verbosity", ["-q", "-qq", None, "-v", "-rA"])
def test_every_annotation_starts_a_line_at_every_verbosity(pytester, monkeypatch, tmp_path, verbosity):
    """GitHub reads ``::error`` / ``::warning`` only at the start of a line, and pytest's progress
    line is still open when the session's reports are written: at ``-q`` with no file name on it.
    A failing goodput test in the middle of the file, a doubtful one (incomparable) after it."""
    pytester.makepyfile(test_perf=SUITE)
    pytester.runpytest("-k", "other_hardware", "--goodput-update-baseline", "--goodput-sessions=1",
                       "--goodput-hardware=a").assert_outcomes(passed=1, deselected=3)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    args = ["--goodput-baseline", "--goodput-hardware=b", "--goodput-allow-new", "--goodput-engine=sim"]
    res = pytester.runpytest(*args, *([verbosity] if verbosity else []))
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    lines = res.stdout.lines
    commands = [line for line in lines if "::error" in line or "::warning" in line]
    assert [c.split(" ", 1)[0] for c in commands] == ["::error", "::warning"], "\n".join(lines)
    assert commands[0].startswith("::error file=test_perf.py,line=6,title=goodput%3A SLO broken")
    assert commands[1].startswith("::warning file=test_perf.py,line=11,title=goodput%3A baseline not comparable")
    assert "goodput" in summary.read_text()


