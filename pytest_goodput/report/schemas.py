"""Export the JSON Schemas of the product's result contracts (``docs/schema``)."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_goodput.schema.outcomes.ab import ABResult
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.results import RunResult


def export_schemas(directory: str | Path) -> list[Path]:
    """Write the JSON Schemas of the results, outcome and A/B contracts, for tools that consume them."""

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in (("run_result", RunResult), ("test_outcome", TestOutcome), ("ab_result", ABResult)):
        path = out / f"{name}.schema.json"
        schema = model.model_json_schema()
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written
