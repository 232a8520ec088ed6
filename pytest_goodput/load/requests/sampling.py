"""The request fields of a spec's sampling: temperature and, when greedy, the seed.

Sent only when ``temperature`` is set: an unset one leaves the engine's default (vLLM's is
random sampling unless the model's generation config says otherwise). Greedy decoding
(``temperature=0``) also sends the spec's seed, for engines that break ties or sample
speculative drafts with one; it is what turns the output guard on (``docs/metrics.md``,
"Output agreement").
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


__all__ = ["sampling_body"]
