"""``python -m pytest_goodput ab``: a scenario against a base and a head engine in one job.

Rounds of one run on each engine, in an order drawn per round from the seed, paired by
round and judged after each one; the command stops when the answer is known (``docs/ab.md``).
Exit status as every command: 0 pass, 1 regression, 2 usage, 3 too few valid rounds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_goodput.cli.cpus import Cpus, add_cpu_flags, cpu_plan, placed_client
from pytest_goodput.cli.run import (
    EXIT_FAIL,
    EXIT_INVALID,
    EXIT_OK,
    CLIError,
    add_ray_flag,
    add_spec_flags,
    ray_backend,
    ready_timeout,
    refuse_capture,
    spec_args,
)
from pytest_goodput.engines.engine import (
    DEFAULT_READY_TIMEOUT_S,
    Engine,
    attach,
    launch,
    simulator,
)
from pytest_goodput.judge.sequential.ab import MAX_ROUNDS, MIN_ROUNDS, check_rounds
from pytest_goodput.report.vocabulary import (
    comparison_label,
    comparison_unit,
    fmt_change,
    fmt_interval,
    fmt_value,
)
from pytest_goodput.engines.launch import EngineStartError
from pytest_goodput.load import ray_runtime
from pytest_goodput.run.ab import ab_metrics, run_ab
from pytest_goodput.run.gating import describe
from pytest_goodput.schema.outcomes.ab import ABResult
from pytest_goodput.sim.profile import SimProfileError, checked_knobs
from pytest_goodput.store.files import write_atomic
from pytest_goodput.load.trace import identified_spec

SIDES = ("base", "head")


def add_ab_parser(sub: Any) -> None:
    ab = sub.add_parser("ab", help="base against head in one job, interleaved; exit 1 on regression")
    for side in SIDES:
        ab.add_argument(f"--{side}-url", help=f"the {side} engine's base URL")
        ab.add_argument(f"--{side}-serve", help=f'command launching the {side} engine, "{{port}}" = a free port')
        ab.add_argument(f"--{side}-sim", metavar="KNOBS",
                        help=f"the simulator as {side} engine with these knobs, e.g. slowdown=1.2 "
                             "(the default when no URL or command is given)")
    ab.add_argument("--model", help="model name (default: each engine's first model)")
    ab.add_argument("--api-key-env", help="environment variable holding the API key")
    ab.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT_S, metavar="S",
                    help="seconds a --*-serve engine may take to answer its health probe")
    add_cpu_flags(ab)
    add_spec_flags(ab)
    ab.add_argument("--gate", metavar="METRICS",
                    help="comma-separated metrics to gate, e.g. metrics.ttft_ms.p50,"
                         "throughput.output_tokens_per_s (default: the scenario's default gate)")
    ab.add_argument("--min-rounds", type=int, default=MIN_ROUNDS,
                    help=f"rounds before the first look (default {MIN_ROUNDS}, at least 2)")
    ab.add_argument("--max-rounds", type=int, default=MAX_ROUNDS,
                    help=f"most rounds (default {MAX_ROUNDS})")
    ab.add_argument("--tolerance", type=float, help="tolerance of every gated metric, as compare's --tolerance "
                         "(default: each metric's own)")
    ab.add_argument("--strict", action="store_true", help="also fail inconclusive and underpowered")
    ab.add_argument("--exclusive", action="store_true",
                    help="one engine at a time, each run on a freshly started one (the default "
                         "when the second engine cannot start beside the first)")
    ab.add_argument("--relaunch", action="store_true",
                    help="relaunch both engines before every round: each round is one launch of "
                         "each, so launch-to-launch spread is in the interval (engines started here)")
    ab.add_argument("--order-seed", type=int, metavar="N",
                    help="replay a job's round orders: the seed its A/B result recorded "
                         "(default: a fresh seed per job)")
    ab.add_argument("--json", help="write the A/B result (rounds, comparisons) here")
    add_ray_flag(ab)


def parse_knobs(side: str, text: str) -> dict[str, str]:
    """``slowdown=1.2,noise_sigma=0.01`` → knobs, checked against the simulator's profile."""
    try:
        return checked_knobs(text, f"--{side}-sim")
    except SimProfileError as exc:
        raise CLIError(str(exc)) from None


def check_side(side: str, ns: argparse.Namespace) -> None:
    """One engine per side: a URL, a command or the simulator; the knobs parse."""
    url, serve, sim = (getattr(ns, f"{side}_{k}") for k in ("url", "serve", "sim"))
    if sum(x is not None for x in (url, serve, sim)) > 1:
        raise CLIError(f"--{side}-url, --{side}-serve and --{side}-sim exclude each other")
    if sim is not None:
        parse_knobs(side, sim)


def _engine(side: str, ns: argparse.Namespace, timeout: float, cpus: Cpus) -> Engine:
    url, serve, sim = (getattr(ns, f"{side}_{k}") for k in ("url", "serve", "sim"))
    if url:
        return attach(url, ns.model, ns.api_key_env)
    if serve:
        return launch(serve, ns.model, ns.api_key_env, ready_timeout_s=timeout, cpus=cpus)
    return simulator(ns.model, cpus=cpus, **parse_knobs(side, sim or ""))


