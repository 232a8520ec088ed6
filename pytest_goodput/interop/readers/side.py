"""Imported runs as one side of a comparison, and whether two sides' definitions agree (pure).

Each file is one session (one launch of the tool and the engine), oldest first as given;
the judge reads them as it reads a baseline's sessions. Files marked as repeats are the runs
of one session instead (one launch measured several times). Files of different tools are judged
together only when every gated metric is defined alike on both sides; the refusal names the
metric and both definitions.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from pytest_goodput.interop.readers.imported import OURS, ImportedRun
from pytest_goodput.judge.evidence import samples_of
from pytest_goodput.measure.headline import key_metrics
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.side import Side

OUR_TOOL = "pytest-goodput"


def imported_side(runs: Sequence[ImportedRun], repeats: bool = False) -> Side:
    """One session per file, the spec of the newest; ``repeats``: the files are repeats of one
    launch (one session of several runs), which needs per-request files."""
    if not runs:
        raise ValueError("no imported runs")
    if repeats and len(runs) > 1:
        summary_only = [r.source.tool for r in runs if not r.source.per_request]
        if summary_only:
            raise ValueError(f"repeats need per-request files: a {summary_only[0]} file here has summaries "
                             "only (each summary-only file is judged as a session of its own)")
        one = imported_session(runs[-1])
        sessions = [one.model_copy(update={"samples": samples_of([r.result for r in runs]),
                                           "results": [r.result for r in runs]})]
    else:
        sessions = [imported_session(r) for r in runs]
    spec = runs[-1].result.spec
    return Side(spec, spec.identity_hash(), sessions)


def imported_session(run: ImportedRun) -> Session:
    """A file as a session: per-request samples when it had them, its summary always."""
    per_request = run.source.per_request
    return Session(recorded_at=run.result.measured_at, summary=key_metrics(run.result),
                   samples=samples_of([run.result]) if per_request else [],
                   results=[run.result], source=run.source)


def definitions(session: Session) -> tuple[str, dict[str, str]]:
    """A session's tool and metric definitions (ours for one of our own runs)."""
    src = session.source
    if src is None:
        return OUR_TOOL, dict(OURS)
    label = src.tool + (f" {src.version}" if src.version else "")
    return label + ("" if src.per_request else " (summary only)"), dict(src.definitions)


def definition_mismatch(base: Side, head: Side, gated: Iterable[str]) -> Optional[str]:
    """Why the files cannot be judged together, or None: a gated metric defined differently
    in two of them (within a side or across)."""
    labelled = [definitions(s) for s in [*base.sessions, *head.sessions]]
    names = [p.split(".")[1] for p in gated if p.startswith("metrics.")]
    (first, fd), rest = labelled[0], labelled[1:]
    for name in names:
        for tool, d in rest:
            if name in fd and name in d and fd[name] != d[name]:
                return (f"{name} is defined differently: {first} has {fd[name]!r}, {tool} has {d[name]!r}; "
                        "judge files of one definition together")
    return None
