"""The Markdown block of the engine's clock: its latencies beside ours, and whose clock moved.

Why a block of its own: the "why" block explains a verdict with the engine's load (queue,
batch, KV cache); this one says where the time went. The engine's means are exact; its
percentiles come from histogram buckets and are shown as the bucket that holds them
(``docs/metrics.md``, "The engine's clock").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from pytest_goodput.judge.attribution import attribute
from pytest_goodput.measure.clocks.summary import PERCENTILES
from pytest_goodput.report.md.mdtable import escape_cell, table
from pytest_goodput.report.vocabulary import fmt_num
from pytest_goodput.schema.outcomes.outcome import TestOutcome

__all__ = ["clock_block"]

#: (key in the summaries, label): the engine latencies shown, histogram-based then per request.
_ROWS = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E latency"), ("queue", "queue time"))
#: Statuses whose report shows the block even when no TTFT verdict moved.
_SHOWN = frozenset({"regressed", "inconclusive", "underpowered", "slo-failed"})


def _bucket(s: Mapping[str, float], m: str, q: int) -> str:
    lo, hi = s.get(f"engine_{m}_p{q}_lo_ms"), s.get(f"engine_{m}_p{q}_hi_ms")
    if lo is None:
        return "–"
    return f"{fmt_num(lo)}–{fmt_num(hi)}" if hi is not None else f"> {fmt_num(lo)}"


def _gap(ours: Optional[float], engine: Optional[float]) -> str:
    return "–" if ours is None or engine is None else f"{ours - engine:+.3g}"


def _rows(side: str, s: Mapping[str, float]) -> list[list[str]]:
    rows = []
    for m, label in _ROWS:
        eng, ours = s.get(f"engine_{m}_mean_ms"), s.get(f"client_{m}_mean_ms")
        if eng is None:
            continue
        rows.append([label, side, fmt_num(ours), fmt_num(eng), *(_bucket(s, m, q) for q in PERCENTILES),
                     _gap(ours, eng)])
    if "engine_request_ttft_mean_ms" in s:
        ours = s.get("client_ttft_mean_ms")
        rows.append(["TTFT per request (queue + TTFT)", side, fmt_num(ours),
                     fmt_num(s["engine_request_ttft_mean_ms"]),
                     *(fmt_num(s.get(f"engine_request_ttft_p{q}_ms")) for q in PERCENTILES),
                     _gap(ours, s["engine_request_ttft_mean_ms"])])
    return rows


def clock_block(o: TestOutcome) -> str:
    """The engine's latencies, baseline and current, beside ours; "" without an engine clock."""
    server = o.server or {}
    cur, base = server.get("current") or {}, server.get("baseline") or {}
    note = attribute(o.comparisons, cur, base)
    rows = [*_rows("baseline", base), *_rows("current", cur)]
    if not rows or (note is None and o.status not in _SHOWN):
        return ""
    head = ("**The engine's clock** — its own latencies (ms) beside ours; P50/P90/P99 are the "
            "histogram bucket that holds them, means are exact:")
    parts = [head, table(["latency", "side", "ours, mean", "engine, mean",
                          *(f"engine P{q}" for q in PERCENTILES), "ours − engine"], rows, "llrrrrrr")]
    gap = cur.get("ttft_gap_p90_ms")
    if gap is not None:
        parts.append(f"Per request, our TTFT minus the engine's: mean {fmt_num(cur.get('ttft_gap_mean_ms'))} "
                     f"ms, P90 {fmt_num(gap)} ms over {fmt_num(cur.get('engine_requests'))} requests.")
    if note is not None:
        parts.append("> **Whose clock moved:** " + escape_cell(note))
    return "\n\n".join(parts)
