"""Measuring the PR over several engine launches: false alarms, detection and launches spent.

An engine whose level moves between launches (placement, warm-up, allocator, clocks) by a
launch-to-launch CV of 5, 10 or 15 %: every session (baseline or PR) is one launch, a
lognormal factor on every latency (and its inverse on goodput), measured ``--repeats`` times.
The baseline is S launches (``--sessions``, a list: baselines kept as the newest N sessions
of main make 15–30 cheap). The PR side is judged look by look: launch, measure, judge; stop
when decided or when ``--planned`` launches are spent (planned 1: today's single-launch
gate). Arms: A/A (``--aa-trials``) and every latency ``--effect`` slower (``--trials``).
Per cell: how often the test fails (default mode) with a 95 % Wilson interval, and the mean
launches measured. Two models of a launch:

- ``--model judge``: hand-built runs (``tests/judge_scenarios.py``: 240 requests, 5 %
  request noise, 1 % machine noise per run) judged by ``judge.sequential.head_launches.judge_look``,
  the public ``judge()`` behind it, exactly as the gate does (about 2 s a look);
- ``--model levels`` (default): each gated metric's run value drawn on its analysis scale
  (launch level + 1 % machine noise + the metric's request noise), judged by the same verdict
  rule (``verdicts.rule``: prior, shrinkage, t, tolerance), the same looks, clearing,
  futility (``conditional_power``) and stopping (``settle``), without the request-level
  bootstrap: thousands of trials a minute, so A/A can be bounded below 1 %. The two models
  are compared cell by cell in docs/performance.md.

``--rules``: REGRESS:CLEAR@FUTILITY, spending functions (obf, pocock) and the futility
threshold of conditional power (1: the first rule, not waited for once out of reach)::

    python bench/head_launches.py --sessions 5,15,30 --planned 1,4,8 --aa-trials 2000 --trials 400
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from judge_scenarios import Workload, evidence, run, spec  # noqa: E402

from pytest_goodput.judge import Policy, fails  # noqa: E402
from pytest_goodput.judge.sequential.head_launches import (HeadRule, conditional_power, judge_look, look,  # noqa: E402
                                                           out_of_reach, settle)
from pytest_goodput.judge.scalar.verdicts import MetricDef, rule  # noqa: E402
from pytest_goodput.schema import registry  # noqa: E402
from pytest_goodput.schema.outcomes.outcome import TestOutcome  # noqa: E402
from pytest_goodput.stats import wilson_interval  # noqa: E402

#: The gated metrics of the judge model's server test, with the request-level SD of one
#: run's value on the log scale (measured on the judge model's runs: P50s ≈ 0.5 %, P99s ≈ 2 %).
GATED = (("goodput.requests_per_s", 0.003), ("metrics.ttft_ms.p50", 0.006), ("metrics.ttft_ms.p99", 0.02),
         ("metrics.tpot_ms.p50", 0.004), ("metrics.tpot_ms.p99", 0.012))
MACHINE = 0.01


def parse_rule(text: str) -> HeadRule:
    sides, _, fut = text.partition("@")
    regress, _, clear = sides.partition(":")
    return HeadRule(regress, clear or "pocock", float(fut) if fut else 0.10)  # type: ignore[arg-type]


def _level(rng: np.random.Generator, cv: float) -> float:
    s2 = math.log1p(cv * cv)
    return float(rng.normal(-s2 / 2.0, math.sqrt(s2)))


def _launch(w: Workload, rng: np.random.Generator, cv: float, effect: float, repeats: int):  # type: ignore[no-untyped-def]
    level = math.exp(_level(rng, cv)) * effect
    return [run(w, rng, machine_cv=MACHINE, ttft_factor=level, tpot_factor=level) for _ in range(repeats)]


def judge_trial(t: int, cv: float, effect: float, planned: int, sessions: int, repeats: int,
                requests: int, confidence: float, hr: HeadRule) -> tuple[bool, int]:
    """One gated test on hand-built runs through the gate's judge: (it failed, launches)."""
    rng = np.random.default_rng([20261202, t, int(cv * 1000), sessions])
    w = Workload.draw(requests, t)
    sp = spec(requests, repeats=repeats, ttft_ms=10_000, tpot_ms=1_000, attainment=0.5)
    base = evidence(sp, [_launch(w, rng, cv, 1.0, repeats) for _ in range(sessions)])
    head: list = []
    arm_rng = np.random.default_rng([20261203, t, int(cv * 1000), int(effect * 1000)])
    while True:
        head.append(_launch(w, arm_rng, cv, effect, repeats))
        out, decided = judge_look("t::x", evidence(sp, head), base, Policy(confidence=confidence), planned, rule=hr)
        if decided or len(head) >= planned:
            return fails(out, Policy()), len(head)


def _session_values(rng: np.random.Generator, n: int, cv: float, effect: float, repeats: int) -> np.ndarray:
    """n launches x metrics: each launch's value on the log scale (mean of its runs)."""
    out = np.empty((n, len(GATED)))
    for i in range(n):
        level = _level(rng, cv) + math.log(effect)
        runs = rng.normal(0.0, MACHINE, repeats)[:, None] + rng.normal(0.0, [sd for _, sd in GATED], (repeats, len(GATED)))
        signs = np.array([-1.0 if registry.metric(p).direction == "higher" else 1.0 for p, _ in GATED])
        out[i] = signs * level + runs.mean(axis=0)
    return out


