"""A/B mode in pytest: which base engine a test is compared with, and its round limits (pure).

The marker's A/B keywords (``base_serve``, ``base_url``, ``base_sim``, ``ab_min_rounds``,
``ab_max_rounds``, ``ab_relaunch``, ``ab_order_seed``) are not part of the scenario: the same scenario runs on both engines. They
are split off the marker's arguments before the spec is built, and validated here, so a bad
value is named as the spec's are.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_goodput.schema.scenario.spec import SpecError, format_validation_error

#: The marker keywords that belong to A/B mode rather than to the scenario.
AB_KEYS: tuple[str, ...] = ("base_serve", "base_url", "base_sim", "ab_min_rounds", "ab_max_rounds",
                             "ab_relaunch", "ab_order_seed")
#: ``--goodput-base-sim=default``: the simulator with its default profile as base.
DEFAULT_SIM = "default"


class ABOptions(BaseModel):
    """Where the base engine comes from (at most one of the three) and the round limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_serve: Optional[str] = Field(None, description='command launching the base engine, "{port}" = a free port')
    base_url: Optional[str] = Field(None, description="base URL of a running base engine")
    base_sim: Optional[Union[str, dict[str, Any]]] = Field(
        None, description="the simulator as base engine: knobs as 'slowdown=1.2,...' or a dict, "
        "or 'default' for its default profile")
    ab_min_rounds: Optional[int] = Field(None, ge=2, le=1000, description="rounds before the first look")
    ab_max_rounds: Optional[int] = Field(None, ge=2, le=1000, description="most rounds")
    ab_relaunch: Optional[bool] = Field(
        None, description="relaunch both engines before every round, so each round is one launch "
        "of each and launch-to-launch spread is in the A/B interval (engines the plugin starts)")
    ab_order_seed: Optional[int] = Field(
        None, ge=0, description="replay a job's round orders: the order seed its A/B result "
        "recorded (default: a fresh seed per job)")

    @model_validator(mode="after")
    def _one_base(self) -> "ABOptions":
        given = [k for k in ("base_serve", "base_url", "base_sim") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} exclude each other: give one base engine")
        if (self.ab_min_rounds is not None and self.ab_max_rounds is not None
                and self.ab_max_rounds < self.ab_min_rounds):
            raise ValueError(f"ab_max_rounds {self.ab_max_rounds} is below ab_min_rounds {self.ab_min_rounds}")
        return self

    @property
    def has_base(self) -> bool:
        return any(getattr(self, k) is not None for k in ("base_serve", "base_url", "base_sim"))

    def sim_knobs(self) -> dict[str, str]:
        """``base_sim`` as simulator knobs (``{}``: the default profile)."""
        return sim_knobs(self.base_sim, "base_sim")

    def describe(self) -> str:
        """The base engine in a few words, for reports (a URL is redacted by the caller)."""
        if self.base_url:
            return self.base_url
        if self.base_serve:
            return self.base_serve
        knobs = self.sim_knobs()
        return "simulator" + (" " + ",".join(f"{k}={v}" for k, v in knobs.items()) if knobs else "")


def sim_knobs(value: Union[str, dict[str, Any], None], where: str) -> dict[str, str]:
    """``'slowdown=1.2,noise_sigma=0.01'`` (or a dict) as knobs; ``'default'`` or ``''``: none."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k).replace("-", "_"): str(v) for k, v in value.items()}
    text = value.strip()
    if text in ("", DEFAULT_SIM):
        return {}
    knobs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, v = part.partition("=")
        if not eq or not key.strip():
            raise SpecError(f"{where}: {part!r} is not knob=value (e.g. slowdown=1.2, or "
                            f"{DEFAULT_SIM!r} for the default profile)")
        knobs[key.strip().replace("-", "_")] = v.strip()
    return knobs


def split_ab_args(args: dict[str, Any], where: str) -> tuple[dict[str, Any], ABOptions]:
    """The marker's arguments without the A/B keywords, and those keywords validated."""
    spec_args = {k: v for k, v in args.items() if k not in AB_KEYS}
    ab_args = {k: v for k, v in args.items() if k in AB_KEYS}
    try:
        options = ABOptions.model_validate(ab_args)
        options.sim_knobs()
    except ValidationError as err:
        raise SpecError(format_validation_error(err, where, ab_args, ABOptions)) from None
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None
    return spec_args, options
