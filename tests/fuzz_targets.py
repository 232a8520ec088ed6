"""Hypothesis targets shared by the property tests (``test_properties.py``) and ``bench/fuzz.py``.

Four inputs a user or a server controls: marker arguments (the spec), baseline files, SSE
byte streams, and the raw exchanges records are built from. Each target is a strategy and a
``check`` that feeds one generated input to the product and lets only the documented error
types through (``ALLOWED``); anything else is a crash the fuzz run reports.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from pytest_goodput.judge.evidence import from_baseline
from pytest_goodput.judge.judge import Policy, judge
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.measure.records.sse import SSELimitError, SSEParser
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError, build_spec
from pytest_goodput.store.baseline import BaselineError, load
from pytest_goodput.store.readers import load_evidence

ROOT = Path(__file__).resolve().parent.parent
SEED_BASELINE = ROOT / "example_suite" / "baselines" / "test_serving" / "test_server_goodput.json"

# --- values a user could write anywhere ----------------------------------------------------
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["server", "sweep", "capacity", "offline", "concurrency", "interactive",
                     "chat", "poisson", "gamma", "rate", "mlperf/llama2-70b/interactive",
                     "ttft_p99_ms", "goodput", "nan", "inf", "-1", "1e309"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner,
                                            max_size=3)),
    max_leaves=6,
)

# --- 1. marker arguments / spec --------------------------------------------------------------
SPEC_KEYS = sorted(ScenarioSpec.model_fields) + [
    "ttft_p99_ms", "tpot_p50_ms", "e2e_p999_ms", "itl_p90_ms", "ttft_p0_ms", "ttft_p100_ms",
    "unknown", "tpot_p99_s"]
spec_args = st.dictionaries(st.sampled_from(SPEC_KEYS), values, max_size=6)


def check_spec(args: dict[str, Any]) -> None:
    """Building a spec either works or is a ``SpecError``; a built spec is usable."""
    try:
        spec = build_spec(args, where="fuzz")
    except SpecError:
        return
    spec.identity_hash()
    spec.scaled(0.5)
    json.loads(spec.model_dump_json())


# --- 2. baseline files -------------------------------------------------------------------
def _small_seed() -> dict[str, Any]:
    """The example suite's baseline cut to 2 sessions of 6 requests, in the one-file format of
    schema_version 1 (still read): fast to load, still real."""
    stored = load(SEED_BASELINE)
    assert stored is not None
    doc = {"kind": stored.kind, "schema_version": 1, "nodeid": stored.nodeid, "spec": stored.spec,
           "spec_hash": stored.spec_hash,
           "runs": [{"recorded_at": r.recorded_at, "environment": r.environment.model_dump(mode="json"),
                     "summary": r.summary, "samples": [x.model_dump(mode="json") for x in r.samples],
                     "frontier": None, "capacity": None} for r in stored.sessions[:2]]}
    for run in doc["runs"]:
        for samples in run["samples"]:
            for key, column in samples.items():
                if isinstance(column, list):
                    samples[key] = column[:6]
    return doc


SEED = _small_seed()


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


SEED_PATHS = _paths(SEED)


def _mutate(doc: Any, path: tuple, action: str, value: Any) -> Any:
    if not path:
        return value if action == "set" else doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "truncate" and isinstance(parent[last], (list, str)):
        parent[last] = parent[last][: len(parent[last]) // 2]
    else:
        parent[last] = value
    return doc


mutation = st.tuples(st.sampled_from(SEED_PATHS), st.sampled_from(["set", "delete", "truncate"]),
                     values)


@st.composite
def baseline_files(draw: Callable) -> bytes:
    """A damaged baseline: the seed with a few mutations, re-encoded, sometimes byte-damaged."""
    doc = json.loads(json.dumps(SEED))
    for path, action, value in draw(st.lists(mutation, min_size=1, max_size=3)):
        try:
            doc = _mutate(doc, path, action, value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced the path
    try:
        raw = json.dumps(doc).encode()
    except (TypeError, ValueError):
        raw = b"{"
    damage = draw(st.sampled_from(["none", "none", "cut", "bytes"]))
    if damage == "cut":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif damage == "bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at:]
    return raw


_BASELINE_DIR = Path(tempfile.mkdtemp(prefix="goodput-fuzz-"))
_REFERENCE = None


def check_baseline(raw: bytes) -> None:
    """The gate's path: loading is a baseline or a ``BaselineError``, and a loaded one is
    judged (as gating does, with the test's spec) without crashing. The ``compare`` path:
    evidence or a ``ValueError`` naming the file (exit 2)."""
    global _REFERENCE
    path = _BASELINE_DIR / "b.json"
    path.write_bytes(raw)
    try:
        load_evidence(path)
    except ValueError:
        pass
    try:
        doc = load(path, SEED["nodeid"])
    except BaselineError:
        return
    if doc is None or not doc.sessions:
        return
    if _REFERENCE is None:
        seed_path = _BASELINE_DIR / "seed.json"
        seed_path.write_text(json.dumps(SEED))
        reference = load(seed_path)
        assert reference is not None
        _REFERENCE = from_baseline(reference)
    judge(SEED["nodeid"], _REFERENCE, from_baseline(doc, _REFERENCE.spec), Policy(compare=True))


# --- 3. SSE byte streams -------------------------------------------------------------------
_SSE_PIECES = [b"data:", b"data: ", b"event: x", b"id: 7", b"retry: 5", b": keep-alive", b"\n",
               b"\r", b"\r\n", b"\n\n", b" ", b"{\"a\":1}", b"[DONE]", b"\xef\xbb\xbf", b"\xc3",
               b"\xa9", b"\xff", b"x" * 40, b"data", b":"]
sse_streams = st.lists(st.one_of(st.sampled_from(_SSE_PIECES), st.binary(max_size=6)), max_size=40)
sse_input = st.tuples(sse_streams, st.lists(st.integers(0, 400), max_size=12),
                      st.integers(4, 64))


def _parse(chunks: list[bytes], limit: int) -> tuple[list[str], bool]:
    parser = SSEParser(max_line_bytes=limit)
    out: list[str] = []
    try:
        for c in chunks:
            out += parser.feed(c)
        out += parser.finish()
    except SSELimitError:
        return out, True
    return out, False


def check_sse(case: tuple[list[bytes], list[int], int]) -> None:
    """Any byte stream, split at any points, gives the events of the unsplit stream."""
    pieces, cuts, limit = case
    data = b"".join(pieces)
    whole, whole_over = _parse([data], limit)
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0] + points, points + [len(data)])]
    split, split_over = _parse(chunks, limit)
    assert split_over == whole_over, (data, chunks)
    if not whole_over:
        assert split == whole, (data, chunks)


# --- 4. records from raw exchanges -------------------------------------------------------
usage_values = st.one_of(values, st.integers(-5, 10**9), st.just(2**63))
event_objects = st.one_of(
    st.fixed_dictionaries({"id": st.text(max_size=4), "choices": st.lists(
        st.one_of(st.fixed_dictionaries({"index": st.integers(0, 2), "text": st.text(max_size=5)}),
                  st.fixed_dictionaries({"delta": st.fixed_dictionaries(
                      {"content": st.one_of(st.none(), st.text(max_size=5))})}),
                  values), max_size=2)}),
    st.fixed_dictionaries({"choices": st.just([]), "usage": st.one_of(
        values, st.fixed_dictionaries({"completion_tokens": usage_values}))}),
    st.fixed_dictionaries({"error": values}),
    values,
)


@st.composite
def exchanges(draw: Callable) -> tuple[RawExchange, bool]:
    stream = draw(st.booleans())
    events = draw(st.lists(event_objects, max_size=6))
    if stream:
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        if draw(st.booleans()):
            body += b"data: [DONE]\n\n"
    else:
        body = json.dumps(events[0] if events else draw(values)).encode()
    if draw(st.booleans()):
        body = draw(st.binary(max_size=30)) + body
    cuts = sorted(set(draw(st.lists(st.integers(0, len(body)), max_size=5))))
    chunks = [body[a:b] for a, b in zip([0] + cuts, cuts + [len(body)]) if body[a:b]]
    times = sorted(draw(st.lists(st.floats(0, 100, allow_nan=False), min_size=len(chunks) + 2,
                                 max_size=len(chunks) + 2)))
    plan = RequestPlan(index=0, prompt="p", prompt_tokens=draw(st.one_of(st.none(), st.integers(1, 9))),
                       max_tokens=draw(st.integers(1, 64)), scheduled_at=times[0],
                       open_loop=draw(st.booleans()))
    ex = RawExchange(plan=plan, sent_at=draw(st.one_of(st.none(), st.just(times[0]))),
                     end_at=times[-1], status=draw(st.sampled_from([200, 200, 200, 201, 400, 429, 500])),
                     reads=list(zip(times[1:-1], chunks)),
                     error_kind=draw(st.sampled_from([None, None, None, "timeout", "transport",
                                                      "malformed_stream"])),
                     error_detail=draw(st.one_of(st.none(), st.text(max_size=10))))
    return ex, stream


def check_record(case: tuple[RawExchange, bool]) -> None:
    """Every exchange becomes a record: ok with finite latencies, or failed with a kind."""
    ex, stream = case
    rec = to_record(ex, stream=stream, api="completions")
    if rec.ok:
        assert rec.error_kind is None
        for v in (rec.ttft_ms, rec.e2e_ms, *(rec.itl_ms or [])):
            assert v is None or math.isfinite(v)
        assert rec.output_tokens is None or rec.output_tokens >= 1
    else:
        assert rec.error_kind is not None


@dataclass(frozen=True)
class Target:
    name: str
    strategy: st.SearchStrategy
    check: Callable[[Any], None]
    allowed: str  # the documented error types, for the report


TARGETS = (
    Target("spec", spec_args, check_spec, "SpecError"),
    Target("baseline", baseline_files(), check_baseline, "BaselineError; ValueError (compare)"),
    Target("sse", sse_input, check_sse, "SSELimitError"),
    Target("record", exchanges(), check_record, "none (failures are records)"),
)
