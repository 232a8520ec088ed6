"""Trace replay's parts: trace files and their errors, the scaled schedule, prompts that share
what the trace shares, the load it reports, its spec rules; and the ISL/OSL presets."""

from __future__ import annotations

import hashlib
import json

import pytest

from pytest_goodput.load.plan import plan_run
from pytest_goodput.load.trace import (
    TraceError,
    identified_spec,
    load_trace,
    read_trace,
    trace_changed,
    with_trace_digest,
)
from pytest_goodput.load.requests.trace_replay import mean_gap, trace_items, trace_load, trace_prompts, trace_schedule
from pytest_goodput.load.requests.workload import WORDS
from pytest_goodput.measure.metrics import measurement_window
from pytest_goodput.schema.runs.results import RequestRecord
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError, build_spec

ROWS = [  # timestamp ms, input_length, output_length, hash_ids
    (0, 10, 5, [0, 1, 2]),
    (1000, 12, 6, [0, 1, 3, 4]),
    (1000, 3, 7, [0]),
    (3000, 9, 8, None),
    (7000, 8, 9, [0, 1]),
]


def jsonl(rows=ROWS) -> str:
    out = []
    for t, i, o, h in rows:
        row = {"timestamp": t, "input_length": i, "output_length": o, "extra": "ignored"}
        if h is not None:
            row["hash_ids"] = h
        out.append(json.dumps(row))
    return "\n".join(out) + "\n"


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(jsonl())
    return path


def spec(path, **kw) -> ScenarioSpec:
    return build_spec({"scenario": "trace", "trace": str(path), "trace_block_size": 4, **kw})


# --- files ------------------------------------------------------------------------------


def test_jsonl_rows_are_read_exactly_and_hashed(trace_file):
    t = read_trace(str(trace_file))
    assert t.timestamps_ms.tolist() == [0, 1000, 1000, 3000, 7000]
    assert t.input_lengths.tolist() == [10, 12, 3, 9, 8]
    assert t.output_lengths.tolist() == [5, 6, 7, 8, 9]
    assert t.hash_ids == ((0, 1, 2), (0, 1, 3, 4), (0,), None, (0, 1))
    assert t.sha256 == hashlib.sha256(trace_file.read_bytes()).hexdigest()


def test_csv_with_seconds_ids_and_extra_columns(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("\ufeffuser,timestamp_s,input_length,output_length,hash_ids\n"
                    "a,0,10,5,0 1 2\nb,1.5,12,6,\n\nc,2.25,3,7,0\n")
    t = read_trace(str(path))
    assert t.timestamps_ms.tolist() == [0.0, 1500.0, 2250.0]
    assert t.input_lengths.tolist() == [10, 12, 3] and t.output_lengths.tolist() == [5, 6, 7]
    assert t.hash_ids == ((0, 1, 2), None, (0,))


@pytest.mark.parametrize("name, text, message", [
    ("t.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1\n',
     r"t.jsonl:2: not valid JSON"),
    ("t.jsonl", '\n[1, 2]\n', r"t.jsonl:2: expected a JSON object, got list"),
    ("t.jsonl", '{"timestamp": 0, "output_length": 1}\n', r"t.jsonl:1: missing 'input_length'"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 0, "output_length": 1}\n',
     r"t.jsonl:1: 'input_length' must be a whole number of tokens >= 1, got 0"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 2, "output_length": 1.5}\n',
     r"t.jsonl:1: 'output_length' must be a whole number"),
    ("t.jsonl", '{"timestamp": -1, "input_length": 2, "output_length": 1}\n',
     r"t.jsonl:1: 'timestamp' must be a number >= 0, got -1"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 2, "output_length": 1, "hash_ids": [1, "x"]}\n',
     r"t.jsonl:1: 'hash_ids' must be a list of integers >= 0"),
    ("t.jsonl", '{"timestamp": 5, "input_length": 2, "output_length": 1}\n'
                '{"timestamp": 4, "input_length": 2, "output_length": 1}\n',
     r"t.jsonl:2: timestamp 4 ms is earlier than 5 ms at .*t.jsonl:1; rows must be in arrival order"),
    ("t.jsonl", "\n\n", r"has no rows"),
    ("t.csv", "time,input_length\n1,2\n", r"t.csv:1: the CSV header \['time', 'input_length'\] lacks "
                                          r"timestamp \(ms\) or timestamp_s, output_length"),
    ("t.csv", "timestamp,input_length,output_length\n0,5\n", r"t.csv:2: 2 fields, the header names 3"),
    ("t.csv", "timestamp,input_length,output_length\nsoon,5,1\n", r"t.csv:2: 'timestamp' must be a number"),
    ("t.csv", "timestamp,input_length,output_length,hash_ids\n0,5,1,1;2\n",
     r"t.csv:2: 'hash_ids' must be integers separated by spaces"),
    ("t.csv", "", r"has no rows"),
])
def test_bad_files_name_the_file_line_and_field(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError, match=message):
        read_trace(str(path))


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        read_trace(str(tmp_path / "none.jsonl"))
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(b'{"timestamp": 0, "input_length": 1, "output_length": 1}\n\xff\xfe\n')
    with pytest.raises(TraceError, match=r"b.jsonl:2: not UTF-8 text"):
        read_trace(str(bad))


