"""Hand-built runs for the judge: one workload, sessions with noise, failures where asked.

Shared by ``tests/test_judge_properties.py`` and ``bench/judge_cases.py``. Every run replays
one schedule (request i is the same request in every run), as runs of one spec do, so the
judge pairs them. Latencies are lognormal per request with a per-session machine factor.
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from pytest_goodput.judge import Policy, fails, judge
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.outcomes.outcome import MetricComparison, TestOutcome
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.session import Sweep
from pytest_goodput.schema.scenario.spec import build_spec

#: Verdicts from best to worst, for "never better" properties.
ORDER = {"improved": 0, "pass": 1, "new": 1, "underpowered": 2, "inconclusive": 2, "regressed": 3}


@dataclass(frozen=True)
class Workload:
    """Per-request base latencies of one schedule: what request i costs on an idle engine."""

    ttft: np.ndarray
    tpot: np.ndarray
    osl: int = 64
    window_s: float = 30.0

    @classmethod
    def draw(cls, n: int, seed: int, *, ttft_ms: float = 40.0, tpot_ms: float = 12.0,
             sigma: float = 0.35) -> "Workload":
        rng = np.random.default_rng(seed)
        return cls(ttft=rng.lognormal(math.log(ttft_ms), sigma, n),
                   tpot=rng.lognormal(math.log(tpot_ms), sigma / 3, n))

    @property
    def n(self) -> int:
        return len(self.ttft)


def run(w: Workload, rng: np.random.Generator, *, machine_cv: float = 0.02,
        request_cv: float = 0.05, ttft_factor: Sequence[float] | float = 1.0,
        tpot_factor: Sequence[float] | float = 1.0, failed: Sequence[int] = (),
        fail_rate: float = 0.0) -> Samples:
    """One run: the workload served once, every latency times a machine factor and request
    noise, then scaled by the effect; ``failed`` (indices) and ``fail_rate`` fail requests."""
    machine = math.exp(rng.normal(0.0, machine_cv))
    ttft = w.ttft * machine * np.exp(rng.normal(0.0, request_cv, w.n)) * np.asarray(ttft_factor)
    tpot = w.tpot * machine * np.exp(rng.normal(0.0, request_cv, w.n)) * np.asarray(tpot_factor)
    ok = np.ones(w.n, dtype=bool)
    ok[list(failed)] = False
    if fail_rate:
        ok &= rng.random(w.n) >= fail_rate
    e2e = ttft + (w.osl - 1) * tpot
    return Samples(
        window_s=w.window_s * float(np.mean(tpot / w.tpot)), ok=ok.tolist(), good=ok.tolist(),
        ttft_ms=[float(v) if o else None for v, o in zip(ttft, ok)],
        tpot_ms=[float(v) if o else None for v, o in zip(tpot, ok)],
        e2e_ms=[float(v) if o else None for v, o in zip(e2e, ok)],
        output_tokens=[w.osl if o else 0 for o in ok], prompt_tokens=[128] * w.n)


def spec(requests: int, **slos: object):
    """A server test of ``requests`` requests with per-request SLOs (goodput is gated)."""
    kw: dict[str, object] = dict(scenario="server", rate=8.0, requests=requests, isl=128,
                                 osl=64, ttft_ms=10_000, tpot_ms=1_000, attainment=0.5,
                                 max_error_rate=0.05)
    kw.update(slos)
    return build_spec(kw)


def evidence(sp, sessions: Sequence[Sequence[Samples]]) -> Side:
    return Side.of_samples(sp, [list(s) for s in sessions])


def sweep_side(sp, sessions: Sequence[Sequence[Samples]],
               steps: Optional[Sequence[float]] = None) -> Side:
    """A sweep's sessions as a side: each session one run per point of ``sp.sweep`` (fewer
    when it stopped early), the newest with its frontier, each with its saturation step."""
    s = evidence(sp, sessions)
    out = []
    for i, sess in enumerate(s.sessions):
        update: dict = {}
        if steps is not None:
            update["summary"] = {**sess.summary, "sweep.saturation_step": float(steps[i])}
        if i == len(s.sessions) - 1:
            update["sweep"] = Sweep(frontier=[
                {"load": load, "load_kind": sp.sweep_over, "interactivity": 100.0,
                 "throughput": load * 64} for load in (sp.sweep or ())[:len(sess.samples)]])
        out.append(sess.model_copy(update=update))
    return dataclasses.replace(s, sessions=out)


def verdicts(sp, baseline: Sequence[Sequence[Samples]], current: Sequence[Samples],
             policy: Policy = Policy()) -> tuple[TestOutcome, dict[str, str], bool]:
    """The public judge on hand-built sessions: the outcome, verdict per metric, fails()."""
    out = judge("t::x", evidence(sp, [current]), evidence(sp, baseline), policy)
    return out, {c.metric: c.verdict for c in out.comparisons}, fails(out, policy)


def reading(c: MetricComparison) -> int:
    """How the verdict reads the run: improved 0, within the tolerance 1, worse than the
    tolerance but not shown 2, regressed 3. *Underpowered* is a statement about power, read
    by its change: within the tolerance it reads as a pass, beyond it as inconclusive."""
    if c.verdict == "underpowered":
        worse = c.change is not None and (c.change if c.direction == "lower" else -c.change) > c.tolerance
        return 2 if worse else 1
    return ORDER.get(c.verdict, 1)


def readings(out: TestOutcome) -> dict[str, int]:
    return {c.metric: reading(c) for c in out.comparisons}
