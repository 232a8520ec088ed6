"""What a spec's reasoning controls add to each chat request body (``docs/workloads.md``).

``reasoning_effort`` is the OpenAI chat field, which vLLM and SGLang accept (vLLM passes it
to GPT-OSS; SGLang forwards it to the chat template). A thinking budget has no common
field: it is sent as vLLM's ``thinking_token_budget``, the request field of vLLM servers
started with a reasoning config. Servers that cap thinking otherwise (SGLang's strict
thinking or ``chat_template_kwargs``) take their budget server-side.
"""

from __future__ import annotations

from typing import Any

from pytest_goodput.schema.scenario.spec import ScenarioSpec


def reasoning_body(spec: ScenarioSpec) -> dict[str, Any]:
    """The request fields of ``spec``'s reasoning controls (empty when it sets none)."""
    body: dict[str, Any] = {}
    if spec.reasoning_effort is not None:
        body["reasoning_effort"] = spec.reasoning_effort
    if spec.thinking_budget is not None:
        body["thinking_token_budget"] = spec.thinking_budget
    return body


__all__ = ["reasoning_body"]