def test_the_digest_joins_the_identity_and_a_pinned_digest_refuses_another_file(trace_file):
    s = spec(trace_file)
    assert s.trace_sha256 is None
    pinned = with_trace_digest(s)
    assert pinned.trace_sha256 == hashlib.sha256(trace_file.read_bytes()).hexdigest()
    assert pinned.identity()["trace_sha256"] == pinned.trace_sha256
    assert pinned.identity_hash() != s.identity_hash()
    trace_file.write_text(jsonl(ROWS[:4]))
    other = with_trace_digest(s)
    assert other.identity_hash() != pinned.identity_hash()
    with pytest.raises(TraceError, match="changed: its SHA-256 is .* the spec pins"):
        load_trace(pinned)
    assert with_trace_digest(ScenarioSpec(scenario="offline")) == ScenarioSpec(scenario="offline")



def test_a_spec_is_built_with_its_digest_and_knows_when_its_file_changed(trace_file):
    built = identified_spec({"scenario": "trace", "trace": str(trace_file)}, "command line")
    assert built.trace_sha256 == hashlib.sha256(trace_file.read_bytes()).hexdigest()
    assert not trace_changed(built) and not trace_changed(ScenarioSpec(scenario="offline"))
    trace_file.write_text(jsonl(ROWS[:4]))
    assert trace_changed(built)
    trace_file.unlink()
    assert trace_changed(built)
    with pytest.raises(TraceError, match="does not exist"):  # before anything runs
        identified_spec({"scenario": "trace", "trace": str(trace_file)}, "command line")


# --- schedule and load ------------------------------------------------------------------


def test_time_scale_start_warmup_and_bounds_hand_computed(trace_file):
    t = read_trace(str(trace_file))
    sched, first = trace_schedule(spec(trace_file, trace_time_scale=0.5), t)
    assert first == 0 and sched.offsets.tolist() == [0.0, 0.5, 0.5, 1.5, 3.5]
    assert sched.measured == 5
    # trace_start_s=1 keeps rows at trace time >= 1 s: [1000, 1000, 3000, 7000] -> [0, 0, 2, 6] s
    sched, first = trace_schedule(spec(trace_file, trace_start_s=1.0), t)
    assert first == 1 and sched.offsets.tolist() == [0.0, 0.0, 2.0, 6.0]
    sched, _ = trace_schedule(spec(trace_file, trace_start_s=1.0, warmup_requests=1, requests=2), t)
    assert sched.offsets.tolist() == [0.0, 0.0, 2.0] and sched.warmup.tolist() == [True, False, False]
    # duration_s counts from the first measured arrival: offsets 0 and 2 are within 2 s, 6 is not
    sched, _ = trace_schedule(spec(trace_file, trace_start_s=1.0, warmup_requests=1, duration_s=2.0), t)
    assert sched.offsets.tolist() == [0.0, 0.0, 2.0]
    sched, _ = trace_schedule(spec(trace_file, warmup_s=1.5), t)  # offsets 0, 1, 1 < 1.5 s
    assert sched.warmup.tolist() == [True, True, True, False, False]
    with pytest.raises(TraceError, match=r"no row at or after trace_start_s=8 \(the trace spans 7 s\)"):
        trace_schedule(spec(trace_file, trace_start_s=8.0), t)
    with pytest.raises(TraceError, match="every replayed row is warm-up"):
        trace_schedule(spec(trace_file, warmup_requests=5), t)


def test_trace_load_reports_the_measured_rows_shape(trace_file):
    t = read_trace(str(trace_file))
    s = spec(trace_file, trace_time_scale=0.5, warmup_requests=1)
    sched, first = trace_schedule(s, t)
    # measured rows 1..4: offsets 0.5, 0.5, 1.5, 3.5 -> span 3 s, 3 gaps -> 1 req/s
    assert trace_load(s, t, sched, first) == {
        "trace_requests": 4.0, "trace_span_s": 3.0, "trace_rate": 1.0,
        "trace_isl_mean": (12 + 3 + 9 + 8) / 4, "trace_osl_mean": (6 + 7 + 8 + 9) / 4,
        "trace_time_scale": 0.5,
    }
    assert mean_gap(sched) == pytest.approx(3.5 / 4)
    one, first = trace_schedule(spec(trace_file, requests=1), t)
    assert "trace_rate" not in trace_load(s, t, one, first) and mean_gap(one) is None


def test_the_open_loop_window_covers_a_trace_replay():
    recs = [RequestRecord(index=i, scheduled_at=at, ok=True) for i, at in enumerate((10.0, 10.5, 13.0))]
    w = measurement_window(recs, ScenarioSpec(scenario="trace", trace="x"))
    assert (w.basis, w.start, w.end, w.seconds) == ("arrivals", 10.0, 13.0, 3.0)


# --- prompts ----------------------------------------------------------------------------


