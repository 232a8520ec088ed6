"""``python -m pytest_goodput``: run, simulate, compare and draw frontiers without pytest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

from pytest_goodput.engines.engine import select
from pytest_goodput.report.summary import render_result
from pytest_goodput.run.runner import measure
from pytest_goodput.schema.spec import SpecError, build_spec

#: CLI flag → spec field, for flags whose name is not the field's.
_FLAG_FIELDS = {
    "duration": "duration_s",
    "timeout": "timeout_s",
    "warmup": "warmup_requests",
    "warmup_seconds": "warmup_s",
}
_SPEC_FLAGS = (
    ("--scenario", str, "offline | server | interactive | concurrency | sweep | capacity"),
    ("--rate", float, "arrival rate, requests/s"),
    ("--arrival", str, "poisson | gamma | constant"),
    ("--burstiness", float, "gamma shape (1 = Poisson)"),
    ("--concurrency", int, "closed-loop users, or in-flight ceiling"),
    ("--requests", int, "measured requests"),
    ("--duration", float, "bound on the measured window, seconds"),
    ("--warmup", int, "warm-up requests (not measured)"),
    ("--warmup-seconds", float, "warm-up seconds (not measured)"),
    ("--seed", int, "seed of prompts and schedule"),
    ("--timeout", float, "per-request timeout, seconds"),
    ("--api", str, "completions | chat"),
    ("--workload", str, "synthetic | jsonl | sharegpt"),
    ("--dataset", str, "dataset file (jsonl or sharegpt)"),
    ("--isl", int, "input length, tokens"),
    ("--osl", int, "output length, tokens"),
    ("--isl-dist", str, "fixed | uniform | normal | lognormal"),
    ("--osl-dist", str, "fixed | uniform | normal | lognormal"),
    ("--range-ratio", float, "uniform length spread"),
    ("--sweep", str, "comma-separated concurrencies (or rates with --sweep-over rate)"),
    ("--sweep-over", str, "concurrency | rate"),
    ("--attainment", float, "target fraction of good requests"),
    ("--workers", int, "client processes the load is sharded over"),
    ("--repeats", int, "run the scenario this many times"),
)


class CLIError(Exception):
    pass


def parse_slo(text: str) -> dict[str, Any]:
    """``ttft_ms=450,tpot_ms=40`` or a preset name such as ``mlperf/llama2-70b/interactive``."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            out["slo"] = part
            continue
        key, _, value = part.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise CLIError(f"--slo: {part!r} needs a number after '='") from None
    return out


def spec_args(ns: argparse.Namespace) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for flag, _, _ in _SPEC_FLAGS:
        name = flag[2:].replace("-", "_")
        value = getattr(ns, name, None)
        if value is None:
            continue
        if name == "sweep":
            try:
                value = [float(v) for v in value.split(",") if v.strip()]
            except ValueError:
                raise CLIError(f"--sweep: {value!r} is not a comma-separated list of numbers") from None
        args[_FLAG_FIELDS.get(name, name)] = value
    if ns.no_stream:
        args["stream"] = False
    if ns.slo:
        args.update(parse_slo(ns.slo))
    return args


def _add_engine_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="engine base URL (http://host:port[/v1]); default: start the simulator")
    p.add_argument("--serve", help='command launching an engine, "{port}" = a free port')
    p.add_argument("--model", help="model name (default: the engine's first model)")
    p.add_argument("--api-key-env", help="environment variable holding the API key")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_goodput", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one scenario and print its metrics")
    _add_engine_flags(run)
    for flag, typ, help_ in _SPEC_FLAGS:
        run.add_argument(flag, type=typ, default=None, help=help_)
    run.add_argument("--slo", help="ttft_ms=450,tpot_ms=40,ttft_p99_ms=450 or a preset name")
    run.add_argument("--no-stream", action="store_true", help="non-streamed requests")
    run.add_argument("--json", help="write the full result (with per-request records) here")
    sim = sub.add_parser("sim", help="serve the embedded engine simulator", add_help=False)
    sim.add_argument("sim_args", nargs=argparse.REMAINDER)
    cmp_ = sub.add_parser("compare", help="compare two result or baseline files; exit 1 on regression")
    cmp_.add_argument("base")
    cmp_.add_argument("new")
    cmp_.add_argument("--report", help="write the Markdown report here")
    cmp_.add_argument("--strict", action="store_true")
    cmp_.add_argument("--tolerance", type=float)
    fr = sub.add_parser("frontier", help="frontier of a sweep result; compare and plot")
    fr.add_argument("results")
    fr.add_argument("--baseline")
    fr.add_argument("--plot")
    fr.add_argument("--tolerance", type=float, default=0.05)
    return parser


def cmd_run(ns: argparse.Namespace) -> int:
    spec = build_spec(spec_args(ns), where="command line")
    with select(url=ns.url, serve=ns.serve, model=ns.model, api_key_env=ns.api_key_env) as engine:
        m = measure(spec, engine)
    for r in m.runs:
        print(render_result(r))
    if ns.json:
        from pytest_goodput.store.files import write_atomic

        body = m.result.model_dump_json(indent=1) if len(m.runs) == 1 else (
            "[" + ",".join(r.model_dump_json() for r in m.runs) + "]")
        write_atomic(Path(ns.json), body + "\n")
    bad = [r for r in m.runs if not r.client.valid or (r.goodput and not r.goodput.met)
           or any(not c.ok for c in r.percentile_slos)]
    return 1 if bad else 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from pytest_goodput.sim.server import main as sim_main

        return sim_main(argv[1:])
    parser = build_parser()
    ns = parser.parse_args(argv)

    try:
        if ns.command == "run":
            return cmd_run(ns)
        if ns.command == "compare":
            from pytest_goodput.cli.compare import cmd_compare

            return cmd_compare(ns)
        if ns.command == "frontier":
            from pytest_goodput.cli.frontier import cmd_frontier

            return cmd_frontier(ns)
    except (CLIError, SpecError, ValueError, ConnectionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # an engine that would not start, a crashed client worker
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {ns.command!r}")
    return 2
