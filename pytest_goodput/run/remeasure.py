"""The one rule for a run the client paced: measure it again, on the same engine launch, once.

A run whose client, not the server, set the pace (loop stalls, late reads: its self-check
judged it invalid) says nothing about the engine. A passing hiccup on a shared machine must
not fail a gate, leave a sweep point unjudgeable or discard a recording, so such a run is
measured once more; a second invalid run is kept, with its reasons: a client that cannot
keep up twice in a row on one launch is not a hiccup (``docs/decisions.md``, "One
re-measure rule"). The plugin's harness, the runner's sweep points and capacity probes, A/B
rounds and a recording's sessions all go through :func:`until_valid`.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

from pytest_goodput.schema.runs.results import RunResult

_T = TypeVar("_T")

#: Runs one measurement may take on one launch: the first and one re-measure.
TRIES = 2


def paced_by_client(runs: Iterable[RunResult]) -> list[str]:
    """Why the client set the pace of any of ``runs`` (empty: it did not)."""
    return [reason for run in runs if not run.client.valid
            for reason in (run.client.reasons or ["client health check failed"])]


def until_valid(measure: Callable[[], _T], reasons: Callable[[_T], list[str]],
                again: Callable[[list[str]], None], tries: int = TRIES) -> _T:
    """``measure()``, and again while ``reasons(result)`` says the client set its pace, at
    most ``tries`` runs in all; ``again(reasons)`` is told before each further run (a note, a
    progress line). The last result is returned, valid or not."""
    result = measure()
    for _ in range(tries - 1):
        why = reasons(result)
        if not why:
            break
        again(why)
        result = measure()
    return result
