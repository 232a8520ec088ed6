"""The fields of a scenario spec that its rules read, as a protocol (pure; imports no spec).

The spec's validators (``spec_rules``, ``conversation``, ``trace``) and the registry's gate and
tolerance rules take a spec, and the spec imports them: naming ``ScenarioSpec`` in their
signatures, even for type checkers only, would close an import cycle. They take a
:class:`SpecFields`, which ``ScenarioSpec`` satisfies as it is (``docs/markers.md`` defines
every field).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Optional, Protocol, Union


class SpecFields(Protocol):
    """What the spec's rules read of a ``ScenarioSpec`` (read-only)."""

    model_fields: ClassVar[dict[str, Any]]

    @property
    def scenario(self) -> str: ...

    @property
    def api(self) -> str: ...

    @property
    def arrival(self) -> str: ...

    @property
    def burstiness(self) -> float: ...

    @property
    def rate(self) -> Optional[float]: ...

    @property
    def concurrency(self) -> Optional[int]: ...

    @property
    def requests(self) -> Optional[int]: ...

    @property
    def warmup_requests(self) -> int: ...

    @property
    def duration_s(self) -> Optional[float]: ...

    @property
    def warmup_s(self) -> float: ...

    @property
    def sweep(self) -> Optional[tuple[float, ...]]: ...

    @property
    def sweep_over(self) -> str: ...

    @property
    def slice_s(self) -> Optional[float]: ...

    @property
    def stream(self) -> bool: ...

    @property
    def reasoning_effort(self) -> Optional[str]: ...

    @property
    def thinking_budget(self) -> Optional[int]: ...

    @property
    def workload(self) -> str: ...

    @property
    def dataset(self) -> Optional[str]: ...

    @property
    def min_len(self) -> int: ...

    @property
    def max_len(self) -> Optional[int]: ...

    @property
    def turns(self) -> int: ...

    @property
    def think_time_s(self) -> float: ...

    @property
    def prefix_len(self) -> int: ...

    @property
    def prefix_groups(self) -> int: ...

    @property
    def prefix_fraction(self) -> float: ...

    @property
    def trace(self) -> Optional[str]: ...

    @property
    def images_per_request(self) -> Union[int, tuple[int, ...]]: ...

    @property
    def image_size(self) -> Union[str, tuple[str, ...]]: ...

    @property
    def tpot_ms(self) -> Optional[float]: ...

    @property
    def percentile_slos(self) -> Mapping[str, float]: ...

    @property
    def tolerance(self) -> Optional[float]: ...

    @property
    def tolerances(self) -> Mapping[str, float]: ...

    @property
    def gate(self) -> Optional[tuple[str, ...]]: ...

    @property
    def has_request_slos(self) -> bool: ...


__all__ = ["SpecFields"]
