"""Knobs of the embedded engine simulator: one pydantic model, named presets, env/flag loading.

Every field of :class:`SimProfile` can be set from a command-line flag
(``--kv-capacity-tokens 4096``) or an environment variable
(``GOODPUT_SIM_KV_CAPACITY_TOKENS=4096``); flags win over the environment, which wins
over the preset (``--preset`` / ``GOODPUT_SIM_PRESET``, default ``default``).
"""

from __future__ import annotations

import argparse
import math
import os
import random
from typing import Any, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_goodput.schema.ab_options import sim_knobs
from pytest_goodput.schema.scenario.spec import SpecError
from pytest_goodput.sim.drift import lognormal_sigma

ENV_PREFIX = "GOODPUT_SIM_"


class SimProfileError(ValueError):
    """A preset name or knob value is invalid; the message names the knob."""


class SimProfile(BaseModel):
    """How the simulated continuous-batching engine performs and misbehaves.

    Step time (ms) = ``(step_base_ms + step_per_seq_ms * decode_seqs
    + step_per_ctx_token_ms * decode_context_tokens + prefill_per_token_ms * prefill_tokens)
    * slowdown * time_scale * jitter``, where ``jitter`` is a seeded lognormal factor with
    mean 1 (``noise_sigma`` 0 disables it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str = Field("default", description="name of the preset these values started from")
    model_name: str = Field("goodput-sim", description="model id served by /v1/models and echoed back")
    # --- scheduler -----------------------------------------------------------------------
    max_num_seqs: int = Field(32, ge=1, description="most sequences in one batch (running set)")
    max_num_batched_tokens: int = Field(
        512, ge=1, description="token budget per step shared by decodes and chunked prefill"
    )
    kv_capacity_tokens: int = Field(8192, ge=1, description="KV-cache size in tokens")
    block_size: int = Field(16, ge=1, description="KV-cache block size, tokens")
    prefix_caching: bool = Field(True, description="reuse KV blocks of shared prompt prefixes")
    # --- cost model (ms) -----------------------------------------------------------------
    step_base_ms: float = Field(4.0, ge=0, description="fixed cost of every engine step")
    step_per_seq_ms: float = Field(0.4, ge=0, description="added per decoding sequence in the step")
    step_per_ctx_token_ms: float = Field(
        0.002, ge=0, description="added per context token (KV read) of decoding sequences"
    )
    prefill_per_token_ms: float = Field(0.02, ge=0, description="added per prompt token prefilled")
    noise_sigma: float = Field(0.0, ge=0, le=2, description="sigma of the lognormal step jitter")
    seed: int = Field(0, description="seeds jitter, pseudo-EOS, generated text and faults")
    eos_prob: float = Field(
        0.02, ge=0, le=1,
        description="per-token chance of a pseudo-EOS after min_tokens, unless ignore_eos",
    )
    # --- reasoning model -----------------------------------------------------------------
    reasoning_tokens: int = Field(
        0, ge=0, le=1_000_000,
        description="chat: tokens of a reasoning phase streamed before the answer, on top of "
        "the answer's max_tokens (0: no reasoning)",
    )
    reasoning_field: Literal["reasoning_content", "reasoning", "both"] = Field(
        "reasoning_content",
        description="delta field of reasoning text; both: the same text under both names (vLLM)",
    )
    # --- images and speculative decoding (docs/simulator.md) -------------------------------
    image_cost: float = Field(
        1.0, gt=0, le=100, description="prefill cost of an image token, in text tokens' "
        "(prefill_per_token_ms x image_cost); raise it to inject a vision-encoder regression")
    spec_tokens: int = Field(
        0, ge=0, le=16, description="speculative decoding: draft tokens verified per decode step "
        "(0: off); each step emits 1 + the accepted ones in one chunk")
    spec_accept: float = Field(
        1.0, ge=0, le=1, description="chance each draft token is accepted (the first rejection "
        "ends the step's accepted run)")
    per_request_metrics: bool = Field(
        False, description="vLLM's --enable-per-request-metrics: a `metrics` object (the engine's "
        "own TTFT, queue time, ...) in non-streamed bodies and a stream's usage chunk")
    # --- faults and regressions ----------------------------------------------------------
    slowdown: float = Field(1.0, gt=0, description="multiplies every step time (inject a regression)")
    time_scale: float = Field(1.0, gt=0, description="multiplies every step time (unit change)")
    output_drift: float = Field(
        0.0, ge=0, le=1, description="faster but wrong: this share of prompts generate other text "
        "and every step takes 1 - output_drift/2 of its time (sim/outputs.py)")
    launch_cv: float = Field(
        0.0, ge=0, le=1, description="launch-to-launch spread: each start of the server draws a "
        "level (lognormal, mean 1, this CV) that multiplies every step time of that launch")
    error_rate: float = Field(0.0, ge=0, le=1, description="fraction of requests refused outright")
    error_status: Literal[500, 429] = Field(500, description="HTTP status of injected errors")
    stall_prob: float = Field(0.0, ge=0, le=1, description="fraction of streams stalled once")
    stall_ms: float = Field(0.0, ge=0, description="length of a mid-stream stall (wall ms)")
    drop_prob: float = Field(0.0, ge=0, le=1, description="fraction of streams cut mid-stream")
    max_queue: Optional[int] = Field(
        None, ge=0, description="refuse new requests while this many wait (None: unbounded)"
    )
    queue_full_status: Literal[429, 503] = Field(429, description="HTTP status of a queue refusal")
    # --- degradation within a run (docs/simulator.md, "Degradation over a run") -----------
    degrade_slowdown: float = Field(
        1.0, gt=0, le=100, description="step-time multiplier reached after degrade_after_s (1: off): "
        "a leak, a shrinking cache or throttling that slows the engine as it runs")
    degrade_after_s: float = Field(
        0.0, ge=0, description="seconds after the engine's first step at which the slowdown starts")
    degrade_ramp_s: float = Field(
        0.0, ge=0, description="seconds over which the multiplier rises linearly from 1 to "
        "degrade_slowdown (0: at once)")

    @model_validator(mode="after")
    def _check(self) -> "SimProfile":
        if self.kv_capacity_tokens < self.block_size:
            raise ValueError("kv_capacity_tokens must hold at least one block")
        return self

    @property
    def num_blocks(self) -> int:
        return self.kv_capacity_tokens // self.block_size

    def launched(self) -> "SimProfile":
        """This profile as one launch runs it: with ``launch_cv``, ``slowdown`` times a level
        drawn afresh per start (from the OS's entropy: every launch differs, as a real
        engine's placement and warm-up do)."""
        if self.launch_cv <= 0:
            return self
        s = lognormal_sigma(self.launch_cv)
        level = math.exp(random.SystemRandom().gauss(-s * s / 2.0, s))
        return self.model_copy(update={"slowdown": self.slowdown * level})

    @property
    def step_factor(self) -> float:
        """Multiplier applied to every modelled step time."""
        return self.slowdown * self.time_scale * (1.0 - self.output_drift / 2.0)


#: Named starting points. ``default`` saturates near 17 req/s at ISL 128 / OSL 64
#: (about 1100 output tokens/s): a knee any laptop or CI box can drive.
PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    # Llama-3-8B (bf16) on one H100 80GB: ~16 GB of weights read per decode step at
    # ~3.3 TB/s (~6 ms), 128 KiB of KV per token, ~40k prefill tokens/s, ~450k KV tokens.
    # Set time_scale (e.g. 10) so a small machine can drive its knee.
    "llama3-8b-h100": {
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "kv_capacity_tokens": 450_000,
        "block_size": 16,
        "step_base_ms": 6.0,
        "step_per_seq_ms": 0.03,
        "step_per_ctx_token_ms": 0.00004,
        "prefill_per_token_ms": 0.025,
        "noise_sigma": 0.02,
    },
}


