"""The output guard's verdicts on a non-batch-invariant engine: A/A false alarms and detection.

Each trial draws an engine over ``K`` prompts: a ``fragile`` share of them (batch
non-invariance) generate one of two outputs at random in every run, the rest always the
same one. The baseline is ``B`` runs (sessions and repeats), the current side ``C`` runs; a
``drift`` share of the prompts (any of them) generate other text in every current run
(faster but wrong). The sides' fingerprints go through the gate's rule,
``judge.output_guard.output_comparison`` (the function ``judge()`` calls). A/A cells
(drift 0) count *regressed* verdicts (the two-sided 95 % interval gives a one-sided budget
of 2.5 %), the others count detection; each with a 95 % Wilson interval. Seeded per cell.

    python bench/output_guard.py
    python bench/output_guard.py --trials 200 --prompts 64
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_goodput.judge.output_guard import output_comparison
from pytest_goodput.measure.outputs.agreement import output_print
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.binomial import wilson_interval

SPEC = ScenarioSpec(scenario="concurrency", concurrency=4, requests=64, temperature=0)
#: Every text a prompt can produce, fingerprinted once.
_PRINTS: dict[tuple[int, str], str] = {}


def _print(k: int, variant: str) -> str:
    key = (k, variant)
    if key not in _PRINTS:
        _PRINTS[key] = output_print(f"prompt {k} output {variant}")
    return _PRINTS[key]


def _run(rng: np.random.Generator, fragile: np.ndarray, drifted: np.ndarray) -> Samples:
    k = len(fragile)
    flips = rng.random(k) < 0.5
    prints = {i: _print(i, "drift" if drifted[i] else ("b" if fragile[i] and flips[i] else "a")) for i in range(k)}
    return Samples(window_s=1.0, ok=[True] * k, ttft_ms=[1.0] * k, tpot_ms=[1.0] * k, e2e_ms=[1.0] * k,
                   output_tokens=[1] * k, prompt_tokens=[1] * k, output_prints=prints)


def cell(prompts: int, fragile: float, drift: float, base_runs: int, cur_runs: int, trials: int,
         seed: int) -> tuple[float, tuple[float, float], float]:
    """(share of trials regressed, its 95 % Wilson interval, mean baseline agreement)."""
    rng = np.random.default_rng([seed, prompts, int(fragile * 1000), int(drift * 1000), base_runs, cur_runs])
    regressed, levels = 0, []
    none = np.zeros(prompts, dtype=bool)
    for _ in range(trials):
        frag = rng.random(prompts) < fragile
        moved = rng.random(prompts) < drift
        base = [[_run(rng, frag, none)] for _ in range(base_runs)]
        cur = [_run(rng, frag, moved) for _ in range(cur_runs)]
        c = output_comparison(SPEC, base, cur, tolerance=0.02, confidence=0.95)
        regressed += c is not None and c.verdict == "regressed"
        levels.append(c.baseline if c is not None and c.baseline is not None else float("nan"))
    return regressed / trials, wilson_interval(regressed, trials), float(np.nanmean(levels))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--prompts", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--fragile", type=float, nargs="+", default=[0.0, 0.1, 0.3])
    ap.add_argument("--drift", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2])
    ap.add_argument("--base-runs", type=int, default=4)
    ap.add_argument("--current-runs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=41)
    args = ap.parse_args()
    print(f"{args.trials} trials per cell; baseline {args.base_runs} runs, current {args.current_runs}")
    print(f"{'prompts':>7} {'fragile':>7} {'a_b':>6} " + " ".join(f"{'drift ' + format(d, 'g'):>22}" for d in args.drift))
    for k in args.prompts:
        for f in args.fragile:
            cells = [cell(k, f, d, args.base_runs, args.current_runs, args.trials, args.seed) for d in args.drift]
            row = " ".join(f"{p:>7.1%} [{lo:.1%}, {hi:.1%}]".rjust(22) for p, (lo, hi), _ in cells)
            print(f"{k:>7} {f:>7.0%} {cells[0][2]:>6.1%} {row}")


if __name__ == "__main__":
    main()
