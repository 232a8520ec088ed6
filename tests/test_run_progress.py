"""Progress over a whole measurement (sweep points, capacity probes, repeats) and the engine's
gauges sampled during a run: hand-computed cases, no engine, no clock."""

from __future__ import annotations

import http.server
import io
import threading
from pathlib import Path

import closed_loop_results as clr

from pytest_goodput.engines.engine import Engine
from pytest_goodput.plugin.harness import GoodputHarness
from pytest_goodput.plugin.session import GoodputSession
from pytest_goodput.plugin.settings import resolve
from pytest_goodput.report.progress import Progress, remeasure_line
from pytest_goodput.run import runner
from pytest_goodput.run.capacity import Probe, remaining_probes
from pytest_goodput.run.engine_view import GaugeSampler, GaugeScraper, from_summary, gauge_stats, server_summary, to_summary
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.results import Goodput
from pytest_goodput.schema.scenario.spec import build_spec


def fake_run_once(calls: list):
    """A run of 10 requests that reports progress 5/10 then 10/10, as the load driver does."""
    def run(spec, engine, progress=None):
        calls.append(spec)
        if progress is not None:
            progress(5, 10)
            progress(10, 10)
        return clr.result(1.0, seed=len(calls))
    return run


def test_sweep_progress_only_moves_forward_with_the_whole_sweep_as_total(monkeypatch):
    calls: list = []
    monkeypatch.setattr(runner, "run_once", fake_run_once(calls))
    seen: list = []
    stages: list = []
    spec = build_spec({"scenario": "sweep", "sweep": [1, 4, 16], "requests": 10})
    m = runner.measure(spec, engine=None, progress=lambda d, t: seen.append((d, t)), stage=stages.append)
    assert m.kind == "sweep" and len(calls) == 3
    # Three points of 10 requests: 30 in all, counted forward across points.
    assert seen == [(5, 30), (10, 30), (15, 30), (20, 30), (25, 30), (30, 30)]
    assert stages == ["concurrency 1, point 1/3", "concurrency 4, point 2/3", "concurrency 16, point 3/3"]


def test_repeats_count_as_one_measurement(monkeypatch):
    calls: list = []
    monkeypatch.setattr(runner, "run_once", fake_run_once(calls))
    seen: list = []
    spec = build_spec({"scenario": "concurrency", "concurrency": 2, "requests": 10, "repeats": 2})
    runner.measure(spec, engine=None, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(5, 20), (10, 20), (15, 20), (20, 20)]


def test_capacity_total_is_unknown_until_the_knee_is_bracketed():
    spec = build_spec({"scenario": "capacity", "ttft_ms": 500.0, "attainment": 0.9, "requests": 10,
                       "capacity_resolution": 0.1})
    assert remaining_probes([Probe(1.0, True, 1.0)], spec) is None  # still doubling
    assert remaining_probes([Probe(8.0, False, 0.5)], spec) is None  # still halving
    # Bracket [8, 16]: bisections until (hi - lo) <= 0.1 * lo: 8 -> 4 -> 2 -> 1 -> 0.5, i.e.
    # ceil(log2(8 / 0.8)) = 4 more probes.
    hist = [Probe(8.0, True, 1.0), Probe(16.0, False, 0.5)]
    assert remaining_probes(hist, spec) == 4
    assert remaining_probes([Probe(10.0, True, 1.0), Probe(10.5, False, 0.5)], spec) == 0


def test_capacity_probes_count_forward_and_are_named(monkeypatch):
    calls: list = []
    runs = fake_run_once(calls)

    def by_rate(spec, engine, progress=None):
        r = runs(spec, engine, progress)
        att = 1.0 if spec.rate < 5.0 else 0.0
        good = round(att * r.issued)
        g = Goodput(requests_per_s=1.0, tokens_per_s=1.0, attainment=good / r.issued, good=good,
                    issued=r.issued, target=0.9, met=att >= 0.9)
        return r.model_copy(update={"goodput": g, "spec": spec})

    monkeypatch.setattr(runner, "run_once", by_rate)
    seen: list = []
    stages: list = []
    spec = build_spec({"scenario": "capacity", "rate": 2.0, "ttft_ms": 500.0, "attainment": 0.9,
                       "requests": 10, "capacity_resolution": 0.3})
    m = runner.measure(spec, engine=None, progress=lambda d, t: seen.append((d, t)), stage=stages.append)
    assert [c.rate for c in calls] == [2.0, 4.0, 8.0, 6.0, 5.0]
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == 50
    # Unknown total while doubling; once [4, 8] is bracketed: ceil(log2(4 / 1.2)) = 2 more probes.
    assert [t for _, t in seen[:6]] == [0] * 6
    assert seen[6] == (35, 50)
    assert stages[0] == "probe at 2 req/s, 1" and stages[3] == "probe at 6 req/s, 4/5"
    assert m.capacity.requests_per_s == 4.0


