"""What to run: the scenario spec, the single schema for marker arguments and CLI flags.

Pure: no I/O, no pytest. A spec is flat (one keyword per field) so that a validation
error names exactly the marker argument the user wrote.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Mapping, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_goodput.schema.scenario.arg_errors import explain
from pytest_goodput.schema.scenario.spec_rules import (  # noqa: F401 - the presets and limits, re-exported
    DEFAULT_REQUESTS,
    MAX_IMAGE_SIDE,
    MAX_IMAGES,
    PERCENTILE_SLO_METRICS,
    SLO_PRESETS,
    check_consistency,
    collect_percentile_slos,
)

Scenario = Literal["offline", "server", "interactive", "concurrency", "sweep", "capacity", "trace"]
SCENARIOS: tuple[str, ...] = ("offline", "server", "interactive", "concurrency", "sweep", "capacity",
                              "trace")
LengthDist = Literal["fixed", "uniform", "normal", "lognormal"]
Arrival = Literal["poisson", "gamma", "constant"]
Api = Literal["completions", "chat"]
WorkloadKind = Literal["synthetic", "jsonl", "sharegpt"]

class SpecError(ValueError):
    """A spec argument is invalid; the message names the argument and what is allowed."""


class ScenarioSpec(BaseModel):
    """One load scenario and the SLOs it must meet.

    Field names are the marker's keyword arguments and the CLI's flags. The scenario's
    identity (what a baseline is comparable with) is :meth:`identity_hash`.
    """

    # NaN and infinities validate as floats but break schedules, timeouts and comparisons.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # --- scenario and load (docs/scenarios.md) ------------------------------------------
    scenario: Scenario = Field("server", description="the load's shape (docs/scenarios.md)")
    rate: Optional[float] = Field(None, gt=0, description="arrival rate, requests/s (capacity: the "
                                  "search's first rate)")
    arrival: Arrival = Field("poisson", description="gaps between arrivals: exponential, gamma "
                             "(with burstiness=) or constant")
    burstiness: float = Field(1.0, gt=0, description="gamma shape; 1.0 is Poisson, <1 burstier "
                              "(arrival='gamma')")
    concurrency: Optional[int] = Field(
        None, ge=1, description="closed-loop users (concurrency) or in-flight ceiling (others)"
    )
    requests: Optional[int] = Field(None, ge=1, description="measured requests, warm-up excluded "
                                    f"(default {DEFAULT_REQUESTS} unless duration_s= bounds the run)")
    duration_s: Optional[float] = Field(None, gt=0, description="bound on the measured window, s")
    warmup_requests: int = Field(0, ge=0, description="requests sent first and left out of every metric")
    warmup_s: float = Field(0.0, ge=0, description="requests scheduled in the first seconds are warm-up")
    seed: int = Field(0, description="seeds prompts, lengths and arrivals: runs of one spec replay them")
    timeout_s: float = Field(60.0, gt=0, description="per-request timeout, s (a timed-out request fails)")
    workers: int = Field(1, ge=1, le=64, description="client processes the load is sharded over")
    # --- load workers on a Ray cluster (docs/ray.md)
    backend: Literal["process", "ray"] = Field(
        "process", description="where the workers run: processes of this machine, or Ray actors"
    )
    sketch_above: Optional[int] = Field(None, ge=1, description="a Ray run of more requests ships "
                                        "sketches and a sample, not every record (None: 2,000,000)")
    capture: Literal["off", "auto", "on"] = Field(
        "off", description="receive times from a packet capture (docs/capture.md); auto: when permitted")
    # sweep / capacity (docs/frontiers.md)
    sweep: Optional[tuple[float, ...]] = Field(None, description="concurrencies (or rates) to sweep, "
                                               "one run each")
    sweep_over: Literal["concurrency", "rate"] = Field(
        "concurrency", description="what sweep= lists: closed-loop users, or Poisson rates")
    saturation_stop: bool = Field(True, description="sweeps: stop after the first point past saturation "
                                  "(docs/metrics.md, \"Saturation in sweeps\"); False: measure every point")
    frontier_percentile: float = Field(50.0, gt=0, le=100, description="the TPOT percentile a "
                                       "frontier point's interactivity (tok/s/user) is read at")
    gpus: int = Field(1, ge=1, description="GPUs behind the engine: frontier throughput is per GPU")
    capacity_max_rate: Optional[float] = Field(None, gt=0, description="the highest rate the "
                                               "capacity search probes, requests/s")
    capacity_resolution: float = Field(0.05, gt=0, lt=1, description="relative rate resolution the "
                                       "capacity search stops at")
    repeats: int = Field(1, ge=1, le=20, description="runs of the scenario per session, judged "
                         "together (same prompts and schedule)")
    head_launches: Optional[int] = Field(None, ge=1, le=20, description="gating: PR launches, judged "
        "after each, stopped once decided (docs/statistics.md, \"Head launches\")")
    slice_s: Optional[float] = Field(None, gt=0, description="time slices: metrics per window of this "
        "many seconds, where the steady state began, and the degradation gate (docs/metrics.md, "
        "\"Time slices\"); None: off")

    # --- request shape -----------------------------------------------------------------
    api: Api = Field("completions", description="the OpenAI API requested: /v1/completions or "
                     "/v1/chat/completions")
    stream: bool = Field(True, description="stream the response (per-token timings, TPOT and ITL, need it)")
    ignore_eos: bool = Field(True, description="ask the engine to generate exactly osl tokens "
                             "(a shorter answer fails)")
    temperature: Optional[float] = Field(None, ge=0, le=2, description="the sampling temperature sent "
        "with every request (0: greedy, the spec's seed sent as the request's seed); None: the engine's")
    output_guard: Optional[bool] = Field(None, description="fingerprint each prompt's output and gate "
        "its agreement with the baseline's (docs/metrics.md, \"Output agreement\"); None: on when "
        "temperature=0")

    # --- reasoning models: how hard the model thinks (part of the workload) -------------
    reasoning_effort: Optional[Literal["low", "medium", "high"]] = Field(
        None, description="chat: sent as the request's reasoning_effort (OpenAI, vLLM, SGLang)")
    thinking_budget: Optional[int] = Field(
        None, ge=1, description="chat: most reasoning tokens, sent as thinking_token_budget (vLLM)")

    # --- workload (docs/workloads.md) ----------------------------------------------------
    workload: WorkloadKind = Field("synthetic", description="where prompts come from: generated "
                                   "words, or a dataset= file")
    dataset: Optional[str] = Field(None, description="path to a JSONL or ShareGPT JSON file")
    isl: int = Field(128, ge=1, description="input sequence length, tokens")
    osl: int = Field(64, ge=1, description="output sequence length, tokens")
    isl_dist: LengthDist = Field("fixed", description="how input lengths vary around isl")
    osl_dist: LengthDist = Field("fixed", description="how output lengths vary around osl")
    range_ratio: float = Field(0.0, ge=0, lt=1, description="uniform: lengths in [L(1-r), L(1+r)]")
    length_cv: float = Field(0.25, ge=0, le=5, description="normal/lognormal: std / mean")
    min_len: int = Field(1, ge=1, description="shortest drawn length, tokens")
    max_len: Optional[int] = Field(None, ge=1, description="longest drawn length, tokens")
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
                                        "content digest: filled in when the spec is built (a test: at "
                                        "collection); set, it pins the file")
    # --- images (vision-language chat requests; docs/workloads.md, "Images") -------------
    images_per_request: Union[int, tuple[int, ...]] = Field(
        0, description="images per chat request; a list draws one of its values per request")
    image_size: Union[str, tuple[str, ...]] = Field(
        "448x448", description="generated images' WIDTHxHEIGHT; a list draws one per image")

    # --- SLOs (docs/metrics.md) ----------------------------------------------------------
    slo: Optional[str] = Field(None, description="named preset, e.g. mlperf/llama2-70b/interactive: "
                               "P99 TTFT and TPOT SLOs and the same per-request limits")
    ttft_ms: Optional[float] = Field(None, gt=0, description="per-request limit on time to first "
                                     "token, ms (goodput counts requests within every limit)")
    ttfo_ms: Optional[float] = Field(
        None, gt=0, description="per-request limit on time to first answer token, after any "
        "reasoning, ms (reasoning models)"
    )
    tpot_ms: Optional[float] = Field(None, gt=0, description="per-request limit on time per output "
                                     "token after the first, ms")
    e2e_ms: Optional[float] = Field(None, gt=0, description="per-request limit on end-to-end latency, ms")
    attainment: float = Field(0.99, gt=0, le=1, description="target fraction of requests within every "
                              "per-request limit")
    max_error_rate: float = Field(
        0.0, ge=0, le=1, description="most failed requests allowed, as a fraction of those issued"
    )
    percentile_slos: dict[str, float] = Field(default_factory=dict, description="percentile SLOs "
                                              "by name, as the <metric>_p<P>_ms keywords give them")

    # --- gate --------------------------------------------------------------------------
    tolerance: Optional[float] = Field(None, ge=0, lt=1, description="tolerated relative change of "
                                       "every gated metric (else each metric's default)")
    interactivity_tolerance: float = Field(
        0.05, ge=0, lt=1, description="sweeps: interactivity slack of the step-lookup view reported "
        "beside the verdict; the verdict compares points at equal load and does not use it"
    )
    tolerances: dict[str, float] = Field(default_factory=dict, description="tolerated relative change "
                                         "per metric path, e.g. {'metrics.ttft_ms.p99': 0.15}")
    gate: Optional[tuple[str, ...]] = Field(None, description="metric paths to gate instead of the "
                                            "scenario's defaults, e.g. ['metrics.ttft_ms.p99']; a "
                                            "sweep's: what each point is compared on at equal load "
                                            "besides its frontier (default TTFT P50, TPOT P50)")

    @model_validator(mode="before")
    @classmethod
    def _collect_percentile_slos(cls, data: Any) -> Any:
        return collect_percentile_slos(data)

    @model_validator(mode="after")
    def _check_consistency(self) -> "ScenarioSpec":
        check_consistency(self)
        return self

    @property
    def guards_outputs(self) -> bool:
        """Whether runs fingerprint their outputs: ``output_guard``, else deterministic sampling."""
        return self.output_guard if self.output_guard is not None else self.temperature == 0

    @property
    def has_request_slos(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.ttfo_ms, self.tpot_ms, self.e2e_ms))

    @property
    def has_slos(self) -> bool:
        return self.has_request_slos or bool(self.percentile_slos)

    def identity(self) -> dict[str, Any]:
        """The fields that make two runs comparable.

        Gate settings (tolerances, gated metrics, the error-rate limit), repeats, head launches,
        stopping past saturation, time slices, the client's process count, backend, capture and sketch threshold are
        excluded: they judge or drive a run, they do not change what is measured. Fields at
        their default are left out, so a new field added with a default never orphans existing
        baselines.
        """
        skip = {"tolerance", "tolerances", "gate", "workers", "backend", "sketch_above", "capture",
                "max_error_rate", "interactivity_tolerance", "repeats", "head_launches", "saturation_stop",
                "slice_s", "output_guard"}
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


def format_validation_error(err: ValidationError, where: str, given: Optional[Mapping[str, Any]] = None,
                            model: Optional[type[BaseModel]] = None,
                            valid: Optional[Sequence[str]] = None) -> str:
    """One line per bad argument: where it came from, the argument as ``given``, what it takes
    (``schema/scenario/arg_errors.py``); ``valid``: the names an unknown one is matched against."""
    model = model or ScenarioSpec
    return explain(err, where, model, given or {}, valid if valid is not None else list(model.model_fields))


def build_spec(args: dict[str, Any], where: str = "spec") -> ScenarioSpec:
    """Validate keyword arguments into a spec or raise :class:`SpecError` naming them."""
    try:
        return ScenarioSpec.model_validate(args)
    except ValidationError as err:
        raise SpecError(format_validation_error(err, where, args)) from None
