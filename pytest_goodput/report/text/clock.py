"""The engine's clock as table rows: its latencies beside ours (``run``'s output and the Markdown report).

The engine's means are exact; its percentiles from histograms are the bucket that holds them
(``lo–hi``, ``> lo`` past the last bound); per-request percentiles are exact nearest ranks
(``docs/metrics.md``, "The engine's clock").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from tabulate import tabulate

from pytest_goodput.measure.clocks.summary import PERCENTILES, clock_summary
from pytest_goodput.report.vocabulary import fmt_num
from pytest_goodput.schema.runs.results import RunResult

__all__ = ["HEADERS", "clock_rows", "clock_text"]

#: (key in the summaries, label): the engine latencies shown.
_ROWS = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E latency"), ("queue", "queue time"))
HEADERS = ["latency", "side", "ours, mean", "engine, mean", *(f"engine P{q}" for q in PERCENTILES),
           "ours − engine"]


def _bucket(s: Mapping[str, float], m: str, q: int) -> str:
    lo, hi = s.get(f"engine_{m}_p{q}_lo_ms"), s.get(f"engine_{m}_p{q}_hi_ms")
    if lo is None:
        return "–"
    return f"{fmt_num(lo)}–{fmt_num(hi)}" if hi is not None else f"> {fmt_num(lo)}"


def _gap(ours: Optional[float], engine: Optional[float]) -> str:
    return "–" if ours is None or engine is None else f"{ours - engine:+.3g}"


def clock_rows(side: str, s: Mapping[str, float]) -> list[list[str]]:
    """One row per engine latency a summary has (ms), ``side`` naming whose run it is."""
    rows = []
    for m, label in _ROWS:
        eng, ours = s.get(f"engine_{m}_mean_ms"), s.get(f"client_{m}_mean_ms")
        if eng is not None:
            rows.append([label, side, fmt_num(ours), fmt_num(eng), *(_bucket(s, m, q) for q in PERCENTILES),
                         _gap(ours, eng)])
    if "engine_request_ttft_mean_ms" in s:
        ours, eng = s.get("client_ttft_mean_ms"), s["engine_request_ttft_mean_ms"]
        rows.append(["TTFT per request (queue + TTFT)", side, fmt_num(ours), fmt_num(eng),
                     *(fmt_num(s.get(f"engine_request_ttft_p{q}_ms")) for q in PERCENTILES), _gap(ours, eng)])
    return rows


def gap_line(s: Mapping[str, float]) -> Optional[str]:
    """Per request, ours minus the engine's TTFT (vLLM's per-request metrics); None without them."""
    if "ttft_gap_p90_ms" not in s:
        return None
    return (f"per request, our TTFT minus the engine's: mean {fmt_num(s.get('ttft_gap_mean_ms'))} ms, "
            f"P90 {fmt_num(s['ttft_gap_p90_ms'])} ms over {fmt_num(s.get('engine_requests'))} requests")


def clock_text(result: RunResult) -> Optional[str]:
    """``run``'s table of the engine's clock; None when the engine showed none ("no engine clock")."""
    s = clock_summary([result])
    rows = clock_rows("this run", s)
    if not rows:
        return None
    lines = ["the engine's clock (ms; engine P50/P90/P99: the histogram bucket that holds them)",
             tabulate(rows, headers=HEADERS, tablefmt="simple", disable_numparse=True)]
    gap = gap_line(s)
    return "\n".join(lines + ([gap] if gap else []))
