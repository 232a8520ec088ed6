"""vLLM's per-request timing, read from a response's ``metrics`` object (pure).

vLLM with ``--enable-per-request-metrics`` adds ``metrics`` to a non-streamed body and to a
stream's final usage chunk: ``time_to_first_token_ms`` (scheduled → first token),
``queue_time_ms`` (queued → scheduled), ``generation_time_ms``, ``mean_itl_ms``,
``tokens_per_second``. Anything else there, or a value that is not a non-negative number,
is ignored: the engine's timing is evidence beside ours, never a reason to fail a request.
"""

from __future__ import annotations

from typing import Any, Optional

from pytest_goodput.schema.runs.engine_clock import EngineTiming

__all__ = ["engine_timing"]

_FIELDS = tuple(EngineTiming.model_fields)


def engine_timing(metrics: Any) -> Optional[EngineTiming]:
    """The ``metrics`` object as :class:`EngineTiming`; None when absent or carrying no field."""
    if not isinstance(metrics, dict):
        return None
    values = {k: float(v) for k in _FIELDS if isinstance(v := metrics.get(k), (int, float))
              and not isinstance(v, bool) and v >= 0 and v == v}
    return EngineTiming(**values) if values else None
