"""The metric registry: what every metric the product judges or prints *is*.

One entry per metric path (``goodput.requests_per_s``, ``metrics.ttft_ms.p99``, …) with its
label, unit, which way is good, how its noise is modelled, its default tolerance and its
prior run-to-run spread, and whether a test may gate on it. Spec validation, default gates,
verdicts and every report read it here; nothing else guesses what a metric is from its name.

Pure: no I/O, no imports from the rest of the product.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional

from pytest_goodput.schema.precedence import pick
from pytest_goodput.schema.scenario.spec_fields import SpecFields


Direction = Literal["higher", "lower"]
#: How a metric's sampling noise is modelled (``docs/statistics.md``): a binomial proportion,
#: a count over a window, an order statistic, a mean, a whole-measurement shape (a
#: frontier or a capacity, judged by their own comparisons), or a change within one run
#: (time slices, judged against its own slice-to-slice noise: ``judge/shapes/degradation.py``).
Kind = Literal["proportion", "rate", "percentile", "mean", "shape", "within_run"]


@dataclass(frozen=True)
class MetricInfo:
    """One metric: how to show it, which way is good, how to judge it."""

    path: str
    label: str
    unit: str  # "ms", "req/s", "tok/s", "%" (a fraction shown as a percent) or ""
    direction: Direction
    kind: Kind
    tolerance: float  # default relative tolerance when the test sets none
    run_cv: float  # prior run-to-run coefficient of variation (noise on a shared machine)
    gateable: bool  # may be named in ``gate=`` (recomputable from per-request samples)
    tolerable: bool  # may be named in ``tolerances=``
    percentile: Optional[float] = None  # for kind "percentile": P in (0, 100]
    #: Prior CV of a sitting's level (another day, machine or boot) that sessions recorded
    #: back to back cannot show (``DAY_CV``).
    day_cv: float = 0.0


#: Latency columns of a run and how reports name them.
#: TTFO: time to first output (answer) token, after a reasoning model's reasoning phase.
#: Reasoning and answer TPOT: TPOT over each phase of a reasoning model's output.
LATENCIES: dict[str, str] = {"ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "itl": "ITL",
                             "e2e": "E2E", "reasoning_tpot": "reasoning TPOT",
                             "answer_tpot": "answer TPOT"}
#: Latency columns over a subset of the requests: gateable, not SLO keywords. ``ttft_later``:
#: TTFT of turns 2 and later of multi-turn conversations (what a prefix cache speeds up).
SUBSET_LATENCIES: dict[str, str] = {"ttft_later": "TTFT turns 2+"}
_ALL_LATENCIES = {**LATENCIES, **SUBSET_LATENCIES}
#: Latency columns the per-request samples of a baseline keep (ITL is per token, not stored).
SAMPLED_LATENCIES: tuple[str, ...] = ("ttft_ms", "ttfo_ms", "tpot_ms", "e2e_ms",
                                      "reasoning_tpot_ms", "answer_tpot_ms", "ttft_later_ms")
#: Statistics every latency distribution reports, in report order.
STATS: tuple[str, ...] = ("p50", "p90", "p95", "p99", "mean", "max")

#: The output guard's metric: the share of prompts whose output matches the baseline's.
OUTPUT_AGREEMENT = "output.agreement"
#: Default tolerance for a metric without one of its own.
DEFAULT_TOLERANCE = 0.05
#: Prior session-to-session CV by kind: what a shared machine moves a metric between two
#: sessions before any history says otherwise. Throughput and TPOT follow machine speed
#: about 1:1; TTFT's spread is mostly queueing against the arrival schedule (present on a
#: quiet machine, amplified near the knee), so its percentiles and mean get a prior of
#: their own (docs/decisions.md).
RUN_CV: dict[str, float] = {"proportion": 0.015, "rate": 0.015, "percentile": 0.02, "mean": 0.02,
                            "shape": 0.03, "within_run": 0.0}
RUN_CV_BY_LATENCY: dict[str, float] = {"ttft_ms": 0.03, "ttfo_ms": 0.03, "ttft_later_ms": 0.03}
#: Prior CV between sittings (docs/statistics.md, "Sittings"): how far a whole recording's
#: level moves on another day, machine or boot of the same hardware class — what sessions
#: recorded back to back share and so cannot measure. TPOT and throughput follow machine
#: speed and moved by under 1 % between machines of one kind; TTFT follows the client's and
#: the engine's scheduling, which moved the example suite's P99 TTFT by 8-20 % between two
#: machines of one kind (an SD near 8 % per sitting; docs/decisions.md).
DAY_CV: dict[str, float] = {"proportion": 0.01, "rate": 0.01, "percentile": 0.01, "mean": 0.01,
                            "shape": 0.02, "within_run": 0.0}
DAY_CV_BY_LATENCY: dict[str, float] = {"ttft_ms": 0.08, "ttfo_ms": 0.08, "ttft_later_ms": 0.08}
DAY_CV_BY_PATH: dict[str, float] = {"error_rate": 0.002}
#: Tolerances that differ from :data:`DEFAULT_TOLERANCE`.
TOLERANCES: dict[str, float] = {
    "error_rate": 0.005,  # absolute: half a percentage point
    "goodput.attainment": 0.02,
    # TTFT's tail is queueing: at a few hundred requests a P99 moves 3-6 % between sessions
    # of one engine, so 10 % is below what a default gate can resolve (docs/decisions.md).
    "metrics.ttft_ms.p99": 0.15,
    # TTFO is TTFT's queueing plus the whole reasoning phase: at least as noisy.
    "metrics.ttfo_ms.p99": 0.15,
    "metrics.ttft_later_ms.p99": 0.15,
    "metrics.tpot_ms.p99": 0.10,
    # The median of TTFT is queueing too, but over half the requests: a default gate at 10 %
    # holds A/A (bench/gate_quality.py, the median arm).
    "metrics.ttft_ms.p50": 0.10,
    # The middle (docs/decisions.md, "The middle is gated"): P90 TTFT is queueing as the
    # median is, with a tenth of the requests above it; P90 TPOT follows machine speed as the
    # median does. Both hold A/A at these (bench/middle.py).
    "metrics.ttft_ms.p90": 0.10,
    "metrics.tpot_ms.p90": 0.05,
    # A search resolves capacity to capacity_resolution (5 %): two searches can only tell
    # apart changes of about twice that.
    "capacity.requests_per_s": 0.10,
    # Speculative decoding's acceptance: a session's rate moved by about 1 % between sessions
    # of one simulator at concurrency 1-4 (docs/metrics.md); 5 % is a lost draft in twenty.
    "spec_decode.acceptance_rate": 0.05,
    # The reasoning length a model chose; the judge names changes beyond this (and
    # significant) as a workload change (judge/workload.py).
    "metrics.reasoning_tokens.mean": 0.10,
    # Degradation within a run (time slices): absolute, in points of relative change between
    # the first steady slices and the last. A slow machine wander (CV 3 %) moves one run's
    # TPOT degradation by an SD of 6.5 points at 60 % load and TTFT's by 8 (queueing): the
    # tolerances keep an A/A inside them (bench/degradation_gate.py).
    "degradation.output_tokens_per_s": 0.10,
    "degradation.ttft_ms.p50": 0.25,
    "degradation.tpot_ms.p50": 0.15,
    # absolute: a drop of two points of agreement below the baseline's own, beyond its noise
    "output.agreement": 0.02,
}

#: Degradation within a run (``docs/metrics.md``, "Degradation within the run"): the last
#: usable time slice against the first steady one. Gated by default when ``slice_s`` is set.
DEGRADATION: tuple[str, ...] = ("degradation.output_tokens_per_s", "degradation.ttft_ms.p50",
                                "degradation.tpot_ms.p50")

#: Percentile SLO keywords of the spec, e.g. ``ttft_p99_ms``.
_COLUMNS = "|".join(LATENCIES)
PERCENTILE_SLO_RE = re.compile(rf"^({_COLUMNS})_p(\d+(?:\.\d+)?)_ms$")
_LATENCY_PATH_RE = re.compile(rf"^metrics\.({'|'.join(_ALL_LATENCIES)})_ms\.(mean|max|p(\d+(?:\.\d+)?))$")
_SHORT_STAT_RE = re.compile(rf"^({_COLUMNS})_ms\.(p\d+(?:\.\d+)?|mean|max)$")


#: Prior run-to-run spreads that differ from their kind's: the error rate's is absolute.
RUN_CV_BY_PATH: dict[str, float] = {"error_rate": 0.002, "spec_decode.acceptance_rate": 0.04}


def _info(path: str, label: str, unit: str, direction: Direction, kind: Kind, *,
          gateable: bool = True, tolerable: bool = True) -> MetricInfo:
    return MetricInfo(path=path, label=label, unit=unit, direction=direction, kind=kind,
                      tolerance=TOLERANCES.get(path, DEFAULT_TOLERANCE),
                      run_cv=RUN_CV_BY_PATH.get(path, RUN_CV[kind]),
                      day_cv=DAY_CV_BY_PATH.get(path, DAY_CV[kind]),
                      gateable=gateable, tolerable=tolerable)


#: Speculative decoding's acceptance rate, accepted / draft tokens per session from the engine's
#: counters (``docs/metrics.md``, "Tokens per chunk (speculative decoding)"); judged whenever
#: both sides drafted (``judge/scalar/acceptance.py``).
ACCEPTANCE = "spec_decode.acceptance_rate"

#: Mean reasoning tokens per completed request (``docs/metrics.md``, "Reasoning").
REASONING_MEAN = "metrics.reasoning_tokens.mean"

#: Per-request means that describe a workload's images and a stream's chunking:
#: (path, label, unit, which way is good).
WORKLOAD_SHAPE: tuple[tuple[str, str, str, Direction], ...] = (
    ("metrics.images.mean", "images/request", "", "lower"),
    ("metrics.request_bytes.mean", "request bytes", "B", "lower"),
    ("metrics.image_tokens.mean", "image tokens/request", "tok", "lower"),
    ("metrics.tokens_per_chunk.mean", "tokens/chunk", "tok", "higher"),
)
#: Key metrics of runs with images, and of runs streaming several tokens per chunk.
IMAGE_KEY_METRICS: tuple[str, ...] = ("metrics.images.mean", "metrics.request_bytes.mean",
                                      "metrics.image_tokens.mean")
CHUNK_KEY_METRICS: tuple[str, ...] = ("metrics.tokens_per_chunk.mean",)

#: Metrics with a fixed path, in report order (latencies follow, see :func:`ordered`).
FIXED: dict[str, MetricInfo] = {
    m.path: m
    for m in (
        _info("goodput.requests_per_s", "goodput", "req/s", "higher", "rate"),
        _info("goodput.tokens_per_s", "token goodput", "tok/s", "higher", "rate"),
        _info("goodput.attainment", "SLO attainment", "%", "higher", "proportion"),
        _info("throughput.requests_per_s", "throughput", "req/s", "higher", "rate"),
        _info("throughput.output_tokens_per_s", "output throughput", "tok/s", "higher", "rate"),
        _info("throughput.total_tokens_per_s", "total throughput", "tok/s", "higher", "rate"),
        # Whole-measurement results of sweeps and capacity searches: judged by their own
        # comparisons, so they take a tolerance but cannot be named in ``gate=``.
        _info("frontier_throughput", "frontier throughput", "tok/s", "higher", "shape", gateable=False),
        _info("capacity.requests_per_s", "capacity", "req/s", "higher", "shape", gateable=False),
        # Where a sweep's saturation began (docs/frontiers.md): its load, and its step in the
        # sweep (len(sweep): no measured point past saturation), judged by a rule of its own.
        _info("sweep.saturation_load", "saturation began at", "", "higher", "shape", gateable=False,
              tolerable=False),
        _info("sweep.saturation_step", "saturation step", "", "higher", "shape", gateable=False,
              tolerable=False),
        # Headline numbers of a sweep, and the SLO checks of a run: shown, never compared.
        _info("frontier.max_output_tokens_per_s", "max frontier throughput", "tok/s", "higher",
              "shape", gateable=False, tolerable=False),
        _info("frontier.points", "frontier points", "", "higher", "shape", gateable=False,
              tolerable=False),
        # Compared in every test (failures are never invisible); judged on an absolute scale.
        _info("error_rate", "error rate", "%", "lower", "proportion", gateable=False),
        _info("attainment", "attainment", "%", "higher", "proportion", gateable=False, tolerable=False),
        # The output guard (docs/metrics.md, "Output agreement"): compared in every test whose
        # sampling is deterministic, against the baseline sessions' own agreement; absolute.
        _info(OUTPUT_AGREEMENT, "output agreement", "%", "higher", "proportion", gateable=False),
        # Reasoning models: how long the model thinks, per completed request. A workload
        # descriptor more than a speed; gateable (fewer is cheaper) and read by the judge's
        # "thinks longer" note.
        _info(REASONING_MEAN, "reasoning tokens/request", "tok", "lower", "mean"),
        # Images and speculative decoding: what the workload was and how the engine streamed
        # it; shown and recorded, never compared (docs/metrics.md).
        *(_info(path, label, unit, direction, "mean", gateable=False, tolerable=False)
          for path, label, unit, direction in WORKLOAD_SHAPE),
        # Speculative decoding: one number per session from the engine's counters, judged
        # beside throughput whenever both sides drafted; a tolerance, never named in gate=.
        _info(ACCEPTANCE, "spec-decode acceptance", "%", "higher", "shape", gateable=False),
        # Time slices: the change from the first steady slice to the last, as a fraction.
        _info("degradation.output_tokens_per_s", "degradation: output throughput", "%", "higher",
              "within_run"),
        _info("degradation.ttft_ms.p50", "degradation: TTFT P50", "%", "lower", "within_run"),
        _info("degradation.tpot_ms.p50", "degradation: TPOT P50", "%", "lower", "within_run"),
    )
}

#: Headline numbers kept in reports and baseline summaries, by path into a RunResult.
KEY_METRICS: tuple[str, ...] = (
    "goodput.requests_per_s",
    "goodput.tokens_per_s",
    "goodput.attainment",
    "throughput.requests_per_s",
    "throughput.output_tokens_per_s",
    "metrics.ttft_ms.p50",
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.p50",
    "metrics.tpot_ms.p99",
    "metrics.itl_ms.p99",
    "metrics.e2e_ms.p99",
)

GATEABLE_HELP = (
    "goodput.requests_per_s|tokens_per_s|attainment, "
    "throughput.requests_per_s|output_tokens_per_s|total_tokens_per_s, "
    "metrics.<ttft_ms|ttfo_ms|tpot_ms|e2e_ms|reasoning_tpot_ms|answer_tpot_ms|ttft_later_ms>"
    ".<mean|max|pNN>, "
    f"{REASONING_MEAN}, "
    "degradation.<output_tokens_per_s|ttft_ms.p50|tpot_ms.p50> (with slice_s=)"
)
#: Key metrics of runs whose model reasoned (kept only then, so other runs' headlines stay as
#: they were).
REASONING_KEY_METRICS: tuple[str, ...] = ("metrics.ttfo_ms.p99", REASONING_MEAN,
                                           "metrics.answer_tpot_ms.p99")
TOLERABLE_EXTRA = tuple(p for p, m in FIXED.items() if m.tolerable and not m.gateable)


class UnknownMetric(ValueError):
    """A metric path the registry does not know."""


def canonical(name: str) -> str:
    """The path form of a metric name: ``ttft_p99_ms`` and ``ttft_ms.p99`` → ``metrics.ttft_ms.p99``."""
    m = PERCENTILE_SLO_RE.match(name)
    if m:
        return f"metrics.{m.group(1)}_ms.p{m.group(2)}"
    if _SHORT_STAT_RE.match(name):
        return f"metrics.{name}"
    return name


def _latency(path: str) -> Optional[MetricInfo]:
    m = _LATENCY_PATH_RE.match(path)
    if not m:
        return None
    column, stat, pct_text = m.group(1), m.group(2), m.group(3)
    if stat == "mean":
        kind: Kind = "mean"
        pct = None
    else:
        kind = "percentile"
        pct = 100.0 if stat == "max" else float(pct_text)
        if not 0 < pct <= 100:
            return None
    label = f"{_ALL_LATENCIES[column]} {stat.upper() if stat.startswith('p') else stat}"
    run_cv = RUN_CV_BY_LATENCY.get(f"{column}_ms", RUN_CV[kind])
    # A path is split on dots, so only whole percentiles can be gated (P99.9 can be an SLO).
    whole = pct_text is None or pct_text.isdigit()
    gateable = f"{column}_ms" in SAMPLED_LATENCIES and whole
    return MetricInfo(path=path, label=label, unit="ms", direction="lower", kind=kind,
                      tolerance=TOLERANCES.get(path, DEFAULT_TOLERANCE), run_cv=run_cv,
                      gateable=gateable, tolerable=gateable, percentile=pct,
                      day_cv=DAY_CV_BY_LATENCY.get(f"{column}_ms", DAY_CV[kind]))


def lookup_info(name: str) -> Optional[MetricInfo]:
    """The registry entry of a metric name or path; None when it is not a metric we know."""
    path = canonical(name)
    return FIXED.get(path) or _latency(path)


def metric(name: str) -> MetricInfo:
    """The registry entry of a metric; :class:`UnknownMetric` naming it otherwise."""
    info = lookup_info(name)
    if info is None:
        raise UnknownMetric(f"unknown metric {name!r}; known: {GATEABLE_HELP}, "
                            f"{', '.join(FIXED)}")
    return info


def is_gateable(path: str) -> bool:
    """Whether ``gate=`` may name it: recomputable from the per-request samples a baseline keeps."""
    info = lookup_info(path)
    return info is not None and info.gateable and info.path == path


def is_tolerable(path: str) -> bool:
    """Whether ``tolerances=`` may name it (gateable metrics and whole-measurement shapes)."""
    info = lookup_info(path)
    return info is not None and info.tolerable and info.path == path


def order_key(name: str) -> tuple[int, str]:
    """Report order: fixed metrics as listed, then latencies column by column, then the rest."""
    path = canonical(name)
    fixed = list(FIXED)
    if path in FIXED:
        return (fixed.index(path), path)
    m = _LATENCY_PATH_RE.match(path)
    if m:
        stat = m.group(2)
        col = list(_ALL_LATENCIES).index(m.group(1))
        pos = STATS.index(stat) if stat in STATS else len(STATS)
        return (len(fixed) + col * (len(STATS) + 1) + pos, path)
    return (10_000, path)


def default_gate(spec: SpecFields) -> tuple[str, ...]:
    """Metrics gated when the marker names none: each scenario's headline numbers."""
    if spec.scenario in ("sweep", "capacity"):
        return ()  # judged as a frontier / a capacity, not per run
    # Conversations: a prefix-cache regression shows in the later turns' TTFT, not in the rest.
    later = ("metrics.ttft_later_ms.p50",) if spec.turns > 1 else ()
    # Time slices asked for: the run is also judged on how much it degraded within itself.
    within = DEGRADATION if spec.slice_s is not None else ()
    return _scenario_gate(spec) + later + within


