"""One worker's share of a run, summarized so that shares merge: counters, sketches, window ends.

A run too large to ship every record (``docs/ray.md``, "Runs too large to ship") is summarized
where it was measured. Everything that counts is kept exactly: requests issued and completed,
good requests, tokens, failures by kind, each percentile SLO's samples and samples over its
limit. Each distribution ``summarize`` reports (``metrics.metric_values``) and the send lag
go into a :class:`~pytest_goodput.stats.sketch.QuantileSketch` (exact count, mean, max;
percentiles within α). The run's window is kept as its ends (first and last arrival, first
send, last end; for a closed loop each user's first and last request and, 16 bytes a
request, every measured request's send and end, which the steady-state share needs). Parts
merge by adding, so the merge of every worker's part is the part of the whole run. Pure.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from pytest_goodput.measure.metrics import mark_good, metric_values
from pytest_goodput.measure.records.prefix_cache import by_turn
from pytest_goodput.measure.run_records import records_of
from pytest_goodput.schema.registry import PERCENTILE_SLO_RE
from pytest_goodput.schema.runs.results import RequestRecord
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.sketch import QuantileSketch

_INF = math.inf


def _lo(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None else a if b is None else min(a, b)


def _hi(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None else a if b is None else max(a, b)


@dataclass
class SloPart:
    """One percentile SLO: samples, samples over the limit, the +∞ ones, the finite values."""

    samples: int
    over: int
    infinite: int
    values: QuantileSketch


@dataclass
class RunPart:
    """A mergeable summary of some of a run's records (timestamps on one clock)."""

    alpha: float
    issued: int = 0  # measured requests
    completed: int = 0
    good: int = 0
    good_tokens: int = 0
    output_tokens: int = 0
    input_tokens: int = 0
    failures: Counter = field(default_factory=Counter)
    token_sources: set = field(default_factory=set)
    reasoning_sources: set = field(default_factory=set)
    cached_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_any: bool = False
    sketches: dict[str, QuantileSketch] = field(default_factory=dict)
    by_turn: dict[str, QuantileSketch] = field(default_factory=dict)
    slos: dict[str, SloPart] = field(default_factory=dict)
    first_arrival: Optional[float] = None
    last_arrival: Optional[float] = None
    first_send: Optional[float] = None
    last_end: Optional[float] = None
    sends: int = 0  # measured requests really sent, and the first and last send
    first_sent: Optional[float] = None
    last_sent: Optional[float] = None
    heads: int = 0  # closed loop: users' first requests ...
    last_head_send: Optional[float] = None
    tails: int = 0  # ... and last ones
    first_tail_end: Optional[float] = None
    last_warmup_end: Optional[float] = None
    span_starts: array = field(default_factory=lambda: array("d"))
    span_ends: array = field(default_factory=lambda: array("d"))  # NaN: never ended

    def sketch(self, name: str) -> QuantileSketch:
        if name not in self.sketches:
            self.sketches[name] = QuantileSketch(self.alpha)
        return self.sketches[name]

    def shifted(self, shift_s: float) -> "RunPart":
        """Every timestamp plus ``shift_s`` (a worker's clock onto the driver's)."""
        def mv(x: Optional[float]) -> Optional[float]:
            return None if x is None else x + shift_s
        for name in ("first_arrival", "last_arrival", "first_send", "last_end", "last_head_send",
                     "first_tail_end", "last_warmup_end", "first_sent", "last_sent"):
            setattr(self, name, mv(getattr(self, name)))
        self.span_starts = array("d", [x + shift_s for x in self.span_starts])
        self.span_ends = array("d", [x + shift_s for x in self.span_ends])
        return self

    def merge(self, o: "RunPart") -> "RunPart":
        """Add ``o`` into this part (same α)."""
        for name in ("issued", "completed", "good", "good_tokens", "output_tokens", "input_tokens",
                     "cached_tokens", "cached_prompt_tokens", "heads", "tails", "sends"):
            setattr(self, name, getattr(self, name) + getattr(o, name))
        self.failures.update(o.failures)
        self.token_sources |= o.token_sources
        self.reasoning_sources |= o.reasoning_sources
        self.cached_any = self.cached_any or o.cached_any
        for mine, theirs in ((self.sketches, o.sketches), (self.by_turn, o.by_turn)):
            for k, s in theirs.items():
                mine.setdefault(k, QuantileSketch(self.alpha)).merge(s)
        for k, sp in o.slos.items():
            if k in self.slos:
                a = self.slos[k]
                a.samples, a.over, a.infinite = a.samples + sp.samples, a.over + sp.over, a.infinite + sp.infinite
                a.values.merge(sp.values)
            else:
                self.slos[k] = sp
        self.first_arrival, self.first_send = _lo(self.first_arrival, o.first_arrival), _lo(self.first_send, o.first_send)
        self.last_arrival, self.last_end = _hi(self.last_arrival, o.last_arrival), _hi(self.last_end, o.last_end)
        self.last_head_send = _hi(self.last_head_send, o.last_head_send)
        self.first_sent, self.last_sent = _lo(self.first_sent, o.first_sent), _hi(self.last_sent, o.last_sent)
        self.first_tail_end = _lo(self.first_tail_end, o.first_tail_end)
        self.last_warmup_end = _hi(self.last_warmup_end, o.last_warmup_end)
        self.span_starts.extend(o.span_starts)
        self.span_ends.extend(o.span_ends)
        return self