def ab_spec_args(ns: argparse.Namespace) -> dict[str, Any]:
    """The spec's arguments: ``run``'s scenario flags and ``--gate``."""
    args = spec_args(ns)
    if ns.gate is not None:
        gate = [m.strip() for m in ns.gate.split(",") if m.strip()]
        if not gate:
            raise CLIError(f"--gate: {ns.gate!r} names no metric (e.g. metrics.ttft_ms.p50)")
        args["gate"] = gate
    return args


def render_ab(result: ABResult) -> str:
    """The per-metric table and how the run stopped."""
    pct = f"{result.confidence:.0%}"
    rows = [("metric", "base", "head", "change", f"interval ({pct})", "verdict")]
    for c in result.comparisons:
        unit = comparison_unit(c)
        rows.append((comparison_label(c), fmt_value(c.baseline, unit), fmt_value(c.current, unit),
                     fmt_change(c.change, scale=c.scale), fmt_interval(c.interval, scale=c.scale),
                     c.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    orders = " ".join("AB" if r.order == "base-head" else "BA" for r in result.rounds)
    state = "decided" if result.decided else "undecided"
    lines.append("")
    lines.append(f"{state} after {result.rounds_used} rounds (balanced order, order seed {result.seed}): "
                 f"{result.stop_reason}")
    clear = "" if result.clear_alpha_per_look is None else (
        f", cleared at {1 - result.clear_alpha_per_look:.2%} one-sided")
    lines.append(f"orders: {orders}; this look's interval at {1 - result.alpha_per_look:.3%}{clear} "
                 f"(of at most {result.looks} looks)")
    if result.stopping:
        lines.append(f"stopping rule: {result.stopping}")
    if result.rounds_dropped:
        lines.append(f"{result.rounds_dropped} round(s) dropped: the client set the pace twice")
    for c in result.comparisons:
        if c.note:
            lines.append(f"note: {comparison_label(c, with_unit=False)}: {c.note}")
    for n in result.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def ab_exit_code(result: ABResult, strict: bool = False) -> int:
    """1 on a regression (or, strict, an undecided metric); 3 with too few valid rounds."""
    if result.regressed:
        return EXIT_FAIL
    if result.rounds_used < result.min_rounds:
        return EXIT_INVALID
    if strict and result.undecided:
        return EXIT_FAIL
    return EXIT_OK


def cmd_ab(ns: argparse.Namespace) -> int:
    check_rounds(ns.min_rounds, ns.max_rounds)
    if ns.tolerance is not None and not 0 < ns.tolerance < 10:
        raise CLIError(f"--tolerance: {ns.tolerance:g} is not a fraction > 0 (0.05 = 5 %)")
    timeout = ready_timeout(ns.ready_timeout)
    for side in SIDES:  # flags first: no engine is started for a command that cannot run
        check_side(side, ns)
    attached = [f"--{side}-url" for side in SIDES if getattr(ns, f"{side}_url")]
    for flag in ("exclusive", "relaunch"):
        if getattr(ns, flag) and attached:
            raise CLIError(f"--{flag} starts and stops both engines: {' and '.join(attached)} "
                           "attaches to one this command cannot restart")
    args = ab_spec_args(ns)
    on_ray = ray_backend(ns, args)  # both sides' load workers on Ray actors
    spec = identified_spec(args, "command line")  # a trace replay: its file read and its digest, before any engine
    ab_metrics(spec, ns.tolerance)  # a sweep or repeats: refused before any engine starts
    refuse_capture(spec, [getattr(ns, f"{side}_url") for side in SIDES])
    engine_cpus, client_cpus = cpu_plan(ns, attached)
    engines: list[Engine] = []
    code = EXIT_INVALID  # until judged: an interrupted or crashed run keeps the engines' logs
    result: ABResult | None = None
    exclusive = ns.exclusive
    try:
        engines.append(_engine("base", ns, timeout, engine_cpus))
        if exclusive:
            engines[0].close()  # started again for its first run
        try:
            engines.append(_engine("head", ns, timeout, engine_cpus))
        except EngineStartError as exc:
            if exclusive or not engines[0].can_relaunch:
                raise
            engines[0].close()  # both do not fit: the head alone, then one at a time
            engines.append(_engine("head", ns, timeout, engine_cpus))
            exclusive = True
            why = (str(exc).splitlines()[1:2] or ["it failed"])[0]
            print(f"the head engine did not start beside the base ({why}): one engine at a time",
                  file=sys.stderr)
        print(f"A/B {spec.scenario}: base {describe(engines[0])}, head {describe(engines[1])}",
              file=sys.stderr)
        with placed_client(client_cpus):  # after the engines: their threads are not the client's
            result = run_ab(spec, engines[0], engines[1], seed=ns.order_seed, min_rounds=ns.min_rounds,
                            max_rounds=ns.max_rounds, tolerance=ns.tolerance,
                            say=lambda s: print(s, file=sys.stderr), exclusive=exclusive,
                            relaunch=ns.relaunch)
        code = ab_exit_code(result, ns.strict)
    finally:
        if on_ray:
            ray_runtime.shutdown()
        for e in engines:
            e.close(keep_log=code == EXIT_INVALID)
            for log in e.kept_logs:
                print(f"engine log kept: {log}", file=sys.stderr)
    assert result is not None
    print(render_ab(result))
    if ns.json:
        write_atomic(Path(ns.json), result.model_dump_json(indent=1) + "\n")
    return code
