"""The engine's own view of a run: its ``/metrics`` gauges sampled during the run, and a summary.

Why: a gauge read after the run (queue length, batch size, KV-cache use) shows an idle
engine; the cause of a regression is what the engine held *while* it served. A sampler
thread scrapes ``/metrics`` every ``interval_s`` during the run and keeps the mean and the
maximum of each gauge. The summary of a measurement is what reports put side by side with
the baseline's ("why" a test regressed), and what a baseline records under ``server.*``.
"""

from __future__ import annotations

import http.client
import re
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Callable, Optional

from pytest_goodput.engines.prometheus import GAUGES, neutral
from pytest_goodput.judge.attribution import with_attribution
from pytest_goodput.measure.clocks.summary import clock_summary
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.side import Side

#: Seconds between scrapes during a run: enough samples for a mean, little load on client and engine.
SAMPLE_INTERVAL_S = 1.0
#: Prefix of server numbers in a baseline run's ``summary``.
PREFIX = "server."
#: The summary's keys in report order (see ``docs/metrics.md``, "Server metrics").
SUMMARY_KEYS: tuple[str, ...] = (
    "waiting_mean", "waiting_max", "running_mean", "running_max",
    "kv_cache_usage_mean", "kv_cache_usage_max", "preemptions", "prefix_cache_hit_rate",
    "spec_decode_acceptance_rate",
)

Scrape = Callable[[], Optional[Mapping[str, float]]]

#: One gauge sample line of any engine's series: ``name{labels} value``.
_GAUGE_LINE = re.compile(
    r"^(" + "|".join(re.escape(n) for names in GAUGES.values() for n in names) + r")(?:\{[^}]*\})?"
    r"[ \t]+([-+0-9.eEinfINFaN]+)", re.M)


class GaugeScraper:
    """A lean scrape for the sampler: one kept-alive connection, and a regular expression
    that picks only the gauge lines out of the text (a vLLM ``/metrics`` has thousands of
    histogram lines; parsing them all in the client's process would hold the GIL and delay
    the client's event loop). Values of one series are summed over label sets, as
    :func:`~pytest_goodput.engines.prometheus.parse` does."""

    def __init__(self, metrics_url: str, timeout_s: float = 2.0) -> None:
        u = urllib.parse.urlsplit(metrics_url)
        self._path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        self._conn = cls(u.hostname or "127.0.0.1", u.port, timeout=timeout_s)

    def __call__(self) -> Optional[dict[str, float]]:
        try:
            self._conn.request("GET", self._path)
            resp = self._conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException):
            self._conn.close()
            return None
        if resp.status != 200:
            return None
        out: dict[str, float] = {}
        for name, value in _GAUGE_LINE.findall(body.decode("utf-8", "replace")):
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                continue
        return out

    def close(self) -> None:
        self._conn.close()