def _outcome(base: np.ndarray, cur: np.ndarray, confidence: float, k_as: int, repeats: int) -> TestOutcome:
    s_n = len(base)
    cs = []
    for j, (path, req_sd) in enumerate(GATED):
        defn = MetricDef.of(path, registry.metric(path).tolerance)
        d = float(cur[:, j].mean() - base[:, j].mean())
        s = float(np.std(base[:, j], ddof=1)) if s_n > 1 else None
        w = req_sd * math.sqrt(1.0 / (repeats * len(cur)) + 1.0 / (repeats * s_n))
        cs.append(rule(defn, base=100.0, cur=100.0 * math.exp(d), change=math.expm1(d), d=d, scale="log",
                       within=(w, w), machine=registry.metric(path).run_cv, spread=(s, s_n - 1),
                       sessions=s_n, confidence=confidence, current_sessions=k_as))
    return TestOutcome(nodeid="t::x", scenario="server", comparisons=cs, baseline_status="compared")


def levels_trial(t: int, cv: float, effect: float, planned: int, sessions: int, repeats: int,
                 requests: int, confidence: float, hr: HeadRule) -> tuple[bool, int]:
    """One gated test on the levels model, through the same looks and stopping: (failed, launches)."""
    rng = np.random.default_rng([20261202, t, int(cv * 1000), sessions])
    base = _session_values(rng, sessions, cv, 1.0, repeats)
    arm_rng = np.random.default_rng([20261203, t, int(cv * 1000), int(effect * 1000)])
    cur = _session_values(arm_rng, planned, cv, effect, repeats)
    for k in range(1, planned + 1):
        lk = look(k, planned, sessions, confidence, rule=hr)
        at_regress = _outcome(base, cur[:k], lk.regress_confidence, k, repeats)
        if planned == 1:
            return bool(at_regress.regressed), 1
        last = look(planned, planned, sessions, confidence, rule=hr)
        at_clear = _outcome(base, cur[:k], lk.clear_confidence, k, repeats)
        futile = out_of_reach(_outcome(base, cur[:k], last.clear_confidence, planned, repeats))
        if futile and hr.futility < 1.0:
            keep = set()
            for j, (path, _) in enumerate(GATED):
                m = registry.metric(path)
                sign = -1.0 if m.direction == "higher" else 1.0
                s = float(np.std(base[:, j], ddof=1))
                cp = conditional_power(sign * float(cur[:k, j].mean() - base[:, j].mean()), max(s, m.run_cv), s,
                                       m.run_cv, k, planned, sessions, math.log1p(m.tolerance), last.regress_confidence)
                if cp < hr.futility:
                    keep.add(path)
            futile &= keep
        out, decided = settle(at_regress, at_clear, lk, futile)
        if decided or k >= planned:
            return bool(out.regressed), k
    raise AssertionError("unreachable")


def trial(args: tuple) -> tuple[bool, int]:  # type: ignore[type-arg]
    model, *rest, rule_text = args
    fn = judge_trial if model == "judge" else levels_trial
    return fn(*rest, parse_rule(rule_text))


def _cell(res: list[tuple[bool, int]]) -> str:
    k = sum(f for f, _ in res)
    lo, hi = wilson_interval(k, len(res))
    return f"{k / len(res):.1%} [{lo:.1%}, {hi:.1%}] | {np.mean([n for _, n in res]):.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("levels", "judge"), default="levels")
    ap.add_argument("--trials", type=int, default=400, help="trials of the regression arm per cell")
    ap.add_argument("--aa-trials", type=int, default=2000, help="A/A trials per cell")
    ap.add_argument("--cvs", default="0.05,0.10,0.15", help="launch-to-launch CVs")
    ap.add_argument("--sessions", default="5,15,30", help="baseline launches to compare")
    ap.add_argument("--planned", default="1,4,8", help="PR launch budgets to compare")
    ap.add_argument("--rules", default="obf:pocock@0.1", help="REGRESS:CLEAR@FUTILITY, comma-separated")
    ap.add_argument("--effect", type=float, default=1.2, help="the regression arm's slowdown")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--confidence", type=float, default=0.98,
                    help="the gate's two-sided confidence (0.98: 1 %% one-sided per metric)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    print(f"head launches ({args.model} model): baseline launches x {args.repeats} runs; "
          f"{args.aa_trials} A/A and {args.trials} x{args.effect} trials a cell")
    print(f"| launch CV | baseline launches | planned | rule | A/A fails | A/A launches (mean) | "
          f"x{args.effect:.2f} fails | x{args.effect:.2f} launches (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    t0 = time.monotonic()
    with mp.get_context("spawn").Pool(args.workers) as pool:
        for cv in (float(x) for x in args.cvs.split(",")):
            for sessions in ints(args.sessions):
                for planned in ints(args.planned):
                    for rule_text in (args.rules.split(",") if planned > 1 else ["single"]):
                        r = "pocock:pocock@1" if rule_text == "single" else rule_text
                        cells = [_cell(pool.map(trial, [(args.model, t, cv, effect, planned, sessions, args.repeats,
                                                         args.requests, args.confidence, r) for t in range(n)], chunksize=20))
                                 for effect, n in ((1.0, args.aa_trials), (args.effect, args.trials))]
                        print(f"| {cv:.0%} | {sessions} | {planned} | {rule_text} | {cells[0]} | {cells[1]} |",
                              flush=True)
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
