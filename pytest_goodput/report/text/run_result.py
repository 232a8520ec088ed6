"""One run's result as plain text: the CLI's table of its numbers (``python -m pytest_goodput run``)."""

from __future__ import annotations

from typing import Optional, Sequence

from tabulate import tabulate

from pytest_goodput.measure.sketched import sketch_note
from pytest_goodput.report.text.clock import clock_text
from pytest_goodput.report.text.slices import degradation_text, steady_text
from pytest_goodput.schema.runs.results import Distribution, ReceiveTimestamps, RunResult


def _f(v: Optional[float], digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def receive_line(ts: ReceiveTimestamps) -> str:
    """Which clock stamped the arrivals, and how much of the run the capture mapped."""
    if ts.source == "read":
        return f"read time ({ts.reason})" if ts.reason else "read time"
    frac = ts.mapped_fraction
    return (f"packet capture: {ts.events_mapped:,} / {ts.events:,} events mapped"
            + (f" ({frac:.1%})" if frac is not None else "")
            + f", {ts.responses_mapped} / {ts.responses} responses; receive lag p50 "
            f"{_f(ts.receive_lag_ms.p50, 2)} / p99 {_f(ts.receive_lag_ms.p99, 2)} ms; "
            f"{ts.packets_dropped} packets dropped; clock error <= {_f(ts.clock_error_ms, 4)} ms")


def receive_note(runs: Sequence[RunResult]) -> Optional[str]:
    """One note for a test's runs: which clock stamped arrivals, when the capture was asked
    for (``--goodput-capture`` auto or on); the events mapped are summed over the runs."""
    stamps = [r.receive_timestamps for r in runs
              if r.receive_timestamps is not None and r.spec.capture != "off"]
    if not stamps:  # capture was not asked for: nothing to say
        return None
    captured = [t for t in stamps if t.source == "capture"]
    if not captured:
        reasons = sorted({t.reason for t in stamps if t.reason})
        return "receive times: read time" + (f" ({'; '.join(reasons)})" if reasons else "")
    events, mapped = sum(t.events for t in captured), sum(t.events_mapped for t in captured)
    exact = sum(t.exact for t in captured)
    return (f"receive times: packet capture in {len(captured)} of {len(stamps)} runs, {mapped:,} / "
            f"{events:,} events mapped; {exact} run(s) fully mapped, where event-loop lag is not "
            "held against the run (docs/capture.md)")


def render_result(result: RunResult) -> str:
    spec = result.spec
    load = ", ".join(f"{k}={v:g}" for k, v in result.load.items()) or "-"
    head = [
        ["scenario", spec.scenario],
        ["load", load],
        ["requests (measured / ok)", f"{result.issued} / {result.completed}"],
        ["window", f"{result.window.seconds:.2f} s"],
        ["throughput", f"{_f(result.throughput.requests_per_s, 2)} req/s, "
         f"{_f(result.throughput.output_tokens_per_s)} out tok/s, "
         f"{_f(result.throughput.total_tokens_per_s)} total tok/s"],
        ["output tokens counted by", result.token_count_source
         + (" (approximate)" if result.token_count_source == "chunks" else "")],
    ]
    if result.interrupted is not None:  # partial evidence, first where it cannot be missed
        head.insert(0, ["PARTIAL RESULT", result.interrupted.describe() + " (not judged)"])
    g = result.goodput
    if g is not None:
        head.append(["goodput", f"{_f(g.requests_per_s, 2)} req/s, {_f(g.tokens_per_s)} tok/s, "
                     f"attainment {g.attainment:.1%} (target {g.target:.0%}: "
                     f"{'met' if g.met else 'NOT met'})"])
    if result.failures:
        head.append(["failures", ", ".join(f"{k}={v}" for k, v in result.failures.items())])
    if result.prefix_cache_hit_rate is not None:
        head.append(["prefix cache", f"{result.prefix_cache_hit_rate:.1%} of prompt tokens cached "
                     f"({result.cached_prompt_tokens:,} tokens)"])
    c = result.client
    head.append(["client", ("valid" if c.valid else "INVALID: " + "; ".join(c.reasons))
                 + f" (cpu {c.cpu_utilization:.0%}, send lag p99 {_f(result.send_lag_ms.p99, 2)} ms)"])
    note = sketch_note(result)
    if note is not None:
        head.append(["sketched", note])
    head += [["client note", n] for n in c.notes]  # retries, a failing engine, clock offsets (Ray)
    ts = result.receive_timestamps
    if ts is not None:
        head.append(["receive times", receive_line(ts)])
    out = [tabulate(head, tablefmt="plain")]

    def row(name: str, d: Distribution) -> list[str]:
        return [name, str(d.count)] + [_f(getattr(d, k), 2) for k in ("mean", "p50", "p90", "p95", "p99", "max")]

    m = result.metrics
    rows = [row("TTFT ms", m.ttft_ms), row("TPOT ms", m.tpot_ms), row("ITL ms", m.itl_ms),
            row("E2E ms", m.e2e_ms), row("send lag ms", result.send_lag_ms)]
    # conversations: TTFT per turn and over turns 2+ (docs/metrics.md)
    rows[1:1] = [row(f"TTFT turn {t} ms", d) for t, d in m.ttft_ms_by_turn.items()] + (
        [row("TTFT turns 2+ ms", m.ttft_later_ms)] if m.ttft_later_ms.count else [])
    if m.reasoning_tokens.mean:  # a reasoning model: its answer's latency and each phase's pace
        rows[1:1] = [row("TTFO ms", m.ttfo_ms), row("reasoning tokens", m.reasoning_tokens),
                     row("reasoning TPOT ms", m.reasoning_tpot_ms),
                     row("answer TPOT ms", m.answer_tpot_ms)]
    out.append(tabulate(rows, headers=["metric", "n", "mean", "p50", "p90", "p95", "p99", "max"],
                        tablefmt="simple", disable_numparse=True))
    clock = clock_text(result)  # the engine's own latencies beside ours, when it exports them
    if clock is not None:
        out.append(clock)
    if result.percentile_slos:
        slo_rows = [[c.name, _f(c.limit_ms), _f(c.value_ms, 2), "ok" if c.ok else "FAILED",
                     "yes" if c.proven else f"no (needs {c.requests_needed})"]
                    for c in result.percentile_slos]
        out.append(tabulate(slo_rows, headers=["SLO", "limit", "value", "status", "proven (99%)"],
                            tablefmt="simple", disable_numparse=True))
    if result.slices is not None:
        out.append(slices_text(result))
    return "\n\n".join(out)


def slices_text(result: RunResult) -> str:
    """The run's time slices as a table, with where the steady state began and the degradation."""
    s = result.slices
    assert s is not None
    head = f"time slices: {len(s.slices)} x {s.slice_s:g} s, {steady_text(s)} ({s.steady_note})"
    deg = degradation_text(s)
    rows = [[str(i + 1), f"{x.start_s:g}", f"{x.seconds:g}", str(x.completed), str(x.failed),
             _f(x.output_tokens_per_s), _f(x.ttft_ms_p50, 2), _f(x.tpot_ms_p50, 2),
             "steady from here" if i == s.steady_from else ("too few requests" if x.too_few else "")]
            for i, x in enumerate(s.slices)]
    table = tabulate(rows, headers=["slice", "start s", "s", "ok", "failed", "out tok/s",
                                    "TTFT p50", "TPOT p50", ""], tablefmt="simple", disable_numparse=True)
    return "\n".join([head, *([deg] if deg else []), table])