def test_progress_line_names_the_stage_and_never_goes_back():
    out = io.StringIO()
    now = [0.0]
    p = Progress(None, "test_frontier", out, live=False, interval_s=10.0, clock=lambda: now[0])
    p.stage("concurrency 4, point 2/3")
    now[0] = 20.0
    p.update(100, 300)
    p.update(90, 300)  # a late callback of an earlier run: ignored
    assert out.getvalue().splitlines() == [
        "test_frontier (concurrency 4, point 2/3): 100/300 (33%) 20s, 5.0 req/s, ETA 40s"]
    assert p.line(20.0).startswith("test_frontier (concurrency 4, point 2/3): 100/300")


def test_an_invalid_run_says_why_it_is_measured_again(monkeypatch):
    spec = build_spec({"scenario": "concurrency", "concurrency": 4, "requests": 400})
    first = clr.result(1.0, 1, valid=False)
    seq = [Session(spec=spec, results=[first]), Session(spec=spec, results=[clr.result(1.0, 2)])]
    monkeypatch.setattr("pytest_goodput.plugin.harness.measure",
                        lambda spec, engine, progress=None, stage=None: seq.pop(0))
    out = io.StringIO()
    h = GoodputHarness(GoodputSession(resolve({}, {}, {}), Path(".")), "t.py::t",
                       {"scenario": "concurrency", "concurrency": 4, "requests": 400},
                       lambda: Engine(kind="attach", base_url="http://127.0.0.1:9/v1"), progress_stream=out)
    h.run()
    assert out.getvalue() == (
        "goodput: t.py::t: measuring again - the client, not the server, set the pace of the first "
        "run (client CPU saturated)\n")
    assert remeasure_line("a::b", []).endswith("(client health check failed)")


def test_gauges_are_sampled_during_the_run_mean_and_max():
    samples = iter([
        {"vllm:num_requests_waiting": 0.0, "vllm:num_requests_running": 4.0},
        {"vllm:num_requests_waiting": 6.0, "vllm:num_requests_running": 8.0,
         "vllm:kv_cache_usage_perc": 0.5},
    ])
    sampler = GaugeSampler(lambda: next(samples, None), interval_s=0.001).start()
    while sampler._thread.is_alive() and len(sampler._samples) < 2:  # noqa: SLF001 - wait for both scrapes
        pass
    stats = sampler.stop()
    assert stats == {"waiting_mean": 3.0, "waiting_max": 6.0, "running_mean": 6.0, "running_max": 8.0,
                     "kv_cache_usage_mean": 0.5, "kv_cache_usage_max": 0.5, "scrapes": 2.0}
    assert gauge_stats([]) == {}


def test_server_summary_of_a_measurement_hand_computed():
    a = clr.result(1.0, 1).model_copy(update={"server_metrics": {
        "waiting_mean": 2.0, "waiting_max": 5.0, "preemptions": 3.0,
        "prefix_cache_hits": 30.0, "prefix_cache_queries": 100.0}})
    b = clr.result(1.0, 2).model_copy(update={"server_metrics": {
        "waiting_mean": 4.0, "waiting_max": 9.0, "preemptions": 1.0,
        "prefix_cache_hits": 10.0, "prefix_cache_queries": 100.0}})
    s = server_summary([a, b])
    # Means averaged (2+4)/2, maxima the largest, preemptions per run (3+1)/2, hit rate 40/200.
    assert s == {"waiting_mean": 3.0, "waiting_max": 9.0, "preemptions": 2.0, "prefix_cache_hit_rate": 0.2}
    # Without prefix-cache queries (llama.cpp, SGLang) the prompt tokens are the lookups.
    c = a.model_copy(update={"server_metrics": {"prefix_cache_hits": 50.0, "prompt_tokens": 200.0}})
    assert server_summary([c]) == {"prefix_cache_hit_rate": 0.25}
    assert server_summary([clr.result(1.0, 3)]) == {}
    assert from_summary({**to_summary(s), "goodput.requests_per_s": 7.0}) == s


def test_lean_scrape_picks_gauges_sums_label_sets_and_skips_histograms():
    body = (b"# HELP vllm:num_requests_waiting waiting\n"
            b'vllm:num_requests_waiting{model_name="a"} 3.0\n'
            b'vllm:num_requests_waiting{model_name="b"} 2.0\n'
            b"vllm:num_requests_running 4\n"
            b'vllm:num_requests_waiting_bucket{le="1"} 9\n'
            b"llamacpp:requests_deferred 1\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            ok = self.path == "/metrics"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.server_port}"
        scraper = GaugeScraper(url + "/metrics")
        sample = scraper()
        assert sample == {"vllm:num_requests_waiting": 5.0, "vllm:num_requests_running": 4.0,
                          "llamacpp:requests_deferred": 1.0}
        assert scraper() == sample  # the kept-alive connection serves the next scrape
        scraper.close()
        assert GaugeScraper(url + "/nothing")() is None
    finally:
        srv.shutdown()
        srv.server_close()
    assert GaugeScraper(url + "/metrics", timeout_s=0.5)() is None  # server gone: no sample
