"""Stored baseline against A/B mode under machine drift (``python bench/gate_quality.py --drift``).

The machine is a :class:`pytest_goodput.sim.drift.SpeedSchedule`: a level per *day*
(lognormal, CV ``--day-cv``) times an AR(1) wander within the day (CV ``--wander-cv``,
correlation time ``--tau``), on each job's own virtual clock; the simulator's every step is
multiplied by it at the virtual time it starts (runs back to back, ``--gap`` seconds apart).

* **stored baseline**: one ``--goodput-update-baseline`` job on day 0 records ``--sessions``
  sessions of ``--repeats`` runs (one job: one day level, the wander between its sessions);
  each arm's check is one session on a later day, judged by the plugin's judge
  (``judge.scalar.verdicts.compare``) as ``bench/gate_quality.py`` does;
* **A/B**: one job per arm on its own day, base and head interleaved on the job's clock, run
  through ``run.ab.run_ab`` (round order, ``round_values``, the sequential judge) with a
  runner that answers from the virtual-time model instead of an HTTP engine.

Arms: A/A, goodput −10 % (the head 10 % slower), P99 TTFT +20 % (12 % slower). Printed per
mode and arm: how often the test fails (a metric *regressed*), how often the arm's metric is
regressed, 95 % Clopper–Pearson intervals, rounds used (A/B), and time per verdict — the
engine time the job spends (virtual seconds of runs and gaps) and the bench's CPU time.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import time
from typing import Any

import numpy as np
from gate_quality import GATED, one_run

from pytest_goodput.judge.scalar.verdicts import MetricDef, compare
from pytest_goodput.run.ab import run_ab
from pytest_goodput.schema.runs.results import ClientHealth, RunResult, Samples, Window
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.sim.drift import SpeedSchedule, day_level

DRIFT_ARMS = ("A/A", "goodput -10%", "P99 TTFT +20%")
DRIFT_METRIC = {"A/A": None, "goodput -10%": "goodput.requests_per_s",
                "P99 TTFT +20%": "metrics.ttft_ms.p99"}
MODES = ("stored baseline", "A/B")
VERDICTS = ("regressed", "inconclusive", "underpowered")


class Job:
    """One CI job on one day: its machine schedule and its clock (virtual seconds)."""

    def __init__(self, args: argparse.Namespace, seed: int, day: int) -> None:
        self.args = args
        self.speed = SpeedSchedule(level=day_level(seed, day, args.day_cv), wander_cv=args.wander_cv,
                                   tau_s=args.tau, seed=seed * 1000 + day)
        self.clock = 0.0

    def run(self, noise_seed: int, slowdown: float) -> Samples:
        """One run starting now on this machine; the clock moves past it and the gap."""
        s = one_run(self.args, noise_seed, slowdown, "A/A", None,  # type: ignore[arg-type]
                    speed=self.speed.shifted(self.clock))
        last = max((e for e in s.e2e_ms if e is not None), default=0.0)
        self.clock += s.window_s + last / 1e3 + self.args.gap
        return s


def _effect(args: argparse.Namespace, arm: str) -> float:
    return {"goodput -10%": args.goodput_slowdown, "P99 TTFT +20%": args.ttft_slowdown}.get(arm, 1.0)


def _arms(args: argparse.Namespace, t: int) -> tuple[str, ...]:
    """Every arm for the first ``--power-trials`` trials, A/A alone after them."""
    return DRIFT_ARMS if t < args.power_trials else DRIFT_ARMS[:1]


def stored_trial(args: argparse.Namespace, t: int) -> dict[str, Any]:
    """Record a baseline on day 0, check each arm on a later day, judge as the plugin does."""
    seeds = iter(range(1_000_000 * (t + 1), 1_000_000 * (t + 2)))
    rec = Job(args, t, 0)
    base = [[rec.run(next(seeds), 1.0) for _ in range(args.repeats)] for _ in range(args.sessions)]
    defs = [MetricDef.of(p) for p in GATED]
    out: dict[str, Any] = {}
    for i, arm in enumerate(_arms(args, t)):
        job = Job(args, t, 1 + i)
        cur = [job.run(next(seeds), _effect(args, arm)) for _ in range(args.repeats)]
        verdicts = {c.metric: c.verdict for c in compare(
            base, cur, defs, seed=t, confidence=args.confidence, paired=True,
            prior_runs=args.prior_runs, power_alpha=args.power_alpha)}
        out[arm] = {"verdicts": verdicts, "fails": "regressed" in verdicts.values(), "rounds": None,
                    "engine_s": job.clock}
    return out


class _Record:
    """One request as the judge reads it (``Samples.from_records``): a RequestRecord without
    pydantic's per-instance cost, which would dominate a bench of tens of thousands of runs."""

    __slots__ = (
        "e2e_ms",
        "good",
        "ok",
        "output_tokens",
        "prompt_tokens",
        "reasoning_tokens",
        "tpot_ms",
        "ttfo_ms",
        "ttft_ms",
        "warmup",
        "turn",
        "reasoning_tpot_ms",
        "answer_tpot_ms",
        "output_print",
    )

    def __init__(self, ok: bool, good: bool | None, ttft: float | None, tpot: float | None,
                 e2e: float | None, out: int, prompt: int | None) -> None:
        self.ok, self.warmup, self.good = ok, False, good
        self.ttft_ms, self.tpot_ms, self.e2e_ms, self.ttfo_ms = ttft, tpot, e2e, None
        self.output_tokens, self.prompt_tokens, self.reasoning_tokens = out, prompt, 0
        self.turn = self.reasoning_tpot_ms = self.answer_tpot_ms = None  # single turns, no reasoning
        self.output_print = None  # no output guard