def test_shared_leading_ids_share_exactly_their_blocks(trace_file):
    t = read_trace(str(trace_file))
    p = [x.split(" ") for x in trace_prompts(t, range(5), 4, seed=0, salt=9)]
    assert [len(w) for w in p] == [10, 12, 3, 9, 8]
    assert all(w in WORDS for ws in p for w in ws)
    assert p[0][:8] == p[1][:8] == p[4][:8]  # ids 0, 1: two 4-word blocks
    assert p[0][8:10] != p[1][8:10]  # id 2 vs id 3
    assert p[2] == p[0][:3]  # id 0 cut to 3 words
    assert p[3][:4] != p[0][:4]  # no ids: its own blocks
    again = [x.split(" ") for x in trace_prompts(t, range(5), 4, seed=0, salt=9)]
    assert again == p
    salted = trace_prompts(t, range(5), 4, seed=0, salt=10)
    assert all(a != " ".join(b) for a, b in zip(salted, p))
    later = trace_prompts(t, range(1, 5), 4, seed=0, salt=9)
    assert later == [" ".join(w) for w in p[1:]]  # a window builds the same prompts


def test_items_carry_the_rows_lengths(trace_file):
    t = read_trace(str(trace_file))
    s = spec(trace_file, trace_start_s=1.0)
    sched, first = trace_schedule(s, t)
    items, prompts = trace_items(s, t, sched, first, salt=1)
    assert [(i.prompt_tokens, i.max_tokens) for i in items] == [(12, 6), (3, 7), (9, 8), (8, 9)]
    assert [i.prompt for i in items] == [""] * 4  # built just before each request is sent
    assert [len(prompts.prompt(i).split(" ")) for i in range(4)] == [12, 3, 9, 8]
    assert prompts.prompt(0) == trace_prompts(t, [first], s.trace_block_size, s.seed, 1)[0]


def test_workers_get_the_replay_round_robin(trace_file):
    s = spec(trace_file, trace_time_scale=0.5, workers=2)
    plan = plan_run(s, 2, None, read_trace(str(trace_file)), salt=3)
    (jobs, _), = plan.phases
    assert [[p.index for p in j.plans] for j in jobs] == [[0, 2, 4], [1, 3]]
    assert [p.scheduled_at for p in jobs[0].plans] == [0.0, 0.5, 3.5]
    assert plan.load["trace_requests"] == 5.0 and plan.total == 5
    assert plan.mean_gap_s == pytest.approx(3.5 / 4) and jobs[0].mean_gap_s == pytest.approx(3.5 / 2)


# --- spec rules and presets --------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    ({"scenario": "trace"}, "scenario 'trace' needs trace="),
    ({"scenario": "trace", "trace": "t", "rate": 2.0}, "rate= does not apply to scenario 'trace'"),
    ({"scenario": "trace", "trace": "t", "isl": 512}, "isl= does not apply to scenario 'trace'"),
    ({"scenario": "trace", "trace": "t", "isl_osl": "1k/1k"}, "isl_osl= does not apply"),
    ({"scenario": "trace", "trace": "t", "workload": "jsonl", "dataset": "d"}, "workload= does not apply"),
    ({"scenario": "trace", "trace": "t", "arrival": "gamma"}, "arrival= does not apply"),
    ({"scenario": "trace", "trace": "t", "prefix_len": 64}, "prefix_len= does not apply to scenario 'trace': the trace sets the shared prefixes"),
    ({"scenario": "server", "rate": 1.0, "trace": "t"}, "trace= applies only to scenario 'trace'"),
    ({"scenario": "server", "rate": 1.0, "trace_time_scale": 2.0}, "trace_time_scale= applies only"),
    ({"scenario": "trace", "trace": "t", "trace_time_scale": 0}, "greater than 0"),
    ({"scenario": "trace", "trace": "t", "trace_sha256": "abc"}, "trace_sha256"),
    ({"scenario": "offline", "isl_osl": "2k/2k"}, r"unknown ISL/OSL preset '2k/2k'; allowed: 1k/1k, 1k/8k, 8k/1k"),
])
def test_spec_refuses_what_does_not_fit(args, message):
    with pytest.raises(SpecError, match=message):
        build_spec(args)


def test_a_trace_replays_every_row_unless_bounded():
    s = build_spec({"scenario": "trace", "trace": "t"})
    assert s.requests is None and s.duration_s is None
    assert ScenarioSpec.model_validate(s.model_dump(mode="json")) == s  # a stored spec reads back


@pytest.mark.parametrize("args, isl, osl", [
    ({"isl_osl": "1k/1k"}, 1024, 1024),
    ({"isl_osl": "1k/8k"}, 1024, 8192),
    ({"isl_osl": "8K/1K"}, 8192, 1024),
    ({"isl_osl": "1k/8k", "osl": 4096}, 1024, 4096),  # explicit values win
    ({"isl_osl": "8k/1k", "isl": 100}, 100, 1024),
])
def test_isl_osl_presets(args, isl, osl):
    s = build_spec({"scenario": "offline", **args})
    assert (s.isl, s.osl, s.isl_osl) == (isl, osl, args["isl_osl"].lower())
    assert ScenarioSpec.model_validate(s.model_dump(mode="json")) == s

