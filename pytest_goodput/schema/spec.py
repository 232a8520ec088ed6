"""What to run: the scenario spec, the single schema for marker arguments and CLI flags.

Pure: no I/O, no pytest. A spec is flat (one keyword per field) so that a validation
error names exactly the marker argument the user wrote.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_goodput.schema.isl_osl import expand_isl_osl
from pytest_goodput.schema.conversation import conversation_problem
from pytest_goodput.schema.registry import (
    GATEABLE_HELP,
    LATENCIES,
    PERCENTILE_SLO_RE,
    TOLERABLE_EXTRA,
    is_gateable,
    is_tolerable,
)
from pytest_goodput.schema.trace import check_trace

Scenario = Literal["offline", "server", "interactive", "concurrency", "sweep", "capacity", "trace"]
SCENARIOS: tuple[str, ...] = ("offline", "server", "interactive", "concurrency", "sweep", "capacity",
                              "trace")
LengthDist = Literal["fixed", "uniform", "normal", "lognormal"]
Arrival = Literal["poisson", "gamma", "constant"]
Api = Literal["completions", "chat"]
WorkloadKind = Literal["synthetic", "jsonl", "sharegpt"]

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
}

#: Measured requests when neither ``requests`` nor ``duration_s`` bounds a run.
DEFAULT_REQUESTS = 200


class SpecError(ValueError):
    """A spec argument is invalid; the message names the argument and what is allowed."""


class ScenarioSpec(BaseModel):
    """One load scenario and the SLOs it must meet.

    Field names are the marker's keyword arguments and the CLI's flags. The scenario's
    identity (what a baseline is comparable with) is :meth:`identity_hash`.
    """

    # NaN and infinities validate as floats but break schedules, timeouts and comparisons.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # --- scenario and load -------------------------------------------------------------
    scenario: Scenario = "server"
    rate: Optional[float] = Field(None, gt=0, description="arrival rate, requests/s (server, interactive)")
    arrival: Arrival = "poisson"
    burstiness: float = Field(1.0, gt=0, description="gamma shape; 1.0 is Poisson, <1 burstier")
    concurrency: Optional[int] = Field(
        None, ge=1, description="closed-loop users (concurrency) or in-flight ceiling (others)"
    )
    requests: Optional[int] = Field(None, ge=1, description="measured requests (warm-up excluded)")
    duration_s: Optional[float] = Field(None, gt=0, description="bound on the measured window")
    warmup_requests: int = Field(0, ge=0)
    warmup_s: float = Field(0.0, ge=0)
    seed: int = 0
    timeout_s: float = Field(60.0, gt=0, description="per-request timeout")
    workers: int = Field(1, ge=1, le=64, description="client processes the load is sharded over")
    # --- load workers on a Ray cluster (docs/ray.md)
    backend: Literal["process", "ray"] = Field(
        "process", description="where the workers run: processes of this machine, or Ray actors"
    )
    sketch_above: Optional[int] = Field(None, ge=1, description="a Ray run of more requests ships "
                                        "sketches and a sample, not every record (None: 2,000,000)")
    capture: Literal["off", "auto", "on"] = Field(
        "off", description="receive times from a packet capture (docs/capture.md); auto: when permitted")
    # sweep / capacity
    sweep: Optional[tuple[float, ...]] = Field(None, description="concurrencies (or rates) to sweep")
    sweep_over: Literal["concurrency", "rate"] = "concurrency"
    saturation_stop: bool = Field(True, description="sweeps: stop after the first point past saturation")
    frontier_percentile: float = Field(50.0, gt=0, le=100)
    gpus: int = Field(1, ge=1)
    capacity_max_rate: Optional[float] = Field(None, gt=0)
    capacity_resolution: float = Field(0.05, gt=0, lt=1, description="relative rate resolution")
    repeats: int = Field(1, ge=1, le=20)
    head_launches: Optional[int] = Field(None, ge=1, le=20, description="gating: PR launches, judged "
        "after each, stopped once decided (docs/statistics.md, \"Head launches\")")

    # --- request shape -----------------------------------------------------------------
    api: Api = "completions"
    stream: bool = True
    ignore_eos: bool = True

    # --- reasoning models: how hard the model thinks (part of the workload) -------------
    reasoning_effort: Optional[Literal["low", "medium", "high"]] = Field(
        None, description="chat: sent as the request's reasoning_effort (OpenAI, vLLM, SGLang)")
    thinking_budget: Optional[int] = Field(
        None, ge=1, description="chat: most reasoning tokens, sent as thinking_token_budget (vLLM)")

    # --- workload ----------------------------------------------------------------------
    workload: WorkloadKind = "synthetic"
    dataset: Optional[str] = Field(None, description="path to a JSONL or ShareGPT JSON file")
    isl: int = Field(128, ge=1, description="input sequence length, tokens")
    osl: int = Field(64, ge=1, description="output sequence length, tokens")
    isl_dist: LengthDist = "fixed"
    osl_dist: LengthDist = "fixed"
    range_ratio: float = Field(0.0, ge=0, lt=1, description="uniform: lengths in [L(1-r), L(1+r)]")
    length_cv: float = Field(0.25, ge=0, le=5, description="normal/lognormal: std / mean")
    min_len: int = Field(1, ge=1)
    max_len: Optional[int] = Field(None, ge=1)
    # --- multi-turn conversations and shared prefixes (docs/workloads.md) ---------------
    turns: int = Field(1, ge=1, le=1000, description="requests per conversation, each carrying the history")
    think_time_s: float = Field(0.0, ge=0, description="mean (exponential) pause between a conversation's turns")
    prefix_len: int = Field(0, ge=0, description="tokens of a shared prefix (system prompt or document)")
    prefix_groups: int = Field(1, ge=1, description="distinct shared prefixes")
    prefix_fraction: float = Field(1.0, ge=0, le=1, description="fraction of prompts (conversations) with one")

    # --- trace replay and ISL/OSL presets (docs/workloads.md) ---------------------------
    isl_osl: Optional[str] = Field(None, description="ISL/OSL preset: 1k/1k, 1k/8k or 8k/1k "
                                   "(an explicit isl=/osl= wins)")
    trace: Optional[str] = Field(None, description="scenario 'trace': a Mooncake JSONL or CSV trace file")
    trace_time_scale: float = Field(1.0, gt=0, description="multiplies the trace's times: 0.5 replays "
                                    "it twice as fast")
    trace_start_s: float = Field(0.0, ge=0, description="skip the trace's first seconds (trace time)")
    trace_block_size: int = Field(512, ge=1, description="tokens per hash_ids block (Mooncake: 512)")
    trace_sha256: Optional[str] = Field(None, pattern="^[0-9a-f]{64}$", description="the trace file's "
                                        "content digest: filled in when run; set, it pins the file")
    # --- images (vision-language chat requests; docs/workloads.md, "Images") -------------
    images_per_request: Union[int, tuple[int, ...]] = Field(
        0, description="images per chat request; a list draws one of its values per request")
    image_size: Union[str, tuple[str, ...]] = Field(
        "448x448", description="generated images' WIDTHxHEIGHT; a list draws one per image")

    # --- SLOs --------------------------------------------------------------------------
    slo: Optional[str] = Field(None, description="named preset, e.g. mlperf/llama2-70b/interactive")
    ttft_ms: Optional[float] = Field(None, gt=0)
    ttfo_ms: Optional[float] = Field(
        None, gt=0, description="time to first answer token, after any reasoning (reasoning models)"
    )
    tpot_ms: Optional[float] = Field(None, gt=0)
    e2e_ms: Optional[float] = Field(None, gt=0)
    attainment: float = Field(0.99, gt=0, le=1, description="target fraction of good requests")
    max_error_rate: float = Field(
        0.0, ge=0, le=1, description="most failed requests allowed, as a fraction of those issued"
    )
    percentile_slos: dict[str, float] = Field(default_factory=dict)

    # --- gate --------------------------------------------------------------------------
    tolerance: Optional[float] = Field(None, ge=0, lt=1)
    interactivity_tolerance: float = Field(
        0.05, ge=0, lt=1, description="sweeps: interactivity slack when matching frontier points"
    )
    tolerances: dict[str, float] = Field(default_factory=dict)
    gate: Optional[tuple[str, ...]] = None

    @model_validator(mode="before")
    @classmethod
    def _collect_percentile_slos(cls, data: Any) -> Any:
        """Accept ``ttft_p99_ms=450`` style keywords and expand ``slo=`` presets."""
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
                raise ValueError(
                    f"unknown SLO preset {preset!r}; allowed: {', '.join(sorted(SLO_PRESETS))}"
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

    @model_validator(mode="after")
    def _check_consistency(self) -> "ScenarioSpec":
        s = self.scenario
        if s in ("server", "interactive") and self.rate is None:
            raise ValueError(f"scenario {s!r} needs rate= (requests/s)")
        if s == "concurrency" and self.concurrency is None:
            raise ValueError("scenario 'concurrency' needs concurrency= (number of users)")
        if s == "sweep" and not self.sweep:
            raise ValueError("scenario 'sweep' needs sweep= (a list of concurrencies or rates)")
        if self.sweep is not None and any(v <= 0 for v in self.sweep):
            raise ValueError("sweep values must all be > 0")
        if self.sweep is not None and self.sweep_over == "concurrency" and any(
                v != int(v) for v in self.sweep):
            raise ValueError("sweep= concurrencies must be whole numbers >= 1 "
                             f"(got {list(self.sweep)}); sweep rates with sweep_over='rate'")
        if s == "interactive" and not (self.has_request_slos or self.percentile_slos):
            raise ValueError(
                "scenario 'interactive' needs SLOs: slo='mlperf/<model>/interactive' "
                "or ttft_ms=/tpot_ms="
            )
        if s == "capacity" and not self.has_request_slos:
            raise ValueError("scenario 'capacity' needs per-request SLOs (ttft_ms=, ttfo_ms=, tpot_ms= "
                             "or e2e_ms=)")
        if self.workload != "synthetic" and not self.dataset:
            raise ValueError(f"workload {self.workload!r} needs dataset= (a file path)")
        _check_images(self)
        if self.max_len is not None and self.max_len < self.min_len:
            raise ValueError("max_len must be >= min_len")
        for value in self.tolerances.values():
            if not 0 <= value < 1:
                raise ValueError("tolerances values must be fractions in [0, 1)")
        for key in self.gate or ():
            if not is_gateable(key):
                raise ValueError(f"unknown metric {key!r} in gate=/tolerances=; allowed: {GATEABLE_HELP}"
                                 f" (and, in tolerances, {', '.join(TOLERABLE_EXTRA)})")
        for key in self.tolerances:
            if not is_tolerable(key):
                raise ValueError(f"unknown metric {key!r} in gate=/tolerances=; allowed: {GATEABLE_HELP}"
                                 f" (and, in tolerances, {', '.join(TOLERABLE_EXTRA)})")
        self._check_arguments_apply()
        check_trace(self)
        if (problem := conversation_problem(self)) is not None:
            raise ValueError(problem)
        return self

    def _check_arguments_apply(self) -> None:
        """Refuse arguments the scenario would silently ignore: they would only change the hash.

        Judged on values, not on which keywords were given: a spec read back from JSON has
        every field set.
        """
        s = self.scenario
        if self.rate is not None and s in ("offline", "concurrency"):
            raise ValueError(f"rate= does not apply to scenario {s!r} (it sends without a schedule)")
        if s == "sweep" and self.rate is not None and self.sweep_over == "concurrency":
            raise ValueError("rate= does not apply to a concurrency sweep; use sweep_over='rate'")
        if self.sweep is not None and s != "sweep":
            raise ValueError(f"sweep= applies only to scenario 'sweep', not {s!r}")
        if self.gate and s in ("sweep", "capacity"):
            raise ValueError(f"gate= does not apply to scenario {s!r}: it is judged as a "
                             f"{'frontier' if s == 'sweep' else 'capacity'} (set its tolerance "
                             "with tolerances=)")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError(f"burstiness= applies only to arrival='gamma', not {self.arrival!r}")
        if s == "offline" and self.warmup_s > 0:
            raise ValueError("offline sends everything at once: use warmup_requests=, not warmup_s=")
        if s == "offline" and self.requests is None and self.concurrency is None:
            raise ValueError("offline bounded by duration_s= alone needs a concurrency= ceiling")
        if self.api != "chat" and (self.reasoning_effort or self.thinking_budget):
            raise ValueError("reasoning_effort= and thinking_budget= need api='chat' (the "
                             "completions API has no reasoning controls)")
        if not self.stream:
            timed = [k for k in self.percentile_slos
                     if k.startswith(("tpot", "itl", "reasoning_tpot", "answer_tpot"))]
            if self.tpot_ms is not None:
                timed.insert(0, "tpot_ms")
            if timed:
                raise ValueError(
                    f"{', '.join(timed)} need streamed responses (stream=True): a non-streamed "
                    "response has no per-token timing"
                )

    @property
    def has_request_slos(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.ttfo_ms, self.tpot_ms, self.e2e_ms))

    @property
    def has_slos(self) -> bool:
        return self.has_request_slos or bool(self.percentile_slos)

    def identity(self) -> dict[str, Any]:
        """The fields that make two runs comparable.

        Gate settings (tolerances, gated metrics, the error-rate limit), repeats, head launches,
        stopping past saturation, the client's process count, backend, capture and sketch threshold are
        excluded: they judge or drive a run, they do not change what is measured. Fields at
        their default are left out, so a new field added with a default never orphans existing
        baselines.
        """
        skip = {"tolerance", "tolerances", "gate", "workers", "backend", "sketch_above", "capture",
                "max_error_rate", "interactivity_tolerance", "repeats", "head_launches", "saturation_stop"}
        defaults = ScenarioSpec.model_construct().model_dump(mode="json")
        return {
            k: v for k, v in self.model_dump(mode="json").items()
            if k not in skip and (k == "scenario" or v != defaults.get(k))
        }

    def identity_hash(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def scaled(self, factor: float) -> "ScenarioSpec":
        """Multiply request counts and durations (``--goodput-scale``) for smoke runs."""
        if factor == 1.0:
            return self
        upd: dict[str, Any] = {}
        if self.requests is not None:
            upd["requests"] = max(1, round(self.requests * factor))
        if self.duration_s is not None:
            upd["duration_s"] = self.duration_s * factor
        upd["warmup_requests"] = round(self.warmup_requests * factor)
        upd["warmup_s"] = self.warmup_s * factor
        return self.model_copy(update=upd)


#: Most images one request may carry, and the largest side of a generated one.
MAX_IMAGES, MAX_IMAGE_SIDE = 32, 4096


def _check_images(spec: ScenarioSpec) -> None:
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


def format_validation_error(err: ValidationError, where: str) -> str:
    """One line per bad argument: where it came from, which argument, what is allowed."""
    lines = [f"{where}: invalid goodput arguments"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(spec)"
        msg = e["msg"].removeprefix("Value error, ")
        got = e.get("input")
        got_s = "" if loc == "(spec)" or isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"  {loc}: {msg}{got_s}")
    return "\n".join(lines)


def build_spec(args: dict[str, Any], where: str = "spec") -> ScenarioSpec:
    """Validate keyword arguments into a spec or raise :class:`SpecError` naming them."""
    try:
        return ScenarioSpec.model_validate(args)
    except ValidationError as err:
        raise SpecError(format_validation_error(err, where)) from None
