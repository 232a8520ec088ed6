"""GitHub Actions: the step summary and ``::error`` / ``::warning`` annotations at each test.

GitHub shows at most 10 error and 10 warning annotations per step and silently drops the
rest, so beyond 10 we emit 9 and a tenth that names what was left out. The step summary
is capped at 1 MiB per step; a longer one is refused by the runner, so we cut it first.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional

from pytest_goodput.report.text.terminal import failure_message
from pytest_goodput.report.vocabulary import (
    comparison_label,
    fmt_change,
    sorted_comparisons,
    sorted_outcomes,
)
from pytest_goodput.schema.outcomes.outcome import TestOutcome

#: GitHub's per-step limit on the step summary file.
STEP_SUMMARY_LIMIT = 1024 * 1024
#: Annotations of one type GitHub shows per step.
ANNOTATIONS_PER_TYPE = 10
ERROR_STATUSES = ("error", "invalid", "slo-failed", "regressed")
WARNING_STATUSES = ("inconclusive", "underpowered", "incomparable", "workload-changed")
_TITLES = {
    "error": "goodput: run failed",
    "invalid": "goodput: invalid run (client-bound)",
    "slo-failed": "goodput: SLO broken",
    "regressed": "goodput: regression",
    "inconclusive": "goodput: inconclusive change",
    "underpowered": "goodput: too little data to detect a regression",
    "incomparable": "goodput: baseline not comparable",
    "workload-changed": "goodput: the workload changed (output lengths)",
}


def in_github_actions(env: Mapping[str, str] = os.environ) -> bool:
    return env.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """Escape a workflow command's message: ``%``, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value: as data, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **props: Optional[object]) -> str:
    """``::kind k=v,k=v::message`` with every part escaped; None properties are left out."""
    given = [f"{k}={escape_property(str(v))}" for k, v in props.items() if v is not None]
    return f"::{kind}{' ' + ','.join(given) if given else ''}::{escape_data(message)}"


def _headline(o: TestOutcome) -> str:
    """Short cause for a title: the worst metric or SLO."""
    if o.status in ("regressed", "inconclusive", "underpowered"):
        for c in sorted_comparisons(o):
            if c.verdict == o.status:
                return f"{comparison_label(c, with_unit=False)} {fmt_change(c.change, scale=c.scale)}"
    if o.status == "slo-failed":
        return ", ".join(s.name for s in o.slo_failed)
    return ""


def _annotation(kind: str, o: TestOutcome, path_prefix: str) -> str:
    path = line = None
    if o.location is not None:
        path = path_prefix + o.location[0].replace(os.sep, "/")
        line = o.location[1] + 1  # pytest's line numbers are 0-based, GitHub's 1-based
    cause = _headline(o)
    title = _TITLES.get(o.status, f"goodput: {o.status}") + (f" ({cause})" if cause else "")
    return command(kind, failure_message(o), file=path, line=line, title=title)


def _capped(kind: str, outcomes: list[TestOutcome], path_prefix: str) -> list[str]:
    if len(outcomes) <= ANNOTATIONS_PER_TYPE:
        return [_annotation(kind, o, path_prefix) for o in outcomes]
    shown = outcomes[: ANNOTATIONS_PER_TYPE - 1]
    rest = outcomes[ANNOTATIONS_PER_TYPE - 1 :]
    listing = "\n".join(f"{o.status}: {o.nodeid}" for o in rest)
    summary = command(
        kind,
        f"{len(rest)} more goodput tests not annotated (GitHub shows {ANNOTATIONS_PER_TYPE} per step); "
        f"see the job summary and log:\n{listing}",
        title=f"goodput: {len(rest)} more {'failures' if kind == 'error' else 'warnings'}",
    )
    return [_annotation(kind, o, path_prefix) for o in shown] + [summary]


def annotations(outcomes: list[TestOutcome], path_prefix: str = "") -> list[str]:
    """Workflow commands for failing (error) and doubtful (warning) tests, at most 10 of each.

    ``path_prefix`` is prepended to test paths when pytest's rootdir is not the repository root.
    Errors come first in the order error, invalid, SLO-failed, regressed, then by node id.
    """
    ordered = sorted_outcomes(outcomes)
    errors = [o for s in ERROR_STATUSES for o in ordered if o.status == s]
    warnings = [o for s in WARNING_STATUSES for o in ordered if o.status == s]
    return _capped("error", errors, path_prefix) + _capped("warning", warnings, path_prefix)


def workspace_prefix(rootdir: "str | os.PathLike[str]", env: Mapping[str, str] = os.environ) -> str:
    """Where pytest's rootdir sits in the checkout (``example_suite/``), for annotation paths.

    pytest reports test locations relative to its rootdir; GitHub wants them relative to the
    repository (``$GITHUB_WORKSPACE``). Empty when they coincide or the rootdir is elsewhere.
    """
    workspace = env.get("GITHUB_WORKSPACE")
    if not workspace:
        return ""
    try:
        rel = os.path.relpath(os.path.realpath(rootdir), os.path.realpath(workspace))
    except ValueError:  # different drives on Windows
        return ""
    if rel == "." or rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return ""
    return rel.replace(os.sep, "/") + "/"


def emit(
    outcomes: list[TestOutcome],
    write: Callable[[str], object] = print,
    path_prefix: Optional[str] = None,
    rootdir: "Optional[str | os.PathLike[str]]" = None,
    env: Mapping[str, str] = os.environ,
) -> int:
    """Write the annotations (one workflow command per call); returns how many.

    Pass pytest's ``rootdir`` so that paths are made relative to the checkout, or an
    explicit ``path_prefix``.
    """
    if path_prefix is None:
        path_prefix = workspace_prefix(rootdir, env) if rootdir is not None else ""
    lines = annotations(outcomes, path_prefix)
    for line in lines:
        write(line)
    return len(lines)


def _cut_to(markdown: str, budget: int) -> str:
    """Keep whole paragraphs within ``budget`` bytes and say that the rest was cut."""
    note = "\n\n> ✂️ The rest of this report was cut: GitHub limits a step summary to 1 MiB.\n"
    room = budget - len(note.encode("utf-8"))
    if room <= 0:
        return ""
    data = markdown.encode("utf-8")[:room]
    head = data.decode("utf-8", errors="ignore")
    para = head.rfind("\n\n")
    return (head[:para] if para > 0 else head) + note


def append_step_summary(
    markdown: str, env: Mapping[str, str] = os.environ, limit: int = STEP_SUMMARY_LIMIT
) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY`` within the step's limit; False when there is no such file.

    The file may already hold other tools' output from the same step; that counts against
    the limit too.
    """
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    sep = "\n" if used else ""
    budget = limit - used - len(sep)
    if len((sep + text).encode("utf-8")) > limit - used:
        text = _cut_to(text, budget)
        if not text:
            return False
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(sep + text)
    except OSError:
        return False
    return True