class GaugeSampler:
    """Scrape ``/metrics`` in a thread until stopped; ``stop()`` returns ``<gauge>_mean``/``_max``.

    The first scrape is one interval after the start (an idle engine at t=0 says nothing).
    """

    def __init__(self, scrape: Scrape, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._scrape = scrape
        self._interval = interval_s
        self._stop = threading.Event()
        self._samples: list[dict[str, float]] = []
        self._thread = threading.Thread(target=self._loop, name="goodput-metrics", daemon=True)

    def start(self) -> "GaugeSampler":
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            sample = self._scrape()
            if sample is not None:
                self._samples.append(neutral(sample))

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(timeout=10.0)
        return gauge_stats(self._samples)


def gauge_stats(samples: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean and maximum of each gauge over the samples that have it, and the sample count."""
    out: dict[str, float] = {}
    for key in GAUGES:
        values = [s[key] for s in samples if key in s]
        if values:
            out[f"{key}_mean"] = sum(values) / len(values)
            out[f"{key}_max"] = max(values)
    if out:
        out["scrapes"] = float(len(samples))
    return out


def _mean(values: list[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def server_summary(runs: Sequence[RunResult]) -> dict[str, float]:
    """One measurement's server numbers: gauges' means averaged over runs, their maxima the
    largest; preemptions per run; prefix-cache hit rate = hits / lookups over all runs
    (lookups: the engine's prefix-cache queries, else its prompt tokens); speculative
    decoding's acceptance rate = accepted / draft tokens over all runs."""
    metrics = [r.server_metrics for r in runs if r.server_metrics]
    out: dict[str, float] = {}
    for key in GAUGES:
        means = [m[f"{key}_mean"] for m in metrics if f"{key}_mean" in m]
        if means:
            out[f"{key}_mean"] = sum(means) / len(means)
            out[f"{key}_max"] = max(m[f"{key}_max"] for m in metrics if f"{key}_max" in m)
    preemptions = _mean([m["preemptions"] for m in metrics if "preemptions" in m])
    if preemptions is not None:
        out["preemptions"] = preemptions
    hits = [m for m in metrics if "prefix_cache_hits" in m]
    lookups = sum(m.get("prefix_cache_queries", m.get("prompt_tokens", 0.0)) for m in hits)
    if hits and lookups > 0:
        out["prefix_cache_hit_rate"] = sum(m["prefix_cache_hits"] for m in hits) / lookups
    spec = [m for m in metrics if m.get("spec_decode_draft_tokens")]
    if spec:  # speculative decoding: accepted / draft tokens over all runs
        out["spec_decode_acceptance_rate"] = (sum(m.get("spec_decode_accepted_tokens", 0.0) for m in spec)
                                              / sum(m["spec_decode_draft_tokens"] for m in spec))
    out.update(clock_summary(runs))  # the engine's clock beside ours (measure/clocks/summary.py)
    return out


def to_summary(server: Mapping[str, float]) -> dict[str, Optional[float]]:
    """Server numbers as a baseline run's ``summary`` keeps them (``server.<key>``)."""
    return {PREFIX + k: v for k, v in server.items()}


#: Server numbers every stored session keeps (judged per session); the others only the newest.
PER_SESSION = frozenset({"spec_decode_acceptance_rate"})


def without_server_view(session: Session) -> Session:
    """``session`` as an older session of a baseline keeps it: the engine's own view (its
    gauges and clocks: the report shows the newest session's) dropped, what is judged per
    session kept."""
    kept = {k: v for k, v in session.summary.items()
            if not k.startswith(PREFIX) or k[len(PREFIX):] in PER_SESSION}
    return session if len(kept) == len(session.summary) else session.model_copy(update={"summary": kept})


def from_summary(summary: Mapping[str, Optional[float]]) -> dict[str, float]:
    """The server numbers a baseline run recorded (empty for baselines recorded without them)."""
    return {k[len(PREFIX):]: v for k, v in summary.items() if k.startswith(PREFIX) and v is not None}


def side_summary(side: Optional[Side]) -> dict[str, float]:
    """The server numbers of a side's newest session: from its runs when it has them (a fresh
    run, a ``--goodput-json`` or ``run --json`` file), else as its baseline recorded them."""
    latest = side.newest if side is not None else None
    if latest is None:
        return {}
    return server_summary(latest.results) if latest.results else from_summary(latest.summary)


def with_server(outcome: TestOutcome, new: Side, base: Optional[Side]) -> TestOutcome:
    """A ``compare`` outcome with both sides' server numbers and whose clock moved, as the
    plugin's gate gives them (a capacity search probes other loads: none)."""
    if outcome.scenario == "capacity":
        return outcome
    cur, old = side_summary(new), side_summary(base)
    if cur or old:
        outcome = outcome.model_copy(update={"server": {"current": cur or None, "baseline": old or None}})
    return with_attribution(outcome)  # without either: a moved TTFT says there is no engine clock
