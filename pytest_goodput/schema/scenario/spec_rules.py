"""The scenario spec's rules across fields: SLO presets, what must and must not go together (pure).

``ScenarioSpec`` (``schema/scenario/spec.py``) declares the fields; its validators call these. They are
judged on values, not on which keywords were given: a spec read back from JSON has every
field set. (What a marker may name for its scenario is ``schema/scenario/applicability.py``.)
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from pytest_goodput.schema.scenario.conversation import conversation_problem
from pytest_goodput.schema.scenario.isl_osl import expand_isl_osl
from pytest_goodput.schema.registry import (
    GATEABLE_HELP,
    LATENCIES,
    PERCENTILE_SLO_RE,
    TOLERABLE_EXTRA,
    DEGRADATION,
    is_gateable,
    is_tolerable,
)
from pytest_goodput.schema.scenario.trace import check_trace
from pytest_goodput.schema.scenario.spec_fields import SpecFields


#: Latency metrics a percentile SLO can name, e.g. ``ttft_p99_ms``.
PERCENTILE_SLO_METRICS = tuple(LATENCIES)

#: MLPerf Inference SLO presets (P99 TTFT ms, P99 TPOT ms).
SLO_PRESETS: dict[str, tuple[float, float]] = {
    "mlperf/llama2-70b/server": (2000.0, 200.0),
    "mlperf/llama2-70b/interactive": (450.0, 40.0),
    "mlperf/llama3.1-8b/server": (2000.0, 100.0),
    "mlperf/llama3.1-8b/interactive": (500.0, 30.0),
    "mlperf/llama3.1-405b/server": (6000.0, 175.0),
    "mlperf/llama3.1-405b/interactive": (4500.0, 80.0),
    "mlperf/deepseek-r1/server": (2000.0, 80.0),
    "mlperf/deepseek-r1/interactive": (1500.0, 15.0),
    "mlperf/gpt-oss-120b/server": (3000.0, 80.0),
    "mlperf/gpt-oss-120b/interactive": (2000.0, 15.0),
    # Use cases, from GuideLLM's published SLO examples (docs/guides/service_level_objectives.md
    # in vllm-project/guidellm): "TTFT <= X ms, ITL <= Y ms for 99% of requests"; GuideLLM's
    # ITL is our TPOT. Code completion and batch state only a request latency or a throughput.
    "guidellm/chat": (200.0, 50.0),
    "guidellm/rag": (300.0, 100.0),
    "guidellm/content-generation": (600.0, 200.0),
    "guidellm/code-generation": (500.0, 150.0),
}


#: Measured requests when neither ``requests`` nor ``duration_s`` bounds a run.
DEFAULT_REQUESTS = 200


def collect_percentile_slos(data: Any) -> Any:
    """Accept ``ttft_p99_ms=450`` style keywords and expand ``slo=`` presets (before validation)."""
    if not isinstance(data, dict):
        return data
    data = expand_isl_osl(dict(data))
    given = data.get("percentile_slos") or {}
    if not isinstance(given, dict):
        raise ValueError(
            f"percentile_slos must be a dict such as {{'ttft_p99_ms': 450}}, got {given!r}"
        )
    pct = dict(given)
    for key in list(data):
        m = PERCENTILE_SLO_RE.match(key) if isinstance(key, str) else None
        if m:
            pct[key] = data.pop(key)
    preset = data.get("slo")
    if preset is not None:
        if not isinstance(preset, str):
            raise ValueError(
                f"slo must be a preset name (a string) such as "
                f"'mlperf/llama2-70b/interactive', got {preset!r}"
            )
        if preset not in SLO_PRESETS:
            close = difflib.get_close_matches(preset, SLO_PRESETS, n=1, cutoff=0.6)
            meant = f"did you mean slo={close[0]!r}? " if close else ""
            raise ValueError(
                f"unknown SLO preset {preset!r}; {meant}allowed: {', '.join(sorted(SLO_PRESETS))}"
            )
        ttft, tpot = SLO_PRESETS[preset]
        pct.setdefault("ttft_p99_ms", ttft)
        pct.setdefault("tpot_p99_ms", tpot)
        data.setdefault("ttft_ms", ttft)
        data.setdefault("tpot_ms", tpot)
    for key, value in pct.items():
        if not isinstance(key, str):
            raise ValueError(
                f"percentile_slos: key {key!r} is not a name such as 'ttft_p99_ms'"
            )
        m = PERCENTILE_SLO_RE.match(key)
        if not m:
            raise ValueError(
                f"percentile SLO {key!r} is not of the form <metric>_p<percentile>_ms "
                f"with metric in {PERCENTILE_SLO_METRICS}"
            )
        if not (0 < float(m.group(2)) < 100):
            raise ValueError(f"percentile SLO {key!r}: percentile must be in (0, 100)")
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not math.isfinite(value) or value <= 0):
            raise ValueError(
                f"percentile SLO {key!r} must be a positive number of ms (finite), got {value!r}"
            )
    if pct:
        data["percentile_slos"] = pct
    if data.get("requests") is None and data.get("duration_s") is None and data.get("scenario") != "trace":
        data["requests"] = DEFAULT_REQUESTS
    for key in ("sweep", "gate"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    return data


def check_consistency(spec: SpecFields) -> None:
    """Raise ``ValueError`` on arguments that do not fit together (after field validation)."""
    s = spec.scenario
    if s in ("server", "interactive") and spec.rate is None:
        raise ValueError(f"scenario {s!r} needs rate= (requests/s)")
    if s == "concurrency" and spec.concurrency is None:
        raise ValueError("scenario 'concurrency' needs concurrency= (number of users)")
    if s == "sweep" and not spec.sweep:
        raise ValueError("scenario 'sweep' needs sweep= (a list of concurrencies or rates)")
    if spec.sweep is not None and any(v <= 0 for v in spec.sweep):
        raise ValueError("sweep values must all be > 0")
    if spec.sweep is not None and spec.sweep_over == "concurrency" and any(
            v != int(v) for v in spec.sweep):
        raise ValueError("sweep= concurrencies must be whole numbers >= 1 "
                         f"(got {list(spec.sweep)}); sweep rates with sweep_over='rate'")
    if s == "interactive" and not (spec.has_request_slos or spec.percentile_slos):
        raise ValueError(
            "scenario 'interactive' needs SLOs: slo='mlperf/<model>/interactive' "
            "or ttft_ms=/tpot_ms="
        )
    if s == "capacity" and not spec.has_request_slos:
        raise ValueError("scenario 'capacity' needs per-request SLOs (ttft_ms=, ttfo_ms=, tpot_ms= "
                         "or e2e_ms=)")
    if spec.workload != "synthetic" and not spec.dataset:
        raise ValueError(f"workload {spec.workload!r} needs dataset= (a file path)")
    check_images(spec)
    if spec.output_guard and spec.temperature not in (None, 0):
        raise ValueError(f"output_guard=True needs deterministic sampling: temperature=0 (got "
                         f"temperature={spec.temperature:g}); random outputs agree by chance only")
    if spec.max_len is not None and spec.max_len < spec.min_len:
        raise ValueError("max_len must be >= min_len")
    for value in spec.tolerances.values():
        if not 0 <= value < 1:
            raise ValueError("tolerances values must be fractions in [0, 1)")
    for key in spec.gate or ():
        if not is_gateable(key):
            raise ValueError(f"unknown metric {key!r} in gate=/tolerances=; allowed: {GATEABLE_HELP}"
                             f" (and, in tolerances, {', '.join(TOLERABLE_EXTRA)})")
    for key in spec.tolerances:
        if not is_tolerable(key):
            raise ValueError(f"unknown metric {key!r} in gate=/tolerances=; allowed: {GATEABLE_HELP}"
                             f" (and, in tolerances, {', '.join(TOLERABLE_EXTRA)})")
    per_run = [k for k in spec.gate or () if k in DEGRADATION or k == "error_rate"]
    if s == "sweep" and per_run:
        raise ValueError(f"gate= names {', '.join(per_run)}: a sweep's gate= names what each point "
                         "is compared on at equal load (TTFT, TPOT, ITL or E2E percentiles, "
                         "throughput, goodput)")
    within = [k for k in spec.gate or () if k in DEGRADATION]
    if within and spec.slice_s is None:
        raise ValueError(f"gate= names {', '.join(within)}: degradation within the run is measured on "
                         "time slices; set slice_s= (seconds per slice)")
    check_arguments_apply(spec)
    check_trace(spec)
    if (problem := conversation_problem(spec)) is not None:
        raise ValueError(problem)


def check_arguments_apply(spec: SpecFields) -> None:
    """Refuse arguments the scenario would silently ignore: they would only change the hash.

    Judged on values, not on which keywords were given: a spec read back from JSON has
    every field set.
    """
    s = spec.scenario
    if spec.rate is not None and s in ("offline", "concurrency"):
        raise ValueError(f"rate= does not apply to scenario {s!r} (it sends without a schedule)")
    if s == "sweep" and spec.rate is not None and spec.sweep_over == "concurrency":
        raise ValueError("rate= does not apply to a concurrency sweep; use sweep_over='rate'")
    if spec.sweep is not None and s != "sweep":
        raise ValueError(f"sweep= applies only to scenario 'sweep', not {s!r}")
    if spec.gate and s == "capacity":
        raise ValueError("gate= does not apply to scenario 'capacity': it is judged as a "
                         "capacity (set its tolerance with tolerances=)")
    if spec.burstiness != 1.0 and spec.arrival != "gamma":
        raise ValueError(f"burstiness= applies only to arrival='gamma', not {spec.arrival!r}")
    if s == "offline" and spec.warmup_s > 0:
        raise ValueError("offline sends everything at once: use warmup_requests=, not warmup_s=")
    if s == "offline" and spec.requests is None and spec.concurrency is None:
        raise ValueError("offline bounded by duration_s= alone needs a concurrency= ceiling")
    if spec.api != "chat" and (spec.reasoning_effort or spec.thinking_budget):
        raise ValueError("reasoning_effort= and thinking_budget= need api='chat' (the "
                         "completions API has no reasoning controls)")
    if not spec.stream:
        timed = [k for k in spec.percentile_slos
                 if k.startswith(("tpot", "itl", "reasoning_tpot", "answer_tpot"))]
        if spec.tpot_ms is not None:
            timed.insert(0, "tpot_ms")
        if timed:
            raise ValueError(
                f"{', '.join(timed)} need streamed responses (stream=True): a non-streamed "
                "response has no per-token timing"
            )


#: Most images one request may carry, and the largest side of a generated one.
MAX_IMAGES, MAX_IMAGE_SIDE = 32, 4096


def check_images(spec: SpecFields) -> None:
    """Image counts within [0, MAX_IMAGES], sizes WIDTHxHEIGHT, and images only in chat requests."""
    counts = spec.images_per_request
    counts = (counts,) if isinstance(counts, int) else counts
    if not counts or any(not 0 <= c <= MAX_IMAGES for c in counts):
        raise ValueError(f"images_per_request must be a count in 0..{MAX_IMAGES} or a non-empty list "
                         f"of them, got {spec.images_per_request!r}")
    sizes = (spec.image_size,) if isinstance(spec.image_size, str) else spec.image_size
    for size in sizes or ("",):
        w, _, h = size.partition("x")
        if not (w.isdigit() and h.isdigit() and 1 <= int(w) <= MAX_IMAGE_SIDE
                and 1 <= int(h) <= MAX_IMAGE_SIDE):
            raise ValueError(f"image_size must be WIDTHxHEIGHT (sides 1..{MAX_IMAGE_SIDE}, e.g. "
                             f"'448x448') or a list of them, got {spec.image_size!r}")
    if not any(counts) and spec.image_size != "448x448":
        raise ValueError("image_size= applies only with images_per_request= (no images are sent)")
    if any(counts) and spec.api != "chat":
        raise ValueError("images_per_request= needs api='chat': images are image_url parts of a "
                         "chat message")