#: What a sweep judges at every point when gate= names nothing, besides its frontier's axes
#: (throughput and TPOT at ``frontier_percentile``): the medians its users feel. A sweep
#: point is a short run, whose P99 is its slowest request or two: tails only by gate=.
SWEEP_POINT_GATE: tuple[str, ...] = ("metrics.ttft_ms.p50", "metrics.tpot_ms.p50")


def run_gate(spec: SpecFields) -> tuple[str, ...]:
    """The metrics judged on a test's runs as a whole; a sweep's ``gate=`` names what each of
    its points is judged on instead (:func:`sweep_point_gate`)."""
    if spec.scenario == "sweep":
        return ()
    return tuple(spec.gate or default_gate(spec))


def sweep_point_gate(spec: SpecFields) -> tuple[str, ...]:
    """The metrics every sweep point is compared on at equal load (``gate=`` or the default)."""
    return tuple(spec.gate) if spec.gate else SWEEP_POINT_GATE


def _scenario_gate(spec: SpecFields) -> tuple[str, ...]:
    if spec.scenario == "offline":
        return ("throughput.output_tokens_per_s",)
    if spec.scenario == "concurrency":
        return ("throughput.output_tokens_per_s", "metrics.tpot_ms.p50", "metrics.ttft_ms.p99")
    gated: tuple[str, ...] = ()
    if spec.has_request_slos:
        gated += ("goodput.requests_per_s",)
    # The medians too: a slowdown of most requests that spares the tail (short prompts slower,
    # long ones unchanged) moves neither P99. And the middle: a slowdown of the requests
    # between the median and the tail moves neither the medians nor the P99s.
    return gated + ("metrics.ttft_ms.p50", "metrics.ttft_ms.p90", "metrics.ttft_ms.p99",
                    "metrics.tpot_ms.p50", "metrics.tpot_ms.p90", "metrics.tpot_ms.p99")


#: Metrics judged on an absolute scale: a blanket relative tolerance (marker ``tolerance``,
#: ``--goodput-tolerance``, ``--tolerance``) would read as percentage points here, so only
#: ``tolerances={path: ...}`` changes theirs.
ABSOLUTE_TOLERANCE: frozenset[str] = frozenset({"error_rate", OUTPUT_AGREEMENT, *DEGRADATION})


def tolerance_for(spec: SpecFields, path: str, default_tolerance: Optional[float] = None) -> float:
    """``tolerances[path]`` > marker ``tolerance`` > command line / ini > the registry's default.

    The blanket tolerances are relative; an absolute-scale metric keeps its own unless named.
    """
    blanket = () if path in ABSOLUTE_TOLERANCE else (("marker", spec.tolerance), ("session", default_tolerance))
    where, tol = pick(("tolerances", spec.tolerances.get(path)), *blanket)
    return metric(path).tolerance if where is None else tol