def _records(s: Samples) -> list[Any]:
    """The run's requests as the client records them (only what the judge reads)."""
    good = s.good or [None] * len(s.ok)
    return [_Record(*row) for row in zip(s.ok, good, s.ttft_ms, s.tpot_ms, s.e2e_ms,
                                         s.output_tokens, s.prompt_tokens)]


def ab_spec(args: argparse.Namespace) -> ScenarioSpec:
    """The bench scenario as an A/B job runs it."""
    return ScenarioSpec(scenario="server", rate=args.rate, requests=args.requests, isl=args.isl,
                        osl=args.osl, ttft_ms=args.ttft_slo, tpot_ms=args.tpot_slo,
                        seed=args.schedule_seed)


def ab_runner(args: argparse.Namespace, t: int, i: int, arm: str) -> tuple[Job, Any]:
    """Trial ``t``'s A/B job for arm ``i`` (its own day and its own noise seeds, so an arm's
    rounds do not depend on how many rounds another arm took) and a model-backed runner."""
    job = Job(args, t, 100 + i)
    effect = {"base": 1.0, "head": _effect(args, arm)}
    seeds = iter(range(1_000_000 * (t + 1) + 500_000 + 100_000 * i, 1_000_000 * (t + 2)))

    def runner(_spec: ScenarioSpec, engine: Any) -> RunResult:
        s = job.run(next(seeds), effect[engine])
        return RunResult.model_construct(
            spec=_spec, requests=_records(s), window=Window(start=0.0, end=s.window_s,
                                                            seconds=s.window_s),
            client=ClientHealth(valid=True, cpu_utilization=0.0))

    return job, runner


def ab_trial(args: argparse.Namespace, t: int) -> dict[str, Any]:
    """Each arm: one A/B job on its own day, through ``run_ab`` with a model-backed runner."""
    spec = ab_spec(args)
    out: dict[str, Any] = {}
    for i, arm in enumerate(_arms(args, t)):
        job, runner = ab_runner(args, t, i, arm)
        res = run_ab(spec, "base", "head", seed=t, min_rounds=args.min_rounds,  # type: ignore[arg-type]
                     max_rounds=args.max_rounds, run=runner)
        verdicts = {c.metric: c.verdict for c in res.comparisons}
        out[arm] = {"verdicts": verdicts, "fails": "regressed" in verdicts.values(),
                    "rounds": res.rounds_used, "decided": res.decided, "engine_s": job.clock}
    return out


