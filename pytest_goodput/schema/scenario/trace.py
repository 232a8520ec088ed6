"""What a trace replay (``scenario="trace"``) accepts: the spec rules, pure.

The trace file sets each request's arrival time and lengths, so the arguments that would
otherwise set them (a rate, an arrival process, lengths, a dataset) are refused rather than
silently ignored. Reading the file is the load layer's (``load/trace.py``).
"""

from __future__ import annotations

from pytest_goodput.schema.scenario.spec_fields import SpecFields


#: Fields that only a trace replay uses.
TRACE_ONLY = ("trace_time_scale", "trace_start_s", "trace_block_size", "trace_sha256")
#: Fields whose job the trace does: a value other than their default is refused.
SET_BY_TRACE = ("rate", "arrival", "burstiness", "isl_osl", "isl", "osl", "isl_dist", "osl_dist",
                "workload", "dataset", "prefix_len", "prefix_groups", "prefix_fraction")


def _default(spec: SpecFields, key: str) -> object:
    return type(spec).model_fields[key].default


def check_trace(spec: SpecFields) -> None:
    """Raise ``ValueError`` naming the argument that does not fit a trace replay (or its absence)."""
    if spec.scenario != "trace":
        if spec.trace is not None:
            raise ValueError(f"trace= applies only to scenario 'trace', not {spec.scenario!r}")
        for key in TRACE_ONLY:
            if getattr(spec, key) != _default(spec, key):
                raise ValueError(f"{key}= applies only to scenario 'trace', not {spec.scenario!r}")
        return
    if not spec.trace:
        raise ValueError("scenario 'trace' needs trace= (a Mooncake JSONL or CSV trace file)")
    for key in SET_BY_TRACE:
        if getattr(spec, key) != _default(spec, key):
            what = ("arrival times (scale them with trace_time_scale=)" if key in ("rate", "arrival", "burstiness")
                    else "shared prefixes (its hash_ids)" if key.startswith("prefix_") else "request lengths")
            raise ValueError(f"{key}= does not apply to scenario 'trace': the trace sets the {what}")
