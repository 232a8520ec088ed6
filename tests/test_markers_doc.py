"""docs/markers.md is generated from the schema and cannot drift from it."""

from __future__ import annotations

from pathlib import Path

from pytest_goodput.report.markers_doc import render_markers_doc
from pytest_goodput.schema.scenario.marker import marker_arguments

DOC = Path(__file__).resolve().parents[1] / "docs" / "markers.md"


def test_committed_markers_doc_is_current():
    assert DOC.read_text(encoding="utf-8") == render_markers_doc(), (
        "docs/markers.md differs from the schema: regenerate it with "
        "python -m pytest_goodput.report.markers_doc > docs/markers.md")


def test_every_marker_argument_has_a_row_with_a_meaning():
    rows = {line.split("`")[1]: line for line in render_markers_doc().splitlines()
            if line.startswith("| `")}
    assert sorted(rows) == marker_arguments()
    assert [name for name, row in rows.items() if row.rstrip().endswith("|  |")] == []
