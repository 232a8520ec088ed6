"""The request fields a spec's generation controls add to each chat request body: sampling and
reasoning (empty when the spec sets neither).

Sampling is sent only when ``temperature`` is set: an unset one leaves the engine's default
(vLLM's is random sampling unless the model's generation config says otherwise). Greedy
decoding (``temperature=0``) also sends the spec's seed, for engines that break ties or sample
speculative drafts with one; it is what turns the output guard on (``docs/metrics.md``,
"Output agreement").

Reasoning (``docs/workloads.md``): ``reasoning_effort`` is the OpenAI chat field, which vLLM and
SGLang accept (vLLM passes it to GPT-OSS; SGLang forwards it to the chat template). A thinking
budget has no common field: it is sent as vLLM's ``thinking_token_budget``, the request field
of vLLM servers started with a reasoning config. Servers that cap thinking otherwise (SGLang's
strict thinking or ``chat_template_kwargs``) take their budget server-side.
"""

from __future__ import annotations

from typing import Any

from pytest_goodput.schema.scenario.spec import ScenarioSpec


def sampling_body(spec: ScenarioSpec) -> dict[str, Any]:
    """The request fields of ``spec``'s sampling (empty when it sets none)."""
    if spec.temperature is None:
        return {}
    body: dict[str, Any] = {"temperature": spec.temperature}
    if spec.temperature == 0:
        body["seed"] = spec.seed
    return body


def reasoning_body(spec: ScenarioSpec) -> dict[str, Any]:
    """The request fields of ``spec``'s reasoning controls (empty when it sets none)."""
    body: dict[str, Any] = {}
    if spec.reasoning_effort is not None:
        body["reasoning_effort"] = spec.reasoning_effort
    if spec.thinking_budget is not None:
        body["thinking_token_budget"] = spec.thinking_budget
    return body


def controls_body(spec: ScenarioSpec) -> dict[str, Any]:
    """Every request field of ``spec``'s generation controls."""
    return {**reasoning_body(spec), **sampling_body(spec)}


__all__ = ["controls_body", "reasoning_body", "sampling_body"]
