"""A/B mode's stopping rules compared on the same rounds (``python bench/ab_stopping.py``).

An arm's rounds do not depend on when a rule stops: round r of trial t is the same pair of
runs whatever happened before (``bench/gate_drift.py``: one machine schedule and one noise
seed range per arm). So the bench records ``--record-rounds`` rounds per trial and arm once,
under the drift of ``bench/gate_quality.py --drift`` (``--rounds-file`` keeps them), and then
replays each rule through the judge (``judge.sequential.ab.analyse`` on the first 1, 2, … rounds until
it says stop): every rule meets exactly the same jobs, so the differences between rules are
the rules'. Printed per rule and arm: A/A false alarms (a metric *regressed*), undecided jobs
(stopped at the round limit with a metric *inconclusive* or *underpowered*: what ``--strict``
fails), the arm's power (the build fails; the arm's own metric regressed), rounds, with 95 %
Clopper–Pearson intervals.

    python bench/ab_stopping.py --trials 800 --power-trials 250 --rounds-file ab-rounds.json
    python bench/ab_stopping.py --failures --failure-trials 40 --normal-only
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from gate_drift import DRIFT_ARMS, DRIFT_METRIC, _arms, ab_runner, ab_spec, clopper_pearson  # noqa: E402
from gate_quality import GATED  # noqa: E402
from test_ab_properties import samples as _samples  # noqa: E402  (the tests' failing runs)

from pytest_goodput.judge.sequential.ab import DEFAULT_RULE, RULES, StoppingRule, analyse  # noqa: E402
from pytest_goodput.judge.values import metric_value  # noqa: E402
from pytest_goodput.judge.scalar.verdicts import MetricDef  # noqa: E402
from pytest_goodput.run.ab import ab_metrics, run_ab  # noqa: E402
from pytest_goodput.schema.outcomes.ab import ABRound  # noqa: E402

UNDECIDED = ("inconclusive", "underpowered")


def record(job: tuple[argparse.Namespace, int]) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    """Trial ``t``: ``--record-rounds`` rounds of each arm (run_ab with min = max rounds)."""
    args, t = job
    spec = ab_spec(args)
    out: dict[str, list[dict[str, Any]]] = {}
    for i, arm in enumerate(_arms(args, t)):
        _job, runner = ab_runner(args, t, i, arm)
        res = run_ab(spec, "base", "head", seed=t, min_rounds=args.record_rounds,  # type: ignore[arg-type]
                     max_rounds=args.record_rounds, run=runner)
        out[arm] = [r.model_dump(include={"index", "order", "base", "head", "dropped"}) for r in res.rounds]
    return t, out


def recorded(args: argparse.Namespace) -> dict[int, dict[str, list[ABRound]]]:
    """The rounds of every trial: from ``--rounds-file`` when it holds them, else measured."""
    path = Path(args.rounds_file) if args.rounds_file else None
    key = {k: getattr(args, k) for k in ("trials", "power_trials", "record_rounds", "requests", "rate",
                                         "day_cv", "wander_cv", "tau", "gap", "noise_sigma",
                                         "goodput_slowdown", "ttft_slowdown", "schedule_seed")}
    data: dict[str, Any] | None = None
    if path is not None and path.exists():
        data = json.loads(path.read_text())
        if data.get("key") != key:
            print(f"{path} holds other rounds ({data.get('key')}); measuring anew")
            data = None
    if data is None:
        t0 = time.perf_counter()
        trials: dict[str, Any] = {}
        with mp.Pool(args.workers) as pool:
            for k, (t, out) in enumerate(pool.imap_unordered(record, [(args, t) for t in range(args.trials)],
                                                             chunksize=2), 1):
                trials[str(t)] = out
                if k % max(1, args.trials // 10) == 0:
                    print(f"  recorded {k}/{args.trials} trials, {time.perf_counter() - t0:.0f} s", flush=True)
        data = {"key": key, "trials": trials}
        if path is not None:
            path.write_text(json.dumps(data))
    return {int(t): {arm: [ABRound(**r) for r in rs] for arm, rs in arms.items()}
            for t, arms in data["trials"].items()}


def replay(rounds: list[ABRound], defs: list[MetricDef], rule: StoppingRule, min_rounds: int,
           max_rounds: int, seed: int) -> dict[str, Any]:
    """The judge on the first 1, 2, … recorded rounds until it stops, as run_ab calls it."""
    if max_rounds > len(rounds):
        raise SystemExit(f"--max-rounds {max_rounds} needs at least that many recorded rounds "
                         f"(--record-rounds {len(rounds)})")
    for n in range(1, max_rounds + 1):
        res, stop = analyse(rounds[:n], defs, min_rounds=min_rounds, max_rounds=max_rounds,
                            seed=seed, rule=rule)
        if stop:
            break
    verdicts = {c.metric: c.verdict for c in res.comparisons}
    return {"verdicts": verdicts, "fails": "regressed" in verdicts.values(), "rounds": res.rounds_used,
            "undecided": any(v in UNDECIDED for v in verdicts.values())}


def _pct(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{k}/{n} {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def parse_rule(text: str) -> StoppingRule:
    """A name of ``judge.sequential.stopping.RULES`` or ``REGRESS:CLEAR@CLEAR_ALPHA`` (e.g. ``obf:pocock@0.05``;
    without ``@``, the cleared side gets the gate's α)."""
    if text in RULES:
        return RULES[text]
    sides, _, beta = text.partition("@")
    regress, _, clear = sides.partition(":")
    try:
        return StoppingRule(regress, clear or regress, float(beta) if beta else None)  # type: ignore[arg-type]
    except ValueError as e:
        raise SystemExit(f"--rules {text!r}: {e}") from None


def evaluate(args: argparse.Namespace, data: dict[int, dict[str, list[ABRound]]], rule_name: str,
             min_rounds: int, max_rounds: int) -> None:
    rule = parse_rule(rule_name)
    defs = ab_metrics(ab_spec(args))
    print(f"\n-- rule {rule_name} ({rule.describe()}), rounds {min_rounds}-{max_rounds} --")
    for arm in DRIFT_ARMS:
        rs = [replay(data[t][arm], defs, rule, min_rounds, max_rounds, t) for t in sorted(data) if arm in data[t]]
        if not rs:
            continue
        n = len(rs)
        rounds = [r["rounds"] for r in rs]
        m = DRIFT_METRIC[arm]
        own = _pct(sum(r["verdicts"].get(m) == "regressed" for r in rs), n) if m else "-"
        per = "; ".join(f"{p.split('.')[-2] if p.count('.') > 1 else p.split('.')[0]} "
                        + "/".join(str(sum(r["verdicts"].get(p) == v for r in rs)) for v in ("regressed", *UNDECIDED))
                        for p in GATED)
        print(f"  {arm:<15} fails {_pct(sum(r['fails'] for r in rs), n):<28} undecided "
              f"{_pct(sum(r['undecided'] for r in rs), n):<28} own metric {own:<28} rounds median "
              f"{np.median(rounds):g} [p10 {np.quantile(rounds, 0.1):g}, p90 {np.quantile(rounds, 0.9):g}] "
              f"mean {np.mean(rounds):.2f}")
        print(f"  {'':<15} regressed/inconclusive/underpowered: {per}")


def normal_cases(args: argparse.Namespace) -> None:
    """The pure judge on d_r drawn normal (one metric, P50 TPOT, tolerance 5 %): each rule's
    error at a true change of exactly the tolerance, and what it decides elsewhere."""
    defn = MetricDef.of("metrics.tpot_ms.p50")
    lo, hi = (int(x) for x in args.limits.split(",")[0].split("-"))
    rng = np.random.default_rng(2026)
    print(f"\n-- normal rounds (P50 TPOT, tolerance {defn.tolerance:.0%}), {args.normal_trials} trials "
          f"per row, rounds {lo}-{hi} --")
    print(f"  {'rule':<24}{'true change':>12}{'round SD':>9}{'regressed early':>16}{'regressed':>10}"
          f"{'pass':>8}{'undecided':>10}{'mean rounds':>12}")
    for case in args.normal.split(","):
        change, sd = (float(x) for x in case.split(":"))
        ds = rng.normal(math.log1p(change), sd, size=(args.normal_trials, hi))
        for name in args.rules.split(","):
            rule = parse_rule(name)
            counts = {"early": 0, "regressed": 0, "pass": 0, "undecided": 0}
            used = 0
            for row in ds:
                rounds = [ABRound(index=i + 1, order="base-head", base={defn.path: 10.0},
                                  head={defn.path: 10.0 * math.exp(d)}) for i, d in enumerate(row)]
                r = replay(rounds, [defn], rule, lo, hi, 0)
                v = r["verdicts"][defn.path]
                counts["early"] += v == "regressed" and r["rounds"] < hi
                counts["regressed"] += v == "regressed"
                counts["pass"] += v in ("pass", "improved")
                counts["undecided"] += v in UNDECIDED
                used += r["rounds"]
            n = args.normal_trials
            print(f"  {name:<24}{change:>+12.1%}{sd:>9.1%}" + "".join(
                f"{100 * counts[k] / n:>{w}.2f}%" for k, w in (("early", 15), ("regressed", 9),
                                                              ("pass", 7), ("undecided", 9)))
                  + f"{used / n:>12.2f}")


def failure_cases(args: argparse.Namespace) -> None:
    """Issue 31's A/B failure cases (P99s reached by timeouts), from per-request samples, and
    A/A with each side's P99 +inf in a fraction q of its runs; 4 to 12 rounds."""
    defs = [MetricDef.of("metrics.ttft_ms.p99"), MetricDef.of("metrics.tpot_ms.p99")]
    paths = [d.path for d in defs]
    print(f"\n-- failures at P99, {args.failure_trials} jobs per row, rounds 4-12 --")
    for name, head_failed, base_failed, slow in (
            ("30% slower, 3/200 vs 2/200 timeouts", [3] * 12, 2, 1.3),
            ("+inf in half the head's rounds", [3, 0] * 6, 0, 1.0)):
        out = []
        for t in range(args.failure_trials):
            rng = random.Random(t)
            rounds = [ABRound(index=r + 1, order="base-head",
                              base={p: metric_value(_samples(rng, 200, base_failed, 1.0), p) for p in paths},
                              head={p: metric_value(_samples(rng, 200, head_failed[r], slow), p) for p in paths})
                      for r in range(12)]
            out.append(replay(rounds, defs, DEFAULT_RULE, 4, 12, t))
        print(f"  {name:<38} jobs passing {sum(not r['fails'] for r in out)}/{len(out)}, strict "
              f"{sum(not r['fails'] and not r['undecided'] for r in out)}/{len(out)}; "
              + "; ".join(f"{p.split('.')[1]} " + ", ".join(f"{v} {c}" for v, c in sorted(
                  Counter(r["verdicts"][p] for r in out).items())) for p in paths)
              + f"; rounds mean {np.mean([r['rounds'] for r in out]):.1f}")
    d = defs[0]
    for q in (0.05, 0.2, 0.5):
        rng = random.Random(1)
        vs: Counter[str] = Counter()
        for t in range(args.failure_trials):
            rounds = []
            for r in range(12):
                b = 50 * math.exp(rng.gauss(0, 0.05))
                h = b * math.exp(rng.gauss(0, 0.05))
                rounds.append(ABRound(index=r + 1, order="base-head",
                                      base={d.path: math.inf if rng.random() < q else b},
                                      head={d.path: math.inf if rng.random() < q else h}))
            vs[replay(rounds, [d], DEFAULT_RULE, 4, 12, t)["verdicts"][d.path]] += 1
        print(f"  A/A, P99 +inf in {q:.0%} of each side's runs: " + ", ".join(f"{v} {c}" for v, c in sorted(vs.items())))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=800)
    p.add_argument("--power-trials", type=int, default=250, help="trials that also run the effect arms")
    p.add_argument("--record-rounds", type=int, default=16, help="rounds recorded per trial and arm")
    p.add_argument("--rounds-file", default="", help="JSON cache of the recorded rounds")
    p.add_argument("--rules", default=",".join(RULES),
                   help=f"comma-separated: {', '.join(RULES)}, or REGRESS:CLEAR@CLEAR_ALPHA (obf, pocock, "
                        "bonferroni), e.g. obf:pocock@0.05")
    p.add_argument("--limits", default="3-10", help="comma-separated min-max rounds, e.g. 3-10,4-12")
    p.add_argument("--normal", default="", help="also judge normal rounds: comma-separated "
                   "TRUE_CHANGE:ROUND_SD, e.g. 0.05:0.03,0:0.08")
    p.add_argument("--normal-trials", type=int, default=2000)
    p.add_argument("--normal-only", action="store_true", help="only the normal rounds (and --failures)")
    p.add_argument("--failures", action="store_true", help="also judge rounds whose P99s failures reach")
    p.add_argument("--failure-trials", type=int, default=40)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--rate", type=float, default=8.0)
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--ttft-slo", type=float, default=20.0)
    p.add_argument("--tpot-slo", type=float, default=9.5)
    p.add_argument("--goodput-slowdown", type=float, default=1.10)
    p.add_argument("--ttft-slowdown", type=float, default=1.12)
    p.add_argument("--day-cv", type=float, default=0.05)
    p.add_argument("--wander-cv", type=float, default=0.03)
    p.add_argument("--tau", type=float, default=30.0)
    p.add_argument("--gap", type=float, default=2.0)
    p.add_argument("--drift-sigma", type=float, default=0.01, dest="noise_sigma")
    p.add_argument("--schedule-seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = p.parse_args()
    t0 = time.perf_counter()
    if args.normal:
        normal_cases(args)
    if args.failures:
        failure_cases(args)
    if args.normal_only:
        return
    data = recorded(args)
    print(f"A/B stopping rules on {args.trials} recorded trials ({args.power_trials} with the effect "
          f"arms), {args.requests} requests at {args.rate:g} req/s, day CV {args.day_cv:g}, "
          f"wander CV {args.wander_cv:g} (tau {args.tau:g} s)")
    for limits in args.limits.split(","):
        lo, hi = (int(x) for x in limits.split("-"))
        for name in args.rules.split(","):
            evaluate(args, data, name, lo, hi)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