def trial(job: tuple[argparse.Namespace, str, int]) -> tuple[str, float, dict[str, Any]]:
    args, mode, t = job
    t0 = time.process_time()
    r = (stored_trial if mode == "stored baseline" else ab_trial)(args, t)
    return mode, time.process_time() - t0, r


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval (scipy's beta quantiles)."""
    from scipy.stats import beta

    a = (1.0 - confidence) / 2.0
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


def _fmt(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{k:>4}/{n:<5}{100 * k / n:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]"


def report(args: argparse.Namespace, results: dict[str, list[tuple[float, dict[str, Any]]]]) -> None:
    print(f"\n== drift: day CV {args.day_cv:.1%}, wander CV {args.wander_cv:.1%} "
          f"(tau {args.tau:g} s), step jitter σ={args.noise_sigma:g} ==")
    print(f"{'mode':<17}{'arm':<15}{'test fails':>30}{'arm metric regressed':>30}"
          f"{'rounds median [p10, p90]':>26}{'engine s/verdict':>18}{'cpu s/verdict':>15}")
    for mode in MODES:
        rows = results.get(mode, [])
        for arm in DRIFT_ARMS:
            rs = [r[arm] for _cpu, r in rows if arm in r]
            n = len(rs)
            if not n:
                continue
            m = DRIFT_METRIC[arm]
            hit = _fmt(sum(r["verdicts"].get(m) == "regressed" for r in rs), n) if m else "-"
            rounds = [r["rounds"] for r in rs if r["rounds"] is not None]
            rtxt = (f"{np.median(rounds):g} [{np.quantile(rounds, 0.1):g}, {np.quantile(rounds, 0.9):g}]"
                    if rounds else "-")
            cpu = math.fsum(c for c, _ in rows) / sum(len(r) for _c, r in rows)
            print(f"{mode:<17}{arm:<15}{_fmt(sum(r['fails'] for r in rs), n):>30}{hit:>30}"
                  f"{rtxt:>26}{np.median([r['engine_s'] for r in rs]):>18.0f}{cpu:>15.2f}")
    print("verdicts per metric (regressed / inconclusive / underpowered, of the arm's trials):")
    for mode in MODES:
        for arm in DRIFT_ARMS:
            rs = [r[arm]["verdicts"] for _cpu, r in results.get(mode, []) if arm in r]
            if rs:
                cells = [f"{m} {'/'.join(str(sum(v.get(m) == x for v in rs)) for x in VERDICTS)}"
                         for m in GATED]
                print(f"  {mode:<17}{arm:<15}" + ";  ".join(cells) + f"  (n={len(rs)})")


def main(args: argparse.Namespace) -> None:
    """``--trials`` trials of each of ``--modes``; the first ``--power-trials`` of them also
    run the effects (A/A false alarms need more trials than power does)."""
    modes = [m for m in MODES if m in args.modes.split(",")]
    jobs = [(args, mode, t) for mode in modes for t in range(args.trials)]
    results: dict[str, list[tuple[float, dict[str, Any]]]] = {m: [] for m in MODES}
    t0 = time.perf_counter()
    step = max(1, len(jobs) // 20)
    with mp.Pool(args.workers) as pool:
        for k, (mode, cpu, r) in enumerate(pool.imap_unordered(trial, jobs, chunksize=2), 1):
            results[mode].append((cpu, r))
            if k % step == 0 or k == len(jobs):
                print(f"  {k}/{len(jobs)} trials, {time.perf_counter() - t0:.0f} s", flush=True)
    report(args, results)
