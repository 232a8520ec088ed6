"""Time slices on a real engine: llama.cpp's server (xllamacpp) with the tiny random-weight
model, on the CPU, no download.

Asserts how the slices were cut and counted, never how fast the engine was: every measured
request that completed inside the run's window is in exactly one slice (the one its end falls
in), each slice's median TTFT is the nearest-rank median of those requests, and the slices'
work adds up to the requests done inside the window. Needs the ``llamacpp`` extra.
"""

from __future__ import annotations

import math
from typing import Iterator

import pytest

pytest.importorskip("xllamacpp", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")
pytest.importorskip("gguf", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")

from pytest_goodput.engines.engine import Engine  # noqa: E402
from pytest_goodput.load.scenario import run_scenario  # noqa: E402
from pytest_goodput.schema.registry import DEGRADATION  # noqa: E402
from pytest_goodput.schema.scenario.spec import build_spec  # noqa: E402
from pytest_goodput.stats.quantiles import percentile  # noqa: E402
from tiny_llamacpp import ALIAS, two_slot_engine  # noqa: E402

pytestmark = [pytest.mark.llamacpp]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with two_slot_engine(tmp_path_factory) as eng:
        yield eng


def test_slices_of_a_closed_loop_run_on_llamacpp(engine: Engine) -> None:
    spec = build_spec(dict(scenario="concurrency", concurrency=2, requests=120, isl=16, osl=16, slice_s=0.1))
    r = run_scenario(spec, engine.base_url, ALIAS)
    assert r.issued == r.completed == 120 and r.token_count_source == "usage"
    s = r.slices
    assert s is not None and s.slice_s == 0.1 and len(s.slices) >= 2 and s.steady_note
    w0, w1 = r.window.start, r.window.end
    assert math.isclose(sum(x.seconds for x in s.slices), w1 - w0, rel_tol=1e-9)
    measured = [q for q in r.requests if not q.warmup]
    inside = [q for q in measured if q.end_at is not None and w0 <= q.end_at <= w1]
    assert sum(x.completed for x in s.slices) == len(inside)
    for k, x in enumerate(s.slices):
        a, b = w0 + x.start_s, w0 + x.start_s + x.seconds
        last = k == len(s.slices) - 1
        mine = [q for q in inside if a <= q.end_at < b or (last and q.end_at == b)]  # type: ignore[operator]
        assert x.completed == len(mine) and x.failed == 0
        if not x.too_few:
            assert x.ttft_ms_p50 == percentile(sorted(q.ttft_ms for q in mine), 50)  # type: ignore[type-var]
    # each request's send-to-end time is shared over the slices: the shares inside the window
    done = sum(x.requests_per_s * x.seconds for x in s.slices)
    shares = sum((min(w1, q.end_at) - max(w0, q.sent_at)) / (q.end_at - q.sent_at)  # type: ignore[operator]
                 for q in measured if q.end_at > w0 and q.sent_at < w1)  # type: ignore[operator]
    assert done == pytest.approx(shares)
    assert set(s.degradation) <= set(DEGRADATION)
    assert (s.steady_from is None) == (s.steady_at_s is None)
