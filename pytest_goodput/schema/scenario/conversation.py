"""Which specs can run multi-turn conversations and shared prefixes (pure).

A conversation's turn ``t`` carries the whole history, so it can only be sent once turn
``t - 1`` has answered: conversations run over the chat API, in the closed loop
(``scenario='concurrency'``, one conversation per user slot, kept while the user thinks) or
the open loop (``server``/``interactive``: ``rate`` conversations/s, turns following), and
a run is a whole number of conversations (``docs/workloads.md``, "Multi-turn chat").
"""

from __future__ import annotations

from typing import Optional

from pytest_goodput.schema.scenario.spec_fields import SpecFields


def conversation_problem(spec: SpecFields) -> Optional[str]:
    """Why the spec's conversation or shared-prefix arguments cannot run, or None."""
    t = spec.turns
    if t > 1:
        if spec.api != "chat":
            return f"turns={t} needs api='chat': a conversation's history is a list of messages"
        if spec.scenario not in ("concurrency", "server", "interactive"):
            return (f"turns={t} runs in scenario 'concurrency' (concurrency= users, each keeping "
                    "its slot while thinking) or 'server'/'interactive' (rate= conversations/s), "
                    f"not {spec.scenario!r}")
        if spec.duration_s is not None or spec.warmup_s > 0:
            return f"turns={t} is bounded by whole conversations: use requests= and warmup_requests=, " \
                   "not duration_s= / warmup_s="
        for name in ("requests", "warmup_requests"):
            value = getattr(spec, name) or 0
            if value % t:
                return f"{name}={value} must be a multiple of turns={t} (whole conversations)"
        if spec.images_per_request not in (0, (0,)):
            return f"turns={t} sends text turns: images_per_request= applies to single requests (turns=1)"
    elif spec.think_time_s > 0:
        return "think_time_s= applies only to conversations (turns= > 1)"
    else:
        later = [k for k in (*(spec.gate or ()), *spec.tolerances) if k.startswith("metrics.ttft_later_ms.")]
        if later:
            return f"{later[0]} measures turns 2 and later: it needs conversations (turns= > 1)"
    if spec.prefix_len == 0 and (spec.prefix_groups != 1 or spec.prefix_fraction != 1.0):
        return "prefix_groups= and prefix_fraction= need prefix_len= (the shared prefix's tokens)"
    return None


__all__ = ["conversation_problem"]