def knob_names() -> list[str]:
    """Every settable field except ``preset`` (which selects the starting values)."""
    return [n for n in SimProfile.model_fields if n != "preset"]


def _parse_env_value(name: str, raw: str) -> Any:
    """Environment strings to values pydantic accepts (``none`` clears an optional knob)."""
    if name == "max_queue" and raw.strip().lower() in ("", "none", "null"):
        return None
    if name in ("error_status", "queue_full_status") and raw.strip().isdigit():
        return int(raw)  # Literal[int] fields do not coerce strings
    return raw


def profile_from_env_and_args(
    args: Optional[Mapping[str, Any]] = None,
    env: Optional[Mapping[str, str]] = None,
    preset: Optional[str] = None,
) -> SimProfile:
    """Build a profile: preset, then ``GOODPUT_SIM_<KNOB>`` variables, then ``args``.

    ``args`` keys are field names; ``None`` values mean "not given". ``env`` defaults to
    ``os.environ``. Raises :class:`SimProfileError` naming the bad knob or preset.
    """
    env = os.environ if env is None else env
    args = dict(args or {})
    name = preset or args.pop("preset", None) or env.get(ENV_PREFIX + "PRESET") or "default"
    args.pop("preset", None)
    if name not in PRESETS:
        raise SimProfileError(f"unknown simulator preset {name!r}; allowed: {', '.join(PRESETS)}")
    values: dict[str, Any] = {"preset": name, **PRESETS[name]}
    fields = knob_names()
    for field in fields:
        raw = env.get(ENV_PREFIX + field.upper())
        if raw is not None:
            values[field] = _parse_env_value(field, raw)
    unknown = [k for k in args if k not in fields]
    if unknown:
        raise SimProfileError(f"unknown simulator knob(s): {', '.join(sorted(unknown))}")
    values.update({k: v for k, v in args.items() if v is not None})
    try:
        return SimProfile.model_validate(values)
    except ValidationError as err:
        lines = ["invalid simulator profile"]
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"]) or "(profile)"
            env_name = ENV_PREFIX + loc.upper() if loc != "(profile)" else ""
            lines.append(f"  {loc} ({env_name} / --{loc.replace('_', '-')}): {e['msg']}"
                         f" (got {e.get('input')!r})")
        raise SimProfileError("\n".join(lines)) from None


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--preset`` and one ``--kebab-case`` flag per knob (default None: not given)."""
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help=f"starting values (env {ENV_PREFIX}PRESET, default 'default')")
    for name, f in SimProfile.model_fields.items():
        if name == "preset":
            continue
        flag = "--" + name.replace("_", "-")
        helptext = f"{f.description} (env {ENV_PREFIX}{name.upper()})"
        if isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                                help=helptext)
            continue
        kind = int if name in ("max_queue", "error_status", "queue_full_status") else type(f.default)
        parser.add_argument(flag, type=kind, default=None, help=helptext)


def build_parser() -> argparse.ArgumentParser:
    """``pytest-goodput sim``'s flags: server options plus one ``--kebab-case`` flag per knob."""
    ap = argparse.ArgumentParser(prog="pytest-goodput sim", description="Run the engine simulator.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--trace", default=None, help="append intended/actual token write times (JSONL)")
    add_profile_arguments(ap)
    return ap


def checked_knobs(text: str, flag: str) -> dict[str, str]:
    """``slowdown=1.2,noise_sigma=0.01`` as knobs, checked against the simulator's profile; else a
    ``SimProfileError`` naming ``flag`` and every bad knob (the CLI's and the plugin's one check)."""
    try:
        knobs = sim_knobs(text, flag)
        profile_from_env_and_args(knobs, env={})
    except SpecError as exc:
        raise SimProfileError(str(exc)) from None
    except SimProfileError as exc:
        raise SimProfileError(f"{flag}: " + "; ".join(line.strip() for line in str(exc).splitlines())) from None
    return knobs
