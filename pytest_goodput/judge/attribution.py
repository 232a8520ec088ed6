"""Whose clock moved: the engine's own TTFT against ours, when a TTFT verdict moved (pure).

Why: our TTFT counts from the client's send (or its schedule) to the first token read; the
engine's counts from the request's arrival at the engine to the token's production. A
regression in the engine moves both; a delay in the load generator, the network or the HTTP
front end moves ours only. The rule (``docs/decisions.md``, "The engine's clocks"):

* it applies when a TTFT comparison (``metrics.ttft_ms.*``) is ``regressed`` or ``improved``:
  the judge already decided that ours moved;
* it compares **means**, because the engine's mean is exact (a histogram's ``_sum / _count``,
  or vLLM's per-request values) while its percentiles are known only to a bucket;
* the engine's move is its share of ours, ``Δengine / Δours`` (same source on both sides):
  at least :data:`ENGINE_SHARE` is "engine-side"; less is "client/network";
* no engine clock on a side, or ours moved only in the tail (its mean went the other way):
  said so, nothing attributed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple, Optional

from pytest_goodput.schema.outcomes.comparison import MetricComparison
from pytest_goodput.schema.outcomes.outcome import TestOutcome

__all__ = ["ENGINE_SHARE", "Attribution", "attribute", "attributed", "with_attribution"]

#: The share of our TTFT's move the engine's own TTFT must show to call it engine-side.
ENGINE_SHARE = 0.5
#: The engine's TTFT by preference: per request (exact pairs with ours), then the histogram.
_SOURCES = (("engine_request_ttft_mean_ms", "per-request metrics"), ("engine_ttft_mean_ms", "TTFT histogram"))


def _moved(comparisons: list[MetricComparison]) -> list[MetricComparison]:
    return [c for c in comparisons if c.metric.startswith("metrics.ttft_ms.")
            and c.verdict in ("regressed", "improved")]


class Attribution(NamedTuple):
    """Whose clock moved: ``side`` engine, client, tail (ours moved in the tail only) or unknown
    (no engine clock); ``note`` the sentence for the test, ``short`` the one for each verdict."""

    side: Literal["engine", "client", "tail", "unknown"]
    note: str
    short: str


def attribute(comparisons: list[MetricComparison], current: Mapping[str, float],
              baseline: Mapping[str, float]) -> Optional[Attribution]:
    """Whose clock moved, or None when no TTFT verdict moved."""
    moved = _moved(comparisons)
    if not moved:
        return None
    worse = any(c.verdict == "regressed" for c in moved)
    what = "TTFT " + ("regressed" if worse else "improved")
    source = next(((k, name) for k, name in _SOURCES if k in current and k in baseline), None)
    b_ours, c_ours = baseline.get("client_ttft_mean_ms"), current.get("client_ttft_mean_ms")
    if source is None or b_ours is None or c_ours is None:
        side = ("either side" if not any(k in s for s in (current, baseline) for k, _ in _SOURCES)
                else "the current run" if not any(k in current for k, _ in _SOURCES) else "the baseline")
        return Attribution("unknown", f"{what}; no engine clock on {side} (no latency histograms nor "
                           "per-request metrics from the engine): cannot tell engine-side from client/network",
                           f"no engine clock on {side}")
    key, name = source
    d_ours, d_eng = c_ours - b_ours, current[key] - baseline[key]
    eng = f"engine ({name}): mean {baseline[key]:.1f} → {current[key]:.1f} ms ({d_eng:+.1f} ms)"
    our = f"ours: mean {b_ours:.1f} → {c_ours:.1f} ms ({d_ours:+.1f} ms)"
    if (d_ours > 0) != worse or d_ours == 0:
        return Attribution("tail", f"{what} in the tail only (our mean TTFT did not move that way; {our}): "
                           f"the engine's clock, compared by mean, cannot attribute it; {eng}",
                           "in the tail only: not attributed")
    share = d_eng / d_ours
    if share >= ENGINE_SHARE:
        return Attribution("engine", f"{what} engine-side: the engine's own TTFT moved with ours ({eng}; "
                           f"{our}; {share:.0%} of ours)",
                           f"engine-side (engine mean TTFT {d_eng:+.1f} ms of our {d_ours:+.1f} ms)")
    return Attribution("client", f"{what} on the client/network side: the engine's own TTFT did not move "
                       f"with ours ({eng}, {max(share, 0.0):.0%} of ours; {our}); look at the load generator, "
                       "the network or the server's HTTP front end",
                       f"client/network: the engine's mean TTFT did not move ({d_eng:+.1f} ms of our "
                       f"{d_ours:+.1f} ms)")


def attributed(comparisons: list[MetricComparison], server: Optional[Mapping[str, Optional[Mapping[str, float]]]],
               ) -> tuple[list[MetricComparison], list[str]]:
    """The comparisons with whose clock moved on each moved TTFT verdict's note, and the
    sentence for the test's notes (none when no TTFT verdict moved)."""
    server = server or {}
    found = attribute(comparisons, server.get("current") or {}, server.get("baseline") or {})
    if found is None:
        return comparisons, []
    moved = _moved(comparisons)
    return [c.model_copy(update={"note": f"{c.note}; {found.short}" if c.note else found.short})
            if c in moved else c for c in comparisons], [found.note]


def with_attribution(outcome: TestOutcome) -> TestOutcome:
    """``outcome`` with whose clock moved (``attributed``)."""
    comparisons, notes = attributed(outcome.comparisons, outcome.server)
    if not notes:
        return outcome
    return outcome.model_copy(update={"notes": [*outcome.notes, *notes], "comparisons": comparisons})