def offered_rate(p: RunPart) -> Optional[float]:
    """``drive.offered_rate`` of the part's requests: (n - 1) over the span of their sends."""
    if p.sends < 2 or p.first_sent is None or p.last_sent is None or p.last_sent <= p.first_sent:
        return None
    return (p.sends - 1) / (p.last_sent - p.first_sent)


def _slo_values(r: RequestRecord, metric: str) -> Iterable[float]:
    """A record's samples for a percentile SLO, +∞ for a failure (``metrics.percentile_checks``)."""
    if metric == "itl":
        return [_INF] if not r.ok else r.itl_ms
    v = getattr(r, f"{metric}_ms")
    if metric.endswith("tpot") and r.ok and v is None:
        tokens = {"reasoning_tpot": r.reasoning_tokens, "answer_tpot": r.answer_tokens}.get(metric, r.output_tokens)
        if tokens < 2:
            return []
    return [_INF if not r.ok or v is None else v]


def _start(r: RequestRecord) -> float:
    return r.sent_at if r.sent_at is not None else r.scheduled_at


def part_of(records: Sequence[RequestRecord], spec: ScenarioSpec, alpha: float, chains: bool = True) -> RunPart:
    """The part of ``records`` (one worker's share of a phase, on its own clock).

    ``chains=False`` leaves out a closed loop's user chains, which need the whole share at
    once: a share summarized in slices adds them with :func:`add_chains`.
    """
    records = mark_good(list(records), spec)
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    p = RunPart(alpha, issued=len(measured), completed=len(ok))
    p.output_tokens = sum(r.output_tokens for r in ok)
    p.input_tokens = sum(r.prompt_tokens or 0 for r in ok)
    good = [r for r in measured if r.good]
    p.good, p.good_tokens = len(good), sum(r.output_tokens for r in good)
    p.failures.update(r.error_kind for r in measured if not r.ok and r.error_kind)
    p.token_sources = {r.token_count_source for r in ok}
    p.reasoning_sources = {r.reasoning_token_source for r in ok if r.reasoning_token_source}
    for r in ok:
        if r.cached_tokens is not None and r.prompt_tokens:
            p.cached_any = True
            p.cached_tokens += r.cached_tokens
            p.cached_prompt_tokens += r.prompt_tokens
    for name, values in metric_values(ok).items():
        p.sketch(name).extend(values)
    p.sketch("send_lag_ms").extend(r.send_lag_ms for r in measured)
    p.by_turn = {t: QuantileSketch(alpha).extend(v) for t, v in by_turn(ok).items()}
    for name, limit in spec.percentile_slos.items():
        m = PERCENTILE_SLO_RE.match(name)
        assert m is not None  # validated by the spec
        sp = SloPart(0, 0, 0, QuantileSketch(alpha))
        for r in measured:
            for v in _slo_values(r, m.group(1)):
                sp.samples += 1
                sp.over += v > limit
                sp.infinite += v == _INF
                sp.values.add(v)
        p.slos[name] = sp
    if measured:
        arrivals = [r.scheduled_at for r in measured]
        p.first_arrival, p.last_arrival = min(arrivals), max(arrivals)
        p.first_send = min(_start(r) for r in measured)
        p.last_end = max((r.end_at for r in measured if r.end_at is not None), default=None)
        sent = [r.sent_at for r in measured if r.sent_at is not None]
        p.sends, p.first_sent, p.last_sent = len(sent), min(sent, default=None), max(sent, default=None)
    if chains:
        add_chains(p, records, spec)
    return p


def add_chains(p: RunPart, records: Sequence[RequestRecord], spec: ScenarioSpec) -> RunPart:
    """A closed loop's users' first and last requests and every measured send and end, into ``p``."""
    if spec.scenario == "concurrency":
        measured = [r for r in records if not r.warmup]
        ends = {r.end_at for r in records if r.end_at is not None}
        scheduled = {r.scheduled_at for r in records}
        heads = [r for r in records if r.scheduled_at not in ends]
        tails = [r.end_at for r in records if r.end_at is not None and r.end_at not in scheduled]
        p.heads, p.tails = len(heads), len(tails)
        p.last_head_send = max((_start(r) for r in heads), default=None)
        p.first_tail_end = min(tails, default=None)
        p.last_warmup_end = max((r.end_at for r in records if r.warmup and r.end_at is not None), default=None)
        p.span_starts = array("d", [_start(r) for r in measured])
        p.span_ends = array("d", [math.nan if r.end_at is None else r.end_at for r in measured])
    return p


__all__ = ["RunPart", "SloPart", "add_chains", "offered_rate", "part_of", "records_of"]
