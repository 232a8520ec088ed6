"""Issue 31's stored-baseline failure cases through the public judge, verdicts over N trials.

Hand-built runs (``tests/judge_scenarios.py``: one schedule replayed, lognormal per-request
latencies, a per-session machine factor) go through the path the gate takes — ``Side`` →
``judge()`` → ``fails()`` — in default and strict mode. Every run is a server test at a fixed
rate: its window is the arrival span, the same however fast the engine is.

1. *failure in one baseline session*: per-request SLOs, ``attainment=0.95``,
   ``max_error_rate=0.02``; one of five sessions had 3 timeouts in 200; the current run has no
   failures and every TTFT and TPOT twice as slow. It must be regressed, strict mode too.
2. *one failure in 400* (case 4): A/A, five sessions and the current run each with one failed
   request in 400. The P99s must stay decidable: strict mode must not fail the A/A.
3. *short prompts slower* (case 6): 80 % short prompts, 20 % long ones holding the tail; the
   short ones get TTFT ×2.5 and TPOT +30 %. The default server gate must fail it every time.
4. *the README marker* (case 7): ``server``, rate 8, 240 requests, 2 repeats,
   ``slo="mlperf/llama2-70b/interactive"``, latencies well inside it, judged alone in strict
   mode: the P99 SLOs must be proven (over the pooled repeats: 480 ≥ 459).

Run it against an older tree to see "before"::

    python bench/judge_cases.py --trials 20
    mkdir -p before && git archive 281342e pytest_goodput | tar -x -C before
    PYTHONPATH=before python bench/judge_cases.py --trials 20
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from judge_scenarios import Workload, run, spec, verdicts  # noqa: E402

import pytest_goodput  # noqa: E402
from pytest_goodput.judge import Policy, fails, from_results, judge  # noqa: E402
from pytest_goodput.measure.metrics import summarize  # noqa: E402
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, Samples  # noqa: E402
from pytest_goodput.schema.scenario.spec import build_spec  # noqa: E402

P99 = ("metrics.ttft_ms.p99", "metrics.tpot_ms.p99")
SHOWN = ("goodput.requests_per_s", "metrics.ttft_ms.p50", "metrics.ttft_ms.p99",
         "metrics.tpot_ms.p50", "metrics.tpot_ms.p99", "error_rate")
MODES = {"default": Policy(), "strict": Policy(strict=True)}
STRICT_FAILS = ("regressed", "inconclusive", "underpowered")
CASES_SLOS = ("ttft_p99_ms", "tpot_p99_ms")


def open_loop(s: Samples, w: Workload) -> Samples:
    """A server run at a fixed rate: its window is the arrival span, whatever the latencies."""
    return s.model_copy(update={"window_s": w.window_s})


def case_failure_in_one_session(t: int) -> dict[str, object]:
    """Case 1: one of five sessions with 3 timeouts in 200; current 2x slower, no failures."""
    rng = np.random.default_rng([1, t])
    w = Workload.draw(200, 100 + t)
    sp = spec(200, attainment=0.95, max_error_rate=0.02)
    bad = int(rng.integers(5))
    base = [[open_loop(run(w, rng, failed=rng.choice(200, 3, replace=False).tolist() if k == bad
                           else ()), w)] for k in range(5)]
    cur = [open_loop(run(w, rng, ttft_factor=2.0, tpot_factor=2.0), w)]
    return _judged(sp, base, cur)


def case_one_failure_in_400(t: int, failures: int = 1) -> dict[str, object]:
    """Case 4: A/A, one failed request per 400 in every session and in the current run."""
    rng = np.random.default_rng([4, t])
    w = Workload.draw(400, 400 + t)
    sp = spec(400)
    f = lambda: rng.choice(400, failures, replace=False).tolist()  # noqa: E731
    base = [[open_loop(run(w, rng, failed=f()), w)] for _ in range(5)]
    cur = [open_loop(run(w, rng, failed=f()), w)]
    return _judged(sp, base, cur)


def case_no_failure_in_400(t: int) -> dict[str, object]:
    """Case 4's control: the same A/A without failures (the P99s' power on these runs)."""
    return case_one_failure_in_400(t, failures=0)


def case_short_prompts_slower(t: int) -> dict[str, object]:
    """Case 6: 80 % short prompts get TTFT x2.5 and TPOT +30 %; the long 20 % hold the tail."""
    rng = np.random.default_rng([6, t])
    n = 240
    long = np.zeros(n, dtype=bool)
    long[rng.permutation(n)[: n // 5]] = True
    ttft = np.where(long, rng.lognormal(math.log(250.0), 0.25, n), rng.lognormal(math.log(40.0), 0.2, n))
    tpot = np.where(long, rng.lognormal(math.log(20.0), 0.1, n), rng.lognormal(math.log(12.0), 0.08, n))
    w = Workload(ttft=ttft, tpot=tpot)
    sp = spec(n)
    base = [[open_loop(run(w, rng), w)] for _ in range(5)]
    short = ~long
    cur = [open_loop(run(w, rng, ttft_factor=np.where(short, 2.5, 1.0),
                         tpot_factor=np.where(short, 1.3, 1.0)), w)]
    return _judged(sp, base, cur)


def _judged(sp, base, cur) -> dict[str, object]:
    out: dict[str, object] = {}
    for mode, policy in MODES.items():
        o, v, failed = verdicts(sp, base, cur, policy)
        det = {c.metric: c.detectable for c in o.comparisons}
        out[mode] = (v, failed, det)
    return out


def _marker_run(spec_, rng: np.random.Generator):
    """One run of the README marker: 240 requests at 8 req/s, all well inside the preset."""
    n = spec_.requests
    records = []
    for i in range(n):
        at = i / spec_.rate
        ttft = float(rng.lognormal(math.log(60.0), 0.3))
        tpot = float(rng.lognormal(math.log(12.0), 0.1))
        e2e = ttft + 63 * tpot
        records.append(RequestRecord(index=i, ok=True, scheduled_at=at, sent_at=at,
                                     end_at=at + e2e / 1e3, ttft_ms=ttft, tpot_ms=tpot, e2e_ms=e2e,
                                     output_tokens=64, prompt_tokens=128, send_lag_ms=0.1,
                                     token_count_source="usage"))
    return summarize(records, spec_, ClientHealth(valid=True, cpu_utilization=0.1))


def case_readme_marker(t: int) -> dict[str, object]:
    """Case 7: the README marker judged alone; are its P99 SLOs proven?"""
    rng = np.random.default_rng([7, t])
    sp = build_spec({"scenario": "server", "rate": 8, "requests": 240, "repeats": 2,
                     "slo": "mlperf/llama2-70b/interactive"})
    runs = [_marker_run(sp, rng) for _ in range(sp.repeats)]
    out: dict[str, object] = {}
    for mode, policy in MODES.items():
        p = Policy(compare=False, strict=policy.strict)
        o = judge("t.py::test_marker", from_results(runs), None, p)
        slos = {s.name: ("proven" if s.proven else "unproven") + ("" if s.ok else ", fails")
                for s in o.slos if s.name.endswith("_p99_ms")}
        out[mode] = (slos, fails(o, p))
    return out


CASES = {
    "1 failure in one baseline session (current 2x slower)": (case_failure_in_one_session, P99,
                                                               "regressed, fails in both modes"),
    "4 one failure in 400, A/A": (case_one_failure_in_400, SHOWN,
                                  "P99s decidable: strict mode fails no more than the control"),
    "4c no failure in 400, A/A (control)": (case_no_failure_in_400, SHOWN, "the P99s' own power"),
    "6 short prompts slower (80 %: TTFT x2.5, TPOT +30 %)": (case_short_prompts_slower, SHOWN,
                                                              "default gate fails every time"),
    "7 README marker, strict": (case_readme_marker, CASES_SLOS, "SLOs proven"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--cases", default="1,4,4c,6,7", help="comma-separated case numbers")
    args = p.parse_args()
    wanted = set(args.cases.split(","))
    t0 = time.perf_counter()
    print(f"judge cases: {args.trials} trials each; pytest_goodput from "
          f"{Path(pytest_goodput.__file__).resolve().parent}")
    for name, (fn, shown, expect) in CASES.items():
        if name.split()[0] not in wanted:
            continue
        results = [fn(t) for t in range(args.trials)]
        print(f"\n== case {name} (expected: {expect}) ==")
        for mode in MODES:
            fail_count = sum(bool(r[mode][1]) for r in results)
            by_p99 = sum(any(r[mode][0].get(m) in STRICT_FAILS for m in P99) for r in results)
            print(f"  {mode:<8} test fails {fail_count}/{args.trials}"
                  + (f" (a P99 regressed, inconclusive or underpowered: {by_p99}/{args.trials})"
                     if mode == "strict" and shown != CASES_SLOS else ""))
            for m in shown:
                c = Counter(r[mode][0].get(m, "not gated") for r in results)
                counts = ", ".join(f"{k} {v}" for v, k in sorted(((v, k) for k, v in c.items()), reverse=True))
                det = [r[mode][2].get(m) for r in results if len(r[mode]) > 2]
                det = [d for d in det if d is not None]
                where = ""
                if det and m in P99:
                    q = sorted(det)[(len(det) - 1) // 2]  # the lower median; +inf counts
                    where = f"; detectable median {q:+.1%}" if math.isfinite(q) else "; detectable median inf"
                print(f"    {m:<26} {counts}{where}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
