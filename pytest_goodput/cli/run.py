"""``python -m pytest_goodput run``: one scenario against an engine, its metrics printed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_goodput.engines.engine import select
from pytest_goodput.report.summary import render_result
from pytest_goodput.run.runner import measure
from pytest_goodput.schema.spec import build_spec
from pytest_goodput.store.files import write_atomic

#: CLI flag → spec field, for flags whose name is not the field's.
FLAG_FIELDS = {
    "duration": "duration_s",
    "timeout": "timeout_s",
    "warmup": "warmup_requests",
    "warmup_seconds": "warmup_s",
}
SPEC_FLAGS = (
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
    for flag, _, _ in SPEC_FLAGS:
        name = flag[2:].replace("-", "_")
        value = getattr(ns, name, None)
        if value is None:
            continue
        if name == "sweep":
            try:
                value = [float(v) for v in value.split(",") if v.strip()]
            except ValueError:
                raise CLIError(f"--sweep: {value!r} is not a comma-separated list of numbers") from None
        args[FLAG_FIELDS.get(name, name)] = value
    if ns.no_stream:
        args["stream"] = False
    if ns.slo:
        args.update(parse_slo(ns.slo))
    return args


def add_engine_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="engine base URL (http://host:port[/v1]); default: start the simulator")
    p.add_argument("--serve", help='command launching an engine, "{port}" = a free port')
    p.add_argument("--model", help="model name (default: the engine's first model)")
    p.add_argument("--api-key-env", help="environment variable holding the API key")


def add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="run one scenario and print its metrics")
    add_engine_flags(run)
    for flag, typ, help_ in SPEC_FLAGS:
        run.add_argument(flag, type=typ, default=None, help=help_)
    run.add_argument("--slo", help="ttft_ms=450,tpot_ms=40,ttft_p99_ms=450 or a preset name")
    run.add_argument("--no-stream", action="store_true", help="non-streamed requests")
    run.add_argument("--json", help="write the full result (with per-request records) here")


def cmd_run(ns: argparse.Namespace) -> int:
    spec = build_spec(spec_args(ns), where="command line")
    with select(url=ns.url, serve=ns.serve, model=ns.model, api_key_env=ns.api_key_env) as engine:
        m = measure(spec, engine)
    for r in m.runs:
        print(render_result(r))
    if ns.json:
        body = m.result.model_dump_json(indent=1) if len(m.runs) == 1 else (
            "[" + ",".join(r.model_dump_json() for r in m.runs) + "]")
        write_atomic(Path(ns.json), body + "\n")
    bad = [r for r in m.runs if not r.client.valid or (r.goodput and not r.goodput.met)
           or any(not c.ok for c in r.percentile_slos)]
    return 1 if bad else 0
